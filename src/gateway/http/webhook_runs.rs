//! The agent runs of inbound webhooks (`<hooks.path>/agent` and agent
//! mappings): a request checked and accepted as a run, its task
//! recorded, its turn run in its own session, its answer delivered or
//! told to the main session, and runs a stop cut off resumed at the
//! next start.
//!
//! Invariants:
//! * An accepted run was acknowledged to its sender, so it runs: a run
//!   the gateway's stop cut off stays queued in the task ledger and the
//!   next start runs it again; a run starts once per process.
//! * A run's answer is delivered (or told to the main session) before its
//!   task is finished; a run whose answer went out before a crash cut it
//!   off is only finished at the next start, never delivered twice.
//! * The payload reaches the model only as marked, untrusted data, unless
//!   a mapping (the user's config) says otherwise.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::super::intake::{HOOK_AGENT_KIND, Record};
use super::super::{GatewayEvent, Shared};
use super::ApiError;
use super::webhook_replay::{accept_once, replay_key};
use super::webhooks::{bad, wake_mode_in};
use crate::config::HooksConfig;
use crate::durable;
use crate::trigger::{Source, Trigger, TurnRequest};

/// The channels an `/agent` run may deliver to: `last` (the agent's last
/// route, else the outbox), `outbox`, and `telegram` (the chat `to`).
const CHANNELS: &[&str] = &["last", "outbox", "telegram"];
/// How long a webhook's run may take when it does not say.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// What a webhook's agent run asks for besides its message: kept in its
/// intake record and its task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookRun {
    pub run_id: String,
    pub name: String,
    pub wake_mode: String,
    pub deliver: bool,
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// The mapping (config, the user's) lets its message reach the model
    /// without the untrusted-content markers; never from a request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unsafe_external_content: bool,
    /// The agent the run is for (none: the default agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// A chat message's run: where it came from and goes back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<super::super::chat_runs::ChatOrigin>,
    /// A subagent's run: whose child it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<super::super::subagent_runs::SubagentOrigin>,
}

/// An optional string field: absent or null is `None`; anything else
/// must be a string.
fn optional_text(payload: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match &payload[field] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_string())),
        _ => Err(bad(format!("{field} must be a string"))),
    }
}

/// The session key of an `/agent` run, under the `hooks.*` policy.
fn run_session_key(
    config: &HooksConfig,
    asked: Option<String>,
    from_mapping: bool,
) -> Result<String, ApiError> {
    let asked = asked.filter(|k| !k.is_empty());
    // A mapping's own key (static or templated) needs no opt-in; the
    // prefixes still apply.
    if asked.is_some() && !from_mapping && !config.allow_request_session_key {
        return Err(bad(
            "sessionKey is disabled for external /hooks/agent payloads; set hooks.allowRequestSessionKey=true to enable",
        ));
    }
    let key = asked
        .or_else(|| {
            config
                .default_session_key
                .as_deref()
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("hook:{}", uuid::Uuid::new_v4()));
    if let Some(prefixes) = &config.allowed_session_key_prefixes {
        let lower = key.to_lowercase();
        let prefixes: Vec<String> = prefixes.iter().map(|p| p.trim().to_lowercase()).collect();
        if !prefixes.is_empty() && !prefixes.iter().any(|p| lower.starts_with(p.as_str())) {
            return Err(bad(format!(
                "sessionKey must start with one of: {}",
                prefixes.join(", ")
            )));
        }
    }
    Ok(key)
}

/// Whether `hooks.allowedAgentIds` admits `id` (unset or `*`: any).
fn agent_allowed(config: &HooksConfig, id: &str) -> bool {
    match &config.allowed_agent_ids {
        None => true,
        Some(ids) => ids
            .iter()
            .map(|i| i.trim())
            .any(|i| i == "*" || i.eq_ignore_ascii_case(id)),
    }
}

/// `POST <path>/agent`: an isolated agent run, accepted into the intake
/// log (`{ok, runId}`); it runs once the feeder has recorded its task.
pub(super) async fn agent(
    shared: &Arc<Shared>,
    payload: &Value,
    credential: &str,
    idempotency: Option<String>,
    from_mapping: bool,
) -> Result<Value, ApiError> {
    let app = shared.engine.app();
    let config = &app.config.config.hooks;
    let message = payload["message"].as_str().map(str::trim).unwrap_or("");
    if message.is_empty() {
        return Err(bad("message required"));
    }
    let name = optional_text(payload, "name")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Hook".to_string());
    // An explicit agent must be allowed by `hooks.allowedAgentIds` and
    // be one of the config's agents; none is the default agent.
    let mut agent_id = None;
    if let Some(id) = optional_text(payload, "agentId")?.filter(|i| !i.is_empty()) {
        let id = crate::session::key::normalize_id(&id, crate::agents::MAIN);
        if !agent_allowed(config, &id) {
            return Err(bad("agentId is not allowed by hooks.allowedAgentIds"));
        }
        let agent = app.for_agent(Some(&id)).map_err(|e| bad(e.to_string()))?;
        agent_id = (!agent.default_agent).then_some(agent.agent);
    }
    let asked_key = optional_text(payload, "sessionKey")?.filter(|k| !k.is_empty());
    let session_key = run_session_key(config, asked_key.clone(), from_mapping)?;
    let wake_mode = wake_mode_in(payload, "wakeMode")?;
    let deliver = payload["deliver"] != Value::Bool(false);
    let channel = optional_text(payload, "channel")?
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "last".to_string());
    if !CHANNELS.contains(&channel.as_str()) {
        return Err(bad(format!("channel must be {}", CHANNELS.join("|"))));
    }
    let to = optional_text(payload, "to")?.filter(|t| !t.is_empty());
    if channel == "telegram" && to.is_none() {
        return Err(bad("channel telegram needs to: the chat id"));
    }
    let model = match &payload["model"] {
        Value::Null => None,
        Value::String(m) if !m.trim().is_empty() => Some(m.trim().to_string()),
        _ => return Err(bad("model required")),
    };
    let thinking = optional_text(payload, "thinking")?.filter(|t| !t.is_empty());
    if let Some(level) = &thinking
        && !crate::cron::job::THINKING_LEVELS.contains(&level.as_str())
    {
        return Err(bad(format!(
            "thinking must be one of {}",
            crate::cron::job::THINKING_LEVELS.join("|")
        )));
    }
    let timeout_seconds = match &payload["timeoutSeconds"] {
        Value::Null => None,
        Value::Number(n) if n.as_f64().is_some_and(|f| f >= 1.0) => {
            Some(n.as_f64().unwrap_or(1.0).floor() as u64)
        }
        _ => return Err(bad("timeoutSeconds must be a number of seconds above 0")),
    };
    let lane = shared
        .engine
        .session_key(&TurnRequest {
            session_key: Some(session_key.clone()),
            agent: agent_id.clone(),
            ..TurnRequest::default()
        })
        .map_err(|e| bad(e.to_string()))?;
    let replay = idempotency.map(|key| {
        // What the sender gave: a key almanac generated for this request
        // (`hook:<uuid>`) would make every retry a request of its own.
        let identity = json!({
            "pathKey": "agent", "agentId": agent_id.as_deref().unwrap_or(crate::agents::MAIN),
            "sessionKey": asked_key, "message": message, "name": name,
            "wakeMode": wake_mode, "deliver": deliver, "channel": channel, "to": to,
            "model": model, "thinking": thinking, "timeoutSeconds": timeout_seconds,
        });
        replay_key(credential, &identity, &key)
    });
    let run = WebhookRun {
        run_id: uuid::Uuid::new_v4().to_string(),
        name,
        wake_mode: wake_mode.to_string(),
        deliver,
        channel,
        to,
        model,
        thinking,
        timeout_seconds,
        // Only a mapping, which the user configured, may say so.
        allow_unsafe_external_content: from_mapping
            && payload["allowUnsafeExternalContent"] == Value::Bool(true),
        agent_id,
        chat: None,
        subagent: None,
    };
    let record = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: HOOK_AGENT_KIND.into(),
        session_key: lane,
        text: message.to_string(),
        mode: wake_mode.to_string().into(),
        trusted: false,
        hook: Some(serde_json::to_value(&run).map_err(internal)?),
        replay: None,
    };
    let answer = json!({"ok": true, "runId": run.run_id});
    accept_once(shared, replay, vec![record], None, answer).await
}

/// Records the tasks of a batch of runs (webhooks' and chat messages')
/// in one transaction; each with its record. A run recorded already (its
/// record fed again after a crash) or unreadable is left out. Blocking.
pub(crate) fn record_runs(
    shared: &Shared,
    records: Vec<Record>,
    now_ms: i64,
) -> anyhow::Result<Vec<(crate::tasks::Task, Record)>> {
    let mut seen = std::collections::HashSet::new();
    let mut news = Vec::new();
    let mut kept = Vec::new();
    for record in records {
        if let Some((run_id, new)) = run_task(shared, &record)?
            && seen.insert(run_id)
        {
            news.push(new);
            kept.push(record);
        }
    }
    if news.is_empty() {
        return Ok(Vec::new());
    }
    let ids = shared.tasks.with(|l| {
        l.batch(|b| {
            news.into_iter()
                .map(|new| b.create(new, now_ms))
                .collect::<Result<Vec<_>, _>>()
        })
    })?;
    let mut recorded = Vec::with_capacity(ids.len());
    for (id, record) in ids.into_iter().zip(kept) {
        if let Some(task) = shared.tasks.with(|l| l.get(&id))? {
            recorded.push((task, record));
        }
    }
    Ok(recorded)
}

/// The task of a webhook's run (`runtime: cli`, kind `hook`, or `chat`
/// for a chat message), with its run id; `None` when it is recorded
/// already or the record is unreadable.
fn run_task(
    shared: &Shared,
    record: &Record,
) -> anyhow::Result<Option<(String, crate::tasks::NewTask)>> {
    let Some(run) = record
        .hook
        .clone()
        .and_then(|v| serde_json::from_value::<WebhookRun>(v).ok())
    else {
        tracing::warn!(
            seq = record.seq,
            "a hook run record without its settings; skipped"
        );
        return Ok(None);
    };
    if shared.tasks.with(|l| l.get(&run.run_id))?.is_some() {
        return Ok(None);
    }
    let runtime = if run.subagent.is_some() {
        crate::tasks::Runtime::Subagent
    } else {
        crate::tasks::Runtime::Cli
    };
    let mut new = crate::tasks::NewTask::new(
        runtime,
        record.session_key.clone(),
        super::super::tasks::preview(&record.text),
    );
    new.task_kind = Some(
        if run.subagent.is_some() {
            super::super::subagent_runs::TASK_KIND
        } else if run.chat.is_some() {
            CHAT_TASK_KIND
        } else {
            "hook"
        }
        .to_string(),
    );
    new.run_id = Some(run.run_id.clone());
    new.label = Some(run.name.clone());
    new.requester_session_key = record.session_key.clone();
    if let Some(origin) = &run.subagent {
        new.requester_session_key = origin.parent_session_key.clone();
        new.child_session_key = Some(record.session_key.clone());
    }
    new.agent_id = Some(
        run.agent_id
            .clone()
            .unwrap_or_else(|| crate::trigger::AGENT_ID.to_string()),
    );
    new.lane_key = Some(record.session_key.clone());
    new.request = Some(serde_json::to_value(record)?);
    // Its answer is delivered, or told to the main session: a delivery
    // the task follows.
    new.notify_policy = crate::tasks::vocab::NotifyPolicy::DoneOnly;
    new.delivery_status = crate::tasks::DeliveryStatus::Pending;
    Ok(Some((run.run_id, new)))
}

/// Runs a recorded webhook run in the background: the turn in its own
/// session, its task ended, its answer delivered (or, when not
/// delivered, told to the main session as an untrusted event).
pub(crate) fn start_run(shared: &Arc<Shared>, mut task: crate::tasks::Task, record: Record) {
    // The run has its record; a copy of it in the task would only wait in
    // memory with every queued message.
    task.request = None;
    let fresh = shared
        .webhooks
        .started
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(task.task_id.clone());
    if !fresh {
        return;
    }
    let counted =
        (task.task_kind.as_deref() == Some(CHAT_TASK_KIND)).then(|| ChatRunCount::start(shared));
    // The run takes its place in its session's lane now, in the order the
    // runs were recorded: spawned tasks start in no set order.
    let mut lane = shared.engine.lanes().enqueue(&record.session_key);
    let running = shared.clone();
    shared.turns.spawn(async move {
        let _counted = counted;
        let task_id = task.task_id.clone();
        // A queued run waits small; its turn is built once the lane is its.
        if let Ok(ticket) = &mut lane {
            tokio::select! {
                () = ticket.ready() => {}
                () = running.turns_cancel.cancelled() => {}
            }
        }
        Box::pin(run_webhook(&running, task, record, lane)).await;
        // Only runs in flight are kept: the set would otherwise grow with
        // every message a gateway ever answered.
        running
            .webhooks
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&task_id);
    });
}

/// The task kind of a chat message's run.
const CHAT_TASK_KIND: &str = "chat";

/// One chat run counted in flight, from its start until it ends or is
/// dropped (a gateway stopping drops the runs it has not finished).
struct ChatRunCount(Arc<Shared>);

impl ChatRunCount {
    fn start(shared: &Arc<Shared>) -> ChatRunCount {
        shared.webhooks.chat_runs.send_modify(|n| *n += 1);
        ChatRunCount(shared.clone())
    }
}

impl Drop for ChatRunCount {
    fn drop(&mut self) {
        self.0
            .webhooks
            .chat_runs
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The kind of the intake record telling the main session how a run went.
pub(crate) const WEBHOOK_RESULT_KIND: &str = "hook-result";

/// Starts the webhook runs the ledger holds queued: recorded before a
/// crash but never started, or queued again because the gateway running
/// them stopped. Their acceptance was acknowledged, so they run.
pub(crate) async fn resume_runs(shared: &Arc<Shared>) {
    let listing = shared.clone();
    let queued = shared
        .engine
        .blocking(move || {
            let filter = crate::tasks::TaskFilter {
                status: Some(crate::tasks::Status::Queued),
                runtime: None,
            };
            listing.tasks.with(|l| l.list(filter, None))
        })
        .await;
    let tasks = match queued {
        Ok(Ok(tasks)) => tasks,
        Ok(Err(err)) => {
            tracing::error!(%err, "cannot list queued hook runs");
            return;
        }
        Err(err) => {
            tracing::error!(%err, "cannot list queued hook runs");
            return;
        }
    };
    // The ledger lists newest first; runs take their lane places oldest
    // first, so a chat's messages are answered in the order sent.
    let tasks: Vec<_> = tasks
        .into_iter()
        .rev()
        .filter(|t| {
            matches!(
                t.runtime,
                crate::tasks::Runtime::Cli | crate::tasks::Runtime::Subagent
            ) && matches!(
                t.task_kind.as_deref(),
                Some("hook" | "chat" | super::super::subagent_runs::TASK_KIND)
            )
        })
        .collect();
    if tasks.is_empty() {
        return;
    }
    // A run whose answer went out before a crash cut it off is only
    // finished: running it again would deliver it twice.
    let looking = shared.clone();
    let answered = shared
        .engine
        .blocking(move || answered_runs(&looking))
        .await
        .and_then(|r| r.map_err(anyhow::Error::from))
        .unwrap_or_else(|err| {
            tracing::warn!(%err, "cannot look for the answers of hook runs cut off");
            std::collections::HashSet::new()
        });
    for task in tasks {
        if answered.contains(&task.task_id) {
            let end = crate::tasks::Terminal {
                terminal_summary: Some("answered before the gateway stopped".into()),
                ..crate::tasks::Terminal::status(crate::tasks::TerminalStatus::Succeeded)
            };
            finish(shared, &task.task_id, end).await;
            continue;
        }
        let record = task
            .request
            .clone()
            .and_then(|r| serde_json::from_value::<Record>(r).ok());
        match record {
            Some(record) => start_run(shared, task, record),
            None => tracing::warn!(task = %task.task_id, "a queued hook run without its request"),
        }
    }
}

/// The webhook runs whose answer, or notice to the main session, is already
/// out: in the outbox, the deliveries journal or the intake log.
pub(crate) fn answered_runs(shared: &Shared) -> std::io::Result<std::collections::HashSet<String>> {
    let mut answered = shared.deliverer.tasks_with_results()?;
    let (records, _) =
        durable::read_journal(shared.intake.journal().path(), super::super::intake::parse)?;
    answered.extend(records.into_iter().filter_map(|r| {
        (r.kind == WEBHOOK_RESULT_KIND || r.kind == super::super::intake::SUBAGENT_ANNOUNCE_KIND)
            .then(|| r.hook?["taskId"].as_str().map(str::to_string))
            .flatten()
    }));
    Ok(answered)
}

async fn run_webhook(
    shared: &Arc<Shared>,
    task: crate::tasks::Task,
    record: Record,
    place: Result<crate::engine::Ticket, crate::engine::LaneError>,
) {
    let Some(run) = record
        .hook
        .clone()
        .and_then(|v| serde_json::from_value::<WebhookRun>(v).ok())
    else {
        return;
    };
    if let Some(chat) = run.chat.clone() {
        return super::super::chat_runs::run(shared, task, record, run, chat, place).await;
    }
    if let Some(origin) = run.subagent.clone() {
        return super::super::subagent_runs::run(shared, task, record, run, origin, place).await;
    }
    let lane = record.session_key.clone();
    // The payload reaches the model only as marked, untrusted data.
    let app = shared.engine.app();
    let received = jiff::Timestamp::from_millisecond(record.ts)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let time = almanac_heartbeat::prompt::time_text(
        &shared.host.now_ts().to_zoned_datetime(app.user_time_zone()),
    );
    let body = if run.allow_unsafe_external_content {
        format!(
            "[hook:{} {}] {}",
            run.run_id,
            super::external::one_line(&run.name, super::external::NAME_MAX_CHARS),
            record.text
        )
    } else {
        super::external::wrap(&record.text, "Webhook", &run.name, &run.run_id, &received)
    };
    let message = almanac_heartbeat::prompt::with_current_time(body, &time);
    drop(app);
    // The reply is shown as the channel it is delivered on shows replies
    // (`channels.<channel>.heartbeat.showOk`).
    let channel = if run.deliver {
        delivery_target(shared, &run, &run.channel).await.channel()
    } else {
        "hook"
    };
    let request = TurnRequest {
        message,
        session_key: Some(lane.clone()),
        agent: Some(
            run.agent_id
                .clone()
                .unwrap_or_else(|| crate::trigger::AGENT_ID.to_string()),
        ),
        model: run.model.clone(),
        heartbeat: None,
        channel: Some(channel.to_string()),
        chat_channel: None,
        account_id: None,
        peer: None,
        context: Vec::new(),
        shape: crate::trigger::TurnShape {
            thinking: run
                .thinking
                .as_deref()
                .and_then(crate::trigger::Thinking::parse),
            // Its header names the run: a run started again after a crash
            // finds the message its first start wrote.
            resume_marker: Some(if run.allow_unsafe_external_content {
                format!("[hook:{} ", run.run_id)
            } else {
                format!("| Job ID: {} |", run.run_id)
            }),
            ..crate::trigger::TurnShape::default()
        },
    };
    let limit = run.timeout_seconds.map_or(RUN_TIMEOUT, Duration::from_secs);
    let trigger = Trigger {
        source: Source::Webhook,
        request,
        timeout: Some(limit),
        task_id: Some(task.task_id.clone()),
    };
    let routed = match place {
        Ok(ticket) => {
            let admitted = super::super::route::Admitted::with_ticket(trigger, ticket);
            super::super::route::run(shared, admitted).await
        }
        Err(full) => Err(full.into()),
    };
    let result = match routed {
        Err(err) if err.is::<super::super::route::TimedOut>() => Err(anyhow::anyhow!(
            "hook run timed out after {} s",
            limit.as_secs()
        )),
        result => result,
    };
    // The gateway is stopping: a webhook's run was acknowledged to its
    // sender, so it is not given up. Its task stays as it is (queued, or
    // running under this start's lease) and the next start runs it again,
    // as after a crash.
    let stopped = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<crate::engine::Cancelled>().is_some());
    if stopped && shared.turns_cancel.is_cancelled() && !cancel_asked(shared, &task.task_id).await {
        tracing::info!(task = %task.task_id, "webhook run left for the next start");
        return;
    }
    // The answer is delivered (or told to the main session) before the
    // task is finished: a crash between the two leaves the task to run
    // again, and the next start finds the delivery and only finishes it
    // ([`resume_runs`]); finishing first could lose the answer.
    tell(shared, &task, &run, &lane, &result).await;
    let end = super::super::tasks::terminal_of(&result);
    finish(shared, &task.task_id, end).await;
}

/// Whether someone asked to cancel task `id` (`tasks cancel`), as
/// against the gateway stopping.
pub(crate) async fn cancel_asked(shared: &Arc<Shared>, id: &str) -> bool {
    let asking = shared.clone();
    let id = id.to_string();
    shared
        .engine
        .blocking(move || asking.tasks.with(|l| l.get(&id)))
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
        .is_some_and(|t| t.cancel_requested_at.is_some() || t.status.is_terminal())
}

/// Records how a webhook run ended, and says so on the bus.
pub(crate) async fn finish(shared: &Arc<Shared>, task_id: &str, end: crate::tasks::Terminal) {
    let status = crate::tasks::Status::from(end.status).as_str().to_string();
    let finishing = shared.clone();
    let id = task_id.to_string();
    let recorded = shared
        .engine
        .blocking(move || {
            let now = finishing.host.now_ms();
            finishing.tasks.finish(&id, end, now)
        })
        .await;
    if !matches!(recorded, Ok(Ok(()))) {
        tracing::error!(task = %task_id, "cannot record how a hook run ended");
    }
    let _ = shared.bus.send(GatewayEvent::TaskChanged {
        task_id: task_id.to_string(),
        status,
    });
}

/// Delivers a run's answer, or tells the main session how it went (not
/// delivered, or failed) as an untrusted event.
async fn tell(
    shared: &Arc<Shared>,
    task: &crate::tasks::Task,
    run: &WebhookRun,
    lane: &str,
    result: &anyhow::Result<crate::engine::turn::TurnReport>,
) {
    let name = super::external::one_line(&run.name, super::external::NAME_MAX_CHARS);
    // What the task's delivery comes to when the main session is told
    // instead: a failed delivery stays failed.
    let mut told = crate::tasks::DeliveryStatus::SessionQueued;
    let notice = match result {
        Ok(report) => {
            let reply = report.outcome.reply.trim().to_string();
            if run.deliver && !reply.is_empty() && !report.outcome.silent {
                let item = crate::delivery::Item {
                    source: crate::delivery::Source::Hook,
                    session_key: lane.to_string(),
                    agent_id: run
                        .agent_id
                        .clone()
                        .unwrap_or_else(|| crate::trigger::AGENT_ID.to_string()),
                    text: reply,
                    task_id: Some(task.task_id.clone()),
                    to: run.to.clone(),
                    channel: None,
                    account_id: None,
                };
                let target = delivery_target(shared, run, &run.channel).await;
                match shared.deliverer.deliver(item, &target).await {
                    Ok(_) => return,
                    Err(err) => {
                        told = crate::tasks::DeliveryStatus::Failed;
                        format!("Hook {name} (error): delivery failed: {err}")
                    }
                }
            } else if reply.is_empty() || report.outcome.silent {
                set_delivery(
                    shared,
                    &task.task_id,
                    crate::tasks::DeliveryStatus::NotApplicable,
                )
                .await;
                return;
            } else {
                format!("Hook {name}: {}", super::super::tasks::preview(&reply))
            }
        }
        Err(err) => format!("Hook {name} (error): {err:#}"),
    };
    let main = match shared.engine.session_key(&TurnRequest::default()) {
        Ok(key) => key,
        Err(_) => return,
    };
    let event = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: WEBHOOK_RESULT_KIND.into(),
        session_key: main.clone(),
        text: notice,
        mode: run.wake_mode.clone().into(),
        trusted: false,
        // Which run it tells of, for the look at the next start.
        hook: Some(json!({"taskId": task.task_id})),
        replay: None,
    };
    if let Err(err) = shared.intake.accept(event) {
        tracing::error!(%err, "cannot queue a hook run's result");
        set_delivery(shared, &task.task_id, crate::tasks::DeliveryStatus::Failed).await;
        return;
    }
    set_delivery(shared, &task.task_id, told).await;
    if run.wake_mode == "now" {
        let _ = shared.bus.send(GatewayEvent::Wake {
            reason: format!("hook:{}", run.run_id),
            session_key: main,
        });
    }
}

/// Records how the delivery of task `id`'s result stands.
pub(crate) async fn set_delivery(
    shared: &Arc<Shared>,
    id: &str,
    status: crate::tasks::DeliveryStatus,
) {
    let book = shared.clone();
    let id = id.to_string();
    let recorded = shared
        .engine
        .blocking(move || {
            let now = book.host.now_ms();
            book.tasks.with(|l| l.set_delivery(&id, status, now))
        })
        .await;
    if !matches!(recorded, Ok(Ok(_))) {
        tracing::warn!("a hook run's delivery was not recorded in its task");
    }
}

/// Where a run's answer goes: the outbox, or for `last` its agent's last
/// route (the chat its user last wrote from, or a heartbeat webhook an
/// earlier version delivered to), else the outbox.
async fn delivery_target(
    shared: &Arc<Shared>,
    run: &WebhookRun,
    channel: &str,
) -> crate::delivery::Target {
    if channel == "telegram"
        && let Some(to) = &run.to
    {
        return crate::delivery::Target::Chat(crate::trigger::ChatRoute {
            channel: channel.to_string(),
            to: to.clone(),
            account_id: None,
            thread_id: None,
            reply_to: None,
        });
    }
    if channel != "last" {
        return crate::delivery::Target::Outbox;
    }
    let Ok(app) = shared.engine.app().for_agent(run.agent_id.as_deref()) else {
        return crate::delivery::Target::Outbox;
    };
    shared
        .engine
        .blocking(move || {
            let route = crate::app::heartbeat::last_route(&app);
            super::super::heartbeat::delivery_target(&app, &route)
        })
        .await
        .unwrap_or(crate::delivery::Target::Outbox)
}

fn internal(err: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %err, "hook request failed");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chat_runs_in_flight_make_room_as_they_end() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), "token");
        let mut runs: Vec<_> = (0..3).map(|_| ChatRunCount::start(&shared)).collect();
        let mut room = Box::pin(shared.webhooks.room_for_chat_runs(3));
        assert!(
            (&mut room).now_or_never().is_none(),
            "room with 3 of 3 in flight"
        );
        runs.pop();
        assert!((&mut room).now_or_never().is_some(), "no room with 2 of 3");
        runs.clear();
        assert_eq!(*shared.webhooks.chat_runs.borrow(), 0);
    }
}
