//! `agents list | add | bind | unbind`: the agents and their bindings as
//! the config has them, and edits of `agents.list` / `agents.entries` and
//! `bindings` in the config file (only those keys change).

use serde::Serialize;
use serde_json::{Value, json};

use super::App;
use crate::agents::{Agent, MAIN};
use crate::config::{self, BindingConfig};
use crate::session::key::normalize_id;

/// One agent as `agents list` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentRow {
    pub id: String,
    pub name: String,
    pub identity_name: Option<String>,
    pub workspace: String,
    pub agent_dir: String,
    pub sessions_dir: String,
    pub model: Option<String>,
    pub bindings: usize,
    pub is_default: bool,
    pub heartbeat: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding_details: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
}

/// The agents, each with its bindings counted (and described when
/// `details`).
pub(crate) fn list(app: &App, details: bool) -> anyhow::Result<Vec<AgentRow>> {
    let agents = app.agents()?;
    let heartbeat: Vec<String> = agents
        .with_heartbeat()
        .iter()
        .map(|a| a.id.clone())
        .collect();
    let rows = agents
        .list
        .iter()
        .map(|agent| {
            let own: Vec<&BindingConfig> = agents
                .bindings
                .iter()
                .filter(|b| normalize_id(&b.agent_id, MAIN) == agent.id)
                .collect();
            let model = agent
                .entry
                .as_ref()
                .and_then(|e| e.model.as_ref())
                .or(app.base_config().agents.defaults.model.as_ref())
                .map(|m| m.primary().to_string());
            AgentRow {
                name: agent.name.clone().unwrap_or_else(|| agent.id.clone()),
                identity_name: agent
                    .entry
                    .as_ref()
                    .and_then(|e| e.identity.as_ref())
                    .and_then(|i| i.name.clone()),
                workspace: agent.workspace.display().to_string(),
                agent_dir: agent_dir(app, agent),
                sessions_dir: app.sessions(Some(&agent.id)).dir.display().to_string(),
                model,
                bindings: own.len(),
                is_default: agent.is_default,
                heartbeat: heartbeat.contains(&agent.id),
                binding_details: details.then(|| own.iter().map(|b| describe(b)).collect()),
                routes: (details && agent.is_default)
                    .then(|| vec!["default (no explicit rules)".to_string()]),
                id: agent.id.clone(),
            }
        })
        .collect();
    Ok(rows)
}

fn agent_dir(app: &App, agent: &Agent) -> String {
    match agent.entry.as_ref().and_then(|e| e.agent_dir.as_deref()) {
        Some(dir) if !dir.trim().is_empty() => {
            app.host.resolve_path(dir.trim()).display().to_string()
        }
        _ => app
            .paths
            .state_dir
            .join("agents")
            .join(&agent.id)
            .join("agent")
            .display()
            .to_string(),
    }
}

/// `telegram accountId=ops peer=direct:42`.
pub(crate) fn describe(b: &BindingConfig) -> String {
    let mut out = b.matches.channel.clone();
    if let Some(account) = &b.matches.account_id {
        out.push_str(&format!(" accountId={account}"));
    }
    if let Some(peer) = &b.matches.peer {
        out.push_str(&format!(" peer={}:{}", peer.kind, peer.id));
    }
    out
}

/// What `agents add` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Added {
    pub id: String,
    pub workspace: String,
    /// The config key written.
    pub key: String,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentEditError {
    #[error("agent `{0}` exists already")]
    Exists(String),
    #[error("`{0}` is not a usable agent id: use letters, digits, `-` and `_`")]
    BadId(String),
    #[error("--bind takes <channel>[:<accountId>], got `{0}`")]
    BadBind(String),
    #[error("--peer takes <kind>:<id> with kind direct, group or channel, got `{0}`")]
    BadPeer(String),
}

/// Adds agent `id` (its workspace `workspace`, else the default one),
/// in the form the config already uses: `agents.entries` when it has
/// them, else `agents.list` (which, when it is new, lists the agent that
/// was implicit first, so nothing of it moves).
pub(crate) fn add(app: &App, id: &str, workspace: Option<&str>) -> anyhow::Result<Added> {
    let normal = normalize_id(id, "");
    if normal.is_empty() || normal != id.trim().to_lowercase() {
        return Err(AgentEditError::BadId(id.to_string()).into());
    }
    let agents = app.agents()?;
    if agents.get(&normal).is_some() {
        return Err(AgentEditError::Exists(normal).into());
    }
    let mut entry = json!({"name": normal});
    if let Some(ws) = workspace.map(str::trim).filter(|w| !w.is_empty()) {
        entry["workspace"] = Value::String(ws.to_string());
    }
    let raw = &app.config.file.raw;
    let path = &app.config.file.path;
    app.ensure_state_dir()?;
    let key = if raw["agents"]["entries"]
        .as_object()
        .is_some_and(|m| !m.is_empty())
    {
        let key = format!("agents.entries.{normal}");
        config::set::set(path, &key, &entry.to_string())?;
        key
    } else {
        let mut list = raw["agents"]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if list.is_empty() {
            let current = agents.default_agent();
            list.push(json!({"id": current.id, "default": true}));
        }
        entry["id"] = Value::String(normal.clone());
        list.push(entry);
        config::set::set(path, "agents.list", &Value::Array(list).to_string())?;
        "agents.list".to_string()
    };
    let dir = match workspace.map(str::trim).filter(|w| !w.is_empty()) {
        Some(ws) => app.host.resolve_path(ws),
        None => app.paths.state_dir.join(format!("workspace-{normal}")),
    };
    crate::durable::create_private_dir_all(&dir)?;
    Ok(Added {
        id: normal,
        workspace: dir.display().to_string(),
        key,
    })
}

/// The binding `--bind channel[:account]` and `--peer kind:id` make.
pub(crate) fn binding(agent: &str, bind: &str, peer: Option<&str>) -> anyhow::Result<Value> {
    let (channel, account) = match bind.split_once(':') {
        Some((c, a)) => (c.trim(), Some(a.trim())),
        None => (bind.trim(), None),
    };
    if channel.is_empty() || account.is_some_and(str::is_empty) {
        return Err(AgentEditError::BadBind(bind.to_string()).into());
    }
    let mut matches = json!({"channel": channel});
    if let Some(account) = account {
        matches["accountId"] = Value::String(account.to_string());
    }
    if let Some(peer) = peer {
        let Some((kind, id)) = peer.split_once(':') else {
            return Err(AgentEditError::BadPeer(peer.to_string()).into());
        };
        let kind = kind.trim().to_lowercase();
        if !["direct", "group", "channel"].contains(&kind.as_str()) || id.trim().is_empty() {
            return Err(AgentEditError::BadPeer(peer.to_string()).into());
        }
        matches["peer"] = json!({"kind": kind, "id": id.trim()});
    }
    Ok(json!({"agentId": agent, "match": matches}))
}

/// What `agents bind` / `unbind` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Rebound {
    pub agent_id: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub bindings: usize,
}

/// Appends `new` (a [`binding`]) unless an equal one is there.
pub(crate) fn bind(app: &App, agent: &str, new: Value) -> anyhow::Result<Rebound> {
    let agent = app.agents()?.require(agent)?.id.clone();
    let mut list = current_bindings(app);
    let typed: BindingConfig = serde_json::from_value(new.clone())?;
    let exists = list.iter().any(|b| same(b, &typed));
    let mut added = Vec::new();
    if !exists {
        list.push(new);
        added.push(describe(&typed));
        write_bindings(app, &list)?;
    }
    Ok(Rebound {
        agent_id: agent,
        added,
        removed: Vec::new(),
        bindings: list.len(),
    })
}

/// Removes `agent`'s bindings equal to `which`, or all of them (`None`).
pub(crate) fn unbind(app: &App, agent: &str, which: Option<Value>) -> anyhow::Result<Rebound> {
    let agent = app.agents()?.require(agent)?.id.clone();
    let which: Option<BindingConfig> = which.map(serde_json::from_value).transpose()?;
    let mut removed = Vec::new();
    let list: Vec<Value> = current_bindings(app)
        .into_iter()
        .filter(|raw| {
            let Ok(b) = serde_json::from_value::<BindingConfig>(raw.clone()) else {
                return true;
            };
            let hit = normalize_id(&b.agent_id, MAIN) == agent
                && which.as_ref().is_none_or(|w| same_match(&b, w));
            if hit {
                removed.push(describe(&b));
            }
            !hit
        })
        .collect();
    if !removed.is_empty() {
        write_bindings(app, &list)?;
    }
    Ok(Rebound {
        agent_id: agent,
        added: Vec::new(),
        removed,
        bindings: list.len(),
    })
}

fn current_bindings(app: &App) -> Vec<Value> {
    app.config.file.raw["bindings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn write_bindings(app: &App, list: &[Value]) -> anyhow::Result<()> {
    app.ensure_state_dir()?;
    config::set::set(
        &app.config.file.path,
        "bindings",
        &Value::Array(list.to_vec()).to_string(),
    )?;
    Ok(())
}

fn same(raw: &Value, b: &BindingConfig) -> bool {
    serde_json::from_value::<BindingConfig>(raw.clone()).is_ok_and(|a| {
        normalize_id(&a.agent_id, MAIN) == normalize_id(&b.agent_id, MAIN) && same_match(&a, b)
    })
}

fn same_match(a: &BindingConfig, b: &BindingConfig) -> bool {
    let lower = |s: &Option<String>| s.as_deref().map(|s| s.trim().to_lowercase());
    a.matches
        .channel
        .trim()
        .eq_ignore_ascii_case(b.matches.channel.trim())
        && lower(&a.matches.account_id) == lower(&b.matches.account_id)
        && a.matches
            .peer
            .as_ref()
            .map(|p| (p.kind.to_lowercase(), p.id.trim()))
            == b.matches
                .peer
                .as_ref()
                .map(|p| (p.kind.to_lowercase(), p.id.trim()))
}
