//! `almanac system event` and `almanac system heartbeat` (OpenClaw's
//! shapes).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::output::{print_json, warn};
use crate::activity::runs::RunEvent;
use crate::app::App;
use crate::app::gateway;
use crate::app::heartbeat;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum SystemCommand {
    /// Queue a system event for a session's next turn (and wake it with --mode now)
    Event(EventArgs),
    /// The heartbeat runner: its last run, its switch, a run now
    #[command(subcommand)]
    Heartbeat(HeartbeatCommand),
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum HeartbeatCommand {
    /// The last heartbeat run's event (works without a gateway)
    Last(JsonFlag),
    /// Turn heartbeat runs on (persisted)
    Enable(JsonFlag),
    /// Turn heartbeat runs off (persisted; every run is skipped as disabled)
    Disable(JsonFlag),
    /// Run one heartbeat now through the running gateway and print its event
    RunNow(JsonFlag),
}

#[derive(Debug, Args)]
pub(super) struct JsonFlag {
    /// Print machine-readable JSON
    #[arg(long)]
    json: bool,
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
        SystemCommand::Heartbeat(cmd) => match cmd {
            HeartbeatCommand::Last(flag) => heartbeat_last(flag, app),
            HeartbeatCommand::Enable(flag) => heartbeat_switch(flag, app, true),
            HeartbeatCommand::Disable(flag) => heartbeat_switch(flag, app, false),
            HeartbeatCommand::RunNow(flag) => heartbeat_run_now(flag, app),
        },
    }
}

fn heartbeat_last(flag: JsonFlag, app: &App) -> anyhow::Result<ExitCode> {
    let event = heartbeat::last_event(app)?;
    if flag.json {
        print_json(&event)?;
    } else {
        match &event {
            Some(event) => print_event(app, event),
            None => println!("No heartbeat has run yet."),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn heartbeat_switch(flag: JsonFlag, app: &App, enabled: bool) -> anyhow::Result<ExitCode> {
    let switched = heartbeat::set_enabled(app, enabled)?;
    if flag.json {
        print_json(&switched)?;
    } else {
        let state = if enabled { "enabled" } else { "disabled" };
        if switched.changed {
            println!("Heartbeats {state}.");
        } else {
            println!("Heartbeats were already {state}.");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn heartbeat_run_now(flag: JsonFlag, app: &App) -> anyhow::Result<ExitCode> {
    let event = heartbeat::run_now(app)?;
    if flag.json {
        print_json(&event)?;
    } else {
        print_event(app, &event);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_event(app: &App, event: &RunEvent) {
    let when = jiff::Timestamp::from_millisecond(event.ts)
        .map(|t| {
            t.to_zoned_datetime(app.user_time_zone())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
                .to_string()
        })
        .unwrap_or_else(|_| event.ts.to_string());
    let status = serde_json::to_value(event.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut line = format!("{when}  {status}");
    if let Some(reason) = &event.reason {
        line.push_str(&format!(" ({reason})"));
    }
    if let Some(channel) = &event.channel {
        line.push_str(&format!(" via {channel}"));
    }
    if let Some(to) = &event.to {
        line.push_str(&format!(" to {to}"));
    }
    if let Some(ms) = event.duration_ms {
        line.push_str(&format!(" in {ms} ms"));
    }
    println!("{line}");
    if let Some(preview) = &event.preview {
        println!("  {}", preview.lines().next().unwrap_or(""));
    }
}

fn event(args: EventArgs, app: &App) -> anyhow::Result<ExitCode> {
    let queued = gateway::system_event(
        app,
        &args.text,
        &args.mode,
        args.session_key.as_deref(),
        true,
    )?;
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
