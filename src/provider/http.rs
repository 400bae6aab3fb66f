//! What both protocols share: the HTTP client, the request with its
//! timeouts, reading an error answer, and the retry policy.
//!
//! Three clocks bound a call ([`Timeouts`]): connecting (TCP and TLS);
//! silence — once connected, the answer must start, and then keep coming,
//! with no gap longer than the idle timeout (every read restarts it); and
//! the whole answer. A long answer that keeps streaming is cut only by the
//! last. Silence and the whole-answer limit are not retried.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::{BoxFuture, Endpoint, ProviderError, sse};

/// Sleeps between retries; injected so tests can record the waits
/// instead of waiting.
pub(crate) trait Sleeper: Send + Sync {
    fn sleep(&self, duration: Duration) -> BoxFuture<'_, ()>;
}

/// A sleeper that records the waits instead of sleeping (tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct RecordingSleeper(std::sync::Mutex<Vec<Duration>>);

#[cfg(test)]
impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> super::BoxFuture<'_, ()> {
        self.0.lock().unwrap().push(duration);
        Box::pin(async {})
    }
}

#[cfg(test)]
impl RecordingSleeper {
    pub(crate) fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

/// The real sleeper.
pub(crate) struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// How often and how long to wait before trying a call again.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    pub max_retries: u32,
    /// The first wait; it doubles after each try.
    pub base: Duration,
    /// The longest wait of the backoff.
    pub cap: Duration,
    /// The longest `Retry-After` honoured; a server asking for more gets
    /// this much.
    pub max_retry_after: Duration,
    pub sleeper: Arc<dyn Sleeper>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            sleeper: Arc::new(TokioSleeper),
        }
    }
}

impl RetryPolicy {
    /// The wait before try `attempt + 1`: the server's `Retry-After` when
    /// given, else `base · 2^attempt` capped, plus up to a fifth of it as
    /// jitter (derived from the attempt, so runs are reproducible).
    pub(crate) fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let backoff = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        let jitter =
            backoff.mul_f64(f64::from((attempt.wrapping_mul(2_654_435_761)) % 200) / 1000.0);
        backoff + jitter
    }
}

/// How long one call may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// Setting up the connection (TCP and TLS).
    pub connect: Duration,
    /// The longest silence once connected: before the answer starts, and
    /// between two reads of it. `None`: no limit.
    pub idle: Option<Duration>,
    /// The whole answer, from sending the request to its last byte.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            idle: Some(Duration::from_secs(120)),
            total: Duration::from_secs(600),
        }
    }
}

/// `10 s`, `0.25 s`: a limit as messages show it.
pub(crate) fn seconds(limit: Duration) -> String {
    if limit.subsec_nanos() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} s", limit.as_secs_f64())
    }
}

/// The clock of one call: its deadline, and the silence allowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallClock {
    timeouts: Timeouts,
    deadline: tokio::time::Instant,
}

impl CallClock {
    pub(crate) fn start(timeouts: Timeouts) -> CallClock {
        let now = tokio::time::Instant::now();
        CallClock {
            timeouts,
            deadline: now
                .checked_add(timeouts.total)
                .unwrap_or(now + Duration::from_secs(86_400 * 365)),
        }
    }

    /// Waits for `step` (a read, or the answer's start when `started` is
    /// false) at most the idle timeout (plus the connect timeout before
    /// the answer starts) and never past the deadline.
    async fn wait<T>(
        &self,
        endpoint: &Endpoint,
        started: bool,
        step: impl std::future::Future<Output = T>,
    ) -> Result<T, ProviderError> {
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let silence = self.timeouts.idle.map(|idle| {
            if started {
                idle
            } else {
                idle.saturating_add(self.timeouts.connect)
            }
        });
        let (limit, idle) = match silence {
            Some(silence) if silence < left => (silence, true),
            _ => (left, false),
        };
        tokio::time::timeout(limit, step).await.map_err(|_| {
            if idle {
                ProviderError::Idle {
                    provider: endpoint.provider.clone(),
                    started,
                    limit: self.timeouts.idle.unwrap_or_default(),
                }
            } else {
                ProviderError::Timeout {
                    provider: endpoint.provider.clone(),
                    limit: self.timeouts.total,
                }
            }
        })
    }
}

/// A successful answer whose body is still to be read, with its call's
/// clock.
pub(crate) struct Answer {
    response: reqwest::Response,
    clock: CallClock,
}

/// The HTTP client of an endpoint. Only connecting is timed here; the
/// other limits are the call's ([`CallClock`]).
pub(crate) fn client(endpoint: &Endpoint) -> reqwest::Client {
    client_for(&endpoint.base_url, endpoint.timeouts.connect)
}

/// The HTTP client of a model endpoint at `base_url` that takes at most
/// `connect` to connect: the chat providers' and the remote embeddings
/// provider's (`memory::embed::openai`).
pub(crate) fn client_for(base_url: &str, connect: Duration) -> reqwest::Client {
    ensure_crypto_provider();
    // No redirect is followed: the key and the configured headers go to
    // the configured base URL only, never to an address a server names.
    let mut builder = reqwest::Client::builder()
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("almanac/", env!("CARGO_PKG_VERSION")));
    if base_url.starts_with("http://") {
        // A plain-HTTP endpoint (a local server) needs no certificates:
        // loading the system's trust store costs milliseconds.
        builder = builder.tls_certs_only(Vec::new());
    }
    builder
        .build()
        .expect("the HTTP client builds with a crypto provider installed")
}

/// rustls needs one process-wide crypto provider; ring is the one built in.
pub(crate) fn ensure_crypto_provider() {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The most bytes of an error answer read (its message is cut far shorter).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// POSTs `body` to `url` and returns the answer once its status is a
/// success and it is an event stream; an error status is read and turned
/// into a [`ProviderError`], and so is a success that is a web page or
/// JSON instead of a stream.
pub(crate) async fn post(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    url: &str,
    headers: &[(&str, String)],
    body: &serde_json::Value,
) -> Result<Answer, ProviderError> {
    let clock = CallClock::start(endpoint.timeouts);
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(serde_json::to_vec(body).expect("a JSON value serialises"));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    for (name, value) in &endpoint.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = clock
        .wait(endpoint, false, request.send())
        .await?
        .map_err(|source| {
            if source.is_connect() && source.is_timeout() {
                ProviderError::ConnectTimeout {
                    provider: endpoint.provider.clone(),
                    url: url.to_string(),
                    limit: endpoint.timeouts.connect,
                }
            } else {
                ProviderError::Unreachable {
                    provider: endpoint.provider.clone(),
                    url: url.to_string(),
                    source,
                }
            }
        })?;
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if status.is_success() {
        let content_type = header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let mut answer = Answer { response, clock };
        let what = match media.as_str() {
            "text/html" | "application/xhtml+xml" => Some("an HTML page".to_string()),
            "application/json" => {
                let text = answer.text(endpoint, MAX_ERROR_BODY).await?;
                Some(format!("JSON ({})", error_message(&text)))
            }
            _ => None,
        };
        return match what {
            Some(what) => Err(ProviderError::NotEventStream {
                provider: endpoint.provider.clone(),
                url: url.to_string(),
                what,
            }),
            None => Ok(answer),
        };
    }
    let retry_after =
        header("retry-after").and_then(|v| parse_retry_after(&v, header("date").as_deref()));
    if status.is_redirection() {
        return Err(ProviderError::Status {
            provider: endpoint.provider.clone(),
            status: status.as_u16(),
            message: format!(
                "a redirect to {}, not followed: the key goes only to the configured baseUrl",
                header("location").unwrap_or_else(|| "an unnamed address".to_string())
            ),
            retry_after: None,
        });
    }
    let mut answer = Answer { response, clock };
    let text = answer
        .text(endpoint, MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
    Err(ProviderError::Status {
        provider: endpoint.provider.clone(),
        status: status.as_u16(),
        message: error_message(&text),
        retry_after,
    })
}

impl Answer {
    /// The body as text, at most `cap` bytes of it, read under the call's
    /// clock.
    async fn text(&mut self, endpoint: &Endpoint, cap: usize) -> Result<String, ProviderError> {
        let mut bytes = Vec::new();
        while bytes.len() < cap {
            match self
                .clock
                .wait(endpoint, true, self.response.chunk())
                .await?
            {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        bytes.truncate(cap);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The message of an error body: `{"error": {"message": …}}` (both
/// protocols), `{"message": …}`, or the text itself, cut short.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    let message = message.unwrap_or_else(|| body.trim().to_string());
    let message: String = message.chars().take(300).collect();
    if message.is_empty() {
        "no details".to_string()
    } else {
        message
    }
}

/// `Retry-After` as seconds (`120`, `1.5`), or as an HTTP date, read
/// against the answer's own `Date` header (the server's clock, not ours).
/// Any size is read (a wait too long to hold is the longest one); what is
/// honoured is capped by [`RetryPolicy::max_retry_after`].
pub(crate) fn parse_retry_after(value: &str, date: Option<&str>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
    }
    let until = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let now = jiff::fmt::rfc2822::parse(date?.trim()).ok()?.timestamp();
    let wait = until.duration_since(now);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// The most bytes one streamed answer may take (events and all); a server
/// sending more is refused rather than held in memory.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Reads the events of a streamed answer, calling `on_event` for each;
/// `on_event` returns `true` once the answer is complete. A stream that
/// ends before that is [`ProviderError::Dropped`].
pub(crate) async fn read_events(
    endpoint: &Endpoint,
    answer: Answer,
    mut on_event: impl FnMut(sse::SseEvent) -> Result<bool, ProviderError>,
) -> Result<(), ProviderError> {
    let Answer { response, clock } = answer;
    let mut parser = sse::Parser::default();
    let mut received: usize = 0;
    let mut stream = response.bytes_stream();
    let dropped = || ProviderError::Dropped {
        provider: endpoint.provider.clone(),
    };
    while let Some(chunk) = clock.wait(endpoint, true, stream.next()).await? {
        let chunk = chunk.map_err(|_| dropped())?;
        received = received.saturating_add(chunk.len());
        if received > MAX_ANSWER_BYTES {
            return Err(ProviderError::Malformed {
                provider: endpoint.provider.clone(),
                detail: format!(
                    "an answer longer than {} MiB",
                    MAX_ANSWER_BYTES / (1024 * 1024)
                ),
            });
        }
        for event in parser.push(&chunk) {
            if on_event(event)? {
                return Ok(());
            }
        }
        if parser.oversized() {
            return Err(ProviderError::Malformed {
                provider: endpoint.provider.clone(),
                detail: format!(
                    "an event longer than {} MiB",
                    sse::MAX_EVENT_BYTES / (1024 * 1024)
                ),
            });
        }
    }
    if let Some(event) = parser.finish()
        && on_event(event)?
    {
        return Ok(());
    }
    Err(dropped())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_honours_retry_after() {
        let p = RetryPolicy::default();
        let d0 = p.delay(0, None);
        let d1 = p.delay(1, None);
        assert!(
            d0 >= Duration::from_millis(500) && d0 <= Duration::from_millis(600),
            "{d0:?}"
        );
        assert!(
            d1 >= Duration::from_millis(1000) && d1 <= Duration::from_millis(1200),
            "{d1:?}"
        );
        assert!(p.delay(10, None) <= Duration::from_millis(9600));
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(3600))),
            Duration::from_secs(60)
        );
        assert_eq!(p.delay(2, None), p.delay(2, None), "reproducible");
    }

    #[test]
    fn retry_after_values() {
        assert_eq!(parse_retry_after("2", None), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 1.5 ", None),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("-1", None), None);
        assert_eq!(parse_retry_after("soon", None), None);
        let date = Some("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", date),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", date),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", None),
            None
        );
    }

    #[test]
    fn huge_and_odd_retry_after_values_do_not_panic() {
        for huge in [
            "18446744073709551616",
            "99999999999999999999999999",
            "1e400",
            "inf",
            "1.9e19",
        ] {
            assert_eq!(parse_retry_after(huge, None), Some(Duration::MAX), "{huge}");
        }
        for odd in ["NaN", "-inf", "-5", "1,5", "", "0x10", "Wed, 99 Oct 2015"] {
            assert_eq!(parse_retry_after(odd, None), None, "{odd}");
        }
        let far = parse_retry_after(
            "Thu, 30 Dec 9999 00:00:00 GMT",
            Some("Thu, 01 Jan 1970 00:00:00 GMT"),
        )
        .unwrap();
        assert!(far > Duration::from_secs(250_000_000_000), "{far:?}");
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, Some(Duration::MAX)), p.max_retry_after);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn header_text() -> impl Strategy<Value = String> {
            prop_oneof![
                ".{0,40}",
                any::<f64>().prop_map(|x| x.to_string()),
                any::<u128>().prop_map(|n| n.to_string()),
                any::<i64>().prop_map(|n| n.to_string()),
                (any::<i16>(), 0u8..40, 0u8..30, 0u8..70).prop_map(|(y, d, h, m)| format!(
                    "Wed, {d:02} Oct {y:04} {h:02}:{m:02}:00 GMT"
                )),
            ]
        }

        proptest! {
            /// Any `Retry-After` and `Date` a server sends: a wait or
            /// none, never a panic; whatever is honoured is capped.
            #[test]
            fn retry_after_never_panics(value in header_text(), date in proptest::option::of(header_text()), attempt in any::<u32>()) {
                let wait = parse_retry_after(&value, date.as_deref());
                let p = RetryPolicy::default();
                let delay = p.delay(attempt, wait);
                prop_assert!(delay <= p.max_retry_after.max(p.cap + p.cap / 5));
            }

            /// Any error body: one short message.
            #[test]
            fn error_message_never_panics(body in "(?s).{0,400}") {
                let m = error_message(&body);
                prop_assert!(!m.is_empty() && m.chars().count() <= 300);
            }
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(r#"{"error":{"message":"Rate limit reached","type":"rate_limit"}}"#),
            "Rate limit reached"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(
            error_message("<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
        assert_eq!(error_message(""), "no details");
    }
}
