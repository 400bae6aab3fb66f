//! `almanac tasks [list] | show | audit | maintenance`: the background task
//! ledger.

use std::process::ExitCode;
use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::print_json;
use super::values;
use crate::app::App;
use crate::app::tasks;
use crate::tasks::{
    Audit, AuditCode, Maintenance, Runtime, Severity, Status, Task, TaskFilter, UnknownValue,
};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct TasksArgs {
    #[command(subcommand)]
    pub command: Option<TasksCommand>,
    #[command(flatten)]
    pub list: ListArgs,
}

#[derive(Debug, Args, Clone)]
pub(super) struct ListArgs {
    /// Only tasks in this status
    #[arg(long, value_parser = one_of::<Status>(Status::NAMES))]
    status: Option<Status>,
    /// Only tasks of this runtime
    #[arg(long, value_parser = one_of::<Runtime>(Runtime::NAMES))]
    runtime: Option<Runtime>,
    /// At most N tasks, newest first
    #[arg(long, value_name = "N", value_parser = values::task_limit)]
    limit: Option<usize>,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum TasksCommand {
    /// List tasks, newest first (the default)
    List(ListArgs),
    /// Show one task
    Show {
        /// Task id (or its first characters), run id or session key
        lookup: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Cancel a task through the running gateway (a queued one at once, a running one is stopped)
    Cancel {
        /// Task id (or its first characters), run id or session key
        lookup: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Check the ledger: stale, lost, undelivered and inconsistent tasks
    Audit {
        /// Only findings of this severity
        #[arg(long, value_parser = one_of::<Severity>(Severity::NAMES))]
        severity: Option<Severity>,
        /// Only findings with this code
        #[arg(long, value_parser = one_of::<AuditCode>(AuditCode::NAMES))]
        code: Option<AuditCode>,
        /// List at most N findings (the summary counts them all)
        #[arg(long, value_name = "N", value_parser = values::task_limit)]
        limit: Option<usize>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Preview the sweeper's step (lost tasks, cleanup times, pruning)
    Maintenance {
        /// Perform what the preview shows
        #[arg(long)]
        apply: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// A flag value from one of the ledger's vocabularies, the names offered
/// in help and completions.
fn one_of<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr<Err = UnknownValue> + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

pub(super) fn run(args: TasksArgs, app: &App) -> anyhow::Result<ExitCode> {
    match args.command.unwrap_or(TasksCommand::List(args.list)) {
        TasksCommand::List(list) => {
            let filter = TaskFilter {
                status: list.status,
                runtime: list.runtime,
            };
            let found = tasks::list(app, filter, list.limit)?;
            if list.json.json {
                print_json(&found)?;
            } else {
                print_list(&found.tasks);
            }
        }
        TasksCommand::Show { lookup, json } => {
            let task = tasks::show(app, &lookup)?;
            if json.json {
                print_json(&task)?;
            } else {
                print_task(app, &task);
            }
        }
        TasksCommand::Cancel { lookup, json } => {
            let answer = crate::app::gateway::cancel_task(app, &lookup)?;
            if json.json {
                print_json(&answer)?;
            } else {
                let id = answer["task"]["taskId"].as_str().unwrap_or("");
                match answer["result"].as_str() {
                    Some("cancelled") => println!("Cancelled {}.", crate::tasks::short_id(id)),
                    Some("requested") => println!(
                        "Cancel requested: {} is stopping.",
                        crate::tasks::short_id(id)
                    ),
                    _ => println!(
                        "{} had already ended ({}).",
                        crate::tasks::short_id(id),
                        answer["task"]["status"].as_str().unwrap_or("")
                    ),
                }
            }
        }
        TasksCommand::Audit {
            severity,
            code,
            limit,
            json,
        } => {
            let audit = tasks::audit(app, severity, code, limit)?;
            if json.json {
                print_json(&audit)?;
            } else {
                print_audit(&audit);
            }
        }
        TasksCommand::Maintenance { apply, json } => {
            let done = tasks::maintenance(app, apply)?;
            if json.json {
                print_json(&done)?;
            } else {
                print_maintenance(&done);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn kind(task: &Task) -> String {
    match &task.task_kind {
        Some(k) => format!("{}/{k}", task.runtime),
        None => task.runtime.to_string(),
    }
}

fn summary(task: &Task) -> &str {
    [
        &task.terminal_summary,
        &task.error,
        &task.progress_summary,
        &task.label,
    ]
    .into_iter()
    .find_map(|t| t.as_deref())
    .unwrap_or(&task.task)
}

fn print_list(list: &[Task]) {
    if list.is_empty() {
        println!("No tasks.");
        return;
    }
    let rows: Vec<[String; 6]> = list
        .iter()
        .map(|t| {
            [
                t.short_id().to_string(),
                one_line(&kind(t), 28),
                t.status.to_string(),
                t.delivery_status.to_string(),
                one_line(t.run_id.as_deref().unwrap_or("-"), 32),
                one_line(summary(t), 60),
            ]
        })
        .collect();
    let header = ["Task", "Kind", "Status", "Delivery", "Run", "Summary"];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                out.push_str(cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
}

fn print_task(app: &App, t: &Task) {
    let field = |name: &str, value: &str| println!("{name:<15}{value}");
    let time = |name: &str, ms: Option<i64>| {
        if let Some(ms) = ms {
            field(name, &app.local_time(ms));
        }
    };
    let text = |name: &str, value: &Option<String>| {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            field(name, v);
        }
    };
    field("Task", &t.task_id);
    field("Kind", &kind(t));
    field("Status", t.status.as_str());
    if let Some(at) = t.cancel_requested_at {
        field("Cancel asked", &app.local_time(at));
    }
    field(
        "Delivery",
        &format!("{} (notify {})", t.delivery_status, t.notify_policy),
    );
    text("Label", &t.label);
    field("Text", &one_line(&t.task, 200));
    text("Run", &t.run_id);
    text("Source", &t.source_id);
    let requester = if t.requester_session_key.is_empty() {
        "-"
    } else {
        &t.requester_session_key
    };
    field("Requester", &format!("{requester} ({})", t.scope_kind));
    field("Owner", &t.owner_key);
    text("Agent", &t.agent_id);
    text("Child session", &t.child_session_key);
    text("Parent task", &t.parent_task_id);
    text("Parent flow", &t.parent_flow_id);
    if let Some(lane) = &t.lane_key {
        let place = t.lane_seq.map(|s| format!(" #{s}")).unwrap_or_default();
        field("Lane", &format!("{lane}{place}"));
    }
    time("Created", Some(t.created_at));
    time("Started", t.started_at);
    time("Ended", t.ended_at);
    time("Last event", t.last_event_at);
    time("Cleanup after", t.cleanup_after);
    if let Some(g) = t.generation {
        let lease = t
            .lease_until
            .map(|ms| format!(", lease until {}", app.local_time(ms)))
            .unwrap_or_default();
        field("Generation", &format!("{g}{lease}"));
    }
    text("Progress", &t.progress_summary);
    text("Summary", &t.terminal_summary);
    if let Some(outcome) = t.terminal_outcome {
        field("Outcome", outcome.as_str());
    }
    text("Error", &t.error);
    if let Some(request) = &t.request {
        field("Request", &one_line(&request.to_string(), 200));
    }
}

fn print_audit(audit: &Audit) {
    if audit.summary.total == 0 {
        println!("No findings.");
        return;
    }
    let width = audit
        .findings
        .iter()
        .map(|f| f.code.as_str().len())
        .max()
        .unwrap_or(0);
    for f in &audit.findings {
        println!(
            "{:<5}  {:<width$}  {}  {}",
            f.severity.as_str(),
            f.code.as_str(),
            crate::tasks::short_id(&f.task_id),
            one_line(&f.detail, 100)
        );
    }
    let s = &audit.summary;
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let shown = if audit.findings.len() < s.total {
        format!(" ({} shown)", audit.findings.len())
    } else {
        String::new()
    };
    println!(
        "{}: {}, {}{shown}",
        plural(s.total, "finding", "findings"),
        plural(s.errors, "error", "errors"),
        plural(s.warnings, "warning", "warnings"),
    );
}

fn print_maintenance(m: &Maintenance) {
    if m.reconciled + m.cleanup_stamped + m.pruned == 0 {
        println!("Nothing to do.");
        return;
    }
    let tasks = |n: usize| format!("{n} task{}", if n == 1 { "" } else { "s" });
    if m.applied {
        println!(
            "Marked {} lost, stamped a cleanup time on {}, pruned {}.",
            tasks(m.reconciled),
            tasks(m.cleanup_stamped),
            tasks(m.pruned)
        );
    } else {
        println!(
            "Would mark {} lost, stamp a cleanup time on {}, prune {}.",
            tasks(m.reconciled),
            tasks(m.cleanup_stamped),
            tasks(m.pruned)
        );
        println!("Run `almanac tasks maintenance --apply` to do it.");
    }
}
