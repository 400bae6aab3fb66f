//! What the runner does after a run ends, with the real runner on an
//! injected clock: error backoff, one-shot retries across a restart,
//! failure alerts, auto-disable after schedule errors.

use super::*;
use crate::cron::outcome;
use crate::cron::slots::Ended;
use crate::host::TokioClock;
use serde_json::{Value, json};

const BASE: &str = "2026-12-01T10:00:00Z";

fn setup(config: &str, jobs: Value) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    std::fs::create_dir_all(state.join("cron")).unwrap();
    std::fs::write(state.join("config.json5"), config).unwrap();
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&json!({"version": 1, "jobs": jobs})).unwrap(),
    )
    .unwrap();
    (dir, state)
}

fn base_ms() -> i64 {
    BASE.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// Runs the runner for `seconds` of paused time, then stops it as a
/// crash would (`abort`) or cleanly.
async fn run_for(
    dir: &std::path::Path,
    clock: &Arc<TokioClock>,
    generation: i64,
    seconds: u64,
    crash: bool,
) {
    let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), generation);
    let stop = CancellationToken::new();
    let runner = tokio::spawn(Arc::new(CronRunner).start(shared.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    if crash {
        runner.abort();
        let _ = runner.await;
    } else {
        stop.cancel();
        runner.await.unwrap().unwrap();
    }
}

/// (slot, status, trigger, ended_at, note) of every ledger row.
type Row = (i64, String, String, Option<i64>, Option<String>);

fn rows(state: &std::path::Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(state.join("almanac.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT slot_ms, status, trigger, ended_at, note FROM cron_slots ORDER BY slot_ms")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn job_in_store(state: &std::path::Path, id: &str) -> Option<Value> {
    let file: Value =
        serde_json::from_slice(&std::fs::read(state.join("cron/jobs.json")).unwrap()).unwrap();
    file["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .cloned()
}

/// The texts of the system events queued on the intake.
fn queued_events(state: &std::path::Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(state.join("gateway/intake.jsonl")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| {
            (
                r["text"].as_str().unwrap_or_default().to_string(),
                r["mode"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn turn_job(id: &str, schedule: Value) -> Value {
    json!({
        "id": id, "name": id, "enabled": true,
        "createdAtMs": base_ms() - 1000, "updatedAtMs": base_ms() - 1000,
        "schedule": schedule,
        "sessionTarget": "isolated", "wakeMode": "now",
        "payload": {"kind": "agentTurn", "message": "check the backups"},
        "delivery": {"mode": "none"},
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failing_recurring_job_waits_out_each_backoff_and_alerts_once() {
    // No model is configured: every turn fails at once, for good.
    let (dir, state) = setup(
        r#"{cron: {failureAlert: {enabled: true, after: 2}}}"#,
        json!([turn_job(
            "backup-check",
            json!({"kind": "cron", "expr": "*/10 * * * * *", "tz": "UTC", "staggerMs": 0})
        )]),
    );
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    run_for(dir.path(), &clock, 1, 200, false).await;

    let rows = rows(&state);
    let runs: Vec<&Row> = rows.iter().filter(|r| r.1 != "missed").collect();
    assert!(runs.len() >= 3, "{rows:?}");
    assert!(runs.iter().all(|r| r.1 == "error"), "{runs:?}");
    // After the k-th error no slot runs before its end plus the k-th
    // backoff, the first slot after it does, and every slot between is
    // recorded as skipped by the backoff.
    for (k, pair) in runs.windows(2).enumerate() {
        let ended = pair[0].3.expect("an ended run");
        let until = ended + outcome::ERROR_BACKOFF_MS[k];
        let first_after = (until + 9_999) / 10_000 * 10_000;
        assert_eq!(pair[1].0, first_after, "run {} after {pair:?}", k + 1);
        let between: Vec<&Row> = rows
            .iter()
            .filter(|r| r.0 > pair[0].0 && r.0 < pair[1].0)
            .collect();
        assert_eq!(between.len() as i64, (pair[1].0 - pair[0].0) / 10_000 - 1);
        for r in between {
            assert_eq!(r.1, "missed", "{r:?}");
            assert!(
                r.4.as_deref().unwrap().contains("error backoff until"),
                "{r:?}"
            );
        }
    }
    // The state counts every error and names the next slot after the
    // backoff.
    let job = job_in_store(&state, "backup-check").unwrap();
    let errors = runs.len() as i64;
    assert_eq!(job["state"]["consecutiveErrors"], errors, "{job}");
    assert_eq!(job["state"]["lastRunStatus"], "error");
    assert!(job["state"]["lastErrorReason"].is_string(), "{job}");
    let last_end = runs.last().unwrap().3.unwrap();
    let until = last_end + outcome::ERROR_BACKOFF_MS[runs.len() - 1];
    assert_eq!(
        job["state"]["nextRunAtMs"],
        (until + 9_999) / 10_000 * 10_000,
        "{job}"
    );
    assert_eq!(job["enabled"], true);
    // One alert: at the second error (the cooldown holds the third).
    let alerts: Vec<(String, String)> = queued_events(&state)
        .into_iter()
        .filter(|(text, _)| text.contains("failed"))
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0]
            .0
            .starts_with("Cron job \"backup-check\" failed 2 times\nLast error: "),
        "{alerts:?}"
    );
    assert_eq!(alerts[0].1, "now");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_one_shot_hit_by_a_passing_error_is_retried_across_a_restart_then_disabled() {
    // No model is configured: a real attempt fails for good. The first
    // one's end is handed to the runner as a passing error (a provider
    // answering 503), as a run ends.
    let (dir, state) = setup(
        "{}",
        json!([turn_job(
            "remind-once",
            json!({"kind": "at", "at": "2026-12-01T10:00:05Z"})
        )]),
    );
    let slot = base_ms() + 5_000;
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    {
        let shared = crate::gateway::test_shared_with(dir.path(), "t", Some(clock.clone()), 1);
        let mut runner = Runner::open(shared).await.unwrap();
        runner.reload_if_changed().await.unwrap();
        let text = runner.followed["remind-once"].text.clone();
        let job = Arc::new(crate::cron::store::job_from_text(&text).unwrap());
        runner.settle(vec![Finished {
            id: "remind-once".into(),
            trigger: SlotTrigger::Due,
            job,
            status: Ended::Error,
            error: Some("openai answered 503 Service Unavailable".into()),
            started_ms: slot,
            ended_ms: slot + 1_000,
            delivered: None,
            delivery_error: None,
        }]);
        // The next attempt after cron.retry.backoffMs[0] (30 s), in the
        // queue and in the state written back.
        let f = &runner.followed["remind-once"];
        assert_eq!(f.next, Some(slot + 31_000));
        assert!(runner.retrying.contains("remind-once"));
        runner.flush_states().await;
    }
    let job = job_in_store(&state, "remind-once").unwrap();
    assert_eq!(job["enabled"], true, "{job}");
    assert_eq!(job["state"]["consecutiveErrors"], 1);
    assert_eq!(job["state"]["nextRunAtMs"], slot + 31_000);
    // The gateway is down while the attempt is due; at the start it runs
    // (a real attempt, which fails for good: no further retry).
    tokio::time::sleep(Duration::from_secs(60)).await;
    run_for(dir.path(), &clock, 2, 300, false).await;

    let rows = rows(&state);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].0, rows[0].1.as_str(), rows[0].2.as_str()),
        (slot + 31_000, "error", "retry")
    );
    // Spent: disabled and kept, with its error.
    let job = job_in_store(&state, "remind-once").unwrap();
    assert_eq!(job["enabled"], false, "{job}");
    assert_eq!(job["state"]["consecutiveErrors"], 2);
    assert!(job["state"].get("nextRunAtMs").is_none_or(Value::is_null));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_waits_for_its_time_when_the_gateway_is_up() {
    let (dir, state) = setup(
        "{}",
        json!([turn_job(
            "remind-once",
            json!({"kind": "at", "at": "2026-12-01T10:00:05Z"})
        )]),
    );
    let slot = base_ms() + 5_000;
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    let shared = crate::gateway::test_shared_with(dir.path(), "t", Some(clock.clone()), 1);
    let mut runner = Runner::open(shared).await.unwrap();
    runner.reload_if_changed().await.unwrap();
    let text = runner.followed["remind-once"].text.clone();
    let job = Arc::new(crate::cron::store::job_from_text(&text).unwrap());
    // Its slot ran (the runner moved past it) and ended in a rate limit.
    runner.followed.get_mut("remind-once").unwrap().next = None;
    runner.settle(vec![Finished {
        id: "remind-once".into(),
        trigger: SlotTrigger::Due,
        job,
        status: Ended::Error,
        error: Some("429 Too Many Requests".into()),
        started_ms: slot,
        ended_ms: slot,
        delivered: None,
        delivery_error: None,
    }]);
    let retry_at = runner.followed["remind-once"].next.unwrap();
    // The default backoff: 30 s.
    assert_eq!(retry_at, slot + 30_000);
    // Nothing runs before it; it runs at its time, triggered `retry`.
    tokio::time::sleep(Duration::from_millis((retry_at - base_ms() - 1) as u64)).await;
    assert!(runner.take_due(clock_ms(&clock)).await.is_empty());
    tokio::time::sleep(Duration::from_millis(1)).await;
    let due = runner.take_due(clock_ms(&clock)).await;
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].slot_ms, due[0].trigger),
        (retry_at, SlotTrigger::Retry)
    );
    assert!(!runner.retrying.contains("remind-once"));
    assert!(state.join("cron/jobs.json").exists());
}

fn clock_ms(clock: &Arc<TokioClock>) -> i64 {
    use crate::host::Clock;
    clock.now().as_millisecond()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_one_shot_that_fails_for_good_is_disabled_at_once() {
    let (dir, state) = setup(
        "{}",
        json!([turn_job(
            "no-model",
            json!({"kind": "at", "at": "2026-12-01T10:00:05Z"})
        )]),
    );
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    run_for(dir.path(), &clock, 1, 300, false).await;
    let rows = rows(&state);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let job = job_in_store(&state, "no-model").unwrap();
    assert_eq!(job["enabled"], false, "{job}");
    assert_eq!(job["state"]["lastRunStatus"], "error");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_schedule_that_cannot_be_worked_out_disables_the_job_on_the_third_try() {
    let mut job = turn_job(
        "bad-zone",
        json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus_Mons"}),
    );
    job["payload"] = json!({"kind": "systemEvent", "text": "hello"});
    job["sessionTarget"] = json!("main");
    let (dir, state) = setup("{}", json!([job]));
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    run_for(dir.path(), &clock, 1, 65, false).await;
    let job = job_in_store(&state, "bad-zone").unwrap();
    assert_eq!(job["state"]["scheduleErrorCount"], 2, "{job}");
    assert_eq!(job["enabled"], true);
    assert!(queued_events(&state).is_empty());
    run_for(dir.path(), &clock, 2, 5, false).await;
    let job = job_in_store(&state, "bad-zone").unwrap();
    assert_eq!(job["state"]["scheduleErrorCount"], 3, "{job}");
    assert_eq!(job["enabled"], false);
    let events = queued_events(&state);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]
            .0
            .contains("auto-disabled after 3 consecutive schedule errors"),
        "{events:?}"
    );
    assert!(rows(&state).is_empty());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn missed_slots_are_not_caught_up_inside_the_backoff_of_a_failed_last_run() {
    let mut job = turn_job(
        "flaky",
        json!({"kind": "cron", "expr": "*/10 * * * * *", "tz": "UTC", "staggerMs": 0}),
    );
    job["createdAtMs"] = json!(base_ms() - 60_000);
    job["updatedAtMs"] = json!(base_ms() - 60_000);
    // The last run failed a second time in a row 25 s ago: a minute of
    // backoff, until 35 s from now.
    job["state"] = json!({
        "lastRunAtMs": base_ms() - 25_000, "lastDurationMs": 0,
        "lastRunStatus": "error", "lastStatus": "error", "consecutiveErrors": 2,
    });
    let (dir, state) = setup("{}", json!([job]));
    let clock = Arc::new(TokioClock::new("2026-12-01T10:00:05Z".parse().unwrap()));
    run_for(dir.path(), &clock, 1, 40, false).await;
    let rows = rows(&state);
    let slots: Vec<i64> = rows.iter().map(|r| (r.0 - base_ms()) / 1000).collect();
    assert_eq!(slots, [-20, -10, 0, 10, 20, 30, 40], "{rows:?}");
    // While down: catchUp once would run the latest (0 s); the backoff
    // holds it, and the ones after it until the backoff ends.
    for r in &rows[..2] {
        assert_eq!(r.1, "missed", "{r:?}");
    }
    for r in &rows[2..6] {
        assert_eq!(r.1, "missed", "{r:?}");
        assert!(
            r.4.as_deref().unwrap().contains("error backoff until"),
            "{r:?}"
        );
    }
    assert_eq!(rows[6].1, "error", "{rows:?}");
    assert_eq!(rows[6].2, "due");
}
