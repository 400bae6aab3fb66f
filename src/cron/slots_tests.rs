use super::*;
use crate::store::{Store, StoreKind};

const HOUR: i64 = 3_600_000;
const T0: i64 = 1_796_119_200_000;

fn ledger() -> SlotLedger {
    SlotLedger::new(Store::open_in_memory(StoreKind::State).unwrap().conn)
}

/// The `k`-th hourly slot.
fn slot(k: i64) -> i64 {
    T0 + k * HOUR
}

/// Claims `slot` of `job` as `trigger` and, unless `open`, ends it ok.
fn handle(ledger: &mut SlotLedger, job: &str, slot: i64, trigger: SlotTrigger, open: bool) -> bool {
    let claimed = ledger
        .claim(&[(job.to_string(), slot, trigger)], 1, slot + 5)
        .unwrap();
    if !claimed.is_empty() && !open {
        let ended = (
            job.to_string(),
            slot,
            Ended::Ok,
            None,
            Some(format!("task-{slot}")),
        );
        ledger.finish(&[ended], slot + 20).unwrap();
    }
    !claimed.is_empty()
}

/// The job's rows: (slot, status, trigger), oldest first.
fn rows_of(ledger: &SlotLedger, job: &str) -> Vec<(i64, String, String)> {
    let mut stmt = ledger
        .conn
        .prepare(
            "SELECT slot_ms, status, trigger FROM cron_slots WHERE job_id = ?1 ORDER BY slot_ms",
        )
        .unwrap();
    stmt.query_map([job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn count(ledger: &SlotLedger) -> i64 {
    ledger
        .conn
        .query_row("SELECT COUNT(*) FROM cron_slots", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn each_job_keeps_a_bounded_history_however_many_slots_it_ran() {
    let mut ledger = ledger();
    // Three hourly jobs for a week and a bit, trimmed every 24 slots as
    // the runner would (hourly, or after many slots).
    for k in 1..=200 {
        for job in ["a", "b", "c"] {
            assert!(handle(&mut ledger, job, slot(k), SlotTrigger::Due, false));
        }
        if k % 24 == 0 {
            ledger.trim(Budget::DEFAULT).unwrap();
        }
    }
    // One more slot of `a`, still running.
    assert!(handle(&mut ledger, "a", slot(201), SlotTrigger::Due, true));
    ledger.trim(Budget::DEFAULT).unwrap();
    for job in ["a", "b", "c"] {
        let rows = rows_of(&ledger, job);
        assert_eq!(rows.len(), 20, "{job}: {rows:?}");
    }
    // The newest 20, the open one among them.
    let a: Vec<i64> = rows_of(&ledger, "a").iter().map(|r| r.0).collect();
    assert_eq!(a, (182..=201).map(slot).collect::<Vec<_>>());
    assert_eq!(rows_of(&ledger, "a").last().unwrap().1, "running");
    let latest = ledger.latest_slots().unwrap();
    assert_eq!(latest["a"], slot(201));
    assert_eq!(latest["b"], slot(200));
    // A trim with nothing over the budget removes nothing.
    assert_eq!(ledger.trim(Budget::DEFAULT).unwrap(), 0);
}

#[test]
fn jobs_share_the_total_and_each_keeps_at_least_its_latest_slot() {
    let budget = Budget {
        per_job: 20,
        total: 1_000,
    };
    assert_eq!(budget.per_job_among(0), 20);
    assert_eq!(budget.per_job_among(10), 20);
    assert_eq!(budget.per_job_among(200), 5);
    assert_eq!(budget.per_job_among(5_000), 1);
    assert_eq!(Budget::DEFAULT.per_job_among(100_000), 1);
    // 1,200 jobs (more than one transaction's worth) of 3 slots: one each.
    let mut ledger = ledger();
    let jobs: Vec<String> = (0..1_200).map(|i| format!("job-{i:04}")).collect();
    for k in 1..=3 {
        let claims: Vec<(String, i64, SlotTrigger)> = jobs
            .iter()
            .map(|job| (job.clone(), slot(k), SlotTrigger::Due))
            .collect();
        let claimed = ledger.claim(&claims, 1, slot(k)).unwrap();
        assert_eq!(claimed.len(), jobs.len());
        let ended: Vec<EndedSlot> = claimed
            .into_iter()
            .map(|(job, s)| (job, s, Ended::Ok, None, None))
            .collect();
        ledger.finish(&ended, slot(k) + 10).unwrap();
    }
    assert_eq!(count(&ledger), 3_600);
    assert_eq!(ledger.trim(budget).unwrap(), 2_400);
    assert_eq!(count(&ledger), 1_200);
    let latest = ledger.latest_slots().unwrap();
    assert_eq!(latest.len(), 1_200);
    assert!(latest.values().all(|&s| s == slot(3)));
}

#[test]
fn a_slot_the_history_let_go_is_never_claimed_again() {
    let mut ledger = ledger();
    for k in 1..=30 {
        assert!(handle(&mut ledger, "x", slot(k), SlotTrigger::Due, false));
    }
    ledger.trim(Budget::DEFAULT).unwrap();
    assert_eq!(rows_of(&ledger, "x")[0].0, slot(11), "slots 1 to 10 let go");
    // Whoever asks, however: on time, as a catch-up, as a retry.
    for (k, trigger) in [
        (1, SlotTrigger::Due),
        (5, SlotTrigger::CatchUp),
        (10, SlotTrigger::Retry),
        (12, SlotTrigger::Due),
        (30, SlotTrigger::Due),
    ] {
        assert!(
            !handle(&mut ledger, "x", slot(k), trigger, false),
            "slot {k} ({trigger:?}) claimed again"
        );
    }
    // A manual run is a slot of its own; the next scheduled slot is free.
    assert!(handle(
        &mut ledger,
        "x",
        slot(30) + 1_234,
        SlotTrigger::Manual,
        false
    ));
    assert!(handle(&mut ledger, "x", slot(31), SlotTrigger::Due, false));
    // A slot recorded missed counts as handled too.
    ledger
        .record_missed(&[("x".into(), slot(33), "skipped".into())], slot(33))
        .unwrap();
    assert!(!handle(&mut ledger, "x", slot(32), SlotTrigger::Due, false));
    assert!(handle(&mut ledger, "x", slot(34), SlotTrigger::Due, false));
    // Another job is not held back by this one's slots.
    assert!(handle(&mut ledger, "y", slot(1), SlotTrigger::Due, false));
}

#[test]
fn the_latest_scheduled_slot_outlives_manual_runs() {
    let mut ledger = ledger();
    assert!(handle(&mut ledger, "m", slot(1), SlotTrigger::Due, false));
    for i in 0..25 {
        assert!(handle(
            &mut ledger,
            "m",
            slot(2) + i,
            SlotTrigger::Manual,
            false
        ));
    }
    ledger.trim(Budget::DEFAULT).unwrap();
    let rows = rows_of(&ledger, "m");
    assert_eq!(rows.len(), 21, "{rows:?}");
    assert_eq!((rows[0].0, rows[0].2.as_str()), (slot(1), "due"));
    assert_eq!(rows[1].0, slot(2) + 5, "the newest 20 manual runs");
    // The catch-up starts from the scheduled slot, and manual runs do not
    // hold the schedule back: a slot before them is still free.
    assert_eq!(ledger.latest_slots().unwrap()["m"], slot(1));
    assert!(handle(
        &mut ledger,
        "m",
        slot(2) - 1,
        SlotTrigger::Due,
        false
    ));
}

#[test]
fn open_slots_outlive_trimming_and_are_interrupted_at_the_next_start() {
    let mut ledger = ledger();
    for k in 1..=30 {
        assert!(handle(&mut ledger, "o", slot(k), SlotTrigger::Due, k > 3));
    }
    let removed = ledger
        .trim(Budget {
            per_job: 2,
            total: 100,
        })
        .unwrap();
    // Only the finished slots went, and not the latest scheduled one.
    assert_eq!(removed, 3);
    let rows = rows_of(&ledger, "o");
    assert_eq!(rows.len(), 27);
    assert!(rows.iter().all(|r| r.1 == "running"));
    let cut = ledger.interrupt_earlier(2, slot(31)).unwrap();
    assert_eq!(cut.len(), 27);
    assert!(rows_of(&ledger, "o").iter().all(|r| r.1 == "interrupted"));
}

/// The rows of every job, for comparing two ledgers.
fn all_rows(conn: &Connection) -> Vec<(String, i64, String, String)> {
    let mut stmt = conn
        .prepare("SELECT job_id, slot_ms, status, trigger FROM cron_slots ORDER BY job_id, slot_ms")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A week-old kind of ledger: job `a` ran 50 slots and has one open, `b`
/// ran one scheduled slot and 30 manual runs, `c` two slots.
fn fill_old_ledger(conn: &Connection) {
    let insert = |job: &str, slot: i64, status: &str, trigger: &str| {
        conn.execute(
            "INSERT INTO cron_slots (job_id, slot_ms, status, generation, claimed_at, trigger)
             VALUES (?1, ?2, ?3, 1, ?2, ?4)",
            params![job, slot, status, trigger],
        )
        .unwrap();
    };
    for k in 1..=50 {
        insert("a", slot(k), "ok", "due");
    }
    insert("a", slot(51), "running", "due");
    insert("b", slot(1), "ok", "due");
    for i in 0..30 {
        insert("b", slot(2) + i, "ok", "manual");
    }
    insert("c", slot(1), "missed", "catch-up");
    insert("c", slot(2), "ok", "catch-up");
}

/// A state store left by an almanac whose ledger kept every slot of the
/// last week is cut back when opened: the same rows the trim keeps.
#[test]
fn the_migration_cuts_an_existing_ledger_back_as_the_trim_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("almanac.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                 checksum TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;",
        )
        .unwrap();
        for m in &StoreKind::State.migrations()[..5] {
            conn.execute_batch(m.sql).unwrap();
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?1, ?2, ?3, 0)",
                params![m.version, m.name, crate::store::checksum(m.sql)],
            )
            .unwrap();
        }
        conn.execute_batch("PRAGMA user_version = 5").unwrap();
        fill_old_ledger(&conn);
    }
    let store = Store::open(&path, StoreKind::State).unwrap();
    let migrated = all_rows(&store.conn);

    let mut trimmed = ledger();
    fill_old_ledger(&trimmed.conn);
    trimmed.trim(Budget::DEFAULT).unwrap();
    assert_eq!(migrated, all_rows(&trimmed.conn));
    let of = |job: &str| migrated.iter().filter(|r| r.0 == job).count();
    assert_eq!((of("a"), of("b"), of("c")), (20, 21, 2));
    assert!(migrated.contains(&("a".into(), slot(51), "running".into(), "due".into())));
    assert!(migrated.contains(&("b".into(), slot(1), "ok".into(), "due".into())));
    let indexes: Vec<String> = store
        .conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'cron_slots'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(indexes, ["cron_slots_status"]);
}
