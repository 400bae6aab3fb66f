use std::collections::{BTreeMap, BTreeSet};

use super::audit::{STALE_QUEUED_MS, STALE_RUNNING_MS, human_duration};
use super::record::Lease;
use super::upkeep::Recovery;
use super::vocab::{NotifyPolicy, ScopeKind, TerminalOutcome};
use super::*;

const MIN: i64 = 60_000;
const DAY: i64 = 24 * 60 * MIN;
/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000_000;

fn ledger() -> Ledger {
    Ledger::open_in_memory().unwrap()
}

fn new_task(kind: Option<&str>, lane: Option<&str>) -> NewTask {
    let mut new = NewTask::new(Runtime::Subagent, "agent:main:main", "summarise the inbox");
    new.requester_session_key = "agent:main:main".into();
    new.task_kind = kind.map(str::to_string);
    new.lane_key = lane.map(str::to_string);
    new
}

fn queued(l: &mut Ledger, now: i64) -> Task {
    l.create(new_task(Some("agent_turn"), Some("agent:main:main")), now)
        .unwrap()
}

/// A task driven to `status` at `now` (running under generation 1).
fn task_in(l: &mut Ledger, status: Status, now: i64) -> Task {
    let task = queued(l, now);
    if status == Status::Queued {
        return task;
    }
    let task = l.start(&task.task_id, 1, now + 5 * MIN, now).unwrap();
    if status == Status::Running {
        return task;
    }
    let end: TerminalStatus = status.as_str().parse().unwrap();
    match l.finish(&task.task_id, Terminal::status(end), now).unwrap() {
        FinishOutcome::Finished(t) => t,
        other => panic!("{other:?}"),
    }
}

fn all_rows(l: &Ledger) -> BTreeMap<String, Task> {
    l.list(TaskFilter::default(), None)
        .unwrap()
        .into_iter()
        .map(|t| (t.task_id.clone(), t))
        .collect()
}

/// Sets columns directly, for records the API never writes (damaged or
/// older rows).
fn raw_update(l: &Ledger, id: &str, set: &str) {
    let n = l
        .conn
        .execute(&format!("UPDATE tasks SET {set} WHERE task_id = ?1"), [id])
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn create_records_the_task_with_runtime_defaults_and_lane_places() {
    let mut l = ledger();
    let mut new = new_task(Some("agent_turn"), Some("lane-a"));
    new.request = Some(serde_json::json!({"message": "hi", "sessionKey": "agent:main:main"}));
    new.label = Some("inbox".into());
    let a = l.create(new, T0).unwrap();
    assert_eq!(a.status, Status::Queued);
    assert_eq!(a.created_at, T0);
    assert_eq!(a.last_event_at, Some(T0));
    assert_eq!(
        (a.started_at, a.generation, a.lease_until),
        (None, None, None)
    );
    assert_eq!(a.lane_seq, Some(1));
    assert_eq!(a.request.as_ref().unwrap()["message"], "hi");
    assert_eq!(a.notify_policy, NotifyPolicy::DoneOnly);
    assert_eq!(a.delivery_status, DeliveryStatus::Pending);
    assert_eq!(a.scope_kind, ScopeKind::Session);
    // A random v4 uuid.
    let id = uuid::Uuid::parse_str(&a.task_id).unwrap();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(a.short_id(), &a.task_id[..8]);

    let b = l.create(new_task(None, Some("lane-a")), T0 + 1).unwrap();
    let other = l.create(new_task(None, Some("lane-b")), T0 + 2).unwrap();
    let no_lane = l.create(new_task(None, None), T0 + 3).unwrap();
    assert_ne!(a.task_id, b.task_id);
    assert_eq!(b.lane_seq, Some(2));
    assert_eq!(other.lane_seq, Some(1));
    assert_eq!(no_lane.lane_seq, None);

    let mut cron = NewTask::new(Runtime::Cron, "cron:daily", "daily digest");
    cron.run_id = Some(format!("cron:daily:{T0}"));
    cron.running = Some(Lease {
        generation: 3,
        until_ms: T0 + 5 * MIN,
    });
    let cron = l.create(cron, T0).unwrap();
    assert_eq!(cron.status, Status::Running);
    assert_eq!(cron.started_at, Some(T0));
    assert_eq!(cron.generation, Some(3));
    assert_eq!(cron.lease_until, Some(T0 + 5 * MIN));
    assert_eq!(cron.scope_kind, ScopeKind::System);
    assert_eq!(cron.notify_policy, NotifyPolicy::Silent);
    assert_eq!(cron.delivery_status, DeliveryStatus::NotApplicable);
    assert_eq!(l.get(&cron.task_id).unwrap().unwrap(), cron);
}

#[test]
fn invalid_tasks_are_refused_and_nothing_is_recorded() {
    let lease = |until_ms| {
        Some(Lease {
            generation: 1,
            until_ms,
        })
    };
    let cases: Vec<(&str, NewTask)> = vec![
        ("empty text", NewTask::new(Runtime::Cli, "owner", "  ")),
        ("empty owner", NewTask::new(Runtime::Cli, "", "run")),
        (
            "lease already expired",
            NewTask {
                running: lease(T0),
                ..NewTask::new(Runtime::Cli, "owner", "run")
            },
        ),
    ];
    let mut l = ledger();
    for (name, new) in cases {
        let err = l.create(new, T0).unwrap_err();
        assert!(matches!(err, TaskError::Invalid(_)), "{name}: {err}");
    }
    assert!(all_rows(&l).is_empty());
    let task = queued(&mut l, T0);
    assert!(matches!(
        l.start(&task.task_id, 1, T0 - 1, T0),
        Err(TaskError::Invalid(_))
    ));
    assert!(matches!(
        l.renew_leases(1, T0, T0),
        Err(TaskError::Invalid(_))
    ));
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Start,
    Finish(TerminalStatus),
    Cancel,
}

#[derive(Debug, PartialEq)]
enum Expect {
    /// Changed to this status.
    Now(Status),
    /// Refused or reported, the record unchanged.
    Unchanged,
}

fn apply(l: &mut Ledger, id: &str, op: Op, now: i64) -> Result<Task, String> {
    match op {
        Op::Start => l
            .start(id, 2, now + 5 * MIN, now)
            .map_err(|e| e.to_string()),
        Op::Finish(end) => match l.finish(id, Terminal::status(end), now).unwrap() {
            FinishOutcome::Finished(t) => Ok(t),
            FinishOutcome::AlreadyTerminal(t) => Err(format!("already {}", t.status)),
        },
        Op::Cancel => match l.cancel(id, now).unwrap() {
            CancelOutcome::Cancelled(t) | CancelOutcome::Requested(t) => Ok(t),
            CancelOutcome::AlreadyTerminal(t) => Err(format!("already {}", t.status)),
        },
    }
}

#[test]
fn lifecycle_transitions_and_sticky_terminal_states() {
    use Expect::*;
    let terminal = [
        Status::Succeeded,
        Status::Failed,
        Status::TimedOut,
        Status::Cancelled,
        Status::Lost,
    ];
    let mut table: Vec<(Status, Op, Expect)> = vec![
        (Status::Queued, Op::Start, Now(Status::Running)),
        (Status::Running, Op::Start, Unchanged),
        (
            Status::Queued,
            Op::Finish(TerminalStatus::Failed),
            Now(Status::Failed),
        ),
        (
            Status::Running,
            Op::Finish(TerminalStatus::Succeeded),
            Now(Status::Succeeded),
        ),
        (
            Status::Running,
            Op::Finish(TerminalStatus::TimedOut),
            Now(Status::TimedOut),
        ),
        (Status::Queued, Op::Cancel, Now(Status::Cancelled)),
        // The owner stops it and finishes it.
        (Status::Running, Op::Cancel, Now(Status::Running)),
    ];
    for status in terminal {
        for op in [
            Op::Start,
            Op::Finish(TerminalStatus::Succeeded),
            Op::Finish(TerminalStatus::Lost),
            Op::Cancel,
        ] {
            table.push((status, op, Unchanged));
        }
    }
    for (from, op, expect) in table {
        let mut l = ledger();
        let before = task_in(&mut l, from, T0);
        let now = T0 + MIN;
        let result = apply(&mut l, &before.task_id, op, now);
        let after = l.get(&before.task_id).unwrap().unwrap();
        match expect {
            Now(status) => {
                let task = result.unwrap_or_else(|e| panic!("{from} {op:?}: {e}"));
                assert_eq!(task, after, "{from} {op:?}: returns the stored task");
                assert_eq!(after.status, status, "{from} {op:?}");
                assert_eq!(after.last_event_at, Some(now), "{from} {op:?}");
                if status.is_terminal() {
                    assert_eq!(after.ended_at, Some(now));
                    assert_eq!(after.cleanup_after, Some(now + RETENTION_MS));
                    assert_eq!(after.lease_until, None, "the lease is released");
                }
            }
            Unchanged => {
                assert!(result.is_err(), "{from} {op:?} should be refused");
                assert_eq!(after, before, "{from} {op:?} changed the record");
            }
        }
    }
}

#[test]
fn finishing_records_the_outcome_and_cancel_requests_are_kept_once() {
    let mut l = ledger();
    let task = task_in(&mut l, Status::Running, T0);
    let first = l.cancel(&task.task_id, T0 + MIN).unwrap();
    assert!(matches!(first, CancelOutcome::Requested(_)));
    assert_eq!(first.task().cancel_requested_at, Some(T0 + MIN));
    let again = l.cancel(&task.task_id, T0 + 2 * MIN).unwrap();
    assert_eq!(again.task().cancel_requested_at, Some(T0 + MIN));
    let end = Terminal {
        status: TerminalStatus::Cancelled,
        error: Some("stopped by the user".into()),
        terminal_summary: Some("stopped after 2 of 5 steps".into()),
        terminal_outcome: Some(TerminalOutcome::Blocked),
    };
    let done = l.finish(&task.task_id, end.clone(), T0 + 3 * MIN).unwrap();
    let FinishOutcome::Finished(done) = done else {
        panic!("{done:?}")
    };
    assert_eq!(done.status, Status::Cancelled);
    assert_eq!(done.error, end.error);
    assert_eq!(done.terminal_summary, end.terminal_summary);
    assert_eq!(done.terminal_outcome, Some(TerminalOutcome::Blocked));
    // Delivery follows the end.
    let delivered = l
        .set_delivery(&task.task_id, DeliveryStatus::Delivered, T0 + 4 * MIN)
        .unwrap();
    assert_eq!(delivered.delivery_status, DeliveryStatus::Delivered);
    assert_eq!(delivered.status, Status::Cancelled);
    for missing in [
        l.start("nope", 1, T0 + MIN, T0).unwrap_err(),
        l.finish("nope", Terminal::status(TerminalStatus::Failed), T0)
            .unwrap_err(),
        l.cancel("nope", T0).unwrap_err(),
        l.set_delivery("nope", DeliveryStatus::Failed, T0)
            .unwrap_err(),
    ] {
        assert!(
            matches!(missing, TaskError::NotFound(ref id) if id == "nope"),
            "{missing}"
        );
    }
}

#[test]
fn a_record_never_stamps_an_event_before_an_earlier_one() {
    // The caller's clock stepped back between start and finish.
    let mut l = ledger();
    let task = task_in(&mut l, Status::Running, T0);
    let FinishOutcome::Finished(done) = l
        .finish(
            &task.task_id,
            Terminal::status(TerminalStatus::Succeeded),
            T0 - 20 * MIN,
        )
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(done.ended_at, Some(T0));
    assert_eq!(done.last_event_at, Some(T0));
    assert_eq!(done.cleanup_after, Some(T0 + RETENTION_MS));
    let audit = l.audit(T0).unwrap();
    assert_eq!(audit.findings, vec![], "no inconsistent timestamps");
}

#[test]
fn leases_are_renewed_for_one_generation_and_never_shortened() {
    let mut l = ledger();
    let mine: Vec<Task> = (0..3)
        .map(|_| {
            let t = queued(&mut l, T0);
            l.start(&t.task_id, 2, T0 + 5 * MIN, T0).unwrap()
        })
        .collect();
    let other = queued(&mut l, T0);
    let other = l.start(&other.task_id, 1, T0 + 5 * MIN, T0).unwrap();
    let waiting = queued(&mut l, T0);
    let finished = task_in(&mut l, Status::Succeeded, T0);
    assert_eq!(l.renew_leases(2, T0 + 10 * MIN, T0 + MIN).unwrap(), 3);
    for t in &mine {
        assert_eq!(
            l.get(&t.task_id).unwrap().unwrap().lease_until,
            Some(T0 + 10 * MIN)
        );
    }
    // A shorter renewal keeps the longer lease.
    l.renew_leases(2, T0 + 7 * MIN, T0 + 2 * MIN).unwrap();
    assert_eq!(
        l.get(&mine[0].task_id).unwrap().unwrap().lease_until,
        Some(T0 + 10 * MIN)
    );
    assert_eq!(l.get(&other.task_id).unwrap().unwrap(), other);
    assert_eq!(l.get(&waiting.task_id).unwrap().unwrap(), waiting);
    assert_eq!(l.get(&finished.task_id).unwrap().unwrap(), finished);
}

#[test]
fn generations_count_up_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("almanac.sqlite");
    let mut l = Ledger::open(&path).unwrap();
    assert_eq!(l.next_generation().unwrap(), 1);
    assert_eq!(l.next_generation().unwrap(), 2);
    drop(l);
    let mut l = Ledger::open(&path).unwrap();
    assert_eq!(l.next_generation().unwrap(), 3);
    let sync: i64 = l
        .conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        sync, 2,
        "canonical records are written with synchronous = FULL"
    );
}

/// A deterministic sequence for building mixed ledgers.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn start_recovery_requeues_retryable_work_and_loses_the_rest() {
    let mut l = ledger();
    let mut dice = Dice(7);
    let lanes = [Some("lane-a"), Some("lane-b"), Some("lane-c"), None];
    let kinds = [Some("agent_turn"), Some("cron_run"), None];
    let current = 4;
    for i in 0..100 {
        let now = T0 + i * 1000;
        let lane = lanes[dice.roll(4) as usize];
        let kind = kinds[dice.roll(3) as usize];
        let task = l.create(new_task(kind, lane), now).unwrap();
        match dice.roll(6) {
            0 | 1 => {} // queued
            2..=4 => {
                let generation = 1 + dice.roll(3) as i64; // earlier generations
                l.start(&task.task_id, generation, now + MIN, now).unwrap();
                if dice.roll(5) == 0 {
                    l.cancel(&task.task_id, now).unwrap();
                }
            }
            _ => {
                let end = TerminalStatus::ALL[dice.roll(5) as usize];
                l.finish(&task.task_id, Terminal::status(end), now).unwrap();
            }
        }
    }
    // A task the live gateway already runs is its own.
    let own = queued(&mut l, T0);
    let own = l.start(&own.task_id, current, T0 + 9 * DAY, T0).unwrap();
    let before = all_rows(&l);
    let lane_order_before: BTreeMap<String, Vec<i64>> = before
        .values()
        .filter(|t| t.lane_key.is_some())
        .fold(BTreeMap::new(), |mut m, t| {
            m.entry(t.lane_key.clone().unwrap())
                .or_default()
                .push(t.lane_seq.unwrap());
            m
        });

    let now = T0 + DAY;
    let recovery = l.recover_at_start(current, now, &["agent_turn"]).unwrap();
    let after = all_rows(&l);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "no task missing"
    );
    let running_before: BTreeSet<&String> = before
        .values()
        .filter(|t| t.status == Status::Running && t.generation != Some(current))
        .map(|t| &t.task_id)
        .collect();
    let handled: BTreeSet<&String> = recovery
        .lost
        .iter()
        .chain(&recovery.requeued)
        .chain(&recovery.cancelled)
        .collect();
    assert_eq!(handled, running_before, "each orphan handled exactly once");
    assert_eq!(
        handled.len(),
        recovery.lost.len() + recovery.requeued.len() + recovery.cancelled.len()
    );
    assert!(!recovery.lost.is_empty() && !recovery.requeued.is_empty());
    assert!(!recovery.cancelled.is_empty());
    for (id, was) in &before {
        let now_task = &after[id];
        if id == &own.task_id {
            assert_eq!(now_task, was, "the live generation's task is untouched");
            continue;
        }
        assert_ne!(now_task.status, Status::Running, "{id} still running");
        if !running_before.contains(id) {
            assert_eq!(now_task, was, "{id} ({}) changed", was.status);
            continue;
        }
        let generation = was.generation.unwrap();
        if was.cancel_requested_at.is_some() {
            assert_eq!(now_task.status, Status::Cancelled);
            assert!(recovery.cancelled.contains(id));
        } else if was.task_kind.as_deref() == Some("agent_turn") {
            assert!(recovery.requeued.contains(id));
            assert_eq!(now_task.status, Status::Queued);
            assert_eq!(
                (
                    now_task.started_at,
                    now_task.generation,
                    now_task.lease_until
                ),
                (None, None, None)
            );
            assert_eq!(now_task.lane_seq, was.lane_seq, "its lane place is kept");
        } else {
            assert!(recovery.lost.contains(id));
            assert_eq!(now_task.status, Status::Lost);
            assert_eq!(now_task.ended_at, Some(now));
            assert_eq!(now_task.cleanup_after, Some(now + RETENTION_MS));
            assert_eq!(
                now_task.error.as_deref(),
                Some(format!("the gateway that ran it stopped (generation {generation})").as_str())
            );
        }
    }
    // Lane places are those given at creation: nothing renumbered.
    for t in after.values().filter(|t| t.lane_key.is_some()) {
        assert!(lane_order_before[t.lane_key.as_ref().unwrap()].contains(&t.lane_seq.unwrap()));
    }
    // Recovering again finds nothing.
    assert_eq!(
        l.recover_at_start(current, now, &["agent_turn"]).unwrap(),
        Recovery::default()
    );
}

#[test]
fn the_sweeper_declares_lost_only_when_the_lease_expired_and_the_owner_is_gone() {
    let now = T0 + 10 * MIN;
    // (lease until, owner generation, the live generation, lost?)
    let cases: &[(i64, i64, Option<i64>, bool)] = &[
        (now + 1, 1, Some(2), false),   // lease valid, owner gone
        (now, 1, Some(2), false),       // lease valid to the millisecond
        (now - 1, 2, Some(2), false),   // lease expired, owner is the live gateway
        (now + MIN, 2, Some(2), false), // both
        (now - 1, 1, Some(2), true),    // expired, owner gone
        (now - DAY, 1, Some(3), true),
        // No live gateway (the command line): the lease alone decides.
        (now - 1, 2, None, true),
        (now, 2, None, false),
    ];
    for &(lease_until, owner, live, lost) in cases {
        let mut l = ledger();
        let task = queued(&mut l, T0);
        l.start(&task.task_id, owner, T0 + MIN, T0).unwrap();
        raw_update(&l, &task.task_id, &format!("lease_until = {lease_until}"));
        let sweep = match live {
            Some(g) => l.sweep(now, g).unwrap(),
            None => l.maintenance_ids(now, None, true).unwrap(),
        };
        let after = l.get(&task.task_id).unwrap().unwrap();
        let case = format!("lease {} owner {owner} live {live:?}", lease_until - now);
        assert_eq!(sweep.lost.len(), usize::from(lost), "{case}");
        assert_eq!(after.status == Status::Lost, lost, "{case}");
        if lost {
            assert_eq!(after.ended_at, Some(now));
            assert_eq!(after.cleanup_after, Some(now + RETENTION_MS));
            assert_eq!(
                after.error.as_deref(),
                Some(
                    format!(
                        "the gateway that ran it (generation {owner}) stopped renewing its lease"
                    )
                    .as_str()
                )
            );
        } else {
            assert_eq!(after.status, Status::Running, "{case}");
        }
    }
}

#[test]
fn finished_tasks_are_pruned_seven_days_after_they_end() {
    let mut l = ledger();
    let done = task_in(&mut l, Status::Succeeded, T0);
    let active = queued(&mut l, T0 - 30 * DAY);
    // Ended long ago without a cleanup stamp (a record from before stamps):
    // stamped and pruned in one sweep.
    let old = task_in(&mut l, Status::Failed, T0 - 8 * DAY);
    raw_update(&l, &old.task_id, "cleanup_after = NULL");
    // Ended a day later without a stamp: stamped, kept.
    let recent = task_in(&mut l, Status::Failed, T0 + DAY);
    raw_update(&l, &recent.task_id, "cleanup_after = NULL");

    let sweep = l.sweep(T0 + RETENTION_MS, 9).unwrap();
    assert_eq!(sweep.pruned, vec![old.task_id.clone()]);
    let mut stamped = sweep.stamped.clone();
    stamped.sort();
    let mut expected = vec![old.task_id.clone(), recent.task_id.clone()];
    expected.sort();
    assert_eq!(stamped, expected);
    assert!(l.get(&old.task_id).unwrap().is_none());
    assert_eq!(
        l.get(&recent.task_id).unwrap().unwrap().cleanup_after,
        Some(T0 + DAY + RETENTION_MS)
    );
    assert!(
        l.get(&done.task_id).unwrap().is_some(),
        "kept for exactly 7 days"
    );
    let sweep = l.sweep(T0 + RETENTION_MS + 1, 9).unwrap();
    assert_eq!(sweep.pruned, vec![done.task_id.clone()]);
    assert!(l.get(&done.task_id).unwrap().is_none());
    assert!(
        l.get(&active.task_id).unwrap().is_some(),
        "active tasks are never pruned"
    );
}

#[test]
fn maintenance_performs_exactly_what_it_previews() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("almanac.sqlite");
    let mut l = Ledger::open(&path).unwrap();
    let mut dice = Dice(11);
    for i in 0..60 {
        let created = T0 - dice.roll(12) as i64 * DAY + i;
        let status = Status::ALL[dice.roll(7) as usize];
        let task = task_in(&mut l, status, created);
        match dice.roll(4) {
            0 if status == Status::Running => raw_update(
                &l,
                &task.task_id,
                &format!("lease_until = {}", T0 - dice.roll(3) as i64 * MIN),
            ),
            1 if status.is_terminal() => raw_update(&l, &task.task_id, "cleanup_after = NULL"),
            _ => {}
        }
    }
    let now = T0;
    let before = all_rows(&l);
    let preview = Ledger::open_for_reading(&path)
        .unwrap()
        .maintenance_ids(now, None, false)
        .unwrap();
    assert_eq!(
        l.maintenance_ids(now, None, false).unwrap(),
        preview,
        "a preview is the same however the ledger is opened"
    );
    assert_eq!(all_rows(&l), before, "a preview changes nothing");
    assert!(
        !preview.lost.is_empty() && !preview.stamped.is_empty() && !preview.pruned.is_empty(),
        "{preview:?}"
    );
    let counts = l.maintenance(now, None, false).unwrap();
    assert!(!counts.applied);

    let applied = l.maintenance_ids(now, None, true).unwrap();
    assert_eq!(applied, preview);
    let after = all_rows(&l);
    for id in &preview.pruned {
        assert!(!after.contains_key(id), "{id} not pruned");
    }
    for id in &preview.lost {
        assert_eq!(after[id].status, Status::Lost);
    }
    for id in preview.stamped.iter().filter(|id| after.contains_key(*id)) {
        assert!(after[id].cleanup_after.is_some());
    }
    // Everything else is as it was.
    for (id, task) in &after {
        if !preview.lost.contains(id) && !preview.stamped.contains(id) {
            assert_eq!(task, &before[id], "{id} changed without being previewed");
        }
    }
    assert_eq!(after.len(), before.len() - preview.pruned.len());
    // Nothing is left to do.
    let again = l.maintenance(now, None, true).unwrap();
    assert_eq!(
        again,
        Maintenance {
            reconciled: 0,
            cleanup_stamped: 0,
            pruned: 0,
            applied: true
        }
    );
    assert_eq!(
        counts,
        Maintenance {
            reconciled: preview.lost.len(),
            cleanup_stamped: preview.stamped.len(),
            pruned: preview.pruned.len(),
            applied: false,
        }
    );
}

/// A finished, clean task at T0 to vary per audit case.
fn clean_task() -> Task {
    Task {
        task_id: "00000000-0000-4000-8000-000000000000".into(),
        runtime: Runtime::Subagent,
        task_kind: None,
        source_id: None,
        run_id: None,
        requester_session_key: "agent:main:main".into(),
        owner_key: "agent:main:main".into(),
        scope_kind: ScopeKind::Session,
        child_session_key: None,
        parent_flow_id: None,
        parent_task_id: None,
        agent_id: None,
        label: None,
        task: "t".into(),
        status: Status::Succeeded,
        delivery_status: DeliveryStatus::Delivered,
        notify_policy: NotifyPolicy::DoneOnly,
        created_at: T0 - 2 * MIN,
        started_at: Some(T0 - MIN),
        ended_at: Some(T0),
        last_event_at: Some(T0),
        cleanup_after: Some(T0 + RETENTION_MS),
        error: None,
        progress_summary: None,
        terminal_summary: None,
        terminal_outcome: None,
        generation: Some(1),
        lease_until: None,
        lane_key: None,
        lane_seq: None,
        cancel_requested_at: None,
        request: None,
    }
}

fn audit_cases() -> Vec<(&'static str, Task, Vec<AuditCode>)> {
    use AuditCode::*;
    let now = T0;
    let t = clean_task;
    let queued_since = |ms: i64| Task {
        status: Status::Queued,
        created_at: now - ms,
        started_at: None,
        ended_at: None,
        last_event_at: Some(now - ms),
        cleanup_after: None,
        ..t()
    };
    let running_since = |ms: i64| Task {
        status: Status::Running,
        created_at: now - ms - 1,
        started_at: Some(now - ms),
        ended_at: None,
        cleanup_after: None,
        lease_until: Some(now + MIN),
        ..t()
    };
    vec![
        ("clean", t(), vec![]),
        (
            "queued 10 min",
            queued_since(STALE_QUEUED_MS),
            vec![StaleQueued],
        ),
        (
            "queued just under",
            queued_since(STALE_QUEUED_MS - 1),
            vec![],
        ),
        (
            "running 30 min",
            running_since(STALE_RUNNING_MS),
            vec![StaleRunning],
        ),
        (
            "running just under",
            running_since(STALE_RUNNING_MS - 1),
            vec![],
        ),
        (
            "lost",
            Task {
                status: Status::Lost,
                error: Some("gone".into()),
                ..t()
            },
            vec![Lost],
        ),
        (
            "failed is not lost",
            Task {
                status: Status::Failed,
                ..t()
            },
            vec![],
        ),
        (
            "delivery failed",
            Task {
                delivery_status: DeliveryStatus::Failed,
                ..t()
            },
            vec![DeliveryFailed],
        ),
        (
            "delivery failed but silent",
            Task {
                delivery_status: DeliveryStatus::Failed,
                notify_policy: NotifyPolicy::Silent,
                ..t()
            },
            vec![],
        ),
        (
            "no cleanup",
            Task {
                cleanup_after: None,
                ..t()
            },
            vec![MissingCleanup],
        ),
        (
            "lost without cleanup is only lost",
            Task {
                status: Status::Lost,
                cleanup_after: None,
                ..t()
            },
            vec![Lost],
        ),
        (
            "started before created",
            Task {
                started_at: Some(T0 - 3 * MIN),
                ..t()
            },
            vec![InconsistentTimestamps],
        ),
        (
            "started as created",
            Task {
                started_at: Some(T0 - 2 * MIN),
                ..t()
            },
            vec![],
        ),
        (
            "ended before started",
            Task {
                ended_at: Some(T0 - 90_000),
                ..t()
            },
            vec![InconsistentTimestamps],
        ),
        (
            "active with an end",
            Task {
                ended_at: Some(T0 + 30_000),
                ..running_since(MIN)
            },
            vec![InconsistentTimestamps],
        ),
    ]
}

#[test]
fn each_audit_code_fires_on_its_case_and_not_on_a_near_miss() {
    for (name, task, codes) in audit_cases() {
        let audit = Audit::of(std::slice::from_ref(&task), T0);
        let found: Vec<AuditCode> = audit.findings.iter().map(|f| f.code).collect();
        assert_eq!(found, codes, "{name}");
        for f in &audit.findings {
            assert_eq!(f.severity, f.code.severity(), "{name}");
            assert_eq!(f.task_id, task.task_id);
        }
    }
    let severity = |code| AuditCode::severity(code);
    assert_eq!(severity(AuditCode::StaleRunning), Severity::Error);
    assert_eq!(severity(AuditCode::Lost), Severity::Error);
    assert_eq!(severity(AuditCode::StaleQueued), Severity::Warn);
}

#[test]
fn the_ledger_audit_reads_every_row_that_has_a_finding() {
    let mut l = ledger();
    let mut tasks = Vec::new();
    for (_, case, _) in audit_cases() {
        let created = l.create(new_task(None, None), case.created_at).unwrap();
        let set = format!(
            "status = '{}', delivery_status = '{}', notify_policy = '{}', started_at = {},
             ended_at = {}, cleanup_after = {}, lease_until = {}",
            case.status,
            case.delivery_status,
            case.notify_policy,
            sql_int(case.started_at),
            sql_int(case.ended_at),
            sql_int(case.cleanup_after),
            sql_int(case.lease_until),
        );
        raw_update(&l, &created.task_id, &set);
        tasks.push(l.get(&created.task_id).unwrap().unwrap());
    }
    let expected = Audit::of(&tasks, T0);
    assert!(expected.summary.total >= 8);
    assert_eq!(l.audit(T0).unwrap(), expected);
    let counts = l.counts(T0).unwrap();
    assert_eq!(counts.issues, expected.summary.total);
    assert_eq!(counts.queued, 2);
    assert_eq!(counts.running, 3);
}

fn sql_int(v: Option<i64>) -> String {
    v.map_or("NULL".into(), |v| v.to_string())
}

#[test]
fn audit_orders_errors_first_then_oldest_and_filters() {
    let aged = |id: &str, status: Status, ms: i64| Task {
        task_id: id.into(),
        status,
        created_at: T0 - ms,
        started_at: (status != Status::Queued).then_some(T0 - ms),
        ended_at: None,
        cleanup_after: None,
        ..clean_task()
    };
    let tasks = vec![
        aged("q-young", Status::Queued, 20 * MIN),
        aged("r-young", Status::Running, 40 * MIN),
        aged("q-old", Status::Queued, 90 * MIN),
        aged("r-old", Status::Running, 3 * 60 * MIN),
    ];
    let audit = Audit::of(&tasks, T0);
    let order: Vec<&str> = audit.findings.iter().map(|f| f.task_id.as_str()).collect();
    assert_eq!(order, ["r-old", "r-young", "q-old", "q-young"]);
    assert_eq!(audit.findings[0].age_ms, 3 * 60 * MIN);
    assert_eq!(audit.findings[0].detail, "running for 3h 0m");
    assert_eq!(audit.findings[3].detail, "queued for 20m");
    assert_eq!(
        (
            audit.summary.total,
            audit.summary.errors,
            audit.summary.warnings
        ),
        (4, 2, 2)
    );
    assert_eq!(audit.summary.by_code[&AuditCode::StaleQueued], 2);
    let json = serde_json::to_value(&audit).unwrap();
    assert_eq!(json["summary"]["byCode"]["stale_running"], 2);
    assert_eq!(json["findings"][0]["taskId"], "r-old");
    assert_eq!(json["findings"][0]["ageMs"], 3 * 60 * MIN);

    let warnings = audit.clone().filtered(Some(Severity::Warn), None, None);
    assert_eq!(warnings.summary.total, 2);
    assert!(
        warnings
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warn)
    );
    let limited = audit
        .clone()
        .filtered(None, Some(AuditCode::StaleRunning), Some(1));
    assert_eq!(limited.findings.len(), 1);
    assert_eq!(limited.findings[0].task_id, "r-old");
    assert_eq!(limited.summary.total, 2, "the summary counts every match");
    assert_eq!(
        audit.filtered(None, Some(AuditCode::Lost), None),
        Audit::default()
    );
}

#[test]
fn durations_read_naturally() {
    for (ms, text) in [
        (0, "0s"),
        (59_999, "59s"),
        (MIN, "1m"),
        (59 * MIN, "59m"),
        (61 * MIN, "1h 1m"),
        (DAY + 3 * 60 * MIN, "1d 3h"),
        (-5, "0s"),
    ] {
        assert_eq!(human_duration(ms), text);
    }
}

#[test]
fn lookups_by_id_run_session_and_prefix() {
    let mut l = ledger();
    let mut first = new_task(None, None);
    first.run_id = Some("run-1".into());
    first.child_session_key = Some("agent:main:subagent:x".into());
    let first = l.create(first, T0).unwrap();
    let mut second = new_task(None, None);
    second.run_id = Some("run-1".into());
    let second = l.create(second, T0 + 1).unwrap();
    let mut system = NewTask::new(Runtime::Cron, "cron:x", "tick");
    system.requester_session_key = String::new();
    l.create(system, T0 + 2).unwrap();
    let found = |lookup: &str| l.get(lookup).unwrap().map(|t| t.task_id);
    assert_eq!(found(&first.task_id), Some(first.task_id.clone()));
    assert_eq!(found("run-1"), Some(second.task_id.clone()), "most recent");
    assert_eq!(found("agent:main:main"), Some(second.task_id.clone()));
    assert_eq!(found("agent:main:subagent:x"), Some(first.task_id.clone()));
    assert_eq!(found(""), None, "an empty lookup is not the system scope");
    assert_eq!(found("   "), None);
    assert_eq!(found("nope"), None);
    raw_update(
        &l,
        &first.task_id,
        "task_id = 'abcd1111-0000-4000-8000-000000000000'",
    );
    raw_update(
        &l,
        &second.task_id,
        "task_id = 'abcd2222-0000-4000-8000-000000000000'",
    );
    assert_eq!(
        found("abcd1111"),
        Some("abcd1111-0000-4000-8000-000000000000".into())
    );
    assert!(matches!(l.get("abcd"), Err(TaskError::Ambiguous(_))));
    assert_eq!(found("abc"), None, "too short to be a prefix");
    assert_eq!(found("abcd%"), None, "no pattern matching");
}

#[test]
fn lists_filter_newest_first() {
    let mut l = ledger();
    let a = task_in(&mut l, Status::Running, T0);
    let b = task_in(&mut l, Status::Failed, T0 + 1);
    let mut cron = NewTask::new(Runtime::Cron, "cron:x", "tick");
    cron.running = Some(Lease {
        generation: 1,
        until_ms: T0 + DAY,
    });
    let c = l.create(cron, T0 + 2).unwrap();
    let ids = |filter: TaskFilter, limit| -> Vec<String> {
        l.list(filter, limit)
            .unwrap()
            .into_iter()
            .map(|t| t.task_id)
            .collect()
    };
    let all = TaskFilter::default();
    assert_eq!(
        ids(all, None),
        [c.task_id.clone(), b.task_id.clone(), a.task_id.clone()]
    );
    assert_eq!(ids(all, Some(1)), vec![c.task_id.clone()]);
    let running = TaskFilter {
        status: Some(Status::Running),
        runtime: None,
    };
    assert_eq!(ids(running, None), [c.task_id.clone(), a.task_id.clone()]);
    let subagents = TaskFilter {
        status: Some(Status::Running),
        runtime: Some(Runtime::Subagent),
    };
    assert_eq!(ids(subagents, None), vec![a.task_id.clone()]);
}

#[test]
fn a_sessions_live_subagent_runs_are_those_it_asked_for_or_runs_in() {
    let mut l = ledger();
    let running = task_in(&mut l, Status::Running, T0);
    let waiting = task_in(&mut l, Status::Queued, T0 + 1);
    task_in(&mut l, Status::Succeeded, T0 + 2);
    let mut other = new_task(None, None);
    other.requester_session_key = "agent:main:other".into();
    let other = l.create(other, T0 + 3).unwrap();
    let mut inside = new_task(None, None);
    inside.requester_session_key = "agent:main:other".into();
    inside.child_session_key = Some("agent:main:main".into());
    let inside = l.create(inside, T0 + 4).unwrap();
    let mut cron = NewTask::new(Runtime::Cron, "agent:main:main", "tick");
    cron.requester_session_key = "agent:main:main".into();
    l.create(cron, T0 + 5).unwrap();
    let ids = |session: &str| -> BTreeSet<String> {
        l.live_subagents_around(session)
            .unwrap()
            .into_iter()
            .map(|t| t.task_id)
            .collect()
    };
    assert_eq!(
        ids("agent:main:main"),
        BTreeSet::from([running.task_id, waiting.task_id, inside.task_id.clone()])
    );
    assert_eq!(
        ids("agent:main:other"),
        BTreeSet::from([other.task_id, inside.task_id])
    );
    assert!(ids("agent:main:nobody").is_empty());
}

#[test]
fn reading_creates_nothing_and_never_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state").join("almanac.sqlite");
    let mut reader = Ledger::open_for_reading(&path).unwrap();
    assert!(reader.list(TaskFilter::default(), None).unwrap().is_empty());
    assert_eq!(
        reader.maintenance(T0, None, false).unwrap(),
        Maintenance::default()
    );
    assert!(matches!(
        reader.create(new_task(None, None), T0),
        Err(TaskError::ReadOnly)
    ));
    assert!(matches!(reader.next_generation(), Err(TaskError::ReadOnly)));
    assert!(!dir.path().join("state").exists(), "nothing created");

    // A store from before the ledger: read as empty, left at its version.
    {
        let store = crate::store::Store::open(&path, crate::store::StoreKind::State).unwrap();
        store
            .conn
            .execute_batch(
                "DROP TABLE tasks; DROP TABLE cron_jobs; DROP TABLE cron_search; DROP TABLE cron_index; DROP TABLE cron_slots;
                 DELETE FROM schema_migrations WHERE version >= 2;
                 PRAGMA user_version = 1;",
            )
            .unwrap();
    }
    let reader = Ledger::open_for_reading(&path).unwrap();
    assert!(reader.audit(T0).unwrap().findings.is_empty());
    drop(reader);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1, "reading did not migrate");
    drop(conn);

    let mut writer = Ledger::open(&path).unwrap();
    let task = queued(&mut writer, T0);
    let reader = Ledger::open_for_reading(&path).unwrap();
    assert_eq!(reader.get(&task.task_id).unwrap().unwrap(), task);
}

mod stickiness {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        Start(usize),
        Finish(usize, usize),
        Cancel(usize),
        Renew,
        Sweep,
        Recover,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..4usize).prop_map(Step::Start),
            (0..4usize, 0..5usize).prop_map(|(t, e)| Step::Finish(t, e)),
            (0..4usize).prop_map(Step::Cancel),
            Just(Step::Renew),
            Just(Step::Sweep),
            Just(Step::Recover),
        ]
    }

    proptest! {
        /// Whatever happens to a ledger, a task that has ended keeps its
        /// record unchanged until it is pruned.
        #[test]
        fn ended_tasks_never_change(steps in proptest::collection::vec((step(), 0..3 * DAY), 1..40)) {
            let mut l = ledger();
            let ids: Vec<String> = (0..4).map(|_| queued(&mut l, T0).task_id).collect();
            let mut now = T0;
            let mut generation = 1;
            let mut ended: BTreeMap<String, Task> = BTreeMap::new();
            for (step, advance) in steps {
                now += advance;
                let _ = match step {
                    Step::Start(i) => l.start(&ids[i], generation, now + 5 * MIN, now).map(drop),
                    Step::Finish(i, e) => l
                        .finish(&ids[i], Terminal::status(TerminalStatus::ALL[e]), now)
                        .map(drop),
                    Step::Cancel(i) => l.cancel(&ids[i], now).map(drop),
                    Step::Renew => l.renew_leases(generation, now + 5 * MIN, now).map(drop),
                    Step::Sweep => l.sweep(now, generation).map(drop),
                    Step::Recover => {
                        generation += 1;
                        l.recover_at_start(generation, now, &["agent_turn"]).map(drop)
                    }
                };
                for id in &ids {
                    let task = l.get(id).unwrap();
                    if let Some(before) = ended.get(id) {
                        if let Some(task) = &task {
                            prop_assert_eq!(task, before);
                        }
                    } else if let Some(task) = task.filter(|t| t.status.is_terminal()) {
                        prop_assert!(task.ended_at.is_some());
                        prop_assert!(task.cleanup_after.is_some());
                        ended.insert(id.clone(), task);
                    }
                }
            }
        }
    }
}
