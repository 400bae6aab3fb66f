//! Sessions: which conversation a message belongs to, its transcript, and
//! when it starts over. OpenClaw's layout under the state directory:
//!
//! ```text
//! agents/<agentId>/sessions/sessions.json        key → entry
//! agents/<agentId>/sessions/<sessionId>.jsonl    transcript (format 3)
//! agents/<agentId>/sessions/system-events.json   queued system events
//! ```
//!
//! * [`key`]: the key grammar (pure);
//! * [`reset`]: daily and idle reset rules (pure, "now" injected);
//! * [`store`]: `sessions.json`, read-modify-write under a lock, unknown
//!   fields kept;
//! * [`transcript`]: append-only JSONL, synced, torn lines skipped;
//! * [`events`]: the system event queue.
//!
//! Invariants: a reset gives the key a new session id and transcript; the
//! old transcript and all memory stay. Transcripts are never rewritten.
//! Turns that are bookkeeping (heartbeat, cron events) never start a new
//! session and never count as interaction.

pub(crate) mod events;
pub(crate) mod key;
pub(crate) mod reset;
pub(crate) mod store;
mod store_batch;
mod store_cache;
pub(crate) mod transcript;

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use serde::Serialize;

use crate::config::SessionConfig;
use store::{SessionEntry, SessionsFile};

/// Why the current session is new.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Started {
    /// The key had no session.
    First,
    /// The daily reset time passed.
    Daily,
    /// Idle longer than allowed.
    Idle,
    /// `/reset`.
    Reset,
    /// `/new`.
    New,
}

/// The session a turn runs in.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub entry: SessionEntry,
    pub transcript: PathBuf,
    /// Set when this turn starts the session.
    pub started: Option<Started>,
}

/// The sessions of one agent.
#[derive(Debug, Clone)]
pub(crate) struct Sessions {
    pub dir: PathBuf,
    pub agent_id: String,
    pub config: SessionConfig,
    /// The host's zone: the daily reset hour is host-local.
    pub zone: TimeZone,
}

impl Sessions {
    pub(crate) fn new(
        state_dir: &Path,
        agent_id: &str,
        config: &SessionConfig,
        zone: TimeZone,
    ) -> Sessions {
        let agent_id = key::normalize_id(agent_id, "main");
        Sessions {
            dir: state_dir.join("agents").join(&agent_id).join("sessions"),
            agent_id,
            config: config.clone(),
            zone,
        }
    }

    pub(crate) fn store(&self) -> SessionsFile {
        SessionsFile::new(&self.dir.join("sessions.json"))
    }

    /// The lock file a turn in `key` holds, so two processes never run
    /// turns in one session at once (the name is a hash: keys may hold
    /// any character).
    pub(crate) fn turn_lock_path(&self, key: &str) -> PathBuf {
        self.dir.join("locks").join(format!(
            "{:016x}.lock",
            crate::paths::fnv1a64(key.as_bytes())
        ))
    }

    pub(crate) fn events(&self) -> events::Queue {
        events::Queue::new(&self.dir.join("system-events.json"))
    }

    /// The store key of a requested key.
    pub(crate) fn resolve_key(&self, request: Option<&str>) -> String {
        key::resolve(
            request,
            &self.agent_id,
            &self.config.main_key,
            self.config.scope == "global",
        )
    }

    /// Where the transcript of `entry` is.
    pub(crate) fn transcript_path(&self, entry: &SessionEntry) -> PathBuf {
        match &entry.session_file {
            Some(file) => {
                let p = PathBuf::from(file);
                if p.is_absolute() { p } else { self.dir.join(p) }
            }
            None => self.dir.join(format!("{}.jsonl", entry.session_id)),
        }
    }

    /// The session for a turn on `key` at `now_ms`: the current one, or a
    /// new one when there is none, when it is stale (unless `bookkeeping`),
    /// or when `explicit` asks. An explicit reset keeps the model choice
    /// and label; a stale rollover keeps nothing. `channel`: the chat
    /// channel the message came in on, whose `resetByChannel` entry
    /// applies (else the channel the key names).
    pub(crate) fn current(
        &self,
        key: &str,
        channel: Option<&str>,
        now: jiff::Timestamp,
        cwd: &Path,
        explicit: Option<Started>,
        bookkeeping: bool,
    ) -> std::io::Result<(Current, Vec<String>)> {
        let now_ms = now.as_millisecond();
        let chat_type = key::chat_type(key);
        let channel = channel.or_else(|| key::channel_of(key));
        let policy = reset::policy(&self.config, chat_type, channel);
        let ((entry, started, header), warnings) = self.store().update(now, |map| {
            let existing = map.get(key).and_then(SessionEntry::from_value);
            let started = match (&existing, explicit) {
                (None, _) => Some(Started::First),
                (Some(_), Some(why)) => Some(why),
                (Some(_), None) if bookkeeping => None,
                (Some(e), None) => {
                    let began = e.session_started_at.unwrap_or(e.updated_at);
                    let active = e.last_interaction_at.unwrap_or(e.updated_at);
                    reset::staleness(&policy, began, active, now_ms, &self.zone).map(|s| match s {
                        reset::Stale::Daily => Started::Daily,
                        reset::Stale::Idle => Started::Idle,
                    })
                }
            };
            let mut entry = existing.clone().unwrap_or_default();
            if started.is_some() {
                let old = existing.unwrap_or_default();
                entry = SessionEntry {
                    session_id: uuid::Uuid::new_v4().to_string(),
                    updated_at: now_ms,
                    session_started_at: Some(now_ms),
                    last_interaction_at: Some(now_ms),
                    chat_type: Some(chat_type.to_string()),
                    ..SessionEntry::default()
                };
                // What the heartbeat keeps about the key, not the
                // conversation: a new session must not re-run tasks or
                // repeat an alert.
                entry.heartbeat_task_state = old.heartbeat_task_state.clone();
                entry.last_heartbeat_text = old.last_heartbeat_text.clone();
                entry.last_heartbeat_sent_at = old.last_heartbeat_sent_at;
                entry.last_channel = old.last_channel.clone();
                entry.last_to = old.last_to.clone();
                entry.last_account_id = old.last_account_id.clone();
                if matches!(explicit, Some(Started::Reset | Started::New)) {
                    entry.provider_override = old.provider_override;
                    entry.model_override = old.model_override;
                    entry.label = old.label;
                }
                let value = map
                    .entry(key.to_string())
                    .or_insert(serde_json::Value::Null);
                // A new session keeps none of the old entry's fields.
                *value = serde_json::Value::Object(Default::default());
                entry.write_into(value);
            }
            // A new session's transcript is started here, before the write
            // that carries its row: that write syncs the store's folder,
            // where the transcript is (a new entry names no other file),
            // so its name is as durable as the row when this returns; its
            // header is synced by the turn's first message, appended synced.
            let header = started.is_some().then(|| {
                let path = self.transcript_path(&entry);
                transcript::start_unsynced(&path, &entry.session_id, cwd, &iso(now))
            });
            (entry, started, header)
        })?;
        let transcript = self.transcript_path(&entry);
        match header {
            Some(written) => written?,
            None if transcript::needs_header(&transcript) => {
                transcript::create(&transcript, &entry.session_id, cwd, &iso(now))?;
            }
            None => {}
        }
        Ok((
            Current {
                entry,
                transcript,
                started,
            },
            warnings,
        ))
    }

    /// Changes the entry of `key` after a turn.
    pub(crate) fn record(
        &self,
        key: &str,
        now: jiff::Timestamp,
        f: impl FnOnce(&mut SessionEntry),
    ) -> std::io::Result<Vec<String>> {
        let (_, warnings) = self.store().update(now, |map| {
            if let Some(value) = map.get_mut(key)
                && let Some(mut entry) = SessionEntry::from_value(value)
            {
                f(&mut entry);
                entry.write_into(value);
            }
        })?;
        Ok(warnings)
    }

    /// Keeps a row of the run that just ended in `base` (an isolated cron
    /// run, whose base row starts a new session every run): the base
    /// entry as it is now, under `<base>:run:<sessionId>`. Earlier run rows
    /// of `base` not updated for `retention_ms` leave the store (their
    /// transcripts stay); `None` keeps them.
    pub(crate) fn record_run(
        &self,
        base: &str,
        now: jiff::Timestamp,
        retention_ms: Option<u64>,
    ) -> std::io::Result<Vec<String>> {
        let now_ms = now.as_millisecond();
        let prefix = format!("{base}:run:");
        let (_, warnings) = self.store().update(now, |map| {
            let Some(entry) = map.get(base).and_then(SessionEntry::from_value) else {
                return;
            };
            if let Some(keep) = retention_ms {
                let oldest = now_ms.saturating_sub(i64::try_from(keep).unwrap_or(i64::MAX));
                map.retain(|key, value| {
                    !key.starts_with(&prefix)
                        || SessionEntry::from_value(value).is_some_and(|e| e.updated_at >= oldest)
                });
            }
            let row = map
                .entry(format!("{prefix}{}", entry.session_id))
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            entry.write_into(row);
        })?;
        Ok(warnings)
    }

    /// Every session, most recently updated first.
    pub(crate) fn list(&self) -> (Vec<(String, SessionEntry)>, Vec<String>) {
        let (map, warnings) = self.store().load();
        let mut out: Vec<(String, SessionEntry)> = map
            .iter()
            .filter_map(|(k, v)| SessionEntry::from_value(v).map(|e| (k.clone(), e)))
            .collect();
        out.sort_by(|a, b| b.1.updated_at.cmp(&a.1.updated_at).then(a.0.cmp(&b.0)));
        (out, warnings)
    }
}

/// ISO 8601 UTC with milliseconds, as transcripts write times.
pub(crate) fn iso(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_new_sessions_transcript_is_started_within_the_stores_write() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sessions::new(dir.path(), "main", &SessionConfig::default(), TimeZone::UTC);
        let now = at("2026-11-29T09:00:00Z");
        let before = crate::durable::syncs_on_this_thread();
        let (current, _) = s
            .current("agent:main:main", None, now, dir.path(), None, false)
            .unwrap();
        // The store's file and its folder, which holds the transcript too;
        // the header is synced by the turn's first message.
        assert_eq!(crate::durable::syncs_on_this_thread() - before, 2);
        let text = std::fs::read_to_string(&current.transcript).unwrap();
        assert!(text.starts_with("{\"type\":\"session\""), "{text}");
        assert_eq!(current.transcript.parent(), Some(s.dir.as_path()));
        let read = transcript::read(&current.transcript).unwrap();
        assert_eq!(
            read.session_id.as_deref(),
            Some(current.entry.session_id.as_str())
        );
        // A transcript left empty (a start cut short) gets its header when
        // the session is next used.
        std::fs::write(&current.transcript, "").unwrap();
        let (again, _) = s
            .current("agent:main:main", None, now, dir.path(), None, false)
            .unwrap();
        assert_eq!(again.entry.session_id, current.entry.session_id);
        let read = transcript::read(&again.transcript).unwrap();
        assert_eq!(
            read.session_id.as_deref(),
            Some(current.entry.session_id.as_str())
        );
    }

    #[test]
    fn a_chat_sessions_reset_follows_its_channel_and_its_type() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = SessionConfig::default();
        let idle = |minutes: u32| crate::config::ResetConfig {
            mode: Some("idle".into()),
            idle_minutes: Some(minutes),
            ..Default::default()
        };
        config.reset_by_channel = [("http".to_string(), idle(10))].into();
        config.reset_by_type = [("group".to_string(), idle(60))].into();
        let s = Sessions::new(dir.path(), "work", &config, TimeZone::UTC);
        let fresh = |key: &str, channel: Option<&str>, first: &str, then: &str| {
            let (a, _) = s
                .current(key, channel, at(first), dir.path(), None, false)
                .unwrap();
            let (b, _) = s
                .current(key, channel, at(then), dir.path(), None, false)
                .unwrap();
            a.entry.session_id == b.entry.session_id
        };
        // A routed direct chat on `http`: its channel's 10 idle minutes.
        let dm = "agent:work:http:direct:boss";
        assert!(fresh(
            dm,
            Some("http"),
            "2026-11-29T09:00:00Z",
            "2026-11-29T09:09:00Z"
        ));
        assert!(!fresh(
            dm,
            Some("http"),
            "2026-11-29T10:00:00Z",
            "2026-11-29T10:11:00Z"
        ));
        // With `dmScope: main` the key names no channel: the message's does.
        let main = "agent:work:main";
        assert!(!fresh(
            main,
            Some("http"),
            "2026-11-29T11:00:00Z",
            "2026-11-29T11:11:00Z"
        ));
        assert!(fresh(
            main,
            None,
            "2026-11-29T12:00:00Z",
            "2026-11-29T12:11:00Z"
        ));
        // A group on another channel: the group type's hour.
        let group = "agent:work:telegram:group:team";
        assert!(fresh(
            group,
            Some("telegram"),
            "2026-11-29T13:00:00Z",
            "2026-11-29T13:59:00Z"
        ));
        assert!(!fresh(
            group,
            Some("telegram"),
            "2026-11-29T14:00:00Z",
            "2026-11-29T15:01:00Z"
        ));
    }

    #[test]
    fn sessions_start_roll_over_and_reset() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sessions::new(dir.path(), "main", &SessionConfig::default(), TimeZone::UTC);
        let key = s.resolve_key(None);
        let (first, _) = s
            .current(
                &key,
                None,
                at("2026-11-29T09:00:00Z"),
                dir.path(),
                None,
                false,
            )
            .unwrap();
        assert_eq!(first.started, Some(Started::First));
        assert!(first.transcript.exists());
        let (same, _) = s
            .current(
                &key,
                None,
                at("2026-11-29T23:00:00Z"),
                dir.path(),
                None,
                false,
            )
            .unwrap();
        assert_eq!(same.started, None);
        assert_eq!(same.entry.session_id, first.entry.session_id);
        // Past 04:00 the next day: a new session; the old transcript stays.
        let (next, _) = s
            .current(
                &key,
                None,
                at("2026-11-30T04:00:00Z"),
                dir.path(),
                None,
                false,
            )
            .unwrap();
        assert_eq!(next.started, Some(Started::Daily));
        assert_ne!(next.entry.session_id, first.entry.session_id);
        assert!(first.transcript.exists() && next.transcript.exists());
        // A heartbeat never rolls a session.
        let (beat, _) = s
            .current(
                &key,
                None,
                at("2026-12-05T12:00:00Z"),
                dir.path(),
                None,
                true,
            )
            .unwrap();
        assert_eq!(beat.started, None);
        // An explicit reset keeps the model choice.
        s.record(&key, at("2026-12-05T12:00:00Z"), |e| {
            e.model_override = Some("small".into())
        })
        .unwrap();
        let (reset, _) = s
            .current(
                &key,
                None,
                at("2026-12-05T12:01:00Z"),
                dir.path(),
                Some(Started::Reset),
                false,
            )
            .unwrap();
        assert_eq!(reset.started, Some(Started::Reset));
        assert_eq!(reset.entry.model_override.as_deref(), Some("small"));
        let (list, _) = s.list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].1.session_id, reset.entry.session_id);
    }
}
