//! Agent use cases: resolving the model and its endpoint, assembling a
//! turn's prompt from the workspace, skills and memory, and running the
//! turn in its session (`almanac agent`, `almanac agent prompt`,
//! `almanac sessions`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::App;
use super::memory::{self as app_memory, SearchRequest};
use super::session_memory;
use crate::agent::compaction::{self, Report};
use crate::agent::models::{Link, Models};
use crate::agent::policy::{Approver, ExecPolicy, NoApprover, ToolPolicy};
use crate::agent::prompt::{self, Parts};
use crate::agent::shell::Allowlist;
use crate::agent::tools::{Caller, Protected, Services, SkillRun, SkillTool, ToolSettings, Tools};
use crate::agent::turn::{self, Log, Outcome, Settings};
use crate::config::ModelRef;
use crate::memory::write::AppendRequest;
pub(crate) use crate::provider::Thinking;
use crate::provider::{self, Api, Block, Endpoint, Message, RetryPolicy, StreamSink, ToolSpec};
use crate::session::store::SessionEntry;
use crate::session::{Sessions, Started, events, transcript};
use crate::skills;

/// Why no model can be called.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    #[error(
        "no model is configured: set agents.defaults.model (for example openai/gpt-4o-mini) or pass --model provider/model"
    )]
    None,
    #[error("`{0}` is not a model reference: use provider/model, for example openai/gpt-4o-mini")]
    BadRef(String),
    #[error("unknown provider `{0}`: set models.providers.{0}.baseUrl (and api)")]
    UnknownProvider(String),
    #[error("no API key for {provider}: set {hint}")]
    NoKey { provider: String, hint: String },
    #[error(
        "models.providers.{provider}.api is `{api}`; almanac speaks openai-completions and anthropic-messages"
    )]
    BadApi { provider: String, api: String },
}

/// A model ready to call.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// `provider/model`.
    pub reference: String,
    /// The name sent to the provider.
    pub name: String,
    pub endpoint: Endpoint,
}

/// Built-in endpoints: (provider, api, base URL, key variable, base URL
/// variable, whether a key is required).
const KNOWN: &[(&str, Api, &str, Option<&str>, Option<&str>, bool)] = &[
    (
        "openai",
        Api::OpenAiCompletions,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
        Some("OPENAI_BASE_URL"),
        true,
    ),
    (
        "anthropic",
        Api::AnthropicMessages,
        "https://api.anthropic.com",
        Some("ANTHROPIC_API_KEY"),
        Some("ANTHROPIC_BASE_URL"),
        true,
    ),
    (
        "openrouter",
        Api::OpenAiCompletions,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
        None,
        true,
    ),
    (
        "ollama",
        Api::OpenAiCompletions,
        "http://127.0.0.1:11434/v1",
        None,
        Some("OLLAMA_BASE_URL"),
        false,
    ),
    (
        "lmstudio",
        Api::OpenAiCompletions,
        "http://127.0.0.1:1234/v1",
        None,
        None,
        false,
    ),
    (
        "vllm",
        Api::OpenAiCompletions,
        "http://127.0.0.1:8000/v1",
        None,
        None,
        false,
    ),
    (
        "llamacpp",
        Api::OpenAiCompletions,
        "http://127.0.0.1:8080/v1",
        None,
        None,
        false,
    ),
];

/// The limits of one model call: `agents.defaults.llm.connectTimeoutSeconds`
/// (at least 1), `llm.idleTimeoutSeconds` (0: none) and `timeoutSeconds`
/// for the whole answer (at least 1).
fn call_timeouts(defaults: &crate::config::AgentDefaults) -> provider::Timeouts {
    let secs = |n: u32| Duration::from_secs(u64::from(n.max(1)));
    provider::Timeouts {
        connect: secs(defaults.llm.connect_timeout_seconds),
        idle: (defaults.llm.idle_timeout_seconds > 0)
            .then(|| secs(defaults.llm.idle_timeout_seconds)),
        total: secs(defaults.timeout_seconds),
    }
}

impl App {
    /// The model `requested` (the turn's choice: `--model`, else the
    /// session's model, see [`session_model`]), else `agents.defaults.model`;
    /// its endpoint from `models.providers.<id>` and the usual environment
    /// variables. The public endpoints need an API key.
    pub(crate) fn model(&self, requested: Option<&str>) -> Result<Model, ModelError> {
        self.resolve_model(requested, true)
    }

    /// The same model, for showing a prompt: nothing is sent, so no API key
    /// is needed.
    pub(crate) fn model_without_key(&self, requested: Option<&str>) -> Result<Model, ModelError> {
        self.resolve_model(requested, false)
    }

    fn resolve_model(&self, requested: Option<&str>, need_key: bool) -> Result<Model, ModelError> {
        let configured = self
            .config
            .config
            .agents
            .defaults
            .model
            .as_ref()
            .map(ModelRef::primary);
        let reference = requested
            .or(configured)
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or(ModelError::None)?;
        let (provider, name) = reference
            .split_once('/')
            .filter(|(p, n)| !p.is_empty() && !n.is_empty())
            .ok_or_else(|| ModelError::BadRef(reference.to_string()))?;
        let provider = provider.to_lowercase();
        let cfg = self.config.config.models.providers.get(&provider);
        let known = KNOWN.iter().find(|k| k.0 == provider);
        let api = match cfg.and_then(|c| c.api.as_deref()) {
            Some(text) => Api::parse(text).ok_or_else(|| ModelError::BadApi {
                provider: provider.clone(),
                api: text.to_string(),
            })?,
            None => known.map(|k| k.1).unwrap_or(Api::OpenAiCompletions),
        };
        let env_base = known
            .and_then(|k| k.4)
            .and_then(|var| self.host.var(var))
            .map(str::to_string);
        let base_url = cfg
            .and_then(|c| c.base_url.clone())
            .or(env_base.clone())
            .or_else(|| known.map(|k| k.2.to_string()))
            .ok_or_else(|| ModelError::UnknownProvider(provider.clone()))?;
        let env_key = known
            .and_then(|k| k.3)
            .and_then(|var| self.host.var(var))
            .map(str::to_string);
        let api_key = cfg
            .and_then(|c| c.api_key.clone())
            .or(env_key)
            .filter(|k| !k.is_empty());
        // The public endpoints need a key; a server the user points at
        // (a base URL of their own, a local server) may not.
        let own_server = cfg.and_then(|c| c.base_url.as_ref()).is_some() || env_base.is_some();
        if need_key
            && api_key.is_none()
            && let Some(k) = known.filter(|k| k.5 && !own_server)
        {
            return Err(ModelError::NoKey {
                provider: provider.clone(),
                hint: format!(
                    "{} or models.providers.{provider}.apiKey",
                    k.3.unwrap_or("an API key")
                ),
            });
        }
        let headers = cfg
            .map(|c| {
                c.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Model {
            reference: format!("{provider}/{name}"),
            name: name.to_string(),
            endpoint: Endpoint {
                provider,
                api,
                base_url: base_url.trim_end_matches('/').to_string(),
                api_key,
                headers,
                timeouts: call_timeouts(&self.config.config.agents.defaults),
            },
        })
    }

    /// The models tried after `first` fails: `asked` (a cron job's
    /// `fallbacks`, `[]` for none), else `agents.defaults.model.fallbacks`;
    /// `first` itself and repeats left out. One that cannot be used (an
    /// unknown provider, no key) is left out with a warning.
    pub(crate) fn fallback_models(
        &self,
        first: &Model,
        asked: Option<&[String]>,
        warnings: &mut Vec<String>,
    ) -> Vec<Link> {
        let configured = match &self.config.config.agents.defaults.model {
            Some(ModelRef::Chain { fallbacks, .. }) => fallbacks.as_slice(),
            _ => &[],
        };
        let mut seen = vec![first.reference.clone()];
        let mut links = Vec::new();
        for reference in asked.unwrap_or(configured) {
            match self.model(Some(reference)) {
                Ok(model) if !seen.contains(&model.reference) => {
                    seen.push(model.reference.clone());
                    links.push(Link::new(model.reference, model.name, model.endpoint));
                }
                Ok(_) => {}
                Err(err) => warnings.push(format!("fallback model `{reference}` left out: {err}")),
            }
        }
        links
    }

    /// The sessions of `agent` (default `main`).
    pub(crate) fn sessions(&self, agent: Option<&str>) -> Sessions {
        Sessions::new(
            &self.paths.state_dir,
            agent.unwrap_or("main"),
            &self.config.config.session,
            self.host.time_zone().clone(),
        )
    }

    /// What `sessions(agent).resolve_key(request)` gives, without building
    /// the agent's sessions (a copy of the session config): the gateway
    /// asks this for every request it queues.
    pub(crate) fn resolve_session_key(&self, agent: Option<&str>, request: Option<&str>) -> String {
        let session = &self.config.config.session;
        crate::session::key::resolve(
            request,
            agent.unwrap_or("main"),
            &session.main_key,
            session.scope == "global",
        )
    }
}

/// The model a session keeps: its override (`/new provider/model`, or
/// OpenClaw's `providerOverride` + `modelOverride`), else the model it last
/// used (`modelProvider` + `model`).
pub(crate) fn session_model(entry: &SessionEntry) -> Option<String> {
    let named = |provider: Option<&String>, model: Option<&String>| {
        let model = model.map(|m| m.trim()).filter(|m| !m.is_empty())?;
        match provider.map(|p| p.trim()).filter(|p| !p.is_empty()) {
            Some(provider) if !model.starts_with(&format!("{provider}/")) => {
                Some(format!("{provider}/{model}"))
            }
            _ => Some(model.to_string()),
        }
    };
    named(
        entry.provider_override.as_ref(),
        entry.model_override.as_ref(),
    )
    .or_else(|| {
        named(entry.model_provider.as_ref(), entry.model.as_ref()).filter(|m| m.contains('/'))
    })
}

/// The stored entry of `key`, as it is before this turn touches it.
fn stored_entry(sessions: &Sessions, key: &str) -> Option<SessionEntry> {
    sessions
        .store()
        .load()
        .0
        .get(key)
        .and_then(SessionEntry::from_value)
}

/// A request for one turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TurnRequest {
    pub message: String,
    pub session_key: Option<String>,
    /// `agentId` as OpenClaw names it.
    #[serde(alias = "agentId")]
    pub agent: Option<String>,
    pub model: Option<String>,
    /// A heartbeat turn (never from a request body: the runner sets it).
    #[serde(skip)]
    pub heartbeat: Option<HeartbeatTurn>,
    /// Where the message came from (`cli`, `api`), kept as the session's
    /// last channel; none for turns nobody sent.
    #[serde(skip)]
    pub channel: Option<String>,
    /// How an unattended run shapes the turn (never from a request body).
    #[serde(skip)]
    pub shape: TurnShape,
}

/// What a cron job (or a webhook's run) asks of its turn besides the
/// message and the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TurnShape {
    /// Only these tools (names, `group:*` names or patterns, as in
    /// `tools.allow`), and only those of them the tool policy keeps.
    pub tools_allow: Option<Vec<String>>,
    /// No workspace files in the prompt and no recalled notes.
    pub light_context: bool,
    pub thinking: Option<provider::Thinking>,
    /// Replaces `agents.defaults.model.fallbacks` (`[]`: none).
    pub fallbacks: Option<Vec<String>>,
    /// A new session every run (a cron job's `isolated` target): the
    /// message is never a reset command, and the run keeps a row of its
    /// own, `<key>:run:<sessionId>`.
    pub isolated_run: bool,
    /// Text that only this run's message holds (a webhook run's id): when
    /// the session's last message is an unanswered one holding it, the
    /// run was cut off and is answered, not written again.
    pub resume_marker: Option<String>,
}

/// Whether `history` ends with a user message holding `marker`.
fn last_user_holds(history: &[Message], marker: &str) -> bool {
    match history.last() {
        Some(Message::User(blocks)) => blocks
            .iter()
            .any(|b| matches!(b, Block::Text { text } if text.contains(marker))),
        _ => false,
    }
}

/// What makes a turn a heartbeat turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HeartbeatTurn {
    /// Only `HEARTBEAT.md` as workspace context, and no memory recall.
    pub light_context: bool,
    /// A new session for this turn (`isolatedSession`).
    pub fresh_session: bool,
}

/// What `almanac agent` reports.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnReport {
    pub session_key: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<Started>,
    pub model: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Report>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub timings: Timings,
}

/// Where a turn's time went, in ms.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Timings {
    /// Skills, memory recall, bootstrap files, system prompt.
    pub assemble_ms: f64,
    /// Whether the skills came from the previous turns' snapshot.
    pub skills: skills::stored::Origin,
    pub model_ms: f64,
    pub tools_ms: f64,
    /// Everything but the model and the tools: assembly, transcript and
    /// session writes.
    pub overhead_ms: f64,
    pub total_ms: f64,
}

/// A message that resets the session: the trigger and what follows it.
fn reset_trigger<'a>(app: &App, message: &'a str) -> Option<(Started, &'a str)> {
    let triggers = &app.config.config.session.reset_triggers;
    let defaults = ["/new".to_string(), "/reset".to_string()];
    let triggers: &[String] = if triggers.is_empty() {
        &defaults
    } else {
        triggers
    };
    let text = message.trim_start();
    for t in triggers.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        // A message shorter than this trigger may still be a later one.
        let Some(head) = text.get(..t.len()) else {
            continue;
        };
        if head.eq_ignore_ascii_case(t)
            && text[t.len()..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        {
            let why = if t.eq_ignore_ascii_case("/reset") {
                Started::Reset
            } else {
                Started::New
            };
            return Some((why, text[t.len()..].trim()));
        }
    }
    None
}

/// What a turn takes from the skills, kept between turns
/// ([`skills::stored`]) while no skill file or gating input changes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DerivedSkills {
    /// The `<available_skills>` catalog (empty: no skill visible).
    catalog: String,
    /// Eligible skills declared with `command-dispatch: tool`.
    tools: Vec<SkillTool>,
    /// Folders of eligible skills, which `read` may open.
    read_roots: Vec<PathBuf>,
    /// The binaries eligible skills require (`tools.exec.autoAllowSkills`).
    #[serde(default)]
    skill_bins: Vec<String>,
}

struct TurnSkills {
    inputs: skills::SkillsInputs,
    derived: DerivedSkills,
    origin: skills::stored::Origin,
}

/// The skills of a turn; `read_only` (for `agent prompt`) writes neither
/// the bundled skills nor the stored snapshot.
fn turn_skills(app: &App, read_only: bool) -> TurnSkills {
    let (inputs, _warnings) = if read_only {
        app.skills_inputs()
    } else {
        app.skills_inputs_for_running()
    };
    let cache = app.paths.skills_cache();
    let wall_ns = app.host.wall_now().as_nanosecond();
    let keep = !read_only;
    let (derived, origin) =
        skills::stored::load_or_build(&cache, &inputs, wall_ns, keep, |report| {
            derive_skills(report, &inputs)
        });
    TurnSkills {
        inputs,
        derived,
        origin,
    }
}

/// Brings what turns keep of the skills up to date now (the gateway's
/// skills watcher), so the next turn reuses it.
pub(crate) fn refresh_skills(app: &App) -> anyhow::Result<()> {
    app.ensure_state_dir()?;
    let _ = turn_skills(app, false);
    Ok(())
}

fn derive_skills(report: &skills::SkillsReport, inputs: &skills::SkillsInputs) -> DerivedSkills {
    let catalog = skills::catalog(report, inputs);
    let usable = report.usable();
    let commands = skills::commands::slash_commands(usable.iter().copied());
    let mut tools = Vec::new();
    for skill in &usable {
        if let Some(dispatch) = &skill.dispatch {
            let tool = if dispatch.tool_name.is_empty() {
                commands
                    .iter()
                    .find(|c| c.skill_name == skill.name)
                    .map(|c| c.name.clone())
                    .unwrap_or_else(|| skill.name.clone())
            } else {
                dispatch.tool_name.clone()
            };
            tools.push(SkillTool {
                tool,
                skill: skill.name.clone(),
                description: skill.description.clone(),
            });
        }
    }
    DerivedSkills {
        catalog: catalog.prompt,
        tools,
        read_roots: usable.iter().map(|s| s.base_dir.clone()).collect(),
        skill_bins: usable
            .iter()
            .flat_map(|s| s.requires.bins.iter().cloned())
            .collect(),
    }
}

/// Everything a turn is assembled from.
struct Assembled {
    system: String,
    tool_specs: Vec<ToolSpec>,
    /// What the turn's tools are set up with.
    tools: ToolSettings,
    memory_write: bool,
    bootstrap: Vec<prompt::BootstrapFile>,
    skills_from: skills::stored::Origin,
    /// The memory index's periodic full scan is due.
    full_scan_due: bool,
}

/// Assembles the turn; `alongside` (the session's own reading) runs on the
/// thread that reads the skills, while the memory is recalled.
#[allow(clippy::too_many_arguments)]
fn assemble<T: Send>(
    app: &App,
    model: &Model,
    message: &str,
    heartbeat: Option<HeartbeatTurn>,
    shape: &TurnShape,
    caller: Caller,
    services: &AppServices,
    alongside: impl FnOnce() -> T + Send,
) -> (Assembled, T) {
    let defaults = &app.config.config.agents.defaults;
    let workspace = app.paths.workspace.clone();
    let memory_search = defaults.memory_search.enabled;
    let memory_write = app.config.config.memory.session.enabled;
    // Recalling session notes is the longest part; the skills and the
    // workspace files are read meanwhile on another thread (which ends
    // first, so its exit costs nothing here).
    let (skills, bootstrap, (memory_context, full_scan_due), also) = std::thread::scope(|scope| {
        let reading = scope.spawn(|| {
            let also = alongside();
            let skills = turn_skills(app, services.read_only);
            let names = match heartbeat {
                None if shape.light_context => prompt::LIGHT_BOOTSTRAP_FILES,
                None => prompt::BOOTSTRAP_FILES,
                Some(h) if h.light_context => prompt::LIGHT_HEARTBEAT_BOOTSTRAP_FILES,
                Some(_) => prompt::HEARTBEAT_BOOTSTRAP_FILES,
            };
            let bootstrap = prompt::bootstrap_files(
                &workspace,
                names,
                defaults.bootstrap_max_chars as usize,
                defaults.bootstrap_total_max_chars as usize,
                &app.real_targets(&app.config.config.memory.allow_symlink_targets),
            );
            (skills, bootstrap, also)
        });
        let light = shape.light_context || heartbeat.is_some_and(|h| h.light_context);
        let recalled = if memory_write && !light && !message.trim().is_empty() {
            services.context(message)
        } else {
            (None, false)
        };
        let (skills, bootstrap, also) = reading
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (skills, bootstrap, recalled, also)
    });
    let TurnSkills {
        inputs,
        derived:
            DerivedSkills {
                catalog,
                tools: skill_tools,
                read_roots,
                skill_bins,
            },
        origin: skills_from,
    } = skills;
    let ctx = skills::gates::GateContext::new(
        &inputs.env,
        &inputs.config,
        inputs.permissions_override.as_deref(),
    );
    let tools_config = &app.config.config.tools;
    let exec_config = &tools_config.exec;
    let allowlist = Allowlist::new(
        exec_config.safe_bins.iter().map(String::as_str),
        exec_config
            .auto_allow_skills
            .then_some(&skill_bins)
            .into_iter()
            .flatten()
            .map(String::as_str),
    );
    let settings = ToolSettings {
        workspace: workspace.clone(),
        home: app.host.home.clone(),
        read_roots,
        protected: Protected {
            config_file: Some(app.paths.config_path.clone()),
            state_dir: Some(app.paths.state_dir.clone()),
        },
        policy: ToolPolicy::new(tools_config).narrowed_to(shape.tools_allow.clone()),
        allow_shell: ctx.allowed_permissions.contains("shell"),
        exec: ExecPolicy {
            security: exec_config.security,
            ask: tools_config.exec_ask(&app.config.config.security),
            allowlist,
        },
        exec_env: exec_env(app),
        exec_timeout: Duration::from_secs(u64::from(exec_config.timeout_sec.max(1))),
        memory_search,
        memory_write,
        skills: skill_tools,
        caller,
    };
    let tools = Tools {
        settings,
        services,
        approver: &NoApprover,
    };
    let tool_specs = tools.specs();
    let tz = app.user_time_zone();
    let now = app.host.now().with_time_zone(tz.clone());
    let parts = Parts {
        agent_id: "main".to_string(),
        now: format!(
            "{} ({}, {})",
            now.strftime("%Y-%m-%d %H:%M"),
            tz.iana_name().unwrap_or("local"),
            now.strftime("%A")
        ),
        workspace,
        model: model.reference.clone(),
        tools: tool_specs.clone(),
        skills_catalog: (!catalog.trim().is_empty()).then_some(catalog),
        memory_tools: memory_search,
        bootstrap: bootstrap.clone(),
        memory_context,
    };
    let assembled = Assembled {
        system: prompt::system_prompt(&parts),
        tool_specs,
        tools: tools.settings,
        memory_write,
        bootstrap,
        skills_from,
        full_scan_due,
    };
    (assembled, also)
}

/// The environment of `exec` children: the children's allowlist of
/// almanac's environment (no provider key, token, skill value or almanac
/// setting), whatever the exec policy.
fn exec_env(app: &App) -> BTreeMap<String, String> {
    crate::child::env::base(app.host.vars())
}

/// The variables model providers' keys are read from, which no child gets
/// even when a skill names them (a skill is given a key through
/// `skills.entries.<key>.apiKey` instead).
pub(crate) fn provider_key_vars() -> impl Iterator<Item = &'static str> {
    KNOWN.iter().filter_map(|k| k.3)
}

/// Memory, skills and scheduled jobs for the tools, through the app's
/// use cases.
struct AppServices {
    app: App,
    /// Assembling only to show the prompt (`agent prompt`): nothing may be
    /// written.
    read_only: bool,
    /// The gateway, when the turn runs in its process.
    gateway: Option<std::sync::Arc<dyn super::gateway::GatewayHooks>>,
}

impl AppServices {
    /// The notes recalled for `goal`, and whether the memory index's
    /// periodic full scan is due (left for later: it is not waited for).
    fn context(&self, goal: &str) -> (Option<String>, bool) {
        let recalled = if self.read_only {
            session_memory::context_creating_nothing(&self.app, goal).map(|block| (block, false))
        } else {
            session_memory::context_for_turn(&self.app, goal)
        };
        match recalled {
            Ok((block, due)) => ((!block.items.is_empty()).then_some(block.text), due),
            Err(err) => {
                tracing::warn!(err = %format!("{err:#}"), "no notes recalled");
                (None, false)
            }
        }
    }
}

impl Services for AppServices {
    fn memory_search(
        &self,
        query: &str,
        max_results: Option<usize>,
        min_score: Option<f64>,
    ) -> Result<Value, String> {
        let req = SearchRequest {
            query: query.to_string(),
            max_results,
            min_score,
            context: 1,
            ..SearchRequest::default()
        };
        let searched = app_memory::search(&self.app, &req).map_err(|e| format!("{e:#}"))?;
        if searched.disabled {
            return Ok(json!({"results": [], "disabled": true, "error": "memory search is off"}));
        }
        // The hits have passed the read-time rule (`Hit::guard`).
        let results: Vec<Value> = searched
            .outcome
            .hits
            .iter()
            .map(|h| {
                let mut result = json!({"path": h.path, "startLine": h.start_line, "endLine": h.end_line, "score": (h.score * 10_000.0).round() / 10_000.0, "snippet": h.body, "source": "memory", "date": h.day});
                if !h.withheld.is_empty() {
                    result["withheld"] = json!(h.withheld);
                }
                result
            })
            .collect();
        Ok(json!({"results": results, "provider": "none", "mode": "fts-only"}))
    }

    fn memory_get(
        &self,
        path: &str,
        from: Option<usize>,
        lines: Option<usize>,
    ) -> Result<Value, String> {
        app_memory::get(&self.app, path, from, lines)
            .map(|g| {
                let mut got = json!({"path": g.path, "text": g.text});
                if !g.withheld.is_empty() {
                    got["withheld"] = json!(g.withheld);
                }
                got
            })
            .map_err(|e| e.to_string())
    }

    fn memory_append(&self, text: &str, long_term: bool) -> Result<Value, String> {
        let req = AppendRequest {
            text,
            long_term,
            also_daily: false,
            force: false,
        };
        let done = session_memory::append(&self.app, &req).map_err(|e| format!("{e:#}"))?;
        Ok(serde_json::to_value(&done).unwrap_or(Value::Null))
    }

    fn prepare_skill(&self, skill: &str, args: &[String]) -> Result<SkillRun, String> {
        match super::skills::prepare_run(&self.app, skill, args, crate::child::Input::Null) {
            Ok(super::skills::Prepared::Print(text)) => Ok(SkillRun::Print(text)),
            Ok(super::skills::Prepared::Exec(spec)) => Ok(SkillRun::Exec(spec)),
            Err(e) => Err(e.to_string()),
        }
    }

    fn cron<'a>(
        &'a self,
        caller: &'a Caller,
        action: &'a str,
        args: &'a Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + 'a>>
    {
        Box::pin(super::cron_tool::call(
            &self.app,
            self.gateway.as_ref(),
            caller,
            action,
            args,
        ))
    }
}

/// The caller the tools of a turn in `key` serve.
fn caller(key: &str) -> Caller {
    Caller {
        agent_id: AGENT_ID.to_string(),
        session_key: key.to_string(),
    }
}

/// What the model would be sent for a message (`almanac agent prompt`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptView {
    pub session_key: String,
    pub model: String,
    pub system: String,
    pub tools: Vec<ToolSpec>,
    /// The conversation after hygiene, with the new message last.
    pub messages: Vec<Value>,
    pub bootstrap: Vec<prompt::BootstrapFile>,
    pub estimated_tokens: usize,
    /// Whether the skills came from the previous turns' snapshot.
    pub skills: skills::stored::Origin,
}

pub(crate) fn prompt_view(app: &App, req: &TurnRequest) -> anyhow::Result<PromptView> {
    let sessions = app.sessions(req.agent.as_deref());
    let key = sessions.resolve_key(req.session_key.as_deref());
    let entry = stored_entry(&sessions, &key);
    let kept = entry.as_ref().and_then(session_model);
    let model = app.model_without_key(req.model.as_deref().or(kept.as_deref()))?;
    let services = AppServices {
        app: app.clone(),
        read_only: true,
        gateway: None,
    };
    let (assembled, ()) = assemble(
        app,
        &model,
        &req.message,
        req.heartbeat,
        &req.shape,
        caller(&key),
        &services,
        || (),
    );
    let mut history = match &entry {
        Some(e) => transcript::read(&sessions.transcript_path(e))?.context(),
        None => Vec::new(),
    };
    let events = sessions.events().peek(&key);
    let lines = events::render(&events, |ts| event_time(app, ts));
    history.push(Message::User(vec![Block::text(prompt::user_text(
        &req.message,
        &lines,
    ))]));
    let (messages, _) = crate::agent::hygiene::clean(&history, model.endpoint.api);
    let estimated_tokens = compaction::estimate(&assembled.system, &messages);
    Ok(PromptView {
        session_key: key,
        model: model.reference,
        system: assembled.system,
        tools: assembled.tool_specs,
        messages: messages
            .iter()
            .map(|m| transcript::message_json(m, None, 0))
            .collect(),
        bootstrap: assembled.bootstrap,
        estimated_tokens,
        skills: assembled.skills_from,
    })
}

fn event_time(app: &App, ts: i64) -> String {
    jiff::Timestamp::from_millisecond(ts)
        .map(|t| {
            t.to_zoned_datetime(app.user_time_zone())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_default()
}

/// The queued events a turn delivers: those pending, less any an earlier
/// turn's transcript records as delivered (the queue not updated after it:
/// a crash), which are taken off the queue now instead of repeated.
fn events_to_deliver(
    queue: &events::Queue,
    key: &str,
    pending: std::io::Result<events::Pending>,
    stored: &transcript::Transcript,
    now: jiff::Timestamp,
    warnings: &mut Vec<String>,
) -> Vec<events::Event> {
    let pending = match pending {
        Ok(pending) => pending,
        Err(err) => {
            warnings.push(format!("queued system events not read: {err}"));
            return Vec::new();
        }
    };
    warnings.extend(pending.warnings);
    if pending.events.is_empty() {
        return pending.events;
    }
    let delivered = events::delivered(stored);
    let (done, waiting): (Vec<_>, Vec<_>) = pending
        .events
        .into_iter()
        .partition(|e| delivered.contains(&e.fingerprint()));
    if !done.is_empty()
        && let Err(err) = consume(queue, key, &done, now, warnings)
    {
        warnings.push(format!("delivered system events still queued: {err}"));
    }
    waiting
}

/// Takes `events` off `key`'s queue.
fn consume(
    queue: &events::Queue,
    key: &str,
    events: &[events::Event],
    now: jiff::Timestamp,
    warnings: &mut Vec<String>,
) -> std::io::Result<()> {
    let delivered: Vec<String> = events.iter().map(events::Event::fingerprint).collect();
    warnings.extend(queue.consume(key, &delivered, now)?);
    Ok(())
}

/// The one agent this almanac runs.
pub(crate) const AGENT_ID: &str = "main";

/// A turn for an agent almanac does not run, or for a session key no
/// session can have.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadTarget {
    #[error("unknown agent `{0}`: almanac runs one agent, `main`")]
    Agent(String),
    #[error("a session key holds no control characters: {0:?}")]
    SessionKey(String),
}

/// Refuses a request for any agent but `main` (by `agent` or by an
/// `agent:<id>:…` session key), and a session key with control
/// characters (it would be printed back to terminals).
pub(crate) fn check_agent(req: &TurnRequest) -> Result<(), BadTarget> {
    if let Some(agent) = req
        .agent
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
        && crate::session::key::normalize_id(agent, AGENT_ID) != AGENT_ID
    {
        return Err(BadTarget::Agent(agent.to_string()));
    }
    if let Some(key) = req.session_key.as_deref()
        && key.chars().any(char::is_control)
    {
        return Err(BadTarget::SessionKey(key.to_string()));
    }
    if let Some(key) = req.session_key.as_deref()
        && let Some(rest) = key.trim().strip_prefix("agent:")
        && let Some((agent, _)) = rest.split_once(':')
        && crate::session::key::normalize_id(agent, AGENT_ID) != AGENT_ID
    {
        return Err(BadTarget::Agent(agent.to_string()));
    }
    Ok(())
}

/// Where a turn's async work (its model calls) runs.
pub(crate) enum Driver {
    /// A runtime driven elsewhere; the turn runs on one of its blocking
    /// threads (the gateway, and the engine's lanes).
    Handle(tokio::runtime::Handle),
    /// A current-thread runtime this thread drives (a command's single
    /// turn, run on the main thread).
    Owned(std::sync::Arc<tokio::runtime::Runtime>),
}

impl Driver {
    fn block_on<F: std::future::Future>(&self, work: F) -> F::Output {
        match self {
            Driver::Handle(handle) => handle.block_on(work),
            Driver::Owned(runtime) => runtime.block_on(work),
        }
    }
}

/// What runs a turn besides the app: where its model calls run, where
/// model clients come from, and the signal that stops it.
pub(crate) struct TurnContext {
    pub driver: Driver,
    pub connect:
        std::sync::Arc<dyn Fn(Endpoint) -> std::sync::Arc<dyn provider::Provider> + Send + Sync>,
    pub cancel: tokio_util::sync::CancellationToken,
    /// The gateway, for a turn in its own process (the `cron` tool reaches
    /// it directly instead of over its control API).
    pub gateway: Option<std::sync::Arc<dyn super::gateway::GatewayHooks>>,
}

/// Runs one turn in its session, holding the session's lock file for
/// the whole turn. Call it from a blocking thread of `ctx.driver`'s
/// runtime (the engine does), or the thread that owns it. `retry` is the retry policy (tests pass one
/// that records its waits); `approver` is asked when a command needs a
/// person's approval (`tools.exec.ask`).
pub(crate) fn run_turn(
    app: &App,
    req: &TurnRequest,
    retry: &RetryPolicy,
    sink: &mut dyn StreamSink,
    approver: &dyn Approver,
    ctx: &TurnContext,
) -> anyhow::Result<TurnReport> {
    let started_at = std::time::Instant::now();
    check_agent(req)?;
    app.ensure_state_dir()?;
    app.paths.ensure_workspace()?;
    let sessions = app.sessions(req.agent.as_deref());
    let key = sessions.resolve_key(req.session_key.as_deref());
    // A heartbeat's prompt and a cron job's message are configuration,
    // never a `/new`; an isolated heartbeat or cron run starts a new
    // session every run.
    let (explicit, rest, typed) = match (req.heartbeat, reset_trigger(app, &req.message)) {
        _ if req.shape.isolated_run => (Some(Started::New), req.message.clone(), false),
        (Some(h), _) => (
            h.fresh_session.then_some(Started::New),
            req.message.clone(),
            false,
        ),
        (None, Some((why, rest))) => (Some(why), rest.to_string(), true),
        (None, None) => (None, req.message.clone(), false),
    };
    // `/new provider/model`: the new session's model.
    let (model_choice, message) = match explicit {
        Some(_) if typed && rest.contains('/') && !rest.contains(char::is_whitespace) => {
            (Some(rest.clone()), String::new())
        }
        _ => (None, rest),
    };
    let now = app.host.now_ts();
    // `/new provider/model` names the new session's model; then `--model`,
    // then the model the session keeps (as stored before a reset), then
    // `agents.defaults.model`. Resolved before the session is touched: a
    // turn that cannot call a model (a `/new` naming one that cannot be
    // used included) leaves the session as it is.
    let chosen = model_choice.as_deref().or(req.model.as_deref());
    let kept = match chosen {
        Some(_) => None,
        None => stored_entry(&sessions, &key)
            .as_ref()
            .and_then(session_model),
    };
    let model = app.model(chosen.or(kept.as_deref()))?;
    let mut fallback_warnings = Vec::new();
    let fallbacks = app.fallback_models(
        &model,
        req.shape.fallbacks.as_deref(),
        &mut fallback_warnings,
    );
    // From here the session is this turn's alone (a turn that cannot
    // call a model has created nothing).
    let _turn_lock = crate::durable::lock_file(&sessions.turn_lock_path(&key))?;
    let hooks_on = app.config.config.hooks.internal.enabled;
    let previous = (hooks_on && explicit.is_some()).then(|| stored_entry(&sessions, &key));
    let (current, mut warnings) =
        sessions.current(&key, now, &app.paths.workspace, explicit, false)?;
    warnings.extend(fallback_warnings);
    let source = req.channel.as_deref().unwrap_or("cli");
    if let Some(previous) = previous
        && req.heartbeat.is_none()
        && typed
        && let Some(why @ (Started::New | Started::Reset)) = current.started
    {
        let action = if why == Started::Reset {
            "reset"
        } else {
            "new"
        };
        app.fire_hook(
            &format!("command:{action}"),
            &key,
            json!({
                "sessionEntry": current.entry,
                "previousSessionFile": previous.as_ref().map(|p| sessions.transcript_path(p)),
                "previousSessionEntry": previous,
                "commandSource": source,
                "senderId": source,
                "workspaceDir": app.paths.workspace,
            }),
        );
    }
    if req.heartbeat.is_none() {
        app.fire_hook(
            "message:received",
            &key,
            json!({
                "from": source,
                "content": req.message,
                "channelId": source,
                "conversationId": key,
            }),
        );
    }
    if let Some(choice) = &model_choice {
        sessions.record(&key, now, |e| e.model_override = Some(choice.clone()))?;
    }
    let message = if message.trim().is_empty() {
        "A new session was started. Greet the user briefly.".to_string()
    } else {
        message
    };
    // The HTTP client (and for HTTPS the system's trust store) is set up
    // while the prompt is assembled.
    let endpoint = model.endpoint.clone();
    let connect = ctx.connect.clone();
    let connecting = std::thread::spawn(move || connect(endpoint));
    let services = AppServices {
        app: app.clone(),
        read_only: false,
        gateway: ctx.gateway.clone(),
    };
    let assembly_started = std::time::Instant::now();
    // The session's queued events and its transcript are read while the
    // turn is assembled. The events stay queued until the turn that
    // carries them is synced to the transcript.
    let queue = sessions.events();
    let (assembled, (pending, stored)) = assemble(
        app,
        &model,
        &message,
        req.heartbeat,
        &req.shape,
        caller(&key),
        &services,
        || {
            (
                queue.pending(&key, now),
                transcript::read(&current.transcript),
            )
        },
    );
    let assemble_ms = assembly_started.elapsed().as_secs_f64() * 1000.0;
    let stored = stored?;
    warnings.extend(stored.diagnostics.iter().cloned());
    let events = events_to_deliver(&queue, &key, pending, &stored, now, &mut warnings);
    let lines = events::render(&events, |ts| event_time(app, ts));
    let defaults = &app.config.config.agents.defaults;
    let settings = Settings {
        max_tokens: defaults.max_tokens,
        max_steps: defaults.max_steps.max(1),
        thinking: req.shape.thinking,
    };
    let client = connecting
        .join()
        .map_err(|_| anyhow::anyhow!("setting up the HTTP client failed"))?;
    let models = Models::new(
        Link::new(
            model.reference.clone(),
            model.name.clone(),
            model.endpoint.clone(),
        ),
        client,
        fallbacks,
        ctx.connect.clone(),
    );
    // A due full scan of the memory index runs while the model answers.
    let scanning = assembled.full_scan_due.then(|| {
        let app = app.clone();
        std::thread::spawn(move || {
            app.memory()
                .synced_index(app.wall_ns())
                .map(|(_, report)| report.warnings)
        })
    });
    let host = app.host.clone();
    let clock = move || host.now_ts();
    let clock_now = app.host.now_ts();
    let mut log = Log {
        path: &current.transcript,
        leaf: stored.leaf().map(|e| e.id.clone()),
        taken: stored.ids(),
        clock: &clock,
        unsynced: false,
    };
    let tools = Tools {
        settings: assembled.tools.clone(),
        services: &services,
        approver,
    };
    let user = Message::User(vec![Block::text(prompt::user_text(&message, &lines))]);
    let cancel = ctx.cancel.clone();
    let work = async {
        // Near the window: flush notes, then summarise older turns.
        let mut history = stored.context();
        let mut compaction = None;
        let needed =
            compaction::estimate(&assembled.system, &history) + prompt::estimate_tokens(&message);
        if needed > compaction::threshold(defaults.context_tokens) {
            app.fire_hook(
                "session:compact:before",
                &key,
                json!({"messageCount": history.len(), "tokenCount": needed}),
            );
            let today = app.today().to_string();
            let now_text = app
                .host
                .now()
                .with_time_zone(app.user_time_zone())
                .strftime("%Y-%m-%d %H:%M")
                .to_string();
            let flush = (assembled.memory_write && tools.offers("memory_append")).then_some(&tools);
            compaction = compaction::compact(
                &models, retry, &settings, &stored, flush, &today, &now_text, &mut log,
            )
            .await?;
            if let Some(report) = &compaction {
                history = transcript::read(&current.transcript)?.context();
                let tokens_after = compaction::estimate(&assembled.system, &history);
                app.fire_hook(
                    "session:compact:after",
                    &key,
                    json!({
                        "messageCount": history.len(),
                        "tokenCount": tokens_after,
                        "compactedCount": report.summarised_messages,
                        "tokensBefore": report.tokens_before,
                        "tokensAfter": tokens_after,
                    }),
                );
            }
        }
        // A run started again after a crash answers the message its first
        // start wrote, instead of writing it twice.
        let user = match &req.shape.resume_marker {
            Some(marker) if last_user_holds(&history, marker) => None,
            _ => Some(user),
        };
        let outcome = turn::run(
            &models,
            retry,
            &settings,
            &assembled.system,
            &tools,
            history,
            user,
            &mut log,
            sink,
        )
        .await?;
        Ok::<_, anyhow::Error>((compaction, outcome))
    };
    let finished = ctx.driver.block_on(async {
        tokio::select! {
            done = work => Some(done),
            () = cancel.cancelled() => None,
        }
    });
    let Some(finished) = finished else {
        // The user's message may be in the transcript without its answer:
        // an aborted answer closes it, so the next turn sees a whole pair.
        close_cancelled(&mut log, &current.transcript, &models)?;
        return Err(crate::engine::Cancelled("stopped while it ran".into()).into());
    };
    let (compaction, outcome) = finished?;
    if !events.is_empty() {
        // Flushed with the answer: the next turn knows these were
        // delivered even if the queue is not updated below.
        log.append_unsynced(vec![(
            crate::session::iso(clock_now),
            events::delivery_record(&events),
        )])?;
    }
    let usage = outcome.usage;
    let compacted = compaction.is_some();
    let flushed = compaction
        .as_ref()
        .is_some_and(|c| c.flushed_notes > 0 || assembled.memory_write);
    // The transcript's last flush and the session entry's update go to
    // different files: both at once.
    let pending = log.take_pending_sync();
    let (synced, recorded) = std::thread::scope(|scope| {
        let syncing = scope.spawn(|| match pending {
            Some(path) => std::fs::File::open(path).and_then(|f| f.sync_data()),
            None => Ok(()),
        });
        let recorded = sessions.record(&key, app.host.now_ts(), |e| {
            let ms = now.as_millisecond();
            e.updated_at = ms;
            // A heartbeat is not an interaction: the idle reset must
            // still see the session go quiet.
            if req.heartbeat.is_none() {
                e.last_interaction_at = Some(ms);
            }
            if let Some(channel) = &req.channel {
                e.last_channel = Some(channel.clone());
            }
            e.model = Some(models.name().to_string());
            e.model_provider = Some(models.endpoint().provider.clone());
            // Counts from the server and from the file: saturating sums.
            e.input_tokens = e.input_tokens.saturating_add(usage.input);
            e.output_tokens = e.output_tokens.saturating_add(usage.output);
            e.total_tokens = e.total_tokens.saturating_add(usage.total_tokens);
            e.context_tokens = Some(usage.input);
            if compacted {
                e.compaction_count = e.compaction_count.saturating_add(1);
                if flushed {
                    e.memory_flush_at = Some(ms);
                    e.memory_flush_compaction_count = Some(e.compaction_count);
                }
            }
        });
        (syncing.join(), recorded)
    });
    synced
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        .map_err(|e| anyhow::anyhow!("cannot sync the transcript: {e}"))?;
    warnings.extend(recorded?);
    if req.shape.isolated_run {
        let retention = app.config.config.cron.session_retention.ms();
        warnings.extend(sessions.record_run(&key, app.host.now_ts(), retention)?);
    }
    warnings.extend(models.fell_back());
    // The message carrying the events is synced: they leave the queue.
    if !events.is_empty()
        && let Err(err) = consume(&queue, &key, &events, now, &mut warnings)
    {
        warnings.push(format!(
            "system events delivered but still queued ({err}); the next turn drops them"
        ));
    }
    if let Some(scanning) = scanning {
        match scanning.join() {
            Ok(Ok(scan_warnings)) => warnings.extend(scan_warnings),
            Ok(Err(err)) => warnings.push(format!("memory index not rescanned: {err}")),
            Err(_) => warnings.push("memory index not rescanned".to_string()),
        }
    }
    // The acknowledgement token is for the heartbeat runner: in an
    // ordinary reply it is removed wherever it stands unless the channel
    // shows acknowledgements (the transcript keeps the model's words).
    let mut outcome = outcome;
    if req.heartbeat.is_none() && outcome.reply.contains(almanac_heartbeat::ACK_TOKEN) {
        let channel = req.channel.as_deref().unwrap_or("defaults");
        if !app
            .config
            .config
            .channels
            .heartbeat_visibility(channel)
            .show_ok
        {
            outcome.reply = almanac_heartbeat::ack::scrub(&outcome.reply);
        }
    }
    if req.heartbeat.is_none() {
        app.fire_hook(
            "message:sent",
            &key,
            json!({
                "to": source,
                "content": outcome.reply,
                "channelId": source,
                "conversationId": key,
                "success": true,
            }),
        );
    }
    let total_ms = started_at.elapsed().as_secs_f64() * 1000.0;
    let timings = Timings {
        assemble_ms,
        skills: assembled.skills_from,
        model_ms: outcome.model_ms,
        tools_ms: outcome.tools_ms,
        overhead_ms: total_ms - outcome.model_ms - outcome.tools_ms,
        total_ms,
    };
    Ok(TurnReport {
        session_key: key,
        session_id: current.entry.session_id,
        started: current.started,
        model: models.reference().to_string(),
        outcome,
        compaction,
        warnings,
        timings,
    })
}

/// After a cancelled turn: when the transcript's last message is the
/// user's, an empty aborted assistant message answers it.
fn close_cancelled(
    log: &mut Log<'_>,
    path: &std::path::Path,
    models: &Models,
) -> anyhow::Result<()> {
    let stored = transcript::read(path)?;
    let last_is_user = stored
        .context()
        .last()
        .is_some_and(|m| matches!(m, Message::User(_)));
    log.leaf = stored.leaf().map(|e| e.id.clone());
    log.taken = stored.ids();
    if last_is_user {
        let meta = transcript::AssistantMeta {
            api: models.endpoint().api.as_str().to_string(),
            provider: models.endpoint().provider.clone(),
            model: models.name().to_string(),
            usage: Default::default(),
            stop_reason: Some(provider::StopReason::Aborted),
            error_message: Some("cancelled".to_string()),
        };
        log.message(&Message::Assistant(Vec::new()), Some(&meta))?;
    }
    Ok(())
}

/// `almanac sessions show`: the entry and the transcript's context.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionView {
    pub key: String,
    pub entry: Value,
    pub transcript: PathBuf,
    pub messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
}

pub(crate) fn session_view(
    app: &App,
    agent: Option<&str>,
    key: &str,
) -> anyhow::Result<Option<SessionView>> {
    let sessions = app.sessions(agent);
    let key = sessions.resolve_key(Some(key));
    let (map, _) = sessions.store().load();
    let Some(raw) = map.get(&key) else {
        return Ok(None);
    };
    let Some(entry) = SessionEntry::from_value(raw) else {
        return Ok(None);
    };
    let path = sessions.transcript_path(&entry);
    let t = transcript::read(&path)?;
    Ok(Some(SessionView {
        key,
        entry: raw.clone(),
        transcript: path,
        messages: t
            .branch()
            .iter()
            .filter_map(|e| match &e.payload {
                transcript::Payload::Message {
                    message,
                    meta,
                    timestamp_ms,
                } => Some(transcript::message_json(
                    message,
                    meta.as_ref(),
                    *timestamp_ms,
                )),
                transcript::Payload::Compaction { summary, .. } => {
                    Some(json!({"role": "compaction", "summary": summary}))
                }
                transcript::Payload::Other(_) => None,
            })
            .collect(),
        diagnostics: t.diagnostics,
    }))
}

#[cfg(test)]
#[path = "cron_tool_tests.rs"]
mod cron_tool_tests;

#[cfg(test)]
mod session_key_tests {
    use crate::app::testing::test_app as app;

    /// The shortcut the gateway takes per request gives the key the
    /// agent's sessions give, under each scope and main key.
    #[test]
    fn the_session_key_shortcut_agrees_with_the_sessions() {
        let dir = tempfile::tempdir().unwrap();
        for config in [
            "{}",
            r#"{session: {mainKey: "Desk"}}"#,
            r#"{session: {scope: "global"}}"#,
        ] {
            let app = app(dir.path(), config);
            for agent in [None, Some("main"), Some(" MAIN ")] {
                for request in [
                    None,
                    Some(""),
                    Some("main"),
                    Some("Ops"),
                    Some("agent:main:main"),
                    Some("agent:Main:telegram:dm:42"),
                    Some("global"),
                ] {
                    assert_eq!(
                        app.resolve_session_key(agent, request),
                        app.sessions(agent).resolve_key(request),
                        "{config} {agent:?} {request:?}"
                    );
                }
            }
        }
        let app = app(dir.path(), r#"{session: {mainKey: "Desk"}}"#);
        assert_eq!(app.resolve_session_key(None, None), "agent:main:desk");
    }
}
