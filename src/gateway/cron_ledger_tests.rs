//! The runner keeps the slot ledger small: a job's history is cut back
//! while it runs and at each start, and a restart still catches up from
//! the latest slot it handled, running no slot twice. The ledger is
//! written only on the engine's blocking boundary, never on an async
//! worker.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{CronRunner, Runner};
use crate::gateway::supervisor::Component;
use crate::host::TokioClock;

const JOB: &str = "minute-job";
const MINUTE: i64 = 60_000;

/// A state directory holding one minutely job created at the start of
/// the test's clock (10:00 on 2026-12-01, half a second in): the
/// directory, the state path, the clock and the job's start in ms.
fn minutely_job() -> (tempfile::TempDir, std::path::PathBuf, Arc<TokioClock>, i64) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    let base: jiff::Timestamp = "2026-12-01T10:00:00.500Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(base));
    let start = base.as_millisecond() - 500;
    write_job(&state, start);
    (dir, state, clock, start)
}

/// One event job on every minute, unstaggered, created at `created_ms`.
fn write_job(state: &std::path::Path, created_ms: i64) {
    std::fs::create_dir_all(state.join("cron")).unwrap();
    let jobs = serde_json::json!({"version": 1, "jobs": [{
        "id": JOB, "name": "minute", "enabled": true,
        "createdAtMs": created_ms, "updatedAtMs": created_ms,
        "schedule": {"kind": "cron", "expr": "* * * * *", "tz": "UTC", "staggerMs": 0},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": "tick"},
        "catchUp": "once",
    }]});
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&jobs).unwrap(),
    )
    .unwrap();
}

/// The job's rows in the ledger: (slot, status, trigger), oldest first.
fn ledger(state: &std::path::Path) -> Vec<(i64, String, String)> {
    let conn = rusqlite::Connection::open(state.join("almanac.sqlite")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT slot_ms, status, trigger FROM cron_slots WHERE job_id = ?1 ORDER BY slot_ms",
        )
        .unwrap();
    stmt.query_map([JOB], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The slots of the job's run log, in order.
fn logged_slots(state: &std::path::Path) -> Vec<i64> {
    let text = std::fs::read_to_string(state.join(format!("cron/runs/{JOB}.jsonl"))).unwrap();
    text.lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["slotMs"].as_i64().unwrap()
        })
        .collect()
}

/// A gateway's runner for `minutes`, then a crash.
async fn run_for(dir: &std::path::Path, clock: &Arc<TokioClock>, generation: i64, minutes: u64) {
    let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), generation);
    let runner = tokio::spawn(Arc::new(CronRunner).start(shared, CancellationToken::new()));
    for _ in 0..minutes {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    runner.abort();
    let _ = runner.await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_history_is_cut_back_and_a_restart_catches_up_from_the_latest_slot() {
    let (dir, state, clock, start) = minutely_job();
    let slot = |k: i64| start + k * MINUTE;

    // Up for two hours (120 slots, cut back an hour in), down for ten
    // minutes, up for five.
    run_for(dir.path(), &clock, 1, 120).await;
    let after_first = ledger(&state);
    assert!(
        after_first.len() <= 20 + 61,
        "cut back an hour in: {} rows",
        after_first.len()
    );
    assert_eq!(after_first.last().unwrap().0, slot(120));
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    run_for(dir.path(), &clock, 2, 5).await;

    // At the restart the slots while down were caught up from the latest
    // one handled (the latest ran, the others recorded missed), then the
    // history cut back to 20; five more ran since.
    let rows = ledger(&state);
    let slots: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(slots, (111..=135).map(slot).collect::<Vec<_>>(), "{rows:?}");
    for (at, status, trigger) in &rows {
        let k = (at - start) / MINUTE;
        let want = match k {
            121..=129 => ("missed", "catch-up"),
            130 => ("ok", "catch-up"),
            _ => ("ok", "due"),
        };
        assert_eq!((status.as_str(), trigger.as_str()), want, "slot {k}");
    }
    // Every slot ran once, none twice, across the cut and the restart.
    let logged = logged_slots(&state);
    let want: Vec<i64> = (1..=120).chain(130..=135).map(slot).collect();
    assert_eq!(logged, want);
}

/// The slot ledger is SQLite with `synchronous=FULL`: a slot claimed or
/// recorded missed waits for a disk sync, which must never hold up an
/// async worker. The runner is driven here from the test's own task on a
/// current-thread runtime, its only worker: it wakes four minutes late,
/// records the three slots it slept through as missed and claims and
/// runs the latest. Had either write run inline on this worker, the
/// ledger's check ([`crate::engine::assert_not_async`], reached by
/// [`super::Ledger::lock`] and the claim) would panic this test.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn slots_are_claimed_and_recorded_missed_off_the_async_worker() {
    let (dir, state, clock, start) = minutely_job();
    let shared = crate::gateway::test_shared_with(dir.path(), "t", Some(clock.clone()), 1);
    let mut runner = Runner::open(shared.clone()).await.unwrap();
    runner.reload_if_changed().await.unwrap();

    tokio::time::sleep(Duration::from_secs(4 * 60)).await;
    let due = runner.take_due(shared.host.now_ms()).await;
    let slot = |k: i64| start + k * MINUTE;
    assert_eq!(due.iter().map(|d| d.slot_ms).collect::<Vec<_>>(), [slot(4)]);
    runner.start_runs(due).await.unwrap();

    let rows = ledger(&state);
    let want: Vec<(i64, String, String)> = [
        (slot(1), "missed", "catch-up"),
        (slot(2), "missed", "catch-up"),
        (slot(3), "missed", "catch-up"),
        (slot(4), "ok", "due"),
    ]
    .into_iter()
    .map(|(at, status, trigger)| (at, status.to_string(), trigger.to_string()))
    .collect();
    assert_eq!(rows, want);
}

/// The check the ledger relies on refuses an async worker and a tokio
/// blocking thread running work the engine was not given (tokio enters
/// its runtime there too, so the runtime alone cannot tell it from an
/// async worker: the engine marks the threads of its own work, until
/// that work ends), and lets work given to `Engine::blocking` and
/// threads of no runtime through.
#[tokio::test(flavor = "current_thread")]
async fn the_blocking_check_refuses_async_workers_and_lets_the_boundary_through() {
    let check = || crate::engine::assert_not_async("a test's ledger write");
    assert!(std::panic::catch_unwind(check).is_err(), "on the worker");
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), "t");
    shared.engine.blocking(check).await.unwrap();
    // The blocking pool keeps the thread that ran it for the next work.
    let plain = tokio::task::spawn_blocking(move || std::panic::catch_unwind(check).is_err());
    assert!(
        plain.await.unwrap(),
        "on a blocking thread, not the engine's work"
    );
    std::thread::spawn(check).join().unwrap();
}
