//! The values every trigger source builds: a request for one turn (its
//! message, session, model and shape), and a trigger (where it came from,
//! the request, how long it may take) that the gateway routes to a turn.
//! Plain data: it imports nothing that runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::provider;
pub(crate) use crate::provider::Thinking;

/// The wake modes of a system event (`/hooks/wake`, `/v1/system/event`,
/// `system event --mode`).
pub(crate) const WAKE_MODES: &[&str] = &["now", "next-heartbeat"];

/// A request for one turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TurnRequest {
    pub message: String,
    pub session_key: Option<String>,
    /// `agentId` as OpenClaw names it.
    #[serde(alias = "agentId")]
    pub agent: Option<String>,
    pub model: Option<String>,
    /// A heartbeat turn (never from a request body: the runner sets it).
    #[serde(skip)]
    pub heartbeat: Option<HeartbeatTurn>,
    /// Where the message came from (`cli`, `api`), kept as the session's
    /// last channel; none for turns nobody sent.
    #[serde(skip)]
    pub channel: Option<String>,
    /// The chat channel a message came in on (`http` for the control
    /// API): with `peer`, the router chooses the agent and the session.
    #[serde(rename = "channel", skip_serializing_if = "Option::is_none")]
    pub chat_channel: Option<String>,
    /// The channel's account the message came in on (default: the
    /// channel's default account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// The chat: `{kind: direct|group|channel, id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<ChatPeer>,
    /// What came with a chat message but is not the sender's own words
    /// (quoted or forwarded text, group history, attachments' text,
    /// metadata): it reaches the prompt only as untrusted data.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ChatContext>,
    /// How an unattended run shapes the turn (never from a request body).
    #[serde(skip)]
    pub shape: TurnShape,
}

/// The chat a message came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatPeer {
    pub kind: String,
    pub id: String,
}

/// One piece of a chat message's context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChatContext {
    /// `quoted`, `forwarded`, `history`, `attachment` or `metadata`.
    pub kind: String,
    pub text: String,
    /// Who wrote it, as the channel names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Where a chat's replies go: the channel, the chat (a peer id) and the
/// account that received the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChatRoute {
    pub channel: String,
    pub to: String,
    pub account_id: Option<String>,
    /// A forum topic's thread in the chat.
    pub thread_id: Option<i64>,
    /// The message a reply answers.
    pub reply_to: Option<i64>,
}

/// What a cron job (or a webhook's run) asks of its turn besides the
/// message and the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TurnShape {
    /// Only these tools (names, `group:*` names or patterns, as in
    /// `tools.allow`), and only those of them the tool policy keeps.
    pub tools_allow: Option<Vec<String>>,
    /// No workspace files in the prompt and no recalled notes.
    pub light_context: bool,
    pub thinking: Option<provider::Thinking>,
    /// Replaces `agents.defaults.model.fallbacks` (`[]`: none).
    pub fallbacks: Option<Vec<String>>,
    /// A new session every run (a cron job's `isolated` target): the
    /// message is never a reset command, and the run keeps a row of its
    /// own, `<key>:run:<sessionId>`.
    pub isolated_run: bool,
    /// Text that only this run's message holds (a webhook run's id): when
    /// the session's last message is an unanswered one holding it, the
    /// run was cut off and is answered, not written again.
    pub resume_marker: Option<String>,
    /// A subagent's turn, at this depth: its own workspace files only
    /// (not `MEMORY.md`, `HEARTBEAT.md`, `BOOTSTRAP.md`), no recalled
    /// notes, and `tools.subagents.tools` over the usual tools, without
    /// the session tools (`sessions_spawn` kept while `maxSpawnDepth`
    /// allows another level).
    pub subagent_depth: Option<u32>,
}

/// What makes a turn a heartbeat turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HeartbeatTurn {
    /// Only `HEARTBEAT.md` as workspace context, and no memory recall.
    pub light_context: bool,
    /// A new session for this turn (`isolatedSession`).
    pub fresh_session: bool,
}

/// The agent of a config without agents, and of requests that name none.
pub(crate) const AGENT_ID: &str = "main";

/// A request whose agent or session key cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadTarget {
    #[error("the session key `{key}` belongs to agent `{owner}`, not `{asked}`")]
    Agent {
        key: String,
        owner: String,
        asked: String,
    },
    #[error("a session key holds no control characters: {0:?}")]
    SessionKey(String),
}

/// The agent a request names (normalised): its `agent`, else the agent of
/// an `agent:<id>:…` session key; `None` when neither names one. Refuses
/// a session key with control characters (it would be printed back to
/// terminals) and a key of another agent than the one named. Whether the
/// agent exists is the config's business.
pub(crate) fn check_agent(req: &TurnRequest) -> Result<Option<String>, BadTarget> {
    use crate::session::key::normalize_id;
    if let Some(key) = req.session_key.as_deref()
        && key.chars().any(char::is_control)
    {
        return Err(BadTarget::SessionKey(key.to_string()));
    }
    let named = req
        .agent
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| normalize_id(a, AGENT_ID));
    let owner = req.session_key.as_deref().and_then(|key| {
        let rest = key.trim().strip_prefix("agent:")?;
        let (agent, _) = rest.split_once(':').unwrap_or((rest, ""));
        Some(normalize_id(agent, AGENT_ID))
    });
    match (named, owner) {
        (Some(asked), Some(owner)) if asked != owner => Err(BadTarget::Agent {
            key: req.session_key.clone().unwrap_or_default(),
            owner,
            asked,
        }),
        (named, owner) => Ok(named.or(owner)),
    }
}

/// Where a turn came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `POST /v1/agent` (and `almanac agent` through the gateway).
    Api,
    /// An inbound webhook's run (`/hooks/agent`, a mapping).
    Webhook,
    /// A cron job's run.
    Cron,
    /// A heartbeat turn.
    Heartbeat,
    /// `BOOT.md` at start.
    Boot,
    /// A chat channel's message (Telegram).
    Chat,
}

/// One turn to run: where it came from, what it asks, how long it may take
/// (`None`: no limit of its own), and the task that records it when one
/// does (its start is recorded as the turn enters its lane).
#[derive(Debug, Clone)]
pub(crate) struct Trigger {
    pub source: Source,
    pub request: TurnRequest,
    pub timeout: Option<Duration>,
    pub task_id: Option<String>,
}

impl Trigger {
    pub(crate) fn new(source: Source, request: TurnRequest) -> Trigger {
        Trigger {
            source,
            request,
            timeout: None,
            task_id: None,
        }
    }
}
