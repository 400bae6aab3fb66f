//! Webhooks: `POST <hooks.path>/wake` and the rest of `hooks.*`, served
//! beside the control API under their own token.
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
//!   reply), so a kill -9 right after it loses nothing. Hook events are
//!   `trusted: false`: the model sees them as `System (untrusted):`.
//! * An idempotency key (`Idempotency-Key`, `X-OpenClaw-Idempotency-Key`,
//!   body `idempotencyKey`) is remembered for [`REPLAY_TTL_MS`] (at most
//!   [`REPLAY_MAX`] keys): in the accepted intake record itself, written
//!   before the reply, and in `hooks-replay.json`, saved before the intake
//!   log that holds newer keys is emptied. A repeat within that time, also
//!   after a restart, gets the first answer and queues nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::intake::{HOOK_AGENT_KIND, Record};
use super::super::{Event, Shared};
use super::ApiError;
use crate::config::HooksConfig;
use crate::durable;
use crate::gateway_client::discovery;
use crate::trigger::{Source, Trigger, TurnRequest};

/// Failed authentications from one address within [`super::LOCKOUT_WINDOW`]
/// after which it is locked out.
const LOCKOUT_AFTER: usize = 20;
/// How long a body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an idempotency key is remembered.
const REPLAY_TTL_MS: i64 = 5 * 60 * 1000;
/// How many idempotency keys are remembered (the oldest go first).
const REPLAY_MAX: usize = 1000;
/// The longest idempotency key accepted.
const IDEMPOTENCY_KEY_MAX: usize = 256;

const QUERY_TOKEN: &str = "Hook token must be provided via Authorization: Bearer <token> or X-OpenClaw-Token header (query parameters are not allowed).";

/// Why the hooks settings cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookConfigError {
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
pub(crate) struct HookSettings {
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
) -> Result<Option<HookSettings>, HookConfigError> {
    if !config.enabled {
        return Ok(None);
    }
    let token = config.token.as_deref().map(str::trim).unwrap_or("");
    if token.is_empty() {
        return Err(HookConfigError::TokenMissing);
    }
    if discovery::tokens_equal(token.as_bytes(), gateway_token.trim().as_bytes()) {
        return Err(HookConfigError::SameToken);
    }
    let base = normalise_path(&config.path)?;
    let problems = super::mappings::problems(config);
    if !problems.is_empty() {
        return Err(HookConfigError::Mappings(problems.join("; ")));
    }
    Ok(Some(HookSettings {
        token: token.to_string(),
        base,
        max_body_bytes: usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX),
        mappings: super::mappings::all(config),
    }))
}

fn normalise_path(raw: &str) -> Result<String, HookConfigError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let base = if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    };
    let bad = |why| Err(HookConfigError::BadPath(raw.to_string(), why));
    if base == "/" {
        return bad("`/` would take every route");
    }
    if base.contains(['?', '#']) || base.split('/').any(|s| s == "." || s == "..") {
        return bad("use a plain path such as /hooks");
    }
    for taken in ["/v1", "/healthz", "/readyz"] {
        let inside = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
        if inside(&base, taken) || inside(taken, &base) {
            return bad("it overlaps the gateway's own routes (/v1, /healthz, /readyz)");
        }
    }
    Ok(base)
}

/// What the hooks keep between requests.
#[derive(Debug)]
pub(crate) struct HookState {
    /// The checked settings of the config in force, built once per
    /// config (a reload makes a new one) rather than per request.
    current: Mutex<Option<Current>>,
    lockout: super::Lockout,
    /// Loaded from its file at the first keyed request.
    replay: tokio::sync::Mutex<Option<ReplayCache>>,
    /// Hook runs started by this process (a run is started once, whether
    /// the feeder or the start-up pass finds it first).
    started: Mutex<std::collections::HashSet<String>>,
}

impl Default for HookState {
    fn default() -> Self {
        HookState {
            current: Mutex::default(),
            lockout: super::Lockout::new(LOCKOUT_AFTER),
            replay: tokio::sync::Mutex::default(),
            started: Mutex::default(),
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
    settings: HookSettings,
    /// `sha256(token)`: the token's share of an idempotency entry.
    token_credential: String,
    /// The main session's key (where wakes go).
    main_key: Result<String, String>,
}

impl HookState {
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
    let req = TurnRequest::default();
    crate::trigger::check_agent(&req).map_err(|e| e.to_string())?;
    Ok(app.sessions(req.agent.as_deref()).resolve_key(None))
}

/// Remembered answers by idempotency key: looked up by key, aged out
/// oldest first.
#[derive(Debug, Default)]
struct ReplayCache {
    by_key: HashMap<String, ReplayEntry>,
    /// `(at_ms, key)` in the order entries were remembered.
    order: VecDeque<(i64, String)>,
    /// Holds keys the saved file does not.
    dirty: bool,
}

/// `hooks-replay.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ReplayFile {
    entries: Vec<ReplayEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplayEntry {
    key: String,
    at_ms: i64,
    answer: Value,
}

impl ReplayCache {
    fn from_entries(mut entries: Vec<ReplayEntry>, now_ms: i64) -> ReplayCache {
        // Entries from a clock that has since gone back are dropped.
        entries.retain(|e| e.at_ms <= now_ms);
        entries.sort_by_key(|e| e.at_ms);
        let mut cache = ReplayCache::default();
        for entry in entries {
            cache.remember(entry);
        }
        cache.prune(now_ms);
        cache
    }

    /// The saved cache, and the keys the intake log holds (accepted
    /// since the cache was last saved). Marked dirty when the log added
    /// any.
    fn load_with_intake(
        path: &std::path::Path,
        intake: &std::path::Path,
        now_ms: i64,
    ) -> ReplayCache {
        let mut entries = ReplayCache::load_file(path);
        let saved = entries.len();
        if let Ok((records, _)) = durable::read_journal(intake, super::super::intake::parse) {
            for record in records {
                let Some(entry) = record.replay else { continue };
                let (Some(key), Some(answer)) = (entry["key"].as_str(), entry.get("answer")) else {
                    continue;
                };
                entries.push(ReplayEntry {
                    key: key.to_string(),
                    at_ms: record.ts,
                    answer: answer.clone(),
                });
            }
        }
        let from_log = entries.len() > saved;
        let mut cache = ReplayCache::from_entries(entries, now_ms);
        cache.dirty = from_log;
        cache
    }

    fn load_file(path: &std::path::Path) -> Vec<ReplayEntry> {
        let unreadable = |err: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %err, "hook replay cache unreadable; starting empty");
            Vec::new()
        };
        match durable::read_if_exists(path) {
            Ok(Some(bytes)) => match serde_json::from_slice::<ReplayFile>(&bytes) {
                Ok(file) => file.entries,
                Err(err) => unreadable(&err),
            },
            Ok(None) => Vec::new(),
            Err(err) => unreadable(&err),
        }
    }

    /// Adds `entry`; a key seen before keeps its first answer.
    fn remember(&mut self, entry: ReplayEntry) {
        if self.by_key.contains_key(&entry.key) {
            return;
        }
        self.order.push_back((entry.at_ms, entry.key.clone()));
        self.by_key.insert(entry.key.clone(), entry);
    }

    fn prune(&mut self, now_ms: i64) {
        while let Some((at_ms, key)) = self.order.front() {
            let expired = now_ms.saturating_sub(*at_ms) >= REPLAY_TTL_MS;
            if !expired && self.order.len() <= REPLAY_MAX {
                break;
            }
            self.by_key.remove(key);
            self.order.pop_front();
        }
    }

    fn get(&self, key: &str, now_ms: i64) -> Option<&Value> {
        self.by_key
            .get(key)
            .filter(|e| now_ms.saturating_sub(e.at_ms) < REPLAY_TTL_MS)
            .map(|e| &e.answer)
    }

    fn insert(&mut self, key: String, answer: Value, now_ms: i64) {
        self.remember(ReplayEntry {
            key,
            at_ms: now_ms,
            answer,
        });
        self.dirty = true;
        self.prune(now_ms);
    }

    fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
        self.order.retain(|(_, k)| k != key);
    }

    fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let entries = self
            .order
            .iter()
            .filter_map(|(_, key)| self.by_key.get(key).cloned())
            .collect();
        serde_json::to_vec(&ReplayFile { entries })
    }
}

impl HookState {
    /// Saves the idempotency keys not yet in `hooks-replay.json`, then
    /// runs `then` with no key accepted in between: the intake log, which
    /// holds every key since the last save, may be emptied there.
    /// Blocking (on the blocking boundary).
    pub(crate) fn save_replay_then<T>(
        &self,
        gateway_dir: &std::path::Path,
        now_ms: i64,
        then: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let mut cache = self.replay.blocking_lock();
        let path = gateway_dir.join(REPLAY_FILE);
        let loaded = cache.get_or_insert_with(|| {
            ReplayCache::load_with_intake(&path, &gateway_dir.join("intake.jsonl"), now_ms)
        });
        if loaded.dirty {
            loaded.prune(now_ms);
            let bytes = loaded.to_json().map_err(std::io::Error::other)?;
            durable::atomic_replace(&path, &bytes, durable::PRIVATE_FILE_MODE)?;
            loaded.dirty = false;
        }
        then()
    }
}

const REPLAY_FILE: &str = "hooks-replay.json";

/// An error answer with extra headers.
fn error(status: StatusCode, message: &str) -> Response {
    ApiError::new(status, message).into_response()
}

fn sha256_hex(bytes: &[u8]) -> String {
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
    let Some(served) = shared.hooks.served(&app, &shared.token) else {
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
        if let Some(left) = shared.hooks.lockout.locked(ip, now) {
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
        shared.hooks.lockout.failed(ip, now);
        return error(StatusCode::UNAUTHORIZED, "Unauthorized");
    }
    if sub.is_empty() {
        shared.hooks.lockout.succeeded(ip);
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
            shared.hooks.lockout.failed(ip, now);
            return error(StatusCode::UNAUTHORIZED, "Unauthorized");
        };
        let secret = signer.signature.as_ref().map_or("", |s| s.secret.as_str());
        sha256_hex(secret.as_bytes())
    };
    shared.hooks.lockout.succeeded(ip);
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
        "agent" if token_ok => agent(shared, &payload, &credential, idempotency, false).await,
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
                    (false, body) => agent(shared, &body, &credential, idempotency, true).await,
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
fn hook_mode(payload: &Value, field: &str) -> Result<&'static str, ApiError> {
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
    let mode = hook_mode(payload, "mode")?;
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
    let wake = (mode == "now").then(|| Event::Wake {
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

/// The channels an `/agent` run may deliver to: `last` (the main
/// session's last route, else the outbox) and `outbox`.
const CHANNELS: &[&str] = &["last", "outbox"];
/// How long a hook's run may take when it does not say.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// What a webhook's agent run asks for besides its message: kept in its
/// intake record and its task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookRun {
    pub run_id: String,
    pub name: String,
    pub wake_mode: String,
    pub deliver: bool,
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// The mapping (config, the user's) lets its message reach the model
    /// without the untrusted-content markers; never from a request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unsafe_external_content: bool,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// An optional string field: absent or null is `None`; anything else
/// must be a string.
fn optional_text(payload: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match &payload[field] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_string())),
        _ => Err(bad(format!("{field} must be a string"))),
    }
}

/// The session key of an `/agent` run, under the `hooks.*` policy.
fn run_session_key(
    config: &HooksConfig,
    asked: Option<String>,
    from_mapping: bool,
) -> Result<String, ApiError> {
    let asked = asked.filter(|k| !k.is_empty());
    // A mapping's own key (static or templated) needs no opt-in; the
    // prefixes still apply.
    if asked.is_some() && !from_mapping && !config.allow_request_session_key {
        return Err(bad(
            "sessionKey is disabled for external /hooks/agent payloads; set hooks.allowRequestSessionKey=true to enable",
        ));
    }
    let key = asked
        .or_else(|| {
            config
                .default_session_key
                .as_deref()
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("hook:{}", uuid::Uuid::new_v4()));
    if let Some(prefixes) = &config.allowed_session_key_prefixes {
        let lower = key.to_lowercase();
        let prefixes: Vec<String> = prefixes.iter().map(|p| p.trim().to_lowercase()).collect();
        if !prefixes.is_empty() && !prefixes.iter().any(|p| lower.starts_with(p.as_str())) {
            return Err(bad(format!(
                "sessionKey must start with one of: {}",
                prefixes.join(", ")
            )));
        }
    }
    Ok(key)
}

/// Whether `hooks.allowedAgentIds` admits `id` (unset or `*`: any).
fn agent_allowed(config: &HooksConfig, id: &str) -> bool {
    match &config.allowed_agent_ids {
        None => true,
        Some(ids) => ids
            .iter()
            .map(|i| i.trim())
            .any(|i| i == "*" || i.eq_ignore_ascii_case(id)),
    }
}

/// `POST <path>/agent`: an isolated agent run, accepted into the intake
/// log (`{ok, runId}`); it runs once the feeder has recorded its task.
async fn agent(
    shared: &Arc<Shared>,
    payload: &Value,
    credential: &str,
    idempotency: Option<String>,
    from_mapping: bool,
) -> Result<Value, ApiError> {
    let app = shared.engine.app();
    let config = &app.config.config.hooks;
    let message = payload["message"].as_str().map(str::trim).unwrap_or("");
    if message.is_empty() {
        return Err(bad("message required"));
    }
    let name = optional_text(payload, "name")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Hook".to_string());
    // almanac runs one agent: an explicit id is checked against the
    // allowlist, and any id but `main` is refused.
    if let Some(id) = optional_text(payload, "agentId")?.filter(|i| !i.is_empty()) {
        let id = crate::session::key::normalize_id(&id, crate::trigger::AGENT_ID);
        if id != crate::trigger::AGENT_ID || !agent_allowed(config, &id) {
            return Err(bad("agentId is not allowed by hooks.allowedAgentIds"));
        }
    }
    let asked_key = optional_text(payload, "sessionKey")?.filter(|k| !k.is_empty());
    let session_key = run_session_key(config, asked_key.clone(), from_mapping)?;
    let wake_mode = hook_mode(payload, "wakeMode")?;
    let deliver = payload["deliver"] != Value::Bool(false);
    let channel = optional_text(payload, "channel")?
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "last".to_string());
    if !CHANNELS.contains(&channel.as_str()) {
        return Err(bad(format!("channel must be {}", CHANNELS.join("|"))));
    }
    let to = optional_text(payload, "to")?.filter(|t| !t.is_empty());
    let model = match &payload["model"] {
        Value::Null => None,
        Value::String(m) if !m.trim().is_empty() => Some(m.trim().to_string()),
        _ => return Err(bad("model required")),
    };
    let thinking = optional_text(payload, "thinking")?.filter(|t| !t.is_empty());
    if let Some(level) = &thinking
        && !crate::cron::job::THINKING_LEVELS.contains(&level.as_str())
    {
        return Err(bad(format!(
            "thinking must be one of {}",
            crate::cron::job::THINKING_LEVELS.join("|")
        )));
    }
    let timeout_seconds = match &payload["timeoutSeconds"] {
        Value::Null => None,
        Value::Number(n) if n.as_f64().is_some_and(|f| f >= 1.0) => {
            Some(n.as_f64().unwrap_or(1.0).floor() as u64)
        }
        _ => return Err(bad("timeoutSeconds must be a number of seconds above 0")),
    };
    let lane = shared
        .engine
        .session_key(&TurnRequest {
            session_key: Some(session_key.clone()),
            ..TurnRequest::default()
        })
        .map_err(|e| bad(e.to_string()))?;
    let replay = idempotency.map(|key| {
        // What the sender gave: a key almanac generated for this request
        // (`hook:<uuid>`) would make every retry a request of its own.
        let identity = json!({
            "pathKey": "agent", "agentId": crate::trigger::AGENT_ID,
            "sessionKey": asked_key, "message": message, "name": name,
            "wakeMode": wake_mode, "deliver": deliver, "channel": channel, "to": to,
            "model": model, "thinking": thinking, "timeoutSeconds": timeout_seconds,
        });
        replay_key(credential, &identity, &key)
    });
    let run = HookRun {
        run_id: uuid::Uuid::new_v4().to_string(),
        name,
        wake_mode: wake_mode.to_string(),
        deliver,
        channel,
        to,
        model,
        thinking,
        timeout_seconds,
        // Only a mapping, which the user configured, may say so.
        allow_unsafe_external_content: from_mapping
            && payload["allowUnsafeExternalContent"] == Value::Bool(true),
    };
    let record = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: HOOK_AGENT_KIND.into(),
        session_key: lane,
        text: message.to_string(),
        mode: wake_mode.to_string().into(),
        trusted: false,
        hook: Some(serde_json::to_value(&run).map_err(internal)?),
        replay: None,
    };
    let answer = json!({"ok": true, "runId": run.run_id});
    accept_once(shared, replay, vec![record], None, answer).await
}

/// Records the task of a webhook's run (`runtime: cli`, kind `hook`,
/// retried after a restart); `None` when it is recorded already (the
/// record was fed again after a crash) or unreadable. Blocking.
pub(crate) fn record_run(
    shared: &Shared,
    record: &Record,
    now_ms: i64,
) -> anyhow::Result<Option<crate::tasks::Task>> {
    let Some(run) = record
        .hook
        .clone()
        .and_then(|v| serde_json::from_value::<HookRun>(v).ok())
    else {
        tracing::warn!(
            seq = record.seq,
            "a hook run record without its settings; skipped"
        );
        return Ok(None);
    };
    if shared.tasks.with(|l| l.get(&run.run_id))?.is_some() {
        return Ok(None);
    }
    let mut new = crate::tasks::NewTask::new(
        crate::tasks::Runtime::Cli,
        record.session_key.clone(),
        super::super::tasks::preview(&record.text),
    );
    new.task_kind = Some("hook".to_string());
    new.run_id = Some(run.run_id.clone());
    new.label = Some(run.name.clone());
    new.requester_session_key = record.session_key.clone();
    new.agent_id = Some(crate::trigger::AGENT_ID.to_string());
    new.lane_key = Some(record.session_key.clone());
    new.request = Some(serde_json::to_value(record)?);
    // Its answer is delivered, or told to the main session: a delivery
    // the task follows.
    new.notify_policy = crate::tasks::vocab::NotifyPolicy::DoneOnly;
    new.delivery_status = crate::tasks::DeliveryStatus::Pending;
    Ok(Some(shared.tasks.with(|l| l.create(new, now_ms))?))
}

/// Runs a recorded webhook run in the background: the turn in its own
/// session, its task ended, its answer delivered (or, when not
/// delivered, told to the main session as an untrusted event).
pub(crate) fn start_run(shared: &Arc<Shared>, task: crate::tasks::Task, record: Record) {
    let fresh = shared
        .hooks
        .started
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(task.task_id.clone());
    if !fresh {
        return;
    }
    let running = shared.clone();
    shared.turns.spawn(async move {
        run_hook(&running, task, record).await;
    });
}

/// The kind of the intake record telling the main session how a run went.
const HOOK_RESULT_KIND: &str = "hook-result";

/// Starts the hook runs the ledger holds queued: recorded before a
/// crash but never started, or queued again because the gateway running
/// them stopped. Their acceptance was acknowledged, so they run.
pub(crate) async fn resume_runs(shared: &Arc<Shared>) {
    let listing = shared.clone();
    let queued = shared
        .engine
        .blocking(move || {
            let filter = crate::tasks::TaskFilter {
                status: Some(crate::tasks::Status::Queued),
                runtime: Some(crate::tasks::Runtime::Cli),
            };
            listing.tasks.with(|l| l.list(filter, None))
        })
        .await;
    let tasks = match queued {
        Ok(Ok(tasks)) => tasks,
        Ok(Err(err)) => {
            tracing::error!(%err, "cannot list queued hook runs");
            return;
        }
        Err(err) => {
            tracing::error!(%err, "cannot list queued hook runs");
            return;
        }
    };
    let tasks: Vec<_> = tasks
        .into_iter()
        .filter(|t| t.task_kind.as_deref() == Some("hook"))
        .collect();
    if tasks.is_empty() {
        return;
    }
    // A run whose answer went out before a crash cut it off is only
    // finished: running it again would deliver it twice.
    let looking = shared.clone();
    let answered = shared
        .engine
        .blocking(move || answered_runs(&looking))
        .await
        .and_then(|r| r.map_err(anyhow::Error::from))
        .unwrap_or_else(|err| {
            tracing::warn!(%err, "cannot look for the answers of hook runs cut off");
            std::collections::HashSet::new()
        });
    for task in tasks {
        if answered.contains(&task.task_id) {
            let end = crate::tasks::Terminal {
                terminal_summary: Some("answered before the gateway stopped".into()),
                ..crate::tasks::Terminal::status(crate::tasks::TerminalStatus::Succeeded)
            };
            finish(shared, &task.task_id, end).await;
            continue;
        }
        let record = task
            .request
            .clone()
            .and_then(|r| serde_json::from_value::<Record>(r).ok());
        match record {
            Some(record) => start_run(shared, task, record),
            None => tracing::warn!(task = %task.task_id, "a queued hook run without its request"),
        }
    }
}

/// The hook runs whose answer, or notice to the main session, is already
/// out: in the outbox, the deliveries journal or the intake log.
fn answered_runs(shared: &Shared) -> std::io::Result<std::collections::HashSet<String>> {
    let mut answered = shared.deliverer.tasks_with_results()?;
    let (records, _) =
        durable::read_journal(shared.intake.journal().path(), super::super::intake::parse)?;
    answered.extend(records.into_iter().filter_map(|r| {
        (r.kind == HOOK_RESULT_KIND)
            .then(|| r.hook?["taskId"].as_str().map(str::to_string))
            .flatten()
    }));
    Ok(answered)
}

async fn run_hook(shared: &Arc<Shared>, task: crate::tasks::Task, record: Record) {
    let Some(run) = record
        .hook
        .clone()
        .and_then(|v| serde_json::from_value::<HookRun>(v).ok())
    else {
        return;
    };
    let lane = record.session_key.clone();
    // The payload reaches the model only as marked, untrusted data.
    let app = shared.engine.app();
    let received = jiff::Timestamp::from_millisecond(record.ts)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let time = almanac_heartbeat::prompt::time_text(
        &shared.host.now_ts().to_zoned_datetime(app.user_time_zone()),
    );
    let body = if run.allow_unsafe_external_content {
        format!(
            "[hook:{} {}] {}",
            run.run_id,
            super::external::one_line(&run.name, super::external::NAME_MAX_CHARS),
            record.text
        )
    } else {
        super::external::wrap(&record.text, "Webhook", &run.name, &run.run_id, &received)
    };
    let message = almanac_heartbeat::prompt::with_current_time(body, &time);
    drop(app);
    // The reply is shown as the channel it is delivered on shows replies
    // (`channels.<channel>.heartbeat.showOk`).
    let channel = if run.deliver {
        delivery_target(shared, &run.channel).await.channel()
    } else {
        "hook"
    };
    let request = TurnRequest {
        message,
        session_key: Some(lane.clone()),
        agent: Some(crate::trigger::AGENT_ID.to_string()),
        model: run.model.clone(),
        heartbeat: None,
        channel: Some(channel.to_string()),
        shape: crate::trigger::TurnShape {
            thinking: run
                .thinking
                .as_deref()
                .and_then(crate::trigger::Thinking::parse),
            // Its header names the run: a run started again after a crash
            // finds the message its first start wrote.
            resume_marker: Some(if run.allow_unsafe_external_content {
                format!("[hook:{} ", run.run_id)
            } else {
                format!("| Job ID: {} |", run.run_id)
            }),
            ..crate::trigger::TurnShape::default()
        },
    };
    let limit = run.timeout_seconds.map_or(RUN_TIMEOUT, Duration::from_secs);
    let trigger = Trigger {
        source: Source::Webhook,
        request,
        timeout: Some(limit),
        task_id: Some(task.task_id.clone()),
    };
    let result = match super::super::route::route(shared, trigger).await {
        Err(err) if err.is::<super::super::route::TimedOut>() => Err(anyhow::anyhow!(
            "hook run timed out after {} s",
            limit.as_secs()
        )),
        result => result,
    };
    // The gateway is stopping: a webhook's run was acknowledged to its
    // sender, so it is not given up. Its task stays as it is (queued, or
    // running under this start's lease) and the next start runs it again,
    // as after a crash.
    let stopped = result
        .as_ref()
        .err()
        .is_some_and(|e| e.downcast_ref::<crate::engine::Cancelled>().is_some());
    if stopped && shared.turns_cancel.is_cancelled() && !cancel_asked(shared, &task.task_id).await {
        tracing::info!(task = %task.task_id, "webhook run left for the next start");
        return;
    }
    // The answer is delivered (or told to the main session) before the
    // task is finished: a crash between the two leaves the task to run
    // again, and the next start finds the delivery and only finishes it
    // ([`resume_runs`]); finishing first could lose the answer.
    tell(shared, &task, &run, &lane, &result).await;
    let end = super::super::tasks::terminal_of(&result);
    finish(shared, &task.task_id, end).await;
}

/// Whether someone asked to cancel task `id` (`tasks cancel`), as
/// against the gateway stopping.
async fn cancel_asked(shared: &Arc<Shared>, id: &str) -> bool {
    let asking = shared.clone();
    let id = id.to_string();
    shared
        .engine
        .blocking(move || asking.tasks.with(|l| l.get(&id)))
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
        .is_some_and(|t| t.cancel_requested_at.is_some() || t.status.is_terminal())
}

/// Records how a hook run ended, and says so on the bus.
async fn finish(shared: &Arc<Shared>, task_id: &str, end: crate::tasks::Terminal) {
    let status = crate::tasks::Status::from(end.status).as_str().to_string();
    let finishing = shared.clone();
    let id = task_id.to_string();
    let recorded = shared
        .engine
        .blocking(move || {
            let now = finishing.host.now_ms();
            finishing.tasks.finish(&id, end, now)
        })
        .await;
    if !matches!(recorded, Ok(Ok(()))) {
        tracing::error!(task = %task_id, "cannot record how a hook run ended");
    }
    let _ = shared.bus.send(Event::TaskChanged {
        task_id: task_id.to_string(),
        status,
    });
}

/// Delivers a run's answer, or tells the main session how it went (not
/// delivered, or failed) as an untrusted event.
async fn tell(
    shared: &Arc<Shared>,
    task: &crate::tasks::Task,
    run: &HookRun,
    lane: &str,
    result: &anyhow::Result<crate::engine::turn::TurnReport>,
) {
    let name = super::external::one_line(&run.name, super::external::NAME_MAX_CHARS);
    // What the task's delivery comes to when the main session is told
    // instead: a failed delivery stays failed.
    let mut told = crate::tasks::DeliveryStatus::SessionQueued;
    let notice = match result {
        Ok(report) => {
            let reply = report.outcome.reply.trim().to_string();
            if run.deliver && !reply.is_empty() && !report.outcome.silent {
                let item = crate::delivery::Item {
                    source: crate::delivery::Source::Hook,
                    session_key: lane.to_string(),
                    agent_id: crate::trigger::AGENT_ID.to_string(),
                    text: reply,
                    task_id: Some(task.task_id.clone()),
                    to: run.to.clone(),
                };
                let target = delivery_target(shared, &run.channel).await;
                match shared.deliverer.deliver(item, &target).await {
                    Ok(_) => return,
                    Err(err) => {
                        told = crate::tasks::DeliveryStatus::Failed;
                        format!("Hook {name} (error): delivery failed: {err}")
                    }
                }
            } else if reply.is_empty() || report.outcome.silent {
                set_delivery(
                    shared,
                    &task.task_id,
                    crate::tasks::DeliveryStatus::NotApplicable,
                )
                .await;
                return;
            } else {
                format!("Hook {name}: {}", super::super::tasks::preview(&reply))
            }
        }
        Err(err) => format!("Hook {name} (error): {err:#}"),
    };
    let main = match shared.engine.session_key(&TurnRequest::default()) {
        Ok(key) => key,
        Err(_) => return,
    };
    let event = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: HOOK_RESULT_KIND.into(),
        session_key: main.clone(),
        text: notice,
        mode: run.wake_mode.clone().into(),
        trusted: false,
        // Which run it tells of, for the look at the next start.
        hook: Some(json!({"taskId": task.task_id})),
        replay: None,
    };
    if let Err(err) = shared.intake.accept(event) {
        tracing::error!(%err, "cannot queue a hook run's result");
        set_delivery(shared, &task.task_id, crate::tasks::DeliveryStatus::Failed).await;
        return;
    }
    set_delivery(shared, &task.task_id, told).await;
    if run.wake_mode == "now" {
        let _ = shared.bus.send(Event::Wake {
            reason: format!("hook:{}", run.run_id),
            session_key: main,
        });
    }
}

/// Records how the delivery of task `id`'s result stands.
async fn set_delivery(shared: &Arc<Shared>, id: &str, status: crate::tasks::DeliveryStatus) {
    let book = shared.clone();
    let id = id.to_string();
    let recorded = shared
        .engine
        .blocking(move || {
            let now = book.host.now_ms();
            book.tasks.with(|l| l.set_delivery(&id, status, now))
        })
        .await;
    if !matches!(recorded, Ok(Ok(_))) {
        tracing::warn!("a hook run's delivery was not recorded in its task");
    }
}

/// Where a run's answer goes: the outbox, or for `last` the main
/// session's last route (a heartbeat webhook it was last delivered to),
/// else the outbox.
async fn delivery_target(shared: &Arc<Shared>, channel: &str) -> crate::delivery::Target {
    if channel != "last" {
        return crate::delivery::Target::Outbox;
    }
    let app = shared.engine.app();
    shared
        .engine
        .blocking(move || {
            let route = crate::app::heartbeat::last_route(&app);
            super::super::heartbeat::delivery_target(&app, &route)
        })
        .await
        .unwrap_or(crate::delivery::Target::Outbox)
}

/// `sha256(credential):sha256(what was asked):sha256(key)`: the same key
/// for another request, or from another caller, is another entry.
fn replay_key(credential: &str, identity: &Value, key: &str) -> String {
    format!(
        "{credential}:{}:{}",
        sha256_hex(identity.to_string().as_bytes()),
        sha256_hex(key.as_bytes())
    )
}

/// Writes `records` to the intake log and remembers `answer` under
/// `replay` before answering; a remembered key gets its first answer and
/// writes nothing.
async fn accept_once(
    shared: &Arc<Shared>,
    replay: Option<String>,
    mut records: Vec<Record>,
    wake: Option<Event>,
    answer: Value,
) -> Result<Value, ApiError> {
    // One keyed acceptance at a time, so two copies of one request
    // cannot both miss the cache.
    let mut cache = match &replay {
        Some(_) => Some(shared.hooks.replay.lock().await),
        None => None,
    };
    let now_ms = shared.host.now_ms();
    if let (Some(key), Some(cache)) = (&replay, cache.as_mut()) {
        // Loaded once, at the first keyed request.
        let loaded = cache.get_or_insert_with(|| {
            let dir = shared.engine.app().paths.gateway_dir();
            ReplayCache::load_with_intake(&dir.join(REPLAY_FILE), &dir.join("intake.jsonl"), now_ms)
        });
        if let Some(first) = loaded.get(key, now_ms) {
            return Ok(first.clone());
        }
        // Remembered before the record is written, so the feeder cannot
        // save the cache and empty the log between the two.
        loaded.insert(key.clone(), answer.clone(), now_ms);
    }
    if let (Some(key), Some(first)) = (&replay, records.first_mut()) {
        first.replay = Some(json!({"key": key, "answer": answer}));
    }
    // One write(2) into the page cache, inline, as the control API does.
    // The key is durable with its record; `hooks-replay.json` is brought
    // up to date before the log is emptied.
    if let Err(err) = shared.intake.accept_all(&mut records) {
        if let (Some(key), Some(Some(loaded))) = (&replay, cache.as_mut().map(|c| c.as_mut())) {
            loaded.forget(key);
        }
        return Err(ApiError::intake(err));
    }
    drop(cache);
    if let Some(wake) = wake {
        let _ = shared.bus.send(wake);
    }
    Ok(answer)
}

fn internal(err: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %err, "hook request failed");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::super::LOCKOUT_WINDOW;
    use super::*;

    #[test]
    fn paths_are_normalised_and_never_take_the_gateways_own_routes() {
        for (raw, want) in [
            ("/hooks", Some("/hooks")),
            ("hooks/", Some("/hooks")),
            (" /in/hooks// ", Some("/in/hooks")),
            ("/v1x", Some("/v1x")),
            ("/", None),
            ("", None),
            ("/v1", None),
            ("/v1/hooks", None),
            ("/healthz", None),
            ("/readyz/x", None),
            ("/a/../v1", None),
        ] {
            assert_eq!(normalise_path(raw).ok().as_deref(), want, "{raw:?}");
        }
    }

    #[test]
    fn hooks_need_their_own_token() {
        let mut config = HooksConfig {
            enabled: true,
            ..HooksConfig::default()
        };
        assert!(matches!(
            settings(&config, "gw"),
            Err(HookConfigError::TokenMissing)
        ));
        config.token = Some("gw".into());
        assert!(matches!(
            settings(&config, "gw"),
            Err(HookConfigError::SameToken)
        ));
        config.token = Some("hook".into());
        let ok = settings(&config, "gw").unwrap().unwrap();
        assert_eq!((ok.base.as_str(), ok.max_body_bytes), ("/hooks", 262_144));
        config.enabled = false;
        assert!(settings(&config, "gw").unwrap().is_none());
    }

    #[test]
    fn tokens_come_from_bearer_or_the_token_headers_and_never_the_query() {
        let mut headers = HeaderMap::new();
        headers.insert("x-almanac-token", HeaderValue::from_static("b"));
        assert_eq!(given_token(&headers).as_deref(), Some("b"));
        headers.insert("x-openclaw-token", HeaderValue::from_static("a"));
        assert_eq!(given_token(&headers).as_deref(), Some("a"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bEaReR  t "),
        );
        assert_eq!(given_token(&headers).as_deref(), Some("t"));
        assert!(query_has_token(Some("a=1&token=x")));
        assert!(query_has_token(Some("%74oken=x")));
        assert!(!query_has_token(Some("tokens=x")));
        assert!(!query_has_token(None));
        assert!(secrets_equal("abc", "abc"));
        assert!(!secrets_equal("abc", "abcd"));
    }

    #[test]
    fn the_lockout_counts_twenty_failures_in_a_sliding_minute() {
        let lockout = super::super::Lockout::new(LOCKOUT_AFTER);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let start = Instant::now();
        // 19 failures spread over the minute, then the oldest leave it.
        for i in 0..19 {
            lockout.failed(ip, start + Duration::from_secs(i));
        }
        let later = start + Duration::from_secs(61);
        lockout.failed(ip, later);
        assert!(
            lockout.locked(ip, later).is_none(),
            "two fell out of the window"
        );
        lockout.failed(ip, later);
        lockout.failed(ip, later);
        assert_eq!(lockout.locked(ip, later), Some(LOCKOUT_WINDOW));
        assert!(lockout.locked(ip, later + LOCKOUT_WINDOW).is_none());
        lockout.succeeded(ip);
        assert!(lockout.locked(ip, later).is_none());
    }

    /// A gateway directory whose intake log holds one wake accepted at
    /// `at` under idempotency key `k`, answered `answer`.
    fn keyed_wake_logged(at: i64, answer: Value) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let intake = super::super::super::intake::Intake::open(dir.path()).unwrap();
        intake
            .accept(Record {
                seq: 0,
                ts: at,
                kind: "hook-wake".into(),
                session_key: "agent:main:main".into(),
                text: "deploy".into(),
                mode: "now".into(),
                trusted: false,
                hook: None,
                replay: Some(json!({"key": "k", "answer": answer})),
            })
            .unwrap();
        dir
    }

    #[test]
    fn a_key_written_with_its_record_survives_a_crash_before_the_cache_was_saved() {
        let at = 1_796_000_000_000;
        let dir = keyed_wake_logged(at, json!({"ok": true, "mode": "now"}));
        let cache_file = dir.path().join("hooks-replay.json");
        let log = dir.path().join("intake.jsonl");
        let cache = ReplayCache::load_with_intake(&cache_file, &log, at + 1000);
        assert_eq!(
            cache.get("k", at + 1000),
            Some(&json!({"ok": true, "mode": "now"}))
        );
        let expired = ReplayCache::load_with_intake(&cache_file, &log, at + REPLAY_TTL_MS);
        assert_eq!(expired.get("k", at + REPLAY_TTL_MS), None);
    }

    #[test]
    fn keys_held_only_by_the_log_are_saved_before_the_log_is_emptied() {
        let at = 1_796_000_000_000;
        let dir = keyed_wake_logged(at, json!({"ok": true}));
        let log = dir.path().join("intake.jsonl");
        // Nothing loaded the cache in this process (as after a restart).
        let state = HookState::default();
        state
            .save_replay_then(dir.path(), at + 1000, || std::fs::write(&log, ""))
            .unwrap();
        assert!(std::fs::read(&log).unwrap().is_empty());
        let cache = ReplayCache::load_with_intake(&dir.path().join(REPLAY_FILE), &log, at + 2000);
        assert_eq!(cache.get("k", at + 2000), Some(&json!({"ok": true})));
        assert!(!cache.dirty, "the saved file holds every key");
    }

    #[test]
    fn replay_entries_expire_after_five_minutes_and_stay_under_the_cap() {
        let mut cache = ReplayCache::default();
        cache.insert("k".into(), json!(1), 0);
        assert_eq!(cache.get("k", REPLAY_TTL_MS - 1), Some(&json!(1)));
        assert_eq!(cache.get("k", REPLAY_TTL_MS), None);
        for i in 0..(REPLAY_MAX + 5) {
            cache.insert(format!("n{i}"), json!(i), 10);
        }
        assert_eq!(cache.by_key.len(), REPLAY_MAX);
        assert_eq!(cache.get("n0", 10), None);
        assert_eq!(
            cache.get(&format!("n{}", REPLAY_MAX + 4), 10),
            Some(&json!(REPLAY_MAX + 4))
        );
    }
}
