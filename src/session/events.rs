//! System events queued for a session's next turn (what cron, webhooks and
//! the heartbeat tell the agent), persisted so a restart loses none.
//!
//! As OpenClaw: per session key, at most [`CAP`] (oldest dropped), an event
//! equal to the one before it is dropped. In the prompt each becomes
//! `System: [<time>] <first line>` plus `System:` continuation lines;
//! untrusted events say `System (untrusted):`.
//!
//! Delivery: a turn reads the pending events ([`Queue::pending`]), puts
//! them in the user's message, and only once that message and the answer
//! are synced to the transcript, with a record of what was delivered
//! ([`delivery_record`]), takes exactly those events off the queue
//! ([`Queue::consume`]; events queued meanwhile stay). A failed model call
//! leaves them queued. A crash between the transcript and the queue update
//! leaves them queued too, but the record tells the next turn they were
//! delivered ([`delivered`]), so they are dropped rather than repeated;
//! only a power loss before the transcript is synced can repeat them.
//!
//! A queue file that does not parse is moved aside (with a warning) before
//! anything is written, never read as empty and overwritten; one that
//! cannot be read is an error.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::durable::{self, StateFile};
use crate::paths::fnv1a64;
use crate::session::transcript::{Payload, Transcript};

pub(crate) const CAP: usize = 20;
/// The most characters of one event's text kept; the rest is cut, and
/// the text says so.
pub(crate) const EVENT_TEXT_MAX: usize = 8_000;
/// The most characters of all the events a session holds; the oldest go
/// first, and the next turn is told how many went.
pub(crate) const QUEUE_TEXT_MAX: usize = 24_000;

/// The `customType` of the transcript entry recording delivered events.
pub(crate) const DELIVERY_RECORD: &str = "system-events";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SystemEvent {
    pub text: String,
    /// Milliseconds.
    pub ts: i64,
    #[serde(default = "yes")]
    pub trusted: bool,
    /// The gateway intake record it came from: a record fed again after
    /// a crash (before the feeder saved its mark) is not queued twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Older events dropped before this one to keep the queue within
    /// [`CAP`] events and [`QUEUE_TEXT_MAX`] characters.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_before: u32,
    /// Never dropped to keep the queue within its limits (a subagent's
    /// announce: it must reach the session, however many wait).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

/// One event to queue: its text, time, trust, intake number, and whether
/// it is kept whatever the limits ([`SystemEvent::kept`]).
pub(crate) trait Fed {
    fn text(&self) -> &str;
    fn ts(&self) -> i64;
    fn trusted(&self) -> bool;
    fn seq(&self) -> Option<u64>;
    fn kept(&self) -> bool {
        false
    }
}

impl<S: AsRef<str>> Fed for (S, i64, bool, Option<u64>) {
    fn text(&self) -> &str {
        self.0.as_ref()
    }
    fn ts(&self) -> i64 {
        self.1
    }
    fn trusted(&self) -> bool {
        self.2
    }
    fn seq(&self) -> Option<u64> {
        self.3
    }
}

/// An event fed from the gateway's intake.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FedEvent<'a> {
    pub text: &'a str,
    pub ts: i64,
    pub trusted: bool,
    pub seq: Option<u64>,
    pub kept: bool,
}

impl Fed for FedEvent<'_> {
    fn text(&self) -> &str {
        self.text
    }
    fn ts(&self) -> i64 {
        self.ts
    }
    fn trusted(&self) -> bool {
        self.trusted
    }
    fn seq(&self) -> Option<u64> {
        self.seq
    }
    fn kept(&self) -> bool {
        self.kept
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `text` trimmed, and cut at [`EVENT_TEXT_MAX`] characters with a note
/// of how much went.
pub(crate) fn capped(text: &str) -> std::borrow::Cow<'_, str> {
    let text = text.trim();
    match text.char_indices().nth(EVENT_TEXT_MAX) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            std::borrow::Cow::Owned(format!(
                "{}\n[{more} more characters cut: a system event holds at most {EVENT_TEXT_MAX}]",
                &text[..cut]
            ))
        }
    }
}

/// Drops the oldest of `events` until at most [`CAP`] are left (as
/// OpenClaw does, without a note) and their texts hold at most
/// [`QUEUE_TEXT_MAX`] characters (the newest is always kept); the first
/// left says how many went for their size, and carries what a dropped
/// event said of earlier ones. A kept event is never dropped and does not
/// count against the limits.
fn keep_within_limits(events: &mut Vec<SystemEvent>) {
    let chars = |e: &SystemEvent| e.text.chars().count();
    let mut droppable = events.iter().filter(|e| !e.kept).count();
    let mut over = droppable.saturating_sub(CAP);
    let mut total: usize = events.iter().filter(|e| !e.kept).map(chars).sum();
    let (mut carried, mut noted) = (0u32, 0u32);
    events.retain(|e| {
        if e.kept {
            return true;
        }
        let for_count = over > 0;
        let for_size = !for_count && droppable > 1 && total > QUEUE_TEXT_MAX;
        if !for_count && !for_size {
            return true;
        }
        over = over.saturating_sub(1);
        droppable -= 1;
        total -= chars(e);
        carried = carried.saturating_add(e.dropped_before);
        if for_size {
            noted = noted.saturating_add(1);
        }
        false
    });
    let noted = carried.saturating_add(noted);
    if noted > 0
        && let Some(first) = events.first_mut()
    {
        first.dropped_before = first.dropped_before.saturating_add(noted);
    }
}

fn yes() -> bool {
    true
}

impl SystemEvent {
    /// What names the event in a delivery record: its time and a hash of
    /// its text and trust (the text itself is in the user's message).
    pub(crate) fn fingerprint(&self) -> String {
        let mut bytes = Vec::with_capacity(self.text.len() + 1);
        bytes.push(u8::from(self.trusted));
        bytes.extend_from_slice(self.text.as_bytes());
        format!("{}:{:016x}", self.ts, fnv1a64(&bytes))
    }
}

/// The events waiting for a turn, and what happened to an unreadable
/// queue file.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub events: Vec<SystemEvent>,
    pub warnings: Vec<String>,
}

/// The queue file of one agent's sessions.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    path: PathBuf,
}

impl Queue {
    pub(crate) fn new(path: &Path) -> Queue {
        Queue {
            path: path.to_path_buf(),
        }
    }

    fn lock_path(&self) -> PathBuf {
        durable::lock_path_for(&self.path)
    }

    /// Queues `text` for `key`; `false` when it was dropped (empty, or the
    /// same as the last one). Warnings say what was moved aside.
    pub(crate) fn enqueue(
        &self,
        key: &str,
        text: &str,
        ts: i64,
        trusted: bool,
        now: jiff::Timestamp,
    ) -> std::io::Result<(bool, Vec<String>)> {
        let text = capped(text);
        if text.is_empty() {
            return Ok((false, Vec::new()));
        }
        self.change(now, |map| {
            let list = map
                .entry(key.to_string())
                .or_insert_with(|| Value::Array(Vec::new()));
            let mut events = events_of(list);
            if events.last().is_some_and(|e| e.text == text) {
                return false;
            }
            events.push(SystemEvent {
                text: text.into_owned(),
                ts,
                trusted,
                seq: None,
                dropped_before: 0,
                kept: false,
            });
            keep_within_limits(&mut events);
            *list = serde_json::to_value(events).expect("events serialise");
            true
        })
    }

    /// Queues several `(text, ts, trusted, intake seq)` events for `key` in
    /// one write, each by the rules of [`Queue::enqueue`]; an event no
    /// newer (in intake number and time) than the newest fed one the queue
    /// holds is there already (fed again after a crash) and is skipped.
    /// Returns how many of them the queue holds afterwards. Only the items
    /// that can end among the newest [`CAP`] are looked at, so a burst of
    /// thousands costs what twenty do. (The gateway queues through
    /// [`Queue::enqueue_groups`]; this one-key form states the rules.)
    #[cfg(test)]
    pub(crate) fn enqueue_many<F: Fed>(
        &self,
        key: &str,
        items: &[F],
        now: jiff::Timestamp,
    ) -> std::io::Result<(usize, Vec<String>)> {
        self.change(now, |map| push_events(map, key, items))
    }

    /// [`Queue::enqueue_many`] for several keys in one write of the file
    /// (a batch of the gateway's intake spans many sessions; a write per
    /// session would rewrite the whole file once for each).
    pub(crate) fn enqueue_groups<F: Fed>(
        &self,
        groups: &[(&str, Vec<F>)],
        now: jiff::Timestamp,
    ) -> std::io::Result<Vec<String>> {
        let ((), warnings) = self.change(now, |map| {
            for (key, items) in groups {
                push_events(map, key, items);
            }
        })?;
        Ok(warnings)
    }

    /// The events waiting for `key`'s next turn, left in the queue. A queue
    /// file that does not parse is moved aside first (with a warning).
    pub(crate) fn pending(&self, key: &str, now: jiff::Timestamp) -> std::io::Result<Pending> {
        if !self.path.exists() {
            return Ok(Pending::default());
        }
        let (events, warnings) = self.change(now, |map| map.get(key).map(events_of))?;
        Ok(Pending {
            events: events.unwrap_or_default(),
            warnings,
        })
    }

    /// Takes the events of `key` whose fingerprints are `delivered` off the
    /// queue; others (queued since) stay.
    pub(crate) fn consume(
        &self,
        key: &str,
        delivered: &[String],
        now: jiff::Timestamp,
    ) -> std::io::Result<Vec<String>> {
        if delivered.is_empty() || !self.path.exists() {
            return Ok(Vec::new());
        }
        let delivered: HashSet<&str> = delivered.iter().map(String::as_str).collect();
        let ((), warnings) = self.change(now, |map| {
            if let Some(list) = map.get_mut(key) {
                let mut events = events_of(list);
                events.retain(|e| !delivered.contains(e.fingerprint().as_str()));
                *list = serde_json::to_value(events).expect("events serialise");
            }
        })?;
        Ok(warnings)
    }

    /// The events of `key`, left in place (a file that does not parse or
    /// cannot be read shows none; nothing is moved).
    pub(crate) fn peek(&self, key: &str) -> Vec<SystemEvent> {
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| parse(&bytes).ok())
            .and_then(|map| map.get(key).map(events_of))
            .unwrap_or_default()
    }

    fn change<T>(
        &self,
        now: jiff::Timestamp,
        f: impl FnOnce(&mut Map<String, Value>) -> T,
    ) -> std::io::Result<(T, Vec<String>)> {
        durable::with_file_lock(&self.lock_path(), || {
            let mut warnings = Vec::new();
            let mut map = match durable::read_state_file(&self.path, now, parse)? {
                StateFile::Missing => Map::new(),
                StateFile::Loaded(map) => map,
                StateFile::Quarantined { moved_to, reason } => {
                    warnings.push(format!(
                        "the system event queue did not parse ({reason}); it was moved to {}",
                        moved_to.display()
                    ));
                    Map::new()
                }
            };
            let before = map.clone();
            let value = f(&mut map);
            if map != before {
                map.retain(|_, v| v.as_array().is_some_and(|a| !a.is_empty()));
                let bytes = serde_json::to_vec_pretty(&Value::Object(map)).expect("serialises");
                durable::atomic_replace(&self.path, &bytes, durable::PRIVATE_FILE_MODE)?;
            }
            Ok((value, warnings))
        })?
    }
}

/// Queues `items` for `key` in `map` by the rules of
/// [`Queue::enqueue_many`]: how many the queue holds afterwards.
fn push_events<F: Fed>(map: &mut Map<String, Value>, key: &str, items: &[F]) -> usize {
    let list = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    let mut events = events_of(list);
    // The newest fed record the queue holds. A record is a replay when it
    // is no newer in number and in time (numbers start again if the
    // gateway's state is wiped; time goes on).
    let fed = events
        .iter()
        .filter_map(|e| e.seq.map(|seq| (seq, e.ts)))
        .max();
    let skipped = |item: &F| {
        item.text().trim().is_empty()
            || item
                .seq()
                .zip(fed)
                .is_some_and(|(seq, (fed_seq, fed_ts))| seq <= fed_seq && item.ts() <= fed_ts)
    };
    // Kept events do not count against the limits: they are queued
    // wherever they are in the batch.
    let from = first_that_counts(items, |i| skipped(i) || i.kept(), |item| item.text());
    let mut kept = 0;
    for (i, item) in items.iter().enumerate() {
        if i < from && !item.kept() {
            continue;
        }
        let text = capped(item.text());
        if skipped(item) || events.last().is_some_and(|e| e.text == text) {
            continue;
        }
        events.push(SystemEvent {
            text: text.into_owned(),
            ts: item.ts(),
            trusted: item.trusted(),
            seq: item.seq(),
            dropped_before: 0,
            kept: item.kept(),
        });
        kept += 1;
    }
    keep_within_limits(&mut events);
    let held = events.len();
    *list = serde_json::to_value(events).expect("events serialise");
    kept.min(held)
}

/// The queue: session key → list of events.
fn parse(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The events of one key's list; entries that are not events are skipped.
fn events_of(list: &Value) -> Vec<SystemEvent> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| serde_json::from_value(v.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The transcript entry (a `custom` entry, outside the model's context)
/// recording that a completed turn delivered `events`.
pub(crate) fn delivery_record(events: &[SystemEvent]) -> Value {
    let delivered: Vec<String> = events.iter().map(SystemEvent::fingerprint).collect();
    json!({"type": "custom", "customType": DELIVERY_RECORD, "data": {"delivered": delivered}})
}

/// Fingerprints of the events the transcript records as delivered.
pub(crate) fn delivered(transcript: &Transcript) -> HashSet<String> {
    let mut out = HashSet::new();
    for entry in &transcript.entries {
        if let Payload::Other(v) = &entry.payload
            && v["type"] == "custom"
            && v["customType"] == DELIVERY_RECORD
            && let Some(list) = v["data"]["delivered"].as_array()
        {
            out.extend(list.iter().filter_map(|f| f.as_str().map(str::to_string)));
        }
    }
    out
}

/// Whether `c` ends a line anywhere a reader may break one: LF, CR (so
/// CRLF too), VT, FF, NEL, and the Unicode line and paragraph separators.
pub(crate) fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// The lines of `text`, split at every kind of line break (CRLF is one).
pub(crate) fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.char_indices().find(|(_, c)| is_line_break(*c)) {
            Some((at, c)) => {
                let mut next = at + c.len_utf8();
                if c == '\r' && current[next..].starts_with('\n') {
                    next += 1;
                }
                // As `str::lines`, a break at the very end ends no line.
                rest = Some(&current[next..]).filter(|r| !r.is_empty());
                Some(&current[..at])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The prompt lines of events, times shown with `format_time`. Every
/// line an event's text holds (split at any kind of line break) carries
/// the event's prefix, so no text starts a line of its own.
pub(crate) fn render(events: &[SystemEvent], format_time: impl Fn(i64) -> String) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let prefix = if e.trusted {
            "System:"
        } else {
            "System (untrusted):"
        };
        if e.dropped_before > 0 {
            out.push(format!(
                "System: [{}] {} earlier system event(s) were dropped: a session holds at most {CAP} events and {QUEUE_TEXT_MAX} characters of them",
                format_time(e.ts),
                e.dropped_before
            ));
        }
        let mut lines = lines(&e.text);
        let first = lines.next().unwrap_or("");
        out.push(format!("{prefix} [{}] {first}", format_time(e.ts)));
        for line in lines {
            out.push(format!("{prefix} {line}"));
        }
    }
    out
}

/// Where the items that can end among a queue's newest [`CAP`] events
/// begin. An item is queued when it is not `skipped` and differs from the
/// one queued before it, so, from the end, an item is known to be queued
/// once the item before it that is not skipped is seen; the scan stops at
/// the one before the `CAP`-th queued item from the end, which decides
/// whether that item repeats it.
pub(crate) fn first_that_counts<'a, T>(
    items: &'a [T],
    skipped: impl Fn(&T) -> bool,
    text: impl Fn(&'a T) -> &'a str,
) -> usize {
    let mut queued = 0;
    let mut later: Option<&str> = None;
    for (i, item) in items.iter().enumerate().rev() {
        if skipped(item) {
            continue;
        }
        let text = text(item).trim();
        if let Some(after) = later
            && after != text
        {
            queued += 1;
            if queued == CAP {
                return i;
            }
        }
        later = Some(text);
    }
    0
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
