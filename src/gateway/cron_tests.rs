use super::super::cron_run::event_record;
use super::*;
use crate::host::{Clock, TokioClock};

/// A reminder the model scheduled is queued as untrusted, one the
/// user scheduled as trusted.
#[tokio::test]
async fn a_reminder_the_model_scheduled_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), "t0ken");
    let app = shared.engine.app();
    let mut job = crate::cron::job::CronJob::from_json(&serde_json::json!({
        "id": "r", "name": "Call", "schedule": {"kind": "every", "everyMs": 60_000},
        "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "Call Ana"},
    }))
    .unwrap();
    let users = event_record(&shared, &app, &job).ok().unwrap();
    assert!(users.trusted);
    job.mark_created_by(crate::cron::job::CREATED_BY_AGENT);
    let models = event_record(&shared, &app, &job).ok().unwrap();
    assert!(!models.trusted);
}

fn write_jobs(state: &std::path::Path, created_ms: i64, catch_up: &str) {
    std::fs::create_dir_all(state.join("cron")).unwrap();
    let jobs = serde_json::json!({"version": 1, "jobs": [{
        "id": "tick-job", "name": "tick", "enabled": true,
        "createdAtMs": created_ms, "updatedAtMs": created_ms,
        "schedule": {"kind": "cron", "expr": "*/2 * * * * *", "tz": "UTC", "staggerMs": 0},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": "tick"},
        "catchUp": catch_up,
    }]});
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&jobs).unwrap(),
    )
    .unwrap();
}

/// Every row of the slot ledger: (slot, status, trigger).
fn rows(state: &std::path::Path) -> Vec<(i64, String, String)> {
    let conn = rusqlite::Connection::open(state.join("almanac.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT slot_ms, status, trigger FROM cron_slots ORDER BY slot_ms")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

async fn run_for(dir: &std::path::Path, clock: &Arc<TokioClock>, generation: i64, seconds: u64) {
    let shared = crate::gateway::test_shared_with(dir, "t", Some(clock.clone()), generation);
    let stop = CancellationToken::new();
    let runner = tokio::spawn(Arc::new(CronRunner).start(shared.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(seconds * 1000)).await;
    // A crash: the runner is dropped where it stands.
    runner.abort();
    let _ = runner.await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_slot_is_handled_once_across_a_crash_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let base: jiff::Timestamp = "2026-12-01T10:00:00.500Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(base));
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    write_jobs(&state, base.as_millisecond() - 500, "once");
    // Up for 20 s, down for 10 s, up for 10 s.
    run_for(dir.path(), &clock, 1, 20).await;
    let up_until = clock.now().as_millisecond();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let down_until = clock.now().as_millisecond();
    run_for(dir.path(), &clock, 2, 10).await;
    let end = clock.now().as_millisecond();

    let rows = rows(&state);
    let slots: Vec<i64> = rows.iter().map(|r| r.0).collect();
    // Every even second from the start, each exactly once.
    let start = base.as_millisecond() - 500;
    let expected: Vec<i64> = (1..)
        .map(|k| start + 2000 * k)
        .take_while(|s| *s <= end)
        .collect();
    assert_eq!(slots, expected, "{rows:?}");
    for (slot, status, trigger) in &rows {
        if *slot <= up_until || *slot > down_until {
            // While up: run on time.
            if *slot <= up_until || trigger == "due" {
                assert!(
                    status == "ok" || status == "interrupted",
                    "{slot}: {status} {trigger}"
                );
            }
        }
    }
    // The slots while down: the latest ran at the restart, the others
    // are recorded missed.
    let down: Vec<&(i64, String, String)> = rows
        .iter()
        .filter(|r| r.0 > up_until && r.0 <= down_until)
        .collect();
    assert_eq!(down.len(), 5, "{down:?}");
    let (last, older) = down.split_last().unwrap();
    assert_eq!((last.1.as_str(), last.2.as_str()), ("ok", "catch-up"));
    for r in older {
        assert_eq!(
            (r.1.as_str(), r.2.as_str()),
            ("missed", "catch-up"),
            "{r:?}"
        );
    }
    // The run log has one line per run.
    let log = std::fs::read_to_string(state.join("cron/runs/tick-job.jsonl")).unwrap();
    let ran = rows.iter().filter(|r| r.1 == "ok").count();
    assert_eq!(log.lines().count(), ran);
}

/// Writes `config` as the state directory's config file and reloads it
/// as the config watcher does.
fn reload_config(shared: &Arc<crate::gateway::Shared>, config: &str) {
    let path = shared.engine.app().paths.config_path.clone();
    std::fs::write(&path, config).unwrap();
    let app = crate::app::App::load(&shared.options, shared.host.clone()).unwrap();
    shared.engine.reload(app);
    let _ = shared
        .bus
        .send(crate::gateway::GatewayEvent::ConfigReloaded);
}

fn ran(state: &std::path::Path) -> usize {
    rows(state).iter().filter(|r| r.1 == "ok").count()
}

/// `cron.enabled` turned off by a live reload stops the runs, a manual
/// run is refused meanwhile, and turned on again they resume.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_runner_follows_cron_enabled_as_the_config_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let base: jiff::Timestamp = "2026-12-01T10:00:00.500Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(base));
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    write_jobs(&state, base.as_millisecond() - 500, "skip");
    let shared = crate::gateway::test_shared_with(dir.path(), "t", Some(clock.clone()), 1);
    let stop = CancellationToken::new();
    let runner = tokio::spawn(Arc::new(CronRunner).start(shared.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let on = ran(&state);
    assert!(on >= 4, "{on}");
    reload_config(&shared, "{ cron: { enabled: false } }");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let off = ran(&state);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(ran(&state), off, "nothing runs while cron.enabled is false");
    assert_eq!(shared.cron.next_wake_ms(), None);
    let (answer, asked) = tokio::sync::oneshot::channel();
    assert!(shared.cron.ask(ManualRun {
        job: "tick-job".into(),
        only_due: false,
        answer,
    }));
    let refused = asked.await.unwrap();
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("cron.enabled is false")
    );
    reload_config(&shared, "{ cron: { enabled: true } }");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        ran(&state) >= off + 4,
        "runs resume: {} after {off}",
        ran(&state)
    );
    stop.cancel();
    runner.await.unwrap().unwrap();
}

/// A reloaded `cron.maxConcurrentRuns` changes how many runs may go at
/// once; a changed `cron.store` is reported, not followed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_reloaded_limit_applies_and_a_moved_store_waits_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state/workspace")).unwrap();
    let shared = crate::gateway::test_shared(dir.path(), "t");
    let mut runner = Runner::open(shared.clone()).await.unwrap();
    let before = shared.cron.store(&shared.engine.app()).path().to_path_buf();
    assert_eq!(runner.permits.available_permits(), 1);
    reload_config(&shared, "{ cron: { maxConcurrentRuns: 3 } }");
    assert!(runner.follow_config());
    assert_eq!(runner.permits.available_permits(), 3);
    reload_config(
        &shared,
        "{ cron: { maxConcurrentRuns: 2, store: '~/elsewhere/jobs.json' } }",
    );
    assert!(runner.follow_config());
    tokio::task::yield_now().await;
    assert_eq!(runner.permits.available_permits(), 2);
    assert_eq!(
        shared.cron.store(&shared.engine.app()).path(),
        before,
        "still the first store"
    );
    reload_config(&shared, "{ cron: { enabled: false } }");
    assert!(!runner.follow_config());
}

/// Writes `jobs` as the store.
fn write_store(state: &std::path::Path, jobs: serde_json::Value) {
    std::fs::create_dir_all(state.join("cron")).unwrap();
    let file = serde_json::json!({"version": 1, "jobs": jobs});
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&file).unwrap(),
    )
    .unwrap();
}

/// A slot an earlier gateway start (generation 1) claimed and never ended.
fn left_running(state: &std::path::Path, job: &str, slot_ms: i64, claimed_at: i64) {
    let store = crate::store::Store::open(
        &state.join("almanac.sqlite"),
        crate::store::StoreKind::State,
    )
    .unwrap();
    store
        .conn
        .execute(
            "INSERT INTO cron_slots (job_id, slot_ms, status, generation, claimed_at, trigger)
             VALUES (?1, ?2, 'running', 1, ?3, 'due')",
            rusqlite::params![job, slot_ms, claimed_at],
        )
        .unwrap();
}

fn one_shot(id: &str, at_ms: i64, catch_up: &str) -> serde_json::Value {
    let at = jiff::Timestamp::from_millisecond(at_ms)
        .unwrap()
        .to_string();
    serde_json::json!({
        "id": id, "name": id, "enabled": true, "deleteAfterRun": true,
        "createdAtMs": at_ms - 60_000, "updatedAtMs": at_ms - 60_000,
        "schedule": {"kind": "at", "at": at},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": format!("{id} event")},
        "catchUp": catch_up,
    })
}

/// A run a crash cut off is a run-log line at the next start, and its
/// job's `catchUp` decides what comes of it: `once` runs a one-shot again
/// (then it is done and removed), `skip` disables it with the reason.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_run_a_crash_cut_off_is_logged_and_settled_by_its_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let base: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
    let now = base.as_millisecond();
    let clock = Arc::new(TokioClock::new(base));
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    let slot = now - 30_000;
    write_store(
        &state,
        serde_json::json!([
            one_shot("again", slot, "once"),
            one_shot("dropped", slot, "skip")
        ]),
    );
    // The ledger exists once a runner opened it.
    run_for(dir.path(), &clock, 1, 0).await;
    left_running(&state, "again", slot, slot + 5);
    left_running(&state, "dropped", slot, slot + 5);
    run_for(dir.path(), &clock, 2, 5).await;

    for id in ["again", "dropped"] {
        let log = std::fs::read_to_string(state.join(format!("cron/runs/{id}.jsonl"))).unwrap();
        let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
        assert_eq!(first["status"], "error", "{first}");
        assert_eq!(
            first["error"],
            "interrupted: the gateway stopped while it ran"
        );
        assert_eq!(first["slotMs"], slot);
        assert_eq!(first["runId"], format!("cron:{id}:{}", slot + 5));
    }
    // `once`: run again (its event queued), then done and removed.
    let again = std::fs::read_to_string(state.join("cron/runs/again.jsonl")).unwrap();
    assert_eq!(again.lines().count(), 2, "{again}");
    assert!(
        again.lines().nth(1).unwrap().contains(r#""status":"ok""#),
        "{again}"
    );
    let store: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("cron/jobs.json")).unwrap())
            .unwrap();
    let jobs = store["jobs"].as_array().unwrap();
    assert!(jobs.iter().all(|j| j["id"] != "again"), "{store}");
    // `skip`: not run again, disabled with why.
    let dropped = jobs.iter().find(|j| j["id"] == "dropped").unwrap();
    assert_eq!(dropped["enabled"], false, "{dropped}");
    let why = dropped["state"]["lastError"].as_str().unwrap();
    assert!(
        why.contains("interrupted") && why.contains("catchUp: skip"),
        "{why}"
    );
    assert!(dropped["state"]["nextRunAtMs"].is_null(), "{dropped}");
}
