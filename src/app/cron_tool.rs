//! The model's `cron` tool: OpenClaw's actions (`status`, `list`, `add`,
//! `update`, `remove`, `run`, `runs`, `wake`) with the parameters of its
//! RPCs, on the same functions as the `cron` commands
//! (`app/cron.rs`), for the turn that calls it ([`Requester::Agent`]).
//!
//! * `add` takes a job in OpenClaw's schema (`at` times are ISO-8601,
//!   UTC without an offset) and `contextMessages` (0 to 10): that many of
//!   the session's last messages are added to the reminder text after a
//!   `Recent context:` line, each cut at 220 characters and all of them
//!   at 700, the newest kept first.
//! * A change reaches a running gateway at once: in the gateway's own
//!   process through its [`GatewayPort`], elsewhere over its control
//!   API, as the commands do. `run` needs a gateway (an error result
//!   without one); `wake` queues its event in the main session's file
//!   when none runs (the next turn carries it; nothing wakes).
//! * The control API's client runs a runtime of its own, which cannot
//!   start on the thread that drives the turn's: it runs on a thread of
//!   its own, awaited without blocking the turn's runtime.
//!
//! Every failure is an error result for the model, never a failed turn.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::App;
use super::cron::{self as app_cron, JobChanged, Requester};
use super::gateway::GatewayPort;
use crate::agent::tools::Caller;
use crate::cron::job::{CronJob, PayloadKind};
use crate::cron::runlog::{self, RunQuery};
use crate::cron::{EnabledFilter, ListQuery, SortBy, SortDir, index};
use crate::provider::{Block, Message};

/// The most recent messages `contextMessages` may ask for.
pub(crate) const CONTEXT_MESSAGES_MAX: u64 = 10;
/// The longest one context line's message, in characters.
pub(crate) const CONTEXT_PER_MESSAGE_MAX: usize = 220;
/// The longest all context lines together, in characters.
pub(crate) const CONTEXT_TOTAL_MAX: usize = 700;
/// What comes between the reminder's text and its context lines.
pub(crate) const CONTEXT_MARKER: &str = "\n\nRecent context:\n";
/// A page of jobs when `list` names no `limit` (the tool's output is
/// capped; a longer list is paged).
const LIST_DEFAULT_LIMIT: usize = 50;

/// One call of the tool.
pub(crate) async fn call(
    app: &App,
    gateway: Option<&Arc<dyn GatewayPort>>,
    caller: &Caller,
    action: &str,
    args: &Value,
) -> Result<Value, String> {
    let requester = Requester::Agent {
        agent_id: caller.agent_id.clone(),
        session_key: caller.session_key.clone(),
    };
    match action {
        "status" => status(app),
        "list" => list(app, caller, args),
        "add" => {
            let added = add(app, caller, &requester, args)?;
            tell(app, gateway, added.written).await;
            Ok(job_answer(added))
        }
        "update" => {
            let id = job_id(args)?;
            own_job(app, caller, id)?;
            let patch = args
                .get("patch")
                .ok_or("`patch` is required: an object of the fields to change")?;
            let changed = app_cron::update_from_json(app, id, patch, &requester).map_err(plain)?;
            tell(app, gateway, changed.written).await;
            Ok(job_answer(changed))
        }
        "remove" => {
            let id = job_id(args)?;
            own_job(app, caller, id)?;
            let (removed, written) = app_cron::remove_job(app, id).map_err(plain)?;
            tell(app, gateway, written).await;
            Ok(json!({"ok": removed.ok, "removed": removed.removed, "id": removed.id}))
        }
        "runs" => {
            own_job(app, caller, job_id(args)?)?;
            runs(app, args)
        }
        "run" => {
            own_job(app, caller, job_id(args)?)?;
            run(app, gateway, args).await
        }
        "wake" => wake(app, gateway, args).await,
        other => Err(format!("`{other}` is not a cron action")),
    }
}

fn plain(err: anyhow::Error) -> String {
    format!("{err:#}")
}

fn status(app: &App) -> Result<Value, String> {
    let status = app_cron::status(app).map_err(plain)?;
    let mut answer = serde_json::to_value(&status).map_err(|e| e.to_string())?;
    answer["gatewayRunning"] = json!(status.gateway_running);
    if !status.gateway_running {
        answer["note"] = json!("no gateway is running: jobs run only while one does");
    }
    with_warnings(&mut answer, &status.warnings);
    Ok(answer)
}

/// Every job, as the index lists them (all pages).
fn every_job(app: &App) -> Result<Vec<Value>, String> {
    let mut jobs = Vec::new();
    loop {
        let page = app_cron::list(
            app,
            &ListQuery {
                enabled: EnabledFilter::All,
                limit: index::MAX_PAGE,
                offset: jobs.len(),
                ..ListQuery::default()
            },
        )
        .map_err(plain)?;
        let more = page.has_more && !page.jobs.is_empty();
        jobs.extend(page.jobs);
        if !more {
            return Ok(jobs);
        }
    }
}

/// Whether a listed job is `agent`'s.
fn is_agents(app: &App, agent: &str, job: &Value) -> bool {
    app_cron::job_agent(app, job["agentId"].as_str()) == agent
}

/// A turn sees and changes its own agent's jobs only: another agent's
/// is refused (one that does not exist is left to the action to say).
fn own_job(app: &App, caller: &Caller, lookup: &str) -> Result<(), String> {
    own_job_of(app, &caller.agent_id, lookup)
}

/// [`own_job`] for `agent_id`'s requests.
pub(crate) fn own_job_of(app: &App, agent_id: &str, lookup: &str) -> Result<(), String> {
    let Ok(id) = app.cron_store().resolve(lookup, app.now_ms()) else {
        return Ok(());
    };
    let agent = app_cron::job_agent(app, Some(agent_id));
    let jobs = every_job(app)?;
    match jobs.iter().find(|j| j["id"] == id.as_str()) {
        Some(job) if !is_agents(app, &agent, job) => Err(format!(
            "`{lookup}` is another agent's job: a turn sees and changes its own agent's jobs only"
        )),
        _ => Ok(()),
    }
}

pub(crate) fn list(app: &App, caller: &Caller, args: &Value) -> Result<Value, String> {
    let mut query = ListQuery {
        limit: LIST_DEFAULT_LIMIT,
        ..ListQuery::default()
    };
    if flag(args, "includeDisabled")? {
        query.enabled = EnabledFilter::All;
    }
    if let Some(enabled) = word(args, "enabled", &["all", "enabled", "disabled"])? {
        query.enabled = match enabled {
            "all" => EnabledFilter::All,
            "disabled" => EnabledFilter::Disabled,
            _ => EnabledFilter::Enabled,
        };
    }
    if let Some(by) = word(args, "sortBy", &["nextRunAtMs", "updatedAtMs", "name"])? {
        query.sort_by = match by {
            "updatedAtMs" => SortBy::UpdatedAtMs,
            "name" => SortBy::Name,
            _ => SortBy::NextRunAtMs,
        };
    }
    if let Some(dir) = word(args, "sortDir", &["asc", "desc"])? {
        query.sort_dir = if dir == "desc" {
            SortDir::Desc
        } else {
            SortDir::Asc
        };
    }
    if let Some(limit) = count(args, "limit", 1, index::MAX_PAGE as u64)? {
        query.limit = limit;
    }
    if let Some(offset) = count(args, "offset", 0, u32::MAX as u64)? {
        query.offset = offset;
    }
    query.query = match args.get("query") {
        None | Some(Value::Null) => None,
        Some(Value::String(q)) => Some(q.trim().to_string()).filter(|q| !q.is_empty()),
        Some(_) => return Err("`query` is text".into()),
    };
    let several = app.agents().map(|a| a.len() > 1).unwrap_or(false);
    let listing = if several {
        // Only the calling agent's jobs, paged among themselves.
        let agent = app_cron::job_agent(app, Some(&caller.agent_id));
        let (limit, offset) = (query.limit, query.offset);
        let mut all = app_cron::list(
            app,
            &ListQuery {
                limit: index::MAX_PAGE,
                offset: 0,
                ..query.clone()
            },
        )
        .map_err(plain)?;
        let mut mine = Vec::new();
        loop {
            let more = all.has_more && !all.jobs.is_empty();
            let seen = all.offset + all.jobs.len();
            mine.extend(all.jobs.into_iter().filter(|j| is_agents(app, &agent, j)));
            if !more {
                break;
            }
            all = app_cron::list(
                app,
                &ListQuery {
                    limit: index::MAX_PAGE,
                    offset: seen,
                    ..query.clone()
                },
            )
            .map_err(plain)?;
        }
        let total = mine.len();
        let page: Vec<Value> = mine.into_iter().skip(offset).take(limit).collect();
        let mut listing = crate::cron::Listing::new(page, total, &query);
        listing.warnings = all.warnings;
        listing
    } else {
        app_cron::list(app, &query).map_err(plain)?
    };
    let mut answer = serde_json::to_value(&listing).map_err(|e| e.to_string())?;
    with_warnings(&mut answer, &listing.warnings);
    Ok(answer)
}

fn runs(app: &App, args: &Value) -> Result<Value, String> {
    let id = job_id(args)?;
    let mut query = RunQuery::default();
    if let Some(limit) = count(args, "limit", 1, runlog::MAX_LIMIT as u64)? {
        query.limit = limit;
    }
    if let Some(offset) = count(args, "offset", 0, u32::MAX as u64)? {
        query.offset = offset;
    }
    let page = app_cron::runs(app, id, &query).map_err(plain)?;
    serde_json::to_value(&page).map_err(|e| e.to_string())
}

/// `add`: the job (under `job`, or the call's own fields when a model
/// put them there), with the session's recent messages when asked for.
fn add(
    app: &App,
    caller: &Caller,
    requester: &Requester,
    args: &Value,
) -> Result<JobChanged, String> {
    let job = match args.get("job") {
        Some(job) => job.clone(),
        None if args.get("schedule").is_some() || args.get("payload").is_some() => {
            let mut fields: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
            fields.shift_remove("action");
            fields.shift_remove("contextMessages");
            Value::Object(fields)
        }
        None => {
            return Err(
                "`job` is required: {name, schedule, payload, …} (see the tool's description)"
                    .into(),
            );
        }
    };
    let wanted = count(args, "contextMessages", 0, CONTEXT_MESSAGES_MAX)?.unwrap_or(0);
    let context = if wanted > 0 {
        recent_context(app, &caller.session_key, wanted)
    } else {
        Vec::new()
    };
    app_cron::add_from_json(app, &job, requester, |job| attach_context(job, &context))
        .map_err(plain)
}

/// The last `wanted` messages of the session with text (the user's and
/// the model's, not tool results) as context lines, oldest first, each
/// cut at [`CONTEXT_PER_MESSAGE_MAX`] characters; the newest are kept
/// when all of them would pass [`CONTEXT_TOTAL_MAX`]. None when the
/// session cannot be read.
fn recent_context(app: &App, session_key: &str, wanted: usize) -> Vec<String> {
    let sessions = app.sessions(None);
    let entry = sessions
        .store()
        .load()
        .0
        .get(session_key)
        .and_then(crate::session::store::SessionEntry::from_value);
    let Some(entry) = entry else {
        return Vec::new();
    };
    let messages = match crate::session::transcript::read(&sessions.transcript_path(&entry)) {
        Ok(transcript) => transcript.context(),
        Err(err) => {
            tracing::warn!(%err, "no context for the reminder: the transcript cannot be read");
            return Vec::new();
        }
    };
    context_lines(&messages, wanted)
}

/// See [`recent_context`].
pub(crate) fn context_lines(messages: &[Message], wanted: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut total = 0;
    for message in messages.iter().rev() {
        if lines.len() >= wanted {
            break;
        }
        let (who, blocks) = match message {
            Message::User(blocks) => ("User", blocks),
            Message::Assistant(blocks) => ("Assistant", blocks),
            Message::ToolResult { .. } => continue,
        };
        let text = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            continue;
        }
        let line = format!("- {who}: {}", cut(&text, CONTEXT_PER_MESSAGE_MAX));
        let size = line.chars().count() + usize::from(!lines.is_empty());
        if total + size > CONTEXT_TOTAL_MAX {
            break;
        }
        total += size;
        lines.push(line);
    }
    lines.reverse();
    lines
}

/// `text` cut at `max` characters, an ellipsis standing for the rest.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max - 1).collect();
    format!("{}…", kept.trim_end())
}

/// Adds the context lines to the job's text (a system event's text, an
/// agent turn's message), replacing any it had.
fn attach_context(job: &mut CronJob, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let text = match job.payload.kind {
        PayloadKind::SystemEvent => &mut job.payload.text,
        PayloadKind::AgentTurn => &mut job.payload.message,
    };
    let Some(text) = text.as_mut().filter(|t| !t.trim().is_empty()) else {
        return;
    };
    let base = text.split(CONTEXT_MARKER).next().unwrap_or("").trim_end();
    *text = format!("{base}{CONTEXT_MARKER}{}", lines.join("\n"));
}

/// `run`: through the gateway, which alone runs jobs.
async fn run(
    app: &App,
    gateway: Option<&Arc<dyn GatewayPort>>,
    args: &Value,
) -> Result<Value, String> {
    let lookup = job_id(args)?.to_string();
    let due = match word(args, "mode", &["force", "due"])? {
        Some(mode) => mode == "due",
        None => false,
    };
    match gateway {
        Some(gateway) => {
            let id = app
                .cron_store()
                .resolve(&lookup, app.now_ms())
                .map_err(|e| e.to_string())?;
            gateway.run_cron_job(id, due).await
        }
        None => {
            if crate::gateway_client::discovery::running(&app.paths).is_none() {
                return Err(
                    "no gateway is running, and only the gateway runs jobs: the user can start it with `almanac gateway run`; the job runs at its time once it does"
                        .into(),
                );
            }
            let app = app.clone();
            off_runtime(move || app_cron::run(&app, &lookup, due))
                .await?
                .map_err(plain)
        }
    }
}

/// `wake`: a system event for the main session, with a heartbeat now for
/// mode `now`.
async fn wake(
    app: &App,
    gateway: Option<&Arc<dyn GatewayPort>>,
    args: &Value,
) -> Result<Value, String> {
    let text = match args.get("text") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
        _ => return Err("`text` is required: the system event to queue".into()),
    };
    let mode = word(args, "mode", crate::trigger::WAKE_MODES)?
        .unwrap_or("next-heartbeat")
        .to_string();
    // The model's words: shown to the next turn as untrusted.
    match gateway {
        Some(gateway) => gateway.system_event(text, mode, None, false),
        None => {
            let app = app.clone();
            let queued =
                off_runtime(move || super::gateway::system_event(&app, &text, &mode, None, false))
                    .await?
                    .map_err(plain)?;
            serde_json::to_value(&queued).map_err(|e| e.to_string())
        }
    }
}

/// Tells a running gateway that the store changed (`written`).
async fn tell(app: &App, gateway: Option<&Arc<dyn GatewayPort>>, written: bool) {
    if !written {
        return;
    }
    match gateway {
        Some(gateway) => gateway.cron_changed(),
        None if crate::gateway_client::discovery::running(&app.paths).is_some() => {
            let app = app.clone();
            let _ = off_runtime(move || app_cron::tell_gateway(&app, true)).await;
        }
        None => {}
    }
}

/// Runs `work` (a call of the control API) off the turn's runtime.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    super::on_own_thread("cron-tool", work)
        .await
        .map_err(|e| format!("the request to the gateway did not run: {e}"))
}

fn job_answer(changed: JobChanged) -> Value {
    let mut answer = json!({"ok": changed.ok, "job": changed.job});
    if !changed.notes.is_empty() {
        answer["notes"] = json!(changed.notes);
    }
    with_warnings(&mut answer, &changed.warnings);
    answer
}

fn with_warnings(answer: &mut Value, warnings: &[String]) {
    if !warnings.is_empty() {
        answer["warnings"] = json!(warnings);
    }
}

/// `id`, or `jobId`.
fn job_id(args: &Value) -> Result<&str, String> {
    match args.get("id").or_else(|| args.get("jobId")) {
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id.trim()),
        _ => Err("`id` is required: the job's id (or its first characters)".into()),
    }
}

/// A whole number in `min..=max`, if given.
fn count(args: &Value, key: &str, min: u64, max: u64) -> Result<Option<usize>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64().or_else(|| {
            // `3.0` is a whole number too.
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
                .map(|f| f as u64)
        }) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n as usize)),
            _ => Err(format!("`{key}` is a whole number from {min} to {max}")),
        },
    }
}

/// One of `choices`, if given.
fn word<'a>(args: &'a Value, key: &str, choices: &[&str]) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(w)) if choices.contains(&w.as_str()) => Ok(Some(w.as_str())),
        Some(other) => Err(format!(
            "`{key}` is one of {}, not {other}",
            choices.join(", ")
        )),
    }
}

fn flag(args: &Value, key: &str) -> Result<bool, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!("`{key}` is true or false, not {other}")),
    }
}
