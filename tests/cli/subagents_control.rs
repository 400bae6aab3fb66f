//! Controlling subagents through a running gateway: kill (its tool's
//! process group with it), `/stop` down to the grandchildren, steering a
//! running child, a run's timeout, an announce that waits for the
//! parent's long turn, and `cleanup: "delete"`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{text, tool_call};
use crate::common::Sandbox;
use crate::gateway::{Gateway, eventually};
use crate::gateway_hooks::tasks_of_kind;
use crate::scripted::{Reply, ScriptedServer, sse};

const WAIT: Duration = Duration::from_secs(20);

fn config(sb: &Sandbox, max_concurrent: u32, subagents: Value) {
    let config = json!({
        "agents": {"defaults": {"model": "openai/test-model", "maxConcurrent": max_concurrent,
            "subagents": subagents}},
        "tools": {"exec": {"security": "full"}},
    });
    sb.write(".almanac/config.json5", &config.to_string());
}

/// One streamed answer holding several tool calls.
fn tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    let chunk = |delta: Value, finish: Option<&str>| json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    let mut chunks = sse(&events);
    chunks.push("data: [DONE]\n\n".into());
    Reply::Sse(chunks)
}

fn subagent_tasks(gw: &Gateway) -> Vec<Value> {
    tasks_of_kind(gw, "subagent")
}

/// How often `needle` is in the user messages of `key`'s transcript.
fn told_in(sb: &Sandbox, key: &str, needle: &str) -> usize {
    let view = sb.run(&["sessions", "show", key, "--json"]).ok().json();
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m.to_string().matches(needle).count())
        .sum()
}

/// Whether the process group `pgid` still has a member.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the group exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

#[test]
fn a_killed_child_stops_with_its_tool_processes_and_the_others_report_back() {
    let sb = Sandbox::new();
    // One turn at a time: the first child holds the slot while its tool
    // sleeps, the others wait for it.
    config(&sb, 1, json!({}));
    let spawn = |task: &str| json!({"task": task, "label": task});
    let mut replies = vec![
        tool_calls(&[
            ("c1", "sessions_spawn", spawn("alpha")),
            ("c2", "sessions_spawn", spawn("beta")),
            ("c3", "sessions_spawn", spawn("gamma")),
        ]),
        text("Three helpers started."),
        tool_call(
            "s1",
            "exec",
            json!({"command": "echo $$ > sleeper.pid; exec sleep 60"}),
        ),
    ];
    replies.extend((1..=8).map(|n| text(&format!("ANSWER-{n}"))));
    let server = ScriptedServer::start(replies);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Go"})));
    assert_eq!(code, 200, "{answer}");

    // The first child sleeps in its tool; the other two wait, queued.
    let pid_file = sb.path(".almanac/workspace/sleeper.pid");
    let pgid: i32 = eventually(WAIT, || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    assert!(group_alive(pgid));
    let listed = sb.run(&["subagents", "list", "--json"]).ok().json();
    let runs = listed["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 3, "{listed}");
    let statuses: Vec<&str> = runs.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "running").count(),
        1,
        "{listed}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == "queued").count(),
        2,
        "{listed}"
    );
    let sleeper = runs.iter().find(|r| r["status"] == "running").unwrap();
    let number = format!("#{}", sleeper["index"]);

    let killed = sb
        .run(&["subagents", "kill", &number, "--json"])
        .ok()
        .json();
    assert_eq!(killed["killed"][0], sleeper["runId"], "{killed}");
    // Its process group is gone within a second.
    eventually(Duration::from_secs(1), || {
        (!group_alive(pgid)).then_some(())
    });

    // The two others run and report back; the killed one is announced
    // cancelled. Each once, in the parent's session.
    eventually(WAIT, || {
        let tasks = subagent_tasks(&gw);
        (tasks.len() == 3
            && tasks
                .iter()
                .all(|t| t["deliveryStatus"] == "session_queued"))
        .then_some(())
    });
    let statuses: Vec<String> = subagent_tasks(&gw)
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "succeeded").count(),
        2,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| *s == "cancelled").count(),
        1,
        "{statuses:?}"
    );
    eventually(WAIT, || {
        (told_in(&sb, "agent:main:main", "Status: ok") == 2
            && told_in(&sb, "agent:main:main", "Status: cancelled") == 1)
            .then_some(())
    });
    // The relays have answered (one turn may carry several announces);
    // still two and one.
    eventually(WAIT, || {
        let outbox = sb.run(&["outbox", "list", "--json"]).ok().json();
        outbox.to_string().contains("ANSWER-").then_some(())
    });
    assert_eq!(told_in(&sb, "agent:main:main", "Status: ok"), 2);
    assert_eq!(told_in(&sb, "agent:main:main", "Status: cancelled"), 1);

    // A finished run cannot be killed or steered again; nothing changes.
    let again = sb.run(&["subagents", "kill", sleeper["runId"].as_str().unwrap()]);
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("already ended (cancelled)"),
        "{}",
        again.stderr
    );
    let steer = sb.run(&["subagents", "steer", "no-such-run", "hello"]);
    assert_eq!(steer.code, 1);
    assert!(
        steer.stderr.contains("no subagent run matches"),
        "{}",
        steer.stderr
    );
}

#[test]
fn stop_on_the_parent_stops_its_children_and_grandchildren() {
    let sb = Sandbox::new();
    config(&sb, 1, json!({"maxSpawnDepth": 2}));
    let mut replies = vec![
        tool_call(
            "p1",
            "sessions_spawn",
            json!({"task": "orchestrate", "label": "boss"}),
        ),
        text("An orchestrator is on it."),
        // The child spawns a grandchild, then waits on the model.
        tool_call(
            "k1",
            "sessions_spawn",
            json!({"task": "dig", "label": "digger"}),
        ),
        Reply::Hang,
    ];
    replies.extend((1..=6).map(|n| text(&format!("AFTER-{n}"))));
    let server = ScriptedServer::start(replies);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Plan it"})));
    assert_eq!(code, 200, "{answer}");
    eventually(WAIT, || {
        let tasks = subagent_tasks(&gw);
        (tasks.len() == 2 && server.requests().len() >= 4).then_some(())
    });

    // `/stop` typed in the parent's session: no model call, both stopped.
    let before = server.requests().len();
    let stop = sb
        .run(&["agent", "--message", "/stop", "--json"])
        .ok()
        .json();
    assert_eq!(stop["command"], true, "{stop}");
    assert!(
        stop["reply"]
            .as_str()
            .unwrap()
            .contains("2 subagent run(s)"),
        "{stop}"
    );
    eventually(WAIT, || {
        let tasks = subagent_tasks(&gw);
        tasks
            .iter()
            .all(|t| t["status"] == "cancelled")
            .then_some(())
    });
    assert!(
        server.requests().len() <= before + 2,
        "the stop itself asked no model"
    );
    let list = sb.run(&["agent", "--message", "/subagents list"]).ok();
    assert!(list.stdout.contains("[cancelled]"), "{}", list.stdout);
}

#[test]
fn a_steered_child_reads_the_message_before_its_next_model_request() {
    let sb = Sandbox::new();
    config(&sb, 1, json!({}));
    let server = ScriptedServer::start(vec![
        tool_call(
            "p1",
            "sessions_spawn",
            json!({"task": "Copy the photos", "label": "photos"}),
        ),
        text("Copying."),
        tool_call(
            "t1",
            "exec",
            json!({"command": "while [ ! -f go ]; do sleep 0.05; done; echo copied"}),
        ),
        text("Used the backup drive."),
        text("Done with the photos."),
        text("VIDEOS-TOO"),
        text("The videos are copied as well."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Photos"})));
    assert_eq!(code, 200, "{answer}");
    eventually(WAIT, || (server.requests().len() >= 3).then_some(()));
    let steered = sb
        .run(&[
            "subagents",
            "steer",
            "photos",
            "Use",
            "the",
            "backup",
            "drive",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(steered["status"], "steered", "{steered}");
    sb.write(".almanac/workspace/go", "");
    eventually(WAIT, || (server.requests().len() >= 4).then_some(()));
    let next = server.requests()[3].json().to_string();
    assert!(next.contains("[Steering from the user]"), "{next}");
    assert!(next.contains("Use the backup drive"), "{next}");
    // The first request of the child did not have it: it came mid-turn.
    assert!(
        !server.requests()[2]
            .json()
            .to_string()
            .contains("backup drive")
    );
    let task = eventually(WAIT, || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "succeeded")
    });
    // Ended: steering it now is an error, and nothing is queued.
    let late = sb.run(&[
        "subagents",
        "steer",
        task["runId"].as_str().unwrap(),
        "more",
    ]);
    assert_eq!(late.code, 1, "{}", late.stderr);
    assert!(late.stderr.contains("already ended"), "{}", late.stderr);
    let log = sb.run(&["subagents", "log", "photos", "--tools"]).ok();
    assert!(log.stdout.contains("[call exec"), "{}", log.stdout);
    assert!(
        log.stdout.contains("Used the backup drive."),
        "{}",
        log.stdout
    );

    // `send`: a new message to the ended child, as its next turn in the
    // same session, announced like the first (once the first announce is
    // relayed, so the scripted answers go in order).
    eventually(WAIT, || {
        (told_in(&sb, "agent:main:main", "Used the backup drive.") == 1).then_some(())
    });
    let sent = sb
        .run(&[
            "agent",
            "--message",
            "/subagents send photos And the videos?",
        ])
        .ok();
    assert!(sent.stdout.contains("Sent as run"), "{}", sent.stdout);
    eventually(WAIT, || (server.requests().len() >= 6).then_some(()));
    let follow_up = server.requests()[5].json().to_string();
    assert!(
        follow_up.contains("[Message from agent:main:main]"),
        "{follow_up}"
    );
    assert!(follow_up.contains("And the videos?"), "{follow_up}");
    assert!(
        follow_up.contains("Copy the photos"),
        "the same session: {follow_up}"
    );
    eventually(WAIT, || {
        (told_in(&sb, "agent:main:main", "VIDEOS-TOO") == 1).then_some(())
    });
}

#[test]
fn the_subagents_tool_lists_and_kills_the_callers_children() {
    let sb = Sandbox::new();
    config(&sb, 2, json!({}));
    let server = ScriptedServer::start(vec![
        // The parent spawns, then waits until the child has started.
        tool_calls(&[
            (
                "p1",
                "sessions_spawn",
                json!({"task": "Watch the logs", "label": "watcher"}),
            ),
            (
                "p2",
                "exec",
                json!({"command": "while [ ! -f started ]; do sleep 0.05; done"}),
            ),
        ]),
        tool_call(
            "w1",
            "exec",
            json!({"command": "touch started; while [ ! -f go ]; do sleep 0.05; done"}),
        ),
        tool_call("p3", "subagents", json!({"action": "list"})),
        tool_call(
            "p4",
            "subagents",
            json!({"action": "kill", "target": "watcher"}),
        ),
        text("Stopped the watcher."),
        text("The watcher was stopped."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Watch"})));
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["reply"], "Stopped the watcher.");
    let listed = server.requests()[3].json().to_string();
    assert!(
        listed.contains("watcher") && listed.contains("running"),
        "{listed}"
    );
    let killed = server.requests()[4].json().to_string();
    assert!(killed.contains("killed"), "{killed}");
    let task = eventually(WAIT, || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "cancelled" && t["deliveryStatus"] == "session_queued")
    });
    assert_eq!(task["label"], "watcher");
}

#[test]
fn a_child_past_its_run_timeout_announces_timeout() {
    let sb = Sandbox::new();
    config(&sb, 2, json!({}));
    let server = ScriptedServer::start(vec![
        tool_call(
            "p1",
            "sessions_spawn",
            json!({"task": "Wait forever", "runTimeoutSeconds": 1}),
        ),
        text("Started."),
        Reply::Hang,
        text("It took too long."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Go"})));
    assert_eq!(code, 200, "{answer}");
    let task = eventually(WAIT, || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "timed_out" && t["deliveryStatus"] == "session_queued")
    });
    assert_eq!(task["runtime"], "subagent");
    eventually(WAIT, || {
        (told_in(&sb, "agent:main:main", "Status: timeout") == 1).then_some(())
    });
}

#[test]
fn a_child_ending_during_the_parents_long_turn_is_announced_after_it() {
    let sb = Sandbox::new();
    config(&sb, 4, json!({}));
    let server = ScriptedServer::start(vec![
        tool_calls(&[
            ("p1", "sessions_spawn", json!({"task": "Count the files"})),
            (
                "p2",
                "exec",
                json!({"command": "while [ ! -f go ]; do sleep 0.05; done; echo released"}),
            ),
        ]),
        // The child answers while the parent's tool still runs.
        text("CHILD-DONE: 42 files"),
        text("PARENT-DONE"),
        text("Relayed: 42 files."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    std::thread::scope(|scope| {
        let parent =
            scope.spawn(|| gw.request("POST", "/v1/agent", Some(&json!({"message": "Count"}))));
        eventually(WAIT, || {
            subagent_tasks(&gw)
                .into_iter()
                .find(|t| t["status"] == "succeeded" && t["deliveryStatus"] == "session_queued")
        });
        // The announce waits: no turn of the parent's session runs in the
        // middle of its turn.
        assert_eq!(server.requests().len(), 2);
        sb.write(".almanac/workspace/go", "");
        let (code, answer) = parent.join().unwrap();
        assert_eq!(code, 200, "{answer}");
        assert_eq!(answer["reply"], "PARENT-DONE");
    });
    let during = server.requests()[2].json().to_string();
    assert!(!during.contains("CHILD-DONE"), "not interleaved: {during}");
    eventually(WAIT, || (server.requests().len() >= 4).then_some(()));
    let relay = server.requests()[3].json().to_string();
    assert!(
        relay.contains("Status: ok") && relay.contains("CHILD-DONE"),
        "{relay}"
    );
    assert_eq!(told_in(&sb, "agent:main:main", "CHILD-DONE"), 1);
}

#[test]
fn cleanup_delete_archives_at_once_and_every_child_after_archive_after_minutes() {
    let sb = Sandbox::new();
    config(&sb, 1, json!({}));
    let mut replies = vec![
        tool_calls(&[
            (
                "p1",
                "sessions_spawn",
                json!({"task": "Tidy up", "label": "tidy", "cleanup": "delete"}),
            ),
            (
                "p2",
                "sessions_spawn",
                json!({"task": "Keep notes", "label": "notes"}),
            ),
        ]),
        text("Two helpers started."),
    ];
    replies.extend((1..=6).map(|n| text(&format!("DONE-{n}"))));
    let server = ScriptedServer::start(replies);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Go"})));
    assert_eq!(code, 200, "{answer}");
    let ended = eventually(WAIT, || {
        let tasks = subagent_tasks(&gw);
        (tasks.len() == 2
            && tasks
                .iter()
                .all(|t| t["deliveryStatus"] == "session_queued"))
        .then_some(tasks)
    });
    let key_of = |label: &str| {
        ended.iter().find(|t| t["label"] == label).unwrap()["childSessionKey"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (tidy, notes) = (key_of("tidy"), key_of("notes"));
    let archive = sb.path(".almanac/agents/main/sessions/archive");
    let archived = || std::fs::read_dir(&archive).map_or(0, |d| d.count());
    let sessions = || sb.run(&["sessions", "--json"]).ok().json().to_string();
    // `delete`: gone from the store, its transcript in the archive.
    eventually(WAIT, || {
        (!sessions().contains(&tidy) && archived() == 1).then_some(())
    });
    assert!(
        sessions().contains(&notes),
        "`keep` stays until archiveAfterMinutes"
    );
    let file = std::fs::read_dir(&archive)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(std::fs::read_to_string(&file).unwrap().contains("Tidy up"));
    // The announce named where the transcript went.
    eventually(WAIT, || {
        (told_in(&sb, "agent:main:main", "/archive/") == 1).then_some(())
    });

    // Two hours later (archiveAfterMinutes: 60) the gateway's sweep
    // archives the `keep` child too.
    drop(gw);
    let later = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2)).to_string();
    let server = ScriptedServer::start(vec![]);
    let _gw = Gateway::start(
        &sb,
        &[
            ("OPENAI_BASE_URL", server.url.as_str()),
            ("ALMANAC_NOW", later.as_str()),
        ],
    );
    eventually(WAIT, || {
        (!sessions().contains(&notes) && archived() == 2).then_some(())
    });
}

#[test]
fn more_announces_than_the_event_queue_holds_all_reach_the_parent() {
    let sb = Sandbox::new();
    config(&sb, 4, json!({"maxChildrenPerAgent": 30}));
    // The parent's turn spawns more children than a session's event queue
    // holds (20) and stays busy until all have ended: none of their
    // announces may be dropped to make room.
    let mut calls: Vec<(String, &str, Value)> = (0..30)
        .map(|i| {
            (
                format!("c{i}"),
                "sessions_spawn",
                json!({"task": format!("part {i}")}),
            )
        })
        .collect();
    calls.push((
        "wait".into(),
        "exec",
        json!({"command": "while [ ! -f go ]; do sleep 0.05; done"}),
    ));
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
        .collect();
    let mut replies = vec![tool_calls(&calls)];
    replies.extend((0..40).map(|n| text(&format!("PART-DONE-{n}"))));
    let server = ScriptedServer::start(replies);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    std::thread::scope(|scope| {
        let parent =
            scope.spawn(|| gw.request("POST", "/v1/agent", Some(&json!({"message": "Split it"}))));
        eventually(Duration::from_secs(60), || {
            let tasks = subagent_tasks(&gw);
            (tasks.len() == 30
                && tasks
                    .iter()
                    .all(|t| t["deliveryStatus"] == "session_queued"))
            .then_some(())
        });
        sb.write(".almanac/workspace/go", "");
        let (code, answer) = parent.join().unwrap();
        assert_eq!(code, 200, "{answer}");
    });
    eventually(Duration::from_secs(60), || {
        (told_in(&sb, "agent:main:main", "Status: ok") == 30).then_some(())
    });
}

#[test]
fn a_user_spawns_a_child_with_a_command_and_reads_its_info_and_log() {
    let sb = Sandbox::new();
    config(&sb, 1, json!({}));
    let server = ScriptedServer::start(vec![
        text("WEEK-SUMMARY: three meetings"),
        text("Your summary is ready."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    // Typed as a message: no model call for the command itself.
    let spawned = sb
        .run(&[
            "agent",
            "--message",
            "/subagents spawn main Summarise the week --thinking low",
        ])
        .ok();
    assert!(spawned.stdout.contains("Spawned run"), "{}", spawned.stdout);
    // Listed at once: the gateway's ledger records a spawn's run a batch
    // after acknowledging it, and the list waits for that.
    let listed = sb.run(&["subagents", "list", "--json"]).ok().json();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1, "{listed}");
    let task = eventually(WAIT, || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "succeeded" && t["deliveryStatus"] == "session_queued")
    });
    assert_eq!(task["requesterSessionKey"], "agent:main:main");
    let first = server.requests()[0].json().to_string();
    assert!(first.contains("Summarise the week"), "{first}");
    assert!(!first.contains("--thinking"), "{first}");
    let run = task["runId"].as_str().unwrap();
    let info = sb
        .run(&["subagents", "info", &run[..8], "--json"])
        .ok()
        .json();
    assert_eq!(info["run"]["status"], "succeeded", "{info}");
    assert!(
        info["transcript"].as_str().unwrap().ends_with(".jsonl"),
        "{info}"
    );
    let log = sb.run(&["subagents", "log", "#1", "--json"]).ok().json();
    assert!(log.to_string().contains("WEEK-SUMMARY"), "{log}");
    let bad = sb.run(&["agent", "--message", "/subagents dance"]).ok();
    assert!(bad.stdout.contains("usage: /subagents"), "{}", bad.stdout);
}
