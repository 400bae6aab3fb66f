//! OpenAI-compatible Chat Completions (`POST <baseUrl>/chat/completions`,
//! `stream: true`): OpenAI, Ollama, llama.cpp server, vLLM, LM Studio,
//! OpenRouter.
//!
//! Streamed chunks carry `choices[0].delta` with `content`, optional
//! `reasoning_content` (local reasoning models), and `tool_calls`
//! fragments keyed by `index` whose `arguments` arrive as pieces of a JSON
//! string; `finish_reason` ends the choice, a last chunk may carry `usage`,
//! and `data: [DONE]` ends the stream. Servers that omit tool-call ids get
//! generated ones.

use serde_json::{Value, json};

use super::http::{post, read_events};
use super::{
    Block, BoxFuture, Endpoint, Message, Provider, ProviderError, Request, Response, StopReason,
    StreamSink, Thinking, Usage,
};

pub(crate) struct OpenAi {
    pub endpoint: Endpoint,
    pub client: reqwest::Client,
}

impl Provider for OpenAi {
    fn call<'a>(
        &'a self,
        request: &'a Request,
        sink: &'a mut dyn StreamSink,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", self.endpoint.base_url);
            let mut headers = Vec::new();
            if let Some(key) = &self.endpoint.api_key {
                headers.push(("authorization", format!("Bearer {key}")));
            }
            let response =
                post(&self.client, &self.endpoint, &url, &headers, &body(request)).await?;
            let mut state = Stream::default();
            let provider = self.endpoint.provider.clone();
            read_events(&self.endpoint, response, |event| {
                state.event(&provider, &event.data, sink)
            })
            .await
            .or_else(|err| match err {
                // Some servers close right after the last choice
                // without `[DONE]`: the answer is complete.
                ProviderError::Dropped { .. } if state.finish_reason.is_some() => Ok(()),
                other => Err(other),
            })?;
            state.response(&provider)
        })
    }
}

/// The request body.
pub(crate) fn body(request: &Request) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        messages.push(message_json(message));
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_tokens,
    });
    if let Some(effort) = request.thinking.and_then(Thinking::openai_effort) {
        body["reasoning_effort"] = Value::from(effort);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    body
}

fn text_of(blocks: &[Block]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::User(blocks) => {
            if blocks.iter().all(|b| matches!(b, Block::Text { .. })) {
                return json!({"role": "user", "content": text_of(blocks)});
            }
            let parts: Vec<Value> = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(json!({"type": "text", "text": text})),
                    Block::Image { media_type, data } => {
                        Some(json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}}))
                    }
                    _ => None,
                })
                .collect();
            json!({"role": "user", "content": parts})
        }
        Message::Assistant(blocks) => {
            let text = text_of(blocks);
            let calls: Vec<Value> = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments_text(arguments)},
                    })),
                    _ => None,
                })
                .collect();
            let mut m = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            m
        }
        Message::ToolResult {
            tool_call_id,
            content,
            ..
        } => {
            let mut text = text_of(content);
            if content.iter().any(|b| matches!(b, Block::Image { .. })) {
                text.push_str("\n[image omitted: tool results carry text only here]");
            }
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": text})
        }
    }
}

/// Tool arguments as the JSON text the protocol carries.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        // Arguments the model sent that were not JSON are sent back as
        // they came.
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[derive(Default)]
struct ToolCallParts {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// What the stream has said so far.
#[derive(Default)]
struct Stream {
    text: String,
    reasoning: String,
    calls: Vec<ToolCallParts>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl Stream {
    /// Takes one event's data; `true` once the stream is complete.
    fn event(
        &mut self,
        provider: &str,
        data: &str,
        sink: &mut dyn StreamSink,
    ) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
            provider: provider.to_string(),
            detail: format!(
                "an event is not JSON ({e}): {}",
                data.chars().take(120).collect::<String>()
            ),
        })?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(ProviderError::Stream {
                provider: provider.to_string(),
                message,
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input: n("prompt_tokens"),
                output: n("completion_tokens"),
                cache_read: usage
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cache_write: 0,
                total_tokens: n("total_tokens"),
            };
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            sink.text(text);
            self.text.push_str(text);
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(key).and_then(Value::as_str) {
                self.reasoning.push_str(text);
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(self.calls.len() as u64) as usize;
                if index > 1024 {
                    return Err(ProviderError::Malformed {
                        provider: provider.to_string(),
                        detail: format!("tool call index {index}"),
                    });
                }
                while self.calls.len() <= index {
                    self.calls.push(ToolCallParts::default());
                }
                let parts = &mut self.calls[index];
                if let Some(id) = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    parts.id = Some(id.to_string());
                }
                if let Some(f) = call.get("function") {
                    if let Some(name) = f.get("name").and_then(Value::as_str) {
                        parts.name.push_str(name);
                    }
                    if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                        parts.arguments.push_str(args);
                    }
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        Ok(false)
    }

    fn response(self, provider: &str) -> Result<Response, ProviderError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderError::Dropped {
                provider: provider.to_string(),
            });
        }
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(Block::Thinking {
                thinking: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let has_calls = !self.calls.is_empty();
        for (i, call) in self.calls.into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(ProviderError::Malformed {
                    provider: provider.to_string(),
                    detail: format!("tool call {i} has no name"),
                });
            }
            let arguments = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                // Arguments that are not JSON are kept as text: the tool
                // reports the problem to the model, which can try again.
                serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments))
            };
            content.push(Block::ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{i}")),
                name: call.name,
                arguments,
            });
        }
        let stop_reason = match self.finish_reason.as_deref() {
            _ if has_calls => StopReason::ToolUse,
            Some("length") => StopReason::Length,
            Some("content_filter") => StopReason::Error,
            _ => StopReason::Stop,
        };
        Ok(Response {
            content,
            stop_reason,
            usage: self.usage,
        })
    }
}
