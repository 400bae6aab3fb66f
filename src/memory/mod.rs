//! Session memory: the Markdown memory files of a memory root (the
//! workspace by default) and the derived index that searches them.
//!
//! Files (canonical, human-editable; see [`files`]): `MEMORY.md` for
//! long-term notes, `memory/YYYY-MM-DD.md` for daily notes (Arka's `daily/`
//! is read too), `memory/archive/` for entries pruned from `MEMORY.md`.
//! Each note is a list item `- [YYYY-MM-DD HH:MM] text` in the user's time
//! zone; the file date and the stamp come from the same instant.
//!
//! Invariants:
//! * Every write to the memory root happens under one lock per root
//!   (`<state>/locks/memory-<key>.lock`) and through `durable`: notes are
//!   appended and synced before they are acknowledged; new files are
//!   created atomically; `MEMORY.md` is rewritten only by atomic replace,
//!   after pruned entries are safely in the archive.
//! * Nothing is deleted: pruned entries go to the archive, cleared files to
//!   the trash under the state directory. Only stamped entries are pruned;
//!   every other line of `MEMORY.md` keeps its place.
//! * No file or folder is read or written through a symlink leaving the
//!   root unless `memory.allowSymlinkTargets` allows where it leads
//!   ([`files::Layout::check`], [`Memory::check`]).
//! * The index ([`index`]) is derived; search and context work from it and
//!   bring it up to date first.

pub(crate) mod context;
pub(crate) mod embed;
pub(crate) mod entities;
pub(crate) mod files;
pub(crate) mod index;
pub(crate) mod sanitize;
pub(crate) mod terms;
pub(crate) mod when;
pub(crate) mod write;

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;

use crate::config::SessionMemoryConfig;
use crate::store::StoreError;

/// One memory root with its settings.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    pub root: PathBuf,
    pub settings: SessionMemoryConfig,
    /// Whether notes are checked for prompt injection before storing.
    pub gate: bool,
    pub index_path: PathBuf,
    pub lock_path: PathBuf,
    pub trash_root: PathBuf,
    /// The user's time zone: stamps and file dates are written in it.
    pub tz: TimeZone,
    /// More Markdown the index covers (absolute paths).
    pub extra_paths: Vec<PathBuf>,
    /// Real paths outside the root that memory files and folders may be
    /// symlinks into (`memory.allowSymlinkTargets`, resolved).
    pub allow_symlink_targets: Vec<PathBuf>,
}

/// Live counts for `status` and the activity heartbeat.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryStats {
    pub long_term_path: PathBuf,
    pub long_term_exists: bool,
    pub long_term_lines: usize,
    pub long_term_max_lines: usize,
    pub daily_files: usize,
}

impl Memory {
    /// The long-term file (`MEMORY.md`, or an existing `memory.md`).
    pub(crate) fn long_term_path(&self) -> PathBuf {
        files::long_term_path(&self.root)
    }

    /// Root-relative `/`-separated form of a path under the root.
    pub(crate) fn rel(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/")
    }

    /// Runs `f` holding the memory root's write lock.
    pub(crate) fn with_lock<T>(&self, f: impl FnOnce() -> T) -> std::io::Result<T> {
        crate::durable::with_file_lock(&self.lock_path, f)
    }

    /// The files the index covers, and problems with the extra paths.
    pub(crate) fn layout(&self) -> (files::Layout, Vec<String>) {
        let (layout, warnings) = files::Layout::with_extra(&self.root, &self.extra_paths);
        (
            layout.with_allowed_targets(&self.allow_symlink_targets),
            warnings,
        )
    }

    /// Whether the root-relative `rel` of the standard layout may be
    /// written or read (see [`files::Layout::check`]).
    pub(crate) fn check(&self, rel: &str) -> Result<(), files::Escape> {
        files::Layout::new(&self.root)
            .with_allowed_targets(&self.allow_symlink_targets)
            .check(rel)
    }

    /// Opens the index (not synced), with warnings about the extra paths.
    pub(crate) fn open_index(&self) -> Result<(index::Index, Vec<String>), StoreError> {
        let (layout, warnings) = self.layout();
        Ok((
            index::Index::open(&self.index_path, layout, self.tz.clone())?,
            warnings,
        ))
    }

    /// [`Memory::open_index`] for a connection kept between searches:
    /// `held` again when it is still the index it would open
    /// ([`index::Index::is_current`]), else a new one sized for keeping
    /// ([`index::Index::keep_for_searches`]).
    pub(crate) fn reopen_index(
        &self,
        held: Option<index::Index>,
    ) -> Result<(index::Index, Vec<String>), StoreError> {
        let (layout, warnings) = self.layout();
        if let Some(index) = held
            && index.is_current(&self.index_path, &layout, &self.tz)
        {
            return Ok((index, warnings));
        }
        let index = index::Index::open(&self.index_path, layout, self.tz.clone())?;
        index.keep_for_searches()?;
        Ok((index, warnings))
    }

    /// Opens the index and brings it up to date (quick sync).
    pub(crate) fn synced_index(
        &self,
        now_ns: i64,
    ) -> Result<(index::Index, index::SyncReport), StoreError> {
        self.synced_index_with(index::SyncMode::Quick, now_ns)
    }

    /// [`Memory::synced_index`] with the sync mode chosen by the caller.
    pub(crate) fn synced_index_with(
        &self,
        mode: index::SyncMode,
        now_ns: i64,
    ) -> Result<(index::Index, index::SyncReport), StoreError> {
        let (mut idx, warnings) = self.open_index()?;
        let mut report = idx.sync(mode, now_ns)?;
        report.warnings.splice(0..0, warnings);
        Ok((idx, report))
    }

    /// Counts read from the files now (never a stale snapshot).
    pub(crate) fn stats(&self) -> MemoryStats {
        MemoryStats {
            daily_files: self.daily_file_count(),
            ..self.stats_without_daily()
        }
    }

    /// The number of daily files. When the index listed `memory/` and
    /// `daily/` at their current modification times, its count is exact
    /// and far cheaper than listing thousands of files; otherwise the
    /// directories are listed.
    pub(crate) fn daily_file_count(&self) -> usize {
        index::Index::daily_count_if_current(&self.index_path, &self.root)
            .unwrap_or_else(|| files::count_daily_files(&self.root))
    }

    /// [`Memory::stats`] without listing the daily directories
    /// (`daily_files` is 0), for callers that know the count already.
    pub(crate) fn stats_without_daily(&self) -> MemoryStats {
        let path = self.long_term_path();
        let (exists, lines) = match std::fs::read(&path) {
            Ok(bytes) => (true, count_lines(&bytes)),
            Err(_) => (false, 0),
        };
        MemoryStats {
            long_term_path: path,
            long_term_exists: exists,
            long_term_lines: lines,
            long_term_max_lines: self.settings.long_term_max_lines as usize,
            daily_files: 0,
        }
    }
}

/// Physical lines of a file, counted the way editors do (a final line
/// without a newline still counts).
pub(crate) fn count_lines(bytes: &[u8]) -> usize {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    if bytes.last().is_some_and(|&b| b != b'\n') {
        newlines + 1
    } else {
        newlines
    }
}

/// `text` on one line, whitespace collapsed, cut to `max` characters.
pub(crate) fn preview(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(max) {
        Some((cut, _)) => collapsed[..cut].to_string(),
        None => collapsed,
    }
}

/// `text` cut to at most `max` characters at a word boundary, with `…`
/// when something was cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let head = &text[..cut];
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space > cut / 2 => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_counts() {
        for (text, want) in [("", 0), ("a", 1), ("a\n", 1), ("# L\n\n", 2), ("a\nb", 2)] {
            assert_eq!(count_lines(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn previews_and_snippets() {
        assert_eq!(preview("a\n  b\tc", 120), "a b c");
        assert_eq!(preview(&"x".repeat(200), 120).len(), 120);
        assert_eq!(preview("喜欢站会", 2), "喜欢");
        assert_eq!(snippet("short", 10), "short");
        assert_eq!(snippet("one two three four five", 12), "one two…");
        assert_eq!(snippet(&"y".repeat(30), 10), format!("{}…", "y".repeat(10)));
    }
}
