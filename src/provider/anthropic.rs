//! Anthropic Messages (`POST <baseUrl>/v1/messages`, `stream: true`).
//!
//! The stream is a sequence of typed events: `message_start` (input
//! usage), `content_block_start` / `content_block_delta` /
//! `content_block_stop` per block (`text_delta`, `input_json_delta` for
//! tool input, `thinking_delta` and `signature_delta`), `message_delta`
//! (stop reason, output usage), `message_stop`; `ping` keeps the
//! connection alive and `error` ends it. Tool results travel in the next
//! user message, so consecutive results (and a following user message)
//! are merged into one.

use serde_json::{Value, json};

use super::http::{post, read_events};
use super::{
    Block, BoxFuture, Endpoint, Message, Provider, ProviderError, Request, Response, StopReason,
    StreamSink, Thinking, Usage,
};

/// The API version almanac speaks.
pub(crate) const VERSION: &str = "2023-06-01";

pub(crate) struct Anthropic {
    pub endpoint: Endpoint,
    pub client: reqwest::Client,
}

impl Provider for Anthropic {
    fn call<'a>(
        &'a self,
        request: &'a Request,
        sink: &'a mut dyn StreamSink,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let url = format!("{}/v1/messages", self.endpoint.base_url);
            let mut headers = vec![("anthropic-version", VERSION.to_string())];
            if let Some(key) = &self.endpoint.api_key {
                headers.push(("x-api-key", key.clone()));
            }
            let response =
                post(&self.client, &self.endpoint, &url, &headers, &body(request)).await?;
            let mut state = Stream::default();
            let provider = self.endpoint.provider.clone();
            read_events(&self.endpoint, response, |event| {
                state.event(&provider, &event.data, sink)
            })
            .await?;
            state.response(&provider)
        })
    }
}

/// The request body.
pub(crate) fn body(request: &Request) -> Value {
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, mut blocks) = match message {
            Message::User(blocks) => (
                "user",
                blocks.iter().filter_map(user_block).collect::<Vec<_>>(),
            ),
            Message::Assistant(blocks) => (
                "assistant",
                blocks.iter().filter_map(assistant_block).collect(),
            ),
            Message::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let inner: Vec<Value> = content.iter().filter_map(user_block).collect();
                (
                    "user",
                    vec![
                        json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": inner, "is_error": is_error}),
                    ],
                )
            }
        };
        match messages.last_mut() {
            Some((last_role, last)) if last_role == role => {
                if role == "user" {
                    // Tool results lead the user message they share.
                    let results = blocks.iter().filter(|b| b["type"] == "tool_result").count();
                    let at = last
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    let rest = blocks.split_off(results);
                    last.splice(at..at, blocks);
                    last.extend(rest);
                } else {
                    last.append(&mut blocks);
                }
            }
            _ => messages.push((role.to_string(), blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let budget = request.thinking.and_then(Thinking::anthropic_budget);
    // The budget is part of `max_tokens`, which must exceed it: the
    // answer keeps its own `max_tokens` on top.
    let max_tokens = request.max_tokens.saturating_add(budget.unwrap_or(0));
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(budget) = budget {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if !request.system.is_empty() {
        body["system"] = Value::String(request.system.clone());
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

fn user_block(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } => Some(json!({"type": "text", "text": text})),
        Block::Image { media_type, data } => Some(
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}),
        ),
        _ => None,
    }
}

fn assistant_block(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } => Some(json!({"type": "text", "text": text})),
        Block::Thinking {
            thinking,
            signature: Some(signature),
        } => Some(json!({"type": "thinking", "thinking": thinking, "signature": signature})),
        Block::Thinking {
            signature: None, ..
        } => None,
        Block::ToolCall {
            id,
            name,
            arguments,
        } => {
            let input = match arguments {
                Value::Object(_) => arguments.clone(),
                // Input must be an object; what the model sent otherwise is
                // kept so it can see it.
                other => json!({ "input": other }),
            };
            Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        }
        Block::Image { .. } => None,
    }
}

enum Partial {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// Block kinds almanac does not use (e.g. redacted thinking).
    Other,
}

#[derive(Default)]
struct Stream {
    blocks: Vec<Option<Partial>>,
    done_blocks: Vec<(usize, Partial)>,
    stop_reason: Option<String>,
    usage: Usage,
    started: bool,
}

impl Stream {
    fn event(
        &mut self,
        provider: &str,
        data: &str,
        sink: &mut dyn StreamSink,
    ) -> Result<bool, ProviderError> {
        let malformed = |detail: String| ProviderError::Malformed {
            provider: provider.to_string(),
            detail,
        };
        let event: Value = serde_json::from_str(data).map_err(|e| {
            malformed(format!(
                "an event is not JSON ({e}): {}",
                data.chars().take(120).collect::<String>()
            ))
        })?;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let index = || -> Result<usize, ProviderError> {
            event
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .filter(|i| *i < 1024)
                .ok_or_else(|| malformed(format!("`{kind}` without a valid index")))
        };
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(u) = event.pointer("/message/usage") {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    self.usage.input = n("input_tokens");
                    self.usage.cache_write = n("cache_creation_input_tokens");
                    self.usage.cache_read = n("cache_read_input_tokens");
                    self.usage.output = n("output_tokens");
                }
            }
            "content_block_start" => {
                let i = index()?;
                let block = event
                    .get("content_block")
                    .ok_or_else(|| malformed("block start without a block".into()))?;
                let partial = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Partial::Text(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    Some("thinking") => Partial::Thinking {
                        text: block
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        signature: block
                            .get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    },
                    Some("tool_use") => Partial::Tool {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        json: String::new(),
                    },
                    _ => Partial::Other,
                };
                while self.blocks.len() <= i {
                    self.blocks.push(None);
                }
                self.blocks[i] = Some(partial);
            }
            "content_block_delta" => {
                let i = index()?;
                let delta = event.get("delta").unwrap_or(&Value::Null);
                let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
                match (
                    self.blocks.get_mut(i).and_then(Option::as_mut),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Some(Partial::Text(t)), Some("text_delta")) => {
                        sink.text(text("text"));
                        t.push_str(text("text"));
                    }
                    (Some(Partial::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(text("partial_json"))
                    }
                    (Some(Partial::Thinking { text: t, .. }), Some("thinking_delta")) => {
                        t.push_str(text("thinking"))
                    }
                    (Some(Partial::Thinking { signature, .. }), Some("signature_delta")) => {
                        signature.push_str(text("signature"))
                    }
                    (Some(Partial::Other), _) => {}
                    (None, _) => {
                        return Err(malformed(format!(
                            "a delta for block {i}, which was not started"
                        )));
                    }
                    (_, other) => {
                        return Err(malformed(format!("delta {other:?} does not fit block {i}")));
                    }
                }
            }
            "content_block_stop" => {
                let i = index()?;
                let partial = self
                    .blocks
                    .get_mut(i)
                    .and_then(Option::take)
                    .ok_or_else(|| malformed(format!("block {i} stopped but was not started")))?;
                self.done_blocks.push((i, partial));
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(out) = event
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                {
                    self.usage.output = out;
                }
            }
            "message_stop" => return Ok(true),
            "ping" => {}
            "error" => {
                let message = event
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_string();
                return Err(ProviderError::Stream {
                    provider: provider.to_string(),
                    message,
                });
            }
            other => tracing::debug!(event = other, "ignored stream event"),
        }
        Ok(false)
    }

    fn response(mut self, provider: &str) -> Result<Response, ProviderError> {
        if !self.started || self.blocks.iter().any(Option::is_some) {
            return Err(ProviderError::Malformed {
                provider: provider.to_string(),
                detail: "the message ended with a block still open".to_string(),
            });
        }
        self.done_blocks.sort_by_key(|(i, _)| *i);
        let mut content = Vec::new();
        for (_, partial) in self.done_blocks {
            match partial {
                Partial::Text(text) if !text.is_empty() => content.push(Block::Text { text }),
                Partial::Text(_) | Partial::Other => {}
                Partial::Thinking { text, signature } => content.push(Block::Thinking {
                    thinking: text,
                    signature: (!signature.is_empty()).then_some(signature),
                }),
                Partial::Tool { id, name, json } => {
                    if id.is_empty() || name.is_empty() {
                        return Err(ProviderError::Malformed {
                            provider: provider.to_string(),
                            detail: "a tool call without id or name".to_string(),
                        });
                    }
                    let arguments = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json).unwrap_or(Value::String(json))
                    };
                    content.push(Block::ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
            }
        }
        let stop_reason = match self.stop_reason.as_deref() {
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::Length,
            Some("refusal") => StopReason::Error,
            _ => StopReason::Stop,
        };
        self.usage.total_tokens = [
            self.usage.output,
            self.usage.cache_read,
            self.usage.cache_write,
        ]
        .iter()
        .fold(self.usage.input, |sum, n| sum.saturating_add(*n));
        Ok(Response {
            content,
            stop_reason,
            usage: self.usage,
        })
    }
}
