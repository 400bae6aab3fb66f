//! Internal hooks: a workspace hook's handler runs on `/new` with the
//! event on stdin; a handler that hangs is killed at its timeout without
//! holding up the turn.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::agent::text;
use crate::common::Sandbox;
use crate::scripted::ScriptedServer;

const NOW: &str = "2026-11-29T09:00:00+00:00";

fn hook(sb: &Sandbox, name: &str, events: &str, handler: &str) {
    sb.write(
        &format!(".almanac/workspace/hooks/{name}/HOOK.md"),
        &format!(
            "---\nname: {name}\ndescription: test hook\nmetadata: {{\"openclaw\": {{\"events\": [{events}]}}}}\n---\n# {name}\n"
        ),
    );
    let path = sb.write(&format!(".almanac/workspace/hooks/{name}/handler"), handler);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn turn(sb: &Sandbox, server: &ScriptedServer, message: &str) -> Value {
    sb.run_env(
        &[
            "--now",
            NOW,
            "agent",
            "--model",
            "openai/test-model",
            "--message",
            message,
            "--json",
        ],
        &[("OPENAI_BASE_URL", &server.url)],
    )
    .ok()
    .json()
}

#[test]
fn a_workspace_hook_on_command_new_receives_the_event_when_new_is_sent() {
    let sb = Sandbox::new();
    let got = sb.path("got");
    hook(
        &sb,
        "on-new",
        "\"command:new\"",
        &format!(
            "#!/bin/sh\ncat >> {0}/events.jsonl\necho >> {0}/events.jsonl\n",
            got.display()
        ),
    );
    std::fs::create_dir_all(&got).unwrap();
    // Workspace hooks are off until their entry turns them on.
    sb.write(
        ".almanac/config.json5",
        "{\n  // hooks\n  hooks: {internal: {enabled: true}},\n}\n",
    );
    let listed = sb.run(&["hooks", "list", "--json"]).ok().json();
    let on_new = listed["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "on-new")
        .unwrap();
    assert_eq!(on_new["source"], "openclaw-workspace");
    assert_eq!(on_new["runnable"], false);
    sb.run(&["hooks", "enable", "on-new"]).ok();
    let config = sb.read(".almanac/config.json5");
    assert!(config.contains("// hooks"), "comments kept: {config}");
    let info = sb.run(&["hooks", "info", "on-new", "--json"]).ok().json();
    assert_eq!(info["runnable"], true, "{info}");
    let listed = sb.run(&["hooks", "list"]).ok().stdout;
    assert!(listed.contains("Hooks (4/4 ready)"), "{listed}");
    assert!(listed.contains("on-new"), "{listed}");
    let check = sb.run(&["hooks", "check", "--json"]).ok().json();
    assert_eq!(check["summary"]["ready"], 4, "{check}");
    assert!(
        check["ready"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "on-new")
    );

    let server = ScriptedServer::start(vec![text("Hi."), text("Fresh start.")]);
    let first = turn(&sb, &server, "hello");
    // An ordinary message is no command.
    assert!(!got.join("events.jsonl").exists());
    let second = turn(&sb, &server, "/new");
    assert_eq!(second["started"], "new");
    let events = std::fs::read_to_string(got.join("events.jsonl")).unwrap();
    let events: Vec<Value> = events
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["type"], "command");
    assert_eq!(event["action"], "new");
    assert_eq!(event["sessionKey"], second["sessionKey"]);
    assert_eq!(event["timestamp"], "2026-11-29T09:00:00.000Z");
    assert_eq!(event["messages"], serde_json::json!([]));
    assert_eq!(event["context"]["commandSource"], "cli");
    assert_eq!(
        event["context"]["previousSessionEntry"]["sessionId"],
        first["sessionId"]
    );
    assert_eq!(
        event["context"]["sessionEntry"]["sessionId"],
        second["sessionId"]
    );

    // The bundled command logger is on with internal hooks.
    let log = sb.read(".almanac/logs/commands.log");
    let logged: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(logged["action"], "new");
    assert_eq!(logged["source"], "cli");

    // So is the bundled session memory: the previous session's
    // conversation, saved when `/new` started the next one.
    let saved = sb.read(".almanac/workspace/memory/2026-11-29-0900.md");
    assert!(
        saved.starts_with("# Session: 2026-11-29 09:00:00 UTC"),
        "{saved}"
    );
    assert!(saved.contains(&format!(
        "- **Session ID**: {}",
        first["sessionId"].as_str().unwrap()
    )));
    assert!(saved.contains("user: hello"), "{saved}");
    assert!(saved.contains("assistant: Hi."), "{saved}");

    sb.run(&["hooks", "disable", "on-new"]).ok();
    turn_after_disable(&sb, &got);
}

fn turn_after_disable(sb: &Sandbox, got: &std::path::Path) {
    let server = ScriptedServer::start(vec![text("Again.")]);
    turn(sb, &server, "/reset");
    let lines = std::fs::read_to_string(got.join("events.jsonl")).unwrap();
    assert_eq!(lines.lines().filter(|l| !l.trim().is_empty()).count(), 1);
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_the_turn_does_not_wait_for_it() {
    let sb = Sandbox::new();
    let got = sb.path("got");
    std::fs::create_dir_all(&got).unwrap();
    hook(
        &sb,
        "hangs",
        "\"command:new\"",
        &format!(
            "#!/bin/sh\nsleep 60 &\necho $! > {0}/sleep.pid\nwait\necho done > {0}/finished\n",
            got.display()
        ),
    );
    sb.write(
        ".almanac/config.json5",
        r#"{hooks: {internal: {enabled: true, timeoutSeconds: 2, entries: {hangs: {enabled: true}}}}}"#,
    );
    let server = ScriptedServer::start(vec![text("Hi."), text("Fresh start.")]);
    turn(&sb, &server, "hello");
    let started = std::time::Instant::now();
    let report = turn(&sb, &server, "/new");
    let elapsed = started.elapsed();
    assert_eq!(report["reply"], "Fresh start.");
    // The turn itself never waited for the handler.
    let total_ms = report["timings"]["totalMs"].as_f64().unwrap();
    assert!(total_ms < 2000.0, "the turn took {total_ms} ms");
    // The command ended at the handler's timeout, far before its sleep.
    assert!(elapsed.as_secs() < 20, "took {elapsed:?}");
    // The handler's whole process group was killed: its `sleep` is gone
    // (or a zombie waiting for init to reap it).
    let pid = std::fs::read_to_string(got.join("sleep.pid")).unwrap();
    let state = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .ok()
        .and_then(|stat| {
            let after_name = stat.rsplit_once(')')?.1.trim_start().to_string();
            after_name.chars().next()
        });
    assert!(
        matches!(state, None | Some('Z') | Some('X')),
        "the handler's sleep still runs (state {state:?})"
    );
    assert!(!got.join("finished").exists());
}

#[test]
fn a_managed_hook_on_gateway_startup_runs_when_the_gateway_starts() {
    let sb = Sandbox::new();
    let got = sb.path("got");
    std::fs::create_dir_all(&got).unwrap();
    sb.write(
        ".almanac/hooks/on-start/HOOK.md",
        "---\nname: on-start\ndescription: d\nmetadata: {\"openclaw\": {\"events\": [\"gateway\"]}}\n---\n",
    );
    let handler = sb.write(
        ".almanac/hooks/on-start/handler",
        &format!("#!/bin/sh\ncat > {}/startup.json\n", got.display()),
    );
    std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb.write(
        ".almanac/config.json5",
        "{hooks: {internal: {enabled: true}}}",
    );
    let _gateway = crate::gateway::Gateway::start(&sb, &[]);
    let event: Value = crate::gateway::eventually(std::time::Duration::from_secs(20), || {
        let text = std::fs::read_to_string(got.join("startup.json")).ok()?;
        serde_json::from_str(&text).ok()
    });
    assert_eq!(event["type"], "gateway");
    assert_eq!(event["action"], "startup");
    assert_eq!(event["sessionKey"], "gateway:startup");
}

fn event_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn compaction_and_each_turns_messages_fire_their_events() {
    let sb = Sandbox::new();
    let got = sb.path("got");
    std::fs::create_dir_all(&got).unwrap();
    for (name, events) in [("sessions", "\"session\""), ("messages", "\"message\"")] {
        hook(
            &sb,
            name,
            events,
            &format!(
                "#!/bin/sh\ncat >> {0}/{name}.jsonl\necho >> {0}/{name}.jsonl\n",
                got.display()
            ),
        );
    }
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {contextTokens: 9000}}, hooks: {internal: {enabled: true, entries: {sessions: {enabled: true}, messages: {enabled: true}}}}}",
    );
    // Long answers fill the window; the fifth turn is over the threshold.
    let long = "We talked about the Lisbon trip at length. ".repeat(140);
    for i in 0..4 {
        let server = ScriptedServer::start(vec![text(&format!("{long} ({i})"))]);
        turn(&sb, &server, &format!("Tell me more, part {i}"));
    }
    assert!(event_lines(&got.join("sessions.jsonl")).is_empty());
    let server = ScriptedServer::start(vec![
        crate::agent::tool_call(
            "call_flush",
            "memory_append",
            serde_json::json!({"text": "User plans a trip to Lisbon in May"}),
        ),
        text("NO_REPLY"),
        text("The user is planning a Lisbon trip."),
        text("You are going to Lisbon."),
    ]);
    let v = turn(&sb, &server, "Where am I going?");
    assert_eq!(v["reply"], "You are going to Lisbon.");
    let session = event_lines(&got.join("sessions.jsonl"));
    let names: Vec<String> = session
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["type"].as_str().unwrap(),
                e["action"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        vec!["session:compact:before", "session:compact:after"]
    );
    assert_eq!(session[0]["context"]["messageCount"], 8);
    let before = session[0]["context"]["tokenCount"].as_u64().unwrap();
    assert!(before > 5850, "{before}");
    let after = &session[1]["context"];
    assert_eq!(after["tokensBefore"], v["compaction"]["tokensBefore"]);
    assert!(after["tokensAfter"].as_u64().unwrap() < before);
    assert!(after["compactedCount"].as_u64().unwrap() > 0);
    // Every turn: the message received, then the reply sent.
    let messages = event_lines(&got.join("messages.jsonl"));
    assert_eq!(messages.len(), 10);
    assert_eq!(messages[8]["action"], "received");
    assert_eq!(messages[8]["context"]["content"], "Where am I going?");
    assert_eq!(messages[9]["action"], "sent");
    assert_eq!(
        messages[9]["context"]["content"],
        "You are going to Lisbon."
    );
    assert_eq!(messages[9]["context"]["success"], true);
}

#[test]
fn boot_md_runs_as_a_turn_when_the_gateway_starts() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/BOOT.md",
        "Check the weather note and say good morning.\n",
    );
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model"}}, hooks: {internal: {enabled: true}}}"#,
    );
    let server = ScriptedServer::start(vec![text("NO_REPLY")]);
    let _gateway = crate::gateway::Gateway::start(&sb, &[("OPENAI_BASE_URL", &server.url)]);
    let request = crate::gateway::eventually(std::time::Duration::from_secs(20), || {
        server.requests().into_iter().next()
    });
    let body = request.json();
    let user = body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.contains("Check the weather note and say good morning."),
        "{user}"
    );
    assert!(user.contains("NO_REPLY"), "{user}");
    // Its own session, recorded once the turn ends.
    let sessions: Value = crate::gateway::eventually(std::time::Duration::from_secs(20), || {
        let v = sb.run(&["sessions", "--json"]).json();
        let found = v["sessions"]
            .as_array()?
            .iter()
            .any(|s| s["key"].as_str().is_some_and(|k| k.ends_with(":boot")));
        found.then_some(v)
    });
    assert!(
        sessions["sessions"].as_array().unwrap().len() == 1,
        "{sessions}"
    );
}

/// On `/new` the bundled `session-memory` hook writes, into the memory
/// root `SESSION_MEMORY_DIR` names, only what the user and the assistant
/// said: not the 200 KB event queued before a message, and not a note
/// that reads as an injection. A memory folder that is a link out of the
/// root is refused as every memory writer refuses it.
#[test]
fn session_memory_keeps_only_the_conversation_in_the_memory_root() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "{hooks: {internal: {enabled: true}}}",
    );
    let notes = sb.path("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let env = |server: &ScriptedServer| {
        vec![
            ("OPENAI_BASE_URL", server.url.clone()),
            ("SESSION_MEMORY_DIR", notes.display().to_string()),
        ]
    };
    let say = |message: &str, answer: &str| {
        let server = ScriptedServer::start(vec![text(answer)]);
        let env = env(&server);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        sb.run_env(
            &[
                "--now",
                NOW,
                "agent",
                "--model",
                "openai/test-model",
                "--message",
                message,
                "--json",
            ],
            &env,
        )
        .ok();
    };
    say("Book the dentist for Friday", "Booked for Friday 10:00.");
    let payload = format!("Build 77 failed {}", "x".repeat(100_000));
    sb.run(&["system", "event", "--text", &payload]).ok();
    say("What is next?", "The dentist on Friday.");
    say("/new", "Hello again.");
    let written: Vec<std::path::PathBuf> = std::fs::read_dir(notes.join("memory"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let note = std::fs::read_to_string(&written[0]).unwrap();
    assert!(note.contains("user: Book the dentist for Friday"), "{note}");
    assert!(note.contains("assistant: The dentist on Friday."), "{note}");
    assert!(!note.contains("System"), "{note}");
    assert!(!note.contains("Build 77"), "{note}");
    assert!(note.len() < 2_000, "{} bytes", note.len());
    assert!(!sb.path(".almanac/workspace/memory").exists());

    // A memory folder that leads out of the root: nothing is written.
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::remove_dir_all(notes.join("memory")).unwrap();
    std::os::unix::fs::symlink(&outside, notes.join("memory")).unwrap();
    say("One more thing", "Sure.");
    say("/new", "Hi.");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
