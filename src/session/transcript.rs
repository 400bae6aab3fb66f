//! Transcripts: append-only JSONL, OpenClaw's format version 3.
//!
//! Line 1 is the header `{"type":"session","version":3,"id","timestamp",
//! "cwd"}`; every other line is an entry with `type`, `id` (8 hex),
//! `parentId` and `timestamp`. Entries form a tree; the active branch runs
//! from the last entry back to the root. A `compaction` entry on that
//! branch stands for everything before `firstKeptEntryId`.
//!
//! Entries are appended under the file's lock and synced before a turn is
//! acknowledged (a write not yet synced survives the process being killed;
//! only a power loss before the turn answers can take it); a line torn by a crash is skipped on reading (with a
//! diagnostic) and the next append starts on a fresh line. The file is
//! never rewritten.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};

use crate::durable;
use crate::provider::{Block, Message, StopReason, Usage};

pub(crate) const VERSION: u64 = 3;

/// Call metadata kept with an assistant message.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AssistantMeta {
    pub api: String,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub stop_reason: Option<StopReason>,
    pub error_message: Option<String>,
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    Message {
        message: Message,
        /// Assistant messages only.
        meta: Option<AssistantMeta>,
        timestamp_ms: i64,
    },
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
    },
    /// Entries almanac does not interpret (custom, labels, model changes…).
    Other(Value),
}

/// One entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub payload: Payload,
}

/// A transcript read from disk.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transcript {
    pub session_id: Option<String>,
    pub header_timestamp: Option<String>,
    pub entries: Vec<Entry>,
    pub diagnostics: Vec<String>,
}

/// Creates the file with its header unless it exists, synced with its
/// name; an empty file (a start cut short) gets its header too.
pub(crate) fn create(
    path: &Path,
    session_id: &str,
    cwd: &Path,
    timestamp: &str,
) -> std::io::Result<()> {
    let line = header_line(session_id, cwd, timestamp);
    let created = durable::atomic_create(path, line.as_bytes(), durable::PRIVATE_FILE_MODE)?;
    if !created && durable::start_unsynced(path, line.as_bytes(), durable::PRIVATE_FILE_MODE)? {
        std::fs::File::open(path)?.sync_data()?;
    }
    Ok(())
}

/// Gives the file its header unless it holds bytes already (creating it),
/// nothing synced ([`durable::start_unsynced`]): for a new session's
/// transcript, whose first message is appended synced at once and whose
/// directory the session store's write syncs. Saves a new session the
/// two syncs, the temporary file and the link of [`create`].
pub(crate) fn start_unsynced(
    path: &Path,
    session_id: &str,
    cwd: &Path,
    timestamp: &str,
) -> std::io::Result<()> {
    let line = header_line(session_id, cwd, timestamp);
    durable::start_unsynced(path, line.as_bytes(), durable::PRIVATE_FILE_MODE).map(|_| ())
}

/// Whether the file at `path` is missing or empty (it needs its header).
pub(crate) fn needs_header(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |meta| meta.len() == 0)
}

fn header_line(session_id: &str, cwd: &Path, timestamp: &str) -> String {
    let header = json!({"type": "session", "version": VERSION, "id": session_id, "timestamp": timestamp, "cwd": cwd});
    let mut line = header.to_string();
    line.push('\n');
    line
}

/// Reads a transcript. A missing file is empty; a first line that is not a
/// header makes the file read as empty; malformed lines are skipped.
pub(crate) fn read(path: &Path) -> std::io::Result<Transcript> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Transcript::default()),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Transcript::default();
    let mut lines = text.lines().enumerate();
    match lines.next().map(|(_, l)| serde_json::from_str::<Value>(l)) {
        Some(Ok(h)) if h["type"] == "session" => {
            out.session_id = h["id"].as_str().map(str::to_string);
            out.header_timestamp = h["timestamp"].as_str().map(str::to_string);
        }
        Some(_) => {
            out.diagnostics.push(format!(
                "{}: the first line is not a session header; read as empty",
                path.display()
            ));
            return Ok(out);
        }
        None => return Ok(out),
    }
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        match fast::entry(line).or_else(|| {
            serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| parse_entry(&v))
        }) {
            Some(entry) => out.entries.push(entry),
            None => out.diagnostics.push(format!(
                "{}:{}: not a transcript entry; skipped",
                path.display(),
                n + 1
            )),
        }
    }
    Ok(out)
}

fn parse_entry(v: &Value) -> Option<Entry> {
    let id = v["id"].as_str()?.to_string();
    let parent_id = v["parentId"].as_str().map(str::to_string);
    let timestamp = v["timestamp"].as_str().unwrap_or("").to_string();
    let payload = match v["type"].as_str()? {
        "message" => {
            let m = &v["message"];
            let timestamp_ms = m["timestamp"].as_i64().unwrap_or(0);
            let (message, meta) = message_from_json(m)?;
            Payload::Message {
                message,
                meta,
                timestamp_ms,
            }
        }
        "compaction" => Payload::Compaction {
            summary: v["summary"].as_str()?.to_string(),
            first_kept_entry_id: v["firstKeptEntryId"].as_str()?.to_string(),
            tokens_before: v["tokensBefore"].as_u64().unwrap_or(0),
        },
        _ => Payload::Other(v.clone()),
    };
    Some(Entry {
        id,
        parent_id,
        timestamp,
        payload,
    })
}

fn blocks_from(content: &Value) -> Option<Vec<Block>> {
    match content {
        Value::String(text) => Some(vec![Block::text(text.clone())]),
        Value::Array(items) => Some(
            items
                .iter()
                // Block kinds almanac does not know are left out of the
                // context, not fatal.
                .filter_map(|b| serde_json::from_value::<Block>(b.clone()).ok())
                .collect(),
        ),
        Value::Null => Some(Vec::new()),
        _ => None,
    }
}

fn message_from_json(m: &Value) -> Option<(Message, Option<AssistantMeta>)> {
    match m["role"].as_str()? {
        "user" => Some((Message::User(blocks_from(&m["content"])?), None)),
        "assistant" => {
            let usage = &m["usage"];
            let n = |k: &str| usage[k].as_u64().unwrap_or(0);
            let meta = AssistantMeta {
                api: m["api"].as_str().unwrap_or("").to_string(),
                provider: m["provider"].as_str().unwrap_or("").to_string(),
                model: m["model"].as_str().unwrap_or("").to_string(),
                usage: Usage {
                    input: n("input"),
                    output: n("output"),
                    cache_read: n("cacheRead"),
                    cache_write: n("cacheWrite"),
                    total_tokens: n("totalTokens"),
                },
                stop_reason: serde_json::from_value(m["stopReason"].clone()).ok(),
                error_message: m["errorMessage"].as_str().map(str::to_string),
            };
            Some((Message::Assistant(blocks_from(&m["content"])?), Some(meta)))
        }
        "toolResult" => Some((
            Message::ToolResult {
                tool_call_id: m["toolCallId"].as_str()?.to_string(),
                tool_name: m["toolName"].as_str().unwrap_or("").to_string(),
                content: blocks_from(&m["content"])?,
                is_error: m["isError"].as_bool().unwrap_or(false),
            },
            None,
        )),
        _ => None,
    }
}

/// The JSON of a message as the transcript stores it.
pub(crate) fn message_json(
    message: &Message,
    meta: Option<&AssistantMeta>,
    timestamp_ms: i64,
) -> Value {
    let blocks = |b: &[Block]| serde_json::to_value(b).expect("blocks serialise");
    match message {
        Message::User(content) => {
            json!({"role": "user", "content": blocks(content), "timestamp": timestamp_ms})
        }
        Message::Assistant(content) => {
            let meta = meta.cloned().unwrap_or_default();
            let u = meta.usage;
            let mut m = json!({
                "role": "assistant",
                "content": blocks(content),
                "api": meta.api,
                "provider": meta.provider,
                "model": meta.model,
                "usage": {
                    "input": u.input, "output": u.output, "cacheRead": u.cache_read, "cacheWrite": u.cache_write,
                    "totalTokens": u.total_tokens,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                },
                "stopReason": meta.stop_reason.unwrap_or(StopReason::Stop),
                "timestamp": timestamp_ms,
            });
            if let Some(e) = meta.error_message {
                m["errorMessage"] = Value::String(e);
            }
            m
        }
        Message::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
        } => json!({
            "role": "toolResult", "toolCallId": tool_call_id, "toolName": tool_name,
            "content": blocks(content), "isError": is_error, "timestamp": timestamp_ms,
        }),
    }
}

/// Appends entries (each given a new id and its parent's) after
/// `parent`, in one locked write, synced when `sync` is set; returns the
/// new ids.
pub(crate) fn append(
    path: &Path,
    parent: Option<&str>,
    taken: &HashSet<String>,
    payloads: &[(String, Value)],
    sync: bool,
) -> std::io::Result<Vec<String>> {
    let mut lines = String::new();
    let mut ids = Vec::with_capacity(payloads.len());
    let mut parent = parent.map(str::to_string);
    let mut used: HashSet<String> = HashSet::new();
    for (timestamp, payload) in payloads {
        let id = new_id(|c| taken.contains(c) || used.contains(c));
        used.insert(id.clone());
        let mut entry = payload.clone();
        entry["id"] = Value::String(id.clone());
        entry["parentId"] = parent.clone().map_or(Value::Null, Value::String);
        entry["timestamp"] = Value::String(timestamp.clone());
        lines.push_str(&entry.to_string());
        lines.push('\n');
        parent = Some(id.clone());
        ids.push(id);
    }
    durable::locked_append(path, lines.as_bytes(), durable::PRIVATE_FILE_MODE, sync)?;
    Ok(ids)
}

/// A random 8-hex id (OpenClaw's form) not in use in the file. Random,
/// not derived from the clock: two processes appending to one transcript
/// at the same millisecond do not pick the same ids.
pub(crate) fn new_id(taken: impl Fn(&str) -> bool) -> String {
    loop {
        let random = uuid::Uuid::new_v4();
        let bytes = random.as_bytes();
        let id = format!(
            "{:08x}",
            u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        );
        if !taken(&id) {
            return id;
        }
    }
}

impl Transcript {
    /// The last entry: the leaf of the active branch.
    pub(crate) fn leaf(&self) -> Option<&Entry> {
        self.entries.last()
    }

    pub(crate) fn ids(&self) -> HashSet<String> {
        self.entries.iter().map(|e| e.id.clone()).collect()
    }

    /// The active branch, root first.
    pub(crate) fn branch(&self) -> Vec<&Entry> {
        let by_id: HashMap<&str, &Entry> =
            self.entries.iter().map(|e| (e.id.as_str(), e)).collect();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor = self.leaf();
        while let Some(entry) = cursor {
            if !seen.insert(entry.id.as_str()) {
                break; // a cycle in a hand-edited file
            }
            out.push(entry);
            cursor = entry
                .parent_id
                .as_deref()
                .and_then(|p| by_id.get(p).copied());
        }
        out.reverse();
        out
    }

    /// The messages the model sees: the active branch, with the newest
    /// compaction on it standing for what came before the entry it kept.
    pub(crate) fn context(&self) -> Vec<Message> {
        let branch = self.branch();
        let compaction = branch
            .iter()
            .rposition(|e| matches!(e.payload, Payload::Compaction { .. }));
        let mut out = Vec::new();
        let start = match compaction {
            Some(at) => {
                let Payload::Compaction {
                    summary,
                    first_kept_entry_id,
                    ..
                } = &branch[at].payload
                else {
                    unreachable!()
                };
                out.push(Message::User(vec![Block::text(format!(
                    "The conversation so far, summarised:\n\n{summary}"
                ))]));
                let kept = branch[..at]
                    .iter()
                    .position(|e| &e.id == first_kept_entry_id)
                    .unwrap_or(at);
                for e in &branch[kept..at] {
                    if let Payload::Message { message, .. } = &e.payload {
                        out.push(message.clone());
                    }
                }
                at + 1
            }
            None => 0,
        };
        for e in &branch[start..] {
            if let Payload::Message { message, .. } = &e.payload {
                out.push(message.clone());
            }
        }
        out
    }
}

/// The common case read without building a JSON tree: a `message` entry
/// whose fields all have the expected types. Anything else (other entry
/// kinds, unknown block kinds, odd values) returns `None` and is read by
/// [`parse_entry`], which decides; where both read a line they agree
/// (property-tested).
mod fast {
    use serde::Deserialize;
    use serde::de::{self, Deserializer, SeqAccess, Visitor};

    use super::{AssistantMeta, Entry, Payload};
    use crate::provider::{Block, Message, StopReason, Usage};

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        id: String,
        #[serde(default)]
        parent_id: Option<String>,
        #[serde(default)]
        timestamp: Option<String>,
        #[serde(default)]
        message: Option<RawMessage>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct RawMessage {
        role: String,
        #[serde(default)]
        content: Content,
        #[serde(default)]
        api: Option<String>,
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        usage: Option<RawUsage>,
        #[serde(default)]
        stop_reason: Option<String>,
        #[serde(default)]
        error_message: Option<String>,
        #[serde(default)]
        tool_call_id: Option<String>,
        #[serde(default)]
        tool_name: Option<String>,
        #[serde(default)]
        is_error: Option<bool>,
        #[serde(default)]
        timestamp: Option<i64>,
    }

    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct RawUsage {
        #[serde(default)]
        input: Option<u64>,
        #[serde(default)]
        output: Option<u64>,
        #[serde(default)]
        cache_read: Option<u64>,
        #[serde(default)]
        cache_write: Option<u64>,
        #[serde(default)]
        total_tokens: Option<u64>,
    }

    /// `content`: a string, a list of known blocks, or null.
    #[derive(Default)]
    struct Content(Vec<Block>);

    impl<'de> Deserialize<'de> for Content {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Content, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Content;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("text, a list of blocks or null")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                    Ok(Content(vec![Block::text(v)]))
                }
                fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
                    Ok(Content(Vec::new()))
                }
                fn visit_none<E: de::Error>(self) -> Result<Content, E> {
                    Ok(Content(Vec::new()))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                    let mut blocks = Vec::new();
                    while let Some(block) = seq.next_element::<Block>()? {
                        blocks.push(block);
                    }
                    Ok(Content(blocks))
                }
            }
            d.deserialize_any(V)
        }
    }

    pub(super) fn entry(line: &str) -> Option<Entry> {
        let line: Line = serde_json::from_str(line).ok()?;
        if line.kind != "message" {
            return None;
        }
        let m = line.message?;
        let content = m.content.0;
        let (message, meta) = match m.role.as_str() {
            "user" => (Message::User(content), None),
            "assistant" => {
                let u = m.usage.unwrap_or_default();
                let meta = AssistantMeta {
                    api: m.api.unwrap_or_default(),
                    provider: m.provider.unwrap_or_default(),
                    model: m.model.unwrap_or_default(),
                    usage: Usage {
                        input: u.input.unwrap_or(0),
                        output: u.output.unwrap_or(0),
                        cache_read: u.cache_read.unwrap_or(0),
                        cache_write: u.cache_write.unwrap_or(0),
                        total_tokens: u.total_tokens.unwrap_or(0),
                    },
                    stop_reason: m.stop_reason.and_then(|r| {
                        serde_json::from_value::<StopReason>(serde_json::Value::String(r)).ok()
                    }),
                    error_message: m.error_message,
                };
                (Message::Assistant(content), Some(meta))
            }
            "toolResult" => (
                Message::ToolResult {
                    tool_call_id: m.tool_call_id?,
                    tool_name: m.tool_name.unwrap_or_default(),
                    content,
                    is_error: m.is_error.unwrap_or(false),
                },
                None,
            ),
            _ => return None,
        };
        Some(Entry {
            id: line.id,
            parent_id: line.parent_id,
            timestamp: line.timestamp.unwrap_or_default(),
            payload: Payload::Message {
                message,
                meta,
                timestamp_ms: m.timestamp.unwrap_or(0),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Value {
        json!({"type": "message", "message": message_json(&Message::User(vec![Block::text(text)]), None, 1)})
    }

    #[test]
    fn append_read_branch_and_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        create(&path, "sid", dir.path(), "2026-11-29T09:00:00.000Z").unwrap();
        let ids = append(
            &path,
            None,
            &HashSet::new(),
            &[("t".into(), msg("one")), ("t".into(), msg("two"))],
            true,
        )
        .unwrap();
        // A crash tore the next line.
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"type\":\"mess")
            .unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.entries.len(), 2);
        assert_eq!(t.diagnostics.len(), 1, "{:?}", t.diagnostics);
        let more = append(
            &path,
            Some(&ids[1]),
            &t.ids(),
            &[("t".into(), msg("three"))],
            true,
        )
        .unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.entries.len(), 3);
        assert_eq!(t.entries[2].parent_id.as_deref(), Some(ids[1].as_str()));
        assert_ne!(more[0], ids[0]);
        let texts: Vec<String> = t
            .context()
            .into_iter()
            .map(|m| match m {
                Message::User(b) => match &b[0] {
                    Block::Text { text } => text.clone(),
                    _ => String::new(),
                },
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts, vec!["one", "two", "three"]);
        assert_eq!(t.session_id.as_deref(), Some("sid"));
    }

    #[test]
    fn compaction_stands_for_what_it_summarised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        create(&path, "sid", dir.path(), "t").unwrap();
        let ids = append(
            &path,
            None,
            &HashSet::new(),
            &[
                ("t".into(), msg("a")),
                ("t".into(), msg("b")),
                ("t".into(), msg("c")),
            ],
            true,
        )
        .unwrap();
        let t = read(&path).unwrap();
        let compaction = json!({"type": "compaction", "summary": "A and B happened.", "firstKeptEntryId": ids[2], "tokensBefore": 900});
        append(
            &path,
            Some(&ids[2]),
            &t.ids(),
            &[("t".into(), compaction), ("t".into(), msg("d"))],
            true,
        )
        .unwrap();
        let context = read(&path).unwrap().context();
        let texts: Vec<String> = context
            .iter()
            .map(|m| match m {
                Message::User(b) => match &b[0] {
                    Block::Text { text } => text.clone(),
                    _ => String::new(),
                },
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts.len(), 3);
        assert!(texts[0].contains("A and B happened."));
        assert_eq!(&texts[1..], &["c".to_string(), "d".to_string()]);
    }

    #[test]
    fn messages_round_trip_in_openclaw_shape() {
        let assistant = Message::Assistant(vec![
            Block::Thinking {
                thinking: "hm".into(),
                signature: Some("s".into()),
            },
            Block::text("Reading."),
            Block::ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({"path": "a.md"}),
            },
        ]);
        let meta = AssistantMeta {
            api: "anthropic-messages".into(),
            provider: "anthropic".into(),
            model: "claude".into(),
            usage: Usage {
                input: 10,
                output: 5,
                ..Usage::default()
            },
            stop_reason: Some(StopReason::ToolUse),
            error_message: None,
        };
        let j = message_json(&assistant, Some(&meta), 7);
        assert_eq!(j["content"][0]["thinkingSignature"], "s");
        assert_eq!(j["content"][2]["type"], "toolCall");
        assert_eq!(j["stopReason"], "toolUse");
        assert_eq!(j["usage"]["input"], 10);
        let (back, back_meta) = message_from_json(&j).unwrap();
        assert_eq!(back, assistant);
        assert_eq!(back_meta.unwrap(), meta);
        let result = Message::ToolResult {
            tool_call_id: "c1".into(),
            tool_name: "read".into(),
            content: vec![Block::text("text")],
            is_error: true,
        };
        let j = message_json(&result, None, 8);
        assert_eq!(j["role"], "toolResult");
        assert_eq!(message_from_json(&j).unwrap().0, result);
        // A user message stored as a plain string reads too.
        let (m, _) = message_from_json(&json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(m, Message::User(vec![Block::text("hi")]));
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    fn slow(line: &str) -> Option<Entry> {
        serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| parse_entry(&v))
    }

    #[test]
    fn odd_lines_are_left_to_the_tree_reader_which_decides() {
        for line in [
            // An unknown block kind: the tree reader leaves the block out.
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"video","url":"x"}]}}"#,
            // Values of unexpected types.
            r#"{"type":"message","id":"a","parentId":7,"timestamp":"t","message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"a","timestamp":"t","message":{"role":"assistant","content":[],"usage":{"input":1.5},"stopReason":"weird"}}"#,
            r#"{"type":"message","id":"a","timestamp":"t","message":{"role":"assistant","content":[],"stopReason":3}}"#,
            r#"{"type":"message","id":"a","timestamp":"t","message":{"role":"user","content":12}}"#,
            r#"{"type":"message","id":"a","timestamp":"t","message":{"role":"toolResult","content":"x"}}"#,
            r#"{"type":"message","id":"a","timestamp":"t","message":{"role":"narrator","content":"x"}}"#,
            r#"{"type":"message","id":"a","timestamp":1,"message":{"role":"user","content":null,"timestamp":1.5}}"#,
            r#"{"type":"custom","customType":"memory-flush","id":"b","parentId":"a","timestamp":"t","data":{}}"#,
            r#"{"type":"compaction","id":"c","parentId":"b","timestamp":"t","summary":"s","firstKeptEntryId":"a","tokensBefore":9}"#,
            r#"{"type":"message","id":3,"message":{"role":"user","content":"x"}}"#,
        ] {
            let expected = slow(line);
            let got = fast::entry(line).or_else(|| slow(line));
            assert_eq!(got, expected, "{line}");
        }
        // The common case takes the fast path.
        let plain = r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":4,"cost":{"total":0}},"stopReason":"stop","timestamp":5}}"#;
        assert!(fast::entry(plain).is_some());
        assert_eq!(fast::entry(plain), slow(plain));
    }

    fn any_block() -> impl Strategy<Value = Block> {
        prop_oneof![
            "[a-z é\"\\\\\n]{0,12}".prop_map(Block::text),
            ("[a-z]{0,5}", proptest::option::of("[a-z]{1,4}")).prop_map(|(thinking, signature)| {
                Block::Thinking {
                    thinking,
                    signature,
                }
            }),
            ("[a-z0-9_|]{0,8}", "[a-z_]{1,6}").prop_map(|(id, name)| Block::ToolCall {
                id,
                name,
                arguments: json!({"path": "a.md", "n": 1}),
            }),
            "[A-Za-z0-9+/]{0,16}".prop_map(|data| Block::Image {
                media_type: "image/png".into(),
                data,
            }),
        ]
    }

    fn any_message() -> impl Strategy<Value = (Message, Option<AssistantMeta>)> {
        let blocks = || prop::collection::vec(any_block(), 0..4);
        prop_oneof![
            blocks().prop_map(|b| (Message::User(b), None)),
            (blocks(), 0u64..1000, any::<bool>()).prop_map(|(b, n, err)| {
                let meta = AssistantMeta {
                    api: "anthropic-messages".into(),
                    provider: "anthropic".into(),
                    model: "m".into(),
                    usage: Usage {
                        input: n,
                        output: n / 2,
                        cache_read: 0,
                        cache_write: 1,
                        total_tokens: n + n / 2,
                    },
                    stop_reason: Some(StopReason::ToolUse),
                    error_message: err.then(|| "boom".to_string()),
                };
                (Message::Assistant(b), Some(meta))
            }),
            (blocks(), "[a-z0-9_]{1,8}", any::<bool>()).prop_map(|(content, id, is_error)| {
                (
                    Message::ToolResult {
                        tool_call_id: id,
                        tool_name: "read".into(),
                        content,
                        is_error,
                    },
                    None,
                )
            }),
        ]
    }

    proptest! {
        /// Every message almanac writes is read the same by both readers,
        /// and by the fast one.
        #[test]
        fn both_readers_agree_on_written_messages(
            (message, meta) in any_message(),
            parent in proptest::option::of("[0-9a-f]{8}"),
            ts in 0i64..2_000_000_000_000,
        ) {
            let line = json!({
                "type": "message", "id": "0123abcd", "parentId": parent,
                "timestamp": "2026-11-29T09:00:00.000Z",
                "message": message_json(&message, meta.as_ref(), ts),
            })
            .to_string();
            let fast = fast::entry(&line);
            prop_assert!(fast.is_some(), "{}", line);
            prop_assert_eq!(fast, slow(&line));
        }
    }
}
