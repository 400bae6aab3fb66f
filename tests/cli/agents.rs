//! Several agents behind one almanac: OpenClaw's roster read as it is,
//! `agents add | bind | unbind`, and chat messages routed through
//! `POST /v1/agent` to the agent and session their bindings choose.

use serde_json::{Value, json};

use crate::agent::text;
use crate::common::Sandbox;
use crate::gateway::Gateway;
use crate::scripted::ScriptedServer;

#[test]
fn the_openclaw_roster_and_route_bindings_are_read_as_written() {
    let sb = Sandbox::new();
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openclaw-home/openclaw.json");
    let list = sb
        .run(&[
            "--config",
            config.to_str().unwrap(),
            "agents",
            "list",
            "--bindings",
            "--json",
        ])
        .ok()
        .json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["main", "work"]);
    assert_eq!(list[0]["isDefault"], true);
    assert_eq!(list[0]["workspace"], "/home/ada/.openclaw/workspace");
    assert_eq!(list[1]["workspace"], "/home/ada/.openclaw/workspace-work");
    assert_eq!(list[1]["model"], "scripted/scripted-1");
    assert_eq!(
        list[0]["bindingDetails"],
        json!(["telegram accountId=personal"])
    );
    assert_eq!(list[1]["bindingDetails"], json!(["telegram accountId=ops"]));
}

#[test]
fn adding_binding_and_unbinding_agents_edits_only_those_keys_and_moves_nothing() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "// mine\n{agents: {defaults: {maxSteps: 7}}}\n",
    );
    sb.write(".almanac/workspace/MEMORY.md", "- home fact\n");
    let added = sb.run(&["agents", "add", "work", "--json"]).ok().json();
    assert_eq!(added["key"], "agents.list");
    assert!(sb.path(".almanac/workspace-work").is_dir());
    let text = sb.read(".almanac/config.json5");
    assert!(text.starts_with("// mine\n"), "{text}");
    assert!(text.contains("maxSteps: 7"), "{text}");
    // The agent that was implicit keeps its workspace and notes.
    let list = sb.run(&["agents", "list", "--json"]).ok().json();
    assert_eq!(list[0]["id"], "main");
    assert_eq!(list[0]["isDefault"], true);
    assert!(
        list[0]["workspace"]
            .as_str()
            .unwrap()
            .ends_with(".almanac/workspace")
    );
    assert_eq!(sb.read(".almanac/workspace/MEMORY.md"), "- home fact\n");
    sb.run(&["agents", "add", "work"]).code(1);

    let bound = sb
        .run(&[
            "agents",
            "bind",
            "--agent",
            "work",
            "--bind",
            "http",
            "--peer",
            "direct:ada",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(bound["added"], json!(["http peer=direct:ada"]));
    let again = sb
        .run(&[
            "agents",
            "bind",
            "--agent",
            "work",
            "--bind",
            "http",
            "--peer",
            "direct:ada",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        again["added"],
        json!([]),
        "an equal binding is not added twice"
    );
    sb.run(&["agents", "bind", "--agent", "nobody", "--bind", "http"])
        .code(2);
    let unbound = sb
        .run(&["agents", "unbind", "--agent", "work", "--all", "--json"])
        .ok()
        .json();
    assert_eq!(unbound["removed"], json!(["http peer=direct:ada"]));
    assert_eq!(unbound["bindings"], 0);
}

fn two_agents(sb: &Sandbox) {
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model"},
                     list: [{id: "home", default: true}, {id: "work"}]},
            session: {dmScope: "per-channel-peer"},
            bindings: [{type: "route", agentId: "work", match: {channel: "http", peer: {kind: "direct", id: "boss"}}}]}"#,
    );
    sb.write(
        ".almanac/workspace/AGENTS.md",
        "HOME-RULES: water the plants\n",
    );
    sb.write(
        ".almanac/workspace-work/AGENTS.md",
        "WORK-RULES: ship on Fridays\n",
    );
    sb.write(
        ".almanac/workspace/memory/2026-11-20.md",
        "- The cabin key is under the blue pot\n",
    );
    sb.write(
        ".almanac/workspace-work/memory/2026-11-20.md",
        "- The staging database is pg-stage-07\n",
    );
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn chat_messages_reach_the_bound_agent_in_its_own_workspace_and_session() {
    let sb = Sandbox::new();
    two_agents(&sb);
    let server = ScriptedServer::start(vec![text("for work"), text("for home")]);
    let url = server.url.clone();
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", url.as_str())]);
    let peer = |id: &str| json!({"message": "hello", "channel": "http", "peer": {"kind": "direct", "id": id}});

    let (code, work) = gw.request("POST", "/v1/agent", Some(&peer("boss")));
    assert_eq!(code, 200, "{work}");
    assert_eq!(work["sessionKey"], "agent:work:http:direct:boss", "{work}");
    let (code, home) = gw.request("POST", "/v1/agent", Some(&peer("ada")));
    assert_eq!(code, 200, "{home}");
    assert_eq!(home["sessionKey"], "agent:home:http:direct:ada", "{home}");

    let requests = server.requests();
    let (to_work, to_home) = (
        system_prompt(&requests[0].json()),
        system_prompt(&requests[1].json()),
    );
    assert!(
        to_work.contains("WORK-RULES") && !to_work.contains("HOME-RULES"),
        "{to_work}"
    );
    assert!(
        to_home.contains("HOME-RULES") && !to_home.contains("WORK-RULES"),
        "{to_home}"
    );

    // Each agent's sessions are its own, and each records its route.
    let work_sessions: Value =
        serde_json::from_str(&sb.read(".almanac/agents/work/sessions/sessions.json")).unwrap();
    let entry = &work_sessions["agent:work:http:direct:boss"];
    assert_eq!(entry["lastChannel"], "http");
    assert_eq!(entry["lastTo"], "boss");
    assert!(
        sb.path(".almanac/agents/home/sessions/sessions.json")
            .is_file()
    );

    // A message naming its own agent as well is refused: bindings decide.
    let mut both = peer("boss");
    both["agent"] = json!("home");
    assert_eq!(gw.request("POST", "/v1/agent", Some(&both)).0, 400);
}

#[test]
fn each_agents_memory_search_sees_only_its_own_notes() {
    let sb = Sandbox::new();
    two_agents(&sb);
    let search = |agent: &str, query: &str| {
        sb.run(&["memory", "search", "--agent", agent, "--json", query])
            .ok()
            .json()
    };
    let hits = |v: &Value| v["results"].as_array().map_or(0, Vec::len);
    assert_eq!(hits(&search("work", "staging database")), 1);
    assert_eq!(hits(&search("home", "staging database")), 0);
    assert_eq!(hits(&search("home", "cabin key")), 1);
    assert_eq!(hits(&search("work", "cabin key")), 0);
    // Without --agent: the default agent (home).
    let default = sb
        .run(&["memory", "search", "--json", "cabin key"])
        .ok()
        .json();
    assert_eq!(hits(&default), 1);
    let unknown = sb
        .run(&["memory", "search", "--agent", "ghost", "x"])
        .code(2);
    assert!(
        unknown.stderr.contains("unknown agent `ghost`"),
        "{}",
        unknown.stderr
    );
}

/// Every file under `root` (relative path, bytes).
fn snapshot(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut std::collections::BTreeMap<String, Vec<u8>>,
    ) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn a_single_agent_state_keeps_working_and_adding_an_agent_moves_nothing_of_it() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {model: \"openai/test-model\"}}}\n",
    );
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "- The boat is called Tern\n",
    );
    sb.write(
        ".almanac/workspace/memory/2026-11-20.md",
        "- The cabin key is under the blue pot\n",
    );
    let server = ScriptedServer::start(vec![text("Hello."), text("Again.")]);
    let env = [("OPENAI_BASE_URL", server.url.as_str())];
    sb.run_env(&["agent", "--message", "hi"], &env).ok();
    let job = [
        "cron",
        "add",
        "--name",
        "Daily",
        "--cron",
        "0 9 * * *",
        "--tz",
        "UTC",
        "--message",
        "Plan the day",
        "--json",
    ];
    sb.run(&job).ok();
    sb.run(&["memory", "index"]).ok();
    let sessions = sb.run(&["sessions", "--json"]).ok().json();
    let jobs = sb.run(&["cron", "list", "--json"]).ok().json();
    let before = snapshot(&sb.path(".almanac"));

    sb.run(&["agents", "add", "work", "--json"]).ok();
    let after = snapshot(&sb.path(".almanac"));
    for (path, bytes) in &before {
        if path.starts_with("config.json5") {
            continue;
        }
        assert_eq!(after.get(path), Some(bytes), "{path} moved or changed");
    }
    // The new agent's things are its own.
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        assert!(
            path.starts_with("config.json5")
                || path.starts_with("workspace-work/")
                || path.starts_with("agents/work/"),
            "{path}"
        );
    }

    // Everything the single agent had works as before: its sessions, its
    // jobs, its index, and its next turn goes on in the same session.
    assert_eq!(sb.run(&["sessions", "--json"]).ok().json(), sessions);
    assert_eq!(sb.run(&["cron", "list", "--json"]).ok().json(), jobs);
    let hits = sb
        .run(&["memory", "search", "--json", "cabin key"])
        .ok()
        .json();
    assert_eq!(hits["results"].as_array().map_or(0, Vec::len), 1, "{hits}");
    sb.run_env(&["agent", "--message", "again"], &env).ok();
    let asked = server.requests()[1].json();
    let users = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 2, "the turn went on in the old session: {asked}");
}

/// The content of every tool result the model was sent, in order.
fn tool_results(server: &ScriptedServer) -> Vec<String> {
    let last = server.requests().last().unwrap().json();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn an_agents_tools_reach_neither_the_other_agents_workspace_nor_its_memory() {
    use crate::agent::tool_call;
    let sb = Sandbox::new();
    two_agents(&sb);
    let home_before = snapshot(&sb.path(".almanac/workspace"));
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "read",
            json!({"path": "../workspace/memory/2026-11-20.md"}),
        ),
        tool_call(
            "c2",
            "write",
            json!({"path": "../workspace/AGENTS.md", "content": "owned"}),
        ),
        tool_call(
            "c3",
            "edit",
            json!({"path": "../workspace/AGENTS.md", "old_text": "HOME", "new_text": "WORK"}),
        ),
        tool_call(
            "c4",
            "memory_search",
            json!({"query": "cabin key blue pot"}),
        ),
        tool_call(
            "c5",
            "memory_get",
            json!({"path": "../workspace/memory/2026-11-20.md"}),
        ),
        tool_call(
            "c6",
            "memory_append",
            json!({"text": "Deploys freeze on Friday"}),
        ),
        tool_call("c7", "read", json!({"path": "memory/2026-11-20.md"})),
        text("done"),
    ]);
    let env = [("OPENAI_BASE_URL", server.url.as_str())];
    sb.run_env(
        &[
            "agent",
            "--agent",
            "work",
            "--message",
            "look around",
            "--json",
        ],
        &env,
    )
    .ok();
    let results = tool_results(&server);
    assert_eq!(results.len(), 7, "{results:?}");
    for (i, r) in results[..3].iter().enumerate() {
        assert!(
            [
                "outside the workspace",
                "leaves the workspace",
                "may not open"
            ]
            .iter()
            .any(|why| r.contains(why)),
            "call {i}: {r}"
        );
    }
    assert!(!results[3].contains("cabin"), "{}", results[3]);
    assert!(!results[4].contains("cabin"), "{}", results[4]);
    assert!(
        results[6].contains("pg-stage-07"),
        "its own notes: {}",
        results[6]
    );
    // The other agent's workspace is as it was; the note went to work's.
    assert_eq!(snapshot(&sb.path(".almanac/workspace")), home_before);
    let work_notes = snapshot(&sb.path(".almanac/workspace-work/memory"));
    assert!(
        work_notes
            .values()
            .any(|b| String::from_utf8_lossy(b).contains("Deploys freeze on Friday")),
        "{:?}",
        work_notes.keys()
    );
    // Its session is its own; the default agent has none.
    assert!(
        sb.path(".almanac/agents/work/sessions/sessions.json")
            .is_file()
    );
    let home_sessions = sb.run(&["sessions", "--json"]).ok().json();
    let work_sessions = sb
        .run(&["sessions", "--agent", "work", "--json"])
        .ok()
        .json();
    assert!(
        home_sessions.to_string().find("agent:work").is_none(),
        "{home_sessions}"
    );
    assert!(
        work_sessions.to_string().contains("agent:work:main"),
        "{work_sessions}"
    );
}

#[test]
fn each_command_acts_for_the_agent_it_names_and_no_other() {
    let sb = Sandbox::new();
    two_agents(&sb);
    sb.write(
        ".almanac/workspace-work/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Ships the build to staging.\n---\nRun the deploy.\n",
    );
    let home_before = snapshot(&sb.path(".almanac/workspace"));
    sb.run(&[
        "session-memory",
        "append",
        "--agent",
        "work",
        "The VPN code is 4417",
    ])
    .ok();
    assert_eq!(snapshot(&sb.path(".almanac/workspace")), home_before);
    let found = |agent: &str| {
        let v = sb
            .run(&[
                "session-memory",
                "search",
                "--agent",
                agent,
                "--json",
                "VPN code",
            ])
            .ok()
            .json();
        v.to_string().contains("4417")
    };
    assert!(found("work"));
    assert!(!found("home"));
    let context = |agent: &str| {
        sb.run(&["session-memory", "context", "--agent", agent, "VPN code"])
            .ok()
            .stdout
    };
    assert!(context("work").contains("4417"));
    assert!(!context("home").contains("4417"));
    let skills = |args: &[&str]| {
        let mut all = vec!["skills", "list", "--json"];
        all.extend_from_slice(args);
        let v = sb.run(&all).ok().json();
        v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "deploy")
    };
    assert!(skills(&["--agent", "work"]));
    assert!(!skills(&[]));
    let prompt = |agent: &str| {
        sb.run(&["agent", "prompt", "--agent", agent, "--message", "hi"])
            .ok()
            .stdout
    };
    let (work, home) = (prompt("work"), prompt("home"));
    assert!(
        work.contains("WORK-RULES") && !work.contains("HOME-RULES"),
        "{work}"
    );
    assert!(
        home.contains("HOME-RULES") && !home.contains("WORK-RULES"),
        "{home}"
    );
    assert!(work.contains("deploy") && !home.contains("Ships the build"));
}
