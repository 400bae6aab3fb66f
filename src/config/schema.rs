//! The typed configuration: [`Config`] and its sections, each with its
//! defaults and OpenClaw's key names (camelCase, `#[serde(default)]`, so
//! the file only needs the keys a user changes).

mod cron;
mod hooks;
mod mcp;
mod skills;
mod subagents;
mod telegram;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub(crate) use cron::*;
pub(crate) use hooks::*;
pub(crate) use mcp::*;
pub(crate) use skills::*;
pub(crate) use subagents::*;
pub(crate) use telegram::*;

/// Where an effective setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    Flag,
    Env,
    Config,
    Default,
}

/// The typed configuration. Every field has a default; the file only
/// needs the keys a user wants to change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Config {
    pub agents: AgentsConfig,
    pub models: ModelsConfig,
    pub session: SessionConfig,
    pub logging: LoggingConfig,
    pub memory: MemoryConfig,
    pub security: SecurityConfig,
    pub activity: ActivityConfig,
    pub skills: SkillsConfig,
    pub tools: ToolsConfig,
    pub gateway: GatewayConfig,
    pub delivery: DeliveryConfig,
    pub channels: ChannelsConfig,
    pub cron: CronConfig,
    pub hooks: HooksConfig,
    /// The MCP server (`almanac mcp serve`, the gateway's `/mcp`).
    pub mcp: McpConfig,
    /// Which agent each channel's messages go to (OpenClaw's `bindings`).
    pub bindings: Vec<BindingConfig>,
}

/// Where the results of unattended turns go (`delivery.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct DeliveryConfig {
    pub webhook: WebhookDeliveryConfig,
}

/// `delivery.webhook.*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WebhookDeliveryConfig {
    /// Lets a webhook URL the model gave reach loopback, private,
    /// link-local and other non-public addresses (URLs from the config
    /// always may).
    pub allow_private_network: bool,
}

/// The gateway daemon (`gateway.*`, OpenClaw's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GatewayConfig {
    /// TCP port of the control API and webhooks.
    pub port: u16,
    /// Where it listens: `loopback` (127.0.0.1), `lan` (every interface)
    /// or `custom` (`customBindHost`).
    pub bind: GatewayBind,
    /// The address for `bind: custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_bind_host: Option<String>,
    pub auth: GatewayAuth,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            port: 18789,
            bind: GatewayBind::Loopback,
            custom_bind_host: None,
            auth: GatewayAuth::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum GatewayBind {
    Loopback,
    Lan,
    Custom,
}

/// `gateway.auth`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GatewayAuth {
    /// The bearer token of the control API (env `ALMANAC_GATEWAY_TOKEN`).
    /// Unset: one is generated into `<state dir>/gateway.token`, which
    /// serves a loopback bind only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentsConfig {
    pub defaults: AgentDefaults,
    /// The agents, as OpenClaw documents them (`agents.list[]`).
    pub list: Vec<AgentEntry>,
    /// The agents by id, as OpenClaw 2026.9 writes them
    /// (`agents.entries.<id>`); read after `list`.
    pub entries: indexmap::IndexMap<String, AgentEntry>,
    /// Written by OpenClaw beside `entries`; read and kept, unused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ownership: Option<String>,
}

/// One agent of `agents.list[]` or `agents.entries`: what it overrides
/// of `agents.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentEntry {
    /// The agent's id (`agents.entries` takes it from the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The agent unbound messages and commands without `--agent` go to.
    pub default: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Default `<state dir>/workspace-<id>` (the default agent:
    /// `agents.defaults.workspace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// OpenClaw's per-agent folder (auth profiles, model registry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// Narrows the tool policy for this agent.
    pub tools: AgentTools,
    pub group_chat: GroupChatConfig,
    /// Merged over `agents.defaults.heartbeat`; an agent with this key
    /// runs heartbeats (when none has it, only the default agent does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<serde_json::Value>,
    /// The runs this agent spawns: which other agents they may run as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagents: Option<AgentSubagents>,
    /// OpenClaw's `identity` (`{name}`), shown by `agents list`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<AgentIdentity>,
    /// Skills this agent may use, by name; unset: `agents.defaults.skills`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentIdentity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `agents.list[].tools`: tools this agent may (`allow`) or may not
/// (`deny`) use, on top of `tools.*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentTools {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

/// `agents.list[].groupChat`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GroupChatConfig {
    /// Patterns (regular expressions) that count as mentioning the agent
    /// in a group.
    pub mention_patterns: Vec<String>,
}

/// One entry of `bindings[]`: which agent a channel's messages go to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct BindingConfig {
    /// `route` (written by OpenClaw 2026.9); absent in the documented form.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub agent_id: String,
    #[serde(rename = "match")]
    pub matches: BindingMatch,
}

/// `bindings[].match`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct BindingMatch {
    pub channel: String,
    /// Absent: the channel's default account; `*`: every account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<BindingPeer>,
}

/// `bindings[].match.peer`: `direct`, `group` or `channel`, and its id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct BindingPeer {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentDefaults {
    /// Skills the agent may use, by name; unset means all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// The agent workspace (`~` allowed); default `<state dir>/workspace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// IANA zone of the user, for dates in notes and schedules; default
    /// the host's zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_timezone: Option<String>,
    /// Memory search (OpenClaw's `memorySearch`).
    pub memory_search: MemorySearchConfig,
    /// The model of agent turns: `provider/model`, or `{primary,
    /// fallbacks}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The model's context window in tokens, when the provider does not
    /// say; compaction starts near it.
    pub context_tokens: u32,
    /// Longest answer a turn asks the model for, in tokens.
    pub max_tokens: u32,
    /// Seconds one model call may take, its whole streamed answer
    /// included; reaching it ends the call (not retried).
    pub timeout_seconds: u32,
    /// How long a model call waits for the connection and for the answer
    /// to keep coming (`agents.defaults.llm`).
    pub llm: LlmConfig,
    /// Most model calls in one turn (each tool round is one).
    pub max_steps: u32,
    /// Characters of each workspace bootstrap file put in the prompt.
    pub bootstrap_max_chars: u32,
    /// Characters of all bootstrap files together.
    pub bootstrap_total_max_chars: u32,
    /// Turns running at once across sessions (one per session always).
    pub max_concurrent: u32,
    /// Periodic heartbeat turns (OpenClaw's `agents.defaults.heartbeat`).
    pub heartbeat: HeartbeatConfig,
    /// Background runs a turn spawns (`sessions_spawn`).
    pub subagents: SubagentDefaults,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        AgentDefaults {
            skills: None,
            workspace: None,
            user_timezone: None,
            memory_search: MemorySearchConfig::default(),
            model: None,
            context_tokens: 128_000,
            max_tokens: 4_096,
            timeout_seconds: 600,
            llm: LlmConfig::default(),
            max_steps: 16,
            bootstrap_max_chars: 20_000,
            bootstrap_total_max_chars: 150_000,
            max_concurrent: 4,
            heartbeat: HeartbeatConfig::default(),
            subagents: SubagentDefaults::default(),
        }
    }
}

/// `agents.defaults.heartbeat`: the agent wakes on an interval, reads
/// `HEARTBEAT.md`, and stays quiet or tells its person something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HeartbeatConfig {
    /// The interval (`30m`, `1h30m`; a bare number is minutes); `0m`
    /// turns heartbeats off.
    pub every: String,
    /// Where an alert goes: `none` (the run happens, nothing is
    /// delivered), `last` (the chat the agent's user last wrote from;
    /// else the outbox), `outbox`, `webhook` (`to`, signed with
    /// `webhookSecret`) or `telegram` (the chat `to`, on `accountId`).
    pub target: HeartbeatTarget,
    /// The webhook URL of `target: webhook`, the chat of `telegram`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The Telegram account of `target: telegram` (default: the default
    /// account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// The key that signs webhook deliveries (HMAC-SHA256).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// Only run inside this daily window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_hours: Option<ActiveHoursConfig>,
    /// The prompt's workspace files are `HEARTBEAT.md` only, and no
    /// memory is recalled.
    pub light_context: bool,
    /// A fresh session (`<key>:heartbeat`) for every run.
    pub isolated_session: bool,
    /// `provider/model` for heartbeat runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Replaces the default prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Characters that may remain beside `HEARTBEAT_OK` for the reply to
    /// count as an acknowledgement.
    pub ack_max_chars: i64,
    /// Also deliver the model's reasoning.
    pub include_reasoning: bool,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            every: "30m".to_string(),
            target: HeartbeatTarget::None,
            to: None,
            account_id: None,
            webhook_secret: None,
            active_hours: None,
            light_context: false,
            isolated_session: false,
            model: None,
            prompt: None,
            ack_max_chars: 300,
            include_reasoning: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HeartbeatTarget {
    None,
    Last,
    Outbox,
    Webhook,
    Telegram,
}

/// `activeHours`: `[start, end)` in `HH:MM` (`end` may be `24:00`; an
/// `end` before `start` wraps midnight), in `timezone` (`user`, the
/// default: `agents.defaults.userTimezone`; `local`: the host's; or an
/// IANA name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ActiveHoursConfig {
    pub start: String,
    pub end: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// `channels`: the chat channels (`telegram`), and per delivery channel
/// settings by channel name with `defaults` for all of them (`outbox`,
/// `webhook`, `http`: only the heartbeat visibility is read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ChannelsConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telegram: Option<TelegramConfig>,
    #[serde(flatten)]
    pub by_name: BTreeMap<String, ChannelConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ChannelConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatVisibilityConfig>,
}

/// `channels.<channel>.heartbeat`: what heartbeat outcomes are shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HeartbeatVisibilityConfig {
    /// Deliver `HEARTBEAT_OK` acknowledgements (default false; when
    /// false the token is removed from every delivered reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_ok: Option<bool>,
    /// Deliver alerts (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_alerts: Option<bool>,
    /// Emit indicator events (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_indicator: Option<bool>,
}

/// Effective heartbeat visibility on one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeartbeatVisibility {
    pub show_ok: bool,
    pub show_alerts: bool,
    pub use_indicator: bool,
}

impl ChannelsConfig {
    /// The visibility on `channel`: its own keys over `channels.defaults`
    /// over the built-in defaults (false / true / true).
    pub(crate) fn heartbeat_visibility(&self, channel: &str) -> HeartbeatVisibility {
        let own = match channel {
            "telegram" => self.telegram.as_ref().and_then(|t| t.heartbeat.as_ref()),
            _ => self.by_name.get(channel).and_then(|c| c.heartbeat.as_ref()),
        };
        let defaults = self
            .by_name
            .get("defaults")
            .and_then(|c| c.heartbeat.as_ref());
        let pick = |f: fn(&HeartbeatVisibilityConfig) -> Option<bool>, built_in: bool| {
            own.and_then(f)
                .or_else(|| defaults.and_then(f))
                .unwrap_or(built_in)
        };
        HeartbeatVisibility {
            show_ok: pick(|v| v.show_ok, false),
            show_alerts: pick(|v| v.show_alerts, true),
            use_indicator: pick(|v| v.use_indicator, true),
        }
    }
}

/// `agents.defaults.llm`: timeouts of a model call besides the whole
/// answer's (`agents.defaults.timeoutSeconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct LlmConfig {
    /// The longest silence once connected, in seconds: before the answer
    /// starts and between two pieces of it (OpenClaw's key); 0: none.
    pub idle_timeout_seconds: u32,
    /// Seconds to set up the connection (TCP and TLS).
    pub connect_timeout_seconds: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            idle_timeout_seconds: 120,
            connect_timeout_seconds: 10,
        }
    }
}

/// `provider/model`, or a primary with fallbacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum ModelRef {
    Name(String),
    Chain {
        primary: String,
        #[serde(default)]
        fallbacks: Vec<String>,
    },
}

impl ModelRef {
    pub(crate) fn primary(&self) -> &str {
        match self {
            ModelRef::Name(name) => name,
            ModelRef::Chain { primary, .. } => primary,
        }
    }
}

/// `models.*`: model providers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ModelsConfig {
    /// By provider id (`openai`, `anthropic`, `ollama`, or any name).
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// `models.providers.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ProviderConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The wire protocol: `openai-completions` or `anthropic-messages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
}

/// `session.*`: how messages map to sessions and when sessions reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SessionConfig {
    /// `per-sender` or `global` (everything in one session).
    pub scope: String,
    /// `main`, `per-peer`, `per-channel-peer` or `per-account-channel-peer`.
    pub dm_scope: String,
    /// The main session's key under `agent:<id>:`.
    pub main_key: String,
    pub reset: ResetConfig,
    /// Per chat type (`direct`, `group`, `thread`; `dm` is read as
    /// `direct`).
    pub reset_by_type: BTreeMap<String, ResetConfig>,
    /// Per channel; replaces the rest for that channel.
    pub reset_by_channel: BTreeMap<String, ResetConfig>,
    /// Messages that start a new session (default `/new`, `/reset`).
    pub reset_triggers: Vec<String>,
    /// Legacy idle expiry in minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_minutes: Option<u32>,
    /// One person's ids across channels, under one name: `{"ada":
    /// ["telegram:123", "http:ada"]}` (a bare id matches any channel).
    pub identity_links: BTreeMap<String, Vec<String>>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            scope: "per-sender".to_string(),
            dm_scope: "main".to_string(),
            main_key: "main".to_string(),
            reset: ResetConfig::default(),
            reset_by_type: BTreeMap::new(),
            reset_by_channel: BTreeMap::new(),
            reset_triggers: Vec::new(),
            idle_minutes: None,
            identity_links: BTreeMap::new(),
        }
    }
}

/// A reset policy; unset fields fall back to the wider one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ResetConfig {
    /// `daily` or `idle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Hour of the daily reset, host-local (default 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_hour: Option<u32>,
    /// Minutes without activity after which a session resets (0: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_minutes: Option<u32>,
}

/// `agents.defaults.memorySearch`: what the memory index covers and the
/// defaults of `memory search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchConfig {
    pub enabled: bool,
    /// More Markdown to index: folders (walked for `.md`) or single `.md`
    /// files, absolute or relative to the workspace.
    pub extra_paths: Vec<String>,
    pub query: MemoryQueryConfig,
    /// Where vectors come from: `local` (a sentence model run in
    /// almanac), `openai` (aliases `ollama`, `openai-compatible`: an
    /// OpenAI-compatible `/v1/embeddings` endpoint) or `none` (lexical
    /// only). Unset: `local` when a local model is installed, else `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The embedding model's name (the remote model; for `local`, a label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub remote: MemorySearchRemote,
    pub local: MemorySearchLocal,
    /// The provider to use when the chosen one cannot start (`none`,
    /// `local`, `openai`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl Default for MemorySearchConfig {
    fn default() -> Self {
        MemorySearchConfig {
            enabled: true,
            extra_paths: Vec::new(),
            query: MemoryQueryConfig::default(),
            provider: None,
            model: None,
            remote: MemorySearchRemote::default(),
            local: MemorySearchLocal::default(),
            fallback: None,
        }
    }
}

/// `memorySearch.remote`: the embeddings endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchRemote {
    /// The API's base URL (`http://127.0.0.1:11434/v1`); `/embeddings` is
    /// added. Unset: OpenAI's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Unset: `OPENAI_API_KEY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `memorySearch.local`: the local sentence model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchLocal {
    /// A folder holding `config.json`, `model.safetensors` and
    /// `tokenizer.json`. Unset: the model `memory model install` put in
    /// the state directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemoryQueryConfig {
    /// Results returned when a search does not say (`--max-results`).
    pub max_results: u32,
    /// Results scoring below this are dropped (`--min-score`), in [0, 1].
    pub min_score: f64,
}

impl Default for MemoryQueryConfig {
    fn default() -> Self {
        MemoryQueryConfig {
            max_results: 6,
            min_score: 0.35,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct LoggingConfig {
    /// Log level written to stderr when no `-v` / `ALMANAC_LOG` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemoryConfig {
    pub session: SessionMemoryConfig,
    /// Real paths (`~` allowed) that memory files and folders may be
    /// symlinks into; any other link leaving the memory root is skipped by
    /// readers and refused by writers.
    pub allow_symlink_targets: Vec<String>,
}

/// Session memory (`almanac session-memory …`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SessionMemoryConfig {
    /// `SESSION_MEMORY`: off refuses appends and empties the context.
    pub enabled: bool,
    /// `SESSION_MEMORY_DIR`: the memory root; default the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// `MEMORY_LONGTERM_MAX_LINES`: MEMORY.md is pruned (whole entries,
    /// oldest first, archived) when it grows past this many lines.
    pub long_term_max_lines: u32,
    /// `MEMORY_AUTO_LONGTERM`: every append is a long-term note.
    pub auto_long_term: bool,
    /// Longest note accepted, in characters.
    pub max_note_chars: u32,
    /// Default token budget of `session-memory context`.
    pub context_budget_tokens: u32,
    /// Daily files older than this many days are moved to the trash after
    /// an append; 0 keeps them all.
    pub daily_retention_days: u32,
}

impl Default for SessionMemoryConfig {
    fn default() -> Self {
        SessionMemoryConfig {
            enabled: true,
            dir: None,
            long_term_max_lines: 100,
            auto_long_term: false,
            max_note_chars: 16_000,
            context_budget_tokens: 600,
            daily_retention_days: 0,
        }
    }
}

/// Safety switches, shared with Arka's environment variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SecurityConfig {
    /// `SECURITY`: master switch of the checks below.
    pub enabled: bool,
    /// `SECURITY_LLM`: model-assisted checks (reported; almanac's memory
    /// gate does not depend on a model).
    pub llm: bool,
    /// `SECURITY_SANITIZE`: the prompt-injection gate on memory notes.
    pub sanitize: bool,
    /// `SECURITY_ACTIONS`: confirmation of risky actions; the default of
    /// `tools.exec.ask` (on: `on-miss`, off: `off`).
    pub actions: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            enabled: true,
            llm: true,
            sanitize: true,
            actions: true,
        }
    }
}

impl SecurityConfig {
    /// Whether notes are checked for prompt injection before they are
    /// stored.
    pub(crate) fn memory_gate(&self) -> bool {
        self.enabled && self.sanitize
    }
}

/// The activity heartbeat (`heartbeat.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ActivityConfig {
    /// `HEARTBEAT_HISTORY`: events kept in the history ring (1–100).
    pub history_size: u32,
    /// `AGENT_NAME`: the `agent` field.
    pub agent_name: String,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        ActivityConfig {
            history_size: 20,
            agent_name: "almanac".to_string(),
        }
    }
}
