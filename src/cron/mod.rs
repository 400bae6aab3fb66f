//! Scheduled jobs: the job store `cron/jobs.json` (canonical, OpenClaw's
//! format), its derived index in the state store, and the run logs
//! `cron/runs/<jobId>.jsonl`. The schedule rules themselves (expressions,
//! zones, next runs) are `almanac-cron`'s; running jobs is the gateway's.
//!
//! * `job.rs`: the job schema (OpenClaw's fields, almanac's `catchUp`,
//!   unknown fields kept at every level) and the rules checked when a job
//!   is added or changed ([`job::CronJob::validate`]);
//! * `legacy.rs`: older spellings read into today's shape;
//! * `store.rs`: reading (JSON, then JSON5; shapes coerced; a damaged file
//!   moved aside and its backup used, never an empty schedule in silence)
//!   and writing (under `<store>.lock`, atomic, 2-space indent, skipped
//!   when the bytes are equal, untouched jobs byte for byte as read,
//!   `jobs.json.bak` refreshed unless only `state`/`updatedAtMs` changed);
//!   `store_streamed.rs`: the same writes as a stream for a plain JSON
//!   store (the runner's reading and write-back, a command's change,
//!   addition or removal of one job: only the jobs touched re-serialised,
//!   the same bytes), the full path for any other;
//! * `index.rs`: the `cron_jobs` rows, keyed by the file's fingerprint;
//! * `runlog.rs`: the run logs, appended under a lock, cut back past
//!   `cron.runLog.maxBytes` to the newest `cron.runLog.keepLines` lines;
//! * `schedule.rs`: the bridge to `almanac-cron`;
//! * `slots.rs`: the slot ledger (state store, canonical): every slot a
//!   job's schedule reached is claimed once before it runs, or recorded
//!   missed with what its `catchUp` policy did; per job it keeps the open
//!   slots, the latest scheduled slot and a short history (the last 20,
//!   fewer each past 5,000 jobs so that 100,000 rows hold them all, at
//!   least one), cut back by [`slots::SlotLedger::trim`]; a scheduled slot
//!   no later than the job's latest in the ledger is never claimed; the
//!   catch-up plan;
//! * `outcome.rs`: what a run's end does to its job (runtime state,
//!   disable or remove, error backoff, one-shot retries, failure alerts),
//!   schedule errors, the backoff window and the stale-slot guard.
//!
//! For the runner (the gateway):
//!
//! * `App::cron_store()` builds the [`CronStore`] from the config
//!   (`cron.store`, the state store for the index, the host's zone for
//!   expressions without `tz`);
//! * [`CronStore::load`]`(now)` → [`store::Loaded`] `{file, warnings,
//!   fingerprint}`: the jobs ([`store::JobFile::jobs`], in file order),
//!   what to report (one line each), and the fingerprint of what was
//!   read; a damaged file is moved aside and its backup restored here;
//! * [`CronStore::fingerprint`]: one `stat`. Compare it with the one kept
//!   before each tick and reload only when it changed; every change
//!   returns the fingerprint of what it wrote ([`store::Changed::written`]), so
//!   the runner's own writes are not taken for a hand edit;
//! * [`CronStore::update_states`]`(&[(job_id, JobState)], now)`: the
//!   runtime state of a batch of jobs in one atomic rewrite of the file
//!   (no `.bak`: runtime fields only; `updatedAtMs` left alone) and one
//!   index transaction; ids no job has any more come back in `missing`;
//! * [`CronStore::remove`]`(job_id, now)` (a one-shot's `deleteAfterRun`)
//!   and [`CronStore::modify`]`(now, |file| …)` for any other change under
//!   the lock (disabling a spent one-shot, an auto-disable);
//!   [`CronStore::modify_job`]`(job_id, now, |job| …)` and
//!   [`CronStore::add`]`(&job, now)` for the commands' change of one job
//!   and new job (a stream on a large store);
//! * the slot ledger over the state store: [`slots::claim_in`] and
//!   [`slots::finish_in`] in the transaction that creates and ends the
//!   runs' tasks, [`slots::SlotLedger`] for the rest (runs an earlier
//!   start left open, missed slots, each job's latest scheduled slot, and
//!   [`slots::SlotLedger::trim`]`(Budget::DEFAULT)` hourly and after many
//!   slots);
//! * [`runlog::append`]`(&store.runs_dir(), &RunRecord, Limits)` after
//!   every run, `Limits::from(&config.cron.run_log)`;
//! * [`schedule::to_schedule`] and [`schedule::next_run`] put a job's
//!   `schedule` into `almanac-cron`'s terms; [`job::CronJob::deletes_after_run`]
//!   and [`job::CronJob::catch_up`] are the one-shot and missed-slot policies;
//! * [`outcome::apply`]`(&job, &RunEnd, natural_next, &config.cron)` after
//!   every run → [`outcome::Applied`] `{state, after, not_before_ms,
//!   retry_at_ms, alert}`: the state to write, whether to keep, disable or
//!   remove the job, and a failure alert to send;
//!   [`outcome::schedule_error`] when a job's next run cannot be computed;
//!   [`outcome::in_backoff`] before running a slot of a job whose last run
//!   failed; [`outcome::is_stale`] before delivering a result.
//!
//! Invariants:
//! * `jobs.json` is the truth. The index is derived: rebuilt whenever the
//!   file's fingerprint (size, modification and change times, inode,
//!   device) or the host's zone differs from the recorded one, and brought
//!   along by every write in the transaction after it. Deleting it loses
//!   nothing. A command that only reads may rebuild the index; it never
//!   writes `jobs.json` (not even to restore a damaged one).
//! * Every change is a read-modify-write under the store's lock, so two
//!   writers (commands, the gateway) never lose each other's jobs. A
//!   change as a stream writes what the full path would, byte for byte.
//! * A slot is claimed before its run starts and never started again; the
//!   slot ledger's size follows the number of jobs, not how long they
//!   have run.
//! * Nothing in a job almanac does not understand is dropped: unknown
//!   fields stay, and a job that cannot be read at all stays in the file
//!   as it is (reported, not run).
//! * Time is a parameter: nothing here reads a clock.

pub(crate) mod index;
pub(crate) mod job;
mod job_urls;
mod legacy;
pub(crate) mod outcome;
pub(crate) mod runlog;
pub(crate) mod schedule;
pub(crate) mod slots;
pub(crate) mod store;
mod stream;

use std::path::PathBuf;

pub(crate) use index::{EnabledFilter, ListQuery, Listing, SortBy, SortDir};
pub(crate) use job::JobError;
pub(crate) use store::CronStore;

use crate::store::StoreError;

/// What can go wrong with the job store; the CLI exits 2 for the
/// [`JobError`]s (the command asked for a job that breaks a rule) and
/// [`CronError::BadJobId`], 1 for the rest.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CronError {
    #[error("no cron job `{0}` (looked up by id and id prefix)")]
    NotFound(String),
    #[error("`{0}` is the start of more than one job id; give more of it")]
    Ambiguous(String),
    #[error(transparent)]
    Job(#[from] JobError),
    #[error("`{0}` cannot be a job id in a file name (empty, or with `/`, `\\` or NUL)")]
    BadJobId(String),
    #[error("cannot read or write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the cron index could not be used")]
    Index(#[from] StoreError),
}

impl From<rusqlite::Error> for CronError {
    fn from(err: rusqlite::Error) -> Self {
        CronError::Index(StoreError::Sql(err))
    }
}
