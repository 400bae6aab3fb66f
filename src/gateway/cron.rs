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
//! * The slot ledger (SQLite, synced), the job store and the run logs are
//!   reached only on the engine's blocking boundary, never on an async
//!   worker: the tick only works out what is due ([`Ledger::lock`] and the
//!   claim check it, [`crate::engine::assert_not_async`]).
//!
//! This file follows the store and finds what is due; starting runs is
//! `cron_start.rs`, what follows their end `cron_settle.rs`, a run itself
//! `cron_run.rs`.

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
use super::cron_run::{Finished, backoff_note};
use super::supervisor::{Component, ComponentKind};
use crate::cron::job::{CronJob, JobState};
use crate::cron::slots::{self, SlotLedger, SlotTrigger};
use crate::cron::store::{CronStore, Fingerprint};

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
    /// The store as the runner restored it: read again unchanged, it
    /// still says it was repaired (until someone writes the store).
    restored_as: Option<Fingerprint>,
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
    pub(super) trigger: SlotTrigger,
}

/// The slot ledger the runner claims and records slots in. It is SQLite
/// with `synchronous=FULL` (each write waits for the disk), so it is
/// reached only from blocking work: [`Ledger::lock`] checks it is not on
/// an async worker ([`crate::engine::assert_not_async`]).
#[derive(Clone)]
struct Ledger(Arc<Mutex<SlotLedger>>);

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotLedger> {
        crate::engine::assert_not_async("the cron slot ledger");
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The runner's state between ticks.
struct Runner {
    shared: Arc<Shared>,
    ledger: Ledger,
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
    broken: HashMap<String, CronJob>,
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
    bus: &mut tokio::sync::broadcast::Receiver<super::GatewayEvent>,
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
    got: &Result<super::GatewayEvent, tokio::sync::broadcast::error::RecvError>,
) -> bool {
    matches!(
        got,
        Ok(super::GatewayEvent::ConfigReloaded)
            | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))
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
            ledger: Ledger(Arc::new(Mutex::new(ledger))),
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
        bus: &mut tokio::sync::broadcast::Receiver<super::GatewayEvent>,
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
            let due = self.take_due(now).await;
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
                    .blocking(move || ledger.lock().trim(slots::Budget::DEFAULT))
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
                self.shared.work_ran.notify_one();
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
    /// becomes the last good copy, and clears that once it is not the
    /// store as it was restored.
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
                shared.cron.report(&shared.registry, |p| {
                    p.damaged_store = Some(text.clone());
                    p.restored_as = read_as;
                });
                self.queue_notice(
                    "store",
                    format!("⚠️ {text}. `almanac cron list --all` shows the jobs now."),
                    false,
                );
            }
            None => {
                shared.cron.report(&shared.registry, |p| {
                    // The restored store read again, unchanged: the user
                    // has not seen or fixed anything yet.
                    if read_as.is_none() || read_as != p.restored_as {
                        p.damaged_store = None;
                        p.restored_as = None;
                    }
                });
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
                .blocking(move || ledger.lock().latest_slots())
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
                .blocking(move || ledger.lock().record_missed(&missed, now))
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
    /// recorded missed, on the blocking boundary: the ledger syncs).
    async fn take_due(&mut self, now: i64) -> Vec<Due> {
        let (due, missed) = self.pick_due(now);
        if !missed.is_empty() {
            let ledger = self.ledger.clone();
            let written = self
                .shared
                .engine
                .blocking(move || ledger.lock().record_missed(&missed, now))
                .await;
            match written {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => tracing::warn!(%err, "missed cron slots not recorded"),
                Err(err) => tracing::warn!(%err, "missed cron slots not recorded"),
            }
        }
        due
    }

    /// The slots due at `now` and those to record missed, taken off the
    /// queue (no I/O).
    fn pick_due(&mut self, now: i64) -> (Vec<Due>, Vec<(String, i64, String)>) {
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
                SlotTrigger::Retry
            } else {
                SlotTrigger::Due
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
        (due, missed)
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
}

#[path = "cron_start.rs"]
mod start;

#[path = "cron_settle.rs"]
mod settle;

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
