//! The intake log: every trigger the gateway accepts is written here
//! before it is acknowledged, then fed to where it goes (today: system
//! events into their session's queue).
//!
//! Invariants:
//! * A record reaches the OS before its request is answered (one
//!   `write(2)`), so a kill -9 of the gateway loses nothing acknowledged;
//!   fsync is group-committed ([`crate::durable::Journal`]), so a power
//!   loss costs at most the last few milliseconds.
//! * Records carry increasing sequence numbers, and reach the feeder in
//!   that order; `intake.applied` holds the last one fed. The feeder, at
//!   every start, replays what the log holds past that mark, so a crash
//!   between writing and feeding loses nothing; the queue's own rules
//!   (cap 20, an event equal to the one before it dropped) apply as they
//!   would for any event.
//! * A turn that starts after a record was accepted sees it: the gateway
//!   waits for the feeder to reach the record's number first
//!   ([`Intake::caught_up`]).
//! * While the log cannot be synced, every record is refused before it
//!   is written ([`durable::NotSynced`]; the routes answer 503) and the
//!   feeder's row in `gateway status` shows why, until a retried sync
//!   succeeds ([`Feeder`] names the log to the supervisor).

use crate::session::events::FedEvent;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::supervisor::{Component, ComponentKind};
use super::{GatewayEvent, Shared};
use crate::durable::{self, Journal};

/// One accepted trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub seq: u64,
    /// Milliseconds.
    pub ts: i64,
    /// Nearly always one of a few fixed names: no allocation per record.
    pub kind: Cow<'static, str>,
    pub session_key: String,
    pub text: String,
    /// `now` or `next-heartbeat`.
    pub mode: Cow<'static, str>,
    pub trusted: bool,
    /// A webhook's agent run (kind [`HOOK_AGENT_KIND`]): what it asked
    /// for besides the message (`text`); for the notice of how a run went
    /// (`hook-result`), `{taskId}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<serde_json::Value>,
    /// A webhook's idempotency entry (`{key, answer}`), written with the
    /// record so a crash before the replay cache is saved forgets no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<serde_json::Value>,
}

/// The kind of a record of `POST /v1/system/event` (and `system event`).
pub(crate) const SYSTEM_EVENT_KIND: &str = "system-event";

/// The kind of a record that starts a webhook's agent run rather than
/// queueing an event.
pub(crate) const HOOK_AGENT_KIND: &str = "hook-agent";

/// The kind of a record of a subagent's announce: an event for its
/// parent's session that is never dropped to keep the queue within its
/// limits (nor thinned from a batch).
pub(crate) const SUBAGENT_ANNOUNCE_KIND: &str = "subagent-announce";

/// The log, its writer side and the feeder's progress.
pub(crate) struct Intake {
    journal: Arc<Journal>,
    /// The last sequence number given out (taken under this lock with the
    /// write, so the file is in sequence order).
    last_seq: Mutex<u64>,
    applied_path: PathBuf,
    to_feeder: mpsc::UnboundedSender<Record>,
    feed: tokio::sync::Mutex<mpsc::UnboundedReceiver<Record>>,
    applied: watch::Sender<u64>,
    /// The last record whose run, if it has one, was started (just after
    /// `applied` moves): what was accepted and is past this is not yet
    /// counted among the runs in flight.
    runs_started_through: watch::Sender<u64>,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake")
            .field("path", &self.journal.path())
            .finish_non_exhaustive()
    }
}

impl Intake {
    /// Opens the log in `dir`; sequence numbers continue after what it
    /// and the applied mark hold.
    pub(crate) fn open(dir: &std::path::Path) -> std::io::Result<Intake> {
        Intake::open_with(dir, durable::JournalOptions::default())
    }

    /// [`Intake::open`] with the log's disk and retry waits.
    pub(crate) fn open_with(
        dir: &std::path::Path,
        options: durable::JournalOptions,
    ) -> std::io::Result<Intake> {
        let path = dir.join("intake.jsonl");
        let applied_path = dir.join("intake.applied");
        let applied = read_applied(&applied_path);
        let (records, _) = durable::read_journal(&path, parse)?;
        let last = records
            .iter()
            .map(|r| r.seq)
            .max()
            .unwrap_or(0)
            .max(applied);
        let journal = Arc::new(Journal::open_with(&path, options)?);
        let (to_feeder, feed) = mpsc::unbounded_channel();
        Ok(Intake {
            journal,
            last_seq: Mutex::new(last),
            applied_path,
            to_feeder,
            feed: tokio::sync::Mutex::new(feed),
            applied: watch::Sender::new(applied),
            runs_started_through: watch::Sender::new(applied),
        })
    }

    /// The journal, for its group-commit thread.
    pub(crate) fn journal(&self) -> Arc<Journal> {
        self.journal.clone()
    }

    /// Writes `record` (its `seq` is assigned here and returned) and hands
    /// it to the feeder.
    pub(crate) fn accept(&self, mut record: Record) -> std::io::Result<u64> {
        let mut last = self.last_seq.lock().unwrap_or_else(|p| p.into_inner());
        let seq = *last + 1;
        record.seq = seq;
        let mut line = serde_json::to_vec(&record).expect("records serialise");
        line.push(b'\n');
        self.journal.append_lines(&line)?;
        *last = seq;
        // Under the lock, as in `accept_all`.
        let _ = self.to_feeder.send(record);
        drop(last);
        Ok(seq)
    }

    /// [`Intake::accept`] for a batch, in one write; each record's `seq`
    /// is assigned here.
    pub(crate) fn accept_all(&self, records: &mut [Record]) -> std::io::Result<()> {
        let mut last = self.last_seq.lock().unwrap_or_else(|p| p.into_inner());
        let mut seq = *last;
        let lines: Vec<Vec<u8>> = records
            .iter_mut()
            .map(|record| {
                seq += 1;
                record.seq = seq;
                serde_json::to_vec(record).expect("records serialise")
            })
            .collect();
        let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        self.journal.append_all(&refs)?;
        *last = seq;
        // Handed over under the lock, so the feeder gets records in
        // sequence order: it skips what is at or below its mark, and a
        // record arriving after a later one was fed would never be
        // queued. The feeder replays the log at its start, so a closed
        // channel loses nothing.
        for record in records.iter() {
            let _ = self.to_feeder.send(record.clone());
        }
        drop(last);
        Ok(())
    }

    /// The last accepted sequence number.
    pub(crate) fn last_accepted(&self) -> u64 {
        *self.last_seq.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until the runs of everything accepted so far have been
    /// started (no time limit: a feeder that cannot feed holds the caller
    /// back, which is what a caller that waits for room wants).
    pub(crate) async fn runs_started(&self) {
        let target = self.last_accepted();
        let mut rx = self.runs_started_through.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|started| *started >= target).await;
    }

    /// Waits until everything accepted so far has been fed (at most
    /// `limit`; a stalled feeder must not hold turns forever).
    pub(crate) async fn caught_up(&self, limit: Duration) {
        let target = self.last_accepted();
        let mut rx = self.applied.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|applied| *applied >= target)).await;
    }

    /// The last fed sequence number.
    pub(crate) fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Whether the log has grown to [`ROTATE_BYTES`], so that it is to be
    /// emptied once fed.
    fn rotation_due(&self) -> std::io::Result<bool> {
        Ok(self.journal.size_bytes()? >= ROTATE_BYTES)
    }

    /// Empties the log when every record in it was fed (the applied mark
    /// keeps the numbering going).
    fn rotate_if_fed(&self) -> std::io::Result<bool> {
        let emptied = {
            let last = self.last_seq.lock().unwrap_or_else(|p| p.into_inner());
            self.journal.truncate_if(|| self.applied() >= *last)?
        };
        // Synced with no lock held: acceptances go on meanwhile.
        if emptied {
            self.journal.sync()?;
        }
        Ok(emptied)
    }
}

/// How long the feeder gathers records after the first of a batch.
const FEED_WINDOW: Duration = Duration::from_millis(5);
/// The least time from one batch to the next: under a steady stream each
/// batch costs two small durable file replaces, so they are spaced out
/// (records are on the log already; a turn waits for them, see
/// [`Intake::caught_up`]).
const FEED_SPACING: Duration = Duration::from_millis(100);

/// Records taken off the feeder's channel between two yields.
const DRAIN_SLICE: usize = 256;

/// Size at which a fully fed intake log is emptied.
const ROTATE_BYTES: u64 = 1024 * 1024;

pub(crate) fn parse(line: &[u8]) -> Option<Record> {
    serde_json::from_slice(line).ok()
}

fn read_applied(path: &std::path::Path) -> u64 {
    durable::read_if_exists(path)
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8_lossy(&b).trim().parse().ok())
        .unwrap_or(0)
}

/// Feeds records to the session queues: a batch at a time, one queue
/// write per batch.
pub(crate) struct Feeder;

impl Component for Feeder {
    fn kind(&self) -> ComponentKind {
        ComponentKind::IntakeFeeder
    }

    fn journals(&self, shared: &Shared) -> Vec<tokio::sync::watch::Receiver<durable::SyncHealth>> {
        vec![shared.intake.journal.health()]
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let intake = &shared.intake;
            let mut feed = intake.feed.lock().await;
            // What the log holds past the mark: after a crash, or records
            // taken off the channel by a run that failed.
            let replay = {
                let path = intake.journal.path().to_path_buf();
                let applied = intake.applied();
                shared
                    .engine
                    .blocking(move || {
                        durable::read_journal(&path, parse).map(|(records, _)| {
                            records
                                .into_iter()
                                .filter(|r| r.seq > applied)
                                .collect::<Vec<_>>()
                        })
                    })
                    .await??
            };
            if let Some(through) = replay.iter().map(|r| r.seq).max() {
                apply(&shared, replay, through).await?;
            }
            let mut last_batch: Option<tokio::time::Instant> = None;
            loop {
                let first = tokio::select! {
                    r = feed.recv() => r,
                    () = stop.cancelled() => return Ok(()),
                };
                let Some(first) = first else { return Ok(()) };
                // Records that come close together are fed together: one
                // queue write for many (they are on the log already).
                let window = FEED_WINDOW.max(last_batch.map_or(Duration::ZERO, |at| {
                    FEED_SPACING.saturating_sub(at.elapsed())
                }));
                tokio::select! {
                    () = tokio::time::sleep(window) => {}
                    () = stop.cancelled() => {}
                }
                last_batch = Some(tokio::time::Instant::now());
                // Only this task moves the mark: it holds while the batch
                // is gathered.
                let applied = intake.applied();
                let mut through = applied;
                let mut batch = Vec::new();
                let mut take = |record: Record, batch: &mut Vec<Record>| {
                    if record.seq > applied {
                        through = through.max(record.seq);
                        batch.push(record);
                    }
                };
                take(first, &mut batch);
                // Taken off the channel a slice at a time, yielding in
                // between, and thinned to what can still be queued as it
                // grows: a burst of thousands never holds up the requests
                // that share this thread, nor leaves thousands of records
                // for the bookkeeping thread.
                loop {
                    let mut taken = 0;
                    while taken < DRAIN_SLICE {
                        match feed.try_recv() {
                            Ok(more) => take(more, &mut batch),
                            Err(_) => break,
                        }
                        taken += 1;
                    }
                    if batch.len() >= DRAIN_SLICE {
                        keep_what_counts(&mut batch);
                    }
                    if taken < DRAIN_SLICE {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                if through > applied {
                    keep_what_counts(&mut batch);
                    apply(&shared, batch, through).await?;
                }
            }
        })
    }
}

/// Drops from `batch` (records in sequence order, each newer than the
/// applied mark) the events that cannot end among the newest
/// [`crate::session::events::CAP`] of their session's queue, whatever it
/// holds: queueing the rest leaves every queue as queueing all would (a
/// live record is never a replay, so the queue's own skip rule leaves
/// them all in). A webhook's run is always kept.
fn keep_what_counts(batch: &mut Vec<Record>) {
    let dropped = {
        let records: &[Record] = batch;
        let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, record) in records.iter().enumerate() {
            if record.kind != HOOK_AGENT_KIND && record.kind != SUBAGENT_ANNOUNCE_KIND {
                by_key
                    .entry(record.session_key.as_str())
                    .or_default()
                    .push(i);
            }
        }
        let mut dropped = vec![false; records.len()];
        for indices in by_key.values() {
            let from = crate::session::events::first_that_counts(
                indices,
                |&i| records[i].text.trim().is_empty(),
                |&i| records[i].text.as_str(),
            );
            for &i in &indices[..from] {
                dropped[i] = true;
            }
        }
        dropped
    };
    let mut index = 0;
    batch.retain(|_| {
        index += 1;
        !dropped[index - 1]
    });
}

/// Queues the events of `batch`, moves the applied mark to `through` (the
/// last record taken, kept or thinned out), and empties a fully fed log
/// that grew large: one trip to the blocking boundary.
async fn apply(shared: &Arc<Shared>, batch: Vec<Record>, through: u64) -> anyhow::Result<()> {
    let app = shared.engine.app();
    let feeding = shared.clone();
    // A live batch is thinned to a few records per session, but a replay
    // at start may hold thousands: all of the work on them is done on the
    // bookkeeping thread, below the threads that answer requests.
    let (warnings, rotated, runs, keys) = shared
        .engine
        .background(
            move || -> anyhow::Result<(Vec<String>, bool, Vec<_>, Vec<String>)> {
                let mut by_key: BTreeMap<String, Vec<Record>> = BTreeMap::new();
                let mut runs = Vec::new();
                for r in batch {
                    if r.kind == HOOK_AGENT_KIND {
                        runs.push(r);
                    } else {
                        match by_key.get_mut(&r.session_key) {
                            Some(records) => records.push(r),
                            None => {
                                by_key.insert(r.session_key.clone(), vec![r]);
                            }
                        }
                    }
                }
                let keys: Vec<String> = by_key.keys().cloned().collect();
                let queue = app.sessions(None).events();
                let now = app.host.now_ts();
                // Every session of the batch in one write of the queue file.
                let groups: Vec<(&str, Vec<FedEvent<'_>>)> = by_key
                    .iter()
                    .map(|(key, records)| {
                        let events = records
                            .iter()
                            .map(|r| FedEvent {
                                text: r.text.as_str(),
                                ts: r.ts,
                                trusted: r.trusted,
                                seq: Some(r.seq),
                                kept: r.kind == SUBAGENT_ANNOUNCE_KIND,
                            })
                            .collect();
                        (key.as_str(), events)
                    })
                    .collect();
                let warnings = if groups.is_empty() {
                    Vec::new()
                } else {
                    queue.enqueue_groups(&groups, now)?
                };
                // A webhook's run is in the ledger before the mark moves past
                // its record: a crash between the two records it again, never
                // not at all (a run already recorded is not recorded twice).
                let now_ms = app.host.now_ms();
                let started = super::http::webhook_runs::record_runs(&feeding, runs, now_ms)?;
                let intake = &feeding.intake;
                durable::atomic_replace(
                    &intake.applied_path,
                    through.to_string().as_bytes(),
                    durable::PRIVATE_FILE_MODE,
                )?;
                intake.applied.send_replace(through);
                // The log holds the idempotency keys of webhooks since the
                // replay cache was last saved: saved first, then emptied.
                let rotated = if intake.rotation_due()? {
                    feeding
                        .webhooks
                        .save_replay_then(&app.paths.gateway_dir(), now_ms, || {
                            intake.rotate_if_fed()
                        })?
                } else {
                    false
                };
                Ok((warnings, rotated, started, keys))
            },
        )
        .await??;
    for (task, record) in runs {
        super::http::webhook_runs::start_run(shared, task, record);
    }
    shared.intake.runs_started_through.send_replace(through);
    for w in warnings {
        tracing::warn!("{w}");
    }
    if rotated {
        tracing::debug!("intake log emptied: every record in it was fed");
    }
    for key in keys {
        let _ = shared
            .bus
            .send(GatewayEvent::EventsQueued { session_key: key });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str) -> Record {
        Record {
            seq: 0,
            ts: 1_796_000_000_000,
            kind: "system-event".into(),
            session_key: "agent:main:main".into(),
            text: text.into(),
            mode: "next-heartbeat".into(),
            trusted: true,
            hook: None,
            replay: None,
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Thinning a batch as it is gathered (at any points) leaves every
        /// session's queue as queueing the whole batch would, and keeps
        /// every webhook run and the batch's last record.
        #[test]
        fn a_thinned_batch_queues_what_the_whole_batch_queues(
            before in proptest::collection::vec((0u8..3, 0u8..4), 0..25),
            burst in proptest::collection::vec((0u8..3, 0u8..6), 1..150),
            cuts in proptest::collection::vec(0usize..150, 0..6),
        ) {
            let key = |k: u8| format!("agent:main:k{k}");
            let text = |t: u8| if t == 4 { " ".to_string() } else { format!("event {t}") };
            let dir = tempfile::tempdir().unwrap();
            let whole = crate::session::events::Queue::new(&dir.path().join("whole.json"));
            let thinned = crate::session::events::Queue::new(&dir.path().join("thinned.json"));
            let now = jiff::Timestamp::UNIX_EPOCH;
            let mut seq = 0;
            for (k, t) in before {
                seq += 1;
                for q in [&whole, &thinned] {
                    q.enqueue_many(&key(k), &[(text(t), 10, true, Some(seq))], now).unwrap();
                }
            }
            let records: Vec<Record> = burst
                .into_iter()
                .map(|(k, t)| {
                    seq += 1;
                    let mut r = event(&text(t));
                    r.seq = seq;
                    r.session_key = key(k);
                    if t == 5 {
                        r.kind = HOOK_AGENT_KIND.into();
                    }
                    r
                })
                .collect();
            let mut batch = Vec::new();
            for (i, r) in records.iter().enumerate() {
                batch.push(r.clone());
                if cuts.contains(&i) {
                    keep_what_counts(&mut batch);
                }
            }
            keep_what_counts(&mut batch);
            let queue = |q: &crate::session::events::Queue, records: &[Record]| {
                for k in 0..3 {
                    let items: Vec<_> = records
                        .iter()
                        .filter(|r| r.kind != HOOK_AGENT_KIND && r.session_key == key(k))
                        .map(|r| (r.text.as_str(), r.ts, r.trusted, Some(r.seq)))
                        .collect();
                    q.enqueue_many(&key(k), &items, now).unwrap();
                }
            };
            queue(&whole, &records);
            queue(&thinned, &batch);
            for k in 0..3 {
                proptest::prop_assert_eq!(whole.peek(&key(k)), thinned.peek(&key(k)));
            }
            let runs = |rs: &[Record]| rs.iter().filter(|r| r.kind == HOOK_AGENT_KIND).count();
            proptest::prop_assert_eq!(runs(&batch), runs(&records));
            proptest::prop_assert_eq!(batch.last().map(|r| r.seq), records.last().map(|r| r.seq));
        }
    }

    #[test]
    fn a_burst_is_thinned_to_what_its_queue_can_hold() {
        let mut batch: Vec<Record> = (1..=5000)
            .map(|n| {
                let mut r = event(&format!("build {n} finished"));
                r.seq = n;
                r
            })
            .collect();
        keep_what_counts(&mut batch);
        let kept: Vec<u64> = batch.iter().map(|r| r.seq).collect();
        assert_eq!(kept, (4980..=5000).collect::<Vec<_>>());
    }

    async fn feed_once(shared: &Arc<Shared>) {
        let stop = CancellationToken::new();
        let run = tokio::spawn(Arc::new(Feeder).start(shared.clone(), stop.clone()));
        shared.intake.caught_up(Duration::from_secs(5)).await;
        stop.cancel();
        run.await.unwrap().unwrap();
    }

    fn queued(shared: &Arc<Shared>) -> Vec<String> {
        shared
            .engine
            .app()
            .sessions(None)
            .events()
            .peek("agent:main:main")
            .into_iter()
            .map(|e| e.text)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn accepted_records_survive_a_crash_before_feeding_and_are_fed_once() {
        let dir = tempfile::tempdir().unwrap();
        {
            // Accepted, then the process dies before the feeder ran.
            let shared = crate::gateway::test_shared(dir.path(), "t");
            for text in ["one", "two", "three"] {
                shared.intake.accept(event(text)).unwrap();
            }
            assert_eq!(shared.intake.last_accepted(), 3);
        }
        let shared = crate::gateway::test_shared(dir.path(), "t");
        assert_eq!(shared.intake.applied(), 0);
        // Numbering goes on after what the log holds.
        let fourth = shared.intake.accept(event("four")).unwrap();
        assert_eq!(fourth, 4);
        feed_once(&shared).await;
        assert_eq!(queued(&shared), ["one", "two", "three", "four"]);
        assert_eq!(shared.intake.applied(), 4);
        drop(shared);
        // A later start replays nothing already fed.
        let shared = crate::gateway::test_shared(dir.path(), "t");
        assert_eq!(shared.intake.applied(), 4);
        feed_once(&shared).await;
        assert_eq!(queued(&shared), ["one", "two", "three", "four"]);
        let next = shared.intake.accept(event("five")).unwrap();
        assert_eq!(next, 5);
    }

    #[test]
    fn concurrent_acceptances_reach_the_feeder_in_sequence_order() {
        // The feeder skips what is at or below its mark: a record handed
        // over after a later one was fed would never be queued.
        let dir = tempfile::tempdir().unwrap();
        let intake = Intake::open(dir.path()).unwrap();
        let (writers, each) = (8, 500);
        std::thread::scope(|s| {
            for w in 0..writers {
                let intake = &intake;
                s.spawn(move || {
                    for i in 0..each {
                        intake.accept(event(&format!("{w}-{i}"))).unwrap();
                    }
                });
            }
        });
        let mut feed = intake.feed.try_lock().unwrap();
        let mut seqs = Vec::new();
        while let Ok(record) = feed.try_recv() {
            seqs.push(record.seq);
        }
        assert_eq!(seqs, (1..=writers * each).collect::<Vec<u64>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fully_fed_log_is_emptied_and_numbering_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::gateway::test_shared(dir.path(), "t");
        let big = "x".repeat(200 * 1024);
        for i in 0..6 {
            shared.intake.accept(event(&format!("{i} {big}"))).unwrap();
        }
        assert!(shared.intake.journal.size_bytes().unwrap() > ROTATE_BYTES);
        feed_once(&shared).await;
        assert_eq!(shared.intake.journal.size_bytes().unwrap(), 0);
        // Every record was fed; the queue keeps what its caps allow and
        // counts the rest.
        let held = shared
            .engine
            .app()
            .sessions(None)
            .events()
            .peek("agent:main:main");
        assert!(held.last().unwrap().text.starts_with("5 "));
        assert_eq!(held.len() + held[0].dropped_before as usize, 6);
        drop(shared);
        let shared = crate::gateway::test_shared(dir.path(), "t");
        assert_eq!(shared.intake.accept(event("next")).unwrap(), 7);
    }
}
