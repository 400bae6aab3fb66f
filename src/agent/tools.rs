//! The tools a model can call in a turn.
//!
//! * `read`: a regular file in the workspace or a skill folder (relative
//!   paths are workspace-relative; `~` is the home), with an optional line
//!   window, read up to a cap; never almanac's config file or state
//!   directory (except a workspace or skill folder inside it), never a
//!   FIFO, socket or device; memory and bootstrap files come through the
//!   read-time rule, as from `memory_get`;
//! * `write` / `edit`: inside the workspace only (never the config file),
//!   written crash-safely;
//! * `exec`: a command in the workspace, only with the `shell` permission
//!   and as the exec policy allows ([`super::policy`]), through the child
//!   runner (own process group, timeout, output cap) with an allowlisted
//!   environment;
//! * `memory_search`, `memory_get`, `memory_append`: the memory commands;
//! * `cron`: scheduled jobs as the `cron` commands and OpenClaw's RPCs
//!   see them (`status`, `list`, `add`, `update`, `remove`, `run`,
//!   `runs`, `wake`), for the turn's [`Caller`]: `current` is its session,
//!   a job it creates runs as its agent, is marked as the model's
//!   (`"createdBy": "agent"`), and may not post to this machine or its
//!   networks (`delivery.webhook.allowPrivateNetwork` allows it). Offered
//!   by default, like every tool: a personal agent sets reminders; the
//!   tool policy removes it (`tools.deny: ["cron"]`, or a profile
//!   without `group:automation`);
//! * a tool per skill declared with `command-dispatch: tool`.
//!
//! Tools the tool policy removes are not offered, and calling one anyway
//! is an error result. Work that belongs to other subsystems (memory,
//! skills, scheduled jobs, the gateway) goes through [`Services`], which
//! the app implements: this module never reaches into the app or the
//! gateway. Every failure is an error result the model can read, never a
//! failed turn.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};

use super::policy::{Approval, ApprovalRequest, Approver, ExecPlan, ExecPolicy, ToolPolicy};
use crate::child::{self, Capture, Spec};
use crate::provider::ToolSpec;

/// Largest tool output given back to the model, in characters.
pub(crate) const MAX_OUTPUT_CHARS: usize = 30_000;
/// Output of a command or skill kept for the model, in bytes (room for
/// [`MAX_OUTPUT_CHARS`] characters of any UTF-8 text).
pub(crate) const CAPTURE_BYTES: usize = MAX_OUTPUT_CHARS * 4;
/// Most of a file `read` looks through for its line window.
pub(crate) const READ_SCAN_BYTES: u64 = 64 * 1024 * 1024;
/// Largest file `edit` changes.
pub(crate) const EDIT_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The largest `exec` timeout the model may ask for, in seconds (or
/// `tools.exec.timeoutSec` when that is larger).
pub(crate) const EXEC_MAX_TIMEOUT_SECS: u64 = 600;

/// How a skill runs when called as a tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SkillRun {
    /// An instruction skill: its text.
    Print(String),
    /// A program, with the skill's environment and limits.
    Exec(Spec),
}

/// What tools need from other subsystems.
pub(crate) trait Services: Send + Sync {
    fn memory_search(
        &self,
        query: &str,
        max_results: Option<usize>,
        min_score: Option<f64>,
    ) -> Result<Value, String>;
    fn memory_get(
        &self,
        path: &str,
        from: Option<usize>,
        lines: Option<usize>,
    ) -> Result<Value, String>;
    fn memory_append(&self, text: &str, long_term: bool) -> Result<Value, String>;
    /// Gates a skill now and says how to run it (the tool runs it).
    fn prepare_skill(&self, skill: &str, args: &[String]) -> Result<SkillRun, String>;
    /// One `cron` action ([`CRON_ACTIONS`]) with the tool's arguments, for
    /// `caller`; its JSON answer, or what went wrong.
    fn cron<'a>(
        &'a self,
        caller: &'a Caller,
        action: &'a str,
        args: &'a Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>>;
    /// Starts a background run for `caller` (`sessions_spawn`'s
    /// arguments): its acceptance, or why not.
    fn spawn(&self, caller: &Caller, args: &Value) -> Result<Value, String>;
    /// One `subagents` action for `caller`'s children.
    fn subagents<'a>(
        &'a self,
        caller: &'a Caller,
        args: &'a Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>> {
        let _ = (caller, args);
        Box::pin(async { Err("the subagents tool needs the running gateway".into()) })
    }
    /// Messages steering `caller`'s running turn, given before its next
    /// model request.
    fn take_steering(&self, caller: &Caller) -> Vec<String> {
        let _ = caller;
        Vec::new()
    }
}

/// The actions of the `cron` tool.
pub(crate) const CRON_ACTIONS: &[&str] = &[
    "status", "list", "add", "update", "remove", "run", "runs", "wake",
];

/// Whose turn the tools serve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The agent the turn runs as.
    pub agent_id: String,
    /// The turn's session (`current` means it for a job).
    pub session_key: String,
}

/// A skill offered as a tool.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct SkillTool {
    /// The tool name (the skill's `command-tool`, else its command name).
    pub tool: String,
    pub skill: String,
    pub description: String,
}

/// Paths no tool opens: almanac's config file, and its state directory
/// except a workspace or skill folder inside it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Protected {
    pub config_file: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

/// Everything the tools of a turn are set up with.
#[derive(Debug, Clone)]
pub(crate) struct ToolSettings {
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
    /// Folders `read` may open besides the workspace (skill folders).
    pub read_roots: Vec<PathBuf>,
    pub protected: Protected,
    /// Which tools are offered.
    pub policy: ToolPolicy,
    /// The skill permission `shell` is allowed (`exec` needs it).
    pub allow_shell: bool,
    pub exec: ExecPolicy,
    /// The whole environment of `exec` children.
    pub exec_env: BTreeMap<String, String>,
    /// `tools.exec.timeoutSec`.
    pub exec_timeout: Duration,
    pub memory_search: bool,
    pub memory_write: bool,
    pub skills: Vec<SkillTool>,
    /// The turn the tools serve.
    pub caller: Caller,
}

/// The tools of one turn.
pub(crate) struct Tools<'a> {
    pub settings: ToolSettings,
    pub services: &'a dyn Services,
    /// Asked when a command needs a person's approval.
    pub approver: &'a dyn Approver,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Output {
    pub text: String,
    pub is_error: bool,
}

impl Output {
    fn ok(text: impl Into<String>) -> Output {
        Output {
            text: cap(text.into()),
            is_error: false,
        }
    }

    fn err(text: impl Into<String>) -> Output {
        Output {
            text: cap(text.into()),
            is_error: true,
        }
    }
}

fn cap(text: String) -> String {
    if text.chars().count() <= MAX_OUTPUT_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
    format!("{kept}\n[output cut at {MAX_OUTPUT_CHARS} characters]")
}

impl Tools<'_> {
    /// Whether `tool` is offered in this turn.
    pub(crate) fn offers(&self, tool: &str) -> bool {
        self.specs().iter().any(|s| s.name == tool)
    }

    /// The specs the model is given: the available tools the policy keeps.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let s = &self.settings;
        let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters,
        };
        let mut out = vec![
            spec(
                "read",
                "Read a text file: workspace-relative, or absolute inside the workspace or a skill folder. Optional 1-based `offset` and `limit` in lines.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ),
            spec(
                "write",
                "Create or replace a file inside the workspace with `content`.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
            spec(
                "edit",
                "Replace the one occurrence of `old_text` with `new_text` in a workspace file.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}),
            ),
        ];
        if s.allow_shell {
            out.push(spec(
                "exec",
                &format!(
                    "Run a command in the workspace. Output is capped; the default timeout is {} s. {}",
                    s.exec_timeout.as_secs(),
                    s.exec.describe()
                ),
                json!({"type": "object", "properties": {"command": {"type": "string"}, "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": self.max_timeout().as_secs()}}, "required": ["command"]}),
            ));
        }
        if s.memory_search {
            out.push(spec(
                "memory_search",
                "Mandatory recall step: search MEMORY.md and memory/*.md before answering about prior work, decisions, dates, people, preferences or todos. Returns the best lines with path and line numbers.",
                json!({"type": "object", "properties": {"query": {"type": "string"}, "maxResults": {"type": "integer", "minimum": 1}, "minScore": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["query"]}),
            ));
            out.push(spec(
                "memory_get",
                "Read lines of a memory file (MEMORY.md, memory/…): `path`, optional 1-based `from` and `lines`.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "from": {"type": "integer", "minimum": 1}, "lines": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ));
        }
        if s.memory_write {
            out.push(spec(
                "memory_append",
                "Store a durable note in today's memory file (or MEMORY.md with `longTerm`).",
                json!({"type": "object", "properties": {"text": {"type": "string"}, "longTerm": {"type": "boolean"}}, "required": ["text"]}),
            ));
        }
        out.push(spec("cron", CRON_DESCRIPTION, cron_parameters()));
        out.push(spec(
            "sessions_spawn",
            SPAWN_DESCRIPTION,
            spawn_parameters(),
        ));
        out.push(spec(
            "subagents",
            SUBAGENTS_DESCRIPTION,
            subagents_parameters(),
        ));
        for skill in &s.skills {
            out.push(spec(
                &skill.tool,
                &skill.description,
                json!({"type": "object", "properties": {"args": {"type": "string", "description": "The arguments, as typed after the command"}}}),
            ));
        }
        out.retain(|t| s.policy.allows(&t.name));
        out
    }

    fn max_timeout(&self) -> Duration {
        self.settings
            .exec_timeout
            .max(Duration::from_secs(EXEC_MAX_TIMEOUT_SECS))
    }

    /// Runs one call.
    pub(crate) async fn call(&self, name: &str, arguments: &Value) -> Output {
        let s = &self.settings;
        if let Err(why) = s.policy.check(name) {
            tracing::warn!(tool = name, %why, "tool call refused");
            return Output::err(format!("{why}; nothing ran"));
        }
        let args = match arguments {
            Value::Object(_) => arguments,
            Value::String(raw) => {
                return Output::err(format!("the arguments are not a JSON object: {raw}"));
            }
            _ => return Output::err("the arguments must be a JSON object"),
        };
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        let number = |k: &str| args.get(k).and_then(Value::as_u64).map(|n| n as usize);
        match name {
            "read" => match text("path") {
                Some(path) => self.read(path, number("offset"), number("limit")),
                None => Output::err("`path` is required"),
            },
            "write" => match (text("path"), text("content")) {
                (Some(path), Some(content)) => self.write(path, content),
                _ => Output::err("`path` and `content` are required"),
            },
            "edit" => match (text("path"), text("old_text"), text("new_text")) {
                (Some(path), Some(old), Some(new)) => self.edit(path, old, new),
                _ => Output::err("`path`, `old_text` and `new_text` are required"),
            },
            "exec" if s.allow_shell => match text("command") {
                Some(command) => {
                    let timeout = args
                        .get("timeout_seconds")
                        .and_then(Value::as_u64)
                        .map(|t| Duration::from_secs(t.max(1)).min(self.max_timeout()))
                        .unwrap_or(s.exec_timeout);
                    self.exec(command, timeout).await
                }
                None => Output::err("`command` is required"),
            },
            "exec" => Output::err(
                "exec is not allowed: the `shell` permission is not granted (SKILL_PERMISSIONS)",
            ),
            "memory_search" if s.memory_search => match text("query") {
                Some(q) => json_output(self.services.memory_search(
                    q,
                    number("maxResults"),
                    args.get("minScore").and_then(Value::as_f64),
                )),
                None => Output::err("`query` is required"),
            },
            "memory_get" if s.memory_search => match text("path") {
                Some(p) => {
                    json_output(self.services.memory_get(p, number("from"), number("lines")))
                }
                None => Output::err("`path` is required"),
            },
            "memory_append" if s.memory_write => match text("text") {
                Some(t) => json_output(
                    self.services.memory_append(
                        t,
                        args.get("longTerm")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ),
                ),
                None => Output::err("`text` is required"),
            },
            "cron" => match text("action") {
                Some(action) if CRON_ACTIONS.contains(&action) => {
                    json_output(self.services.cron(&s.caller, action, args).await)
                }
                Some(action) => Output::err(format!(
                    "`{action}` is not a cron action: use one of {}",
                    CRON_ACTIONS.join(", ")
                )),
                None => Output::err(format!(
                    "`action` is required: one of {}",
                    CRON_ACTIONS.join(", ")
                )),
            },
            "sessions_spawn" => json_output(self.services.spawn(&s.caller, args)),
            "subagents" => json_output(self.services.subagents(&s.caller, args).await),
            other => match s.skills.iter().find(|t| t.tool == other) {
                Some(skill) => {
                    let words = split_args(text("args").unwrap_or(""));
                    match self.services.prepare_skill(&skill.skill, &words) {
                        Ok(SkillRun::Print(text)) => Output::ok(text),
                        Ok(SkillRun::Exec(mut spec)) => {
                            spec.max_output_bytes = spec.max_output_bytes.min(CAPTURE_BYTES);
                            run_child(&spec, &format!("the skill {}", skill.skill)).await
                        }
                        Err(e) => Output::err(e),
                    }
                }
                None => Output::err(format!("there is no tool named {other}")),
            },
        }
    }

    /// A path the tools may touch: inside the workspace, or for reading
    /// also inside a skill folder; never the config file, nor the state
    /// directory outside a workspace or skill folder in it. Returns the
    /// path as given (resolved against the workspace) and its real path.
    fn resolve(&self, path: &str, for_write: bool) -> Result<(PathBuf, PathBuf), String> {
        let s = &self.settings;
        let path = path.trim();
        if path.is_empty() {
            return Err("empty path".into());
        }
        let expanded = match (path.strip_prefix("~/"), &s.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(path),
        };
        let joined = if expanded.is_absolute() {
            expanded
        } else {
            s.workspace.join(expanded)
        };
        let lexical = crate::paths::normalize(&joined)
            .ok_or_else(|| format!("{path} leaves the workspace"))?;
        // Resolve symlinks of what exists, then decide by where it really is.
        let real =
            crate::paths::real_path(&lexical).map_err(|e| format!("cannot resolve {path}: {e}"))?;
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if let Some(config) = &s.protected.config_file
            && real == canonical(config)
        {
            return Err(format!(
                "{path} is almanac's config file, which tools may not open"
            ));
        }
        let mut roots = vec![canonical(&s.workspace)];
        if !for_write {
            roots.extend(s.read_roots.iter().map(|r| canonical(r)));
        }
        let containing: Vec<&PathBuf> = roots.iter().filter(|r| real.starts_with(r)).collect();
        if let Some(state) = &s.protected.state_dir {
            let state = canonical(state);
            let opened_inside = containing
                .iter()
                .any(|r| r.starts_with(&state) && **r != state);
            if real.starts_with(&state) && !opened_inside {
                return Err(format!(
                    "{path} is inside almanac's state directory, which tools may not open (only a workspace or skill folder in it)"
                ));
            }
        }
        if !containing.is_empty() {
            Ok((lexical, real))
        } else if for_write {
            Err(format!(
                "{path} is outside the workspace; only workspace files can be written"
            ))
        } else {
            Err(format!(
                "{path} is outside the workspace and the skill folders"
            ))
        }
    }

    fn read(&self, path: &str, offset: Option<usize>, limit: Option<usize>) -> Output {
        let (_, real) = match self.resolve(path, false) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let file = match open_regular(&real) {
            Ok(f) => f,
            Err(e) => return Output::err(format!("cannot read {path}: {e}")),
        };
        match read_window(file, offset, limit) {
            Ok(Window::Binary) => Output::err(format!("{path} is a binary file")),
            Ok(Window::Text { text, scan_cut }) => {
                let first_line = offset.unwrap_or(1).max(1);
                let mut text = self.guard_memory(&real, text, first_line);
                if scan_cut {
                    text.push_str(&format!(
                        "\n[read stopped after the first {} MiB of the file]",
                        READ_SCAN_BYTES / (1024 * 1024)
                    ));
                }
                Output::ok(text)
            }
            Err(e) => Output::err(format!("cannot read {path}: {e}")),
        }
    }

    /// Memory files and the bootstrap files read through `read` pass the
    /// same read-time rule as `memory_get` and the prompt: a line that
    /// scans as an injection is withheld with its `path:line`.
    fn guard_memory(&self, real: &Path, text: String, first_line: usize) -> String {
        let workspace = std::fs::canonicalize(&self.settings.workspace)
            .unwrap_or_else(|_| self.settings.workspace.clone());
        let Ok(rel) = real.strip_prefix(&workspace) else {
            return text;
        };
        let rel = rel.to_string_lossy();
        let guarded = crate::memory::files::classify(&rel).is_some()
            || super::prompt::BOOTSTRAP_FILES.contains(&rel.as_ref());
        if guarded {
            crate::memory::sanitize::guard_text(&text, &rel, first_line).text
        } else {
            text
        }
    }

    fn write(&self, path: &str, content: &str) -> Output {
        let (full, _) = match self.resolve(path, true) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let mode = existing_mode(&full).unwrap_or(0o644);
        match crate::durable::atomic_replace(&full, content.as_bytes(), mode) {
            Ok(()) => Output::ok(format!("wrote {} bytes to {path}", content.len())),
            Err(e) => Output::err(format!("cannot write {path}: {e}")),
        }
    }

    fn edit(&self, path: &str, old: &str, new: &str) -> Output {
        let (full, real) = match self.resolve(path, true) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let text = match open_regular(&real).and_then(|f| {
            if f.metadata()?.len() > EDIT_MAX_BYTES {
                return Err(std::io::Error::other(format!(
                    "it is larger than {} MiB",
                    EDIT_MAX_BYTES / (1024 * 1024)
                )));
            }
            let mut text = String::new();
            f.take(EDIT_MAX_BYTES).read_to_string(&mut text)?;
            Ok(text)
        }) {
            Ok(t) => t,
            Err(e) => return Output::err(format!("cannot edit {path}: {e}")),
        };
        if old.is_empty() {
            return Output::err("`old_text` is empty");
        }
        match text.matches(old).count() {
            0 => return Output::err(format!("`old_text` does not occur in {path}")),
            1 => {}
            n => {
                return Output::err(format!(
                    "`old_text` occurs {n} times in {path}; give more context so it is unique"
                ));
            }
        }
        let edited = text.replacen(old, new, 1);
        let mode = existing_mode(&full).unwrap_or(0o644);
        match crate::durable::atomic_replace(&full, edited.as_bytes(), mode) {
            Ok(()) => Output::ok(format!("edited {path}")),
            Err(e) => Output::err(format!("cannot write {path}: {e}")),
        }
    }

    async fn exec(&self, command: &str, timeout: Duration) -> Output {
        let s = &self.settings;
        let script = match s.exec.plan(command) {
            ExecPlan::Refuse(why) => {
                tracing::warn!(command, %why, "exec refused");
                return Output::err(why);
            }
            ExecPlan::Run { script, ask: None } => script,
            ExecPlan::Run {
                script,
                ask: Some(why),
            } => {
                let request = ApprovalRequest {
                    command: script.clone(),
                    reason: why.clone(),
                };
                match self.approver.approve(&request).await {
                    Approval::Approved => {
                        tracing::info!(command, "exec approved");
                        script
                    }
                    answer => {
                        let refusal = s.exec.not_approved(&why, answer);
                        tracing::warn!(command, why = %refusal, "exec refused");
                        return Output::err(refusal);
                    }
                }
            }
        };
        let spec = Spec {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".to_string(), script],
            cwd: s.workspace.clone(),
            env: s.exec_env.clone(),
            timeout,
            max_output_bytes: CAPTURE_BYTES,
            stdin: child::Input::Null,
        };
        run_child(&spec, "the command").await
    }
}

const CRON_DESCRIPTION: &str = "Scheduled jobs and reminders, run by the gateway. action: `status`; `list` (includeDisabled, limit, offset, query); `add` with `job`: {name, schedule, payload, sessionTarget?, wakeMode?, deleteAfterRun?, delivery?, description?, enabled?}, where schedule is {kind:\"at\", at:\"<ISO-8601>\"} (once; a time without an offset is UTC, so give the user's offset), {kind:\"every\", everyMs} or {kind:\"cron\", expr:\"0 9 * * 1-5\", tz?:\"<IANA zone>\"}, and payload is {kind:\"systemEvent\", text} for a reminder in the main session (sessionTarget \"main\") or {kind:\"agentTurn\", message} for an agent turn (sessionTarget \"isolated\": a fresh session each run, \"current\": this session, or \"session:<id>\"); `contextMessages` (0-10) adds this session's last messages to the reminder text; `update` with `id` and `patch` (the fields to change; null clears one); `remove`, `runs` (limit) and `run` (mode force|due) with `id`; `wake` with `text` and mode (now|next-heartbeat) queues a system event for the main session.";

/// The `cron` tool's parameters.
const SPAWN_DESCRIPTION: &str = "Start a background run (a subagent) on a task: it runs in its own session and its result is announced to this session when it ends. Answers at once with its runId.";

fn spawn_parameters() -> Value {
    json!({"type": "object", "properties": {
        "task": {"type": "string", "description": "What the child should do, self-contained"},
        "label": {"type": "string"},
        "agentId": {"type": "string"},
        "model": {"type": "string"},
        "thinking": {"type": "string"},
        "runTimeoutSeconds": {"type": "integer", "minimum": 0},
        "cleanup": {"type": "string", "enum": ["delete", "keep"]},
        "mode": {"type": "string", "enum": ["run"]}
    }, "required": ["task"]})
}

const SUBAGENTS_DESCRIPTION: &str = "See and control the background runs this session started: list them, kill one (or all), or steer a running one with a message it reads before its next step.";

fn subagents_parameters() -> Value {
    json!({"type": "object", "properties": {
        "action": {"type": "string", "enum": ["list", "kill", "steer"]},
        "target": {"type": "string", "description": "kill/steer: a runId, its label, #N from list, or all (kill)"},
        "message": {"type": "string", "description": "steer: what the child should do differently"}
    }, "required": ["action"]})
}

fn cron_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": CRON_ACTIONS},
            "job": {"type": "object", "description": "add: the job"},
            "contextMessages": {"type": "integer", "minimum": 0, "maximum": 10},
            "id": {"type": "string", "description": "The job id (or its first characters)"},
            "jobId": {"type": "string", "description": "The same as id"},
            "patch": {"type": "object", "description": "update: the fields to change"},
            "mode": {"type": "string", "description": "run: force|due; wake: now|next-heartbeat"},
            "text": {"type": "string", "description": "wake: the system event"},
            "includeDisabled": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1},
            "offset": {"type": "integer", "minimum": 0},
            "query": {"type": "string"}
        },
        "required": ["action"]
    })
}

/// Runs a child and words how it ended for the model.
async fn run_child(spec: &Spec, what: &str) -> Output {
    let mut capture = Capture::default();
    let done = match child::run(spec, &mut capture).await {
        Ok(done) => done,
        Err(e) => return Output::err(format!("cannot start {what}: {e}")),
    };
    let mut text = capture.text();
    if done.truncated {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[output cut at {} bytes; the rest was read and dropped]",
            spec.max_output_bytes
        ));
    }
    if done.timed_out {
        Output::err(format!(
            "{what} did not finish within {} s and was stopped, with everything it started\n{text}",
            spec.timeout.as_secs()
        ))
    } else if done.success() {
        Output::ok(text)
    } else if let Some(signal) = done.signal {
        Output::err(format!("{what} was killed by signal {signal}\n{text}"))
    } else {
        Output::err(format!("exit code {}\n{text}", done.exit_code()))
    }
}

/// Opens `path` for reading only if it is a regular file: a FIFO, socket or
/// device is refused (checked before opening, and again on the open file
/// in case it was swapped; the open does not wait on a FIFO).
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = |meta: &std::fs::Metadata| {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        std::io::Error::other(format!("it is {kind}"))
    };
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

enum Window {
    Binary,
    /// The text; `scan_cut` when the window's search stopped at
    /// [`READ_SCAN_BYTES`].
    Text {
        text: String,
        scan_cut: bool,
    },
}

/// Reads the line window of `file` (all of it without one), holding at
/// most [`CAPTURE_BYTES`] of it and looking through at most
/// [`READ_SCAN_BYTES`].
fn read_window(
    file: std::fs::File,
    offset: Option<usize>,
    limit: Option<usize>,
) -> std::io::Result<Window> {
    let windowed = offset.is_some() || limit.is_some();
    let skip = offset.unwrap_or(1).max(1) - 1;
    let limit = limit.unwrap_or(usize::MAX);
    let mut reader = file.take(READ_SCAN_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut kept: Vec<u8> = Vec::new();
    let mut scanned = 0u64;
    let mut line = 0usize;
    let mut lines_kept = 0usize;
    let mut head: Vec<u8> = Vec::new();
    'reading: loop {
        let n = reader.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        scanned += n as u64;
        // A NUL in the first 8,000 bytes: a binary file.
        if head.len() < 8000 {
            let take = (8000 - head.len()).min(n);
            head.extend_from_slice(&chunk[..take]);
            if head.contains(&0) {
                return Ok(Window::Binary);
            }
        }
        for &b in &chunk[..n] {
            if line < skip {
                if b == b'\n' {
                    line += 1;
                }
                continue;
            }
            kept.push(b);
            if b == b'\n' {
                lines_kept += 1;
                if lines_kept >= limit {
                    break 'reading;
                }
            }
            if kept.len() >= CAPTURE_BYTES {
                break 'reading;
            }
        }
    }
    let scan_cut = scanned >= READ_SCAN_BYTES && kept.len() < CAPTURE_BYTES && lines_kept < limit;
    let text = String::from_utf8_lossy(&kept);
    let text = if windowed {
        text.lines().collect::<Vec<_>>().join("\n")
    } else {
        text.into_owned()
    };
    Ok(Window::Text { text, scan_cut })
}

fn json_output(result: Result<Value, String>) -> Output {
    match result {
        Ok(v) => Output::ok(serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => Output::err(e),
    }
}

fn existing_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

/// Arguments typed after a command, split like a shell would split plain
/// words and quotes (nothing is expanded).
pub(crate) fn split_args(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                    any = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if any || !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests;
