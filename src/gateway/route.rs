//! The one way a trigger becomes a turn: admission (the lane has room; a
//! turn with a task is recorded in the same step as it joins its lane, so
//! the ledger's lane order is the order turns run in), the session's
//! lane, the task's start (a task cancelled while it waited never runs),
//! the time limit, and the engine. No other file of the gateway touches
//! the lanes.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::app::gateway::{GatewayPort, LaterAnswer};
use crate::engine::{Cancelled, LaneError, Ticket, turn::TurnReport};
use crate::trigger::Trigger;

/// A turn that ran out of its time (its cancellation already asked).
#[derive(Debug, thiserror::Error)]
#[error("the turn ran out of its {} s", .0.as_secs())]
pub(crate) struct TimedOut(pub Duration);

/// A trigger holding its place in its session's lane.
pub(crate) struct Admitted {
    trigger: Trigger,
    ticket: Ticket,
}

/// Whether `key`'s lane has a turn running or waiting.
pub(crate) fn busy(shared: &Shared, key: &str) -> bool {
    shared.engine.lanes().busy(key)
}

/// How many turns wait in `key`'s lane behind the running one.
#[cfg(test)]
pub(crate) fn waiting(shared: &Shared, key: &str) -> usize {
    shared.engine.lanes().waiting(key)
}

/// Holds `key`'s lane as a running turn does, until dropped.
#[cfg(test)]
pub(crate) async fn hold(shared: &Shared, key: &str) -> crate::engine::lanes::LaneGuard {
    shared.engine.lanes().enqueue(key).unwrap().enter().await
}

/// Admits `trigger` to the lane of its session key.
pub(crate) fn admit(shared: &Shared, trigger: Trigger) -> Result<Admitted, LaneError> {
    let key = trigger.request.session_key.clone().unwrap_or_default();
    let ticket = shared.engine.lanes().enqueue(&key)?;
    Ok(Admitted { trigger, ticket })
}

impl Admitted {
    /// `trigger` with the place its session's lane gave it earlier (the
    /// lane's key is the trigger's session key).
    pub(crate) fn with_ticket(trigger: Trigger, ticket: Ticket) -> Admitted {
        Admitted { trigger, ticket }
    }
}

/// Why a recorded admission failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(transparent)]
    Full(#[from] LaneError),
    #[error(transparent)]
    Recording(anyhow::Error),
}

/// Admits `trigger` to the lane `key` and records it as a task (by
/// `record`, on the blocking boundary) as one step: under the admission
/// lock, after the lane said it has room. The trigger carries its task.
pub(crate) async fn admit_recorded<T: Send + 'static>(
    shared: &Arc<Shared>,
    mut trigger: Trigger,
    key: &str,
    record: impl FnOnce(&Shared) -> anyhow::Result<(String, T)> + Send + 'static,
) -> Result<(Admitted, T), Refused> {
    let _admitted = shared.admission.lock().await;
    shared.engine.lanes().room(key)?;
    let recording = shared.clone();
    let (task_id, recorded) = shared
        .engine
        .blocking(move || record(&recording))
        .await
        .and_then(|r| r)
        .map_err(Refused::Recording)?;
    trigger.task_id = Some(task_id);
    trigger.request.session_key = Some(key.to_string());
    Ok((admit(shared, trigger)?, recorded))
}

/// Runs an admitted trigger: waits for its lane, marks its task started,
/// and runs the turn within its time limit (then cancels it).
pub(crate) async fn run(shared: &Arc<Shared>, admitted: Admitted) -> anyhow::Result<TurnReport> {
    run_telling(shared, admitted, None).await
}

/// As [`run`], and tells `started` when the turn starts (it has its lane
/// and a slot; a chat shows its typing indicator from then on).
pub(crate) async fn run_telling(
    shared: &Arc<Shared>,
    admitted: Admitted,
    started: Option<tokio::sync::oneshot::Sender<()>>,
) -> anyhow::Result<TurnReport> {
    let Admitted { trigger, ticket } = admitted;
    tracing::debug!(source = ?trigger.source, task = ?trigger.task_id, "turn admitted");
    let cancel = shared.turns_cancel.child_token();
    let on_start: Box<dyn FnOnce() -> anyhow::Result<()> + Send> = match trigger.task_id {
        Some(task_id) => {
            let (starting, switch) = (shared.clone(), cancel.clone());
            Box::new(move || {
                let now = starting.host.now_ms();
                if starting.tasks.start(&task_id, switch, now)? {
                    if let Some(started) = started {
                        let _ = started.send(());
                    }
                    Ok(())
                } else {
                    Err(Cancelled("before it started (tasks cancel)".into()).into())
                }
            })
        }
        None => Box::new(move || {
            if let Some(started) = started {
                let _ = started.send(());
            }
            Ok(())
        }),
    };
    let port: Arc<dyn GatewayPort> = Arc::new(Port::of(shared));
    let turn = shared.engine.turn_in_lane(
        ticket,
        trigger.request,
        cancel.clone(),
        on_start,
        Some(port),
    );
    let report = match trigger.timeout {
        None => turn.await,
        Some(limit) => match tokio::time::timeout(limit, turn).await {
            Ok(result) => result,
            Err(_) => {
                cancel.cancel();
                Err(TimedOut(limit).into())
            }
        },
    };
    // A burst of turns (a chat's messages) frees what it built once it is
    // over: the gateway gives it back when turns have been quiet a moment.
    shared.work_ran.notify_one();
    report
}

/// Admits and runs `trigger`.
pub(crate) async fn route(shared: &Arc<Shared>, trigger: Trigger) -> anyhow::Result<TurnReport> {
    let admitted = admit(shared, trigger)?;
    run(shared, admitted).await
}

/// The gateway as a turn in its own process reaches it: the paths of
/// `/v1/cron/reload`, `/v1/cron/jobs/{id}/run` and `/v1/system/event`
/// without the HTTP. Given to each turn the
/// gateway routes, it holds the gateway weakly: a turn never keeps a
/// stopped gateway alive.
pub(crate) struct Port(std::sync::Weak<Shared>);

impl Port {
    pub(crate) fn of(shared: &Arc<Shared>) -> Port {
        Port(Arc::downgrade(shared))
    }

    fn shared(&self) -> Result<Arc<Shared>, String> {
        self.0
            .upgrade()
            .ok_or_else(|| "the gateway is stopping".to_string())
    }
}

impl GatewayPort for Port {
    fn cron_changed(&self) {
        if let Ok(shared) = self.shared() {
            shared.cron.nudge();
        }
    }

    fn run_cron_job(&self, job_id: String, only_due: bool) -> LaterAnswer {
        let shared = self.shared();
        Box::pin(async move {
            let shared = shared?;
            super::http::run_cron_job(&shared, job_id, only_due)
                .await
                .map_err(|e| e.message)
        })
    }

    fn system_event(
        &self,
        text: String,
        mode: String,
        session_key: Option<String>,
        trusted: bool,
    ) -> Result<serde_json::Value, String> {
        let shared = self.shared()?;
        super::http::queue_system_event(&shared, &text, Some(&mode), session_key, trusted)
            .map(|queued| serde_json::to_value(queued).expect("answers serialise"))
            .map_err(|e| e.message)
    }

    fn spawn_subagent(
        &self,
        caller_agent: &str,
        caller_session: &str,
        arguments: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let shared = self.shared()?;
        super::subagent_runs::spawn(&shared, caller_agent, caller_session, arguments)
    }

    fn control_subagents(
        &self,
        caller_session: &str,
        arguments: &serde_json::Value,
    ) -> LaterAnswer {
        let shared = self.shared();
        let (session, arguments) = (caller_session.to_string(), arguments.clone());
        Box::pin(async move {
            let shared = shared?;
            super::subagent_control::spawns_recorded(&shared).await;
            // On the turn's own thread, as every tool is.
            super::subagent_control::tool(&shared, &session, &arguments)
        })
    }

    fn take_steering(&self, session_key: &str) -> Vec<String> {
        match self.shared() {
            Ok(shared) => shared.subagents.take_steering(session_key),
            Err(_) => Vec::new(),
        }
    }
}
