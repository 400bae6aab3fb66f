//! `almanac hooks list|info|check|enable|disable`.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::JsonFlag;
use super::output::{print_json, warn};
use crate::app::App;
use crate::hooks::{HookStatus, HooksReport};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum HooksCommand {
    /// List internal hooks with their status (-v adds why one does not run)
    List {
        /// Only hooks that run
        #[arg(long)]
        eligible: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show one hook: events, handler, requirements
    Info {
        /// Hook name
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Summarise what runs, what is off and what failed to load
    Check(JsonFlag),
    /// Turn a hook on (hooks.internal.entries.<name>.enabled = true)
    Enable {
        /// Hook name
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Turn a hook off (hooks.internal.entries.<name>.enabled = false)
    Disable {
        /// Hook name
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

pub(super) fn run(cmd: HooksCommand, app: &App, verbose: bool) -> anyhow::Result<ExitCode> {
    match cmd {
        HooksCommand::List { eligible, json } => list(app, eligible, json.json, verbose),
        HooksCommand::Info { name, json } => info(app, &name, json.json),
        HooksCommand::Check(json) => check(app, json.json),
        HooksCommand::Enable { name, json } => switch(app, &name, true, json.json),
        HooksCommand::Disable { name, json } => switch(app, &name, false, json.json),
    }
}

fn print_warnings(report: &HooksReport) {
    for w in &report.warnings {
        warn(w);
    }
    for f in &report.failures {
        warn(format_args!(
            "hook `{}` not loaded ({}): {}",
            f.name,
            f.file_path.display(),
            f.reason
        ));
    }
}

fn status_mark(h: &HookStatus) -> &'static str {
    match h.gate.status() {
        "ready" => "✓ ready",
        "disabled" => "⏸ disabled",
        "missing" => "✗ missing",
        _ => "⚠ unsupported",
    }
}

fn list(app: &App, eligible: bool, as_json: bool, verbose: bool) -> anyhow::Result<ExitCode> {
    let report = app.hooks_report();
    let shown: Vec<&HookStatus> = report
        .hooks
        .iter()
        .filter(|h| !eligible || h.gate.runnable)
        .collect();
    if as_json {
        print_json(&json!({
            "internalEnabled": report.internal_enabled,
            "hooks": shown,
            "failures": report.failures,
            "warnings": report.warnings,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_warnings(&report);
    if shown.is_empty() {
        println!("No hooks found.");
        return Ok(ExitCode::SUCCESS);
    }
    let ready = report.hooks.iter().filter(|h| h.gate.runnable).count();
    println!("Hooks ({ready}/{} ready)", report.hooks.len());
    if !report.internal_enabled {
        println!("Internal hooks are off: almanac config set hooks.internal.enabled true");
    }
    for h in shown {
        println!(
            "{:<14} {} {:<24} {:<10} {}",
            status_mark(h),
            h.hook.emoji.as_deref().unwrap_or("🪝"),
            h.hook.name,
            h.hook.source.short(),
            h.hook.events.join(", ")
        );
        if verbose {
            for reason in &h.gate.reasons {
                println!("    {reason}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn info(app: &App, name: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let report = app.hooks_report();
    let Some(h) = report.find(name) else {
        if as_json {
            print_json(&json!({ "error": "not found", "hook": name }))?;
            return Ok(ExitCode::from(1));
        }
        anyhow::bail!("hook `{name}` not found; `almanac hooks list` shows them all");
    };
    if as_json {
        print_json(h)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} {} {}",
        h.hook.emoji.as_deref().unwrap_or("🪝"),
        h.hook.name,
        status_mark(h)
    );
    if !h.hook.description.is_empty() {
        println!("{}", h.hook.description);
    }
    println!("Source: {}", h.hook.source.short());
    println!("Path: {}", app.host.tilde(&h.hook.file_path));
    println!("Events: {}", h.hook.events.join(", "));
    match &h.hook.handler {
        crate::hooks::Handler::Executable { path } => {
            println!("Handler: {}", app.host.tilde(path));
        }
        crate::hooks::Handler::Unsupported { path } => {
            println!("Handler: {} (unsupported)", app.host.tilde(path));
        }
        crate::hooks::Handler::Missing => println!("Handler: none"),
        crate::hooks::Handler::Builtin { .. } => println!("Handler: built in"),
    }
    for reason in &h.gate.reasons {
        println!("  ✗ {reason}");
    }
    for d in &h.hook.diagnostics {
        println!("  ! {d}");
    }
    Ok(ExitCode::SUCCESS)
}

fn check(app: &App, as_json: bool) -> anyhow::Result<ExitCode> {
    let report = app.hooks_report();
    let names = |f: &dyn Fn(&HookStatus) -> bool| -> Vec<&str> {
        report
            .hooks
            .iter()
            .filter(|h| f(h))
            .map(|h| h.hook.name.as_str())
            .collect()
    };
    let ready = names(&|h| h.gate.runnable);
    let disabled = names(&|h| !h.gate.enabled);
    let missing = names(&|h| h.gate.enabled && !h.gate.eligible);
    let unsupported = names(&|h| h.gate.enabled && h.gate.eligible && !h.gate.runnable);
    if as_json {
        print_json(&json!({
            "internalEnabled": report.internal_enabled,
            "summary": {
                "total": report.hooks.len(),
                "ready": ready.len(),
                "disabled": disabled.len(),
                "missingRequirements": missing.len(),
                "unsupported": unsupported.len(),
                "failed": report.failures.len(),
            },
            "ready": ready,
            "disabled": disabled,
            "missingRequirements": missing,
            "unsupported": unsupported,
            "failures": report.failures,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_warnings(&report);
    println!("Hooks Status Check");
    println!(
        "Internal hooks: {}",
        if report.internal_enabled { "on" } else { "off" }
    );
    println!("Total: {}", report.hooks.len());
    println!("✓ Ready: {}", ready.len());
    println!("⏸ Disabled: {}", disabled.len());
    println!("✗ Missing requirements: {}", missing.len());
    println!("⚠ Unsupported handler: {}", unsupported.len());
    if !ready.is_empty() {
        println!("Ready to run: {}", ready.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

fn switch(app: &App, name: &str, enabled: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    let outcome = app.set_hook_enabled(name, enabled)?;
    if as_json {
        print_json(&outcome)?;
    } else {
        println!(
            "{} hook `{name}` ({} = {enabled} in {})",
            if enabled { "Enabled" } else { "Disabled" },
            outcome.key,
            outcome.path.display()
        );
        if enabled && !app.config.config.hooks.internal.enabled {
            println!("Internal hooks are off: almanac config set hooks.internal.enabled true");
        }
    }
    Ok(ExitCode::SUCCESS)
}
