//! Delivery: where the results of unattended turns (heartbeat, cron,
//! webhook-triggered turns) go — nowhere, the outbox, or a webhook.
//!
//! Owns `<state dir>/outbox/`: the outbox (`outbox.jsonl`, see
//! [`outbox`]), which commands list and follow and the gateway streams
//! (`GET /v1/outbox/stream`), and the deliveries journal
//! (`deliveries.jsonl`, see [`webhook`]) of the webhook posts: results,
//! and JSON documents in their receiver's own shape (a cron run's event,
//! failure notices: [`Deliverer::post`]). One [`Deliverer`] per gateway
//! holds both, its environment ([`Env`]: clock, settings, clients) is
//! the engine's, and the URL policy is
//! [`url`]'s.
//!
//! Invariants:
//! * Nothing is acknowledged before it is in the OS: [`Deliverer::deliver`]
//!   returns for the outbox once the entry is written (one `write(2)`),
//!   and for a webhook once the first attempt's outcome is journaled;
//!   fsyncs follow on each file's group-commit thread (a power loss costs
//!   at most the last few milliseconds). While either file cannot be
//!   synced, what would be written to it is refused
//!   ([`DeliveryError::NotSynced`]: nothing is claimed delivered; a
//!   webhook's retry whose outcome cannot be recorded is tried again
//!   later), and [`Deliverer::journals`] tells the gateway.
//! * A webhook delivery is never lost: it is journaled `pending` (with its
//!   text) before the first attempt, retried with backoff in a tracked
//!   task while the receiver fails, and ends `delivered` or `failed` with
//!   the reason. A gateway that stops leaves it `pending`; the next one
//!   resumes it ([`resume_pending`]). Every attempt carries the same
//!   `Idempotency-Key`, so a receiver can drop a repeat after a crash.
//! * The signing secret and a bearer token are read from the config at
//!   each attempt and never written anywhere.
//! * Entries and records older than 30 days are pruned by the gateway's
//!   task sweeper ([`Deliverer::prune`]); the kept lines stay byte for
//!   byte.
//! * Reading the outbox (`outbox list`, `outbox tail`) creates nothing.
//! * Waiting between attempts goes through an injected sleeper, and time
//!   through the host's clock.

mod env;
mod follow;
pub(crate) mod outbox;
pub(crate) mod url;
pub(crate) mod webhook;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::durable::{self, Journal};
use crate::provider::http::{Sleeper, TokioSleeper};
pub(crate) use env::Env;
use follow::Follow;
use outbox::{Appended, Entry, Outbox, Reader};
pub(crate) use url::UrlOrigin;
use webhook::{AttemptOutcome, Payload, State, WebhookJob};

/// What produced a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    Heartbeat,
    Cron,
    Hook,
    /// A reply to a chat message.
    Chat,
}

impl std::str::FromStr for Source {
    type Err = String;

    fn from_str(s: &str) -> Result<Source, String> {
        match s {
            "heartbeat" => Ok(Source::Heartbeat),
            "cron" => Ok(Source::Cron),
            "hook" => Ok(Source::Hook),
            "chat" => Ok(Source::Chat),
            other => Err(format!(
                "`{other}` is not a source: heartbeat, cron, hook or chat"
            )),
        }
    }
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Heartbeat => "heartbeat",
            Source::Cron => "cron",
            Source::Hook => "hook",
            Source::Chat => "chat",
        }
    }
}

/// A result to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub source: Source,
    pub session_key: String,
    pub agent_id: String,
    pub text: String,
    pub task_id: Option<String>,
    /// The recipient the request named (a webhook's `/agent` `to`), kept
    /// on the outbox entry for whatever reads the outbox to route it.
    pub to: Option<String>,
    /// The chat channel (and its account) `to` is on, for a chat's route.
    pub channel: Option<String>,
    pub account_id: Option<String>,
}

/// Where a webhook's signing secret is read from: a config key path (the
/// environment layer included), looked up at every attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretRef {
    pub key: String,
}

/// A JSON document to post as it is, for a receiver that expects its own
/// shape (a cron run's event, a failure notice).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Post {
    pub url: String,
    pub body: serde_json::Value,
    /// Where the token sent as `Authorization: Bearer` is read from.
    pub bearer: Option<SecretRef>,
    pub origin: UrlOrigin,
    /// The longest one attempt may take (else the client's limit).
    pub timeout: Option<Duration>,
    /// The task whose result this is (a cron run's event).
    pub task_id: Option<String>,
}

/// Told how the delivery of a task's result stands, each time it changes
/// (on the blocking thread that recorded the step).
pub(crate) type TaskDeliveryHook = Arc<dyn Fn(&str, crate::tasks::DeliveryStatus) + Send + Sync>;

/// Where a result goes.
// Chosen by the heartbeat and cron runners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Nowhere: nothing is recorded.
    None,
    /// The outbox file (and its live stream).
    Outbox,
    /// A chat's route: an outbox entry that names the channel, the chat
    /// and the account, for the channel's sender (or, for the `http`
    /// channel, its client reading the stream) to take.
    Chat(crate::trigger::ChatRoute),
    /// A `POST` to `url`, signed when a secret is named.
    Webhook {
        url: String,
        secret: Option<SecretRef>,
        origin: UrlOrigin,
    },
}

impl Target {
    /// The channel name the target delivers on (what `channels.<name>`
    /// settings apply to).
    pub(crate) fn channel(&self) -> &'static str {
        match self {
            Target::None => "none",
            Target::Outbox => "outbox",
            Target::Chat(_) => "chat",
            Target::Webhook { .. } => "webhook",
        }
    }
}

/// How a delivery stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeliveryState {
    /// Done (for [`Target::None`]: nothing was to be done).
    Delivered,
    /// The receiver failed; another attempt is due at `next_at_ms`.
    Pending {
        attempts: u32,
        next_at_ms: i64,
        reason: String,
    },
    /// Given up: refused, or out of attempts.
    Failed { reason: String },
}

/// What [`Deliverer::deliver`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub id: String,
    /// `outbox`, `chat`, `webhook` or `none`.
    pub channel: &'static str,
    /// The webhook's URL.
    pub to: Option<String>,
    pub state: DeliveryState,
}

/// Why a result could not be recorded (a refused or failing receiver is a
/// [`DeliveryState`], not an error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliveryError {
    #[error("cannot write the outbox {}", path.display())]
    Outbox {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot record the delivery in {}", path.display())]
    Journal {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the outbox {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("delivery work stopped: {0}")]
    Stopped(String),
    /// The outbox or the deliveries journal cannot be synced: nothing was
    /// written, nothing delivered.
    #[error(transparent)]
    NotSynced(durable::NotSynced),
}

impl DeliveryError {
    /// `Outbox` or `Journal` from `source`, unless the file refused the
    /// write because it cannot be synced.
    fn writing(source: std::io::Error, path: PathBuf, outbox: bool) -> DeliveryError {
        if let Some(not_synced) = durable::NotSynced::of(&source) {
            return DeliveryError::NotSynced(not_synced.clone());
        }
        if outbox {
            DeliveryError::Outbox { path, source }
        } else {
            DeliveryError::Journal { path, source }
        }
    }
}

/// How often a live stream looks at the outbox file for entries other
/// processes wrote (the gateway's own arrive at once).
const FILE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// A result delivered to a webhook that failed after its last retry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GaveUp {
    pub id: String,
    pub source: Source,
    pub session_key: String,
    pub text: String,
    pub reason: String,
}

/// The gateway's delivery service. Cheap to clone; clones share it.
#[derive(Clone)]
pub(crate) struct Deliverer {
    inner: Arc<Inner>,
}

struct Inner {
    env: Arc<dyn Env>,
    outbox: Arc<Outbox>,
    deliveries: Arc<Journal>,
    /// Held while the deliveries journal is written or rewritten.
    deliveries_lock: Mutex<()>,
    /// The last id this process gave out (outbox, webhooks, `none`).
    last_id: Mutex<u64>,
    /// Every entry this process appends to the outbox.
    appended: broadcast::Sender<Arc<Appended>>,
    /// Every result whose retries ran out.
    gave_up: broadcast::Sender<Arc<GaveUp>>,
    sleeper: Arc<dyn Sleeper>,
    retries: TaskTracker,
    stop: CancellationToken,
    /// What the journal left pending at open, for [`resume_pending`].
    resumable: Mutex<Vec<WebhookJob>>,
    syncers: Mutex<Vec<std::thread::JoinHandle<std::io::Result<()>>>>,
    /// Where task results' delivery steps are told (the task ledger).
    task_hook: Mutex<Option<TaskDeliveryHook>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.outbox.journal().close();
        self.deliveries.close();
    }
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("outbox", &self.inner.outbox.path())
            .finish_non_exhaustive()
    }
}

impl Deliverer {
    /// Opens the outbox and the deliveries journal in the app's state
    /// directory (creating `outbox/`), reads what is pending and starts
    /// the group-commit threads.
    pub(crate) fn open(env: Arc<dyn Env>) -> std::io::Result<Deliverer> {
        Deliverer::open_with(env, Arc::new(TokioSleeper))
    }

    /// [`Deliverer::open`] with the sleeper that waits between attempts.
    pub(crate) fn open_with(
        env: Arc<dyn Env>,
        sleeper: Arc<dyn Sleeper>,
    ) -> std::io::Result<Deliverer> {
        Deliverer::open_on(env, sleeper, Default::default(), Default::default())
    }

    /// [`Deliverer::open_with`] with the disks and retry waits of the
    /// outbox and of the deliveries journal.
    pub(crate) fn open_on(
        env: Arc<dyn Env>,
        sleeper: Arc<dyn Sleeper>,
        outbox: durable::JournalOptions,
        deliveries: durable::JournalOptions,
    ) -> std::io::Result<Deliverer> {
        let dir = env.outbox_dir();
        let outbox = Arc::new(Outbox::open_with(&dir, outbox)?);
        let journal_path = dir.join(webhook::FILE_NAME);
        let (records, unreadable) = durable::read_journal(&journal_path, webhook::parse_record)?;
        if unreadable > 0 {
            tracing::warn!(path = %journal_path.display(), unreadable, "skipped unreadable delivery records");
        }
        let (pending, last_delivery) = webhook::pending(records);
        let deliveries = Arc::new(Journal::open_with(&journal_path, deliveries)?);
        let last_id = outbox.last_id()?.max(last_delivery);
        let mut syncers = Vec::new();
        {
            let outbox = outbox.clone();
            syncers.push(
                std::thread::Builder::new()
                    .name("outbox-sync".into())
                    .spawn(move || {
                        crate::host::lower_this_thread_priority();
                        outbox.journal().run_syncer()
                    })?,
            );
            let deliveries = deliveries.clone();
            syncers.push(
                std::thread::Builder::new()
                    .name("deliveries-sync".into())
                    .spawn(move || {
                        crate::host::lower_this_thread_priority();
                        deliveries.run_syncer()
                    })?,
            );
        }
        Ok(Deliverer {
            inner: Arc::new(Inner {
                env,
                outbox,
                deliveries,
                deliveries_lock: Mutex::new(()),
                last_id: Mutex::new(last_id),
                appended: broadcast::channel(256).0,
                gave_up: broadcast::channel(64).0,
                sleeper,
                retries: TaskTracker::new(),
                stop: CancellationToken::new(),
                resumable: Mutex::new(pending),
                syncers: Mutex::new(syncers),
                task_hook: Mutex::new(None),
            }),
        })
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.env.now_ms()
    }

    /// The outbox's journal (tests break its disk).
    #[cfg(test)]
    pub(crate) fn outbox_journal(&self) -> &Journal {
        self.inner.outbox.journal()
    }

    /// The deliveries journal (tests break its disk).
    #[cfg(test)]
    pub(crate) fn deliveries_journal(&self) -> &Journal {
        &self.inner.deliveries
    }

    /// How the syncs of the outbox and of the deliveries journal stand.
    pub(crate) fn journals(&self) -> Vec<tokio::sync::watch::Receiver<durable::SyncHealth>> {
        vec![
            self.inner.outbox.journal().health(),
            self.inner.deliveries.health(),
        ]
    }

    /// The next id for a delivery that is not an outbox entry.
    fn next_id(&self, ts_ms: i64) -> String {
        let mut last = self.inner.last_id.lock().unwrap_or_else(|p| p.into_inner());
        *last = outbox::next_id(*last, ts_ms);
        last.to_string()
    }

    /// Records and delivers `item`; returns once the outcome is recorded:
    /// for the outbox when the entry is in the OS; for a webhook after the
    /// first attempt (delivered, failed for good, or pending with retries
    /// going on in a tracked task).
    // The entry point of the heartbeat and cron runners.
    pub(crate) async fn deliver(
        &self,
        item: Item,
        target: &Target,
    ) -> Result<Delivery, DeliveryError> {
        match target {
            Target::None => Ok(Delivery {
                id: self.next_id(self.now_ms()),
                channel: "none",
                to: None,
                state: DeliveryState::Delivered,
            }),
            Target::Outbox => {
                let entry = self.append(item).await?;
                Ok(Delivery {
                    id: entry.id,
                    channel: "outbox",
                    to: None,
                    state: DeliveryState::Delivered,
                })
            }
            Target::Chat(route) if route.channel == "telegram" => {
                let now = self.now_ms();
                let id = self.next_id(now);
                let job = WebhookJob {
                    id,
                    url: format!("{}:{}", route.channel, route.to),
                    origin: UrlOrigin::Config,
                    secret_from: None,
                    bearer_from: None,
                    timeout_ms: None,
                    payload: Payload::Chat(webhook::ChatMessage {
                        channel: route.channel.clone(),
                        account_id: route.account_id.clone(),
                        to: route.to.clone(),
                        thread_id: route.thread_id,
                        reply_to: route.reply_to,
                        source: item.source,
                        session_key: item.session_key,
                        text: item.text,
                        sent: 0,
                    }),
                    attempts: 0,
                    next_at_ms: None,
                    task_id: item.task_id,
                };
                self.start_webhook(job).await
            }
            Target::Chat(route) => {
                let mut item = item;
                item.channel = Some(route.channel.clone());
                item.to = Some(route.to.clone());
                item.account_id = route.account_id.clone();
                let entry = self.append(item).await?;
                Ok(Delivery {
                    id: entry.id,
                    channel: "chat",
                    to: entry.to,
                    state: DeliveryState::Delivered,
                })
            }
            Target::Webhook {
                url,
                secret,
                origin,
            } => {
                let now = self.now_ms();
                let id = self.next_id(now);
                let job = WebhookJob {
                    id: id.clone(),
                    url: url.clone(),
                    origin: *origin,
                    secret_from: secret.as_ref().map(|s| s.key.clone()),
                    bearer_from: None,
                    timeout_ms: None,
                    payload: Payload::Item(webhook::Body {
                        id,
                        ts: now,
                        source: item.source,
                        session_key: item.session_key,
                        text: item.text,
                        task_id: item.task_id.clone(),
                    }),
                    attempts: 0,
                    next_at_ms: None,
                    task_id: item.task_id,
                };
                self.start_webhook(job).await
            }
        }
    }

    /// Posts `post`'s document as it is, journaled and retried like any
    /// webhook delivery; returns after the first attempt, as
    /// [`Deliverer::deliver`] does.
    // The cron runner's: a run's event, a failure notice or alert.
    pub(crate) async fn post(&self, post: Post) -> Result<Delivery, DeliveryError> {
        let id = self.next_id(self.now_ms());
        let job = WebhookJob {
            id,
            url: post.url,
            origin: post.origin,
            secret_from: None,
            bearer_from: post.bearer.map(|b| b.key),
            timeout_ms: post
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            payload: Payload::Document(post.body),
            attempts: 0,
            next_at_ms: None,
            task_id: post.task_id,
        };
        self.start_webhook(job).await
    }

    /// Journals `job` pending, makes its first attempt and leaves the
    /// retries, if any, to a tracked task.
    async fn start_webhook(&self, job: WebhookJob) -> Result<Delivery, DeliveryError> {
        self.journal(job.record(State::Pending, self.now_ms(), None))
            .await?;
        let (job, state, wait) = self.attempt(job).await?;
        let delivery = match &job.payload {
            Payload::Chat(chat) => Delivery {
                id: job.id.clone(),
                channel: "chat",
                to: Some(chat.to.clone()),
                state,
            },
            _ => Delivery {
                id: job.id.clone(),
                channel: "webhook",
                to: Some(job.url.clone()),
                state,
            },
        };
        if let Some(wait) = wait {
            self.spawn_retries(job, wait);
        }
        Ok(delivery)
    }

    /// Appends `item` to the outbox and announces it to live streams.
    async fn append(&self, item: Item) -> Result<Entry, DeliveryError> {
        let this = self.clone();
        let path = self.inner.outbox.path().to_path_buf();
        self.inner
            .env
            .blocking(move || {
                let inner = &this.inner;
                let now = this.now_ms();
                let mut last = inner.last_id.lock().unwrap_or_else(|p| p.into_inner());
                let appended = inner.outbox.append(&item, now, *last)?;
                *last = (*last).max(appended.entry.seq());
                let entry = appended.entry.clone();
                // Sent under the lock: streams get entries in file order.
                let _ = inner.appended.send(Arc::new(appended));
                drop(last);
                if let Some(task) = &item.task_id {
                    this.tell_task(task, crate::tasks::DeliveryStatus::Delivered);
                }
                Ok(entry)
            })
            .await
            .map_err(|e| DeliveryError::Stopped(e.to_string()))?
            .map_err(|source| DeliveryError::writing(source, path, true))
    }

    /// Writes one record to the deliveries journal.
    async fn journal(&self, record: webhook::Record) -> Result<(), DeliveryError> {
        let this = self.clone();
        let path = self.inner.deliveries.path().to_path_buf();
        self.inner
            .env
            .blocking(move || {
                let line = serde_json::to_vec(&record).expect("a record serialises");
                let held = this
                    .inner
                    .deliveries_lock
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                this.inner.deliveries.append(&line)?;
                drop(held);
                if let Some(task) = &record.task_id {
                    use crate::tasks::DeliveryStatus as Told;
                    let status = match record.state {
                        State::Pending => Told::Pending,
                        State::Delivered => Told::Delivered,
                        State::Failed => Told::Failed,
                    };
                    this.tell_task(task, status);
                }
                Ok(())
            })
            .await
            .map_err(|e| DeliveryError::Stopped(e.to_string()))?
            .map_err(|source| DeliveryError::writing(source, path, false))
    }

    /// One attempt at `job`, journaled; its new state, and the wait before
    /// the next attempt when one is due.
    async fn attempt(
        &self,
        mut job: WebhookJob,
    ) -> Result<(WebhookJob, DeliveryState, Option<Duration>), DeliveryError> {
        let env = &self.inner.env;
        let allow_private = env.allow_private_network();
        if let Payload::Chat(chat) = &job.payload {
            let (outcome, sent) = env.send_chat(chat.clone()).await;
            if let Payload::Chat(chat) = &mut job.payload {
                chat.sent = sent;
            }
            return self.attempted(job, outcome).await;
        }
        let outcome = match url::check_url(&job.url, job.origin, allow_private) {
            Err(refused) => AttemptOutcome::Permanent {
                reason: refused.to_string(),
            },
            Ok(_) => match (
                config_text(env.as_ref(), job.secret_from.as_deref(), "signing secret"),
                config_text(env.as_ref(), job.bearer_from.as_deref(), "bearer token"),
            ) {
                (Err(reason), _) | (_, Err(reason)) => AttemptOutcome::Permanent { reason },
                (Ok(secret), Ok(bearer)) => {
                    let guarded = job.origin == UrlOrigin::Model && !allow_private;
                    let client = env.webhook_client(guarded);
                    let unix_seconds = env.now_ms().div_euclid(1000);
                    let credentials = webhook::Credentials {
                        secret: secret.as_deref().map(str::as_bytes),
                        bearer: bearer.as_deref(),
                    };
                    webhook::attempt(&client, &job, credentials, unix_seconds).await
                }
            },
        };
        self.attempted(job, outcome).await
    }

    /// Journals how an attempt at `job` went.
    async fn attempted(
        &self,
        mut job: WebhookJob,
        outcome: AttemptOutcome,
    ) -> Result<(WebhookJob, DeliveryState, Option<Duration>), DeliveryError> {
        job.attempts += 1;
        let now = self.now_ms();
        let (state, wait, record) = match outcome {
            AttemptOutcome::Delivered => (
                DeliveryState::Delivered,
                None,
                job.record(State::Delivered, now, None),
            ),
            AttemptOutcome::Permanent { reason } => (
                DeliveryState::Failed {
                    reason: reason.clone(),
                },
                None,
                job.record(State::Failed, now, Some(reason)),
            ),
            AttemptOutcome::Retry {
                reason,
                retry_after,
            } => match webhook::next_wait(job.attempts, retry_after) {
                None => {
                    let reason = format!("gave up after {} attempts: {reason}", job.attempts);
                    (
                        DeliveryState::Failed {
                            reason: reason.clone(),
                        },
                        None,
                        job.record(State::Failed, now, Some(reason)),
                    )
                }
                Some(wait) => {
                    let next_at_ms = now.saturating_add(wait.as_millis() as i64);
                    job.next_at_ms = Some(next_at_ms);
                    (
                        DeliveryState::Pending {
                            attempts: job.attempts,
                            next_at_ms,
                            reason: reason.clone(),
                        },
                        Some(wait),
                        job.record(State::Pending, now, Some(reason)),
                    )
                }
            },
        };
        match &state {
            DeliveryState::Failed { reason } => {
                tracing::warn!(id = %job.id, url = %job.url, %reason, "webhook delivery failed")
            }
            DeliveryState::Pending { reason, .. } => {
                tracing::info!(id = %job.id, attempts = job.attempts, %reason, "webhook delivery will be retried")
            }
            DeliveryState::Delivered => {}
        }
        self.journal(record).await?;
        Ok((job, state, wait))
    }

    /// Retries `job` after `wait`, and again while it stays pending, in a
    /// tracked task that ends when the deliverer stops (the journal keeps
    /// the job pending for the next start).
    fn spawn_retries(&self, mut job: WebhookJob, mut wait: Duration) {
        if self.inner.stop.is_cancelled() {
            return;
        }
        let this = self.clone();
        let stop = self.inner.stop.clone();
        self.inner.retries.spawn(async move {
            loop {
                tokio::select! {
                    () = this.inner.sleeper.sleep(wait) => {}
                    () = stop.cancelled() => return,
                }
                let attempted = tokio::select! {
                    attempted = this.attempt(job.clone()) => attempted,
                    () = stop.cancelled() => return,
                };
                match attempted {
                    Ok((next, DeliveryState::Pending { .. }, Some(next_wait))) => {
                        job = next;
                        wait = next_wait;
                    }
                    Ok((job, DeliveryState::Failed { reason }, _)) => {
                        let given = match job.payload {
                            Payload::Item(body) => Some((body.source, body.session_key, body.text)),
                            Payload::Chat(chat) => Some((chat.source, chat.session_key, chat.text)),
                            Payload::Document(_) => None,
                        };
                        if let Some((source, session_key, text)) = given {
                            let _ = this.inner.gave_up.send(Arc::new(GaveUp {
                                id: job.id,
                                source,
                                session_key,
                                text,
                                reason,
                            }));
                        }
                        return;
                    }
                    Ok(_) => return,
                    // The attempt is tried again once the journal can
                    // record it (the same key: a receiver drops a repeat).
                    Err(DeliveryError::NotSynced(_)) => {}
                    Err(err) => {
                        tracing::error!(id = %job.id, error = %err, "cannot record a delivery attempt; left pending for the next start");
                        return;
                    }
                }
            }
        });
    }

    /// Tells `hook` how the delivery of each task's result stands as it
    /// changes (the gateway records it in the task ledger).
    pub(crate) fn on_task_delivery(&self, hook: TaskDeliveryHook) {
        *self
            .inner
            .task_hook
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    fn tell_task(&self, task: &str, status: crate::tasks::DeliveryStatus) {
        let hook = self
            .inner
            .task_hook
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(task, status);
        }
    }

    /// Results whose retries run out from now on (their first attempt
    /// was answered pending; a result that fails at once is its caller's
    /// error).
    pub(crate) fn gave_up(&self) -> broadcast::Receiver<Arc<GaveUp>> {
        self.inner.gave_up.subscribe()
    }

    /// The outbox's entries after `after` (none of the old ones when
    /// `None`), then each new one as it is written, until the deliverer
    /// stops. Entries this process writes arrive at once, others' within
    /// [`FILE_CHECK_EVERY`]; none twice, none skipped.
    pub(crate) async fn follow(
        &self,
        after: Option<u64>,
    ) -> Result<impl Stream<Item = Entry> + Send + 'static, DeliveryError> {
        // Subscribed before the file is read: nothing written in between
        // is missed, and what is read twice is dropped by id.
        let announced = self.inner.appended.subscribe();
        let path = self.inner.outbox.path().to_path_buf();
        let reading = path.clone();
        let (reader, replay) = self
            .inner
            .env
            .blocking(move || {
                let mut reader = Reader::new(reading, after);
                let polled = reader.poll()?;
                let replay = if after.is_some() {
                    polled.entries
                } else {
                    Vec::new()
                };
                Ok::<_, std::io::Error>((reader, replay))
            })
            .await
            .map_err(|e| DeliveryError::Stopped(e.to_string()))?
            .map_err(|source| DeliveryError::Read { path, source })?;
        let mut check = tokio::time::interval(FILE_CHECK_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let follow = Follow {
            env: self.inner.env.clone(),
            stop: self.inner.stop.clone(),
            announced,
            reader: Some(reader),
            queue: replay.into(),
            check,
        };
        Ok(futures_util::stream::unfold(follow, Follow::next))
    }

    /// Prunes the outbox and the deliveries journal of what is older than
    /// 30 days at `now_ms` (the sweeper's step; blocking). Returns the
    /// outbox entries and delivery records dropped.
    /// The tasks with a result in the outbox or the deliveries journal
    /// (delivered, or on its way). Reads both files: for the rare look at
    /// start-up, not for a hot path. Blocking.
    pub(crate) fn tasks_with_results(&self) -> std::io::Result<std::collections::HashSet<String>> {
        let (entries, _) = outbox::read_all(&self.inner.env.outbox_dir())?;
        let (records, _) =
            durable::read_journal(self.inner.deliveries.path(), webhook::parse_record)?;
        Ok(entries
            .into_iter()
            .filter_map(|e| e.task_id)
            .chain(records.into_iter().filter_map(|r| r.body?.task_id))
            .collect())
    }

    pub(crate) fn prune(&self, now_ms: i64) -> std::io::Result<(usize, usize)> {
        let inner = &self.inner;
        let entries = outbox::prune(
            inner
                .outbox
                .path()
                .parent()
                .unwrap_or(std::path::Path::new(".")),
            now_ms,
        )?;
        let _held = inner
            .deliveries_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let records = webhook::compact(inner.deliveries.path(), now_ms, outbox::RETENTION_MS)?;
        if records > 0 {
            inner.deliveries.reopen_if_replaced()?;
        }
        Ok((entries, records))
    }

    /// Stops retrying and ends the live streams (shutdown); pending
    /// deliveries stay in the journal.
    pub(crate) fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// Stops, waits for the retry tasks to end, and syncs and closes the
    /// files.
    pub(crate) async fn close(&self) {
        self.stop();
        self.inner.retries.close();
        self.inner.retries.wait().await;
        self.inner.outbox.journal().close();
        self.inner.deliveries.close();
        let syncers: Vec<_> =
            std::mem::take(&mut *self.inner.syncers.lock().unwrap_or_else(|p| p.into_inner()));
        let _ = tokio::task::spawn_blocking(move || {
            for syncer in syncers {
                if let Ok(Err(err)) = syncer.join() {
                    tracing::error!(%err, "cannot sync the outbox");
                }
            }
        })
        .await;
    }

    /// Waits until no retry task runs.
    #[cfg(test)]
    pub(crate) async fn settled(&self) {
        self.inner.retries.close();
        self.inner.retries.wait().await;
        self.inner.retries.reopen();
    }
}

/// The `what` (a signing secret, a bearer token) under the config key
/// `key`. A key named but not set fails the attempt: what was meant to be
/// authenticated is never sent without it.
fn config_text(env: &dyn Env, key: Option<&str>, what: &str) -> Result<Option<String>, String> {
    let Some(key) = key else {
        return Ok(None);
    };
    match env.config_value(key) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(_) => Err(format!("the {what} `{key}` is not a text")),
        None => Err(format!("the {what} `{key}` is not set")),
    }
}

/// Resumes the webhook deliveries the journal left pending when the
/// deliverer was opened (an earlier gateway stopped or crashed), each
/// when its next attempt is due; returns how many.
pub(crate) async fn resume_pending(deliverer: &Deliverer) -> usize {
    let jobs = std::mem::take(
        &mut *deliverer
            .inner
            .resumable
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    );
    let now = deliverer.now_ms();
    let count = jobs.len();
    for job in jobs {
        let due_in = job.next_at_ms.map_or(0, |at| at.saturating_sub(now).max(0));
        deliverer.spawn_retries(job, Duration::from_millis(due_in as u64));
    }
    if count > 0 {
        tracing::info!(count, "resuming pending webhook deliveries");
    }
    count
}
