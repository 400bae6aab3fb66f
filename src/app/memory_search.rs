//! `memory search`: the request resolved into everything that shapes its
//! results, answered by the gateway when one watches this memory root and
//! here otherwise (the index synced, the newest items embedded, then
//! ranked), and the answer as the gateway sends it.

use serde::{Deserialize, Serialize};

use super::{App, SEARCH_EMBED_LIMIT};
use crate::memory::embed::Embedder;
use crate::memory::index::search::{Outcome, Query, QueryVector};
use crate::memory::index::vectors::VectorSet;
use crate::memory::index::{Hit, Neighbor, SyncReport};
use crate::memory::when::DayRange;

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
    pub outcome: Outcome,
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
    fn disabled() -> Searched {
        Searched {
            outcome: Outcome::default(),
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
    let Some(resolved) = app.resolve_search(req)? else {
        return Ok(Searched::disabled());
    };
    if let Some(searched) = search_through_gateway(app, &resolved) {
        return Ok(searched);
    }
    search_here(app, &resolved)
}

/// How long a command waits for the gateway's answer before it searches
/// on its own (the gateway may be loading its model).
const GATEWAY_SEARCH_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

fn search_through_gateway(app: &App, req: &ResolvedSearch) -> Option<Searched> {
    let client = match crate::gateway::client::Client::find(app) {
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
    let body = match serde_json::to_value(req) {
        Ok(body) => body,
        Err(err) => {
            tracing::debug!("memory search not sent to the gateway: {err}");
            return None;
        }
    };
    let answer = client
        .post("/v1/memory/search", &body, GATEWAY_SEARCH_WAIT)
        .and_then(|v| Ok(serde_json::from_value::<SearchAnswer>(v)?));
    match answer.and_then(SearchAnswer::into_searched) {
        Ok(searched) => {
            tracing::debug!(
                sync = %searched.sync.mode,
                mode = searched.semantic.mode,
                "memory search answered by the gateway"
            );
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

/// A search in this process: the index brought up to date (unless the
/// gateway keeps it so), the provider started and the newest items
/// without a vector embedded (a bounded number), then ranked.
fn search_here(app: &App, req: &ResolvedSearch) -> anyhow::Result<Searched> {
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
    let outcome = ranked(&index, req, vector.as_ref(), None)?;
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
    vector: Option<&QueryVector>,
    vectors: Option<&VectorSet>,
) -> anyhow::Result<Outcome> {
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
    match embedder.embed_query(query) {
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

/// A search's answer as the gateway sends it: everything `memory search`
/// prints, text and `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchAnswer {
    pub hits: Vec<AnswerHit>,
    pub time_range: Option<AnswerRange>,
    pub time_phrase: Option<String>,
    pub unmatched_time_phrase: Option<String>,
    pub entities: Vec<String>,
    pub warnings: Vec<String>,
    /// How the gateway brought its index up to date (`watched`: its
    /// watcher keeps it so).
    pub sync: String,
    pub provider: String,
    pub model: Option<String>,
    pub mode: String,
    pub notice: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AnswerRange {
    pub since: Option<String>,
    pub until: Option<String>,
}

/// A hit with every field a command shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnswerHit {
    pub path: String,
    pub kind: String,
    pub start_line: usize,
    pub end_line: usize,
    pub stamp: Option<String>,
    pub date: Option<String>,
    pub heading: String,
    pub body: String,
    pub score: f64,
    pub text_score: Option<f64>,
    pub vector_score: Option<f64>,
    pub before: Vec<Neighbor>,
    pub after: Vec<Neighbor>,
    pub withheld: Vec<usize>,
}

impl SearchAnswer {
    pub(crate) fn of(searched: Searched) -> SearchAnswer {
        let Searched {
            outcome,
            sync,
            semantic,
            ..
        } = searched;
        SearchAnswer {
            hits: outcome
                .hits
                .into_iter()
                .map(|h| AnswerHit {
                    path: h.path,
                    kind: h.kind.as_str().to_string(),
                    start_line: h.start_line,
                    end_line: h.end_line,
                    stamp: h.stamp,
                    date: h.day,
                    heading: h.heading,
                    body: h.body,
                    score: h.score,
                    text_score: h.text_score,
                    vector_score: h.vector_score,
                    before: h.before,
                    after: h.after,
                    withheld: h.withheld,
                })
                .collect(),
            time_range: outcome.time_range.map(|r| AnswerRange {
                since: r.since.map(|d| d.to_string()),
                until: r.until.map(|d| d.to_string()),
            }),
            time_phrase: outcome.time_phrase,
            unmatched_time_phrase: outcome.unmatched_time_phrase,
            entities: outcome.entities,
            warnings: sync.warnings,
            sync: sync.mode.to_string(),
            provider: semantic.provider.to_string(),
            model: semantic.model,
            mode: semantic.mode.to_string(),
            notice: semantic.notice,
        }
    }

    fn into_searched(self) -> anyhow::Result<Searched> {
        let day = |d: Option<String>| -> Result<Option<jiff::civil::Date>, jiff::Error> {
            d.as_deref().map(str::parse).transpose()
        };
        let time_range = match self.time_range {
            Some(r) => Some(DayRange {
                since: day(r.since)?,
                until: day(r.until)?,
            }),
            None => None,
        };
        let hits = self
            .hits
            .into_iter()
            .map(|h| Hit {
                id: 0,
                path: h.path,
                kind: crate::memory::files::FileKind::parse(&h.kind),
                start_line: h.start_line,
                end_line: h.end_line,
                stamp: h.stamp,
                day: h.date,
                ts: None,
                heading: h.heading,
                body: h.body,
                norm_hash: 0,
                file_id: 0,
                score: h.score,
                text_score: h.text_score,
                vector_score: h.vector_score,
                before: h.before,
                after: h.after,
                withheld: h.withheld,
            })
            .collect();
        let known = |s: &str, labels: &[&'static str], other: &'static str| {
            labels.iter().copied().find(|l| *l == s).unwrap_or(other)
        };
        Ok(Searched {
            outcome: Outcome {
                hits,
                time_range,
                time_phrase: self.time_phrase,
                unmatched_time_phrase: self.unmatched_time_phrase,
                entities: self.entities,
            },
            sync: SyncReport {
                mode: known(
                    &self.sync,
                    &["watched", "quick", "full", "rebuild", "refresh"],
                    "gateway",
                ),
                warnings: self.warnings,
                ..SyncReport::default()
            },
            disabled: false,
            semantic: Semantic {
                provider: known(&self.provider, &["local", "openai"], "none"),
                model: self.model,
                mode: known(&self.mode, &["hybrid"], "fts-only"),
                notice: self.notice,
            },
        })
    }
}
