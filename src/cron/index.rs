//! The derived index of `jobs.json` in the state store (`cron_index`,
//! `cron_jobs`): one row per readable job with what listing sorts and
//! filters on, and the job's JSON, recorded with the fingerprint of the
//! file it was read from. A command compares the file's `stat` with that
//! fingerprint: equal, it answers from the index; different, the index is
//! rebuilt from the file once. Writers bring it along in the transaction
//! after their write. Deleting the rows loses nothing.

use std::path::Path;

use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::CronError;
use super::job::{Job, ScheduleSpec};
use super::schedule;
use super::store::{Fingerprint, JobFile, zone_name};
use crate::store::{Store, StoreKind};

/// The most jobs one page holds.
pub(crate) const MAX_PAGE: usize = 200;

/// Which jobs a listing shows, in what order, which page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListQuery {
    pub enabled: EnabledFilter,
    /// Only jobs whose id, name, description or schedule contain this
    /// (any case).
    pub query: Option<String>,
    pub sort_by: SortBy,
    pub sort_dir: SortDir,
    /// 1 to [`MAX_PAGE`].
    pub limit: usize,
    pub offset: usize,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            enabled: EnabledFilter::Enabled,
            query: None,
            sort_by: SortBy::NextRunAtMs,
            sort_dir: SortDir::Asc,
            limit: MAX_PAGE,
            offset: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnabledFilter {
    All,
    Enabled,
    Disabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortBy {
    /// Soonest first; jobs without a next run last.
    NextRunAtMs,
    UpdatedAtMs,
    Name,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortDir {
    Asc,
    Desc,
}

/// One page of jobs: `{jobs, total, offset, limit, hasMore, nextOffset}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Listing {
    pub jobs: Vec<Value>,
    /// Jobs matching the filters, on every page.
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub has_more: bool,
    pub next_offset: Option<usize>,
    /// What reading the store reported.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Listing {
    pub(crate) fn empty(query: &ListQuery) -> Listing {
        Listing::new(Vec::new(), 0, query)
    }

    fn new(jobs: Vec<Value>, total: usize, query: &ListQuery) -> Listing {
        let end = query.offset + jobs.len();
        let has_more = end < total;
        Listing {
            jobs,
            total,
            offset: query.offset,
            limit: query.limit,
            has_more,
            next_offset: has_more.then_some(end),
            warnings: Vec::new(),
        }
    }
}

/// The number of jobs and when the next one is due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overview {
    pub jobs: usize,
    pub enabled: usize,
    /// The earliest next run of an enabled job.
    pub next_wake_at_ms: Option<i64>,
    pub warnings: Vec<String>,
}

/// What the index is built from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub store_path: &'a Path,
    /// The file the rows describe.
    pub fingerprint: Fingerprint,
    pub host_zone: &'a TimeZone,
    /// For jobs whose state has no next run: computed from now.
    pub now_ms: i64,
}

/// One job's row.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    position: i64,
    job_id: String,
    name: String,
    name_key: String,
    enabled: bool,
    schedule: String,
    next_run_at_ms: Option<i64>,
    updated_at_ms: i64,
    search: String,
    job: Value,
}

impl Row {
    fn of(position: usize, job: &Job, zone: &TimeZone, now_ms: i64) -> Row {
        let next_run_at_ms = if job.enabled {
            job.state
                .next_run_at_ms
                .or_else(|| schedule::next_run(job, now_ms, zone))
        } else {
            None
        };
        let mut value = Value::Object(job.to_map());
        if job.enabled
            && job.state.next_run_at_ms.is_none()
            && let Some(next) = next_run_at_ms
        {
            value["state"]["nextRunAtMs"] = json!(next);
        }
        let summary = schedule::summary(&job.schedule, zone);
        let search = format!(
            "{}\n{}\n{}\n{}",
            job.id,
            job.name,
            job.description.as_deref().unwrap_or(""),
            summary
        )
        .to_lowercase();
        Row {
            position: position as i64,
            job_id: job.id.clone(),
            name: job.name.clone(),
            name_key: job.name.to_lowercase(),
            enabled: job.enabled,
            schedule: summary,
            next_run_at_ms,
            updated_at_ms: job.updated_at_ms,
            search,
            job: value,
        }
    }

    fn next_key(&self) -> i64 {
        self.next_run_at_ms.unwrap_or(i64::MAX)
    }
}

/// The index in the state store.
pub(crate) struct CronIndex {
    conn: Connection,
}

impl std::fmt::Debug for CronIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronIndex")
            .field("path", &self.conn.path())
            .finish()
    }
}

/// The recorded description of the file the rows came from.
#[derive(Debug, Clone, PartialEq)]
struct Recorded {
    store_path: String,
    fingerprint: Fingerprint,
    host_zone: String,
    warnings: Vec<String>,
}

impl CronIndex {
    /// Opens the state store (creating and migrating it as needed).
    pub(crate) fn open(state_store: &Path) -> Result<CronIndex, CronError> {
        let store = Store::open(state_store, StoreKind::State)?;
        Ok(CronIndex { conn: store.conn })
    }

    #[cfg(test)]
    pub(crate) fn open_in_memory() -> CronIndex {
        let store = Store::open_in_memory(StoreKind::State).expect("an in-memory store");
        CronIndex { conn: store.conn }
    }

    fn recorded(&self) -> Result<Option<Recorded>, CronError> {
        let row = self
            .conn
            .query_row(
                "SELECT store_path, size, mtime_ns, ctime_ns, inode, dev, host_zone, warnings
                 FROM cron_index WHERE id = 1",
                [],
                |r| {
                    Ok(Recorded {
                        store_path: r.get(0)?,
                        fingerprint: Fingerprint {
                            size: r.get::<_, i64>(1)? as u64,
                            mtime_ns: r.get(2)?,
                            ctime_ns: r.get(3)?,
                            inode: r.get::<_, i64>(4)? as u64,
                            dev: r.get::<_, i64>(5)? as u64,
                        },
                        host_zone: r.get(6)?,
                        warnings: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or_default(),
                    })
                },
            )
            .optional()?;
        Ok(row)
    }

    /// The warnings recorded with the rows when they describe the file
    /// `fingerprint` at `store_path` read in `host_zone`; `None` when the
    /// index must be rebuilt.
    pub(crate) fn describes(
        &self,
        store_path: &Path,
        fingerprint: Fingerprint,
        host_zone: &str,
    ) -> Result<Option<Vec<String>>, CronError> {
        Ok(self.recorded()?.and_then(|r| {
            (r.store_path == path_text(store_path)
                && r.fingerprint == fingerprint
                && r.host_zone == host_zone)
                .then_some(r.warnings)
        }))
    }

    /// Replaces every row with the jobs of `file`, in one transaction.
    pub(crate) fn rebuild(
        &mut self,
        source: &Source<'_>,
        file: &JobFile,
        warnings: &[String],
    ) -> Result<(), CronError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM cron_jobs", [])?;
        {
            let mut insert = tx.prepare_cached(INSERT)?;
            for (position, job) in file.positioned() {
                insert_row(
                    &mut insert,
                    &Row::of(position, job, source.host_zone, source.now_ms),
                )?;
            }
        }
        record(&tx, source, warnings)?;
        tx.commit()?;
        Ok(())
    }

    /// After a write of `file` (read as `read_as`): only the rows of the
    /// jobs it changed when the index described the file as read, else
    /// all of them; in one transaction either way.
    pub(crate) fn follow(
        &mut self,
        source: &Source<'_>,
        read_as: Option<Fingerprint>,
        file: &JobFile,
    ) -> Result<(), CronError> {
        let zone = zone_name(source.host_zone);
        let warnings = file.standing_warnings(source.store_path);
        let incremental = match read_as {
            Some(read_as) => {
                self.describes(source.store_path, read_as, &zone)?.is_some()
                    && !file.has_duplicate_ids()
            }
            None => false,
        };
        if !incremental {
            return self.rebuild(source, file, &warnings);
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut delete = tx.prepare_cached("DELETE FROM cron_jobs WHERE job_id = ?1")?;
            for id in file.removed_ids() {
                delete.execute([id])?;
            }
            let changed = file.changed_ids();
            let mut insert = tx.prepare_cached(INSERT)?;
            for (position, job) in file.positioned() {
                if changed.contains(&job.id) {
                    delete.execute([&job.id])?;
                    insert_row(
                        &mut insert,
                        &Row::of(position, job, source.host_zone, source.now_ms),
                    )?;
                }
            }
        }
        record(&tx, source, &warnings)?;
        tx.commit()?;
        Ok(())
    }

    /// One page of jobs.
    pub(crate) fn page(&self, query: &ListQuery) -> Result<Listing, CronError> {
        let (filter, needle) = where_clause(query);
        let total: i64 = {
            let sql = format!("SELECT count(*) FROM cron_jobs{filter}");
            let mut stmt = self.conn.prepare_cached(&sql)?;
            match &needle {
                Some(n) => stmt.query_row([n], |r| r.get(0))?,
                None => stmt.query_row([], |r| r.get(0))?,
            }
        };
        let sql = format!(
            "SELECT job FROM cron_jobs{filter} ORDER BY {} LIMIT ?{n} OFFSET ?{m}",
            order_by(query),
            n = if needle.is_some() { 2 } else { 1 },
            m = if needle.is_some() { 3 } else { 2 },
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let limit = query.limit as i64;
        let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
        let texts: Vec<String> = match &needle {
            Some(n) => stmt
                .query_map(params![n, limit, offset], |r| r.get(0))?
                .collect::<Result<_, _>>()?,
            None => stmt
                .query_map(params![limit, offset], |r| r.get(0))?
                .collect::<Result<_, _>>()?,
        };
        let jobs = texts
            .iter()
            .map(|t| serde_json::from_str(t).unwrap_or(Value::Null))
            .collect();
        Ok(Listing::new(jobs, total as usize, query))
    }

    /// Job counts and the next wake.
    pub(crate) fn overview(&self) -> Result<Overview, CronError> {
        let (jobs, enabled, next): (i64, i64, Option<i64>) = self.conn.query_row(
            "SELECT count(*), coalesce(sum(enabled), 0),
                    min(CASE WHEN enabled = 1 THEN next_run_at_ms END)
             FROM cron_jobs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(Overview {
            jobs: jobs as usize,
            enabled: enabled as usize,
            next_wake_at_ms: next,
            warnings: Vec::new(),
        })
    }

    /// Ids starting with `prefix` (at most a few: enough to tell one from
    /// many).
    pub(crate) fn ids_starting_with(&self, prefix: &str) -> Result<Vec<String>, CronError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT DISTINCT job_id FROM cron_jobs
             WHERE job_id >= ?1 AND substr(job_id, 1, length(?1)) = ?1
             ORDER BY job_id LIMIT 3",
        )?;
        let ids = stmt
            .query_map([prefix], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }
}

const INSERT: &str = "INSERT INTO cron_jobs (position, job_id, name, name_key, enabled, schedule,
     next_run_at_ms, next_key, updated_at_ms, search, job)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

fn insert_row(stmt: &mut rusqlite::CachedStatement<'_>, row: &Row) -> Result<(), CronError> {
    stmt.execute(params![
        row.position,
        row.job_id,
        row.name,
        row.name_key,
        row.enabled,
        row.schedule,
        row.next_run_at_ms,
        row.next_key(),
        row.updated_at_ms,
        row.search,
        row.job.to_string(),
    ])?;
    Ok(())
}

fn record(
    tx: &rusqlite::Transaction<'_>,
    source: &Source<'_>,
    warnings: &[String],
) -> Result<(), CronError> {
    let fp = source.fingerprint;
    tx.execute(
        "INSERT INTO cron_index (id, store_path, size, mtime_ns, ctime_ns, inode, dev, host_zone, warnings)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET store_path = excluded.store_path, size = excluded.size,
             mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, inode = excluded.inode,
             dev = excluded.dev, host_zone = excluded.host_zone, warnings = excluded.warnings",
        params![
            path_text(source.store_path),
            fp.size as i64,
            fp.mtime_ns,
            fp.ctime_ns,
            fp.inode as i64,
            fp.dev as i64,
            zone_name(source.host_zone),
            serde_json::to_string(warnings).expect("strings serialise"),
        ],
    )?;
    Ok(())
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// ` WHERE …` for the filters (or nothing), and the lower-case needle of
/// `--query` bound as `?1`.
fn where_clause(query: &ListQuery) -> (String, Option<String>) {
    let mut terms = Vec::new();
    match query.enabled {
        EnabledFilter::All => {}
        EnabledFilter::Enabled => terms.push("enabled = 1"),
        EnabledFilter::Disabled => terms.push("enabled = 0"),
    }
    let needle = needle(query);
    if needle.is_some() {
        terms.push("instr(search, ?1) > 0");
    }
    let clause = if terms.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", terms.join(" AND "))
    };
    (clause, needle)
}

fn needle(query: &ListQuery) -> Option<String> {
    query
        .query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(str::to_lowercase)
}

fn order_by(query: &ListQuery) -> &'static str {
    match (query.sort_by, query.sort_dir) {
        (SortBy::NextRunAtMs, SortDir::Asc) => "next_key, name_key, position",
        (SortBy::NextRunAtMs, SortDir::Desc) => {
            "next_run_at_ms IS NULL, next_key DESC, name_key, position"
        }
        (SortBy::UpdatedAtMs, SortDir::Asc) => "updated_at_ms, name_key, position",
        (SortBy::UpdatedAtMs, SortDir::Desc) => "updated_at_ms DESC, name_key, position",
        (SortBy::Name, SortDir::Asc) => "name_key, position",
        (SortBy::Name, SortDir::Desc) => "name_key DESC, position",
    }
}

/// The same page as [`CronIndex::page`], from the file itself.
pub(crate) fn page_in_memory(
    file: &JobFile,
    query: &ListQuery,
    zone: &TimeZone,
    now_ms: i64,
) -> Listing {
    let needle = needle(query);
    let mut rows: Vec<Row> = file
        .positioned()
        .map(|(n, job)| Row::of(n, job, zone, now_ms))
        .filter(|r| match query.enabled {
            EnabledFilter::All => true,
            EnabledFilter::Enabled => r.enabled,
            EnabledFilter::Disabled => !r.enabled,
        })
        .filter(|r| {
            needle
                .as_ref()
                .is_none_or(|n| r.search.contains(n.as_str()))
        })
        .collect();
    let tie = |a: &Row, b: &Row| {
        a.name_key
            .cmp(&b.name_key)
            .then(a.position.cmp(&b.position))
    };
    rows.sort_by(|a, b| match (query.sort_by, query.sort_dir) {
        (SortBy::NextRunAtMs, SortDir::Asc) => a.next_key().cmp(&b.next_key()).then(tie(a, b)),
        (SortBy::NextRunAtMs, SortDir::Desc) => (a.next_run_at_ms.is_none())
            .cmp(&b.next_run_at_ms.is_none())
            .then(b.next_key().cmp(&a.next_key()))
            .then(tie(a, b)),
        (SortBy::UpdatedAtMs, SortDir::Asc) => {
            a.updated_at_ms.cmp(&b.updated_at_ms).then(tie(a, b))
        }
        (SortBy::UpdatedAtMs, SortDir::Desc) => {
            b.updated_at_ms.cmp(&a.updated_at_ms).then(tie(a, b))
        }
        (SortBy::Name, SortDir::Asc) => tie(a, b),
        (SortBy::Name, SortDir::Desc) => b
            .name_key
            .cmp(&a.name_key)
            .then(a.position.cmp(&b.position)),
    });
    let total = rows.len();
    let jobs = rows
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .map(|r| r.job)
        .collect();
    Listing::new(jobs, total, query)
}

/// The same as [`CronIndex::overview`], from the file itself.
pub(crate) fn overview_in_memory(file: &JobFile, zone: &TimeZone, now_ms: i64) -> Overview {
    let rows: Vec<Row> = file
        .positioned()
        .map(|(n, job)| Row::of(n, job, zone, now_ms))
        .collect();
    Overview {
        jobs: rows.len(),
        enabled: rows.iter().filter(|r| r.enabled).count(),
        next_wake_at_ms: rows
            .iter()
            .filter(|r| r.enabled)
            .filter_map(|r| r.next_run_at_ms)
            .min(),
        warnings: Vec::new(),
    }
}

/// What the text listing shows of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobLine {
    pub id: String,
    pub name: String,
    pub enabled: bool,
    /// With its zone.
    pub schedule: String,
    pub next_run_at_ms: Option<i64>,
    pub last_status: Option<String>,
    pub target: String,
}

impl JobLine {
    /// From a listed job's JSON.
    pub(crate) fn of(job: &Value, zone: &TimeZone) -> JobLine {
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let schedule = serde_json::from_value::<ScheduleSpec>(job["schedule"].clone())
            .map(|s| schedule::summary(&s, zone))
            .unwrap_or_else(|_| "?".to_string());
        let state = &job["state"];
        JobLine {
            id: text(&job["id"]),
            name: text(&job["name"]),
            enabled: job["enabled"].as_bool().unwrap_or(true),
            schedule,
            next_run_at_ms: state["nextRunAtMs"].as_i64(),
            last_status: state["lastRunStatus"]
                .as_str()
                .or(state["lastStatus"].as_str())
                .map(str::to_string),
            target: text(&job["sessionTarget"]),
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
