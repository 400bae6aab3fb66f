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
use super::job::{CronJob, ScheduleSpec};
use super::schedule;
use super::store::{Fingerprint, JobFile, zone_name};
use crate::store::{Store, StoreKind};

/// The page cache of a rebuild, in KiB.
const REBUILD_CACHE_KIB: i64 = 64 * 1024;
/// SQLite's default page cache, in KiB.
const DEFAULT_CACHE_KIB: i64 = 2_000;

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

    pub(crate) fn new(jobs: Vec<Value>, total: usize, query: &ListQuery) -> Listing {
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
    /// The job as listed, JSON.
    job: String,
}

impl Row {
    fn of(position: usize, job: &CronJob, zone: &TimeZone, now_ms: i64) -> Row {
        let next_run_at_ms = if job.enabled {
            job.state
                .next_run_at_ms
                .or_else(|| schedule::next_run(job, now_ms, zone))
        } else {
            None
        };
        // The next run the runner would plan goes into the listed state
        // when the job's own has none.
        let listed = match next_run_at_ms {
            Some(next) if job.state.next_run_at_ms.is_none() => {
                let mut value = Value::Object(job.to_map());
                value["state"]["nextRunAtMs"] = json!(next);
                value.to_string()
            }
            _ => serde_json::to_string(job).expect("a job serialises"),
        };
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
            job: listed,
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
    counts: Counts,
}

/// How many rows, and how many of them enabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    jobs: i64,
    enabled: i64,
}

impl Counts {
    fn add(&mut self, enabled: bool, by: i64) {
        self.jobs += by;
        if enabled {
            self.enabled += by;
        }
    }
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
                "SELECT store_path, size, mtime_ns, ctime_ns, inode, dev, host_zone, warnings,
                        jobs, enabled_jobs
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
                        counts: Counts {
                            jobs: r.get(8)?,
                            enabled: r.get(9)?,
                        },
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
        // A rebuild writes every page: a page cache that holds them keeps
        // it from spilling to the log halfway (the default is restored).
        tx.pragma_update(None, "cache_size", -REBUILD_CACHE_KIB)?;
        tx.execute_batch("DELETE FROM cron_jobs; DELETE FROM cron_search;")?;
        let mut counts = Counts::default();
        {
            let mut insert = Inserter::new(&tx)?;
            for (position, job) in file.positioned() {
                let row = Row::of(position, job, source.host_zone, source.now_ms);
                insert.row(&row)?;
                counts.add(row.enabled, 1);
            }
        }
        record(&tx, source, warnings, counts)?;
        tx.commit()?;
        self.conn
            .pragma_update(None, "cache_size", -DEFAULT_CACHE_KIB)?;
        Ok(())
    }

    /// [`CronIndex::rebuild`] from jobs handed over one at a time, in file
    /// order, by `stream` (which gives the fingerprint of what it read,
    /// or `None` when the file is not one it can stream cleanly), so that
    /// a store of any size is indexed without holding it. `Ok(false)`:
    /// nothing was changed (a duplicate id, or `stream` gave `None`); the
    /// caller takes the full path, which reports what it finds.
    pub(crate) fn rebuild_streamed(
        &mut self,
        store_path: &std::path::Path,
        host_zone: &jiff::tz::TimeZone,
        now_ms: i64,
        stream: &mut dyn FnMut(&mut dyn FnMut(&CronJob)) -> Result<Option<Fingerprint>, CronError>,
    ) -> Result<bool, CronError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.pragma_update(None, "cache_size", -REBUILD_CACHE_KIB)?;
        tx.execute_batch("DELETE FROM cron_jobs; DELETE FROM cron_search;")?;
        let mut counts = Counts::default();
        let mut clean = true;
        let read_as = {
            let mut insert = Inserter::new(&tx)?;
            let mut seen = std::collections::HashSet::new();
            let mut position = 0usize;
            let mut failed: Option<CronError> = None;
            let read_as = stream(&mut |job: &CronJob| {
                if failed.is_some() || !clean {
                    return;
                }
                if !seen.insert(job.id.clone()) {
                    clean = false;
                    return;
                }
                let row = Row::of(position, job, host_zone, now_ms);
                position += 1;
                match insert.row(&row) {
                    Ok(()) => counts.add(row.enabled, 1),
                    Err(err) => failed = Some(err),
                }
            })?;
            if let Some(err) = failed {
                return Err(err);
            }
            read_as
        };
        let Some(fingerprint) = read_as.filter(|_| clean) else {
            // Dropped: rolled back.
            return Ok(false);
        };
        let source = Source {
            store_path,
            fingerprint,
            host_zone,
            now_ms,
        };
        record(&tx, &source, &[], counts)?;
        tx.commit()?;
        self.conn
            .pragma_update(None, "cache_size", -DEFAULT_CACHE_KIB)?;
        Ok(true)
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
        let changed = file.changed_ids();
        let rows = file
            .positioned()
            .filter(|(_, job)| changed.contains(&job.id));
        self.replace_rows(source, &warnings, file.removed_ids(), rows)
    }

    /// In one transaction: the rows of `removed` deleted, those of `rows`
    /// (jobs with their place in the file) written afresh, and the file
    /// recorded as `source` with `warnings`.
    fn replace_rows<'j>(
        &mut self,
        source: &Source<'_>,
        warnings: &[String],
        removed: impl IntoIterator<Item = &'j String>,
        rows: impl IntoIterator<Item = (usize, &'j CronJob)>,
    ) -> Result<(), CronError> {
        let mut counts = self.recorded()?.map(|r| r.counts).unwrap_or_default();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut delete = tx.prepare_cached(
                "DELETE FROM cron_jobs WHERE job_id = ?1 RETURNING row_id, enabled",
            )?;
            let mut unsearch = tx.prepare_cached("DELETE FROM cron_search WHERE row_id = ?1")?;
            let mut remove = |id: &str, counts: &mut Counts| -> Result<(), CronError> {
                let gone: Vec<(i64, bool)> = delete
                    .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                for (row_id, enabled) in gone {
                    unsearch.execute([row_id])?;
                    counts.add(enabled, -1);
                }
                Ok(())
            };
            for id in removed {
                remove(id, &mut counts)?;
            }
            let mut insert = Inserter::new(&tx)?;
            for (position, job) in rows {
                remove(&job.id, &mut counts)?;
                let row = Row::of(position, job, source.host_zone, source.now_ms);
                insert.row(&row)?;
                counts.add(row.enabled, 1);
            }
        }
        record(&tx, source, warnings, counts)?;
        tx.commit()?;
        Ok(())
    }

    /// After a write that changed, added or removed only the jobs in
    /// `changed` (each with its place in the file) and `removed`, their
    /// rows, when the index described the file as read (`read_as`); else
    /// nothing: the index no longer matches the file and is rebuilt when
    /// next read. Returns whether it followed.
    pub(crate) fn follow_jobs(
        &mut self,
        source: &Source<'_>,
        read_as: Fingerprint,
        changed: &[(usize, CronJob)],
        removed: &[String],
    ) -> Result<bool, CronError> {
        let zone = zone_name(source.host_zone);
        let Some(warnings) = self.describes(source.store_path, read_as, &zone)? else {
            return Ok(false);
        };
        let rows = changed.iter().map(|(position, job)| (*position, job));
        self.replace_rows(source, &warnings, removed, rows)?;
        Ok(true)
    }

    /// One page of jobs.
    pub(crate) fn page(&self, query: &ListQuery) -> Result<Listing, CronError> {
        // A search reads `cron_search` once; the rows it finds are then
        // bound as a list.
        let found = match needle(query) {
            Some(needle) => {
                let mut stmt = self
                    .conn
                    .prepare_cached("SELECT row_id FROM cron_search WHERE instr(search, ?1) > 0")?;
                let rows: Vec<rusqlite::types::Value> = stmt
                    .query_map([needle], |r| r.get(0).map(rusqlite::types::Value::Integer))?
                    .collect::<Result<_, _>>()?;
                Some(std::rc::Rc::new(rows))
            }
            None => None,
        };
        let filter = where_clause(query.enabled, found.is_some());
        let total: i64 = match &found {
            // Without a search the counts recorded with the rows answer.
            None => {
                let counts = self.recorded()?.map(|r| r.counts).unwrap_or_default();
                match query.enabled {
                    EnabledFilter::All => counts.jobs,
                    EnabledFilter::Enabled => counts.enabled,
                    EnabledFilter::Disabled => counts.jobs - counts.enabled,
                }
            }
            Some(rows) => self
                .conn
                .prepare_cached(&format!("SELECT count(*) FROM cron_jobs{filter}"))?
                .query_row([rows.clone()], |r| r.get(0))?,
        };
        let sql = format!(
            "SELECT job FROM cron_jobs{filter} ORDER BY {} LIMIT ?{n} OFFSET ?{m}",
            order_by(query),
            n = if found.is_some() { 2 } else { 1 },
            m = if found.is_some() { 3 } else { 2 },
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let limit = query.limit as i64;
        let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
        let texts: Vec<String> = match found {
            Some(rows) => stmt
                .query_map(params![rows, limit, offset], |r| r.get(0))?
                .collect::<Result<_, _>>()?,
            None => stmt
                .query_map(params![limit, offset], |r| r.get(0))?
                .collect::<Result<_, _>>()?,
        };
        let jobs = texts
            .iter()
            .map(|t| serde_json::from_str(t).unwrap_or(Value::Null))
            .collect();
        Ok(Listing::new(jobs, total.max(0) as usize, query))
    }

    /// Job counts and the next wake.
    pub(crate) fn overview(&self) -> Result<Overview, CronError> {
        let counts = self.recorded()?.map(|r| r.counts).unwrap_or_default();
        let next: Option<i64> = self
            .conn
            .query_row(
                "SELECT next_key FROM cron_jobs WHERE enabled = 1 ORDER BY next_key LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(Overview {
            jobs: counts.jobs.max(0) as usize,
            enabled: counts.enabled.max(0) as usize,
            next_wake_at_ms: next.filter(|n| *n != i64::MAX),
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

/// Inserts rows into `cron_jobs` and `cron_search`.
struct Inserter<'t> {
    tx: &'t rusqlite::Transaction<'t>,
    job: rusqlite::CachedStatement<'t>,
    search: rusqlite::CachedStatement<'t>,
}

impl<'t> Inserter<'t> {
    fn new(tx: &'t rusqlite::Transaction<'t>) -> Result<Self, CronError> {
        Ok(Inserter {
            tx,
            job: tx.prepare_cached(
                "INSERT INTO cron_jobs (position, job_id, name, name_key, enabled, schedule,
                     next_run_at_ms, next_key, updated_at_ms, job)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?,
            search: tx
                .prepare_cached("INSERT INTO cron_search (row_id, search) VALUES (?1, ?2)")?,
        })
    }

    fn row(&mut self, row: &Row) -> Result<(), CronError> {
        self.job.execute(params![
            row.position,
            row.job_id,
            row.name,
            row.name_key,
            row.enabled,
            row.schedule,
            row.next_run_at_ms,
            row.next_key(),
            row.updated_at_ms,
            row.job,
        ])?;
        let row_id = self.tx.last_insert_rowid();
        self.search.execute(params![row_id, row.search])?;
        Ok(())
    }
}

fn record(
    tx: &rusqlite::Transaction<'_>,
    source: &Source<'_>,
    warnings: &[String],
    counts: Counts,
) -> Result<(), CronError> {
    let fp = source.fingerprint;
    tx.execute(
        "INSERT INTO cron_index (id, store_path, size, mtime_ns, ctime_ns, inode, dev, host_zone,
             warnings, jobs, enabled_jobs)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (id) DO UPDATE SET store_path = excluded.store_path, size = excluded.size,
             mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, inode = excluded.inode,
             dev = excluded.dev, host_zone = excluded.host_zone, warnings = excluded.warnings,
             jobs = excluded.jobs, enabled_jobs = excluded.enabled_jobs",
        params![
            path_text(source.store_path),
            fp.size as i64,
            fp.mtime_ns,
            fp.ctime_ns,
            fp.inode as i64,
            fp.dev as i64,
            zone_name(source.host_zone),
            serde_json::to_string(warnings).expect("strings serialise"),
            counts.jobs,
            counts.enabled,
        ],
    )?;
    Ok(())
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// ` WHERE …` for the filters (or nothing); with `searched`, only the
/// rows bound as `?1`.
fn where_clause(enabled: EnabledFilter, searched: bool) -> String {
    let mut terms = Vec::new();
    match enabled {
        EnabledFilter::All => {}
        EnabledFilter::Enabled => terms.push("enabled = 1"),
        EnabledFilter::Disabled => terms.push("enabled = 0"),
    }
    if searched {
        terms.push("row_id IN rarray(?1)");
    }
    if terms.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", terms.join(" AND "))
    }
}

/// The lower-case text of `--query`, when there is one.
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
        .map(|r| serde_json::from_str(&r.job).unwrap_or(Value::Null))
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
