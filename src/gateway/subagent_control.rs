//! Control of subagent runs, wherever it is asked for: the `subagents`
//! tool (`list`, `kill`, `steer` over the caller's descendants), the
//! `/subagents …` and `/stop` commands a user types (in `agent` or a chat
//! channel, after that channel's access check), and the control API
//! behind `almanac subagents` (every run).
//!
//! Invariants: a kill stops the run and every run below it (its
//! children, theirs, …), each recorded `cancelled` and announced once by
//! its own run; a run still waiting for a slot is stopped where it
//! waits. `/stop` and `tasks cancel` cascade the same way. Steering goes
//! only to a run alive now, and is read before its next model request. A
//! target names nothing outside the asker's scope. Every action first
//! waits for the intake to record the spawns acknowledged so far
//! ([`spawns_recorded`]): a run its parent was told is accepted is
//! listed, and stopped by `kill all` or `/stop`.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use crate::app::subagent_command::{Command, USAGE};
use crate::app::subagents::{self as view, Runs};
use crate::tasks::{Status, Task, TaskFilter};

/// How long an action waits for the intake: a stalled feeder must not
/// hold it forever (it then acts on what the ledger holds).
const FEED_WAIT: Duration = Duration::from_secs(2);

/// Waits until every spawn acknowledged so far is in the ledger. A spawn
/// is acknowledged once in the intake log, and the feeder records its
/// run a batch later (up to a tenth of a second under a stream).
pub(crate) async fn spawns_recorded(shared: &Shared) {
    shared.intake.caught_up(FEED_WAIT).await;
}

/// The runs in `scope` (every run when `None`). Blocking.
fn runs_in(shared: &Shared, scope: Option<&str>) -> Result<Runs, String> {
    let now = shared.host.now_ms();
    shared
        .tasks
        .with(|l| view::runs(l, scope, now))
        .map_err(|e| e.to_string())
}

/// Stops the task `id`: a running turn cancelled (it records itself
/// `cancelled`), a queued one cancelled where it waits.
fn stop_task(shared: &Shared, id: &str) {
    let now = shared.host.now_ms();
    if let Err(err) = shared.tasks.cancel(id, now) {
        tracing::warn!(task = %id, %err, "cannot cancel a task");
    }
    shared.subagents.stop_waiting(id);
}

/// Stops every run alive below `session`; how many.
fn stop_below(shared: &Shared, all: &[Task], session: &str) -> usize {
    let below = view::descendants(all, session);
    for task in &below {
        stop_task(shared, &task.task_id);
    }
    below.len()
}

/// After `tasks cancel` of `task`: stops the runs below it (those of its
/// child session, or of the session whose turn it was). Blocking.
pub(crate) fn cascade(shared: &Shared, task: &Task) -> usize {
    let session = task
        .child_session_key
        .clone()
        .or_else(|| task.lane_key.clone())
        .unwrap_or_else(|| task.requester_session_key.clone());
    if session.is_empty() {
        return 0;
    }
    match runs_in(shared, None) {
        Ok(runs) => stop_below(shared, &runs.all, &session),
        Err(err) => {
            tracing::warn!(%err, "cannot look for the runs below a cancelled task");
            0
        }
    }
}

/// Kills the runs `target` names in `scope`, and what is below each.
/// Blocking.
pub(crate) fn kill(shared: &Shared, scope: Option<&str>, target: &str) -> Result<Value, String> {
    let runs = runs_in(shared, scope)?;
    let found = view::resolve(&runs, target).map_err(|e| e.to_string())?;
    if let [only] = found.as_slice()
        && only.status.is_terminal()
    {
        return Err(view::TargetError::Ended {
            run: view::run_id(only).to_string(),
            status: only.status.as_str().to_string(),
        }
        .to_string());
    }
    let mut killed = Vec::new();
    let mut below = 0;
    for task in found.iter().filter(|t| t.status.is_active()) {
        stop_task(shared, &task.task_id);
        if let Some(child) = &task.child_session_key {
            below += stop_below(shared, &runs.all, child);
        }
        killed.push(view::run_id(task).to_string());
    }
    Ok(json!({"status": "killed", "killed": killed, "alsoStopped": below}))
}

/// Stops the running turn of `session` and every run below it: `(turns,
/// runs)` stopped. Blocking.
pub(crate) fn stop_session(shared: &Shared, session: &str) -> Result<(usize, usize), String> {
    let filter = TaskFilter {
        status: Some(Status::Running),
        runtime: None,
    };
    let running = shared
        .tasks
        .with(|l| l.list(filter, None))
        .map_err(|e| e.to_string())?;
    let turns: Vec<&Task> = running
        .iter()
        .filter(|t| t.lane_key.as_deref() == Some(session))
        .collect();
    for task in &turns {
        stop_task(shared, &task.task_id);
    }
    let runs = runs_in(shared, None)?;
    Ok((turns.len(), stop_below(shared, &runs.all, session)))
}

/// Steers the run `target` names in `scope`: `message` reaches its
/// running turn before its next model request. Blocking.
pub(crate) fn steer(
    shared: &Shared,
    scope: Option<&str>,
    target: &str,
    message: &str,
    from: &str,
) -> Result<Value, String> {
    let message = message.trim();
    if message.is_empty() {
        return Err("the steering message is empty".into());
    }
    if message.chars().count() > crate::agents::spawn::MAX_TASK_CHARS {
        return Err(format!(
            "the steering message has more than {} characters",
            crate::agents::spawn::MAX_TASK_CHARS
        ));
    }
    let runs = runs_in(shared, scope)?;
    let task = view::alive_one(&runs, target).map_err(|e| e.to_string())?;
    let child = task.child_session_key.clone().unwrap_or_default();
    shared
        .subagents
        .steer(&child, format!("[Steering from {from}]\n{message}"));
    Ok(json!({"status": "steered", "runId": view::run_id(task), "childSessionKey": child}))
}

/// A new message to the child `target` names (its next turn). Blocking.
pub(crate) fn send(
    shared: &Shared,
    scope: Option<&str>,
    target: &str,
    message: &str,
) -> Result<Value, String> {
    let runs = runs_in(shared, scope)?;
    let task = view::resolve_one(&runs, target).map_err(|e| e.to_string())?;
    super::subagent_runs::follow_up(shared, task, message)
}

/// One run with its place in the list, its transcript and how its
/// announce went. Blocking.
pub(crate) fn info(
    shared: &Shared,
    scope: Option<&str>,
    target: &str,
) -> Result<view::RunInfo, String> {
    let runs = runs_in(shared, scope)?;
    let task = view::resolve_one(&runs, target).map_err(|e| e.to_string())?;
    Ok(view::info(
        &shared.engine.app(),
        &runs,
        task,
        shared.host.now_ms(),
    ))
}

/// A run's log. Blocking.
pub(crate) fn log(
    shared: &Shared,
    scope: Option<&str>,
    target: &str,
    limit: usize,
    tools: bool,
) -> Result<view::RunLog, String> {
    let runs = runs_in(shared, scope)?;
    let task = view::resolve_one(&runs, target).map_err(|e| e.to_string())?;
    view::log(&shared.engine.app(), task, limit, tools).map_err(|e| format!("{e:#}"))
}

/// The list of `scope`'s runs. Blocking.
pub(crate) fn list(shared: &Shared, scope: Option<&str>) -> Result<Vec<view::RunView>, String> {
    let runs = runs_in(shared, scope)?;
    Ok(view::views(&runs.listed, shared.host.now_ms()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolArgs {
    action: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The `subagents` tool of the turn of `caller_session`. Blocking.
pub(crate) fn tool(
    shared: &Arc<Shared>,
    caller_session: &str,
    args: &Value,
) -> Result<Value, String> {
    let args: ToolArgs =
        serde_json::from_value(args.clone()).map_err(|e| format!("subagents arguments: {e}"))?;
    let scope = Some(caller_session);
    let target = args.target.as_deref().unwrap_or("");
    match args.action.as_str() {
        "list" => Ok(json!({"runs": list(shared, scope)?})),
        "kill" => kill(shared, scope, target),
        "steer" => steer(
            shared,
            scope,
            target,
            args.message.as_deref().unwrap_or(""),
            caller_session,
        ),
        other => Err(format!("action `{other}` is not one of list, kill, steer")),
    }
}

/// Runs the command a user typed in `session` (agent `agent_id`): the
/// text to answer them with.
pub(crate) async fn run_command(
    shared: &Arc<Shared>,
    agent_id: &str,
    session: &str,
    command: Command,
) -> String {
    spawns_recorded(shared).await;
    let working = shared.clone();
    let (agent_id, session) = (agent_id.to_string(), session.to_string());
    let answer = shared
        .engine
        .blocking(move || command_text(&working, &agent_id, &session, command))
        .await;
    match answer {
        Ok(Ok(text)) => text,
        Ok(Err(err)) => err,
        Err(err) => format!("{err:#}"),
    }
}

fn command_text(
    shared: &Arc<Shared>,
    agent_id: &str,
    session: &str,
    command: Command,
) -> Result<String, String> {
    let scope = Some(session);
    let app = shared.engine.app();
    Ok(match command {
        Command::Help => format!("usage: {USAGE}"),
        Command::List => view::list_text(&list(shared, scope)?, &app),
        Command::Stop => match stop_session(shared, session)? {
            (0, 0) => "Nothing was running.".to_string(),
            (turns, runs) => format!("Stopped {turns} turn(s) and {runs} subagent run(s)."),
        },
        Command::Kill(target) => {
            let done = kill(shared, scope, &target)?;
            let killed = done["killed"].as_array().map_or(0, Vec::len);
            let below = done["alsoStopped"].as_u64().unwrap_or(0);
            format!("Killed {killed} subagent run(s), and {below} below them.")
        }
        Command::Info(target) => view::info_text(&info(shared, scope, &target)?, &app),
        Command::Log {
            target,
            limit,
            tools,
        } => view::log_text(&log(shared, scope, &target, limit, tools)?, 0),
        Command::Steer { target, message } => {
            let done = steer(shared, scope, &target, &message, "the user")?;
            format!(
                "Steered {}: it reads your message before its next step.",
                short(&done)
            )
        }
        Command::Send { target, message } => {
            let done = send(shared, scope, &target, &message)?;
            format!(
                "Sent as run {}; its answer will be announced here.",
                short(&done)
            )
        }
        Command::Spawn {
            agent_id: child_agent,
            task,
            model,
            thinking,
        } => {
            let args =
                json!({"task": task, "agentId": child_agent, "model": model, "thinking": thinking});
            let args = strip_nulls(args);
            let done = super::subagent_runs::spawn(shared, agent_id, session, &args)?;
            format!(
                "Spawned run {} in {}; its result will be announced here.",
                short(&done),
                done["childSessionKey"].as_str().unwrap_or("")
            )
        }
    })
}

fn short(done: &Value) -> &str {
    crate::tasks::short_id(done["runId"].as_str().unwrap_or(""))
}

fn strip_nulls(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    value
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::app::gateway::GatewayPort;
    use crate::gateway::supervisor::Component;

    const TOKEN: &str = "t";
    const PARENT: &str = "agent:main:main";

    /// Spawns a child of the main session right after the feeder fed a
    /// batch (the feeder then holds the next one back for a while); its
    /// run id.
    pub(crate) async fn spawn_after_a_batch(shared: &Arc<Shared>, task: &str) -> String {
        shared.intake.caught_up(Duration::from_secs(5)).await;
        let port = crate::gateway::route::Port::of(shared);
        let accepted = port
            .spawn_subagent("main", PARENT, &json!({"task": task}))
            .unwrap();
        assert_eq!(accepted["status"], "accepted", "{accepted}");
        accepted["runId"].as_str().unwrap().to_string()
    }

    async fn listed_by_the_api(shared: &Arc<Shared>) -> usize {
        use crate::gateway::http::tests::{call, get};
        let router = crate::gateway::http::router(shared.clone());
        let (_, answer) = call(&router, get("/v1/subagents", Some(TOKEN))).await;
        answer["runs"].as_array().map_or(0, Vec::len)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_control_path_sees_the_spawns_acknowledged_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), TOKEN);
        let stop = tokio_util::sync::CancellationToken::new();
        let feeder = tokio::spawn(
            Arc::new(crate::gateway::intake::Feeder).start(shared.clone(), stop.clone()),
        );
        let port = crate::gateway::route::Port::of(&shared);

        spawn_after_a_batch(&shared, "one").await;
        assert_eq!(listed_by_the_api(&shared).await, 1, "the control API");

        spawn_after_a_batch(&shared, "two").await;
        let answer = port
            .control_subagents(PARENT, &json!({"action": "list"}))
            .await
            .unwrap();
        assert_eq!(
            answer["runs"].as_array().unwrap().len(),
            2,
            "the tool: {answer}"
        );

        spawn_after_a_batch(&shared, "three").await;
        // The commands typed in a chat (`/subagents list`, `/stop`, …).
        let listed = run_command(&shared, "main", PARENT, Command::List).await;
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with("#3 ") && l.ends_with("· three")),
            "a command: {listed}"
        );

        stop.cancel();
        feeder.await.unwrap().unwrap();
    }
}
