//! Reading the job store into what the cron runner follows: each job as
//! compact text with its next slot, and the slots it passed while not
//! followed planned by its `catchUp` (run, or recorded missed).
//!
//! Invariants: a job whose slots did not change keeps what the runner
//! knew of it; the slot ledger, not the store, says what already ran; a
//! job that cannot be read is reported, never dropped silently.

use std::collections::HashMap;
use std::sync::Arc;

use super::cron::{CATCH_UP_LIMIT, Due, Followed, MISSED_LIST_LIMIT};
use super::cron_run::{backoff_note, schedule_problem};
use crate::cron::job::{CronJob, RunStatus, ScheduleKind};
use crate::cron::outcome;
use crate::cron::slots::{self, SlotTrigger};
use crate::cron::store::Fingerprint;

/// What a reading of the store gave the runner.
pub(super) struct Reloaded {
    pub(super) followed: HashMap<String, Followed>,
    /// New next slots to wait for.
    pub(super) queue: Vec<(i64, String)>,
    pub(super) catch_up: Vec<Due>,
    pub(super) missed: Vec<(String, i64, String)>,
    /// Enabled jobs whose schedule cannot be worked out.
    pub(super) broken: HashMap<String, CronJob>,
    /// Jobs read inside their error backoff, and until when.
    pub(super) backoff: Vec<(String, i64)>,
    /// One-shots whose next slot is an attempt after a passing error.
    pub(super) retrying: Vec<String>,
    pub(super) fingerprint: Option<Fingerprint>,
    pub(super) warnings: Vec<String>,
    /// The store was damaged, and the reading repaired it.
    pub(super) repaired: Option<crate::cron::store::Repaired>,
}

/// What decides a job's slots, hashed.
pub(super) fn slots_version(job: &CronJob) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&job.schedule)
        .unwrap_or_default()
        .hash(&mut hasher);
    job.enabled.hash(&mut hasher);
    job.updated_at_ms.hash(&mut hasher);
    job.created_at_ms.hash(&mut hasher);
    hasher.finish()
}

/// Reads the store (as a stream when it can) into what the runner
/// follows: a job whose slots did not change keeps its entry of `old`;
/// a new or changed one gets its next slot, and the slots it passed while
/// not followed are planned by its `catchUp`. Blocking.
pub(super) fn follow(
    store: &crate::cron::store::CronStore,
    old: HashMap<String, Followed>,
    latest: &HashMap<String, i64>,
    now_ts: jiff::Timestamp,
    host: &jiff::tz::TimeZone,
) -> Result<Reloaded, crate::cron::CronError> {
    let mut follower = Follower {
        read: Reloaded {
            followed: HashMap::new(),
            queue: Vec::new(),
            catch_up: Vec::new(),
            missed: Vec::new(),
            broken: HashMap::new(),
            backoff: Vec::new(),
            retrying: Vec::new(),
            fingerprint: None,
            warnings: Vec::new(),
            repaired: None,
        },
        old,
        latest,
        now: now_ts.as_millisecond(),
        host,
        unreadable: 0,
    };
    match store.stream_jobs(&mut |text, job| follower.take(text, job))? {
        Some(fingerprint) => follower.read.fingerprint = fingerprint,
        None => {
            // The full read (a damaged store is repaired there, with a
            // warning). What the stream saw is planned again from the
            // ledger, which is the record of what ran.
            let loaded = store.load(now_ts)?;
            let read = &mut follower.read;
            read.followed.clear();
            read.queue.clear();
            read.catch_up.clear();
            read.missed.clear();
            read.broken.clear();
            read.backoff.clear();
            read.retrying.clear();
            read.warnings = loaded.warnings;
            read.fingerprint = loaded.fingerprint;
            read.repaired = loaded.repaired;
            follower.unreadable = 0;
            for job in loaded.file.jobs() {
                let text = serde_json::to_string(job).unwrap_or_default();
                follower.take(&text, Ok(job.clone()));
            }
        }
    }
    let mut read = follower.read;
    if follower.unreadable > 0 {
        read.warnings.push(format!(
            "{} cron job(s) in {} cannot be read and are not run (`almanac cron list` shows why)",
            follower.unreadable,
            store.path().display()
        ));
    }
    Ok(read)
}

/// [`follow`]'s work, job by job.
struct Follower<'a> {
    read: Reloaded,
    old: HashMap<String, Followed>,
    latest: &'a HashMap<String, i64>,
    now: i64,
    host: &'a jiff::tz::TimeZone,
    unreadable: usize,
}

impl Follower<'_> {
    fn take(&mut self, text: &str, job: Result<CronJob, String>) {
        let now = self.now;
        let read = &mut self.read;
        let Ok(job) = job else {
            self.unreadable += 1;
            return;
        };
        let version = slots_version(&job);
        let text = serde_json::to_string(&job).unwrap_or_else(|_| text.to_string());
        if let Some(mut f) = self.old.remove(&job.id)
            && f.version == version
        {
            // The same slots: keep following (the rest may have changed).
            if *f.text != *text {
                f.text = Arc::from(text);
            }
            read.followed.insert(job.id, f);
            return;
        }
        if !job.enabled {
            return;
        }
        let slots = match schedule_problem(&job, self.host) {
            Ok(slots) => slots,
            Err(problem) => {
                tracing::warn!(job = %job.id, "cron job schedule cannot be worked out: {problem}");
                read.broken.insert(job.id.clone(), job);
                return;
            }
        };
        let text: Arc<str> = Arc::from(text);
        if let Some(retry) = pending_retry(&job)
            && self.latest.get(&job.id).is_none_or(|&last| last < retry)
        {
            // A one-shot waiting for its next attempt after a passing
            // error: at its time, or now when that passed meanwhile.
            let next = if retry <= now {
                read.catch_up.push(Due {
                    id: job.id.clone(),
                    text: text.clone(),
                    slot_ms: retry,
                    trigger: SlotTrigger::Retry,
                });
                None
            } else {
                read.queue.push((retry, job.id.clone()));
                Some(retry)
            };
            if next.is_some() {
                read.retrying.push(job.id.clone());
            }
            read.followed.insert(
                job.id,
                Followed {
                    text,
                    slots,
                    next,
                    version,
                },
            );
            return;
        }
        // Where the job stands: its last slot in the ledger, else its last
        // run as the file says, else its creation (or last edit).
        let base = self
            .latest
            .get(&job.id)
            .copied()
            .or(job.state.last_run_at_ms)
            .unwrap_or(job.created_at_ms.max(job.updated_at_ms).min(now))
            .max(job.updated_at_ms.min(now));
        let mut passed = Vec::new();
        let mut cursor = base;
        while let Some(slot) = slots.next_after(cursor).filter(|&s| s <= now) {
            passed.push(slot);
            if passed.len() >= MISSED_LIST_LIMIT {
                break;
            }
            cursor = slot;
        }
        let plan = slots::plan_catch_up(&passed, job.catch_up(), CATCH_UP_LIMIT);
        // A job that failed last and is still inside its backoff runs no
        // missed slot.
        let not_before = outcome::in_backoff(&job, now);
        for slot in plan.run {
            match not_before {
                Some(until) => read
                    .missed
                    .push((job.id.clone(), slot, backoff_note(until))),
                None => read.catch_up.push(Due {
                    id: job.id.clone(),
                    text: text.clone(),
                    slot_ms: slot,
                    trigger: SlotTrigger::CatchUp,
                }),
            }
        }
        for (slot, note) in plan.missed {
            read.missed.push((job.id.clone(), slot, note));
        }
        let next = slots.next_after(now.max(cursor));
        if let Some(at) = next {
            read.queue.push((at, job.id.clone()));
        }
        if let Some(until) = not_before {
            read.backoff.push((job.id.clone(), until));
        }
        read.followed.insert(
            job.id,
            Followed {
                text,
                slots,
                next,
                version,
            },
        );
    }
}

/// The next attempt of a one-shot that failed with a passing error and
/// is to be tried again (its `nextRunAtMs`, after its last run).
fn pending_retry(job: &CronJob) -> Option<i64> {
    if job.schedule.kind != ScheduleKind::At || job.state.last() != Some(&RunStatus::Error) {
        return None;
    }
    let last = job.state.last_run_at_ms?;
    job.state.next_run_at_ms.filter(|&next| next > last)
}
