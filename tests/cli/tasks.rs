//! `almanac tasks`: reading the ledger the gateway writes, auditing it and
//! maintaining it. Tasks are recorded here through the library, as the
//! gateway records them.

use almanac::testing::{DeliveryStatus, Lease, Ledger, NewTask, Runtime, Terminal, TerminalStatus};
use serde_json::Value;

use crate::common::Sandbox;

const NOW: &str = "2026-11-29T09:00:00+00:00";
const MIN: i64 = 60_000;
const DAY: i64 = 24 * 60 * MIN;

fn now_ms() -> i64 {
    NOW.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn tasks_of(v: &Value) -> Vec<&str> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect()
}

#[test]
fn reading_an_empty_ledger_creates_nothing() {
    let sb = Sandbox::new();
    let list = sb.run(&["tasks", "list", "--json"]).ok();
    assert_eq!(list.json(), serde_json::json!({"tasks": []}));
    let plain = sb.run(&["tasks"]).ok();
    assert_eq!(plain.stdout, "No tasks.\n");
    let audit = sb.run(&["tasks", "audit", "--json"]).ok().json();
    assert_eq!(audit["findings"], serde_json::json!([]));
    assert_eq!(audit["summary"]["total"], 0);
    for apply in [false, true] {
        let mut args = vec!["tasks", "maintenance", "--json"];
        if apply {
            args.push("--apply");
        }
        let done = sb.run(&args).ok().json();
        assert_eq!(
            done,
            serde_json::json!({"reconciled": 0, "cleanupStamped": 0, "pruned": 0, "applied": apply})
        );
    }
    let status = sb.run(&["status", "--json"]).ok().json();
    assert_eq!(
        status["subsystems"]["tasks"],
        serde_json::json!({"queued": 0, "running": 0, "issues": 0})
    );
    let missing = sb.run(&["tasks", "show", "nope"]).code(1);
    assert!(
        missing.stderr.starts_with("error: no task `nope`"),
        "{}",
        missing.stderr
    );
    assert!(!sb.path(".almanac/almanac.sqlite").exists());
    assert!(!sb.path(".almanac").exists(), "no state directory either");
}

/// The tasks `the_commands_read_audit_and_maintain_what_the_gateway_recorded`
/// reads, recorded as the gateway records them.
struct Recorded {
    generation: i64,
    /// Queued 20 minutes ago and still waiting: stale.
    waiting: String,
    /// Running under a lease that expired: lost at the next maintenance.
    stuck: String,
    /// A cron run that ended nine days ago: past its cleanup time.
    old: String,
    /// Finished an hour ago, its result undelivered.
    undelivered: String,
}

fn record_tasks(sb: &Sandbox) -> Recorded {
    let store = sb.path(".almanac/almanac.sqlite");
    let now = now_ms();
    let mut ledger = Ledger::open(&store).unwrap();
    let generation = ledger.next_generation().unwrap();

    let mut turn = NewTask::new(Runtime::Subagent, "agent:main:main", "Summarise the inbox");
    turn.requester_session_key = "agent:main:main".into();
    turn.task_kind = Some("agent_turn".into());
    turn.lane_key = Some("agent:main:main".into());
    turn.request = Some(serde_json::json!({"message": "Summarise the inbox"}));
    // Queued 20 minutes ago and still waiting: stale.
    let waiting = ledger.create(turn.clone(), now - 20 * MIN).unwrap();
    // Running under a lease that expired: lost at the next maintenance.
    let stuck = ledger.create(turn.clone(), now - 10 * MIN).unwrap();
    ledger
        .start(&stuck.task_id, generation, now - 5 * MIN, now - 10 * MIN)
        .unwrap();
    // A cron run that ended nine days ago: past its cleanup time.
    let mut cron = NewTask::new(Runtime::Cron, "cron:digest", "Daily digest");
    cron.run_id = Some("cron:digest:1".into());
    cron.running = Some(Lease {
        generation,
        until_ms: now - 9 * DAY + MIN,
    });
    let old = ledger.create(cron, now - 9 * DAY).unwrap();
    ledger
        .finish(
            &old.task_id,
            Terminal::status(TerminalStatus::Succeeded),
            now - 9 * DAY,
        )
        .unwrap();
    // Finished an hour ago, its result undelivered.
    let undelivered = ledger.create(turn, now - 2 * 60 * MIN).unwrap();
    ledger
        .start(&undelivered.task_id, generation, now, now - 2 * 60 * MIN)
        .unwrap();
    ledger
        .finish(
            &undelivered.task_id,
            Terminal {
                terminal_summary: Some("3 threads need an answer".into()),
                ..Terminal::status(TerminalStatus::Succeeded)
            },
            now - 60 * MIN,
        )
        .unwrap();
    ledger
        .set_delivery(&undelivered.task_id, DeliveryStatus::Failed, now - 60 * MIN)
        .unwrap();
    Recorded {
        generation,
        waiting: waiting.task_id,
        stuck: stuck.task_id,
        old: old.task_id,
        undelivered: undelivered.task_id,
    }
}

#[test]
fn the_commands_read_audit_and_maintain_what_the_gateway_recorded() {
    let sb = Sandbox::new();
    let Recorded {
        generation,
        waiting,
        stuck,
        old,
        undelivered,
    } = record_tasks(&sb);

    let at = ["--now", NOW];
    let run = |args: &[&str]| sb.run(&[&at[..], args].concat());

    // list: newest first, OpenClaw's names plus almanac's.
    let list = run(&["tasks", "list", "--json"]).ok().json();
    assert_eq!(
        tasks_of(&list),
        [
            stuck.as_str(),
            waiting.as_str(),
            undelivered.as_str(),
            old.as_str()
        ]
    );
    let first = &list["tasks"][0];
    assert_eq!(first["status"], "running");
    assert_eq!(first["runtime"], "subagent");
    assert_eq!(first["generation"], generation);
    assert_eq!(first["laneKey"], "agent:main:main");
    assert_eq!(first["laneSeq"], 2);
    assert_eq!(first["requesterSessionKey"], "agent:main:main");
    assert_eq!(first["notifyPolicy"], "done_only");
    assert_eq!(first["request"]["message"], "Summarise the inbox");
    let running = run(&["tasks", "list", "--status", "running", "--json"])
        .ok()
        .json();
    assert_eq!(tasks_of(&running), [stuck.as_str()]);
    let crons = run(&["tasks", "--runtime", "cron", "--json"]).ok().json();
    assert_eq!(tasks_of(&crons), [old.as_str()]);
    let table = run(&["tasks", "list"]).ok().stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    for column in ["Task", "Kind", "Status", "Delivery", "Run", "Summary"] {
        assert!(lines[0].contains(column), "{table}");
    }
    assert!(lines[1].starts_with(&stuck[..8]), "{table}");
    assert!(lines[1].contains("subagent/agent_turn"), "{table}");
    assert!(lines[3].contains("3 threads need an answer"), "{table}");
    assert!(lines[4].contains("cron:digest:1"), "{table}");

    // show: by id prefix, run id or session key.
    let shown = run(&["tasks", "show", &old[..8], "--json"]).ok().json();
    assert_eq!(shown["taskId"], old.as_str());
    let by_run = run(&["tasks", "show", "cron:digest:1", "--json"])
        .ok()
        .json();
    assert_eq!(by_run["taskId"], old.as_str());
    let by_session = run(&["tasks", "show", "agent:main:main", "--json"])
        .ok()
        .json();
    assert_eq!(by_session["taskId"], stuck.as_str(), "most recent");
    let text = run(&["tasks", "show", &undelivered]).ok().stdout;
    for expected in [
        undelivered.as_str(),
        "succeeded",
        "failed (notify done_only)",
        "3 threads need an answer",
        "2026-11-29 08:00:00 UTC",
    ] {
        assert!(text.contains(expected), "{expected} in:\n{text}");
    }

    // audit: errors first, then oldest.
    let audit = run(&["tasks", "audit", "--json"]).ok().json();
    let codes: Vec<(&str, &str)> = audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["code"].as_str().unwrap(), f["taskId"].as_str().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            ("delivery_failed", undelivered.as_str()),
            ("stale_queued", waiting.as_str()),
        ],
        "{audit}"
    );
    assert_eq!(audit["summary"]["warnings"], 2);
    // Each finding carries the whole record, as OpenClaw's audit does.
    let first = &audit["findings"][0];
    assert_eq!(first["task"]["taskId"], first["taskId"], "{audit}");
    assert_eq!(first["task"]["deliveryStatus"], "failed", "{audit}");
    // status: the ledger in one line, its issues the audit's findings.
    let status = run(&["status", "--json"]).ok().json();
    assert_eq!(
        status["subsystems"]["tasks"],
        serde_json::json!({"queued": 1, "running": 1, "issues": 2})
    );
    let status = run(&["status"]).ok().stdout;
    assert!(
        status.contains("\n  Tasks       1 queued · 1 running · 2 issues\n"),
        "{status}"
    );
    let errors = run(&["tasks", "audit", "--severity", "error", "--json"])
        .ok()
        .json();
    assert_eq!(errors["summary"]["total"], 0);
    let one = run(&["tasks", "audit", "--code", "stale_queued"])
        .ok()
        .stdout;
    assert!(one.starts_with("warn   stale_queued"), "{one}");
    assert!(one.contains("queued for 20m"), "{one}");
    assert!(one.ends_with("1 finding: 0 errors, 1 warning\n"), "{one}");

    assert_maintenance_previews_then_applies(&sb, &waiting, &stuck, &undelivered);
}

/// `tasks maintenance`: the preview changes nothing, `--apply` marks the
/// task whose lease expired lost and prunes the one past its cleanup
/// time, and then there is nothing to do.
fn assert_maintenance_previews_then_applies(
    sb: &Sandbox,
    waiting: &str,
    stuck: &str,
    undelivered: &str,
) {
    let at = ["--now", NOW];
    let run = |args: &[&str]| sb.run(&[&at[..], args].concat());
    let before = run(&["tasks", "list", "--json"]).ok().json();
    let preview = run(&["tasks", "maintenance", "--json"]).ok().json();
    assert_eq!(
        preview,
        serde_json::json!({"reconciled": 1, "cleanupStamped": 0, "pruned": 1, "applied": false})
    );
    let said = run(&["tasks", "maintenance"]).ok().stdout;
    assert!(
        said.starts_with("Would mark 1 task lost, stamp a cleanup time on 0 tasks, prune 1 task."),
        "{said}"
    );
    assert_eq!(run(&["tasks", "list", "--json"]).ok().json(), before);
    let applied = run(&["tasks", "maintenance", "--apply", "--json"])
        .ok()
        .json();
    assert_eq!(
        applied,
        serde_json::json!({"reconciled": 1, "cleanupStamped": 0, "pruned": 1, "applied": true})
    );
    let after = run(&["tasks", "list", "--json"]).ok().json();
    assert_eq!(tasks_of(&after), [stuck, waiting, undelivered]);
    assert_eq!(after["tasks"][0]["status"], "lost");
    let lost_audit = run(&["tasks", "audit", "--severity", "error", "--json"])
        .ok()
        .json();
    assert_eq!(lost_audit["findings"][0]["code"], "lost");
    assert_eq!(
        run(&["tasks", "maintenance", "--apply"]).ok().stdout,
        "Nothing to do.\n"
    );
}

#[test]
fn maintenance_never_declares_lost_a_task_of_the_gateway_that_runs() {
    let sb = Sandbox::new();
    let store = sb.path(".almanac/almanac.sqlite");
    let now = now_ms();
    let mut ledger = Ledger::open(&store).unwrap();
    let turn = NewTask::new(Runtime::Cli, "agent:main:main", "A long turn");
    // An earlier gateway's task, and one of the gateway that runs now;
    // both leases lapsed (a suspended laptop stops every renewal).
    let earlier = ledger.next_generation().unwrap();
    let orphan = ledger.create(turn.clone(), now - 10 * MIN).unwrap();
    ledger
        .start(&orphan.task_id, earlier, now - 5 * MIN, now - 10 * MIN)
        .unwrap();
    let current = ledger.next_generation().unwrap();
    let live = ledger.create(turn, now - 10 * MIN).unwrap();
    ledger
        .start(&live.task_id, current, now - 5 * MIN, now - 10 * MIN)
        .unwrap();
    drop(ledger);
    let status_of = |id: &str| {
        sb.run(&["tasks", "show", id, "--json"]).ok().json()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // The running gateway holds the instance lock.
    let lock = std::fs::File::create(sb.path(".almanac/gateway.lock")).unwrap();
    lock.try_lock().unwrap();
    let applied = sb
        .run(&["--now", NOW, "tasks", "maintenance", "--apply", "--json"])
        .ok()
        .json();
    assert_eq!(applied["reconciled"], 1, "{applied}");
    assert_eq!(status_of(&orphan.task_id), "lost");
    assert_eq!(status_of(&live.task_id), "running");

    // Once that gateway is gone, its task is lost too.
    drop(lock);
    let applied = sb
        .run(&["--now", NOW, "tasks", "maintenance", "--apply", "--json"])
        .ok()
        .json();
    assert_eq!(applied["reconciled"], 1, "{applied}");
    assert_eq!(status_of(&live.task_id), "lost");
}
