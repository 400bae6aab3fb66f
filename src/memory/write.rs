//! Writing memory: appending notes, pruning `MEMORY.md` into the archive,
//! and clearing into the trash.
//!
//! Crash safety, step by step (a kill -9 at any point loses nothing that
//! was acknowledged, and never leaves a partial line):
//! * a note is one synced append to an existing file, or an atomic create
//!   of a new file that already contains it;
//! * pruning appends the pruned entries to the archive (synced) first, then
//!   replaces `MEMORY.md` atomically; a crash in between leaves the entries
//!   in both places, and the next prune does not archive them twice;
//! * clearing moves files into the trash (rename), then writes a fresh
//!   `MEMORY.md` header.

use std::path::{Path, PathBuf};

use almanac_markdown::notes::{self, BlockKind};
use jiff::ZonedDateTime;

use super::{Memory, count_lines, preview};
use crate::durable::{self, PRIVATE_FILE_MODE};

/// The header of a new `MEMORY.md` (as Arka creates it).
pub const LONG_TERM_HEADER: &str = "# Long-term memory\n\n";

#[derive(Debug, Clone)]
pub struct AppendRequest<'a> {
    pub text: &'a str,
    /// Store as a long-term note (`MEMORY.md`).
    pub long_term: bool,
    /// With `long_term`, also keep it in today's daily file.
    pub also_daily: bool,
    /// Store even if the note looks like a prompt injection.
    pub force: bool,
}

/// Where a note was written.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenNote {
    pub path: String,
    pub line: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneOutcome {
    pub entries: usize,
    pub archives: Vec<String>,
    pub lines_after: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendOutcome {
    /// The note's first 120 characters on one line.
    pub preview: String,
    pub stamp: String,
    pub written: Vec<WrittenNote>,
    pub pruned: Option<PruneOutcome>,
    /// The injection pattern a forced note matched.
    pub forced_past: Option<&'static str>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("Session memory disabled (SESSION_MEMORY=0).")]
    Disabled,
    #[error("Memory blocked: empty")]
    Empty,
    #[error(
        "Memory blocked: the note has {chars} characters; the limit is {limit} (memory.session.maxNoteChars)"
    )]
    TooLong { chars: usize, limit: usize },
    #[error("Memory blocked: Blocked suspicious instruction in prompt: {label}")]
    Blocked { label: &'static str },
    #[error("cannot write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> AppendError + '_ {
    move |source| AppendError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Stores one note. The caller refreshes the index and pings the
/// heartbeat afterwards.
pub fn append(
    memory: &Memory,
    req: &AppendRequest<'_>,
    now: &ZonedDateTime,
) -> Result<AppendOutcome, AppendError> {
    if !memory.settings.enabled {
        return Err(AppendError::Disabled);
    }
    let normalized = almanac_markdown::normalize_newlines(req.text);
    let text = normalized.trim();
    if text.is_empty() {
        return Err(AppendError::Empty);
    }
    let chars = text.chars().count();
    let limit = memory.settings.max_note_chars as usize;
    if chars > limit {
        return Err(AppendError::TooLong { chars, limit });
    }
    let finding = if memory.gate {
        super::sanitize::scan(text)
    } else {
        None
    };
    if let Some(finding) = finding
        && !req.force
    {
        return Err(AppendError::Blocked {
            label: finding.label,
        });
    }

    let local = now.with_time_zone(memory.tz.clone());
    let stamp = local.strftime("%Y-%m-%d %H:%M").to_string();
    let date = local.strftime("%Y-%m-%d").to_string();
    let entry = notes::format_note(&stamp, text);
    let long_term = req.long_term || memory.settings.auto_long_term;
    let daily = !long_term || req.also_daily;

    let lock_err = io_err(&memory.lock_path);
    memory
        .with_lock(|| -> Result<AppendOutcome, AppendError> {
            let mut written = Vec::new();
            if daily {
                let rel = super::files::daily_rel(&date);
                let path = memory.root.join(&rel);
                let header = format!("# {date}\n\n");
                let line = append_entry(&path, &header, &entry)?;
                written.push(WrittenNote { path: rel, line });
            }
            let mut pruned = None;
            if long_term {
                let path = memory.long_term_path();
                let line = append_entry(&path, LONG_TERM_HEADER, &entry)?;
                written.push(WrittenNote {
                    path: memory.rel(&path),
                    line,
                });
                pruned = prune_long_term(memory, &local)?;
            }
            Ok(AppendOutcome {
                preview: preview(text, 120),
                stamp: stamp.clone(),
                written,
                pruned,
                forced_past: finding.map(|f| f.label),
            })
        })
        .map_err(lock_err)?
}

/// Appends `entry` to `path`, creating the file with `header` first if it
/// does not exist. Returns the 1-based line the entry starts on.
fn append_entry(path: &Path, header: &str, entry: &str) -> Result<usize, AppendError> {
    let existing = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path)(e)),
    };
    if existing.is_none() {
        let content = format!("{header}{entry}");
        if durable::atomic_create(path, content.as_bytes(), PRIVATE_FILE_MODE)
            .map_err(io_err(path))?
        {
            return Ok(count_lines(header.as_bytes()) + 1);
        }
    }
    let before = match existing {
        Some(bytes) => bytes,
        // Someone else created it between our read and our create.
        None => std::fs::read(path).map_err(io_err(path))?,
    };
    // A torn last line (no newline) counts as a line, and `locked_append`
    // starts the entry on the next one, so the number is the same.
    let line = count_lines(&before) + 1;
    durable::locked_append(path, entry.as_bytes(), PRIVATE_FILE_MODE, true)
        .map_err(io_err(path))?;
    Ok(line)
}

/// Prunes whole entries, oldest (first in the file) first, until
/// `MEMORY.md` fits its line limit. Headings, free text and blank-line
/// structure stay; pruned entries are appended to
/// `memory/archive/MEMORY-<year>.md` before `MEMORY.md` is replaced.
pub fn prune_long_term(
    memory: &Memory,
    now: &ZonedDateTime,
) -> Result<Option<PruneOutcome>, AppendError> {
    let path = memory.long_term_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    let max = memory.settings.long_term_max_lines as usize;
    let Some(plan) = plan_prune(&text, max) else {
        return Ok(None);
    };
    // 1. Archive, grouped by year, skipping entries already archived by an
    //    earlier prune that did not get to replace MEMORY.md.
    let this_year = now.strftime("%Y").to_string();
    let mut by_year: Vec<(String, Vec<&str>)> = Vec::new();
    for entry in &plan.removed {
        let year = entry.year.clone().unwrap_or_else(|| this_year.clone());
        match by_year.iter_mut().find(|(y, _)| *y == year) {
            Some((_, list)) => list.push(&entry.text),
            None => by_year.push((year, vec![&entry.text])),
        }
    }
    let mut archives = Vec::new();
    for (year, entries) in by_year {
        let rel = format!("memory/archive/MEMORY-{year}.md");
        let archive = memory.root.join(&rel);
        let existing = std::fs::read_to_string(&archive).unwrap_or_default();
        let fresh: String = entries
            .into_iter()
            .filter(|e| !existing.contains(*e))
            .collect();
        if !fresh.is_empty() {
            let header = format!(
                "# Long-term memory archive {year}\n\nEntries pruned from MEMORY.md, oldest first.\n\n"
            );
            append_entry(&archive, &header, &fresh)?;
        }
        archives.push(rel);
    }
    // 2. Replace MEMORY.md.
    durable::atomic_replace(&path, plan.kept.as_bytes(), PRIVATE_FILE_MODE)
        .map_err(io_err(&path))?;
    Ok(Some(PruneOutcome {
        entries: plan.removed.len(),
        archives,
        lines_after: count_lines(plan.kept.as_bytes()),
    }))
}

#[derive(Debug)]
struct RemovedEntry {
    text: String,
    year: Option<String>,
}

#[derive(Debug)]
struct PrunePlan {
    kept: String,
    removed: Vec<RemovedEntry>,
}

/// Decides which entries to remove so `text` has at most `max` lines.
fn plan_prune(text: &str, max: usize) -> Option<PrunePlan> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.len() <= max {
        return None;
    }
    let mut excess = lines.len() - max;
    let mut remove = vec![false; lines.len()];
    let mut removed = Vec::new();
    for block in notes::parse_blocks(text) {
        if excess == 0 {
            break;
        }
        if block.kind != BlockKind::Item {
            continue;
        }
        let (start, end) = (block.start_line - 1, block.end_line - 1);
        let mut freed = end - start + 1;
        for flag in &mut remove[start..=end] {
            *flag = true;
        }
        // Drop one blank line the entry leaves between two other blanks or
        // at a section's end, so the file does not fill with gaps.
        let blank = |i: usize| lines.get(i).is_some_and(|l| l.trim().is_empty());
        if blank(end + 1)
            && (start == 0 || blank(start - 1) || remove[start - 1])
            && !remove[end + 1]
        {
            remove[end + 1] = true;
            freed += 1;
        }
        excess = excess.saturating_sub(freed);
        removed.push(RemovedEntry {
            text: lines[start..=end].concat(),
            year: block.stamp.and_then(|s| s.date).map(|d| d[..4].to_string()),
        });
    }
    if removed.is_empty() {
        return None;
    }
    let kept: String = lines
        .iter()
        .zip(&remove)
        .filter(|(_, r)| !**r)
        .map(|(l, _)| *l)
        .collect();
    Some(PrunePlan { kept, removed })
}

/// What `clear` removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClearScope {
    Daily,
    LongTerm,
    All,
}

impl ClearScope {
    pub fn as_str(self) -> &'static str {
        match self {
            ClearScope::Daily => "daily",
            ClearScope::LongTerm => "long_term",
            ClearScope::All => "all",
        }
    }

    /// Parses a scope, accepting Arka's aliases.
    pub fn parse(text: &str) -> Option<ClearScope> {
        match text.trim().to_ascii_lowercase().as_str() {
            "daily" => Some(ClearScope::Daily),
            "long_term" | "longterm" | "long-term" | "memory" | "lt" => Some(ClearScope::LongTerm),
            "all" => Some(ClearScope::All),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClearOutcome {
    pub scope: ClearScope,
    /// Daily files moved to the trash.
    pub daily: usize,
    /// Whether MEMORY.md was reset.
    pub long_term: bool,
    /// Where the cleared files are (absent when nothing was moved).
    pub trash: Option<PathBuf>,
    pub moved: Vec<String>,
}

/// Moves the daily files and/or `MEMORY.md` into a new folder of the trash
/// and starts a fresh `MEMORY.md`.
///
/// `before` (a `YYYY-MM-DD` date) limits the daily files cleared to older
/// ones (retention); it is ignored for `MEMORY.md`.
pub fn clear(
    memory: &Memory,
    scope: ClearScope,
    before: Option<&str>,
    now: &ZonedDateTime,
) -> std::io::Result<ClearOutcome> {
    memory.with_lock(|| {
        let stamp = now.timestamp().strftime("%Y%m%dT%H%M%SZ").to_string();
        let mut trash = memory
            .trash_root
            .join(format!("{stamp}-session-memory-{}", scope.as_str()));
        let mut n = 1;
        while trash.exists() {
            n += 1;
            trash = memory
                .trash_root
                .join(format!("{stamp}-session-memory-{}-{n}", scope.as_str()));
        }
        let mut moved = Vec::new();
        let mut daily = 0;
        if matches!(scope, ClearScope::Daily | ClearScope::All) {
            for rel in daily_files(&memory.root, before) {
                durable::move_file(&memory.root.join(&rel), &trash.join(&rel))?;
                moved.push(rel);
                daily += 1;
            }
        }
        let mut long_term = false;
        if matches!(scope, ClearScope::LongTerm | ClearScope::All) {
            let path = memory.long_term_path();
            let exists = path.exists();
            if exists {
                let rel = memory.rel(&path);
                durable::move_file(&path, &trash.join(&rel))?;
                moved.push(rel);
            }
            // Arka resets MEMORY.md for `long_term` even when it is missing,
            // but for `all` only when it existed.
            if exists || scope == ClearScope::LongTerm {
                durable::atomic_replace(
                    &memory.root.join("MEMORY.md"),
                    LONG_TERM_HEADER.as_bytes(),
                    PRIVATE_FILE_MODE,
                )?;
                long_term = true;
            }
        }
        Ok(ClearOutcome {
            scope,
            daily,
            long_term,
            trash: (!moved.is_empty()).then_some(trash),
            moved,
        })
    })?
}

/// Root-relative paths of the daily note files (`memory/` and `daily/`),
/// only those dated before `before` when given.
fn daily_files(root: &Path, before: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["memory", "daily"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if let Some(name) = entry.file_name().to_str()
                && is_file
                && let Some(date) = notes::daily_file_date(name)
                && before.is_none_or(|b| date < b)
            {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
pub(crate) mod tests;
