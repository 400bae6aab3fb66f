//! The cron runner: runs each job's slots exactly once, from the job store
//! (`cron/jobs.json`) and the slot ledger.
//!
//! Invariants:
//! * A slot is claimed in the ledger (committed, synced) before its run
//!   starts; a claimed slot is never started again, by this gateway or the
//!   next one. Runs an earlier start left running are `interrupted` when
//!   the runner starts and are not run again.
//! * Slots that passed while no runner watched a job (the gateway was
//!   down, or the job was added or changed meanwhile) follow the job's
//!   `catchUp`: `once` runs the latest and records the rest as missed,
//!   `all` runs each, `skip` records all; every one is in the ledger.
//! * The timer sleeps until the earliest slot but at most [`MAX_SLEEP`],
//!   and every wake reads the wall clock: after a sleep or a clock jump,
//!   what is due runs once (older due slots of the same job are recorded
//!   missed).
//! * Before each tick the store is stat'ed (at most 40 ms before it) and
//!   re-read only when it changed; the runtime state goes back to
//!   `jobs.json` in batches.
//! * Every run is a task in the ledger (`runtime: cron`) and a line in the
//!   job's run log.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use almanac_cron::Slots;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::intake::Record;
use super::supervisor::{Component, ComponentKind};
use crate::app::App;
use crate::cron::job::{
    Job, JobState, PayloadKind, RunStatus, ScheduleKind, SessionTarget, WakeMode,
};
use crate::cron::outcome::{self, AfterRun, RunEnd};
use crate::cron::runlog::{self, RunRecord};
use crate::cron::slots::{self, Ended, SlotLedger, Trigger};
use crate::cron::store::{Fingerprint, RuntimeUpdate};
use crate::tasks::record::Lease;
use crate::tasks::{NewTask, Runtime, Terminal, TerminalStatus};

/// Longest single sleep: a stopped clock or a missed wake-up costs at
/// most this.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Most missed slots one job runs at a start (`catchUp: all`).
const CATCH_UP_LIMIT: usize = 100;
/// Most missed slots listed per job at a start.
const MISSED_LIST_LIMIT: usize = 10_000;
/// How far past the next deadline [`Runner::prepare`] looks, and how
/// close to it it stops.
const PREPARE_AHEAD_MS: i64 = 2_000;
const PREPARE_MARGIN_MS: i64 = 2;
/// How long before a deadline the runner wakes to look at the store.
const EARLY_CHECK: Duration = Duration::from_millis(20);
/// How often runtime state is written back to `jobs.json`.
const STATE_FLUSH: Duration = Duration::from_secs(2);
/// How often the slot ledger's history is cut back to its budget
/// ([`slots::Budget`]), and after how many slots handled since, sooner.
const TRIM_EVERY: Duration = Duration::from_secs(3600);
const TRIM_AFTER_SLOTS: usize = 50_000;
/// A `systemEvent` run's time limit; an `agentTurn`'s default.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const TURN_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// A run asked for by `cron run`.
#[derive(Debug)]
pub(crate) struct ManualRun {
    pub job: String,
    /// Only when due (`--due`), else at once.
    pub only_due: bool,
    pub answer: tokio::sync::oneshot::Sender<serde_json::Value>,
}

/// What the runner shares with the control API.
#[derive(Debug)]
pub(crate) struct CronState {
    next_wake_ms: AtomicI64,
    nudge: tokio::sync::Notify,
    manual_tx: tokio::sync::mpsc::UnboundedSender<ManualRun>,
    manual_rx: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<ManualRun>>,
}

impl CronState {
    pub(crate) fn new() -> CronState {
        let (manual_tx, manual_rx) = tokio::sync::mpsc::unbounded_channel();
        CronState {
            next_wake_ms: AtomicI64::new(i64::MIN),
            nudge: tokio::sync::Notify::new(),
            manual_tx,
            manual_rx: tokio::sync::Mutex::new(manual_rx),
        }
    }

    /// Hands a `cron run` to the runner.
    pub(crate) fn ask(&self, run: ManualRun) -> bool {
        self.manual_tx.send(run).is_ok()
    }

    /// The earliest slot the runner waits for.
    pub(crate) fn next_wake_ms(&self) -> Option<i64> {
        let at = self.next_wake_ms.load(Ordering::Acquire);
        (at != i64::MIN).then_some(at)
    }

    /// Makes the runner look at the store now (a command changed it).
    pub(crate) fn nudge(&self) {
        self.nudge.notify_one();
    }
}

/// One job as the runner follows it: little more than its text (a
/// hundred thousand jobs must fit in a few tens of MB); the job is read
/// from the text when it runs.
struct Followed {
    /// The job as compact JSON (its text as the store holds it may be
    /// indented, and larger).
    text: Arc<str>,
    slots: Slots,
    /// The next slot to run.
    next: Option<i64>,
    /// A hash of what decides the job's slots (to notice a change).
    version: u64,
}

/// One slot to run.
struct Due {
    id: String,
    text: Arc<str>,
    slot_ms: i64,
    trigger: Trigger,
}

/// The runner's state between ticks.
struct Runner {
    shared: Arc<Shared>,
    ledger: Arc<Mutex<SlotLedger>>,
    followed: HashMap<String, Followed>,
    queue: BinaryHeap<Reverse<(i64, String)>>,
    fingerprint: Option<Option<Fingerprint>>,
    /// Jobs with a run in flight (a slot that comes meanwhile is skipped).
    running: Arc<Mutex<HashSet<String>>>,
    /// Runs that ended on their own task, for the runner to settle.
    finished: Arc<Mutex<Vec<Finished>>>,
    /// Told when a run ends on its own task.
    ended: Arc<tokio::sync::Notify>,
    /// Runtime state waiting to be written back, and whether the job is
    /// disabled with it.
    states: HashMap<String, (JobState, bool)>,
    /// `at` jobs to delete (ran well, `deleteAfterRun`).
    removals: Vec<String>,
    /// Jobs whose schedule cannot be worked out: tried again every
    /// [`MAX_SLEEP`], each failure counted, until they are disabled.
    broken: HashMap<String, Job>,
    broken_checked: Option<tokio::time::Instant>,
    /// Slots up to this time have their following slot worked out.
    prepared_until: i64,
    /// The slot after a soon-due job's next one (`.0`: the next slot it
    /// was worked out for), worked out while the runner waits, so a due
    /// batch is not held up by schedule arithmetic. (The few jobs in the
    /// states below are kept apart, so that what every job carries stays
    /// small.)
    prepared: HashMap<String, (i64, Option<i64>)>,
    /// Jobs whose last run failed: no slot before this runs (their error
    /// backoff).
    backoff: HashMap<String, i64>,
    /// One-shots whose next slot is an attempt after a passing error.
    retrying: HashSet<String>,
    runs: tokio_util::task::TaskTracker,
    permits: Arc<tokio::sync::Semaphore>,
}

/// The runner component.
pub(crate) struct CronRunner;

impl Component for CronRunner {
    fn kind(&self) -> ComponentKind {
        ComponentKind::CronRunner
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let app = shared.engine.app();
            if !app.config.config.cron.enabled {
                tracing::info!("cron.enabled is false: no job runs");
                stop.cancelled().await;
                return Ok(());
            }
            let mut runner = Runner::open(shared).await?;
            let result = runner.run(&stop).await;
            runner.runs.close();
            runner.runs.wait().await;
            let finished = runner.take_finished();
            runner.settle(finished);
            runner.flush_states().await;
            result
        })
    }
}

impl Runner {
    /// The runner of this gateway: the slot ledger opened, and runs an
    /// earlier start left running recorded interrupted.
    async fn open(shared: Arc<Shared>) -> anyhow::Result<Runner> {
        let app = shared.engine.app();
        let path = app.paths.state_store();
        let generation = shared.tasks.generation;
        let now = shared.host.now_ms();
        let ledger = shared
            .engine
            .blocking(move || -> anyhow::Result<SlotLedger> {
                let store = crate::store::Store::open(&path, crate::store::StoreKind::State)?;
                let mut ledger = SlotLedger::new(store.conn);
                let cut = ledger.interrupt_earlier(generation, now)?;
                if !cut.is_empty() {
                    tracing::warn!(
                        count = cut.len(),
                        "cron runs cut off by the previous gateway are recorded interrupted"
                    );
                }
                Ok(ledger)
            })
            .await??;
        let limit = app.config.config.cron.max_concurrent_runs.max(1) as usize;
        Ok(Runner {
            shared,
            ledger: Arc::new(Mutex::new(ledger)),
            followed: HashMap::new(),
            queue: BinaryHeap::new(),
            fingerprint: None,
            running: Arc::default(),
            finished: Arc::default(),
            ended: Arc::default(),
            states: HashMap::new(),
            removals: Vec::new(),
            broken: HashMap::new(),
            broken_checked: None,
            prepared_until: i64::MIN,
            prepared: HashMap::new(),
            backoff: HashMap::new(),
            retrying: HashSet::new(),
            runs: tokio_util::task::TaskTracker::new(),
            permits: Arc::new(tokio::sync::Semaphore::new(limit)),
        })
    }

    async fn run(&mut self, stop: &CancellationToken) -> anyhow::Result<()> {
        let mut last_flush = tokio::time::Instant::now();
        let mut last_trim: Option<tokio::time::Instant> = None;
        let mut handled_since_trim = 0usize;
        let shared = self.shared.clone();
        let mut manual = shared.cron.manual_rx.lock().await;
        let mut checked: Option<tokio::time::Instant> = None;
        let mut timer_woke = false;
        loop {
            // The store is looked at before each tick; the runner wakes
            // that much before a deadline to do it, so that the tick at
            // the deadline itself only claims.
            if checked.is_none_or(|at| at.elapsed() >= 2 * EARLY_CHECK) {
                self.reload_if_changed().await?;
                checked = Some(tokio::time::Instant::now());
            }
            let finished = self.take_finished();
            if !finished.is_empty() {
                self.settle(finished);
            }
            if !self.broken.is_empty()
                && self
                    .broken_checked
                    .is_none_or(|at| at.elapsed() >= MAX_SLEEP)
            {
                self.check_broken().await;
            }
            let now = self.shared.host.now_ms();
            let due = self.take_due(now);
            if !due.is_empty() {
                handled_since_trim += due.len();
                self.start_runs(due).await?;
            }
            if last_flush.elapsed() >= STATE_FLUSH {
                self.flush_states().await;
                last_flush = tokio::time::Instant::now();
            }
            if last_trim.is_none_or(|at| at.elapsed() >= TRIM_EVERY)
                || handled_since_trim >= TRIM_AFTER_SLOTS
            {
                let ledger = self.ledger.clone();
                let trimmed = self
                    .shared
                    .engine
                    .blocking(move || {
                        ledger
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .trim(slots::Budget::DEFAULT)
                    })
                    .await?;
                match trimmed {
                    Ok(n) if n > 0 => tracing::debug!(trimmed = n, "cron slot history trimmed"),
                    Ok(_) => {}
                    Err(err) => tracing::warn!(%err, "cron slot history not trimmed"),
                }
                last_trim = Some(tokio::time::Instant::now());
                handled_since_trim = 0;
            }
            let next = self.queue.peek().map(|Reverse((at, _))| *at);
            if let Some(at) = next {
                self.prepare(at);
            }
            if std::mem::take(&mut timer_woke) {
                self.shared.periodic_work_ran.notify_one();
            }
            self.shared
                .cron
                .next_wake_ms
                .store(next.unwrap_or(i64::MIN), Ordering::Release);
            let now = self.shared.host.now_ms();
            let mut sleep = match next {
                Some(at) => Duration::from_millis((at - now).max(0) as u64).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            if !self.states.is_empty() || !self.removals.is_empty() {
                sleep = sleep.min(STATE_FLUSH);
            }
            if sleep > EARLY_CHECK {
                sleep -= EARLY_CHECK;
            }
            let ended = self.ended.clone();
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(sleep) => timer_woke = true,
                () = ended.notified() => {}
                () = self.shared.cron.nudge.notified() => {
                    self.fingerprint = None;
                    checked = None;
                }
                Some(asked) = manual.recv() => {
                    self.reload_if_changed().await?;
                    let answer = self.manual(&asked.job, asked.only_due).await;
                    let _ = asked.answer.send(answer);
                }
            }
        }
    }

    /// Re-reads the store when its file changed (or at the first tick),
    /// following new and changed jobs and dropping removed ones; slots a
    /// job passed while it was not followed are caught up by its policy.
    async fn reload_if_changed(&mut self) -> anyhow::Result<()> {
        let app = self.shared.engine.app();
        let store = app.cron_store();
        let current = {
            let store = store.clone();
            self.shared
                .engine
                .blocking(move || store.fingerprint())
                .await??
        };
        if self.fingerprint.as_ref() == Some(&current) {
            return Ok(());
        }
        let now_ts = self.shared.host.now_ts();
        let now = now_ts.as_millisecond();
        let latest = {
            let ledger = self.ledger.clone();
            self.shared
                .engine
                .blocking(move || {
                    ledger
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .latest_slots()
                })
                .await??
        };
        let old = std::mem::take(&mut self.followed);
        let host = app.host.time_zone().clone();
        let read = self
            .shared
            .engine
            .blocking(move || {
                let read = follow(&store, old, &latest, now_ts, &host);
                super::resident::release_free_memory();
                read
            })
            .await?;
        let read = match read {
            Ok(read) => read,
            Err(err) => {
                // Nothing followed is lost: the next tick reads again.
                self.fingerprint = None;
                return Err(err.into());
            }
        };
        for w in &read.warnings {
            tracing::warn!("{w}");
        }
        self.fingerprint = Some(read.fingerprint);
        self.followed = read.followed;
        // What the runner learnt of a job it still follows as it was
        // stands; a job read afresh brings its own.
        let followed = &self.followed;
        self.backoff.retain(|id, _| followed.contains_key(id));
        self.retrying.retain(|id| followed.contains_key(id));
        self.prepared.clear();
        self.prepared_until = i64::MIN;
        self.backoff.extend(read.backoff);
        self.retrying.extend(read.retrying);
        let had_broken = !self.broken.is_empty();
        self.broken = read.broken;
        if !self.broken.is_empty() && !had_broken {
            // Counted at once; then again every minute.
            self.broken_checked = None;
        }
        for (at, id) in read.queue {
            self.queue.push(Reverse((at, id)));
        }
        if !read.missed.is_empty() {
            let ledger = self.ledger.clone();
            let missed = read.missed;
            let count = missed.len();
            self.shared
                .engine
                .blocking(move || {
                    ledger
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .record_missed(&missed, now)
                })
                .await??;
            tracing::info!(count, "missed cron slots recorded");
        }
        if !read.catch_up.is_empty() {
            self.start_runs(read.catch_up).await?;
        }
        Ok(())
    }

    /// The slots due at `now`, one per job (older due slots of a job the
    /// runner woke late for, and slots inside a job's error backoff, are
    /// recorded missed).
    fn take_due(&mut self, now: i64) -> Vec<Due> {
        let mut due = Vec::new();
        let mut missed: Vec<(String, i64, String)> = Vec::new();
        while let Some(Reverse((at, _))) = self.queue.peek() {
            if *at > now {
                break;
            }
            let Reverse((at, id)) = self.queue.pop().expect("peeked");
            let Some(f) = self.followed.get_mut(&id) else {
                continue;
            };
            if f.next != Some(at) {
                // A stale entry: the job was re-read since.
                continue;
            }
            let trigger = if self.retrying.remove(&id) {
                Trigger::Retry
            } else {
                Trigger::Due
            };
            // The latest slot due; the runner was asleep for the others.
            let mut slot = at;
            let mut following = match self.prepared.remove(&id) {
                Some((after, following)) if after == slot => following,
                _ => f.slots.next_after(slot),
            };
            while let Some(later) = following.filter(|&s| s <= now) {
                missed.push((
                    id.clone(),
                    slot,
                    "not run: the gateway woke late; ran the latest".to_string(),
                ));
                slot = later;
                following = f.slots.next_after(slot);
            }
            f.next = following;
            if let Some(next) = f.next {
                self.queue.push(Reverse((next, id.clone())));
            }
            if let Some(&until) = self.backoff.get(&id) {
                if slot < until {
                    missed.push((id.clone(), slot, backoff_note(until)));
                    continue;
                }
                self.backoff.remove(&id);
            }
            due.push(Due {
                id: id.clone(),
                text: f.text.clone(),
                slot_ms: slot,
                trigger,
            });
        }
        if !missed.is_empty() {
            // Small and rare: recorded inline.
            let written = self
                .ledger
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record_missed(&missed, now);
            if let Err(err) = written {
                tracing::warn!(%err, "missed cron slots not recorded");
            }
        }
        due
    }

    /// Works out, while the runner waits for `deadline`, the slot after
    /// the next one of every job due within [`PREPARE_AHEAD`] of it, so
    /// that [`Runner::take_due`] only claims. Stops short of the deadline
    /// (what is left is worked out when due).
    fn prepare(&mut self, deadline: i64) {
        let horizon = deadline.saturating_add(PREPARE_AHEAD_MS);
        if horizon <= self.prepared_until {
            return;
        }
        let from = self.prepared_until.max(i64::MIN + 1);
        let soon: Vec<(i64, String)> = self
            .queue
            .iter()
            .filter(|Reverse((at, _))| *at > from && *at <= horizon)
            .map(|Reverse((at, id))| (*at, id.clone()))
            .collect();
        let mut done_until = horizon;
        for (at, id) in soon {
            if self.shared.host.now_ms() >= deadline - PREPARE_MARGIN_MS {
                done_until = from;
                break;
            }
            if let Some(f) = self.followed.get(&id)
                && f.next == Some(at)
                && self.prepared.get(&id).is_none_or(|(after, _)| *after != at)
            {
                let following = f.slots.next_after(at);
                self.prepared.insert(id, (at, following));
            }
        }
        self.prepared_until = done_until;
    }

    /// Runs that ended on their own task since the last look.
    fn take_finished(&self) -> Vec<Finished> {
        std::mem::take(&mut *self.finished.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// What becomes of each job after its run ended
    /// ([`outcome::apply`]): its new state waits for the next write-back;
    /// a failed recurring job waits out its backoff, a one-shot that hit
    /// a passing error gets its next attempt, a spent or failed one-shot
    /// is disabled or removed, and a failure alert goes out when due.
    fn settle(&mut self, finished: Vec<Finished>) {
        let app = self.shared.engine.app();
        let config = &app.config.config.cron;
        for end in finished {
            let natural = self
                .followed
                .get(&end.id)
                .filter(|_| !self.retrying.contains(&end.id))
                .and_then(|f| f.next);
            let run_end = RunEnd {
                status: status_of(end.status),
                error: end.error.clone(),
                started_ms: end.started_ms,
                ended_ms: end.ended_ms,
                manual: end.trigger == Trigger::Manual,
                delivered: end.delivered,
                delivery_requested: end
                    .job
                    .delivery
                    .as_ref()
                    .is_some_and(|d| d.mode != crate::cron::job::DeliveryMode::None),
                delivery_error: end.delivery_error.clone(),
                timed_out: end.status == Ended::TimedOut,
            };
            let mut applied = outcome::apply(&end.job, &run_end, natural, config);
            if let Some(f) = self.followed.get_mut(&end.id) {
                if let Some(until) = applied.not_before_ms {
                    self.backoff.insert(end.id.clone(), until);
                    // The slot it runs at next: the first one after the
                    // backoff.
                    if applied.state.next_run_at_ms.is_some() {
                        applied.state.next_run_at_ms = f.slots.next_after(until - 1);
                    }
                }
                if let Some(at) = applied.retry_at_ms {
                    f.next = Some(at);
                    self.retrying.insert(end.id.clone());
                    self.queue.push(Reverse((at, end.id.clone())));
                }
                if carries_over(&end.job.state, &applied.state) {
                    // What the next run counts from (consecutive errors,
                    // the last alert) lives in the job's text.
                    let mut job = (*end.job).clone();
                    job.state = applied.state.clone();
                    if let Ok(text) = serde_json::to_string(&job) {
                        f.text = Arc::from(text);
                    }
                }
            }
            if let Some(alert) = applied.alert.take() {
                self.raise_alert(&end.job, alert);
            }
            match applied.after {
                AfterRun::Keep => {
                    self.states.insert(end.id, (applied.state, false));
                }
                AfterRun::Disable => {
                    self.followed.remove(&end.id);
                    self.states.insert(end.id, (applied.state, true));
                }
                AfterRun::Delete => {
                    self.followed.remove(&end.id);
                    self.states.remove(&end.id);
                    self.removals.push(end.id);
                }
            }
        }
    }

    /// Sends a failure alert where the job's settings say (off the tick).
    fn raise_alert(&self, job: &Arc<Job>, alert: outcome::Alert) {
        tracing::warn!(job = %job.id, "{}", alert.text);
        let shared = self.shared.clone();
        let job = job.clone();
        self.runs.spawn(async move {
            super::cron_delivery::send_alert(&shared, &job, &alert).await;
        });
    }

    /// Queues `text` as a trusted system event on the main session, with
    /// a wake (a notice from the runner itself).
    fn queue_notice(&self, job_id: &str, text: String) {
        let shared = self.shared.clone();
        let reason = format!("cron:{job_id}:disabled");
        self.runs.spawn(async move {
            let book = shared.clone();
            let queued = shared
                .engine
                .blocking(move || super::cron_delivery::queue_alert_event(&book, text, reason))
                .await;
            if !matches!(queued, Ok(Ok(()))) {
                tracing::warn!("a cron notice could not be queued");
            }
        });
    }

    /// Works out again the schedules that could not be: each failure
    /// counts ([`outcome::schedule_error`]); the third disables the job
    /// and says so in a system event.
    async fn check_broken(&mut self) {
        self.broken_checked = Some(tokio::time::Instant::now());
        let host = self.shared.engine.app().host.time_zone().clone();
        let ids: Vec<String> = self.broken.keys().cloned().collect();
        for id in ids {
            let Some(job) = self.broken.get_mut(&id) else {
                continue;
            };
            let Err(problem) = schedule_problem(job, &host) else {
                // It works now (the zone database changed): follow it.
                self.broken.remove(&id);
                self.fingerprint = None;
                continue;
            };
            let (state, disable, notice) = outcome::schedule_error(job, &problem);
            job.state = state.clone();
            self.states.insert(id.clone(), (state, disable));
            if disable {
                tracing::warn!(job = %id, "cron job disabled after repeated schedule errors: {problem}");
                self.broken.remove(&id);
            }
            if let Some(text) = notice {
                self.queue_notice(&id, text);
            }
        }
    }

    /// Claims `due` and creates each claimed slot's task in one
    /// transaction (one sync), then runs them: a job that only queues an
    /// event (`next-heartbeat`) runs in the tick itself, the whole batch
    /// queued and recorded together; one that takes time (a turn, a
    /// heartbeat run) gets its own task under the `maxConcurrentRuns`
    /// limit. A job whose previous run is still going skips the slot,
    /// recorded so.
    async fn start_runs(&mut self, due: Vec<Due>) -> anyhow::Result<()> {
        let now = self.shared.host.now_ms();
        let generation = self.shared.tasks.generation;
        let mut busy = Vec::new();
        let mut wanted = Vec::new();
        {
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            for d in due {
                if running.contains(&d.id) {
                    busy.push((
                        d.id,
                        d.slot_ms,
                        "skipped: the previous run was still running".to_string(),
                    ));
                } else {
                    wanted.push(d);
                }
            }
        }
        let shared = self.shared.clone();
        let claimed = self
            .shared
            .engine
            .blocking(move || {
                // The jobs, read from their text.
                let jobs: Vec<Result<Arc<Job>, String>> = wanted
                    .iter()
                    .map(|d| {
                        crate::cron::store::job_from_text(&d.text)
                            .map(Arc::new)
                            .map_err(|e| format!("the job cannot be read: {e}"))
                    })
                    .collect();
                let claims: Vec<(String, i64, Trigger)> = wanted
                    .iter()
                    .map(|d| (d.id.clone(), d.slot_ms, d.trigger))
                    .collect();
                let mut tasks = shared.tasks.with(|ledger| {
                    ledger.batch(|batch| {
                        if !busy.is_empty() {
                            slots::record_missed_in(batch.connection(), &busy, now)?;
                        }
                        let claimed =
                            slots::claim_in(batch.connection(), &claims, generation, now)?;
                        let names: HashMap<&str, &str> = wanted
                            .iter()
                            .zip(&jobs)
                            .map(|(d, job)| {
                                let name = job.as_ref().map_or("", |j| j.name.as_str());
                                (d.id.as_str(), name)
                            })
                            .collect();
                        let mut tasks = HashMap::with_capacity(claimed.len());
                        for (id, slot) in claimed {
                            let name = names.get(id.as_str()).copied().unwrap_or_default();
                            let task = batch.create(run_task(&id, name, now, generation), now)?;
                            tasks.insert((id, slot), task);
                        }
                        Ok(tasks)
                    })
                })?;
                let runs: Vec<Claimed> = wanted
                    .into_iter()
                    .zip(jobs)
                    .filter_map(|(due, job)| {
                        let task_id = tasks.remove(&(due.id.clone(), due.slot_ms))?;
                        Some(Claimed {
                            due,
                            job,
                            task_id,
                            started_ms: now,
                        })
                    })
                    .collect();
                Ok::<_, crate::tasks::TaskError>(runs)
            })
            .await??;
        let mut instant = Vec::new();
        for run in claimed {
            let lasting = run.job.as_ref().is_ok_and(|job| takes_time(job));
            if !lasting {
                instant.push(run);
                continue;
            }
            let job_id = run.due.id.clone();
            self.running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(job_id.clone());
            let shared = self.shared.clone();
            let running = self.running.clone();
            let finished = self.finished.clone();
            let ended = self.ended.clone();
            let permits = self.permits.clone();
            self.runs.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let end = run_slot(&shared, run).await;
                running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&job_id);
                if let Some(end) = end {
                    finished.lock().unwrap_or_else(|p| p.into_inner()).push(end);
                    ended.notify_one();
                }
            });
        }
        if !instant.is_empty() {
            self.run_instant(instant).await?;
        }
        Ok(())
    }

    /// Runs a batch of event-only slots: every event queued, then every
    /// task and slot ended in one transaction and the run logs appended.
    async fn run_instant(&mut self, batch: Vec<Claimed>) -> anyhow::Result<()> {
        let shared = self.shared.clone();
        let done = self
            .shared
            .engine
            .blocking(move || {
                let app = shared.engine.app();
                let sessions = app.sessions(Some(crate::app::agent::AGENT_ID));
                // Every event of the batch in one write to the intake.
                let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(batch.len());
                let mut records: Vec<Record> = Vec::new();
                for run in &batch {
                    match &run.job {
                        Ok(job) => match event_record(&shared, &sessions, job) {
                            Ok(record) => {
                                records.push(record);
                                outcomes.push(None);
                            }
                            Err(skipped) => outcomes.push(Some(skipped)),
                        },
                        Err(problem) => outcomes.push(Some(unreadable(problem))),
                    }
                }
                let accepted = if records.is_empty() {
                    Ok(())
                } else {
                    shared
                        .intake
                        .accept_all(&mut records)
                        .map_err(|e| e.to_string())
                };
                let mut records = records.into_iter();
                let done: Vec<(Claimed, Outcome)> = batch
                    .into_iter()
                    .zip(outcomes)
                    .map(|(run, outcome)| {
                        let outcome = outcome.unwrap_or_else(|| {
                            let record = records.next().expect("a record per queued event");
                            queued(&accepted, record)
                        });
                        (run, outcome)
                    })
                    .collect();
                let ended = shared.host.now_ms();
                let rows: Vec<slots::EndedSlot> = done
                    .iter()
                    .map(|(run, outcome)| ended_slot(run, outcome))
                    .collect();
                let written = shared.tasks.with(|ledger| {
                    ledger.batch(|batch| {
                        for (run, outcome) in &done {
                            batch.finish(&run.task_id, terminal(outcome), ended)?;
                        }
                        slots::finish_in(batch.connection(), &rows, ended)?;
                        Ok(())
                    })
                });
                if let Err(err) = written {
                    tracing::warn!(%err, "the end of cron runs was not recorded");
                }
                let records: Vec<RunRecord> = done
                    .iter()
                    .map(|(run, outcome)| run_record(run, outcome, ended))
                    .collect();
                let limits = runlog::Limits::from(&app.config.config.cron.run_log);
                let logged =
                    runlog::append_all(&app.cron_store().runs_dir(), &records, limits, false);
                for err in logged.map_or_else(
                    |err| vec![err],
                    |each| each.into_iter().filter_map(Result::err).collect(),
                ) {
                    tracing::warn!(%err, "cron run log not written");
                }
                (done, ended)
            })
            .await?;
        let (done, ended) = done;
        for (run, outcome) in &done {
            super::cron_delivery::spawn_end(
                &self.runs,
                &self.shared,
                run.job.as_ref().ok(),
                run.due.slot_ms,
                || run_record(run, outcome, ended),
            );
        }
        let finished = done
            .into_iter()
            .filter_map(|(run, outcome)| finished(run, outcome, ended))
            .collect();
        self.settle(finished);
        Ok(())
    }

    /// `cron run`: the job now (`force`), or only when a slot is due.
    async fn manual(&mut self, lookup: &str, only_due: bool) -> serde_json::Value {
        let now = self.shared.host.now_ms();
        let id = match self.followed.keys().find(|id| id.as_str() == lookup) {
            Some(id) => id.clone(),
            None => {
                let mut matches = self.followed.keys().filter(|id| id.starts_with(lookup));
                match (matches.next(), matches.next()) {
                    (Some(id), None) => id.clone(),
                    (None, _) => {
                        return serde_json::json!({"ok": false, "error": format!("no enabled cron job `{lookup}`")});
                    }
                    _ => {
                        return serde_json::json!({"ok": false, "error": format!("`{lookup}` is the start of more than one job id")});
                    }
                }
            }
        };
        if self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id)
        {
            return serde_json::json!({"ok": true, "ran": false, "reason": "already-running", "jobId": id});
        }
        let f = &self.followed[&id];
        if only_due && f.next.is_none_or(|next| next > now) {
            return serde_json::json!({"ok": true, "ran": false, "reason": "not-due", "jobId": id});
        }
        // `--due` runs the slot that is due (the timer then finds it
        // claimed); a forced run is a slot of its own, at now.
        let due = Due {
            id: id.clone(),
            text: f.text.clone(),
            slot_ms: if only_due { f.next.unwrap_or(now) } else { now },
            trigger: if only_due {
                Trigger::Due
            } else {
                Trigger::Manual
            },
        };
        let run_id = format!("manual:{id}:{now}");
        match self.start_runs(vec![due]).await {
            Ok(()) => {
                serde_json::json!({"ok": true, "ran": true, "enqueued": true, "runId": run_id, "jobId": id})
            }
            Err(err) => serde_json::json!({"ok": false, "error": format!("{err:#}")}),
        }
    }

    /// Writes waiting runtime state and removals back to `jobs.json` (one
    /// rewrite for the states, one for the removals).
    async fn flush_states(&mut self) {
        let updates: Vec<RuntimeUpdate> = self
            .states
            .drain()
            .map(|(id, (state, disable))| RuntimeUpdate { id, state, disable })
            .collect();
        let removals = std::mem::take(&mut self.removals);
        if updates.is_empty() && removals.is_empty() {
            return;
        }
        let app = self.shared.engine.app();
        let now = self.shared.host.now_ts();
        let known = self.fingerprint;
        let written = self
            .shared
            .engine
            .blocking(
                move || -> Result<Option<Fingerprint>, crate::cron::CronError> {
                    let store = app.cron_store();
                    // The file as the runner last read it, or changed since
                    // by someone else (then it is read again at the next tick).
                    let unchanged = known == Some(store.fingerprint()?);
                    let mut last = None;
                    if !updates.is_empty() {
                        last = store.update_runtime(&updates, now)?.written.or(last);
                    }
                    if !removals.is_empty() {
                        let changed = store.modify(now, |file| {
                            for id in &removals {
                                file.remove(id);
                            }
                            Ok(())
                        })?;
                        last = changed.written.or(last);
                    }
                    super::resident::release_free_memory();
                    Ok(last.filter(|_| unchanged))
                },
            )
            .await;
        match written {
            Ok(Ok(ours)) => {
                // Our own write: no need to re-read it.
                if let Some(fingerprint) = ours {
                    self.fingerprint = Some(Some(fingerprint));
                }
            }
            Ok(Err(err)) => tracing::warn!(%err, "cron runtime state not written back"),
            Err(err) => tracing::warn!(%err, "cron runtime state not written back"),
        }
    }
}

/// What a reading of the store gave the runner.
struct Reloaded {
    followed: HashMap<String, Followed>,
    /// New next slots to wait for.
    queue: Vec<(i64, String)>,
    catch_up: Vec<Due>,
    missed: Vec<(String, i64, String)>,
    /// Enabled jobs whose schedule cannot be worked out.
    broken: HashMap<String, Job>,
    /// Jobs read inside their error backoff, and until when.
    backoff: Vec<(String, i64)>,
    /// One-shots whose next slot is an attempt after a passing error.
    retrying: Vec<String>,
    fingerprint: Option<Fingerprint>,
    warnings: Vec<String>,
}

/// What decides a job's slots, hashed.
fn slots_version(job: &Job) -> u64 {
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
fn follow(
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
    fn take(&mut self, text: &str, job: Result<Job, String>) {
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
                    trigger: Trigger::Retry,
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
                    trigger: Trigger::CatchUp,
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
fn pending_retry(job: &Job) -> Option<i64> {
    if job.schedule.kind != ScheduleKind::At || job.state.last() != Some(&RunStatus::Error) {
        return None;
    }
    let last = job.state.last_run_at_ms?;
    job.state.next_run_at_ms.filter(|&next| next > last)
}

/// How one run ended.
struct Outcome {
    status: Ended,
    error: Option<String>,
    summary: Option<String>,
    session_key: Option<String>,
}

/// A run that ended, for the runner to settle.
struct Finished {
    id: String,
    trigger: Trigger,
    job: Arc<Job>,
    status: Ended,
    error: Option<String>,
    started_ms: i64,
    ended_ms: i64,
    /// Whether the result reached its destination (unset: not known yet).
    delivered: Option<bool>,
    delivery_error: Option<String>,
}

/// A slot claimed for a run, with its job and its task.
struct Claimed {
    due: Due,
    /// The job as its text reads (an error when it no longer does).
    job: Result<Arc<Job>, String>,
    task_id: String,
    started_ms: i64,
}

/// Whether a run of `job` takes time (a turn, a heartbeat run), so it
/// runs on its own under the concurrency limit; the rest only queue an
/// event (or are skipped) and run in the tick.
fn takes_time(job: &Job) -> bool {
    match (&job.session_target, job.payload.kind) {
        (SessionTarget::Main, PayloadKind::SystemEvent) => job.wake_mode == WakeMode::Now,
        (SessionTarget::Main, _) | (_, PayloadKind::SystemEvent) => false,
        (_, PayloadKind::AgentTurn) => true,
    }
}

/// The task of one run (`runtime: cron`, run id `cron:<job>:<started>`).
fn run_task(job_id: &str, name: &str, started: i64, generation: i64) -> NewTask {
    let mut new = NewTask::new(
        Runtime::Cron,
        format!("cron:{job_id}"),
        format!("Cron: {name}"),
    );
    new.source_id = Some(job_id.to_string());
    new.run_id = Some(format!("cron:{job_id}:{started}"));
    new.agent_id = Some(crate::app::agent::AGENT_ID.to_string());
    new.label = Some(format!("Cron: {name}"));
    new.running = Some(Lease {
        generation,
        until_ms: started + super::tasks::LEASE.as_millis() as i64,
    });
    new
}

fn terminal(outcome: &Outcome) -> Terminal {
    Terminal {
        status: match outcome.status {
            Ended::Ok | Ended::Skipped => TerminalStatus::Succeeded,
            Ended::Error => TerminalStatus::Failed,
            Ended::TimedOut => TerminalStatus::TimedOut,
        },
        error: outcome.error.clone(),
        terminal_summary: None,
        terminal_outcome: None,
    }
}

fn ended_slot(run: &Claimed, outcome: &Outcome) -> slots::EndedSlot {
    (
        run.due.id.clone(),
        run.due.slot_ms,
        outcome.status,
        outcome.error.clone(),
        Some(run.task_id.clone()),
    )
}

fn run_status(outcome: &Outcome) -> RunStatus {
    status_of(outcome.status)
}

/// The run-log status of a run that ended `ended`.
fn status_of(ended: Ended) -> RunStatus {
    match ended {
        Ended::Ok => RunStatus::Ok,
        Ended::Skipped => RunStatus::Skipped,
        Ended::Error | Ended::TimedOut => RunStatus::Error,
    }
}

/// The run log line of one run.
fn run_record(run: &Claimed, outcome: &Outcome, ended: i64) -> RunRecord {
    let mut record = RunRecord::finished(&run.due.id, ended);
    record.status = Some(run_status(outcome));
    record.error = outcome.error.clone();
    record.summary = outcome.summary.clone();
    record.session_key = outcome.session_key.clone();
    record.run_at_ms = Some(run.started_ms);
    record.duration_ms = Some(ended - run.started_ms);
    record
        .extra
        .insert("slotMs".into(), serde_json::json!(run.due.slot_ms));
    record
}

/// The outcome of a run whose job could no longer be read.
fn unreadable(problem: &str) -> Outcome {
    Outcome {
        status: Ended::Error,
        error: Some(problem.to_string()),
        summary: None,
        session_key: None,
    }
}

/// What the runner settles after `run` ended with `outcome` (nothing for
/// a job that could not be read).
fn finished(run: Claimed, outcome: Outcome, ended_ms: i64) -> Option<Finished> {
    let job = run.job.ok()?;
    Some(Finished {
        id: run.due.id,
        trigger: run.due.trigger,
        job,
        status: outcome.status,
        error: outcome.error,
        started_ms: run.started_ms,
        ended_ms,
        delivered: None,
        delivery_error: None,
    })
}

/// Whether the state after a run differs from the one before in what the
/// next run counts from.
fn carries_over(before: &JobState, after: &JobState) -> bool {
    before.consecutive_errors.unwrap_or(0) != after.consecutive_errors.unwrap_or(0)
        || before.last_failure_alert_at_ms != after.last_failure_alert_at_ms
        || before.schedule_error_count != after.schedule_error_count
}

/// The ledger note of a slot skipped inside a job's error backoff.
fn backoff_note(until_ms: i64) -> String {
    let until = jiff::Timestamp::from_millisecond(until_ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| until_ms.to_string());
    format!("skipped: error backoff until {until}")
}

/// Why `job`'s schedule cannot be worked out, if it cannot.
fn schedule_problem(job: &Job, host: &jiff::tz::TimeZone) -> Result<Slots, String> {
    let schedule = crate::cron::schedule::to_schedule(&job.schedule).map_err(|e| e.to_string())?;
    Slots::new(&schedule, &job.id, job.created_at_ms, host).map_err(|e| e.to_string())
}

/// Runs one claimed slot that takes time, then records its end: the
/// task and the slot in one transaction, the run log, the state.
async fn run_slot(shared: &Arc<Shared>, run: Claimed) -> Option<Finished> {
    let outcome = match &run.job {
        Ok(job) => execute(shared, job, run.due.slot_ms, run.started_ms).await,
        Err(problem) => unreadable(problem),
    };
    let ended = shared.host.now_ms();
    let app = shared.engine.app();
    let record = run_record(&run, &outcome, ended);
    let record =
        super::cron_delivery::deliver_end(shared, run.job.as_ref().ok(), run.due.slot_ms, record)
            .await;
    let delivered = (record.delivered, record.delivery_error.clone());
    let row = ended_slot(&run, &outcome);
    let end = terminal(&outcome);
    let task_id = run.task_id.clone();
    let book = shared.clone();
    let _ = shared
        .engine
        .blocking(move || {
            let written = book.tasks.with(|ledger| {
                ledger.batch(|batch| {
                    batch.finish(&task_id, end, ended)?;
                    slots::finish_in(batch.connection(), &[row], ended)?;
                    Ok(())
                })
            });
            if let Err(err) = written {
                tracing::warn!(%err, "the end of a cron run was not recorded");
            }
            let limits = runlog::Limits::from(&app.config.config.cron.run_log);
            if let Err(err) = runlog::append(&app.cron_store().runs_dir(), &record, limits) {
                tracing::warn!(%err, "cron run log not written");
            }
        })
        .await;
    finished(run, outcome, ended).map(|mut end| {
        (end.delivered, end.delivery_error) = delivered;
        end
    })
}

/// A `main` job's event, queued on its session (blocking: the intake
/// writes). Empty text is a skipped run.
fn queue_event(shared: &Shared, sessions: &crate::session::Sessions, job: &Job) -> Outcome {
    match event_record(shared, sessions, job) {
        Ok(record) => {
            let mut records = [record];
            let accepted = shared
                .intake
                .accept_all(&mut records)
                .map_err(|e| e.to_string());
            let [record] = records;
            queued(&accepted, record)
        }
        Err(skipped) => skipped,
    }
}

/// The intake record of a `main` job's event; a job without one is a
/// skipped run.
fn event_record(
    shared: &Shared,
    sessions: &crate::session::Sessions,
    job: &Job,
) -> Result<Record, Outcome> {
    if !matches!(
        (&job.session_target, job.payload.kind),
        (SessionTarget::Main, PayloadKind::SystemEvent)
    ) {
        return Err(Outcome {
            status: Ended::Skipped,
            error: Some("the job's payload does not fit its session target".into()),
            summary: None,
            session_key: None,
        });
    }
    let text = job.payload.text.as_deref().unwrap_or("").trim().to_string();
    if text.is_empty() {
        return Err(Outcome {
            status: Ended::Skipped,
            error: Some("main job requires non-empty systemEvent text".into()),
            summary: None,
            session_key: None,
        });
    }
    let mode = match job.wake_mode {
        WakeMode::Now => "now",
        WakeMode::NextHeartbeat => "next-heartbeat",
    };
    Ok(Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: "cron".into(),
        session_key: sessions.resolve_key(job.session_key.as_deref()),
        text,
        mode: mode.to_string().into(),
        trusted: true,
        hook: None,
        replay: None,
    })
}

/// The outcome of queueing `record`'s event.
fn queued(accepted: &Result<(), String>, record: Record) -> Outcome {
    match accepted {
        Ok(()) => Outcome {
            status: Ended::Ok,
            error: None,
            summary: Some(record.text),
            session_key: Some(record.session_key),
        },
        Err(err) => Outcome {
            status: Ended::Error,
            error: Some(format!("the event was not queued: {err}")),
            summary: None,
            session_key: Some(record.session_key),
        },
    }
}

/// Runs the payload of a job whose run takes time ([`takes_time`]), for
/// the slot `slot_ms`, started at `started_ms`.
async fn execute(shared: &Arc<Shared>, job: &Job, slot_ms: i64, started_ms: i64) -> Outcome {
    let app = shared.engine.app();
    match (&job.session_target, job.payload.kind) {
        (SessionTarget::Main, PayloadKind::SystemEvent) => {
            let queued = {
                let shared = shared.clone();
                let job = job.clone();
                let sessions = app.sessions(Some(crate::app::agent::AGENT_ID));
                shared
                    .engine
                    .clone()
                    .blocking(move || queue_event(&shared, &sessions, &job))
                    .await
            };
            let queued = match queued {
                Ok(outcome) => outcome,
                Err(err) => Outcome {
                    status: Ended::Error,
                    error: Some(format!("the event was not queued: {err}")),
                    summary: None,
                    session_key: None,
                },
            };
            if queued.status != Ended::Ok {
                return queued;
            }
            let key = queued.session_key.clone().unwrap_or_default();
            let reason = format!("cron:{}", job.id);
            let event = tokio::time::timeout(
                EVENT_TIMEOUT,
                super::heartbeat::run(shared, &reason, true, true),
            )
            .await;
            match event {
                Err(_) => Outcome {
                    status: Ended::TimedOut,
                    error: Some("cron: job execution timed out".into()),
                    summary: None,
                    session_key: Some(key),
                },
                Ok(Err(err)) => Outcome {
                    status: Ended::Error,
                    error: Some(format!("{err:#}")),
                    summary: None,
                    session_key: Some(key),
                },
                Ok(Ok(event)) => {
                    use crate::heartbeat::runs::RunStatus as Beat;
                    let status = match event.status {
                        Beat::Failed => Ended::Error,
                        Beat::Skipped => Ended::Skipped,
                        _ => Ended::Ok,
                    };
                    Outcome {
                        status,
                        error: event.reason.clone().filter(|_| status != Ended::Ok),
                        summary: event.preview,
                        session_key: Some(key),
                    }
                }
            }
        }
        (SessionTarget::Main, _) | (_, PayloadKind::SystemEvent) => Outcome {
            status: Ended::Skipped,
            error: Some("the job's payload does not fit its session target".into()),
            summary: None,
            session_key: None,
        },
        (target, PayloadKind::AgentTurn) => {
            // Too late for its result to be delivered.
            let stale = crate::cron::outcome::is_stale(slot_ms, started_ms);
            agent_turn(shared, &app, job, target, stale).await
        }
    }
}

/// An `agentTurn` job: a turn in its own session, its answer delivered
/// as the job says (not at all when `stale`: the run came too late).
async fn agent_turn(
    shared: &Arc<Shared>,
    app: &App,
    job: &Job,
    target: &SessionTarget,
    stale: bool,
) -> Outcome {
    let key = match target {
        SessionTarget::Session(id) => id.clone(),
        _ => format!("agent:main:cron:{}", job.id),
    };
    let message = job.payload.message.as_deref().unwrap_or("").trim();
    if message.is_empty() {
        return Outcome {
            status: Ended::Skipped,
            error: Some("agentTurn job requires a message".into()),
            summary: None,
            session_key: Some(key),
        };
    }
    let time = almanac_heartbeat::prompt::time_text(
        &shared.host.now_ts().to_zoned_datetime(app.user_time_zone()),
    );
    let text = almanac_heartbeat::prompt::with_current_time(
        format!("[cron:{} {}] {message}", job.id, job.name),
        &time,
    );
    // The turn keeps the acknowledgement token in its reply only where
    // the channel the result goes to shows acknowledgements (`showOk`).
    let results = super::cron_delivery::result_target(job);
    let request = crate::app::agent::TurnRequest {
        message: text,
        session_key: Some(key.clone()),
        agent: Some(crate::app::agent::AGENT_ID.to_string()),
        model: job.payload.model.clone(),
        heartbeat: None,
        channel: results.channel().map(str::to_string),
    };
    let limit = match job.payload.timeout_seconds {
        Some(0) => Duration::MAX,
        Some(s) => Duration::from_secs(s),
        None => TURN_TIMEOUT,
    };
    let ticket = match shared.engine.lanes().enqueue(&key) {
        Ok(t) => t,
        Err(err) => {
            return Outcome {
                status: Ended::Error,
                error: Some(err.to_string()),
                summary: None,
                session_key: Some(key),
            };
        }
    };
    let cancel = shared.turns_cancel.child_token();
    let turn = shared.engine.turn_in_lane(
        ticket,
        request,
        crate::engine::quiet(),
        crate::engine::unattended(),
        cancel.clone(),
        Box::new(|| Ok(())),
    );
    let report = match tokio::time::timeout(limit, turn).await {
        Err(_) => {
            cancel.cancel();
            return Outcome {
                status: Ended::TimedOut,
                error: Some("cron: job execution timed out".into()),
                summary: None,
                session_key: Some(key),
            };
        }
        Ok(Err(err)) => {
            return Outcome {
                status: Ended::Error,
                error: Some(format!("{err:#}")),
                summary: None,
                session_key: Some(key),
            };
        }
        Ok(Ok(report)) => report,
    };
    // A webhook gets the run's event with the reply as its summary, at
    // the run's end.
    let text = report.outcome.reply.trim().to_string();
    let summary = Some(text.chars().take(2000).collect::<String>())
        .filter(|s| !s.is_empty() && !report.outcome.silent);
    let ok = Outcome {
        status: Ended::Ok,
        error: None,
        summary,
        session_key: Some(key.clone()),
    };
    if text.is_empty()
        || report.outcome.silent
        || stale
        || results != super::cron_delivery::ResultTarget::Outbox
    {
        return ok;
    }
    let item = crate::delivery::Item {
        source: crate::delivery::Source::Cron,
        session_key: key.clone(),
        agent_id: crate::app::agent::AGENT_ID.to_string(),
        text,
        task_id: None,
        to: None,
    };
    let failure = match shared
        .deliverer
        .deliver(item, &crate::delivery::Target::Outbox)
        .await
    {
        Ok(delivery) => match delivery.state {
            crate::delivery::DeliveryState::Failed { reason } => Some(reason),
            _ => None,
        },
        Err(err) => Some(err.to_string()),
    };
    match failure {
        // A failed delivery fails the run unless the job says it is
        // best-effort.
        Some(reason) if job.delivery.as_ref().and_then(|d| d.best_effort) != Some(true) => {
            Outcome {
                status: Ended::Error,
                error: Some(format!("delivery failed: {reason}")),
                ..ok
            }
        }
        Some(reason) => {
            tracing::warn!(job = %job.id, %reason, "cron result not delivered (best effort)");
            ok
        }
        None => ok,
    }
}

#[cfg(test)]
#[path = "cron_outcome_tests.rs"]
mod outcome_tests;

#[cfg(test)]
#[path = "cron_dst_tests.rs"]
mod dst_tests;

#[cfg(test)]
#[path = "cron_ledger_tests.rs"]
mod ledger_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Clock, TokioClock};

    fn write_jobs(state: &std::path::Path, created_ms: i64, catch_up: &str) {
        std::fs::create_dir_all(state.join("cron")).unwrap();
        let jobs = serde_json::json!({"version": 1, "jobs": [{
            "id": "tick-job", "name": "tick", "enabled": true,
            "createdAtMs": created_ms, "updatedAtMs": created_ms,
            "schedule": {"kind": "cron", "expr": "*/2 * * * * *", "tz": "UTC", "staggerMs": 0},
            "sessionTarget": "main", "wakeMode": "next-heartbeat",
            "payload": {"kind": "systemEvent", "text": "tick"},
            "catchUp": catch_up,
        }]});
        std::fs::write(
            state.join("cron/jobs.json"),
            serde_json::to_vec_pretty(&jobs).unwrap(),
        )
        .unwrap();
    }

    /// Every row of the slot ledger: (slot, status, trigger).
    fn rows(state: &std::path::Path) -> Vec<(i64, String, String)> {
        let conn = rusqlite::Connection::open(state.join("almanac.sqlite")).unwrap();
        let mut stmt = conn
            .prepare("SELECT slot_ms, status, trigger FROM cron_slots ORDER BY slot_ms")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    async fn run_for(
        dir: &std::path::Path,
        clock: &Arc<TokioClock>,
        generation: i64,
        seconds: u64,
    ) {
        let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), generation);
        let stop = CancellationToken::new();
        let runner = tokio::spawn(Arc::new(CronRunner).start(shared.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(seconds * 1000)).await;
        // A crash: the runner is dropped where it stands.
        runner.abort();
        let _ = runner.await;
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn every_slot_is_handled_once_across_a_crash_and_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let base: jiff::Timestamp = "2026-12-01T10:00:00.500Z".parse().unwrap();
        let clock = Arc::new(TokioClock::new(base));
        std::fs::create_dir_all(state.join("workspace")).unwrap();
        write_jobs(&state, base.as_millisecond() - 500, "once");
        // Up for 20 s, down for 10 s, up for 10 s.
        run_for(dir.path(), &clock, 1, 20).await;
        let up_until = clock.now().as_millisecond();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let down_until = clock.now().as_millisecond();
        run_for(dir.path(), &clock, 2, 10).await;
        let end = clock.now().as_millisecond();

        let rows = rows(&state);
        let slots: Vec<i64> = rows.iter().map(|r| r.0).collect();
        // Every even second from the start, each exactly once.
        let start = base.as_millisecond() - 500;
        let expected: Vec<i64> = (1..)
            .map(|k| start + 2000 * k)
            .take_while(|s| *s <= end)
            .collect();
        assert_eq!(slots, expected, "{rows:?}");
        for (slot, status, trigger) in &rows {
            if *slot <= up_until || *slot > down_until {
                // While up: run on time.
                if *slot <= up_until || trigger == "due" {
                    assert!(
                        status == "ok" || status == "interrupted",
                        "{slot}: {status} {trigger}"
                    );
                }
            }
        }
        // The slots while down: the latest ran at the restart, the others
        // are recorded missed.
        let down: Vec<&(i64, String, String)> = rows
            .iter()
            .filter(|r| r.0 > up_until && r.0 <= down_until)
            .collect();
        assert_eq!(down.len(), 5, "{down:?}");
        let (last, older) = down.split_last().unwrap();
        assert_eq!((last.1.as_str(), last.2.as_str()), ("ok", "catch-up"));
        for r in older {
            assert_eq!(
                (r.1.as_str(), r.2.as_str()),
                ("missed", "catch-up"),
                "{r:?}"
            );
        }
        // The run log has one line per run.
        let log = std::fs::read_to_string(state.join("cron/runs/tick-job.jsonl")).unwrap();
        let ran = rows.iter().filter(|r| r.1 == "ok").count();
        assert_eq!(log.lines().count(), ran);
    }
}
