//! Webhook deliveries: the request and its signature, what a receiver's
//! answer means, the backoff, and the deliveries journal
//! (`<state dir>/outbox/deliveries.jsonl`).
//!
//! The request: `POST` of `{id, ts, source, sessionKey, text}` (a result,
//! [`Payload::Item`]) or of a JSON document as it is (a receiver's own
//! shape, such as a cron run's event: [`Payload::Document`]) with
//! `Content-Type: application/json`, `X-Almanac-Timestamp` (the attempt's
//! Unix seconds), `Idempotency-Key` (the delivery's id, the same on every
//! attempt), with a secret `X-Almanac-Signature: sha256=<hex
//! HMAC-SHA256(secret, "<timestamp>.<body>")>`, and with a bearer token
//! `Authorization: Bearer <token>`. A delivery may carry its own time
//! limit per attempt (else the client's).
//!
//! A `2xx` is delivered. A connection failure, a timeout, `408`, `429`
//! (waiting at least its `Retry-After`, at most [`MAX_RETRY_AFTER`]) and a
//! `5xx` are tried again after [`BACKOFF`]: 8 attempts over about 1 h 43
//! min. Any other answer (other `4xx`, a redirect, which is not followed)
//! fails at once, and so does a URL the policy refuses.
//!
//! The journal gets a record per step: `pending` before the first attempt
//! (with the body, so the text is never only in memory), `pending` after
//! each failed attempt (attempts, reason, `nextAtMs`), then `delivered` or
//! `failed` (with the reason and the body). The signing secret and the
//! bearer token are never written: only the config keys they are read
//! from (`secretFrom`, `bearerFrom`), looked up again at every attempt.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Source;
use super::url::{UrlOrigin, UrlRefused};
use crate::durable;

/// The journal's file name in the outbox folder.
pub(crate) const FILE_NAME: &str = "deliveries.jsonl";
/// The waits before the second, third, … attempt.
pub(crate) const BACKOFF: [Duration; 7] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(2 * 60),
    Duration::from_secs(10 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(60 * 60),
];
/// Attempts in all: the first and one after each wait.
pub(crate) const MAX_ATTEMPTS: u32 = BACKOFF.len() as u32 + 1;
/// The longest `Retry-After` honoured.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);
/// Bytes of a refusal's body read for its reason.
const MAX_REASON_BODY: usize = 4 * 1024;

/// A delivery's state in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    Pending,
    Delivered,
    Failed,
}

/// What a webhook receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    /// A result: [`Body`].
    Item(Body),
    /// A JSON document, posted as it is.
    Document(serde_json::Value),
    /// A reply to a chat, sent by its channel's client (not posted).
    Chat(ChatMessage),
}

/// A reply to a chat on a channel with a sender of its own (Telegram).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatMessage {
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<i64>,
    /// The message it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<i64>,
    pub source: Source,
    pub session_key: String,
    pub text: String,
    /// How many of its messages went out (a reply longer than one
    /// message): a retry sends the rest.
    #[serde(default)]
    pub sent: usize,
}

/// A result as a webhook receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Body {
    pub id: String,
    pub ts: i64,
    pub source: Source,
    pub session_key: String,
    pub text: String,
    /// The task whose answer this is (a webhook's agent run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// One line of the deliveries journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub id: String,
    /// When this step happened (epoch ms).
    pub ts: i64,
    pub state: State,
    pub url: String,
    pub origin: UrlOrigin,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at_ms: Option<i64>,
    /// The config key the signing secret is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_from: Option<String>,
    /// The config key the bearer token is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_from: Option<String>,
    /// The time limit of one attempt, when not the client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// A result ([`Payload::Item`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Body>,
    /// A document ([`Payload::Document`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<serde_json::Value>,
    /// A chat's reply ([`Payload::Chat`]), with how much of it went out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatMessage>,
    /// The task whose result this is, told of each step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl Record {
    /// What the record holds of the payload.
    fn payload(&self) -> Option<Payload> {
        match (&self.body, &self.document, &self.chat) {
            (Some(body), _, _) => Some(Payload::Item(body.clone())),
            (None, Some(document), _) => Some(Payload::Document(document.clone())),
            (None, None, Some(chat)) => Some(Payload::Chat(chat.clone())),
            (None, None, None) => None,
        }
    }
}

pub(crate) fn parse_record(line: &[u8]) -> Option<Record> {
    let record: Record = serde_json::from_slice(line).ok()?;
    record.id.parse::<u64>().ok()?;
    Some(record)
}

/// A delivery under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebhookJob {
    pub id: String,
    pub url: String,
    pub origin: UrlOrigin,
    pub secret_from: Option<String>,
    pub bearer_from: Option<String>,
    /// The time limit of one attempt, when not the client's.
    pub timeout_ms: Option<u64>,
    pub payload: Payload,
    /// Attempts made.
    pub attempts: u32,
    /// When the next attempt is due (epoch ms), once one failed.
    pub next_at_ms: Option<i64>,
    /// The task whose result this is, told of each step.
    pub task_id: Option<String>,
}

impl WebhookJob {
    /// The journal's record of this job now in `state`.
    pub(crate) fn record(&self, state: State, ts: i64, reason: Option<String>) -> Record {
        let mut record = Record {
            id: self.id.clone(),
            ts,
            state,
            url: self.url.clone(),
            origin: self.origin,
            attempts: self.attempts,
            reason,
            next_at_ms: (state == State::Pending)
                .then_some(self.next_at_ms)
                .flatten(),
            secret_from: self.secret_from.clone(),
            bearer_from: self.bearer_from.clone(),
            timeout_ms: self.timeout_ms,
            body: None,
            document: None,
            chat: None,
            task_id: self.task_id.clone(),
        };
        // The text stays in the journal until it is delivered (a chat's
        // with how much of it went out, at every step).
        let chat_progress = matches!(&self.payload, Payload::Chat(c) if c.sent > 0);
        if state != State::Delivered
            && (self.attempts == 0 || state == State::Failed || chat_progress)
        {
            match &self.payload {
                Payload::Item(body) => record.body = Some(body.clone()),
                Payload::Document(document) => record.document = Some(document.clone()),
                Payload::Chat(chat) => record.chat = Some(chat.clone()),
            }
        }
        record
    }

    /// The bytes posted.
    fn body_bytes(&self) -> Vec<u8> {
        match &self.payload {
            Payload::Item(body) => serde_json::to_vec(body),
            Payload::Document(document) => serde_json::to_vec(document),
            Payload::Chat(chat) => serde_json::to_vec(chat),
        }
        .expect("a body serialises")
    }
}

/// The deliveries the journal's records leave pending, oldest first, and
/// the highest id it holds.
pub(crate) fn pending(records: Vec<Record>) -> (Vec<WebhookJob>, u64) {
    let mut last_id = 0;
    let mut jobs: BTreeMap<u64, (Record, Option<Payload>)> = BTreeMap::new();
    for record in records {
        let seq: u64 = record.id.parse().unwrap_or(0);
        last_id = last_id.max(seq);
        let payload = record
            .payload()
            .or_else(|| jobs.get(&seq).and_then(|(_, p)| p.clone()));
        jobs.insert(seq, (record, payload));
    }
    let pending = jobs
        .into_values()
        .filter_map(|(r, payload)| {
            let payload = payload?;
            (r.state == State::Pending).then_some(WebhookJob {
                id: r.id,
                url: r.url,
                origin: r.origin,
                secret_from: r.secret_from,
                bearer_from: r.bearer_from,
                timeout_ms: r.timeout_ms,
                payload,
                attempts: r.attempts,
                next_at_ms: r.next_at_ms,
                task_id: r.task_id,
            })
        })
        .collect();
    (pending, last_id)
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttemptOutcome {
    Delivered,
    /// Worth another attempt (at least `retry_after` later, when given).
    Retry {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Another attempt would fail the same way.
    Permanent {
        reason: String,
    },
}

/// The wait before the next attempt after `attempts` failed ones, or
/// `None` when that was the last.
pub(crate) fn next_wait(attempts: u32, retry_after: Option<Duration>) -> Option<Duration> {
    if attempts >= MAX_ATTEMPTS {
        return None;
    }
    let backoff = *BACKOFF.get(usize::try_from(attempts.checked_sub(1)?).ok()?)?;
    Some(retry_after.map_or(backoff, |asked| asked.min(MAX_RETRY_AFTER).max(backoff)))
}

/// `sha256=<lowercase hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
pub(crate) fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut context = ring::hmac::Context::with_key(&key);
    context.update(timestamp.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    let tag = context.sign();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for byte in tag.as_ref() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The credentials of one attempt, as read from the config.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Credentials<'a> {
    /// Signs the body.
    pub secret: Option<&'a [u8]>,
    /// Sent as `Authorization: Bearer`.
    pub bearer: Option<&'a str>,
}

/// Posts `job`'s body to its URL once, signed and authorised as
/// `credentials` say, at `unix_seconds`.
pub(crate) async fn attempt(
    client: &reqwest::Client,
    job: &WebhookJob,
    credentials: Credentials<'_>,
    unix_seconds: i64,
) -> AttemptOutcome {
    let body = job.body_bytes();
    let mut request = client
        .post(&job.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Almanac-Timestamp", unix_seconds.to_string())
        .header("Idempotency-Key", &job.id);
    if let Some(secret) = credentials.secret {
        request = request.header(
            "X-Almanac-Signature",
            signature(secret, unix_seconds, &body),
        );
    }
    if let Some(token) = credentials.bearer {
        request = request.bearer_auth(token);
    }
    if let Some(ms) = job.timeout_ms {
        request = request.timeout(Duration::from_millis(ms));
    }
    match request.body(body).send().await {
        Ok(response) => judge(response).await,
        Err(err) => judge_error(&err),
    }
}

/// What an answer means.
async fn judge(mut response: reqwest::Response) -> AttemptOutcome {
    let status = response.status();
    if status.is_success() {
        return AttemptOutcome::Delivered;
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let retry_after = header("retry-after")
        .and_then(|v| crate::provider::http::parse_retry_after(&v, header("date").as_deref()));
    let location = header("location");
    let mut bytes = Vec::new();
    while bytes.len() < MAX_REASON_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    bytes.truncate(MAX_REASON_BODY);
    let text = String::from_utf8_lossy(&bytes);
    let said = if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", crate::provider::http::error_message(&text))
    };
    let reason = format!("HTTP {}{said}", status.as_u16());
    match status.as_u16() {
        408 | 429 | 500..=599 => AttemptOutcome::Retry {
            reason,
            retry_after,
        },
        300..=399 => AttemptOutcome::Permanent {
            reason: format!(
                "{reason} (redirects are not followed{})",
                location.map(|l| format!("; to {l}")).unwrap_or_default()
            ),
        },
        _ => AttemptOutcome::Permanent { reason },
    }
}

/// What a failed request means: a refused address is final, the rest
/// (no connection, a timeout, a dropped answer) is worth another try. The
/// reason is the deepest cause (the outer ones repeat the URL).
fn judge_error(err: &reqwest::Error) -> AttemptOutcome {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut deepest = err.to_string();
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<UrlRefused>() {
            return AttemptOutcome::Permanent {
                reason: refused.to_string(),
            };
        }
        deepest = cause.to_string();
        source = cause.source();
    }
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    AttemptOutcome::Retry {
        reason: format!("{what}: {}", crate::memory::snippet(&deepest, 300)),
        retry_after: None,
    }
}

/// Drops from the journal the records of deliveries that ended (delivered
/// or failed) more than `retention_ms` before `now_ms`, and unreadable
/// lines; the rest stays byte for byte. Reads only the first line when it
/// is recent. The caller holds the journal's writers off meanwhile and
/// reopens it after.
pub(crate) fn compact(
    path: &std::path::Path,
    now_ms: i64,
    retention_ms: i64,
) -> std::io::Result<usize> {
    let cutoff = now_ms.saturating_sub(retention_ms);
    let Some(first) = first_line(path)? else {
        return Ok(0);
    };
    if parse_record(&first).is_some_and(|r| r.ts >= cutoff) {
        return Ok(0);
    }
    let Some(bytes) = durable::read_if_exists(path)? else {
        return Ok(0);
    };
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let mut ended_long_ago: BTreeMap<String, bool> = BTreeMap::new();
    for line in &lines {
        if let Some(r) = parse_record(line) {
            ended_long_ago.insert(r.id, r.state != State::Pending && r.ts < cutoff);
        }
    }
    let mut kept = Vec::with_capacity(bytes.len());
    let mut dropped = 0;
    for line in &lines {
        match parse_record(line) {
            Some(r) if !ended_long_ago.get(&r.id).copied().unwrap_or(false) => {
                kept.extend_from_slice(line);
            }
            _ if line.iter().all(u8::is_ascii_whitespace) => {}
            _ => dropped += 1,
        }
    }
    if dropped == 0 {
        return Ok(0);
    }
    if kept.last().is_some_and(|b| *b != b'\n') {
        kept.push(b'\n');
    }
    durable::atomic_replace(path, &kept, durable::PRIVATE_FILE_MODE)?;
    Ok(dropped)
}

fn first_line(path: &std::path::Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::BufRead;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut first = Vec::new();
    std::io::BufReader::new(file).read_until(b'\n', &mut first)?;
    Ok((!first.is_empty()).then_some(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> WebhookJob {
        WebhookJob {
            id: "42".into(),
            url: "http://127.0.0.1:9/hook".into(),
            origin: UrlOrigin::Config,
            secret_from: Some("hooks.token".into()),
            bearer_from: None,
            timeout_ms: None,
            payload: Payload::Item(Body {
                id: "42".into(),
                ts: 1_000,
                source: Source::Cron,
                session_key: "cron:daily".into(),
                text: "done".into(),
                task_id: None,
            }),
            attempts: 0,
            next_at_ms: None,
            task_id: None,
        }
    }

    #[test]
    fn the_backoff_runs_eight_attempts_and_honours_retry_after_within_its_cap() {
        let waits: Vec<Duration> = (1..=MAX_ATTEMPTS)
            .map_while(|n| next_wait(n, None))
            .collect();
        assert_eq!(waits, BACKOFF.to_vec());
        assert_eq!(MAX_ATTEMPTS, 8);
        assert_eq!(next_wait(MAX_ATTEMPTS, None), None, "the last one");
        assert_eq!(next_wait(0, None), None);
        let total: Duration = BACKOFF.iter().sum();
        assert_eq!(total.as_secs(), 6_156, "about 1 h 43 min");
        assert_eq!(
            next_wait(1, Some(Duration::from_secs(90))),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            next_wait(3, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(30)),
            "never sooner than the backoff"
        );
        assert_eq!(
            next_wait(1, Some(Duration::from_secs(86_400))),
            Some(MAX_RETRY_AFTER)
        );
    }

    /// HMAC-SHA256 from its definition (RFC 2104) over plain SHA-256.
    fn hmac_by_hand(key: &[u8], message: &[u8]) -> String {
        let sha = |parts: &[&[u8]]| {
            let mut c = ring::digest::Context::new(&ring::digest::SHA256);
            for p in parts {
                c.update(p);
            }
            c.finish().as_ref().to_vec()
        };
        let mut block = [0u8; 64];
        if key.len() > 64 {
            block[..32].copy_from_slice(&sha(&[key]));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let inner_pad: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
        let outer_pad: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
        let inner = sha(&[&inner_pad, message]);
        sha(&[&outer_pad, &inner])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn the_signature_is_the_hmac_of_timestamp_dot_body() {
        // The reference computation agrees with RFC 4231, test case 2.
        assert_eq!(
            hmac_by_hand(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let body = br#"{"id":"1","text":"hi"}"#;
        assert_eq!(
            signature(b"s3cret", 1_796_000_000, body),
            format!(
                "sha256={}",
                hmac_by_hand(b"s3cret", &[&b"1796000000."[..], body].concat())
            )
        );
        let long_key = [7u8; 100];
        assert_eq!(
            signature(&long_key, 5, b"x"),
            format!("sha256={}", hmac_by_hand(&long_key, b"5.x"))
        );
        assert_ne!(signature(b"s3cret", 1, body), signature(b"s3cret", 2, body));
    }

    #[test]
    fn records_keep_the_text_until_delivered_and_never_the_secret() {
        let mut j = job();
        let first = j.record(State::Pending, 1, None);
        assert!(first.body.is_some());
        j.attempts = 1;
        j.next_at_ms = Some(2_000);
        let retry = j.record(State::Pending, 2, Some("HTTP 503".into()));
        assert_eq!(retry.body, None);
        assert_eq!(retry.next_at_ms, Some(2_000));
        let failed = j.record(State::Failed, 3, Some("HTTP 400".into()));
        assert!(failed.body.is_some() && failed.next_at_ms.is_none());
        let done = j.record(State::Delivered, 4, None);
        assert_eq!(done.body, None);
        let line = serde_json::to_string(&first).unwrap();
        assert!(line.contains(r#""secretFrom":"hooks.token""#), "{line}");
        // Folding: the last state wins, the body comes from the first.
        let (jobs, last) = pending(vec![first.clone(), retry.clone()]);
        assert_eq!(last, 42);
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].attempts, jobs[0].next_at_ms), (1, Some(2_000)));
        assert_eq!(jobs[0].payload, j.payload);
        let (jobs, _) = pending(vec![first, retry, done]);
        assert!(jobs.is_empty());
    }

    #[test]
    fn a_document_keeps_its_shape_its_token_key_and_its_time_limit_across_a_restart() {
        let mut j = job();
        j.secret_from = None;
        j.bearer_from = Some("cron.webhookToken".into());
        j.timeout_ms = Some(10_000);
        j.payload = Payload::Document(serde_json::json!({"jobId": "daily", "action": "finished"}));
        assert_eq!(j.body_bytes(), br#"{"jobId":"daily","action":"finished"}"#);
        let first = j.record(State::Pending, 1, None);
        assert_eq!(first.body, None);
        assert!(first.document.is_some());
        let line = serde_json::to_string(&first).unwrap();
        assert!(
            line.contains(r#""bearerFrom":"cron.webhookToken""#),
            "{line}"
        );
        assert!(line.contains(r#""timeoutMs":10000"#), "{line}");
        j.attempts = 1;
        j.next_at_ms = Some(2_000);
        let retry = j.record(State::Pending, 2, Some("HTTP 503".into()));
        assert_eq!((retry.body.as_ref(), retry.document.as_ref()), (None, None));
        let reread: Vec<Record> = [first, retry]
            .iter()
            .map(|r| parse_record(serde_json::to_string(r).unwrap().as_bytes()).unwrap())
            .collect();
        let (jobs, _) = pending(reread);
        assert_eq!(jobs, vec![j]);
    }

    #[test]
    fn compaction_drops_only_deliveries_that_ended_long_ago() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let day = 86_400_000;
        let now = 100 * day;
        let mut lines = Vec::new();
        let mut add = |id: &str, ts: i64, state: State| {
            let mut j = job();
            j.id = id.into();
            lines.push(serde_json::to_string(&j.record(state, ts, None)).unwrap());
        };
        add("1", now - 40 * day, State::Pending);
        add("1", now - 40 * day, State::Delivered);
        add("2", now - 40 * day, State::Pending);
        add("3", now - 35 * day, State::Pending);
        add("3", now - day, State::Failed);
        let text = format!("{}\n", lines.join("\n"));
        std::fs::write(&path, &text).unwrap();
        assert_eq!(compact(&path, now, 30 * day).unwrap(), 2);
        let kept: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(
            kept,
            lines[2..].to_vec(),
            "pending and recent stay as they were"
        );
        let inode = |p: &std::path::Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).unwrap().ino()
        };
        let before = inode(&path);
        assert_eq!(compact(&path, now, 30 * day).unwrap(), 0);
        assert_eq!(inode(&path), before, "nothing to drop: not rewritten");
    }
}
