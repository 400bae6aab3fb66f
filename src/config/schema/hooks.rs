//! `hooks.*`: webhooks into the gateway (their mappings and signatures)
//! and internal hooks run on events.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Webhooks into the gateway (`hooks.*`, OpenClaw's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HooksConfig {
    /// Serve `<path>/wake`, `<path>/agent` and the mappings.
    pub enabled: bool,
    /// The hook token (required when enabled; must differ from the
    /// gateway's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Where the hooks live on the gateway (`/hooks`; not `/`, not under
    /// `/v1`).
    pub path: String,
    /// Largest request body accepted.
    pub max_body_bytes: u64,
    /// The session of `/agent` runs that name none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_session_key: Option<String>,
    /// Lets a request choose its session key.
    pub allow_request_session_key: bool,
    /// Session keys a hook may use must start with one of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_session_key_prefixes: Option<Vec<String>>,
    /// Agent ids a request may name (`*`: any; unset: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_agent_ids: Option<Vec<String>>,
    /// Built-in mappings appended after `mappings` (`gmail`).
    pub presets: Vec<String>,
    /// Payloads at `<path>/<name>` turned into a wake or an agent run.
    pub mappings: Vec<HookMappingConfig>,
    /// Internal hooks (`HOOK.md` handlers on events).
    pub internal: InternalHooksConfig,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            enabled: false,
            token: None,
            path: "/hooks".to_string(),
            max_body_bytes: 256 * 1024,
            default_session_key: None,
            allow_request_session_key: false,
            allowed_session_key_prefixes: None,
            allowed_agent_ids: None,
            presets: Vec::new(),
            mappings: Vec::new(),
            internal: InternalHooksConfig::default(),
        }
    }
}

/// Internal hooks (`hooks.internal.*`, OpenClaw's keys): `HOOK.md`
/// folders whose handler runs on events such as `command:new`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct InternalHooksConfig {
    /// Off by default: nothing is discovered or run until this is on.
    pub enabled: bool,
    /// Per-hook settings by hook name.
    pub entries: BTreeMap<String, HookEntryConfig>,
    pub load: HooksLoadConfig,
    /// Seconds a handler may run before its process group is killed.
    pub timeout_seconds: u32,
}

impl Default for InternalHooksConfig {
    fn default() -> Self {
        InternalHooksConfig {
            enabled: false,
            entries: BTreeMap::new(),
            load: HooksLoadConfig::default(),
            timeout_seconds: 10,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HooksLoadConfig {
    /// More folders of managed hooks (`~` allowed).
    pub extra_dirs: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookEntryConfig {
    /// `true` turns a workspace hook on, `false` turns any hook off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Environment values given to this hook's handler only.
    pub env: BTreeMap<String, String>,
    /// Settings of the hook itself (`messages`, `paths`, …), kept as written.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `hooks.mappings[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookMappingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<HookMatchConfig>,
    /// `agent` (default) or `wake`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_unsafe_external_content: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// JavaScript transforms are not supported; a mapping with one is
    /// refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<Value>,
    /// A signature that stands in for the hook token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<HookSignatureConfig>,
}

/// `hooks.mappings[].match`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookMatchConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `hooks.mappings[].signature`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookSignatureConfig {
    /// `github` or `stripe`.
    pub scheme: String,
    pub secret: String,
    /// Stripe: how old a signed timestamp may be (default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u64>,
}
