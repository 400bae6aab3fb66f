//! The supervisor: runs the gateway's closed set of components, restarts
//! one that fails, and keeps what `gateway status` shows of each.
//!
//! # Lifecycle of a component
//! 1. `start(shared, stop)` is called; the component is `running` while
//!    the future it returned runs. It learns about the rest of the
//!    gateway from the bus ([`super::Shared::bus`]) and ends when `stop`
//!    is cancelled, returning `Ok(())`.
//! 2. A future that returns an error, returns early or panics is a
//!    failure: the component is `restarting`, its restart count grows, its
//!    last error is kept, and it starts again after a backoff (200 ms
//!    doubling up to 30 s; back to 200 ms after a minute of good running).
//!    The other components keep running meanwhile.
//! 3. On shutdown the component is `stopped`.
//!
//! A component also answers for the journals it names
//! ([`Component::journals`]): while one of them cannot be synced the
//! component is `failing` (it keeps running), its last error says why
//! and its restart count grows by one per failure episode; the error
//! clears when the journal syncs again. The journal itself logs each
//! episode once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use crate::durable::SyncHealth;
pub(crate) use crate::gateway_client::ComponentStatus;

/// Every component the gateway runs: adding one is an edit here, in
/// [`ComponentKind::ALL`] and in `docs/gateway.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentKind {
    /// Serves the HTTP routes: control API, webhooks, health.
    ControlApi,
    /// Answers command lines sent over `gateway.sock`.
    CommandSocket,
    /// Turns accepted triggers in the intake log into session events.
    IntakeFeeder,
    /// Keeps the memory index in step with the Markdown files.
    MemoryWatcher,
    /// Embeds memory notes without a vector; drops an idle provider.
    MemoryEmbedder,
    /// Keeps the skills snapshot fresh.
    SkillsWatcher,
    /// Applies `config.json5` edits.
    ConfigWatcher,
    /// Renews the leases of running tasks, declares lost ones, prunes.
    TaskSweeper,
    /// Runs heartbeat turns on the interval and on wakes.
    HeartbeatRunner,
    /// Runs each cron job's slots exactly once.
    CronRunner,
    /// Resumes the webhook deliveries an earlier gateway left pending;
    /// answers for the outbox and the deliveries journal.
    Delivery,
    /// Polls one Telegram account (`telegram:<account>`).
    Telegram(&'static str),
    /// A component of a test.
    #[cfg(test)]
    Test(&'static str),
}

impl ComponentKind {
    /// Every component a gateway supervises; `docs/gateway.md` names
    /// each under its `## Components` section (tests check both).
    #[cfg(test)]
    pub(crate) const ALL: [ComponentKind; 11] = [
        ComponentKind::ControlApi,
        ComponentKind::CommandSocket,
        ComponentKind::IntakeFeeder,
        ComponentKind::MemoryWatcher,
        ComponentKind::MemoryEmbedder,
        ComponentKind::SkillsWatcher,
        ComponentKind::ConfigWatcher,
        ComponentKind::TaskSweeper,
        ComponentKind::HeartbeatRunner,
        ComponentKind::CronRunner,
        ComponentKind::Delivery,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ComponentKind::ControlApi => "control-api",
            ComponentKind::CommandSocket => "command-socket",
            ComponentKind::IntakeFeeder => "intake",
            ComponentKind::MemoryWatcher => "memory-watcher",
            ComponentKind::MemoryEmbedder => "memory-embedder",
            ComponentKind::SkillsWatcher => "skills-watcher",
            ComponentKind::ConfigWatcher => "config-watcher",
            ComponentKind::TaskSweeper => "task-sweeper",
            ComponentKind::HeartbeatRunner => "heartbeat",
            ComponentKind::CronRunner => "cron",
            ComponentKind::Delivery => "delivery",
            ComponentKind::Telegram(name) => name,
            #[cfg(test)]
            ComponentKind::Test(name) => name,
        }
    }
}

/// A long-running part of the gateway (see the module's lifecycle).
pub(crate) trait Component: Send + Sync + 'static {
    fn kind(&self) -> ComponentKind;
    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>>;

    /// The health of the journals whose failures are this component's to
    /// show (none by default).
    fn journals(&self, _shared: &Shared) -> Vec<watch::Receiver<SyncHealth>> {
        Vec::new()
    }
}

/// The registry of component states.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    rows: Mutex<Vec<Row>>,
}

#[derive(Debug)]
struct Row {
    shown: ComponentStatus,
    /// Why each of its journals that cannot be synced fails, by its
    /// place in [`Component::journals`].
    failing: BTreeMap<usize, String>,
    /// The last error shown is a problem the component reported.
    reported: bool,
}

impl Registry {
    pub(crate) fn snapshot(&self) -> Vec<ComponentStatus> {
        self.rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|r| r.shown.clone())
            .collect()
    }

    /// Whether every component has started.
    pub(crate) fn all_started(&self) -> bool {
        self.rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .all(|r| r.shown.state != "starting")
    }

    fn add(&self, name: &str) -> usize {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.push(Row {
            shown: ComponentStatus {
                name: name.to_string(),
                state: "starting".into(),
                restarts: 0,
                last_error: None,
            },
            failing: BTreeMap::new(),
            reported: false,
        });
        rows.len() - 1
    }

    fn update(&self, row: usize, f: impl FnOnce(&mut Row)) {
        if let Some(r) = self
            .rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(row)
        {
            f(r);
        }
    }

    /// The component runs (again): `failing` while a journal of its
    /// still cannot be synced.
    fn running(&self, row: usize) {
        self.update(row, |r| {
            r.shown.state = if r.failing.is_empty() {
                "running"
            } else {
                "failing"
            }
            .into();
        });
    }

    /// A problem the running component `kind` reports without failing (a
    /// broken file whose last good copy it keeps using): its last error
    /// until it reports `None`; a journal failure is shown first.
    pub(crate) fn report(&self, kind: ComponentKind, problem: Option<String>) {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = rows.iter_mut().find(|r| r.shown.name == kind.name()) else {
            return;
        };
        if !r.failing.is_empty() {
            return;
        }
        match problem {
            Some(problem) => r.shown.last_error = Some(problem),
            None if r.reported => r.shown.last_error = None,
            None => {}
        }
        r.reported = r.shown.last_error.is_some();
    }

    /// What the component's `journal`-th journal says of its syncs, with
    /// the failure episodes that began since its last word.
    fn journal_health(&self, row: usize, journal: usize, health: &SyncHealth, began: u64) {
        self.update(row, |r| {
            let began = u32::try_from(began).unwrap_or(u32::MAX);
            r.shown.restarts = r.shown.restarts.saturating_add(began);
            match &health.failing {
                Some(reason) => {
                    r.failing.insert(journal, reason.clone());
                    r.shown.last_error = Some(reason.clone());
                    r.reported = false;
                    if r.shown.state == "running" {
                        r.shown.state = "failing".into();
                    }
                }
                None if r.failing.remove(&journal).is_some() => {
                    r.shown.last_error = r.failing.values().next_back().cloned();
                    if r.failing.is_empty() && r.shown.state == "failing" {
                        r.shown.state = "running".into();
                    }
                }
                None => {}
            }
        });
    }
}

/// Tells the registry what `health` says, as it changes, until `stop`.
async fn report_journal(
    registry: Arc<Registry>,
    row: usize,
    journal: usize,
    mut health: watch::Receiver<SyncHealth>,
    stop: CancellationToken,
) {
    let mut episodes = 0;
    loop {
        let now = health.borrow_and_update().clone();
        registry.journal_health(row, journal, &now, now.episodes.saturating_sub(episodes));
        episodes = now.episodes;
        tokio::select! {
            changed = health.changed() => if changed.is_err() { return },
            () = stop.cancelled() => return,
        }
    }
}

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const GOOD_RUN: Duration = Duration::from_secs(60);

/// Runs `component` under supervision on `tracker` until `stop`.
pub(crate) fn supervise(
    component: Arc<dyn Component>,
    shared: Arc<Shared>,
    registry: Arc<Registry>,
    tracker: &TaskTracker,
    stop: CancellationToken,
) {
    let name = component.kind().name();
    let row = registry.add(name);
    for (journal, health) in component.journals(&shared).into_iter().enumerate() {
        tracker.spawn(report_journal(
            registry.clone(),
            row,
            journal,
            health,
            stop.clone(),
        ));
    }
    tracker.spawn(async move {
        let mut backoff = FIRST_BACKOFF;
        loop {
            registry.running(row);
            let began = tokio::time::Instant::now();
            let run = component.clone().start(shared.clone(), stop.clone());
            let outcome = std::panic::AssertUnwindSafe(run).catch_unwind().await;
            if stop.is_cancelled() {
                break;
            }
            let error = match outcome {
                Ok(Ok(())) => "stopped on its own".to_string(),
                Ok(Err(err)) => format!("{err:#}"),
                Err(panic) => format!("panicked: {}", panic_text(&*panic)),
            };
            tracing::error!(component = name, error = %error, "component failed; restarting");
            if began.elapsed() >= GOOD_RUN {
                backoff = FIRST_BACKOFF;
            }
            registry.update(row, |r| {
                r.shown.state = "restarting".into();
                r.shown.restarts = r.shown.restarts.saturating_add(1);
                r.shown.last_error = Some(error);
                r.reported = false;
            });
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        registry.update(row, |r| r.shown.state = "stopped".into());
    });
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

#[cfg(test)]
mod tests;
