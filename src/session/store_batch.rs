//! Changes to one session store from this process's threads, written
//! together. While one thread writes the store (two syncs and a rename),
//! the changes other threads make meanwhile are applied to the map being
//! written next, and one write carries them all: a gateway running many
//! turns at once writes its store far fewer times than it changes it.
//!
//! Invariants: the store's lock file is held from the moment a batch's
//! map is read until the last batch built on it is written, so no other
//! process writes in between (a chain of batches lets the lock go after
//! [`MAX_CHAIN`] writes, so other processes get their turn); a change
//! returns only once the write that carries it is done, with that write's
//! outcome; a batch built on a write that failed is not written (its
//! changes fail too), so nothing reported failed lands later.

use std::collections::HashMap;
use std::io;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::durable::HeldLock;

type Store = Map<String, Value>;

/// Writes in a row on one lock hold before the lock is let go.
const MAX_CHAIN: u32 = 16;

/// What a store gives a batch: its map read under the lock, and a write.
pub(super) trait StoreFile {
    /// Takes the store's lock and reads the store (moving a corrupt one
    /// aside), with warnings.
    fn lock_and_read(&self) -> io::Result<(HeldLock, Arc<Store>, Vec<String>)>;
    /// Writes `map` as the store (the lock is held); the store may keep
    /// the map itself as what the file now holds.
    fn write(&self, map: &Arc<Store>) -> io::Result<()>;
}

/// Applies `f` to the store at `path` with the other changes made at the
/// same time in this process, and returns once they are written.
pub(super) fn change<T>(
    path: &Path,
    file: &impl StoreFile,
    f: impl FnOnce(&mut Store) -> T,
) -> io::Result<(T, Vec<String>)> {
    let group = group_for(path);
    let mut state = group.lock();
    let id = loop {
        match group.join(state, file)? {
            Joined::Batch(held, id) => {
                state = held;
                break id;
            }
            Joined::Again(held) => state = held,
        }
    };
    let batch = state.open.as_mut().expect("a joined batch is open");
    batch.members += 1;
    let value = std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut batch.map)));
    if value.is_err() {
        // The map may be half changed: none of this batch is written.
        batch.failed = Some(Failure::new("a change made at the same time failed"));
    }
    let outcome = group.finish(state, id, file);
    match value {
        Ok(value) => outcome.map(|warnings| (value, warnings)),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The stores' groups, one per path.
fn group_for(path: &Path) -> Arc<Group> {
    static GROUPS: Mutex<Option<HashMap<PathBuf, Arc<Group>>>> = Mutex::new(None);
    let mut groups = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    groups
        .get_or_insert_with(HashMap::new)
        .entry(path.to_path_buf())
        .or_default()
        .clone()
}

#[derive(Default)]
struct Group {
    state: Mutex<State>,
    turn: Condvar,
    /// Writes of the store by this process (for tests and figures).
    writes: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The store's lock while a batch is open or being written.
    lock: Option<HeldLock>,
    /// A thread is taking the lock and reading the store.
    opening: bool,
    /// The batch taking changes.
    open: Option<Batch>,
    /// The map of the batch being written.
    writing: Option<Arc<Store>>,
    /// Batches written on the current lock hold.
    chained: u32,
    /// Threads waiting for their turn (for tests).
    waiting: usize,
    next_id: u64,
    /// Outcomes of written batches not yet taken by all their members.
    done: HashMap<u64, (Result<Vec<String>, Failure>, usize)>,
}

struct Batch {
    id: u64,
    /// The store as the batch found it.
    base: Arc<Store>,
    map: Store,
    warnings: Vec<String>,
    members: usize,
    failed: Option<Failure>,
}

/// A failure every member of a batch gets.
#[derive(Clone)]
struct Failure {
    kind: io::ErrorKind,
    message: String,
}

impl Failure {
    fn new(message: &str) -> Failure {
        Failure {
            kind: io::ErrorKind::Other,
            message: message.to_string(),
        }
    }

    fn of(e: &io::Error) -> Failure {
        Failure {
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    fn into_io(self) -> io::Error {
        io::Error::new(self.kind, self.message)
    }
}

enum Joined<'a> {
    Batch(MutexGuard<'a, State>, u64),
    Again(MutexGuard<'a, State>),
}

impl Group {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.waiting += 1;
        let mut state = self.turn.wait(state).unwrap_or_else(|p| p.into_inner());
        state.waiting -= 1;
        state
    }

    /// Finds the batch to join: the open one; a new one on the map being
    /// written; or, with none, a new one on the store read under its lock.
    fn join<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        file: &impl StoreFile,
    ) -> io::Result<Joined<'a>> {
        if let Some(open) = &state.open {
            let id = open.id;
            return Ok(Joined::Batch(state, id));
        }
        if let Some(writing) = state.writing.clone() {
            if state.chained >= MAX_CHAIN {
                return Ok(Joined::Again(self.wait(state)));
            }
            state.chained += 1;
            let id = state.open_batch(writing, Vec::new(), None);
            return Ok(Joined::Batch(state, id));
        }
        if state.opening {
            return Ok(Joined::Again(self.wait(state)));
        }
        state.opening = true;
        drop(state);
        let read = file.lock_and_read();
        let mut state = self.lock();
        state.opening = false;
        self.turn.notify_all();
        let (held, base, warnings) = read?;
        state.chained = 0;
        let id = state.open_batch(base, warnings, Some(held));
        Ok(Joined::Batch(state, id))
    }

    /// Waits for batch `id` to be written, writing it when it is next,
    /// and returns its outcome.
    fn finish<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        id: u64,
        file: &impl StoreFile,
    ) -> io::Result<Vec<String>> {
        loop {
            if let Some(outcome) = state.take_outcome(id) {
                return outcome.map_err(Failure::into_io);
            }
            let ours_is_next = state.open.as_ref().is_some_and(|b| b.id == id);
            if ours_is_next && state.writing.is_none() {
                state = self.write_open(state, file);
                continue;
            }
            state = self.wait(state);
        }
    }

    /// Writes the open batch (the lock is held) and records its outcome.
    fn write_open<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        file: &impl StoreFile,
    ) -> MutexGuard<'a, State> {
        let batch = state.open.take().expect("the batch to write is open");
        let map = Arc::new(batch.map);
        state.writing = Some(map.clone());
        drop(state);
        let outcome = match batch.failed {
            Some(failure) => Err(failure),
            None if *map == *batch.base => Ok(()),
            None => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                file.write(&map).map_err(|e| Failure::of(&e))
            }
        };
        let mut state = self.lock();
        state.writing = None;
        if let (Err(failure), Some(next)) = (&outcome, state.open.as_mut()) {
            // Built on changes that did not land: not written either.
            next.failed.get_or_insert_with(|| Failure {
                kind: failure.kind,
                message: format!("an earlier change was not written: {}", failure.message),
            });
        }
        if state.open.is_none() {
            state.lock = None;
        }
        let outcome = outcome.map(|()| batch.warnings);
        state.done.insert(batch.id, (outcome, batch.members));
        self.turn.notify_all();
        state
    }
}

impl State {
    fn open_batch(
        &mut self,
        base: Arc<Store>,
        warnings: Vec<String>,
        held: Option<HeldLock>,
    ) -> u64 {
        if held.is_some() {
            self.lock = held;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.open = Some(Batch {
            id,
            map: Store::clone(&base),
            base,
            warnings,
            members: 0,
            failed: None,
        });
        id
    }

    fn take_outcome(&mut self, id: u64) -> Option<Result<Vec<String>, Failure>> {
        let (outcome, left) = self.done.get_mut(&id)?;
        let taken = outcome.clone();
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.done.remove(&id);
        }
        Some(taken)
    }
}

/// Writes of the store at `path` by this process so far.
#[cfg(test)]
pub(super) fn writes(path: &Path) -> u64 {
    group_for(path).writes.load(Ordering::Relaxed)
}

/// Threads waiting on the store at `path`, and whether a write is under way.
#[cfg(test)]
pub(super) fn waiting(path: &Path) -> (usize, bool) {
    let group = group_for(path);
    let state = group.lock();
    (state.waiting, state.writing.is_some())
}

#[cfg(test)]
#[path = "store_batch_tests.rs"]
mod tests;
