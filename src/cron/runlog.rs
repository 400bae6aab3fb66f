//! Run logs: `<dirname(store)>/runs/<jobId>.jsonl`, one line per finished
//! run in OpenClaw's shape. Appends hold `runs/.lock` (so a rewrite never
//! drops a line another writer is adding) and are synced; past
//! `cron.runLog.maxBytes` the file is rewritten atomically with its newest
//! `cron.runLog.keepLines` lines. Readers take no lock and skip torn or
//! foreign lines, counting them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::CronError;
use super::job::RunStatus;
use crate::durable;

/// The default page of `cron runs`.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// The largest page of `cron runs`.
pub(crate) const MAX_LIMIT: usize = 5_000;

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunRecord {
    /// When the line was written (epoch ms).
    pub ts: i64,
    pub job_id: String,
    /// Always `finished` in the file.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// When the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunRecord {
    /// A finished run of `job_id`, logged at `ts`.
    pub(crate) fn finished(job_id: &str, ts: i64) -> RunRecord {
        RunRecord {
            ts,
            job_id: job_id.to_string(),
            action: "finished".to_string(),
            status: None,
            error: None,
            summary: None,
            delivered: None,
            delivery_status: None,
            delivery_error: None,
            session_id: None,
            session_key: None,
            run_at_ms: None,
            duration_ms: None,
            next_run_at_ms: None,
            model: None,
            provider: None,
            usage: None,
            extra: Map::new(),
        }
    }
}

/// Token counts of a run, in the providers' own (snake_case) names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// How much of a log is kept (`cron.runLog.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub max_bytes: u64,
    pub keep_lines: usize,
}

impl From<&crate::config::CronRunLogConfig> for Limits {
    fn from(config: &crate::config::CronRunLogConfig) -> Self {
        Limits {
            max_bytes: config.max_bytes.0,
            keep_lines: config.keep_lines as usize,
        }
    }
}

/// A job id that can name a file: non-empty, without `/`, `\` or NUL.
pub(crate) fn check_job_id(id: &str) -> Result<(), CronError> {
    if id.is_empty() || id.contains(['/', '\\', '\0']) || id == "." || id == ".." {
        return Err(CronError::BadJobId(id.escape_debug().to_string()));
    }
    Ok(())
}

/// The log of `job_id` in `runs_dir`.
pub(crate) fn log_path(runs_dir: &Path, job_id: &str) -> Result<PathBuf, CronError> {
    check_job_id(job_id)?;
    Ok(runs_dir.join(format!("{job_id}.jsonl")))
}

/// The job ids whose run log is in `runs_dir` and starts with `prefix`
/// (the logs of removed jobs stay).
pub(crate) fn ids_with_prefix(runs_dir: &Path, prefix: &str) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(runs_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl"))
            && id.starts_with(prefix)
            && !prefix.is_empty()
        {
            ids.push(id.to_string());
        }
    }
    ids.sort();
    Ok(ids)
}

/// Appends `record` to its job's log, then cuts the log back to its newest
/// `keep_lines` lines when it grew past `max_bytes`. Returns whether it
/// was cut.
pub(crate) fn append(
    runs_dir: &Path,
    record: &RunRecord,
    limits: Limits,
) -> Result<bool, CronError> {
    append_all(runs_dir, std::slice::from_ref(record), limits, true)?
        .pop()
        .expect("one result per record")
}

/// Appends each of `records` to its job's log under one lock, cutting
/// logs back as [`append`] does; returns, per record, whether its log was
/// cut (or why it was not written: a job id that cannot name a file is
/// refused before anything is created). With `sync` each line is synced
/// before the next; a batch of runs whose record of truth is the slot
/// ledger passes `false` (a line still reaches the OS before this
/// returns, so a killed process loses none). The outer error: nothing
/// could be written (the folder or its lock).
pub(crate) fn append_all(
    runs_dir: &Path,
    records: &[RunRecord],
    limits: Limits,
    sync: bool,
) -> Result<Vec<Result<bool, CronError>>, CronError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CronError::Io { path, source }
    };
    let paths: Vec<Result<PathBuf, CronError>> = records
        .iter()
        .map(|r| log_path(runs_dir, &r.job_id))
        .collect();
    if paths.iter().all(Result::is_err) {
        return Ok(paths.into_iter().map(|p| p.map(|_| false)).collect());
    }
    durable::create_private_dir_all(runs_dir).map_err(io(runs_dir))?;
    let one = |path: &Path, record: &RunRecord| -> Result<bool, CronError> {
        let mut line = serde_json::to_vec(record).expect("a run record serialises");
        line.push(b'\n');
        durable::locked_append(path, &line, durable::PRIVATE_FILE_MODE, sync).map_err(io(path))?;
        let size = std::fs::metadata(path).map_err(io(path))?.len();
        if size <= limits.max_bytes {
            return Ok(false);
        }
        let bytes = std::fs::read(path).map_err(io(path))?;
        let kept = newest_lines(&bytes, limits.keep_lines.max(1));
        durable::atomic_replace(path, &kept, durable::PRIVATE_FILE_MODE).map_err(io(path))?;
        Ok(true)
    };
    let lock = runs_dir.join(".lock");
    durable::with_file_lock(&lock, || {
        paths
            .into_iter()
            .zip(records)
            .map(|(path, record)| path.and_then(|path| one(&path, record)))
            .collect()
    })
    .map_err(io(&lock))
}

/// The last `keep` non-empty lines of `bytes`, each ending in a newline.
fn newest_lines(bytes: &[u8], keep: usize) -> Vec<u8> {
    let lines: Vec<&[u8]> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let start = lines.len().saturating_sub(keep);
    let mut out = Vec::with_capacity(bytes.len());
    for line in &lines[start..] {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// Which runs [`read`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunQuery {
    /// 1 to [`MAX_LIMIT`].
    pub limit: usize,
    pub offset: usize,
    /// Only runs that ended so (`ok`, `error`, `skipped`, …).
    pub status: Option<String>,
}

impl Default for RunQuery {
    fn default() -> Self {
        RunQuery {
            limit: DEFAULT_LIMIT,
            offset: 0,
            status: None,
        }
    }
}

/// A page of a job's runs, newest first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunPage {
    pub job_id: String,
    pub entries: Vec<RunRecord>,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub has_more: bool,
    pub next_offset: Option<usize>,
    /// Lines that could not be read (skipped).
    #[serde(skip)]
    pub unreadable: usize,
}

/// The runs of `job_id`, newest first; no log is no runs.
pub(crate) fn read(runs_dir: &Path, job_id: &str, query: &RunQuery) -> Result<RunPage, CronError> {
    let path = log_path(runs_dir, job_id)?;
    let bytes = durable::read_if_exists(&path)
        .map_err(|source| CronError::Io {
            path: path.clone(),
            source,
        })?
        .unwrap_or_default();
    let mut unreadable = 0;
    let mut runs: Vec<RunRecord> = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<RunRecord>(line) {
            Ok(record) if record.job_id == job_id => runs.push(record),
            _ => unreadable += 1,
        }
    }
    runs.reverse();
    if let Some(status) = query.status.as_deref() {
        runs.retain(|r| r.status.as_ref().is_some_and(|s| s.as_str() == status));
    }
    let total = runs.len();
    let entries: Vec<RunRecord> = runs
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .collect();
    let end = query.offset + entries.len();
    let has_more = end < total;
    Ok(RunPage {
        job_id: job_id.to_string(),
        entries,
        total,
        offset: query.offset,
        limit: query.limit,
        has_more,
        next_offset: has_more.then_some(end),
        unreadable,
    })
}

#[cfg(test)]
#[path = "runlog_tests.rs"]
mod tests;
