//! The event document a handler receives on stdin:
//! `{type, action, sessionKey, context, timestamp, messages}`.

use serde::Serialize;
use serde_json::Value;

/// One event, as OpenClaw's hooks receive it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookEvent {
    /// `command`, `session`, `agent`, `gateway` or `message`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What happened within the type: `new`, `compact:before`, `startup`, ….
    pub action: String,
    pub session_key: String,
    /// What the event is about (see the event table in docs/webhooks-and-hooks.md).
    pub context: Value,
    /// When it happened (RFC 3339, UTC).
    pub timestamp: String,
    pub messages: Vec<String>,
}

impl HookEvent {
    /// An event named `type:action` (`session:compact:before` is type
    /// `session`, action `compact:before`).
    pub(crate) fn new(
        name: &str,
        session_key: &str,
        context: Value,
        now: jiff::Timestamp,
    ) -> HookEvent {
        let (kind, action) = name.split_once(':').unwrap_or((name, ""));
        HookEvent {
            kind: kind.to_string(),
            action: action.to_string(),
            session_key: session_key.to_string(),
            context,
            timestamp: crate::session::iso(now),
            messages: Vec::new(),
        }
    }

    /// `type:action`.
    pub(crate) fn name(&self) -> String {
        if self.action.is_empty() {
            self.kind.clone()
        } else {
            format!("{}:{}", self.kind, self.action)
        }
    }
}
