//! Inbound webhooks: `POST <hooks.path>/wake`, `<hooks.path>/agent` and
//! the configured mappings, served beside the control API under their own
//! token. This file owns the routes, the checked `hooks.*` settings they
//! are served with, authentication and its lockout, the body's limits and
//! the wake; the agent runs are in `webhook_runs.rs`, idempotency in
//! `webhook_replay.rs`.
//!
//! Invariants:
//! * The pipeline runs in the order OpenClaw's does, so callers see the
//!   same status codes: a `token` in the query string is refused (400)
//!   before anything else, even with a valid header; then the method
//!   (405, `Allow: POST`); then the token (401, and 429 with
//!   `Retry-After` once an address failed [`LOCKOUT_AFTER`] times within
//!   [`super::LOCKOUT_WINDOW`]); then the body (413 over `hooks.maxBodyBytes`,
//!   408 when it does not arrive, 400 when it is not JSON).
//! * Tokens are compared in constant time, as digests (so not even the
//!   length leaks). The hook token is never the gateway token: the
//!   gateway refuses to start with them equal, and hooks stay off if a
//!   reload makes them so.
//! * A 200 means the event is in the intake log (one `write(2)` before the
//!   reply), so a kill -9 right after it loses nothing. Webhook events are
//!   `trusted: false`: the model sees them as `System (untrusted):`.
//! * A repeated idempotency key gets the first answer and queues nothing
//!   (`webhook_replay.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::intake::Record;
use super::super::{GatewayEvent, Shared};
use super::ApiError;
use super::webhook_replay::{ReplayCache, accept_once, replay_key};
use crate::config::HooksConfig;
use crate::gateway_client::discovery;

/// Failed authentications from one address within [`super::LOCKOUT_WINDOW`]
/// after which it is locked out.
const LOCKOUT_AFTER: usize = 20;
/// How long a body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest idempotency key accepted.
const IDEMPOTENCY_KEY_MAX: usize = 256;

const QUERY_TOKEN: &str = "Hook token must be provided via Authorization: Bearer <token> or X-OpenClaw-Token header (query parameters are not allowed).";

/// Why the `hooks.*` settings cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookConfigError {
    #[error("hooks.enabled is true but hooks.token is empty: set hooks.token")]
    TokenMissing,
    #[error(
        "hooks.token is the gateway token: give hooks a token of their own (a hook caller must not be able to drive the control API)"
    )]
    SameToken,
    #[error("hooks.path `{0}` is not usable: {1}")]
    BadPath(String, &'static str),
    #[error("{0}")]
    Mappings(String),
}

/// The checked `hooks.*` settings a request is served with.
#[derive(Debug, Clone)]
pub(crate) struct WebhookSettings {
    pub token: String,
    /// Normalised: a leading `/`, no trailing one.
    pub base: String,
    pub max_body_bytes: usize,
    /// The mappings in match order (presets last).
    pub mappings: Vec<crate::config::HookMappingConfig>,
}

/// Checks `hooks.*` against the gateway token: `None` when hooks are off.
pub(crate) fn settings(
    config: &HooksConfig,
    gateway_token: &str,
) -> Result<Option<WebhookSettings>, WebhookConfigError> {
    if !config.enabled {
        return Ok(None);
    }
    let token = config.token.as_deref().map(str::trim).unwrap_or("");
    if token.is_empty() {
        return Err(WebhookConfigError::TokenMissing);
    }
    if discovery::tokens_equal(token.as_bytes(), gateway_token.trim().as_bytes()) {
        return Err(WebhookConfigError::SameToken);
    }
    let base = normalise_path(&config.path)?;
    let problems = super::mappings::problems(config);
    if !problems.is_empty() {
        return Err(WebhookConfigError::Mappings(problems.join("; ")));
    }
    Ok(Some(WebhookSettings {
        token: token.to_string(),
        base,
        max_body_bytes: usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX),
        mappings: super::mappings::all(config),
    }))
}

fn normalise_path(raw: &str) -> Result<String, WebhookConfigError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let base = if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    };
    let bad = |why| Err(WebhookConfigError::BadPath(raw.to_string(), why));
    if base == "/" {
        return bad("`/` would take every route");
    }
    if base.contains(['?', '#']) || base.split('/').any(|s| s == "." || s == "..") {
        return bad("use a plain path such as /hooks");
    }
    for taken in ["/v1", "/healthz", "/readyz", crate::mcp::HTTP_PATH] {
        let inside = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
        if inside(&base, taken) || inside(taken, &base) {
            return bad("it overlaps the gateway's own routes (/v1, /mcp, /healthz, /readyz)");
        }
    }
    Ok(base)
}

/// What the webhooks keep between requests.
#[derive(Debug)]
pub(crate) struct WebhookState {
    /// The checked settings of the config in force, built once per
    /// config (a reload makes a new one) rather than per request.
    current: Mutex<Option<Current>>,
    lockout: super::Lockout,
    /// Loaded from its file at the first keyed request.
    pub(super) replay: tokio::sync::Mutex<Option<ReplayCache>>,
    /// Hook and chat runs in flight in this process (a run is never
    /// started twice at once); each leaves the set when it ends.
    pub(super) started: Mutex<std::collections::HashSet<String>>,
    /// How many of them are chat messages' runs (see
    /// [`WebhookState::room_for_chat_runs`]).
    pub(super) chat_runs: tokio::sync::watch::Sender<usize>,
}

impl Default for WebhookState {
    fn default() -> Self {
        WebhookState {
            current: Mutex::default(),
            lockout: super::Lockout::new(LOCKOUT_AFTER),
            replay: tokio::sync::Mutex::default(),
            started: Mutex::default(),
            chat_runs: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// The settings derived from one loaded config.
#[derive(Debug, Clone)]
struct Current {
    /// The config they were derived from (compared by identity).
    app: Arc<crate::app::App>,
    settings: Option<Arc<Served>>,
}

/// Checked settings and what every request of them needs.
#[derive(Debug)]
struct Served {
    settings: WebhookSettings,
    /// `sha256(token)`: the token's share of an idempotency entry.
    token_credential: String,
    /// The main session's key (where wakes go).
    main_key: Result<String, String>,
}

impl WebhookState {
    /// Waits until fewer than `limit` chat messages' runs are in flight
    /// (queued in their lanes or running).
    pub(crate) async fn room_for_chat_runs(&self, limit: usize) {
        let mut in_flight = self.chat_runs.subscribe();
        // The sender lives as long as `self`: the wait ends only by room.
        let _ = in_flight.wait_for(|n| *n < limit).await;
    }

    /// The settings for `app`'s config: `None` when hooks are off or
    /// unusable (said once per config).
    fn served(&self, app: &Arc<crate::app::App>, gateway_token: &str) -> Option<Arc<Served>> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = current.as_ref().filter(|c| Arc::ptr_eq(&c.app, app)) {
            return c.settings.clone();
        }
        let settings = match settings(&app.config.config.hooks, gateway_token) {
            Ok(Some(settings)) => {
                let main_key = app_agent_main_key(app);
                Some(Arc::new(Served {
                    token_credential: sha256_hex(settings.token.as_bytes()),
                    settings,
                    main_key,
                }))
            }
            Ok(None) => None,
            Err(err) => {
                tracing::warn!(%err, "hooks are off");
                None
            }
        };
        *current = Some(Current {
            app: app.clone(),
            settings: settings.clone(),
        });
        settings
    }
}

/// The main session's key under `app`'s config.
fn app_agent_main_key(app: &crate::app::App) -> Result<String, String> {
    Ok(app.sessions(None).resolve_key(None))
}

/// An error answer with extra headers.
fn error(status: StatusCode, message: &str) -> Response {
    ApiError::new(status, message).into_response()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Constant-time equality of two secrets, lengths included.
fn secrets_equal(given: &str, expected: &str) -> bool {
    let given = ring::digest::digest(&ring::digest::SHA256, given.as_bytes());
    let expected = ring::digest::digest(&ring::digest::SHA256, expected.as_bytes());
    discovery::tokens_equal(given.as_ref(), expected.as_ref())
}

/// The token a request carries: `Authorization: Bearer` (any case of
/// the scheme), else `X-OpenClaw-Token`, else `X-Almanac-Token`.
fn given_token(headers: &HeaderMap) -> Option<String> {
    let bearer = super::bearer(headers).map(str::to_string);
    bearer.or_else(|| {
        ["x-openclaw-token", "x-almanac-token"]
            .iter()
            .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
            .map(|v| v.trim().to_string())
    })
}

fn query_has_token(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            let name = name.replace('+', " ");
            percent_encoding::percent_decode_str(&name).decode_utf8_lossy() == "token"
        })
    })
}

/// Serves `req` when it is under the hooks path and hooks are on;
/// otherwise gives it back.
pub(crate) async fn handle(shared: &Arc<Shared>, req: Request) -> Result<Response, Request> {
    let app = shared.engine.app();
    let Some(served) = shared.webhooks.served(&app, &shared.token) else {
        return Err(req);
    };
    drop(app);
    let settings = &served.settings;
    let path = req.uri().path();
    let sub = if path == settings.base {
        ""
    } else if let Some(rest) = path
        .strip_prefix(&settings.base)
        .and_then(|r| r.strip_prefix('/'))
    {
        rest
    } else {
        return Err(req);
    };
    let sub = sub.trim_matches('/').to_string();
    Ok(serve(shared, &served, sub, req).await)
}

async fn serve(shared: &Arc<Shared>, served: &Served, sub: String, req: Request) -> Response {
    let settings = &served.settings;
    if query_has_token(req.uri().query()) {
        return error(StatusCode::BAD_REQUEST, QUERY_TOKEN);
    }
    if req.method() != axum::http::Method::POST {
        let mut response = error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{} is not allowed on hooks: use POST", req.method()),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let ip = super::client_ip(&req);
    let now = Instant::now();
    let token_ok =
        given_token(req.headers()).is_some_and(|token| secrets_equal(&token, &settings.token));
    let signed = if token_ok {
        Vec::new()
    } else {
        super::mappings::signed_for(&settings.mappings, &sub)
    };
    let refuse = || {
        if let Some(left) = shared.webhooks.lockout.locked(ip, now) {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests");
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
            return Some(response);
        }
        None
    };
    if !token_ok && signed.is_empty() {
        if let Some(locked) = refuse() {
            return locked;
        }
        shared.webhooks.lockout.failed(ip, now);
        return error(StatusCode::UNAUTHORIZED, "Unauthorized");
    }
    if sub.is_empty() {
        shared.webhooks.lockout.succeeded(ip);
        return error(
            StatusCode::NOT_FOUND,
            "no hook named: use <path>/wake, <path>/agent or a mapping",
        );
    }
    let (parts, body) = req.into_parts();
    // A signed mapping's body is read (within the limit) before its
    // signature is checked: the signature is over its bytes.
    let bytes = match read_body(body, &parts.headers, settings.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let credential = if token_ok {
        served.token_credential.clone()
    } else {
        let now_s = shared.host.now_ms() / 1000;
        let Some(signer) = signed
            .iter()
            .find(|m| super::mappings::signature_valid(m, &parts.headers, &bytes, now_s))
        else {
            if let Some(locked) = refuse() {
                return locked;
            }
            shared.webhooks.lockout.failed(ip, now);
            return error(StatusCode::UNAUTHORIZED, "Unauthorized");
        };
        let secret = signer.signature.as_ref().map_or("", |s| s.secret.as_str());
        sha256_hex(secret.as_bytes())
    };
    shared.webhooks.lockout.succeeded(ip);
    let payload = match parse_json(&bytes) {
        Ok(payload) => payload,
        Err(err) => return err.into_response(),
    };
    let idempotency = match idempotency_key(&parts.headers, &payload) {
        Ok(key) => key,
        Err(err) => return err.into_response(),
    };
    let answered = match sub.as_str() {
        "wake" if token_ok => wake(shared, served, &payload, &credential, idempotency).await,
        "agent" if token_ok => {
            super::webhook_runs::agent(shared, &payload, &credential, idempotency, false).await
        }
        _ => match super::mappings::find(&settings.mappings, &sub, &payload) {
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no hook `{sub}`: use wake, agent or a configured mapping"),
            )),
            // A signature opens only its own mapping.
            Some((_, m)) if !token_ok && m.signature.is_none() => {
                Err(ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized"))
            }
            Some((_, m)) => {
                let ctx = super::mappings::Context {
                    path: &sub,
                    now: shared.host.now_ts().to_string(),
                    headers: &parts.headers,
                    query: query_pairs(parts.uri.query()),
                    payload: &payload,
                };
                match super::mappings::action(m, &ctx) {
                    (true, body) => wake(shared, served, &body, &credential, idempotency).await,
                    (false, body) => {
                        super::webhook_runs::agent(shared, &body, &credential, idempotency, true)
                            .await
                    }
                }
            }
        },
    };
    match answered {
        Ok(value) => Json(value).into_response(),
        Err(err) => err.into_response(),
    }
}

/// The query string's decoded pairs (for a mapping's templates).
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |t: &str| {
        percent_encoding::percent_decode_str(&t.replace('+', " "))
            .decode_utf8_lossy()
            .to_string()
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The body as JSON: empty is `{}`; anything but an object is refused.
fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(bad("the body must be a JSON object")),
        Err(err) => Err(bad(format!("the body is not JSON: {err}"))),
    }
}

/// The body's bytes, within the size and time limits.
async fn read_body(
    body: axum::body::Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<axum::body::Bytes, Response> {
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            Json(json!({"ok": false, "error": "payload too large"})),
        )
            .into_response()
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let limited = http_body_util::Limited::new(body, limit);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ));
        }
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Ok(Err(err)) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the request body: {err}"),
            ));
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    Ok(bytes)
}

/// `Idempotency-Key`, else `X-OpenClaw-Idempotency-Key`, else the body's
/// `idempotencyKey`; trimmed, empty is none.
fn idempotency_key(headers: &HeaderMap, payload: &Value) -> Result<Option<String>, ApiError> {
    let from_header = ["idempotency-key", "x-openclaw-idempotency-key"]
        .iter()
        .find_map(|name| headers.get(*name))
        .map(|v| v.to_str().map(|s| s.trim().to_string()));
    let key = match from_header {
        Some(Ok(key)) => Some(key),
        Some(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "the idempotency key is not text",
            ));
        }
        None => payload["idempotencyKey"]
            .as_str()
            .map(|s| s.trim().to_string()),
    };
    match key {
        Some(key) if key.chars().count() > IDEMPOTENCY_KEY_MAX => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the idempotency key is longer than {IDEMPOTENCY_KEY_MAX} characters"),
        )),
        Some(key) if key.is_empty() => Ok(None),
        other => Ok(other),
    }
}

/// A wake mode a request gives in `field`: `now` (the default) or
/// `next-heartbeat`; anything else is refused.
pub(super) fn wake_mode_in(payload: &Value, field: &str) -> Result<&'static str, ApiError> {
    match &payload[field] {
        Value::Null => Ok("now"),
        Value::String(mode) => match mode.trim() {
            "" | "now" => Ok("now"),
            "next-heartbeat" => Ok("next-heartbeat"),
            other => Err(bad(format!(
                "{field} `{other}` is not one of now, next-heartbeat"
            ))),
        },
        _ => Err(bad(format!("{field} must be now or next-heartbeat"))),
    }
}

/// `POST <path>/wake`: `{text, mode?}` as an untrusted system event on
/// the main session; `now` (the default) wakes the heartbeat.
async fn wake(
    shared: &Arc<Shared>,
    served: &Served,
    payload: &Value,
    credential: &str,
    idempotency: Option<String>,
) -> Result<Value, ApiError> {
    let text = payload["text"].as_str().map(str::trim).unwrap_or("");
    if text.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "text required"));
    }
    let mode = wake_mode_in(payload, "mode")?;
    let session_key = served
        .main_key
        .clone()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    let replay = idempotency.map(|key| {
        let identity = json!({"pathKey": "wake", "text": text, "mode": mode});
        replay_key(credential, &identity, &key)
    });
    let record = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: "hook-wake".into(),
        session_key: session_key.clone(),
        text: text.to_string(),
        mode: mode.to_string().into(),
        trusted: false,
        hook: None,
        replay: None,
    };
    let wake = (mode == "now").then(|| GatewayEvent::Wake {
        reason: "hook:wake".into(),
        session_key,
    });
    accept_once(
        shared,
        replay,
        vec![record],
        wake,
        json!({"ok": true, "mode": mode}),
    )
    .await
}

pub(super) fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
