//! `GET /v1/outbox/stream`: the outbox as server-sent events.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use crate::gateway::Shared;

/// How often an idle outbox stream sends a comment, so proxies and
/// clients see it alive.
const STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OutboxStreamQuery {
    #[serde(default)]
    after: Option<String>,
}

/// `GET /v1/outbox/stream`: server-sent events, one `outbox` event per
/// entry (`id:` its id, `data:` the entry's JSON). With `Last-Event-ID`
/// (or `?after=`), the entries after that id first, then new ones.
pub(super) async fn stream(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    query: Result<
        axum::extract::Query<OutboxStreamQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Response, ApiError> {
    use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
    use futures_util::StreamExt;
    let axum::extract::Query(query) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let given = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("").to_string())
        .or(query.after);
    let after = match given.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(id) => Some(id.parse::<u64>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("`{id}` is not an outbox entry id"),
            )
        })?),
    };
    let entries = shared
        .deliverer
        .follow(after)
        .await
        .map_err(ApiError::internal)?;
    let events = entries.map(|entry| {
        let data = serde_json::to_string(&entry).unwrap_or_default();
        Ok::<_, std::convert::Infallible>(
            SseEvent::default().id(entry.id).event("outbox").data(data),
        )
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(STREAM_KEEP_ALIVE))
        .into_response())
}
