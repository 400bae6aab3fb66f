//! `almanac subagents [list] | info | log | kill | steer`: the background
//! runs turns spawned. Reading asks the running gateway, which answers
//! with every spawn it has acknowledged (its ledger records a run a
//! moment after the spawn), and without one reads the ledger and the
//! transcripts; kill and steer go to the running gateway, which runs
//! them.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::JsonFlag;
use super::output::print_json;
use crate::app::App;
use crate::app::subagents as view;
use crate::gateway_client::client::path_segment;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct SubagentsArgs {
    #[command(subcommand)]
    pub command: Option<SubagentsCommand>,
    #[command(flatten)]
    pub list: ListArgs,
}

#[derive(Debug, Args, Clone)]
pub(super) struct ListArgs {
    /// Only the runs below this session (its children, theirs, …)
    #[arg(long, value_name = "KEY")]
    session: Option<String>,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum SubagentsCommand {
    /// The runs alive (queued or running) and those ended in the last 30 minutes (the default)
    List(ListArgs),
    /// One run: its task, status, times, session and transcript
    Info {
        /// Run id (or its first characters), #N from the list, label or child session key
        target: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A run's transcript, its last messages
    Log {
        /// Run id (or its first characters), #N from the list, label or child session key
        target: String,
        /// How many messages, the last ones
        #[arg(long, default_value_t = view::LOG_LIMIT, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..), usize::from))]
        limit: usize,
        /// Show tool calls and their results too
        #[arg(long)]
        tools: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Stop a run and every run below it, through the running gateway
    Kill {
        /// Run id (or its first characters), #N from the list, label, child session key, or all
        target: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Steer a running run: it reads the message before its next model request
    Steer {
        /// Run id (or its first characters), #N from the list, label or child session key
        target: String,
        /// What it should do differently
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

pub(super) fn run(args: SubagentsArgs, app: &App) -> anyhow::Result<ExitCode> {
    match args.command.unwrap_or(SubagentsCommand::List(args.list)) {
        SubagentsCommand::List(list) => list_runs(app, list),
        SubagentsCommand::Info { target, json } => info(app, &target, json.json),
        SubagentsCommand::Log {
            target,
            limit,
            tools,
            json,
        } => log(app, &target, limit, tools, json.json),
        SubagentsCommand::Kill { target, json } => kill(app, &target, json.json),
        SubagentsCommand::Steer {
            target,
            message,
            json,
        } => steer(app, &target, &message.join(" "), json.json),
    }
}

fn runs(app: &App, session: Option<&str>) -> anyhow::Result<view::Runs> {
    Ok(view::runs(
        &app.ledger_for_reading()?,
        session,
        app.now_ms(),
    )?)
}

/// The one run `target` names.
fn one(app: &App, target: &str) -> anyhow::Result<(view::Runs, crate::tasks::Task)> {
    let runs = runs(app, None)?;
    let task = view::resolve_one(&runs, target)?.clone();
    Ok((runs, task))
}

/// The running gateway's answer to `GET path`, or `None` without one.
fn asked_of_gateway(app: &App, path: &str) -> anyhow::Result<Option<Value>> {
    match app.gateway_client()? {
        Some(client) => Ok(Some(client.get(path)?)),
        None => Ok(None),
    }
}

fn list_runs(app: &App, args: ListArgs) -> anyhow::Result<ExitCode> {
    let path = match &args.session {
        Some(session) => format!("/v1/subagents?session={}", path_segment(session)),
        None => "/v1/subagents".to_string(),
    };
    let views: Vec<view::RunView> = match asked_of_gateway(app, &path)? {
        Some(answer) => serde_json::from_value(answer["runs"].clone())?,
        None => {
            let runs = runs(app, args.session.as_deref())?;
            view::views(&runs.listed, app.now_ms())
        }
    };
    if args.json.json {
        print_json(&json!({"runs": views}))?;
    } else {
        println!("{}", view::list_text(&views, app));
    }
    Ok(ExitCode::SUCCESS)
}

fn info(app: &App, target: &str, json: bool) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/subagents/{}", path_segment(target));
    let info: view::RunInfo = match asked_of_gateway(app, &path)? {
        Some(answer) => serde_json::from_value(answer)?,
        None => {
            let (runs, task) = one(app, target)?;
            view::info(app, &runs, &task, app.now_ms())
        }
    };
    if json {
        print_json(&info)?;
    } else {
        println!("{}", view::info_text(&info, app));
    }
    Ok(ExitCode::SUCCESS)
}

fn log(app: &App, target: &str, limit: usize, tools: bool, json: bool) -> anyhow::Result<ExitCode> {
    let path = format!(
        "/v1/subagents/{}/log?limit={limit}&tools={tools}",
        path_segment(target)
    );
    let log: view::RunLog = match asked_of_gateway(app, &path)? {
        Some(answer) => serde_json::from_value(answer)?,
        None => {
            let (_, task) = one(app, target)?;
            view::log(app, &task, limit, tools)?
        }
    };
    if json {
        print_json(&log)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", view::log_text(&log, 10));
    Ok(ExitCode::SUCCESS)
}

fn kill(app: &App, target: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = app.require_gateway()?;
    let path = format!("/v1/subagents/{}/kill", path_segment(target));
    let answer = client.post(&path, &json!({}), Duration::from_secs(30))?;
    if json {
        print_json(&answer)?;
    } else {
        let killed = answer["killed"].as_array().map_or(0, Vec::len);
        let below = answer["alsoStopped"].as_u64().unwrap_or(0);
        println!("Killed {killed} run(s), and {below} below them.");
    }
    Ok(ExitCode::SUCCESS)
}

fn steer(app: &App, target: &str, message: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = app.require_gateway()?;
    let path = format!("/v1/subagents/{}/steer", path_segment(target));
    let answer = client.post(&path, &json!({"message": message}), Duration::from_secs(30))?;
    if json {
        print_json(&answer)?;
    } else {
        println!(
            "Steered {}: it reads the message before its next model request.",
            crate::tasks::short_id(answer["runId"].as_str().unwrap_or(""))
        );
    }
    Ok(ExitCode::SUCCESS)
}
