//! The outbox: `<state dir>/outbox/outbox.jsonl`, one JSON entry a line,
//! `{id, ts, source, sessionKey, agentId, text, taskId?, to?, channel?,
//! accountId?}` (`ts` in epoch
//! ms).
//!
//! * **Ids.** A decimal number in a string, strictly increasing in file
//!   order: `max(last + 1, ts · 1000)`, where `last` is the id of the
//!   file's last entry. Tying ids to the clock keeps them increasing when
//!   pruning has emptied the file (an entry 30 days old has an id far
//!   below any new one), and 1,000 ids a millisecond leave room for
//!   bursts. A stream resumes after an id by comparing numbers.
//! * **Writers** (the gateway, commands) take `outbox.lock` for choosing
//!   the id and writing the line, which is one `write(2)` on an
//!   `O_APPEND` file: lines never tear or interleave, and an entry is in
//!   the OS before its writer returns. A line torn by a crash is closed
//!   first, so the next entry starts on a line of its own.
//! * **Pruning** drops the entries older than [`RETENTION_MS`] from the
//!   head (entries are in append order), rewriting the file atomically
//!   under the same lock; the rest stays byte for byte. When the first
//!   line is recent, it reads that line and nothing more.
//! * **Readers** take no lock and create nothing; a torn or corrupt line
//!   is skipped and counted. [`Reader`] follows the file across appends
//!   and rewrites, never returning an entry twice or skipping one.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Item, Source};
use crate::durable::{self, Journal};

/// The outbox file's name in the outbox folder.
pub(crate) const FILE_NAME: &str = "outbox.jsonl";
/// The writers' lock.
const LOCK_NAME: &str = "outbox.lock";
/// How long an entry is kept: 30 days.
pub(crate) const RETENTION_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// How much of the file's end is read first when looking for the last id.
const TAIL_CHUNK: u64 = 64 * 1024;

/// One outbox entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    pub id: String,
    /// Epoch milliseconds.
    pub ts: i64,
    pub source: Source,
    pub session_key: String,
    pub agent_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The chat channel and account of a chat's route (`to` is the chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

impl Entry {
    /// The id as a number (every entry read has a numeric id).
    pub(crate) fn seq(&self) -> u64 {
        self.id.parse().unwrap_or(0)
    }
}

/// One line as an entry; `None` for a torn or corrupt line, or an id that
/// is not a number.
pub(crate) fn parse_line(line: &[u8]) -> Option<Entry> {
    let entry: Entry = serde_json::from_slice(line).ok()?;
    entry.id.parse::<u64>().ok()?;
    Some(entry)
}

/// The id of an entry written at `ts_ms` after one numbered `last`.
pub(crate) fn next_id(last: u64, ts_ms: i64) -> u64 {
    let floor = u64::try_from(ts_ms).unwrap_or(0).saturating_mul(1000);
    last.saturating_add(1).max(floor)
}

/// Which file a position is in (pruning replaces the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// A byte offset in one version of the outbox file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    file: FileId,
    offset: u64,
}

/// An entry as its writer appended it, with where its line lies.
#[derive(Debug, Clone)]
pub(crate) struct Appended {
    pub entry: Entry,
    /// The file's end before the line.
    pub before: Position,
    /// The file's end after it.
    pub after: Position,
}

/// A writer of the outbox.
#[derive(Debug)]
pub(crate) struct Outbox {
    dir: PathBuf,
    journal: Journal,
    /// The file's length and last id after this writer's last append: the
    /// next append need not read the file's end when nobody else wrote.
    known: Mutex<Option<(u64, u64)>>,
}

impl Outbox {
    /// Opens the outbox in `dir` for writing, creating the folder (0700)
    /// and the file (0600).
    pub(crate) fn open(dir: &Path) -> io::Result<Outbox> {
        Outbox::open_with(dir, durable::JournalOptions::default())
    }

    /// [`Outbox::open`] with the file's disk and retry waits.
    pub(crate) fn open_with(dir: &Path, options: durable::JournalOptions) -> io::Result<Outbox> {
        Ok(Outbox {
            dir: dir.to_path_buf(),
            journal: Journal::open_with(&dir.join(FILE_NAME), options)?,
            known: Mutex::new(None),
        })
    }

    /// The journal, for its group-commit thread.
    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }

    pub(crate) fn path(&self) -> &Path {
        self.journal.path()
    }

    /// The id of the file's last entry (0 when it has none).
    pub(crate) fn last_id(&self) -> io::Result<u64> {
        let _lock = durable::lock_file(&self.dir.join(LOCK_NAME))?;
        self.journal.reopen_if_replaced()?;
        let file = File::open(self.path())?;
        let len = file.metadata()?.len();
        Ok(last_line_id(&file, len)?.0.unwrap_or(0))
    }

    /// Writes `item` as an entry stamped `ts_ms`, with an id above both
    /// the file's last and `above`. The line is in the OS when this
    /// returns (on the disk at the next group commit, or [`Journal::sync`]);
    /// while the file cannot be synced nothing is written and the error
    /// is [`durable::NotSynced`].
    pub(crate) fn append(&self, item: &Item, ts_ms: i64, above: u64) -> io::Result<Appended> {
        let _lock = durable::lock_file(&self.dir.join(LOCK_NAME))?;
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if self.journal.reopen_if_replaced()? {
            *known = None;
        }
        let file = File::open(self.path())?;
        let meta = file.metadata()?;
        let len = meta.len();
        let (last, on_fresh_line) = match *known {
            Some((at, last)) if at == len => (Some(last), true),
            _ => last_line_id(&file, len)?,
        };
        let id = next_id(last.unwrap_or(0).max(above), ts_ms);
        let entry = Entry {
            id: id.to_string(),
            ts: ts_ms,
            source: item.source,
            session_key: item.session_key.clone(),
            agent_id: item.agent_id.clone(),
            text: item.text.clone(),
            task_id: item.task_id.clone(),
            to: item.to.clone(),
            channel: item.channel.clone(),
            account_id: item.account_id.clone(),
        };
        let mut line = Vec::with_capacity(item.text.len() + 160);
        if !on_fresh_line {
            // A line torn by a crashed writer: ours starts on a new one.
            line.push(b'\n');
        }
        serde_json::to_writer(&mut line, &entry).map_err(io::Error::other)?;
        self.journal.append(&line)?;
        let end = len + line.len() as u64 + 1;
        *known = Some((end, id));
        let file = FileId::of(&meta);
        Ok(Appended {
            entry,
            before: Position { file, offset: len },
            after: Position { file, offset: end },
        })
    }
}

/// The id of the last readable line among the first `len` bytes of `file`
/// (reading back from the end, more at a time until one is found), and
/// whether those bytes end with a newline.
fn last_line_id(file: &File, len: u64) -> io::Result<(Option<u64>, bool)> {
    if len == 0 {
        return Ok((None, true));
    }
    let mut last_byte = [0u8; 1];
    file.read_exact_at(&mut last_byte, len - 1)?;
    let on_fresh_line = last_byte[0] == b'\n';
    let mut chunk = TAIL_CHUNK;
    loop {
        let start = len.saturating_sub(chunk);
        let mut buf = vec![0u8; (len - start) as usize];
        file.read_exact_at(&mut buf, start)?;
        // Lines wholly inside the buffer: the first piece may be the end
        // of a line that began before it.
        let whole: &[u8] = if start == 0 {
            &buf
        } else {
            match buf.iter().position(|b| *b == b'\n') {
                Some(i) => &buf[i + 1..],
                None => &[],
            }
        };
        if let Some(id) = whole
            .split(|b| *b == b'\n')
            .rev()
            .find_map(|line| parse_line(line).map(|e| e.seq()))
        {
            return Ok((Some(id), on_fresh_line));
        }
        if start == 0 {
            return Ok((None, on_fresh_line));
        }
        chunk = chunk.saturating_mul(4);
    }
}

/// Appends `item` to the outbox in `dir` from a process without a
/// gateway (a command): the same lock and ids as the gateway's writer,
/// and synced to the disk before it returns.
pub(crate) fn append_synced(dir: &Path, item: &Item, ts_ms: i64) -> io::Result<Entry> {
    let outbox = Outbox::open(dir)?;
    let appended = outbox.append(item, ts_ms, 0)?;
    outbox.journal.sync()?;
    Ok(appended.entry)
}

/// Every readable entry of the outbox in `dir`, oldest first, and how
/// many lines could not be read. Creates nothing.
pub(crate) fn read_all(dir: &Path) -> io::Result<(Vec<Entry>, usize)> {
    durable::read_journal(&dir.join(FILE_NAME), parse_line)
}

/// Drops the entries older than [`RETENTION_MS`] at `now_ms` from the head
/// of the outbox in `dir`, with any unreadable lines among them; returns
/// how many entries went. Reads only the first line when it is recent.
pub(crate) fn prune(dir: &Path, now_ms: i64) -> io::Result<usize> {
    let path = dir.join(FILE_NAME);
    let cutoff = now_ms.saturating_sub(RETENTION_MS);
    if !head_may_be_old(&path, cutoff)? {
        return Ok(0);
    }
    let _lock = durable::lock_file(&dir.join(LOCK_NAME))?;
    let Some(bytes) = durable::read_if_exists(&path)? else {
        return Ok(0);
    };
    let (cut, dropped, unreadable) = old_head(&bytes, cutoff);
    if cut == 0 {
        return Ok(0);
    }
    durable::atomic_replace(&path, &bytes[cut..], durable::PRIVATE_FILE_MODE)?;
    if unreadable > 0 {
        tracing::warn!(
            path = %path.display(),
            unreadable,
            "pruning dropped unreadable lines at the head of the outbox"
        );
    }
    Ok(dropped)
}

/// Whether the first line of the outbox is older than `cutoff` or cannot
/// be read (then the whole head needs a look).
fn head_may_be_old(path: &Path, cutoff: i64) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut first = Vec::new();
    io::BufReader::new(file).read_until(b'\n', &mut first)?;
    if first.is_empty() {
        return Ok(false);
    }
    Ok(parse_line(&first).is_none_or(|e| e.ts < cutoff))
}

/// Where the kept part of `bytes` starts: after the leading lines that
/// are entries older than `cutoff`, blank or unreadable. Also how many
/// entries and unreadable lines that drops.
fn old_head(bytes: &[u8], cutoff: i64) -> (usize, usize, usize) {
    let (mut pos, mut dropped, mut unreadable) = (0, 0, 0);
    while pos < bytes.len() {
        let end = bytes[pos..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| pos + i + 1);
        let line = &bytes[pos..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            match parse_line(line) {
                Some(entry) if entry.ts >= cutoff => break,
                Some(_) => dropped += 1,
                None => unreadable += 1,
            }
        }
        pos = end;
    }
    (pos, dropped, unreadable)
}

/// What one look at the file found.
#[derive(Debug, Default)]
pub(crate) struct Polled {
    /// New entries, in file order.
    pub entries: Vec<Entry>,
    /// Lines that could not be read (torn or corrupt), skipped.
    pub unreadable: usize,
}

/// What a reader makes of an entry a writer announced.
#[derive(Debug, PartialEq)]
pub(crate) enum Announced {
    /// The next entry after what was read: nothing else to read.
    Next(Box<Entry>),
    /// Already read (or before the starting point).
    Seen,
    /// Something came before it that was not read: read the file.
    Gap,
}

/// Follows the outbox file: each [`Reader::poll`] returns the entries
/// written since the one before, in order, across appends by any process
/// and rewrites by pruning; an entry is never returned twice (ids only
/// go up) and never skipped.
#[derive(Debug)]
pub(crate) struct Reader {
    path: PathBuf,
    /// Where the lines read so far end (complete lines only).
    at: Option<Position>,
    /// The highest id returned, or the one to start after.
    last: Option<u64>,
}

impl Reader {
    /// A reader of the outbox file at `path` returning entries after the
    /// id `after` (all of them when `None`).
    pub(crate) fn new(path: PathBuf, after: Option<u64>) -> Reader {
        Reader {
            path,
            at: None,
            last: after,
        }
    }

    /// The highest id returned so far (or the starting point).
    #[cfg(test)]
    pub(crate) fn last(&self) -> Option<u64> {
        self.last
    }

    /// Reads what was written since the last look. A missing file is an
    /// empty one; a replaced file (pruning) is read from its start,
    /// skipping what was returned before.
    pub(crate) fn poll(&mut self) -> io::Result<Polled> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Polled::default()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let (id, len) = (FileId::of(&meta), meta.len());
        let start = match self.at {
            Some(p) if p.file == id && p.offset <= len => p.offset,
            _ => 0,
        };
        let mut polled = Polled::default();
        if start == len {
            self.at = Some(Position {
                file: id,
                offset: len,
            });
            return Ok(polled);
        }
        let mut bytes = Vec::with_capacity((len - start) as usize);
        io::Seek::seek(&mut file, io::SeekFrom::Start(start))?;
        file.take(len - start).read_to_end(&mut bytes)?;
        // Only whole lines: a line still being written (or torn) is read
        // once its newline is there.
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..whole].split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(line) {
                Some(entry) => {
                    let seq = entry.seq();
                    if self.last.is_none_or(|last| seq > last) {
                        self.last = Some(seq);
                        polled.entries.push(entry);
                    }
                }
                None => polled.unreadable += 1,
            }
        }
        self.at = Some(Position {
            file: id,
            offset: start + whole as u64,
        });
        Ok(polled)
    }

    /// Takes an entry its writer announced: when its line starts where
    /// this reader's reading ends, it is the next one and the file need
    /// not be read.
    pub(crate) fn announced(&mut self, appended: &Appended) -> Announced {
        let seq = appended.entry.seq();
        if self.at == Some(appended.before) {
            self.at = Some(appended.after);
            if self.last.is_none_or(|last| seq > last) {
                self.last = Some(seq);
                return Announced::Next(Box::new(appended.entry.clone()));
            }
            return Announced::Seen;
        }
        if self.last.is_some_and(|last| seq <= last) {
            Announced::Seen
        } else {
            Announced::Gap
        }
    }
}

#[cfg(test)]
mod tests;
