//! Crash-safe file primitives shared by every subsystem.
//!
//! Owns every write to a canonical file. Invariants:
//!
//! * [`atomic_replace`] never leaves a partial or empty target: the new bytes
//!   go to a temporary file in the same directory, are fsynced, renamed over
//!   the target, and the directory is fsynced. A reader (or a process killed
//!   at any point) sees either the old file or the new one. A symlink stays
//!   a symlink: the file it finally points to is the one replaced (in that
//!   file's directory). Whether a link may be followed at all is the
//!   caller's decision. A large file's pages start going to disk while it
//!   is written, so that the fsync at its end waits for little.
//! * [`locked_append`] holds an exclusive advisory lock on the file for the
//!   whole write, so concurrent processes never interleave or lose lines. If
//!   an earlier writer left the file without a final newline, the append
//!   starts on a fresh line instead of gluing onto it.
//! * [`keep_as`] gives a file a second name (a hard link, else a copy)
//!   before a rename replaces it, so that the old bytes stay under that
//!   name without being written again.
//! * [`quarantine`] moves a corrupt state file aside as
//!   `<name>.corrupt-<timestamp>`; nothing is deleted, and because the file is
//!   gone afterwards, the caller's warning is shown once.
//! * [`stage`] writes a file's new content beside it; [`Staged::commit`]
//!   puts it in place as [`atomic_replace`] does, and a staged file
//!   dropped uncommitted is removed. [`scratch_file`] is an unlinked
//!   read-write file for data too large for memory: it never outlives its
//!   handle under a name a reader would take.
//! * A whole file's read-modify-write holds its lock file, named by
//!   [`lock_path_for`] (`<file>.lock`), through [`with_file_lock`].
//! * Directories created here are private (0700); files are created 0600
//!   unless the caller asks otherwise.
//!
//! * [`Journal`] is an append-only log whose records reach the OS before
//!   `append` returns and the disk within one group commit (see
//!   `journal.rs`); a journal that an atomic rewrite replaced is reopened
//!   by its writer ([`Journal::reopen_if_replaced`]) under the rewriter's
//!   lock; [`journal::HeldLock`] is an advisory lock held until dropped.
//! * A journal whose sync or write failed refuses every record with
//!   [`NotSynced`] (nothing is written, so nothing is acknowledged while
//!   it is known failing) until its syncer's retry (with backoff) has
//!   written the unsynced bytes again and synced them; [`SyncHealth`]
//!   tells its watchers, and the log says it once per episode. The file
//!   operations go through [`JournalDisk`], the real file in the product.
//!
//! Temporary files are named `.<name>.<pid>.<counter>.tmp`; a process killed
//! between create and rename can leave one behind, and every reader ignores
//! them (they start with a dot and end in `.tmp`).

mod journal;
mod journal_disk;

pub(crate) use journal::{HeldLock, Journal, lock_file, read_journal, try_lock_file};
#[cfg(test)]
pub(crate) use journal_disk::FaultyDisk;
pub(crate) use journal_disk::{JournalOptions, NotSynced, SyncHealth};

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Permission bits for directories almanac creates.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// Permission bits for files almanac creates.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates `dir` and any missing parents with mode 0700. Existing
/// directories keep their permissions: pointing almanac at a user's own
/// directory never changes it.
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
}

/// Replaces `path` with `bytes` atomically and durably.
///
/// An existing target keeps its permission bits; a new one gets `new_mode`.
/// When `path` is a symlink (or a chain of them), the link is kept and the
/// file it finally points to is replaced; a dangling link's target is
/// created.
pub(crate) fn atomic_replace(path: &Path, bytes: &[u8], new_mode: u32) -> io::Result<()> {
    atomic_replace_with(path, new_mode, |out| out.write_all(bytes))
}

/// [`atomic_replace`] with the content written by `write` as it goes (a
/// large file need not be held in memory); nothing is replaced when
/// `write` fails.
pub(crate) fn atomic_replace_with(
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    stage(path, new_mode, write)?.commit()
}

/// Writes the content of `path` (as [`atomic_replace_with`] would) to a
/// synced temporary file beside it, leaving the target untouched until
/// [`Staged::commit`]. Nothing is left behind when `write` fails.
pub(crate) fn stage(
    path: &Path,
    new_mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<Staged> {
    let target = final_target(path)?;
    let path = target.as_path();
    let parent = parent_dir(path);
    if !parent.as_os_str().is_empty() {
        create_private_dir_all(parent)?;
    }
    let mode = match fs::metadata(path) {
        Ok(meta) => meta.permissions().mode() & 0o7777,
        Err(e) if e.kind() == io::ErrorKind::NotFound => new_mode,
        Err(e) => return Err(e),
    };
    let staged = Staged {
        temp: temp_path_for(path),
        target,
        in_place: false,
    };
    write_synced_with(&staged.temp, mode, write)?;
    Ok(staged)
}

/// A file written and synced under a temporary name beside its target but
/// not yet in place: [`Staged::commit`] renames it over the target, as
/// [`atomic_replace`] does. Dropped uncommitted, it is removed, so several
/// files can be prepared and put in place only once all of them are whole.
#[derive(Debug)]
pub(crate) struct Staged {
    temp: PathBuf,
    target: PathBuf,
    in_place: bool,
}

impl Staged {
    /// Renames the staged file over its target and syncs the directory.
    pub(crate) fn commit(mut self) -> io::Result<()> {
        fs::rename(&self.temp, &self.target)?;
        self.in_place = true;
        sync_dir(parent_dir(&self.target))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.in_place {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Replaces `to` with a copy of `from` (copied by the kernel), written
/// under a temporary name and renamed into place, private, but not
/// synced: a copy the caller can do without (a power loss may leave the
/// old one, or an empty one, never a mix under the name).
pub(crate) fn replace_with_copy(from: &Path, to: &Path) -> io::Result<()> {
    let temp = temp_path_for(to);
    let copied = (|| {
        let mut source = File::open(from)?;
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE_MODE)
            .open(&temp)?;
        io::copy(&mut source, &mut out)?;
        fs::rename(&temp, to)
    })();
    if copied.is_err() {
        let _ = fs::remove_file(&temp);
    }
    copied
}

/// A read-write file for data too large to hold in memory, made in `dir`
/// (created if needed) and unlinked at once: it is gone when the handle is
/// closed, and a process killed in between leaves at most a temporary
/// file, which every reader ignores.
pub(crate) fn scratch_file(dir: &Path) -> io::Result<File> {
    create_private_dir_all(dir)?;
    let path = temp_path_for(&dir.join("scratch"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(file)
}

/// Removes the directory `dir` if it is empty and syncs its parent.
/// Returns `false` when it holds something or is not there.
pub(crate) fn remove_dir_if_empty(dir: &Path) -> io::Result<bool> {
    match fs::remove_dir(dir) {
        Ok(()) => {
            sync_dir(parent_dir(dir))?;
            Ok(true)
        }
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTEMPTY)
                || e.raw_os_error() == Some(libc::EEXIST) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Most symlinks followed in a chain before giving up (as the kernel does).
const MAX_LINK_HOPS: usize = 40;

/// The path a chain of symlinks at `path` ends at (`path` itself when it is
/// not a link). Only the last component is followed: directories on the
/// way are left to the kernel, so the result names the same file.
pub(crate) fn final_target(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&current)?;
                current = if link.is_absolute() {
                    link
                } else {
                    parent_dir(&current).join(link)
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("too many levels of symbolic links at {}", path.display()),
    ))
}

/// Writes a new file (which must not exist) with `mode` and syncs it.
fn write_synced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_synced_with(path, mode, |out| out.write_all(bytes))
}

fn write_synced_with(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    // The process umask may have narrowed the mode of the new file.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    let mut out = io::BufWriter::with_capacity(256 * 1024, EarlyWriteback { file, pending: 0 });
    write(&mut out)?;
    let out = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    count_sync();
    out.file.sync_all()
}

/// Past this many bytes written, a new file's pages start going to disk.
const WRITEBACK_EVERY: usize = 8 << 20;

/// A new file that starts going to disk while it is still being written
/// (every [`WRITEBACK_EVERY`] bytes), so that the `fsync` at its end
/// waits for little more than its last pages: a large file is durable
/// sooner after its last byte.
struct EarlyWriteback {
    file: File,
    pending: usize,
}

impl Write for EarlyWriteback {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.file.write(data)?;
        self.pending += n;
        if self.pending >= WRITEBACK_EVERY {
            self.pending = 0;
            start_writeback(&self.file);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Asks the kernel to start writing `file`'s dirty pages, without waiting.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is `file`'s, open for the whole call. A
    // refusal only loses the head start: the `fsync` writes the pages.
    let _ = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File) {}

/// Creates `path` with `bytes` atomically, only if it does not exist yet:
/// the content is written and synced under a temporary name, then linked
/// into place (which fails if another writer created the file first).
/// Returns `false`, writing nothing, when the file already exists.
pub(crate) fn atomic_create(path: &Path, bytes: &[u8], mode: u32) -> io::Result<bool> {
    let parent = parent_dir(path);
    if !parent.as_os_str().is_empty() {
        create_private_dir_all(parent)?;
    }
    let temp = temp_path_for(path);
    let result = write_synced(&temp, bytes, mode).and_then(|()| match fs::hard_link(&temp, path) {
        Ok(()) => {
            sync_dir(parent)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    });
    let _ = fs::remove_file(&temp);
    result
}

/// Writes `first` into the file at `path` (created with `mode` when
/// missing) unless the file holds bytes already, under the file's lock, as
/// [`locked_append`] takes it; returns whether it wrote. A file left empty
/// by a start cut short (a kill between its creation and its write) gets
/// `first` on the next call, and two writers starting it at once write
/// `first` once. Nothing is synced: for a file whose first synced append
/// follows at once (that sync writes `first` too) in a directory synced
/// soon after (which keeps its name); [`atomic_create`] syncs both itself.
pub(crate) fn start_unsynced(path: &Path, first: &[u8], mode: u32) -> io::Result<bool> {
    let mut file = open_for_append(path, mode)?;
    file.lock()?;
    let wrote = match file.metadata() {
        Ok(meta) if meta.len() > 0 => Ok(false),
        Ok(_) => file.write_all(first).map(|()| true),
        Err(e) => Err(e),
    };
    let _ = file.unlock();
    wrote
}

/// Makes `keep` another name of the file `path` holds now (the file a
/// symlink at `path` finally points to), replacing `keep` atomically: a
/// hard link under a temporary name renamed over `keep`, its directory
/// synced. No byte is copied: the file's bytes are already on disk. Where
/// the file system will not link (another device, no hard links), the
/// bytes are copied instead ([`atomic_replace`]). For keeping a file that
/// is about to be replaced by a rename: afterwards `keep` alone holds the
/// old bytes.
pub(crate) fn keep_as(path: &Path, keep: &Path) -> io::Result<()> {
    let source = final_target(path)?;
    let keep = final_target(keep)?;
    let temp = temp_path_for(&keep);
    let linked = fs::hard_link(&source, &temp).and_then(|()| {
        fs::rename(&temp, &keep)?;
        sync_dir(parent_dir(&keep))
    });
    match linked {
        Ok(()) => Ok(()),
        Err(_) => {
            let _ = fs::remove_file(&temp);
            atomic_replace_with(&keep, PRIVATE_FILE_MODE, |out| {
                io::copy(&mut File::open(&source)?, out).map(drop)
            })
        }
    }
}

/// Moves a file, across file systems if needed (copy, sync, then remove
/// the source), creating the destination's directory.
pub(crate) fn move_file(from: &Path, to: &Path) -> io::Result<()> {
    create_private_dir_all(parent_dir(to))?;
    match fs::rename(from, to) {
        Ok(()) => {
            sync_dir(parent_dir(to))?;
            sync_dir(parent_dir(from))
        }
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let mode = fs::metadata(from)?.permissions().mode() & 0o7777;
            let bytes = fs::read(from)?;
            atomic_replace(to, &bytes, mode)?;
            fs::remove_file(from)?;
            sync_dir(parent_dir(from))
        }
        Err(e) => Err(e),
    }
}

/// Removes the file or symlink at `path` (a link itself, never what it
/// points to) and syncs its directory. Returns `false` when there was
/// nothing to remove.
pub(crate) fn remove_if_exists(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            sync_dir(parent_dir(path))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Appends `bytes` to `path` under an exclusive advisory lock, creating the
/// file (mode `new_mode`) and its directory if needed. `sync` additionally
/// flushes the data to disk before the lock is released.
pub(crate) fn locked_append(
    path: &Path,
    bytes: &[u8],
    new_mode: u32,
    sync: bool,
) -> io::Result<()> {
    let mut file = open_for_append(path, new_mode)?;
    file.lock()?;
    let result = append_on_fresh_line(&mut file, bytes).and_then(|()| {
        if sync {
            count_sync();
            file.sync_data()
        } else {
            Ok(())
        }
    });
    let _ = file.unlock();
    result
}

fn open_for_append(path: &Path, new_mode: u32) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(new_mode)
            .open(path)
    };
    match open() {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_private_dir_all(parent_dir(path))?;
            open()
        }
        Err(e) => Err(e),
    }
}

/// Writes `bytes` at the end of `file`, first adding a newline if the file
/// is non-empty and does not end with one (a torn line from a crash).
fn append_on_fresh_line(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut needs_newline = false;
    if len > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        needs_newline = last[0] != b'\n';
    }
    if needs_newline {
        let mut joined = Vec::with_capacity(bytes.len() + 1);
        joined.push(b'\n');
        joined.extend_from_slice(bytes);
        file.write_all(&joined)
    } else {
        file.write_all(bytes)
    }
}

/// The lock file of the file at `path`: `<path>.lock` beside it
/// (`jobs.json` → `jobs.json.lock`), its name the file's name as bytes
/// with `.lock` appended. Every read-modify-write of a whole file holds
/// this lock ([`with_file_lock`]) unless it guards a folder of files.
pub(crate) fn lock_path_for(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Runs `f` while holding an exclusive lock on `lock_path` (created 0600 if
/// missing). Used for read-modify-write of whole files, which must also use
/// [`atomic_replace`] so readers without the lock never see a torn file.
pub(crate) fn with_file_lock<T>(lock_path: &Path, f: impl FnOnce() -> T) -> io::Result<T> {
    let file = open_for_append(lock_path, PRIVATE_FILE_MODE)?;
    file.lock()?;
    let value = f();
    let _ = file.unlock();
    Ok(value)
}

/// Moves a corrupt file aside as `<name>.corrupt-<UTC timestamp>` (with a
/// numeric suffix if that name is taken) and returns the new path.
pub(crate) fn quarantine(path: &Path, now: jiff::Timestamp) -> io::Result<PathBuf> {
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = parent_dir(path);
    let mut target = parent.join(format!("{name}.corrupt-{stamp}"));
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = parent.join(format!("{name}.corrupt-{stamp}-{n}"));
    }
    fs::rename(path, &target)?;
    sync_dir(parent)?;
    Ok(target)
}

/// What [`read_state_file`] found.
#[derive(Debug)]
pub(crate) enum StateFile<T> {
    /// No file yet.
    Missing,
    /// The file parsed.
    Loaded(T),
    /// The file did not parse and was moved aside to `moved_to`.
    Quarantined { moved_to: PathBuf, reason: String },
}

/// Reads a whole state file and parses it; a file that does not parse is
/// quarantined instead of failing the caller.
pub(crate) fn read_state_file<T, E: std::fmt::Display>(
    path: &Path,
    now: jiff::Timestamp,
    parse: impl FnOnce(&[u8]) -> Result<T, E>,
) -> io::Result<StateFile<T>> {
    let Some(bytes) = read_if_exists(path)? else {
        return Ok(StateFile::Missing);
    };
    match parse(&bytes) {
        Ok(value) => Ok(StateFile::Loaded(value)),
        Err(err) => {
            let moved_to = quarantine(path, now)?;
            Ok(StateFile::Quarantined {
                moved_to,
                reason: err.to_string(),
            })
        }
    }
}

/// The bytes of `path`; `None` when there is no such file.
pub(crate) fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn parent_dir(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let counter = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    parent_dir(path).join(format!(
        ".{name}.{}.{nanos:08x}{counter}.tmp",
        std::process::id()
    ))
}

/// Whether `name` is one of the temporary files [`atomic_replace`] writes.
pub(crate) fn is_temp_file_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    count_sync();
    File::open(dir)?.sync_all()
}

#[cfg(test)]
thread_local! {
    static SYNCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts a sync made here on this thread (tests read it).
fn count_sync() {
    #[cfg(test)]
    SYNCS.with(|n| n.set(n.get() + 1));
}

/// Syncs this module made on this thread so far.
#[cfg(test)]
pub(crate) fn syncs_on_this_thread() -> u64 {
    SYNCS.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests;
