//! The gateway's semantic memory: memory searches answered with a warm
//! embedding provider and the items' vectors in memory, and the vectors
//! of new notes made in the background.
//!
//! * The provider is started on first need (a search, or notes to embed)
//!   and dropped after [`IDLE_DROP`] without use, with the vectors it
//!   searched, so an idle gateway stays small ([`Warm`]). It is started as
//!   a command starts it for a search (a local model's queries from its
//!   compact weights), so both give the same query vector, with those
//!   weights copied once into the layout the CPU's kernel reads fastest
//!   (about 11 MB for all-MiniLM-L6-v2, dropped with the provider).
//! * A search's query goes through the model on the model's helper thread
//!   while the search thread looks the words up; once the ranking needs
//!   the vector, the search thread waits for it, taking a share of the
//!   model's last matrix products. The two overlap on two cores instead of
//!   following each other; no thread is started per search.
//! * The vectors of the provider's model are read from the index once,
//!   then followed through the index's change log
//!   ([`crate::memory::index::vectors::VectorSet`]): a search reads only
//!   what changed since the last one, never the whole table. Searches
//!   share the set under a read lock; one that finds the log moved takes
//!   the write lock to catch up first.
//! * A search takes a kept index connection (or opens one) and gives it
//!   back; one is used again only while it is the index a fresh open
//!   would give (same file, layout, time zone and stored identity), so a
//!   deleted or rebuilt index is never searched through a stale handle.
//! * The [`MemoryEmbedder`] component embeds the items without a vector,
//!   newest first, a batch per blocking call and per transaction, after
//!   the watcher's start sync and after every refresh; it yields between
//!   batches, so searches are not starved, and stops between batches on
//!   shutdown. A search embeds nothing but its query.
//! * A search is answered only as the command would answer it on its own:
//!   the caller sends everything that shapes its results, and a gateway
//!   whose settings choose another model refuses ([`SearchMismatch`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::supervisor::{Component, ComponentKind};
use super::{GatewayEvent, Shared};
use crate::app::memory::{ResolvedSearch, SearchMismatch, Searched, Semantic};
use crate::gateway_client::MemorySearchStatus;
use crate::memory::embed::{Choice, Embedder};
use crate::memory::index::search::{LateVector, QueryVector};
use crate::memory::index::vectors::{EMBED_BATCH, VectorSet};
use crate::memory::index::{Index, SyncMode, SyncReport};

/// How long the provider stays loaded without use.
pub(crate) const IDLE_DROP: Duration = Duration::from_secs(5 * 60);

/// Index connections kept for searches at most (more searches at once
/// open their own).
const HELD_INDEXES: usize = 2;

/// A value loaded on first need for a key, kept while it is used and
/// dropped after `idle` without use (or when another key is asked for).
pub(crate) struct Warm<K, T: ?Sized> {
    idle: Duration,
    held: Mutex<Option<Held<K, T>>>,
    /// Told when a value is loaded (its idle deadline is new).
    loaded: Notify,
    loads: AtomicU64,
}

struct Held<K, T: ?Sized> {
    key: K,
    value: Arc<T>,
    last_used: Instant,
}

impl<K: PartialEq, T: ?Sized> Warm<K, T> {
    pub(crate) fn new(idle: Duration) -> Self {
        Warm {
            idle,
            held: Mutex::new(None),
            loaded: Notify::new(),
            loads: AtomicU64::new(0),
        }
    }

    /// The value for `key`, loaded now when none is held for it (callers
    /// asking meanwhile wait for that load instead of starting another).
    pub(crate) fn get<E>(
        &self,
        key: &K,
        load: impl FnOnce() -> Result<Arc<T>, E>,
    ) -> Result<Arc<T>, E>
    where
        K: Clone,
    {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.as_mut().filter(|h| h.key == *key) {
            h.last_used = Instant::now();
            return Ok(h.value.clone());
        }
        // Another key's value goes first: two models are never held.
        *held = None;
        let value = load()?;
        self.loads.fetch_add(1, Ordering::Relaxed);
        *held = Some(Held {
            key: key.clone(),
            value: value.clone(),
            last_used: Instant::now(),
        });
        self.loaded.notify_one();
        Ok(value)
    }

    /// The value held, if any and not being loaded; its use is not
    /// counted (see [`Warm::get`]).
    fn peek(&self) -> Option<Arc<T>> {
        let held = self.held.try_lock().ok()?;
        held.as_ref().map(|h| h.value.clone())
    }

    /// Whether a value is held (or being loaded).
    pub(crate) fn is_loaded(&self) -> bool {
        match self.held.try_lock() {
            Ok(held) => held.is_some(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().is_some(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }

    /// How many times a value was loaded.
    pub(crate) fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// Drops the value when it has been idle long enough; else when it
    /// will be (`None`: nothing held). A load in progress counts as use.
    fn drop_if_idle(&self, now: Instant) -> Idle {
        let Ok(mut held) = self.held.try_lock() else {
            return Idle::Until(now + self.idle);
        };
        match held.as_ref() {
            None => Idle::Empty,
            Some(h) if now.duration_since(h.last_used) >= self.idle => {
                *held = None;
                Idle::Dropped
            }
            Some(h) => Idle::Until(h.last_used + self.idle),
        }
    }

    /// Waits until the value has been idle for `idle` and drops it;
    /// returns then (or never, while nothing is held and nothing loads).
    pub(crate) async fn dropped_when_idle(&self) {
        loop {
            // Registered before looking, so a load in between is not missed.
            let loaded = self.loaded.notified();
            match self.drop_if_idle(Instant::now()) {
                Idle::Dropped => return,
                Idle::Empty => loaded.await,
                Idle::Until(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {}
                        () = loaded => {}
                    }
                }
            }
        }
    }
}

enum Idle {
    Empty,
    Dropped,
    Until(Instant),
}

/// What the gateway keeps for memory search.
pub(crate) struct SemanticState {
    embedder: Warm<Choice, dyn Embedder>,
    /// The vectors of the loaded provider's model (dropped with it).
    vectors: RwLock<Option<VectorSet>>,
    /// Index connections kept between searches, a few at most: a search
    /// takes one (or opens one) and gives it back. Opening the index,
    /// preparing its statements and mapping its pages anew cost about a
    /// millisecond a search. Dropped after [`IDLE_DROP`] without a search.
    indexes: Warm<PathBuf, Mutex<Vec<Index>>>,
    searches: AtomicU64,
    forwarded: AtomicU64,
    embedded: AtomicU64,
    /// Items without a vector after the last background run.
    pending: Mutex<Option<usize>>,
}

impl Default for SemanticState {
    fn default() -> Self {
        SemanticState {
            embedder: Warm::new(IDLE_DROP),
            vectors: RwLock::new(None),
            indexes: Warm::new(IDLE_DROP),
            searches: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            embedded: AtomicU64::new(0),
            pending: Mutex::new(None),
        }
    }
}

impl SemanticState {
    pub(crate) fn status(&self) -> MemorySearchStatus {
        MemorySearchStatus {
            searches: self.searches.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            embedded: self.embedded.load(Ordering::Relaxed),
            without_vector: *self.pending.lock().unwrap_or_else(|p| p.into_inner()),
            provider_loaded: self.embedder.is_loaded(),
            provider_starts: self.embedder.loads(),
            vectors_in_memory: self
                .vectors
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map_or(0, VectorSet::len),
        }
    }

    /// A search was answered for a command line from the command socket.
    pub(crate) fn forwarded_answered(&self) {
        self.forwarded.fetch_add(1, Ordering::Relaxed);
    }

    /// A search has arrived: the loaded provider (if any) gets ready for
    /// its query, before the search reaches a blocking thread.
    pub(crate) fn expect_query(&self) {
        if let Some(provider) = self.embedder.peek() {
            provider.expect_query();
        }
    }

    /// The provider `choice` names, started on first need.
    fn provider(&self, choice: &Choice) -> Result<Arc<dyn Embedder>, String> {
        self.embedder.get(choice, || {
            let started = std::time::Instant::now();
            let embedder: Arc<dyn Embedder> =
                crate::memory::embed::start_for_serving(choice)?.into();
            tracing::info!(
                provider = embedder.provider(),
                model = embedder.model(),
                ms = started.elapsed().as_millis() as u64,
                "memory search provider started"
            );
            Ok(embedder)
        })
    }

    /// Drops the provider and its vectors once idle for [`IDLE_DROP`].
    async fn drop_when_idle(&self) {
        self.embedder.dropped_when_idle().await;
        *self.vectors.write().unwrap_or_else(|p| p.into_inner()) = None;
        tracing::info!("memory search provider idle; dropped it and its vectors");
        let _ = tokio::task::spawn_blocking(super::resident::release_free_memory).await;
    }

    /// The held connections to the index at `path`.
    fn held_indexes(&self, path: &Path) -> Arc<Mutex<Vec<Index>>> {
        let Ok(held) = self.indexes.get(&path.to_path_buf(), || {
            Ok::<_, std::convert::Infallible>(Arc::new(Mutex::new(Vec::new())))
        });
        held
    }

    /// The vectors of `model` brought up to date with `index` (read in
    /// full the first time and after a change of model), held for
    /// reading. Searches share the read lock; only one that finds the
    /// index's vector log moved takes the write lock to catch up.
    fn caught_up(
        &self,
        index: &Index,
        model: &str,
    ) -> anyhow::Result<RwLockReadGuard<'_, Option<VectorSet>>> {
        let held = self.vectors.read().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = held.as_ref()
            && set.model() == model
            && index.vectors_current(set)?
        {
            return Ok(held);
        }
        drop(held);
        {
            let mut vectors = self.vectors.write().unwrap_or_else(|p| p.into_inner());
            match vectors.as_mut() {
                Some(set) if set.model() == model => {
                    let changed = index.catch_up(set)?;
                    if changed > 0 {
                        tracing::debug!(changed, held = set.len(), "memory vectors caught up");
                    }
                }
                _ => {
                    let started = std::time::Instant::now();
                    let set = index.load_vectors(model)?;
                    tracing::info!(
                        vectors = set.len(),
                        ms = started.elapsed().as_millis() as u64,
                        "memory vectors loaded"
                    );
                    *vectors = Some(set);
                }
            }
        }
        // Dropped meanwhile (idle), the search reads the index's vectors.
        Ok(self.vectors.read().unwrap_or_else(|p| p.into_inner()))
    }
}

/// `POST /v1/memory/search`: `req` answered as `memory search` would
/// answer it on its own, with the warm provider and the vectors in memory.
///
/// A model already loaded under the key the command searches with takes
/// the query first: the settings are checked and an index connection is
/// taken while it makes the vector (a search whose checks fail leaves it
/// unused).
pub(crate) fn search(shared: &Shared, req: &ResolvedSearch) -> anyhow::Result<Searched> {
    let loaded = shared
        .semantic
        .embedder
        .peek()
        .filter(|model| req.vector_key.as_deref() == Some(model.key().as_str()));
    let Some(model) = loaded else {
        return search_with(shared, req, None);
    };
    let mut answer = None;
    model.embed_query_alongside(&req.query, &mut |vector| {
        answer = Some(search_with(shared, req, Some((&model, vector))));
    });
    answer.ok_or_else(|| anyhow::anyhow!("the search did not run"))?
}

/// A query vector under way: the model making it, and how to wait for it.
type Posted<'a> = (
    &'a Arc<dyn Embedder>,
    &'a (dyn Fn() -> Result<Vec<f32>, crate::memory::embed::EmbedError> + Sync),
);

/// [`search`], with the query's vector `posted` to a model already (used
/// when that model is the provider the settings choose).
fn search_with(
    shared: &Shared,
    req: &ResolvedSearch,
    posted: Option<Posted<'_>>,
) -> anyhow::Result<Searched> {
    let app = shared.engine.app();
    let semantic = &shared.semantic;
    if !app.config.config.agents.defaults.memory_search.enabled {
        return Err(SearchMismatch("memory search is off in the gateway's settings".into()).into());
    }
    let choice = app.embedding_choice();
    if choice.vector_key() != req.vector_key {
        return Err(SearchMismatch(format!(
            "the gateway searches with {}, the command with {}",
            choice.vector_key().as_deref().unwrap_or("words only"),
            req.vector_key.as_deref().unwrap_or("words only")
        ))
        .into());
    }
    app.ensure_state_dir()?;
    let memory = app.memory();
    let held = semantic.held_indexes(&memory.index_path);
    let kept = held.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let started = std::time::Instant::now();
    let embedder = semantic.provider(&choice);
    let (index, searched) = match embedder.as_ref() {
        Ok(model) => {
            let rank = |vector: &(dyn Fn() -> _ + Sync)| {
                hybrid(
                    semantic,
                    &memory,
                    kept,
                    req,
                    model.as_ref(),
                    app.wall_ns(),
                    || {
                        let waiting = std::time::Instant::now();
                        let made = crate::app::memory::query_semantic(model.as_ref(), vector());
                        tracing::debug!(
                            ms = waiting.elapsed().as_secs_f64() * 1000.0,
                            "memory search: query vector waited for"
                        );
                        made
                    },
                )
            };
            match posted {
                Some((posted, vector)) if Arc::ptr_eq(posted, model) => rank(vector)?,
                _ => {
                    // The query goes through the model while the words are
                    // looked up; the ranking waits for its vector once it
                    // needs it.
                    let mut rank = Some(rank);
                    let mut answer = None;
                    model.embed_query_alongside(&req.query, &mut |vector| {
                        answer = rank.take().map(|rank| rank(vector));
                    });
                    answer.ok_or_else(|| anyhow::anyhow!("the search did not run"))??
                }
            }
        }
        Err(reason) => {
            let (index, sync) = reopened(&memory, kept, app.wall_ns())?;
            let (mode, _) = crate::app::memory::query_vector(&app, Err(reason), &req.query);
            let outcome = crate::app::memory::ranked(&index, req, None, None)?;
            (
                index,
                Searched {
                    outcome,
                    sync,
                    disabled: false,
                    semantic: mode,
                },
            )
        }
    };
    {
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() < HELD_INDEXES {
            held.push(index);
        }
    }
    semantic.searches.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        ms = started.elapsed().as_secs_f64() * 1000.0,
        hits = searched.outcome.hits.len(),
        "memory search answered"
    );
    Ok(searched)
}

/// The index (`kept`, or opened anew) brought up to date with the files.
fn reopened(
    memory: &crate::memory::Memory,
    kept: Option<Index>,
    wall_ns: i64,
) -> anyhow::Result<(Index, SyncReport)> {
    let (mut index, warnings) = memory.reopen_index(kept)?;
    let mut sync = index.sync(SyncMode::Watched, wall_ns)?;
    sync.warnings.splice(0..0, warnings);
    Ok((index, sync))
}

/// `req` ranked by words and by the query's vector, which `embed` gives
/// when the ranking first needs it: once the words' candidates are scored
/// (the caller has the model make it meanwhile). A failed embedding leaves
/// the search lexical, with a notice, as it would without a gateway.
fn hybrid(
    semantic: &SemanticState,
    memory: &crate::memory::Memory,
    kept: Option<Index>,
    req: &ResolvedSearch,
    model: &dyn Embedder,
    wall_ns: i64,
    embed: impl FnOnce() -> (Semantic, Option<QueryVector>) + Send,
) -> anyhow::Result<(Index, Searched)> {
    let (index, sync) = reopened(memory, kept, wall_ns)?;
    let late = LateVector::new(
        move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(embed)).unwrap_or_else(|_| {
                let notice = "memory search is lexical: the query could not be embedded";
                (Semantic::lexical(Some(notice.to_string())), None)
            })
        },
        |(_, vector)| vector.as_ref(),
    );
    let vectors = semantic.caught_up(&index, &model.key())?;
    let outcome = crate::app::memory::ranked(&index, req, Some(&late), vectors.as_ref());
    drop(vectors);
    let (mode, _) = late
        .into_made()
        .unwrap_or_else(|| (Semantic::lexical(None), None));
    let searched = Searched {
        outcome: outcome?,
        sync,
        disabled: false,
        semantic: mode,
    };
    Ok((index, searched))
}

/// Embeds the memory items without a vector in the background, and drops
/// the provider when it has been idle.
pub(crate) struct MemoryEmbedder;

impl Component for MemoryEmbedder {
    fn kind(&self) -> ComponentKind {
        ComponentKind::MemoryEmbedder
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let mut bus = shared.bus.subscribe();
            // The index may be current already (a restart of this
            // component); else the watcher's start sync says so.
            embed_missing(&shared, &stop).await?;
            loop {
                tokio::select! {
                    event = bus.recv() => match event {
                        Ok(GatewayEvent::MemoryIndexed
                            | GatewayEvent::MemoryRefreshed { .. }
                            | GatewayEvent::ConfigReloaded)
                        | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            embed_missing(&shared, &stop).await?;
                        }
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                    },
                    () = shared.semantic.drop_when_idle() => {}
                    () = shared.semantic.indexes.dropped_when_idle() => {}
                    () = stop.cancelled() => return Ok(()),
                }
            }
        })
    }
}

/// Embeds every item without a vector of the chosen provider's model,
/// newest first, a batch at a time, until none is left or `stop`.
async fn embed_missing(shared: &Arc<Shared>, stop: &CancellationToken) -> anyhow::Result<()> {
    let app = shared.engine.app();
    let choice = app.embedding_choice();
    let Some(key) = choice.vector_key() else {
        return Ok(());
    };
    if !app.memory().index_path.exists() {
        // The watcher's start sync builds it, then says so.
        return Ok(());
    }
    let index = {
        let app = app.clone();
        shared
            .engine
            .blocking(move || app.memory().open_index().map(|(index, _)| index))
            .await??
    };
    let index = Arc::new(Mutex::new(index));
    let started = std::time::Instant::now();
    let mut done = 0usize;
    loop {
        if stop.is_cancelled() {
            break;
        }
        let work = {
            let (working, index, choice, key) =
                (shared.clone(), index.clone(), choice.clone(), key.clone());
            shared
                .engine
                .blocking(move || embed_batch(&working, &index, &choice, &key))
        };
        // Shutdown does not wait for a batch in flight: it is one
        // transaction, stored whole or not at all.
        let batch = tokio::select! {
            batch = work => batch??,
            () = stop.cancelled() => return Ok(()),
        };
        if batch == 0 {
            break;
        }
        done += batch;
        shared
            .semantic
            .embedded
            .fetch_add(batch as u64, Ordering::Relaxed);
        tracing::debug!(embedded = done, "embedding memory notes");
        // Searches and other blocking work get their turn between batches.
        tokio::task::yield_now().await;
    }
    let counted = {
        let index = index.clone();
        shared
            .engine
            .blocking(move || {
                let index = index.lock().unwrap_or_else(|p| p.into_inner());
                index.vector_counts(&key)
            })
            .await??
    };
    *shared
        .semantic
        .pending
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(counted.without_vector);
    if done > 0 {
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(
            embedded = done,
            without_vector = counted.without_vector,
            seconds = (secs * 10.0).round() / 10.0,
            per_second = (done as f64 / secs.max(1e-3)).round(),
            "memory notes embedded"
        );
    }
    Ok(())
}

/// One batch: the newest items without a vector embedded and stored in
/// one transaction; how many. The provider is started only when there is
/// something to embed.
fn embed_batch(
    shared: &Shared,
    index: &Mutex<Index>,
    choice: &Choice,
    key: &str,
) -> anyhow::Result<usize> {
    let mut index = index.lock().unwrap_or_else(|p| p.into_inner());
    if index.missing_vectors(key, 1)?.is_empty() {
        return Ok(0);
    }
    let embedder = shared
        .semantic
        .provider(choice)
        .map_err(|reason| anyhow::anyhow!("cannot embed memory notes: {reason}"))?;
    Ok(index.fill_vectors(embedder.as_ref(), EMBED_BATCH, |_| {})?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_provider_is_told_a_search_came_and_none_is_loaded_for_it() {
        struct Expecting(std::sync::atomic::AtomicUsize);
        impl Embedder for Expecting {
            fn provider(&self) -> &'static str {
                "test"
            }
            fn model(&self) -> &str {
                "expecting"
            }
            fn embed(
                &self,
                texts: &[&str],
            ) -> Result<Vec<Vec<f32>>, crate::memory::embed::EmbedError> {
                Ok(texts.iter().map(|_| vec![1.0]).collect())
            }
            fn expect_query(&self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let state = SemanticState::default();
        state.expect_query();
        assert!(!state.embedder.is_loaded(), "nothing loaded for it");
        let provider = Arc::new(Expecting(std::sync::atomic::AtomicUsize::new(0)));
        let choice = Choice::Lexical {
            reason: "any key".into(),
        };
        let loaded = provider.clone();
        state
            .embedder
            .get(&choice, || Ok::<_, String>(loaded as Arc<dyn Embedder>))
            .unwrap();
        state.expect_query();
        state.expect_query();
        assert_eq!(provider.0.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_warm_value_is_loaded_once_and_dropped_after_idle_minutes() {
        let warm: Warm<&str, String> = Warm::new(IDLE_DROP);
        let load = |v: &str| {
            let v = v.to_string();
            move || Ok::<_, ()>(Arc::new(v))
        };
        assert!(!warm.is_loaded());
        assert_eq!(*warm.get(&"a", load("one")).unwrap(), "one");
        assert_eq!(*warm.get(&"a", load("two")).unwrap(), "one", "kept");
        assert_eq!(warm.loads(), 1);
        let reaper = warm.dropped_when_idle();
        tokio::pin!(reaper);
        // Used again after four minutes: the idle time starts over.
        tokio::select! {
            () = &mut reaper => panic!("dropped while in use"),
            () = tokio::time::sleep(Duration::from_secs(4 * 60)) => {}
        }
        assert!(warm.get(&"a", load("three")).is_ok());
        tokio::select! {
            () = &mut reaper => panic!("dropped four minutes after its last use"),
            () = tokio::time::sleep(Duration::from_secs(4 * 60)) => {}
        }
        assert!(warm.is_loaded());
        let before = Instant::now();
        reaper.await;
        assert!(!warm.is_loaded());
        assert_eq!(
            Instant::now().duration_since(before),
            Duration::from_secs(60),
            "dropped exactly five minutes after its last use"
        );
        // Needed again: loaded again.
        assert_eq!(*warm.get(&"a", load("four")).unwrap(), "four");
        assert_eq!(warm.loads(), 2);
    }

    struct Fixed;

    impl Embedder for Fixed {
        fn provider(&self) -> &'static str {
            "test"
        }
        fn model(&self) -> &str {
            "fixed"
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, crate::memory::embed::EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_provider_is_dropped_with_the_vectors_it_searched() {
        let state = SemanticState::default();
        let choice = Choice::Lexical {
            reason: "any key".into(),
        };
        let load = || Ok::<_, String>(Arc::new(Fixed) as Arc<dyn Embedder>);
        state.embedder.get(&choice, load).unwrap();
        *state.vectors.write().unwrap() = Some(VectorSet::empty("test/fixed"));
        assert!(state.status().provider_loaded);
        let began = Instant::now();
        state.drop_when_idle().await;
        assert_eq!(began.elapsed(), IDLE_DROP);
        let status = state.status();
        assert!(!status.provider_loaded);
        assert_eq!(status.provider_starts, 1);
        assert!(state.vectors.read().unwrap().is_none(), "vectors kept");
    }

    #[tokio::test(start_paused = true)]
    async fn kept_index_connections_are_closed_after_idle_minutes() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), "token");
        let app = shared.engine.app();
        app.ensure_state_dir().unwrap();
        let memory = app.memory();
        let (index, _) = memory.reopen_index(None).unwrap();
        let held = shared.semantic.held_indexes(&memory.index_path);
        held.lock().unwrap().push(index);
        // A connection still current is taken again, not reopened.
        let kept = held.lock().unwrap().pop();
        assert!(kept.is_some());
        let (index, _) = memory.reopen_index(kept).unwrap();
        held.lock().unwrap().push(index);
        drop(held);
        let stop = CancellationToken::new();
        let component = tokio::spawn(Arc::new(MemoryEmbedder).start(shared.clone(), stop.clone()));
        tokio::time::sleep(IDLE_DROP - Duration::from_secs(1)).await;
        assert!(shared.semantic.indexes.is_loaded(), "closed too early");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            !shared.semantic.indexes.is_loaded(),
            "kept after idle minutes"
        );
        stop.cancel();
        component.await.unwrap().unwrap();
    }

    /// An index over one daily note of `lines`, every item with the
    /// [`Fixed`] model's vector.
    fn embedded_index(dir: &Path, lines: &str) -> (crate::app::App, Index) {
        let app = crate::app::testing::test_app(dir, "{}");
        app.ensure_state_dir().unwrap();
        let memory = app.memory();
        std::fs::create_dir_all(memory.root.join("memory")).unwrap();
        std::fs::write(
            memory.root.join("memory/2026-11-30.md"),
            format!("# 2026-11-30\n\n{lines}"),
        )
        .unwrap();
        let (mut index, _) = memory.reopen_index(None).unwrap();
        index.sync(SyncMode::Full, app.wall_ns()).unwrap();
        index.fill_vectors(&Fixed, EMBED_BATCH, |_| {}).unwrap();
        (app, index)
    }

    /// How many vectors a search on `index` holds after catching up.
    fn held_vectors(state: &SemanticState, index: &Index, model: &str) -> usize {
        state
            .caught_up(index, model)
            .unwrap()
            .as_ref()
            .unwrap()
            .len()
    }

    #[test]
    fn a_search_after_the_index_changed_sees_the_change() {
        let dir = tempfile::tempdir().unwrap();
        let (app, mut index) = embedded_index(dir.path(), "- [09:00] The printer jams\n");
        let state = SemanticState::default();
        let model = Fixed.key();
        assert_eq!(held_vectors(&state, &index, &model), 1);
        // A note written and embedded: the next search holds its vector.
        std::fs::write(
            app.memory().root.join("memory/2026-12-01.md"),
            "# 2026-12-01\n\n- [09:00] The printer works\n- [10:00] Lunch\n",
        )
        .unwrap();
        index.sync(SyncMode::Full, app.wall_ns()).unwrap();
        index.fill_vectors(&Fixed, EMBED_BATCH, |_| {}).unwrap();
        assert_eq!(held_vectors(&state, &index, &model), 3);
        // Dropped while idle: read in full again.
        *state.vectors.write().unwrap() = None;
        assert_eq!(held_vectors(&state, &index, &model), 3);
    }

    #[test]
    fn searches_share_the_vectors_while_one_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let (app, index) = embedded_index(dir.path(), "- [09:00] The printer jams\n");
        let state = SemanticState::default();
        let model = Fixed.key();
        let first = state.caught_up(&index, &model).unwrap();
        std::thread::scope(|s| {
            // A second search while the first still ranks with the set:
            // it gets the set too instead of waiting for the first.
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let (state, app, model) = (&state, &app, &model);
            s.spawn(move || {
                let (index, _) = app.memory().reopen_index(None).unwrap();
                let len = state
                    .caught_up(&index, model)
                    .unwrap()
                    .as_ref()
                    .map(VectorSet::len);
                done_tx.send(len).unwrap();
            });
            let second = done_rx.recv_timeout(Duration::from_secs(10));
            // Let go before judging, so a waiting search ends either way.
            drop(first);
            assert_eq!(
                second,
                Ok(Some(1)),
                "the second search waited for the first"
            );
        });
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_held_waits_for_a_load_and_another_key_replaces_the_value() {
        let warm: Arc<Warm<&str, String>> = Arc::new(Warm::new(IDLE_DROP));
        let reaper = tokio::spawn({
            let warm = warm.clone();
            async move { warm.dropped_when_idle().await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!reaper.is_finished(), "nothing was ever loaded");
        warm.get(&"a", || Ok::<_, ()>(Arc::new("a".to_string())))
            .unwrap();
        let b = warm
            .get(&"b", || Ok::<_, ()>(Arc::new("b".to_string())))
            .unwrap();
        assert_eq!(*b, "b");
        assert_eq!(warm.loads(), 2);
        // A failed load holds nothing.
        assert!(
            warm.get(&"c", || Err::<Arc<String>, _>("no model"))
                .is_err()
        );
        assert!(!warm.is_loaded());
        warm.get(&"a", || Ok::<_, ()>(Arc::new("a".to_string())))
            .unwrap();
        tokio::time::sleep(IDLE_DROP + Duration::from_secs(1)).await;
        reaper.await.unwrap();
        assert!(!warm.is_loaded());
    }
}
