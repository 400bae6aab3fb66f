//! Session-memory and activity use cases: each command's work across the
//! memory files, the index and the heartbeat, so the CLI only prints.
//!
//! A note is acknowledged once it is durably in its file; refreshing the
//! index and pinging the heartbeat afterwards can only add warnings, never
//! undo or fail the store.

use serde::Serialize;

use super::App;
use crate::activity::{self, MemoryCounts, SecurityFlags, Snapshot, Tracker};
use crate::memory::context::{self, ContextBlock};
use crate::memory::files::{FileKind, count_daily_files};
use crate::memory::index::{Hit, Index, SyncMode, SyncReport};

use crate::memory::write::{self, AppendOutcome, AppendRequest, ClearOutcome, ClearScope};
use crate::memory::{Memory, MemoryStats};

impl App {
    /// The session memory of this app: `SESSION_MEMORY_DIR` (config
    /// `memory.session.dir`) or the workspace.
    pub(crate) fn memory(&self) -> Memory {
        let settings = self.config.config.memory.session.clone();
        let root = match settings.dir.as_deref().filter(|d| !d.trim().is_empty()) {
            Some(dir) => self.host.resolve_path(dir.trim()),
            None => self.paths.workspace.clone(),
        };
        let key = self.paths.index_key(&root);
        Memory {
            index_path: self.paths.index_dir().join(format!("{key}.sqlite")),
            lock_path: self
                .paths
                .state_dir
                .join("locks")
                .join(format!("memory-{key}.lock")),
            trash_root: self.paths.state_dir.join("trash"),
            gate: self.config.config.security.memory_gate(),
            tz: self.user_time_zone(),
            extra_paths: self
                .config
                .config
                .agents
                .defaults
                .memory_search
                .extra_paths
                .iter()
                .map(|p| {
                    let p = p.trim();
                    let expanded = self.host.resolve_path(p);
                    // Relative paths are relative to the workspace.
                    if std::path::Path::new(p).is_relative() && !p.starts_with('~') {
                        self.paths.workspace.join(p)
                    } else {
                        expanded
                    }
                })
                .collect(),
            allow_symlink_targets: self
                .real_targets(&self.config.config.memory.allow_symlink_targets),
            root,
            settings,
        }
    }

    /// `agents.defaults.userTimezone`, else the host's zone.
    pub(crate) fn user_time_zone(&self) -> jiff::tz::TimeZone {
        self.config
            .config
            .agents
            .defaults
            .user_timezone
            .as_deref()
            .and_then(|name| jiff::tz::TimeZone::get(name).ok())
            .unwrap_or_else(|| self.host.time_zone().clone())
    }

    pub(crate) fn tracker(&self) -> Tracker {
        Tracker::new(&self.paths.state_dir)
    }

    /// The values every heartbeat ping records, read now.
    pub(crate) fn activity_snapshot(&self, memory: &MemoryStats) -> Snapshot {
        let sec = &self.config.config.security;
        Snapshot {
            agent: self.config.config.activity.agent_name.clone(),
            security: SecurityFlags {
                enabled: sec.enabled,
                llm: sec.llm,
                actions: sec.actions,
            },
            routines_enabled: activity::count_routines(&self.paths.state_dir.join("routines.json")),
            memory: MemoryCounts {
                json_entries: activity::count_json_memory(
                    &self.paths.state_dir.join("memory.json"),
                ),
                session_daily: memory.daily_files as u64,
                longterm_lines: memory.long_term_lines as u64,
            },
        }
    }

    /// Records an activity event (`heartbeat ping`, and memory commands):
    /// the activity and source are one line each, of at most
    /// [`activity::MAX_NAME_CHARS`] characters.
    pub(crate) fn ping(
        &self,
        activity: &str,
        source: &str,
    ) -> anyhow::Result<activity::PingOutcome> {
        activity::check_name("activity", activity)?;
        activity::check_name("source", source)?;
        self.ping_with_stats(activity, source, &self.memory().stats())
    }

    fn ping_with_stats(
        &self,
        activity: &str,
        source: &str,
        stats: &MemoryStats,
    ) -> anyhow::Result<activity::PingOutcome> {
        self.ensure_state_dir()?;
        let snapshot = self.activity_snapshot(stats);
        let size = self.config.config.activity.history_size as usize;
        // The heartbeat's wall-clock times are in the notes' zone.
        let now = self.host.now().with_time_zone(self.user_time_zone());
        Ok(self
            .tracker()
            .ping(activity, source, &snapshot, size, &now)?)
    }
}

/// An append and what followed it.
#[derive(Debug, Serialize)]
pub(crate) struct Appended {
    #[serde(flatten)]
    pub outcome: AppendOutcome,
    pub warnings: Vec<String>,
}

pub(crate) fn append(app: &App, req: &AppendRequest<'_>) -> anyhow::Result<Appended> {
    let started = std::time::Instant::now();
    let memory = app.memory();
    app.ensure_state_dir()?;
    let mut outcome = write::append(&memory, req, &app.host.now())?;
    let stored = started.elapsed();
    let mut warnings = std::mem::take(&mut outcome.warnings);
    let mut touched: Vec<String> = outcome.written.iter().map(|w| w.path.clone()).collect();
    if let Some(pruned) = &outcome.pruned {
        touched.extend(pruned.moves.iter().map(|m| m.to.clone()));
        warnings.extend(pruned.over_limit_warning());
    }
    // The index knows the daily files, which spares listing a large
    // memory directory just for the heartbeat's counter.
    let daily_from_index = match refresh_index(&memory, &touched) {
        Ok(index) => index.count_files(FileKind::Daily).ok(),
        Err(err) => {
            warnings.push(format!(
                "the note is stored, but the search index was not updated: {err:#}"
            ));
            None
        }
    };
    let indexed = started.elapsed();
    let retention = memory.settings.daily_retention_days;
    if retention > 0 {
        match apply_retention(app, &memory, retention) {
            Ok(Some(moved)) => warnings.push(format!(
                "moved {} daily file(s) older than {retention} days to {} (memory.session.dailyRetentionDays)",
                moved.moved.len(),
                moved.trash.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
            )),
            Ok(None) => {}
            Err(err) => warnings.push(format!("the retention policy could not run: {err:#}")),
        }
    }
    let mut stats = memory.stats_without_daily();
    stats.daily_files = daily_from_index.unwrap_or_else(|| count_daily_files(&memory.root));
    if let Err(err) = app.ping_with_stats("memory.append", "session_memory", &stats) {
        warnings.push(format!(
            "the note is stored, but the heartbeat was not updated: {err:#}"
        ));
    }
    tracing::debug!(?stored, ?indexed, total = ?started.elapsed(), "append");
    Ok(Appended { outcome, warnings })
}

/// `YYYY-MM-DD` of `days` days before today in the user's zone; a count
/// reaching past the calendar's first day gives that day (no daily file is
/// older).
fn cutoff_date(app: &App, days: u32) -> String {
    let today = app.host.now().with_time_zone(app.user_time_zone()).date();
    jiff::Span::new()
        .try_days(i64::from(days))
        .ok()
        .and_then(|span| today.checked_sub(span).ok())
        .unwrap_or(jiff::civil::Date::MIN)
        .to_string()
}

/// Moves daily files older than `days` to the trash when there are any.
/// The index answers when it has listed the daily folders as they are now
/// (nothing is listed then); otherwise, as on a fresh state, the two
/// folders are listed.
fn apply_retention(app: &App, memory: &Memory, days: u32) -> anyhow::Result<Option<ClearOutcome>> {
    let before = cutoff_date(app, days);
    let (index, _) = memory.open_index()?;
    let due = match index.has_daily_before(&before)? {
        Some(due) => due,
        None => !write::daily_files(memory, Some(&before)).is_empty(),
    };
    drop(index);
    if !due {
        return Ok(None);
    }
    let outcome = write::clear(memory, ClearScope::Daily, Some(&before), &app.host.now())?;
    if outcome.moved.is_empty() {
        return Ok(None);
    }
    refresh_index(memory, &outcome.moved)?;
    Ok(Some(outcome))
}

fn refresh_index(memory: &Memory, rels: &[String]) -> anyhow::Result<Index> {
    use anyhow::Context;
    let mut index = memory
        .open_index()
        .map(|(index, _)| index)
        .context("cannot open the index")?;
    index.refresh(rels).context("cannot refresh the index")?;
    Ok(index)
}

#[derive(Debug, Serialize)]
pub(crate) struct SearchOutcome {
    pub query: String,
    pub hits: Vec<Hit>,
    pub sync: SyncReport,
}

/// Ranked search over the whole memory (an empty query lists the newest
/// notes).
pub(crate) fn search(app: &App, query: &str, limit: usize) -> anyhow::Result<SearchOutcome> {
    let memory = app.memory();
    app.ensure_state_dir()?;
    let started = std::time::Instant::now();
    let (index, sync) = app.current_index(&memory)?;
    let synced = started.elapsed();
    let mut hits = if query.trim().is_empty() {
        index.recent(limit, None)?
    } else {
        index.search(query, limit, None)?
    };
    hits.iter_mut().for_each(Hit::guard);
    tracing::debug!(?synced, total = ?started.elapsed(), mode = sync.mode, "search");
    Ok(SearchOutcome {
        query: query.to_string(),
        hits,
        sync,
    })
}

pub(crate) fn context(
    app: &App,
    goal: &str,
    budget: Option<usize>,
) -> anyhow::Result<ContextBlock> {
    Ok(context_with(app, goal, budget, SyncMode::Quick)?.0)
}

/// The recall block of an agent turn: a full scan of the memory index
/// that falls due is not run here but reported (`true`), for the turn to
/// run while the model answers.
pub(crate) fn context_for_turn(app: &App, goal: &str) -> anyhow::Result<(ContextBlock, bool)> {
    context_with(app, goal, None, SyncMode::QuickOnly)
}

/// The recall block of a turn for `agent prompt`, creating nothing: from
/// the index when it exists (brought up to date like a search does), else
/// from an index built in memory for this command only.
pub(crate) fn context_creating_nothing(app: &App, goal: &str) -> anyhow::Result<ContextBlock> {
    let memory = app.memory();
    let budget = (memory.settings.context_budget_tokens as usize).max(1);
    if !memory.settings.enabled {
        return Ok(ContextBlock::empty(goal, budget));
    }
    let index = if memory.index_path.exists() {
        memory
            .synced_index_with(app.sync_mode(&memory, SyncMode::QuickOnly), app.wall_ns())?
            .0
    } else {
        let (layout, _) = memory.layout();
        let mut index = Index::open_in_memory(layout, memory.tz.clone())?;
        index.sync(SyncMode::Full, app.wall_ns())?;
        index
    };
    Ok(context::build(&memory, &index, goal, budget)?)
}

fn context_with(
    app: &App,
    goal: &str,
    budget: Option<usize>,
    mode: SyncMode,
) -> anyhow::Result<(ContextBlock, bool)> {
    let memory = app.memory();
    let budget = budget
        .unwrap_or(memory.settings.context_budget_tokens as usize)
        .max(1);
    if !memory.settings.enabled {
        return Ok((ContextBlock::empty(goal, budget), false));
    }
    app.ensure_state_dir()?;
    let started = std::time::Instant::now();
    let (index, sync) = memory.synced_index_with(app.sync_mode(&memory, mode), app.wall_ns())?;
    let synced = started.elapsed();
    let block = context::build(&memory, &index, goal, budget)?;
    tracing::debug!(?synced, total = ?started.elapsed(), mode = sync.mode, "context");
    Ok((block, sync.full_scan_due))
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryStatus {
    pub enabled: bool,
    pub root: std::path::PathBuf,
    #[serde(flatten)]
    pub stats: MemoryStats,
    pub index_path: std::path::PathBuf,
    pub index_files: Option<usize>,
}

/// Live counts; writes nothing and sends no heartbeat.
pub(crate) fn status(app: &App) -> MemoryStatus {
    let memory = app.memory();
    let index_files = crate::store::Store::open_existing_read_only(&memory.index_path)
        .ok()
        .flatten()
        .and_then(|conn| {
            conn.query_row("SELECT count(*) FROM files", [], |r| r.get::<_, i64>(0))
                .ok()
        })
        .map(|n| n as usize);
    MemoryStatus {
        enabled: memory.settings.enabled,
        stats: memory.stats(),
        index_path: memory.index_path.clone(),
        root: memory.root,
        index_files,
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Cleared {
    #[serde(flatten)]
    pub outcome: ClearOutcome,
    pub warnings: Vec<String>,
}

/// Clears `scope`; with `older_than_days`, only daily files older than
/// that many days (in the user's zone).
pub(crate) fn clear(
    app: &App,
    scope: ClearScope,
    older_than_days: Option<u32>,
) -> anyhow::Result<Cleared> {
    let memory = app.memory();
    app.ensure_state_dir()?;
    let before = older_than_days.map(|days| cutoff_date(app, days));
    let outcome = write::clear(&memory, scope, before.as_deref(), &app.host.now())?;
    let mut warnings = Vec::new();
    let mut touched = outcome.moved.clone();
    touched.push("MEMORY.md".to_string());
    if let Err(err) = refresh_index(&memory, &touched) {
        warnings.push(format!(
            "cleared, but the search index was not updated: {err:#}"
        ));
    }
    let activity = format!("memory.clear.{}", scope.as_str());
    if let Err(err) = app.ping(&activity, "session_memory") {
        warnings.push(format!(
            "cleared, but the heartbeat was not updated: {err:#}"
        ));
    }
    Ok(Cleared { outcome, warnings })
}

/// The heartbeat state for `heartbeat status`: the recorded state with the
/// live security flags, routine count and memory stats over it. Computed
/// without writing anything: where Arka pings `status.check` into a
/// missing file, almanac shows the live values and no last activity.
pub(crate) fn heartbeat_status(
    app: &App,
) -> anyhow::Result<(serde_json::Map<String, serde_json::Value>, Vec<String>)> {
    let loaded = app.tracker().peek()?;
    let warnings: Vec<String> = loaded.warning.into_iter().collect();
    let mut state = loaded.state;
    let snapshot = app.activity_snapshot(&app.memory().stats());
    state.insert("agent".into(), serde_json::json!(snapshot.agent));
    state.insert("security".into(), serde_json::json!(snapshot.security));
    state.insert(
        "routines_enabled".into(),
        serde_json::json!(snapshot.routines_enabled),
    );
    state.insert("memory".into(), serde_json::json!(snapshot.memory));
    let channels = state
        .get("channels")
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(activity::no_channels);
    state.entry("channels").or_insert_with(|| channels.clone());
    state.entry("hermes").or_insert(channels);
    state
        .entry("history")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    Ok((state, warnings))
}

/// The newest `limit` history rows, oldest first (nothing is written).
pub(crate) fn heartbeat_history(
    app: &App,
    limit: usize,
) -> anyhow::Result<(Vec<activity::HistoryRow>, Vec<String>)> {
    let loaded = app.tracker().peek()?;
    let rows = activity::history_rows(&loaded.state);
    let skip = rows.len().saturating_sub(limit);
    Ok((
        rows.into_iter().skip(skip).collect(),
        loaded.warning.into_iter().collect(),
    ))
}
