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
//! * every file an append will touch is checked before anything is
//!   written: a long-term file that is not UTF-8, or a file reached through
//!   a symlink leaving the memory root, refuses the note with nothing
//!   written; once the note is stored, a prune that cannot run is a
//!   warning, never a failure (a retry would store the note twice).
//!
//! Pruning `MEMORY.md` moves only stamped entries — list items whose stamp
//! has a date (`- [YYYY-MM-DD HH:MM] …`, `- [YYYY-MM-DD] …`) with their
//! continuation lines — oldest stamp first, wherever they stand. Every
//! other line (headings, labels, unstamped items, paragraphs, blank lines,
//! code) keeps its place and order; the entry just appended is never moved.
//! When that cannot bring the file under its limit, the outcome says so.
//! * clearing moves files into the trash (rename), then writes a fresh
//!   `MEMORY.md` header.

use std::path::{Path, PathBuf};

use almanac_markdown::notes::{self, BlockKind};
use jiff::ZonedDateTime;

use super::files::Escape;
use super::{Memory, count_lines, preview};
use crate::durable::{self, PRIVATE_FILE_MODE};

/// The header of a new `MEMORY.md` (as Arka creates it).
pub(crate) const LONG_TERM_HEADER: &str = "# Long-term memory\n\n";

#[derive(Debug, Clone)]
pub(crate) struct AppendRequest<'a> {
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
pub(crate) struct WrittenNote {
    pub path: String,
    pub line: usize,
}

/// What a prune of the long-term file did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PruneOutcome {
    /// The long-term file, relative to the memory root (`MEMORY.md`).
    pub file: String,
    /// Entries moved, in all.
    pub entries: usize,
    /// Where they went, one archive per year of their stamps.
    pub moves: Vec<PruneMove>,
    pub lines_before: usize,
    pub lines_after: usize,
    /// `memory.session.longTermMaxLines`.
    pub max_lines: usize,
    /// Still over `maxLines`: the rest is not stamped entries.
    pub over_limit: bool,
}

/// Entries moved to one archive.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PruneMove {
    /// The archive, relative to the memory root.
    pub to: String,
    pub entries: usize,
}

impl PruneOutcome {
    /// One line per archive: `Moved 3 entries from MEMORY.md to
    /// memory/archive/MEMORY-2024.md`.
    pub(crate) fn moved_lines(&self) -> Vec<String> {
        self.moves
            .iter()
            .map(|m| {
                format!(
                    "Moved {} {} from {} to {}",
                    m.entries,
                    if m.entries == 1 { "entry" } else { "entries" },
                    self.file,
                    m.to
                )
            })
            .collect()
    }

    /// The warning when the file stays over its limit.
    pub(crate) fn over_limit_warning(&self) -> Option<String> {
        self.over_limit.then(|| {
            format!(
                "{} has {} lines, over memory.session.longTermMaxLines ({}); only stamped entries are pruned",
                self.file, self.lines_after, self.max_lines
            )
        })
    }
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AppendOutcome {
    /// The note's first 120 characters on one line.
    pub preview: String,
    pub stamp: String,
    pub written: Vec<WrittenNote>,
    /// Set when the long-term file was over its limit (entries may have
    /// been moved, or none could be).
    pub pruned: Option<PruneOutcome>,
    /// The injection pattern a forced note matched.
    pub forced_past: Option<&'static str>,
    /// Problems after the note was stored (a prune that could not run).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum AppendError {
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
    /// A file the note would go to is reached through a symlink leaving
    /// the memory root (and `memory.allowSymlinkTargets` does not allow
    /// where it leads). Nothing was written.
    #[error("refusing to write {0}; nothing was written")]
    Outside(#[from] Escape),
    /// The long-term file is not UTF-8 text, so it could not be pruned
    /// safely. Nothing was written.
    #[error(
        "{file} is not UTF-8 text: byte 0x{byte:02X} on line {line}, column {column}; nothing was written (convert the file to UTF-8, e.g. with iconv -f latin1 -t utf-8)"
    )]
    NotUtf8 {
        file: String,
        line: usize,
        column: usize,
        byte: u8,
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
pub(crate) fn append(
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
            // Everything the note will touch is checked before anything is
            // written.
            let daily_rel = super::files::daily_rel(&date);
            if daily {
                memory.check(&daily_rel)?;
            }
            let long_term_path = memory.long_term_path();
            let long_term_rel = memory.rel(&long_term_path);
            if long_term {
                memory.check(&long_term_rel)?;
                if let Some(bytes) = read_if_exists(&long_term_path)? {
                    check_utf8(&long_term_rel, &bytes)?;
                }
            }
            let mut written = Vec::new();
            if daily {
                let path = memory.root.join(&daily_rel);
                let header = format!("# {date}\n\n");
                let line = append_entry(&path, &header, &entry)?;
                written.push(WrittenNote {
                    path: daily_rel,
                    line,
                });
            }
            let mut pruned = None;
            let mut warnings = Vec::new();
            if long_term {
                let line = append_entry(&long_term_path, LONG_TERM_HEADER, &entry)?;
                written.push(WrittenNote {
                    path: long_term_rel.clone(),
                    line,
                });
                // The note is stored: from here on, problems are warnings.
                match prune_long_term(memory, &local, Some(line)) {
                    Ok(outcome) => pruned = outcome,
                    Err(err) => warnings.push(format!(
                        "the note is stored, but {long_term_rel} was not pruned: {}",
                        error_chain(&err)
                    )),
                }
            }
            Ok(AppendOutcome {
                preview: preview(text, 120),
                stamp: stamp.clone(),
                written,
                pruned,
                forced_past: finding.map(|f| f.label),
                warnings,
            })
        })
        .map_err(lock_err)?
}

/// `err` and its causes on one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The bytes of `path`, `None` when it does not exist.
fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, AppendError> {
    durable::read_if_exists(path).map_err(io_err(path))
}

/// `bytes` as text, or where the first byte that is not UTF-8 is.
fn check_utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, AppendError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let before = &bytes[..at];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        AppendError::NotUtf8 {
            file: file.to_string(),
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            // In characters, as editors count them.
            column: String::from_utf8_lossy(&bytes[line_start..at])
                .chars()
                .count()
                + 1,
            byte: bytes[at],
        }
    })
}

/// Appends `entry` to `path`, creating the file with `header` first if it
/// does not exist. Returns the 1-based line the entry starts on.
fn append_entry(path: &Path, header: &str, entry: &str) -> Result<usize, AppendError> {
    let existing = read_if_exists(path)?;
    if existing.is_none() {
        let content = format!("{header}{entry}");
        // A dangling link (allowed by the caller) gets its target created.
        let target = durable::final_target(path).map_err(io_err(path))?;
        if durable::atomic_create(&target, content.as_bytes(), PRIVATE_FILE_MODE)
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

/// Prunes stamped entries, oldest stamp first, until `MEMORY.md` fits its
/// line limit (see the module doc); the entry starting on `keep_line` (the
/// note just appended) stays. Pruned entries are appended to
/// `memory/archive/MEMORY-<year>.md` before `MEMORY.md` is replaced.
/// `None` when the file is within its limit.
pub(crate) fn prune_long_term(
    memory: &Memory,
    now: &ZonedDateTime,
    keep_line: Option<usize>,
) -> Result<Option<PruneOutcome>, AppendError> {
    let path = memory.long_term_path();
    let file = memory.rel(&path);
    let Some(bytes) = read_if_exists(&path)? else {
        return Ok(None);
    };
    let text = check_utf8(&file, &bytes)?;
    let max = memory.settings.long_term_max_lines as usize;
    let plan = plan_prune(text, max, keep_line);
    if plan.lines_before <= max {
        return Ok(None);
    }
    let mut outcome = PruneOutcome {
        file: file.clone(),
        entries: plan.removed.len(),
        moves: Vec::new(),
        lines_before: plan.lines_before,
        lines_after: plan.lines_after,
        max_lines: max,
        over_limit: plan.lines_after > max,
    };
    if plan.removed.is_empty() {
        return Ok(Some(outcome));
    }
    // 1. Archive, grouped by year, skipping entries already archived by an
    //    earlier prune that did not get to replace MEMORY.md. Every archive
    //    is checked before any is written.
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
        memory.check(&rel)?;
        let archive = memory.root.join(&rel);
        let existing = read_if_exists(&archive)?.unwrap_or_default();
        let existing = check_utf8(&rel, &existing)?.to_string();
        archives.push((year, rel, archive, existing, entries));
    }
    for (year, rel, archive, existing, entries) in archives {
        let count = entries.len();
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
        outcome.moves.push(PruneMove {
            to: rel,
            entries: count,
        });
    }
    // 2. Replace MEMORY.md (through a symlink, its target).
    durable::atomic_replace(&path, plan.kept.as_bytes(), PRIVATE_FILE_MODE)
        .map_err(io_err(&path))?;
    Ok(Some(outcome))
}

#[derive(Debug)]
struct RemovedEntry {
    text: String,
    year: Option<String>,
}

#[derive(Debug)]
struct PrunePlan {
    kept: String,
    /// Oldest stamp first.
    removed: Vec<RemovedEntry>,
    lines_before: usize,
    lines_after: usize,
}

/// Decides which stamped entries to move so `text` has at most `max`
/// lines, oldest stamp first (ties: first in the file), never the entry
/// starting on `keep_line`. Nothing else is touched.
fn plan_prune(text: &str, max: usize, keep_line: Option<usize>) -> PrunePlan {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let unchanged = |removed| PrunePlan {
        kept: text.to_string(),
        removed,
        lines_before: lines.len(),
        lines_after: lines.len(),
    };
    // A lone carriage return is a line break to the block parser but not
    // to the line count: the two would disagree on where entries are.
    if lines.len() <= max || text.replace("\r\n", "").contains('\r') {
        return unchanged(Vec::new());
    }
    let mut candidates: Vec<(String, String, usize, usize)> = notes::parse_blocks(text)
        .into_iter()
        .filter(|b| b.kind == BlockKind::Item && Some(b.start_line) != keep_line)
        .filter(|b| is_bullet(lines[b.start_line - 1]))
        .filter_map(|b| {
            let stamp = b.stamp?;
            let date = stamp.date?;
            Some((
                date,
                stamp.time.unwrap_or_default(),
                b.start_line - 1,
                b.end_line - 1,
            ))
        })
        .collect();
    candidates.sort();
    let mut excess = lines.len() - max;
    let mut remove = vec![false; lines.len()];
    let mut removed = Vec::new();
    for (date, _, start, end) in candidates {
        if excess == 0 {
            break;
        }
        for flag in &mut remove[start..=end] {
            *flag = true;
        }
        excess = excess.saturating_sub(end - start + 1);
        removed.push(RemovedEntry {
            text: lines[start..=end].concat(),
            year: Some(date[..4].to_string()),
        });
    }
    if removed.is_empty() {
        return unchanged(removed);
    }
    let kept: String = lines
        .iter()
        .zip(&remove)
        .filter(|(_, r)| !**r)
        .map(|(l, _)| *l)
        .collect();
    let lines_after = lines.len() - remove.iter().filter(|r| **r).count();
    PrunePlan {
        kept,
        removed,
        lines_before: lines.len(),
        lines_after,
    }
}

/// Whether `line` starts a bullet item (`-`, `*` or `+`): numbered lists
/// are left alone, since moving an item would break their numbering.
fn is_bullet(line: &str) -> bool {
    line.trim_start_matches(' ').starts_with(['-', '*', '+'])
}

/// What `clear` removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ClearScope {
    Daily,
    LongTerm,
    All,
}

impl ClearScope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ClearScope::Daily => "daily",
            ClearScope::LongTerm => "long_term",
            ClearScope::All => "all",
        }
    }

    /// Parses a scope, accepting Arka's aliases.
    pub(crate) fn parse(text: &str) -> Option<ClearScope> {
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
pub(crate) struct ClearOutcome {
    pub scope: ClearScope,
    /// Daily files moved to the trash.
    pub daily: usize,
    /// Whether MEMORY.md was reset.
    pub long_term: bool,
    /// Where the cleared files are (absent when nothing was moved).
    pub trash: Option<PathBuf>,
    pub moved: Vec<String>,
    /// How to put each moved file back: move `from` to `to`.
    pub restore: Vec<Restore>,
}

/// One file moved to the trash, and where it came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Restore {
    /// Where it is now, in the trash.
    pub from: PathBuf,
    /// Where it was.
    pub to: PathBuf,
}

/// Moves the daily files and/or `MEMORY.md` into a new folder of the trash
/// and starts a fresh `MEMORY.md`.
///
/// `before` (a `YYYY-MM-DD` date) limits the daily files cleared to older
/// ones (retention); it is ignored for `MEMORY.md`.
pub(crate) fn clear(
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
            for rel in daily_files(memory, before) {
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
        let restore = moved
            .iter()
            .map(|rel| Restore {
                from: trash.join(rel),
                to: memory.root.join(rel),
            })
            .collect();
        Ok(ClearOutcome {
            scope,
            daily,
            long_term,
            trash: (!moved.is_empty()).then_some(trash),
            moved,
            restore,
        })
    })?
}

/// Root-relative paths of the daily note files (`memory/` and `daily/`),
/// only those dated before `before` when given. A folder that is a link
/// leaving the memory root is not touched.
pub(crate) fn daily_files(memory: &Memory, before: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["memory", "daily"] {
        if memory.check(dir).is_err() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(memory.root.join(dir)) else {
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
