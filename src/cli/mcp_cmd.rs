//! `almanac mcp serve`: almanac's memory, skills and time as an MCP
//! server on stdin and stdout, for a desktop client to launch.

use std::process::ExitCode;

use clap::Subcommand;

use crate::app::App;

#[derive(Debug, Subcommand)]
pub(super) enum McpCommand {
    /// Serve MCP over stdin and stdout (what desktop clients launch); notices go to stderr
    Serve,
}

pub(super) fn run(cmd: McpCommand, app: App) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::Serve => {
            crate::entry::mcp_serve(app)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
