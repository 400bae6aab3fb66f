//! `almanac pairing list [telegram] [--json]` and `pairing approve
//! telegram <CODE>`: the senders who asked a chat channel to talk to the
//! agent, and letting one in.

use std::process::ExitCode;

use clap::Subcommand;

use super::JsonFlag;
use super::output::print_json;
use crate::app::App;
use crate::channels::telegram::store;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum PairingCommand {
    /// The pending pairing requests (codes are good for an hour)
    List {
        /// The channel (telegram)
        #[arg(value_parser = ["telegram"])]
        channel: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Let the sender with this code talk to the bot
    Approve {
        /// The channel (telegram)
        #[arg(value_parser = ["telegram"])]
        channel: String,
        /// The 8-character code the sender was given
        code: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

pub(super) fn run(cmd: PairingCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        PairingCommand::List { json, .. } => list(app, json.json),
        PairingCommand::Approve { code, json, .. } => approve(app, &code, json.json),
    }
}

fn list(app: &App, json: bool) -> anyhow::Result<ExitCode> {
    let pending = store::pending(&app.paths.state_dir, app.host.now_ts());
    if json {
        let rows: Vec<serde_json::Value> = pending
            .iter()
            .map(|r| {
                serde_json::json!({
                    "channel": "telegram", "code": r.code, "id": r.id,
                    "accountId": r.account(), "createdAt": r.created_at,
                    "lastSeenAt": r.last_seen_at, "meta": r.meta,
                })
            })
            .collect();
        print_json(&serde_json::json!({"requests": rows}))?;
    } else if pending.is_empty() {
        println!("No pending pairing requests.");
    } else {
        for r in &pending {
            let who = r.meta["username"]
                .as_str()
                .map(|u| format!("@{u}"))
                .or_else(|| r.meta["name"].as_str().map(str::to_string))
                .unwrap_or_default();
            println!(
                "telegram  {}  user {} {}  account {}  since {}",
                r.code,
                r.id,
                who,
                r.account(),
                r.created_at
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn approve(app: &App, code: &str, json: bool) -> anyhow::Result<ExitCode> {
    match store::approve(&app.paths.state_dir, code, app.host.now_ts()) {
        Ok(request) => {
            if json {
                print_json(&serde_json::json!({
                    "ok": true, "channel": "telegram", "id": request.id,
                    "accountId": request.account(),
                }))?;
            } else {
                println!(
                    "Approved telegram user {} for account {}: their next message reaches the agent.",
                    request.id,
                    request.account()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(store::ApproveError::Unknown(code)) => {
            eprintln!(
                "error: no pending pairing request has the code {code} (codes expire after an hour; `almanac pairing list` shows them)"
            );
            Ok(ExitCode::FAILURE)
        }
        Err(err) => Err(err.into()),
    }
}
