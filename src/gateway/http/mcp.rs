//! The MCP server in the gateway: streamable HTTP at `/mcp` (behind the
//! gateway token, like the control API) and `POST /v1/mcp/call`, where
//! `almanac mcp serve` sends the tool calls of a desktop client. Both run
//! calls here, with the gateway's warm memory search and its scheduler.
//!
//! `/mcp` checks `Host` (loopback names when the gateway listens on
//! loopback) and `Origin` (only this gateway's own loopback origins; a
//! request without one passes), takes bodies up to the gateway's
//! [`BODY_LIMIT`], and answers 404 to an `Mcp-Session-Id` it does not
//! know (a client re-initialises, as after a gateway restart).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::tower::StreamableHttpService;

use super::{ApiError, BODY_LIMIT};
use crate::app::App;
use crate::app::mcp_tools::{self, CallOutcome, CallRequest, Warm};
use crate::app::memory::{ResolvedSearch, Searched};
use crate::gateway::Shared;
use crate::mcp::Server;

/// The gateway's warm parts, for the calls it runs.
struct GatewayWarm(std::sync::Weak<Shared>);

impl Warm for GatewayWarm {
    fn search(&self, req: &ResolvedSearch) -> Option<anyhow::Result<Searched>> {
        let shared = self.0.upgrade()?;
        Some(crate::gateway::semantic::search(&shared, req))
    }

    fn cron_changed(&self, _app: &App) {
        if let Some(shared) = self.0.upgrade() {
            shared.cron.nudge();
        }
    }
}

fn warm(shared: &Arc<Shared>) -> Arc<dyn Warm> {
    Arc::new(GatewayWarm(Arc::downgrade(shared)))
}

/// The `/mcp` service.
pub(crate) fn service(shared: &Arc<Shared>) -> StreamableHttpService<Server, LocalSessionManager> {
    let port = shared.info.port;
    let origins = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect::<Vec<_>>();
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(BODY_LIMIT)
        .with_cancellation_token(shared.turns_cancel.child_token());
    let loopback = shared
        .info
        .address
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        // Reached by an address of the network: the token guards it.
        config = config.disable_allowed_hosts();
    }
    let app = shared.engine.app();
    let warm = warm(shared);
    StreamableHttpService::new(
        move || Ok(Server::in_gateway(app.clone(), warm.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// `POST /v1/mcp/call`: one tool call of `mcp serve`, run here.
pub(super) async fn call(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<CallRequest>, JsonRejection>,
) -> Result<Json<CallOutcome>, ApiError> {
    let Json(request) = body?;
    let app = shared.engine.app();
    let warm = warm(&shared);
    // A thread of its own: a call may tell this gateway of a change
    // through a client with a runtime of its own.
    let outcome = crate::app::on_own_thread("mcp-call", move || {
        let config = &app.config.config.mcp;
        let result = mcp_tools::admit(config, &request.name, &request.arguments)
            .and_then(|()| mcp_tools::call(&app, warm.as_ref(), &request.name, &request.arguments));
        CallOutcome::from(result)
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(Json(outcome))
}
