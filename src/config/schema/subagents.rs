//! `agents.defaults.subagents`, `agents.list[].subagents` and
//! `tools.subagents`: the background runs a turn spawns (`sessions_spawn`),
//! with OpenClaw's keys and defaults.

use serde::{Deserialize, Serialize};

use super::ModelRef;

/// `agents.defaults.subagents`: limits and settings of spawned runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SubagentDefaults {
    /// The children's model; unset: the spawning agent's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The children's thinking level; unset: the spawning agent's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Children running at once in one gateway; the others wait queued.
    pub max_concurrent: u32,
    /// How many levels spawn: 1 lets a turn spawn and its children not.
    pub max_spawn_depth: u32,
    /// Children one parent session may have alive (queued or running).
    pub max_children_per_agent: u32,
    /// Seconds a child may run before it is stopped (`timeout`); 0: no
    /// limit.
    pub run_timeout_seconds: u32,
    /// Minutes after its end that a child's session is archived.
    pub archive_after_minutes: u32,
    /// Milliseconds an announce may take to reach the parent; unset: the
    /// gateway's own bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announce_timeout_ms: Option<u64>,
}

impl Default for SubagentDefaults {
    fn default() -> Self {
        SubagentDefaults {
            model: None,
            thinking: None,
            max_concurrent: 8,
            max_spawn_depth: 1,
            max_children_per_agent: 5,
            run_timeout_seconds: 0,
            archive_after_minutes: 60,
            announce_timeout_ms: None,
        }
    }
}

/// `agents.list[].subagents`: one agent's children.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentSubagents {
    /// Other agents this one may spawn children as (`*`: any); its own id
    /// is always allowed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_agents: Vec<String>,
    /// Over `agents.defaults.subagents.model` for this agent's children.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// Over `agents.defaults.subagents.thinking`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
}

/// `tools.subagents`: the tools a child is offered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SubagentToolsConfig {
    pub tools: SubagentToolFilter,
}

/// `tools.subagents.tools`: `deny` wins; a set `allow` makes the list
/// allow-only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SubagentToolFilter {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}
