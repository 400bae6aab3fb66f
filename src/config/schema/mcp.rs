//! `mcp.*`: what almanac's MCP server offers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `mcp.*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct McpConfig {
    pub tools: McpToolsConfig,
    /// Offers the tools that change anything (`memory_append`,
    /// `cron_add`, `cron_remove`, `system_event`); off by default.
    pub allow_writes: bool,
    /// OpenClaw's MCP servers for its own agent (`mcp.servers`): kept as
    /// they are, not used by almanac.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, serde_json::Value>,
}

/// `mcp.tools.*`: tool names; an empty `allow` allows every tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct McpToolsConfig {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}
