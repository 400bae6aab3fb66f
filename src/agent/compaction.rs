//! Compaction: when a session's context nears the model's window, first a
//! silent memory-flush turn lets the model store durable notes in today's
//! memory file (it answers `NO_REPLY` when there is nothing to keep), then
//! the older turns are summarised into a `compaction` entry that stands
//! for them from then on. The transcript keeps everything; only the
//! context shrinks.

use serde_json::{Value, json};

use super::hygiene;
use super::models::Models;
use super::tools::Tools;
use super::turn::{Log, Settings, TurnError};
use crate::provider::{Block, Endpoint, Message, Quiet, Request, RetryPolicy, Usage};
use crate::session::transcript::{Payload, Transcript};

/// Turns (user messages and what followed) kept verbatim after a
/// compaction.
pub(crate) const KEEP_TURNS: usize = 2;
/// Most model calls of the flush turn.
const FLUSH_STEPS: u32 = 3;

/// The context size (tokens) at which a session is compacted: the window
/// minus a reserve for the answer and a soft margin (20,000 and 4,000
/// tokens, or a quarter and a tenth of a small window).
pub(crate) fn threshold(context_tokens: u32) -> usize {
    let window = context_tokens as usize;
    window - (window / 4).min(20_000) - (window / 10).min(4_000)
}

/// The estimated tokens of a request.
pub(crate) fn estimate(system: &str, messages: &[Message]) -> usize {
    let mut text = system.len();
    for m in messages {
        let blocks: &[Block] = match m {
            Message::User(b) | Message::Assistant(b) => b,
            Message::ToolResult { content, .. } => content,
        };
        for b in blocks {
            text += match b {
                Block::Text { text } => text.len(),
                Block::Thinking { thinking, .. } => thinking.len(),
                Block::ToolCall { arguments, .. } => arguments.to_string().len() + 32,
                // An image costs about as much as a page of text.
                Block::Image { .. } => 6_000,
            };
        }
    }
    text.div_ceil(4)
}

/// What a compaction did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub tokens_before: usize,
    /// Notes the flush turn stored.
    pub flushed_notes: usize,
    pub summarised_messages: usize,
    pub usage: Usage,
}

/// The flush turn's system prompt and message (in substance OpenClaw's).
pub(crate) fn flush_prompts(today: &str, now: &str) -> (String, String) {
    let hints = format!(
        "Store durable memories only in memory/{today}.md with the memory_append tool. Treat MEMORY.md, SOUL.md, TOOLS.md and AGENTS.md as read-only. Append only. If there is nothing worth storing, answer NO_REPLY."
    );
    (
        format!(
            "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories to disk. {hints} You may reply, but usually NO_REPLY is correct."
        ),
        format!(
            "Pre-compaction memory flush. {hints}\nCurrent time: {now}\n\nIf no user-visible reply is needed, start with NO_REPLY."
        ),
    )
}

/// Flushes durable notes (when `flush_tools` offers `memory_append`) and
/// summarises the older part of `transcript` into a compaction entry.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn compact(
    models: &Models,
    retry: &RetryPolicy,
    settings: &Settings,
    transcript: &Transcript,
    flush_tools: Option<&Tools<'_>>,
    today: &str,
    now: &str,
    log: &mut Log<'_>,
) -> Result<Option<Report>, TurnError> {
    let context = transcript.context();
    let mut report = Report {
        tokens_before: estimate("", &context),
        ..Report::default()
    };
    // Where the kept turns begin, on the active branch.
    let branch = transcript.branch();
    let user_entries: Vec<usize> = branch
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.payload,
                Payload::Message {
                    message: Message::User(_),
                    ..
                }
            )
        })
        .map(|(i, _)| i)
        .collect();
    let last_compaction = branch
        .iter()
        .rposition(|e| matches!(e.payload, Payload::Compaction { .. }));
    let Some(&keep_from) = user_entries.iter().rev().nth(KEEP_TURNS - 1) else {
        return Ok(None);
    };
    if last_compaction.is_some_and(|c| c >= keep_from) {
        return Ok(None);
    }
    let first_kept = branch[keep_from].id.clone();

    if let Some(tools) = flush_tools {
        let (system, message) = flush_prompts(today, now);
        let mut conversation = context.clone();
        conversation.push(Message::User(vec![Block::text(message)]));
        let specs: Vec<_> = tools
            .specs()
            .into_iter()
            .filter(|s| s.name == "memory_append")
            .collect();
        let mut notes = Vec::new();
        let mut reply = String::new();
        for _ in 0..FLUSH_STEPS {
            let build = |endpoint: &Endpoint, model: &str| Request {
                model: model.to_string(),
                system: system.clone(),
                messages: hygiene::clean(&conversation, endpoint.api).0,
                tools: specs.clone(),
                max_tokens: settings.max_tokens,
                thinking: None,
            };
            let response = models.call(&build, &mut Quiet, retry).await?;
            report.usage.add(&response.usage);
            conversation.push(Message::Assistant(response.content.clone()));
            let mut called = false;
            for b in &response.content {
                match b {
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } if name == "memory_append" => {
                        called = true;
                        let out = tools.call(name, arguments).await;
                        if !out.is_error {
                            notes.push(
                                arguments
                                    .get("text")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                            );
                        }
                        conversation.push(Message::ToolResult {
                            tool_call_id: id.clone(),
                            tool_name: name.clone(),
                            content: vec![Block::text(out.text)],
                            is_error: out.is_error,
                        });
                    }
                    Block::Text { text } => reply.push_str(text),
                    _ => {}
                }
            }
            if !called {
                break;
            }
        }
        report.flushed_notes = notes.len();
        let stamp = crate::session::iso((log.clock)());
        log.append(vec![(stamp, json!({"type": "custom", "customType": "memory-flush", "data": {"notes": notes, "reply": reply.trim()}}))])?;
    }

    // The summary of what came before the kept turns.
    let older: Vec<Message> = branch[..keep_from]
        .iter()
        .filter_map(|e| match &e.payload {
            Payload::Message { message, .. } => Some(message.clone()),
            Payload::Compaction { summary, .. } => Some(Message::User(vec![Block::text(format!(
                "Earlier summary:\n{summary}"
            ))])),
            Payload::Other(_) => None,
        })
        .collect();
    report.summarised_messages = older.len();
    let mut conversation = older;
    conversation.push(Message::User(vec![Block::text(
        "Summarise the conversation above for your own future reference: decisions, facts learned, open tasks and commitments, names and dates. Plain prose and short lists; no greeting.",
    )]));
    let build = |endpoint: &Endpoint, model: &str| Request {
        model: model.to_string(),
        system: "You write faithful, compact summaries of conversations.".to_string(),
        messages: hygiene::clean(&conversation, endpoint.api).0,
        tools: Vec::new(),
        max_tokens: settings.max_tokens,
        thinking: None,
    };
    let response = models.call(&build, &mut Quiet, retry).await?;
    report.usage.add(&response.usage);
    let summary: String = response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let summary = if summary.trim().is_empty() {
        "(no summary)".to_string()
    } else {
        summary.trim().to_string()
    };
    let stamp = crate::session::iso((log.clock)());
    log.append(vec![(
        stamp,
        json!({"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": report.tokens_before}),
    )])?;
    Ok(Some(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_leave_room_for_the_answer() {
        assert_eq!(threshold(128_000), 128_000 - 20_000 - 4_000);
        assert_eq!(threshold(8_000), 8_000 - 2_000 - 800);
        assert!(threshold(100) < 100);
        let small = estimate(
            "system",
            &[Message::User(vec![Block::text("x".repeat(400))])],
        );
        assert_eq!(small, (6 + 400usize).div_ceil(4));
    }
}
