//! The tools almanac offers over MCP: their specs (name, a one-line
//! description for a model, input and output JSON Schemas) and one call
//! of each, on the same functions as the commands and the agent's tools.
//!
//! * What is offered: every tool, less the writing ones (`memory_append`,
//!   `cron_add`, `cron_remove`, `system_event`) unless `mcp.allowWrites`,
//!   narrowed by `mcp.tools.allow` (when not empty) and `mcp.tools.deny`.
//!   A tool not offered cannot be called.
//! * Arguments are checked against the tool's parameters (types, ranges,
//!   unknown fields) before anything runs: a bad one is
//!   [`CallError::InvalidArguments`], a JSON-RPC error for the client;
//!   a call that ran and failed is [`CallError::Failed`], a tool result
//!   marked as an error, which the model reads.
//! * A caller over MCP is a model: a cron job it adds carries
//!   `createdBy: "mcp"` and the model's webhook rule; a system event it
//!   queues is outside text, marked as such in the prompt; a note it
//!   appends passes the injection rule as a note from the command does.

use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::cron::{self as app_cron, Requester};
use crate::config::McpConfig;
use crate::memory::write::AppendRequest;

/// What the process serving the calls does better than a call alone: the
/// gateway's warm memory search and its scheduler's nudge.
pub(crate) trait Warm: Send + Sync {
    /// `req` searched by a warm searcher; `None`: search as the command
    /// does.
    fn search(
        &self,
        req: &super::memory::ResolvedSearch,
    ) -> Option<anyhow::Result<super::memory::Searched>>;
    /// The job store changed: the scheduler reads it again.
    fn cron_changed(&self, app: &App);
}

/// Calls served by a process of their own (`mcp serve` without a
/// gateway): a search asks the gateway when one runs, as the command
/// does; a job change tells it.
pub(crate) struct Standalone;

impl Warm for Standalone {
    fn search(
        &self,
        _req: &super::memory::ResolvedSearch,
    ) -> Option<anyhow::Result<super::memory::Searched>> {
        None
    }

    fn cron_changed(&self, app: &App) {
        app_cron::tell_gateway(app, true);
    }
}

/// One tool.
#[derive(Debug)]
pub(crate) struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// Whether it changes anything (off unless `mcp.allowWrites`).
    pub writes: bool,
    pub input: fn() -> Value,
    pub output: fn() -> Value,
}

/// Why a call did not give a result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error(
        "`{0}` is not offered by this server (mcp.tools.allow, mcp.tools.deny, mcp.allowWrites)"
    )]
    NotOffered(String),
    #[error("invalid arguments for `{tool}`: {reason}")]
    InvalidArguments { tool: String, reason: String },
    #[error("{0}")]
    Failed(String),
}

fn failed(err: impl std::fmt::Display) -> CallError {
    CallError::Failed(format!("{err:#}"))
}

/// Every tool, in the order they are listed.
pub(crate) const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "memory_search",
        description: "Search the user's Markdown memory (MEMORY.md and daily notes) by meaning and keywords; returns ranked snippets with file and line.",
        writes: false,
        input: || {
            object(
                json!({
                    "query": {"type": "string", "minLength": 1, "description": "What to look for"},
                    "maxResults": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Most hits returned (default from memorySearch.query.maxResults)"},
                    "minScore": {"type": "number", "minimum": 0, "maximum": 1, "description": "Lowest score kept"},
                    "since": {"type": "string", "description": "Only notes from this day on: YYYY-MM-DD, or a span back from today like 7d, 4w, 6m"},
                    "agentId": {"type": "string", "description": "The agent whose memory is searched (default: the default agent)"}
                }),
                &["query"],
            )
        },
        output: || {
            open_object(
                json!({"hits": {"type": "array"}, "query": {"type": "string"}}),
                &["hits"],
            )
        },
    },
    ToolSpec {
        name: "memory_get",
        description: "Read lines of one memory file (a path as memory_search returned it, e.g. MEMORY.md or memory/2026-01-31.md).",
        writes: false,
        input: || {
            object(
                json!({
                    "path": {"type": "string", "minLength": 1},
                    "from": {"type": "integer", "minimum": 1, "description": "First line, 1-based"},
                    "lines": {"type": "integer", "minimum": 1, "description": "How many lines"},
                    "agentId": {"type": "string"}
                }),
                &["path"],
            )
        },
        output: || {
            open_object(
                json!({"path": {"type": "string"}, "text": {"type": "string"}}),
                &["path", "text"],
            )
        },
    },
    ToolSpec {
        name: "memory_append",
        description: "Append a note to today's daily memory file, or to MEMORY.md with longTerm for a lasting fact.",
        writes: true,
        input: || {
            object(
                json!({
                    "text": {"type": "string", "minLength": 1, "maxLength": 16000},
                    "longTerm": {"type": "boolean", "description": "Store in MEMORY.md instead of today's file"},
                    "agentId": {"type": "string"}
                }),
                &["text"],
            )
        },
        output: || open_object(json!({"written": {"type": "array"}}), &["written"]),
    },
    ToolSpec {
        name: "session_memory_search",
        description: "Keyword search over the memory notes, newest first for an empty query; fast and exact.",
        writes: false,
        input: || {
            object(
                json!({
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                    "agentId": {"type": "string"}
                }),
                &["query"],
            )
        },
        output: || {
            open_object(
                json!({"hits": {"type": "array"}, "query": {"type": "string"}}),
                &["hits"],
            )
        },
    },
    ToolSpec {
        name: "session_memory_context",
        description: "A compact block of the memory notes most relevant to a goal, within a token budget, ready to read before acting.",
        writes: false,
        input: || {
            object(
                json!({
                    "query": {"type": "string", "description": "The goal or question"},
                    "budget": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "Token budget of the block"},
                    "agentId": {"type": "string"}
                }),
                &["query"],
            )
        },
        output: || open_object(json!({"text": {"type": "string"}}), &[]),
    },
    ToolSpec {
        name: "skills_list",
        description: "List the installed skills (procedures the user taught) with their descriptions and whether each can run here.",
        writes: false,
        input: || {
            object(
                json!({
                    "eligibleOnly": {"type": "boolean", "description": "Only skills whose requirements are met"},
                    "agentId": {"type": "string"}
                }),
                &[],
            )
        },
        output: || open_object(json!({"skills": {"type": "array"}}), &["skills"]),
    },
    ToolSpec {
        name: "skill_get",
        description: "Read one skill's instructions (its SKILL.md body) by name.",
        writes: false,
        input: || {
            object(
                json!({"name": {"type": "string", "minLength": 1}, "agentId": {"type": "string"}}),
                &["name"],
            )
        },
        output: || {
            open_object(
                json!({"name": {"type": "string"}, "path": {"type": "string"}, "body": {"type": "string"}}),
                &["name", "body"],
            )
        },
    },
    ToolSpec {
        name: "cron_list",
        description: "List the scheduled jobs (reminders and recurring agent turns) with their schedules and next runs.",
        writes: false,
        input: || {
            object(
                json!({
                    "includeDisabled": {"type": "boolean"},
                    "query": {"type": "string", "description": "Only jobs whose name or text holds this"},
                    "agentId": {"type": "string"}
                }),
                &[],
            )
        },
        output: || open_object(json!({"jobs": {"type": "array"}}), &["jobs"]),
    },
    ToolSpec {
        name: "cron_add",
        description: "Schedule a job: a reminder (payload systemEvent) or an agent turn (payload agentTurn), once (schedule at) or repeating (every, cron).",
        writes: true,
        input: || {
            object(
                json!({
                    "name": {"type": "string"},
                    "schedule": {"type": "object", "description": "{kind: \"at\", at: ISO-8601} | {kind: \"every\", everyMs} | {kind: \"cron\", expr, tz?}"},
                    "payload": {"type": "object", "description": "{kind: \"systemEvent\", text} | {kind: \"agentTurn\", message}"},
                    "sessionTarget": {"type": "string", "description": "main or isolated"},
                    "wakeMode": {"type": "string", "enum": ["now", "next-heartbeat"]},
                    "delivery": {"type": "object"},
                    "enabled": {"type": "boolean"},
                    "deleteAfterRun": {"type": "boolean"},
                    "description": {"type": "string"},
                    "agentId": {"type": "string"}
                }),
                &["schedule", "payload"],
            )
        },
        output: || {
            open_object(
                json!({"ok": {"type": "boolean"}, "job": {"type": "object"}}),
                &["ok", "job"],
            )
        },
    },
    ToolSpec {
        name: "cron_remove",
        description: "Remove a scheduled job by its id (or name).",
        writes: true,
        input: || {
            object(
                json!({"id": {"type": "string", "minLength": 1}, "agentId": {"type": "string"}}),
                &["id"],
            )
        },
        output: || {
            open_object(
                json!({"ok": {"type": "boolean"}, "removed": {"type": "boolean"}}),
                &["ok", "removed"],
            )
        },
    },
    ToolSpec {
        name: "system_event",
        description: "Leave a note for the agent's next heartbeat turn (mode next-heartbeat) or wake it now (mode now).",
        writes: true,
        input: || {
            object(
                json!({
                    "text": {"type": "string", "minLength": 1, "maxLength": 16000},
                    "mode": {"type": "string", "enum": ["now", "next-heartbeat"]},
                    "agentId": {"type": "string"}
                }),
                &["text", "mode"],
            )
        },
        output: || {
            open_object(
                json!({"queued": {"type": "boolean"}, "sessionKey": {"type": "string"}}),
                &["queued"],
            )
        },
    },
    ToolSpec {
        name: "heartbeat_last",
        description: "The agent's last heartbeat run: when, its outcome and what it said.",
        writes: false,
        input: || object(json!({"agentId": {"type": "string"}}), &[]),
        output: || open_object(json!({"ran": {"type": "boolean"}, "event": {}}), &["ran"]),
    },
];

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// An output's schema: the fields named, more allowed (a result may
/// carry notes and warnings).
fn open_object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// The spec of the tool called `name`, offered or not.
pub(crate) fn spec(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tools `config` offers, in list order.
pub(crate) fn offered(config: &McpConfig) -> Vec<&'static ToolSpec> {
    TOOLS.iter().filter(|t| is_offered(config, t)).collect()
}

fn is_offered(config: &McpConfig, tool: &ToolSpec) -> bool {
    let allowed =
        config.tools.allow.is_empty() || config.tools.allow.iter().any(|a| a == tool.name);
    let denied = config.tools.deny.iter().any(|d| d == tool.name);
    allowed && !denied && (!tool.writes || config.allow_writes)
}

/// Checks that `name` is offered and `args` fit its parameters.
pub(crate) fn admit(config: &McpConfig, name: &str, args: &Value) -> Result<(), CallError> {
    let tool = spec(name).ok_or_else(|| CallError::UnknownTool(name.to_string()))?;
    if !is_offered(config, tool) {
        return Err(CallError::NotOffered(name.to_string()));
    }
    parse_args(name, args).map(|_| ())
}

/// The arguments of every tool (one shape; each tool reads its own).
/// Which fields a tool takes is its schema's to say ([`parse_args`]);
/// `cron_add` passes its job on as given.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    query: Option<String>,
    max_results: Option<u32>,
    min_score: Option<f64>,
    since: Option<String>,
    agent_id: Option<String>,
    path: Option<String>,
    from: Option<u32>,
    lines: Option<u32>,
    text: Option<String>,
    long_term: Option<bool>,
    limit: Option<u32>,
    budget: Option<u32>,
    eligible_only: Option<bool>,
    name: Option<String>,
    include_disabled: Option<bool>,
    id: Option<String>,
    mode: Option<String>,
}

/// Checks `args` against the tool's schema: the fields it names, their
/// types and ranges, the required ones.
fn parse_args(name: &str, args: &Value) -> Result<Args, CallError> {
    let invalid = |reason: String| CallError::InvalidArguments {
        tool: name.to_string(),
        reason,
    };
    let schema = spec(name).map(|t| (t.input)()).unwrap_or_default();
    let Value::Object(given) = args else {
        return Err(invalid("the arguments are not a JSON object".into()));
    };
    let none = serde_json::Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&none);
    for (key, value) in given {
        let Some(prop) = properties.get(key) else {
            return Err(invalid(format!("unknown argument `{key}`")));
        };
        check_value(key, prop, value).map_err(invalid)?;
    }
    for key in schema["required"].as_array().into_iter().flatten() {
        let key = key.as_str().unwrap_or_default();
        if !given.contains_key(key) {
            return Err(invalid(format!("`{key}` is required")));
        }
    }
    serde_json::from_value(args.clone()).map_err(|e| invalid(e.to_string()))
}

/// One argument against its property schema (type, length, range, enum).
fn check_value(key: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let wanted = prop["type"].as_str().unwrap_or("");
    let fits = match wanted {
        "string" => value.is_string(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        _ => true,
    };
    if !fits {
        return Err(format!("`{key}` must be {}", article(wanted)));
    }
    if let Some(text) = value.as_str() {
        let chars = text.chars().count() as u64;
        if prop["minLength"]
            .as_u64()
            .is_some_and(|min| text.trim().chars().count() as u64 == 0 || chars < min)
        {
            return Err(format!("`{key}` must not be empty"));
        }
        if let Some(max) = prop["maxLength"].as_u64().filter(|max| chars > *max) {
            return Err(format!("`{key}` is longer than {max} characters"));
        }
        if let Some(options) = prop["enum"].as_array()
            && !options.iter().any(|o| o.as_str() == Some(text))
        {
            let names: Vec<&str> = options.iter().filter_map(Value::as_str).collect();
            return Err(format!("`{key}` must be one of {}", names.join(", ")));
        }
    }
    if let Some(n) = value.as_f64() {
        let below = prop["minimum"].as_f64().is_some_and(|min| n < min);
        let above = prop["maximum"].as_f64().is_some_and(|max| n > max);
        if below || above {
            return Err(format!(
                "`{key}` must be between {} and {}",
                prop["minimum"], prop["maximum"]
            ));
        }
    }
    Ok(())
}

fn article(kind: &str) -> String {
    match kind {
        "integer" | "object" => format!("an {kind}"),
        other => format!("a {other}"),
    }
}

/// Runs the tool `name` (already admitted) for the agent its `agentId`
/// names. Blocking: call it off an async runtime's threads (a cron change
/// tells a running gateway through a client with a runtime of its own).
pub(crate) fn call(
    app: &App,
    warm: &dyn Warm,
    name: &str,
    args: &Value,
) -> Result<Value, CallError> {
    let parsed = parse_args(name, args)?;
    let app =
        app.for_agent(parsed.agent_id.as_deref())
            .map_err(|e| CallError::InvalidArguments {
                tool: name.to_string(),
                reason: format!("{e:#}"),
            })?;
    match name {
        "memory_search" => memory_search(&app, warm, parsed),
        "memory_get" => memory_get(&app, parsed),
        "memory_append" => memory_append(&app, parsed),
        "session_memory_search" => {
            let query = parsed.query.unwrap_or_default();
            let limit = parsed.limit.unwrap_or(10) as usize;
            let found = super::session_memory::search(&app, &query, limit).map_err(failed)?;
            serde_json::to_value(found).map_err(failed)
        }
        "session_memory_context" => {
            let query = parsed.query.unwrap_or_default();
            let budget = parsed.budget.map(|b| b as usize);
            let block = super::session_memory::context(&app, &query, budget).map_err(failed)?;
            serde_json::to_value(block).map_err(failed)
        }
        "skills_list" => Ok(super::mcp_resources::skills_list(
            &app,
            parsed.eligible_only.unwrap_or(false),
        )),
        "skill_get" => super::mcp_resources::skill_get(&app, parsed.name.as_deref().unwrap_or(""))
            .map_err(CallError::Failed),
        "cron_list" => cron_list(&app, parsed),
        "cron_add" => cron_add(&app, warm, args),
        "cron_remove" => cron_remove(&app, warm, parsed),
        "system_event" => system_event(&app, parsed),
        "heartbeat_last" => {
            let event = super::heartbeat::last_event(&app).map_err(failed)?;
            Ok(json!({"ran": event.is_some(), "event": event}))
        }
        other => Err(CallError::UnknownTool(other.to_string())),
    }
}

fn memory_search(app: &App, warm: &dyn Warm, args: Args) -> Result<Value, CallError> {
    let req = super::memory::SearchRequest {
        query: args.query.unwrap_or_default(),
        max_results: args.max_results.map(|n| n as usize),
        min_score: args.min_score,
        since: args.since,
        ..Default::default()
    };
    // The warm searcher serves the default agent's memory.
    let warmed = if app.default_agent {
        app.resolve_search(&req)
            .map_err(failed)?
            .and_then(|r| warm.search(&r))
    } else {
        None
    };
    let searched = match warmed {
        Some(searched) => searched,
        None => super::memory::search_command(app, &req),
    }
    .map_err(failed)?;
    let mut value = serde_json::to_value(&searched).map_err(failed)?;
    value["mode"] = Value::from(searched.semantic.mode);
    if searched.disabled {
        value["disabled"] = Value::Bool(true);
    }
    Ok(value)
}

fn memory_get(app: &App, args: Args) -> Result<Value, CallError> {
    let path = args.path.unwrap_or_default();
    let got = super::memory::get(
        app,
        &path,
        args.from.map(|n| n as usize),
        args.lines.map(|n| n as usize),
    )
    .map_err(failed)?;
    serde_json::to_value(got).map_err(failed)
}

fn memory_append(app: &App, args: Args) -> Result<Value, CallError> {
    let text = args.text.unwrap_or_default();
    let req = AppendRequest {
        text: &text,
        long_term: args.long_term.unwrap_or(false),
        also_daily: false,
        force: false,
    };
    let appended = super::session_memory::append(app, &req).map_err(failed)?;
    serde_json::to_value(appended).map_err(failed)
}

/// The requester of a change made over MCP: a model, acting for the
/// agent's main session.
fn requester(app: &App) -> Requester {
    Requester::Mcp {
        agent_id: app.agent.clone(),
        session_key: app.sessions(None).resolve_key(None),
    }
}

fn cron_list(app: &App, args: Args) -> Result<Value, CallError> {
    let caller = crate::agent::tools::Caller {
        agent_id: app.agent.clone(),
        session_key: app.sessions(None).resolve_key(None),
    };
    let mut query = serde_json::Map::new();
    if let Some(all) = args.include_disabled {
        query.insert("includeDisabled".into(), Value::Bool(all));
    }
    if let Some(text) = args.query {
        query.insert("query".into(), Value::String(text));
    }
    super::cron_tool::list(app, &caller, &Value::Object(query)).map_err(CallError::Failed)
}

fn cron_add(app: &App, warm: &dyn Warm, args: &Value) -> Result<Value, CallError> {
    let mut job = args.as_object().cloned().unwrap_or_default();
    // The job runs as the agent the call names (the default otherwise).
    job.shift_remove("agentId");
    let requester = requester(app);
    let added =
        app_cron::add_from_json(app, &Value::Object(job), &requester, |_| {}).map_err(failed)?;
    if added.written {
        warm.cron_changed(app);
    }
    let mut answer = serde_json::to_value(&added).map_err(failed)?;
    if !added.notes.is_empty() {
        answer["notes"] = json!(added.notes);
    }
    Ok(answer)
}

fn cron_remove(app: &App, warm: &dyn Warm, args: Args) -> Result<Value, CallError> {
    let id = args.id.unwrap_or_default();
    super::cron_tool::own_job_of(app, &app.agent, &id).map_err(CallError::Failed)?;
    let (removed, written) = app_cron::remove_job(app, &id).map_err(failed)?;
    if written {
        warm.cron_changed(app);
    }
    Ok(json!({"ok": removed.ok, "removed": removed.removed, "id": removed.id}))
}

fn system_event(app: &App, args: Args) -> Result<Value, CallError> {
    let text = args.text.unwrap_or_default();
    let mode = args.mode.unwrap_or_else(|| "next-heartbeat".into());
    // Outside text: it reaches the prompt marked as untrusted.
    let queued = super::gateway::system_event(app, &text, &mode, None, false).map_err(failed)?;
    Ok(json!({
        "ok": queued.ok,
        "queued": queued.queued,
        "mode": queued.mode,
        "sessionKey": queued.session_key,
        "warning": queued.warning,
    }))
}

/// A call sent to the gateway (`POST /v1/mcp/call`).
#[derive(Debug, serde::Serialize, Deserialize)]
pub(crate) struct CallRequest {
    pub name: String,
    pub arguments: Value,
}

/// A call's outcome as the gateway answers it.
#[derive(Debug, serde::Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum CallOutcome {
    Result { value: Value },
    Failed { reason: String },
    InvalidArguments { tool: String, reason: String },
    UnknownTool { name: String },
    NotOffered { name: String },
}

impl From<Result<Value, CallError>> for CallOutcome {
    fn from(result: Result<Value, CallError>) -> CallOutcome {
        match result {
            Ok(value) => CallOutcome::Result { value },
            Err(CallError::Failed(reason)) => CallOutcome::Failed { reason },
            Err(CallError::InvalidArguments { tool, reason }) => {
                CallOutcome::InvalidArguments { tool, reason }
            }
            Err(CallError::UnknownTool(name)) => CallOutcome::UnknownTool { name },
            Err(CallError::NotOffered(name)) => CallOutcome::NotOffered { name },
        }
    }
}

impl From<CallOutcome> for Result<Value, CallError> {
    fn from(outcome: CallOutcome) -> Result<Value, CallError> {
        match outcome {
            CallOutcome::Result { value } => Ok(value),
            CallOutcome::Failed { reason } => Err(CallError::Failed(reason)),
            CallOutcome::InvalidArguments { tool, reason } => {
                Err(CallError::InvalidArguments { tool, reason })
            }
            CallOutcome::UnknownTool { name } => Err(CallError::UnknownTool(name)),
            CallOutcome::NotOffered { name } => Err(CallError::NotOffered(name)),
        }
    }
}

#[cfg(test)]
#[path = "mcp_tools_tests.rs"]
mod tests;
