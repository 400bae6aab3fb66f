//! One agent turn: the user's message → model ↔ tools → reply, with every
//! message written to the session's transcript as it happens.
//!
//! Invariants:
//! * The user's message is in the transcript before the model is called;
//!   each assistant message and each tool result is appended, synced, as
//!   soon as it exists. Tool calls and results are synced before the next
//!   step; the user's message and the final answer are synced by the
//!   caller's [`Log::sync`] (or when the [`Log`] is dropped), so one disk
//!   flush covers a turn without tools and the caller can update the
//!   session entry meanwhile. A write not yet synced survives the process
//!   being killed; only a power loss before the turn answers can take it. A turn killed at any point leaves a transcript
//!   whose next turn is valid (hygiene repairs a call left without its
//!   result).
//! * What the provider sees is the transcript's context after hygiene;
//!   the file is never rewritten.
//! * The loop ends when the model answers without calling a tool, or at
//!   the step limit, which is reported.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::models::Models;
use super::{hygiene, tools::Tools};
use crate::provider::{
    self, Block, Endpoint, Message, Request, RetryPolicy, StopReason, StreamSink, Usage,
};
use crate::session::transcript::{self, AssistantMeta};

/// The silent reply token: the turn has nothing to tell the user.
pub(crate) const NO_REPLY: &str = "NO_REPLY";

/// Settings of one turn.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub max_tokens: u32,
    pub max_steps: u32,
    /// How hard the model thinks (a cron job's or hook run's `thinking`).
    pub thinking: Option<provider::Thinking>,
}

/// One tool call of the turn, for the caller's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    pub is_error: bool,
    /// The start of the output.
    pub output: String,
}

/// What a turn did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnOutcome {
    pub reply: String,
    /// The final answer's reasoning (thinking blocks), when the model
    /// gave any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// The reply was `NO_REPLY`: nothing to deliver.
    pub silent: bool,
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: Usage,
    /// Model calls made.
    pub steps: u32,
    pub stop_reason: StopReason,
    /// Set when the step limit ended the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What hygiene repaired in the stored conversation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// Time spent waiting for the model and running tools, in ms (reported
    /// with the turn's other timings).
    #[serde(skip)]
    pub model_ms: f64,
    #[serde(skip)]
    pub tools_ms: f64,
}

/// Where the turn writes.
pub(crate) struct Log<'a> {
    pub path: &'a std::path::Path,
    /// The last entry id (the new entries' parent).
    pub leaf: Option<String>,
    /// Ids in use in the file (new ones are random and checked against
    /// these).
    pub taken: HashSet<String>,
    /// The clock of entry timestamps.
    pub clock: &'a dyn Fn() -> jiff::Timestamp,
    /// Written but not yet synced.
    pub unsynced: bool,
}

impl Drop for Log<'_> {
    fn drop(&mut self) {
        if let Err(err) = self.sync() {
            tracing::warn!(%err, path = %self.path.display(), "cannot sync the transcript");
        }
    }
}

impl Log<'_> {
    /// Appends one message, synced.
    pub(crate) fn message(
        &mut self,
        message: &Message,
        meta: Option<&AssistantMeta>,
    ) -> std::io::Result<String> {
        self.write_message(message, meta, true)
    }

    fn write_message(
        &mut self,
        message: &Message,
        meta: Option<&AssistantMeta>,
        sync: bool,
    ) -> std::io::Result<String> {
        let now = (self.clock)();
        let payload = json!({"type": "message", "message": transcript::message_json(message, meta, now.as_millisecond())});
        self.write(vec![(crate::session::iso(now), payload)], sync)
    }

    /// Appends raw entries (each with its `type`), synced, chained.
    pub(crate) fn append(&mut self, payloads: Vec<(String, Value)>) -> std::io::Result<String> {
        self.write(payloads, true)
    }

    /// Appends raw entries to be synced with the turn's last flush (by
    /// [`Log::sync`] or whoever takes [`Log::take_pending_sync`]).
    pub(crate) fn append_unsynced(
        &mut self,
        payloads: Vec<(String, Value)>,
    ) -> std::io::Result<String> {
        self.write(payloads, false)
    }

    /// Hands the pending flush over: the caller must sync the returned
    /// file (on another thread, say) before acknowledging the turn.
    pub(crate) fn take_pending_sync(&mut self) -> Option<std::path::PathBuf> {
        std::mem::take(&mut self.unsynced).then(|| self.path.to_path_buf())
    }

    /// Flushes what was written unsynced.
    pub(crate) fn sync(&mut self) -> std::io::Result<()> {
        if self.unsynced {
            std::fs::File::open(self.path)?.sync_data()?;
            self.unsynced = false;
        }
        Ok(())
    }

    fn write(&mut self, payloads: Vec<(String, Value)>, sync: bool) -> std::io::Result<String> {
        let ids = transcript::append(
            self.path,
            self.leaf.as_deref(),
            &self.taken,
            &payloads,
            sync,
        )?;
        // A synced write covers the file's earlier unsynced ones.
        self.unsynced = !sync;
        for id in &ids {
            self.taken.insert(id.clone());
        }
        let last = ids.last().cloned().unwrap_or_default();
        self.leaf = Some(last.clone());
        Ok(last)
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error(transparent)]
    Provider(#[from] provider::ProviderError),
    #[error("cannot write the transcript")]
    Transcript(#[from] std::io::Error),
}

/// Runs the turn: appends `user` (the new message) after `history` (the
/// context before it) and talks with the model until it answers; `None`
/// answers the user message `history` ends with (a run cut off before
/// its answer, started again). The final
/// answer is flushed by the caller ([`Log::sync`], or when the log is
/// dropped), which can update the session's entry meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    models: &Models,
    retry: &RetryPolicy,
    settings: &Settings,
    system: &str,
    tools: &Tools<'_>,
    history: Vec<Message>,
    user: Option<Message>,
    log: &mut Log<'_>,
    sink: &mut dyn StreamSink,
) -> Result<TurnOutcome, TurnError> {
    let mut conversation = history;
    if let Some(user) = user {
        log.write_message(&user, None, false)?;
        conversation.push(user);
    }
    let specs = tools.specs();
    let mut outcome = TurnOutcome {
        reply: String::new(),
        reasoning: String::new(),
        silent: false,
        tool_calls: Vec::new(),
        usage: Usage::default(),
        steps: 0,
        stop_reason: StopReason::Stop,
        stopped: None,
        repairs: Vec::new(),
        model_ms: 0.0,
        tools_ms: 0.0,
    };
    loop {
        if outcome.steps >= settings.max_steps {
            outcome.stopped = Some(format!(
                "stopped after {} model calls (agents.defaults.maxSteps)",
                settings.max_steps
            ));
            break;
        }
        // Steering sent while the turn ran is read before the next request.
        for text in tools.services.take_steering(&tools.settings.caller) {
            let steer = Message::User(vec![Block::text(text)]);
            log.write_message(&steer, None, false)?;
            conversation.push(steer);
        }
        // The conversation is cleaned for the protocol of the model that
        // is asked (a fallback may speak another).
        let repaired = std::sync::Mutex::new(Vec::new());
        let build = |endpoint: &Endpoint, model: &str| {
            let (messages, repairs) = hygiene::clean(&conversation, endpoint.api);
            *repaired.lock().unwrap_or_else(|p| p.into_inner()) = repairs;
            Request {
                model: model.to_string(),
                system: system.to_string(),
                messages,
                tools: specs.clone(),
                max_tokens: settings.max_tokens,
                thinking: settings.thinking,
            }
        };
        let asked = std::time::Instant::now();
        let response = models.call(&build, sink, retry).await?;
        if outcome.steps == 0 {
            outcome.repairs = repaired.into_inner().unwrap_or_else(|p| p.into_inner());
        }
        outcome.model_ms += asked.elapsed().as_secs_f64() * 1000.0;
        outcome.steps += 1;
        outcome.usage.add(&response.usage);
        outcome.stop_reason = response.stop_reason;
        let endpoint = models.endpoint();
        let meta = AssistantMeta {
            api: endpoint.api.as_str().to_string(),
            provider: endpoint.provider.clone(),
            model: models.name().to_string(),
            usage: response.usage,
            stop_reason: Some(response.stop_reason),
            error_message: None,
        };
        let calls: Vec<(String, String, Value)> = response
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect();
        let assistant = Message::Assistant(response.content.clone());
        // Tool calls are on disk before any tool runs; a final answer is
        // synced by the caller.
        log.write_message(&assistant, Some(&meta), !calls.is_empty())?;
        conversation.push(assistant);
        let text = response
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        if calls.is_empty() {
            outcome.reply = text;
            outcome.reasoning = response
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Thinking { thinking, .. } => Some(thinking.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            break;
        }
        for (id, name, arguments) in calls {
            let started = std::time::Instant::now();
            let output = tools.call(&name, &arguments).await;
            outcome.tools_ms += started.elapsed().as_secs_f64() * 1000.0;
            let result = Message::ToolResult {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                content: vec![Block::text(output.text.clone())],
                is_error: output.is_error,
            };
            log.message(&result, None)?;
            conversation.push(result);
            outcome.tool_calls.push(ToolCallRecord {
                id,
                name,
                arguments,
                is_error: output.is_error,
                output: output.text.chars().take(500).collect(),
            });
        }
    }
    let trimmed = outcome.reply.trim();
    outcome.silent = trimmed == NO_REPLY || trimmed.starts_with(&format!("{NO_REPLY}\n"));
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::transcript;

    fn log<'a>(path: &'a std::path::Path, clock: &'a dyn Fn() -> jiff::Timestamp) -> Log<'a> {
        transcript::create(path, "sid", std::path::Path::new("/"), "t").unwrap();
        Log {
            path,
            leaf: None,
            taken: HashSet::new(),
            clock,
            unsynced: false,
        }
    }

    fn hi() -> Message {
        Message::User(vec![Block::text("hi")])
    }

    /// Two processes starting a turn at the same millisecond (the same
    /// clock, the same file contents) do not write the same entry ids.
    #[test]
    fn logs_with_the_same_clock_write_different_ids() {
        let dir = tempfile::tempdir().unwrap();
        let at = jiff::Timestamp::from_millisecond(1_764_403_200_000).unwrap();
        let clock = move || at;
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        let mut first = log(&a, &clock);
        let mut second = log(&b, &clock);
        let ids_a: Vec<String> = (0..3)
            .map(|_| first.message(&hi(), None).unwrap())
            .collect();
        let ids_b: Vec<String> = (0..3)
            .map(|_| second.message(&hi(), None).unwrap())
            .collect();
        for id in ids_a.iter().chain(&ids_b) {
            assert!(
                id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                "{id}"
            );
        }
        assert!(
            ids_a.iter().all(|id| !ids_b.contains(id)),
            "{ids_a:?} {ids_b:?}"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(16))]
            /// However many entries a log writes, in however many appends,
            /// their ids are distinct 8-hex ids chained parent to child.
            #[test]
            fn ids_are_unique_and_chained(batches in prop::collection::vec(1usize..6, 1..40)) {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("s.jsonl");
                let clock = || jiff::Timestamp::UNIX_EPOCH;
                let mut l = log(&path, &clock);
                let mut all = Vec::new();
                for n in batches {
                    let payloads = (0..n)
                        .map(|_| ("t".to_string(), serde_json::json!({"type": "custom", "customType": "x", "data": {}})))
                        .collect();
                    l.append(payloads).unwrap();
                }
                let t = transcript::read(&path).unwrap();
                for (i, e) in t.entries.iter().enumerate() {
                    prop_assert_eq!(e.id.len(), 8);
                    prop_assert_eq!(e.parent_id.as_deref(), i.checked_sub(1).map(|p| t.entries[p].id.as_str()));
                    all.push(e.id.clone());
                }
                let distinct: HashSet<&String> = all.iter().collect();
                prop_assert_eq!(distinct.len(), all.len());
            }
        }
    }
}
