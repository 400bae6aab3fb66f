//! `channels.telegram`: the Telegram channel, in OpenClaw's keys. The
//! top level is the default account's settings and every account's
//! defaults; `accounts.<id>` override them key by key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::HeartbeatVisibilityConfig;

/// The settings of one account (the top level, or `accounts.<id>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TelegramSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_token: Option<String>,
    /// A file holding the token (`~` is the home folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// `pairing` (default), `allowlist`, `open` or `disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dm_policy: Option<String>,
    /// Senders allowed to write directly (user ids; `*` for anyone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_from: Option<Vec<Value>>,
    /// `allowlist` (default), `open` or `disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_policy: Option<String>,
    /// Senders allowed to write in groups (default: `allowFrom`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_allow_from: Option<Vec<Value>>,
    /// Groups by chat id (or `*`): whether the bot answers there and when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<BTreeMap<String, TelegramGroupConfig>>,
    /// Longest message sent, in UTF-16 units as Telegram counts (4000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_chunk_limit: Option<usize>,
    /// `length` (default) or `newline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_mode: Option<String>,
    /// Group messages kept as context for the next mention (50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_limit: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_preview: Option<bool>,
    /// Where the Bot API is (`https://api.telegram.org`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_root: Option<String>,
    // Read so that OpenClaw's configs load without warnings; almanac
    // polls (no webhook mode) and takes no media yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_max_mb: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_commands: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `channels.telegram.groups.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TelegramGroupConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_mention: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_from: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Value>,
}

/// `channels.telegram`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TelegramConfig {
    #[serde(flatten)]
    pub settings: TelegramSettings,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub accounts: BTreeMap<String, TelegramSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatVisibilityConfig>,
}
