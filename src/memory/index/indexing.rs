//! Writing the index: one file (re-)indexed, its appended tail read
//! alone, its items inserted or deleted (the counts of very common terms
//! kept with them), a file removed, and the inverted indexes' segments
//! merged and folded.

use std::collections::HashMap;
use std::path::Path;

use almanac_markdown::notes::{self, Block, BlockKind};
use almanac_markdown::retain;
use jiff::tz::TimeZone;
use rusqlite::{OptionalExtension, params};

use super::{MAX_FILE_BYTES, SyncReport, TAIL_WINDOW};
use crate::memory::files::{self, FileKind};
use crate::memory::{entities, terms};
use crate::paths::{fnv1a64, fnv1a64_extend};
use crate::store::StoreError;

/// Size, modification time and inode: a file is re-read when any differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileStat {
    size: i64,
    mtime_ns: i64,
    ino: i64,
}

impl FileStat {
    /// Reads `size, mtime_ns, ino` from columns `first..first + 3`.
    pub(super) fn from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<FileStat> {
        Ok(FileStat {
            size: r.get(first)?,
            mtime_ns: r.get(first + 1)?,
            ino: r.get(first + 2)?,
        })
    }

    pub(super) fn of(meta: &std::fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len() as i64,
            mtime_ns: files::mtime_ns(meta),
            ino: files::inode(meta),
        }
    }
}

pub(super) fn clear_all(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "INSERT INTO items_fts (items_fts) VALUES ('delete-all');
         INSERT INTO headings_fts (headings_fts) VALUES ('delete-all');
         DELETE FROM mentions; DELETE FROM facts; DELETE FROM vectors;
         DELETE FROM items; DELETE FROM files;
         DELETE FROM dirs; DELETE FROM term_docs; UPDATE totals SET items = 0, terms = 0;
         DELETE FROM meta WHERE key = 'last_full_scan_ns';",
    )
}

pub(super) fn known_files(
    tx: &rusqlite::Transaction<'_>,
) -> rusqlite::Result<HashMap<String, FileStat>> {
    let mut stmt = tx.prepare_cached("SELECT path, size, mtime_ns, ino FROM files")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, FileStat::from_row(r, 1)?)))?;
    rows.collect()
}

/// `path → inode` of the files indexed directly in `dir`.
pub(super) fn indexed_in_dir(
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
pub(super) fn refresh_one(
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
pub(super) const FTS_TABLES: [&str; 2] = ["items_fts", "headings_fts"];
/// Segments an inverted index may have after a full scan (a build leaves
/// one; notes appended since add a few).
pub(super) const MAX_SEGMENTS: i64 = 3;

/// After a small write: merges segments of the same level (two suffice,
/// see the index migrations), a bounded amount of work, so the segments
/// that every term lookup reads grow with the log of what was appended
/// rather than with each write.
pub(super) fn merge_small_segments(
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
pub(super) fn fold_segments(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
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
pub(super) fn segments(conn: &rusqlite::Connection, table: &str) -> i64 {
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

pub(super) fn remove_file(tx: &rusqlite::Transaction<'_>, rel: &str) -> rusqlite::Result<()> {
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
pub(super) fn index_file(
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
