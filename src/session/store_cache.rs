//! The session stores as this process last read or wrote them, each with
//! the identity of its file then (device, inode, size, change and
//! modification times). A store whose file still has that identity is not
//! read or parsed again: a gateway's turns read and update the same store
//! several times each. Every writer of a store replaces its file (a new
//! inode and times), so its change is always seen; a hand edit in place
//! changes the times (or the size) as well.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

/// Stores kept at most (one per agent; more are read again).
const MAX_STORES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileId {
    pub(super) fn of(meta: &Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }
}

type Stores = HashMap<PathBuf, (FileId, Arc<Map<String, Value>>)>;

static STORES: Mutex<Option<Stores>> = Mutex::new(None);

/// The store at `path` as parsed when its file had identity `id`.
pub(super) fn get(path: &Path, id: FileId) -> Option<Arc<Map<String, Value>>> {
    let stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    match stores.as_ref()?.get(path) {
        Some((kept, map)) if *kept == id => Some(map.clone()),
        _ => None,
    }
}

/// Keeps `map` as the store at `path`, whose file has identity `id`.
pub(super) fn put(path: &Path, id: FileId, map: Arc<Map<String, Value>>) {
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    let stores = stores.get_or_insert_with(HashMap::new);
    if stores.len() >= MAX_STORES && !stores.contains_key(path) {
        stores.clear();
    }
    stores.insert(path.to_path_buf(), (id, map));
}

/// Forgets the store at `path` (its file was moved aside or is unknown).
pub(super) fn forget(path: &Path) {
    if let Some(stores) = STORES.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        stores.remove(path);
    }
}

#[cfg(test)]
mod tests {
    use crate::session::store::SessionsFile;

    #[test]
    fn a_store_another_writer_replaced_or_rewrote_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        std::fs::write(&path, r#"{"k":{"sessionId":"a","updatedAt":1}}"#).unwrap();
        let store = SessionsFile::new(&path);
        assert_eq!(store.load().0["k"]["sessionId"], "a");
        // Replaced by rename, as every writer of the store does.
        let other = dir.path().join("other.json");
        std::fs::write(&other, r#"{"k":{"sessionId":"b","updatedAt":1}}"#).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(store.load().0["k"]["sessionId"], "b");
        // Rewritten in place with a different length.
        std::fs::write(&path, r#"{"k":{"sessionId":"cc","updatedAt":1}}"#).unwrap();
        assert_eq!(store.load().0["k"]["sessionId"], "cc");
        // What this process wrote is read back without parsing, unchanged.
        store
            .update(jiff::Timestamp::UNIX_EPOCH, |m| {
                m["k"]["sessionId"] = "d".into();
            })
            .unwrap();
        assert_eq!(store.load().0["k"]["sessionId"], "d");
        let on_disk: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["k"]["sessionId"], "d");
        // Removed: empty again.
        std::fs::remove_file(&path).unwrap();
        assert!(store.load().0.is_empty());
    }
}
