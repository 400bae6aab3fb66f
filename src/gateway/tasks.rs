//! The gateway's side of the task ledger: it records every turn it runs
//! for a client (`runtime: cli`, kind `agent`), holds running tasks under
//! leases it renews, declares lost only what an earlier generation left
//! behind, and stops a task when asked.
//!
//! Task kinds and what a restart does with them (when the gateway that
//! ran them is gone, see `ARCHITECTURE.md`): `agent` (a turn asked for
//! over the control API or by `almanac agent`) is not retryable — its
//! caller waited for the answer and is gone — so a running one becomes
//! `lost`; kinds in [`RETRYABLE_KINDS`] go back to `queued` in their lane
//! place and are run again at start. Queued tasks stay queued.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::supervisor::{Component, ComponentKind};
use super::{GatewayEvent, Shared};
use crate::gateway_client::discovery;
use crate::tasks::{
    CancelOutcome, Ledger, NewTask, Runtime, Task, TaskError, Terminal, TerminalStatus,
};

/// The kind of a turn asked for through the control API.
pub(crate) const AGENT_KIND: &str = "agent";
/// Task kinds whose running tasks are queued again after the gateway that
/// ran them stopped: a webhook's turn was acknowledged to its sender, so
/// it must run.
pub(crate) const RETRYABLE_KINDS: &[&str] = &["hook"];
/// How long a running task is held without a renewal (several sweeps).
pub(crate) const LEASE: Duration = Duration::from_secs(300);
/// How often leases are renewed and the ledger swept.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The ledger as the gateway holds it: one writer connection.
pub(crate) struct TaskBook {
    pub ledger: Mutex<Ledger>,
    pub generation: i64,
    /// Running tasks' cancel switches, by task id.
    running: Mutex<HashMap<String, CancellationToken>>,
}

impl TaskBook {
    pub(crate) fn new(ledger: Ledger, generation: i64) -> TaskBook {
        TaskBook {
            ledger: Mutex::new(ledger),
            generation,
            running: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Ledger) -> T) -> T {
        f(&mut self.ledger.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Records a queued agent turn in `lane`.
    pub(crate) fn record_turn(
        &self,
        lane: &str,
        message: &str,
        request: serde_json::Value,
        now_ms: i64,
    ) -> Result<Task, TaskError> {
        let mut new = NewTask::new(Runtime::Cli, lane, preview(message));
        new.task_kind = Some(AGENT_KIND.to_string());
        new.requester_session_key = lane.to_string();
        new.agent_id = Some(crate::trigger::AGENT_ID.to_string());
        new.lane_key = Some(lane.to_string());
        new.request = Some(request);
        self.with(|l| l.create(new, now_ms))
    }

    /// Marks `id` running under this generation's lease; `false` when it
    /// was cancelled while it waited (it must not run).
    pub(crate) fn start(
        &self,
        id: &str,
        cancel: CancellationToken,
        now_ms: i64,
    ) -> Result<bool, TaskError> {
        let until = now_ms + LEASE.as_millis() as i64;
        match self.with(|l| l.start(id, self.generation, until, now_ms)) {
            Ok(_) => {
                self.running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_string(), cancel);
                Ok(true)
            }
            Err(TaskError::WrongStatus { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Records how `id` ended.
    pub(crate) fn finish(&self, id: &str, end: Terminal, now_ms: i64) -> Result<(), TaskError> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        self.with(|l| l.finish(id, end, now_ms)).map(|_| ())
    }

    /// Cancels the task `lookup` names: a queued one at once, a running
    /// one by stopping its turn (it records itself as cancelled).
    pub(crate) fn cancel(&self, lookup: &str, now_ms: i64) -> Result<CancelOutcome, TaskError> {
        let task = self
            .with(|l| l.get(lookup))?
            .ok_or_else(|| TaskError::NotFound(lookup.to_string()))?;
        let outcome = self.with(|l| l.cancel(&task.task_id, now_ms))?;
        if let CancelOutcome::Requested(_) = &outcome
            && let Some(switch) = self
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&task.task_id)
        {
            switch.cancel();
        }
        Ok(outcome)
    }
}

/// The `task` text of a turn: its message's first line, shortened.
pub(crate) fn preview(message: &str) -> String {
    crate::memory::snippet(message.lines().next().unwrap_or("").trim(), 120)
}

/// How a turn's result ends its task.
pub(crate) fn terminal_of(result: &anyhow::Result<crate::engine::turn::TurnReport>) -> Terminal {
    match result {
        Ok(report) => Terminal {
            status: TerminalStatus::Succeeded,
            error: None,
            terminal_summary: Some(preview(&report.outcome.reply)),
            terminal_outcome: None,
        },
        Err(err) if err.downcast_ref::<crate::engine::Cancelled>().is_some() => Terminal {
            error: Some(err.to_string()),
            ..Terminal::status(TerminalStatus::Cancelled)
        },
        Err(err) if err.is::<super::route::TimedOut>() => Terminal {
            error: Some(err.to_string()),
            ..Terminal::status(TerminalStatus::TimedOut)
        },
        Err(err) => Terminal {
            error: Some(format!("{err:#}")),
            ..Terminal::status(TerminalStatus::Failed)
        },
    }
}

/// Puts `gateway.json` back if it went missing, and says so.
fn republish_if_lost(paths: &crate::paths::Paths, info: &discovery::GatewayInfo) {
    match discovery::republish_if_lost(paths, info) {
        Ok(true) => tracing::warn!(
            path = %paths.gateway_file().display(),
            "gateway.json had gone missing: rewrote it"
        ),
        Ok(false) => {}
        Err(err) => tracing::warn!(%err, "cannot rewrite gateway.json"),
    }
}

/// Renews this generation's leases and sweeps the ledger every minute,
/// prunes the outbox, and puts `gateway.json` back if it went missing
/// (clients find the gateway only through it).
pub(crate) struct TaskSweeper;

impl Component for TaskSweeper {
    fn kind(&self) -> ComponentKind {
        ComponentKind::TaskSweeper
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            loop {
                let sweeping = shared.clone();
                let swept = shared
                    .engine
                    .blocking(move || {
                        let now = sweeping.host.now_ms();
                        let paths = &sweeping.engine.app().paths;
                        // Before the gateway is ready the file is not yet
                        // written: nothing has gone missing.
                        if sweeping.ready.load(Ordering::Acquire) {
                            republish_if_lost(paths, &sweeping.info);
                        }
                        if let Err(err) = sweeping.deliverer.prune(now) {
                            tracing::warn!(%err, "cannot prune the outbox");
                        }
                        super::subagent_archive::sweep(&sweeping, now);
                        let book = &sweeping.tasks;
                        book.with(|l| {
                            l.renew_leases(book.generation, now + LEASE.as_millis() as i64, now)?;
                            l.sweep(now, book.generation)
                        })
                    })
                    .await??;
                shared.work_ran.notify_one();
                for id in &swept.lost {
                    tracing::warn!(task = %id, "task lost: the gateway that ran it is gone");
                    let _ = shared.bus.send(GatewayEvent::TaskChanged {
                        task_id: id.clone(),
                        status: "lost".into(),
                    });
                }
                tokio::select! {
                    () = tokio::time::sleep(SWEEP_EVERY) => {}
                    () = stop.cancelled() => return Ok(()),
                }
            }
        })
    }
}
