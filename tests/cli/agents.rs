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
