//! `almanac agent --message TEXT` (one turn), `almanac agent prompt`, and
//! `almanac sessions [show KEY]`.

use std::future::Future;
use std::io::{BufRead, IsTerminal, Write};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::{UsageError, print_json, warn};
use crate::agent::policy::{Approval, ApprovalRequest, Approver, NoApprover};
use crate::app::App;
use crate::trigger::TurnRequest;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct AgentArgs {
    #[command(subcommand)]
    pub command: Option<AgentCommand>,
    #[command(flatten)]
    pub turn: TurnArgs,
}

#[derive(Debug, Args, Clone)]
pub(super) struct TurnArgs {
    /// The message (`/new` or `/reset` starts a new session)
    #[arg(long, short = 'm')]
    pub message: Option<String>,
    /// Session key (default: the agent's main session)
    #[arg(long)]
    pub session_key: Option<String>,
    /// Agent id [default: main]
    #[arg(long)]
    pub agent: Option<String>,
    /// Model as provider/model [default: agents.defaults.model]
    #[arg(long)]
    pub model: Option<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum AgentCommand {
    /// Print what the model would get for a message: system prompt, tools, conversation
    Prompt(TurnArgs),
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum SessionsCommand {
    /// One session: its entry and conversation
    Show {
        /// Session key, e.g. agent:main:main
        key: String,
        /// Agent id [default: main]
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Debug, Args)]
pub(super) struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// Agent id [default: main]
    #[arg(long)]
    pub agent: Option<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// Asks on the terminal (stderr, then a line from stdin) whether a command
/// may run.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        let question = format!(
            "\nThe model wants to run:\n  {}\n({})\nRun it? [y/N] ",
            super::output::terminal_safe(&request.command),
            super::output::terminal_safe(&request.reason)
        );
        Box::pin(async move {
            let asked = tokio::task::spawn_blocking(move || {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(question.as_bytes());
                let _ = err.flush();
                let mut answer = String::new();
                match std::io::stdin().lock().read_line(&mut answer) {
                    Ok(_) if matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") => {
                        Approval::Approved
                    }
                    Ok(_) => Approval::Refused,
                    Err(_) => Approval::Unavailable,
                }
            });
            asked.await.unwrap_or(Approval::Unavailable)
        })
    }
}

fn request(args: &TurnArgs) -> TurnRequest {
    TurnRequest {
        message: args.message.clone().unwrap_or_default(),
        session_key: args.session_key.clone(),
        agent: args.agent.clone(),
        model: args.model.clone(),
        channel: Some("cli".to_string()),
        ..TurnRequest::default()
    }
}

pub(super) fn run(args: AgentArgs, app: &App) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(AgentCommand::Prompt(turn)) => {
            let view = crate::entry::prompt_view(app, &request(&turn))?;
            if turn.json.json {
                print_json(&view)?;
            } else {
                println!(
                    "# System prompt ({} tokens estimated with the conversation)\n",
                    view.estimated_tokens
                );
                println!("{}", view.system);
                println!("# Tools");
                for t in &view.tools {
                    println!("- {}", t.name);
                }
                println!("\n# Conversation ({} message(s))", view.messages.len());
                for m in &view.messages {
                    println!("{}", serde_json::to_string(m)?);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let turn = args.turn;
            if turn.message.as_deref().is_none_or(|m| m.trim().is_empty()) {
                return Err(UsageError::wrap(
                    "give a message with --message TEXT (or use `agent prompt`)",
                ));
            }
            // Commands needing approval are asked about on the terminal;
            // without one, asking means refusing.
            let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
            let approver: Arc<dyn Approver> = if terminal {
                Arc::new(TerminalApprover)
            } else {
                Arc::new(NoApprover)
            };
            let done = crate::entry::turn(app, request(&turn), approver)?;
            done.warnings.iter().for_each(warn);
            if let Some(stopped) = &done.stopped {
                warn(stopped);
            }
            if turn.json.json {
                print_json(&done.json)?;
            } else if !done.silent {
                println!("{}", done.reply.trim_end());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub(super) fn sessions(args: SessionsArgs, app: &App) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(SessionsCommand::Show { key, agent, json }) => {
            show_session(app, agent.as_deref(), &key, json.json)
        }
        None => list_sessions(app, args.agent.as_deref(), args.json.json),
    }
}

/// `sessions show KEY`: the entry and the conversation, one line a message.
fn show_session(app: &App, agent: Option<&str>, key: &str, json: bool) -> anyhow::Result<ExitCode> {
    let Some(view) = crate::app::sessions::session_view(app, agent, key)? else {
        if json {
            print_json(&serde_json::json!({"error": "not found", "key": key}))?;
        } else {
            println!("No session {key}.");
        }
        return Ok(ExitCode::FAILURE);
    };
    if json {
        print_json(&view)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} → {}",
        view.key,
        view.entry["sessionId"].as_str().unwrap_or("")
    );
    println!("transcript: {}", app.host.tilde(&view.transcript));
    for m in &view.messages {
        let role = m["role"].as_str().unwrap_or("");
        println!("{role:>10}: {}", crate::app::subagents::message_line(m));
    }
    view.diagnostics.iter().for_each(warn);
    Ok(ExitCode::SUCCESS)
}

/// `sessions`: every session of the agent.
fn list_sessions(app: &App, agent: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let app = app.for_agent(agent)?;
    let sessions = app.sessions(None);
    let (list, warnings) = sessions.list();
    warnings.iter().for_each(warn);
    if json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|(key, e)| {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                v["key"] = serde_json::Value::String(key.clone());
                v
            })
            .collect();
        print_json(
            &serde_json::json!({"path": sessions.store().path, "count": rows.len(), "sessions": rows}),
        )?;
    } else if list.is_empty() {
        println!("No sessions.");
    } else {
        println!("{:<40} {:<38} {:>8} Model", "Key", "Session", "Tokens");
        for (key, e) in &list {
            println!(
                "{key:<40} {:<38} {:>8} {}",
                e.session_id,
                e.total_tokens,
                e.model.as_deref().unwrap_or("-")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
