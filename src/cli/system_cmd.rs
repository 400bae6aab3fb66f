//! `almanac system event` (OpenClaw's shape).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::output::{print_json, warn};
use crate::app::App;
use crate::app::gateway;

#[derive(Debug, Subcommand)]
pub(super) enum SystemCommand {
    /// Queue a system event for a session's next turn (and wake it with --mode now)
    Event(EventArgs),
}

#[derive(Debug, Args)]
pub(super) struct EventArgs {
    /// The event text
    #[arg(long)]
    text: String,
    /// now: queue and ask for a turn; next-heartbeat: queue only
    #[arg(
        long,
        default_value = "next-heartbeat",
        value_name = "now|next-heartbeat"
    )]
    mode: String,
    /// Session key [default: the main session]
    #[arg(long)]
    session_key: Option<String>,
    /// Print machine-readable JSON
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: SystemCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        SystemCommand::Event(args) => event(args, app),
    }
}

fn event(args: EventArgs, app: &App) -> anyhow::Result<ExitCode> {
    let queued = gateway::system_event(app, &args.text, &args.mode, args.session_key.as_deref())?;
    if let Some(w) = &queued.warning {
        warn(w);
    }
    if args.json {
        print_json(&serde_json::json!({
            "ok": queued.ok,
            "queued": queued.queued,
            "mode": queued.mode,
            "sessionKey": queued.session_key,
        }))?;
    } else if queued.queued {
        println!("Queued for {} ({}).", queued.session_key, queued.mode);
    } else {
        println!(
            "Not queued: the same as the event before it for {}.",
            queued.session_key
        );
    }
    Ok(ExitCode::SUCCESS)
}
