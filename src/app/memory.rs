//! Memory search and recall use cases (`almanac memory …`): the shapes of
//! OpenClaw's `memory_search` / `memory_get` tools, entity summaries and
//! fact packs, all over the index session memory keeps.
//!
//! Searches bring the index up to date first (a quick sync); `index`
//! forces a full one. `memory search` is answered by the gateway when one
//! watches this memory root (its model warm, its vectors in memory) and
//! here otherwise: the command resolves everything that shapes the
//! results (limits, floors, days, "today", the model) before it asks, so
//! both answers are the same (the answer's shape: `memory_answer.rs`).
//! Nothing here writes to the memory files. Every text returned has
//! passed the read-time rule (`sanitize`): search hits, `get`, entity
//! lines and facts, recall packs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::App;
pub(crate) use super::memory_answer::SearchAnswer;
use crate::memory::Memory;
use crate::memory::embed::Embedder;
use crate::memory::index::recall::{EntitySummary, RecallPack};
use crate::memory::index::search::{Query, QueryVector, SearchOutcome, VectorSource};
use crate::memory::index::vectors::VectorSet;
use crate::memory::index::{Hit, IndexStats, SyncMode, SyncReport};
use crate::memory::sanitize;
use crate::memory::when::{self, DayRange};

impl App {
    /// Today in the user's zone (from `--now` when given).
    pub(crate) fn today(&self) -> jiff::civil::Date {
        self.host.now().with_time_zone(self.user_time_zone()).date()
    }

    /// A `--since` / `--until` pair as a day range.
    pub(crate) fn day_range(
        &self,
        since: Option<&str>,
        until: Option<&str>,
    ) -> Result<DayRange, BadRange> {
        let today = self.today();
        let range = DayRange {
            since: since
                .map(|s| when::parse_bound(s, today, false))
                .transpose()
                .map_err(BadRange)?,
            until: until
                .map(|u| when::parse_bound(u, today, true))
                .transpose()
                .map_err(BadRange)?,
        };
        if let (Some(s), Some(u)) = (range.since, range.until)
            && s > u
        {
            return Err(BadRange(format!("--since {s} is after --until {u}")));
        }
        Ok(range)
    }
}

/// A `--since` / `--until` value that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadRange(pub String);

/// What `memory index` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Indexed {
    pub sync: SyncReport,
    pub elapsed_ms: f64,
    pub stats: IndexStats,
    pub vectors: VectorReport,
}

/// What `memory index` did about vectors.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VectorReport {
    pub provider: &'static str,
    pub model: Option<String>,
    /// Items embedded by this run.
    pub embedded: usize,
    pub elapsed_ms: f64,
    /// Items with a vector of the model now.
    pub with_vector: usize,
    /// Why there are no vectors (no provider, or it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_because: Option<String>,
}

/// `memory index`: a full sync, then a vector for every item without one
/// (`progress` hears `(done, to do)` after each batch). An interrupted run
/// keeps every finished batch; the next one goes on from there.
pub(crate) fn index(
    app: &App,
    force: bool,
    progress: impl FnMut(usize, usize),
) -> anyhow::Result<Indexed> {
    let mut indexed = sync_for_index(app, force)?;
    indexed.vectors = embed_all(app, progress)?;
    Ok(indexed)
}

fn embed_all(app: &App, mut progress: impl FnMut(usize, usize)) -> anyhow::Result<VectorReport> {
    let choice = app.embedding_choice();
    let embedder = match crate::memory::embed::start(&choice) {
        Ok(embedder) => embedder,
        Err(reason) => {
            return Ok(VectorReport {
                provider: "none",
                lexical_because: Some(reason),
                ..VectorReport::default()
            });
        }
    };
    let memory = app.memory();
    let (mut index, _) = memory.open_index()?;
    let key = embedder.key();
    let todo = index.vector_counts(&key)?.without_vector;
    let started = std::time::Instant::now();
    let embedded = index.fill_vectors(embedder.as_ref(), usize::MAX, |done| progress(done, todo));
    let embedded = match embedded {
        Ok(n) => n,
        Err(err) => {
            return Ok(VectorReport {
                provider: embedder.provider(),
                model: Some(embedder.model().to_string()),
                with_vector: index.vector_counts(&key)?.with_vector,
                lexical_because: Some(err.to_string()),
                ..VectorReport::default()
            });
        }
    };
    Ok(VectorReport {
        provider: embedder.provider(),
        model: Some(embedder.model().to_string()),
        embedded,
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        with_vector: index.vector_counts(&key)?.with_vector,
        lexical_because: None,
    })
}

/// `memory model install --from`.
pub(crate) fn install_model(
    app: &App,
    from: &Path,
) -> Result<crate::memory::embed::install::Installed, crate::memory::embed::install::InstallError> {
    crate::memory::embed::install::install(from, &app.paths.models_dir())
}

fn sync_for_index(app: &App, force: bool) -> anyhow::Result<Indexed> {
    let memory = app.memory();
    app.ensure_state_dir()?;
    let started = std::time::Instant::now();
    let (mut index, warnings) = memory.open_index()?;
    let mode = if force {
        SyncMode::Rebuild
    } else {
        SyncMode::Full
    };
    let mut sync = index.sync(mode, app.wall_ns())?;
    sync.warnings.splice(0..0, warnings);
    Ok(Indexed {
        sync,
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        stats: index.stats()?,
        vectors: VectorReport::default(),
    })
}

/// `memory status`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Status {
    pub enabled: bool,
    pub root: PathBuf,
    pub index_path: PathBuf,
    pub index_bytes: u64,
    pub files: usize,
    /// Searchable units (lines and list items).
    pub chunks: usize,
    pub entities: usize,
    pub facts: usize,
    /// The last full sync (RFC 3339), if any.
    pub last_sync: Option<String>,
    /// Files changed, added or removed since they were indexed.
    pub dirty: Vec<String>,
    pub extra_paths: Vec<PathBuf>,
    pub warnings: Vec<String>,
    /// The embedding provider (`none` when search is lexical).
    pub provider: &'static str,
    pub model: Option<String>,
    /// Items with a vector of the model, and without.
    pub vectors: crate::memory::index::vectors::VectorCounts,
    /// Why search is lexical, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_because: Option<String>,
    /// For a local model: whether searches load its compact weights
    /// (`ready`), it has none (`absent`), or why they cannot be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_weights: Option<String>,
}

pub(crate) fn status(app: &App) -> anyhow::Result<Status> {
    let memory = app.memory();
    let enabled = app.config.config.agents.defaults.memory_search.enabled;
    let index_bytes = ["", "-wal"]
        .iter()
        .filter_map(|suffix| {
            let mut p = memory.index_path.clone().into_os_string();
            p.push(suffix);
            std::fs::metadata(p).ok().map(|m| m.len())
        })
        .sum();
    let mut status = Status {
        enabled,
        root: memory.root.clone(),
        index_path: memory.index_path.clone(),
        index_bytes,
        files: 0,
        chunks: 0,
        entities: 0,
        facts: 0,
        last_sync: None,
        dirty: Vec::new(),
        extra_paths: memory.extra_paths.clone(),
        warnings: memory.layout().1,
        provider: "none",
        model: None,
        vectors: Default::default(),
        lexical_because: None,
        compact_weights: None,
    };
    // What the provider would be, without loading a model.
    let key = match app.embedding_choice() {
        crate::memory::embed::Choice::Lexical { reason } => {
            status.lexical_because = Some(reason);
            None
        }
        crate::memory::embed::Choice::Local { model, dir } => {
            status.provider = "local";
            status.model = Some(model.clone());
            status.compact_weights = Some(crate::memory::embed::compact_weights(&dir));
            Some(crate::memory::embed::vector_key("local", &model))
        }
        crate::memory::embed::Choice::Remote(remote) => {
            status.provider = "openai";
            status.model = Some(remote.model.clone());
            Some(crate::memory::embed::vector_key("openai", &remote.model))
        }
    };
    if !memory.index_path.exists() {
        // Nothing indexed yet: every memory file is pending.
        status.dirty = memory
            .layout()
            .0
            .walk()
            .files
            .into_iter()
            .map(|f| f.rel)
            .collect();
        return Ok(status);
    }
    let (index, _) = memory.open_index()?;
    let stats = index.stats()?;
    let (entities, facts) = index.recall_counts()?;
    status.files = stats.files;
    status.chunks = stats.items;
    status.entities = entities;
    status.facts = facts;
    status.last_sync = stats
        .last_full_scan_ns
        .and_then(|ns| jiff::Timestamp::from_nanosecond(i128::from(ns)).ok())
        .map(|ts| {
            ts.to_zoned_datetime(app.user_time_zone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        });
    status.dirty = index.dirty_files()?;
    if let Some(key) = key {
        status.vectors = index.vector_counts(&key)?;
    }
    Ok(status)
}

/// A `memory search` request.
#[derive(Debug, Clone, Default)]
pub(crate) struct SearchRequest {
    pub query: String,
    pub max_results: Option<usize>,
    pub min_score: Option<f64>,
    pub since: Option<String>,
    pub until: Option<String>,
    /// Neighbouring items shown with each hit, either side.
    pub context: usize,
}

/// The outcome of `memory search`.
#[derive(Debug, Serialize)]
pub(crate) struct Searched {
    #[serde(flatten)]
    pub outcome: SearchOutcome,
    #[serde(skip)]
    pub sync: SyncReport,
    #[serde(skip)]
    pub disabled: bool,
    #[serde(skip)]
    pub semantic: Semantic,
}

/// How a search used vectors.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Semantic {
    /// `local`, `openai` or `none`.
    pub provider: &'static str,
    pub model: Option<String>,
    /// `hybrid` or `fts-only`.
    pub mode: &'static str,
    /// Why the search was lexical when vectors were asked for (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Searched {
    pub(super) fn disabled() -> Searched {
        Searched {
            outcome: SearchOutcome::default(),
            sync: SyncReport::default(),
            disabled: true,
            semantic: Semantic::lexical(None),
        }
    }
}

impl Semantic {
    pub(crate) fn lexical(notice: Option<String>) -> Semantic {
        Semantic {
            provider: "none",
            model: None,
            mode: "fts-only",
            notice,
        }
    }
}

/// Items a search without a gateway embeds before it ranks (the rest are
/// ranked lexically until `memory index` or the gateway embeds them).
pub(crate) const SEARCH_EMBED_LIMIT: usize = 32;

impl App {
    /// What `agents.defaults.memorySearch` asks for as a provider.
    pub(crate) fn embedding_choice(&self) -> crate::memory::embed::Choice {
        let settings = &self.config.config.agents.defaults.memory_search;
        crate::memory::embed::choose(
            settings,
            &self.paths.models_dir(),
            &|p| self.host.resolve_path(p),
            self.host.var("OPENAI_API_KEY").map(str::to_string),
        )
    }

    /// Whether the provider was named in the configuration (its absence
    /// is then worth a notice).
    pub(crate) fn provider_named(&self) -> bool {
        let settings = &self.config.config.agents.defaults.memory_search;
        settings
            .provider
            .as_deref()
            .is_some_and(|p| !matches!(p.trim(), "" | "auto" | "none"))
    }
}

impl App {
    /// How a command brings the memory index up to date: not at all while
    /// the gateway's watcher keeps it in step ([`SyncMode::Watched`]),
    /// else `mode`.
    pub(crate) fn sync_mode(&self, memory: &crate::memory::Memory, mode: SyncMode) -> SyncMode {
        match crate::gateway_client::discovery::running(&self.paths) {
            Some(info) if info.watching.contains(&memory.root) => SyncMode::Watched,
            _ => mode,
        }
    }

    /// The memory index, brought up to date as [`App::sync_mode`] says.
    pub(crate) fn current_index(
        &self,
        memory: &crate::memory::Memory,
    ) -> Result<(crate::memory::index::Index, SyncReport), crate::store::StoreError> {
        memory.synced_index_with(self.sync_mode(memory, SyncMode::Quick), self.wall_ns())
    }
}

pub(crate) fn search(app: &App, req: &SearchRequest) -> anyhow::Result<Searched> {
    let Some(resolved) = app.resolve_search(req)? else {
        return Ok(Searched::disabled());
    };
    search_here(app, &resolved)
}

/// `memory search` as the command runs it: answered by the gateway when
/// one runs for this state directory and watches this memory root (its
/// model is loaded and its vectors are in memory), else here. A gateway
/// that cannot answer is passed over, never a failure.
pub(crate) fn search_command(app: &App, req: &SearchRequest) -> anyhow::Result<Searched> {
    search_command_with(app, req, false, |resolved| {
        match search_through_gateway(app, resolved) {
            Some(searched) => Ok(searched),
            None => search_here(app, resolved),
        }
    })
}

/// `req` resolved as [`search_command`] resolves it and ranked by
/// `search`: a gateway's warm search, for a command line sent to it
/// whole. `json` is whether the command prints JSON.
pub(crate) fn search_command_with(
    app: &App,
    req: &SearchRequest,
    json: bool,
    search: impl FnOnce(&ResolvedSearch) -> anyhow::Result<Searched>,
) -> anyhow::Result<Searched> {
    let Some(resolved) = app.resolve_search(req)? else {
        return Ok(Searched::disabled());
    };
    search(&ResolvedSearch { json, ..resolved })
}

/// How long a command waits for the gateway's answer before it searches
/// on its own (the gateway may be loading its model).
pub(crate) const GATEWAY_SEARCH_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

fn search_through_gateway(app: &App, req: &ResolvedSearch) -> Option<Searched> {
    match gateway_answer::<SearchAnswer>(app, req)?.into_searched() {
        Ok(searched) => {
            answered_by_gateway(searched.sync.mode, searched.semantic.mode);
            Some(searched)
        }
        Err(err) => {
            tracing::debug!(
                "the gateway did not answer the memory search; searching here: {err:#}"
            );
            None
        }
    }
}

/// Logs who answered (the tests look for it).
pub(super) fn answered_by_gateway(sync: &str, mode: &str) {
    tracing::debug!(%sync, mode, "memory search answered by the gateway");
}

/// The gateway's answer to `req` as a `T`, when one runs for this state
/// directory and watches this memory root (its model is loaded and its
/// vectors are in memory); `None` when none can answer.
pub(super) fn gateway_answer<T: serde::de::DeserializeOwned>(
    app: &App,
    req: &ResolvedSearch,
) -> Option<T> {
    let client = match app.gateway_client() {
        Ok(Some(client)) => client,
        Ok(None) => return None,
        Err(err) => {
            tracing::debug!("memory search not sent to the gateway: {err:#}");
            return None;
        }
    };
    if !client.info.watching.contains(&app.memory().root) {
        tracing::debug!("the gateway does not watch this memory root; searching here");
        return None;
    }
    match client.post_for::<T, _>("/v1/memory/search", req, GATEWAY_SEARCH_WAIT) {
        Ok(answer) => Some(answer),
        Err(err) => {
            tracing::debug!(
                "the gateway did not answer the memory search; searching here: {err:#}"
            );
            None
        }
    }
}

/// A search in this process: the index brought up to date (unless the
/// gateway keeps it so), the provider started and the newest items
/// without a vector embedded (a bounded number), then ranked.
pub(super) fn search_here(app: &App, req: &ResolvedSearch) -> anyhow::Result<Searched> {
    app.ensure_state_dir()?;
    let memory = app.memory();
    let (mut index, sync) = app.current_index(&memory)?;
    tracing::debug!(sync = %sync.mode, files = sync.files_indexed, "memory index");
    let choice = app.embedding_choice();
    let embedder = crate::memory::embed::start_for_search(&choice);
    if let Ok(embedder) = &embedder
        && let Err(err) = index.fill_vectors(embedder.as_ref(), SEARCH_EMBED_LIMIT, |_| {})
    {
        tracing::warn!("cannot embed new notes: {err}");
    }
    let (semantic, vector) = query_vector(app, embedder.as_deref(), &req.query);
    let outcome = ranked(
        &index,
        req,
        vector.as_ref().map(|v| v as &dyn VectorSource),
        None,
    )?;
    Ok(Searched {
        outcome,
        sync,
        disabled: false,
        semantic,
    })
}

/// A search with everything that shapes its results worked out by the
/// caller (its settings, its "today"): what a command sends the gateway
/// (`POST /v1/memory/search`), and what either side ranks with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResolvedSearch {
    pub query: String,
    pub max_results: usize,
    /// Hits scoring below this are dropped.
    pub min_score: f64,
    /// Hits found only through their neighbours scoring below this are
    /// dropped.
    pub min_context_score: f64,
    pub context: usize,
    /// `--since` / `--until` as days (`YYYY-MM-DD`).
    pub since: Option<String>,
    pub until: Option<String>,
    /// "Today" in the caller's zone (`--now` when given), `YYYY-MM-DD`.
    pub today: String,
    /// The key of the vectors the caller's settings choose (`None`:
    /// lexical); a gateway whose settings choose otherwise does not answer.
    pub vector_key: Option<String>,
    /// The caller prints `memory search --json`'s document: a gateway
    /// answers with it written ([`super::memory_json::Printed`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
}

/// A gateway that cannot answer a search as the command would have.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SearchMismatch(pub String);

impl App {
    /// `req` with this app's settings and "today" applied; `None` when
    /// memory search is off.
    pub(crate) fn resolve_search(
        &self,
        req: &SearchRequest,
    ) -> anyhow::Result<Option<ResolvedSearch>> {
        let settings = &self.config.config.agents.defaults.memory_search;
        if !settings.enabled {
            return Ok(None);
        }
        let range = self.day_range(req.since.as_deref(), req.until.as_deref())?;
        Ok(Some(ResolvedSearch {
            query: req.query.clone(),
            max_results: req
                .max_results
                .unwrap_or(settings.query.max_results as usize)
                .clamp(1, 1000),
            // Without a vector score, the configured floor would drop plain
            // keyword matches in a small memory (BM25 scores are low there):
            // it applies to hits found only through their neighbours. A floor
            // given for this search applies to every hit.
            min_score: req.min_score.unwrap_or(0.0).clamp(0.0, 1.0),
            min_context_score: req
                .min_score
                .unwrap_or(settings.query.min_score)
                .clamp(0.0, 1.0),
            context: req.context,
            since: range.since.map(|d| d.to_string()),
            until: range.until.map(|d| d.to_string()),
            today: self.today().to_string(),
            vector_key: self.embedding_choice().vector_key(),
            json: false,
        }))
    }
}

impl ResolvedSearch {
    fn day(text: &Option<String>) -> anyhow::Result<Option<jiff::civil::Date>> {
        Ok(text.as_deref().map(str::parse).transpose()?)
    }
}

/// Ranks `req` over `index`: hybrid with `vector` (the items' vectors
/// from `vectors` when given, else from the index). Hits leave guarded.
pub(crate) fn ranked(
    index: &crate::memory::index::Index,
    req: &ResolvedSearch,
    vector: Option<&dyn VectorSource>,
    vectors: Option<&VectorSet>,
) -> anyhow::Result<SearchOutcome> {
    let q = Query {
        text: &req.query,
        limit: req.max_results,
        kinds: None,
        range: DayRange {
            since: ResolvedSearch::day(&req.since)?,
            until: ResolvedSearch::day(&req.until)?,
        },
        today: Some(req.today.parse()?),
        min_score: req.min_score,
        min_context_score: req.min_context_score,
        context: req.context,
        context_hits: true,
        lend: true,
        exhaustive: false,
        vector,
        vectors,
    };
    let mut outcome = index.search_with(&q)?;
    outcome.hits.iter_mut().for_each(Hit::guard);
    Ok(outcome)
}

/// The query's vector from `embedder` (or why there is none). Anything
/// that goes wrong leaves the search lexical, with a notice.
pub(crate) fn query_vector(
    app: &App,
    embedder: Result<&dyn Embedder, &String>,
    query: &str,
) -> (Semantic, Option<QueryVector>) {
    let embedder = match embedder {
        Ok(embedder) => embedder,
        Err(reason) => {
            let notice = app
                .provider_named()
                .then(|| format!("memory search is lexical: {reason}"));
            return (Semantic::lexical(notice), None);
        }
    };
    query_semantic(embedder, embedder.embed_query(query))
}

/// What a search says of its query's vector `made` by `embedder`, and
/// the vector.
pub(crate) fn query_semantic(
    embedder: &dyn Embedder,
    made: Result<Vec<f32>, crate::memory::embed::EmbedError>,
) -> (Semantic, Option<QueryVector>) {
    match made {
        Ok(vector) => (
            Semantic {
                provider: embedder.provider(),
                model: Some(embedder.model().to_string()),
                mode: "hybrid",
                notice: None,
            },
            Some(QueryVector {
                model: embedder.key(),
                vector,
            }),
        ),
        Err(err) => (
            Semantic::lexical(Some(format!("memory search is lexical: {err}"))),
            None,
        ),
    }
}

/// Why `memory get` refused a path.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GetError {
    #[error(
        "not a memory file: {0} (memory get reads MEMORY.md, memory/**/*.md, daily/*.md and the configured extra paths)"
    )]
    NotMemory(String),
    /// A memory file reached through a symlink that leaves the memory
    /// root, not allowed by `memory.allowSymlinkTargets`.
    #[error("{0}")]
    Outside(crate::memory::files::Escape),
    #[error("cannot read {0}")]
    Read(String, #[source] std::io::Error),
}

/// `memory get`: `{path, text}`, and the lines withheld from `text`.
#[derive(Debug, Serialize)]
pub(crate) struct Got {
    pub path: String,
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
}

/// Reads lines of a memory file. `path` is absolute or relative to the
/// memory root; `from` is 1-based; without `from` and `lines`, the whole
/// file. A memory file that does not exist reads as empty. The text
/// passes the read-time rule ([`sanitize::guard_text`]).
pub(crate) fn get(
    app: &App,
    path: &str,
    from: Option<usize>,
    lines: Option<usize>,
) -> Result<Got, GetError> {
    let memory = app.memory();
    let (name, full) = memory_file(&memory, path)?;
    let text = match std::fs::read(&full) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(GetError::Read(name, e)),
    };
    let first_line = from.unwrap_or(1).max(1);
    let text = if from.is_none() && lines.is_none() {
        text
    } else {
        let start = first_line - 1;
        let count = lines.map_or(usize::MAX, |n| n.max(1));
        text.lines()
            .skip(start)
            .take(count)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let guarded = sanitize::guard_text(&text, &name, first_line);
    Ok(Got {
        path: name,
        text: guarded.text,
        withheld: guarded.withheld,
    })
}

/// The index name and location of `path` when it is a memory file: inside
/// the root (or an extra path), a `.md` file, and not reached through a
/// symlink that leaves its folder (unless `memory.allowSymlinkTargets`
/// allows where it leads).
fn memory_file(memory: &Memory, path: &str) -> Result<(String, PathBuf), GetError> {
    let refuse = || GetError::NotMemory(path.to_string());
    let requested = Path::new(path.trim());
    if path.trim().is_empty() {
        return Err(refuse());
    }
    let joined = if requested.is_absolute() {
        requested.to_path_buf()
    } else {
        memory.root.join(requested)
    };
    let full = crate::paths::normalize(&joined).ok_or_else(refuse)?;
    let (layout, _) = memory.layout();
    let name = layout.name_of(&full);
    if name.is_empty() || !name.ends_with(".md") || layout.classify(&name).is_none() {
        return Err(refuse());
    }
    layout.check(&name).map_err(GetError::Outside)?;
    match std::fs::metadata(&full) {
        Ok(meta) if !meta.is_file() => Err(refuse()),
        _ => Ok((name, full)),
    }
}

pub(crate) fn entity(
    app: &App,
    name: &str,
    max_lines: usize,
) -> anyhow::Result<Option<EntitySummary>> {
    let memory = app.memory();
    app.ensure_state_dir()?;
    let (index, _) = app.current_index(&memory)?;
    Ok(index.entity(name, max_lines)?)
}

/// A `memory recall` request.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecallRequest {
    pub query: String,
    pub budget: usize,
    pub since: Option<String>,
    pub until: Option<String>,
}

pub(crate) fn recall(app: &App, req: &RecallRequest) -> anyhow::Result<RecallPack> {
    let range = app.day_range(req.since.as_deref(), req.until.as_deref())?;
    let memory = app.memory();
    app.ensure_state_dir()?;
    let (index, _) = app.current_index(&memory)?;
    let q = Query {
        text: &req.query,
        range,
        today: Some(app.today()),
        ..Query::default()
    };
    Ok(index.recall(&q, req.budget)?)
}
