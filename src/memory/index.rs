//! The derived search index of one memory root (SQLite + FTS5).
//!
//! Invariants:
//! * The index holds nothing that is not in the files: any change is
//!   re-derived from them, and a deleted index is rebuilt on first use.
//! * Freshness without a full scan on every call: a *quick* sync stats the
//!   directories (an added, removed or renamed-over file changes its
//!   directory; files in a changed directory are compared by inode from the
//!   listing alone) and the files people edit in place: the long-term file,
//!   the daily files of the last few days and the most recently changed
//!   topic files. A *full* sync (stat of every file) runs on
//!   `memory index`, on an empty index, and when the last one is older
//!   than [`FULL_SCAN_INTERVAL_NS`], which catches in-place edits of older
//!   files (an agent turn is told it is due and runs it while the model
//!   answers: [`SyncMode::QuickOnly`]).
//! * A file that only grew at its end keeps its indexed items; only the new
//!   ones are added, and only the new bytes (with [`TAIL_WINDOW`] bytes
//!   before them, compared by hash) are read, so appending to a long daily
//!   file costs the same however long it is. Its hash is then extended
//!   without reading the old part again: the next full scan reads such a
//!   file whole and re-indexes it if it differs (see [`read_appended`] for
//!   the in-place edit this catches only then).
//! * Every lookup reads every segment of the inverted indexes and each
//!   write adds one: small writes merge segments, full scans fold them
//!   (see [`merge_small_segments`]), so lookups cost what they cost after a
//!   build however many notes were appended.
//! * `term_docs` holds exact counts of the very common terms searches
//!   asked about (every item added or removed updates them), so no search
//!   reads such a term's whole list to count it.
//! * Writers take SQLite's write lock (`BEGIN IMMEDIATE`) before comparing,
//!   so concurrent processes never index the same change twice.
//! * Item ids grow with indexing order, and a full build indexes files
//!   oldest first, so among equal scores a higher id is a newer note.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use almanac_markdown::notes::{self, Block, BlockKind};
use jiff::tz::TimeZone;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::files::{self, FileKind};
use super::{entities, terms};
use crate::paths::{fnv1a64, fnv1a64_extend};
use crate::store::{Store, StoreError, StoreKind};
use almanac_markdown::retain;

/// A full scan at least this often (ns), to catch in-place edits of files
/// outside the quick-sync set.
pub(crate) const FULL_SCAN_INTERVAL_NS: i64 = 10 * 60 * 1_000_000_000;
/// Daily files of this many recent days are stat'ed by every quick sync.
const HOT_DAYS: i64 = 3;
/// The most recently changed topic files stat'ed by every quick sync.
const HOT_TOPICS: i64 = 64;
/// A sync that adds more items than this checkpoints the WAL at once.
const BIG_WRITE_ITEMS: usize = 5_000;
/// Files larger than this are not indexed (reported instead).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// How many bytes before the old end of a grown file are read back and
/// compared (by hash) before only its new bytes are indexed.
const TAIL_WINDOW: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncMode {
    /// Directories and the files edited in place most often; a full scan
    /// when one is due.
    Quick,
    /// As `Quick`, but a due full scan is left to the caller (the report
    /// says so), who runs it where its time is not waited for. An index
    /// never scanned in full is scanned now.
    QuickOnly,
    /// Every file.
    Full,
    /// Drop everything and index every file.
    Rebuild,
    /// Another process (the gateway's watcher) keeps the index in step
    /// with the files: nothing to do, unless the index was never built
    /// (then as `Quick`).
    Watched,
}

/// What a sync did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncReport {
    pub mode: &'static str,
    pub files_indexed: usize,
    pub files_removed: usize,
    pub items_indexed: usize,
    pub warnings: Vec<String>,
    /// A full scan is due and was left to the caller (`QuickOnly`).
    #[serde(skip)]
    pub full_scan_due: bool,
    /// Bytes of memory files read to index them.
    #[serde(skip)]
    pub bytes_read: u64,
}

/// One search result.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hit {
    #[serde(skip)]
    pub id: i64,
    pub path: String,
    pub kind: FileKind,
    pub start_line: usize,
    pub end_line: usize,
    pub stamp: Option<String>,
    /// The note's date, `YYYY-MM-DD` (`date` in JSON, as everywhere).
    #[serde(rename = "date")]
    pub day: Option<String>,
    #[serde(skip)]
    pub ts: Option<i64>,
    pub heading: String,
    pub body: String,
    #[serde(skip)]
    pub norm_hash: i64,
    #[serde(skip)]
    pub file_id: i64,
    /// Relevance in (0, 1): the ranking score `s` mapped to `s / (1 + s)`;
    /// 0 for lists that are not ranked.
    pub score: f64,
    /// The lexical part of `score` (ranked searches).
    #[serde(skip)]
    pub text_score: Option<f64>,
    /// The cosine similarity of the note's vector to the query's, when
    /// the search was hybrid and the note has a vector.
    #[serde(skip)]
    pub vector_score: Option<f64>,
    /// Neighbouring items under the same heading, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<Neighbor>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Neighbor>,
    /// Lines of the hit withheld by [`Hit::guard`] (a withheld neighbour
    /// shows its own marker).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
}

impl Hit {
    /// Applies the read-time rule ([`super::sanitize::guard_note`]) to
    /// the text the hit shows: its body, its heading path and its
    /// neighbours. Done where a hit leaves memory for a reader, never
    /// before ranking.
    pub(crate) fn guard(&mut self) {
        use super::sanitize;
        let own = sanitize::guard_note(&self.body, &self.path, self.start_line);
        self.body = own.text;
        self.withheld = own.withheld;
        self.heading = sanitize::guard_heading(&self.heading, &self.path, self.start_line);
        for n in self.before.iter_mut().chain(self.after.iter_mut()) {
            n.body = sanitize::guard_note(&n.body, &self.path, n.start_line).text;
        }
    }
}

/// An item next to a hit, for context.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Neighbor {
    pub start_line: usize,
    pub end_line: usize,
    pub body: String,
}

/// Counts for `status`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IndexStats {
    pub files: usize,
    pub items: usize,
    pub last_full_scan_ns: Option<i64>,
}

pub(crate) struct Index {
    store: Store,
    layout: files::Layout,
    tz: TimeZone,
    /// The database file's device and inode when it was opened (none in
    /// memory): a file deleted or replaced since is another index.
    file: Option<(u64, u64)>,
}

/// The page cache of a connection kept for searches, in KiB.
const SEARCH_CACHE_KIB: i64 = 8 * 1024;

/// The device and inode of the file at `path`.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

const HIT_COLUMNS: &str = "i.id, f.path, f.kind, i.start_line, i.end_line, i.stamp, i.day, i.ts, i.heading, i.body, i.norm_hash, i.file_id";

impl Index {
    /// Opens the index at `path` for the memory `root`. An index built for
    /// another root or time zone is cleared (it is derived).
    pub(crate) fn open(
        path: &Path,
        layout: files::Layout,
        tz: TimeZone,
    ) -> Result<Index, StoreError> {
        Self::over(Store::open(path, StoreKind::Index)?, layout, tz)
    }

    /// Gives back what a build needed and a long-lived holder does not:
    /// the large page cache and the file mapping (the gateway's watcher
    /// keeps its index open for days and refreshes a few files at a time).
    pub(crate) fn settle(&self) -> Result<(), StoreError> {
        self.store.conn.pragma_update(None, "cache_size", -1024)?;
        self.store.conn.pragma_update(None, "mmap_size", 0)?;
        self.store.conn.execute_batch("PRAGMA shrink_memory;")?;
        Ok(())
    }

    /// Sizes a connection kept between searches (the gateway's): no file
    /// mapping, whose touched pages would stay resident as long as it is
    /// kept, and a page cache that holds what searches read over and over.
    pub(crate) fn keep_for_searches(&self) -> Result<(), StoreError> {
        self.store
            .conn
            .pragma_update(None, "cache_size", -SEARCH_CACHE_KIB)?;
        self.store.conn.pragma_update(None, "mmap_size", 0)?;
        Ok(())
    }

    /// An empty index in memory, gone when dropped (for a command that
    /// must create nothing on disk).
    pub(crate) fn open_in_memory(layout: files::Layout, tz: TimeZone) -> Result<Index, StoreError> {
        Self::over(Store::open_in_memory(StoreKind::Index)?, layout, tz)
    }

    fn over(store: Store, layout: files::Layout, tz: TimeZone) -> Result<Index, StoreError> {
        // Builds touch many pages; a larger cache keeps them off the disk
        // until commit. Memory is used only as needed.
        store.conn.pragma_update(None, "cache_size", -65_536)?;
        // Map the file instead of copying pages into the cache: short-lived
        // processes read the same pages from the OS cache without copies.
        store.conn.pragma_update(None, "mmap_size", 1_i64 << 30)?;
        let file = file_identity(&store.path);
        let mut index = Index {
            store,
            layout,
            tz,
            file,
        };
        let identity = index.identity();
        let stored: Option<String> = index
            .store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'identity'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if stored.as_deref() != Some(identity.as_str()) {
            let tx = index
                .store
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            clear_all(&tx)?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('identity', ?1)",
                [&identity],
            )?;
            tx.commit()?;
        }
        Ok(index)
    }

    /// Whether this open index is the one [`Index::open`] of `path` for
    /// `layout` and `tz` would give now: the same file, neither deleted
    /// nor replaced since, still built for this layout and time zone. A
    /// connection kept between searches is used again only then.
    pub(crate) fn is_current(&self, path: &Path, layout: &files::Layout, tz: &TimeZone) -> bool {
        if self.store.path != path
            || self.file.is_none()
            || self.file != file_identity(path)
            || self.layout != *layout
            || self.tz != *tz
        {
            return false;
        }
        // Another process may have opened it for other settings since
        // (and cleared it).
        let stored: Option<String> = self
            .store
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = 'identity'")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)).optional())
            .ok()
            .flatten();
        stored.is_some_and(|stored| stored == self.identity())
    }

    fn identity(&self) -> String {
        let root = &self.layout.root;
        let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        let mut identity = format!(
            "root={} tz={} terms=2 extra={:?} {:?}",
            real.display(),
            self.tz.iana_name().unwrap_or("fixed"),
            self.layout.extra_dirs,
            self.layout.extra_files
        );
        // Allowing a new symlink target can bring in files a quick sync
        // would not look for again: the index starts over.
        if !self.layout.allowed_targets.is_empty() {
            identity.push_str(&format!(" allowed={:?}", self.layout.allowed_targets));
        }
        identity
    }

    /// Brings the index up to date with the files. `now_ns` is wall-clock
    /// time (file times are compared with it).
    pub(crate) fn sync(&mut self, mode: SyncMode, now_ns: i64) -> Result<SyncReport, StoreError> {
        let last_full: Option<i64> = self
            .store
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'last_full_scan_ns'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .and_then(|v| v.parse().ok());
        let mode = match (mode, last_full) {
            (SyncMode::Watched, Some(_)) => {
                return Ok(SyncReport {
                    mode: "watched",
                    ..SyncReport::default()
                });
            }
            (SyncMode::Watched, None) => SyncMode::Quick,
            (other, _) => other,
        };
        let due = last_full.is_none_or(|t| now_ns.saturating_sub(t) >= FULL_SCAN_INTERVAL_NS);
        let mode = match (mode, last_full) {
            (SyncMode::QuickOnly, Some(_)) if due => {
                let mut report = self.quick_sync(now_ns)?;
                report.full_scan_due = true;
                return Ok(report);
            }
            (SyncMode::Quick | SyncMode::QuickOnly, _) if due => SyncMode::Full,
            (SyncMode::QuickOnly, _) => SyncMode::Quick,
            (other, _) => other,
        };
        match mode {
            SyncMode::Quick | SyncMode::QuickOnly | SyncMode::Watched => self.quick_sync(now_ns),
            SyncMode::Full | SyncMode::Rebuild => self.full_sync(mode == SyncMode::Rebuild, now_ns),
        }
    }

    fn full_sync(&mut self, rebuild: bool, now_ns: i64) -> Result<SyncReport, StoreError> {
        let mut walk = self.layout.walk();
        // Oldest first, long-term last: item ids then follow recency.
        walk.files
            .sort_by(|a, b| build_order(a).cmp(&build_order(b)));
        let tx = self
            .store
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if rebuild {
            clear_all(&tx)?;
        }
        let known = known_files(&tx)?;
        // Files whose hash was extended over appends only are read whole.
        let unverified: HashSet<String> = tx
            .prepare_cached("SELECT path FROM files WHERE unverified = 1")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut report = SyncReport {
            mode: if rebuild { "rebuild" } else { "full" },
            warnings: walk.warnings,
            ..SyncReport::default()
        };
        let mut seen = HashSet::new();
        for found in &walk.files {
            seen.insert(found.rel.clone());
            let stat = FileStat::of(&found.meta);
            let verify = unverified.contains(&found.rel);
            if known.get(&found.rel) == Some(&stat) && !verify {
                continue;
            }
            index_file(
                &tx,
                &self.layout,
                &self.tz,
                &found.rel,
                found.kind,
                found.day.as_deref(),
                &stat,
                verify,
                &mut report,
            )?;
        }
        for rel in known.keys().filter(|k| !seen.contains(*k)) {
            remove_file(&tx, rel)?;
            report.files_removed += 1;
        }
        tx.execute("DELETE FROM dirs", [])?;
        for (dir, mtime) in &walk.dirs {
            tx.execute(
                "INSERT INTO dirs (path, mtime_ns) VALUES (?1, ?2)",
                params![dir, mtime],
            )?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_full_scan_ns', ?1)",
            [now_ns.to_string()],
        )?;
        fold_segments(&tx)?;
        tx.commit()?;
        if report.items_indexed > BIG_WRITE_ITEMS {
            // A build leaves a WAL as large as the index; fold it in and
            // cut it back now rather than carry it.
            self.store
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(report)
    }

    fn quick_sync(&mut self, now_ns: i64) -> Result<SyncReport, StoreError> {
        let mut report = SyncReport {
            mode: "quick",
            ..SyncReport::default()
        };
        // Read-only pass: find what changed without taking the write lock.
        let plan = self.quick_plan(now_ns, &mut report)?;
        if plan.paths.is_empty() && plan.dirs.is_empty() {
            return Ok(report);
        }
        let tx = self
            .store
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for rel in &plan.paths {
            refresh_one(&tx, &self.layout, &self.tz, rel, &mut report)?;
        }
        merge_small_segments(&tx, &report)?;
        for (dir, mtime) in &plan.dirs {
            match mtime {
                Some(m) => tx.execute(
                    "INSERT OR REPLACE INTO dirs (path, mtime_ns) VALUES (?1, ?2)",
                    params![dir, m],
                )?,
                None => tx.execute("DELETE FROM dirs WHERE path = ?1", [dir])?,
            };
        }
        tx.commit()?;
        Ok(report)
    }

    fn quick_plan(&self, now_ns: i64, report: &mut SyncReport) -> Result<QuickPlan, StoreError> {
        let conn = &self.store.conn;
        let mut plan = QuickPlan::default();
        let known_dirs: HashMap<String, i64> = {
            let mut stmt = conn.prepare_cached("SELECT path, mtime_ns FROM dirs")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        let mut dirs: Vec<String> = known_dirs.keys().cloned().collect();
        for (top, _) in self.layout.top_dirs() {
            if !known_dirs.contains_key(&top) {
                dirs.push(top);
            }
        }
        for dir in dirs {
            let full = self.layout.path_of(&dir);
            let current = std::fs::metadata(&full)
                .ok()
                .filter(|m| m.is_dir())
                .map(|m| files::mtime_ns(&m));
            if current == known_dirs.get(&dir).copied() {
                continue;
            }
            // A folder that became a link leaving the root is not listed:
            // its files are dropped as if it were gone.
            let current = match self.layout.check(&dir) {
                Ok(()) => current,
                Err(escape) => {
                    report.warnings.push(format!("skipping {escape}"));
                    None
                }
            };
            plan.dirs.push((dir.clone(), current));
            // Files indexed directly in this directory are re-checked unless
            // the listing shows the same inode.
            let indexed = indexed_in_dir(conn, &dir)?;
            if current.is_none() {
                plan.paths.extend(indexed.into_keys());
                continue;
            }
            let mut listed = HashSet::new();
            let Ok(entries) = std::fs::read_dir(&full) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if name.starts_with('.') || name == "node_modules" {
                    continue;
                }
                let rel = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    if self.layout.is_recursive(&dir) && !known_dirs.contains_key(&rel) {
                        // A new subdirectory: list it whole.
                        let mut walk = files::Walk::default();
                        let real_base = self.layout.containment(&rel);
                        files::list_dir_in(&self.layout, &real_base, &rel, true, &mut walk);
                        plan.paths.extend(walk.files.into_iter().map(|f| f.rel));
                        plan.dirs
                            .extend(walk.dirs.into_iter().map(|(d, m)| (d, Some(m))));
                        report.warnings.extend(walk.warnings);
                    }
                    continue;
                }
                if self.layout.classify(&rel).is_none() {
                    continue;
                }
                use std::os::unix::fs::DirEntryExt;
                if indexed.get(&rel) != Some(&(entry.ino() as i64)) {
                    plan.paths.insert(rel.clone());
                }
                listed.insert(rel);
            }
            plan.paths
                .extend(indexed.into_keys().filter(|rel| !listed.contains(rel)));
        }
        // Files people edit in place.
        let cutoff_day = jiff::Timestamp::from_nanosecond(now_ns as i128)
            .map(|ts| ts.to_zoned_datetime(self.tz.clone()).date())
            .ok()
            .and_then(|d| d.checked_sub(jiff::Span::new().days(HOT_DAYS)).ok())
            .map(|d| d.to_string())
            .unwrap_or_default();
        let mut stmt = conn.prepare_cached(
            "SELECT path, size, mtime_ns, ino FROM files WHERE kind = 'long_term'
             UNION ALL
             SELECT path, size, mtime_ns, ino FROM files WHERE kind = 'daily' AND day >= ?1
             UNION ALL
             SELECT * FROM (SELECT path, size, mtime_ns, ino FROM files WHERE kind = 'topic'
                            ORDER BY mtime_ns DESC LIMIT ?2)",
        )?;
        let hot: Vec<(String, FileStat)> = stmt
            .query_map(params![cutoff_day, HOT_TOPICS], |r| {
                Ok((r.get(0)?, FileStat::from_row(r, 1)?))
            })?
            .collect::<Result<_, _>>()?;
        for (rel, stat) in hot {
            let now_stat = std::fs::metadata(self.layout.path_of(&rel))
                .ok()
                .map(|m| FileStat::of(&m));
            if now_stat.as_ref() != Some(&stat) {
                plan.paths.insert(rel);
            }
        }
        Ok(plan)
    }

    /// Re-reads the given root-relative files now (after almanac wrote
    /// them), without waiting for a sync. Directory times are left alone:
    /// another process may have added files next to ours, and the next
    /// quick sync lists the directory to find them.
    pub(crate) fn refresh(&mut self, rels: &[String]) -> Result<SyncReport, StoreError> {
        let mut report = SyncReport {
            mode: "refresh",
            ..SyncReport::default()
        };
        let tx = self
            .store
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for rel in rels {
            refresh_one(&tx, &self.layout, &self.tz, rel, &mut report)?;
        }
        merge_small_segments(&tx, &report)?;
        tx.commit()?;
        Ok(report)
    }

    /// The indexed files below the folder `dir` (relative to the root),
    /// for a folder that went away or moved out with them.
    pub(crate) fn indexed_under(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT path FROM files WHERE substr(path, 1, length(?1)) = ?1")?;
        let rels = stmt
            .query_map([&prefix], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(rels)
    }

    /// Plain lexical ranked search over all items (session memory's
    /// `search` and `context`; see [`search`] for the full ranking of
    /// `memory search`). `kinds` restricts the files searched.
    pub(crate) fn search(
        &self,
        query: &str,
        limit: usize,
        kinds: Option<&[FileKind]>,
    ) -> Result<Vec<Hit>, StoreError> {
        let q = search::Query {
            text: query,
            limit,
            kinds,
            lend: false,
            ..search::Query::default()
        };
        Ok(self.search_with(&q)?.hits)
    }

    /// `id -> (norm_hash, file id, day)` for the given items.
    fn identities(&self, ids: &[i64]) -> Result<HashMap<i64, Identity>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT id, norm_hash, file_id, day FROM items WHERE id IN rarray(?1)",
        )?;
        let list = id_array(ids.iter().copied());
        let rows = stmt.query_map([list], |r| {
            Ok((
                r.get(0)?,
                Identity {
                    norm_hash: r.get(1)?,
                    file_id: r.get(2)?,
                    day: r.get(3)?,
                },
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Ids of the files matching a fixed condition on `kind`.
    fn file_ids_where(&self, condition: &str) -> Result<HashSet<i64>, StoreError> {
        let mut stmt = self
            .store
            .conn
            .prepare_cached(&format!("SELECT id FROM files WHERE {condition}"))?;
        let ids = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// Ids of the items whose column contains `term`.
    fn postings(&self, table: &str, term: &str) -> Result<Vec<i64>, StoreError> {
        let sql = format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1");
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        let ids = stmt
            .query_map([phrase], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn corpus(&self) -> Result<Corpus, StoreError> {
        Ok(self
            .store
            .conn
            .query_row("SELECT items, terms FROM totals WHERE id = 1", [], |r| {
                Ok(Corpus {
                    items: r.get::<_, i64>(0)? as usize,
                    terms: r.get::<_, i64>(1)? as usize,
                })
            })?)
    }

    /// Items by id in one query, with their stored terms.
    fn scoring_rows(
        &self,
        ids: impl Iterator<Item = i64>,
    ) -> Result<HashMap<i64, (Hit, String)>, StoreError> {
        let list = id_array(ids);
        if list.is_empty() {
            return Ok(HashMap::new());
        }
        let mut stmt = self.store.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, 0.0, i.terms FROM items i JOIN files f ON f.id = i.file_id
             WHERE i.id IN rarray(?1)"
        ))?;
        let capacity = list.len();
        let rows = stmt.query_map([list], |r| Ok((hit_from_row(r)?, r.get::<_, String>(13)?)))?;
        let mut out = HashMap::with_capacity(capacity);
        for row in rows {
            let (hit, item_terms) = row?;
            out.insert(hit.id, (hit, item_terms));
        }
        Ok(out)
    }

    /// The most recent dated items, newest first, then undated ones (an
    /// empty query lists these).
    pub(crate) fn recent(
        &self,
        limit: usize,
        kinds: Option<&[FileKind]>,
    ) -> Result<Vec<Hit>, StoreError> {
        let kind_filter = match kinds {
            None => String::new(),
            Some(kinds) => format!(
                "AND f.kind IN ({})",
                kinds
                    .iter()
                    .map(|k| format!("'{}'", k.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let fetch = (limit.min(search::MAX_RESULTS) * 4 + 16) as i64;
        let mut hits = Vec::new();
        for order in [
            "i.day IS NOT NULL {kind_filter} ORDER BY i.day DESC, i.ts DESC, i.id DESC",
            "i.day IS NULL {kind_filter} ORDER BY i.id DESC",
        ] {
            let sql = format!(
                "SELECT {HIT_COLUMNS}, 0.0 FROM items i JOIN files f ON f.id = i.file_id WHERE {} LIMIT ?1",
                order.replace("{kind_filter}", &kind_filter)
            );
            let mut stmt = self.store.conn.prepare_cached(&sql)?;
            hits.extend(
                stmt.query_map([fetch], hit_from_row)?
                    .collect::<Result<Vec<_>, _>>()?,
            );
            if hits.len() >= fetch as usize {
                break;
            }
        }
        Ok(dedupe(hits, limit))
    }

    /// Every item of one file, in file order.
    pub(crate) fn items_of(&self, rel: &str) -> Result<Vec<Hit>, StoreError> {
        let mut stmt = self.store.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, 0.0 FROM items i JOIN files f ON f.id = i.file_id
             WHERE f.path = ?1 ORDER BY i.start_line"
        ))?;
        let rows = stmt.query_map([rel], hit_from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The count of daily files, read from an existing index without
    /// changing it, if the index listed `memory/` and `daily/` at their
    /// current modification times; `None` otherwise.
    pub(crate) fn daily_count_if_current(index_path: &Path, root: &Path) -> Option<usize> {
        let conn = Store::open_existing_read_only(index_path).ok()??;
        if !daily_dirs_listed_now(&conn, root).ok()? {
            return None;
        }
        conn.query_row("SELECT count(*) FROM files WHERE kind = 'daily'", [], |r| {
            r.get::<_, i64>(0)
        })
        .ok()
        .map(|n| n as usize)
    }

    /// Whether a daily file directly in `memory/` or `daily/` is dated
    /// before `day` (`YYYY-MM-DD`), if the index can tell: it listed both
    /// folders at their current modification times. `None` otherwise (a
    /// fresh index knows only the files it was asked to refresh).
    pub(crate) fn has_daily_before(&self, day: &str) -> Result<Option<bool>, StoreError> {
        let conn = &self.store.conn;
        if !daily_dirs_listed_now(conn, &self.layout.root)? {
            return Ok(None);
        }
        let found = conn
            .query_row(
                "SELECT 1 FROM files WHERE kind = 'daily' AND day < ?1
                 AND ((path GLOB 'memory/*' AND path NOT GLOB 'memory/*/*')
                      OR (path GLOB 'daily/*' AND path NOT GLOB 'daily/*/*'))
                 LIMIT 1",
                [day],
                |_| Ok(()),
            )
            .optional()?;
        Ok(Some(found.is_some()))
    }

    /// Files of one kind (for cheap counts).
    pub(crate) fn count_files(&self, kind: FileKind) -> Result<usize, StoreError> {
        let n: i64 = self.store.conn.query_row(
            "SELECT count(*) FROM files WHERE kind = ?1",
            [kind.as_str()],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    pub(crate) fn stats(&self) -> Result<IndexStats, StoreError> {
        let conn = &self.store.conn;
        let files: i64 = conn.query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
        let items: i64 = conn.query_row("SELECT count(*) FROM items", [], |r| r.get(0))?;
        let last_full_scan_ns = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'last_full_scan_ns'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .and_then(|v| v.parse().ok());
        Ok(IndexStats {
            files: files as usize,
            items: items as usize,
            last_full_scan_ns,
        })
    }

    /// Files whose content may differ from the index: changed, added or
    /// removed since they were indexed (a stat of every file; nothing is
    /// read or written).
    pub(crate) fn dirty_files(&self) -> Result<Vec<String>, StoreError> {
        let walk = self.layout.walk();
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT path, size, mtime_ns, ino FROM files")?;
        let mut known: HashMap<String, FileStat> = stmt
            .query_map([], |r| Ok((r.get(0)?, FileStat::from_row(r, 1)?)))?
            .collect::<Result<_, _>>()?;
        let mut dirty = Vec::new();
        for found in walk.files {
            if known.remove(&found.rel) != Some(FileStat::of(&found.meta)) {
                dirty.push(found.rel);
            }
        }
        dirty.extend(known.into_keys());
        dirty.sort();
        Ok(dirty)
    }
}

fn build_order(found: &files::Found) -> (u8, Option<&str>, &str) {
    let rank = match found.kind {
        FileKind::Archive => 0,
        FileKind::Topic => 1,
        FileKind::Daily => 2,
        FileKind::LongTerm => 3,
    };
    (rank, found.day.as_deref(), found.rel.as_str())
}

/// A list of ids bound as one parameter (`IN rarray(?)`).
fn id_array(ids: impl Iterator<Item = i64>) -> std::rc::Rc<Vec<rusqlite::types::Value>> {
    std::rc::Rc::new(ids.map(rusqlite::types::Value::Integer).collect())
}

/// Weight of a match in the enclosing headings relative to the body.
const HEADING_WEIGHT: f64 = 0.25;
/// BM25 parameters. Items are a line or a list item, short and of similar
/// length, so length normalisation is kept weak: a long note that says
/// more is not pushed below a terse one.
const K1: f64 = 1.2;
const B: f64 = 0.3;

/// How many first-pass candidates are scored exactly. The first pass
/// already orders by the matched terms' IDF, which decides most of BM25;
/// the window only has to cover ties broken by frequency and length (and
/// among equal candidates it keeps the newest).
fn candidate_window(limit: usize) -> usize {
    limit.saturating_mul(4).saturating_add(32)
}

/// What the first pass needs to know of a candidate.
#[derive(Debug, Clone)]
struct Identity {
    norm_hash: i64,
    file_id: i64,
    day: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Corpus {
    items: usize,
    terms: usize,
}

impl Corpus {
    fn average_terms(&self) -> f64 {
        if self.items == 0 {
            1.0
        } else {
            (self.terms as f64 / self.items as f64).max(1.0)
        }
    }
}

/// BM25 inverse document frequency (the always-positive form).
fn bm25_idf(items: usize, df: usize) -> f64 {
    let (n, df) = (items as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25 of one item: body terms with term frequency and length
/// normalisation, plus heading matches at [`HEADING_WEIGHT`].
fn bm25(query: &[String], idf: &[f64], body_terms: &str, heading_terms: &str, average: f64) -> f64 {
    let body: Vec<&str> = body_terms.split(' ').filter(|t| !t.is_empty()).collect();
    let norm = 1.0 - B + B * body.len() as f64 / average;
    let mut score = 0.0;
    for (term, weight) in query.iter().zip(idf) {
        let tf = body.iter().filter(|t| **t == term).count() as f64;
        if tf > 0.0 {
            score += weight * tf * (K1 + 1.0) / (tf + K1 * norm);
        }
        let th = heading_terms.split(' ').filter(|t| *t == term).count() as f64;
        if th > 0.0 {
            score += HEADING_WEIGHT * weight * th * (K1 + 1.0) / (th + K1);
        }
    }
    score
}

#[derive(Default)]
struct QuickPlan {
    paths: BTreeSet<String>,
    dirs: Vec<(String, Option<i64>)>,
}

/// Size, modification time and inode: a file is re-read when any differs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStat {
    size: i64,
    mtime_ns: i64,
    ino: i64,
}

impl FileStat {
    /// Reads `size, mtime_ns, ino` from columns `first..first + 3`.
    fn from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<FileStat> {
        Ok(FileStat {
            size: r.get(first)?,
            mtime_ns: r.get(first + 1)?,
            ino: r.get(first + 2)?,
        })
    }

    fn of(meta: &std::fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len() as i64,
            mtime_ns: files::mtime_ns(meta),
            ino: files::inode(meta),
        }
    }
}

fn hit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Hit> {
    Ok(Hit {
        id: r.get(0)?,
        path: r.get(1)?,
        kind: FileKind::parse(&r.get::<_, String>(2)?),
        start_line: r.get::<_, i64>(3)? as usize,
        end_line: r.get::<_, i64>(4)? as usize,
        stamp: r.get(5)?,
        day: r.get(6)?,
        ts: r.get(7)?,
        heading: r.get(8)?,
        body: r.get(9)?,
        norm_hash: r.get(10)?,
        file_id: r.get(11)?,
        score: r.get(12)?,
        text_score: None,
        vector_score: None,
        before: Vec::new(),
        after: Vec::new(),
        withheld: Vec::new(),
    })
}

/// One hit per distinct text (a note kept in both MEMORY.md and a daily
/// file is one memory): the group keeps the rank of its best copy and is
/// shown as its long-term copy when it has one.
fn dedupe(hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
    let mut order: Vec<i64> = Vec::new();
    let mut groups: HashMap<i64, Hit> = HashMap::new();
    for hit in hits {
        match groups.get_mut(&hit.norm_hash) {
            None => {
                order.push(hit.norm_hash);
                groups.insert(hit.norm_hash, hit);
            }
            Some(kept) => {
                if kept.kind != FileKind::LongTerm && hit.kind == FileKind::LongTerm {
                    let score = kept.score;
                    *kept = Hit { score, ..hit };
                }
            }
        }
    }
    order
        .into_iter()
        .take(limit)
        .filter_map(|h| groups.remove(&h))
        .collect()
}

fn clear_all(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "INSERT INTO items_fts (items_fts) VALUES ('delete-all');
         INSERT INTO headings_fts (headings_fts) VALUES ('delete-all');
         DELETE FROM mentions; DELETE FROM facts; DELETE FROM vectors;
         DELETE FROM items; DELETE FROM files;
         DELETE FROM dirs; DELETE FROM term_docs; UPDATE totals SET items = 0, terms = 0;
         DELETE FROM meta WHERE key = 'last_full_scan_ns';",
    )
}

fn known_files(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<HashMap<String, FileStat>> {
    let mut stmt = tx.prepare_cached("SELECT path, size, mtime_ns, ino FROM files")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, FileStat::from_row(r, 1)?)))?;
    rows.collect()
}

/// `path → inode` of the files indexed directly in `dir`.
fn indexed_in_dir(
    conn: &rusqlite::Connection,
    dir: &str,
) -> rusqlite::Result<HashMap<String, i64>> {
    let mut stmt =
        conn.prepare_cached("SELECT path, ino FROM files WHERE path >= ?1 AND path < ?2")?;
    let (lo, hi) = if dir.is_empty() {
        (String::new(), "\u{10FFFF}".to_string())
    } else {
        (format!("{dir}/"), format!("{dir}0"))
    };
    let rows = stmt.query_map([lo, hi], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let prefix_len = if dir.is_empty() { 0 } else { dir.len() + 1 };
    let mut out = HashMap::new();
    for row in rows {
        let (path, ino) = row?;
        if !path[prefix_len..].contains('/') {
            out.insert(path, ino);
        }
    }
    Ok(out)
}

/// Re-checks one file: re-indexes it if it changed, removes it if gone.
fn refresh_one(
    tx: &rusqlite::Transaction<'_>,
    layout: &files::Layout,
    tz: &TimeZone,
    rel: &str,
    report: &mut SyncReport,
) -> Result<(), StoreError> {
    let known: Option<FileStat> = tx
        .query_row(
            "SELECT size, mtime_ns, ino FROM files WHERE path = ?1",
            [rel],
            |r| FileStat::from_row(r, 0),
        )
        .optional()?;
    let admitted = match layout.check(rel) {
        Ok(()) => true,
        Err(escape) => {
            report.warnings.push(format!("skipping {escape}"));
            false
        }
    };
    match std::fs::metadata(layout.path_of(rel)) {
        Ok(meta) if admitted && meta.is_file() => {
            let Some((kind, day)) = layout.classify(rel) else {
                return Ok(());
            };
            let stat = FileStat::of(&meta);
            if known.as_ref() != Some(&stat) {
                index_file(
                    tx,
                    layout,
                    tz,
                    rel,
                    kind,
                    day.as_deref(),
                    &stat,
                    false,
                    report,
                )?;
            }
        }
        _ => {
            if known.is_some() {
                remove_file(tx, rel)?;
                report.files_removed += 1;
            }
        }
    }
    Ok(())
}

/// The inverted indexes, each of which a small write adds a segment to.
const FTS_TABLES: [&str; 2] = ["items_fts", "headings_fts"];
/// Segments an inverted index may have after a full scan (a build leaves
/// one; notes appended since add a few).
const MAX_SEGMENTS: i64 = 3;

/// After a small write: merges segments of the same level (two suffice,
/// see the index migrations), a bounded amount of work, so the segments
/// that every term lookup reads grow with the log of what was appended
/// rather than with each write.
fn merge_small_segments(
    tx: &rusqlite::Transaction<'_>,
    report: &SyncReport,
) -> rusqlite::Result<()> {
    if report.files_indexed + report.files_removed == 0 {
        return Ok(());
    }
    for table in FTS_TABLES {
        tx.prepare_cached(&format!(
            "INSERT INTO {table} ({table}, rank) VALUES ('merge', 64)"
        ))?
        .execute([])?;
    }
    Ok(())
}

/// At a full scan: folds an inverted index with more than
/// [`MAX_SEGMENTS`] segments into one, so lookups cost what they cost on
/// a fresh build however many notes were appended (a few tens of
/// milliseconds for ten years of notes, at most once per full scan).
fn fold_segments(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    for table in FTS_TABLES {
        let segments: i64 = tx.query_row(
            &format!("SELECT count(DISTINCT segid) FROM {table}_idx"),
            [],
            |r| r.get(0),
        )?;
        if segments > MAX_SEGMENTS {
            tx.execute(
                &format!("INSERT INTO {table} ({table}) VALUES ('optimize')"),
                [],
            )?;
        }
    }
    Ok(())
}

/// Segments of an inverted index (for tests).
#[cfg(test)]
fn segments(conn: &rusqlite::Connection, table: &str) -> i64 {
    conn.query_row(
        &format!("SELECT count(DISTINCT segid) FROM {table}_idx"),
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn delete_items(tx: &rusqlite::Transaction<'_>, file_id: i64) -> rusqlite::Result<()> {
    let (count, terms): (i64, i64) = tx
        .prepare_cached("SELECT count(*), coalesce(sum(nterms), 0) FROM items WHERE file_id = ?1")?
        .query_row([file_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if count == 0 {
        return Ok(());
    }
    // A contentless FTS5 row is removed by repeating exactly what was
    // inserted: the stored body terms, and the heading's terms (derived the
    // same way again).
    let rows: Vec<(i64, String, String)> = tx
        .prepare_cached("SELECT id, terms, heading FROM items WHERE file_id = ?1")?
        .query_map([file_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut delete_body = tx.prepare_cached(
        "INSERT INTO items_fts (items_fts, rowid, terms) VALUES ('delete', ?1, ?2)",
    )?;
    let mut delete_heading = tx.prepare_cached(
        "INSERT INTO headings_fts (headings_fts, rowid, terms) VALUES ('delete', ?1, ?2)",
    )?;
    let mut heading_terms: Option<(String, String)> = None;
    let mut docs = TermDocs::load(tx)?;
    for (id, body_terms, heading) in rows {
        if !body_terms.is_empty() {
            delete_body.execute(params![id, body_terms])?;
            docs.count(&body_terms, -1);
        }
        let h_terms = match &heading_terms {
            Some((h, t)) if *h == heading => t.clone(),
            _ => {
                let t = terms::index_terms(&heading);
                heading_terms = Some((heading, t.clone()));
                t
            }
        };
        if !h_terms.is_empty() {
            delete_heading.execute(params![id, h_terms])?;
        }
    }
    tx.prepare_cached(
        "DELETE FROM mentions WHERE item_id IN (SELECT id FROM items WHERE file_id = ?1)",
    )?
    .execute([file_id])?;
    tx.prepare_cached(
        "DELETE FROM facts WHERE item_id IN (SELECT id FROM items WHERE file_id = ?1)",
    )?
    .execute([file_id])?;
    tx.prepare_cached(
        "DELETE FROM vectors WHERE item_id IN (SELECT id FROM items WHERE file_id = ?1)",
    )?
    .execute([file_id])?;
    tx.prepare_cached("DELETE FROM items WHERE file_id = ?1")?
        .execute([file_id])?;
    tx.prepare_cached("UPDATE totals SET items = items - ?1, terms = terms - ?2 WHERE id = 1")?
        .execute([count, terms])?;
    docs.save(tx)?;
    Ok(())
}

/// The counts of `term_docs` (items holding a very common term) changed
/// by one write: every item added to or removed from the body index
/// passes through here, so the stored counts stay those of the index.
struct TermDocs {
    /// Term → change; empty when no term is counted.
    changes: HashMap<String, i64>,
}

impl TermDocs {
    fn load(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<TermDocs> {
        let changes = tx
            .prepare_cached("SELECT term FROM term_docs")?
            .query_map([], |r| Ok((r.get::<_, String>(0)?, 0)))?
            .collect::<Result<_, _>>()?;
        Ok(TermDocs { changes })
    }

    /// Counts an item with these (space-separated) terms, `by` +1 or -1.
    fn count(&mut self, item_terms: &str, by: i64) {
        if self.changes.is_empty() {
            return;
        }
        let mut seen: Vec<&str> = Vec::new();
        for term in item_terms.split(' ') {
            if let Some(change) = self.changes.get_mut(term)
                && !seen.contains(&term)
            {
                *change += by;
                seen.push(term);
            }
        }
    }

    fn save(&self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        let mut update =
            tx.prepare_cached("UPDATE term_docs SET docs = docs + ?2 WHERE term = ?1")?;
        for (term, change) in &self.changes {
            if *change != 0 {
                update.execute(params![term, change])?;
            }
        }
        Ok(())
    }
}

/// Whether the body index holds `term` as one token exactly as written
/// (its count can be kept from the stored terms): letters and digits of
/// ASCII, or CJK characters.
pub(crate) fn is_plain_term(term: &str) -> bool {
    !term.is_empty()
        && term
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || terms::is_cjk(c))
}

fn remove_file(tx: &rusqlite::Transaction<'_>, rel: &str) -> rusqlite::Result<()> {
    let id: Option<i64> = tx
        .query_row("SELECT id FROM files WHERE path = ?1", [rel], |r| r.get(0))
        .optional()?;
    if let Some(id) = id {
        delete_items(tx, id)?;
        tx.execute("DELETE FROM files WHERE id = ?1", [id])?;
    }
    Ok(())
}

/// What the index knows of one file.
struct Stored {
    id: i64,
    stat: FileStat,
    hash: i64,
    lines: i64,
    tail_hash: i64,
    resume: Option<notes::Resume>,
}

fn stored_file(tx: &rusqlite::Transaction<'_>, rel: &str) -> rusqlite::Result<Option<Stored>> {
    tx.prepare_cached(
        "SELECT id, size, mtime_ns, ino, hash, lines, tail_hash, resume FROM files WHERE path = ?1",
    )?
    .query_row([rel], |r| {
        Ok(Stored {
            id: r.get(0)?,
            stat: FileStat::from_row(r, 1)?,
            hash: r.get(4)?,
            lines: r.get(5)?,
            tail_hash: r.get(6)?,
            resume: r
                .get::<_, Option<String>>(7)?
                .and_then(|text| decode_resume(&text)),
        })
    })
    .optional()
}

/// The parser's state at the end of a file, as stored in `files.resume`.
fn encode_resume(resume: &notes::Resume) -> String {
    serde_json::json!({
        "lines": resume.lines,
        "headings": resume.headings,
        "fence": resume.fence,
    })
    .to_string()
}

/// [`encode_resume`] read back; `None` for anything else (the file is then
/// read whole).
fn decode_resume(text: &str) -> Option<notes::Resume> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let lines = usize::try_from(value.get("lines")?.as_u64()?).ok()?;
    let mut headings = Vec::new();
    for pair in value.get("headings")?.as_array()? {
        let level = u8::try_from(pair.get(0)?.as_u64()?).ok()?;
        headings.push((level, pair.get(1)?.as_str()?.to_string()));
    }
    let fence = match value.get("fence")? {
        serde_json::Value::Null => None,
        named => Some(notes::Resume::fence_named(named.as_str()?)?),
    };
    Some(notes::Resume {
        lines,
        headings,
        fence,
    })
}

/// Reads what was appended to a file the index holds up to
/// `stored.stat.size`, from there alone, when the file evidently only grew:
/// the same inode, larger, and the last [`TAIL_WINDOW`] bytes indexed
/// unchanged (their hash) and ending with a line break. Returns those bytes
/// of the window followed by the new ones, and the window's length; `None`
/// when the file must be read whole.
///
/// An edit this cannot see rewrites the file in place (same inode; editors
/// that save by rename give a new one) more than [`TAIL_WINDOW`] bytes
/// before the old end, leaves the window's bytes the same at the same
/// offsets (text replaced by text of exactly the same length, say), and the
/// file grows before the index looks again. The hash is then extended
/// without reading the edited part, and the file is marked unverified: the
/// next full scan reads it whole and re-indexes it when its hash differs.
fn read_appended(
    path: &Path,
    stored: &Stored,
    stat: &FileStat,
    report: &mut SyncReport,
) -> Option<(Vec<u8>, usize)> {
    use std::io::{Read, Seek, SeekFrom};
    let old_size = u64::try_from(stored.stat.size).ok()?;
    let new_size = u64::try_from(stat.size).ok()?;
    if stored.resume.is_none()
        || stat.ino != stored.stat.ino
        || old_size == 0
        || new_size <= old_size
    {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    // The file opened must be the one stat'ed (not one renamed over it since).
    if file.metadata().ok().map(|m| files::inode(&m)) != Some(stat.ino) {
        return None;
    }
    let window = old_size.min(TAIL_WINDOW);
    file.seek(SeekFrom::Start(old_size - window)).ok()?;
    let mut bytes = vec![0; usize::try_from(new_size - old_size + window).ok()?];
    file.read_exact(&mut bytes).ok()?;
    report.bytes_read += bytes.len() as u64;
    let window = window as usize;
    let unchanged =
        bytes[window - 1] == b'\n' && fnv1a64(&bytes[..window]) as i64 == stored.tail_hash;
    unchanged.then_some((bytes, window))
}

/// The hash of the last [`TAIL_WINDOW`] bytes of `bytes` (the end of a file).
fn tail_hash(bytes: &[u8]) -> i64 {
    let start = bytes.len().saturating_sub(TAIL_WINDOW as usize);
    fnv1a64(&bytes[start..]) as i64
}

/// Whether the first line of text appended to a file may continue the old
/// last item (it is indented, or blank and maybe before an indented line):
/// then the file is parsed whole.
fn may_continue_last_item(appended: &str) -> bool {
    let next = appended.lines().next().unwrap_or("");
    next.trim().is_empty() || next.starts_with([' ', '\t'])
}

/// `bytes` as text; invalid UTF-8 is indexed as U+FFFD, with a warning.
fn lossy_text<'a>(
    rel: &str,
    bytes: &'a [u8],
    report: &mut SyncReport,
) -> std::borrow::Cow<'a, str> {
    let text = String::from_utf8_lossy(bytes);
    if matches!(text, std::borrow::Cow::Owned(_)) {
        report.warnings.push(format!(
            "{rel} is not valid UTF-8; unreadable bytes are indexed as U+FFFD"
        ));
    }
    text
}

/// The `files` row of a file being indexed.
struct FileRow<'a> {
    kind: FileKind,
    day: Option<&'a str>,
    stat: &'a FileStat,
    hash: i64,
    lines: i64,
    tail_hash: i64,
    /// `None` when what was read may not be what `stat` describes.
    resume: Option<String>,
    /// The hash was extended over appended bytes only.
    unverified: bool,
}

/// Updates the row of file `id`, or inserts one for `rel`; returns the id.
fn write_file_row(
    tx: &rusqlite::Transaction<'_>,
    rel: &str,
    id: Option<i64>,
    row: &FileRow<'_>,
) -> rusqlite::Result<i64> {
    let id = match id {
        Some(id) => id,
        None => {
            tx.prepare_cached(
                "INSERT INTO files (path, kind, size, mtime_ns, ino, hash, lines) VALUES (?1, '', 0, 0, 0, 0, 0)",
            )?
            .execute([rel])?;
            tx.last_insert_rowid()
        }
    };
    tx.prepare_cached(
        "UPDATE files SET kind = ?2, day = ?3, size = ?4, mtime_ns = ?5, ino = ?6, hash = ?7,
         lines = ?8, tail_hash = ?9, resume = ?10, unverified = ?11 WHERE id = ?1",
    )?
    .execute(params![
        id,
        row.kind.as_str(),
        row.day,
        row.stat.size,
        row.stat.mtime_ns,
        row.stat.ino,
        row.hash,
        row.lines,
        row.tail_hash,
        row.resume,
        row.unverified,
    ])?;
    Ok(id)
}

/// (Re-)indexes one file whose stat differs from the stored one, or which
/// `verify` asks to read whole (its hash was extended over appends only).
#[allow(clippy::too_many_arguments)]
fn index_file(
    tx: &rusqlite::Transaction<'_>,
    layout: &files::Layout,
    tz: &TimeZone,
    rel: &str,
    kind: FileKind,
    file_day: Option<&str>,
    stat: &FileStat,
    verify: bool,
    report: &mut SyncReport,
) -> Result<(), StoreError> {
    if stat.size as u64 > MAX_FILE_BYTES {
        report.warnings.push(format!(
            "{rel} is larger than {} MiB and is not indexed",
            MAX_FILE_BYTES / (1024 * 1024)
        ));
        remove_file(tx, rel)?;
        return Ok(());
    }
    let path = layout.path_of(rel);
    let stored = stored_file(tx, rel)?;
    // A file that only grew at its end (an appended note): only the new
    // bytes are read and parsed; its indexed items stay.
    if !verify
        && let Some(old) = &stored
        && let Some(resume) = &old.resume
        && let Some((bytes, window)) = read_appended(&path, old, stat, report)
    {
        let appended = lossy_text(rel, &bytes[window..], report);
        if !may_continue_last_item(&appended) {
            let (blocks, end) = notes::parse_blocks_resumed(&appended, resume);
            let row = FileRow {
                kind,
                day: file_day,
                stat,
                hash: fnv1a64_extend(old.hash as u64, &bytes[window..]) as i64,
                lines: old.lines + appended.lines().count() as i64,
                tail_hash: tail_hash(&bytes),
                resume: Some(encode_resume(&end)),
                unverified: true,
            };
            write_file_row(tx, rel, Some(old.id), &row)?;
            insert_items(tx, tz, rel, old.id, file_day, blocks.iter(), report)?;
            report.files_indexed += 1;
            return Ok(());
        }
    }
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.warnings.push(format!("cannot read {rel}: {e}"));
            return Ok(());
        }
    };
    report.bytes_read += bytes.len() as u64;
    let hash = fnv1a64(&bytes) as i64;
    // What was read is what `stat` describes unless the file changed in
    // between; then nothing is resumed from it.
    let exact = bytes.len() as i64 == stat.size;
    if let Some(old) = &stored
        && old.hash == hash
    {
        // Touched but unchanged (or verified): remember the new stat.
        tx.prepare_cached(
            "UPDATE files SET size = ?2, mtime_ns = ?3, ino = ?4, unverified = 0,
             resume = CASE WHEN ?5 THEN resume END WHERE id = ?1",
        )?
        .execute(params![old.id, stat.size, stat.mtime_ns, stat.ino, exact])?;
        return Ok(());
    }
    // Read whole, a file that only grew at its end still keeps its items
    // when its old part is unchanged (its hash) and ends with a line break.
    let old_size = stored.as_ref().map_or(0, |old| old.stat.size as usize);
    let kept = match &stored {
        Some(old)
            if old_size > 0
                && old_size < bytes.len()
                && bytes[old_size - 1] == b'\n'
                && fnv1a64(&bytes[..old_size]) as i64 == old.hash =>
        {
            let appended = String::from_utf8_lossy(&bytes[old_size..]);
            if may_continue_last_item(&appended) {
                None
            } else {
                let appended = lossy_text(rel, &bytes[old_size..], report);
                let resume = old.resume.clone().unwrap_or_else(|| {
                    notes::resume_after(&String::from_utf8_lossy(&bytes[..old_size]))
                });
                let (blocks, end) = notes::parse_blocks_resumed(&appended, &resume);
                Some((blocks, end, old.lines + appended.lines().count() as i64))
            }
        }
        _ => None,
    };
    let (blocks, end, lines) = match kept {
        Some(kept) => kept,
        None => {
            if let Some(old) = &stored {
                delete_items(tx, old.id)?;
            }
            let text = lossy_text(rel, &bytes, report);
            let (blocks, end) = notes::parse_blocks_with_end(&text);
            (blocks, end, text.lines().count() as i64)
        }
    };
    let row = FileRow {
        kind,
        day: file_day,
        stat,
        hash,
        lines,
        tail_hash: tail_hash(&bytes),
        resume: exact.then(|| encode_resume(&end)),
        unverified: false,
    };
    let file_id = write_file_row(tx, rel, stored.as_ref().map(|old| old.id), &row)?;
    insert_items(tx, tz, rel, file_id, file_day, blocks.iter(), report)?;
    report.files_indexed += 1;
    Ok(())
}

fn insert_items<'a>(
    tx: &rusqlite::Transaction<'_>,
    tz: &TimeZone,
    rel: &str,
    file_id: i64,
    file_day: Option<&str>,
    blocks: impl Iterator<Item = &'a Block>,
    report: &mut SyncReport,
) -> rusqlite::Result<()> {
    let mut insert_item = tx.prepare_cached(
        "INSERT INTO items (file_id, start_line, end_line, kind, stamp, day, ts, heading, body, terms, nterms, norm_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let mut insert_body =
        tx.prepare_cached("INSERT INTO items_fts (rowid, terms) VALUES (?1, ?2)")?;
    let mut insert_heading =
        tx.prepare_cached("INSERT INTO headings_fts (rowid, terms) VALUES (?1, ?2)")?;
    let mut insert_mention =
        tx.prepare_cached("INSERT INTO mentions (entity, item_id, display) VALUES (?1, ?2, ?3)")?;
    let mut insert_fact = tx.prepare_cached(
        "INSERT INTO facts (item_id, kind, confidence, entities, content) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut days = DayCache::default();
    let mut heading_terms: Option<(String, String)> = None;
    let (mut added_items, mut added_terms) = (0i64, 0i64);
    let mut docs = TermDocs::load(tx)?;
    for block in blocks {
        let item_kind = match block.kind {
            BlockKind::Heading { .. } => continue,
            BlockKind::Item => "item",
            BlockKind::Line => "line",
        };
        let stamp = block.stamp.as_ref().map(|s| s.display());
        let day = block
            .stamp
            .as_ref()
            .and_then(|s| s.date.as_deref())
            .or(file_day);
        let time = block.stamp.as_ref().and_then(|s| s.time.as_deref());
        let ts = day.and_then(|d| days.timestamp(d, time, tz));
        let heading = block.heading_path.join(" > ");
        // Consecutive items share their heading: tokenise it once.
        let h_terms = match &heading_terms {
            Some((h, t)) if *h == heading => t.clone(),
            _ => {
                let t = terms::index_terms(&heading);
                heading_terms = Some((heading.clone(), t.clone()));
                t
            }
        };
        let body_terms = terms::index_terms(&block.body);
        let nterms = if body_terms.is_empty() {
            0
        } else {
            body_terms.matches(' ').count() as i64 + 1
        };
        let norm_hash = fnv1a64(normalized_for_dedupe(&block.body).as_bytes()) as i64;
        insert_item.execute(params![
            file_id,
            block.start_line as i64,
            block.end_line as i64,
            item_kind,
            stamp,
            day,
            ts,
            heading,
            block.body,
            body_terms,
            nterms,
            norm_hash
        ])?;
        let id = tx.last_insert_rowid();
        if !body_terms.is_empty() {
            insert_body.execute(params![id, body_terms])?;
            docs.count(&body_terms, 1);
        }
        if !h_terms.is_empty() {
            insert_heading.execute(params![id, h_terms])?;
        }
        for m in entities::mentions(&block.body) {
            insert_mention.execute(params![m.key, id, m.display])?;
        }
        let in_retain = block
            .heading_path
            .last()
            .is_some_and(|h| retain::is_retain_heading(h));
        if in_retain && item_kind == "item" {
            match retain::parse_fact(&block.body) {
                Ok(fact) => {
                    let keys: Vec<String> =
                        fact.entities.iter().map(|e| entities::key(e)).collect();
                    insert_fact.execute(params![
                        id,
                        fact.kind.as_str(),
                        fact.confidence,
                        keys.join("|"),
                        fact.content
                    ])?;
                }
                Err(why) => report.warnings.push(format!(
                    "{rel}:{}: not a retained fact ({why}); indexed as a note",
                    block.start_line
                )),
            }
        }
        added_items += 1;
        added_terms += nterms;
        report.items_indexed += 1;
    }
    if added_items > 0 {
        tx.prepare_cached("UPDATE totals SET items = items + ?1, terms = terms + ?2 WHERE id = 1")?
            .execute([added_items, added_terms])?;
    }
    docs.save(tx)?;
    Ok(())
}

/// The text two notes must share to count as the same memory.
fn normalized_for_dedupe(body: &str) -> String {
    terms::fold(body)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Converts local dates and times to timestamps, caching the date parse.
#[derive(Default)]
struct DayCache {
    last: Option<(String, Option<jiff::civil::Date>)>,
}

impl DayCache {
    fn timestamp(&mut self, day: &str, time: Option<&str>, tz: &TimeZone) -> Option<i64> {
        let date = match &self.last {
            Some((d, date)) if d == day => *date,
            _ => {
                let date = day.parse::<jiff::civil::Date>().ok();
                self.last = Some((day.to_string(), date));
                date
            }
        }?;
        let time = match time {
            Some(t) => t.parse::<jiff::civil::Time>().ok()?,
            None => jiff::civil::Time::midnight(),
        };
        let zoned = date.to_datetime(time).to_zoned_datetime(tz.clone()).ok()?;
        Some(zoned.timestamp().as_second())
    }
}

pub(crate) mod recall;
pub(crate) mod search;
pub(crate) mod vectors;

/// Whether the index listed `memory/` and `daily/` (under `root`) at
/// their current modification times, so its daily files are all there are.
fn daily_dirs_listed_now(conn: &rusqlite::Connection, root: &Path) -> rusqlite::Result<bool> {
    for dir in ["memory", "daily"] {
        let current = std::fs::metadata(root.join(dir))
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| files::mtime_ns(&m));
        let listed: Option<i64> = conn
            .query_row("SELECT mtime_ns FROM dirs WHERE path = ?1", [dir], |r| {
                r.get(0)
            })
            .optional()?;
        if current != listed {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
pub(crate) mod tests;
