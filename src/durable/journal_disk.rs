//! How a journal reaches its file and the disk, and what it tells of its
//! health: the seam a journal takes (the product's is the file itself),
//! the wait between retries of a failed sync, and the error writers get
//! while the journal cannot be synced.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The file operations a journal makes that can fail on a sick disk.
/// [`FileDisk`] does them; a test wraps them to fail on demand.
pub(crate) trait JournalDisk: Send + Sync + std::fmt::Debug + 'static {
    /// Writes `bytes` at the end of `file` (opened to append).
    fn append(&self, file: &mut File, bytes: &[u8]) -> io::Result<()>;
    /// Writes `bytes` at `offset` of `file` (opened to write in place).
    fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()>;
    /// Makes what was written to `file` durable.
    fn sync(&self, file: &File) -> io::Result<()>;
}

/// The real file: `write(2)`, `pwrite(2)`, `fdatasync(2)`.
#[derive(Debug, Default)]
pub(crate) struct FileDisk;

impl JournalDisk for FileDisk {
    fn append(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
        file.write_all_at(bytes, offset)
    }

    fn sync(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }
}

/// Waits that double from `first` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Between retries of a failed sync: 100 ms doubling to 5 s, so a
    /// disk that heals is used again within seconds, and a dead one costs
    /// one attempt every 5 s.
    pub(crate) const SYNC_RETRY: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(5),
    };

    /// The wait after the `failures`-th failure in a row (the first is 1).
    pub(crate) fn delay(self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// What a journal is opened with: the product's defaults are the real
/// file and [`Backoff::SYNC_RETRY`].
#[derive(Debug, Clone)]
pub(crate) struct JournalOptions {
    pub disk: Arc<dyn JournalDisk>,
    pub retry: Backoff,
}

impl Default for JournalOptions {
    fn default() -> JournalOptions {
        JournalOptions {
            disk: Arc::new(FileDisk),
            retry: Backoff::SYNC_RETRY,
        }
    }
}

/// How a journal's syncs stand, as its watchers see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SyncHealth {
    /// Why the journal cannot take records (its last sync or write
    /// failed, and no sync has succeeded since); `None` when it can.
    pub failing: Option<String>,
    /// How many times it started failing: an episode runs from a failure
    /// to the next good sync.
    pub episodes: u64,
}

/// A record refused because its journal cannot be synced: the write is
/// not tried, so nothing unsynced is acknowledged after a known failure.
/// It travels inside an [`io::Error`]; [`NotSynced::of`] finds it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} cannot be synced to the disk ({reason}); nothing is written to it until a sync succeeds", path.display())]
pub(crate) struct NotSynced {
    pub path: PathBuf,
    pub reason: String,
}

impl NotSynced {
    /// The journal failure `err` is, if it is one.
    pub(crate) fn of(err: &io::Error) -> Option<&NotSynced> {
        err.get_ref()?.downcast_ref()
    }

    pub(crate) fn into_io(self) -> io::Error {
        io::Error::other(self)
    }
}

#[cfg(test)]
pub(crate) use faulty::FaultyDisk;

#[cfg(test)]
mod faulty {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::*;

    /// The real file with faults switched on and off by a test: syncs
    /// that fail with EIO, writes that fail with ENOSPC half way through
    /// (leaving a torn line, as a full disk can).
    #[derive(Debug, Default)]
    pub(crate) struct FaultyDisk {
        fail_syncs: AtomicBool,
        fail_writes: AtomicBool,
        failed_syncs: AtomicU64,
        /// The file's length when the last good sync began: what the
        /// disk is known to hold.
        synced_len: AtomicU64,
        /// Each in-place write: (offset, length).
        written_at: Mutex<Vec<(u64, usize)>>,
    }

    impl FaultyDisk {
        pub(crate) fn fail_syncs(&self, on: bool) {
            self.fail_syncs.store(on, Ordering::SeqCst);
        }

        pub(crate) fn fail_writes(&self, on: bool) {
            self.fail_writes.store(on, Ordering::SeqCst);
        }

        pub(crate) fn failed_syncs(&self) -> u64 {
            self.failed_syncs.load(Ordering::SeqCst)
        }

        pub(crate) fn synced_len(&self) -> u64 {
            self.synced_len.load(Ordering::SeqCst)
        }

        pub(crate) fn written_at(&self) -> Vec<(u64, usize)> {
            self.written_at.lock().unwrap().clone()
        }

        /// Options over this disk whose retries come at once (1 ms), so a
        /// test waits for what happens, never for the clock.
        pub(crate) fn options(self: &Arc<Self>) -> JournalOptions {
            JournalOptions {
                disk: self.clone(),
                retry: Backoff {
                    first: Duration::from_millis(1),
                    max: Duration::from_millis(1),
                },
            }
        }
    }

    fn no_space() -> io::Error {
        io::Error::from_raw_os_error(libc::ENOSPC)
    }

    impl JournalDisk for FaultyDisk {
        fn append(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
            if self.fail_writes.load(Ordering::SeqCst) {
                file.write_all(&bytes[..bytes.len() / 2])?;
                return Err(no_space());
            }
            file.write_all(bytes)
        }

        fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
            if self.fail_writes.load(Ordering::SeqCst) {
                return Err(no_space());
            }
            self.written_at.lock().unwrap().push((offset, bytes.len()));
            file.write_all_at(bytes, offset)
        }

        fn sync(&self, file: &File) -> io::Result<()> {
            if self.fail_syncs.load(Ordering::SeqCst) {
                self.failed_syncs.fetch_add(1, Ordering::SeqCst);
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let len = file.metadata()?.len();
            file.sync_data()?;
            self.synced_len.store(len, Ordering::SeqCst);
            Ok(())
        }
    }
}
