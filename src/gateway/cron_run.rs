//! Running one cron slot: a `main` job's event queued (and the heartbeat
//! run now for `wakeMode: now`), or an agent turn shaped by the job's
//! payload (its tools, light context, thinking level, model and
//! fallbacks, untrusted external content, a new session for every
//! isolated run), then its end recorded: the task and the slot in one
//! transaction, the run-log line, what the run delivers.
//!
//! Invariants: a reminder the model scheduled is queued untrusted; an
//! external message reaches the model inside markers unless the job
//! allows it plain; a run's end is recorded whatever became of it.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::cron::{Due, EVENT_TIMEOUT, TURN_TIMEOUT};
use super::cron_delivery::ResultTarget;
use super::intake::Record;
use crate::app::App;
use almanac_cron::Slots;

use crate::cron::job::{CronJob, JobState, PayloadKind, RunStatus, SessionTarget, WakeMode};
use crate::cron::runlog::{self, RunRecord};
use crate::cron::slots::{self, Ended, SlotTrigger};
use crate::tasks::record::Lease;
use crate::tasks::{DeliveryStatus, NewTask, Runtime, Terminal, TerminalStatus};

/// Runs one claimed slot that takes time, then records its end: the
/// task and the slot in one transaction, the run log, the state.
pub(super) async fn run_slot(shared: &Arc<Shared>, run: Claimed) -> Option<Finished> {
    let outcome = match &run.job {
        Ok(job) => execute(shared, job, &run).await,
        Err(problem) => unreadable(problem),
    };
    let ended = shared.host.now_ms();
    let app = shared.engine.app();
    let record = run_record(&run, &outcome, ended);
    let record =
        super::cron_delivery::deliver_end(shared, run.job.as_ref().ok(), run.due.slot_ms, record)
            .await;
    let delivered = (record.delivered, record.delivery_error.clone());
    let settled = settled_delivery(&record);
    let row = ended_slot(&run, &outcome);
    let end = terminal(&outcome);
    let task_id = run.task_id.clone();
    let book = shared.clone();
    let runs_dir = shared.cron.store(&app).runs_dir();
    let _ = shared
        .engine
        .blocking(move || {
            let written = book.tasks.with(|ledger| {
                ledger.batch(|batch| {
                    batch.finish(&task_id, end, ended)?;
                    if let Some(settled) = settled {
                        batch.settle_delivery(&task_id, settled, ended)?;
                    }
                    slots::finish_in(batch.connection(), &[row], ended)?;
                    Ok(())
                })
            });
            if let Err(err) = written {
                tracing::warn!(%err, "the end of a cron run was not recorded");
            }
            let limits = runlog::Limits::from(&app.config.config.cron.run_log);
            if let Err(err) = runlog::append(&runs_dir, &record, limits) {
                tracing::warn!(%err, "cron run log not written");
            }
        })
        .await;
    finished(run, outcome, ended).map(|mut end| {
        (end.delivered, end.delivery_error) = delivered;
        end
    })
}

/// How the delivery of a run's result ended, as its run-log line says:
/// `None` while a webhook is still being tried (the deliverer tells the
/// task); nothing sent is `not_applicable`.
pub(super) fn settled_delivery(record: &RunRecord) -> Option<DeliveryStatus> {
    match record.delivery_status.as_deref() {
        Some("unknown") => None,
        Some("delivered") => Some(DeliveryStatus::Delivered),
        Some("not-delivered") => Some(DeliveryStatus::Failed),
        _ => Some(DeliveryStatus::NotApplicable),
    }
}

/// A `main` job's event, queued on its session (blocking: the intake
/// writes). Empty text is a skipped run.
fn queue_event(shared: &Shared, app: &App, job: &CronJob) -> RunOutcome {
    match event_record(shared, app, job) {
        Ok(record) => {
            let mut records = [record];
            let accepted = shared
                .intake
                .accept_all(&mut records)
                .map_err(|e| e.to_string());
            let [record] = records;
            queued(&accepted, record)
        }
        Err(skipped) => skipped,
    }
}

/// The intake record of a `main` job's event; a job without one is a
/// skipped run.
pub(super) fn event_record(
    shared: &Shared,
    app: &App,
    job: &CronJob,
) -> Result<Record, RunOutcome> {
    let app = job_app(app, job)?;
    let sessions = app.sessions(Some(&app.agent));
    if !matches!(
        (&job.session_target, job.payload.kind),
        (SessionTarget::Main, PayloadKind::SystemEvent)
    ) {
        return Err(RunOutcome {
            status: Ended::Skipped,
            error: Some("the job's payload does not fit its session target".into()),
            summary: None,
            session_key: None,
        });
    }
    let text = job.payload.text.as_deref().unwrap_or("").trim().to_string();
    if text.is_empty() {
        return Err(RunOutcome {
            status: Ended::Skipped,
            error: Some("main job requires non-empty systemEvent text".into()),
            summary: None,
            session_key: None,
        });
    }
    let mode = match job.wake_mode {
        WakeMode::Now => "now",
        WakeMode::NextHeartbeat => "next-heartbeat",
    };
    Ok(Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: "cron".into(),
        session_key: sessions.resolve_key(job.session_key.as_deref()),
        text,
        mode: mode.to_string().into(),
        // A reminder the model scheduled is the model's words.
        trusted: !job.created_by_agent(),
        hook: None,
        replay: None,
    })
}

/// The outcome of queueing `record`'s event.
pub(super) fn queued(accepted: &Result<(), String>, record: Record) -> RunOutcome {
    match accepted {
        Ok(()) => RunOutcome {
            status: Ended::Ok,
            error: None,
            summary: Some(record.text),
            session_key: Some(record.session_key),
        },
        Err(err) => RunOutcome {
            status: Ended::Error,
            error: Some(format!("the event was not queued: {err}")),
            summary: None,
            session_key: Some(record.session_key),
        },
    }
}

/// The app of the agent `job` runs as; a run for an agent gone from the
/// config ends in an error.
fn job_app(app: &App, job: &CronJob) -> Result<App, RunOutcome> {
    app.for_agent(job.agent_id.as_deref())
        .map_err(|err| RunOutcome {
            status: Ended::Error,
            error: Some(format!("{err:#}")),
            summary: None,
            session_key: None,
        })
}

/// Runs the payload of a job whose run takes time ([`takes_time`]), for
/// the slot `slot_ms`, started at `started_ms`.
async fn execute(shared: &Arc<Shared>, job: &CronJob, run: &Claimed) -> RunOutcome {
    let (slot_ms, started_ms) = (run.due.slot_ms, run.started_ms);
    let app = shared.engine.app();
    match (&job.session_target, job.payload.kind) {
        (SessionTarget::Main, PayloadKind::SystemEvent) => {
            let queued = {
                let shared = shared.clone();
                let job = job.clone();
                let app = app.clone();
                shared
                    .engine
                    .clone()
                    .blocking(move || queue_event(&shared, &app, &job))
                    .await
            };
            let queued = match queued {
                Ok(outcome) => outcome,
                Err(err) => RunOutcome {
                    status: Ended::Error,
                    error: Some(format!("the event was not queued: {err}")),
                    summary: None,
                    session_key: None,
                },
            };
            if queued.status != Ended::Ok {
                return queued;
            }
            let key = queued.session_key.clone().unwrap_or_default();
            let reason = format!("cron:{}", job.id);
            let event = tokio::time::timeout(
                EVENT_TIMEOUT,
                super::heartbeat::run(shared, job.agent_id.as_deref(), &reason, true, true),
            )
            .await;
            match event {
                Err(_) => RunOutcome {
                    status: Ended::TimedOut,
                    error: Some("cron: job execution timed out".into()),
                    summary: None,
                    session_key: Some(key),
                },
                Ok(Err(err)) => RunOutcome {
                    status: Ended::Error,
                    error: Some(format!("{err:#}")),
                    summary: None,
                    session_key: Some(key),
                },
                Ok(Ok(event)) => {
                    use crate::activity::runs::RunStatus as Beat;
                    let status = match event.status {
                        Beat::Failed => Ended::Error,
                        Beat::Skipped => Ended::Skipped,
                        _ => Ended::Ok,
                    };
                    RunOutcome {
                        status,
                        error: event.reason.clone().filter(|_| status != Ended::Ok),
                        summary: event.preview,
                        session_key: Some(key),
                    }
                }
            }
        }
        (SessionTarget::Main, _) | (_, PayloadKind::SystemEvent) => RunOutcome {
            status: Ended::Skipped,
            error: Some("the job's payload does not fit its session target".into()),
            summary: None,
            session_key: None,
        },
        (target, PayloadKind::AgentTurn) => {
            // Too late for its result to be delivered.
            let stale = crate::cron::outcome::is_stale(slot_ms, started_ms);
            let app = match job_app(&app, job) {
                Ok(app) => app,
                Err(outcome) => return outcome,
            };
            agent_turn(shared, &app, job, target, stale, &run.task_id).await
        }
    }
}

/// An `agentTurn` job: a turn in its own session, its answer delivered
/// as the job says (not at all when `stale`: the run came too late).
async fn agent_turn(
    shared: &Arc<Shared>,
    app: &App,
    job: &CronJob,
    target: &SessionTarget,
    stale: bool,
    task_id: &str,
) -> RunOutcome {
    let key = match target {
        SessionTarget::Session(id) => id.clone(),
        _ => format!("agent:{}:cron:{}", app.agent, job.id),
    };
    let message = job.payload.message.as_deref().unwrap_or("").trim();
    if message.is_empty() {
        return RunOutcome {
            status: Ended::Skipped,
            error: Some("agentTurn job requires a message".into()),
            summary: None,
            session_key: Some(key),
        };
    }
    let now = shared.host.now_ts();
    let time = almanac_heartbeat::prompt::time_text(&now.to_zoned_datetime(app.user_time_zone()));
    let text = almanac_heartbeat::prompt::with_current_time(job_message(job, message, now), &time);
    // The turn keeps the acknowledgement token in its reply only where
    // the channel the result goes to shows acknowledgements (`showOk`).
    let results = super::cron_delivery::result_target(job);
    let request = crate::trigger::TurnRequest {
        message: text,
        session_key: Some(key.clone()),
        agent: Some(app.agent.clone()),
        model: job.payload.model.clone(),
        heartbeat: None,
        channel: results.channel().map(str::to_string),
        shape: turn_shape(job, target),
        ..Default::default()
    };
    let mut trigger = crate::trigger::Trigger::new(crate::trigger::Source::Cron, request);
    trigger.timeout = match job.payload.timeout_seconds {
        Some(0) => None,
        Some(s) => Some(Duration::from_secs(s)),
        None => Some(TURN_TIMEOUT),
    };
    let report = match super::route::route(shared, trigger).await {
        Err(err) if err.is::<super::route::TimedOut>() => {
            return RunOutcome {
                status: Ended::TimedOut,
                error: Some("cron: job execution timed out".into()),
                summary: None,
                session_key: Some(key),
            };
        }
        Err(err) => {
            return RunOutcome {
                status: Ended::Error,
                error: Some(format!("{err:#}")),
                summary: None,
                session_key: Some(key),
            };
        }
        Ok(report) => report,
    };
    // A webhook gets the run's event with the reply as its summary, at
    // the run's end.
    let text = report.outcome.reply.trim().to_string();
    let summary = Some(text.chars().take(2000).collect::<String>())
        .filter(|s| !s.is_empty() && !report.outcome.silent);
    // The run log knows an isolated run by its own row.
    let run_key = if matches!(target, SessionTarget::Isolated) {
        format!("{key}:run:{}", report.session_id)
    } else {
        key.clone()
    };
    let ok = RunOutcome {
        status: Ended::Ok,
        error: None,
        summary,
        session_key: Some(run_key),
    };
    if text.is_empty()
        || report.outcome.silent
        || stale
        || results != super::cron_delivery::ResultTarget::Outbox
    {
        return ok;
    }
    let item = crate::delivery::Item {
        source: crate::delivery::Source::Cron,
        session_key: key.clone(),
        agent_id: app.agent.clone(),
        text,
        task_id: Some(task_id.to_string()),
        to: None,
        channel: None,
        account_id: None,
    };
    let announce = super::cron_delivery::announce_target(shared, app, job).await;
    let failure = match shared.deliverer.deliver(item, &announce).await {
        Ok(delivery) => match delivery.state {
            crate::delivery::DeliveryState::Failed { reason } => Some(reason),
            _ => None,
        },
        Err(err) => Some(err.to_string()),
    };
    if failure.is_some() {
        let book = shared.clone();
        let task = task_id.to_string();
        let _ = shared
            .engine
            .blocking(move || {
                let now = book.host.now_ms();
                book.tasks
                    .with(|l| l.set_delivery(&task, DeliveryStatus::Failed, now))
            })
            .await;
    }
    match failure {
        // A failed delivery fails the run unless the job says it is
        // best-effort.
        Some(reason) if job.delivery.as_ref().and_then(|d| d.best_effort) != Some(true) => {
            RunOutcome {
                status: Ended::Error,
                error: Some(format!("delivery failed: {reason}")),
                ..ok
            }
        }
        Some(reason) => {
            tracing::warn!(job = %job.id, %reason, "cron result not delivered (best effort)");
            ok
        }
        None => ok,
    }
}

/// What a job's payload asks of its turn: its tools, light context,
/// thinking level and fallback models; an `isolated` job a new session
/// every run.
fn turn_shape(job: &CronJob, target: &SessionTarget) -> crate::trigger::TurnShape {
    let payload = &job.payload;
    crate::trigger::TurnShape {
        tools_allow: payload.tools_allow.clone(),
        light_context: payload.light_context == Some(true),
        thinking: payload
            .thinking
            .as_deref()
            .and_then(crate::trigger::Thinking::parse),
        fallbacks: payload.fallbacks.clone(),
        isolated_run: matches!(target, SessionTarget::Isolated),
        // In a session of its own (`session:<id>`), a run a crash cut off
        // is answered by the next, not written twice.
        resume_marker: (!matches!(target, SessionTarget::Isolated)).then(|| {
            if external_source(job).is_some() {
                format!("| Job ID: {} |", job.id)
            } else {
                format!("[cron:{} ", job.id)
            }
        }),
        subagent_depth: None,
    }
}

/// Where a job's message came from when it reaches the model as untrusted
/// data: its `externalContentSource`, unless `allowUnsafeExternalContent`.
fn external_source(job: &CronJob) -> Option<&str> {
    let payload = &job.payload;
    payload
        .external_content_source
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter(|_| payload.allow_unsafe_external_content != Some(true))
}

/// The message of a job's turn: `[cron:<id> <name>] <message>`; a message
/// that came from outside (`externalContentSource`) is untrusted data
/// inside markers unless the job says `allowUnsafeExternalContent`.
fn job_message(job: &CronJob, message: &str, now: jiff::Timestamp) -> String {
    match external_source(job) {
        Some(source) => super::http::external::wrap(
            message,
            super::http::external::source_label(source),
            &job.name,
            &job.id,
            &now.to_string(),
        ),
        _ => format!("[cron:{} {}] {message}", job.id, job.name),
    }
}

/// How one run ended.
pub(super) struct RunOutcome {
    pub(super) status: Ended,
    pub(super) error: Option<String>,
    pub(super) summary: Option<String>,
    pub(super) session_key: Option<String>,
}

/// A run that ended, for the runner to settle.
pub(super) struct Finished {
    pub(super) id: String,
    pub(super) trigger: SlotTrigger,
    pub(super) job: Arc<CronJob>,
    pub(super) status: Ended,
    pub(super) error: Option<String>,
    pub(super) started_ms: i64,
    pub(super) ended_ms: i64,
    /// Whether the result reached its destination (unset: not known yet).
    pub(super) delivered: Option<bool>,
    pub(super) delivery_error: Option<String>,
}

/// A slot claimed for a run, with its job and its task.
pub(super) struct Claimed {
    pub(super) due: Due,
    /// `cron:<jobId>:<startedMs>`: the task's run id and the run log's.
    pub(super) run_id: String,
    /// The job as its text reads (an error when it no longer does).
    pub(super) job: Result<Arc<CronJob>, String>,
    pub(super) task_id: String,
    pub(super) started_ms: i64,
}

/// Whether a run of `job` takes time (a turn, a heartbeat run), so it
/// runs on its own under the concurrency limit; the rest only queue an
/// event (or are skipped) and run in the tick.
pub(super) fn takes_time(job: &CronJob) -> bool {
    match (&job.session_target, job.payload.kind) {
        (SessionTarget::Main, PayloadKind::SystemEvent) => job.wake_mode == WakeMode::Now,
        (SessionTarget::Main, _) | (_, PayloadKind::SystemEvent) => false,
        (_, PayloadKind::AgentTurn) => true,
    }
}

/// The run id of a run of `job_id` started at `started` ms.
pub(super) fn run_id(job_id: &str, started: i64) -> String {
    format!("cron:{job_id}:{started}")
}

/// The task of one run (`runtime: cron`, run id `cron:<job>:<started>`).
pub(super) fn run_task(
    job_id: &str,
    job: Option<&CronJob>,
    started: i64,
    generation: i64,
) -> NewTask {
    let name = job.map_or("", |j| j.name.as_str());
    let mut new = NewTask::new(
        Runtime::Cron,
        format!("cron:{job_id}"),
        format!("Cron: {name}"),
    );
    new.source_id = Some(job_id.to_string());
    new.run_id = Some(run_id(job_id, started));
    new.agent_id = Some(
        job.and_then(|j| j.agent_id.clone())
            .unwrap_or_else(|| crate::trigger::AGENT_ID.to_string()),
    );
    new.label = Some(format!("Cron: {name}"));
    // A run whose result goes somewhere has a delivery to follow.
    if job.is_some_and(|j| super::cron_delivery::result_target(j) != ResultTarget::None) {
        new.notify_policy = crate::tasks::vocab::NotifyPolicy::DoneOnly;
        new.delivery_status = DeliveryStatus::Pending;
    }
    new.running = Some(Lease {
        generation,
        until_ms: started + super::tasks::LEASE.as_millis() as i64,
    });
    new
}

pub(super) fn terminal(outcome: &RunOutcome) -> Terminal {
    Terminal {
        status: match outcome.status {
            Ended::Ok | Ended::Skipped => TerminalStatus::Succeeded,
            Ended::Error => TerminalStatus::Failed,
            Ended::TimedOut => TerminalStatus::TimedOut,
        },
        error: outcome.error.clone(),
        terminal_summary: None,
        terminal_outcome: None,
    }
}

pub(super) fn ended_slot(run: &Claimed, outcome: &RunOutcome) -> slots::EndedSlot {
    (
        run.due.id.clone(),
        run.due.slot_ms,
        outcome.status,
        outcome.error.clone(),
        Some(run.task_id.clone()),
    )
}

pub(super) fn run_status(outcome: &RunOutcome) -> RunStatus {
    status_of(outcome.status)
}

/// The run-log status of a run that ended `ended`.
pub(super) fn status_of(ended: Ended) -> RunStatus {
    match ended {
        Ended::Ok => RunStatus::Ok,
        Ended::Skipped => RunStatus::Skipped,
        Ended::Error | Ended::TimedOut => RunStatus::Error,
    }
}

/// The run log line of one run.
pub(super) fn run_record(run: &Claimed, outcome: &RunOutcome, ended: i64) -> RunRecord {
    let mut record = RunRecord::finished(&run.due.id, ended);
    record.status = Some(run_status(outcome));
    record.error = outcome.error.clone();
    record.summary = outcome.summary.clone();
    record.session_key = outcome.session_key.clone();
    record.run_at_ms = Some(run.started_ms);
    record.duration_ms = Some(ended - run.started_ms);
    record
        .extra
        .insert("slotMs".into(), serde_json::json!(run.due.slot_ms));
    record
        .extra
        .insert("runId".into(), serde_json::json!(run.run_id));
    record
        .extra
        .insert("taskId".into(), serde_json::json!(run.task_id));
    record
}

/// The outcome of a run whose job could no longer be read.
pub(super) fn unreadable(problem: &str) -> RunOutcome {
    RunOutcome {
        status: Ended::Error,
        error: Some(problem.to_string()),
        summary: None,
        session_key: None,
    }
}

/// What the runner settles after `run` ended with `outcome` (nothing for
/// a job that could not be read).
pub(super) fn finished(run: Claimed, outcome: RunOutcome, ended_ms: i64) -> Option<Finished> {
    let job = run.job.ok()?;
    Some(Finished {
        id: run.due.id,
        trigger: run.due.trigger,
        job,
        status: outcome.status,
        error: outcome.error,
        started_ms: run.started_ms,
        ended_ms,
        delivered: None,
        delivery_error: None,
    })
}

/// Whether the state after a run differs from the one before in what the
/// next run counts from.
pub(super) fn carries_over(before: &JobState, after: &JobState) -> bool {
    before.consecutive_errors.unwrap_or(0) != after.consecutive_errors.unwrap_or(0)
        || before.last_failure_alert_at_ms != after.last_failure_alert_at_ms
        || before.schedule_error_count != after.schedule_error_count
}

/// The ledger note of a slot skipped inside a job's error backoff.
pub(super) fn backoff_note(until_ms: i64) -> String {
    let until = jiff::Timestamp::from_millisecond(until_ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| until_ms.to_string());
    format!("skipped: error backoff until {until}")
}

/// Why `job`'s schedule cannot be worked out, if it cannot.
pub(super) fn schedule_problem(job: &CronJob, host: &jiff::tz::TimeZone) -> Result<Slots, String> {
    let schedule = crate::cron::schedule::to_schedule(&job.schedule).map_err(|e| e.to_string())?;
    Slots::new(&schedule, &job.id, job.created_at_ms, host).map_err(|e| e.to_string())
}
