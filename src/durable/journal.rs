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

use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

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
}

#[derive(Debug, Default)]
struct SyncState {
    dirty: bool,
    closing: bool,
    /// The syncer sleeps on the condition variable (a busy one looks at
    /// `dirty` when its fsync ends: waking it again would only cost a
    /// system call per record).
    asleep: bool,
    #[cfg(test)]
    syncs: u64,
    /// When each fsync started.
    #[cfg(test)]
    sync_starts: Vec<std::time::Instant>,
}

impl Journal {
    /// Opens (creating 0600, in a private directory) the journal at `path`.
    /// A torn last line from a crash is closed with a newline first, so the
    /// next record starts on a line of its own.
    pub(crate) fn open(path: &Path) -> io::Result<Journal> {
        let mut file = super::open_for_append(path, super::PRIVATE_FILE_MODE)?;
        super::append_on_fresh_line(&mut file, b"")?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            state: Mutex::new(SyncState::default()),
            wake: Condvar::new(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
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
    pub(crate) fn append_lines(&self, bytes: &[u8]) -> io::Result<()> {
        debug_assert!(bytes.is_empty() || bytes.ends_with(b"\n"));
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(bytes)?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.dirty = true;
        if state.asleep {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Syncs what was written, now.
    pub(crate) fn sync(&self) -> io::Result<()> {
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.dirty = false;
            #[cfg(test)]
            state.sync_starts.push(std::time::Instant::now());
        }
        let file = self
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .try_clone()?;
        file.sync_data()?;
        #[cfg(test)]
        {
            self.state.lock().unwrap_or_else(|p| p.into_inner()).syncs += 1;
        }
        Ok(())
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
        Ok(true)
    }

    /// Opens the journal's path again when the file held is no longer the
    /// one there (an atomic rewrite replaced it, or it was removed); returns
    /// whether it did. Writers of a journal that may be rewritten call this
    /// under the lock the rewriter takes, before appending, so no record
    /// goes to a file nobody reads any more.
    pub(crate) fn reopen_if_replaced(&self) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
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
        *file = fresh;
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
    /// next, so a record waits for the disk about one fsync at most.
    /// Returns after [`Journal::close`] with everything synced. Run it on
    /// a thread of its own (it blocks); idle, it costs nothing.
    pub(crate) fn run_syncer(&self) -> io::Result<()> {
        let mut last_began: Option<std::time::Instant> = None;
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
            self.sync()?;
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
mod tests {
    use super::*;

    #[test]
    fn appended_records_are_readable_before_any_sync_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j/intake.jsonl");
        let journal = Journal::open(&path).unwrap();
        journal.append(br#"{"n":1}"#).unwrap();
        journal.append(br#"{"n":2}"#).unwrap();
        // Another reader sees both at once: they are in the OS, unsynced.
        let (lines, bad) = read_journal(&path, |l| {
            serde_json::from_slice::<serde_json::Value>(l).ok()
        })
        .unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(bad, 0);
        assert_eq!(journal.syncs(), 0);
        drop(journal);
        // A crash mid-write leaves a torn line; reopening closes it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"n":"#)
            .unwrap();
        let journal = Journal::open(&path).unwrap();
        journal.append(br#"{"n":3}"#).unwrap();
        let (lines, bad) = read_journal(&path, |l| {
            serde_json::from_slice::<serde_json::Value>(l).ok()
        })
        .unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(bad, 1);
    }

    #[test]
    fn a_journal_replaced_by_an_atomic_rewrite_is_reopened_before_the_next_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let journal = Journal::open(&path).unwrap();
        journal.append(br#"{"n":1}"#).unwrap();
        assert!(
            !journal.reopen_if_replaced().unwrap(),
            "still the same file"
        );
        crate::durable::atomic_replace(&path, b"{\"n\":2}\n", 0o600).unwrap();
        assert!(journal.reopen_if_replaced().unwrap());
        journal.append(br#"{"n":3}"#).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"n\":2}\n{\"n\":3}\n",
            "the record went to the file at the path, not the replaced one"
        );
    }

    #[test]
    fn the_syncer_syncs_what_was_written_and_stops_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let journal = std::sync::Arc::new(Journal::open(&dir.path().join("j")).unwrap());
        let syncer = {
            let j = journal.clone();
            std::thread::spawn(move || j.run_syncer())
        };
        journal.append(b"{}").unwrap();
        journal.close();
        syncer.join().unwrap().unwrap();
        assert!(
            journal.syncs() >= 1,
            "the record written before close was synced"
        );
    }

    #[test]
    fn fsyncs_start_at_most_once_per_spacing_however_fast_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let journal = std::sync::Arc::new(Journal::open(&dir.path().join("j")).unwrap());
        let syncer = {
            let j = journal.clone();
            std::thread::spawn(move || j.run_syncer())
        };
        // Each record comes after the sync before it ended: a syncer that
        // synced each at once would start one fsync per record.
        for _ in 0..5 {
            let before = journal.syncs();
            journal.append(b"{}").unwrap();
            let waiting = std::time::Instant::now();
            while journal.syncs() == before {
                assert!(waiting.elapsed() < std::time::Duration::from_secs(10));
                std::thread::yield_now();
            }
        }
        journal.close();
        syncer.join().unwrap().unwrap();
        let starts = journal.state.lock().unwrap().sync_starts.clone();
        assert!(starts.len() >= 5, "{starts:?}");
        for pair in starts.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= SYNC_SPACING, "fsyncs {gap:?} apart");
        }
    }

    #[test]
    fn a_held_lock_excludes_a_second_taker_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.lock");
        let first = try_lock_file(&path).unwrap().expect("free");
        assert!(try_lock_file(&path).unwrap().is_none());
        drop(first);
        assert!(try_lock_file(&path).unwrap().is_some());
    }
}
