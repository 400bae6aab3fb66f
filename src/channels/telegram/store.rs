//! The channel's files, in OpenClaw's shapes and places:
//! * `telegram/update-offset-<accountId>.json`: `{"version": 2,
//!   "lastUpdateId", "botId"}`, written once the updates up to it are in
//!   the intake log;
//! * `credentials/telegram-pairing.json`: `{version: 1, requests: [{id,
//!   code, createdAt, lastSeenAt, meta}]}`, at most [`MAX_PENDING`]
//!   requests, each good for [`PAIRING_TTL_MS`];
//! * `credentials/telegram-<accountId>-allowFrom.json`: `{version: 1,
//!   allowFrom: [...]}`, the senders pairing approved (the default
//!   account also reads the older `telegram-allowFrom.json`).
//!
//! Every write replaces its file atomically under a lock; credentials are
//! 0600 in a 0700 folder. A file that does not parse is read as empty
//! and left as it is (a pairing approval rewrites it).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::durable;

/// Pairing requests pending at once.
pub(crate) const MAX_PENDING: usize = 3;
/// How long a pairing code is good for.
pub(crate) const PAIRING_TTL_MS: i64 = 60 * 60 * 1000;
/// The code's letters: no 0/O, 1/I/L.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// Where the update offset of `account` is kept.
pub(crate) fn offset_path(state_dir: &Path, account: &str) -> PathBuf {
    state_dir
        .join("telegram")
        .join(format!("update-offset-{}.json", file_safe(account)))
}

fn credentials(state_dir: &Path) -> PathBuf {
    state_dir.join("credentials")
}

/// The pairing requests file.
pub(crate) fn pairing_path(state_dir: &Path) -> PathBuf {
    credentials(state_dir).join("telegram-pairing.json")
}

/// The approved senders of `account`.
pub(crate) fn allow_from_path(state_dir: &Path, account: &str) -> PathBuf {
    credentials(state_dir).join(format!("telegram-{}-allowFrom.json", file_safe(account)))
}

fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The last update id taken for the bot `bot_id` (an offset kept for
/// another bot, after a token change, is not this one's).
pub(crate) fn read_offset(state_dir: &Path, account: &str, bot_id: i64) -> Option<i64> {
    let bytes = durable::read_if_exists(&offset_path(state_dir, account)).ok()??;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let kept_for = match &value["botId"] {
        Value::String(s) => s.parse::<i64>().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    };
    if kept_for.is_some_and(|id| id != bot_id) {
        return None;
    }
    value["lastUpdateId"].as_i64()
}

/// Keeps `last_update_id` as taken.
pub(crate) fn write_offset(
    state_dir: &Path,
    account: &str,
    bot_id: i64,
    last_update_id: i64,
) -> std::io::Result<()> {
    let path = offset_path(state_dir, account);
    if let Some(dir) = path.parent() {
        durable::create_private_dir_all(dir)?;
    }
    let body = json!({"version": 2, "lastUpdateId": last_update_id, "botId": bot_id.to_string()});
    durable::atomic_replace(
        &path,
        format!("{body}\n").as_bytes(),
        durable::PRIVATE_FILE_MODE,
    )
}

/// One pending pairing request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PairingRequest {
    /// The sender's user id.
    pub id: String,
    pub code: String,
    pub created_at: String,
    pub last_seen_at: String,
    /// `{accountId, username?, name?}`.
    #[serde(default)]
    pub meta: Value,
}

impl PairingRequest {
    pub(crate) fn account(&self) -> &str {
        self.meta["accountId"]
            .as_str()
            .unwrap_or(super::DEFAULT_ACCOUNT)
    }

    fn created_ms(&self) -> i64 {
        self.created_at
            .parse::<jiff::Timestamp>()
            .map_or(0, |t| t.as_millisecond())
    }

    fn live(&self, now_ms: i64) -> bool {
        now_ms - self.created_ms() < PAIRING_TTL_MS
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PairingFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    requests: Vec<PairingRequest>,
}

fn read_pairing(path: &Path) -> PairingFile {
    durable::read_if_exists(path)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn write_json(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        durable::create_private_dir_all(dir)?;
    }
    let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    durable::atomic_replace(path, &bytes, durable::PRIVATE_FILE_MODE)
}

/// What asking to pair gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pairing {
    /// A code (new, or the one still pending for this sender).
    Code { code: String, new: bool },
    /// [`MAX_PENDING`] others are pending: try again later.
    Full,
}

/// The pending requests still good at `now`, newest last.
pub(crate) fn pending(state_dir: &Path, now: jiff::Timestamp) -> Vec<PairingRequest> {
    let now_ms = now.as_millisecond();
    let mut live: Vec<PairingRequest> = read_pairing(&pairing_path(state_dir))
        .requests
        .into_iter()
        .filter(|r| r.live(now_ms))
        .collect();
    live.sort_by_key(PairingRequest::created_ms);
    live
}

/// A code for `sender` of `account` (`meta`: who they are).
pub(crate) fn request_pairing(
    state_dir: &Path,
    account: &str,
    sender: &str,
    meta: Value,
    now: jiff::Timestamp,
) -> std::io::Result<Pairing> {
    let path = pairing_path(state_dir);
    durable::create_private_dir_all(&credentials(state_dir))?;
    durable::with_file_lock(&durable::lock_path_for(&path), || {
        let now_ms = now.as_millisecond();
        let mut file = read_pairing(&path);
        file.requests.retain(|r| r.live(now_ms));
        let at = now.to_string();
        if let Some(mine) = file
            .requests
            .iter_mut()
            .find(|r| r.id == sender && r.account() == account)
        {
            mine.last_seen_at = at;
            let code = mine.code.clone();
            write_json(&path, &with_version(file))?;
            return Ok(Pairing::Code { code, new: false });
        }
        if file.requests.len() >= MAX_PENDING {
            return Ok(Pairing::Full);
        }
        let code = new_code();
        let mut meta = if meta.is_object() { meta } else { json!({}) };
        meta["accountId"] = json!(account);
        file.requests.push(PairingRequest {
            id: sender.to_string(),
            code: code.clone(),
            created_at: at.clone(),
            last_seen_at: at,
            meta,
        });
        write_json(&path, &with_version(file))?;
        Ok(Pairing::Code { code, new: true })
    })?
}

fn with_version(mut file: PairingFile) -> PairingFile {
    file.version = 1;
    file
}

fn new_code() -> String {
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(8)
        .map(|b| CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()] as char)
        .collect()
}

/// Why a code was not approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApproveError {
    #[error("no pending pairing request has the code {0} (codes expire after an hour)")]
    Unknown(String),
    #[error("cannot write the pairing files: {0}")]
    Io(String),
}

/// Approves the request with `code`: its sender joins the account's
/// approved senders and the request is gone. Returns the request.
pub(crate) fn approve(
    state_dir: &Path,
    code: &str,
    now: jiff::Timestamp,
) -> Result<PairingRequest, ApproveError> {
    let path = pairing_path(state_dir);
    let io = |e: std::io::Error| ApproveError::Io(e.to_string());
    durable::create_private_dir_all(&credentials(state_dir)).map_err(io)?;
    durable::with_file_lock(&durable::lock_path_for(&path), || {
        let now_ms = now.as_millisecond();
        let mut file = read_pairing(&path);
        let wanted = code.trim().to_ascii_uppercase();
        let Some(at) = file
            .requests
            .iter()
            .position(|r| r.code.eq_ignore_ascii_case(&wanted) && r.live(now_ms))
        else {
            return Err(ApproveError::Unknown(wanted));
        };
        let request = file.requests.remove(at);
        add_allowed(state_dir, request.account(), &request.id).map_err(io)?;
        file.requests.retain(|r| r.live(now_ms));
        write_json(&path, &with_version(file)).map_err(io)?;
        Ok(request)
    })
    .map_err(io)?
}

/// Adds `sender` to the approved senders of `account`.
fn add_allowed(state_dir: &Path, account: &str, sender: &str) -> std::io::Result<()> {
    let path = allow_from_path(state_dir, account);
    durable::with_file_lock(&durable::lock_path_for(&path), || {
        let mut list = read_allow_file(&path);
        if !list.iter().any(|s| s == sender) {
            list.push(sender.to_string());
        }
        write_json(&path, &json!({"version": 1, "allowFrom": list}))
    })?
}

fn read_allow_file(path: &Path) -> Vec<String> {
    let Some(value) = durable::read_if_exists(path)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Vec::new();
    };
    value["allowFrom"]
        .as_array()
        .map(|list| list.iter().filter_map(entry_text).collect())
        .unwrap_or_default()
}

/// An allowlist entry as text (ids may be written as numbers).
pub(crate) fn entry_text(entry: &Value) -> Option<String> {
    match entry {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The senders pairing approved for `account`.
pub(crate) fn approved(state_dir: &Path, account: &str, is_default: bool) -> Vec<String> {
    let mut list = read_allow_file(&allow_from_path(state_dir, account));
    if is_default {
        list.extend(read_allow_file(
            &credentials(state_dir).join("telegram-allowFrom.json"),
        ));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn the_offset_is_kept_per_account_and_bot() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_offset(dir.path(), "default", 7), None);
        write_offset(dir.path(), "default", 7, 120).unwrap();
        assert_eq!(read_offset(dir.path(), "default", 7), Some(120));
        assert_eq!(read_offset(dir.path(), "default", 8), None, "another bot's");
        assert_eq!(read_offset(dir.path(), "ops", 7), None);
        let text = std::fs::read_to_string(offset_path(dir.path(), "default")).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"version": 2, "lastUpdateId": 120, "botId": "7"})
        );
    }

    #[test]
    fn pairing_gives_one_code_per_sender_three_at_most_and_approval_allows_the_sender() {
        let dir = tempfile::tempdir().unwrap();
        let now = at("2026-12-04T10:00:00Z");
        let first =
            request_pairing(dir.path(), "default", "42", json!({"username": "ada"}), now).unwrap();
        let Pairing::Code { code, new: true } = first else {
            panic!("{first:?}")
        };
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)));
        let again = request_pairing(dir.path(), "default", "42", json!({}), now).unwrap();
        assert_eq!(
            again,
            Pairing::Code {
                code: code.clone(),
                new: false
            }
        );
        for id in ["43", "44"] {
            assert!(matches!(
                request_pairing(dir.path(), "default", id, json!({}), now).unwrap(),
                Pairing::Code { new: true, .. }
            ));
        }
        assert_eq!(
            request_pairing(dir.path(), "default", "45", json!({}), now).unwrap(),
            Pairing::Full
        );
        assert_eq!(pending(dir.path(), now).len(), 3);
        // An hour later they are all gone.
        assert!(pending(dir.path(), at("2026-12-04T11:00:01Z")).is_empty());

        let approved_one = approve(dir.path(), &code.to_lowercase(), now).unwrap();
        assert_eq!(approved_one.id, "42");
        assert_eq!(approved(dir.path(), "default", true), ["42"]);
        assert!(approved(dir.path(), "ops", false).is_empty());
        assert_eq!(pending(dir.path(), now).len(), 2);
        assert!(matches!(
            approve(dir.path(), &code, now),
            Err(ApproveError::Unknown(_))
        ));
        use std::os::unix::fs::PermissionsExt;
        for path in [
            pairing_path(dir.path()),
            allow_from_path(dir.path(), "default"),
        ] {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        let file: Value =
            serde_json::from_slice(&std::fs::read(allow_from_path(dir.path(), "default")).unwrap())
                .unwrap();
        assert_eq!(file, json!({"version": 1, "allowFrom": ["42"]}));
    }
}
