//! What a turn is assembled from: the skills it takes (kept between
//! turns while nothing they come from changes), the workspace files and
//! recalled notes of its prompt, its tools as the policy and its shape
//! allow them, and the app's use cases the tools reach (`Services`).
//!
//! Invariants: `agent prompt` assembles without writing anything; a light
//! context (a light heartbeat, a cron job's `lightContext`) recalls no
//! notes and sends only its few workspace files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::model::Model;
use crate::agent::policy::{ExecPolicy, NoApprover, ToolPolicy};
use crate::agent::prompt::{self, Parts};
use crate::agent::shell::Allowlist;
use crate::agent::tools::{Caller, Protected, Services, SkillRun, SkillTool, ToolSettings, Tools};
use crate::app::App;
use crate::app::memory::{self as app_memory, SearchRequest};
use crate::app::session_memory;
use crate::memory::write::AppendRequest;
use crate::provider::ToolSpec;
use crate::skills;
use crate::trigger::{HeartbeatTurn, TurnShape};

/// What a turn takes from the skills, kept between turns
/// ([`skills::stored`]) while no skill file or gating input changes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DerivedSkills {
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

pub(super) struct TurnSkills {
    inputs: skills::SkillsInputs,
    derived: DerivedSkills,
    origin: skills::stored::Origin,
}

/// The skills of a turn; `read_only` (for `agent prompt`) writes neither
/// the bundled skills nor the stored snapshot.
pub(super) fn turn_skills(app: &App, read_only: bool) -> TurnSkills {
    let (inputs, _warnings) = if read_only {
        app.skills_inputs()
    } else {
        app.skills_inputs_for_running()
    };
    let cache = app.skills_cache();
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
pub(super) struct Assembled {
    pub(super) system: String,
    pub(super) tool_specs: Vec<ToolSpec>,
    /// What the turn's tools are set up with.
    pub(super) tools: ToolSettings,
    pub(super) memory_write: bool,
    pub(super) bootstrap: Vec<prompt::BootstrapFile>,
    pub(super) skills_from: skills::stored::Origin,
    /// The memory index's periodic full scan is due.
    pub(super) full_scan_due: bool,
}

/// Assembles the turn; `alongside` (the session's own reading) runs on the
/// thread that reads the skills, while the memory is recalled.
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble<T: Send>(
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
    let reading = || {
        let also = alongside();
        let skills = turn_skills(app, services.read_only);
        let names = match heartbeat {
            None if shape.light_context => prompt::LIGHT_BOOTSTRAP_FILES,
            None if shape.subagent_depth.is_some() => prompt::SUBAGENT_BOOTSTRAP_FILES,
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
    };
    let recalling = || {
        let light = shape.light_context
            || shape.subagent_depth.is_some()
            || heartbeat.is_some_and(|h| h.light_context);
        if memory_write && !light && !message.trim().is_empty() {
            services.context(message)
        } else {
            (None, false)
        }
    };
    // In a server (a gateway port is given) many turns share the cores.
    let ((skills, bootstrap, also), (memory_context, full_scan_due)) =
        crate::par::join(services.gateway.is_none(), reading, recalling);
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
        policy: turn_policy(app, shape),
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
        agent_id: app.agent.clone(),
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

/// The tool policy of a turn: the config's, narrowed by the run's own
/// list, and a subagent's rules for a subagent's turn.
fn turn_policy(app: &App, shape: &TurnShape) -> ToolPolicy {
    let config = &app.config.config;
    let policy = ToolPolicy::new(&config.tools).narrowed_to(shape.tools_allow.clone());
    match shape.subagent_depth {
        Some(depth) => policy.for_subagent(
            &config.tools.subagents.tools,
            depth < config.agents.defaults.subagents.max_spawn_depth,
        ),
        None => policy,
    }
}

/// Memory, skills and scheduled jobs for the tools, through the app's
/// use cases.
pub(super) struct AppServices {
    pub(super) app: App,
    /// Assembling only to show the prompt (`agent prompt`): nothing may be
    /// written.
    pub(super) read_only: bool,
    /// The gateway, when the turn runs in its process.
    pub(super) gateway: Option<std::sync::Arc<dyn crate::app::gateway::GatewayPort>>,
}

impl AppServices {
    /// The notes recalled for `goal`, and whether the memory index's
    /// periodic full scan is due (left for later: it is not waited for).
    pub(super) fn context(&self, goal: &str) -> (Option<String>, bool) {
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
        match crate::app::skills::prepare_run(&self.app, skill, args, crate::child::Input::Null) {
            Ok(crate::app::skills::Prepared::Print(text)) => Ok(SkillRun::Print(text)),
            Ok(crate::app::skills::Prepared::Exec(spec)) => Ok(SkillRun::Exec(spec)),
            Err(e) => Err(e.to_string()),
        }
    }

    fn spawn(&self, caller: &Caller, args: &Value) -> Result<Value, String> {
        if self.read_only {
            return Err("nothing is started while the prompt is only shown".into());
        }
        match &self.gateway {
            Some(gateway) => gateway.spawn_subagent(&caller.agent_id, &caller.session_key, args),
            None => Err(
                "sessions_spawn needs the running gateway (children outlive this turn): start it with `almanac gateway run`, or do the task in this turn".into(),
            ),
        }
    }

    fn subagents<'a>(
        &'a self,
        caller: &'a Caller,
        args: &'a Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + 'a>>
    {
        if self.read_only {
            return Box::pin(async {
                Err("nothing is changed while the prompt is only shown".into())
            });
        }
        match &self.gateway {
            Some(gateway) => gateway.control_subagents(&caller.session_key, args),
            None => Box::pin(async {
                Err("the subagents tool needs the running gateway; without it no background run is alive".into())
            }),
        }
    }

    fn take_steering(&self, caller: &Caller) -> Vec<String> {
        match &self.gateway {
            Some(gateway) if !self.read_only => gateway.take_steering(&caller.session_key),
            _ => Vec::new(),
        }
    }

    fn cron<'a>(
        &'a self,
        caller: &'a Caller,
        action: &'a str,
        args: &'a Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + 'a>>
    {
        Box::pin(crate::app::cron_tool::call(
            &self.app,
            self.gateway.as_ref(),
            caller,
            action,
            args,
        ))
    }
}
