//! The command line: parses arguments, calls the library, prints results.
//!
//! Invariants (enforced by the architecture test):
//! * no business logic, SQL or file writes here: every command is a call
//!   into a subsystem followed by printing;
//! * every command that prints data accepts `--json`, with camelCase field
//!   names (Arka's `heartbeat status|history` keep Arka's shapes);
//! * exit codes: 0 success, 1 failure, 2 usage error or refusal by a gate
//!   or policy, decided by error type in one place ([`output`]);
//! * errors go to stderr as `error: <message>` followed by one
//!   `  caused by: <cause>` line per underlying cause (and a `  hint:`);
//! * every argument and flag has a help text.

mod agent_cmd;
mod agents_cmd;
mod config_cmd;
mod cron_cmd;
mod forward;
mod gateway_cmd;
mod heartbeat_cmd;
mod hooks_cmd;
mod logging;
mod mcp_cmd;
mod memory_cmd;
mod outbox_cmd;
mod output;
mod pairing_cmd;
mod session_memory_cmd;
mod skills_cmd;
mod status_cmd;
mod subagents_cmd;
mod system_cmd;
mod tasks_cmd;
mod values;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::app::{App, GlobalOptions};
use crate::host::{self, Host};
use crate::paths::PathFlags;

pub(crate) use output::UsageError;

#[derive(Debug, Parser)]
#[command(
    name = "almanac",
    version,
    about = "Memory, time and skills core of a personal AI agent",
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct GlobalArgs {
    /// State directory [default: ~/.almanac; env: ALMANAC_STATE_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<String>,
    /// Use the profile NAME: state in ~/.almanac-NAME [env: ALMANAC_PROFILE]
    #[arg(long, global = true, value_name = "NAME")]
    profile: Option<String>,
    /// Agent workspace, e.g. ~/.openclaw/workspace [env: ALMANAC_WORKSPACE]
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<String>,
    /// Config file [default: <state dir>/config.json5; env: ALMANAC_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<String>,
    /// Override a config key for this command (repeatable)
    #[arg(long = "set", global = true, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    set: Vec<(String, String)>,
    /// Pretend the current time is TIME (RFC 3339) [env: ALMANAC_NOW]
    #[arg(long, global = true, value_name = "TIME")]
    now: Option<String>,
    /// Log to stderr: -v info, -vv debug, -vvv trace [env: ALMANAC_LOG]
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

impl GlobalArgs {
    fn options(&self) -> GlobalOptions {
        GlobalOptions {
            paths: PathFlags {
                state_dir: self.state_dir.clone(),
                profile: self.profile.clone(),
                workspace: self.workspace.clone(),
                config: self.config.clone(),
            },
            config_values: self.set.clone(),
        }
    }
}

// The commands' own arguments are built only for the command that runs
// (or whose help is shown): `defer` on each group's enum. Building every
// command's arguments at every start was most of the cost of the short
// commands. This enum itself is not deferred, so the generated `help`
// subcommand (and its completions) still lists every nested command.
#[derive(Debug, Subcommand)]
enum Command {
    /// Show the resolved profile, paths and the state of each subsystem
    Status(JsonFlag),
    /// Read and edit config.json5
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// OpenClaw-style markdown session memory (Arka's commands)
    #[command(name = "session-memory", alias = "session_memory")]
    SessionMemory(ForAgent<session_memory_cmd::SessionMemoryCommand>),
    /// The activity heartbeat (heartbeat.json)
    #[command(subcommand)]
    Heartbeat(heartbeat_cmd::HeartbeatCommand),
    /// Memory search and recall: ranked search, files, entities, fact packs
    Memory(ForAgent<memory_cmd::MemoryCommand>),
    /// The agents and the channels bound to each: list, add, bind, unbind
    #[command(subcommand)]
    Agents(agents_cmd::AgentsCommand),
    /// Chat senders waiting to be let in: list, approve
    #[command(subcommand)]
    Pairing(pairing_cmd::PairingCommand),
    /// Run one agent turn (--message), or show its prompt (agent prompt)
    Agent(agent_cmd::AgentArgs),
    /// List sessions, or show one
    Sessions(agent_cmd::SessionsArgs),
    /// Skills: list, check, catalog, routing, running, security scan
    #[command(alias = "plugins")]
    Skills(ForAgent<skills_cmd::SkillsCommand>),
    /// Internal hooks: list, info, check, enable, disable
    #[command(subcommand)]
    Hooks(hooks_cmd::HooksCommand),
    /// The gateway daemon: run it, see how it is, stop it
    #[command(subcommand)]
    Gateway(gateway_cmd::GatewayCommand),
    /// System events for a session's next turn
    System(ForAgent<system_cmd::SystemCommand>),
    /// The background task ledger: list, show, audit, maintenance
    Tasks(tasks_cmd::TasksArgs),
    /// Background runs turns spawned: list, info, log, kill, steer
    Subagents(subagents_cmd::SubagentsArgs),
    /// Results of unattended turns delivered to the outbox: list, tail
    #[command(subcommand)]
    Outbox(outbox_cmd::OutboxCommand),
    /// Scheduled jobs: add, edit, remove, list, enable, disable, their runs, run one now; next fire times
    #[command(subcommand)]
    Cron(cron_cmd::CronCommand),
    /// almanac's memory, skills and time as an MCP server (mcp serve)
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// Print a shell completion script
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

impl Command {
    /// Whether the command may embed text with the local sentence model
    /// (a memory search, a turn's memory tools, the gateway): only those
    /// pay for fixing its thread count ([`host::pin_compute_threads`]).
    fn may_run_the_sentence_model(&self) -> bool {
        match self {
            Command::Memory(_)
            | Command::Agent(_)
            | Command::Gateway(_)
            | Command::System(_)
            | Command::Cron(_)
            | Command::Mcp(_) => true,
            Command::Status(_)
            | Command::Config(_)
            | Command::Agents(_)
            | Command::Pairing(_)
            | Command::SessionMemory(_)
            | Command::Heartbeat(_)
            | Command::Sessions(_)
            | Command::Skills(_)
            | Command::Hooks(_)
            | Command::Tasks(_)
            | Command::Subagents(_)
            | Command::Outbox(_)
            | Command::Completions { .. } => false,
        }
    }
}

// The `--json` flag shared by every command that prints data. (A plain
// comment: a doc comment here would become the help text of the
// commands that take only this flag, whose arguments are built late.)
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct JsonFlag {
    /// Print machine-readable JSON
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got `{text}`")),
    }
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    output::restore_default_sigpipe();
    if let Some(code) = forward::answered_by_gateway() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { output::REFUSED } else { 0 });
        }
    };
    // Still one thread here (clap starts none).
    if cli.command.may_run_the_sentence_model() {
        crate::host::pin_compute_threads();
    }
    let result = run(cli);
    // Hook handlers fired by the command end (each at most its timeout)
    // before the process does.
    crate::hooks::wait_pending();
    match result {
        Ok(code) => code,
        Err(err) => {
            output::print_error(&err);
            ExitCode::from(output::exit_code_for(&err))
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut host = Host::from_process()?;
    if let Some(now) = &cli.global.now {
        host.set_now(host::parse_now(now)?);
    }
    logging::init_from_flags(cli.global.verbose, host.raw_var("ALMANAC_LOG"))?;
    let options = cli.global.options();
    match cli.command {
        Command::Status(flag) => status_cmd::run(&options, &host, flag),
        Command::Config(cmd) => config_cmd::run(cmd, &options, host),
        Command::SessionMemory(ForAgent { agent, command }) => {
            session_memory_cmd::run(command, &for_agent(load_app(&options, host)?, agent)?)
        }
        Command::Heartbeat(cmd) => heartbeat_cmd::run(cmd, &load_app(&options, host)?),
        Command::Memory(ForAgent { agent, command }) => {
            memory_cmd::run(command, &for_agent(load_app(&options, host)?, agent)?)
        }
        Command::Agents(cmd) => {
            // `--workspace` names the added agent's workspace here, not
            // the default agent's.
            let mut without = options.clone();
            let workspace = without.paths.workspace.take();
            agents_cmd::run(cmd, &load_app(&without, host)?, workspace.as_deref())
        }
        Command::Pairing(cmd) => pairing_cmd::run(cmd, &load_app(&options, host)?),
        Command::Agent(args) => agent_cmd::run(args, &load_app(&options, host)?),
        Command::Sessions(args) => agent_cmd::sessions(args, &load_app(&options, host)?),
        Command::Skills(ForAgent { agent, command }) => {
            let app = for_agent(load_app(&options, host)?, agent)?;
            skills_cmd::run(command, &app, cli.global.verbose > 0)
        }
        Command::Hooks(cmd) => {
            hooks_cmd::run(cmd, &load_app(&options, host)?, cli.global.verbose > 0)
        }
        Command::Gateway(cmd) => {
            let app = if cmd.reads_config() {
                load_app(&options, host)?
            } else {
                load_app_despite_config(&options, host)?
            };
            gateway_cmd::run(cmd, app, &options)
        }
        Command::System(ForAgent { agent, command }) => {
            system_cmd::run(command, &for_agent(load_app(&options, host)?, agent)?)
        }
        Command::Tasks(args) => tasks_cmd::run(args, &load_app(&options, host)?),
        Command::Subagents(args) => subagents_cmd::run(args, &load_app(&options, host)?),
        Command::Outbox(cmd) => outbox_cmd::run(cmd, &load_app(&options, host)?),
        Command::Cron(cmd) => cron_cmd::run(cmd, &options, host),
        Command::Mcp(cmd) => mcp_cmd::run(cmd, load_app(&options, host)?),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "almanac", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A command group that works for one agent (`--agent`, on any of its
/// subcommands).
#[derive(Debug, clap::Args)]
struct ForAgent<C: Subcommand> {
    /// The agent whose workspace, memory and sessions to use [default: the default agent]
    #[arg(long, global = true, value_name = "ID")]
    agent: Option<String>,
    #[command(subcommand)]
    command: C,
}

/// `app` for the agent `--agent` asked for.
fn for_agent(app: App, agent: Option<String>) -> anyhow::Result<App> {
    match agent.as_deref() {
        Some(id) => app.for_agent(Some(id)),
        None => Ok(app),
    }
}

/// Loads the app for a command and prints config warnings once.
fn load_app(options: &GlobalOptions, host: Host) -> anyhow::Result<App> {
    let app = App::load(options, host)?;
    logging::init_from_config(app.config.config.logging.level);
    output::print_config_warnings(&app.config);
    Ok(app)
}

/// [`load_app`] for a command that needs only the state directory: a
/// config file that does not load is reported and left out, so a half-
/// edited file never keeps anyone from asking after or stopping the
/// gateway.
fn load_app_despite_config(options: &GlobalOptions, host: Host) -> anyhow::Result<App> {
    match load_app(options, host.clone()) {
        Ok(app) => Ok(app),
        Err(err) => match App::load_without_config_file(options, host) {
            Ok(app) => {
                output::warn(format!("{err:#}; going on without the config file"));
                Ok(app)
            }
            Err(_) => Err(err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments without a help text (or stating a default clap prints
    /// too), as `command path: argument`.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path}: {}", arg.get_id()));
            }
            // clap prints a default itself: a help text that also states
            // it shows it twice.
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            if !arg.get_default_values().is_empty() && help.contains("[default:") {
                out.push(format!("{path}: {} (its default twice)", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                out.push(format!("{path} {}: (no description)", sub.get_name()));
            }
            undocumented(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_command_argument_and_flag_is_described() {
        // Built: a command's own arguments are added only then (`defer`).
        let mut cmd = Cli::command();
        cmd.clone().debug_assert();
        cmd.build();
        let mut missing = Vec::new();
        undocumented(&cmd, "almanac", &mut missing);
        assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
    }

    /// Every command's description as `path: about`, as far as the tree
    /// has been built.
    fn descriptions(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            let sub_path = format!("{path} {}", sub.get_name());
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            out.push(format!("{sub_path}: {about}"));
            descriptions(sub, &sub_path, out);
        }
    }

    #[test]
    fn a_commands_description_is_the_same_before_and_after_its_arguments_are_built() {
        // The parent's help lists a command by the description it has before
        // its arguments are built (late, `defer`); building them must not
        // replace it (an `Args` struct's doc comment would).
        let unbuilt = Cli::command();
        let mut before = Vec::new();
        descriptions(&unbuilt, "almanac", &mut before);
        let mut built = unbuilt.clone();
        built.build();
        let mut after = Vec::new();
        descriptions(&built, "almanac", &mut after);
        let changed: Vec<&String> = before.iter().filter(|d| !after.contains(d)).collect();
        assert!(changed.is_empty(), "changed when built:\n{changed:#?}");
        assert!(before.len() > 70, "{} commands", before.len());
    }
}
