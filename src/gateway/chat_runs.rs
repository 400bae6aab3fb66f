//! A chat channel's message as a run: accepted into the intake log with
//! the agent and session its bindings chose, recorded as a task, run as
//! a turn in that session (the sender's words as the user's message,
//! what came with them as untrusted data), and its reply sent back to
//! the chat through the deliveries journal.
//!
//! It rides on the webhook runs' machinery ([`super::http::webhook_runs`]):
//! one task per message (keyed by the channel's own message id, so a
//! message fed twice runs once), resumed after a crash, and finished only
//! once its reply is journaled — a run whose reply went out before a
//! crash is only finished, never answered twice.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Shared;
use super::http::webhook_runs::{self as runs, WebhookRun};
use super::intake::{HOOK_AGENT_KIND, Record};
use crate::trigger::{ChatContext, ChatPeer, ChatRoute, Source, Trigger, TurnRequest};

/// How often the typing indicator is renewed (Telegram shows it ~5 s).
const TYPING_EVERY: Duration = Duration::from_secs(4);

/// Where a chat message came from (and its reply goes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatOrigin {
    pub channel: String,
    pub account_id: String,
    /// `direct`, `group` or `channel`.
    pub peer_kind: String,
    /// The chat (a user id for a direct chat).
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<i64>,
    /// The message, which the reply answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<i64>,
    /// What came with the message (quoted, forwarded, group history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ChatContext>,
}

/// A routed chat message, ready for the intake log.
#[derive(Debug, Clone)]
pub(crate) struct Routed {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    pub sender: String,
    pub text: String,
    pub origin: ChatOrigin,
}

/// The intake record of a routed message (a run, kind `hook-agent`).
pub(crate) fn record(routed: Routed, now_ms: i64) -> anyhow::Result<Record> {
    let run = WebhookRun {
        run_id: routed.run_id,
        name: format!("{} message from {}", routed.origin.channel, routed.sender),
        wake_mode: "now".into(),
        deliver: true,
        channel: routed.origin.channel.clone(),
        to: Some(routed.origin.chat_id.clone()),
        model: None,
        thinking: None,
        timeout_seconds: None,
        allow_unsafe_external_content: false,
        agent_id: Some(routed.agent_id),
        chat: Some(routed.origin),
        subagent: None,
    };
    Ok(Record {
        seq: 0,
        ts: now_ms,
        kind: HOOK_AGENT_KIND.into(),
        session_key: routed.session_key,
        text: routed.text,
        mode: "now".into(),
        trusted: false,
        hook: Some(serde_json::to_value(&run)?),
        replay: None,
    })
}

/// Where the reply to `origin` goes.
pub(crate) fn route_of(origin: &ChatOrigin) -> ChatRoute {
    ChatRoute {
        channel: origin.channel.clone(),
        to: origin.chat_id.clone(),
        account_id: Some(origin.account_id.clone()),
        thread_id: origin.thread_id,
        reply_to: origin.message_id,
    }
}

/// The turn of a chat message: the sender's words as the user's
/// message, what came with them after it as untrusted data, the route it
/// came by recorded as the session's.
fn request(run: &WebhookRun, origin: &ChatOrigin, record: &Record) -> TurnRequest {
    let mut request = TurnRequest {
        message: record.text.clone(),
        session_key: Some(record.session_key.clone()),
        agent: run.agent_id.clone(),
        channel: Some(origin.channel.clone()),
        chat_channel: Some(origin.channel.clone()),
        account_id: Some(origin.account_id.clone()),
        peer: Some(ChatPeer {
            kind: origin.peer_kind.clone(),
            id: origin.chat_id.clone(),
        }),
        context: origin.context.clone(),
        ..TurnRequest::default()
    };
    if let Err(err) = super::chat::with_context(&mut request) {
        // Kinds are the channel's own: a bad one is dropped, not obeyed.
        tracing::warn!(%err, "chat context dropped");
        request.context.clear();
    }
    request
}

/// Runs a recorded chat message (see the module).
pub(crate) async fn run(
    shared: &Arc<Shared>,
    task: crate::tasks::Task,
    record: Record,
    run: WebhookRun,
    origin: ChatOrigin,
    lane: Result<crate::engine::Ticket, crate::engine::LaneError>,
) {
    let request = request(&run, &origin, &record);
    let (started, starting) = tokio::sync::oneshot::channel();
    let typing = typing(shared, &origin, starting);
    let trigger = Trigger {
        source: Source::Chat,
        request,
        timeout: Some(runs::RUN_TIMEOUT),
        task_id: Some(task.task_id.clone()),
    };
    let result = match lane {
        Ok(ticket) => {
            let admitted = super::route::Admitted::with_ticket(trigger, ticket);
            super::route::run_telling(shared, admitted, Some(started)).await
        }
        Err(full) => Err(full.into()),
    };
    typing.abort();
    let stopped = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<crate::engine::Cancelled>().is_some());
    if stopped
        && shared.turns_cancel.is_cancelled()
        && !runs::cancel_asked(shared, &task.task_id).await
    {
        // Acknowledged to nobody yet, but taken from the channel: the
        // next start answers it.
        return;
    }
    let reply = match &result {
        Ok(report) if report.outcome.silent || report.outcome.reply.trim().is_empty() => None,
        Ok(report) => Some(report.outcome.reply.trim().to_string()),
        Err(err) => Some(format!(
            "Sorry, this message could not be answered: {}",
            one_line(&format!("{err:#}"))
        )),
    };
    match reply {
        Some(text) => {
            let item = crate::delivery::Item {
                source: crate::delivery::Source::Chat,
                session_key: record.session_key.clone(),
                agent_id: run.agent_id.clone().unwrap_or_default(),
                text,
                task_id: Some(task.task_id.clone()),
                to: Some(origin.chat_id.clone()),
                channel: Some(origin.channel.clone()),
                account_id: Some(origin.account_id.clone()),
            };
            let target = crate::delivery::Target::Chat(route_of(&origin));
            if let Err(err) = shared.deliverer.deliver(item, &target).await {
                tracing::error!(%err, "a chat reply was not recorded");
                runs::set_delivery(shared, &task.task_id, crate::tasks::DeliveryStatus::Failed)
                    .await;
            }
        }
        None => {
            runs::set_delivery(
                shared,
                &task.task_id,
                crate::tasks::DeliveryStatus::NotApplicable,
            )
            .await;
        }
    }
    let end = super::tasks::terminal_of(&result);
    runs::finish(shared, &task.task_id, end).await;
}

fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(200)
        .collect()
}

/// The typing indicator in the chat while the turn runs (best effort).
/// The typing indicator, from the turn's start (not while it waits for
/// its lane: a queue of messages would call the Bot API for each) until
/// aborted.
fn typing(
    shared: &Arc<Shared>,
    origin: &ChatOrigin,
    starting: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    let engine = shared.engine.clone();
    let origin = origin.clone();
    tokio::spawn(async move {
        if origin.channel != crate::channels::telegram::CHANNEL || starting.await.is_err() {
            return;
        }
        let Ok((api, _)) = engine.telegram_account(Some(&origin.account_id)) else {
            return;
        };
        loop {
            if let Err(err) = api.send_typing(&origin.chat_id, origin.thread_id).await {
                tracing::debug!(%err, "typing indicator not shown");
            }
            tokio::time::sleep(TYPING_EVERY).await;
        }
    })
}
