use std::sync::mpsc;

use super::*;
use crate::durable::lock_file;
use crate::session::store::SessionsFile;

fn spin_until(mut ready: impl FnMut() -> bool) {
    while !ready() {
        std::thread::yield_now();
    }
}

#[test]
fn changes_made_while_the_store_is_busy_share_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.json");
    let store = SessionsFile::new(&path);
    // Another process holds the store: the first change waits for the
    // lock, the seven others wait for it.
    let other = lock_file(&crate::durable::lock_path_for(&path)).unwrap();
    std::thread::scope(|s| {
        for i in 0..8 {
            let store = &store;
            s.spawn(move || {
                store
                    .update(jiff::Timestamp::UNIX_EPOCH, |map| {
                        map.insert(format!("k{i}"), Value::from(i));
                    })
                    .unwrap();
            });
        }
        spin_until(|| waiting(&path).0 == 7);
        drop(other);
    });
    let written: Store = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        written.len(),
        8,
        "every change is in the store: {written:?}"
    );
    let writes = writes(&path);
    assert!(
        (1..8).contains(&writes),
        "8 changes made at once took {writes} writes"
    );
}

/// A store in memory whose writes wait for the test's word.
struct HeldStore {
    lock: PathBuf,
    written: Mutex<Vec<Store>>,
    go: Mutex<mpsc::Receiver<io::Result<()>>>,
}

impl StoreFile for HeldStore {
    fn lock_and_read(&self) -> io::Result<(HeldLock, Arc<Store>, Vec<String>)> {
        let last = self
            .written
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default();
        Ok((lock_file(&self.lock)?, Arc::new(last), Vec::new()))
    }

    fn write(&self, map: &Arc<Store>) -> io::Result<()> {
        self.go.lock().unwrap().recv().unwrap()?;
        self.written.lock().unwrap().push(Store::clone(map));
        Ok(())
    }
}

fn held_store(dir: &Path) -> (HeldStore, mpsc::Sender<io::Result<()>>) {
    let (tx, rx) = mpsc::channel();
    let store = HeldStore {
        lock: dir.join("store.lock"),
        written: Mutex::new(Vec::new()),
        go: Mutex::new(rx),
    };
    (store, tx)
}

fn insert(key: &str) -> impl FnOnce(&mut Store) + '_ {
    move |map| {
        map.insert(key.to_string(), Value::Bool(true));
    }
}

#[test]
fn a_change_built_on_a_failed_write_is_not_written_later() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.json");
    let (store, go) = held_store(dir.path());
    std::thread::scope(|s| {
        let first = s.spawn(|| change(&path, &store, insert("a")));
        spin_until(|| waiting(&path).1);
        let second = s.spawn(|| change(&path, &store, insert("b")));
        spin_until(|| waiting(&path).0 == 1);
        go.send(Err(io::Error::other("disk full"))).unwrap();
        let first = first.join().unwrap().unwrap_err();
        assert!(first.to_string().contains("disk full"), "{first}");
        let second = second.join().unwrap().unwrap_err();
        assert!(
            second
                .to_string()
                .contains("an earlier change was not written"),
            "{second}"
        );
    });
    assert!(store.written.lock().unwrap().is_empty());
    // The lock was let go and the next change is written on its own.
    go.send(Ok(())).unwrap();
    change(&path, &store, insert("c")).unwrap();
    let written = store.written.lock().unwrap();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].keys().collect::<Vec<_>>(), ["c"]);
}

#[test]
fn a_change_that_panics_writes_nothing_and_lets_the_store_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("panics.json");
    let (store, go) = held_store(dir.path());
    let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
        change(&path, &store, |map| {
            map.insert("half".to_string(), Value::Null);
            panic!("a bug in a change");
        })
    }));
    assert!(panicked.is_err());
    assert!(store.written.lock().unwrap().is_empty());
    go.send(Ok(())).unwrap();
    change(&path, &store, insert("after")).unwrap();
    let written = store.written.lock().unwrap();
    assert_eq!(written[0].keys().collect::<Vec<_>>(), ["after"]);
}
