//! What runs where: the gateway in this process (`gateway run`), and a
//! turn through the running gateway's lane or, when none runs, here.
//! The command line calls this; the gateway and the engine do not.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::policy::Approver;
use crate::app::{App, GlobalOptions};
pub(crate) use crate::engine::model::ModelError;
pub(crate) use crate::engine::turn::{PromptView, TurnReport};
pub(crate) use crate::gateway::commands::WarmSearch;
pub(crate) use crate::gateway::{GatewayError, RunOptions};
use crate::gateway_client::GatewayInfo;

use crate::trigger::TurnRequest;

/// Runs the gateway in the foreground; `on_ready` is told where it
/// listens.
pub(crate) fn run(
    app: App,
    options: GlobalOptions,
    opts: RunOptions,
    on_ready: impl FnOnce(&GatewayInfo) + Send,
) -> anyhow::Result<()> {
    crate::gateway::run(app, options, opts, CancellationToken::new(), on_ready)
}

/// `mcp serve`: the MCP server on stdin and stdout until stdin ends or
/// a stop signal.
pub(crate) fn mcp_serve(app: App) -> anyhow::Result<()> {
    crate::host::allocator::serve_from_mimalloc();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Listened for before the first request is read.
        let mut signals = crate::host::signals::StopSignals::listen();
        crate::mcp::stdio::serve(crate::mcp::Server::forwarding(app), async move {
            signals.recv().await;
        })
        .await
    })
}

/// What `almanac agent prompt` shows: what the model would be sent.
pub(crate) fn prompt_view(app: &App, req: &TurnRequest) -> anyhow::Result<PromptView> {
    crate::engine::turn::prompt_view(app, req)
}

/// A turn's answer, from this process or from the gateway.
#[derive(Debug)]
pub(crate) struct TurnDone {
    pub json: Value,
    pub reply: String,
    pub silent: bool,
    pub warnings: Vec<String>,
    pub stopped: Option<String>,
}

impl From<TurnReport> for TurnDone {
    fn from(report: TurnReport) -> TurnDone {
        TurnDone {
            reply: report.outcome.reply.clone(),
            silent: report.outcome.silent,
            warnings: report.warnings.clone(),
            stopped: report.outcome.stopped.clone(),
            json: serde_json::to_value(&report).unwrap_or_default(),
        }
    }
}

/// `agent --message`: through the running gateway's lane when there is
/// one (commands needing a person's approval are refused there: nobody
/// is at its terminal), else in this process.
pub(crate) fn turn(
    app: &App,
    req: TurnRequest,
    approver: Arc<dyn Approver>,
) -> anyhow::Result<TurnDone> {
    crate::trigger::check_agent(&req)?;
    if let Some(client) = app.gateway_client()? {
        let body = serde_json::to_value(&req)?;
        let mut json = client.post("/v1/agent", &body, Duration::from_secs(24 * 3600))?;
        if let Some(map) = json.as_object_mut() {
            map.remove("ok");
        }
        let text = |v: &Value| v.as_str().map(str::to_string);
        return Ok(TurnDone {
            reply: text(&json["reply"]).unwrap_or_default(),
            silent: json["silent"].as_bool().unwrap_or(false),
            warnings: json["warnings"]
                .as_array()
                .map(|a| a.iter().filter_map(text).collect())
                .unwrap_or_default(),
            stopped: text(&json["stopped"]),
            json,
        });
    }
    if let Some(parsed) = crate::app::subagent_command::parse(&req.message) {
        let agent_app = app.for_agent(req.agent.as_deref())?;
        let session = agent_app.resolve_session_key(None, req.session_key.as_deref());
        let reply = match parsed {
            Ok(command) => {
                crate::app::subagent_command::answer_without_gateway(app, &session, command)?
            }
            Err(usage) => usage,
        };
        return Ok(TurnDone {
            json: serde_json::json!({"sessionKey": session, "reply": reply, "silent": false, "command": true}),
            reply,
            silent: false,
            warnings: Vec::new(),
            stopped: None,
        });
    }
    let report = crate::engine::run_one_turn(app.clone(), req, crate::engine::quiet(), approver)?;
    Ok(report.into())
}
