//! The control API of subagent runs (`almanac subagents …`), and the
//! `/stop` and `/subagents` commands typed into `POST /v1/agent`.
//!
//! `GET /v1/subagents` lists them; `GET /v1/subagents/{target}` shows one
//! and `…/log` its transcript; `POST …/kill` and `…/steer` act on it. A
//! `session` parameter narrows the runs to that session's descendants.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use crate::gateway::Shared;
use crate::gateway::subagent_control as control;

type ApiResult = Result<Json<Value>, ApiError>;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct Scope {
    session: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct LogQuery {
    session: Option<String>,
    limit: Option<usize>,
    tools: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct SteerBody {
    session: Option<String>,
    message: String,
}

/// Runs `work` on the blocking boundary once the runs of acknowledged
/// spawns are recorded; its `Err` is the caller's to fix (404 when no run
/// matches, else 400).
async fn blocking(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Shared) -> Result<Value, String> + Send + 'static,
) -> ApiResult {
    control::spawns_recorded(shared).await;
    let working = shared.clone();
    let answer = shared
        .engine
        .blocking(move || work(&working))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")))?;
    match answer {
        Ok(value) => Ok(Json(value)),
        Err(message) if message.starts_with("no subagent run matches") => {
            Err(ApiError::new(StatusCode::NOT_FOUND, message))
        }
        Err(message) => Err(ApiError::new(StatusCode::BAD_REQUEST, message)),
    }
}

pub(super) async fn list(State(shared): State<Arc<Shared>>, Query(q): Query<Scope>) -> ApiResult {
    blocking(&shared, move |s| {
        Ok(json!({"ok": true, "runs": control::list(s, q.session.as_deref())?}))
    })
    .await
}

pub(super) async fn info(
    State(shared): State<Arc<Shared>>,
    Path(target): Path<String>,
    Query(q): Query<Scope>,
) -> ApiResult {
    blocking(&shared, move |s| {
        let info = control::info(s, q.session.as_deref(), &target)?;
        serde_json::to_value(info).map_err(|e| e.to_string())
    })
    .await
}

pub(super) async fn log(
    State(shared): State<Arc<Shared>>,
    Path(target): Path<String>,
    Query(q): Query<LogQuery>,
) -> ApiResult {
    blocking(&shared, move |s| {
        let limit = q.limit.unwrap_or(crate::app::subagents::LOG_LIMIT).max(1);
        let log = control::log(s, q.session.as_deref(), &target, limit, q.tools)?;
        serde_json::to_value(log).map_err(|e| e.to_string())
    })
    .await
}

pub(super) async fn kill(
    State(shared): State<Arc<Shared>>,
    Path(target): Path<String>,
    body: Option<Json<Scope>>,
) -> ApiResult {
    let scope = body.map(|Json(b)| b).unwrap_or_default();
    blocking(&shared, move |s| {
        control::kill(s, scope.session.as_deref(), &target)
    })
    .await
}

pub(super) async fn steer(
    State(shared): State<Arc<Shared>>,
    Path(target): Path<String>,
    Json(body): Json<SteerBody>,
) -> ApiResult {
    blocking(&shared, move |s| {
        control::steer(
            s,
            body.session.as_deref(),
            &target,
            &body.message,
            "the user",
        )
    })
    .await
}

/// The answer to a `/stop` or `/subagents` command typed as the message
/// of a turn in `session`: the command's text as the reply, no model call.
pub(super) async fn command_reply(
    shared: &Arc<Shared>,
    agent: Option<&str>,
    session: &str,
    parsed: Result<crate::app::subagent_command::Command, String>,
) -> ApiResult {
    let reply = match parsed {
        Ok(command) => {
            let agent_id = shared
                .engine
                .app()
                .for_agent(agent)
                .map(|a| a.agent.clone())
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("{e:#}")))?;
            control::run_command(shared, &agent_id, session, command).await
        }
        Err(usage) => usage,
    };
    Ok(Json(json!({
        "ok": true,
        "sessionKey": session,
        "reply": reply,
        "silent": false,
        "command": true,
    })))
}
