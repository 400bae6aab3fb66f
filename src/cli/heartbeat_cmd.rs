//! `almanac heartbeat status|ping|history` (Arka's activity tracker).

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::JsonFlag;
use super::output::{print_json, warn};
use crate::activity::history_rows;
use crate::app::{App, session_memory};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum HeartbeatCommand {
    /// Show the last activity, flags, counters and recent events
    Status(JsonFlag),
    /// Record an activity event
    Ping {
        /// What happened
        #[arg(default_value = "manual.ping", allow_hyphen_values = true)]
        activity: String,
        /// Where it came from
        #[arg(long, default_value = "cli")]
        source: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show the newest events, oldest first
    History {
        /// Number of events (at most 100)
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        json: JsonFlag,
    },
}

pub(super) fn run(cmd: HeartbeatCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        HeartbeatCommand::Status(flag) => {
            let (state, warnings) = session_memory::heartbeat_status(app)?;
            warnings.iter().for_each(warn);
            if flag.json {
                print_json(&state)?;
            } else {
                print_status(&state);
            }
        }
        HeartbeatCommand::Ping {
            activity,
            source,
            json,
        } => {
            let outcome = app.ping(&activity, &source)?;
            if let Some(w) = &outcome.warning {
                warn(w);
            }
            if json.json {
                print_json(&outcome)?;
            } else {
                println!("Heartbeat: {activity}");
            }
        }
        HeartbeatCommand::History { limit, json } => {
            let (rows, warnings) = session_memory::heartbeat_history(app, limit.min(100))?;
            warnings.iter().for_each(warn);
            if json.json {
                print_json(&rows)?;
            } else if rows.is_empty() && limit > 0 {
                println!("No heartbeat history yet.");
            } else {
                for row in rows {
                    println!("{}  {}  ({})", row.when, row.activity, row.source);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_status(state: &serde_json::Map<String, Value>) {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "?".to_string(),
        Some(other) => other.to_string(),
    };
    let field = |obj: &str, key: &str| text(state.get(obj).and_then(|o| o.get(key)));
    let flag = |key: &str| match state.get("security").and_then(|s| s.get(key)) {
        Some(Value::Bool(true)) => "True",
        Some(Value::Bool(false)) => "False",
        _ => "?",
    };
    println!("Agent: {}", text(state.get("agent")));
    if state.contains_key("last_activity") {
        println!(
            "Last activity: {} ({})",
            text(state.get("last_activity")),
            text(state.get("when"))
        );
        println!("Source: {}", text(state.get("source")));
    } else {
        println!("Last activity: none yet");
        println!("Source: none");
    }
    println!(
        "Security: master={} llm={} actions={}",
        flag("enabled"),
        flag("llm"),
        flag("actions")
    );
    println!("Routines enabled: {}", text(state.get("routines_enabled")));
    println!(
        "Memory: json={} session_daily={} longterm_lines={}",
        field("memory", "json_entries"),
        field("memory", "session_daily"),
        field("memory", "longterm_lines")
    );
    println!(
        "Channels: sessions={} subagents_running={} subagents_total={}",
        field("channels", "message_sessions"),
        field("channels", "subagents_running"),
        field("channels", "subagents_total")
    );
    let rows = history_rows(state);
    let recent = &rows[rows.len().saturating_sub(5)..];
    println!("Recent activity ({}):", recent.len());
    for row in recent {
        println!("  {}  {}  ({})", row.when, row.activity, row.source);
    }
}
