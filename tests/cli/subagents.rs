//! Subagents through a running gateway: `sessions_spawn` from a turn,
//! the child's own session and ledger task, and its announce in the
//! parent's session.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{text, tool_call};
use crate::common::Sandbox;
use crate::cron_turns::offered_tools;
use crate::gateway::{Gateway, eventually};
use crate::gateway_hooks::tasks_of_kind;
use crate::scripted::ScriptedServer;

/// One turn at a time, so the scripted answers go in a known order: the
/// parent's turn ends before its child starts.
fn one_at_a_time(sb: &Sandbox) {
    sb.write(
        ".almanac/config.json5",
        r#"{"agents": {"defaults": {"model": "openai/test-model", "maxConcurrent": 1}}}"#,
    );
}

fn subagent_tasks(gw: &Gateway) -> Vec<Value> {
    tasks_of_kind(gw, "subagent")
}

/// The text of the last user message a model request holds.
fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .to_string()
}

#[test]
fn a_spawned_child_runs_in_its_own_session_and_announces_its_result_to_the_parent() {
    let sb = Sandbox::new();
    one_at_a_time(&sb);
    sb.write(".almanac/workspace/AGENTS.md", "AGENT-RULES: be brief.\n");
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "MEMORY-PRIVATE: the safe code.\n",
    );
    let server = ScriptedServer::start(vec![
        tool_call(
            "call_1",
            "sessions_spawn",
            json!({"task": "Find the March receipts", "label": "receipts"}),
        ),
        text("A helper is on it."),
        text("RECEIPTS-IN-MARCH.md"),
        text("The helper found them in the March notes."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request(
        "POST",
        "/v1/agent",
        Some(&json!({"message": "Where are my receipts?"})),
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["reply"], "A helper is on it.", "{answer}");

    // The tool answered at once with the child's run and session.
    let spawned = server.requests()[1].json().to_string();
    assert!(spawned.contains(r#"\"status\": \"accepted\""#), "{spawned}");
    assert!(spawned.contains("agent:main:subagent:"), "{spawned}");

    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "succeeded" && t["deliveryStatus"] == "session_queued")
    });
    let child_key = task["childSessionKey"].as_str().unwrap().to_string();
    assert!(child_key.starts_with("agent:main:subagent:"), "{task}");
    assert_eq!(task["requesterSessionKey"], "agent:main:main", "{task}");

    // The child's turn: its task as its message, in its own session, with
    // the agent's rules but not its memory, and no session tools (the
    // default depth lets a child spawn nothing).
    let parent_tools = offered_tools(&server.requests()[0].json());
    assert!(
        parent_tools.contains(&"sessions_spawn".to_string()),
        "{parent_tools:?}"
    );
    let child_request = server.requests()[2].json();
    let child_tools = offered_tools(&child_request);
    assert!(
        !child_tools.iter().any(|t| t.starts_with("sessions_")),
        "{child_tools:?}"
    );
    assert!(child_tools.contains(&"read".to_string()), "{child_tools:?}");
    let child = child_request.to_string();
    assert!(child.contains("Find the March receipts"), "{child}");
    assert!(child.contains("AGENT-RULES"), "{child}");
    assert!(!child.contains("MEMORY-PRIVATE"), "{child}");
    assert!(
        server.requests()[0]
            .json()
            .to_string()
            .contains("MEMORY-PRIVATE")
    );
    assert!(
        !child.contains("Where are my receipts?"),
        "the child does not see the parent's chat: {child}"
    );

    // The parent is woken with the announce: the status from how the run
    // ended, the child's words inside the untrusted markers.
    eventually(Duration::from_secs(20), || {
        (server.requests().len() >= 4).then_some(())
    });
    let told = last_user_text(&server.requests()[3].json());
    assert!(told.contains("Status: ok"), "{told}");
    assert!(told.contains("RECEIPTS-IN-MARCH.md"), "{told}");
    assert!(told.contains("EXTERNAL_UNTRUSTED_CONTENT"), "{told}");
    assert!(told.contains(&child_key), "{told}");
}

#[test]
fn without_a_gateway_a_spawn_is_refused_in_words_the_model_can_relay() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "call_1",
            "sessions_spawn",
            json!({"task": "Research prices"}),
        ),
        text("I will do it myself."),
    ]);
    sb.run_env(
        &[
            "agent",
            "--model",
            "openai/test-model",
            "--message",
            "Research prices in the background",
        ],
        &[("OPENAI_BASE_URL", server.url.as_str())],
    )
    .ok();
    let refused = server.requests()[1].json().to_string();
    assert!(refused.contains("needs the running gateway"), "{refused}");
}

/// The parent's turn spawns one child (its first two scripted answers);
/// the child's answer is `child`.
fn spawn_one(
    sb: &Sandbox,
    child: crate::scripted::Reply,
    more: Vec<crate::scripted::Reply>,
) -> (ScriptedServer, Gateway) {
    one_at_a_time(sb);
    let mut replies = vec![
        tool_call(
            "call_1",
            "sessions_spawn",
            json!({"task": "Check the backups"}),
        ),
        text("Started."),
        child,
    ];
    replies.extend(more);
    let server = ScriptedServer::start(replies);
    let gw = Gateway::start(sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Backups?"})));
    assert_eq!(code, 200, "{answer}");
    (server, gw)
}

#[test]
fn a_failed_child_announces_an_error_status_whatever_its_words() {
    let sb = Sandbox::new();
    let failing = crate::scripted::Reply::Status {
        status: 400,
        headers: vec![("content-type".into(), "application/json".into())],
        body: r#"{"error": {"message": "Status: ok, all done"}}"#.into(),
    };
    let (server, gw) = spawn_one(&sb, failing, vec![text("The check failed.")]);
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "failed")
    });
    assert_eq!(task["deliveryStatus"], "session_queued", "{task}");
    eventually(Duration::from_secs(20), || {
        (server.requests().len() >= 4).then_some(())
    });
    let told = server.requests()[3].json().to_string();
    assert!(told.contains("Status: error"), "{told}");
    assert!(!told.contains("Status: ok\\n"), "{told}");
}

#[test]
fn a_child_answering_announce_skip_is_not_announced() {
    let sb = Sandbox::new();
    let (server, gw) = spawn_one(&sb, text("ANNOUNCE_SKIP"), vec![text("Nothing new.")]);
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "succeeded")
    });
    assert_eq!(task["deliveryStatus"], "not_applicable", "{task}");
    // Nothing was queued for the parent: its next turn carries no announce.
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "And now?"})));
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["reply"], "Nothing new.",
        "no relay turn took the answer"
    );
    let next = server.requests()[3].json().to_string();
    assert!(
        next.contains("And now?") && !next.contains("Status:"),
        "{next}"
    );
}

#[test]
fn a_child_cancelled_while_it_runs_announces_cancelled() {
    let sb = Sandbox::new();
    let (server, gw) = spawn_one(
        &sb,
        crate::scripted::Reply::Hang,
        vec![text("The backup check was stopped.")],
    );
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "running")
    });
    let id = task["taskId"].as_str().unwrap();
    // The child is waiting on its model call.
    eventually(Duration::from_secs(20), || {
        (server.requests().len() >= 3).then_some(())
    });
    let cancelled = sb.run(&["tasks", "cancel", id, "--json"]).ok().json();
    assert_eq!(cancelled["result"], "requested", "{cancelled}");
    eventually(Duration::from_secs(20), || {
        (server.requests().len() >= 4).then_some(())
    });
    let told = server.requests()[3].json().to_string();
    assert!(told.contains("Status: cancelled"), "{told}");
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "cancelled" && t["deliveryStatus"] == "session_queued")
    });
    assert_eq!(task["runtime"], "subagent");
}

#[test]
fn a_child_cut_by_kill_9_is_announced_lost_after_the_restart() {
    let sb = Sandbox::new();
    let (_hanging, gw) = spawn_one(&sb, crate::scripted::Reply::Hang, vec![]);
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["status"] == "running")
    });
    let id = task["taskId"].as_str().unwrap().to_string();
    gw.signal(libc::SIGKILL);
    drop(gw);

    let server = ScriptedServer::start(vec![text("The backup check was cut off.")]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let task = eventually(Duration::from_secs(20), || {
        subagent_tasks(&gw)
            .into_iter()
            .find(|t| t["taskId"] == id.as_str() && t["deliveryStatus"] == "session_queued")
    });
    assert_eq!(task["status"], "lost", "{task}");
    eventually(Duration::from_secs(20), || {
        (!server.requests().is_empty()).then_some(())
    });
    let told = server.requests()[0].json().to_string();
    assert!(told.contains("Status: lost"), "{told}");
    assert!(told.contains("the gateway that ran it stopped"), "{told}");
    // The relay's reply reached the outbox (the session has no chat):
    // the turn that carried the announce is done.
    eventually(Duration::from_secs(20), || {
        let list = sb.run(&["outbox", "list", "--json"]).ok().json();
        list.to_string()
            .contains("The backup check was cut off.")
            .then_some(())
    });
    // Told once: after a second restart the parent's next turn carries no
    // announce, and no relay turn took its scripted answer.
    drop(gw);
    let again = ScriptedServer::start(vec![text("Nothing new.")]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", again.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Any news?"})));
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["reply"], "Nothing new.");
    let last_user = last_user_text(&again.requests()[0].json());
    assert!(
        !last_user.contains("Status: lost"),
        "announced twice: {last_user}"
    );
    assert_eq!(again.requests().len(), 1);
}

#[test]
fn a_parent_may_have_only_max_children_per_agent_alive_even_within_one_turn() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        r#"{"agents": {"defaults": {"model": "openai/test-model", "maxConcurrent": 1,
            "subagents": {"maxChildrenPerAgent": 2}}}}"#,
    );
    let spawn = |id: &str, task: &str| tool_call(id, "sessions_spawn", json!({"task": task}));
    let server = ScriptedServer::start(vec![
        spawn("c1", "first"),
        spawn("c2", "second"),
        spawn("c3", "third"),
        text("Two are running."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", server.url.as_str())]);
    let (code, answer) = gw.request("POST", "/v1/agent", Some(&json!({"message": "Go"})));
    assert_eq!(code, 200, "{answer}");
    let last = server.requests()[3].json();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("accepted") && results[1].contains("accepted"),
        "{results:?}"
    );
    assert!(
        results[2].contains("2 children alive") && results[2].contains("maxChildrenPerAgent"),
        "{results:?}"
    );
}
