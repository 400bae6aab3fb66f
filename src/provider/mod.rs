//! Model providers: one trait, two wire protocols.
//!
//! * [`openai`]: OpenAI-compatible Chat Completions (OpenAI, Ollama,
//!   llama.cpp server, vLLM, LM Studio, OpenRouter… through `baseUrl`);
//! * [`anthropic`]: Anthropic Messages.
//!
//! Both stream (server-sent events, [`sse`]) and support tool calls. The
//! conversation is given in one provider-neutral shape ([`Message`]), the
//! answer comes back the same way ([`Response`]). [`http`] holds what both
//! share: the timeouts ([`Timeouts`]: connecting, silence, the whole
//! answer), and retries with backoff on 429 and 5xx that honour
//! `Retry-After`, with the sleep injected so tests never wait.
//!
//! Invariants: nothing here reads the environment or config files (the
//! app resolves a [`Endpoint`] and passes it in); a response is returned
//! only when the stream ended properly — a dropped connection or a
//! malformed event is an error, never a truncated answer; so is a `200`
//! that is not an event stream (an HTML page from a captive portal or a
//! wrong base URL).

pub(crate) mod anthropic;
pub(crate) mod http;
pub(crate) mod known;
pub(crate) mod openai;
pub(crate) mod sse;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use http::{RetryPolicy, Timeouts};

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Block {
    Text {
        text: String,
    },
    /// Base64 image data.
    Image {
        #[serde(rename = "mimeType")]
        media_type: String,
        data: String,
    },
    Thinking {
        thinking: String,
        /// Providers that check thinking blocks sign them.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            rename = "thinkingSignature"
        )]
        signature: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
    },
}

impl Block {
    pub(crate) fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    /// Text and images.
    User(Vec<Block>),
    /// Text, thinking and tool calls.
    Assistant(Vec<Block>),
    /// The result of one tool call.
    ToolResult {
        tool_call_id: String,
        tool_name: String,
        content: Vec<Block>,
        is_error: bool,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    /// How hard the model thinks before it answers; `None` sends nothing
    /// (the provider's default).
    pub thinking: Option<Thinking>,
}

/// A thinking level, as cron jobs and hook runs name it (`off` …
/// `xhigh`), and what it becomes in each protocol's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Thinking {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl Thinking {
    /// The names, lowest first.
    pub(crate) const NAMES: &'static [&'static str] =
        &["off", "minimal", "low", "medium", "high", "xhigh"];

    pub(crate) fn parse(text: &str) -> Option<Thinking> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "off" => Thinking::Off,
            "minimal" => Thinking::Minimal,
            "low" => Thinking::Low,
            "medium" => Thinking::Medium,
            "high" => Thinking::High,
            "xhigh" => Thinking::Xhigh,
            _ => return None,
        })
    }

    /// Anthropic's extended thinking budget in tokens (`thinking:
    /// {type: "enabled", budget_tokens}`); `None` for `off`, which sends no
    /// `thinking` field (Anthropic models then do not think).
    pub(crate) fn anthropic_budget(self) -> Option<u32> {
        match self {
            Thinking::Off => None,
            Thinking::Minimal => Some(1024),
            Thinking::Low => Some(2048),
            Thinking::Medium => Some(8192),
            Thinking::High => Some(16384),
            Thinking::Xhigh => Some(32768),
        }
    }

    /// OpenAI's `reasoning_effort`; `None` for `off`, which sends none.
    /// `xhigh` is sent as `high`, the highest effort every reasoning
    /// model accepts.
    pub(crate) fn openai_effort(self) -> Option<&'static str> {
        match self {
            Thinking::Off => None,
            Thinking::Minimal => Some("minimal"),
            Thinking::Low => Some("low"),
            Thinking::Medium => Some("medium"),
            Thinking::High | Thinking::Xhigh => Some("high"),
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// Token counts of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
}

impl Usage {
    /// Adds `other`; counts a server reports are not trusted to be small,
    /// so the sums saturate.
    pub(crate) fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

/// The model's answer to one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    pub content: Vec<Block>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

/// The wire protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Api {
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
}

impl Api {
    pub(crate) fn parse(text: &str) -> Option<Api> {
        match text {
            "openai-completions" | "openai" | "openai-chat" => Some(Api::OpenAiCompletions),
            "anthropic-messages" | "anthropic" => Some(Api::AnthropicMessages),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::AnthropicMessages => "anthropic-messages",
        }
    }
}

/// Where and how to call a model.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The provider id (`openai`, `anthropic`, `ollama`, …).
    pub provider: String,
    pub api: Api,
    /// Without a trailing slash: `https://api.openai.com/v1`,
    /// `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub timeouts: Timeouts,
}

/// Receives text as it streams in.
pub(crate) trait StreamSink: Send {
    fn text(&mut self, delta: &str);
}

/// A sink that drops everything.
pub(crate) struct Quiet;

impl StreamSink for Quiet {
    fn text(&mut self, _delta: &str) {}
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProviderError {
    #[error("cannot reach {provider} at {url}")]
    Unreachable {
        provider: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{provider} answered HTTP {status}: {message}")]
    Status {
        provider: String,
        status: u16,
        message: String,
        /// Seconds the server asked to wait, if it said.
        retry_after: Option<std::time::Duration>,
    },
    #[error("the connection to {provider} closed in the middle of the answer")]
    Dropped { provider: String },
    #[error("{provider} sent a malformed answer: {detail}")]
    Malformed { provider: String, detail: String },
    #[error("{provider} reported an error: {message}")]
    Stream { provider: String, message: String },
    #[error(
        "{provider} at {url} did not accept a connection within {} (agents.defaults.llm.connectTimeoutSeconds)",
        http::seconds(*limit)
    )]
    ConnectTimeout {
        provider: String,
        url: String,
        limit: std::time::Duration,
    },
    #[error(
        "{provider} {} for {} (agents.defaults.llm.idleTimeoutSeconds)",
        if *started { "stopped sending in the middle of its answer: nothing" } else { "accepted the connection but sent nothing" },
        http::seconds(*limit)
    )]
    Idle {
        provider: String,
        /// Whether the answer had begun.
        started: bool,
        limit: std::time::Duration,
    },
    #[error(
        "{provider} did not finish its answer within {} (agents.defaults.timeoutSeconds)",
        http::seconds(*limit)
    )]
    Timeout {
        provider: String,
        limit: std::time::Duration,
    },
    #[error(
        "{provider} answered with {what}, not an event stream: check models.providers.{provider}.baseUrl ({url})"
    )]
    NotEventStream {
        provider: String,
        url: String,
        /// `an HTML page`, `JSON (…)`, or the content type.
        what: String,
    },
}

impl ProviderError {
    /// Worth another try: rate limits, server errors, overload, and
    /// connections that failed or dropped. A server that went silent, an
    /// answer that ran out of time (it would be cut at the same point
    /// again) and an answer that is not an event stream are not.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                matches!(status, 408 | 409 | 425 | 429 | 500..=599)
            }
            ProviderError::Unreachable { .. }
            | ProviderError::ConnectTimeout { .. }
            | ProviderError::Dropped { .. } => true,
            ProviderError::Stream { message, .. } => {
                let m = message.to_ascii_lowercase();
                m.contains("overloaded") || m.contains("rate") || m.contains("timeout")
            }
            ProviderError::Malformed { .. }
            | ProviderError::Idle { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::NotEventStream { .. } => false,
        }
    }

    pub(crate) fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A boxed future, so providers can sit behind one trait object.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model provider.
pub(crate) trait Provider: Send + Sync {
    /// One streamed call, without retries.
    fn call<'a>(
        &'a self,
        request: &'a Request,
        sink: &'a mut dyn StreamSink,
    ) -> BoxFuture<'a, Result<Response, ProviderError>>;
}

/// The provider for `endpoint`.
pub(crate) fn connect(endpoint: Endpoint) -> Box<dyn Provider> {
    let client = http::client(&endpoint);
    match endpoint.api {
        Api::OpenAiCompletions => Box::new(openai::OpenAi { endpoint, client }),
        Api::AnthropicMessages => Box::new(anthropic::Anthropic { endpoint, client }),
    }
}

/// One call with retries: 429 and 5xx answers, failed connections and
/// streams that dropped are tried again after a backoff, or after the
/// server's `Retry-After` when it gave one. Text streamed by a failed
/// attempt is not repeated to `sink` as final: the caller gets only the
/// answer of the attempt that completed.
pub(crate) async fn call_with_retries(
    provider: &dyn Provider,
    request: &Request,
    sink: &mut dyn StreamSink,
    policy: &RetryPolicy,
) -> Result<Response, ProviderError> {
    let mut attempt = 0;
    loop {
        match provider.call(request, sink).await {
            Ok(response) => return Ok(response),
            Err(err) if err.is_retryable() && attempt < policy.max_retries => {
                let wait = policy.delay(attempt, err.retry_after());
                tracing::warn!(%err, attempt, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
                policy.sleeper.sleep(wait).await;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests;
