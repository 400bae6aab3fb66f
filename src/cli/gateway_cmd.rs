//! `almanac gateway run|status|stop|install|uninstall`.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::{print_json, warn};
use crate::app::gateway;
use crate::app::gateway_install::{self, Action, ServiceOutcome};
use crate::app::{App, GlobalOptions};
use crate::entry::{self, RunOptions};
use crate::gateway_client::install::{self, Platform};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum GatewayCommand {
    /// Run the gateway in the foreground (stop with Ctrl-C or SIGTERM)
    Run(RunArgs),
    /// Whether the gateway runs, where, and the state of its components
    Status(JsonFlag),
    /// Stop the running gateway (waits for it to finish)
    Stop(JsonFlag),
    /// Write the per-user service that runs the gateway (a systemd user unit, a launchd agent)
    Install(InstallArgs),
    /// Remove the service file `gateway install` wrote
    Uninstall(InstallArgs),
}

impl GatewayCommand {
    /// Whether the command needs the config file (status and stop need
    /// only the state directory).
    pub(super) fn reads_config(&self) -> bool {
        !matches!(self, GatewayCommand::Status(_) | GatewayCommand::Stop(_))
    }
}

#[derive(Debug, Args)]
pub(super) struct InstallArgs {
    /// Show what would be written or removed, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub json: JsonFlag,
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// TCP port [default: gateway.port, 18789]
    #[arg(long)]
    port: Option<u16>,
    /// Where to listen: loopback, lan or an IP address [default: gateway.bind]
    #[arg(long, value_name = "loopback|lan|IP")]
    bind: Option<String>,
}

pub(super) fn run(
    cmd: GatewayCommand,
    app: App,
    options: &GlobalOptions,
) -> anyhow::Result<ExitCode> {
    match cmd {
        GatewayCommand::Run(args) => run_gateway(args, app, options),
        GatewayCommand::Status(flag) => status(&app, flag),
        GatewayCommand::Stop(flag) => stop(&app, flag),
        GatewayCommand::Install(args) => {
            let outcome = gateway_install::install(&app, Platform::current()?, args.dry_run)?;
            print(&outcome, args.json, print_install)?;
            Ok(ExitCode::SUCCESS)
        }
        GatewayCommand::Uninstall(args) => {
            let outcome = gateway_install::uninstall(&app, Platform::current()?, args.dry_run)?;
            print(&outcome, args.json, print_uninstall)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_gateway(args: RunArgs, app: App, options: &GlobalOptions) -> anyhow::Result<ExitCode> {
    let opts = RunOptions {
        port: args.port,
        bind: args.bind,
        answer_command: Some(super::forward::answer),
    };
    let host = app.host.clone();
    entry::run(app, options.clone(), opts, move |info| {
        let token = match &info.token_file {
            Some(path) => format!("token in {}", host.tilde(path)),
            None => format!("token from {}", info.token_source),
        };
        // A wildcard address is said as it is bound, with where this
        // machine reaches it.
        let url = info.base_url();
        let address = match info.address.as_str() {
            "0.0.0.0" | "::" => format!("{}:{}, reached here at {url}", info.address, info.port),
            _ => url,
        };
        println!("gateway listening on {address} (pid {}, {token})", info.pid);
    })?;
    println!("gateway stopped");
    Ok(ExitCode::SUCCESS)
}

fn status(app: &App, flag: JsonFlag) -> anyhow::Result<ExitCode> {
    let status = gateway::status(app)?;
    if flag.json {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !status.running {
        println!("gateway: not running");
        return Ok(ExitCode::SUCCESS);
    }
    let Some(pid) = status.pid else {
        println!(
            "gateway: running, but its gateway.json is missing or unreadable (it writes it again within a minute)"
        );
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "gateway: running (pid {pid}) on {}:{}, up {} s",
        status.address.as_deref().unwrap_or(""),
        status.port.unwrap_or_default(),
        status.uptime_ms.unwrap_or_default() / 1000
    );
    for c in &status.components {
        let error = c
            .last_error
            .as_deref()
            .map(|e| format!("  last error: {e}"))
            .unwrap_or_default();
        println!(
            "  {:<16} {:<11} restarts {}{error}",
            c.name, c.state, c.restarts
        );
    }
    match status
        .next_heartbeat_at_ms
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
    {
        Some(at) => println!(
            "next heartbeat: {}",
            at.to_zoned_datetime(app.user_time_zone())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
        ),
        None => println!("next heartbeat: none (off)"),
    }
    if let Some(m) = &status.memory {
        let mb = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        println!(
            "memory: {:.1} MB resident, {:.1} MB its own",
            mb(m.rss_bytes),
            mb(m.private_bytes)
        );
    }
    if let Some(m) = &status.memory_search {
        let left = m
            .without_vector
            .map(|n| format!(", {n} without a vector"))
            .unwrap_or_default();
        println!(
            "memory search: {} answered, {} note(s) embedded{left}; provider {}, {} vector(s) in memory",
            m.searches,
            m.embedded,
            if m.provider_loaded {
                "loaded"
            } else {
                "not loaded"
            },
            m.vectors_in_memory
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn stop(app: &App, flag: JsonFlag) -> anyhow::Result<ExitCode> {
    let stopped = gateway::stop(app)?;
    if flag.json {
        print_json(&stopped)?;
    } else if !stopped.was_running {
        println!("not running");
    } else if stopped.stopped {
        println!("gateway stopped (pid {})", stopped.pid.unwrap_or_default());
    } else {
        println!(
            "gateway (pid {}) is still stopping",
            stopped.pid.unwrap_or_default()
        );
    }
    Ok(if stopped.stopped {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print(
    outcome: &ServiceOutcome,
    json: JsonFlag,
    text: fn(&ServiceOutcome),
) -> anyhow::Result<()> {
    if !outcome.not_carried.is_empty() {
        warn(format!(
            "the service will not see these settings from this command's flags or environment: {}; put them in the config file",
            outcome.not_carried.join(", ")
        ));
    }
    if json.json {
        print_json(outcome)
    } else {
        text(outcome);
        Ok(())
    }
}

fn print_install(outcome: &ServiceOutcome) {
    let path = outcome.path.display();
    println!("{} {path}:", outcome.platform.describe());
    println!();
    print!("{}", outcome.text.as_deref().unwrap_or_default());
    println!();
    match (outcome.change, outcome.dry_run) {
        (Action::Unchanged, _) => {
            println!("already installed: {path} is unchanged; nothing written")
        }
        (Action::Replaced, true) => {
            println!("dry run: nothing written (the file would be replaced)")
        }
        (_, true) => println!("dry run: nothing written"),
        (Action::Replaced, false) => println!("replaced the earlier file at {path}"),
        (_, false) => println!("wrote {path}"),
    }
    println!("{}", install::keys_note(outcome.platform));
    print_steps(outcome);
}

fn print_uninstall(outcome: &ServiceOutcome) {
    let path = outcome.path.display();
    if outcome.change == Action::Absent {
        println!("not installed: there is no {path}");
        return;
    }
    let verb = if outcome.dry_run {
        "would remove"
    } else {
        "removed"
    };
    println!("{verb} {} {path}", outcome.platform.describe());
    for link in &outcome.links {
        println!("{verb} its enablement link {}", link.display());
    }
    if outcome.dry_run {
        println!("dry run: nothing removed");
    }
    print_steps(outcome);
}

fn print_steps(outcome: &ServiceOutcome) {
    if outcome.next_steps.is_empty() {
        return;
    }
    println!("Next steps (almanac runs none of them):");
    for step in &outcome.next_steps {
        println!("  {step}");
    }
}
