//! `jobs.json`: reading it whatever shape it is in, and changing it under
//! its lock with crash-safe writes that keep what the user wrote.
//!
//! * Reading: JSON, else JSON5; `{"version":1,"jobs":[…]}`, other shapes
//!   coerced with a warning (no `jobs` list → none; `null` entries
//!   dropped); a missing file is an empty store. A job that cannot be read
//!   is kept in the file as it is and reported, never dropped. Runtime
//!   state in OpenClaw's later sidecar (`jobs-state.json`) is used for
//!   jobs whose own `state` is empty.
//! * A file that is neither JSON nor JSON5 is damaged: [`CronStore::load`]
//!   moves it aside (`jobs.json.corrupt-<time>`) and restores the last
//!   good copy, `jobs.json.bak`; [`CronStore::read`] (for commands that
//!   only read) changes nothing and shows the backup. Either way the
//!   caller gets a warning: a damaged store never reads as an empty
//!   schedule in silence.
//! * Writing: under `<store>.lock`, 2-space indent, atomic replace, skipped
//!   when the bytes are the same. Jobs nothing touched are written back
//!   exactly as they were read; a changed job keeps the order of its keys
//!   and the fields almanac does not know. Before a write that changes
//!   more than runtime fields (`state`, `updatedAtMs`), the previous file
//!   is copied to `jobs.json.bak`.
//! * The runner's reading and write-back, and a command's change of one
//!   job, addition or removal, go as a stream on a plain JSON store
//!   (`store_streamed.rs`): the same bytes, without reading the whole
//!   store into memory or writing it out from a tree.
//! * The document itself (parsing, each job beside its text, patching a
//!   changed job, serialising) is `store_document.rs`.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::CronError;
use super::index::{self, CronIndex, ListQuery, Listing};
use super::job::JobState;
use crate::durable;
pub(crate) use document::{JobFile, job_from_text};
use document::{needs_normalizing, parse_document, patch, without_runtime};

/// What a file looked like when it was read: a change to any of these
/// means someone wrote it since. Cheap to take (one `stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    pub dev: u64,
}

impl Fingerprint {
    fn of(meta: &std::fs::Metadata) -> Fingerprint {
        Fingerprint {
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            inode: meta.ino(),
            dev: meta.dev(),
        }
    }

    /// The fingerprint of `path` (of the file a symlink points to); `None`
    /// when there is no file.
    pub(crate) fn of_path(path: &Path) -> io::Result<Option<Fingerprint>> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(Fingerprint::of(&meta))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// One job store file and the derived index of it.
#[derive(Debug, Clone)]
pub(crate) struct CronStore {
    path: PathBuf,
    state_store: PathBuf,
    host_zone: jiff::tz::TimeZone,
}

/// What reading the store gave.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub file: JobFile,
    /// What the reader should be told (a damaged file, jobs that cannot
    /// be read, shapes coerced), one line each.
    pub warnings: Vec<String>,
    /// The file as it was read (`None`: there was none, or what was read
    /// is a backup shown in its place).
    pub fingerprint: Option<Fingerprint>,
    /// The file was damaged and this reading repaired it.
    pub repaired: Option<Repaired>,
}

/// A damaged store moved aside and replaced by its last good copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repaired {
    /// Why it did not parse.
    pub reason: String,
    /// Where the damaged file went (`jobs.json.corrupt-<time>`).
    pub moved_to: PathBuf,
    /// The copy put in its place (`None`: there was none; no jobs).
    pub restored_from: Option<PathBuf>,
    pub jobs: usize,
}

impl Repaired {
    /// One line saying what happened.
    pub(crate) fn describe(&self, store: &Path) -> String {
        match &self.restored_from {
            Some(from) => format!(
                "the job store {} did not parse ({}): moved it to {} and restored its last good copy from {} ({} jobs)",
                store.display(),
                self.reason,
                self.moved_to.display(),
                from.display(),
                self.jobs
            ),
            None => format!(
                "the job store {} did not parse ({}) and has no usable copy: moved it to {}; no jobs",
                store.display(),
                self.reason,
                self.moved_to.display()
            ),
        }
    }
}

/// What a change did.
#[derive(Debug)]
pub(crate) struct Changed<T> {
    pub value: T,
    pub warnings: Vec<String>,
    /// The fingerprint of the file written; `None` when nothing was
    /// (the bytes were the same). The runner keeps it, so that its own
    /// writes are not taken for someone else's.
    pub written: Option<Fingerprint>,
}

/// The runtime state of one job to write back, and whether the job is
/// disabled with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RuntimeUpdate {
    pub id: String,
    pub state: JobState,
    pub disable: bool,
}

/// What [`CronStore::update_states`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatesUpdated {
    pub updated: usize,
    /// Ids no job has any more (removed meanwhile).
    pub missing: Vec<String>,
}

impl CronStore {
    /// The store at `path`, its index in the state store `state_store`;
    /// cron expressions without a zone are in `host_zone`.
    pub(crate) fn new(path: PathBuf, state_store: PathBuf, host_zone: jiff::tz::TimeZone) -> Self {
        CronStore {
            path,
            state_store,
            host_zone,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `<dirname(store)>/runs/`: the run logs.
    pub(crate) fn runs_dir(&self) -> PathBuf {
        parent(&self.path).join("runs")
    }

    /// OpenClaw's backup: the file before the last change of anything
    /// but runtime state.
    pub(crate) fn backup_path(&self) -> PathBuf {
        sibling(&self.path, ".bak")
    }

    /// almanac's last good copy: the file as almanac last wrote a change
    /// of its jobs, or last read it whole after someone else's change.
    pub(crate) fn last_good_path(&self) -> PathBuf {
        sibling(&self.path, ".last-good")
    }

    /// Keeps the store as it is now as the last good copy, when it is
    /// still the file read as `read_as` (the runner, after reading a
    /// change it did not make).
    pub(crate) fn keep_good_copy(&self, read_as: Fingerprint) -> Result<(), CronError> {
        if self.fingerprint()? != Some(read_as) {
            return Ok(());
        }
        let mut source = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io_err(&self.path)(e)),
        };
        let copy = self.last_good_path();
        // Copied as it streams: a large store is not held in memory. A
        // change made meanwhile leaves the copy as it was.
        let staged = durable::stage(&copy, durable::PRIVATE_FILE_MODE, |out| {
            io::copy(&mut source, out).map(|_| ())
        })
        .map_err(self.io_err(&copy))?;
        if self.fingerprint()? == Some(read_as) {
            staged.commit().map_err(self.io_err(&copy))?;
        }
        Ok(())
    }

    /// The damaged stores moved aside (`<name>.corrupt-<time>`), newest
    /// first: kept until the user has looked at them and removed them.
    pub(crate) fn damaged_copies(&self) -> Vec<PathBuf> {
        let name = self
            .path
            .file_name()
            .map(|n| format!("{}.corrupt-", n.to_string_lossy()))
            .unwrap_or_default();
        let mut found: Vec<PathBuf> = std::fs::read_dir(parent(&self.path))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&name))
            .map(|e| e.path())
            .collect();
        // The names carry the time (`…corrupt-20261201T100000Z`).
        found.sort();
        found.reverse();
        found
    }

    /// The copies a damaged store can be restored from, newest first:
    /// the last good copy and the backup, those that parse.
    fn restorable(&self) -> Result<Vec<(PathBuf, Value, Vec<u8>)>, CronError> {
        let mut found = Vec::new();
        for path in [self.last_good_path(), self.backup_path()] {
            let Some(bytes) = durable::read_if_exists(&path).map_err(self.io_err(&path))? else {
                continue;
            };
            let Ok(doc) = parse_document(&bytes) else {
                continue;
            };
            let modified = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            found.push((modified, path, doc, bytes));
        }
        // The newer of the two: a last good copy no change refreshed
        // since is older than the backup.
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        Ok(found
            .into_iter()
            .map(|(_, path, doc, bytes)| (path, doc, bytes))
            .collect())
    }

    fn lock_path(&self) -> PathBuf {
        durable::lock_path_for(&self.path)
    }

    /// OpenClaw's later runtime-state sidecar: `jobs.json` →
    /// `jobs-state.json`, another name → `<name>-state.json`.
    pub(crate) fn sidecar_path(&self) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let side = match name.strip_suffix(".json") {
            Some(stem) => format!("{stem}-state.json"),
            None => format!("{name}-state.json"),
        };
        parent(&self.path).join(side)
    }

    /// One `stat` of the store: compare with an earlier one to learn
    /// whether anyone wrote it since (`None`: no file).
    pub(crate) fn fingerprint(&self) -> Result<Option<Fingerprint>, CronError> {
        Fingerprint::of_path(&self.path).map_err(|source| CronError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Reads the store for a command that only reads: nothing on disk
    /// changes. A damaged file is left where it is and its backup read in
    /// its place, with a warning.
    pub(crate) fn read(&self) -> Result<Loaded, CronError> {
        self.load_with(None)
    }

    /// Reads the store for the runner or a change: a damaged file is moved
    /// aside (stamped `now`) and the last good copy restored in its place,
    /// with a warning.
    pub(crate) fn load(&self, now: jiff::Timestamp) -> Result<Loaded, CronError> {
        self.load_with(Some(now))
    }

    fn io_err(&self, path: &Path) -> impl FnOnce(io::Error) -> CronError {
        let path = path.to_path_buf();
        move |source| CronError::Io { path, source }
    }

    fn load_with(&self, repair: Option<jiff::Timestamp>) -> Result<Loaded, CronError> {
        let mut warnings = Vec::new();
        let before = self.fingerprint()?;
        let Some(bytes) = durable::read_if_exists(&self.path).map_err(self.io_err(&self.path))?
        else {
            return Ok(Loaded {
                file: JobFile::empty(),
                warnings,
                fingerprint: None,
                repaired: None,
            });
        };
        let after = self.fingerprint()?;
        let fingerprint = before.filter(|b| Some(*b) == after);
        let mut loaded = match parse_document(&bytes) {
            Ok(doc) => {
                let file = JobFile::from_document(doc, bytes, &mut warnings, &self.path);
                Loaded {
                    file,
                    warnings: Vec::new(),
                    fingerprint,
                    repaired: None,
                }
            }
            Err(reason) => self.damaged(repair, &reason, &mut warnings)?,
        };
        self.overlay_sidecar(&mut loaded.file, &mut warnings);
        warnings.append(&mut loaded.warnings);
        loaded.warnings = warnings;
        Ok(loaded)
    }

    /// The store did not parse: its newest good copy in its place.
    fn damaged(
        &self,
        repair: Option<jiff::Timestamp>,
        reason: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Loaded, CronError> {
        let name = self.path.display();
        let restorable = self.restorable()?.into_iter().next();
        let Some(now) = repair else {
            let mut backup_warnings = Vec::new();
            let file = match restorable {
                Some((from, doc, bytes)) => {
                    let file = JobFile::from_document(doc, bytes, &mut backup_warnings, &from);
                    warnings.push(format!(
                        "the job store {name} is damaged ({reason}); showing its last good copy {} ({} jobs); the next change to the jobs moves the damaged file aside",
                        from.display(),
                        file.len()
                    ));
                    file
                }
                None => {
                    warnings.push(format!(
                        "the job store {name} is damaged ({reason}) and has no usable copy; no job can be shown"
                    ));
                    JobFile::empty()
                }
            };
            warnings.append(&mut backup_warnings);
            return Ok(Loaded {
                file,
                warnings: Vec::new(),
                fingerprint: None,
                repaired: None,
            });
        };
        let moved_to = durable::quarantine(&self.path, now).map_err(self.io_err(&self.path))?;
        let (file, restored_from, fingerprint) = match restorable {
            Some((from, doc, bytes)) => {
                durable::atomic_replace(&self.path, &bytes, durable::PRIVATE_FILE_MODE)
                    .map_err(self.io_err(&self.path))?;
                let file = JobFile::from_document(doc, bytes, warnings, &self.path);
                (file, Some(from), self.fingerprint()?)
            }
            None => (JobFile::empty(), None, None),
        };
        let repaired = Repaired {
            reason: reason.to_string(),
            moved_to,
            restored_from,
            jobs: file.len(),
        };
        warnings.insert(0, repaired.describe(&self.path));
        Ok(Loaded {
            fingerprint,
            file,
            warnings: Vec::new(),
            repaired: Some(repaired),
        })
    }

    /// Runtime state from `jobs-state.json` for jobs without their own.
    fn overlay_sidecar(&self, file: &mut JobFile, warnings: &mut Vec<String>) {
        let path = self.sidecar_path();
        let Ok(Some(bytes)) = durable::read_if_exists(&path) else {
            return;
        };
        let states = match parse_document(&bytes) {
            Ok(Value::Object(mut top)) => match top.shift_remove("jobs") {
                Some(Value::Object(states)) => states,
                _ => return,
            },
            _ => {
                warnings.push(format!(
                    "{} is not valid JSON; its runtime state is not used",
                    path.display()
                ));
                return;
            }
        };
        for entry in &mut file.entries {
            let Some(job) = entry.job.as_mut() else {
                continue;
            };
            let own = entry.raw.get("state");
            let own_is_empty = match own {
                None | Some(Value::Null) => true,
                Some(Value::Object(m)) => m.is_empty(),
                Some(_) => false,
            };
            if !own_is_empty {
                continue;
            }
            if let Some(state) = states.get(&job.id)
                && let Ok(state) = serde_json::from_value::<JobState>(state.clone())
            {
                job.state = state;
            }
        }
    }

    /// Reads the store under its lock, lets `change` edit the jobs, and
    /// writes the result (skipped when the bytes are the same); the index
    /// follows in one transaction. An error from `change` writes nothing.
    pub(crate) fn modify<T>(
        &self,
        now: jiff::Timestamp,
        change: impl FnOnce(&mut JobFile) -> Result<T, CronError>,
    ) -> Result<Changed<T>, CronError> {
        let lock = self.lock_path();
        durable::create_private_dir_all(parent(&self.path))
            .map_err(self.io_err(parent(&self.path)))?;
        durable::with_file_lock(&lock, || {
            let Loaded {
                mut file,
                warnings,
                fingerprint,
                ..
            } = self.load(now)?;
            let value = change(&mut file)?;
            let written = self.save(&mut file, fingerprint, now)?;
            Ok(Changed {
                value,
                warnings,
                written,
            })
        })
        .map_err(self.io_err(&lock))?
    }

    /// Writes `file` if its bytes differ from what was read; refreshes the
    /// backup first unless only runtime fields changed; brings the index
    /// along. Returns the fingerprint of what it wrote (`None`: nothing
    /// to write).
    fn save(
        &self,
        file: &mut JobFile,
        read_as: Option<Fingerprint>,
        now: jiff::Timestamp,
    ) -> Result<Option<Fingerprint>, CronError> {
        let bytes = file.to_bytes();
        let previous = file.source.as_slice();
        if !previous.is_empty() && previous == bytes.as_slice() {
            return Ok(None);
        }
        let definitions_changed = previous.is_empty() || file.changes_more_than_runtime();
        if !previous.is_empty() && definitions_changed {
            let bak = self.backup_path();
            durable::atomic_replace(&bak, previous, durable::PRIVATE_FILE_MODE)
                .map_err(self.io_err(&bak))?;
        }
        durable::atomic_replace(&self.path, &bytes, durable::PRIVATE_FILE_MODE)
            .map_err(self.io_err(&self.path))?;
        if definitions_changed {
            // What a damaged store is restored from: this write, not the
            // file before it.
            let copy = self.last_good_path();
            durable::atomic_replace(&copy, &bytes, durable::PRIVATE_FILE_MODE)
                .map_err(self.io_err(&copy))?;
        }
        let written_as = self.fingerprint()?;
        if let Err(err) = self.follow_in_index(file, read_as, written_as, now) {
            // The file is written; a stale index is rebuilt by the next
            // command that reads it.
            tracing::warn!(error = %err, "the cron index could not follow a change; it is rebuilt on next use");
        }
        file.commit(bytes);
        Ok(written_as)
    }

    fn follow_in_index(
        &self,
        file: &JobFile,
        read_as: Option<Fingerprint>,
        written_as: Option<Fingerprint>,
        now: jiff::Timestamp,
    ) -> Result<(), CronError> {
        let Some(written_as) = written_as else {
            return Ok(());
        };
        let mut index = CronIndex::open(&self.state_store)?;
        let source = index::Source {
            store_path: &self.path,
            fingerprint: written_as,
            host_zone: &self.host_zone,
            now_ms: now.as_millisecond(),
        };
        index.follow(&source, read_as, file)
    }

    /// Writes the runtime state of several jobs: one atomic rewrite of the
    /// file and one index transaction for the whole batch. `updatedAtMs`
    /// is left alone (it stamps changes of the definition). Ids no job has
    /// are returned, not an error (the job was removed meanwhile).
    pub(crate) fn update_states(
        &self,
        updates: &[(String, JobState)],
        now: jiff::Timestamp,
    ) -> Result<Changed<StatesUpdated>, CronError> {
        let updates: Vec<RuntimeUpdate> = updates
            .iter()
            .map(|(id, state)| RuntimeUpdate {
                id: id.clone(),
                state: state.clone(),
                disable: false,
            })
            .collect();
        self.update_runtime(&updates, now)
    }

    /// [`CronStore::update_states`], where a job may also be disabled with
    /// its new state (a spent one-shot, an auto-disable): `enabled` is the
    /// one field of the definition the runner writes.
    pub(crate) fn update_runtime(
        &self,
        updates: &[RuntimeUpdate],
        now: jiff::Timestamp,
    ) -> Result<Changed<StatesUpdated>, CronError> {
        let by_id: std::collections::HashMap<String, (JobState, bool)> = updates
            .iter()
            .map(|u| (u.id.clone(), (u.state.clone(), u.disable)))
            .collect();
        if by_id.len() == updates.len()
            && let Some(done) = self.update_states_streamed(&by_id, now)?
        {
            return Ok(done);
        }
        self.modify(now, |file| {
            let mut done = StatesUpdated::default();
            for update in updates {
                match file.get_mut(&update.id) {
                    Some(job) => {
                        job.state = update.state.clone();
                        if update.disable {
                            job.enabled = false;
                        }
                        done.updated += 1;
                    }
                    None => done.missing.push(update.id.clone()),
                }
            }
            Ok(done)
        })
    }

    /// A page of jobs from the index, which is rebuilt first when the file
    /// changed since it was built (a command that only reads may do that;
    /// it never writes the file). Without a usable index (a damaged file,
    /// a state store that cannot be opened) the file itself is read.
    pub(crate) fn list(&self, query: &ListQuery, now_ms: i64) -> Result<Listing, CronError> {
        let Some(fingerprint) = self.fingerprint()? else {
            return Ok(Listing::empty(query));
        };
        match self.fresh_index(fingerprint, now_ms) {
            Ok(Some((index, warnings))) => {
                let mut listing = index.page(query)?;
                listing.warnings = warnings;
                Ok(listing)
            }
            Ok(None) => self.list_from_file(query, now_ms),
            Err(err) => {
                tracing::warn!(error = %err, "the cron index cannot be used; reading the file");
                self.list_from_file(query, now_ms)
            }
        }
    }

    fn list_from_file(&self, query: &ListQuery, now_ms: i64) -> Result<Listing, CronError> {
        let loaded = self.read()?;
        let mut listing = index::page_in_memory(&loaded.file, query, &self.host_zone, now_ms);
        listing.warnings = loaded.warnings;
        Ok(listing)
    }

    /// The job count and the next wake (the earliest next run of an
    /// enabled job).
    pub(crate) fn overview(&self, now_ms: i64) -> Result<index::Overview, CronError> {
        let Some(fingerprint) = self.fingerprint()? else {
            return Ok(index::Overview::default());
        };
        match self.fresh_index(fingerprint, now_ms) {
            Ok(Some((index, warnings))) => {
                let mut overview = index.overview()?;
                overview.warnings = warnings;
                Ok(overview)
            }
            other => {
                if let Err(err) = other {
                    tracing::warn!(error = %err, "the cron index cannot be used; reading the file");
                }
                let loaded = self.read()?;
                let mut overview = index::overview_in_memory(&loaded.file, &self.host_zone, now_ms);
                overview.warnings = loaded.warnings;
                Ok(overview)
            }
        }
    }

    /// The full id of the job `lookup` names: its id, or the start of
    /// exactly one id.
    pub(crate) fn resolve(&self, lookup: &str, now_ms: i64) -> Result<String, CronError> {
        let lookup = lookup.trim();
        if lookup.is_empty() {
            return Err(CronError::NotFound(lookup.to_string()));
        }
        let Some(fingerprint) = self.fingerprint()? else {
            return Err(CronError::NotFound(lookup.to_string()));
        };
        let ids = match self.fresh_index(fingerprint, now_ms) {
            Ok(Some((index, _))) => index.ids_starting_with(lookup)?,
            other => {
                if let Err(err) = other {
                    tracing::warn!(error = %err, "the cron index cannot be used; reading the file");
                }
                self.read()?.file.ids_starting_with(lookup)
            }
        };
        pick(lookup, ids)
    }

    /// The index, rebuilt from the file first when it does not describe
    /// it; `None` when the file is damaged (nothing is recorded for it).
    fn fresh_index(
        &self,
        fingerprint: Fingerprint,
        now_ms: i64,
    ) -> Result<Option<(CronIndex, Vec<String>)>, CronError> {
        let mut index = CronIndex::open(&self.state_store)?;
        let zone = zone_name(&self.host_zone);
        if let Some(warnings) = index.describes(&self.path, fingerprint, &zone)? {
            return Ok(Some((index, warnings)));
        }
        // A plain JSON store is indexed as a stream; anything else (and a
        // job that cannot be read, which the full read reports) takes the
        // full read.
        let streamed =
            index.rebuild_streamed(&self.path, &self.host_zone, now_ms, &mut |each| {
                let mut unreadable = false;
                let read = self.stream_jobs(&mut |_, job| match job {
                    Ok(job) => each(&job),
                    Err(_) => unreadable = true,
                })?;
                Ok(read.flatten().filter(|_| !unreadable))
            })?;
        if streamed {
            return Ok(Some((index, Vec::new())));
        }
        let loaded = self.read()?;
        let Some(read_as) = loaded.fingerprint else {
            return Ok(None);
        };
        let source = index::Source {
            store_path: &self.path,
            fingerprint: read_as,
            host_zone: &self.host_zone,
            now_ms,
        };
        index.rebuild(&source, &loaded.file, &loaded.warnings)?;
        Ok(Some((index, loaded.warnings)))
    }
}

/// The one id among `ids` that `lookup` names.
fn pick(lookup: &str, ids: Vec<String>) -> Result<String, CronError> {
    if ids.iter().any(|id| id == lookup) {
        return Ok(lookup.to_string());
    }
    let distinct: BTreeSet<String> = ids.into_iter().collect();
    match distinct.len() {
        0 => Err(CronError::NotFound(lookup.to_string())),
        1 => Ok(distinct.into_iter().next().expect("one id")),
        _ => Err(CronError::Ambiguous(lookup.to_string())),
    }
}

/// The name the index records for a zone.
pub(crate) fn zone_name(zone: &jiff::tz::TimeZone) -> String {
    zone.iana_name().map_or_else(
        || format!("{:?}", zone.to_fixed_offset().ok()),
        str::to_string,
    )
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

#[path = "store_document.rs"]
mod document;

#[path = "store_streamed.rs"]
mod streamed;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
