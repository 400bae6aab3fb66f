//! System events queued for a session's next turn (what cron, webhooks and
//! the heartbeat tell the agent), persisted so a restart loses none.
//!
//! As OpenClaw: per session key, at most [`CAP`] (oldest dropped), an event
//! equal to the one before it is dropped, draining takes all. In the
//! prompt each becomes `System: [<time>] <first line>` plus `System:`
//! continuation lines; untrusted events say `System (untrusted):`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::durable;

pub const CAP: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub text: String,
    /// Milliseconds.
    pub ts: i64,
    #[serde(default = "yes")]
    pub trusted: bool,
}

fn yes() -> bool {
    true
}

/// The queue file of one agent's sessions.
#[derive(Debug, Clone)]
pub struct Queue {
    path: PathBuf,
}

impl Queue {
    pub fn new(path: &Path) -> Queue {
        Queue {
            path: path.to_path_buf(),
        }
    }

    fn lock_path(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".lock");
        PathBuf::from(p)
    }

    /// Queues `text` for `key`; `false` when it was dropped (empty, or the
    /// same as the last one).
    pub fn enqueue(&self, key: &str, text: &str, ts: i64, trusted: bool) -> std::io::Result<bool> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(false);
        }
        self.change(|map| {
            let list = map
                .entry(key.to_string())
                .or_insert_with(|| Value::Array(Vec::new()));
            let mut events: Vec<Event> = serde_json::from_value(list.clone()).unwrap_or_default();
            if events.last().is_some_and(|e| e.text == text) {
                return false;
            }
            events.push(Event {
                text: text.to_string(),
                ts,
                trusted,
            });
            if events.len() > CAP {
                events.drain(..events.len() - CAP);
            }
            *list = serde_json::to_value(events).expect("events serialise");
            true
        })
    }

    /// Takes all events of `key`.
    pub fn drain(&self, key: &str) -> std::io::Result<Vec<Event>> {
        if !self.path.exists() {
            return Ok(Vec::new());
        }
        self.change(|map| {
            map.remove(key)
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default()
        })
    }

    /// The events of `key`, left in place.
    pub fn peek(&self, key: &str) -> Vec<Event> {
        read(&self.path)
            .remove(key)
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    fn change<T>(&self, f: impl FnOnce(&mut Map<String, Value>) -> T) -> std::io::Result<T> {
        durable::with_file_lock(&self.lock_path(), || {
            let mut map = read(&self.path);
            let before = map.clone();
            let value = f(&mut map);
            if map != before {
                map.retain(|_, v| v.as_array().is_some_and(|a| !a.is_empty()));
                let bytes = serde_json::to_vec_pretty(&Value::Object(map)).expect("serialises");
                durable::atomic_replace(&self.path, &bytes, durable::PRIVATE_FILE_MODE)?;
            }
            Ok(value)
        })?
    }
}

fn read(path: &Path) -> Map<String, Value> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// The prompt lines of events, times shown with `format_time`.
pub fn render(events: &[Event], format_time: impl Fn(i64) -> String) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let prefix = if e.trusted {
            "System:"
        } else {
            "System (untrusted):"
        };
        let mut lines = e.text.lines();
        let first = lines.next().unwrap_or("");
        out.push(format!("{prefix} [{}] {first}", format_time(e.ts)));
        for line in lines {
            out.push(format!("{prefix} {line}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_caps_drops_repeats_and_drains() {
        let dir = tempfile::tempdir().unwrap();
        let q = Queue::new(&dir.path().join("events.json"));
        assert!(q.enqueue("k", "Backup finished", 1, true).unwrap());
        assert!(
            !q.enqueue("k", "Backup finished", 2, true).unwrap(),
            "a repeat is dropped"
        );
        assert!(!q.enqueue("k", "   ", 3, true).unwrap());
        for i in 0..25 {
            q.enqueue("k", &format!("event {i}"), 10 + i, i % 2 == 0)
                .unwrap();
        }
        q.enqueue("other", "elsewhere", 5, true).unwrap();
        let events = q.drain("k").unwrap();
        assert_eq!(events.len(), CAP);
        assert_eq!(events[0].text, "event 5");
        assert!(q.drain("k").unwrap().is_empty());
        assert_eq!(q.peek("other").len(), 1);
        let lines = render(
            &[Event {
                text: "Webhook said:\nhello".into(),
                ts: 0,
                trusted: false,
            }],
            |_| "09:00".into(),
        );
        assert_eq!(
            lines,
            vec![
                "System (untrusted): [09:00] Webhook said:",
                "System (untrusted): hello"
            ]
        );
    }
}
