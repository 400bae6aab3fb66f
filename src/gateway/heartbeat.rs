//! The heartbeat runner: wakes the agent on its interval (a stable phase
//! within it), on wakes from the bus (`system event --mode now`, cron,
//! webhooks) and on `run-now`, and runs one heartbeat at a time
//! ([`crate::app::heartbeat::run_once`]) with its turn in the session's
//! lane and its delivery through the gateway's deliverer.
//!
//! Invariants:
//! * Idle, it sleeps on one timer until the next due time (at most
//!   [`MAX_SLEEP`], so a clock jump is noticed); no polling.
//! * Wakes that come within [`COALESCE`] of each other become one run.
//! * A run skipped because the session is busy (`requests-in-flight`)
//!   is retried every [`BUSY_RETRY`] and does not move the schedule;
//!   after [`BUSY_PATIENCE`] retries it waits in the lane like any turn,
//!   so heartbeats are never starved. Only the first skip of a streak is
//!   recorded.
//! * After an interval run the next one is on the next phase slot; after
//!   any other run it is an interval later (a wake resets the cooldown).
//! * An alert is remembered as sent (for the 24-hour duplicate rule) when
//!   its delivery succeeds or is pending; if the webhook's retries run
//!   out, it is forgotten again and a `failed` event is recorded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::supervisor::{Component, ComponentKind};
use super::{GatewayEvent, Shared};
use crate::activity::runs::{RunEvent, RunStatus};
use crate::app::heartbeat::{self as beat, Delivered, Plan, Reply, Runner};
use crate::delivery::{DeliveryState, GaveUp, Item, SecretRef, Source, Target, UrlOrigin};
use crate::trigger::TurnRequest;

/// Longest single sleep.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Wakes this close together are one run.
const COALESCE: Duration = Duration::from_millis(250);
/// Wait before retrying a run the busy session skipped.
const BUSY_RETRY: Duration = Duration::from_secs(1);
/// Retries before the run waits in the lane instead.
const BUSY_PATIENCE: u32 = 30;
/// How long a run waits for accepted events to reach the session queue.
const FEED_WAIT: Duration = Duration::from_secs(2);

/// What the runner shares with the control API.
#[derive(Debug)]
pub(crate) struct HeartbeatState {
    /// The next interval run (epoch ms); `i64::MIN` for none.
    next_due_ms: AtomicI64,
    /// One run at a time (the runner's and `run-now`'s).
    running: tokio::sync::Mutex<()>,
    /// Set when `run-now` or a switch change should make the runner look
    /// at its schedule again.
    nudge: tokio::sync::Notify,
    enabled: AtomicBool,
}

impl HeartbeatState {
    pub(crate) fn new(enabled: bool) -> HeartbeatState {
        HeartbeatState {
            next_due_ms: AtomicI64::new(i64::MIN),
            running: tokio::sync::Mutex::new(()),
            nudge: tokio::sync::Notify::new(),
            enabled: AtomicBool::new(enabled),
        }
    }

    /// When the next interval heartbeat runs, if one is scheduled and
    /// heartbeats are on.
    pub(crate) fn next_due_ms(&self) -> Option<i64> {
        let due = self.next_due_ms.load(Ordering::Acquire);
        (due != i64::MIN && self.enabled.load(Ordering::Acquire)).then_some(due)
    }

    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Release);
        self.nudge.notify_one();
    }
}

/// Runs one heartbeat now (one at a time), for `reason`; returns its
/// event once the outcome and any delivery are recorded. `wait_in_lane`:
/// a busy session is waited for rather than skipped; `record_busy`: a
/// `requests-in-flight` skip is recorded (the first of a streak is).
pub(crate) async fn run(
    shared: &Arc<Shared>,
    agent: Option<&str>,
    reason: &str,
    wait_in_lane: bool,
    record_busy: bool,
) -> anyhow::Result<RunEvent> {
    let _one = shared.heartbeat.running.lock().await;
    // Events accepted before this run are in the session's queue first.
    shared.intake.caught_up(FEED_WAIT).await;
    let app = shared.engine.app().for_agent(agent)?;
    let key = app.sessions(Some(&app.agent)).resolve_key(None);
    let lane_key = if app.config.config.agents.defaults.heartbeat.isolated_session {
        format!("{key}:heartbeat")
    } else {
        key
    };
    let busy = !wait_in_lane && super::route::busy(shared, &lane_key);
    let runner_shared = shared.clone();
    let reason = reason.to_string();
    let handle = tokio::runtime::Handle::current();
    shared
        .engine
        .blocking_on_runtime(move || {
            let mut runner = GatewayRunner {
                shared: runner_shared,
                handle,
                agent: app.agent.clone(),
            };
            beat::run_once(&app, &reason, busy, record_busy, &mut runner)
        })
        .await?
}

/// The turn in the session's lane, the delivery through the deliverer;
/// called on the blocking boundary, so it may wait on the runtime.
struct GatewayRunner {
    shared: Arc<Shared>,
    handle: tokio::runtime::Handle,
    agent: String,
}

impl Runner for GatewayRunner {
    fn turn(&mut self, request: TurnRequest) -> anyhow::Result<Reply> {
        let trigger = crate::trigger::Trigger::new(crate::trigger::Source::Heartbeat, request);
        let report = self
            .handle
            .block_on(super::route::route(&self.shared, trigger))?;
        for w in &report.warnings {
            tracing::warn!("{w}");
        }
        Ok(Reply {
            text: report.outcome.reply,
            reasoning: report.outcome.reasoning,
        })
    }

    fn deliver(&mut self, plan: &Plan, text: &str) -> anyhow::Result<Delivered> {
        let app = self.shared.engine.app().for_agent(Some(&self.agent))?;
        let target = delivery_target(&app, &plan.destination);
        let item = Item {
            source: Source::Heartbeat,
            session_key: plan.base_key.clone(),
            agent_id: self.agent.clone(),
            text: text.to_string(),
            task_id: None,
            to: None,
            channel: None,
            account_id: None,
        };
        let delivery = self
            .handle
            .block_on(self.shared.deliverer.deliver(item, &target))?;
        match delivery.state {
            DeliveryState::Delivered => Ok(Delivered {
                to: delivery.to,
                pending: None,
            }),
            // Recorded and retried until the receiver takes it.
            DeliveryState::Pending { reason, .. } => Ok(Delivered {
                to: delivery.to,
                pending: Some(reason),
            }),
            DeliveryState::Failed { reason } => {
                anyhow::bail!("delivery {} failed: {reason}", delivery.id)
            }
        }
    }
}

/// Where a heartbeat destination (or the main session's last route)
/// delivers.
pub(crate) fn delivery_target(app: &crate::app::App, destination: &beat::Destination) -> Target {
    let config = &app.config.config.agents.defaults.heartbeat;
    match destination.channel {
        "outbox" => Target::Outbox,
        "chat" => match &destination.route {
            Some(route) => Target::Chat(route.clone()),
            None => Target::Outbox,
        },
        "webhook" => Target::Webhook {
            url: destination.to.clone().unwrap_or_default(),
            // Looked up again at every attempt, never written down.
            secret: config.webhook_secret.as_ref().map(|_| SecretRef {
                key: "agents.defaults.heartbeat.webhookSecret".to_string(),
            }),
            origin: UrlOrigin::Config,
        },
        _ => Target::None,
    }
}

/// The runner component.
pub(crate) struct HeartbeatRunner;

impl Component for HeartbeatRunner {
    fn kind(&self) -> ComponentKind {
        ComponentKind::HeartbeatRunner
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let mut bus = shared.bus.subscribe();
            loop {
                // One loop per agent that runs heartbeats; a reload that
                // changes which agents do starts them again.
                let agents = heartbeat_agents(&shared);
                let round = stop.child_token();
                let loops = agents.iter().map(|agent| {
                    let state = agent.as_deref().map(|id| {
                        Arc::new(HeartbeatState::new(
                            agent_app(&shared, Some(id))
                                .is_some_and(|app| app.heartbeat_runs().enabled()),
                        ))
                    });
                    agent_loop(shared.clone(), agent.clone(), state, round.clone())
                });
                let all = futures_util::future::try_join_all(loops);
                tokio::pin!(all);
                let changed = loop {
                    tokio::select! {
                        done = &mut all => {
                            done?;
                            return Ok(());
                        }
                        event = bus.recv() => match event {
                            Ok(GatewayEvent::ConfigReloaded) if heartbeat_agents(&shared) != agents => break true,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => break false,
                            _ => {}
                        },
                    }
                };
                round.cancel();
                all.await?;
                if !changed || stop.is_cancelled() {
                    return Ok(());
                }
            }
        })
    }
}

/// The agents whose heartbeats run (the reference's rule): `None` for
/// the default agent, whose loop is the one the control API sees.
fn heartbeat_agents(shared: &Shared) -> Vec<Option<String>> {
    let app = shared.engine.app();
    let Ok(agents) = app.agents() else {
        return vec![None];
    };
    agents
        .with_heartbeat()
        .into_iter()
        .map(|a| (!a.is_default).then(|| a.id.clone()))
        .collect()
}

/// The app of `agent` (`None`: the default agent); `None` when the agent
/// is gone from the config.
fn agent_app(shared: &Shared, agent: Option<&str>) -> Option<crate::app::App> {
    shared.engine.app().for_agent(agent).ok()
}

/// The agent a session key belongs to (`agent:<id>:…`).
fn agent_of(key: &str) -> Option<&str> {
    key.strip_prefix("agent:")?.split(':').next()
}

/// Whether a session key is `agent`'s (`None`: the default agent's, which
/// also takes keys of no agent).
fn is_agents(shared: &Shared, agent: Option<&str>, key: &str) -> bool {
    let of = agent_of(key).map(|a| crate::session::key::normalize_id(a, crate::agents::MAIN));
    match (agent, of) {
        (Some(agent), of) => of.as_deref() == Some(agent),
        (None, None) => true,
        (None, Some(of)) => of == shared.engine.app().agent,
    }
}

/// One agent's heartbeats: on its interval, its wakes and its retries.
/// `own_state`: the agent's own schedule state (`None`: the default
/// agent's, kept in the shared state).
async fn agent_loop(
    shared: Arc<Shared>,
    agent: Option<String>,
    own_state: Option<Arc<HeartbeatState>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let agent = agent.as_deref();
    let state: &HeartbeatState = match &own_state {
        Some(state) => state,
        None => &shared.heartbeat,
    };
    let interval_ms = || agent_app(&shared, agent).and_then(|app| app.heartbeat_interval_ms());
    let next_ms = |now: i64| agent_app(&shared, agent).and_then(|app| app.next_heartbeat_ms(now));
    let mut bus = shared.bus.subscribe();
    let mut gave_up = Some(shared.deliverer.gave_up());
    let mut next_due = next_ms(shared.host.now_ms());
    let mut busy_streak: u32 = 0;
    // The reason of a run the busy session deferred.
    let mut deferred: Option<String> = None;
    // A config reload seen while wakes were gathered.
    let mut reloaded = false;
    loop {
        let interval = interval_ms();
        if interval.is_none() {
            next_due = None;
        } else if next_due.is_none() {
            next_due = next_ms(shared.host.now_ms());
        }
        state
            .next_due_ms
            .store(next_due.unwrap_or(i64::MIN), Ordering::Release);
        let now = shared.host.now_ms();
        let sleep = match next_due {
            _ if busy_streak > 0 => BUSY_RETRY,
            Some(due) => ms(due - now).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        let reason: Option<String> = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(sleep) => {
                if busy_streak == 0 {
                    shared.work_ran.notify_one();
                }
                let now = shared.host.now_ms();
                match next_due {
                    _ if busy_streak > 0 => deferred.clone(),
                    Some(due) if now >= due => Some("interval".to_string()),
                    _ => None,
                }
            }
            given = async {
                match gave_up.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                match given {
                    Ok(given) if given.source == Source::Heartbeat
                        && is_agents(&shared, agent, &given.session_key) => {
                        forget_undelivered(&shared, &given).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => gave_up = None,
                    _ => {}
                }
                None
            }
            () = state.nudge.notified() => {
                // The switch or the config changed: look again.
                next_due = None;
                None
            }
            event = bus.recv() => match event {
                Ok(GatewayEvent::Wake { reason, session_key })
                    if is_agents(&shared, agent, &session_key) => {
                    // Wakes close together are one run; a config
                    // reload among them still counts.
                    let _ = tokio::time::timeout(COALESCE, async {
                        loop {
                            match bus.recv().await {
                                Ok(GatewayEvent::ConfigReloaded) => reloaded = true,
                                Ok(_) => continue,
                                Err(_) => break,
                            }
                        }
                    })
                    .await;
                    Some(reason)
                }
                Ok(GatewayEvent::ConfigReloaded) => {
                    next_due = None;
                    None
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            },
        };
        let Some(reason) = reason else { continue };
        // The interval may have changed: worked out again after
        // the run.
        let interval = if std::mem::take(&mut reloaded) {
            interval_ms()
        } else {
            interval
        };
        // A run for a wake when the interval has come due too
        // counts as the interval's: the schedule stays on its slots.
        let slot_due = next_due.is_some_and(|due| shared.host.now_ms() >= due);
        let schedule_reason = if slot_due {
            "interval"
        } else {
            reason.as_str()
        };
        let patient = busy_streak >= BUSY_PATIENCE;
        let event = run(&shared, agent, &reason, patient, busy_streak == 0).await;
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!("heartbeat run failed: {err:#}");
                busy_streak = 0;
                deferred = None;
                next_due = after_run(&shared, agent, schedule_reason, interval);
                continue;
            }
        };
        if event.status == RunStatus::Skipped
            && event.reason.as_deref() == Some("requests-in-flight")
        {
            // Not a run: the schedule stays, a retry comes soon.
            busy_streak += 1;
            deferred = Some(reason);
            continue;
        }
        busy_streak = 0;
        deferred = None;
        next_due = after_run(&shared, agent, schedule_reason, interval);
    }
}

/// An alert whose delivery ran out of retries is not a sent one: the same
/// alert may go out again, and a `failed` event says what happened.
async fn forget_undelivered(shared: &Shared, given: &GaveUp) {
    let Some(app) = agent_app(shared, agent_of(&given.session_key)) else {
        return;
    };
    let given = given.clone();
    let done = shared
        .engine
        .blocking(move || {
            beat::delivery_gave_up(
                &app,
                &given.session_key,
                &given.text,
                &given.id,
                &given.reason,
            )
        })
        .await
        .and_then(|r| r);
    if let Err(err) = done {
        tracing::warn!("a failed heartbeat delivery was not recorded: {err:#}");
    }
}

/// The next due time after a run for `reason`.
fn after_run(
    shared: &Shared,
    agent: Option<&str>,
    reason: &str,
    interval: Option<u64>,
) -> Option<i64> {
    let now = shared.host.now_ms();
    let interval = interval?;
    if reason == "interval" {
        agent_app(shared, agent)?.next_heartbeat_ms(now)
    } else {
        Some(now + interval as i64)
    }
}

fn ms(millis: i64) -> Duration {
    Duration::from_millis(millis.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Clock, TokioClock};

    /// Writes a 30-minute heartbeat to the outbox, and a `HEARTBEAT.md`
    /// with one line to check, in `dir`'s state directory.
    fn half_hourly(dir: &std::path::Path) {
        let state = dir.join("state");
        std::fs::create_dir_all(state.join("workspace")).unwrap();
        std::fs::write(
            state.join("config.json5"),
            r#"{agents: {defaults: {heartbeat: {every: "30m", target: "outbox"}}}}"#,
        )
        .unwrap();
        std::fs::write(state.join("workspace/HEARTBEAT.md"), "Check the disks.\n").unwrap();
    }

    /// The gateway's shared state over `dir`, on a paused clock at 10:00.
    fn gateway_at_ten(dir: &std::path::Path) -> (Arc<Shared>, Arc<TokioClock>) {
        let clock = Arc::new(TokioClock::new("2026-12-01T10:00:00Z".parse().unwrap()));
        let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), 1);
        (shared, clock)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn runs_come_on_the_phase_slots_and_close_wakes_are_one_run() {
        let dir = tempfile::tempdir().unwrap();
        // No model is configured: every run that reaches the turn fails
        // at once, which is enough to see when runs happen.
        half_hourly(dir.path());
        let (shared, clock) = gateway_at_ten(dir.path());
        let app = shared.engine.app();
        let first_due = app.next_heartbeat_ms(clock.now().as_millisecond()).unwrap();
        let stop = CancellationToken::new();
        let runner = tokio::spawn(Arc::new(HeartbeatRunner).start(shared.clone(), stop.clone()));
        // Three hours: six runs, each on a slot of the agent's phase.
        tokio::time::sleep(Duration::from_secs(3 * 3600 + 1)).await;
        let events = app.heartbeat_runs().newest(100).unwrap();
        assert_eq!(events.len(), 6, "{events:?}");
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e.status, RunStatus::Failed);
            assert_eq!(e.ts, first_due + i as i64 * 30 * 60 * 1000);
        }
        assert_eq!(
            shared.heartbeat.next_due_ms(),
            Some(first_due + 6 * 30 * 60 * 1000)
        );
        // Three wakes within the coalescing window: one run.
        for _ in 0..3 {
            let _ = shared.bus.send(GatewayEvent::Wake {
                reason: "wake".into(),
                session_key: "agent:main:main".into(),
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let events = app.heartbeat_runs().newest(100).unwrap();
        assert_eq!(events.len(), 7);
        // A wake resets the cooldown: the next run is an interval later.
        let woke = events[6].ts;
        assert_eq!(shared.heartbeat.next_due_ms(), Some(woke + 30 * 60 * 1000));
        stop.cancel();
        runner.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_config_reload_among_coalesced_wakes_sets_the_next_time() {
        let dir = tempfile::tempdir().unwrap();
        half_hourly(dir.path());
        let (shared, _) = gateway_at_ten(dir.path());
        let stop = CancellationToken::new();
        let runner = tokio::spawn(Arc::new(HeartbeatRunner).start(shared.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        // A wake, then, while wakes are gathered, the interval changes.
        let _ = shared.bus.send(GatewayEvent::Wake {
            reason: "wake".into(),
            session_key: "agent:main:main".into(),
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        std::fs::write(
            dir.path().join("state/config.json5"),
            r#"{agents: {defaults: {heartbeat: {every: "10m", target: "outbox"}}}}"#,
        )
        .unwrap();
        let app = crate::app::App::load(&shared.options, shared.host.clone()).unwrap();
        shared.engine.reload(app);
        let _ = shared.bus.send(GatewayEvent::ConfigReloaded);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let events = shared.engine.app().heartbeat_runs().newest(10).unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        // The wake's run resets the cooldown to the new interval.
        assert_eq!(
            shared.heartbeat.next_due_ms(),
            Some(events[0].ts + 10 * 60 * 1000)
        );
        stop.cancel();
        runner.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn only_agents_with_a_heartbeat_run_one_each_on_its_own_interval() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(
            state.join("config.json5"),
            r#"{agents: {defaults: {heartbeat: {every: "30m", target: "outbox"}},
                list: [{id: "home", default: true},
                       {id: "work", heartbeat: {every: "1h"}},
                       {id: "ops", heartbeat: {}}]}}"#,
        )
        .unwrap();
        let (shared, _) = gateway_at_ten(dir.path());
        let stop = CancellationToken::new();
        let runner = tokio::spawn(Arc::new(HeartbeatRunner).start(shared.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_secs(3 * 3600 + 1)).await;
        let runs = |agent: Option<&str>| {
            let app = shared.engine.app().for_agent(agent).unwrap();
            app.heartbeat_runs().newest(100).unwrap().len()
        };
        // The default agent has no heartbeat of its own while others do.
        assert_eq!(runs(None), 0);
        assert_eq!(runs(Some("work")), 3);
        assert_eq!(runs(Some("ops")), 6);
        assert!(state.join("agents/work/heartbeat").is_dir());
        // A wake for one agent's session runs that agent alone.
        let _ = shared.bus.send(GatewayEvent::Wake {
            reason: "wake".into(),
            session_key: "agent:work:main".into(),
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!((runs(Some("work")), runs(Some("ops"))), (4, 6));
        stop.cancel();
        runner.await.unwrap().unwrap();
    }

    /// Moves paused time on by hand until `done`: a run waiting in a lane
    /// is blocking work, which keeps paused time from moving on its own.
    async fn advance_until(done: impl Fn() -> bool) -> Duration {
        let began = tokio::time::Instant::now();
        while !done() {
            assert!(began.elapsed() < Duration::from_secs(10), "gave up waiting");
            tokio::time::advance(Duration::from_millis(100)).await;
            std::thread::sleep(Duration::from_millis(1));
        }
        began.elapsed()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_busy_session_is_retried_every_second_then_waited_for_in_its_lane() {
        let dir = tempfile::tempdir().unwrap();
        half_hourly(dir.path());
        let (shared, clock) = gateway_at_ten(dir.path());
        let app = shared.engine.app();
        let key = app.sessions(Some(&app.agent)).resolve_key(None);
        // A turn holds the session's lane.
        let held = super::super::route::hold(&shared, &key).await;
        let first_due = app.next_heartbeat_ms(clock.now().as_millisecond()).unwrap();
        let stop = CancellationToken::new();
        let runner = tokio::spawn(Arc::new(HeartbeatRunner).start(shared.clone(), stop.clone()));
        let until_due = (first_due - clock.now().as_millisecond()) as u64;
        tokio::time::sleep(Duration::from_millis(until_due) - Duration::from_millis(100)).await;
        // By hand from here: a run waiting in the lane too early would
        // keep paused time still.
        let five_seconds = tokio::time::Instant::now() + Duration::from_secs(5);
        advance_until(|| tokio::time::Instant::now() >= five_seconds).await;
        // Retried, not queued in the lane, while its patience lasts; one
        // skip recorded for the streak; the schedule has not moved.
        assert_eq!(super::super::route::waiting(&shared, &key), 0);
        let events = app.heartbeat_runs().newest(10).unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].reason.as_deref(), Some("requests-in-flight"));
        assert_eq!(shared.heartbeat.next_due_ms(), Some(first_due));
        // A retry a second: after BUSY_PATIENCE of them it waits in the
        // lane, and runs as soon as the turn ends.
        tokio::time::sleep(BUSY_RETRY * (BUSY_PATIENCE - 6)).await;
        assert_eq!(super::super::route::waiting(&shared, &key), 0);
        let waited = advance_until(|| super::super::route::waiting(&shared, &key) == 1).await;
        // The 31st try, about BUSY_PATIENCE seconds after the first (the
        // clock moved by hand in steps lets each retry start a little
        // late).
        assert!(
            waited > Duration::ZERO && waited <= BUSY_RETRY * 6,
            "queued {waited:?} after the 29th second"
        );
        drop(held);
        advance_until(|| app.heartbeat_runs().newest(10).unwrap().len() == 2).await;
        // The runner looks at its schedule once the run has returned.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let events = app.heartbeat_runs().newest(10).unwrap();
        assert_eq!(events[1].status, RunStatus::Failed);
        // The run was the interval's: the next one is on the next slot.
        assert_eq!(
            shared.heartbeat.next_due_ms(),
            Some(first_due + 30 * 60 * 1000)
        );
        stop.cancel();
        runner.await.unwrap().unwrap();
    }
}
