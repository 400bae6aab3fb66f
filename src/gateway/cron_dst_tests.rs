//! The runner across daylight-saving changes in America/New_York: a time a
//! spring-forward skips fires once, moved forward by the gap; a time a
//! fall-back repeats fires once, in its first pass; a job every half hour
//! fires at each of the schedule's instants, once. The instants are those
//! of the cron crate's `Slots` (which follows croner@10), and are written
//! out by hand as well.

use std::sync::Arc;
use std::time::Duration;

use almanac_cron::{Schedule, Slots};
use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::CronRunner;
use crate::gateway::supervisor::Component;
use crate::host::{Clock, TokioClock};

const JOB: &str = "dst-job";
const ZONE: &str = "America/New_York";

fn ms(at: &str) -> i64 {
    at.parse::<Timestamp>().unwrap().as_millisecond()
}

fn iso(at_ms: i64) -> String {
    Timestamp::from_millisecond(at_ms).unwrap().to_string()
}

/// Writes one event job on `expr` in New York, unstaggered.
fn write_job(state: &std::path::Path, expr: &str, created_ms: i64, catch_up: &str) {
    std::fs::create_dir_all(state.join("cron")).unwrap();
    let jobs = serde_json::json!({"version": 1, "jobs": [{
        "id": JOB, "name": "dst", "enabled": true,
        "createdAtMs": created_ms, "updatedAtMs": created_ms,
        "schedule": {"kind": "cron", "expr": expr, "tz": ZONE, "staggerMs": 0},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": "dst"},
        "catchUp": catch_up,
    }]});
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&jobs).unwrap(),
    )
    .unwrap();
}

/// The slots of `expr` in New York strictly after `from` and up to `to`,
/// as the cron crate gives them.
fn crate_slots(expr: &str, from: i64, to: i64) -> Vec<i64> {
    let schedule = Schedule::Cron {
        expr: expr.into(),
        tz: Some(ZONE.into()),
        stagger_ms: Some(0),
    };
    let slots = Slots::new(&schedule, JOB, from, &jiff::tz::TimeZone::UTC).unwrap();
    let mut found = Vec::new();
    let mut cursor = from;
    while let Some(next) = slots.next_after(cursor).filter(|&s| s <= to) {
        found.push(next);
        cursor = next;
    }
    found
}

/// One row of the slot ledger.
#[derive(Debug)]
struct Row {
    slot_ms: i64,
    status: String,
    trigger: String,
    started_at: Option<i64>,
}

fn ledger(state: &std::path::Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(state.join("almanac.sqlite")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT slot_ms, status, trigger, started_at FROM cron_slots \
             WHERE job_id = ?1 ORDER BY slot_ms",
        )
        .unwrap();
    stmt.query_map([JOB], |r| {
        Ok(Row {
            slot_ms: r.get(0)?,
            status: r.get(1)?,
            trigger: r.get(2)?,
            started_at: r.get(3)?,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The job's run log: (slot, status) per line.
fn run_log(state: &std::path::Path) -> Vec<(i64, String)> {
    let path = state.join(format!("cron/runs/{JOB}.jsonl"));
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                record["slotMs"].as_i64().unwrap(),
                record["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Runs a gateway's cron runner until the clock reads `until`, then stops
/// it (cleanly, or as a crash when `crash`); gives the slot it was waiting
/// for then.
async fn run_until(
    dir: &std::path::Path,
    clock: &Arc<TokioClock>,
    generation: i64,
    until: Timestamp,
    crash: bool,
) -> Option<i64> {
    let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), generation);
    let stop = CancellationToken::new();
    let runner = tokio::spawn(Arc::new(CronRunner).start(shared.clone(), stop.clone()));
    // In large steps: the runner wakes on its own timer in between.
    while clock.now() < until {
        let left = until.duration_since(clock.now());
        let step = Duration::try_from(left)
            .unwrap()
            .min(Duration::from_secs(3600));
        tokio::time::sleep(step).await;
    }
    let waiting_for = shared.cron.next_wake_ms();
    if crash {
        runner.abort();
        let _ = runner.await;
    } else {
        stop.cancel();
        runner.await.unwrap().unwrap();
    }
    waiting_for
}

/// Asserts that the ledger and the run log hold exactly `want`, each
/// slot run once, on time, with `trigger`.
fn assert_ran_once_each(state: &std::path::Path, want: &[&str], trigger: &str) {
    let want: Vec<i64> = want.iter().map(|at| ms(at)).collect();
    let rows = ledger(state);
    let slots: Vec<String> = rows.iter().map(|r| iso(r.slot_ms)).collect();
    let want_iso: Vec<String> = want.iter().map(|&at| iso(at)).collect();
    assert_eq!(slots, want_iso, "{rows:?}");
    for row in &rows {
        assert_eq!(
            (row.status.as_str(), row.trigger.as_str()),
            ("ok", trigger),
            "{row:?}"
        );
        if trigger == "due" {
            // Fired at the slot, not found later.
            let started = row.started_at.expect("a run has a start");
            assert!(
                (row.slot_ms..row.slot_ms + 1000).contains(&started),
                "{row:?} started at {}",
                iso(started)
            );
        }
    }
    let logged: Vec<(String, String)> = run_log(state)
        .into_iter()
        .map(|(slot, status)| (iso(slot), status))
        .collect();
    let want_logged: Vec<(String, String)> =
        want_iso.into_iter().map(|at| (at, "ok".into())).collect();
    assert_eq!(logged, want_logged);
}

/// New York, 2027-03-14: 02:00 EST becomes 03:00 EDT, so 02:30 never
/// shows on the clock; croner@10 fires `30 2 * * *` at 03:30 EDT
/// (07:30Z), once, and the next day at 02:30 EDT.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_daily_time_in_the_skipped_hour_fires_once_moved_forward_by_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    // 01:00 EST, an hour before the jump.
    let start: Timestamp = "2027-03-14T06:00:00Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(start));
    write_job(&state, "30 2 * * *", start.as_millisecond(), "once");

    // Up through the end of the local day (00:10 EDT on the 15th).
    let end: Timestamp = "2027-03-15T04:10:00Z".parse().unwrap();
    let waiting_for = run_until(dir.path(), &clock, 1, end, false).await;

    let want = ["2027-03-14T07:30:00Z"];
    assert_eq!(
        crate_slots("30 2 * * *", start.as_millisecond(), end.as_millisecond())
            .into_iter()
            .map(iso)
            .collect::<Vec<_>>(),
        want
    );
    assert_ran_once_each(&state, &want, "due");
    // 07:30Z is 03:30 on the clock that day.
    let local = Timestamp::from_millisecond(ms(want[0]))
        .unwrap()
        .in_tz(ZONE)
        .unwrap();
    assert_eq!((local.hour(), local.minute()), (3, 30));
    // Next: 02:30 EDT on the 15th.
    assert_eq!(waiting_for.map(iso), Some("2027-03-15T06:30:00Z".into()));
    assert_eq!(
        crate_slots(
            "30 2 * * *",
            end.as_millisecond(),
            ms("2027-03-16T00:00:00Z")
        ),
        [ms("2027-03-15T06:30:00Z")]
    );
}

/// New York, 2027-11-07: 02:00 EDT becomes 01:00 EST, so 01:30 shows
/// twice (05:30Z and 06:30Z); croner@10 fires `30 1 * * *` once, in the
/// first pass, and the next day at 01:30 EST.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_daily_time_in_the_repeated_hour_fires_once_in_its_first_pass() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    // 00:30 EDT, an hour before the first 01:30.
    let start: Timestamp = "2027-11-07T04:30:00Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(start));
    write_job(&state, "30 1 * * *", start.as_millisecond(), "once");

    // Through both passes and the rest of the local day (00:10 EST on
    // the 8th).
    let end: Timestamp = "2027-11-08T05:10:00Z".parse().unwrap();
    let waiting_for = run_until(dir.path(), &clock, 1, end, false).await;

    let want = ["2027-11-07T05:30:00Z"];
    assert_eq!(
        crate_slots("30 1 * * *", start.as_millisecond(), end.as_millisecond())
            .into_iter()
            .map(iso)
            .collect::<Vec<_>>(),
        want
    );
    assert_ran_once_each(&state, &want, "due");
    assert_eq!(waiting_for.map(iso), Some("2027-11-08T06:30:00Z".into()));
}

/// Every half hour across New York's fall-back (2026-11-01, 06:00Z): 00:30,
/// 01:00 and 01:30 EDT, then the repeated 01:00 and 01:30 (EST) are passed
/// over as croner@10 does, then 02:00 EST on: every instant once, none
/// twice, none left out.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_half_hour_across_the_fall_back_fires_at_each_instant_once() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    let start: Timestamp = "2026-11-01T04:10:00Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(start));
    write_job(&state, "*/30 * * * *", start.as_millisecond(), "once");

    let end: Timestamp = "2026-11-01T08:10:00Z".parse().unwrap();
    let waiting_for = run_until(dir.path(), &clock, 1, end, false).await;

    let want = [
        "2026-11-01T04:30:00Z", // 00:30 EDT
        "2026-11-01T05:00:00Z", // 01:00 EDT
        "2026-11-01T05:30:00Z", // 01:30 EDT
        "2026-11-01T07:00:00Z", // 02:00 EST
        "2026-11-01T07:30:00Z", // 02:30 EST
        "2026-11-01T08:00:00Z", // 03:00 EST
    ];
    assert_eq!(
        crate_slots("*/30 * * * *", start.as_millisecond(), end.as_millisecond())
            .into_iter()
            .map(iso)
            .collect::<Vec<_>>(),
        want
    );
    assert_ran_once_each(&state, &want, "due");
    assert_eq!(waiting_for.map(iso), Some("2026-11-01T08:30:00Z".into()));
}

/// A gateway that crashes in the first pass through the repeated hour and
/// starts again in the second (catching up every missed slot) does not
/// run the hour's times again: they are not slots of the schedule.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_restart_in_the_repeated_hour_runs_none_of_its_times_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    let start: Timestamp = "2026-11-01T04:40:00Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(start));
    write_job(&state, "*/30 * * * *", start.as_millisecond(), "all");

    // Up until 01:45 EDT, down until 01:40 EST (in the second pass, past
    // its 01:00 and 01:30), up until 02:40 EST.
    run_until(
        dir.path(),
        &clock,
        1,
        "2026-11-01T05:45:00Z".parse().unwrap(),
        true,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(55 * 60)).await;
    assert_eq!(
        clock.now(),
        "2026-11-01T06:40:00Z".parse::<Timestamp>().unwrap()
    );
    let end: Timestamp = "2026-11-01T07:40:00Z".parse().unwrap();
    let waiting_for = run_until(dir.path(), &clock, 2, end, false).await;

    let want = [
        "2026-11-01T05:00:00Z", // 01:00 EDT
        "2026-11-01T05:30:00Z", // 01:30 EDT
        "2026-11-01T07:00:00Z", // 02:00 EST
        "2026-11-01T07:30:00Z", // 02:30 EST
    ];
    assert_eq!(
        crate_slots("*/30 * * * *", start.as_millisecond(), end.as_millisecond())
            .into_iter()
            .map(iso)
            .collect::<Vec<_>>(),
        want
    );
    assert_ran_once_each(&state, &want, "due");
    assert_eq!(waiting_for.map(iso), Some("2026-11-01T08:00:00Z".into()));
}
