//! `almanac gateway run|status|stop`.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::print_json;
use crate::app::gateway;
use crate::app::{App, GlobalOptions};
use crate::gateway::RunOptions;

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Run the gateway in the foreground (stop with Ctrl-C or SIGTERM)
    Run(RunArgs),
    /// Whether the gateway runs, where, and the state of its components
    Status(JsonFlag),
    /// Stop the running gateway (waits for it to finish)
    Stop(JsonFlag),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// TCP port [default: gateway.port, 18789]
    #[arg(long)]
    port: Option<u16>,
    /// Where to listen: loopback, lan or an IP address [default: gateway.bind]
    #[arg(long, value_name = "loopback|lan|IP")]
    bind: Option<String>,
}

pub fn run(cmd: GatewayCommand, app: App, options: &GlobalOptions) -> anyhow::Result<ExitCode> {
    match cmd {
        GatewayCommand::Run(args) => run_gateway(args, app, options),
        GatewayCommand::Status(flag) => status(&app, flag),
        GatewayCommand::Stop(flag) => stop(&app, flag),
    }
}

fn run_gateway(args: RunArgs, app: App, options: &GlobalOptions) -> anyhow::Result<ExitCode> {
    let opts = RunOptions {
        port: args.port,
        bind: args.bind,
    };
    let host = app.host.clone();
    gateway::run(app, options.clone(), opts, move |info| {
        let token = match &info.token_file {
            Some(path) => format!("token in {}", host.tilde(path)),
            None => format!("token from {}", info.token_source),
        };
        println!(
            "gateway listening on {} (pid {}, {token})",
            info.base_url(),
            info.pid
        );
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
    println!(
        "gateway: running (pid {}) on {}:{}, up {} s",
        status.pid.unwrap_or_default(),
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
