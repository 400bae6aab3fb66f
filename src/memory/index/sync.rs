//! Bringing the index up to date: the sync modes (quick, full, watched,
//! a rebuild), what a quick sync looks at, and re-reading files almanac
//! just wrote.

use std::collections::{BTreeSet, HashMap, HashSet};

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::indexing::{
    FileStat, clear_all, fold_segments, index_file, indexed_in_dir, known_files,
    merge_small_segments, refresh_one, remove_file,
};
use super::{
    BIG_WRITE_ITEMS, FULL_SCAN_INTERVAL_NS, HOT_DAYS, HOT_TOPICS, Index, SyncMode, SyncReport,
};
use crate::memory::files::{self, FileKind};
use crate::store::StoreError;

impl Index {
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

#[derive(Default)]
struct QuickPlan {
    paths: BTreeSet<String>,
    dirs: Vec<(String, Option<i64>)>,
}
