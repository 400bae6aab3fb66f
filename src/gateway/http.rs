//! The gateway's HTTP surface: one route table, the token check with its
//! lockout, and JSON errors.
//!
//! | routes | auth | bad-token lockout |
//! |---|---|---|
//! | `/v1/*` control API (`/v1/outbox/stream`: server-sent events) | gateway token (`Authorization: Bearer`) | yes |
//! | `/mcp` MCP over streamable HTTP ([`mcp`]) | gateway token | yes |
//! | `/healthz`, `/readyz` | none | never |
//! | `<hooks.path>/*` webhooks ([`webhooks`]), when `hooks.enabled` | hook token, or a mapping's signature | yes (its own) |
//!
//! Every error is `{ok: false, error}` with a 4xx/5xx status: malformed
//! JSON, a body over [`BODY_LIMIT`], a missing or wrong token, an unknown
//! route or method.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures_util::future::Either;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::intake::{Record, SYSTEM_EVENT_KIND};
use super::{GatewayEvent, Shared, route};
use crate::engine::Cancelled;
use crate::gateway_client::discovery;
use crate::trigger::{Source, Trigger, TurnRequest};

/// Largest request body accepted.
pub(crate) const BODY_LIMIT: usize = 1024 * 1024;
/// Failed authentications from one address within a window before it is
/// locked out of the control API.
const LOCKOUT_AFTER: usize = 10;
/// The sliding window failures are counted in, and how long a lockout
/// lasts.
pub(crate) const LOCKOUT_WINDOW: Duration = Duration::from_secs(60);
/// How long a turn waits for accepted events to reach its queue.
const FEED_WAIT: Duration = Duration::from_secs(2);

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn internal(err: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %err, "request failed");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
    }

    /// A record the intake log did not take: 503 while the log cannot be
    /// synced (the journal logs that once, `gateway status` shows why;
    /// not logged per request), else 500.
    pub(crate) fn intake(err: std::io::Error) -> ApiError {
        if crate::durable::NotSynced::of(&err).is_some() {
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, INTAKE_NOT_SYNCED);
        }
        ApiError::internal(err)
    }
}

/// The error of a request refused because the intake log cannot be
/// synced (where the log lies and why is for `gateway status`, not for
/// whoever sent the request).
pub(crate) const INTAKE_NOT_SYNCED: &str = "the gateway's intake log cannot be synced to the disk: nothing is accepted until a sync succeeds; try again later";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"ok": false, "error": self.message})),
        )
            .into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

/// The route table. The control API's paths are written out whole (a
/// nested router would rebuild every request's URI) and gated by
/// [`RequireToken`], which also guards its unknown paths.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let control = Router::new()
        .route("/v1/system/event", post(system_event))
        .route("/v1/system/heartbeat/run", post(heartbeat_run))
        .route("/v1/cron/jobs/{id}/run", post(cron_run))
        .route("/v1/cron/reload", post(cron_reload))
        .route("/v1/system/heartbeat/enable", post(heartbeat_enable))
        .route("/v1/system/heartbeat/disable", post(heartbeat_disable))
        .route("/v1/agent", post(agent))
        .route("/v1/memory/search", post(memory_search))
        .route("/v1/sessions", get(sessions))
        .route("/v1/status", get(status))
        .route("/v1/tasks", get(tasks::list))
        .route("/v1/tasks/{id}", get(tasks::show))
        .route("/v1/tasks/{id}/cancel", post(tasks::cancel))
        .route("/v1/subagents", get(subagents::list))
        .route("/v1/subagents/{target}", get(subagents::info))
        .route("/v1/subagents/{target}/log", get(subagents::log))
        .route("/v1/subagents/{target}/kill", post(subagents::kill))
        .route("/v1/subagents/{target}/steer", post(subagents::steer))
        .route("/v1/outbox/stream", get(outbox::stream))
        .route("/v1/mcp/call", post(mcp::call))
        .route_service(crate::mcp::HTTP_PATH, mcp::service(&shared))
        .route("/v1", any(not_found))
        .route("/v1/{*rest}", any(not_found))
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(RequireToken(shared.clone()));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(control)
        .fallback(hooks_or_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// The path as the client sent it (a nested router sees less of it).
fn full_path(req: &Request) -> String {
    req.extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or_else(|| req.uri().path().to_string(), |u| u.0.path().to_string())
}

/// The hooks live at a configured path (read per request, so a config
/// reload moves them); anything else is unknown.
async fn hooks_or_not_found(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    match webhooks::handle(&shared, req).await {
        Ok(response) => response,
        Err(req) => not_found(req).await.into_response(),
    }
}

/// The address a request came from (loopback when unknown).
pub(crate) fn client_ip(req: &Request) -> IpAddr {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route {} {}", req.method(), full_path(&req)),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {}", req.method(), full_path(&req)),
    )
}

async fn healthz() -> Json<Value> {
    Json(json!({"ok": true}))
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let ready =
        shared.ready.load(std::sync::atomic::Ordering::Acquire) && shared.registry.all_started();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(json!({"ok": ready}))).into_response()
}

/// Failed authentications per client address, in a sliding window: an
/// address is locked out for [`LOCKOUT_WINDOW`] once `after` of its
/// failures fall within one window. The control API's locks out after
/// [`LOCKOUT_AFTER`] (its `Default`), the webhooks' after their own count.
#[derive(Debug)]
pub(crate) struct Lockout {
    after: usize,
    clients: Mutex<HashMap<IpAddr, Strikes>>,
}

impl Default for Lockout {
    fn default() -> Self {
        Lockout::new(LOCKOUT_AFTER)
    }
}

#[derive(Debug, Default)]
struct Strikes {
    failures: VecDeque<Instant>,
    locked_until: Option<Instant>,
}

impl Lockout {
    pub(crate) fn new(after: usize) -> Lockout {
        Lockout {
            after,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// How long `ip` is still locked out.
    pub(crate) fn locked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients
            .get(&ip)
            .and_then(|s| s.locked_until)
            .filter(|until| *until > now)
            .map(|until| until - now)
    }

    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() > 10_000 {
            clients.retain(|_, s| {
                s.locked_until.is_some_and(|u| u > now)
                    || s.failures
                        .back()
                        .is_some_and(|t| now.duration_since(*t) < LOCKOUT_WINDOW)
            });
        }
        let strikes = clients.entry(ip).or_default();
        while strikes
            .failures
            .front()
            .is_some_and(|t| now.duration_since(*t) >= LOCKOUT_WINDOW)
        {
            strikes.failures.pop_front();
        }
        strikes.failures.push_back(now);
        if strikes.failures.len() >= self.after {
            strikes.failures.clear();
            strikes.locked_until = Some(now + LOCKOUT_WINDOW);
        }
    }

    pub(crate) fn succeeded(&self, ip: IpAddr) {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ip);
    }
}

/// The control API's gate: the gateway token, with the lockout. A plain
/// service around each route, so that an accepted request costs neither
/// a boxed future nor a copy of the router.
#[derive(Clone)]
struct RequireToken(Arc<Shared>);

impl<S> tower_layer::Layer<S> for RequireToken {
    type Service = TokenGate<S>;

    fn layer(&self, inner: S) -> TokenGate<S> {
        TokenGate {
            inner,
            shared: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct TokenGate<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> tower_service::Service<Request> for TokenGate<S>
where
    S: tower_service::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<std::future::Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match refusal(&self.shared, &req) {
            None => Either::Right(self.inner.call(req)),
            Some(refused) => Either::Left(std::future::ready(Ok(refused))),
        }
    }
}

/// `None` when `req` carries the gateway token; else the answer that
/// refuses it, with a strike against its address.
fn refusal(shared: &Shared, req: &Request) -> Option<Response> {
    let ip = client_ip(req);
    let now = Instant::now();
    if let Some(left) = shared.lockout.locked(ip, now) {
        return Some(
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many failed authentications; try again in {} s",
                    left.as_secs().max(1)
                ),
            )
            .into_response(),
        );
    }
    let given = bearer(req.headers());
    let error = match given {
        Some(token) if discovery::tokens_equal(token.as_bytes(), shared.token.as_bytes()) => {
            shared.lockout.succeeded(ip);
            return None;
        }
        Some(_) => "wrong gateway token",
        None => "missing gateway token: send Authorization: Bearer <token>",
    };
    shared.lockout.failed(ip, now);
    Some(ApiError::new(StatusCode::UNAUTHORIZED, error).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SystemEventBody {
    text: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    session_key: Option<String>,
    /// `false`: the text is not the caller's own (a model made it, or it
    /// came from outside), and is shown to the model as untrusted.
    #[serde(default)]
    trusted: Option<bool>,
}

/// The modes of a system event.
pub(crate) use crate::trigger::WAKE_MODES as MODES;

async fn system_event(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<SystemEventBody>, JsonRejection>,
) -> Result<Json<Queued>, ApiError> {
    let Json(body) = body?;
    let trusted = body.trusted.unwrap_or(true);
    queue_system_event(
        &shared,
        &body.text,
        body.mode.as_deref(),
        body.session_key,
        trusted,
    )
    .map(Json)
}

/// The answer to a queued system event: `{ok, queued, mode, sessionKey}`
/// (written straight from here: no JSON tree per request).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Queued {
    ok: bool,
    queued: bool,
    mode: &'static str,
    session_key: String,
}

/// Queues a system event for a session (the main one without a key) in
/// the intake log, with a wake for mode `now` (the default is
/// `next-heartbeat`). The route, and a turn in this process
/// ([`super::Hooks`]).
pub(crate) fn queue_system_event(
    shared: &Shared,
    text: &str,
    mode: Option<&str>,
    session_key: Option<String>,
    trusted: bool,
) -> Result<Queued, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "text is empty"));
    }
    let asked = mode.unwrap_or("next-heartbeat");
    let Some(mode) = MODES.iter().copied().find(|m| *m == asked) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("mode `{asked}` is not one of now, next-heartbeat"),
        ));
    };
    let req = TurnRequest {
        session_key,
        ..TurnRequest::default()
    };
    let session_key = shared
        .engine
        .session_key(&req)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let record = Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: Cow::Borrowed(SYSTEM_EVENT_KIND),
        session_key: session_key.clone(),
        text: text.to_string(),
        mode: Cow::Borrowed(mode),
        trusted,
        hook: None,
        replay: None,
    };
    // One write(2) of one line into the page cache, inline: handing it to
    // the blocking pool would cost more than the write. The disk waits
    // (fsync) are the group-commit thread's; a log that cannot be synced
    // refuses the record before writing it (503).
    shared.intake.accept(record).map_err(ApiError::intake)?;
    if mode == "now" {
        let _ = shared.bus.send(GatewayEvent::Wake {
            reason: "wake".into(),
            session_key: session_key.clone(),
        });
    }
    Ok(Queued {
        ok: true,
        queued: true,
        mode,
        session_key,
    })
}

/// `system heartbeat run-now`: one heartbeat now (waiting behind a turn
/// that runs in the session), answered with its event once the outcome
/// and any delivery are recorded.
async fn heartbeat_run(
    State(shared): State<Arc<Shared>>,
    body: Option<Json<HeartbeatRunBody>>,
) -> ApiResult {
    let agent = body.and_then(|Json(b)| b.agent_id);
    if let Some(agent) = &agent {
        shared
            .engine
            .app()
            .for_agent(Some(agent))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("{e:#}")))?;
    }
    let event = super::heartbeat::run(&shared, agent.as_deref(), "manual", true, true)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(
        serde_json::to_value(event).map_err(ApiError::internal)?,
    ))
}

/// `POST /v1/system/heartbeat/run`: `{agentId?}` (the default agent).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct HeartbeatRunBody {
    agent_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct CronRunBody {
    /// `force` (default) or `due`.
    mode: Option<String>,
}

/// `cron run`: hands the run to the cron runner and answers once it is
/// claimed and started (`{ok, ran, enqueued, runId}`), or why not.
async fn cron_run(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    body: Result<Json<CronRunBody>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let only_due = match body.mode.as_deref().unwrap_or("force") {
        "force" => false,
        "due" => true,
        other => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("mode `{other}` is not one of force, due"),
            ));
        }
    };
    run_cron_job(&shared, id, only_due).await.map(Json)
}

/// Hands a run of the job `id` to the cron runner and answers once it is
/// claimed and started (`{ok, ran, enqueued, runId}`), or why not. The
/// route, and a turn in this process ([`super::Hooks`]).
pub(crate) async fn run_cron_job(
    shared: &Shared,
    id: String,
    only_due: bool,
) -> Result<Value, ApiError> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let asked = super::cron::ManualRun {
        job: id,
        only_due,
        answer,
    };
    if !shared.cron.ask(asked) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the cron runner is not running",
        ));
    }
    let value = tokio::time::timeout(Duration::from_secs(30), answered)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the cron runner did not answer",
            )
        })?
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the cron runner stopped"))?;
    if value["ok"] == false {
        let message = value["error"]
            .as_str()
            .unwrap_or("cron run refused")
            .to_string();
        return Err(ApiError::new(StatusCode::NOT_FOUND, message));
    }
    Ok(value)
}

/// A command changed the job store: the runner reads it now.
async fn cron_reload(State(shared): State<Arc<Shared>>) -> ApiResult {
    shared.cron.nudge();
    Ok(Json(json!({"ok": true})))
}

/// `memory search` answered here ([`super::semantic::search`]): `{ok,
/// …}` with everything the command prints, or the document it prints
/// when it asked for JSON; 409 when this gateway's settings would answer
/// otherwise than the command's.
async fn memory_search(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<crate::app::memory::ResolvedSearch>, JsonRejection>,
) -> Result<Json<Answered<SearchReply>>, ApiError> {
    let Json(req) = body?;
    shared.semantic.expect_query();
    let searching = shared.clone();
    let answer = shared
        .engine
        .blocking(move || {
            let searched = super::semantic::search(&searching, &req)?;
            anyhow::Ok(if req.json {
                SearchReply::Printed(crate::app::memory_json::Printed::of(&searched)?)
            } else {
                SearchReply::Parts(crate::app::memory::SearchAnswer::of(searched))
            })
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(|err| {
            if err.is::<crate::app::memory::SearchMismatch>() {
                ApiError::new(StatusCode::CONFLICT, err.to_string())
            } else {
                ApiError::internal(format!("{err:#}"))
            }
        })?;
    Ok(Json(Answered { ok: true, answer }))
}

/// A search's answer: the document `memory search --json` prints, when
/// the command asked for it, else everything the command shows.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum SearchReply {
    Printed(crate::app::memory_json::Printed),
    Parts(crate::app::memory::SearchAnswer),
}

/// An answer with `ok: true` before its own fields, written in one pass.
#[derive(serde::Serialize)]
struct Answered<T> {
    ok: bool,
    #[serde(flatten)]
    answer: T,
}

/// The switch was changed on disk (`system heartbeat enable|disable`):
/// the runner looks at its schedule again.
async fn heartbeat_enable(State(shared): State<Arc<Shared>>) -> ApiResult {
    shared.heartbeat.set_enabled(true);
    Ok(Json(json!({"ok": true, "enabled": true})))
}

async fn heartbeat_disable(State(shared): State<Arc<Shared>>) -> ApiResult {
    shared.heartbeat.set_enabled(false);
    Ok(Json(json!({"ok": true, "enabled": false})))
}

async fn agent(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<TurnRequest>, JsonRejection>,
) -> ApiResult {
    let Json(mut req) = body?;
    if req.message.trim().is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "message is empty"));
    }
    if super::chat::is_chat(&req) {
        super::chat::route(&shared.engine.app(), &shared.chat_router, &mut req)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    } else {
        super::chat::check_not_chat(&req)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
        req.channel = Some("api".to_string());
    }
    let key = shared
        .engine
        .session_key(&req)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    // `/stop` and `/subagents` act now, not after the session's turn.
    if let Some(parsed) = crate::app::subagent_command::parse(&req.message) {
        return subagents::command_reply(&shared, req.agent.as_deref(), &key, parsed).await;
    }
    // The task is recorded and joins its lane as one step: the ledger's
    // lane order is the order the turns run in.
    let request = serde_json::to_value(&req).map_err(ApiError::internal)?;
    let (lane, message) = (key.clone(), req.message.clone());
    let trigger = Trigger::new(Source::Api, req);
    let (admitted, task) = route::admit_recorded(&shared, trigger, &key, move |recording| {
        let now = recording.host.now_ms();
        let task = recording.tasks.record_turn(&lane, &message, request, now)?;
        Ok((task.task_id.clone(), task))
    })
    .await
    .map_err(|e| match e {
        route::Refused::Full(e) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        route::Refused::Recording(e) => ApiError::internal(e),
    })?;
    shared.intake.caught_up(FEED_WAIT).await;
    // The turn and its record run on their own: a client that goes away
    // does not stop them, and the ledger always learns how it ended.
    let running = shared.clone();
    let task_id = task.task_id.clone();
    let job = shared.turns.spawn(async move {
        let result = route::run(&running, admitted).await;
        let end = super::tasks::terminal_of(&result);
        let status = crate::tasks::Status::from(end.status).as_str().to_string();
        let finishing = running.clone();
        let id = task_id.clone();
        let recorded = running
            .engine
            .blocking(move || {
                let now = finishing.host.now_ms();
                finishing.tasks.finish(&id, end, now)
            })
            .await;
        match recorded {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::error!(task = %task_id, %err, "cannot record how a task ended")
            }
            Err(err) => tracing::error!(task = %task_id, %err, "cannot record how a task ended"),
        }
        let _ = running
            .bus
            .send(GatewayEvent::TaskChanged { task_id, status });
        result
    });
    let result = job.await.map_err(ApiError::internal)?;
    match result {
        Ok(report) => {
            let mut value = serde_json::to_value(&report).map_err(ApiError::internal)?;
            value["ok"] = json!(true);
            value["taskId"] = json!(task.task_id);
            value["laneSeq"] = json!(task.lane_seq);
            Ok(Json(value))
        }
        // Stopped by the gateway going down (try again later), or by
        // `tasks cancel` (the request lost to another one).
        Err(err) if err.downcast_ref::<Cancelled>().is_some() => {
            let status = if shared.turns_cancel.is_cancelled() {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::CONFLICT
            };
            Err(ApiError::new(status, format!("{err}")))
        }
        Err(err) => Err(ApiError::new(status_for(&err), format!("{err:#}"))),
    }
}

/// The token of an `Authorization: Bearer` header (the scheme in any
/// case, as HTTP has it).
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// 4xx for what the caller can fix, 5xx for the rest.
fn status_for(err: &anyhow::Error) -> StatusCode {
    if err.chain().any(|c| {
        c.is::<crate::engine::model::ModelError>()
            || c.is::<crate::trigger::BadTarget>()
            || c.is::<crate::agents::UnknownAgent>()
    }) {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::BAD_GATEWAY
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct SessionsQuery {
    agent_id: Option<String>,
}

/// `GET /v1/sessions[?agentId=<id>]`: one agent's sessions (default: the
/// default agent's).
async fn sessions(
    State(shared): State<Arc<Shared>>,
    query: Result<axum::extract::Query<SessionsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let query = query
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?
        .0;
    let app = shared
        .engine
        .app()
        .for_agent(query.agent_id.as_deref())
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let agent = app.agent.clone();
    let (list, warnings) = shared
        .engine
        .blocking(move || app.sessions(Some(&app.agent)).list())
        .await
        .map_err(ApiError::internal)?;
    let rows: Vec<Value> = list
        .iter()
        .map(|(key, e)| {
            let mut v = serde_json::to_value(e).unwrap_or_default();
            v["key"] = Value::String(key.clone());
            v
        })
        .collect();
    Ok(Json(
        json!({"ok": true, "agentId": agent, "count": rows.len(), "sessions": rows, "warnings": warnings}),
    ))
}

async fn status(State(shared): State<Arc<Shared>>) -> ApiResult {
    let mut value = serde_json::to_value(shared.status()).map_err(ApiError::internal)?;
    value["ok"] = json!(true);
    Ok(Json(value))
}

pub(crate) mod external;
pub(crate) mod mappings;
mod mcp;
mod outbox;
pub(crate) mod serve;
mod subagents;
mod tasks;
mod webhook_replay;
pub(crate) mod webhook_runs;
pub(crate) mod webhooks;

#[cfg(test)]
pub(crate) mod tests;
