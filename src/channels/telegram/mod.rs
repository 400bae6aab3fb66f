//! Telegram: the accounts `channels.telegram` configures, the Bot API
//! client ([`api`]), updates read into messages ([`update`]), who may
//! talk ([`access`]) and the files kept under the state directory
//! ([`store`]: the update offset, pairing requests, approved senders).
//!
//! Invariants:
//! * A bot token is read from the config, a token file or (default
//!   account only) `TELEGRAM_BOT_TOKEN`; it goes only into the Bot API's
//!   request URLs and is masked in every error and status line.
//! * Files are OpenClaw's, at its paths and in its shapes; credentials
//!   are 0600 in a 0700 folder.

pub(crate) mod access;
pub(crate) mod api;
pub(crate) mod send;
pub(crate) mod store;
pub(crate) mod update;

use std::path::PathBuf;

use crate::config::{Config, TelegramSettings};

/// The channel's name in bindings, session keys and routes.
pub(crate) const CHANNEL: &str = "telegram";
/// The account of a config without `accounts`.
pub(crate) const DEFAULT_ACCOUNT: &str = "default";
/// Telegram's Bot API.
pub(crate) const API_ROOT: &str = "https://api.telegram.org";
/// The longest message sent by default (Telegram's limit is 4096).
pub(crate) const DEFAULT_CHUNK_LIMIT: usize = 4000;

/// One configured bot.
#[derive(Clone, PartialEq)]
pub(crate) struct Account {
    pub id: String,
    pub is_default: bool,
    /// The top level's settings with the account's laid over them.
    pub settings: TelegramSettings,
    /// The token, or why there is none.
    pub token: Result<String, String>,
    pub api_root: String,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "<bot-token>"))
            .field("api_root", &self.api_root)
            .finish_non_exhaustive()
    }
}

impl Account {
    pub(crate) fn chunk_limit(&self) -> usize {
        self.settings
            .text_chunk_limit
            .filter(|l| *l >= 64)
            .unwrap_or(DEFAULT_CHUNK_LIMIT)
            .min(4096)
    }

    pub(crate) fn newline_chunks(&self) -> bool {
        self.settings.chunk_mode.as_deref() == Some("newline")
    }

    pub(crate) fn history_limit(&self) -> usize {
        self.settings.history_limit.unwrap_or(50).min(500)
    }
}

/// The enabled accounts of `config`: `accounts.<id>` over the top level,
/// or the top level alone as `default`. `env_token`: the value of
/// `TELEGRAM_BOT_TOKEN`; `resolve`: a token file's path as written to
/// the file (`~` expanded).
pub(crate) fn accounts(
    config: &Config,
    env_token: Option<&str>,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Vec<Account> {
    let Some(telegram) = &config.channels.telegram else {
        return Vec::new();
    };
    let top = &telegram.settings;
    let default_id = telegram
        .default_account
        .clone()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| telegram.accounts.keys().next().cloned())
        .unwrap_or_else(|| DEFAULT_ACCOUNT.to_string());
    let listed: Vec<(String, TelegramSettings)> = if telegram.accounts.is_empty() {
        vec![(DEFAULT_ACCOUNT.to_string(), top.clone())]
    } else {
        telegram
            .accounts
            .iter()
            .map(|(id, own)| (id.clone(), merged(top, own)))
            .collect()
    };
    listed
        .into_iter()
        .filter(|(_, s)| s.enabled != Some(false) && top.enabled != Some(false))
        .map(|(id, settings)| {
            let is_default = id == default_id || telegram.accounts.is_empty();
            let token = token(
                &settings,
                is_default.then_some(env_token).flatten(),
                resolve,
            );
            let api_root = settings
                .api_root
                .clone()
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| API_ROOT.to_string());
            Account {
                id,
                is_default,
                settings,
                token,
                api_root,
            }
        })
        .collect()
}

/// `own` over `top`, key by key.
fn merged(top: &TelegramSettings, own: &TelegramSettings) -> TelegramSettings {
    let mut value = serde_json::to_value(top).unwrap_or_default();
    if let (Some(base), Ok(serde_json::Value::Object(over))) =
        (value.as_object_mut(), serde_json::to_value(own))
    {
        // An account's token is its own: never the top level's.
        base.remove("botToken");
        base.remove("tokenFile");
        base.extend(over);
    }
    serde_json::from_value(value).unwrap_or_else(|_| own.clone())
}

fn token(
    settings: &TelegramSettings,
    env: Option<&str>,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Result<String, String> {
    if let Some(token) = settings
        .bot_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Ok(token.to_string());
    }
    if let Some(file) = settings
        .token_file
        .as_deref()
        .map(str::trim)
        .filter(|f| !f.is_empty())
    {
        let path = resolve(file);
        return match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
            Ok(_) => Err(format!("the token file {} is empty", path.display())),
            Err(e) => Err(format!(
                "cannot read the token file {}: {e}",
                path.display()
            )),
        };
    }
    match env.map(str::trim).filter(|t| !t.is_empty()) {
        Some(token) => Ok(token.to_string()),
        None => Err(
            "no bot token: set channels.telegram.botToken, tokenFile or TELEGRAM_BOT_TOKEN".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Config {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_top_level_is_the_default_account_and_the_environment_its_fallback() {
        let c = config(r#"{"channels": {"telegram": {"dmPolicy": "open"}}}"#);
        let found = accounts(&c, Some("1:env"), &|f: &str| PathBuf::from(f));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "default");
        assert_eq!(found[0].token.as_deref(), Ok("1:env"));
        assert_eq!(found[0].settings.dm_policy.as_deref(), Some("open"));
        assert_eq!(found[0].api_root, API_ROOT);
        assert!(format!("{:?}", found[0]).contains("<bot-token>"));
        assert!(!format!("{:?}", found[0]).contains("1:env"));
        assert!(accounts(&config("{}"), Some("1:env"), &|f: &str| PathBuf::from(f)).is_empty());
    }

    #[test]
    fn accounts_lay_their_settings_over_the_top_level_and_keep_their_own_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ops.token"), "2:ops\n").unwrap();
        let c = config(
            r#"{"channels": {"telegram": {"botToken": "1:top", "dmPolicy": "allowlist", "textChunkLimit": 1000,
                "defaultAccount": "personal",
                "accounts": {"personal": {"botToken": "3:me"},
                             "ops": {"tokenFile": "~/ops.token", "dmPolicy": "open"},
                             "off": {"enabled": false, "botToken": "4:off"}}}}}"#,
        );
        let home = dir.path().to_path_buf();
        let resolve = move |f: &str| home.join(f.trim_start_matches("~/"));
        let found = accounts(&c, Some("9:env"), &resolve);
        let ids: Vec<&str> = found.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["ops", "personal"]);
        let (ops, me) = (&found[0], &found[1]);
        assert_eq!(ops.token.as_deref(), Ok("2:ops"));
        assert_eq!(ops.settings.dm_policy.as_deref(), Some("open"));
        assert_eq!(ops.chunk_limit(), 1000);
        assert!(!ops.is_default);
        assert!(me.is_default);
        assert_eq!(me.token.as_deref(), Ok("3:me"));
        assert_eq!(me.settings.dm_policy.as_deref(), Some("allowlist"));
    }
}
