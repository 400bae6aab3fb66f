//! `almanac agents list | add | bind | unbind`: the agents and which
//! channels' messages go to each.

use std::process::ExitCode;

use clap::Subcommand;

use super::JsonFlag;
use super::output::print_json;
use crate::app::App;
use crate::app::agent_roster;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum AgentsCommand {
    /// The agents: id, workspace, model, default, bindings
    List {
        /// Also describe each agent's bindings
        #[arg(long)]
        bindings: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Add an agent with a workspace of its own (--workspace DIR, else <state dir>/workspace-<id>)
    Add {
        /// The new agent's id
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Send a channel's (or one chat's) messages to an agent
    Bind {
        /// The agent
        #[arg(long, value_name = "ID")]
        agent: String,
        /// The channel, and optionally its account: <channel>[:<accountId>] (`*` for every account)
        #[arg(long, value_name = "CHANNEL[:ACCOUNT]")]
        bind: String,
        /// Only this chat: <kind>:<id>, kind direct, group or channel
        #[arg(long, value_name = "KIND:ID")]
        peer: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Remove bindings of an agent
    Unbind {
        /// The agent
        #[arg(long, value_name = "ID")]
        agent: String,
        /// The binding to remove: <channel>[:<accountId>]
        #[arg(
            long,
            value_name = "CHANNEL[:ACCOUNT]",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        bind: Option<String>,
        /// With --bind: only the binding of this chat (<kind>:<id>)
        #[arg(long, value_name = "KIND:ID", requires = "bind")]
        peer: Option<String>,
        /// Every binding of the agent
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// Runs `cmd`; `workspace` is the global `--workspace`, which for
/// `agents add` names the new agent's workspace.
pub(super) fn run(
    cmd: AgentsCommand,
    app: &App,
    workspace: Option<&str>,
) -> anyhow::Result<ExitCode> {
    match cmd {
        AgentsCommand::List { bindings, json } => list(app, bindings, json.json),
        AgentsCommand::Add { id, json } => add(app, &id, workspace, json.json),
        AgentsCommand::Bind {
            agent,
            bind,
            peer,
            json,
        } => {
            let new = agent_roster::binding(&agent, &bind, peer.as_deref())?;
            rebound(&agent_roster::bind(app, &agent, new)?, json.json)
        }
        AgentsCommand::Unbind {
            agent,
            bind,
            peer,
            all: _,
            json,
        } => {
            let which = bind
                .map(|b| agent_roster::binding(&agent, &b, peer.as_deref()))
                .transpose()?;
            rebound(&agent_roster::unbind(app, &agent, which)?, json.json)
        }
    }
}

fn list(app: &App, bindings: bool, json: bool) -> anyhow::Result<ExitCode> {
    for warning in app.agents()?.warnings {
        super::output::warn(warning);
    }
    let rows = agent_roster::list(app, bindings)?;
    if json {
        print_json(&rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    for row in &rows {
        let default = if row.is_default { " (default)" } else { "" };
        println!("{}{default}", row.id);
        println!("  workspace: {}", row.workspace);
        if let Some(model) = &row.model {
            println!("  model:     {model}");
        }
        println!("  bindings:  {}", row.bindings);
        for detail in row.binding_details.iter().flatten() {
            println!("    - {detail}");
        }
        if row.heartbeat {
            println!("  heartbeat: yes");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn add(app: &App, id: &str, workspace: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let added = agent_roster::add(app, id, workspace)?;
    if json {
        print_json(&added)?;
    } else {
        println!(
            "Added agent {} (workspace {}; {} in the config)",
            added.id, added.workspace, added.key
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn rebound(done: &agent_roster::Rebound, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_json(done)?;
        return Ok(ExitCode::SUCCESS);
    }
    for b in &done.added {
        println!("Bound {} to {}", done.agent_id, b);
    }
    for b in &done.removed {
        println!("Unbound {} from {}", done.agent_id, b);
    }
    if done.added.is_empty() && done.removed.is_empty() {
        println!(
            "Nothing changed: {} has no such binding to add or remove",
            done.agent_id
        );
    }
    Ok(ExitCode::SUCCESS)
}
