//! Subagent runs as the ledger records them: the numbered list
//! `subagents list` shows (the runs alive, then those ended in the last
//! 30 minutes), a target (`#N`, a run id or its first characters, a
//! label, a child session key, or `all`) resolved to runs, and a run's
//! log from its transcript. Read-only: stopping and steering are the
//! gateway's.
//!
//! A scope (a session key) narrows everything to that session's
//! descendants: its children, theirs, and so on.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::App;
use crate::tasks::{DeliveryStatus, Ledger, Runtime, Status, Task, TaskError, TaskFilter};

/// How long an ended run stays in the list.
pub(crate) const RECENT_MS: i64 = 30 * 60 * 1000;
/// The most runs looked through, newest first.
const LOOKED_AT: usize = 5000;
/// Messages `log` shows unless told.
pub(crate) const LOG_LIMIT: usize = 20;

/// Why a target names no run to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("give a target: a run id, its label, #N from `subagents list`, or all")]
    Empty,
    #[error("no subagent run matches `{0}` (see `subagents list`)")]
    NotFound(String),
    #[error("`{target}` matches several runs ({runs}); give more of a run id")]
    Ambiguous { target: String, runs: String },
    #[error("subagent run {run} already ended ({status})")]
    Ended { run: String, status: String },
    #[error("no subagent run is alive")]
    NoneAlive,
    #[error("`{0}` names several runs: name one")]
    Several(String),
}

/// One run as the list shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunView {
    /// Its number in the list (`#N`).
    pub index: usize,
    pub run_id: String,
    pub task_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub agent_id: String,
    /// `queued` while it waits for a free slot (`maxConcurrent`).
    pub status: Status,
    pub parent_session_key: String,
    pub child_session_key: String,
    pub task: String,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// From its start to its end, or to now while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub delivery_status: DeliveryStatus,
}

/// The runs in a scope.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    /// Every run in the scope, oldest first.
    pub all: Vec<Task>,
    /// Those the list shows, numbered from 1 in this order (oldest first).
    pub listed: Vec<Task>,
}

/// A run's id as its commands name it.
pub(crate) fn run_id(task: &Task) -> &str {
    task.run_id.as_deref().unwrap_or(&task.task_id)
}

/// The runs of the ledger in `scope` (all when `None`).
pub(crate) fn runs(ledger: &Ledger, scope: Option<&str>, now_ms: i64) -> Result<Runs, TaskError> {
    let filter = TaskFilter {
        status: None,
        runtime: Some(Runtime::Subagent),
    };
    let mut all = ledger.list(filter, Some(LOOKED_AT))?;
    all.reverse();
    Ok(select(all, scope, now_ms))
}

/// [`runs`] over tasks already read (oldest first).
pub(crate) fn select(all: Vec<Task>, scope: Option<&str>, now_ms: i64) -> Runs {
    let all = match scope {
        None => all,
        Some(scope) => {
            // A parent is recorded before its children: one pass in
            // creation order finds every level.
            let mut family: HashSet<String> = HashSet::from([scope.to_string()]);
            let mut kept = Vec::new();
            for task in all {
                if family.contains(&task.requester_session_key) {
                    if let Some(child) = &task.child_session_key {
                        family.insert(child.clone());
                    }
                    kept.push(task);
                }
            }
            kept
        }
    };
    let listed = all
        .iter()
        .filter(|t| t.status.is_active() || t.ended_at.is_some_and(|e| now_ms - e <= RECENT_MS))
        .cloned()
        .collect();
    Runs { all, listed }
}

/// The listed runs, numbered.
pub(crate) fn views(listed: &[Task], now_ms: i64) -> Vec<RunView> {
    listed
        .iter()
        .enumerate()
        .map(|(i, t)| RunView {
            index: i + 1,
            run_id: run_id(t).to_string(),
            task_id: t.task_id.clone(),
            label: t.label.clone().filter(|l| l != "subagent"),
            agent_id: t.agent_id.clone().unwrap_or_default(),
            status: t.status,
            parent_session_key: t.requester_session_key.clone(),
            child_session_key: t.child_session_key.clone().unwrap_or_default(),
            task: t.task.clone(),
            created_at: t.created_at,
            started_at: t.started_at,
            ended_at: t.ended_at,
            runtime_ms: t
                .started_at
                .map(|s| t.ended_at.unwrap_or(now_ms).saturating_sub(s).max(0)),
            error: t.error.clone(),
            delivery_status: t.delivery_status,
        })
        .collect()
}

/// The runs `target` names: `all` (the listed runs alive), `#N` or `N`
/// (the list's Nth), or one run by run id, task id, child session key,
/// label, or the first characters (4 or more) of a run or task id.
pub(crate) fn resolve<'a>(runs: &'a Runs, target: &str) -> Result<Vec<&'a Task>, TargetError> {
    let target = target.trim();
    if target.is_empty() {
        return Err(TargetError::Empty);
    }
    if target.eq_ignore_ascii_case("all") {
        let alive: Vec<&Task> = runs
            .listed
            .iter()
            .filter(|t| t.status.is_active())
            .collect();
        return if alive.is_empty() {
            Err(TargetError::NoneAlive)
        } else {
            Ok(alive)
        };
    }
    // `#3` is the list's third run; a bare `3` too, unless the list is
    // shorter: then digits are the start of a run id (`43142444…`).
    let (number, marked) = match target.strip_prefix('#') {
        Some(number) => (number, true),
        None => (target, false),
    };
    if let Ok(n) = number.parse::<usize>() {
        let listed = n.checked_sub(1).and_then(|i| runs.listed.get(i));
        match listed {
            Some(t) => return Ok(vec![t]),
            None if marked || target.len() < 4 => {
                return Err(TargetError::NotFound(target.to_string()));
            }
            None => {}
        }
    }
    let exact: Vec<&Task> = runs
        .all
        .iter()
        .filter(|t| {
            run_id(t) == target
                || t.task_id == target
                || t.child_session_key.as_deref() == Some(target)
        })
        .collect();
    if !exact.is_empty() {
        return Ok(exact);
    }
    // A label names the newest run that has it.
    if let Some(t) = runs
        .all
        .iter()
        .rev()
        .find(|t| t.label.as_deref() == Some(target))
    {
        return Ok(vec![t]);
    }
    let started: Vec<&Task> = if target.len() >= 4 {
        runs.all
            .iter()
            .filter(|t| run_id(t).starts_with(target) || t.task_id.starts_with(target))
            .collect()
    } else {
        Vec::new()
    };
    match started.len() {
        0 => Err(TargetError::NotFound(target.to_string())),
        1 => Ok(started),
        _ => Err(TargetError::Ambiguous {
            target: target.to_string(),
            runs: started
                .iter()
                .map(|t| crate::tasks::short_id(run_id(t)).to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The one run `target` names (alive or not).
pub(crate) fn resolve_one<'a>(runs: &'a Runs, target: &str) -> Result<&'a Task, TargetError> {
    match resolve(runs, target)?.as_slice() {
        [task] => Ok(task),
        _ => Err(TargetError::Several(target.to_string())),
    }
}

/// One run as `subagents info` shows it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RunInfo {
    pub run: RunView,
    pub transcript: Option<PathBuf>,
    pub summary: Option<String>,
}

/// `task` with its place in `runs`' list, its transcript and summary.
pub(crate) fn info(app: &App, runs: &Runs, task: &Task, now_ms: i64) -> RunInfo {
    let mut run = views(std::slice::from_ref(task), now_ms).remove(0);
    run.index = runs
        .listed
        .iter()
        .position(|t| t.task_id == task.task_id)
        .map_or(0, |i| i + 1);
    RunInfo {
        run,
        transcript: transcript(app, task),
        summary: task.terminal_summary.clone(),
    }
}

/// [`RunInfo`] as text, a field a line.
pub(crate) fn info_text(info: &RunInfo, app: &App) -> String {
    let run = &info.run;
    let mut lines = vec![
        format!("run {} ({})", run.run_id, run.status.as_str()),
        format!("task: {}", run.task),
        format!("agent: {}", run.agent_id),
        format!("session: {}", run.child_session_key),
        format!("parent: {}", run.parent_session_key),
    ];
    if let Some(label) = &run.label {
        lines.push(format!("label: {label}"));
    }
    lines.push(format!("created: {}", app.local_time(run.created_at)));
    for (name, at) in [("started", run.started_at), ("ended", run.ended_at)] {
        if let Some(at) = at {
            lines.push(format!("{name}: {}", app.local_time(at)));
        }
    }
    if let Some(error) = &run.error {
        lines.push(format!("error: {error}"));
    }
    lines.push(format!("announce: {}", run.delivery_status.as_str()));
    if let Some(path) = &info.transcript {
        lines.push(format!("transcript: {}", app.host.tilde(path)));
    }
    lines.join("\n")
}

/// A run's log as text, a message a line; `width` pads the role.
pub(crate) fn log_text(log: &RunLog, width: usize) -> String {
    if log.messages.is_empty() {
        return "Its transcript holds no messages (yet).".to_string();
    }
    log.messages
        .iter()
        .map(|m| {
            format!(
                "{:>width$}: {}",
                m["role"].as_str().unwrap_or(""),
                message_line(m)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one run `target` names that is still alive.
pub(crate) fn alive_one<'a>(runs: &'a Runs, target: &str) -> Result<&'a Task, TargetError> {
    if target.trim().eq_ignore_ascii_case("all") {
        return Err(TargetError::NotFound(target.to_string()));
    }
    let found = resolve(runs, target)?;
    let task = found[0];
    if task.status.is_terminal() {
        return Err(TargetError::Ended {
            run: run_id(task).to_string(),
            status: task.status.as_str().to_string(),
        });
    }
    Ok(task)
}

/// The runs alive below `session`: its children, theirs, and so on.
pub(crate) fn descendants<'a>(all: &'a [Task], session: &str) -> Vec<&'a Task> {
    let mut family: HashSet<&str> = HashSet::from([session]);
    let mut found = Vec::new();
    for task in all {
        if family.contains(task.requester_session_key.as_str()) {
            if let Some(child) = &task.child_session_key {
                family.insert(child.as_str());
            }
            if task.status.is_active() {
                found.push(task);
            }
        }
    }
    found
}

/// Where the transcript of `task`'s session is, while its session has a
/// row (an archived one is under `<sessions>/archive/`).
pub(crate) fn transcript(app: &App, task: &Task) -> Option<PathBuf> {
    let key = task.child_session_key.as_deref()?;
    let app = app.for_agent(task.agent_id.as_deref()).ok()?;
    let sessions = app.sessions(None);
    let (map, _) = sessions.store().load();
    let entry = crate::session::store::SessionEntry::from_value(map.get(key)?)?;
    Some(sessions.transcript_path(&entry))
}

/// A run's transcript as `subagents log` shows it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunLog {
    pub run_id: String,
    pub child_session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
    pub messages: Vec<Value>,
}

/// The last `limit` messages of `task`'s session; with `tools`, its tool
/// calls and their results too.
pub(crate) fn log(app: &App, task: &Task, limit: usize, tools: bool) -> anyhow::Result<RunLog> {
    let key = task.child_session_key.clone().unwrap_or_default();
    let view = super::sessions::session_view(app, task.agent_id.as_deref(), &key)?;
    let (transcript, mut messages) = match view {
        Some(view) => (Some(view.transcript), view.messages),
        None => (None, Vec::new()),
    };
    if !tools {
        messages = messages.into_iter().filter_map(without_tools).collect();
    }
    let skip = messages.len().saturating_sub(limit);
    Ok(RunLog {
        run_id: run_id(task).to_string(),
        child_session_key: key,
        transcript,
        messages: messages.into_iter().skip(skip).collect(),
    })
}

/// A message without its tool calls; `None` for a tool result, or for an
/// answer that was only tool calls.
fn without_tools(mut message: Value) -> Option<Value> {
    if message["role"] == "toolResult" {
        return None;
    }
    let blocks = message["content"].as_array_mut()?;
    blocks.retain(|b| b["type"] != "toolCall");
    (!blocks.is_empty()).then_some(message)
}

/// A transcript message as one line: its text, tool calls in brackets.
pub(crate) fn message_line(m: &Value) -> String {
    let text: Vec<String> = m["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| match b["type"].as_str() {
                    Some("text") => b["text"].as_str().unwrap_or("").to_string(),
                    Some("toolCall") => format!(
                        "[call {} {}]",
                        b["name"].as_str().unwrap_or(""),
                        b["arguments"]
                    ),
                    Some(other) => format!("[{other}]"),
                    None => String::new(),
                })
                .collect()
        })
        .unwrap_or_else(|| vec![m["summary"].as_str().unwrap_or("").to_string()]);
    text.join(" ").replace('\n', " ")
}

/// The list as text, one run a line.
pub(crate) fn list_text(views: &[RunView], app: &App) -> String {
    if views.is_empty() {
        return "No subagent runs (alive or ended in the last 30 minutes).".to_string();
    }
    let mut out = String::new();
    for v in views {
        let runtime = v.runtime_ms.map_or(String::new(), |ms| {
            format!(" · {:.1} s", ms as f64 / 1000.0)
        });
        out.push_str(&format!(
            "#{} {} {} [{}]{runtime} · {} · {}\n",
            v.index,
            crate::tasks::short_id(&v.run_id),
            v.label.as_deref().unwrap_or(&v.agent_id),
            v.status.as_str(),
            app.local_time(v.created_at),
            v.task,
        ));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
#[path = "subagents_tests.rs"]
mod tests;
