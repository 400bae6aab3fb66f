//! The turn engine: what one process (a CLI command or the gateway) keeps
//! for as long as it lives, and the only way a turn runs.
//!
//! Owns the app (paths and config, replaced whole on a reload), the model
//! clients (one per endpoint, built once and shared), the webhook
//! clients of deliveries, the session lanes and the concurrency limit,
//! and the boundary for blocking work. A turn the gateway routes carries
//! the gateway's port ([`GatewayPort`]: the model's `cron` tool reaches a
//! changed job store, a run now and a wake through it).
//!
//! Invariants:
//! * Blocking work (files, SQLite, child processes, a whole turn's
//!   assembly and tools) runs only through [`Engine::blocking`] (or, for
//!   the gateway's bookkeeping, [`Engine::background`]: one thread at a
//!   lower CPU priority); async
//!   code never blocks a runtime thread. A turn's model calls run on the
//!   engine's runtime from that blocking thread (`Handle::block_on`),
//!   which is why a turn runs through [`Engine::blocking_on_runtime`]:
//!   work given to [`Engine::blocking`] holds one of a few places, and
//!   never waits on the runtime, so it never waits for a place. Both
//!   run on the engine's threads ([`pool`]), which start one whenever no
//!   thread is free and give their free pages back once idle. A
//!   command's single turn ([`run_one_turn`]) has no async code around it:
//!   its main thread is the blocking thread and drives the current-thread
//!   runtime for the model calls itself.
//! * At most one turn per session key at a time, in the order requests
//!   joined the lane ([`lanes`]); at most `agents.defaults.maxConcurrent`
//!   turns in all. Across processes, a turn also holds its session's lock
//!   file, so two CLI turns (or a CLI turn and the gateway) never fork a
//!   transcript.
//! * A turn can be cancelled ([`CancellationToken`]): the model call stops,
//!   an aborted assistant message closes the transcript's last user
//!   message, and the turn reports [`Cancelled`].

pub(crate) mod assemble;
pub(crate) mod lanes;
pub(crate) mod model;
mod pool;
pub(crate) mod turn;
mod turn_session;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::policy::Approver;
use crate::app::App;
use crate::app::gateway::GatewayPort;
use crate::provider::{self, Endpoint, Provider, RetryPolicy, StreamSink};
use crate::trigger::TurnRequest;
use turn::{self as app_agent, Driver, TurnContext, TurnReport};

pub(crate) use lanes::{LaneError, Lanes, Ticket};

/// Requests a session queues behind its running turn at most.
pub(crate) const LANE_CAPACITY: usize = 128;
/// How long a webhook's receiver may take to accept the connection.
pub(crate) const WEBHOOK_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one webhook request may take in all.
pub(crate) const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// A turn stopped before it finished (shutdown, `tasks cancel`).
#[derive(Debug, thiserror::Error)]
#[error("the turn was cancelled: {0}")]
pub(crate) struct Cancelled(pub String);

/// The engine. Cheap to clone; clones share everything.
#[derive(Clone)]
pub(crate) struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    app: RwLock<Arc<App>>,
    handle: tokio::runtime::Handle,
    providers: Mutex<HashMap<String, Arc<dyn Provider>>>,
    lanes: Arc<Lanes>,
    concurrency: Arc<Semaphore>,
    /// Places for short blocking work at once (see [`Engine::blocking`]).
    short_work: Arc<Semaphore>,
    /// The webhook clients: open, and guarded (see [`Engine::webhook_client`]).
    webhook_clients: [OnceLock<reqwest::Client>; 2],
    /// The chat channels' client (see [`Engine::telegram_client`]).
    telegram_client: OnceLock<reqwest::Client>,
    /// The bookkeeping thread, started on first use.
    background: OnceLock<Mutex<std::sync::mpsc::Sender<BackgroundWork>>>,
}

/// Short blocking pieces of work run at once ([`Engine::blocking`]): two
/// per core, at least 4 (files and SQLite wait on the disk as much as they
/// use a core), at most 16.
fn short_work_at_once() -> usize {
    (crate::host::compute_threads() * 2).clamp(4, 16)
}

/// Work for the bookkeeping thread.
type BackgroundWork = Box<dyn FnOnce() + Send>;

/// The bookkeeping thread's life: runs work in order until the engine
/// ends, and gives its free pages back once it has had no work for a
/// moment (as the pool's threads do), so a burst's batches leave nothing
/// behind.
fn bookkeeping_loop(work: &std::sync::mpsc::Receiver<BackgroundWork>) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut ran_since_give_back = false;
    loop {
        let job = if ran_since_give_back {
            match work.recv_timeout(pool::GIVE_BACK_AFTER) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) => {
                    crate::host::allocator::release_thread_free_pages();
                    ran_since_give_back = false;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            let Ok(job) = work.recv() else { return };
            job
        };
        job();
        ran_since_give_back = true;
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Builds the engine on the runtime this is called from.
    pub(crate) fn new(app: App) -> Engine {
        let max = app.config.config.agents.defaults.max_concurrent.max(1) as usize;
        Engine {
            inner: Arc::new(Inner {
                app: RwLock::new(Arc::new(app)),
                handle: tokio::runtime::Handle::current(),
                providers: Mutex::new(HashMap::new()),
                lanes: Lanes::new(LANE_CAPACITY),
                concurrency: Arc::new(Semaphore::new(max)),
                short_work: Arc::new(Semaphore::new(short_work_at_once())),
                webhook_clients: [OnceLock::new(), OnceLock::new()],
                telegram_client: OnceLock::new(),
                background: OnceLock::new(),
            }),
        }
    }

    /// Runs blocking bookkeeping (the intake feeder's batches) on one
    /// thread of its own at [`crate::host::BACKGROUND_NICE`], so it never
    /// takes a core from the threads that answer requests; one piece of
    /// work at a time, in order. The thread ends with the engine.
    pub(crate) async fn background<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: BackgroundWork = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = done.send(outcome);
        });
        let sender = self.inner.background.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<BackgroundWork>();
            let started = std::thread::Builder::new()
                .name("bookkeeping".into())
                .spawn(move || {
                    crate::host::lower_this_thread_priority();
                    bookkeeping_loop(&rx);
                });
            if let Err(err) = started {
                tracing::error!(%err, "the bookkeeping thread did not start");
            }
            Mutex::new(tx)
        });
        sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| anyhow::anyhow!("the bookkeeping thread stopped"))?;
        match result.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(panic)) => Err(anyhow::anyhow!(
                "bookkeeping panicked: {}",
                panic_text(&*panic)
            )),
            Err(_) => Err(anyhow::anyhow!("the bookkeeping thread stopped")),
        }
    }

    /// The app as it is now (a reload replaces it; holders of the old one
    /// finish with it).
    pub(crate) fn app(&self) -> Arc<App> {
        self.inner
            .app
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the app after a config reload. The concurrency limit
    /// grows at once; a smaller one applies as running turns end.
    pub(crate) fn reload(&self, app: App) {
        let max = app.config.config.agents.defaults.max_concurrent.max(1) as usize;
        let current = self.limit();
        if max > current {
            self.inner.concurrency.add_permits(max - current);
        } else if max < current {
            let semaphore = self.inner.concurrency.clone();
            let shrink = (current - max) as u32;
            self.inner.handle.spawn(async move {
                if let Ok(permits) = semaphore.acquire_many(shrink).await {
                    permits.forget();
                }
            });
        }
        *self.inner.app.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(app);
        // Endpoints may have new keys or addresses.
        self.inner
            .providers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn limit(&self) -> usize {
        self.app()
            .config
            .config
            .agents
            .defaults
            .max_concurrent
            .max(1) as usize
    }

    /// The session lanes.
    pub(crate) fn lanes(&self) -> &Arc<Lanes> {
        &self.inner.lanes
    }

    /// Runs blocking work off the async threads: the one boundary. At
    /// most [`short_work_at_once`] such pieces run at a time; the rest
    /// wait their turn here. Work that waits on the runtime (a turn's
    /// model calls) goes through [`Engine::blocking_on_runtime`] instead.
    ///
    /// Why a limit: the pool starts a thread whenever no free one is
    /// left, so a burst (a hundred chat replies ending at once) made
    /// twenty threads, each keeping its own allocator pages and stack
    /// (1,000 Telegram messages: 11 MB more private memory), for no more
    /// throughput on a machine of few cores.
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        // Held until the work's end is seen here, not dropped by the work
        // itself: the next piece then finds the thread free again rather
        // than starting another.
        let _place = self.inner.short_work.acquire().await?;
        self.blocking_on_runtime(work).await
    }

    /// Runs blocking work that waits on the engine's runtime (a turn's
    /// model calls, a heartbeat's turn and delivery), outside the limit of
    /// [`Engine::blocking`]: it may itself need that limit's places, and
    /// it is limited already (`agents.defaults.maxConcurrent`, one
    /// heartbeat per agent). Both run on the engine's own threads
    /// (`pool`), which give their free pages back once idle.
    pub(crate) async fn blocking_on_runtime<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        pool::run(move || {
            let _boundary = BlockingBoundary::enter();
            work()
        })
        .await
        .map_err(|failed| match failed {
            pool::Failed::Panicked(panic) => {
                anyhow::anyhow!("blocking work panicked: {}", panic_text(&*panic))
            }
            pool::Failed::NotRun => {
                anyhow::anyhow!("blocking work did not run: no thread could be started")
            }
        })
    }

    /// The client for `endpoint`, built once per endpoint.
    pub(crate) fn provider(&self, endpoint: Endpoint) -> Arc<dyn Provider> {
        provider_for(&self.inner.providers, endpoint)
    }

    /// The client webhook deliveries post with, built once per process
    /// (the only place it is built): rustls, no redirects followed, at
    /// most [`WEBHOOK_CONNECT_TIMEOUT`] to connect and
    /// [`WEBHOOK_TIMEOUT`] a request. `guarded` (a URL the model gave):
    /// no proxy, and names resolve only to public addresses, which are
    /// the ones connected to ([`crate::delivery::url::GuardedResolver`]).
    pub(crate) fn webhook_client(&self, guarded: bool) -> reqwest::Client {
        self.inner.webhook_clients[usize::from(guarded)]
            .get_or_init(|| {
                provider::http::ensure_crypto_provider();
                let mut builder = reqwest::Client::builder()
                    .connect_timeout(WEBHOOK_CONNECT_TIMEOUT)
                    .timeout(WEBHOOK_TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("almanac/", env!("CARGO_PKG_VERSION")));
                if guarded {
                    builder = builder
                        .no_proxy()
                        .dns_resolver(crate::delivery::url::GuardedResolver);
                }
                builder
                    .build()
                    .expect("the HTTP client builds with a crypto provider installed")
            })
            .clone()
    }

    /// The client the Bot API is called with, built once per process:
    /// rustls, no redirects, at most 10 s to connect; each call sets its
    /// own time limit (a long poll waits).
    pub(crate) fn telegram_client(&self) -> reqwest::Client {
        self.inner
            .telegram_client
            .get_or_init(|| {
                provider::http::ensure_crypto_provider();
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("almanac/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .expect("the HTTP client builds with a crypto provider installed")
            })
            .clone()
    }

    /// The Bot API client and settings of Telegram account `id` (the
    /// default account for none), as the config says now.
    pub(crate) fn telegram_account(
        &self,
        id: Option<&str>,
    ) -> Result<
        (
            crate::channels::telegram::api::BotApi,
            crate::channels::telegram::Account,
        ),
        String,
    > {
        let app = self.app();
        let env = app.host.var("TELEGRAM_BOT_TOKEN");
        let resolve = |file: &str| app.host.resolve_path(file);
        let accounts = crate::channels::telegram::accounts(&app.config.config, env, &resolve);
        let account = accounts
            .into_iter()
            .find(|a| match id {
                Some(id) => a.id == id,
                None => a.is_default,
            })
            .ok_or_else(|| format!("no enabled Telegram account `{}`", id.unwrap_or("default")))?;
        let token = account.token.clone()?;
        let api = crate::channels::telegram::api::BotApi::new(
            self.telegram_client(),
            &account.api_root,
            &token,
        );
        Ok((api, account))
    }

    /// The session key `req` runs in (refusing an agent the config does
    /// not have).
    pub(crate) fn session_key(&self, req: &TurnRequest) -> anyhow::Result<String> {
        let agent = crate::trigger::check_agent(req)?;
        let app = self.app().for_agent(agent.as_deref())?;
        Ok(app.resolve_session_key(None, req.session_key.as_deref()))
    }

    /// A turn for a request that already holds its place in the
    /// lane (the gateway records the place before waiting): unattended
    /// (nobody reads its text as it streams, and a command that needs a
    /// person's approval is refused). `on_start`
    /// runs on the blocking boundary once the turn has its lane and slot,
    /// before anything else; an error from it ends the turn unrun.
    pub(crate) async fn turn_in_lane(
        &self,
        ticket: Ticket,
        req: TurnRequest,
        cancel: CancellationToken,
        on_start: Box<dyn FnOnce() -> anyhow::Result<()> + Send>,
        gateway: Option<Arc<dyn GatewayPort>>,
    ) -> anyhow::Result<TurnReport> {
        let lane = tokio::select! {
            lane = ticket.enter() => lane,
            () = cancel.cancelled() => return Err(Cancelled("before it started".into()).into()),
        };
        let permit = tokio::select! {
            permit = self.inner.concurrency.clone().acquire_owned() => permit?,
            () = cancel.cancelled() => return Err(Cancelled("before it started".into()).into()),
        };
        let app = self.app();
        let engine = self.clone();
        let handle = self.inner.handle.clone();
        let report = self
            .blocking_on_runtime(move || {
                let _lane = lane;
                let _permit = permit;
                on_start()?;
                let ctx = TurnContext {
                    driver: Driver::Handle(handle),
                    connect: Arc::new(move |endpoint| engine.provider(endpoint)),
                    cancel,
                    gateway,
                };
                app_agent::run_turn(
                    &app,
                    &req,
                    &RetryPolicy::default(),
                    &mut crate::provider::Quiet,
                    &crate::agent::policy::NoApprover,
                    &ctx,
                )
            })
            .await??;
        Ok(report)
    }
}

/// Deliveries run in the engine's process: its clock, its config as it is
/// now, its webhook clients and its blocking boundary.
impl crate::delivery::Env for Engine {
    fn now_ms(&self) -> i64 {
        self.app().host.now_ms()
    }

    fn outbox_dir(&self) -> std::path::PathBuf {
        self.app().paths.outbox_dir()
    }

    fn allow_private_network(&self) -> bool {
        self.app()
            .config
            .config
            .delivery
            .webhook
            .allow_private_network
    }

    fn config_value(&self, key: &str) -> Option<serde_json::Value> {
        self.app().config.get(key)
    }

    fn webhook_client(&self, guarded: bool) -> reqwest::Client {
        Engine::webhook_client(self, guarded)
    }

    fn send_chat(
        &self,
        message: crate::delivery::webhook::ChatMessage,
    ) -> futures_util::future::BoxFuture<'static, (crate::delivery::webhook::AttemptOutcome, usize)>
    {
        let engine = self.clone();
        Box::pin(async move { send_chat(&engine, message).await })
    }

    fn run_blocking(
        &self,
        work: Box<dyn FnOnce() + Send>,
    ) -> futures_util::future::BoxFuture<'static, anyhow::Result<()>> {
        let engine = self.clone();
        Box::pin(async move { engine.blocking(work).await })
    }
}

/// One attempt at a chat's reply: the rest of its messages, through the
/// account's client.
async fn send_chat(
    engine: &Engine,
    message: crate::delivery::webhook::ChatMessage,
) -> (crate::delivery::webhook::AttemptOutcome, usize) {
    use crate::delivery::webhook::AttemptOutcome;
    if message.channel != crate::channels::telegram::CHANNEL {
        let reason = format!("no sender for the channel `{}`", message.channel);
        return (AttemptOutcome::Permanent { reason }, message.sent);
    }
    let (api, account) = match engine.telegram_account(message.account_id.as_deref()) {
        Ok(found) => found,
        Err(reason) => return (AttemptOutcome::Permanent { reason }, message.sent),
    };
    let chat = crate::channels::telegram::send::Chat {
        chat_id: &message.to,
        thread_id: message.thread_id,
        reply_to: message.reply_to,
    };
    match crate::channels::telegram::send::send_reply(
        &api,
        &account,
        &chat,
        &message.text,
        message.sent,
    )
    .await
    {
        Ok(sent) => (AttemptOutcome::Delivered, sent),
        Err((err, sent)) => {
            let reason = err.to_string();
            let outcome = match err {
                crate::channels::telegram::api::ApiError::RetryAfter(s) => AttemptOutcome::Retry {
                    reason,
                    retry_after: Some(Duration::from_secs(s)),
                },
                e if e.is_transient() => AttemptOutcome::Retry {
                    reason,
                    retry_after: None,
                },
                _ => AttemptOutcome::Permanent { reason },
            };
            (outcome, sent)
        }
    }
}

fn provider_for(
    cache: &Mutex<HashMap<String, Arc<dyn Provider>>>,
    endpoint: Endpoint,
) -> Arc<dyn Provider> {
    let key = endpoint_key(&endpoint);
    if let Some(p) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return p.clone();
    }
    let built: Arc<dyn Provider> = Arc::from(provider::connect(endpoint));
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key)
        .or_insert(built)
        .clone()
}

/// What makes two endpoints the same client: everything but nothing
/// secret is kept in the key in clear (the key is hashed).
fn endpoint_key(e: &Endpoint) -> String {
    let secret = crate::paths::fnv1a64(e.api_key.as_deref().unwrap_or("").as_bytes());
    format!(
        "{}|{}|{}|{:016x}|{:?}|{:?}",
        e.provider,
        e.api.as_str(),
        e.base_url,
        secret,
        e.headers,
        e.timeouts
    )
}

thread_local! {
    /// Set while this thread runs work given to [`Engine::blocking`].
    static ON_BLOCKING_BOUNDARY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the current thread as running blocking work for as long as it
/// lives (the flag it found is put back when it drops).
struct BlockingBoundary(bool);

impl BlockingBoundary {
    fn enter() -> BlockingBoundary {
        BlockingBoundary(ON_BLOCKING_BOUNDARY.with(|on| on.replace(true)))
    }
}

impl Drop for BlockingBoundary {
    fn drop(&mut self) {
        ON_BLOCKING_BOUNDARY.with(|on| on.set(self.0));
    }
}

/// Panics, in debug builds and tests, when blocking work (SQLite, files)
/// is about to run on an async worker: inside a tokio runtime but not in
/// work given to [`Engine::blocking`]. A thread of no runtime (a
/// command's, the bookkeeping thread of [`Engine::background`]) may
/// block. Tokio enters its runtime on its blocking threads too, so the
/// runtime alone cannot tell them apart: the boundary marks its own.
pub(crate) fn assert_not_async(what: &str) {
    if cfg!(any(debug_assertions, test))
        && tokio::runtime::Handle::try_current().is_ok()
        && !ON_BLOCKING_BOUNDARY.with(std::cell::Cell::get)
    {
        panic!("{what} blocks: it must run through Engine::blocking, not on an async worker");
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// A sink for a turn whose text nobody reads as it streams.
pub(crate) fn quiet() -> Box<dyn StreamSink> {
    Box::new(crate::provider::Quiet)
}

/// One turn for a short-lived command: the engine on a current-thread
/// runtime, built for this turn and dropped after it.
pub(crate) fn run_one_turn(
    app: App,
    req: TurnRequest,
    mut sink: Box<dyn StreamSink>,
    approver: Arc<dyn Approver>,
) -> anyhow::Result<TurnReport> {
    let runtime = Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
    );
    let engine = {
        let _inside = runtime.enter();
        Engine::new(app)
    };
    // One turn in this process: no lane to wait in (the session's lock
    // file orders it against other processes), and the main thread, warm
    // already, is the blocking thread: it runs the turn and drives the
    // runtime for the model calls.
    let app = engine.app();
    let clients = engine.clone();
    let ctx = TurnContext {
        driver: Driver::Owned(runtime),
        connect: Arc::new(move |endpoint| clients.provider(endpoint)),
        cancel: CancellationToken::new(),
        gateway: None,
    };
    app_agent::run_turn(
        &app,
        &req,
        &RetryPolicy::default(),
        sink.as_mut(),
        approver.as_ref(),
        &ctx,
    )
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod delivery_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::GlobalOptions;
    use crate::host::Host;

    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn engine_in(dir: &std::path::Path) -> Engine {
        let host = Host::with_vars(
            [("ALMANAC_STATE_DIR", dir.join("state").display().to_string())],
            dir,
            dir,
            "2026-12-01T10:00:00+00:00[UTC]".parse().unwrap(),
        );
        Engine::new(App::load(&GlobalOptions::default(), host).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_short_blocking_work_runs_a_few_pieces_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_in(dir.path());
        let limit = short_work_at_once();
        let (started, running, most) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let pieces: Vec<_> = (0..limit * 8)
            .map(|_| {
                let engine = engine.clone();
                let (started, running, most) = (started.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    engine
                        .blocking(move || {
                            most.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                            started.fetch_add(1, SeqCst);
                            // Held until `limit` pieces have started, then
                            // a while longer: unlimited, every piece of the
                            // burst would be on a thread of its own by then.
                            while started.load(SeqCst) < limit {
                                std::thread::yield_now();
                            }
                            for _ in 0..2_000 {
                                std::thread::yield_now();
                            }
                            running.fetch_sub(1, SeqCst);
                        })
                        .await
                        .unwrap();
                })
            })
            .collect();
        for piece in pieces {
            piece.await.unwrap();
        }
        assert_eq!(started.load(SeqCst), limit * 8);
        assert_eq!(most.load(SeqCst), limit, "pieces at once");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_that_waits_on_the_runtime_needs_no_place_of_short_work() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_in(dir.path());
        let limit = short_work_at_once();
        let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let holders: Vec<_> = (0..limit)
            .map(|_| {
                let (engine, gate, started_tx) = (engine.clone(), gate.clone(), started_tx.clone());
                tokio::spawn(async move {
                    engine
                        .blocking(move || {
                            let _ = started_tx.send(());
                            let (open, opened) = &*gate;
                            let mut open = open.lock().unwrap();
                            while !*open {
                                open = opened.wait(open).unwrap();
                            }
                        })
                        .await
                        .unwrap();
                })
            })
            .collect();
        for _ in 0..limit {
            started.recv().await.unwrap();
        }
        // Every place is held: a turn's kind of work still runs, and the
        // short work it asks for on the way waits for a place.
        let handle = tokio::runtime::Handle::current();
        let inner = engine.clone();
        let waiting = engine.blocking_on_runtime(move || {
            let asked = handle.spawn(async move { inner.blocking(|| 7).await.unwrap() });
            (1, asked)
        });
        let (ran, asked) = tokio::time::timeout(Duration::from_secs(60), waiting)
            .await
            .expect("work on the runtime ran while every place was held")
            .unwrap();
        assert_eq!(ran, 1);
        assert!(!asked.is_finished());
        let (open, opened) = &*gate;
        *open.lock().unwrap() = true;
        opened.notify_all();
        assert_eq!(asked.await.unwrap(), 7);
        for holder in holders {
            holder.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bookkeeping_runs_in_order_on_one_lower_priority_thread() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_in(dir.path());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..3 {
            let seen = seen.clone();
            let (name, nice) = engine
                .background(move || {
                    seen.lock().unwrap().push(i);
                    // SAFETY: reads the calling thread's priority only.
                    let nice = unsafe {
                        libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as _)
                    };
                    (std::thread::current().name().map(str::to_string), nice)
                })
                .await
                .unwrap();
            assert_eq!(nice, crate::host::BACKGROUND_NICE);
            threads.push(name);
        }
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
        assert!(threads.iter().all(|t| t.as_deref() == Some("bookkeeping")));
        // A panic is an error, and the thread goes on.
        let err = engine.background(|| panic!("boom")).await.unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert_eq!(engine.background(|| 7).await.unwrap(), 7);
    }
}
