//! `almanac gateway install|uninstall`.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::{print_json, warn};
use crate::app::App;
use crate::app::gateway_install::{self, Action, ServiceOutcome};
use crate::gateway::install::{self, Platform};

#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Write the per-user service that runs the gateway (a systemd user unit, a launchd agent)
    Install(InstallArgs),
    /// Remove the service file `gateway install` wrote
    Uninstall(InstallArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Show what would be written or removed, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub json: JsonFlag,
}

pub(crate) fn run(cmd: GatewayCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        GatewayCommand::Install(args) => {
            let outcome = gateway_install::install(app, Platform::current()?, args.dry_run)?;
            print(&outcome, args.json, print_install)?;
        }
        GatewayCommand::Uninstall(args) => {
            let outcome = gateway_install::uninstall(app, Platform::current()?, args.dry_run)?;
            print(&outcome, args.json, print_uninstall)?;
        }
    }
    Ok(ExitCode::SUCCESS)
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
