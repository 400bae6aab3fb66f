//! Config key paths: the keys the environment sets, the names of keys
//! other parts read, and splitting, finding, setting and removing a
//! dotted key path in a JSON value.

use serde_json::Value;

use super::ConfigError;
use super::load::typed;

/// Environment variables that set a config key (the env layer).
pub(crate) const ENV_KEYS: &[(&str, &str)] = &[
    ("ALMANAC_WORKSPACE", "agents.defaults.workspace"),
    ("SESSION_MEMORY", "memory.session.enabled"),
    ("SESSION_MEMORY_DIR", "memory.session.dir"),
    (
        "MEMORY_LONGTERM_MAX_LINES",
        "memory.session.longTermMaxLines",
    ),
    ("MEMORY_AUTO_LONGTERM", "memory.session.autoLongTerm"),
    ("SECURITY", "security.enabled"),
    ("SECURITY_LLM", "security.llm"),
    ("SECURITY_SANITIZE", "security.sanitize"),
    ("SECURITY_ACTIONS", "security.actions"),
    ("HEARTBEAT_HISTORY", "activity.historySize"),
    ("AGENT_NAME", "activity.agentName"),
    ("ALMANAC_GATEWAY_TOKEN", "gateway.auth.token"),
    ("ALMANAC_GATEWAY_PORT", "gateway.port"),
    ("ALMANAC_CRON_WEBHOOK_TOKEN", "cron.webhookToken"),
    ("ALMANAC_HEARTBEAT_EVERY", "agents.defaults.heartbeat.every"),
];

/// The key of the user's time zone.
pub(crate) const USER_TIMEZONE: &str = "agents.defaults.userTimezone";

pub(super) const CRON_RETRY_BACKOFF: &str = "cron.retry.backoffMs";

/// Splits `a.b.c`, refusing empty segments.
pub(crate) fn split_key(key: &str) -> Result<Vec<&str>, ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    if key.is_empty() || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(ConfigError::BadKey(key.to_string()));
    }
    Ok(parts)
}

/// Whether setting `key` would be read by almanac (not reported unknown).
pub(crate) fn is_known_key(key: &str) -> bool {
    let Ok(path) = split_key(key) else {
        return false;
    };
    let mut probe = Value::Object(Default::default());
    // A placeholder of any type: an unknown key is reported as ignored
    // whatever its value, a known one either loads or fails on its type.
    insert_at(&mut probe, &path, Value::Null);
    match typed(&probe, "probe") {
        Ok((_, unknown)) => unknown.is_empty(),
        Err(_) => true,
    }
}

pub(super) fn lookup<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(value, |v, k| v.get(k))
}

pub(super) fn insert_at(root: &mut Value, path: &[&str], value: Value) {
    let mut cursor = root;
    for key in &path[..path.len() - 1] {
        if !cursor.is_object() {
            *cursor = Value::Object(Default::default());
        }
        cursor = cursor
            .as_object_mut()
            .expect("object")
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    if !cursor.is_object() {
        *cursor = Value::Object(Default::default());
    }
    cursor
        .as_object_mut()
        .expect("object")
        .insert(path[path.len() - 1].to_string(), value);
}

pub(super) fn remove_at(root: &mut Value, path: &[&str]) -> bool {
    let mut cursor = root;
    for key in &path[..path.len() - 1] {
        match cursor.get_mut(*key) {
            Some(next) => cursor = next,
            None => return false,
        }
    }
    cursor
        .as_object_mut()
        .is_some_and(|m| m.shift_remove(path[path.len() - 1]).is_some())
}
