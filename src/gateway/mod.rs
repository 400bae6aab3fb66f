//! The gateway: one long-running process that owns time. It accepts
//! triggers over HTTP (the control API and webhooks), keeps the memory
//! index and the skills snapshot in step with the files, applies config
//! edits live, and runs agent turns through the one [`Engine`].
//!
//! Invariants:
//! * One gateway per state directory: it holds `gateway.lock` while it
//!   runs and publishes `gateway.json` (pid, address, port, start time,
//!   where the token lives); clients find it only through that file
//!   ([`state`]).
//! * Every component runs under the [`supervisor`]: a failure is
//!   restarted with backoff and shown in `gateway status`, never silently
//!   dead. Every spawned task is tracked; shutdown (SIGTERM, Ctrl-C) ends
//!   within [`SHUTDOWN_DEADLINE`]: running turns get most of it to finish
//!   and are then cancelled (recorded as such, transcripts intact).
//! * Whatever the gateway acknowledges is in its intake log before the
//!   reply ([`intake`]); while the log cannot be synced, nothing is
//!   acknowledged (503) and `gateway status` shows why.
//! * The HTTP routes live in one table ([`http::router`]): `/v1/*` needs
//!   the gateway token (bad tokens lock a client out for a while),
//!   `/healthz` and `/readyz` need nothing; every error is JSON
//!   `{ok: false, error}`.
//! * Schedulers and webhooks never import the agent: they put events on
//!   the [`GatewayEvent`] bus or ask the engine for a turn. What a turn in this
//!   process asks of the gateway (the `cron` tool: a changed job store, a
//!   run now, a wake) comes through the [`Hooks`] the gateway gives the
//!   engine, the same paths as the control API's routes.

pub(crate) mod chat;
pub(crate) mod chat_runs;
pub(crate) mod commands;
pub(crate) mod cron;
pub(crate) mod cron_delivery;
mod cron_follow;
mod cron_interrupted;
mod cron_run;
pub(crate) mod deliverer;
pub(crate) mod heartbeat;
pub(crate) mod http;
pub(crate) mod intake;
pub(crate) mod resident;
pub(crate) mod route;
pub(crate) mod semantic;
pub(crate) mod subagent_archive;
pub(crate) mod subagent_children;
pub(crate) mod subagent_control;
pub(crate) mod subagent_runs;
pub(crate) mod supervisor;
pub(crate) mod tasks;
pub(crate) mod telegram;
pub(crate) mod watch;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::{App, GlobalOptions};
use crate::config::GatewayBind;
use crate::engine::Engine;
use crate::gateway_client::{GatewayInfo, GatewayStatus};
use crate::host::Host;
use crate::host::signals::StopSignals;
use crate::trigger::{Source, Trigger, TurnRequest};
use supervisor::{Component, Registry};

/// How long shutdown may take in all.
pub(crate) use crate::gateway_client::SHUTDOWN_DEADLINE;
/// What the end of a shutdown keeps for itself after the work stopped
/// (or was given up on): the intake's last sync, `gateway.json`, and the
/// runtime's wait for blocking work (a first index build cannot be cut
/// short; the process ends without it).
const SHUTDOWN_TAIL: Duration = Duration::from_millis(1500);
/// How long the runtime waits for blocking work at the very end.
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(750);
/// How long running turns get to finish before they are cancelled.
const TURN_GRACE: Duration = Duration::from_secs(7);
/// How long start-up must have been quiet before the gateway gives back
/// what it allocated ([`resident`]): the components' first
/// work (the memory index check, the skills and job store reads) is done
/// by then.
const START_SETTLE: Duration = Duration::from_secs(10);

/// How long work (turns, and the timers of the task sweep, cron and
/// heartbeat) must have been quiet before the gateway gives back what it
/// allocated: work that comes together (a chat's burst of messages, timers
/// that wake at once) is one give-back, and the process's memory is back
/// to idle within this of the burst's end. Not shorter: the next turn
/// faults back in what a give-back returned, and with chat messages 100 ms
/// apart a give-back after each (at 50 ms) cost a fifth more CPU per turn.
const WORK_SETTLE: Duration = Duration::from_millis(500);

/// Gives back what start-up allocated once it has settled, and again
/// after each burst of work once that is quiet
/// ([`resident::release_free_memory`]): an idle gateway stays as small
/// at its thousandth sweep as after its start.
async fn give_back_when_quiet<F, Fut>(
    work_ran: &tokio::sync::Notify,
    stop: &CancellationToken,
    mut give_back: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut quiet = START_SETTLE;
    loop {
        loop {
            tokio::select! {
                () = tokio::time::sleep(quiet) => break,
                () = work_ran.notified() => {}
                () = stop.cancelled() => return,
            }
        }
        give_back().await;
        quiet = WORK_SETTLE;
        tokio::select! {
            () = work_ran.notified() => {}
            () = stop.cancelled() => return,
        }
    }
}

/// What moves between components. Grouped: external commands, files,
/// tasks. Shutdown is the stop token, not an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GatewayEvent {
    // External commands
    /// System events were queued for a session.
    EventsQueued { session_key: String },
    /// A wake was asked for (`system event --mode now`).
    Wake { reason: String, session_key: String },
    // Files
    /// The memory watcher's start sync brought the index up to date.
    MemoryIndexed,
    /// Memory files changed and the index was refreshed.
    MemoryRefreshed { files: usize },
    /// The skills snapshot was rebuilt.
    SkillsChanged,
    /// The config was reloaded.
    ConfigReloaded,
    // Tasks
    /// A task changed state.
    TaskChanged { task_id: String, status: String },
}

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayError {
    #[error("another gateway is running on this state directory{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    AlreadyRunning { pid: Option<u32> },
    /// One line: the address in use is the whole reason.
    #[error("port {port} on {address} is in use")]
    PortInUse { address: IpAddr, port: u16 },
    #[error("cannot listen on {address}:{port}")]
    Bind {
        address: IpAddr,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "binding to {0} makes the gateway reachable from other machines: set gateway.auth.token (or ALMANAC_GATEWAY_TOKEN) first"
    )]
    TokenRequired(String),
    #[error("`{0}` is not a bind address: use loopback, lan or an IP address")]
    BadBind(String),
    #[error("gateway.bind is `custom` but gateway.customBindHost is not set")]
    NoCustomHost,
}

/// What `gateway run` was given.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    pub port: Option<u16>,
    /// `loopback`, `lan` or an IP address.
    pub bind: Option<String>,
    /// Answers the command lines sent over `gateway.sock` (none: no
    /// command socket).
    pub answer_command: Option<commands::AnswerCommand>,
}

/// Everything the components and handlers share.
pub(crate) struct Shared {
    pub engine: Engine,
    pub host: Host,
    pub options: GlobalOptions,
    pub bus: broadcast::Sender<GatewayEvent>,
    pub registry: Arc<Registry>,
    pub intake: intake::Intake,
    pub info: GatewayInfo,
    pub token: String,
    pub lockout: http::Lockout,
    /// The webhooks' lockout and idempotency keys.
    pub webhooks: http::webhooks::WebhookState,
    /// Subagents this gateway accepted and runs (their limits).
    pub subagents: subagent_children::Children,
    /// Turns in flight (tracked, so shutdown can wait for them).
    pub turns: TaskTracker,
    /// Cancels every running turn.
    pub turns_cancel: CancellationToken,
    pub ready: AtomicBool,
    /// The task ledger and this start's generation.
    pub tasks: tasks::TaskBook,
    /// Recording a task and joining its lane happen as one step, so the
    /// ledger's lane order is the order turns run in.
    pub admission: tokio::sync::Mutex<()>,
    /// Where unattended turns' results go (the outbox, webhooks).
    pub deliverer: crate::delivery::Deliverer,
    /// The heartbeat runner's schedule and its one-run-at-a-time lock.
    pub heartbeat: heartbeat::HeartbeatState,
    /// The cron runner's next wake and its nudge.
    pub cron: cron::CronState,
    /// Memory search's warm provider and vectors.
    pub semantic: semantic::SemanticState,
    /// Said by work once it ran (each turn's end, the task sweep, the
    /// cron and heartbeat timers): what it freed, a gateway gone quiet
    /// gives back ([`resident`]).
    pub work_ran: tokio::sync::Notify,
    /// Said by the config watcher when a reload changed the memory paths
    /// (the memory watcher then watches the new ones).
    pub memory_paths_changed: tokio::sync::Notify,
    /// The chat router of the config in use, built once per load.
    pub chat_router: chat::RouterCache,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn status(&self) -> GatewayStatus {
        GatewayStatus {
            running: true,
            pid: Some(self.info.pid),
            address: Some(self.info.address.clone()),
            port: Some(self.info.port),
            started_at_ms: Some(self.info.started_at_ms),
            uptime_ms: Some(self.host.now_ms() - self.info.started_at_ms),
            components: self.registry.snapshot(),
            next_heartbeat_at_ms: self.heartbeat.next_due_ms(),
            next_cron_at_ms: self.cron.next_wake_ms(),
            memory_search: Some(self.semantic.status()),
            memory: crate::host::own_status_text()
                .as_deref()
                .and_then(crate::gateway_client::ProcessMemory::from_proc_status),
        }
    }
}

/// Where to listen, from flags over config, and how the bind was named.
pub(crate) fn bind_address(
    app: &App,
    opts: &RunOptions,
) -> Result<(IpAddr, u16, String), GatewayError> {
    let gateway = &app.config.config.gateway;
    let port = opts.port.unwrap_or(gateway.port);
    let (address, label) = match opts.bind.as_deref().map(str::trim) {
        Some("loopback") => (IpAddr::V4(Ipv4Addr::LOCALHOST), "loopback".to_string()),
        Some("lan") => (
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "lan (--bind)".to_string(),
        ),
        Some(ip) => (
            ip.parse()
                .map_err(|_| GatewayError::BadBind(ip.to_string()))?,
            format!("{ip} (--bind)"),
        ),
        None => match gateway.bind {
            GatewayBind::Loopback => (IpAddr::V4(Ipv4Addr::LOCALHOST), "loopback".to_string()),
            GatewayBind::Lan => (
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                "lan (gateway.bind)".to_string(),
            ),
            GatewayBind::Custom => {
                let host = gateway.custom_bind_host.as_deref().unwrap_or("").trim();
                if host.is_empty() {
                    return Err(GatewayError::NoCustomHost);
                }
                (
                    host.parse()
                        .map_err(|_| GatewayError::BadBind(host.to_string()))?,
                    format!("{host} (gateway.customBindHost)"),
                )
            }
        },
    };
    Ok((address, port, label))
}

/// The components, in start order.
fn components() -> Vec<Arc<dyn Component>> {
    vec![
        Arc::new(intake::Feeder),
        Arc::new(watch::MemoryWatcher),
        Arc::new(semantic::MemoryEmbedder),
        Arc::new(watch::SkillsWatcher),
        Arc::new(watch::ConfigWatcher),
        Arc::new(tasks::TaskSweeper),
        Arc::new(heartbeat::HeartbeatRunner),
        Arc::new(cron::CronRunner),
        Arc::new(deliverer::Delivery),
    ]
}

/// Async worker threads: two, or one when the process may use only one
/// core (its CPU affinity); more would only share the cores they have.
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(2))
}

/// Runs the gateway in the foreground until SIGTERM / Ctrl-C (or `stop`,
/// for tests), printing one line when it is ready.
pub(crate) fn run(
    app: App,
    options: GlobalOptions,
    opts: RunOptions,
    stop: CancellationToken,
    on_ready: impl FnOnce(&GatewayInfo) + Send,
) -> anyhow::Result<()> {
    crate::host::allocator::serve_from_mimalloc();
    resident::limit_allocator_arenas();
    let (address, port, label) = bind_address(&app, &opts)?;
    if !address.is_loopback()
        && crate::gateway_client::discovery::configured_token(&app.config.config, &app.host)
            .is_none()
    {
        return Err(GatewayError::TokenRequired(label).into());
    }
    use anyhow::Context as _;
    app.ensure_state_dir().with_context(|| {
        format!(
            "cannot create the state directory {}",
            app.paths.state_dir.display()
        )
    })?;
    let Some(lock) = crate::gateway_client::discovery::acquire_lock(&app.paths)
        .with_context(|| format!("cannot open {}", app.paths.gateway_lock().display()))?
    else {
        let pid = crate::gateway_client::discovery::running(&app.paths).map(|i| i.pid);
        return Err(GatewayError::AlreadyRunning { pid }.into());
    };
    let listener =
        std::net::TcpListener::bind(SocketAddr::new(address, port)).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                GatewayError::PortInUse { address, port }
            } else {
                GatewayError::Bind {
                    address,
                    port,
                    source,
                }
            }
        })?;
    listener.set_nonblocking(true)?;
    let command_socket = opts
        .answer_command
        .and_then(|answer| commands::CommandSocket::open(&app.paths.state_dir, answer));
    let (token, source) =
        crate::gateway_client::discovery::token(&app.paths, &app.config.config, &app.host, true)
            .with_context(|| {
                format!(
                    "cannot read or write the gateway token {}",
                    app.paths.gateway_token_file().display()
                )
            })?
            .expect("a token is created when missing");
    http::webhooks::settings(&app.config.config.hooks, &token)?;
    let intake = intake::Intake::open(&app.paths.gateway_dir()).with_context(|| {
        format!(
            "cannot open the intake log in {}",
            app.paths.gateway_dir().display()
        )
    })?;
    let book = open_ledger(&app)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .max_blocking_threads(32)
        .thread_keep_alive(Duration::from_secs(10))
        .event_interval(EVENT_INTERVAL)
        .on_thread_park(crate::host::allocator::give_back_if_asked)
        .enable_all()
        .build()?;
    let result = runtime.block_on(serve(
        app,
        options,
        (listener, command_socket),
        token,
        source,
        intake,
        book,
        stop,
        on_ready,
    ));
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    drop(lock);
    result
}

/// Tasks a worker runs between two looks for ready sockets (tokio's
/// default is 61). Under load a connection's task is woken once more
/// after its answer is out (hyper's request-body channel wakes its
/// sender), so the run queue seldom empties and, at 61, a request that
/// has arrived can wait behind two rounds of the other connections: the
/// 90th percentile of `POST /v1/system/event` under `wrk -c50` was twice
/// the median. At 8 it is about 1.3 times; a look that finds nothing
/// costs one system call.
const EVENT_INTERVAL: u32 = 8;

#[allow(clippy::too_many_arguments)]
async fn serve(
    app: App,
    options: GlobalOptions,
    (listener, command_socket): (std::net::TcpListener, Option<commands::CommandSocket>),
    token: String,
    source: crate::gateway_client::discovery::TokenSource,
    intake: intake::Intake,
    book: tasks::TaskBook,
    stop: CancellationToken,
    on_ready: impl FnOnce(&GatewayInfo) + Send,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    // Listened for before the gateway says it is ready, so a SIGTERM sent
    // as soon as it is (a service manager, a script) stops it gracefully.
    let mut stop_signals = StopSignals::listen();
    let paths = app.paths.clone();
    let host = app.host.clone();
    let memory_root = app.memory().root;
    let info = GatewayInfo {
        pid: std::process::id(),
        address: local.ip().to_string(),
        port: local.port(),
        started_at_ms: host.now_ms(),
        token_source: source.label().to_string(),
        token_file: match &source {
            crate::gateway_client::discovery::TokenSource::File(p) => Some(p.clone()),
            _ => None,
        },
        generation: book.generation,
        watching: vec![memory_root],
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let journal = intake.journal();
    let (bus, _) = broadcast::channel(256);
    let heartbeat_on = app.heartbeat_runs().enabled();
    let engine = Engine::new(app);
    let deliverer = crate::delivery::Deliverer::open(Arc::new(engine.clone()))?;
    let shared = Arc::new(Shared {
        engine,
        host,
        options,
        bus,
        registry: Arc::new(Registry::default()),
        intake,
        info,
        token,
        lockout: http::Lockout::default(),
        webhooks: http::webhooks::WebhookState::default(),
        subagents: subagent_children::Children::default(),
        turns: TaskTracker::new(),
        turns_cancel: CancellationToken::new(),
        ready: AtomicBool::new(false),
        tasks: book,
        admission: tokio::sync::Mutex::new(()),
        deliverer,
        heartbeat: heartbeat::HeartbeatState::new(heartbeat_on),
        cron: cron::CronState::new(),
        semantic: semantic::SemanticState::default(),
        work_ran: tokio::sync::Notify::new(),
        memory_paths_changed: tokio::sync::Notify::new(),
        chat_router: chat::RouterCache::default(),
    });
    follow_task_deliveries(&shared);
    // The intake's group commit runs on a thread of its own.
    let syncer = {
        let journal = journal.clone();
        std::thread::Builder::new()
            .name("intake-sync".into())
            .spawn(move || {
                crate::host::lower_this_thread_priority();
                journal.run_syncer()
            })?
    };
    let tracker = TaskTracker::new();
    let components_stop = CancellationToken::new();
    // Runs the ledger holds queued are started before the feeder can
    // record new ones: each run is started by exactly one of the two.
    http::webhook_runs::resume_runs(&shared).await;
    subagent_runs::announce_ended_while_down(&shared).await;
    let mut all = components();
    all.extend(telegram::TelegramPoller::for_config(&shared));
    for component in all {
        supervisor::supervise(
            component,
            shared.clone(),
            shared.registry.clone(),
            &tracker,
            components_stop.clone(),
        );
    }
    let server_stop = CancellationToken::new();
    supervisor::supervise(
        Arc::new(ControlApi {
            listener,
            server_stop: server_stop.clone(),
        }),
        shared.clone(),
        shared.registry.clone(),
        &tracker,
        components_stop.clone(),
    );
    if let Some(socket) = command_socket {
        supervisor::supervise(
            Arc::new(socket),
            shared.clone(),
            shared.registry.clone(),
            &tracker,
            components_stop.clone(),
        );
    }
    crate::gateway_client::discovery::publish(&paths, &shared.info)?;
    shared.ready.store(true, Ordering::Release);
    on_ready(&shared.info);
    tracing::info!(address = %local, "gateway ready");
    announce_startup(&shared, local);
    spawn_memory_give_back(&shared, &tracker, &components_stop);

    wait_for_shutdown(&stop, &mut stop_signals).await;
    tracing::info!("gateway stopping");
    let deadline = tokio::time::Instant::now() + (SHUTDOWN_DEADLINE - SHUTDOWN_TAIL);
    shared.ready.store(false, Ordering::Release);
    // No new connections; requests in flight finish (a turn's request
    // ends when its turn does).
    server_stop.cancel();
    components_stop.cancel();
    shared.deliverer.stop();
    shared.turns.close();
    if tokio::time::timeout(TURN_GRACE, shared.turns.wait())
        .await
        .is_err()
    {
        tracing::warn!("turns still running; cancelling them");
        shared.turns_cancel.cancel();
    }
    tracker.close();
    if tokio::time::timeout_at(deadline, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("shutdown deadline reached; some work did not stop in time");
    }
    shared.deliverer.close().await;
    journal.close();
    if let Ok(Ok(Err(err))) = tokio::task::spawn_blocking(move || syncer.join()).await {
        tracing::error!(%err, "cannot sync the intake log");
    }
    crate::gateway_client::discovery::unpublish(&paths, std::process::id());
    Ok(())
}

/// Tells the internal hooks the gateway started (`gateway:startup`) and
/// runs the boot turn.
fn announce_startup(shared: &Arc<Shared>, local: std::net::SocketAddr) {
    let app = shared.engine.app();
    app.fire_hook(
        "gateway:startup",
        "gateway:startup",
        serde_json::json!({
            "workspaceDir": app.paths.workspace,
            "address": local.to_string(),
        }),
    );
    boot_turn(shared, &app);
}

/// Gives back the allocators' free memory once start-up has settled and
/// after each burst of work ([`give_back_when_quiet`]), until
/// `stop`.
fn spawn_memory_give_back(shared: &Arc<Shared>, tracker: &TaskTracker, stop: &CancellationToken) {
    let shared = shared.clone();
    let stop = stop.clone();
    tracker.spawn(async move {
        give_back_when_quiet(&shared.work_ran, &stop, || async {
            let _ = shared.engine.blocking(resident::release_free_memory).await;
            resident::wake_the_workers(worker_threads());
        })
        .await;
    });
}

/// Serves the HTTP routes on the gateway's socket, under the supervisor
/// like every other component: should serving fail, it serves again on
/// the same socket (bound once, so the port is never given up) and
/// `gateway status` shows the restart.
struct ControlApi {
    listener: std::net::TcpListener,
    /// Said first at shutdown: no new connections, requests in flight end.
    server_stop: CancellationToken,
}

impl Component for ControlApi {
    fn kind(&self) -> supervisor::ComponentKind {
        supervisor::ComponentKind::ControlApi
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> futures_util::future::BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener.try_clone()?)?;
            let router = http::router(shared);
            let server_stop = self.server_stop.clone();
            let stopping = stop.clone();
            http::serve::serve(listener, router, async move {
                tokio::select! {
                    () = server_stop.cancelled() => {}
                    () = stopping.cancelled() => {}
                }
            })
            .await;
            // Served to the end of a shutdown: not a failure to restart.
            if self.server_stop.is_cancelled() {
                stop.cancelled().await;
            }
            Ok(())
        })
    }
}

/// Records in the task ledger how the delivery of each task's result
/// stands, as the deliverer tells it.
fn follow_task_deliveries(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    shared
        .deliverer
        .on_task_delivery(Arc::new(move |task, status| {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let now = shared.host.now_ms();
            if let Err(err) = shared.tasks.with(|l| l.set_delivery(task, status, now)) {
                tracing::debug!(%err, task, "a task's delivery was not recorded");
            }
        }));
}

/// Opens the ledger, takes this start's generation and takes over what
/// earlier generations left running.
/// The bundled `boot-md` hook: `BOOT.md` run as one turn of the `boot`
/// session, in its lane like any other turn, never holding up the start.
fn boot_turn(shared: &Arc<Shared>, app: &App) {
    let Some(request) = app.boot_request() else {
        return;
    };
    let admitted = match shared.engine.session_key(&request) {
        Ok(key) => {
            let request = TurnRequest {
                session_key: Some(key),
                ..request
            };
            route::admit(shared, Trigger::new(Source::Boot, request)).map_err(|e| e.to_string())
        }
        Err(err) => Err(err.to_string()),
    };
    let admitted = match admitted {
        Ok(admitted) => admitted,
        Err(err) => {
            tracing::warn!(%err, "BOOT.md not run");
            return;
        }
    };
    let running = shared.clone();
    shared.turns.spawn(async move {
        match route::run(&running, admitted).await {
            Ok(_) => tracing::info!("BOOT.md ran"),
            Err(err) => tracing::warn!(err = %format!("{err:#}"), "BOOT.md turn failed"),
        }
    });
}

fn open_ledger(app: &App) -> anyhow::Result<tasks::TaskBook> {
    let mut ledger = crate::tasks::Ledger::open(&app.paths.state_store())?;
    let generation = ledger.next_generation()?;
    let recovery =
        ledger.recover_at_start(generation, app.host.now_ms(), tasks::RETRYABLE_KINDS)?;
    if !recovery.lost.is_empty() {
        tracing::warn!(
            count = recovery.lost.len(),
            "tasks left running by the previous gateway are marked lost"
        );
    }
    if !recovery.requeued.is_empty() {
        tracing::info!(count = recovery.requeued.len(), "tasks queued again");
    }
    Ok(tasks::TaskBook::new(ledger, generation))
}

/// SIGTERM, SIGINT or the caller's token.
async fn wait_for_shutdown(stop: &CancellationToken, signals: &mut StopSignals) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = signals.recv() => {}
    }
}

/// A gateway's shared state over a temporary state directory, for tests
/// of components and routes (call it inside a tokio runtime).
#[cfg(test)]
pub(crate) fn test_shared(dir: &std::path::Path, token: &str) -> Arc<Shared> {
    test_shared_with(dir, token, None, 1)
}

/// [`test_shared`] with another clock.
#[cfg(test)]
pub(crate) fn test_shared_with(
    dir: &std::path::Path,
    token: &str,
    clock: Option<Arc<dyn crate::host::Clock>>,
    generation: i64,
) -> Arc<Shared> {
    test_shared_on(dir, token, clock, generation, Default::default())
}

/// [`test_shared_with`] with the intake log's disk and retry waits.
#[cfg(test)]
pub(crate) fn test_shared_on(
    dir: &std::path::Path,
    token: &str,
    clock: Option<Arc<dyn crate::host::Clock>>,
    generation: i64,
    intake_log: crate::durable::JournalOptions,
) -> Arc<Shared> {
    let state = dir.join("state");
    let mut host = Host::with_vars(
        [("ALMANAC_STATE_DIR", state.display().to_string())],
        dir,
        dir,
        "2026-12-01T10:00:00+00:00[UTC]".parse().unwrap(),
    );
    if let Some(clock) = clock {
        host.set_clock(clock);
    }
    let options = GlobalOptions::default();
    let app = App::load(&options, host.clone()).expect("app loads");
    let intake =
        intake::Intake::open_with(&app.paths.gateway_dir(), intake_log).expect("intake opens");
    let info = GatewayInfo {
        pid: std::process::id(),
        address: "127.0.0.1".into(),
        port: 0,
        started_at_ms: host.now_ms(),
        token_source: "config".into(),
        token_file: None,
        generation: 1,
        watching: Vec::new(),
        version: "test".into(),
    };
    // The ledger in the state store, as the gateway opens it: runners
    // record their own rows in the same transactions as their tasks.
    let ledger = crate::tasks::Ledger::open(&app.paths.state_store()).expect("the ledger opens");
    let engine = Engine::new(app);
    let deliverer =
        crate::delivery::Deliverer::open(Arc::new(engine.clone())).expect("the outbox opens");
    let shared = Arc::new(Shared {
        engine,
        host,
        options,
        bus: broadcast::channel(64).0,
        registry: Arc::new(Registry::default()),
        intake,
        info,
        token: token.to_string(),
        lockout: http::Lockout::default(),
        webhooks: http::webhooks::WebhookState::default(),
        subagents: subagent_children::Children::default(),
        turns: TaskTracker::new(),
        turns_cancel: CancellationToken::new(),
        ready: AtomicBool::new(true),
        tasks: tasks::TaskBook::new(ledger, generation),
        admission: tokio::sync::Mutex::new(()),
        deliverer,
        heartbeat: heartbeat::HeartbeatState::new(true),
        cron: cron::CronState::new(),
        semantic: semantic::SemanticState::default(),
        work_ran: tokio::sync::Notify::new(),
        memory_paths_changed: tokio::sync::Notify::new(),
        chat_router: chat::RouterCache::default(),
    });
    follow_task_deliveries(&shared);
    shared
}

#[cfg(test)]
mod docs_tests;

#[cfg(test)]
mod give_back_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::{START_SETTLE, WORK_SETTLE, give_back_when_quiet};

    /// Start-up settles once; then each burst of periodic work is one
    /// give-back, shortly after its last wake, and nothing happens while
    /// no work runs.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn gives_back_after_start_and_once_per_burst_of_periodic_work() {
        let work_ran = std::sync::Arc::new(tokio::sync::Notify::new());
        let stop = CancellationToken::new();
        let given = std::sync::Arc::new(AtomicUsize::new(0));
        let task = {
            let (work_ran, stop, given) = (work_ran.clone(), stop.clone(), given.clone());
            tokio::spawn(async move {
                give_back_when_quiet(&work_ran, &stop, || async {
                    given.fetch_add(1, Ordering::SeqCst);
                })
                .await;
            })
        };
        let step = |d: Duration| tokio::time::sleep(d);
        step(START_SETTLE - Duration::from_millis(1)).await;
        assert_eq!(
            given.load(Ordering::SeqCst),
            0,
            "not before start-up settled"
        );
        step(Duration::from_millis(2)).await;
        assert_eq!(given.load(Ordering::SeqCst), 1);
        // Idle for an hour: nothing.
        step(Duration::from_secs(3600)).await;
        assert_eq!(given.load(Ordering::SeqCst), 1);
        // Three timers wake close together: one give-back after the last.
        for _ in 0..3 {
            work_ran.notify_one();
            step(WORK_SETTLE / 2).await;
            assert_eq!(given.load(Ordering::SeqCst), 1, "not while work goes on");
        }
        step(WORK_SETTLE).await;
        assert_eq!(given.load(Ordering::SeqCst), 2);
        // The next minute's sweep: one more.
        step(Duration::from_secs(60)).await;
        work_ran.notify_one();
        step(WORK_SETTLE * 2).await;
        assert_eq!(given.load(Ordering::SeqCst), 3);
        stop.cancel();
        task.await.unwrap();
    }

    /// A burst of turns (a chat's messages) is work too: once the last
    /// one ended and turns are quiet, what they freed is given back.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_burst_of_turns_is_given_back_once_it_is_over() {
        use crate::trigger::{Source, Trigger, TurnRequest};
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), "t");
        let stop = CancellationToken::new();
        let given = std::sync::Arc::new(AtomicUsize::new(0));
        let task = {
            let (shared, stop, given) = (shared.clone(), stop.clone(), given.clone());
            tokio::spawn(async move {
                give_back_when_quiet(&shared.work_ran, &stop, || async {
                    given.fetch_add(1, Ordering::SeqCst);
                })
                .await;
            })
        };
        tokio::time::sleep(START_SETTLE + Duration::from_millis(1)).await;
        assert_eq!(given.load(Ordering::SeqCst), 1);
        for n in 0..5 {
            let request = TurnRequest {
                message: format!("message {n}"),
                ..Default::default()
            };
            // No model is configured: each turn ends at once, failed.
            let ended = super::route::route(&shared, Trigger::new(Source::Api, request)).await;
            assert!(ended.is_err());
            tokio::time::sleep(WORK_SETTLE / 2).await;
            assert_eq!(given.load(Ordering::SeqCst), 1, "not while turns go on");
        }
        tokio::time::sleep(WORK_SETTLE).await;
        assert_eq!(given.load(Ordering::SeqCst), 2, "once after the burst");
        stop.cancel();
        task.await.unwrap();
    }
}
