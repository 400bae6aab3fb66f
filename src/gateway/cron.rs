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
use super::cron_follow::follow;
use super::cron_run::{
    Claimed, Finished, Outcome, backoff_note, carries_over, ended_slot, event_record, finished,
    queued, run_id, run_record, run_slot, run_task, schedule_problem, status_of, takes_time,
    terminal, unreadable,
};
use super::intake::Record;
use super::supervisor::{Component, ComponentKind};
use crate::cron::job::{Job, JobState};
use crate::cron::outcome::{self, AfterRun, RunEnd};
use crate::cron::runlog::{self, RunRecord};
use crate::cron::slots::{self, Ended, SlotLedger, Trigger};
use crate::cron::store::{CronStore, Fingerprint, RuntimeUpdate};

/// Longest single sleep: a stopped clock or a missed wake-up costs at
/// most this.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Most missed slots one job runs at a start (`catchUp: all`).
pub(super) const CATCH_UP_LIMIT: usize = 100;
/// Most missed slots listed per job at a start.
pub(super) const MISSED_LIST_LIMIT: usize = 10_000;
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
pub(super) const EVENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);
pub(super) const TURN_TIMEOUT: Duration = Duration::from_secs(60 * 60);

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
    /// The job store the runner follows, fixed at its first start: a
    /// changed `cron.store` takes a restart.
    store: std::sync::OnceLock<CronStore>,
    /// What `gateway status` says is wrong: a `cron.store` changed under
    /// the runner, a store it found damaged and repaired.
    problems: Mutex<Problems>,
}

/// The cron component's problems, shown together as its last error.
#[derive(Debug, Default)]
struct Problems {
    moved_store: Option<String>,
    damaged_store: Option<String>,
}

impl CronState {
    pub(crate) fn new() -> CronState {
        let (manual_tx, manual_rx) = tokio::sync::mpsc::unbounded_channel();
        CronState {
            next_wake_ms: AtomicI64::new(i64::MIN),
            nudge: tokio::sync::Notify::new(),
            manual_tx,
            manual_rx: tokio::sync::Mutex::new(manual_rx),
            store: std::sync::OnceLock::new(),
            problems: Mutex::new(Problems::default()),
        }
    }

    /// Records the problems `change` sets and shows them all in the
    /// cron component's last error (none: cleared).
    fn report(&self, registry: &super::supervisor::Registry, change: impl FnOnce(&mut Problems)) {
        let mut problems = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut problems);
        let shown: Vec<&str> = [&problems.damaged_store, &problems.moved_store]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        registry.report(
            ComponentKind::CronRunner,
            (!shown.is_empty()).then(|| shown.join("; ")),
        );
    }

    /// The job store this gateway runs: `app`'s when it first asks.
    pub(crate) fn store(&self, app: &crate::app::App) -> CronStore {
        self.store.get_or_init(|| app.cron_store()).clone()
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
pub(super) struct Followed {
    /// The job as compact JSON (its text as the store holds it may be
    /// indented, and larger).
    pub(super) text: Arc<str>,
    pub(super) slots: Slots,
    /// The next slot to run.
    pub(super) next: Option<i64>,
    /// A hash of what decides the job's slots (to notice a change).
    pub(super) version: u64,
}

/// One slot to run.
pub(super) struct Due {
    pub(super) id: String,
    pub(super) text: Arc<str>,
    pub(super) slot_ms: i64,
    pub(super) trigger: Trigger,
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
    /// `cron.maxConcurrentRuns`, as the permits follow it.
    limit: usize,
    /// Runs an earlier start left running, for the first reading of the
    /// store to settle by their jobs' `catchUp`.
    interrupted: Vec<crate::cron::slots::Interrupted>,
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
            // Config reloads turn the runner off and on, and change its
            // limit, as they come.
            let mut bus = shared.bus.subscribe();
            loop {
                if !shared.engine.app().config.config.cron.enabled {
                    tracing::info!("cron.enabled is false: no job runs");
                    shared.cron.next_wake_ms.store(i64::MIN, Ordering::Release);
                    if !wait_until_enabled(&shared, &stop, &mut bus).await {
                        return Ok(());
                    }
                    tracing::info!("cron.enabled is true: jobs run");
                }
                let mut runner = Runner::open(shared.clone()).await?;
                let result = runner.run(&stop, &mut bus).await;
                runner.runs.close();
                runner.runs.wait().await;
                let finished = runner.take_finished();
                runner.settle(finished);
                runner.flush_states().await;
                match result? {
                    Stopped::Asked => return Ok(()),
                    Stopped::Disabled => continue,
                }
            }
        })
    }
}

/// Why [`Runner::run`] returned.
enum Stopped {
    /// The gateway stops.
    Asked,
    /// `cron.enabled` was turned off.
    Disabled,
}

/// While `cron.enabled` is off: answers `cron run` with why nothing runs,
/// says what a changed `cron.store` needs, and returns `true` once a
/// reload turns the runner on (`false`: the gateway stops).
async fn wait_until_enabled(
    shared: &Arc<Shared>,
    stop: &CancellationToken,
    bus: &mut tokio::sync::broadcast::Receiver<super::Event>,
) -> bool {
    let mut manual = shared.cron.manual_rx.lock().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return false,
            Some(asked) = manual.recv() => {
                let _ = asked.answer.send(serde_json::json!({
                    "ok": false,
                    "error": "cron.enabled is false: the gateway runs no job",
                }));
            }
            got = bus.recv() => {
                if config_may_have_changed(&got) {
                    let app = shared.engine.app();
                    report_store_path(shared, &app);
                    if app.config.config.cron.enabled {
                        return true;
                    }
                }
            }
        }
    }
}

/// Whether a bus message may mean the config changed (a reload, or
/// messages missed).
fn config_may_have_changed(
    got: &Result<super::Event, tokio::sync::broadcast::error::RecvError>,
) -> bool {
    matches!(
        got,
        Ok(super::Event::ConfigReloaded) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))
    )
}

/// `cron.store` names another file than the runner follows: that takes
/// a restart, which `gateway status` (the cron component's last error)
/// and the log say until the two agree again.
fn report_store_path(shared: &Shared, app: &crate::app::App) {
    let following = shared.cron.store(app);
    let configured = app.cron_store_path();
    let problem = (configured != following.path()).then(|| {
        format!(
            "cron.store changed to {}: restart the gateway to run its jobs; it runs those of {} until then",
            configured.display(),
            following.path().display()
        )
    });
    if let Some(problem) = &problem {
        tracing::warn!("{problem}");
    }
    shared
        .cron
        .report(&shared.registry, |p| p.moved_store = problem);
}

impl Runner {
    /// The runner of this gateway: the slot ledger opened, and runs an
    /// earlier start left running recorded interrupted.
    async fn open(shared: Arc<Shared>) -> anyhow::Result<Runner> {
        let app = shared.engine.app();
        let path = app.paths.state_store();
        let generation = shared.tasks.generation;
        let now = shared.host.now_ms();
        let runs_dir = shared.cron.store(&app).runs_dir();
        let limits = crate::cron::runlog::Limits::from(&app.config.config.cron.run_log);
        let (ledger, interrupted) = shared
            .engine
            .blocking(move || -> anyhow::Result<_> {
                let store = crate::store::Store::open(&path, crate::store::StoreKind::State)?;
                let mut ledger = SlotLedger::new(store.conn);
                let cut = ledger.interrupt_earlier(generation, now)?;
                if !cut.is_empty() {
                    tracing::warn!(
                        count = cut.len(),
                        "cron runs cut off by the previous gateway are recorded interrupted"
                    );
                    super::cron_interrupted::log_lines(&runs_dir, &cut, now, limits);
                }
                Ok((ledger, cut))
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
            limit,
            interrupted,
        })
    }

    async fn run(
        &mut self,
        stop: &CancellationToken,
        bus: &mut tokio::sync::broadcast::Receiver<super::Event>,
    ) -> anyhow::Result<Stopped> {
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
                () = stop.cancelled() => return Ok(Stopped::Asked),
                () = tokio::time::sleep(sleep) => timer_woke = true,
                got = bus.recv() => {
                    if config_may_have_changed(&got) && !self.follow_config() {
                        return Ok(Stopped::Disabled);
                    }
                }
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

    /// What a reading of a changed store leaves: a damaged store repaired
    /// is said where a user looks (`gateway status`, a system event for
    /// the main session; the log has it already); a store that read well
    /// clears that and becomes the last good copy.
    fn after_reading(
        &mut self,
        store: &CronStore,
        read_as: Option<Fingerprint>,
        repaired: Option<&crate::cron::store::Repaired>,
    ) {
        let shared = self.shared.clone();
        match repaired {
            Some(repaired) => {
                let text = repaired.describe(store.path());
                shared
                    .cron
                    .report(&shared.registry, |p| p.damaged_store = Some(text.clone()));
                self.queue_notice(
                    "store",
                    format!("⚠️ {text}. `almanac cron list --all` shows the jobs now."),
                    false,
                );
            }
            None => {
                shared
                    .cron
                    .report(&shared.registry, |p| p.damaged_store = None);
                if let Some(read_as) = read_as {
                    let store = store.clone();
                    self.runs.spawn(async move {
                        let kept = shared
                            .engine
                            .blocking(move || store.keep_good_copy(read_as))
                            .await;
                        if !matches!(kept, Ok(Ok(()))) {
                            tracing::warn!("the job store's last good copy was not kept");
                        }
                    });
                }
            }
        }
    }

    /// Follows a reloaded config: `false` when `cron.enabled` is now off;
    /// a new `cron.maxConcurrentRuns` applies to runs that start from now
    /// (runs going on finish); a new `cron.store` is reported. The other
    /// `cron.*` keys are read where they are used.
    fn follow_config(&mut self) -> bool {
        let app = self.shared.engine.app();
        let cron = &app.config.config.cron;
        if !cron.enabled {
            tracing::info!("cron.enabled turned off: runs going on finish, no new one starts");
            return false;
        }
        report_store_path(&self.shared, &app);
        let limit = cron.max_concurrent_runs.max(1) as usize;
        if limit > self.limit {
            self.permits.add_permits(limit - self.limit);
        } else if limit < self.limit {
            // Taken out of use as runs give them back.
            let fewer = u32::try_from(self.limit - limit).unwrap_or(u32::MAX);
            let permits = self.permits.clone();
            self.runs.spawn(async move {
                if let Ok(taken) = permits.acquire_many_owned(fewer).await {
                    taken.forget();
                }
            });
        }
        if limit != self.limit {
            tracing::info!(limit, "cron.maxConcurrentRuns changed");
        }
        self.limit = limit;
        true
    }

    /// Re-reads the store when its file changed (or at the first tick),
    /// following new and changed jobs and dropping removed ones; slots a
    /// job passed while it was not followed are caught up by its policy.
    async fn reload_if_changed(&mut self) -> anyhow::Result<()> {
        let app = self.shared.engine.app();
        let store = self.shared.cron.store(&app);
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
        let store = self.shared.cron.store(&app);
        self.after_reading(&store, read.fingerprint, read.repaired.as_ref());
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
        let mut catch_up = read.catch_up;
        if !self.interrupted.is_empty() {
            let cut = std::mem::take(&mut self.interrupted);
            let (again, disable) =
                super::cron_interrupted::plan(&cut, &self.followed, &catch_up, now);
            catch_up.extend(again);
            for (id, state) in disable {
                tracing::warn!(job = %id, "a one-shot cron run cut off by a stop is not run again (catchUp: skip): the job is disabled");
                self.states.insert(id, (state, true));
            }
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
        if !catch_up.is_empty() {
            self.start_runs(catch_up).await?;
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

    /// Queues `text` as a system event on the main session, with a wake
    /// (a notice from the runner itself): trusted unless `job_of_model`
    /// (the job's name and fields are then the model's words).
    fn queue_notice(&self, job_id: &str, text: String, job_of_model: bool) {
        let shared = self.shared.clone();
        let reason = format!("cron:{job_id}:disabled");
        self.runs.spawn(async move {
            let book = shared.clone();
            let queued = shared
                .engine
                .blocking(move || {
                    super::cron_delivery::queue_alert_event(&book, text, reason, !job_of_model)
                })
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
            let job_of_model = job.created_by_agent();
            job.state = state.clone();
            self.states.insert(id.clone(), (state, disable));
            if disable {
                tracing::warn!(job = %id, "cron job disabled after repeated schedule errors: {problem}");
                self.broken.remove(&id);
            }
            if let Some(text) = notice {
                self.queue_notice(&id, text, job_of_model);
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
    /// Returns the run ids of the runs started, by job.
    async fn start_runs(&mut self, due: Vec<Due>) -> anyhow::Result<Vec<(String, String)>> {
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
                        let by_id: HashMap<&str, Option<&Job>> = wanted
                            .iter()
                            .zip(&jobs)
                            .map(|(d, job)| (d.id.as_str(), job.as_ref().ok().map(|j| &**j)))
                            .collect();
                        let mut tasks = HashMap::with_capacity(claimed.len());
                        for (id, slot) in claimed {
                            let job = by_id.get(id.as_str()).copied().flatten();
                            let task = batch.create(run_task(&id, job, now, generation), now)?;
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
                            run_id: run_id(&due.id, now),
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
        let started: Vec<(String, String)> = claimed
            .iter()
            .map(|run| (run.due.id.clone(), run.run_id.clone()))
            .collect();
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
        Ok(started)
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
                let sessions = app.sessions(Some(crate::trigger::AGENT_ID));
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
                            // A webhook post follows from a task of its own
                            // and tells the task; until then nothing went.
                            batch.settle_delivery(
                                &run.task_id,
                                crate::tasks::DeliveryStatus::NotApplicable,
                                ended,
                            )?;
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
                let logged = runlog::append_all(
                    &shared.cron.store(&app).runs_dir(),
                    &records,
                    limits,
                    false,
                );
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
        // The run id is the run's task's and its run-log line's.
        match self.start_runs(vec![due]).await {
            Ok(started) => match started.into_iter().find(|(job, _)| *job == id) {
                Some((_, run_id)) => {
                    serde_json::json!({"ok": true, "ran": true, "enqueued": true, "runId": run_id, "jobId": id})
                }
                None => {
                    serde_json::json!({"ok": true, "ran": false, "reason": "already-running", "jobId": id})
                }
            },
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
        let store = self.shared.cron.store(&app);
        let now = self.shared.host.now_ts();
        let known = self.fingerprint;
        let written = self
            .shared
            .engine
            .blocking(
                move || -> Result<Option<Fingerprint>, crate::cron::CronError> {
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
#[path = "cron_tests.rs"]
mod tests;
