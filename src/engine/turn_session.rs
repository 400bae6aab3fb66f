//! What a turn does to its session around the model call: the opening
//! (a reset trigger, `/new provider/model`, the opening hooks),
//! compaction when the conversation nears the window, the entry's update
//! after the turn, the reply as it was sent, and closing a cancelled turn.

use serde_json::json;

use crate::agent::compaction::{self, Report};
use crate::agent::models::Models;
use crate::agent::prompt;
use crate::agent::tools::Tools;
use crate::agent::turn::{Log, Settings, TurnOutcome};
use crate::app::App;
use crate::provider::{self, Message, RetryPolicy};
use crate::session::store::SessionEntry;
use crate::session::{Sessions, Started, transcript};
use crate::trigger::TurnRequest;

/// A message that resets the session: the trigger and what follows it.
pub(super) fn reset_trigger<'a>(app: &App, message: &'a str) -> Option<(Started, &'a str)> {
    let triggers = &app.config.config.session.reset_triggers;
    let defaults = ["/new".to_string(), "/reset".to_string()];
    let triggers: &[String] = if triggers.is_empty() {
        &defaults
    } else {
        triggers
    };
    let text = message.trim_start();
    for t in triggers.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        // A message shorter than this trigger may still be a later one.
        let Some(head) = text.get(..t.len()) else {
            continue;
        };
        if head.eq_ignore_ascii_case(t)
            && text[t.len()..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        {
            let why = if t.eq_ignore_ascii_case("/reset") {
                Started::Reset
            } else {
                Started::New
            };
            return Some((why, text[t.len()..].trim()));
        }
    }
    None
}

/// What compacting before a turn needs to know.
pub(super) struct NearTheWindow<'a> {
    pub(super) app: &'a App,
    pub(super) key: &'a str,
    pub(super) system: &'a str,
    pub(super) message: &'a str,
    pub(super) memory_write: bool,
    pub(super) transcript: &'a std::path::Path,
}

impl NearTheWindow<'_> {
    /// The conversation the turn goes on from: near the context window,
    /// durable notes are flushed and older turns summarised first (with
    /// the compaction hooks); the report when that happened.
    pub(super) async fn compact(
        &self,
        models: &Models,
        retry: &RetryPolicy,
        settings: &Settings,
        stored: &transcript::Transcript,
        tools: &Tools<'_>,
        log: &mut Log<'_>,
    ) -> anyhow::Result<(Vec<Message>, Option<Report>)> {
        let app = self.app;
        let history = stored.context();
        let needed =
            compaction::estimate(self.system, &history) + prompt::estimate_tokens(self.message);
        let window = app.config.config.agents.defaults.context_tokens;
        if needed <= compaction::threshold(window) {
            return Ok((history, None));
        }
        app.fire_hook(
            "session:compact:before",
            self.key,
            json!({"messageCount": history.len(), "tokenCount": needed}),
        );
        let today = app.today().to_string();
        let now_text = app
            .host
            .now()
            .with_time_zone(app.user_time_zone())
            .strftime("%Y-%m-%d %H:%M")
            .to_string();
        let flush = (self.memory_write && tools.offers("memory_append")).then_some(tools);
        let compaction = compaction::compact(
            models, retry, settings, stored, flush, &today, &now_text, log,
        )
        .await?;
        let Some(report) = &compaction else {
            return Ok((history, None));
        };
        let history = transcript::read(self.transcript)?.context();
        let tokens_after = compaction::estimate(self.system, &history);
        app.fire_hook(
            "session:compact:after",
            self.key,
            json!({
                "messageCount": history.len(),
                "tokenCount": tokens_after,
                "compactedCount": report.summarised_messages,
                "tokensBefore": report.tokens_before,
                "tokensAfter": tokens_after,
            }),
        );
        Ok((history, compaction))
    }
}

/// How a turn opens: whether it starts a new session (`explicit`, and
/// `typed` when the user typed `/new` or `/reset`), a model `/new`
/// names, and the message that remains.
pub(super) struct Opening {
    pub(super) explicit: Option<Started>,
    pub(super) typed: bool,
    pub(super) model_choice: Option<String>,
    pub(super) message: String,
}

/// A heartbeat's prompt and a cron job's message are configuration,
/// never a `/new`; an isolated heartbeat or cron run starts a new session
/// every run; `/new provider/model` names the new session's model.
pub(super) fn opening(app: &App, req: &TurnRequest) -> Opening {
    let (explicit, rest, typed) = match (req.heartbeat, reset_trigger(app, &req.message)) {
        _ if req.shape.isolated_run => (Some(Started::New), req.message.clone(), false),
        (Some(h), _) => (
            h.fresh_session.then_some(Started::New),
            req.message.clone(),
            false,
        ),
        (None, Some((why, rest))) => (Some(why), rest.to_string(), true),
        (None, None) => (None, req.message.clone(), false),
    };
    let (model_choice, message) = match explicit {
        Some(_) if typed && rest.contains('/') && !rest.contains(char::is_whitespace) => {
            (Some(rest.clone()), String::new())
        }
        _ => (None, rest),
    };
    Opening {
        explicit,
        typed,
        model_choice,
        message,
    }
}

/// The hooks of a turn someone sent: `command:new` / `command:reset`
/// when the user's `/new` or `/reset` started a session (`previous`: the
/// entry before it), then `message:received`.
pub(super) fn fire_opening_hooks(
    app: &App,
    sessions: &Sessions,
    key: &str,
    req: &TurnRequest,
    previous: Option<Option<SessionEntry>>,
    current: &crate::session::Current,
) {
    let source = req.channel.as_deref().unwrap_or("cli");
    if let Some(previous) = previous
        && let Some(why @ (Started::New | Started::Reset)) = current.started
    {
        let action = if why == Started::Reset {
            "reset"
        } else {
            "new"
        };
        app.fire_hook(
            &format!("command:{action}"),
            key,
            json!({
                "sessionEntry": current.entry,
                "previousSessionFile": previous.as_ref().map(|p| sessions.transcript_path(p)),
                "previousSessionEntry": previous,
                "commandSource": source,
                "senderId": source,
                "workspaceDir": app.paths.workspace,
            }),
        );
    }
    app.fire_hook(
        "message:received",
        key,
        json!({
            "from": source,
            "content": req.message,
            "channelId": source,
            "conversationId": key,
        }),
    );
}

/// The session entry after a turn at `now` with `models`: its times,
/// channel, model and token counts; `compacted` says whether notes were
/// flushed when the turn compacted the session.
pub(super) fn after_turn(
    e: &mut SessionEntry,
    req: &TurnRequest,
    now: jiff::Timestamp,
    models: &Models,
    usage: provider::Usage,
    compacted: Option<bool>,
) {
    let ms = now.as_millisecond();
    e.updated_at = ms;
    // A heartbeat is not an interaction: the idle reset must still see
    // the session go quiet.
    if req.heartbeat.is_none() {
        e.last_interaction_at = Some(ms);
    }
    // The route is a chat's, set only by a message its user sent there
    // (never by a delivery or an unattended turn), and replaced whole.
    if let (Some(channel), Some(peer)) = (&req.chat_channel, &req.peer)
        && req.heartbeat.is_none()
    {
        e.last_channel = Some(channel.clone());
        e.last_to = Some(peer.id.clone());
        e.last_account_id = req.account_id.clone();
    }
    e.model = Some(models.name().to_string());
    e.model_provider = Some(models.endpoint().provider.clone());
    // Counts from the server and from the file: saturating sums.
    e.input_tokens = e.input_tokens.saturating_add(usage.input);
    e.output_tokens = e.output_tokens.saturating_add(usage.output);
    e.total_tokens = e.total_tokens.saturating_add(usage.total_tokens);
    e.context_tokens = Some(usage.input);
    if let Some(flushed) = compacted {
        e.compaction_count = e.compaction_count.saturating_add(1);
        if flushed {
            e.memory_flush_at = Some(ms);
            e.memory_flush_compaction_count = Some(e.compaction_count);
        }
    }
}

/// The reply as it is sent: the acknowledgement token, which is for the
/// heartbeat runner, removed from an ordinary reply wherever it stands
/// unless the channel shows acknowledgements (the transcript keeps the
/// model's words); `message:sent` fired for a turn someone sent.
pub(super) fn reply_as_sent(
    app: &App,
    req: &TurnRequest,
    key: &str,
    mut outcome: TurnOutcome,
) -> TurnOutcome {
    if req.heartbeat.is_some() {
        return outcome;
    }
    let channel = req.channel.as_deref().unwrap_or("defaults");
    if outcome.reply.contains(almanac_heartbeat::ACK_TOKEN)
        && !app
            .config
            .config
            .channels
            .heartbeat_visibility(channel)
            .show_ok
    {
        outcome.reply = almanac_heartbeat::ack::scrub(&outcome.reply);
    }
    let source = req.channel.as_deref().unwrap_or("cli");
    app.fire_hook(
        "message:sent",
        key,
        json!({
            "to": source,
            "content": outcome.reply,
            "channelId": source,
            "conversationId": key,
            "success": true,
        }),
    );
    outcome
}

/// After a cancelled turn: when the transcript's last message is the
/// user's, an empty aborted assistant message answers it.
pub(super) fn close_cancelled(
    log: &mut Log<'_>,
    path: &std::path::Path,
    models: &Models,
) -> anyhow::Result<()> {
    let stored = transcript::read(path)?;
    let last_is_user = stored
        .context()
        .last()
        .is_some_and(|m| matches!(m, Message::User(_)));
    log.leaf = stored.leaf().map(|e| e.id.clone());
    log.taken = stored.ids();
    if last_is_user {
        let meta = transcript::AssistantMeta {
            api: models.endpoint().api.as_str().to_string(),
            provider: models.endpoint().provider.clone(),
            model: models.name().to_string(),
            usage: Default::default(),
            stop_reason: Some(provider::StopReason::Aborted),
            error_message: Some("cancelled".to_string()),
        };
        log.message(&Message::Assistant(Vec::new()), Some(&meta))?;
    }
    Ok(())
}
