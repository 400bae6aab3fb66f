//! Heartbeat turns through a running gateway, against the local scripted
//! model server: the gates, the reply protocol and the outbox.

use serde_json::Value;

use crate::agent::text;
use crate::common::Sandbox;
use crate::gateway::Gateway;
use crate::scripted::ScriptedServer;

fn run_now(sb: &Sandbox) -> Value {
    sb.run(&["system", "heartbeat", "run-now", "--json"])
        .ok()
        .json()
}

fn outbox(sb: &Sandbox) -> Vec<Value> {
    sb.run(&["outbox", "list", "--json"]).ok().json()["entries"]
        .as_array()
        .unwrap()
        .clone()
}

fn start(sb: &Sandbox, server: &ScriptedServer) -> Gateway {
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model", heartbeat: {target: "outbox"}}}}"#,
    );
    // A long interval: no interval run comes during the test, run-now runs.
    Gateway::start(
        sb,
        &[
            ("OPENAI_BASE_URL", server.url.as_str()),
            ("ALMANAC_HEARTBEAT_EVERY", "1000d"),
        ],
    )
}

#[test]
fn run_now_skips_an_empty_file_without_asking_the_model() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/HEARTBEAT.md",
        "# Heartbeat\n\n- [ ]\n\n```md\n```\n",
    );
    let server = ScriptedServer::start(vec![text("should not be asked")]);
    let _gw = start(&sb, &server);
    let event = run_now(&sb);
    assert_eq!(event["status"], "skipped");
    assert_eq!(event["reason"], "empty-heartbeat-file");
    assert!(server.requests().is_empty());
    // The event is kept: `last` reads it, with or without a gateway.
    let last = sb
        .run(&["system", "heartbeat", "last", "--json"])
        .ok()
        .json();
    assert_eq!(last, event);
}

#[test]
fn acknowledgements_stay_quiet_an_alert_reaches_the_outbox_once() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/HEARTBEAT.md",
        "Check the disks and tell me if one is nearly full.\n",
    );
    let acks = [
        "HEARTBEAT_OK",
        "**HEARTBEAT_OK**",
        "HEARTBEAT_OK.",
        "Nothing needs attention. HEARTBEAT_OK",
    ];
    let mut replies: Vec<_> = acks.iter().map(|a| text(a)).collect();
    // An alert long enough not to count as an acknowledgement, with the
    // token after it.
    let alert = format!(
        "Disk 2 is 97% full; the nightly backup will fail. {}",
        "The largest folders are the photo library and two old virtual machine images. ".repeat(4)
    );
    replies.push(text(&format!("{alert} HEARTBEAT_OK")));
    replies.push(text(&alert));
    let server = ScriptedServer::start(replies);
    let gw = start(&sb, &server);
    for ack in acks {
        let event = run_now(&sb);
        assert_eq!(event["status"], "ok-token", "{ack}: {event}");
        assert_eq!(event["silent"], true);
    }
    assert!(outbox(&sb).is_empty());
    let sent = run_now(&sb);
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(sent["channel"], "outbox");
    let entries = outbox(&sb);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["source"], "heartbeat");
    assert_eq!(entries[0]["sessionKey"], "agent:main:main");
    assert_eq!(entries[0]["text"], alert.trim());
    assert!(
        !entries[0]["text"]
            .as_str()
            .unwrap()
            .contains("HEARTBEAT_OK")
    );
    // The same alert again within a day is not sent twice.
    let again = run_now(&sb);
    assert_eq!(again["status"], "skipped");
    assert_eq!(again["reason"], "duplicate");
    assert_eq!(outbox(&sb).len(), 1);
    // Every run asked the model once, with the file's path named.
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let body = requests[0].json().to_string();
    assert!(body.contains("HEARTBEAT.md"), "{body}");
    // `gateway status` names the next interval run.
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert!(
        status["nextHeartbeatAtMs"].as_i64().unwrap() > 0,
        "{status}"
    );
    let heartbeat = status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "heartbeat")
        .unwrap()
        .clone();
    assert_eq!(heartbeat["state"], "running");
    drop(gw);
}

#[test]
fn the_switch_is_persisted_and_run_now_needs_a_gateway() {
    let sb = Sandbox::new();
    let none = sb
        .run(&["system", "heartbeat", "run-now", "--json"])
        .code(1);
    assert!(
        none.stderr.contains("gateway not running"),
        "{}",
        none.stderr
    );
    assert_eq!(
        sb.run(&["system", "heartbeat", "last", "--json"])
            .ok()
            .stdout
            .trim(),
        "null"
    );
    let off = sb
        .run(&["system", "heartbeat", "disable", "--json"])
        .ok()
        .json();
    assert_eq!(off["enabled"], false);
    let server = ScriptedServer::start(vec![text("should not be asked")]);
    let _gw = start(&sb, &server);
    let event = run_now(&sb);
    assert_eq!(event["reason"], "disabled");
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert!(status["nextHeartbeatAtMs"].is_null(), "{status}");
    sb.run(&["system", "heartbeat", "enable"]).ok();
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert!(status["nextHeartbeatAtMs"].is_i64(), "{status}");
    assert!(server.requests().is_empty());
}

#[test]
fn an_ordinary_reply_never_shows_the_token_unless_the_channel_shows_acknowledgements() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        text("All set for tomorrow. HEARTBEAT_OK"),
        text("**HEARTBEAT_OK** nothing else"),
    ]);
    let env = [("OPENAI_BASE_URL", server.url.as_str())];
    let run = sb
        .run_env(
            &[
                "agent",
                "--model",
                "openai/test-model",
                "--message",
                "Plan tomorrow",
            ],
            &env,
        )
        .ok();
    assert_eq!(run.stdout.trim(), "All set for tomorrow.");
    // The transcript keeps what the model said.
    let sessions = std::fs::read_dir(sb.path(".almanac/agents/main/sessions")).unwrap();
    let transcript: String = sessions
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(transcript.contains("HEARTBEAT_OK"));
    sb.write(
        ".almanac/config.json5",
        r#"{channels: {cli: {heartbeat: {showOk: true}}}}"#,
    );
    let shown = sb
        .run_env(
            &[
                "agent",
                "--model",
                "openai/test-model",
                "--message",
                "And now?",
            ],
            &env,
        )
        .ok();
    assert_eq!(shown.stdout.trim(), "**HEARTBEAT_OK** nothing else");
}
