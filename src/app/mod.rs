//! The composition root: turns global options and the [`Host`] into the
//! resolved paths and effective configuration every command works with.
//!
//! Invariants: loading an [`App`] creates nothing on disk; commands that
//! write call [`App::ensure_state_dir`] / [`Paths::ensure_workspace`] first.
//! Commands that only read (status, config, heartbeat status and history,
//! the `status` commands, `memory get`, skills listings, sessions, `agent
//! prompt`, `tasks list|show|audit` and `tasks maintenance` without
//! `--apply`, `outbox list|tail`, `cron next`) create and change nothing;
//! searching commands may create or update only the derived index, and
//! `cron list|status|runs` only the cron index in the state store.
//! Start-up work stays minimal: one small file read (the config) and no
//! database is opened until a command needs it.

pub(crate) mod agent_roster;
pub(crate) mod cron;
mod cron_flags;
pub(crate) mod cron_next;
pub(crate) mod cron_tool;
pub(crate) mod gateway;
pub(crate) mod gateway_install;
pub(crate) mod heartbeat;
pub(crate) mod hooks;
pub(crate) mod mcp_resources;
pub(crate) mod mcp_tools;
pub(crate) mod memory;
mod memory_answer;
pub(crate) mod memory_json;
pub(crate) mod outbox;
pub(crate) mod session_memory;
pub(crate) mod sessions;
pub(crate) mod skills;
pub(crate) mod status;
pub(crate) mod subagent_command;
pub(crate) mod subagents;
pub(crate) mod tasks;
pub(crate) mod zone_data;

use crate::agents::{self, Agents, AgentsError};
use crate::config::{self, LoadedConfig};
use crate::host::Host;
use crate::paths::{self, PathFlags, Paths, StateLocation};

/// Options every command accepts.
#[derive(Debug, Clone, Default)]
pub(crate) struct GlobalOptions {
    pub paths: PathFlags,
    /// `--set KEY=VALUE` pairs (the flag layer of the config).
    pub config_values: Vec<(String, String)>,
}

impl GlobalOptions {
    /// The flag layer of the config: `--set` pairs plus `--workspace`.
    pub(crate) fn config_flag_values(&self) -> Vec<(String, String)> {
        let mut values = self.config_values.clone();
        if let Some(ws) = &self.paths.workspace {
            values.push(("agents.defaults.workspace".to_string(), ws.clone()));
        }
        values
    }
}

/// Everything a command needs to know about where it runs, for one agent:
/// `paths.workspace` is that agent's workspace.
#[derive(Debug, Clone)]
pub(crate) struct App {
    pub host: Host,
    pub paths: Paths,
    pub config: LoadedConfig,
    /// The agent this app acts for (the default agent unless
    /// [`App::for_agent`] chose another).
    pub agent: String,
    /// Whether [`App::agent`] is the default agent (whose state keeps the
    /// places a single-agent setup always had).
    pub default_agent: bool,
    /// `config.config` before the agent's entry was laid over it.
    base: std::sync::Arc<config::Config>,
}

/// Runs `work` on a thread named `name` and awaits it without blocking
/// the runtime: for work that may call the gateway's control API, whose
/// client drives a runtime of its own (which cannot start on a runtime's
/// threads, its blocking pool included).
pub(crate) async fn on_own_thread<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    let (done, answer) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let _ = done.send(work());
        })?;
    answer
        .await
        .map_err(|_| std::io::Error::other("the work stopped without an answer"))
}

impl App {
    /// Wall-clock nanoseconds, for file freshness (never the `--now` time).
    pub(crate) fn wall_ns(&self) -> i64 {
        self.host.wall_now().as_nanosecond() as i64
    }

    /// Resolves paths and loads the layered configuration.
    pub(crate) fn load(options: &GlobalOptions, host: Host) -> anyhow::Result<App> {
        let state = paths::resolve_state(&options.paths, &host)?;
        let config = load_config(&state, options, &host)?;
        let agents = resolve_agents(&state.state_dir, &config, &host)?;
        let default = agents.default_agent();
        let agent = default.id.clone();
        let paths =
            paths::with_workspace(state, default.workspace.clone(), default.workspace_origin);
        let mut config = config;
        let base = std::sync::Arc::new(config.config.clone());
        if let Some(entry) = &default.entry {
            agents::apply_entry(&mut config.config, entry);
        }
        Ok(App {
            host,
            paths,
            config,
            agent,
            default_agent: true,
            base,
        })
    }

    /// An app for the default agent over `paths` as resolved, `config`
    /// as loaded (no agent's entry laid over it).
    pub(crate) fn with_config(host: Host, paths: Paths, config: LoadedConfig) -> App {
        App {
            host,
            paths,
            base: std::sync::Arc::new(config.config.clone()),
            config,
            agent: agents::MAIN.to_string(),
            default_agent: true,
        }
    }

    /// The config as loaded, before any agent's entry was laid over it.
    pub(crate) fn base_config(&self) -> &config::Config {
        &self.base
    }

    /// The same, shared: one value per load of the config (what is
    /// derived from a config can be kept while this is the same).
    pub(crate) fn base_config_shared(&self) -> &std::sync::Arc<config::Config> {
        &self.base
    }

    /// Every agent of this config.
    pub(crate) fn agents(&self) -> Result<Agents, AgentsError> {
        resolve_agents(&self.paths.state_dir, &self.config, &self.host)
    }

    /// This app for agent `id` (`None`: as it is): its workspace, its
    /// sessions, its memory and skills.
    pub(crate) fn for_agent(&self, id: Option<&str>) -> anyhow::Result<App> {
        let Some(id) = id.map(str::trim).filter(|id| !id.is_empty()) else {
            return Ok(self.clone());
        };
        if crate::session::key::normalize_id(id, agents::MAIN) == self.agent {
            return Ok(self.clone());
        }
        let agents = self.agents()?;
        let agent = agents.require(id)?;
        let mut app = self.clone();
        app.paths.workspace = agent.workspace.clone();
        app.paths.workspace_origin = agent.workspace_origin;
        app.agent = agent.id.clone();
        app.default_agent = agent.is_default;
        // The agent's own settings over the defaults, read from the layers
        // as loaded (not over another agent's).
        app.config.config = (*self.base).clone();
        if let Some(entry) = &agent.entry {
            agents::apply_entry(&mut app.config.config, entry);
        }
        if !agent.is_default {
            // A notes folder set apart from the workspace is the default
            // agent's; another agent keeps its notes in its own workspace.
            app.config.config.memory.session.dir = None;
        }
        Ok(app)
    }

    /// What this agent's turns keep of the skills between turns (derived).
    pub(crate) fn skills_cache(&self) -> std::path::PathBuf {
        let cache = self.paths.skills_cache();
        if self.default_agent {
            return cache;
        }
        cache.with_file_name(format!("skills-turn-{}.json", self.agent))
    }

    /// [`App::load`] over the defaults, the environment and the flags
    /// alone: for the commands that need only the state directory
    /// (`gateway status`, `gateway stop`) when the config file is broken.
    pub(crate) fn load_without_config_file(
        options: &GlobalOptions,
        host: Host,
    ) -> anyhow::Result<App> {
        let state = paths::resolve_state(&options.paths, &host)?;
        let config =
            config::load_without_file(&state.config_path, &host, &options.config_flag_values())?;
        let paths = resolve_paths(state, &config, &host);
        Ok(App {
            host,
            paths,
            base: std::sync::Arc::new(config.config.clone()),
            config,
            agent: agents::MAIN.to_string(),
            default_agent: true,
        })
    }

    /// The effective value of a config key and where it came from; keys
    /// whose default is computed (the workspace, the user's time zone, the
    /// session-memory folder) give the value in use. `None`: the key is
    /// known but unset, with no default.
    pub(crate) fn config_value(
        &self,
        key: &str,
    ) -> Result<Option<(serde_json::Value, config::Origin)>, config::ConfigError> {
        config::split_key(key)?;
        if let Some(value) = self.config.get(key) {
            return Ok(Some((value, self.config.origin(key))));
        }
        if !config::is_known_key(key) {
            return Err(config::ConfigError::UnknownKey(key.to_string()));
        }
        let computed = match key {
            "agents.defaults.workspace" => Some(self.paths.workspace.display().to_string()),
            config::USER_TIMEZONE => self.user_time_zone().iana_name().map(str::to_string),
            "memory.session.dir" => Some(self.memory().root.display().to_string()),
            // Unset, it follows `security.actions`.
            "tools.exec.ask" => {
                let config = &self.config.config;
                serde_json::to_value(config.tools.exec_ask(&config.security))
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
            }
            _ => None,
        };
        Ok(computed.map(|v| (serde_json::Value::String(v), config::Origin::Default)))
    }

    /// Allowed symlink targets as configured (`~` allowed) → real paths
    /// (a path that does not resolve is kept as given). One reading for
    /// `skills.load.allowSymlinkTargets` and `memory.allowSymlinkTargets`.
    pub(crate) fn real_targets(&self, configured: &[String]) -> Vec<std::path::PathBuf> {
        configured
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(|t| {
                let p = self.host.resolve_path(t);
                std::fs::canonicalize(&p).unwrap_or(p)
            })
            .collect()
    }

    /// Creates the state directory (0700) if needed.
    /// The gateway of this state directory, if one runs.
    pub(crate) fn gateway_client(
        &self,
    ) -> anyhow::Result<Option<crate::gateway_client::client::Client>> {
        crate::gateway_client::client::Client::find(&self.paths, &self.config.config, &self.host)
    }

    /// [`App::gateway_client`], or the error that none runs.
    pub(crate) fn require_gateway(&self) -> anyhow::Result<crate::gateway_client::client::Client> {
        crate::gateway_client::client::Client::require(&self.paths, &self.config.config, &self.host)
    }

    pub(crate) fn ensure_state_dir(&self) -> std::io::Result<()> {
        self.paths.ensure_state_dir()
    }
}

fn load_config(
    state: &StateLocation,
    options: &GlobalOptions,
    host: &Host,
) -> Result<LoadedConfig, config::ConfigError> {
    config::load(&state.config_path, host, &options.config_flag_values())
}

fn resolve_agents(
    state_dir: &std::path::Path,
    config: &LoadedConfig,
    host: &Host,
) -> Result<Agents, AgentsError> {
    let workspace = agents::DefaultWorkspace {
        configured: config.config.agents.defaults.workspace.as_deref(),
        origin: config.origin("agents.defaults.workspace"),
    };
    Agents::resolve(&config.config, state_dir, workspace, host)
}

fn resolve_paths(state: StateLocation, config: &LoadedConfig, host: &Host) -> Paths {
    let key = "agents.defaults.workspace";
    paths::resolve_workspace(
        state,
        config.config.agents.defaults.workspace.as_deref(),
        config.origin(key),
        host,
    )
}

/// Helpers for tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// An app over `dir`'s `state` directory holding `config`, at a fixed
    /// time (2026-12-01 10:00 UTC), for tests.
    pub(crate) fn test_app(dir: &std::path::Path, config: &str) -> App {
        let state = dir.join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("config.json5"), config).unwrap();
        let host = Host::with_vars(
            [("ALMANAC_STATE_DIR", state.display().to_string())],
            dir,
            dir,
            "2026-12-01T10:00:00+00:00[UTC]".parse().unwrap(),
        );
        App::load(&GlobalOptions::default(), host).expect("app loads")
    }
}
