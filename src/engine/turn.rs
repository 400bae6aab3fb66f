//! One turn in its session, in named phases: resolve (the session, a
//! reset, the model), open (the lock, the transcript, the opening hooks),
//! assemble (skills, recall, bootstrap files, tools), run (the model and
//! its tools), commit (the transcript, the entry, the events delivered)
//! and report. Which model it calls is `model.rs`'s; what it is assembled
//! from, `assemble.rs`'s; `almanac agent prompt`'s view, `prompt_view`.

use serde::Serialize;
use serde_json::Value;

use super::assemble::{AppServices, assemble};
use super::turn_session::{
    NearTheWindow, Opening, after_turn, close_cancelled, fire_opening_hooks, opening, reply_as_sent,
};
use crate::agent::compaction::{self, Report};
use crate::agent::models::{Link, Models};
use crate::agent::policy::Approver;
use crate::agent::prompt;
use crate::agent::tools::{Caller, Tools};
use crate::agent::turn::{self, Log, Settings, TurnOutcome};
use crate::app::App;
use crate::app::sessions::{session_model, stored_entry};
use crate::provider::{self, Block, Endpoint, Message, RetryPolicy, StreamSink, ToolSpec};
use crate::session::{Sessions, Started, events, transcript};
use crate::skills;
use crate::trigger::TurnRequest;

/// Whether `history` ends with a user message holding `marker`.
fn last_user_holds(history: &[Message], marker: &str) -> bool {
    match history.last() {
        Some(Message::User(blocks)) => blocks
            .iter()
            .any(|b| matches!(b, Block::Text { text } if text.contains(marker))),
        _ => false,
    }
}

/// What `almanac agent` reports.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnReport {
    pub session_key: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<Started>,
    pub model: String,
    #[serde(flatten)]
    pub outcome: TurnOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Report>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub timings: Timings,
}

/// Where a turn's time went, in ms.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Timings {
    /// Skills, memory recall, bootstrap files, system prompt.
    pub assemble_ms: f64,
    /// Whether the skills came from the previous turns' snapshot.
    pub skills: skills::stored::Origin,
    pub model_ms: f64,
    pub tools_ms: f64,
    /// Everything but the model and the tools: assembly, transcript and
    /// session writes.
    pub overhead_ms: f64,
    pub total_ms: f64,
}

/// The caller the tools of a turn in `key` serve.
fn caller(app: &App, key: &str) -> Caller {
    Caller {
        agent_id: app.agent.clone(),
        session_key: key.to_string(),
    }
}

/// What the model would be sent for a message (`almanac agent prompt`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptView {
    pub session_key: String,
    pub model: String,
    pub system: String,
    pub tools: Vec<ToolSpec>,
    /// The conversation after hygiene, with the new message last.
    pub messages: Vec<Value>,
    pub bootstrap: Vec<prompt::BootstrapFile>,
    pub estimated_tokens: usize,
    /// Whether the skills came from the previous turns' snapshot.
    pub skills: skills::stored::Origin,
}

pub(crate) fn prompt_view(app: &App, req: &TurnRequest) -> anyhow::Result<PromptView> {
    let agent = crate::trigger::check_agent(req)?;
    let app = &app.for_agent(agent.as_deref())?;
    let sessions = app.sessions(None);
    let key = sessions.resolve_key(req.session_key.as_deref());
    let entry = stored_entry(&sessions, &key);
    let kept = entry.as_ref().and_then(session_model);
    let model = app.model_without_key(req.model.as_deref().or(kept.as_deref()))?;
    let services = AppServices {
        app: app.clone(),
        read_only: true,
        gateway: None,
    };
    let (assembled, ()) = assemble(
        app,
        &model,
        &req.message,
        req.heartbeat,
        &req.shape,
        caller(app, &key),
        &services,
        || (),
    );
    let mut history = match &entry {
        Some(e) => transcript::read(&sessions.transcript_path(e))?.context(),
        None => Vec::new(),
    };
    let events = sessions.events().peek(&key);
    let lines = events::render(&events, |ts| event_time(app, ts));
    history.push(Message::User(vec![Block::text(prompt::user_text(
        &req.message,
        &lines,
    ))]));
    let (messages, _) = crate::agent::hygiene::clean(&history, model.endpoint.api);
    let estimated_tokens = compaction::estimate(&assembled.system, &messages);
    Ok(PromptView {
        session_key: key,
        model: model.reference,
        system: assembled.system,
        tools: assembled.tool_specs,
        messages: messages
            .iter()
            .map(|m| transcript::message_json(m, None, 0))
            .collect(),
        bootstrap: assembled.bootstrap,
        estimated_tokens,
        skills: assembled.skills_from,
    })
}

fn event_time(app: &App, ts: i64) -> String {
    jiff::Timestamp::from_millisecond(ts)
        .map(|t| {
            t.to_zoned_datetime(app.user_time_zone())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_default()
}

/// The queued events a turn delivers: those pending, less any an earlier
/// turn's transcript records as delivered (the queue not updated after it:
/// a crash), which are taken off the queue now instead of repeated.
fn events_to_deliver(
    queue: &events::Queue,
    key: &str,
    pending: std::io::Result<events::Pending>,
    stored: &transcript::Transcript,
    now: jiff::Timestamp,
    warnings: &mut Vec<String>,
) -> Vec<events::SystemEvent> {
    let pending = match pending {
        Ok(pending) => pending,
        Err(err) => {
            warnings.push(format!("queued system events not read: {err}"));
            return Vec::new();
        }
    };
    warnings.extend(pending.warnings);
    if pending.events.is_empty() {
        return pending.events;
    }
    let delivered = events::delivered(stored);
    let (done, waiting): (Vec<_>, Vec<_>) = pending
        .events
        .into_iter()
        .partition(|e| delivered.contains(&e.fingerprint()));
    if !done.is_empty()
        && let Err(err) = consume(queue, key, &done, now, warnings)
    {
        warnings.push(format!("delivered system events still queued: {err}"));
    }
    waiting
}

/// Takes `events` off `key`'s queue.
fn consume(
    queue: &events::Queue,
    key: &str,
    events: &[events::SystemEvent],
    now: jiff::Timestamp,
    warnings: &mut Vec<String>,
) -> std::io::Result<()> {
    let delivered: Vec<String> = events
        .iter()
        .map(events::SystemEvent::fingerprint)
        .collect();
    warnings.extend(queue.consume(key, &delivered, now)?);
    Ok(())
}

/// Where a turn's async work (its model calls) runs.
pub(crate) enum Driver {
    /// A runtime driven elsewhere; the turn runs on one of its blocking
    /// threads (the gateway, and the engine's lanes).
    Handle(tokio::runtime::Handle),
    /// A current-thread runtime this thread drives (a command's single
    /// turn, run on the main thread).
    Owned(std::sync::Arc<tokio::runtime::Runtime>),
}

impl Driver {
    fn block_on<F: std::future::Future>(&self, work: F) -> F::Output {
        match self {
            Driver::Handle(handle) => handle.block_on(work),
            Driver::Owned(runtime) => runtime.block_on(work),
        }
    }
}

/// What runs a turn besides the app: where its model calls run, where
/// model clients come from, and the signal that stops it.
pub(crate) struct TurnContext {
    pub driver: Driver,
    pub connect:
        std::sync::Arc<dyn Fn(Endpoint) -> std::sync::Arc<dyn provider::Provider> + Send + Sync>,
    pub cancel: tokio_util::sync::CancellationToken,
    /// The gateway, for a turn in its own process (the `cron` tool reaches
    /// it directly instead of over its control API).
    pub gateway: Option<std::sync::Arc<dyn crate::app::gateway::GatewayPort>>,
}

/// Runs one turn in its session, holding the session's lock file for
/// the whole turn. Call it from a blocking thread of `ctx.driver`'s
/// runtime (the engine does), or the thread that owns it. `retry` is the
/// retry policy (tests pass one that records its waits); `approver` is
/// asked when a command needs a person's approval (`tools.exec.ask`).
///
/// The phases, in order: [`resolve`], [`open`], [`prepare`], [`run`],
/// [`commit`] and [`report`].
pub(crate) fn run_turn(
    app: &App,
    req: &TurnRequest,
    retry: &RetryPolicy,
    sink: &mut dyn StreamSink,
    approver: &dyn Approver,
    ctx: &TurnContext,
) -> anyhow::Result<TurnReport> {
    let started_at = std::time::Instant::now();
    // Everything below works in the agent's workspace and sessions.
    let agent = crate::trigger::check_agent(req)?;
    let app = &app.for_agent(agent.as_deref())?;
    let resolved = resolve(app, req)?;
    let mut opened = open(app, req, resolved)?;
    let prepared = prepare(app, req, ctx, &mut opened)?;
    let answering = Answering {
        retry,
        sink,
        approver,
    };
    let ran = run(app, req, answering, ctx, &opened, &prepared)?;
    let ran = commit(app, req, &mut opened, prepared, ran)?;
    Ok(report(opened, ran, started_at))
}

/// Resolve: the session key, what opens the turn (a reset, a model
/// named), and the model with its fallbacks. Resolved before the session
/// is touched: a turn that cannot call a model (a `/new` naming one that
/// cannot be used included) leaves the session as it is.
struct Resolved {
    sessions: Sessions,
    key: String,
    opening: Opening,
    now: jiff::Timestamp,
    model: super::model::Model,
    fallbacks: Vec<Link>,
    warnings: Vec<String>,
}

fn resolve(app: &App, req: &TurnRequest) -> anyhow::Result<Resolved> {
    app.ensure_state_dir()?;
    app.paths.ensure_workspace()?;
    let sessions = app.sessions(None);
    let key = sessions.resolve_key(req.session_key.as_deref());
    let opening = opening(app, req);
    let now = app.host.now_ts();
    // `/new provider/model` names the new session's model; then `--model`,
    // then the model the session keeps (as stored before a reset), then
    // `agents.defaults.model`.
    let chosen = opening.model_choice.as_deref().or(req.model.as_deref());
    let kept = match chosen {
        Some(_) => None,
        None => stored_entry(&sessions, &key)
            .as_ref()
            .and_then(session_model),
    };
    let model = app.model(chosen.or(kept.as_deref()))?;
    let mut warnings = Vec::new();
    let fallbacks = app.fallback_models(&model, req.shape.fallbacks.as_deref(), &mut warnings);
    Ok(Resolved {
        sessions,
        key,
        opening,
        now,
        model,
        fallbacks,
        warnings,
    })
}

/// The model's client: being set up on a thread of its own, or at hand.
enum Connecting {
    Thread(std::thread::JoinHandle<std::sync::Arc<dyn crate::provider::Provider>>),
    Done(std::sync::Arc<dyn crate::provider::Provider>),
}

/// Open: the session's turn lock (held until the turn ends), the current
/// session (started or reset as the message or the policy says), the
/// opening hooks, and the message the model gets.
struct Opened {
    _lock: crate::durable::HeldLock,
    resolved: Resolved,
    current: crate::session::Current,
    message: String,
}

fn open(app: &App, req: &TurnRequest, resolved: Resolved) -> anyhow::Result<Opened> {
    let Resolved {
        sessions, key, now, ..
    } = &resolved;
    let Opening {
        explicit,
        typed,
        model_choice,
        message,
    } = &resolved.opening;
    // From here the session is this turn's alone (a turn that cannot
    // call a model has created nothing).
    let lock = crate::durable::lock_file(&sessions.turn_lock_path(key))?;
    let hooks_on = app.config.config.hooks.internal.enabled;
    let previous = (hooks_on && explicit.is_some()).then(|| stored_entry(sessions, key));
    let (current, warnings) = sessions.current(
        key,
        req.chat_channel.as_deref(),
        *now,
        &app.paths.workspace,
        *explicit,
        false,
    )?;
    if req.heartbeat.is_none() {
        fire_opening_hooks(
            app,
            sessions,
            key,
            req,
            typed.then_some(previous).flatten(),
            &current,
        );
    }
    if let Some(choice) = model_choice {
        sessions.record(key, *now, |e| e.model_override = Some(choice.clone()))?;
    }
    let message = if message.trim().is_empty() {
        "A new session was started. Greet the user briefly.".to_string()
    } else {
        message.clone()
    };
    let mut resolved = resolved;
    resolved.warnings.extend(warnings);
    Ok(Opened {
        _lock: lock,
        resolved,
        current,
        message,
    })
}

/// Prepare: the prompt assembled (skills, recall, bootstrap files,
/// tools) while the model's client is set up and the session's queued
/// events and transcript are read; the model chain; a due memory scan
/// started to run alongside the model.
struct Prepared {
    services: AppServices,
    assembled: super::assemble::Assembled,
    assemble_ms: f64,
    stored: transcript::Transcript,
    queue: events::Queue,
    events: Vec<events::SystemEvent>,
    settings: Settings,
    models: Models,
    scanning: Option<std::thread::JoinHandle<anyhow::Result<Vec<String>>>>,
}

fn prepare(
    app: &App,
    req: &TurnRequest,
    ctx: &TurnContext,
    opened: &mut Opened,
) -> anyhow::Result<Prepared> {
    let Opened {
        resolved, current, ..
    } = opened;
    let (key, now, model) = (&resolved.key, resolved.now, &resolved.model);
    // The HTTP client (and for HTTPS the system's trust store) is set up
    // while the prompt is assembled.
    // A server keeps its clients: it gets one at once.
    let endpoint = model.endpoint.clone();
    let connect = ctx.connect.clone();
    let connecting = match ctx.gateway {
        None => Connecting::Thread(std::thread::spawn(move || connect(endpoint))),
        Some(_) => Connecting::Done(connect(endpoint)),
    };
    let services = AppServices {
        app: app.clone(),
        read_only: false,
        gateway: ctx.gateway.clone(),
    };
    let assembly_started = std::time::Instant::now();
    // The events stay queued until the turn that carries them is synced
    // to the transcript.
    let queue = resolved.sessions.events();
    let (assembled, (pending, stored)) = assemble(
        app,
        model,
        &opened.message,
        req.heartbeat,
        &req.shape,
        caller(app, key),
        &services,
        || {
            (
                queue.pending(key, now),
                transcript::read(&current.transcript),
            )
        },
    );
    let assemble_ms = assembly_started.elapsed().as_secs_f64() * 1000.0;
    let stored = stored?;
    let warnings = &mut resolved.warnings;
    warnings.extend(stored.diagnostics.iter().cloned());
    let events = events_to_deliver(&queue, key, pending, &stored, now, warnings);
    let defaults = &app.config.config.agents.defaults;
    let settings = Settings {
        max_tokens: defaults.max_tokens,
        max_steps: defaults.max_steps.max(1),
        thinking: req.shape.thinking,
    };
    let client = match connecting {
        Connecting::Thread(thread) => thread
            .join()
            .map_err(|_| anyhow::anyhow!("setting up the HTTP client failed"))?,
        Connecting::Done(client) => client,
    };
    let first = Link::new(
        model.reference.clone(),
        model.name.clone(),
        model.endpoint.clone(),
    );
    let fallbacks = std::mem::take(&mut resolved.fallbacks);
    let models = Models::new(first, client, fallbacks, ctx.connect.clone());
    // A due full scan of the memory index runs while the model answers.
    let scanning = assembled.full_scan_due.then(|| {
        let app = app.clone();
        std::thread::spawn(move || {
            app.memory()
                .synced_index(app.wall_ns())
                .map(|(_, report)| report.warnings)
                .map_err(anyhow::Error::from)
        })
    });
    Ok(Prepared {
        services,
        assembled,
        assemble_ms,
        stored,
        queue,
        events,
        settings,
        models,
        scanning,
    })
}

/// A turn that ran and was committed: what [`report`] tells of it.
struct Ran {
    prepared: Prepared,
    compaction: Option<Report>,
    outcome: TurnOutcome,
}

/// Run: compaction when the conversation nears the window, then the
/// model and its tools; the delivered events recorded with the answer.
/// A cancelled turn closes its message with an aborted answer. Gives the
/// transcript file whose last writes are not yet synced.
/// How the model is called and answered: the retry policy, where its
/// text streams, who approves a command that needs a person.
struct Answering<'a> {
    retry: &'a RetryPolicy,
    sink: &'a mut dyn StreamSink,
    approver: &'a dyn Approver,
}

fn run(
    app: &App,
    req: &TurnRequest,
    answering: Answering<'_>,
    ctx: &TurnContext,
    opened: &Opened,
    prepared: &Prepared,
) -> anyhow::Result<(Option<Report>, TurnOutcome, Option<std::path::PathBuf>)> {
    let (key, current) = (&opened.resolved.key, &opened.current);
    let Prepared {
        assembled,
        stored,
        models,
        settings,
        events,
        ..
    } = prepared;
    let Answering {
        retry,
        sink,
        approver,
    } = answering;
    let host = app.host.clone();
    let clock = move || host.now_ts();
    let clock_now = app.host.now_ts();
    let mut log = Log {
        path: &current.transcript,
        leaf: stored.leaf().map(|e| e.id.clone()),
        taken: stored.ids(),
        clock: &clock,
        unsynced: false,
    };
    let tools = Tools {
        settings: assembled.tools.clone(),
        services: &prepared.services,
        approver,
    };
    let lines = events::render(events, |ts| event_time(app, ts));
    let user = Message::User(vec![Block::text(prompt::user_text(
        &opened.message,
        &lines,
    ))]);
    let work = async {
        let near = NearTheWindow {
            app,
            key,
            system: &assembled.system,
            message: &opened.message,
            memory_write: assembled.memory_write,
            transcript: &current.transcript,
        };
        let (history, compaction) = near
            .compact(models, retry, settings, stored, &tools, &mut log)
            .await?;
        // A run started again after a crash answers the message its first
        // start wrote, instead of writing it twice.
        let user = match &req.shape.resume_marker {
            Some(marker) if last_user_holds(&history, marker) => None,
            _ => Some(user),
        };
        let system = &assembled.system;
        let outcome = turn::run(
            models, retry, settings, system, &tools, history, user, &mut log, sink,
        )
        .await?;
        Ok::<_, anyhow::Error>((compaction, outcome))
    };
    let cancel = ctx.cancel.clone();
    let finished = ctx.driver.block_on(async {
        tokio::select! {
            done = work => Some(done),
            () = cancel.cancelled() => None,
        }
    });
    let Some(finished) = finished else {
        // The user's message may be in the transcript without its answer:
        // an aborted answer closes it, so the next turn sees a whole pair.
        close_cancelled(&mut log, &current.transcript, models)?;
        return Err(crate::engine::Cancelled("stopped while it ran".into()).into());
    };
    let (compaction, outcome) = finished?;
    if !events.is_empty() {
        // Flushed with the answer: the next turn knows these were
        // delivered even if the queue is not updated below.
        log.append_unsynced(vec![(
            crate::session::iso(clock_now),
            events::delivery_record(events),
        )])?;
    }
    Ok((compaction, outcome, log.take_pending_sync()))
}

/// Commit: the transcript synced and the session entry updated (both at
/// once: different files), an isolated run's own row, the delivered
/// events taken off the queue, the memory scan's warnings.
fn commit(
    app: &App,
    req: &TurnRequest,
    opened: &mut Opened,
    prepared: Prepared,
    (compaction, outcome, unsynced): (Option<Report>, TurnOutcome, Option<std::path::PathBuf>),
) -> anyhow::Result<Ran> {
    let resolved = &mut opened.resolved;
    let (sessions, key, now) = (&resolved.sessions, &resolved.key, resolved.now);
    let warnings = &mut resolved.warnings;
    let models = &prepared.models;
    let usage = outcome.usage;
    let compacted = compaction.is_some();
    let flushed = compaction
        .as_ref()
        .is_some_and(|c| c.flushed_notes > 0 || prepared.assembled.memory_write);
    let (synced, recorded) = crate::par::join(
        prepared.services.gateway.is_none(),
        || match &unsynced {
            Some(path) => std::fs::File::open(path).and_then(|f| f.sync_data()),
            None => Ok(()),
        },
        || {
            sessions.record(key, app.host.now_ts(), |e| {
                after_turn(e, req, now, models, usage, compacted.then_some(flushed));
            })
        },
    );
    synced.map_err(|e| anyhow::anyhow!("cannot sync the transcript: {e}"))?;
    warnings.extend(recorded?);
    if req.shape.isolated_run {
        let retention = app.config.config.cron.session_retention.ms();
        warnings.extend(sessions.record_run(key, app.host.now_ts(), retention)?);
    }
    warnings.extend(models.fell_back());
    // The message carrying the events is synced: they leave the queue.
    if !prepared.events.is_empty()
        && let Err(err) = consume(&prepared.queue, key, &prepared.events, now, warnings)
    {
        warnings.push(format!(
            "system events delivered but still queued ({err}); the next turn drops them"
        ));
    }
    let mut prepared = prepared;
    if let Some(scanning) = prepared.scanning.take() {
        match scanning.join() {
            Ok(Ok(scan_warnings)) => warnings.extend(scan_warnings),
            Ok(Err(err)) => warnings.push(format!("memory index not rescanned: {err}")),
            Err(_) => warnings.push("memory index not rescanned".to_string()),
        }
    }
    let outcome = reply_as_sent(app, req, key, outcome);
    Ok(Ran {
        prepared,
        compaction,
        outcome,
    })
}

/// Report: what the turn did and where its time went.
fn report(opened: Opened, ran: Ran, started_at: std::time::Instant) -> TurnReport {
    let Ran {
        prepared,
        compaction,
        outcome,
    } = ran;
    let total_ms = started_at.elapsed().as_secs_f64() * 1000.0;
    let timings = Timings {
        assemble_ms: prepared.assemble_ms,
        skills: prepared.assembled.skills_from,
        model_ms: outcome.model_ms,
        tools_ms: outcome.tools_ms,
        overhead_ms: total_ms - outcome.model_ms - outcome.tools_ms,
        total_ms,
    };
    TurnReport {
        session_key: opened.resolved.key,
        session_id: opened.current.entry.session_id,
        started: opened.current.started,
        model: prepared.models.reference().to_string(),
        outcome,
        compaction,
        warnings: opened.resolved.warnings,
        timings,
    }
}

#[cfg(test)]
#[path = "cron_tool_tests.rs"]
mod cron_tool_tests;
