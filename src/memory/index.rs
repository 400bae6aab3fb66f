//! The derived search index of one memory root (SQLite + FTS5).
//!
//! Invariants:
//! * The index holds nothing that is not in the files: any change is
//!   re-derived from them, and a deleted index is rebuilt on first use.
//! * Freshness without a full scan on every call: a *quick* sync stats the
//!   directories (an added, removed or renamed-over file changes its
//!   directory), the long-term file and the recently modified files; files
//!   in a changed directory are compared by inode from the listing alone.
//!   A *full* sync (stat of every file) runs on `memory index`, on an empty
//!   index, and when the last one is older than [`FULL_SCAN_INTERVAL_NS`],
//!   which catches in-place edits of old files.
//! * Writers take SQLite's write lock (`BEGIN IMMEDIATE`) before comparing,
//!   so concurrent processes never index the same change twice.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use almanac_markdown::notes::{self, BlockKind};
use jiff::tz::TimeZone;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::files::{self, FileKind};
use super::terms;
use crate::paths::fnv1a64;
use crate::store::{Store, StoreError, StoreKind};

/// A full scan at least this often (ns), to catch in-place edits of files
/// outside the recent window.
pub const FULL_SCAN_INTERVAL_NS: i64 = 10 * 60 * 1_000_000_000;
/// Files modified within this window (ns) are stat'ed on every quick sync.
const HOT_WINDOW_NS: i64 = 7 * 24 * 3600 * 1_000_000_000;
/// Files larger than this are not indexed (reported instead).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Directories, the long-term file and recent files.
    Quick,
    /// Every file.
    Full,
    /// Drop everything and index every file.
    Rebuild,
}

/// What a sync did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SyncReport {
    pub mode: &'static str,
    pub files_indexed: usize,
    pub files_removed: usize,
    pub items_indexed: usize,
    pub warnings: Vec<String>,
}

/// One search result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Hit {
    #[serde(skip)]
    pub id: i64,
    pub path: String,
    pub kind: FileKind,
    pub start_line: usize,
    pub end_line: usize,
    pub stamp: Option<String>,
    pub day: Option<String>,
    #[serde(skip)]
    pub ts: Option<i64>,
    pub heading: String,
    pub body: String,
    #[serde(skip)]
    pub norm_hash: i64,
    pub score: f64,
}

/// Counts for `status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexStats {
    pub files: usize,
    pub items: usize,
    pub last_full_scan_ns: Option<i64>,
}

pub struct Index {
    store: Store,
    root: PathBuf,
    tz: TimeZone,
}

impl Index {
    /// Opens the index at `path` for the memory `root`. An index built for
    /// another root or time zone is cleared (it is derived).
    pub fn open(path: &Path, root: &Path, tz: TimeZone) -> Result<Index, StoreError> {
        let store = Store::open(path, StoreKind::Index)?;
        let mut index = Index {
            store,
            root: root.to_path_buf(),
            tz,
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

    fn identity(&self) -> String {
        let real = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        format!(
            "root={} tz={} terms=1",
            real.display(),
            self.tz.iana_name().unwrap_or("fixed")
        )
    }

    pub fn path(&self) -> &Path {
        &self.store.path
    }

    /// Brings the index up to date with the files.
    pub fn sync(&mut self, mode: SyncMode, now_ns: i64) -> Result<SyncReport, StoreError> {
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
            (SyncMode::Quick, Some(t)) if now_ns.saturating_sub(t) < FULL_SCAN_INTERVAL_NS => {
                SyncMode::Quick
            }
            (SyncMode::Quick, _) => SyncMode::Full,
            (other, _) => other,
        };
        match mode {
            SyncMode::Quick => self.quick_sync(now_ns),
            SyncMode::Full | SyncMode::Rebuild => self.full_sync(mode == SyncMode::Rebuild, now_ns),
        }
    }

    fn full_sync(&mut self, rebuild: bool, now_ns: i64) -> Result<SyncReport, StoreError> {
        let walk = files::walk(&self.root);
        let tx = self
            .store
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if rebuild {
            clear_all(&tx)?;
        }
        let known = known_files(&tx)?;
        let mut report = SyncReport {
            mode: if rebuild { "rebuild" } else { "full" },
            warnings: walk.warnings,
            ..SyncReport::default()
        };
        let mut seen = HashSet::new();
        for found in &walk.files {
            seen.insert(found.rel.clone());
            let stat = FileStat::of(&found.meta);
            if known.get(&found.rel) == Some(&stat) {
                continue;
            }
            index_file(
                &tx,
                &self.root,
                &self.tz,
                &found.rel,
                found.kind,
                found.day.as_deref(),
                &stat,
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
        tx.commit()?;
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
            refresh_one(&tx, &self.root, &self.tz, rel, &mut report)?;
        }
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
        for top in files::TOP_DIRS {
            if !known_dirs.contains_key(*top) {
                dirs.push((*top).to_string());
            }
        }
        let real_root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        for dir in dirs {
            let full = if dir.is_empty() {
                self.root.clone()
            } else {
                self.root.join(&dir)
            };
            let current = std::fs::metadata(&full)
                .ok()
                .filter(|m| m.is_dir())
                .map(|m| files::mtime_ns(&m));
            let known = known_dirs.get(&dir).copied();
            if current == known {
                continue;
            }
            plan.dirs.push((dir.clone(), current));
            // Everything indexed directly in this directory is re-checked
            // unless the listing shows the same inode.
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
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir {
                    let recursive_parent = dir == "memory" || dir.starts_with("memory/");
                    if recursive_parent && !known_dirs.contains_key(&rel) {
                        // A new subdirectory: list it whole.
                        let mut walk = files::Walk::default();
                        files::list_dir(&self.root, &real_root, &rel, true, &mut walk);
                        plan.paths.extend(walk.files.into_iter().map(|f| f.rel));
                        plan.dirs
                            .extend(walk.dirs.into_iter().map(|(d, m)| (d, Some(m))));
                        report.warnings.extend(walk.warnings);
                    }
                    continue;
                }
                if files::classify(&rel).is_none() {
                    continue;
                }
                use std::os::unix::fs::DirEntryExt;
                let ino = entry.ino() as i64;
                if indexed.get(&rel) != Some(&ino) {
                    plan.paths.insert(rel.clone());
                }
                listed.insert(rel);
            }
            plan.paths
                .extend(indexed.into_keys().filter(|rel| !listed.contains(rel)));
        }
        // The long-term file and recently modified files may change in place.
        let mut stmt = conn.prepare_cached(
            "SELECT path, size, mtime_ns, ino FROM files WHERE kind = 'long_term' OR mtime_ns > ?1",
        )?;
        let hot: Vec<(String, FileStat)> = stmt
            .query_map([now_ns - HOT_WINDOW_NS], |r| {
                Ok((
                    r.get(0)?,
                    FileStat {
                        size: r.get(1)?,
                        mtime_ns: r.get(2)?,
                        ino: r.get(3)?,
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        for (rel, stat) in hot {
            let now_stat = std::fs::metadata(self.root.join(&rel))
                .ok()
                .map(|m| FileStat::of(&m));
            if now_stat.as_ref() != Some(&stat) {
                plan.paths.insert(rel);
            }
        }
        for rel in ["MEMORY.md", "memory.md"] {
            if self.root.join(rel).is_file() && !is_indexed(conn, rel)? {
                plan.paths.insert(rel.to_string());
            }
        }
        Ok(plan)
    }

    /// Re-reads the given root-relative files now (after almanac wrote
    /// them), without waiting for a sync. Directory times are left alone:
    /// another process may have added files next to ours, and the next
    /// quick sync lists the directory to find them.
    pub fn refresh(&mut self, rels: &[String]) -> Result<SyncReport, StoreError> {
        let mut report = SyncReport {
            mode: "refresh",
            ..SyncReport::default()
        };
        let tx = self
            .store
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for rel in rels {
            refresh_one(&tx, &self.root, &self.tz, rel, &mut report)?;
        }
        tx.commit()?;
        Ok(report)
    }

    /// Ranked search. `kinds` restricts the files searched.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        kinds: Option<&[FileKind]>,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = terms::query_terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let expression = terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let kind_filter = kind_clause(kinds);
        let sql = format!(
            "SELECT i.id, i.path, f.kind, i.start_line, i.end_line, i.stamp, i.day, i.ts, i.heading, i.body,
                    i.norm_hash, -bm25(items_fts, 1.0, 0.25) AS score
             FROM items_fts
             JOIN items i ON i.id = items_fts.rowid
             JOIN files f ON f.path = i.path
             WHERE items_fts MATCH ?1 {kind_filter}
             ORDER BY score DESC, f.kind = 'long_term' DESC, i.ts DESC, i.id DESC
             LIMIT ?2"
        );
        let fetch = (limit * 4 + 16) as i64;
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![expression, fetch], hit_from_row)?;
        let mut hits = rows.collect::<Result<Vec<_>, _>>()?;
        // BM25 (higher is better, unbounded) mapped to (0, 1), keeping the
        // order, so scores read like OpenClaw's and `--min-score` works.
        for hit in &mut hits {
            hit.score = hit.score.max(0.0) / (1.0 + hit.score.max(0.0));
        }
        Ok(dedupe(hits, limit))
    }

    /// The most recent items (an empty query lists these).
    pub fn recent(&self, limit: usize, kinds: Option<&[FileKind]>) -> Result<Vec<Hit>, StoreError> {
        let kind_filter = kind_clause(kinds);
        let sql = format!(
            "SELECT i.id, i.path, f.kind, i.start_line, i.end_line, i.stamp, i.day, i.ts, i.heading, i.body,
                    i.norm_hash, 0.0
             FROM items i JOIN files f ON f.path = i.path
             WHERE 1 {kind_filter}
             ORDER BY i.ts IS NULL, i.ts DESC, i.path DESC, i.start_line DESC
             LIMIT ?1"
        );
        let fetch = (limit * 4 + 16) as i64;
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([fetch], hit_from_row)?;
        Ok(dedupe(rows.collect::<Result<Vec<_>, _>>()?, limit))
    }

    /// Every item of one file, in file order.
    pub fn items_of(&self, rel: &str) -> Result<Vec<Hit>, StoreError> {
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT i.id, i.path, f.kind, i.start_line, i.end_line, i.stamp, i.day, i.ts, i.heading, i.body,
                    i.norm_hash, 0.0
             FROM items i JOIN files f ON f.path = i.path
             WHERE i.path = ?1 ORDER BY i.start_line",
        )?;
        let rows = stmt.query_map([rel], hit_from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    pub fn stats(&self) -> Result<IndexStats, StoreError> {
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
}

#[derive(Default)]
struct QuickPlan {
    paths: std::collections::BTreeSet<String>,
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
    fn of(meta: &std::fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len() as i64,
            mtime_ns: files::mtime_ns(meta),
            ino: files::inode(meta),
        }
    }
}

fn kind_clause(kinds: Option<&[FileKind]>) -> String {
    match kinds {
        None => String::new(),
        Some(kinds) => format!(
            "AND f.kind IN ({})",
            kinds
                .iter()
                .map(|k| format!("'{}'", k.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
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
        score: r.get(11)?,
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
        "DELETE FROM items_fts; DELETE FROM items; DELETE FROM files; DELETE FROM dirs;
         DELETE FROM meta WHERE key = 'last_full_scan_ns';",
    )
}

fn known_files(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<HashMap<String, FileStat>> {
    let mut stmt = tx.prepare_cached("SELECT path, size, mtime_ns, ino FROM files")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get(0)?,
            FileStat {
                size: r.get(1)?,
                mtime_ns: r.get(2)?,
                ino: r.get(3)?,
            },
        ))
    })?;
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

fn is_indexed(conn: &rusqlite::Connection, rel: &str) -> rusqlite::Result<bool> {
    conn.query_row("SELECT 1 FROM files WHERE path = ?1", [rel], |_| Ok(()))
        .optional()
        .map(|r| r.is_some())
}

/// Re-checks one file: re-indexes it if it changed, removes it if gone.
fn refresh_one(
    tx: &rusqlite::Transaction<'_>,
    root: &Path,
    tz: &TimeZone,
    rel: &str,
    report: &mut SyncReport,
) -> Result<(), StoreError> {
    let known: Option<FileStat> = tx
        .query_row(
            "SELECT size, mtime_ns, ino FROM files WHERE path = ?1",
            [rel],
            |r| {
                Ok(FileStat {
                    size: r.get(0)?,
                    mtime_ns: r.get(1)?,
                    ino: r.get(2)?,
                })
            },
        )
        .optional()?;
    match std::fs::metadata(root.join(rel)) {
        Ok(meta) if meta.is_file() => {
            let Some((kind, day)) = files::classify(rel) else {
                return Ok(());
            };
            let stat = FileStat::of(&meta);
            if known.as_ref() != Some(&stat) {
                index_file(tx, root, tz, rel, kind, day.as_deref(), &stat, report)?;
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

fn remove_file(tx: &rusqlite::Transaction<'_>, rel: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM items_fts WHERE rowid IN (SELECT id FROM items WHERE path = ?1)",
        [rel],
    )?;
    tx.execute("DELETE FROM items WHERE path = ?1", [rel])?;
    tx.execute("DELETE FROM files WHERE path = ?1", [rel])?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn index_file(
    tx: &rusqlite::Transaction<'_>,
    root: &Path,
    tz: &TimeZone,
    rel: &str,
    kind: FileKind,
    file_day: Option<&str>,
    stat: &FileStat,
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
    let bytes = match std::fs::read(root.join(rel)) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.warnings.push(format!("cannot read {rel}: {e}"));
            return Ok(());
        }
    };
    let hash = fnv1a64(&bytes) as i64;
    let stored: Option<(i64, i64, i64)> = tx
        .query_row(
            "SELECT size, hash, lines FROM files WHERE path = ?1",
            [rel],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    // A file that only grew at the end (an appended note) keeps its indexed
    // items; only the new ones are added.
    let appended_after = match stored {
        Some((old_size, old_hash, old_lines))
            if (old_size as usize) < bytes.len()
                && fnv1a64(&bytes[..old_size as usize]) as i64 == old_hash =>
        {
            Some(old_lines as usize)
        }
        _ => None,
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            report.warnings.push(format!(
                "{rel} is not valid UTF-8; unreadable bytes are indexed as U+FFFD"
            ));
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
    };
    let lines = text.lines().count() as i64;
    if stored.is_some_and(|(_, old_hash, _)| old_hash == hash) {
        // Touched but unchanged: remember the new stat only.
        tx.execute(
            "UPDATE files SET size = ?2, mtime_ns = ?3, ino = ?4 WHERE path = ?1",
            params![rel, stat.size, stat.mtime_ns, stat.ino],
        )?;
        return Ok(());
    }
    let blocks = notes::parse_blocks(&text);
    // Appending must not have extended the old last item (a continuation
    // line); then the old items are still exact.
    let keep_before = appended_after.filter(|&old_lines| {
        !blocks
            .iter()
            .any(|b| b.start_line <= old_lines && b.end_line > old_lines)
    });
    match keep_before {
        Some(_) => {
            tx.execute(
                "UPDATE files SET size = ?2, mtime_ns = ?3, ino = ?4, hash = ?5, lines = ?6 WHERE path = ?1",
                params![rel, stat.size, stat.mtime_ns, stat.ino, hash, lines],
            )?;
        }
        None => {
            remove_file(tx, rel)?;
            tx.execute(
                "INSERT INTO files (path, kind, day, size, mtime_ns, ino, hash, lines)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    rel,
                    kind.as_str(),
                    file_day,
                    stat.size,
                    stat.mtime_ns,
                    stat.ino,
                    hash,
                    lines
                ],
            )?;
        }
    }
    let first_new_line = keep_before.map_or(0, |old_lines| old_lines + 1);
    let mut insert_item = tx.prepare_cached(
        "INSERT INTO items (path, start_line, end_line, kind, stamp, day, ts, heading, body, norm_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    let mut insert_fts = tx.prepare_cached(
        "INSERT INTO items_fts (rowid, terms, heading_terms) VALUES (?1, ?2, ?3)",
    )?;
    let mut days = DayCache::default();
    for block in blocks
        .into_iter()
        .filter(|b| b.start_line >= first_new_line)
    {
        let item_kind = match block.kind {
            BlockKind::Heading { .. } => continue,
            BlockKind::Item => "item",
            BlockKind::Line => "line",
        };
        let stamp = block.stamp.as_ref().map(|s| s.display());
        let day = block
            .stamp
            .as_ref()
            .and_then(|s| s.date.clone())
            .or_else(|| file_day.map(str::to_string));
        let time = block.stamp.as_ref().and_then(|s| s.time.as_deref());
        let ts = day.as_deref().and_then(|d| days.timestamp(d, time, tz));
        let heading = block.heading_path.join(" > ");
        let norm_hash = fnv1a64(normalized_for_dedupe(&block.body).as_bytes()) as i64;
        insert_item.execute(params![
            rel,
            block.start_line as i64,
            block.end_line as i64,
            item_kind,
            stamp,
            day,
            ts,
            heading,
            block.body,
            norm_hash
        ])?;
        let id = tx.last_insert_rowid();
        insert_fts.execute(params![
            id,
            terms::index_terms(&block.body),
            terms::index_terms(&heading)
        ])?;
        report.items_indexed += 1;
    }
    report.files_indexed += 1;
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

#[cfg(test)]
mod tests;
