//! `jobs.json` read and changed as a stream, so that neither the runner
//! nor a command builds a tree of a store of a hundred thousand jobs to
//! read it or to change a few of them: the runner's reading and its
//! runtime-state write-back (which read the file as they go, so that the
//! gateway stays small), and a command's change of one job, addition of
//! one, or removal of one (which hold the file's bytes, read at once).
//!
//! * What is written is what the full path ([`CronStore::modify`]) would
//!   write, byte for byte: jobs nothing touched verbatim, a changed one
//!   patched in its own key order, the rest of the document in the
//!   written form; nothing at all when those bytes are the file's.
//! * The same rules as the full path: under the store's lock, atomic,
//!   the previous file kept as `jobs.json.bak` first (a second name for
//!   it, no byte copied) unless only runtime fields (`state`,
//!   `updatedAtMs`) changed (the runner's write-back never refreshes it),
//!   and the index brought along in one transaction for the touched jobs
//!   only.
//! * A store the stream cannot take as the full path would (not plain
//!   JSON with a `jobs` list, a `null` entry, an id twice where the change
//!   acts, a touched job in an older spelling or unreadable, the state
//!   sidecar, an index that does not describe the file when a command
//!   needs its warnings) is left to the full path before anything is
//!   written.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufReader, Read, Write};

use serde::Deserialize;
use serde_json::Value;

use super::{
    Changed, CronStore, Fingerprint, StatesUpdated, job_from_text, needs_normalizing, patch,
    without_runtime, zone_name,
};
use crate::cron::CronError;
use crate::cron::index::{self, CronIndex};
use crate::cron::job::{CronJob, JobState};
use crate::cron::stream::{self, Element};
use crate::durable;

/// What becomes of one job's element.
enum Edit {
    Keep,
    /// The job changed: its element as it is written, the job (for the
    /// index), and whether more than runtime fields changed.
    Replace {
        out: Value,
        job: Box<CronJob>,
        definition: bool,
    },
    /// Left out (the job of this id removed).
    Drop(String),
}

/// Why a streamed change stopped before writing.
enum Stop {
    /// The store needs the full path.
    FullPath,
    /// The change itself was refused.
    Refused(CronError),
}

/// One element of the `jobs` list as read.
struct JobText<'a> {
    text: &'a str,
}

impl JobText<'_> {
    /// Its `id` (or older `jobId`), when it has one.
    fn id(&self) -> Option<String> {
        id_of(self.text)
    }
}

/// Tells the elements of one job id from the others, most of them without
/// reading them: an element with no escape in its text, where the id's
/// text does not occur, does not have that id.
struct IdFinder<'i> {
    id: &'i str,
    finder: memchr::memmem::Finder<'i>,
}

impl<'i> IdFinder<'i> {
    fn new(id: &'i str) -> Self {
        IdFinder {
            id,
            finder: memchr::memmem::Finder::new(id),
        }
    }

    fn is_in(&self, read: &JobText<'_>) -> bool {
        let bytes = read.text.as_bytes();
        if memchr::memchr(b'\\', bytes).is_none() && self.finder.find(bytes).is_none() {
            return false;
        }
        read.id().as_deref() == Some(self.id)
    }
}

/// A streamed change: what becomes of each element, in file order, and a
/// job added at the end.
struct Plan<'p> {
    edit: &'p mut dyn FnMut(&JobText<'_>) -> Result<Edit, Stop>,
    append: Option<&'p CronJob>,
    warnings: Warnings,
    /// Read the file into memory first (a command), rather than as a
    /// stream (the runner, which must stay small).
    hold: bool,
}

/// What a change needs of the warnings the file gives (jobs that cannot
/// be read, an id twice), which the index records with its rows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Warnings {
    /// Nothing (the runner's write-back reports none).
    Unused,
    /// A command reports them: the index must describe the file as read.
    Reported,
    /// Reported, and there must be none: they name jobs by their place,
    /// which the change moves.
    MustBeNone,
}

/// What a streamed change did.
struct Rewritten {
    /// The fingerprint of the file written (`None`: nothing was).
    written: Option<Fingerprint>,
    warnings: Vec<String>,
    /// Whether the plan touched anything (changed, left out or added).
    touched: bool,
}

impl CronStore {
    /// Reads every job for the runner as a stream, without holding the
    /// store: `each` gets each job's text and the job (or why it cannot be
    /// read). `Ok(None)`: this store needs the full read
    /// ([`CronStore::load`]): it is not plain JSON with a `jobs` list
    /// (JSON5, damaged, another shape), or OpenClaw's state sidecar is
    /// there; `each` may have seen part of it.
    pub(crate) fn stream_jobs(
        &self,
        each: &mut dyn FnMut(&str, Result<CronJob, String>),
    ) -> Result<Option<Option<Fingerprint>>, CronError> {
        if self.sidecar_path().exists() {
            return Ok(None);
        }
        let before = self.fingerprint()?;
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Some(None)),
            Err(e) => return Err(self.io_err(&self.path)(e)),
        };
        let read = stream::each_job(file, &mut |raw| {
            let text = raw.get();
            if text != "null" {
                each(text, job_from_text(text));
            }
            Ok(())
        });
        if read.is_err() {
            return Ok(None);
        }
        let after = self.fingerprint()?;
        Ok(Some(before.filter(|b| Some(*b) == after)))
    }

    /// [`CronStore::update_states`] as a stream for a plain JSON store:
    /// only the jobs in `updates` re-written, their index rows following.
    /// `Ok(None)`: this store needs the full path; nothing was written.
    pub(crate) fn update_states_streamed(
        &self,
        updates: &HashMap<String, (JobState, bool)>,
        now: jiff::Timestamp,
    ) -> Result<Option<Changed<StatesUpdated>>, CronError> {
        let mut seen = BTreeSet::new();
        let mut updated = 0;
        let mut edit = |read: &JobText<'_>| {
            let Some((id, (state, disable))) = read.id().and_then(|id| updates.get_key_value(&id))
            else {
                return Ok(Edit::Keep);
            };
            if !seen.insert(id.clone()) {
                return Err(Stop::FullPath);
            }
            let Some((map, original)) = readable(read.text)? else {
                return Ok(Edit::Keep);
            };
            let mut job = original.clone();
            job.state = state.clone();
            if *disable {
                job.enabled = false;
            }
            updated += 1;
            let out = Value::Object(patch(&map, &original.to_map(), &job.to_map()));
            Ok(Edit::Replace {
                out,
                job: Box::new(job),
                definition: false,
            })
        };
        let plan = Plan {
            edit: &mut edit,
            append: None,
            warnings: Warnings::Unused,
            hold: false,
        };
        let Some(done) = self.rewrite_streamed(now, plan)? else {
            return Ok(None);
        };
        let missing = updates
            .keys()
            .filter(|id| !seen.contains(*id))
            .cloned()
            .collect();
        Ok(Some(Changed {
            value: StatesUpdated { updated, missing },
            warnings: Vec::new(),
            written: done.written,
        }))
    }

    /// Changes the job `id` (exactly that id, the first job that has it)
    /// with `change`, under the store's lock, and writes the store when
    /// its bytes differ; the index follows. A large plain JSON store is
    /// changed as a stream (only this job re-serialised), any other by the
    /// full path; the result is the same. An error from `change` writes
    /// nothing.
    pub(crate) fn modify_job<T>(
        &self,
        id: &str,
        now: jiff::Timestamp,
        change: impl FnOnce(&mut CronJob) -> Result<T, CronError>,
    ) -> Result<Changed<T>, CronError> {
        let mut change = Some(change);
        // The change's outcome, once it ran on the stream: what the full
        // path writes if the stream gives way after it.
        let mut outcome: Option<(T, CronJob)> = None;
        let target = IdFinder::new(id);
        let mut edit = |read: &JobText<'_>| {
            if !target.is_in(read) {
                return Ok(Edit::Keep);
            }
            if outcome.is_some() {
                // The id twice: the full path tells which job and keeps
                // the index whole.
                return Err(Stop::FullPath);
            }
            let Some((map, original)) = readable(read.text)? else {
                return Err(Stop::FullPath);
            };
            let Some(change) = change.take() else {
                return Err(Stop::FullPath);
            };
            let mut job = original.clone();
            let value = change(&mut job).map_err(Stop::Refused)?;
            let out = Value::Object(patch(&map, &original.to_map(), &job.to_map()));
            let definition = without_runtime(&Value::Object(map)) != without_runtime(&out);
            outcome = Some((value, job.clone()));
            Ok(Edit::Replace {
                out,
                job: Box::new(job),
                definition,
            })
        };
        let plan = Plan {
            edit: &mut edit,
            append: None,
            warnings: Warnings::Reported,
            hold: true,
        };
        let streamed = self.rewrite_streamed(now, plan)?;
        match (streamed, outcome.take()) {
            (Some(done), Some((value, _))) => Ok(Changed {
                value,
                warnings: done.warnings,
                written: done.written,
            }),
            (Some(_), None) => Err(CronError::NotFound(id.to_string())),
            (None, outcome) => self.modify(now, |file| {
                let job = file
                    .get_mut(id)
                    .ok_or_else(|| CronError::NotFound(id.to_string()))?;
                match (change.take(), outcome) {
                    (Some(change), _) => change(job),
                    (None, Some((value, changed))) => {
                        *job = changed;
                        Ok(value)
                    }
                    (None, None) => unreachable!("the change runs once, on the stream or here"),
                }
            }),
        }
    }

    /// Adds `job` at the end of the store (a store that does not stream,
    /// or holds its id already, takes the full path).
    pub(crate) fn add(
        &self,
        job: &CronJob,
        now: jiff::Timestamp,
    ) -> Result<Changed<()>, CronError> {
        let existing = IdFinder::new(&job.id);
        let mut edit = |read: &JobText<'_>| {
            if existing.is_in(read) {
                return Err(Stop::FullPath);
            }
            Ok(Edit::Keep)
        };
        let plan = Plan {
            edit: &mut edit,
            append: Some(job),
            warnings: Warnings::Reported,
            hold: true,
        };
        if let Some(done) = self.rewrite_streamed(now, plan)? {
            return Ok(Changed {
                value: (),
                warnings: done.warnings,
                written: done.written,
            });
        }
        self.modify(now, |file| {
            file.push(job.clone());
            Ok(())
        })
    }

    /// Removes the job `id` (exactly that id, the first job that has it);
    /// `false` when there is none.
    pub(crate) fn remove(
        &self,
        id: &str,
        now: jiff::Timestamp,
    ) -> Result<Changed<bool>, CronError> {
        let mut found = false;
        let target = IdFinder::new(id);
        let mut edit = |read: &JobText<'_>| {
            if !target.is_in(read) {
                return Ok(Edit::Keep);
            }
            if found || job_from_text(read.text).is_err() {
                // The id twice, or a job that cannot be read under it:
                // the full path knows which one goes.
                return Err(Stop::FullPath);
            }
            found = true;
            Ok(Edit::Drop(id.to_string()))
        };
        let plan = Plan {
            edit: &mut edit,
            append: None,
            warnings: Warnings::MustBeNone,
            hold: true,
        };
        match self.rewrite_streamed(now, plan)? {
            Some(done) => Ok(Changed {
                value: done.touched,
                warnings: done.warnings,
                written: done.written,
            }),
            None => self.modify(now, |file| Ok(file.remove(id).is_some())),
        }
    }

    /// Copies the store to its replacement as `plan` says, under the lock
    /// (see the module's rules). `Ok(None)`: the store needs the full
    /// path; nothing was written. An untouched store is not written.
    fn rewrite_streamed(
        &self,
        now: jiff::Timestamp,
        plan: Plan<'_>,
    ) -> Result<Option<Rewritten>, CronError> {
        let lock = self.lock_path();
        durable::with_file_lock(&lock, || self.rewrite_locked(now, plan))
            .map_err(self.io_err(&lock))?
    }

    fn rewrite_locked(
        &self,
        now: jiff::Timestamp,
        plan: Plan<'_>,
    ) -> Result<Option<Rewritten>, CronError> {
        if self.sidecar_path().exists() {
            return Ok(None);
        }
        let Some(read_as) = self.fingerprint()? else {
            return Ok(None);
        };
        let mut index = None;
        let mut warnings = Vec::new();
        if plan.warnings != Warnings::Unused {
            let Ok(opened) = CronIndex::open(&self.state_store) else {
                return Ok(None);
            };
            match opened.describes(&self.path, read_as, &zone_name(&self.host_zone))? {
                Some(recorded) if recorded.is_empty() || plan.warnings == Warnings::Reported => {
                    warnings = recorded;
                }
                _ => return Ok(None),
            }
            index = Some(opened);
        }
        let copy = match self.copy_as_planned(plan) {
            Ok(copy) => copy,
            Err(Stop::FullPath) => return Ok(None),
            Err(Stop::Refused(err)) => return Err(err),
        };
        let Some(copy) = copy else {
            return Ok(Some(Rewritten {
                written: None,
                warnings,
                touched: false,
            }));
        };
        let written = self.fingerprint()?;
        if let Some(written_as) = written {
            let source = index::Source {
                store_path: &self.path,
                fingerprint: written_as,
                host_zone: &self.host_zone,
                now_ms: now.as_millisecond(),
            };
            let followed = match index {
                Some(index) => Ok(index),
                None => CronIndex::open(&self.state_store),
            }
            .and_then(|mut index| {
                index.follow_jobs(&source, read_as, &copy.changed, &copy.removed)
            });
            if let Err(err) = followed {
                // The file is written; a stale index is rebuilt by the
                // next command that reads it.
                tracing::warn!(error = %err, "the cron index could not follow a change; it is rebuilt on next use");
            }
        }
        Ok(Some(Rewritten {
            written,
            warnings,
            touched: true,
        }))
    }

    /// Writes the store's replacement as `plan` says: `Ok(None)` when the
    /// plan touched nothing or the bytes came out the same (nothing is
    /// written then).
    fn copy_as_planned(&self, plan: Plan<'_>) -> Result<Option<Copied>, Stop> {
        let Plan {
            edit, append, hold, ..
        } = plan;
        let appends = append.is_some();
        let io_stop = |e: io::Error| Stop::Refused(self.io_err(&self.path)(e));
        // Gone, or changed while read (by a writer that ignores the lock):
        // the full path reads it as it is now.
        let missing = |e: io::Error| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => {
                Stop::FullPath
            }
            _ => io_stop(e),
        };
        // A command holds the file's bytes (read several times faster than
        // through a reader); the runner, which must stay small, streams.
        let source = if hold {
            Source::Held(read_whole(&self.path).map_err(missing)?)
        } else {
            Source::Streamed(std::fs::File::open(&self.path).map_err(missing)?)
        };
        let appended: Vec<Value> = append
            .iter()
            .map(|job| Value::Object(job.to_map()))
            .collect();
        let mut tally = Tally::default();
        let written = durable::atomic_replace_with(&self.path, durable::PRIVATE_FILE_MODE, |out| {
            // The file as read becomes the backup before the new one takes
            // its name; it is kept (a link and a sync) while the copy goes
            // on, once the change is known to need it.
            std::thread::scope(|scope| {
                let mut keeping = None;
                let mut keep = || {
                    if keeping.is_none() {
                        keeping =
                            Some(scope.spawn(|| durable::keep_as(&self.path, &self.backup_path())));
                    }
                };
                if append.is_some() {
                    keep();
                }
                let mut each = |raw: &serde_json::value::RawValue| {
                    let read = JobText { text: raw.get() };
                    let edit = if read.text == "null" {
                        Err(Stop::FullPath)
                    } else {
                        edit(&read)
                    };
                    let element = tally.take(edit);
                    if tally.definition {
                        keep();
                    }
                    element
                };
                let same = self.copy_source(&source, out, &mut each, &appended)?;
                if let Some(job) = append {
                    tally.copied.changed.push((tally.position, job.clone()));
                }
                let kept = keeping.map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|_| Err(io::Error::other("keeping the backup failed")))
                });
                if tally.copied.is_empty() || same {
                    tally.unchanged = true;
                    return Err(io::Error::other("nothing to write"));
                }
                kept.unwrap_or(Ok(()))
            })
        });
        match (written, tally.stopped, tally.unchanged) {
            (_, Some(stop), _) => Err(stop),
            (Err(_), None, true) => Ok(None),
            // Not a document the stream reads as the full path does (or
            // the disk refused): the full path reports it, or repairs it.
            (Err(_), None, false) => Err(Stop::FullPath),
            (Ok(()), None, _) => {
                if tally.definition || appends {
                    self.refresh_last_good();
                }
                Ok(Some(tally.copied))
            }
        }
    }

    /// Copies the store just written to its last good copy (a damaged
    /// store is restored from it); the kernel copies, unsynced: without
    /// it the backup is restored instead.
    fn refresh_last_good(&self) {
        let copy = self.last_good_path();
        if let Err(err) = durable::replace_with_copy(&self.path, &copy) {
            tracing::warn!(%err, path = %copy.display(), "the job store's last good copy was not kept");
        }
    }

    /// Copies `source` to `out` as `each` says, `appended` at the end of
    /// the list; whether the copy came out the same bytes as the source.
    fn copy_source(
        &self,
        source: &Source,
        out: &mut dyn Write,
        each: &mut dyn FnMut(&serde_json::value::RawValue) -> Result<Element, String>,
        appended: &[Value],
    ) -> io::Result<bool> {
        match source {
            Source::Held(bytes) => {
                let mut out = SameBytes {
                    out,
                    original: bytes,
                    at: 0,
                    same: true,
                };
                stream::rewrite_bytes(bytes, &mut out, each, appended)?;
                Ok(out.same && out.at == bytes.len())
            }
            Source::Streamed(file) => {
                let mut out = SameAs::new(out, std::fs::File::open(&self.path)?);
                stream::rewrite(file, &mut out, each, appended)?;
                out.was_the_same()
            }
        }
    }
}

/// The bytes of the file at `path`; a large one read in two halves at
/// once (the copying and the fresh pages it needs are most of the cost,
/// and two cores do it in about half the time).
fn read_whole(path: &std::path::Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
    if len < READ_IN_HALVES_FROM {
        let mut bytes = Vec::with_capacity(len);
        (&file).read_to_end(&mut bytes)?;
        return Ok(bytes);
    }
    let mut bytes = vec![0u8; len];
    let (first, second) = bytes.split_at_mut(len / 2);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| file.read_exact_at(second, (len / 2) as u64));
        file.read_exact_at(first, 0)?;
        other
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("reading the store failed")))
    })?;
    // Nothing past what was measured: the file did not grow meanwhile.
    if file.read_at(&mut [0u8; 1], len as u64)? != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the store grew while it was read",
        ));
    }
    Ok(bytes)
}

/// From this size on, [`read_whole`] reads in two halves at once.
const READ_IN_HALVES_FROM: usize = 4 << 20;

/// What a streamed copy did so far.
#[derive(Default)]
struct Tally {
    copied: Copied,
    /// Whether more than runtime fields changed (the backup is kept).
    definition: bool,
    /// The place in the new file of the next element.
    position: usize,
    stopped: Option<Stop>,
    /// Nothing to write: nothing touched, or the same bytes.
    unchanged: bool,
}

impl Tally {
    /// What goes to the new file for an element the plan said `edit` of.
    fn take(&mut self, edit: Result<Edit, Stop>) -> Result<Element, String> {
        let element = match edit {
            Ok(Edit::Keep) => Element::Keep,
            Ok(Edit::Replace {
                out,
                job,
                definition,
            }) => {
                self.definition |= definition;
                self.copied.changed.push((self.position, *job));
                Element::Replace(out)
            }
            Ok(Edit::Drop(id)) => {
                self.definition = true;
                self.copied.removed.push(id);
                return Ok(Element::Drop);
            }
            Err(stop) => {
                self.stopped = Some(stop);
                return Err("stopped".to_string());
            }
        };
        self.position += 1;
        Ok(element)
    }
}

/// The file a streamed change copies from.
enum Source {
    /// Its bytes, read at once (a command).
    Held(Vec<u8>),
    /// Read as it is copied (the runner).
    Streamed(std::fs::File),
}

/// What a streamed copy changed, for the index.
#[derive(Default)]
struct Copied {
    /// Jobs replaced or added, with their place in the new file.
    changed: Vec<(usize, CronJob)>,
    removed: Vec<String>,
}

impl Copied {
    fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }
}

/// The job of an element a change touches, with its fields as written,
/// when the stream can write it as the full path would: `None` when it
/// cannot be read (the full path leaves it as it is); an older spelling
/// needs the full path.
fn readable(text: &str) -> Result<Option<(serde_json::Map<String, Value>, CronJob)>, Stop> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Ok(None);
    };
    if needs_normalizing(&map) {
        return Err(Stop::FullPath);
    }
    let Ok(job) = CronJob::deserialize(&Value::Object(map.clone())) else {
        return Ok(None);
    };
    Ok(Some((map, job)))
}

/// An element's `id` (or older `jobId`), read without the rest of it.
fn id_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Ids {
        id: Option<String>,
        #[serde(rename = "jobId")]
        job_id: Option<String>,
    }
    serde_json::from_str::<Ids>(text)
        .ok()
        .and_then(|ids| ids.id.or(ids.job_id))
}

/// Passes everything written on, and tells whether it was, byte for byte,
/// what `original` holds.
struct SameAs<'w, R> {
    out: &'w mut dyn Write,
    original: BufReader<R>,
    same: bool,
    buf: Vec<u8>,
}

impl<'w, R: Read> SameAs<'w, R> {
    fn new(out: &'w mut dyn Write, original: R) -> Self {
        SameAs {
            out,
            original: BufReader::with_capacity(256 * 1024, original),
            same: true,
            buf: Vec::new(),
        }
    }

    /// Whether everything written was the original, and all of it.
    fn was_the_same(&mut self) -> io::Result<bool> {
        let mut rest = [0u8; 1];
        Ok(self.same && self.original.read(&mut rest)? == 0)
    }
}

/// [`SameAs`] for an original held in memory: compared in place.
struct SameBytes<'w, 'b> {
    out: &'w mut dyn Write,
    original: &'b [u8],
    at: usize,
    same: bool,
}

impl Write for SameBytes<'_, '_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.out.write(data)?;
        if self.same {
            let end = self.at + n;
            self.same = self.original.get(self.at..end) == Some(&data[..n]);
            self.at = end;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<R: Read> Write for SameAs<'_, R> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.out.write(data)?;
        if self.same {
            self.buf.resize(n, 0);
            self.same = match self.original.read_exact(&mut self.buf) {
                Ok(()) => self.buf == data[..n],
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => false,
                Err(e) => return Err(e),
            };
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
#[path = "store_streamed_tests.rs"]
mod tests;
