//! `sessions.json`: session key → entry, as OpenClaw writes it.
//!
//! Unknown fields of an entry, and entries almanac does not understand,
//! are kept as they are. Every change is a read-modify-write under the
//! store's lock file, written by atomic replace (2-space indent, 0600).
//! A file that does not parse as a JSON object is moved aside with a
//! warning and a new store started; a file that cannot be read (a
//! permission or I/O error) is an error and stays where it is. Nothing is
//! lost silently.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{store_batch, store_cache};
use crate::durable;
use crate::durable::{HeldLock, lock_file};

/// The fields of an entry almanac reads and writes; the rest of the
/// entry's JSON is carried along untouched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionEntry {
    pub session_id: String,
    /// Last change of the entry (ms).
    pub updated_at: i64,
    /// When the current session started (ms): the daily reset compares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_started_at: Option<i64>,
    /// Last real interaction (ms): the idle reset compares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_interaction_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_override: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_override: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// Tokens of the context sent with the last call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(default)]
    pub compaction_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_flush_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_flush_compaction_count: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aborted_last_run: bool,
    /// When each `HEARTBEAT.md` task last ran (ms), by name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub heartbeat_task_state: std::collections::BTreeMap<String, i64>,
    /// The last heartbeat alert delivered, and when (duplicates within
    /// 24 h are not sent again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_sent_at: Option<i64>,
    /// Where the session's last inbound message came from (`cli`, `api`,
    /// `hook`, …): the `last` delivery target follows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_channel: Option<String>,
    /// The chat of the session's last inbound chat message (its peer id):
    /// with `lastChannel` and `lastAccountId`, where replies go back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_account_id: Option<String>,
}

impl SessionEntry {
    /// Reads the known fields of an entry's JSON.
    pub(crate) fn from_value(value: &Value) -> Option<SessionEntry> {
        serde_json::from_value(value.clone()).ok()
    }

    /// Writes the known fields into `value`, keeping the others.
    pub(crate) fn write_into(&self, value: &mut Value) {
        let known = serde_json::to_value(self).expect("an entry serialises");
        if !value.is_object() {
            *value = Value::Object(Map::new());
        }
        let target = value.as_object_mut().expect("object");
        // Optional fields that are now unset are removed.
        for key in OPTIONAL_FIELDS {
            if known.get(*key).is_none() {
                target.remove(*key);
            }
        }
        if let Value::Object(fields) = known {
            for (k, v) in fields {
                target.insert(k, v);
            }
        }
    }
}

const OPTIONAL_FIELDS: &[&str] = &[
    "lastTo",
    "lastAccountId",
    "sessionStartedAt",
    "lastInteractionAt",
    "sessionFile",
    "chatType",
    "label",
    "providerOverride",
    "modelOverride",
    "modelProvider",
    "model",
    "contextTokens",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "abortedLastRun",
    "heartbeatTaskState",
    "lastHeartbeatText",
    "lastHeartbeatSentAt",
    "lastChannel",
];

/// One `sessions.json`.
#[derive(Debug, Clone)]
pub(crate) struct SessionsFile {
    pub path: PathBuf,
}

impl SessionsFile {
    pub(crate) fn new(path: &Path) -> SessionsFile {
        SessionsFile {
            path: path.to_path_buf(),
        }
    }

    fn lock_path(&self) -> PathBuf {
        durable::lock_path_for(&self.path)
    }

    /// Reads the store (not locked: a snapshot), with warnings. A file
    /// that does not parse or cannot be read reads as empty, with a
    /// warning; nothing is moved (that is for [`SessionsFile::update`]).
    pub(crate) fn load(&self) -> (Arc<Map<String, Value>>, Vec<String>) {
        match self.read() {
            Ok(Read::Missing) => (Arc::default(), Vec::new()),
            Ok(Read::Parsed(map)) => (map, Vec::new()),
            Ok(Read::Unparsable(e)) => (
                Arc::default(),
                vec![format!(
                    "the session store {} does not parse ({e}); it is moved aside on the next change",
                    self.path.display()
                )],
            ),
            Err(e) => (
                Arc::default(),
                vec![format!(
                    "cannot read the session store {}: {e}",
                    self.path.display()
                )],
            ),
        }
    }

    /// The store as its file holds it now: parsed again only when the
    /// file changed since this process last read or wrote it.
    fn read(&self) -> std::io::Result<Read> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Read::Missing),
            Err(e) => return Err(e),
        };
        let id = store_cache::FileId::of(&file.metadata()?);
        if let Some(map) = store_cache::get(&self.path, id) {
            return Ok(Read::Parsed(map));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes)?;
        Ok(match parse(&bytes) {
            Ok(map) => {
                let map = Arc::new(map);
                store_cache::put(&self.path, id, map.clone());
                Read::Parsed(map)
            }
            Err(e) => Read::Unparsable(e),
        })
    }

    /// Reads, lets `f` change, and writes back if anything changed, under
    /// the store's lock; changes made by this process's other threads
    /// meanwhile go in the same write (see `store_batch`). A file that does
    /// not parse is moved aside (named with `now`) and a new store started,
    /// with a warning; one that cannot be read is an error, left in place.
    pub(crate) fn update<T>(
        &self,
        now: jiff::Timestamp,
        f: impl FnOnce(&mut Map<String, Value>) -> T,
    ) -> std::io::Result<(T, Vec<String>)> {
        let file = LockedStore { store: self, now };
        store_batch::change(&self.path, &file, f)
    }
}

/// The store's side of a batch of changes.
struct LockedStore<'a> {
    store: &'a SessionsFile,
    now: jiff::Timestamp,
}

impl store_batch::StoreFile for LockedStore<'_> {
    fn lock_and_read(&self) -> std::io::Result<(HeldLock, Arc<Map<String, Value>>, Vec<String>)> {
        let path = &self.store.path;
        let held = lock_file(&self.store.lock_path())?;
        let read = self.store.read().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot read the session store {}: {e}", path.display()),
            )
        })?;
        let mut warnings = Vec::new();
        let map = match read {
            Read::Missing => Arc::default(),
            Read::Parsed(map) => map,
            Read::Unparsable(reason) => {
                let moved_to = durable::quarantine(path, self.now)?;
                store_cache::forget(path);
                warnings.push(format!(
                    "the session store did not parse ({reason}); it was moved to {}",
                    moved_to.display()
                ));
                Arc::default()
            }
        };
        Ok((held, map, warnings))
    }

    fn write(&self, map: &Arc<Map<String, Value>>) -> std::io::Result<()> {
        let path = &self.store.path;
        let mut bytes = serde_json::to_vec_pretty(&**map).expect("a JSON map serialises");
        bytes.push(b'\n');
        durable::atomic_replace(path, &bytes, durable::PRIVATE_FILE_MODE)?;
        // Under the lock no other writer follows before this look.
        match std::fs::metadata(path) {
            Ok(meta) => store_cache::put(path, store_cache::FileId::of(&meta), map.clone()),
            Err(_) => store_cache::forget(path),
        }
        Ok(())
    }
}

/// A store file as read.
enum Read {
    Missing,
    Parsed(Arc<Map<String, Value>>),
    Unparsable(String),
}

/// The store's JSON object.
fn parse(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_entries_survive_updates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::fs::write(
            &path,
            r#"{"agent:main:main":{"sessionId":"a","updatedAt":1,"thinkingLevel":"high","origin":{"label":"x"}},"weird":42}"#,
        )
        .unwrap();
        let store = SessionsFile::new(&path);
        let now = jiff::Timestamp::UNIX_EPOCH;
        store
            .update(now, |map| {
                let value = map.get_mut("agent:main:main").unwrap();
                let mut entry = SessionEntry::from_value(value).unwrap();
                entry.updated_at = 99;
                entry.model = Some("m".into());
                entry.write_into(value);
            })
            .unwrap();
        let (map, warnings) = store.load();
        assert!(warnings.is_empty());
        assert_eq!(map["weird"], 42);
        let e = &map["agent:main:main"];
        assert_eq!(e["thinkingLevel"], "high");
        assert_eq!(e["origin"]["label"], "x");
        assert_eq!(e["updatedAt"], 99);
        assert_eq!(e["model"], "m");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\n  \"agent:main:main\""),
            "2-space indent: {text}"
        );
    }

    #[test]
    fn a_corrupt_store_is_moved_aside_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::fs::write(&path, "{not json").unwrap();
        let store = SessionsFile::new(&path);
        let (_, warnings) = store
            .update(jiff::Timestamp::UNIX_EPOCH, |map| {
                map.insert(
                    "k".into(),
                    serde_json::json!({"sessionId": "n", "updatedAt": 1}),
                );
            })
            .unwrap();
        assert!(
            warnings.iter().any(|w| w.contains("moved to")),
            "{warnings:?}"
        );
        let moved: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains("corrupt"))
            .collect();
        assert_eq!(moved.len(), 1);
        assert_eq!(
            std::fs::read_to_string(moved[0].path()).unwrap(),
            "{not json"
        );
        assert_eq!(store.load().0["k"]["sessionId"], "n");
    }

    /// A store that cannot be read (here a directory where the file should
    /// be) is an error: it is neither moved aside nor replaced.
    #[test]
    fn an_unreadable_store_is_an_error_and_stays_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::fs::create_dir_all(path.join("keep")).unwrap();
        let store = SessionsFile::new(&path);
        let err = store
            .update(jiff::Timestamp::UNIX_EPOCH, |map| {
                map.insert("k".into(), serde_json::json!({"sessionId": "n"}));
            })
            .unwrap_err();
        assert_ne!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        assert!(path.join("keep").is_dir(), "left where it was");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("corrupt")), "{names:?}");
        let (map, warnings) = store.load();
        assert!(map.is_empty());
        assert!(warnings[0].contains("cannot read"), "{warnings:?}");
        // A file without read permission, for a user the permission binds.
        std::fs::remove_dir_all(&path).unwrap();
        std::fs::write(&path, r#"{"k":{"sessionId":"a","updatedAt":1}}"#).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read(&path).is_ok() {
            // Running as root: permissions do not stop reads; the directory
            // case above stands for it.
            return;
        }
        assert!(store.update(jiff::Timestamp::UNIX_EPOCH, |_| ()).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store.load().0["k"]["sessionId"], "a", "untouched");
    }
}
