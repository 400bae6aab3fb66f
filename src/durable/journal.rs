//! An append-only log with group commit, and held file locks.
//!
//! [`Journal::append`] hands a record to the OS before it returns (a
//! `write(2)` of one whole line under the journal's mutex), so a record
//! survives a kill -9 of the process the moment its writer is answered.
//! fsync is batched: [`Journal::run_syncer`] waits until something was
//! written and syncs at once; under a steady stream, fsyncs start every
//! [`SYNC_SPACING`] (8 ms), each covering everything written since the
//! one before, so a record is on the disk within 10 ms of its write while
//! an fsync takes under 2 ms. A power loss costs at most the records of
//! that window. Readers skip a torn last line.
//!
//! A failed sync or write never goes unnoticed: the journal is then
//! failing ([`Journal::health`]; logged once per episode), refuses every
//! record with [`NotSynced`] before writing it (one atomic load on the
//! writer's path), and its syncer retries with [`Backoff::SYNC_RETRY`].
//! The retry first writes again what was written since the last good
//! sync (a failed writeback can leave those pages clean in the cache,
//! where a later fsync would skip them) and, after a failed write, a
//! newline that closes a torn line and shows the disk takes writes
//! again; once its fsync succeeds, the journal takes records again.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::watch;

use super::journal_disk::{Backoff, JournalDisk, JournalOptions, NotSynced, SyncHealth};

/// The time between the starts of two fsyncs while records keep coming:
/// a record waits for the disk at most this plus one fsync, which keeps
/// the window a power loss can cost within 10 ms.
pub(crate) const SYNC_SPACING: std::time::Duration = std::time::Duration::from_millis(8);

/// An append-only file of JSON lines.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    /// Written since the last fsync, and whether the journal is closing.
    state: Mutex<SyncState>,
    wake: Condvar,
    /// Held for a whole sync: two never overlap, so a sync that began
    /// before a failure cannot end it without the failing one's repair.
    syncing: Mutex<()>,
    disk: Arc<dyn JournalDisk>,
    retry: Backoff,
    /// Set from a failed sync or write to the next good sync: the one
    /// thing a writer looks at before writing.
    failing: AtomicBool,
    health: watch::Sender<SyncHealth>,
}

#[derive(Debug, Default)]
struct SyncState {
    dirty: bool,
    closing: bool,
    /// The syncer sleeps on the condition variable (a busy one looks at
    /// `dirty` when its fsync ends: waking it again would only cost a
    /// system call per record).
    asleep: bool,
    /// The file's length when the last good sync began: what is past it
    /// may not be on the disk.
    synced_to: u64,
    /// A write failed since the last good sync: the file may end in part
    /// of a line.
    write_failed: bool,
    #[cfg(test)]
    syncs: u64,
    /// When each fsync started.
    #[cfg(test)]
    sync_starts: Vec<std::time::Instant>,
}

impl Journal {
    /// Opens (creating 0600, in a private directory) the journal at
    /// `path`, over `options`' disk and retry waits (the product's are
    /// [`JournalOptions::default`]). A torn last line from a crash is
    /// closed with a newline first, so the next record starts on a line
    /// of its own.
    pub(crate) fn open_with(path: &Path, options: JournalOptions) -> io::Result<Journal> {
        let mut file = super::open_for_append(path, super::PRIVATE_FILE_MODE)?;
        super::append_on_fresh_line(&mut file, b"")?;
        let synced_to = file.metadata()?.len();
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            state: Mutex::new(SyncState {
                synced_to,
                ..SyncState::default()
            }),
            wake: Condvar::new(),
            syncing: Mutex::new(()),
            disk: options.disk,
            retry: options.retry,
            failing: AtomicBool::new(false),
            health: watch::Sender::new(SyncHealth::default()),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the journal refuses records now (its last sync or write
    /// failed).
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Acquire)
    }

    /// How its syncs stand, followed as they change.
    pub(crate) fn health(&self) -> watch::Receiver<SyncHealth> {
        self.health.subscribe()
    }

    /// Writes `line` (a newline is added) to the OS in one write. The
    /// syncer is told; the caller does not wait for the disk.
    pub(crate) fn append(&self, line: &[u8]) -> io::Result<()> {
        self.append_all(&[line])
    }

    /// Writes `lines` (each gets a newline) to the OS in one write, for a
    /// batch that must not interleave with other writers' syncs line by
    /// line.
    pub(crate) fn append_all(&self, lines: &[&[u8]]) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        self.append_lines(&bytes)
    }

    /// Writes `bytes`, whole lines each ending in a newline, to the OS in
    /// one write (for a caller that built them in one buffer already).
    /// While the journal is failing nothing is written and the error is
    /// [`NotSynced`]; a write that fails makes it failing.
    pub(crate) fn append_lines(&self, bytes: &[u8]) -> io::Result<()> {
        debug_assert!(bytes.is_empty() || bytes.ends_with(b"\n"));
        // One atomic load: a refused record takes no lock.
        if self.failing() {
            return Err(self.not_synced());
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = self.disk.append(&mut file, bytes) {
            drop(file);
            self.failed(
                &format!("cannot write {}: {err}", self.path.display()),
                true,
            );
            return Err(self.not_synced());
        }
        drop(file);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.dirty = true;
        if state.asleep {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// The error a refused record gets.
    fn not_synced(&self) -> io::Error {
        let reason = self
            .health
            .borrow()
            .failing
            .clone()
            .unwrap_or_else(|| "a sync failed".to_string());
        NotSynced {
            path: self.path.clone(),
            reason,
        }
        .into_io()
    }

    /// Syncs what was written, now. A failure makes the journal failing
    /// (and wakes the syncer to retry); after one, this is the retry: it
    /// repairs the file first (see the module doc), and its success makes
    /// the journal take records again.
    pub(crate) fn sync(&self) -> io::Result<()> {
        let _one_at_a_time = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let (synced_to, write_failed) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.dirty = false;
            #[cfg(test)]
            state.sync_starts.push(std::time::Instant::now());
            (state.synced_to, state.write_failed)
        };
        let covered = self
            .sync_covering(synced_to, write_failed)
            .inspect_err(|err| {
                self.failed(
                    &format!("cannot sync {}: {err}", self.path.display()),
                    false,
                )
            })?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.synced_to = covered;
        state.write_failed = false;
        #[cfg(test)]
        {
            state.syncs += 1;
        }
        if self.failing.swap(false, Ordering::AcqRel) {
            tracing::info!(path = %self.path.display(), "journal synced again; it takes records again");
            self.health.send_modify(|h| h.failing = None);
        }
        Ok(())
    }

    /// One fsync (after the repair a failure calls for); the file's
    /// length it covers.
    fn sync_covering(&self, synced_to: u64, write_failed: bool) -> io::Result<u64> {
        let (file, covered) = {
            let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
            if self.failing() {
                if write_failed {
                    // Closes a torn line; a full disk refuses it.
                    self.disk.append(&mut file, b"\n")?;
                }
                self.write_again(&file, synced_to)?;
            }
            (file.try_clone()?, file.metadata()?.len())
        };
        self.disk.sync(&file)?;
        Ok(covered)
    }

    /// Writes the bytes of `held` past `from` again, in place, so the
    /// next fsync writes them out whatever a failed writeback did to
    /// their pages. `held` appends (a positioned write would land at its
    /// end), so they go through another opening of the same file; when
    /// the path holds another file now, its rewriter made it durable.
    fn write_again(&self, held: &File, from: u64) -> io::Result<()> {
        let held_meta = held.metadata()?;
        let len = held_meta.len();
        if from >= len {
            return Ok(());
        }
        let again = match OpenOptions::new().write(true).open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let meta = again.metadata()?;
        if (meta.dev(), meta.ino()) != (held_meta.dev(), held_meta.ino()) {
            return Ok(());
        }
        let mut bytes = vec![0u8; (len - from) as usize];
        held.read_exact_at(&mut bytes, from)?;
        self.disk.write_at(&again, &bytes, from)
    }

    /// Records a failure: the journal refuses records until a sync
    /// succeeds, the syncer is woken to retry, and the first failure of
    /// an episode is logged.
    fn failed(&self, reason: &str, write: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.dirty = true;
        state.write_failed |= write;
        let began = !self.failing.swap(true, Ordering::AcqRel);
        if began {
            tracing::error!(path = %self.path.display(), error = %reason, "journal failing: its records are refused until a sync succeeds");
        }
        self.health.send_if_modified(|h| {
            let changed = began || h.failing.as_deref() != Some(reason);
            h.failing = Some(reason.to_string());
            h.episodes += u64::from(began);
            changed
        });
        if state.asleep {
            self.wake.notify_one();
        }
    }

    /// Empties the journal when `all_consumed` says, under the journal's
    /// lock, that every record in it was consumed; returns whether it did.
    /// Keeps the log from growing without end. The emptying reaches the
    /// disk with the next [`Journal::sync`], which the caller makes once
    /// it holds no lock writers wait for (a power loss before it leaves
    /// consumed records, which readers skip).
    pub(crate) fn truncate_if(&self, all_consumed: impl FnOnce() -> bool) -> io::Result<bool> {
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if !all_consumed() {
            return Ok(false);
        }
        file.set_len(0)?;
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .synced_to = 0;
        Ok(true)
    }

    /// Opens the journal's path again when the file held is no longer the
    /// one there (an atomic rewrite replaced it, or it was removed); returns
    /// whether it did. Writers of a journal that may be rewritten call this
    /// under the lock the rewriter takes, before appending, so no record
    /// goes to a file nobody reads any more.
    pub(crate) fn reopen_if_replaced(&self) -> io::Result<bool> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let held = file.metadata()?;
        match std::fs::metadata(&self.path) {
            Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => return Ok(false),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut fresh = super::open_for_append(&self.path, super::PRIVATE_FILE_MODE)?;
        super::append_on_fresh_line(&mut fresh, b"")?;
        // The rewriter synced what the new file holds.
        let len = fresh.metadata()?.len();
        *file = fresh;
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .synced_to = len;
        Ok(true)
    }

    /// Bytes in the journal now.
    pub(crate) fn size_bytes(&self) -> io::Result<u64> {
        Ok(self
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .metadata()?
            .len())
    }

    /// How many fsyncs ran.
    #[cfg(test)]
    pub(crate) fn syncs(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).syncs
    }

    /// The group-commit loop: sleeps until something is written, then
    /// syncs at once; what is written during one fsync is covered by the
    /// next, so a record waits for the disk about one fsync at most. A
    /// failed sync is retried after the journal's backoff, for as long as
    /// it takes. Returns after [`Journal::close`] with everything synced,
    /// or the error of the last try. Run it on a thread of its own (it
    /// blocks); idle, it costs nothing.
    pub(crate) fn run_syncer(&self) -> io::Result<()> {
        let mut last_began: Option<std::time::Instant> = None;
        let mut failures = 0u32;
        loop {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            while !state.dirty && !state.closing {
                // `append` notifies under this lock: no wake-up is lost.
                state.asleep = true;
                state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                state.asleep = false;
            }
            if state.closing && !state.dirty {
                return Ok(());
            }
            // Under a steady stream of records, fsyncs start at most every
            // SYNC_SPACING, each covering everything written since the
            // last: far fewer fsyncs for the same window. Meanwhile the
            // syncer is not asleep, so writers do not wake it record by
            // record.
            let rest = last_began.and_then(|at| SYNC_SPACING.checked_sub(at.elapsed()));
            if let Some(rest) = rest.filter(|_| !state.closing) {
                state = self
                    .wake
                    .wait_timeout_while(state, rest, |s| !s.closing)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            drop(state);
            last_began = Some(std::time::Instant::now());
            let Err(err) = self.sync() else {
                failures = 0;
                continue;
            };
            failures = failures.saturating_add(1);
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.closing {
                return Err(err);
            }
            // Writers are refused meanwhile; closing cuts the wait short
            // for a last try.
            let _ = self
                .wake
                .wait_timeout_while(state, self.retry.delay(failures), |s| !s.closing);
        }
    }

    /// Ends [`Journal::run_syncer`] after a last sync.
    pub(crate) fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.closing = true;
        state.asleep = false;
        self.wake.notify_all();
    }
}

/// The complete lines of a journal file, parsed by `parse`; a torn or
/// unparsable line is counted, not fatal. A missing file reads as empty.
pub(crate) fn read_journal<T>(
    path: &Path,
    mut parse: impl FnMut(&[u8]) -> Option<T>,
) -> io::Result<(Vec<T>, usize)> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut bad = 0;
    for line in io::BufReader::new(file).split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse(&line) {
            Some(v) => out.push(v),
            None => bad += 1,
        }
    }
    Ok((out, bad))
}

/// An exclusive advisory lock held until dropped (the gateway's instance
/// lock, a session's turn lock). The file stays; only the lock goes.
#[derive(Debug)]
pub(crate) struct HeldLock {
    file: File,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Takes the lock on `path` (created 0600), waiting for another holder.
pub(crate) fn lock_file(path: &Path) -> io::Result<HeldLock> {
    let file = super::open_for_append(path, super::PRIVATE_FILE_MODE)?;
    file.lock()?;
    Ok(HeldLock { file })
}

/// Takes the lock on `path` if nobody holds it; `None` when another
/// process (or another open of the file) does.
pub(crate) fn try_lock_file(path: &Path) -> io::Result<Option<HeldLock>> {
    let file = super::open_for_append(path, super::PRIVATE_FILE_MODE)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(HeldLock { file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
