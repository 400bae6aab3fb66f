use std::path::Path;

use super::*;
use crate::config::LoadedConfig;

pub(super) fn agents_of(dir: &Path, config: &str) -> Result<Agents, AgentsError> {
    let app = crate::app::testing::test_app(dir, "{}");
    let path = dir.join("agents.json5");
    std::fs::write(&path, config).unwrap();
    let loaded: LoadedConfig = crate::config::load(&path, &app.host, &[]).unwrap();
    let workspace = DefaultWorkspace {
        configured: loaded.config.agents.defaults.workspace.as_deref(),
        origin: loaded.origin("agents.defaults.workspace"),
    };
    Agents::resolve(&loaded.config, &app.paths.state_dir, workspace, &app.host)
}

#[test]
fn without_a_list_there_is_one_agent_main_in_the_usual_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let agents = agents_of(dir.path(), "{}").unwrap();
    assert_eq!(agents.list.len(), 1);
    let main = agents.default_agent();
    assert_eq!(main.id, "main");
    assert!(main.workspace.ends_with("state/workspace"), "{main:?}");
    assert_eq!(agents.with_heartbeat().len(), 1);
}

#[test]
fn the_list_and_the_keyed_entries_are_read_with_their_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let agents = agents_of(
        dir.path(),
        r#"{agents: {list: [{id: "Home"}, {id: "work", default: true, workspace: "/srv/work"}],
                     entries: {lab: {name: "Lab"}, home: {name: "dup"}}}}"#,
    )
    .unwrap();
    let ids: Vec<&str> = agents.list.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["home", "work", "lab"]);
    assert_eq!(agents.default_agent().id, "work");
    assert_eq!(
        agents.get("WORK").unwrap().workspace,
        Path::new("/srv/work")
    );
    // Not the default: a workspace of its own beside the state.
    assert!(
        agents
            .get("home")
            .unwrap()
            .workspace
            .ends_with("state/workspace-home")
    );
    assert_eq!(agents.get("lab").unwrap().name.as_deref(), Some("Lab"));
    assert!(
        agents.warnings.iter().any(|w| w.contains("listed twice")),
        "{:?}",
        agents.warnings
    );
    let unknown = agents.require("nobody").unwrap_err();
    assert!(
        unknown.to_string().contains("`home`, `work`, `lab`"),
        "{unknown}"
    );
}

#[test]
fn main_is_the_default_when_none_is_marked_else_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let with_main =
        agents_of(dir.path(), r#"{agents: {list: [{id: "a"}, {id: "main"}]}}"#).unwrap();
    assert_eq!(with_main.default_agent().id, "main");
    let without = agents_of(dir.path(), r#"{agents: {list: [{id: "b"}, {id: "a"}]}}"#).unwrap();
    assert_eq!(without.default_agent().id, "b");
    // The default agent keeps agents.defaults.workspace.
    let kept = agents_of(
        dir.path(),
        r#"{agents: {defaults: {workspace: "/srv/home"}, list: [{id: "main"}, {id: "x"}]}}"#,
    )
    .unwrap();
    assert_eq!(kept.default_agent().workspace, Path::new("/srv/home"));
}

#[test]
fn a_binding_to_an_unknown_agent_is_an_error_naming_the_binding() {
    let dir = tempfile::tempdir().unwrap();
    let err = agents_of(
        dir.path(),
        r#"{agents: {list: [{id: "main"}]},
            bindings: [{agentId: "main", match: {channel: "http"}},
                       {type: "route", agentId: "ghost", match: {channel: "telegram"}}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        err,
        AgentsError::UnknownAgent {
            index: 1,
            agent: "ghost".into()
        }
    );
    assert!(
        err.to_string()
            .starts_with("bindings[1] names agent `ghost`"),
        "{err}"
    );
    let kind = agents_of(
        dir.path(),
        r#"{bindings: [{agentId: "main", match: {channel: "http", peer: {kind: "room", id: "1"}}}]}"#,
    )
    .unwrap_err();
    assert!(
        matches!(kind, AgentsError::PeerKind { index: 0, .. }),
        "{kind:?}"
    );
}

#[test]
fn two_agents_never_share_a_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let err = agents_of(
        dir.path(),
        r#"{agents: {list: [{id: "a", workspace: "/srv/x"}, {id: "b", workspace: "/srv/x"}]}}"#,
    )
    .unwrap_err();
    assert!(matches!(err, AgentsError::SharedWorkspace(..)), "{err:?}");
}

#[test]
fn heartbeats_run_for_the_agents_that_have_the_key_else_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let agents = agents_of(
        dir.path(),
        r#"{agents: {list: [{id: "main"}, {id: "ops", heartbeat: {every: "5m"}}]}}"#,
    )
    .unwrap();
    let ids: Vec<&str> = agents
        .with_heartbeat()
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(ids, ["ops"]);
}

#[test]
fn an_entry_overrides_model_skills_heartbeat_and_tools() {
    let mut config = Config::default();
    config.tools.deny = vec!["exec".into()];
    let entry: AgentEntry = serde_json::from_value(serde_json::json!({
        "model": "scripted/other",
        "skills": ["standup"],
        "heartbeat": {"every": "5m", "target": "last"},
        "tools": {"allow": ["memory_search"], "deny": ["web_fetch"]}
    }))
    .unwrap();
    apply_entry(&mut config, &entry);
    let d = &config.agents.defaults;
    assert_eq!(d.model.as_ref().unwrap().primary(), "scripted/other");
    assert_eq!(d.skills.as_deref(), Some(&["standup".to_string()][..]));
    assert_eq!(d.heartbeat.every, "5m");
    assert_eq!(d.heartbeat.ack_max_chars, 300, "the rest stays the default");
    assert_eq!(config.tools.allow, ["memory_search"]);
    assert_eq!(config.tools.deny, ["exec", "web_fetch"]);
}
