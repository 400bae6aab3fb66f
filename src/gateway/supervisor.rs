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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;

/// Every component the gateway runs: adding one is an edit here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentKind {
    /// Serves the HTTP routes: control API, webhooks, health.
    ControlApi,
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
    /// A component of a test.
    #[cfg(test)]
    Test(&'static str),
}

impl ComponentKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ComponentKind::ControlApi => "control-api",
            ComponentKind::IntakeFeeder => "intake",
            ComponentKind::MemoryWatcher => "memory-watcher",
            ComponentKind::MemoryEmbedder => "memory-embedder",
            ComponentKind::SkillsWatcher => "skills-watcher",
            ComponentKind::ConfigWatcher => "config-watcher",
            ComponentKind::TaskSweeper => "task-sweeper",
            ComponentKind::HeartbeatRunner => "heartbeat",
            ComponentKind::CronRunner => "cron",
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
}

/// What `gateway status` shows of a component.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ComponentStatus {
    pub name: String,
    /// `starting`, `running`, `restarting` or `stopped`.
    pub state: String,
    pub restarts: u32,
    pub last_error: Option<String>,
}

/// The registry of component states.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    rows: Mutex<Vec<ComponentStatus>>,
}

impl Registry {
    pub(crate) fn snapshot(&self) -> Vec<ComponentStatus> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether every component has started.
    pub(crate) fn all_started(&self) -> bool {
        self.rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .all(|r| r.state != "starting")
    }

    fn add(&self, name: &str) -> usize {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.push(ComponentStatus {
            name: name.to_string(),
            state: "starting".into(),
            restarts: 0,
            last_error: None,
        });
        rows.len() - 1
    }

    fn update(&self, row: usize, f: impl FnOnce(&mut ComponentStatus)) {
        if let Some(r) = self
            .rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(row)
        {
            f(r);
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
    tracker.spawn(async move {
        let mut backoff = FIRST_BACKOFF;
        loop {
            registry.update(row, |r| r.state = "running".into());
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
                r.state = "restarting".into();
                r.restarts = r.restarts.saturating_add(1);
                r.last_error = Some(error);
            });
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        registry.update(row, |r| r.state = "stopped".into());
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
