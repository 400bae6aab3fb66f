//! The task ledger over the control API (`almanac tasks …` while a gateway
//! runs): `GET /v1/tasks` lists tasks, `GET /v1/tasks/{id}` shows one (by
//! id, id prefix, run id or session key) and `POST /v1/tasks/{id}/cancel`
//! cancels one.
//!
//! Each first waits until the intake has recorded every event it
//! acknowledged: a webhook run answered `202` with its `runId`, or a
//! spawn answered `accepted`, is in the intake log at once but in the
//! ledger only a batch later (up to a tenth of a second under a stream).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use crate::gateway::Shared;
use crate::tasks::{CancelOutcome, TaskError, TaskFilter, UnknownValue};

type ApiResult = Result<Json<Value>, ApiError>;

/// How long a request waits at most for the intake to record what it
/// acknowledged; a stalled feeder then leaves it with what the ledger
/// holds.
const FEED_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TasksQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/tasks`: `{ok, tasks}`, newest first.
pub(super) async fn list(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<TasksQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let bad = |e: UnknownValue| ApiError::new(StatusCode::BAD_REQUEST, e.to_string());
    let filter = TaskFilter {
        status: query
            .status
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(bad)?,
        runtime: query
            .runtime
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(bad)?,
    };
    shared.intake.caught_up(FEED_WAIT).await;
    let listing = shared.clone();
    let list = shared
        .engine
        .blocking(move || listing.tasks.with(|l| l.list(filter, query.limit)))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"ok": true, "tasks": list})))
}

/// `GET /v1/tasks/{id}`: `{ok, task}`; 404 when nothing matches, 400 when
/// a prefix matches several.
pub(super) async fn show(
    State(shared): State<Arc<Shared>>,
    Path(lookup): Path<String>,
) -> ApiResult {
    shared.intake.caught_up(FEED_WAIT).await;
    let reading = shared.clone();
    let wanted = lookup.clone();
    let task = shared
        .engine
        .blocking(move || reading.tasks.with(|l| l.get(&wanted)))
        .await
        .map_err(ApiError::internal)?
        .map_err(lookup_error)?
        .ok_or_else(|| lookup_error(TaskError::NotFound(lookup)))?;
    Ok(Json(json!({"ok": true, "task": task})))
}

/// `POST /v1/tasks/{id}/cancel`: `{ok, result, task}`, `result` one of
/// `cancelled`, `requested` (it is stopping) and `already-ended`.
pub(super) async fn cancel(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult {
    shared.intake.caught_up(FEED_WAIT).await;
    let cancelling = shared.clone();
    let outcome = shared
        .engine
        .blocking(move || {
            let now = cancelling.host.now_ms();
            let outcome = cancelling.tasks.cancel(&id, now)?;
            // What the task started stops with it.
            if !matches!(outcome, CancelOutcome::AlreadyTerminal(_)) {
                crate::gateway::subagent_control::cascade(&cancelling, outcome.task());
            }
            Ok::<_, TaskError>(outcome)
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(lookup_error)?;
    let result = match &outcome {
        CancelOutcome::Cancelled(_) => "cancelled",
        CancelOutcome::Requested(_) => "requested",
        CancelOutcome::AlreadyTerminal(_) => "already-ended",
    };
    Ok(Json(
        json!({"ok": true, "result": result, "task": outcome.task()}),
    ))
}

/// 404 for no match, 400 for an ambiguous prefix, 500 for the rest.
fn lookup_error(e: TaskError) -> ApiError {
    match e {
        TaskError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
        TaskError::Ambiguous(_) => ApiError::new(StatusCode::BAD_REQUEST, e.to_string()),
        other => ApiError::internal(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::http::tests::{call, get, post};
    use crate::gateway::subagent_control::tests::spawn_after_a_batch;
    use crate::gateway::supervisor::Component;

    const TOKEN: &str = "t";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_task_routes_see_every_run_acknowledged_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), TOKEN);
        let router = crate::gateway::http::router(shared.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        let feeder = tokio::spawn(
            Arc::new(crate::gateway::intake::Feeder).start(shared.clone(), stop.clone()),
        );

        let one = spawn_after_a_batch(&shared, "one").await;
        let (status, listed) = call(&router, get("/v1/tasks?runtime=subagent", Some(TOKEN))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed["tasks"][0]["runId"], one.as_str());

        let two = spawn_after_a_batch(&shared, "two").await;
        let (status, shown) = call(&router, get(&format!("/v1/tasks/{two}"), Some(TOKEN))).await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        assert_eq!(shown["task"]["task"], "two");

        let three = spawn_after_a_batch(&shared, "three").await;
        let cancel = post(&format!("/v1/tasks/{three}/cancel"), Some(TOKEN), "");
        let (status, cancelled) = call(&router, cancel).await;
        assert_eq!(status, StatusCode::OK, "{cancelled}");
        assert_eq!(cancelled["task"]["runId"], three.as_str());

        let (status, missing) = call(&router, get("/v1/tasks/no-such-task", Some(TOKEN))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");

        stop.cancel();
        feeder.await.unwrap().unwrap();
    }
}
