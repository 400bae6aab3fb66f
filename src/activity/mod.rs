//! Arka's activity file (the activity heartbeat, not the heartbeat
//! turn): `heartbeat.json` in the state directory, in Arka's format (last activity, source, security flags, routine count,
//! memory stats, a bounded history ring), plus almanac's `events_total`
//! counter and an `updated_at` timestamp with its UTC offset.
//!
//! The wall-clock times (`when`, `updated_at`) are in the zone of the
//! `now` given by the caller: the app passes the notes' zone. An activity
//! or source is one line of at most [`MAX_NAME_CHARS`] characters (empty
//! is allowed); [`check_name`] refuses others.
//!
//! Invariants:
//! * Every ping is a read-modify-write under `heartbeat.json.lock`, written
//!   by atomic replace: concurrent pings are never lost and readers never
//!   see a torn file. `events_total` counts every ping ever recorded.
//! * A file that is not UTF-8, not JSON, not an object, or has fields of
//!   the wrong type is moved aside (`heartbeat.json.corrupt-<time>`) with a
//!   warning; its valid fields and unknown keys carry over. Nothing crashes.
//! * Unknown keys are preserved. The file is 2-space indented JSON with
//!   non-ASCII escaped, as Arka writes it.
//! * Reading ([`Tracker::peek`], for `heartbeat status|history`) writes
//!   nothing: no `status.check` event (Arka pings one when the file is
//!   missing), no lock file, and a corrupt file is only reported.
//!
//! [`runs`] is the other heartbeat: the record of the gateway's periodic
//! heartbeat turns (each run's event, the on/off switch).

pub(crate) mod runs;

use std::path::{Path, PathBuf};

use jiff::ZonedDateTime;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::durable::{self, PRIVATE_FILE_MODE};

/// Live values written with every ping.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshot {
    pub agent: String,
    pub security: SecurityFlags,
    pub routines_enabled: u64,
    pub memory: MemoryCounts,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct SecurityFlags {
    pub enabled: bool,
    pub llm: bool,
    pub actions: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct MemoryCounts {
    pub json_entries: u64,
    pub session_daily: u64,
    pub longterm_lines: u64,
}

/// One row of the history ring.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HistoryRow {
    pub ts: Option<f64>,
    pub when: String,
    pub activity: String,
    pub source: String,
}

/// Longest activity or source a ping records, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 200;

/// Why a ping was not recorded.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum PingError {
    #[error("the {field} must be one line: {text:?}")]
    MultiLine { field: &'static str, text: String },
    #[error("the {field} has {chars} characters; the limit is {MAX_NAME_CHARS}: {start:?}…")]
    TooLong {
        field: &'static str,
        chars: usize,
        start: String,
    },
}

/// Checks an activity or source name: one line (empty is allowed, as in
/// Arka) of at most [`MAX_NAME_CHARS`] characters.
pub(crate) fn check_name(field: &'static str, text: &str) -> Result<(), PingError> {
    let breaks = |c: char| {
        matches!(
            c,
            '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        )
    };
    if text.contains(breaks) {
        return Err(PingError::MultiLine {
            field,
            text: text.to_string(),
        });
    }
    let chars = text.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(PingError::TooLong {
            field,
            chars,
            start: text.chars().take(40).collect(),
        });
    }
    Ok(())
}

/// The tracker file and its lock.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    pub path: PathBuf,
    lock: PathBuf,
}

/// The loaded state and what loading had to repair.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub state: Map<String, Value>,
    pub warning: Option<String>,
}

impl Loaded {
    fn empty() -> Loaded {
        Loaded {
            state: Map::new(),
            warning: None,
        }
    }
}

/// What `heartbeat ping --json` prints (almanac's own output, in
/// camelCase; the file keeps Arka's names).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PingOutcome {
    pub activity: String,
    pub events_total: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Tracker {
    pub(crate) fn new(state_dir: &Path) -> Tracker {
        let path = state_dir.join("heartbeat.json");
        Tracker {
            lock: durable::lock_path_for(&path),
            path,
        }
    }

    /// Records one event.
    pub(crate) fn ping(
        &self,
        activity: &str,
        source: &str,
        snapshot: &Snapshot,
        history_size: usize,
        now: &ZonedDateTime,
    ) -> std::io::Result<PingOutcome> {
        durable::with_file_lock(&self.lock, || {
            let Loaded { mut state, warning } = self.load_locked(now)?;
            let history_len = state
                .get("history")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let previous_total = state
                .get("events_total")
                .and_then(Value::as_u64)
                .unwrap_or(history_len as u64);
            let ts = now.timestamp().as_microsecond() as f64 / 1e6;
            let when = now.strftime("%Y-%m-%d %H:%M:%S").to_string();
            let channels = state
                .get("channels")
                .filter(|v| v.is_object())
                .cloned()
                .unwrap_or_else(no_channels);
            state.insert("ts".into(), json!(ts));
            state.insert("when".into(), json!(when));
            state.insert("last_activity".into(), json!(activity));
            state.insert("source".into(), json!(source));
            state.insert("agent".into(), json!(snapshot.agent));
            state.insert("security".into(), json!(snapshot.security));
            state.insert("routines_enabled".into(), json!(snapshot.routines_enabled));
            state.insert("memory".into(), json!(snapshot.memory));
            state.insert("channels".into(), channels.clone());
            state.insert("hermes".into(), channels);
            let mut history: Vec<Value> =
                history_rows(&state).into_iter().map(|r| json!(r)).collect();
            history.push(json!({"ts": ts, "when": when, "activity": activity, "source": source}));
            let keep = history_size.clamp(1, 100);
            if history.len() > keep {
                history.drain(..history.len() - keep);
            }
            state.insert("history".into(), Value::Array(history));
            let events_total = previous_total + 1;
            state.insert("events_total".into(), json!(events_total));
            state.insert(
                "updated_at".into(),
                json!(
                    now.timestamp()
                        .display_with_offset(now.offset())
                        .to_string()
                ),
            );
            durable::atomic_replace(&self.path, render(&state).as_bytes(), PRIVATE_FILE_MODE)?;
            Ok(PingOutcome {
                activity: activity.to_string(),
                events_total,
                warning,
            })
        })?
    }

    /// Reads the state for a command that only reads: no lock is taken
    /// (pings replace the file atomically) and a corrupt file is left where
    /// it is, reported, with its valid fields used; the next ping moves it
    /// aside. Creates and changes nothing.
    pub(crate) fn peek(&self) -> std::io::Result<Loaded> {
        let Some(bytes) = durable::read_if_exists(&self.path)? else {
            return Ok(Loaded::empty());
        };
        let (state, problem) = parse_state(&bytes);
        Ok(Loaded {
            state,
            warning: problem.map(|problem| {
                format!(
                    "{} is unusable ({problem}); the next ping moves it aside and starts a new one",
                    self.path.display()
                )
            }),
        })
    }

    /// Reads the state under the lock, moving a corrupt file aside.
    fn load_locked(&self, now: &ZonedDateTime) -> std::io::Result<Loaded> {
        let Some(bytes) = durable::read_if_exists(&self.path)? else {
            return Ok(Loaded::empty());
        };
        let (state, problem) = parse_state(&bytes);
        let Some(problem) = problem else {
            return Ok(Loaded {
                state,
                warning: None,
            });
        };
        let moved = durable::quarantine(&self.path, now.timestamp())?;
        Ok(Loaded {
            state,
            warning: Some(format!(
                "{} was unusable ({problem}); moved it to {} and started a new one",
                self.path.display(),
                moved.display()
            )),
        })
    }
}

/// The state in `bytes` (its valid fields) and what is wrong with it.
fn parse_state(bytes: &[u8]) -> (Map<String, Value>, Option<String>) {
    let parsed = std::str::from_utf8(bytes)
        .map_err(|_| "it is not UTF-8 text".to_string())
        .and_then(|text| {
            serde_json::from_str::<Value>(text).map_err(|e| format!("it is not JSON ({e})"))
        })
        .and_then(|value| match value {
            Value::Object(map) => Ok(map),
            _ => Err("it is not a JSON object".to_string()),
        });
    match parsed {
        Ok(map) => {
            let (clean, problems) = validate(map);
            let problem = (!problems.is_empty()).then(|| problems.join(", "));
            (clean, problem)
        }
        Err(reason) => (Map::new(), Some(reason)),
    }
}

/// Known fields and whether a value has the right type.
const FIELD_TYPES: &[(&str, fn(&Value) -> bool)] = &[
    ("ts", Value::is_number),
    ("when", Value::is_string),
    ("last_activity", Value::is_string),
    ("source", Value::is_string),
    ("agent", Value::is_string),
    ("security", Value::is_object),
    ("routines_enabled", Value::is_u64),
    ("memory", Value::is_object),
    ("channels", Value::is_object),
    ("hermes", Value::is_object),
    ("history", Value::is_array),
    ("events_total", Value::is_u64),
    ("updated_at", Value::is_string),
];

/// Splits off fields of the wrong type, returning the valid rest.
fn validate(mut map: Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let mut problems = Vec::new();
    for (key, ok) in FIELD_TYPES {
        if let Some(value) = map.get(*key)
            && !value.is_null()
            && !ok(value)
        {
            problems.push(format!("`{key}` has the wrong type"));
            map.shift_remove(*key);
        }
    }
    (map, problems)
}

/// The `channels` object before any channel reported.
pub(crate) fn no_channels() -> Value {
    json!({"message_sessions": 0, "subagents_running": 0, "subagents_total": 0})
}

/// The history ring, normalised: non-object rows dropped, missing fields
/// empty.
pub(crate) fn history_rows(state: &Map<String, Value>) -> Vec<HistoryRow> {
    let Some(rows) = state.get("history").and_then(Value::as_array) else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(Value::as_object)
        .map(|row| {
            let text = |k: &str| match row.get(k) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            HistoryRow {
                ts: row.get("ts").and_then(Value::as_f64),
                when: text("when"),
                activity: text("activity"),
                source: text("source"),
            }
        })
        .collect()
}

/// Pretty JSON (2 spaces) with every non-ASCII character escaped.
fn render(state: &Map<String, Value>) -> String {
    let pretty = serde_json::to_string_pretty(state).expect("JSON values serialise");
    let mut out = String::with_capacity(pretty.len() + 1);
    for c in pretty.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.push('\n');
    out
}

/// Enabled rows of an Arka `routines.json` (a list of objects; a row counts
/// unless `enabled` is `false`). Anything else counts as none.
pub(crate) fn count_routines(path: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(rows)) => rows
            .iter()
            .filter(|r| {
                r.as_object()
                    .is_some_and(|o| o.get("enabled") != Some(&Value::Bool(false)))
            })
            .count() as u64,
        _ => 0,
    }
}

/// Length of an Arka `memory.json` list; anything else counts as 0.
pub(crate) fn count_json_memory(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.as_array().map(|a| a.len() as u64))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
