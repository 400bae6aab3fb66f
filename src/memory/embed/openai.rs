//! The `openai` embeddings provider: any OpenAI-compatible
//! `POST {baseUrl}/embeddings` endpoint (OpenAI, Ollama, llama.cpp, vLLM).
//!
//! * Texts go in batches of at most [`Limits::max_inputs`] inputs and
//!   about [`Limits::max_tokens`] estimated tokens (a text longer than
//!   that goes alone); the vectors come back in the caller's order.
//! * Each answer's `data` is put in order by its `index`, never by its
//!   place in the array; a missing, extra, repeated or out-of-range item,
//!   or a vector of another dimension, makes the whole call an error.
//! * Vectors are L2-normalised here (a non-finite part counts as 0): the
//!   index compares unit vectors.
//! * 408, 429, 5xx, failed connections and answers cut off midway are
//!   tried again with backoff, honouring `Retry-After` up to a cap; other
//!   statuses and a quota error are not. Every request has a time limit.
//! * The API key is sent only as `Authorization: Bearer`, and never
//!   appears in an error or a log line (a server echoing it is scrubbed).
//! * [`Embedder::embed`] is synchronous: the embedder drives a
//!   current-thread runtime of its own, on the calling thread, or on a
//!   thread of its own when the caller is inside a runtime (an agent
//!   turn's memory tool).

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{EmbedError, Embedder, RemoteSettings, check_batch};
use crate::provider::RetryPolicy;
use crate::provider::http::{TokioSleeper, client_for, error_message, parse_retry_after};

/// What bounds the provider's requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Texts per request at most.
    pub max_inputs: usize,
    /// Estimated tokens per request at most (about four bytes a token).
    pub max_tokens: usize,
    /// Connecting (TCP and TLS).
    pub connect: Duration,
    /// One request, from sending it to the last byte of its answer.
    pub request: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_inputs: 96,
            max_tokens: 8_000,
            connect: Duration::from_secs(10),
            request: Duration::from_secs(60),
        }
    }
}

/// The retries of a request: four tries in all, `Retry-After` honoured
/// up to 30 s.
fn default_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base: Duration::from_millis(500),
        cap: Duration::from_secs(8),
        max_retry_after: Duration::from_secs(30),
        sleeper: Arc::new(TokioSleeper),
    }
}

/// The most bytes of an answer read: 96 vectors of 3,072 numbers as JSON
/// take about 6 MiB.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// An OpenAI-compatible embeddings endpoint.
pub(crate) struct OpenAi {
    settings: RemoteSettings,
    url: String,
    limits: Limits,
    retry: RetryPolicy,
    /// Always there until the provider is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    client: reqwest::Client,
    /// The dimension of the model's vectors, from its first good answer.
    dims: OnceLock<usize>,
}

/// Why one request failed.
enum CallError {
    /// Worth another try, after the server's wait when it gave one.
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    Final(EmbedError),
}

impl CallError {
    fn fatal(message: String) -> CallError {
        CallError::Final(EmbedError::Failed(message))
    }
}

impl OpenAi {
    /// The provider as configured.
    pub(crate) fn start(settings: &RemoteSettings) -> Result<OpenAi, String> {
        OpenAi::with(settings, Limits::default(), default_retry())
    }

    /// The provider with its limits and retry policy given (tests record
    /// the waits instead of sleeping).
    pub(crate) fn with(
        settings: &RemoteSettings,
        limits: Limits,
        retry: RetryPolicy,
    ) -> Result<OpenAi, String> {
        let base = settings.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!(
                "agents.defaults.memorySearch.remote.baseUrl {base:?} is not an http(s) URL"
            ));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the embeddings client: {e}"))?;
        Ok(OpenAi {
            settings: settings.clone(),
            url: format!("{base}/embeddings"),
            limits: Limits {
                max_inputs: limits.max_inputs.max(1),
                max_tokens: limits.max_tokens.max(1),
                ..limits
            },
            retry,
            runtime: Some(runtime),
            client: client_for(base, limits.connect),
            dims: OnceLock::new(),
        })
    }

    /// `text` with the API key, should it be there, blanked out.
    fn scrub(&self, text: &str) -> String {
        match self.settings.api_key.as_deref().map(str::trim) {
            Some(key) if !key.is_empty() => text.replace(key, "***"),
            _ => text.to_string(),
        }
    }

    /// One batch, tried again while the failure is transient.
    async fn request_with_retries(&self, inputs: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut attempt = 0;
        loop {
            match self.request(inputs).await {
                Ok(vectors) => return Ok(vectors),
                Err(CallError::Transient {
                    message,
                    retry_after,
                }) if attempt < self.retry.max_retries => {
                    let wait = self.retry.delay(attempt, retry_after);
                    tracing::warn!(
                        error = %message,
                        attempt,
                        wait_ms = wait.as_millis() as u64,
                        "embeddings request failed; retrying"
                    );
                    self.retry.sleeper.sleep(wait).await;
                    attempt += 1;
                }
                Err(CallError::Transient { message, .. }) => {
                    return Err(EmbedError::Failed(format!(
                        "{message} ({} tries)",
                        attempt + 1
                    )));
                }
                Err(CallError::Final(err)) => return Err(err),
            }
        }
    }

    /// One request for `inputs`: their vectors in order, checked and
    /// normalised.
    async fn request(&self, inputs: &[&str]) -> Result<Vec<Vec<f32>>, CallError> {
        let body = serde_json::json!({
            "model": self.settings.model,
            "input": inputs,
            "encoding_format": "float",
        });
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(serde_json::to_vec(&body).expect("a JSON value serialises"));
        if let Some(key) = self
            .settings
            .api_key
            .as_deref()
            .filter(|k| !k.trim().is_empty())
        {
            request = request.bearer_auth(key.trim());
        }
        let exchange = async {
            let response = request.send().await.map_err(|e| CallError::Transient {
                message: self.scrub(&format!("cannot reach {}: {}", self.url, root_cause(&e))),
                retry_after: None,
            })?;
            let status = response.status();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let retry_after = header("retry-after")
                .and_then(|v| parse_retry_after(&v, header("date").as_deref()));
            let bytes = self.read_body(response).await?;
            Ok((status, retry_after, bytes))
        };
        let (status, retry_after, bytes) =
            match tokio::time::timeout(self.limits.request, exchange).await {
                Ok(result) => result?,
                Err(_) => {
                    return Err(CallError::fatal(format!(
                        "{} did not answer within {} s",
                        self.url,
                        self.limits.request.as_secs_f64()
                    )));
                }
            };
        if !status.is_success() {
            return Err(self.status_error(status.as_u16(), retry_after, &bytes));
        }
        self.vectors(inputs.len(), &bytes)
    }

    /// The whole body, up to [`MAX_ANSWER_BYTES`]; a connection that
    /// closes before the end is transient.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, CallError> {
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() > MAX_ANSWER_BYTES {
                        return Err(CallError::fatal(format!(
                            "{} sent an answer longer than {} MiB",
                            self.url,
                            MAX_ANSWER_BYTES / (1024 * 1024)
                        )));
                    }
                }
                Ok(None) => return Ok(bytes),
                Err(e) => {
                    return Err(CallError::Transient {
                        message: self.scrub(&format!(
                            "the connection to {} closed in the middle of the answer: {}",
                            self.url,
                            root_cause(&e)
                        )),
                        retry_after: None,
                    });
                }
            }
        }
    }

    /// What an error status means: 408, 429 (but an exhausted quota) and
    /// 5xx are transient, anything else final.
    fn status_error(&self, status: u16, retry_after: Option<Duration>, body: &[u8]) -> CallError {
        let text = String::from_utf8_lossy(body);
        let message = self.scrub(&error_message(&text));
        let parsed: Option<serde_json::Value> = serde_json::from_str(&text).ok();
        let code = |field: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.pointer(&format!("/error/{field}")))
                .and_then(|c| c.as_str())
                .map(str::to_string)
        };
        if [code("code"), code("type")]
            .iter()
            .flatten()
            .any(|c| c == "insufficient_quota")
        {
            return CallError::fatal(format!(
                "{} answered HTTP {status}: the account's quota is used up (insufficient_quota): {message}",
                self.url
            ));
        }
        let message = format!("{} answered HTTP {status}: {message}", self.url);
        if matches!(status, 408 | 429 | 500..=599) {
            CallError::Transient {
                message,
                retry_after,
            }
        } else {
            CallError::fatal(message)
        }
    }

    /// The vectors of a `200` answer for `want` inputs, in input order.
    fn vectors(&self, want: usize, body: &[u8]) -> Result<Vec<Vec<f32>>, CallError> {
        #[derive(serde::Deserialize)]
        struct Answer {
            data: Vec<Item>,
        }
        #[derive(serde::Deserialize)]
        struct Item {
            index: usize,
            embedding: Vec<f64>,
        }
        let answer: Answer = match serde_json::from_slice(body) {
            Ok(answer) => answer,
            // JSON cut short: the connection closed early.
            Err(e) if e.is_eof() => {
                return Err(CallError::Transient {
                    message: format!("the answer of {} ended early", self.url),
                    retry_after: None,
                });
            }
            Err(e) => {
                return Err(CallError::fatal(format!(
                    "{} did not answer with embeddings ({e}); check agents.defaults.memorySearch.remote.baseUrl",
                    self.url
                )));
            }
        };
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; want];
        for item in answer.data {
            let Some(slot) = slots.get_mut(item.index) else {
                return Err(CallError::fatal(format!(
                    "{} returned a vector for input {} of a batch of {want}",
                    self.url, item.index
                )));
            };
            if slot.is_some() {
                return Err(CallError::fatal(format!(
                    "{} returned two vectors for input {}",
                    self.url, item.index
                )));
            }
            *slot = Some(item.embedding.iter().map(|&x| x as f32).collect());
        }
        let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
        let dims = match self.dims.get() {
            Some(&dims) => dims,
            None => vectors.first().map_or(0, Vec::len),
        };
        if dims == 0 && !vectors.is_empty() {
            return Err(CallError::fatal(format!(
                "{} returned empty vectors",
                self.url
            )));
        }
        let mut vectors = check_batch(want, dims, vectors).map_err(CallError::Final)?;
        vectors.iter_mut().for_each(|v| normalise(v));
        let _ = self.dims.set(dims);
        Ok(vectors)
    }
}

impl Embedder for OpenAi {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.settings.model
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let batches = batches(texts, self.limits.max_inputs, self.limits.max_tokens);
        let runtime = self
            .runtime
            .as_ref()
            .expect("the runtime lives as long as the provider");
        let work = || {
            runtime.block_on(async {
                let mut vectors = Vec::with_capacity(texts.len());
                for batch in batches {
                    vectors.extend(self.request_with_retries(&texts[batch]).await?);
                }
                Ok(vectors)
            })
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return work();
        }
        // Called from code a runtime drives (an agent turn's memory tool
        // runs inside the turn's `block_on`): a runtime cannot be driven
        // from there, a thread of its own can.
        std::thread::scope(|scope| {
            scope.spawn(work).join().unwrap_or_else(|_| {
                Err(EmbedError::Failed(
                    "the embeddings request stopped unexpectedly".into(),
                ))
            })
        })
    }
}

impl Drop for OpenAi {
    fn drop(&mut self) {
        // Dropped inside a runtime (by an agent turn's memory tool), a
        // runtime may not wait for its tasks; it has none worth waiting
        // for (idle pooled connections).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// About how many tokens `text` is: four bytes a token, at least one.
fn estimated_tokens(text: &str) -> usize {
    text.len().div_ceil(4).max(1)
}

/// `texts` cut into runs of at most `max_inputs` texts and `max_tokens`
/// estimated tokens; a text over `max_tokens` on its own is a run by
/// itself.
fn batches(texts: &[&str], max_inputs: usize, max_tokens: usize) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut tokens = 0usize;
    for (i, text) in texts.iter().enumerate() {
        let cost = estimated_tokens(text);
        if i > start && (i - start >= max_inputs || tokens.saturating_add(cost) > max_tokens) {
            runs.push(start..i);
            start = i;
            tokens = 0;
        }
        tokens = tokens.saturating_add(cost);
    }
    if start < texts.len() {
        runs.push(start..texts.len());
    }
    runs
}

/// `v` scaled to length 1, non-finite parts taken as 0 (a zero vector
/// stays zero).
fn normalise(v: &mut [f32]) {
    for x in v.iter_mut() {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v.iter_mut() {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// The innermost cause of an HTTP error, in one line (`Connection refused
/// (os error 111)`).
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string().replace('\n', " ")
}

#[cfg(test)]
#[allow(clippy::duplicate_mod)]
#[path = "../../../tests/support/scripted_server.rs"]
mod scripted;

#[cfg(test)]
mod tests;
