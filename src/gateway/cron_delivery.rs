//! What the cron runner sends about its runs, besides running them: where
//! a job's result goes, the finished run's event posted to the job's
//! webhook, the notice of a failed run, and failure alerts.
//!
//! * A job's results go nowhere (`delivery.mode: none`, or a `main` job
//!   without a webhook), to the outbox (`announce`, the default of
//!   isolated-like jobs: almanac has no chat channels), or to a webhook:
//!   the run's finished event (the run log line's fields without `ts`,
//!   OpenClaw's `CronEvent`), posted when its `summary` is not empty.
//! * Every cron post is a JSON document ([`Deliverer::post`]): journaled
//!   and tried again like any webhook delivery, each attempt limited to
//!   [`WEBHOOK_TIMEOUT`], with `Authorization: Bearer <cron.webhookToken>`
//!   when the token is set (read at each attempt, never written down).
//!   A URL in a job the model created (`createdBy: "agent"`) is the
//!   model's ([`UrlOrigin::Model`]: no loopback or private address unless
//!   `delivery.webhook.allowPrivateNetwork`); a URL in a job the user
//!   made, or in the config, goes where it says.
//! * A webhook that fails never fails the run: the run's delivery fields
//!   say what became of it, and the deliveries journal has the rest.
//! * A run that started more than 3 hours after its slot delivers nothing
//!   ([`outcome::is_stale`]): its status stays, `delivered` is false.
//! * A failed run (not `bestEffort`) is reported to
//!   `delivery.failureDestination`, else `cron.failureDestination`, else
//!   where the job's results go: a webhook gets `{jobId, jobName, message,
//!   status, error, runAtMs, durationMs, nextRunAtMs}`, the outbox the
//!   message after `⚠️ `.
//! * A failure alert ([`send_alert`]) goes where it says, else where the
//!   job's results go; with nowhere to go, it is queued as a system event
//!   for the main session, which is woken.
//!
//! Nothing here blocks the runner's tick: a run that takes time waits for
//! its sends in its own task ([`deliver_end`]), a batch of event-only runs
//! leaves them to tasks of the runner ([`spawn_end`]).
//!
//! [`Deliverer::post`]: crate::delivery::Deliverer::post

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::task::TaskTracker;

use super::intake::Record;
use super::{GatewayEvent, Shared};
use crate::config::{CronAlertMode, CronConfig};
use crate::cron::job::{CronJob, DeliveryMode, FailureAlert, RunStatus, SessionTarget};
use crate::cron::outcome::{self, Alert};
use crate::cron::runlog::RunRecord;
use crate::delivery::{
    Delivery, DeliveryError, DeliveryState, Item, Post, SecretRef, Source, UrlOrigin,
};

/// The longest one attempt of a cron webhook post may take.
pub(crate) const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The config key of the bearer token of cron webhook posts.
const TOKEN_KEY: &str = "cron.webhookToken";

/// Where a job's results go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResultTarget {
    /// Nowhere.
    None,
    /// The outbox (`announce`).
    Outbox,
    /// A webhook, which gets the finished run's event.
    Webhook { url: String, origin: UrlOrigin },
}

impl ResultTarget {
    /// The channel whose settings (`channels.<channel>.heartbeat`) apply
    /// to what is delivered there.
    pub(crate) fn channel(&self) -> Option<&'static str> {
        match self {
            ResultTarget::None => None,
            ResultTarget::Outbox => Some("outbox"),
            ResultTarget::Webhook { .. } => Some("webhook"),
        }
    }
}

/// Where `job`'s results go: its `delivery`, else `announce` for an
/// isolated-like job and nowhere for a `main` one (whose result is the
/// heartbeat's; only a webhook takes it further).
pub(crate) fn result_target(job: &CronJob) -> ResultTarget {
    let main = job.session_target == SessionTarget::Main;
    let mode = match &job.delivery {
        Some(delivery) => delivery.mode,
        None if main => DeliveryMode::None,
        None => DeliveryMode::Announce,
    };
    match mode {
        DeliveryMode::None => ResultTarget::None,
        DeliveryMode::Announce if main => ResultTarget::None,
        DeliveryMode::Announce => ResultTarget::Outbox,
        DeliveryMode::Webhook => ResultTarget::Webhook {
            url: job
                .delivery
                .as_ref()
                .and_then(|d| d.to.as_deref())
                .unwrap_or("")
                .trim()
                .to_string(),
            origin: origin_of(job, job.delivery.as_ref().and_then(|d| d.to.as_deref())),
        },
    }
}

/// Who gave `url`, written in `job`: the model for a job it created,
/// unless the user set that URL since.
fn origin_of(job: &CronJob, url: Option<&str>) -> UrlOrigin {
    let models = match url {
        Some(url) => job.url_is_models(url),
        None => job.created_by_agent(),
    };
    if models {
        UrlOrigin::Model
    } else {
        UrlOrigin::Config
    }
}

/// Where a failure goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    Outbox,
    Webhook { url: String, origin: UrlOrigin },
}

/// Where a failed run of `job` is reported: the job's
/// `delivery.failureDestination` (its mode unset: the delivery's; its URL
/// unset in webhook mode: the delivery's), else `cron.failureDestination`
/// (mode unset: `announce`), else where the job's results go. `None`:
/// nowhere (a webhook without a URL included).
fn failure_destination(job: &CronJob, config: &CronConfig) -> Option<Destination> {
    let delivery = job.delivery.as_ref();
    let own = delivery.and_then(|d| d.failure_destination.as_ref());
    let (mode, url, origin) = if let (Some(delivery), Some(own)) = (delivery, own) {
        let mode = own.mode.unwrap_or(delivery.mode);
        let url = own.to.clone().or_else(|| {
            (delivery.mode == DeliveryMode::Webhook)
                .then(|| delivery.to.clone())
                .flatten()
        });
        let origin = origin_of(job, url.as_deref());
        (mode, url, origin)
    } else if let Some(global) = &config.failure_destination {
        let mode = match global.mode {
            Some(CronAlertMode::Webhook) => DeliveryMode::Webhook,
            Some(CronAlertMode::Announce) | None => DeliveryMode::Announce,
        };
        (mode, global.to.clone(), UrlOrigin::Config)
    } else {
        return match result_target(job) {
            ResultTarget::None => None,
            ResultTarget::Outbox => Some(Destination::Outbox),
            ResultTarget::Webhook { url, origin } => webhook_destination(Some(url), origin),
        };
    };
    match mode {
        DeliveryMode::None => None,
        DeliveryMode::Announce => Some(Destination::Outbox),
        DeliveryMode::Webhook => webhook_destination(url, origin),
    }
}

/// A webhook destination, when it has a URL (a job's is checked when the
/// job is saved, the config's when the config is read).
fn webhook_destination(url: Option<String>, origin: UrlOrigin) -> Option<Destination> {
    let url = url
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())?;
    Some(Destination::Webhook { url, origin })
}

/// Where a failure alert of `job` goes: its mode (unset: where the job's
/// results go), its URL in webhook mode (unset: the job's webhook).
/// `None`: nowhere usable.
fn alert_destination(job: &CronJob, alert: &Alert, config: &CronConfig) -> Option<Destination> {
    let results = result_target(job);
    match alert.mode {
        None => match results {
            ResultTarget::None => None,
            ResultTarget::Outbox => Some(Destination::Outbox),
            ResultTarget::Webhook { url, origin } => webhook_destination(Some(url), origin),
        },
        Some(DeliveryMode::None) => None,
        Some(DeliveryMode::Announce) => Some(Destination::Outbox),
        Some(DeliveryMode::Webhook) => match (&alert.to, results) {
            (Some(to), _) => {
                // The job's own `failureAlert.to` wins over the config's;
                // only the config's is the user's whoever made the job.
                let own = matches!(&job.failure_alert, Some(FailureAlert::On(a)) if a.to.is_some());
                let from_config = !own && config.failure_alert.to.as_ref() == Some(to);
                let origin = if from_config {
                    UrlOrigin::Config
                } else {
                    origin_of(job, Some(to))
                };
                webhook_destination(Some(to.clone()), origin)
            }
            (None, ResultTarget::Webhook { url, origin }) => webhook_destination(Some(url), origin),
            (None, _) => None,
        },
    }
}

/// A cron post of `body` to `url`. `cron.webhookToken` goes only to a
/// URL the user gave (in the config, or in a job made or set from the
/// command line), never to one the model chose: that post goes unsigned.
fn post(shared: &Shared, url: String, origin: UrlOrigin, body: Value) -> Post {
    post_for(shared, url, origin, body, None)
}

/// [`post`] of a task's result: the task is told how its delivery stands.
fn post_for(
    shared: &Shared,
    url: String,
    origin: UrlOrigin,
    body: Value,
    task_id: Option<String>,
) -> Post {
    let app = shared.engine.app();
    let token_set = app.config.config.cron.webhook_token.is_some();
    Post {
        url,
        body,
        bearer: (token_set && origin == UrlOrigin::Config).then(|| SecretRef {
            key: TOKEN_KEY.to_string(),
        }),
        origin,
        timeout: Some(WEBHOOK_TIMEOUT),
        task_id,
    }
}

/// What the run log says of a post that went without the token.
const UNSIGNED_NOTE: &str = "sent without cron.webhookToken: the model chose this address";

/// Where an `announce` goes: the chat the job names (`delivery.channel`
/// and `to`), or for `last` (the default) the chat the agent's user last
/// wrote from; with no chat, the outbox.
pub(super) async fn announce_target(
    shared: &Shared,
    app: &crate::app::App,
    job: &CronJob,
) -> crate::delivery::Target {
    use crate::delivery::Target;
    let delivery = job.delivery.as_ref();
    let channel = delivery
        .and_then(|d| d.channel.as_deref())
        .map(str::trim)
        .filter(|c| !c.is_empty());
    match channel {
        None | Some("last") => {}
        Some("outbox" | "webhook" | "none") => return Target::Outbox,
        Some(channel) => {
            return match delivery.and_then(|d| d.to.as_deref()) {
                Some(to) if !to.trim().is_empty() => Target::Chat(crate::trigger::ChatRoute {
                    channel: channel.to_string(),
                    to: to.trim().to_string(),
                    account_id: delivery.and_then(|d| d.account_id.clone()),
                    thread_id: None,
                    reply_to: None,
                }),
                _ => Target::Outbox,
            };
        }
    }
    let app = app.clone();
    shared
        .engine
        .blocking(move || crate::app::heartbeat::last_route(&app).route)
        .await
        .ok()
        .flatten()
        .map_or(Target::Outbox, Target::Chat)
}

/// An outbox entry about `job`.
fn outbox_item(job: &CronJob, session_key: Option<&str>, text: String) -> Item {
    Item {
        source: Source::Cron,
        session_key: session_key
            .map(str::to_string)
            .unwrap_or_else(|| format!("cron:{}", job.id)),
        agent_id: job.agent().to_string(),
        text,
        task_id: None,
        to: None,
        channel: None,
        account_id: None,
    }
}

/// The finished run's event (OpenClaw's `CronEvent`): the run log line
/// without its `ts`.
fn finished_event(record: &RunRecord) -> Value {
    let mut event = match serde_json::to_value(record) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    event.remove("ts");
    Value::Object(event)
}

/// One thing to send at the end of a run.
#[derive(Debug, Clone, PartialEq)]
enum Outgoing {
    Post(Post),
    Outbox(Item),
}

/// What the end of one run sends.
#[derive(Debug, Default)]
struct EndPlan {
    /// The finished event, to the job's webhook.
    event: Option<Post>,
    /// The notice of a failed run.
    notice: Option<Outgoing>,
    /// The run's result was not delivered: the run came too late.
    stale: bool,
}

impl EndPlan {
    fn is_empty(&self) -> bool {
        self.event.is_none() && self.notice.is_none()
    }
}

/// Whether a run of `job` may have something to send at its end (cheap:
/// the run's record is not needed).
fn may_send(job: &CronJob, config: &CronConfig) -> bool {
    matches!(result_target(job), ResultTarget::Webhook { .. })
        || (job.delivery.as_ref().and_then(|d| d.best_effort) != Some(true)
            && failure_destination(job, config).is_some())
}

/// What the end of the run `record` of `job`, for the slot `slot_ms`,
/// sends.
fn plan_end(shared: &Shared, job: &CronJob, slot_ms: i64, record: &RunRecord) -> EndPlan {
    let app = shared.engine.app();
    let config = &app.config.config.cron;
    let started = record.run_at_ms.unwrap_or(slot_ms);
    let mut plan = EndPlan {
        stale: outcome::is_stale(slot_ms, started),
        ..EndPlan::default()
    };
    let results = result_target(job);
    if let ResultTarget::Webhook { url, origin } = results
        && !plan.stale
        && record
            .summary
            .as_deref()
            .is_some_and(|s| !s.trim().is_empty())
    {
        // The run's task follows the delivery of its result.
        let task = record
            .extra
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_string);
        plan.event = Some(post_for(shared, url, origin, finished_event(record), task));
    }
    let failed = record.status == Some(RunStatus::Error);
    let best_effort = job.delivery.as_ref().and_then(|d| d.best_effort) == Some(true);
    if failed && !best_effort {
        let error = record.error.as_deref().unwrap_or("unknown error");
        let message = format!("Cron job \"{}\" failed: {error}", job.name);
        plan.notice = match failure_destination(job, config) {
            None => None,
            Some(Destination::Outbox) => Some(Outgoing::Outbox(outbox_item(
                job,
                record.session_key.as_deref(),
                format!("⚠️ {message}"),
            ))),
            Some(Destination::Webhook { url, origin }) => {
                let mut body = json!({
                    "jobId": job.id,
                    "jobName": job.name,
                    "message": message,
                    "status": "error",
                    "error": error,
                });
                for (key, value) in [
                    ("runAtMs", record.run_at_ms),
                    ("durationMs", record.duration_ms),
                    ("nextRunAtMs", record.next_run_at_ms),
                ] {
                    if let Some(value) = value {
                        body[key] = json!(value);
                    }
                }
                Some(Outgoing::Post(post(shared, url, origin, body)))
            }
        };
    }
    plan
}

/// Sends one thing; what became of it.
async fn send(shared: &Shared, what: Outgoing) -> Result<Delivery, DeliveryError> {
    match what {
        Outgoing::Post(post) => shared.deliverer.post(post).await,
        Outgoing::Outbox(item) => {
            shared
                .deliverer
                .deliver(item, &crate::delivery::Target::Outbox)
                .await
        }
    }
}

/// Logs what became of a cron send.
fn log_sent(job: &CronJob, what: &str, sent: &Result<Delivery, DeliveryError>) {
    match sent {
        Ok(Delivery {
            state: DeliveryState::Delivered,
            ..
        }) => tracing::debug!(job = %job.id, "cron {what} delivered"),
        Ok(Delivery {
            state: DeliveryState::Pending { reason, .. },
            id,
            ..
        }) => {
            tracing::info!(job = %job.id, delivery = %id, %reason, "cron {what} will be tried again")
        }
        Ok(Delivery {
            state: DeliveryState::Failed { reason },
            id,
            ..
        }) => tracing::warn!(job = %job.id, delivery = %id, %reason, "cron {what} not delivered"),
        Err(err) => tracing::warn!(job = %job.id, %err, "cron {what} not delivered"),
    }
}

/// Sends `plan`; what became of the event, when one was posted.
async fn send_plan(
    shared: &Shared,
    job: &CronJob,
    plan: EndPlan,
) -> Option<Result<Delivery, DeliveryError>> {
    let event = async {
        let post = plan.event?;
        let sent = send(shared, Outgoing::Post(post)).await;
        log_sent(job, "run event", &sent);
        Some(sent)
    };
    let notice = async {
        if let Some(notice) = plan.notice {
            let sent = send(shared, notice).await;
            log_sent(job, "failure notice", &sent);
        }
    };
    futures_util::future::join(event, notice).await.0
}

/// Sends what the end of a run calls for (its event to the job's webhook,
/// the notice of a failure) and returns its run log `record` with the
/// delivery fields of the result: `delivered` false for a run that came
/// too late (more than 3 h after `slot_ms`), and what became of the
/// event for a job whose results go to a webhook. Waits for the first
/// attempt of each post (at most [`WEBHOOK_TIMEOUT`]); later ones are the
/// deliverer's. For a run that takes time, in its own task.
pub(crate) async fn deliver_end(
    shared: &Arc<Shared>,
    job: Option<&Arc<CronJob>>,
    slot_ms: i64,
    mut record: RunRecord,
) -> RunRecord {
    let Some(job) = job else {
        return record;
    };
    let plan = plan_end(shared, job, slot_ms, &record);
    let requested = result_target(job) != ResultTarget::None;
    if plan.stale && requested && record.status == Some(RunStatus::Ok) {
        record.delivered = Some(false);
        record.delivery_status = Some("not-delivered".into());
        record.delivery_error = Some(format!(
            "not delivered: the run started more than {} h after its slot",
            outcome::STALE_AFTER_MS / 3_600_000
        ));
    }
    if plan.is_empty() {
        return record;
    }
    let token_set = shared
        .engine
        .app()
        .config
        .config
        .cron
        .webhook_token
        .is_some();
    if token_set
        && plan
            .event
            .as_ref()
            .is_some_and(|post| post.origin == UrlOrigin::Model)
    {
        record
            .extra
            .insert("deliveryNote".into(), Value::from(UNSIGNED_NOTE));
    }
    if let Some(sent) = send_plan(shared, job, plan).await {
        let (delivered, status, error) = match sent {
            Ok(delivery) => match delivery.state {
                DeliveryState::Delivered => (Some(true), "delivered", None),
                DeliveryState::Pending { reason, .. } => (
                    None,
                    "unknown",
                    Some(format!("{reason} (tried again later)")),
                ),
                DeliveryState::Failed { reason } => (Some(false), "not-delivered", Some(reason)),
            },
            Err(err) => (Some(false), "not-delivered", Some(err.to_string())),
        };
        record.delivered = delivered;
        record.delivery_status = Some(status.into());
        record.delivery_error = error;
    }
    record
}

/// [`deliver_end`] for a run recorded in the runner's tick (an event-only
/// run): the sends go to a task of `tracker`, and the run's `record` is
/// built only when `job` may have something to send.
pub(crate) fn spawn_end(
    tracker: &TaskTracker,
    shared: &Arc<Shared>,
    job: Option<&Arc<CronJob>>,
    slot_ms: i64,
    record: impl FnOnce() -> RunRecord,
) {
    let Some(job) = job else {
        return;
    };
    if !may_send(job, &shared.engine.app().config.config.cron) {
        return;
    }
    let plan = plan_end(shared, job, slot_ms, &record());
    if plan.is_empty() {
        return;
    }
    let shared = shared.clone();
    let job = job.clone();
    tracker.spawn(async move {
        send_plan(&shared, &job, plan).await;
    });
}

/// Sends a failure alert of `job` (see [`outcome::apply`]): a webhook
/// gets `{jobId, jobName, message}`, the outbox the alert's text; with no
/// usable destination the text is queued as a system event for the main
/// session, which is woken. What happens is logged.
pub(crate) async fn send_alert(shared: &Arc<Shared>, job: &CronJob, alert: &Alert) {
    let app = shared.engine.app();
    let what = match alert_destination(job, alert, &app.config.config.cron) {
        Some(Destination::Webhook { url, origin }) => Outgoing::Post(post(
            shared,
            url,
            origin,
            json!({"jobId": job.id, "jobName": job.name, "message": alert.text}),
        )),
        Some(Destination::Outbox) => Outgoing::Outbox(outbox_item(
            job,
            job.session_key.as_deref(),
            alert.text.clone(),
        )),
        None => {
            let queued = {
                let shared = shared.clone();
                let text = alert.text.clone();
                let reason = format!("cron:{}:failure-alert", job.id);
                shared
                    .engine
                    .clone()
                    // The alert carries the run's error, which is not
                    // almanac's words.
                    .blocking(move || queue_alert_event(&shared, text, reason, false))
                    .await
            };
            match queued.and_then(|q| q.map_err(anyhow::Error::from)) {
                Ok(()) => {
                    tracing::info!(job = %job.id, "cron failure alert queued for the main session")
                }
                Err(err) => tracing::warn!(job = %job.id, "cron failure alert not queued: {err:#}"),
            }
            return;
        }
    };
    let sent = send(shared, what).await;
    log_sent(job, "failure alert", &sent);
}

/// Queues `text` as a system event for the main session and wakes it
/// (blocking: the intake writes).
pub(crate) fn queue_alert_event(
    shared: &Shared,
    text: String,
    reason: String,
    trusted: bool,
) -> std::io::Result<()> {
    let app = shared.engine.app();
    let session_key = app
        .sessions(Some(crate::trigger::AGENT_ID))
        .resolve_key(None);
    shared.intake.accept(Record {
        seq: 0,
        ts: shared.host.now_ms(),
        kind: "cron".into(),
        session_key: session_key.clone(),
        text,
        mode: "now".into(),
        trusted,
        hook: None,
        replay: None,
    })?;
    let _ = shared.bus.send(GatewayEvent::Wake {
        reason,
        session_key,
    });
    Ok(())
}

#[cfg(test)]
#[path = "cron_delivery_tests.rs"]
mod tests;
