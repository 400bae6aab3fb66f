//! `almanac skills list|info|check|prompt|match|run|scan`.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde::Serialize;
use serde_json::{Value, json};

use super::JsonFlag;
use super::output::{print_json, warn};
use crate::app::App;
use crate::app::skills::{self as app_skills, RefusedRun, RunOutcome};
use crate::child;
use crate::skills::catalog::compact_home;
use crate::skills::commands;
use crate::skills::gates::Missing;
use crate::skills::types::SkillFormat;
use crate::skills::{LoadFailure, SkillStatus, SkillsReport, SourceKind, route, scan};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum SkillsCommand {
    /// List skills with their status (-v adds what is missing and why)
    List {
        /// Only skills that can be used now
        #[arg(long)]
        eligible: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show one skill: details, requirements, install options
    Info {
        /// Skill name (or skill key)
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Summarise what is ready, missing, disabled or failed to load
    Check(JsonFlag),
    /// Print the skills catalog exactly as the model gets it
    Prompt(JsonFlag),
    /// Route a command line to a skill by its name or triggers
    Match {
        /// The command line to route, e.g. "say hello to bob"
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        /// Exit with status 1 when no skill matches
        #[arg(long)]
        exit_code: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Run a skill (plugins run their entry; instruction skills print it)
    Run {
        /// Skill name (or skill key)
        name: String,
        /// Arguments passed to the skill as they are
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Security-scan a skill folder before installing it
    Scan {
        /// The skill folder to scan
        dir: PathBuf,
        /// Accept critical findings (an install would go ahead)
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// Writes a skill's output to the terminal as it comes.
struct Passthrough;

impl child::Sink for Passthrough {
    fn output(&mut self, stream: child::Stream, bytes: &[u8]) {
        let _ = match stream {
            child::Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
            child::Stream::Stderr => {
                let mut err = std::io::stderr().lock();
                err.write_all(bytes).and_then(|()| err.flush())
            }
        };
    }
}

fn skill_run_result(
    app: &App,
    name: &str,
    ran: Result<RunOutcome, RefusedRun>,
) -> anyhow::Result<ExitCode> {
    let limits = &app.config.config.skills.run;
    match ran {
        Ok(RunOutcome::Print(text)) => {
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
        Ok(RunOutcome::Ran(done)) => {
            if done.truncated {
                warn(format!(
                    "{name}: output cut at {} bytes (skills.run.maxOutputBytes); the rest was dropped",
                    limits.max_output_bytes
                ));
            }
            if done.timed_out {
                return Err(anyhow::anyhow!(
                    "{name} did not finish within {} s and was stopped (skills.run.timeoutSec)",
                    limits.timeout_sec
                ));
            }
            Ok(ExitCode::from(done.exit_code().clamp(0, 255) as u8))
        }
        // Exit codes follow the error's type (refusals exit 2).
        Err(err) => Err(err.into()),
    }
}

pub(super) fn run(cmd: SkillsCommand, app: &App, verbose: bool) -> anyhow::Result<ExitCode> {
    match cmd {
        SkillsCommand::List { eligible, json } => list(app, eligible, json, verbose),
        SkillsCommand::Info { name, json } => info(app, &name, json),
        SkillsCommand::Check(flag) => check(app, flag),
        SkillsCommand::Prompt(flag) => prompt(app, flag),
        SkillsCommand::Match {
            text,
            exit_code,
            json,
        } => match_line(app, &text, exit_code, json),
        SkillsCommand::Run { name, args } => run_one(app, &name, &args),
        SkillsCommand::Scan { dir, force, json } => scan_folder(app, &dir, force, json),
    }
}

/// `skills list`: the table, or OpenClaw's report with `--json`.
fn list(app: &App, eligible: bool, json: JsonFlag, verbose: bool) -> anyhow::Result<ExitCode> {
    let (inputs, report) = app.skills_report();
    report.warnings.iter().for_each(warn);
    let rows: Vec<&SkillStatus> = report
        .skills
        .iter()
        .filter(|s| !eligible || s.eligibility.eligible)
        .collect();
    if json.json {
        let commands = command_names(&report);
        let no_missing = Missing::default();
        let mut skills: Vec<ListEntry> = rows.iter().map(|s| ListEntry::of(s, &commands)).collect();
        if !eligible {
            skills.extend(
                report
                    .failures
                    .iter()
                    .map(|f| ListEntry::failed(f, &no_missing)),
            );
        }
        print_json(&ListReport {
            workspace_dir: &inputs.workspace_dir,
            managed_skills_dir: &inputs.managed_dir,
            skills,
            warnings: &report.warnings,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() && (eligible || report.failures.is_empty()) {
        if eligible {
            println!("No eligible skills found. Run `almanac skills list` to see all skills.");
        } else {
            println!("No skills found.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let ready = report
        .skills
        .iter()
        .filter(|s| s.eligibility.eligible)
        .count();
    let total = report.skills.len() + report.failures.len();
    println!("Skills ({ready}/{total} ready)");
    println!(
        "{:<12} {:<28} {:<10} Description",
        "Status", "Skill", "Source"
    );
    for s in &rows {
        let e = &s.eligibility;
        let status = match e.status() {
            "ready" => "✓ ready",
            "disabled" => "⏸ disabled",
            "blocked" => "🚫 blocked",
            _ => "✗ missing",
        };
        let emoji = s.skill.emoji.as_deref().unwrap_or("📦");
        let mut description = one_line(&s.skill.description, 70);
        if !e.eligible {
            description.push_str(&format!(" [gated: {}]", e.reasons.join("; ")));
        }
        println!(
            "{:<12} {:<28} {:<10} {}",
            status,
            format!("{emoji} {}", s.skill.name),
            s.skill.source.short(),
            description
        );
        if verbose {
            println!(
                "{:<12} path: {}",
                "",
                compact_home(&s.skill.file_path, &inputs.homes)
            );
            if !e.missing.is_empty() {
                println!("{:<12} missing: {}", "", e.missing.summary());
            }
            for d in &s.skill.diagnostics {
                println!("{:<12} note: {d}", "");
            }
            for shadowed in &s.skill.shadows {
                println!(
                    "{:<12} replaces: {}",
                    "",
                    compact_home(shadowed, &inputs.homes)
                );
            }
        }
    }
    if !eligible {
        for f in &report.failures {
            println!(
                "{:<12} {:<28} {:<10} [failed to load: {}]",
                "⚠ error",
                f.name,
                f.source.short(),
                f.reason
            );
            if verbose {
                println!(
                    "{:<12} path: {}",
                    "",
                    compact_home(&f.file_path, &inputs.homes)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills info`: fails for a skill that failed to load or is unknown.
fn info(app: &App, name: &str, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let (inputs, report) = app.skills_report();
    let Some(s) = report.find(name) else {
        if let Some(f) = report.failures.iter().find(|f| f.name == name) {
            if json.json {
                print_json(&ListEntry::failed(f, &Missing::default()))?;
            } else {
                println!("⚠ {} failed to load: {}", f.name, f.reason);
                println!("path: {}", compact_home(&f.file_path, &inputs.homes));
            }
            return Ok(ExitCode::FAILURE);
        }
        if json.json {
            print_json(&json!({ "error": "not found", "skill": name }))?;
            return Ok(ExitCode::FAILURE);
        }
        anyhow::bail!("skill `{name}` not found; `almanac skills list` shows them all");
    };
    if json.json {
        let mut shown = skill_json(s, &command_names(&report));
        shown["install"] = json!(crate::skills::types::preferred_install(
            &s.skill.install,
            &app.config.config.skills.install,
        ));
        print_json(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let e = &s.eligibility;
    let status = match e.status() {
        "ready" => "✓ Ready",
        "disabled" => "⏸ Disabled",
        "blocked" => "🚫 Blocked by allowlist",
        _ => "✗ Missing requirements",
    };
    let sk = &s.skill;
    println!(
        "{} {} {status}",
        sk.emoji.as_deref().unwrap_or("📦"),
        sk.name
    );
    println!("{}", sk.description);
    println!();
    println!("Details:");
    println!("  Source: {}", sk.source.short());
    println!("  Path: {}", compact_home(&sk.file_path, &inputs.homes));
    if let Some(h) = &sk.homepage {
        println!("  Homepage: {h}");
    }
    if let Some(p) = &sk.primary_env {
        println!("  Primary env: {p}");
    }
    if let Some(v) = &sk.version {
        println!("  Version: {v}");
    }
    let cmds = commands::slash_commands(report.usable().into_iter().filter(|u| u.name == sk.name));
    if let Some(cmd) = cmds.first() {
        println!("  Slash command: /{}", cmd.name);
    }
    if !sk.triggers.is_empty() {
        println!("  Triggers: {}", sk.triggers.join(", "));
    }
    println!("Requirements:");
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    let list = |label: &str, items: &[String], missing: &[String]| {
        if !items.is_empty() {
            let parts: Vec<String> = items
                .iter()
                .map(|i| format!("{} {i}", mark(!missing.contains(i))))
                .collect();
            println!("  {label}: {}", parts.join(", "));
        }
    };
    list("Binaries", &sk.requires.bins, &e.missing.bins);
    list("Any binaries", &sk.requires.any_bins, &e.missing.any_bins);
    list("Environment", &sk.requires.env, &e.missing.env);
    list("Any environment", &sk.requires.env_any, &e.missing_env_any);
    list("Config", &sk.requires.config, &e.missing.config);
    list("OS", &sk.os, &e.missing.os);
    list("Permissions", &sk.permissions, &e.denied_permissions);
    if !e.reasons.is_empty() {
        println!("Gated: {}", e.reasons.join("; "));
    }
    if !e.eligible && !sk.install.is_empty() {
        println!("Install options:");
        let preferred =
            crate::skills::types::preferred_install(&sk.install, &app.config.config.skills.install);
        for i in &preferred {
            println!("  → {}", i.label);
        }
    }
    for d in &sk.diagnostics {
        println!("Note: {d}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills check`.
fn check(app: &App, flag: JsonFlag) -> anyhow::Result<ExitCode> {
    let (inputs, report) = app.skills_report();
    let summary = app_skills::check_summary(&report);
    let names = |f: &dyn Fn(&SkillStatus) -> bool| -> Vec<String> {
        report
            .skills
            .iter()
            .filter(|s| f(s))
            .map(|s| s.skill.name.clone())
            .collect()
    };
    let missing: Vec<&SkillStatus> = report
        .skills
        .iter()
        .filter(|s| {
            !s.eligibility.eligible
                && !s.eligibility.disabled
                && !s.eligibility.blocked_by_allowlist
        })
        .collect();
    if flag.json {
        print_json(&json!({
            "summary": summary,
            "eligible": names(&|s| s.eligibility.eligible),
            "disabled": names(&|s| s.eligibility.disabled),
            "blocked": names(&|s| s.eligibility.blocked_by_allowlist && !s.eligibility.disabled),
            "missingRequirements": missing.iter().map(|s| json!({
                "name": s.skill.name,
                "missing": s.eligibility.missing,
                "reasons": s.eligibility.reasons,
                "install": s.skill.install,
            })).collect::<Vec<_>>(),
            "failed": report.failures,
            "warnings": report.warnings,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("Skills Status Check");
    println!();
    println!("Total: {}", summary.total);
    println!("✓ Eligible: {}", summary.eligible);
    println!("⏸ Disabled: {}", summary.disabled);
    println!("🚫 Blocked by allowlist: {}", summary.blocked);
    println!("✗ Missing requirements: {}", summary.missing_requirements);
    println!("⚠ Failed to load: {}", summary.failed);
    let ready = names(&|s| s.eligibility.eligible);
    if !ready.is_empty() {
        println!();
        println!("Ready to use:");
        println!("  {}", ready.join(", "));
    }
    if !missing.is_empty() {
        println!();
        println!("Missing requirements:");
        for s in &missing {
            println!("  {} ({})", s.skill.name, s.eligibility.reasons.join("; "));
        }
    }
    if !report.failures.is_empty() {
        println!();
        println!("Failed to load:");
        for f in &report.failures {
            println!(
                "  {}: {} ({})",
                f.name,
                f.reason,
                compact_home(&f.file_path, &inputs.homes)
            );
        }
    }
    if !report.warnings.is_empty() {
        println!();
        println!("Warnings:");
        for w in &report.warnings {
            println!("  {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills prompt`.
fn prompt(app: &App, flag: JsonFlag) -> anyhow::Result<ExitCode> {
    let (inputs, report) = app.skills_report();
    let catalog = crate::skills::catalog(&report, &inputs);
    if flag.json {
        print_json(&catalog)?;
    } else if !catalog.prompt.is_empty() {
        println!("{}", catalog.prompt);
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills match`.
fn match_line(
    app: &App,
    text: &[String],
    exit_code: bool,
    json: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let (_, report) = app.skills_report();
    let usable = report.usable();
    let routed = route::route(&text.join(" "), &usable);
    if json.json {
        print_json(&json!({ "match": routed, "conflicts": report.conflicts }))?;
    } else if let Some(r) = &routed {
        println!("{}", r.line);
    }
    Ok(if exit_code && routed.is_none() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `skills run`.
fn run_one(app: &App, name: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    // Piped input reaches the skill; a terminal's does not (the
    // skill runs in a process group of its own).
    let stdin = if std::io::stdin().is_terminal() {
        child::Input::Null
    } else {
        child::Input::Inherit
    };
    let ran = app_skills::run_skill(app, name, args, stdin, &mut Passthrough);
    skill_run_result(app, name, ran)
}

/// `skills scan`: fails when a critical finding blocks the install.
fn scan_folder(app: &App, dir: &Path, force: bool, json: JsonFlag) -> anyhow::Result<ExitCode> {
    let dir = app.host.resolve_path(&dir.to_string_lossy());
    let report =
        scan::scan_dir(&dir).map_err(|e| anyhow::anyhow!("cannot scan {}: {e}", dir.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let blocked = report.blocks_install() && !force;
    if json.json {
        print_json(
            &json!({ "skill": name, "report": report, "blocked": blocked, "forced": force && report.blocks_install() }),
        )?;
    } else {
        println!(
            "Scanned {} file(s): {} critical, {} warn, {} info",
            report.scanned_files, report.critical, report.warn, report.info
        );
        for f in &report.findings {
            let sev = match f.severity {
                scan::Severity::Critical => "critical",
                scan::Severity::Warn => "warn",
                scan::Severity::Info => "info",
            };
            println!(
                "{sev:<9} {:<38} {}:{}  {}",
                f.rule_id,
                f.file.display(),
                f.line,
                f.message
            );
            println!("{:<9} {}", "", f.evidence);
        }
        let criticals: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.severity == scan::Severity::Critical)
            .map(|f| format!("{} ({}:{})", f.message, f.file.display(), f.line))
            .collect();
        if blocked {
            println!(
                "Skill \"{name}\" installation blocked: dangerous code patterns detected: {}",
                criticals.join("; ")
            );
        } else if report.blocks_install() {
            println!(
                "WARNING: Skill \"{name}\" installation forced despite dangerous code patterns: {}",
                criticals.join("; ")
            );
        } else if report.warn > 0 {
            println!(
                "Skill \"{name}\" has {} suspicious code pattern(s).",
                report.warn
            );
        }
    }
    Ok(if blocked {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::memory::snippet(&flat, max)
}

/// Slash-command name by skill name (eligible skills only).
fn command_names(report: &SkillsReport) -> std::collections::HashMap<String, String> {
    commands::slash_commands(report.usable())
        .into_iter()
        .map(|c| (c.skill_name, c.name))
        .collect()
}

/// `skills list --json`: OpenClaw's report shape.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListReport<'a> {
    workspace_dir: &'a Path,
    managed_skills_dir: &'a Path,
    skills: Vec<ListEntry<'a>>,
    warnings: &'a [String],
}

/// OpenClaw's `skills list --json` entry plus almanac's fields (the full
/// record is `skills info --json`). Borrowed and serialized directly: the
/// list of a large skill set is printed in a few milliseconds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListEntry<'a> {
    name: &'a str,
    description: &'a str,
    emoji: Option<&'a str>,
    eligible: bool,
    disabled: bool,
    blocked_by_allowlist: bool,
    source: SourceKind,
    bundled: bool,
    primary_env: Option<&'a str>,
    homepage: Option<&'a str>,
    file_path: &'a Path,
    skill_key: &'a str,
    missing: &'a Missing,
    parse_error: Option<&'a str>,
    format: Option<SkillFormat>,
    permissions: &'a [String],
    denied_permissions: &'a [String],
    missing_env_any: &'a [String],
    unsupported_checks: &'a [String],
    reasons: Cow<'a, [String]>,
    diagnostics: &'a [String],
    command: Option<&'a str>,
    shadows: &'a [PathBuf],
}

impl<'a> ListEntry<'a> {
    fn of(s: &'a SkillStatus, commands: &'a std::collections::HashMap<String, String>) -> Self {
        let (sk, e) = (&s.skill, &s.eligibility);
        ListEntry {
            name: &sk.name,
            description: &sk.description,
            emoji: sk.emoji.as_deref(),
            eligible: e.eligible,
            disabled: e.disabled,
            blocked_by_allowlist: e.blocked_by_allowlist,
            source: sk.source,
            bundled: sk.source == SourceKind::Bundled,
            primary_env: sk.primary_env.as_deref(),
            homepage: sk.homepage.as_deref(),
            file_path: &sk.file_path,
            skill_key: &sk.skill_key,
            missing: &e.missing,
            parse_error: None,
            format: Some(sk.format),
            permissions: &sk.permissions,
            denied_permissions: &e.denied_permissions,
            missing_env_any: &e.missing_env_any,
            unsupported_checks: &e.unsupported_checks,
            reasons: Cow::Borrowed(&e.reasons),
            diagnostics: &sk.diagnostics,
            command: commands.get(&sk.name).map(String::as_str),
            shadows: &sk.shadows,
        }
    }

    /// A skill that failed to load: listed, never eligible, with the reason.
    fn failed(f: &'a LoadFailure, no_missing: &'a Missing) -> Self {
        ListEntry {
            name: &f.name,
            description: "",
            emoji: None,
            eligible: false,
            disabled: false,
            blocked_by_allowlist: false,
            source: f.source,
            bundled: f.source == SourceKind::Bundled,
            primary_env: None,
            homepage: None,
            file_path: &f.file_path,
            skill_key: &f.name,
            missing: no_missing,
            parse_error: Some(&f.reason),
            format: None,
            permissions: &[],
            denied_permissions: &[],
            missing_env_any: &[],
            unsupported_checks: &[],
            reasons: Cow::Owned(vec![format!("failed to load: {}", f.reason)]),
            diagnostics: &[],
            command: None,
            shadows: &[],
        }
    }
}

/// The full record of one skill (`skills info --json`).
fn skill_json(s: &SkillStatus, commands: &std::collections::HashMap<String, String>) -> Value {
    let sk = &s.skill;
    let e = &s.eligibility;
    let command = commands.get(&sk.name);
    json!({
        "name": sk.name,
        "description": sk.description,
        "emoji": sk.emoji,
        "eligible": e.eligible,
        "disabled": e.disabled,
        "blockedByAllowlist": e.blocked_by_allowlist,
        "source": sk.source,
        "bundled": sk.source == crate::skills::SourceKind::Bundled,
        "primaryEnv": sk.primary_env,
        "homepage": sk.homepage,
        "filePath": sk.file_path,
        "baseDir": sk.base_dir,
        "skillKey": sk.skill_key,
        "always": sk.always,
        "missing": e.missing,
        "parseError": null,
        "requirements": sk.requires,
        "os": sk.os,
        "permissions": sk.permissions,
        "deniedPermissions": e.denied_permissions,
        "missingEnvAny": e.missing_env_any,
        "unsupportedChecks": e.unsupported_checks,
        "reasons": e.reasons,
        "diagnostics": sk.diagnostics,
        "install": sk.install,
        "format": sk.format,
        "version": sk.version,
        "triggers": sk.triggers,
        "userInvocable": sk.user_invocable,
        "disableModelInvocation": sk.disable_model_invocation,
        "exposure": commands::exposure(sk),
        "command": command,
        "dispatch": sk.dispatch,
        "run": sk.run,
        "shadows": sk.shadows,
    })
}
