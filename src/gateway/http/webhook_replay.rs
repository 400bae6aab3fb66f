//! Idempotency of inbound webhooks: the answers remembered by
//! idempotency key (`hooks-replay.json` and the intake log), and a
//! request's intake records accepted once.
//!
//! Invariants:
//! * An idempotency key (`Idempotency-Key`, `X-OpenClaw-Idempotency-Key`,
//!   body `idempotencyKey`) is remembered for [`REPLAY_TTL_MS`] (at most
//!   [`REPLAY_MAX`] keys): in the accepted intake record itself, written
//!   before the reply, and in `hooks-replay.json`, saved before the intake
//!   log that holds newer keys is emptied. A repeat within that time, also
//!   after a restart, gets the first answer and queues nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::super::intake::Record;
use super::super::{GatewayEvent, Shared};
use super::ApiError;
use super::webhooks::{WebhookState, sha256_hex};
use crate::durable;

/// How long an idempotency key is remembered.
const REPLAY_TTL_MS: i64 = 5 * 60 * 1000;
/// How many idempotency keys are remembered (the oldest go first).
const REPLAY_MAX: usize = 1000;

const REPLAY_FILE: &str = "hooks-replay.json";

/// Remembered answers by idempotency key: looked up by key, aged out
/// oldest first.
#[derive(Debug, Default)]
pub(super) struct ReplayCache {
    by_key: HashMap<String, ReplayEntry>,
    /// `(at_ms, key)` in the order entries were remembered.
    order: VecDeque<(i64, String)>,
    /// Holds keys the saved file does not.
    dirty: bool,
}

/// `hooks-replay.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ReplayFile {
    entries: Vec<ReplayEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplayEntry {
    key: String,
    at_ms: i64,
    answer: Value,
}

impl ReplayCache {
    fn from_entries(mut entries: Vec<ReplayEntry>, now_ms: i64) -> ReplayCache {
        // Entries from a clock that has since gone back are dropped.
        entries.retain(|e| e.at_ms <= now_ms);
        entries.sort_by_key(|e| e.at_ms);
        let mut cache = ReplayCache::default();
        for entry in entries {
            cache.remember(entry);
        }
        cache.prune(now_ms);
        cache
    }

    /// The saved cache, and the keys the intake log holds (accepted
    /// since the cache was last saved). Marked dirty when the log added
    /// any.
    fn load_with_intake(
        path: &std::path::Path,
        intake: &std::path::Path,
        now_ms: i64,
    ) -> ReplayCache {
        let mut entries = ReplayCache::load_file(path);
        let saved = entries.len();
        if let Ok((records, _)) = durable::read_journal(intake, super::super::intake::parse) {
            for record in records {
                let Some(entry) = record.replay else { continue };
                let (Some(key), Some(answer)) = (entry["key"].as_str(), entry.get("answer")) else {
                    continue;
                };
                entries.push(ReplayEntry {
                    key: key.to_string(),
                    at_ms: record.ts,
                    answer: answer.clone(),
                });
            }
        }
        let from_log = entries.len() > saved;
        let mut cache = ReplayCache::from_entries(entries, now_ms);
        cache.dirty = from_log;
        cache
    }

    fn load_file(path: &std::path::Path) -> Vec<ReplayEntry> {
        let unreadable = |err: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %err, "hook replay cache unreadable; starting empty");
            Vec::new()
        };
        match durable::read_if_exists(path) {
            Ok(Some(bytes)) => match serde_json::from_slice::<ReplayFile>(&bytes) {
                Ok(file) => file.entries,
                Err(err) => unreadable(&err),
            },
            Ok(None) => Vec::new(),
            Err(err) => unreadable(&err),
        }
    }

    /// Adds `entry`; a key seen before keeps its first answer.
    fn remember(&mut self, entry: ReplayEntry) {
        if self.by_key.contains_key(&entry.key) {
            return;
        }
        self.order.push_back((entry.at_ms, entry.key.clone()));
        self.by_key.insert(entry.key.clone(), entry);
    }

    fn prune(&mut self, now_ms: i64) {
        while let Some((at_ms, key)) = self.order.front() {
            let expired = now_ms.saturating_sub(*at_ms) >= REPLAY_TTL_MS;
            if !expired && self.order.len() <= REPLAY_MAX {
                break;
            }
            self.by_key.remove(key);
            self.order.pop_front();
        }
    }

    fn get(&self, key: &str, now_ms: i64) -> Option<&Value> {
        self.by_key
            .get(key)
            .filter(|e| now_ms.saturating_sub(e.at_ms) < REPLAY_TTL_MS)
            .map(|e| &e.answer)
    }

    fn insert(&mut self, key: String, answer: Value, now_ms: i64) {
        self.remember(ReplayEntry {
            key,
            at_ms: now_ms,
            answer,
        });
        self.dirty = true;
        self.prune(now_ms);
    }

    fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
        self.order.retain(|(_, k)| k != key);
    }

    fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let entries = self
            .order
            .iter()
            .filter_map(|(_, key)| self.by_key.get(key).cloned())
            .collect();
        serde_json::to_vec(&ReplayFile { entries })
    }
}

impl WebhookState {
    /// Saves the idempotency keys not yet in `hooks-replay.json`, then
    /// runs `then` with no key accepted in between: the intake log, which
    /// holds every key since the last save, may be emptied there.
    /// Blocking (on the blocking boundary).
    pub(crate) fn save_replay_then<T>(
        &self,
        gateway_dir: &std::path::Path,
        now_ms: i64,
        then: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let mut cache = self.replay.blocking_lock();
        let path = gateway_dir.join(REPLAY_FILE);
        let loaded = cache.get_or_insert_with(|| {
            ReplayCache::load_with_intake(&path, &gateway_dir.join("intake.jsonl"), now_ms)
        });
        if loaded.dirty {
            loaded.prune(now_ms);
            let bytes = loaded.to_json().map_err(std::io::Error::other)?;
            durable::atomic_replace(&path, &bytes, durable::PRIVATE_FILE_MODE)?;
            loaded.dirty = false;
        }
        then()
    }
}

/// `sha256(credential):sha256(what was asked):sha256(key)`: the same key
/// for another request, or from another caller, is another entry.
pub(super) fn replay_key(credential: &str, identity: &Value, key: &str) -> String {
    format!(
        "{credential}:{}:{}",
        sha256_hex(identity.to_string().as_bytes()),
        sha256_hex(key.as_bytes())
    )
}

/// Writes `records` to the intake log and remembers `answer` under
/// `replay` before answering; a remembered key gets its first answer and
/// writes nothing.
pub(super) async fn accept_once(
    shared: &Arc<Shared>,
    replay: Option<String>,
    mut records: Vec<Record>,
    wake: Option<GatewayEvent>,
    answer: Value,
) -> Result<Value, ApiError> {
    // One keyed acceptance at a time, so two copies of one request
    // cannot both miss the cache.
    let mut cache = match &replay {
        Some(_) => Some(shared.webhooks.replay.lock().await),
        None => None,
    };
    let now_ms = shared.host.now_ms();
    if let (Some(key), Some(cache)) = (&replay, cache.as_mut()) {
        // Loaded once, at the first keyed request.
        let loaded = cache.get_or_insert_with(|| {
            let dir = shared.engine.app().paths.gateway_dir();
            ReplayCache::load_with_intake(&dir.join(REPLAY_FILE), &dir.join("intake.jsonl"), now_ms)
        });
        if let Some(first) = loaded.get(key, now_ms) {
            return Ok(first.clone());
        }
        // Remembered before the record is written, so the feeder cannot
        // save the cache and empty the log between the two.
        loaded.insert(key.clone(), answer.clone(), now_ms);
    }
    if let (Some(key), Some(first)) = (&replay, records.first_mut()) {
        first.replay = Some(json!({"key": key, "answer": answer}));
    }
    // One write(2) into the page cache, inline, as the control API does.
    // The key is durable with its record; `hooks-replay.json` is brought
    // up to date before the log is emptied.
    if let Err(err) = shared.intake.accept_all(&mut records) {
        if let (Some(key), Some(Some(loaded))) = (&replay, cache.as_mut().map(|c| c.as_mut())) {
            loaded.forget(key);
        }
        return Err(ApiError::intake(err));
    }
    drop(cache);
    if let Some(wake) = wake {
        let _ = shared.bus.send(wake);
    }
    Ok(answer)
}

#[cfg(test)]
#[path = "webhook_replay_tests.rs"]
mod tests;
