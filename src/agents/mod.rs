//! The agents this almanac runs: their ids, which one is the default,
//! where each keeps its workspace and sessions, and the bindings that
//! send a channel's messages to one of them.
//!
//! Read from OpenClaw's config as it is: `agents.list[]` (the documented
//! form) and `agents.entries.<id>` (what OpenClaw 2026.9 writes), then
//! `bindings[]` (with or without `type: "route"`). Without either list
//! there is one agent, `main`, exactly as before agents existed.
//!
//! Invariants:
//! * Ids are normalised as session keys normalise them; two entries with
//!   one id are one agent (the first wins, a warning says so).
//! * The default agent is the one marked `default` (the first so
//!   marked), else `main` when it exists, else the first listed. Its
//!   workspace is `agents.defaults.workspace` (which `--workspace` and
//!   `ALMANAC_WORKSPACE` set), else its entry's, else
//!   `<state>/workspace`; any other agent's is its entry's `workspace`,
//!   else `<state>/workspace-<id>`. No two agents share a workspace.
//! * A binding naming an agent that does not exist is a config error that
//!   names the binding; resolution is pure (reads nothing on disk).
//! * A spawned child runs as its parent's agent, or as one the parent's
//!   `subagents.allowAgents` names, one level deeper, within
//!   `agents.defaults.subagents` (`spawn`).

use std::path::PathBuf;

use crate::config::{AgentEntry, BindingConfig, Config, Origin};
use crate::host::Host;
use crate::session::key::normalize_id;

pub(crate) mod spawn;
#[cfg(test)]
mod tests;

/// The id of the one agent a config without agents has.
pub(crate) const MAIN: &str = "main";

/// One agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Agent {
    pub id: String,
    pub name: Option<String>,
    pub workspace: PathBuf,
    /// Where the workspace path came from (the default agent's may come
    /// from a flag or the environment).
    pub workspace_origin: Origin,
    pub is_default: bool,
    /// Its config entry; `None` for the implicit `main`.
    pub entry: Option<AgentEntry>,
}

/// Every agent and the bindings between channels and them.
#[derive(Debug, Clone)]
pub(crate) struct Agents {
    pub list: Vec<Agent>,
    pub bindings: Vec<BindingConfig>,
    /// What was read but not used (duplicate ids), one line each.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AgentsError {
    #[error(
        "bindings[{index}] names agent `{agent}`, which is not in agents.list or agents.entries"
    )]
    UnknownAgent { index: usize, agent: String },
    #[error("bindings[{index}].match.channel is empty")]
    NoChannel { index: usize },
    #[error("bindings[{index}].match.peer.kind is `{kind}`: use direct, group or channel")]
    PeerKind { index: usize, kind: String },
    #[error("agents `{0}` and `{1}` have the same workspace {2}: each agent needs its own")]
    SharedWorkspace(String, String, String),
}

/// Unknown agent (a `--agent` or an `agentId` naming none of them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent `{asked}`: the agents are {known}")]
pub(crate) struct UnknownAgent {
    pub asked: String,
    pub known: String,
}

/// Where the default agent's workspace was set before agents are read:
/// `agents.defaults.workspace` and where it came from.
pub(crate) struct DefaultWorkspace<'a> {
    pub configured: Option<&'a str>,
    pub origin: Origin,
}

impl Agents {
    /// The agents of `config`, with workspaces under `state_dir`.
    pub(crate) fn resolve(
        config: &Config,
        state_dir: &std::path::Path,
        default_workspace: DefaultWorkspace<'_>,
        host: &Host,
    ) -> Result<Agents, AgentsError> {
        let mut warnings = Vec::new();
        let entries = entries(config, &mut warnings);
        let default_id = default_id(&entries);
        let configured_default = default_workspace
            .configured
            .map(str::trim)
            .filter(|w| !w.is_empty());
        let mut list = Vec::with_capacity(entries.len().max(1));
        for (id, entry) in entries {
            let is_default = id == default_id;
            let own = entry
                .as_ref()
                .and_then(|e| e.workspace.as_deref())
                .map(str::trim)
                .filter(|w| !w.is_empty());
            let (workspace, workspace_origin) = match (is_default, configured_default, own) {
                // A flag or the environment names the default agent's
                // workspace above any entry.
                (true, Some(ws), _)
                    if matches!(default_workspace.origin, Origin::Flag | Origin::Env) =>
                {
                    (host.resolve_path(ws), default_workspace.origin)
                }
                (_, _, Some(ws)) => (host.resolve_path(ws), Origin::Config),
                (true, Some(ws), None) => (host.resolve_path(ws), default_workspace.origin),
                (true, None, None) => (state_dir.join("workspace"), Origin::Default),
                (false, _, None) => (state_dir.join(format!("workspace-{id}")), Origin::Default),
            };
            list.push(Agent {
                name: entry.as_ref().and_then(|e| e.name.clone()),
                id,
                workspace,
                workspace_origin,
                is_default,
                entry,
            });
        }
        for (i, a) in list.iter().enumerate() {
            if let Some(b) = list[..i].iter().find(|b| b.workspace == a.workspace) {
                return Err(AgentsError::SharedWorkspace(
                    b.id.clone(),
                    a.id.clone(),
                    a.workspace.display().to_string(),
                ));
            }
        }
        let agents = Agents {
            list,
            bindings: config.bindings.clone(),
            warnings,
        };
        agents.check_bindings()?;
        Ok(agents)
    }

    fn check_bindings(&self) -> Result<(), AgentsError> {
        for (index, b) in self.bindings.iter().enumerate() {
            if self.get(&b.agent_id).is_none() {
                return Err(AgentsError::UnknownAgent {
                    index,
                    agent: b.agent_id.clone(),
                });
            }
            if b.matches.channel.trim().is_empty() {
                return Err(AgentsError::NoChannel { index });
            }
            if let Some(peer) = &b.matches.peer
                && almanac_routing::PeerKind::parse(&peer.kind).is_none()
            {
                return Err(AgentsError::PeerKind {
                    index,
                    kind: peer.kind.clone(),
                });
            }
        }
        Ok(())
    }

    /// The agent unbound messages and commands without `--agent` go to.
    pub(crate) fn default_agent(&self) -> &Agent {
        self.list
            .iter()
            .find(|a| a.is_default)
            .unwrap_or(&self.list[0])
    }

    /// How many agents there are (at least one).
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The agent `id` names (normalised as session keys are).
    pub(crate) fn get(&self, id: &str) -> Option<&Agent> {
        let id = normalize_id(id, MAIN);
        self.list.iter().find(|a| a.id == id)
    }

    /// [`Agents::get`], or an error listing the agents there are.
    pub(crate) fn require(&self, id: &str) -> Result<&Agent, UnknownAgent> {
        self.get(id).ok_or_else(|| UnknownAgent {
            asked: id.trim().to_string(),
            known: self
                .list
                .iter()
                .map(|a| format!("`{}`", a.id))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The agents that run heartbeats: those whose entry has a
    /// `heartbeat` key, else the default agent alone.
    pub(crate) fn with_heartbeat(&self) -> Vec<&Agent> {
        let marked: Vec<&Agent> = self
            .list
            .iter()
            .filter(|a| a.entry.as_ref().is_some_and(|e| e.heartbeat.is_some()))
            .collect();
        if marked.is_empty() {
            vec![self.default_agent()]
        } else {
            marked
        }
    }
}

impl Agents {
    /// The router over these bindings (build it once per config: routing
    /// a message is then a few lookups).
    pub(crate) fn router(&self) -> almanac_routing::Router {
        let bindings: Vec<almanac_routing::Binding> = self
            .bindings
            .iter()
            .map(|b| almanac_routing::Binding {
                agent_id: normalize_id(&b.agent_id, MAIN),
                channel: b.matches.channel.clone(),
                account_id: b.matches.account_id.clone(),
                peer: b.matches.peer.as_ref().and_then(|p| {
                    Some(almanac_routing::Peer {
                        kind: almanac_routing::PeerKind::parse(&p.kind)?,
                        id: p.id.clone(),
                    })
                }),
            })
            .collect();
        almanac_routing::Router::new(&bindings, &self.default_agent().id)
    }
}

/// The entries in config order: `agents.list`, then `agents.entries`
/// (ids from the keys); the implicit `main` when neither has any.
fn entries(config: &Config, warnings: &mut Vec<String>) -> Vec<(String, Option<AgentEntry>)> {
    let mut out: Vec<(String, Option<AgentEntry>)> = Vec::new();
    let listed = config.agents.list.iter().enumerate().map(|(i, e)| {
        let id = e.id.clone().unwrap_or_default();
        (id, format!("agents.list[{i}]"), e)
    });
    let keyed = config.agents.entries.iter().map(|(key, e)| {
        (
            e.id.clone().unwrap_or_else(|| key.clone()),
            format!("agents.entries.{key}"),
            e,
        )
    });
    for (raw, place, entry) in listed.chain(keyed) {
        let id = normalize_id(&raw, MAIN);
        if raw.trim().is_empty() {
            warnings.push(format!("{place} has no id: read as `{id}`"));
        }
        if out.iter().any(|(seen, _)| *seen == id) {
            warnings.push(format!(
                "{place}: agent `{id}` is listed twice; the first is used"
            ));
            continue;
        }
        out.push((id, Some(entry.clone())));
    }
    if out.is_empty() {
        out.push((MAIN.to_string(), None));
    }
    out
}

fn default_id(entries: &[(String, Option<AgentEntry>)]) -> String {
    entries
        .iter()
        .find(|(_, e)| e.as_ref().is_some_and(|e| e.default))
        .or_else(|| entries.iter().find(|(id, _)| id == MAIN))
        .unwrap_or(&entries[0])
        .0
        .clone()
}

/// Lays an agent's entry over the defaults it overrides: its model, its
/// skills, its heartbeat (merged key by key) and its tools (its `allow`
/// replaces `tools.allow`; its `deny` adds to `tools.deny`).
pub(crate) fn apply_entry(config: &mut Config, entry: &AgentEntry) {
    let defaults = &mut config.agents.defaults;
    if let Some(model) = &entry.model {
        defaults.model = Some(model.clone());
    }
    if let Some(skills) = &entry.skills {
        defaults.skills = Some(skills.clone());
    }
    if let Some(serde_json::Value::Object(over)) = &entry.heartbeat
        && let Ok(serde_json::Value::Object(mut merged)) = serde_json::to_value(&defaults.heartbeat)
    {
        for (k, v) in over {
            merged.insert(k.clone(), v.clone());
        }
        // A value of the wrong type keeps the defaults (the config's own
        // check reports the file's types).
        if let Ok(heartbeat) = serde_json::from_value(serde_json::Value::Object(merged)) {
            defaults.heartbeat = heartbeat;
        }
    }
    if let Some(sub) = &entry.subagents {
        if let Some(model) = &sub.model {
            defaults.subagents.model = Some(model.clone());
        }
        if let Some(thinking) = &sub.thinking {
            defaults.subagents.thinking = Some(thinking.clone());
        }
    }
    if let Some(allow) = &entry.tools.allow {
        config.tools.allow = allow.clone();
    }
    config.tools.deny.extend(entry.tools.deny.iter().cloned());
}
