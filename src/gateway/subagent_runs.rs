//! A subagent as a run: `sessions_spawn` from a running turn accepts it
//! into the intake log (its task, for its own session
//! `agent:<agentId>:subagent:<uuid>`), the ledger records it as a task
//! (`runtime: subagent`, with its parent's and its own session key), it
//! runs as a turn in its session once its lane and a slot are free, and
//! its end is announced to the parent's session as an untrusted system
//! event that wakes it.
//!
//! It rides on the webhook runs' machinery ([`super::http::webhook_runs`]):
//! the spawn is durable once acknowledged (the intake log), a run is
//! recorded once, resumed after a crash, and finished only once its
//! announce is in the intake log — an announce written before a crash is
//! not written again.
//!
//! Invariants: the announce's `Status` comes from how the run ended
//! (`ok`, `error`, `timeout`, `cancelled`), never from the child's words;
//! the child's words reach the parent only inside the untrusted markers;
//! an exact `ANNOUNCE_SKIP` reply announces nothing.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Shared;
use super::http::webhook_runs::{self as runs, WebhookRun};
use super::intake::{HOOK_AGENT_KIND, Record};
use crate::agents::spawn::{Cleanup, Parent, SpawnRequest, child_session_key};
use crate::trigger::{Source, Trigger, TurnRequest};

/// The most children waiting for a slot at once; a spawn beyond it is
/// refused.
pub(crate) const QUEUE_MAX: usize = 256;

/// The reply by which a child asks for no announce.
pub(crate) const ANNOUNCE_SKIP: &str = "ANNOUNCE_SKIP";

/// The ledger's kind for a subagent's task.
pub(crate) const TASK_KIND: &str = "subagent";

/// Whose child a run is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubagentOrigin {
    pub parent_session_key: String,
    pub parent_agent_id: String,
    /// 1 for a child of a session a person or a schedule started.
    pub depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub cleanup: Cleanup,
    /// A later message to the same child (`/subagents send`), not its task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow_up: bool,
}

/// Accepts a spawn from the turn of `caller_session` (agent
/// `caller_agent`): checks it, writes it to the intake log, and answers
/// `{status: "accepted", runId, childSessionKey}`. Blocking.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    caller_agent: &str,
    caller_session: &str,
    arguments: &Value,
) -> Result<Value, String> {
    let request: SpawnRequest = serde_json::from_value(arguments.clone())
        .map_err(|e| format!("sessions_spawn arguments: {e}"))?;
    let app = shared.engine.app();
    let agents = app.agents().map_err(|e| e.to_string())?;
    let limits = app.config.config.agents.defaults.subagents.clone();
    let (depth, children_alive) = family(shared, caller_session)?;
    // Accepted by the tool but maybe not yet in the ledger (the intake
    // records it a moment later): counted too, once.
    let children_alive = children_alive
        .union(&shared.subagents.accepted_of(caller_session))
        .count();
    let parent = Parent {
        agent_id: caller_agent,
        depth,
        children_alive,
    };
    let plan = agents
        .plan_spawn(&limits, parent, request)
        .map_err(|e| e.to_string())?;
    let run_id = uuid::Uuid::new_v4().to_string();
    let child_key = child_session_key(&plan.agent_id, &run_id);
    let origin = SubagentOrigin {
        parent_session_key: caller_session.to_string(),
        parent_agent_id: caller_agent.to_string(),
        depth: plan.depth,
        label: plan.label.clone(),
        cleanup: plan.cleanup,
        follow_up: false,
    };
    let mut run = child_run(run_id, origin, Some(plan.agent_id));
    run.model = plan
        .model
        .or_else(|| limits.model.as_ref().map(|m| m.primary().to_string()));
    run.thinking = plan.thinking.or(limits.thinking);
    run.timeout_seconds = plan.timeout.map(|t| t.as_secs());
    accept(shared, run, &child_key, plan.task)
}

/// A child's run in its session, with no settings of its own yet.
fn child_run(run_id: String, origin: SubagentOrigin, agent_id: Option<String>) -> WebhookRun {
    WebhookRun {
        run_id,
        name: origin
            .label
            .clone()
            .unwrap_or_else(|| "subagent".to_string()),
        wake_mode: "now".into(),
        deliver: false,
        channel: "last".into(),
        to: None,
        model: None,
        thinking: None,
        timeout_seconds: None,
        allow_unsafe_external_content: false,
        agent_id,
        chat: None,
        subagent: Some(origin),
    }
}

/// Writes a child's run to the intake log (its task is recorded from it)
/// and counts it among its parent's children: the tool's answer.
fn accept(
    shared: &Shared,
    run: WebhookRun,
    child_key: &str,
    text: String,
) -> Result<Value, String> {
    if shared.subagents.waiting() >= QUEUE_MAX {
        return Err(format!(
            "{QUEUE_MAX} subagent runs already wait for a slot (agents.defaults.subagents.maxConcurrent); try again when some have ended"
        ));
    }
    let record = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: HOOK_AGENT_KIND.into(),
        session_key: child_key.to_string(),
        text,
        mode: "now".into(),
        trusted: false,
        hook: Some(serde_json::to_value(&run).map_err(|e| e.to_string())?),
        replay: None,
    };
    shared
        .intake
        .accept(record)
        .map_err(|e| format!("the run could not be recorded: {e}"))?;
    if let Some(origin) = &run.subagent {
        shared
            .subagents
            .accepted(&origin.parent_session_key, &run.run_id);
    }
    Ok(json!({"status": "accepted", "runId": run.run_id, "childSessionKey": child_key}))
}

/// A new message to the child of run `task` (`/subagents send`): a run
/// in the same session, announced to the same parent when it ends.
pub(crate) fn follow_up(
    shared: &Shared,
    task: &crate::tasks::Task,
    message: &str,
) -> Result<Value, String> {
    let mut origin = origin_of(task).ok_or("that run is not a subagent's")?;
    let message = message.trim();
    if message.is_empty() {
        return Err("the message is empty".into());
    }
    if message.chars().count() > crate::agents::spawn::MAX_TASK_CHARS {
        return Err(format!(
            "the message has more than {} characters",
            crate::agents::spawn::MAX_TASK_CHARS
        ));
    }
    origin.follow_up = true;
    let child_key = task.child_session_key.clone().unwrap_or_default();
    let run_id = uuid::Uuid::new_v4().to_string();
    let run = child_run(run_id, origin, task.agent_id.clone());
    accept(shared, run, &child_key, message.to_string())
}

/// The depth of `session` (0 unless it is a child) and the run ids of
/// its children queued or running.
fn family(
    shared: &Shared,
    session: &str,
) -> Result<(u32, std::collections::HashSet<String>), String> {
    let mut depth = 0;
    let mut alive = std::collections::HashSet::new();
    let tasks = shared
        .tasks
        .with(|l| l.live_subagents_around(session))
        .map_err(|e| e.to_string())?;
    for task in tasks {
        if task.requester_session_key == session {
            alive.insert(task.run_id.clone().unwrap_or(task.task_id.clone()));
        }
        if task.child_session_key.as_deref() == Some(session) {
            depth = origin_of(&task).map_or(1, |o| o.depth);
        }
    }
    Ok((depth, alive))
}

/// The origin a subagent task's request records.
pub(crate) fn origin_of(task: &crate::tasks::Task) -> Option<SubagentOrigin> {
    let hook = task.request.as_ref()?.get("hook")?.get("subagent")?;
    serde_json::from_value(hook.clone()).ok()
}

/// Runs a recorded child (see the module).
pub(crate) async fn run(
    shared: &Arc<Shared>,
    task: crate::tasks::Task,
    record: Record,
    run: WebhookRun,
    origin: SubagentOrigin,
    lane: Result<crate::engine::Ticket, crate::engine::LaneError>,
) {
    let header = if origin.follow_up {
        "Message"
    } else {
        "Subagent task"
    };
    let message = format!(
        "[{header} from {}]\n{}",
        origin.parent_session_key, record.text
    );
    let request = TurnRequest {
        message,
        session_key: Some(record.session_key.clone()),
        agent: run.agent_id.clone(),
        model: run.model.clone(),
        shape: crate::trigger::TurnShape {
            thinking: run
                .thinking
                .as_deref()
                .and_then(crate::trigger::Thinking::parse),
            subagent_depth: Some(origin.depth),
            ..crate::trigger::TurnShape::default()
        },
        ..TurnRequest::default()
    };
    let trigger = Trigger {
        source: Source::Webhook,
        request,
        timeout: run.timeout_seconds.map(Duration::from_secs),
        task_id: Some(task.task_id.clone()),
    };
    let began = std::time::Instant::now();
    // Its own lane is free; it waits here for one of the children's slots.
    let max = shared
        .engine
        .app()
        .config
        .config
        .agents
        .defaults
        .subagents
        .max_concurrent as usize;
    let slot = shared.subagents.take_or_stop(&task.task_id, max).await;
    // Killed while it waited: the ledger has it cancelled already.
    let killed_waiting = slot.is_none();
    let result = match (slot, lane) {
        (None, _) => {
            Err(crate::engine::Cancelled("before it started (killed while queued)".into()).into())
        }
        (Some(_slot), Ok(ticket)) => {
            let admitted = super::route::Admitted::with_ticket(trigger, ticket);
            super::route::run(shared, admitted).await
        }
        (Some(_), Err(full)) => Err(full.into()),
    };
    shared.subagents.take_steering(&record.session_key);
    let cancelled = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<crate::engine::Cancelled>().is_some());
    if cancelled
        && shared.turns_cancel.is_cancelled()
        && !runs::cancel_asked(shared, &task.task_id).await
    {
        // The gateway is stopping: the next start runs it again.
        return;
    }
    if let Ok(report) = &result {
        let t = &report.timings;
        tracing::debug!(run = %run.run_id, skills = ?t.skills, assemble_ms = t.assemble_ms, model_ms = t.model_ms, overhead_ms = t.overhead_ms, total_ms = t.total_ms, waited_ms = began.elapsed().as_secs_f64() * 1000.0 - t.total_ms, "subagent turn ended");
    }
    let skip = matches!(&result, Ok(r) if r.outcome.reply.trim() == ANNOUNCE_SKIP);
    let mut told = false;
    if skip {
        runs::set_delivery(
            shared,
            &task.task_id,
            crate::tasks::DeliveryStatus::NotApplicable,
        )
        .await;
    } else {
        let received = shared.host.now_ts().to_string();
        let mut ending = Ending::of(&result);
        ending.transcript = transcript_of(shared, &task).await.map(|path| {
            if origin.cleanup == Cleanup::Delete {
                super::subagent_archive::archived_path(&path)
            } else {
                path
            }
        });
        let text = announce(
            &received,
            &task,
            &origin,
            &record.session_key,
            &ending,
            began.elapsed(),
        );
        told = tell_parent(shared, &task, &origin, text).await;
    }
    if !killed_waiting {
        let end = super::tasks::terminal_of(&result);
        runs::finish(shared, &task.task_id, end).await;
    }
    shared
        .subagents
        .ended(&origin.parent_session_key, &run.run_id);
    if origin.cleanup == Cleanup::Delete {
        super::subagent_archive::archive_run(shared, &task).await;
    }
    if told {
        start_relay(shared, origin);
    }
}

/// Starts the relay of an announce to `origin`'s parent, unless one runs
/// for that session already: it looks again once its turn is done.
fn start_relay(shared: &Arc<Shared>, origin: SubagentOrigin) {
    if shared.subagents.relay_wanted(&origin.parent_session_key) {
        let relaying = shared.clone();
        shared
            .turns
            .spawn(async move { relay(&relaying, &origin).await });
    }
}

/// Where the transcript of `task`'s session is.
async fn transcript_of(
    shared: &Arc<Shared>,
    task: &crate::tasks::Task,
) -> Option<std::path::PathBuf> {
    let app = shared.engine.app();
    let task = task.clone();
    shared
        .engine
        .blocking(move || crate::app::subagents::transcript(&app, &task))
        .await
        .ok()
        .flatten()
}

/// `Status` from how the run ended.
fn status_of(result: &anyhow::Result<crate::engine::turn::TurnReport>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(err) if err.is::<super::route::TimedOut>() => "timeout",
        Err(err) if err.downcast_ref::<crate::engine::Cancelled>().is_some() => "cancelled",
        Err(_) => "error",
    }
}

/// How a child ended, as its announce tells it.
struct Ending {
    status: &'static str,
    words: String,
    notes: String,
    tokens: u64,
    session_id: String,
    /// Where its transcript is (or goes, archived), if it has one.
    transcript: Option<std::path::PathBuf>,
}

impl Ending {
    fn of(result: &anyhow::Result<crate::engine::turn::TurnReport>) -> Ending {
        match result {
            Ok(report) => Ending {
                status: status_of(result),
                words: report.outcome.reply.trim().to_string(),
                notes: report.outcome.stopped.clone().unwrap_or_default(),
                tokens: report.outcome.usage.total_tokens,
                session_id: report.session_id.clone(),
                transcript: None,
            },
            Err(err) => Ending {
                status: status_of(result),
                words: String::new(),
                notes: format!("{err:#}"),
                tokens: 0,
                session_id: String::new(),
                transcript: None,
            },
        }
    }
}

/// The announce the parent's session is told.
fn announce(
    received: &str,
    task: &crate::tasks::Task,
    origin: &SubagentOrigin,
    child_key: &str,
    ending: &Ending,
    took: Duration,
) -> String {
    let name = origin.label.as_deref().unwrap_or("subagent");
    let result_block = if ending.words.is_empty() {
        "(no reply)".to_string()
    } else {
        super::http::external::wrap(
            &ending.words,
            "Subagent result",
            name,
            &task.task_id,
            received,
        )
    };
    let notes = if ending.notes.is_empty() {
        "-"
    } else {
        ending.notes.as_str()
    };
    format!(
        "Subagent {name} ended.\nStatus: {}\nResult:\n{result_block}\nNotes: {notes}\nStats: runtime {:.1} s · tokens {} · session {child_key} · session id {} · transcript {}",
        ending.status,
        took.as_secs_f64(),
        ending.tokens,
        ending.session_id,
        ending
            .transcript
            .as_ref()
            .map_or("-".to_string(), |p| p.display().to_string()),
    )
}

/// Announces the children that ended while no gateway ran them: those
/// the previous gateway left running (`lost`) or whose cancel it did not
/// finish (`cancelled`), not yet told to their parent. Once at start.
pub(crate) async fn announce_ended_while_down(shared: &Arc<Shared>) {
    let looking = shared.clone();
    let found = shared
        .engine
        .blocking(move || -> anyhow::Result<Vec<crate::tasks::Task>> {
            let answered = runs::answered_runs(&looking)?;
            let mut ended = Vec::new();
            for status in [crate::tasks::Status::Lost, crate::tasks::Status::Cancelled] {
                let filter = crate::tasks::TaskFilter {
                    status: Some(status),
                    runtime: Some(crate::tasks::Runtime::Subagent),
                };
                ended.extend(looking.tasks.with(|l| l.list(filter, None))?);
            }
            ended.retain(|t| {
                t.delivery_status == crate::tasks::DeliveryStatus::Pending
                    && !answered.contains(&t.task_id)
            });
            Ok(ended)
        })
        .await
        .and_then(|r| r);
    let ended = match found {
        Ok(ended) => ended,
        Err(err) => {
            tracing::error!(err = %format!("{err:#}"), "cannot look for subagents that ended while the gateway was down");
            return;
        }
    };
    for task in ended {
        let Some(origin) = origin_of(&task) else {
            continue;
        };
        let ending = Ending {
            status: if task.status == crate::tasks::Status::Lost {
                "lost"
            } else {
                "cancelled"
            },
            words: String::new(),
            notes: task.error.clone().unwrap_or_default(),
            tokens: 0,
            session_id: String::new(),
            transcript: None,
        };
        let took = Duration::from_millis(
            task.ended_at
                .zip(task.started_at)
                .map_or(0, |(end, start)| (end - start).max(0) as u64),
        );
        let child_key = task.child_session_key.clone().unwrap_or_default();
        let received = shared.host.now_ts().to_string();
        let text = announce(&received, &task, &origin, &child_key, &ending, took);
        if tell_parent(shared, &task, &origin, text).await {
            start_relay(shared, origin);
        }
    }
}

/// Queues the announce for the parent's session, as the webhook runs'
/// result notice: in the intake log before the task ends. Whether it is.
async fn tell_parent(
    shared: &Arc<Shared>,
    task: &crate::tasks::Task,
    origin: &SubagentOrigin,
    text: String,
) -> bool {
    let event = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: super::intake::SUBAGENT_ANNOUNCE_KIND.into(),
        session_key: origin.parent_session_key.clone(),
        text,
        mode: "now".into(),
        trusted: false,
        hook: Some(json!({"taskId": task.task_id})),
        replay: None,
    };
    let told = match shared.intake.accept(event) {
        Ok(_) => crate::tasks::DeliveryStatus::SessionQueued,
        Err(err) => {
            tracing::error!(%err, "cannot queue a subagent's announce");
            crate::tasks::DeliveryStatus::Failed
        }
    };
    let queued = told == crate::tasks::DeliveryStatus::SessionQueued;
    runs::set_delivery(shared, &task.task_id, told).await;
    queued
}

/// How long a relay waits for the intake to queue its announce.
const FEED_WAIT: Duration = Duration::from_secs(10);

/// The message of the turn that relays an announce (the announce itself
/// is among the session's queued events, which every turn carries).
const RELAY_MESSAGE: &str = "A background run you started has ended; its announce is above. Tell the user what came of it in a few words, or reply NO_REPLY if nothing needs saying.";

/// Runs a turn of the parent's session to relay the queued announce:
/// after the turn the session may be in (one turn per session at a time),
/// its reply to the chat the session's user last wrote from, else the
/// outbox. Should it fail, the announce stays queued for the session's
/// next turn.
async fn relay(shared: &Arc<Shared>, origin: &SubagentOrigin) {
    loop {
        // The announce is in the session's queue once the intake has fed it.
        shared.intake.caught_up(FEED_WAIT).await;
        // Another turn of the session may have taken the announces.
        if has_events(shared, origin).await {
            relay_turn(shared, origin).await;
        }
        // Announces that came meanwhile get one more turn.
        if !shared.subagents.relay_again(&origin.parent_session_key) {
            return;
        }
    }
}

/// Whether the parent's session has events waiting.
async fn has_events(shared: &Arc<Shared>, origin: &SubagentOrigin) -> bool {
    let Ok(app) = shared.engine.app().for_agent(Some(&origin.parent_agent_id)) else {
        return true;
    };
    let key = origin.parent_session_key.clone();
    shared
        .engine
        .blocking(move || !app.sessions(None).events().peek(&key).is_empty())
        .await
        .unwrap_or(true)
}

/// One turn of the parent's session that relays what it has queued.
async fn relay_turn(shared: &Arc<Shared>, origin: &SubagentOrigin) {
    // A parent that is itself a child (depth 2 and below) takes the
    // announce with its own narrowed context and tools; its words stay in
    // its session, for its own announce.
    let parent_depth = origin.depth.saturating_sub(1);
    let request = TurnRequest {
        message: RELAY_MESSAGE.to_string(),
        session_key: Some(origin.parent_session_key.clone()),
        agent: Some(origin.parent_agent_id.clone()),
        shape: crate::trigger::TurnShape {
            subagent_depth: (parent_depth > 0).then_some(parent_depth),
            ..crate::trigger::TurnShape::default()
        },
        ..TurnRequest::default()
    };
    let trigger = Trigger {
        source: Source::Webhook,
        request,
        timeout: Some(runs::RUN_TIMEOUT),
        task_id: None,
    };
    let report = match super::route::route(shared, trigger).await {
        Ok(report) => report,
        Err(err) => {
            tracing::warn!(err = %format!("{err:#}"), "a subagent's announce was not relayed; it waits for the session's next turn");
            return;
        }
    };
    let reply = report.outcome.reply.trim().to_string();
    if report.outcome.silent || reply.is_empty() || parent_depth > 0 {
        return;
    }
    let Ok(app) = shared.engine.app().for_agent(Some(&origin.parent_agent_id)) else {
        return;
    };
    let key = origin.parent_session_key.clone();
    let route = shared
        .engine
        .blocking(move || crate::app::heartbeat::session_chat_route(&app, &key))
        .await
        .ok()
        .flatten();
    let target = match route {
        Some(route) => crate::delivery::Target::Chat(route),
        None => crate::delivery::Target::Outbox,
    };
    let item = crate::delivery::Item {
        source: crate::delivery::Source::Hook,
        session_key: origin.parent_session_key.clone(),
        agent_id: origin.parent_agent_id.clone(),
        text: reply,
        task_id: None,
        to: None,
        channel: None,
        account_id: None,
    };
    if let Err(err) = shared.deliverer.deliver(item, &target).await {
        tracing::warn!(%err, "a subagent's relay was not delivered");
    }
}
