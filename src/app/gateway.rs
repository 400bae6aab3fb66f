//! Gateway use cases for the command line: running it, asking how it is,
//! stopping it, and the commands that go through it when it runs
//! (`system event`, `agent --message`) or work on the files without it.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::App;
use crate::gateway_client::discovery;
use crate::gateway_client::{self, GatewayStatus};
use crate::trigger::TurnRequest;

/// An answer the gateway gives later.
pub(crate) type LaterAnswer =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send>>;

/// What a turn inside the gateway's own process asks of the gateway
/// directly; outside it the same goes over the control API
/// (`/v1/cron/reload`, `/v1/cron/jobs/{id}/run`, `/v1/system/event`).
/// The gateway gives one with every turn it routes, and the engine hands
/// it to the turn's tools, so the app never imports the gateway.
pub(crate) trait GatewayPort: Send + Sync {
    /// The job store changed: the cron runner reads it now.
    fn cron_changed(&self);
    /// Runs the job `job_id` now (`only_due`: only when it is due): the
    /// runner's answer `{ok, ran?, enqueued?, reason?, runId?}`.
    fn run_cron_job(&self, job_id: String, only_due: bool) -> LaterAnswer;
    /// Queues a system event for `session_key` (the main session when
    /// `None`), with a wake for mode `now`, as `/v1/system/event` does;
    /// `trusted` false shows it as untrusted (a model made it).
    fn system_event(
        &self,
        text: String,
        mode: String,
        session_key: Option<String>,
        trusted: bool,
    ) -> Result<Value, String>;
    /// Starts a subagent for the turn of `caller` (`sessions_spawn`'s
    /// arguments): `{status: "accepted", runId, childSessionKey}`, or why
    /// not. Blocking (the turn's thread).
    fn spawn_subagent(
        &self,
        caller_agent: &str,
        caller_session: &str,
        arguments: &Value,
    ) -> Result<Value, String>;
    /// One `subagents` tool action (`list`, `kill`, `steer`) over the
    /// children of `caller_session` and theirs, once the spawns
    /// acknowledged so far are recorded.
    fn control_subagents(&self, caller_session: &str, arguments: &Value) -> LaterAnswer {
        let _ = (caller_session, arguments);
        Box::pin(async { Err("the subagents tool needs the running gateway".into()) })
    }
    /// The steering messages waiting for the running turn of
    /// `session_key`, taken.
    fn take_steering(&self, session_key: &str) -> Vec<String> {
        let _ = session_key;
        Vec::new()
    }
}

/// A system event that cannot be queued.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadEvent {
    #[error("mode `{0}` is not one of now, next-heartbeat")]
    Mode(String),
    #[error("the event text is empty")]
    Empty,
}

/// `gateway status`: from the running gateway, else "not running".
pub(crate) fn status(app: &App) -> anyhow::Result<GatewayStatus> {
    let Some(client) = app.gateway_client()? else {
        let mut status = GatewayStatus::not_running();
        // A gateway holds the lock but its gateway.json is gone or
        // unreadable: it runs, and puts the file back within a minute.
        status.running = discovery::lock_held(&app.paths);
        return Ok(status);
    };
    match client.get("/v1/status") {
        Ok(value) => Ok(serde_json::from_value(value)?),
        // Alive but not answering (starting, stuck): say what is known.
        Err(err) => {
            let info = &client.info;
            let mut status = GatewayStatus::not_running();
            status.running = true;
            status.pid = Some(info.pid);
            status.address = Some(info.address.clone());
            status.port = Some(info.port);
            status.started_at_ms = Some(info.started_at_ms);
            status.uptime_ms = Some(app.host.now_ms() - info.started_at_ms);
            status.components = vec![crate::gateway_client::ComponentStatus {
                name: "control-api".into(),
                state: "unreachable".into(),
                restarts: 0,
                last_error: Some(format!("{err:#}")),
            }];
            Ok(status)
        }
    }
}

/// What `gateway stop` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stopped {
    pub was_running: bool,
    pub pid: Option<u32>,
    /// It ended within the wait.
    pub stopped: bool,
}

/// `gateway stop`: SIGTERM to the running gateway, then waits for it to
/// end (its own shutdown deadline plus a margin).
pub(crate) fn stop(app: &App) -> anyhow::Result<Stopped> {
    let Some(info) = discovery::running(&app.paths) else {
        if discovery::lock_held(&app.paths) {
            return Err(anyhow::anyhow!(
                "a gateway runs on this state directory but its gateway.json is missing or unreadable; it writes it again within a minute: try then"
            ));
        }
        return Ok(Stopped {
            was_running: false,
            pid: None,
            stopped: true,
        });
    };
    let pid = libc::pid_t::try_from(info.pid)?;
    // SAFETY: sends SIGTERM to the pid the gateway published.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            return Err(anyhow::anyhow!(
                "cannot signal the gateway (pid {pid}): {err}"
            ));
        }
    }
    let wait = gateway_client::SHUTDOWN_DEADLINE + Duration::from_secs(5);
    let began = std::time::Instant::now();
    while discovery::pid_alive(info.pid) && began.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Stopped {
        was_running: true,
        pid: Some(info.pid),
        stopped: !discovery::pid_alive(info.pid),
    })
}

/// What `system event` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventQueued {
    pub ok: bool,
    pub queued: bool,
    pub mode: String,
    pub session_key: String,
    /// Whether a running gateway took it (else it went to the file).
    pub via_gateway: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// `system event`: through the gateway when one runs, else into the
/// session's queue file (no wake can happen then).
pub(crate) fn system_event(
    app: &App,
    text: &str,
    mode: &str,
    session_key: Option<&str>,
    trusted: bool,
) -> anyhow::Result<EventQueued> {
    if !crate::trigger::WAKE_MODES.contains(&mode) {
        return Err(BadEvent::Mode(mode.to_string()).into());
    }
    let req = TurnRequest {
        session_key: session_key.map(str::to_string),
        ..TurnRequest::default()
    };
    let agent = crate::trigger::check_agent(&req)?;
    // The event waits in the queue of the agent its session key names.
    let app = &app.for_agent(agent.as_deref())?;
    if text.trim().is_empty() {
        return Err(BadEvent::Empty.into());
    }
    if let Some(client) = app.gateway_client()? {
        let mut body = json!({"text": text, "mode": mode});
        if let Some(key) = session_key {
            body["sessionKey"] = json!(key);
        }
        if !trusted {
            body["trusted"] = json!(false);
        }
        let answer = client.post("/v1/system/event", &body, Duration::from_secs(10))?;
        return Ok(EventQueued {
            ok: true,
            queued: answer["queued"].as_bool().unwrap_or(true),
            mode: mode.to_string(),
            session_key: answer["sessionKey"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            via_gateway: true,
            warning: None,
        });
    }
    use anyhow::Context as _;
    app.ensure_state_dir().with_context(|| {
        format!(
            "cannot create the state directory {}",
            app.paths.state_dir.display()
        )
    })?;
    let sessions = app.sessions(None);
    let key = sessions.resolve_key(session_key);
    let now = app.host.now_ts();
    let (queued, warnings) = sessions
        .events()
        .enqueue(&key, text, now.as_millisecond(), trusted, now)
        .with_context(|| {
            format!(
                "cannot queue the event in {}",
                sessions.dir.join("system-events.json").display()
            )
        })?;
    let mut warning = warnings.join("; ");
    if !warning.is_empty() {
        warning.push_str("; ");
    }
    warning.push_str(if mode == "now" {
        "no gateway is running: the event waits for the session's next turn; no wake happened"
    } else {
        "no gateway is running: no heartbeat runs until one starts; the event waits for the session's next turn"
    });
    Ok(EventQueued {
        ok: true,
        queued,
        mode: mode.to_string(),
        session_key: key,
        via_gateway: false,
        warning: Some(warning),
    })
}

/// `tasks cancel`: through the running gateway, which owns running
/// tasks (`{ok, result, task}`).
pub(crate) fn cancel_task(app: &App, lookup: &str) -> anyhow::Result<Value> {
    let client = app.require_gateway()?;
    let segment = crate::gateway_client::client::path_segment(lookup);
    let path = format!("/v1/tasks/{segment}/cancel");
    let mut answer = client.post(&path, &json!({}), Duration::from_secs(30))?;
    if let Some(map) = answer.as_object_mut() {
        map.remove("ok");
    }
    Ok(answer)
}
