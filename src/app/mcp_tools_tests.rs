use serde_json::json;

use super::*;
use crate::config::{McpConfig, McpToolsConfig};

#[test]
fn writing_tools_are_offered_only_when_allowed() {
    let names = |c: &McpConfig| offered(c).iter().map(|t| t.name).collect::<Vec<_>>();
    let reading = names(&McpConfig::default());
    assert!(reading.contains(&"memory_search") && reading.contains(&"heartbeat_last"));
    for w in ["memory_append", "cron_add", "cron_remove", "system_event"] {
        assert!(!reading.contains(&w), "{w} is off by default");
    }
    let all = names(&McpConfig {
        allow_writes: true,
        ..McpConfig::default()
    });
    assert_eq!(all.len(), TOOLS.len());
    let narrowed = names(&McpConfig {
        tools: McpToolsConfig {
            allow: vec!["memory_search".into(), "memory_get".into()],
            deny: vec!["memory_get".into()],
        },
        ..McpConfig::default()
    });
    assert_eq!(narrowed, ["memory_search"]);
}

#[test]
fn arguments_are_checked_against_the_schema() {
    let config = McpConfig::default();
    let bad = |name: &str, args: serde_json::Value| match admit(&config, name, &args) {
        Err(CallError::InvalidArguments { reason, .. }) => reason,
        other => panic!("{name} {args}: {other:?}"),
    };
    assert!(bad("memory_search", json!({"query": 42})).contains("must be a string"));
    assert!(bad("memory_search", json!({})).contains("`query` is required"));
    assert!(bad("memory_search", json!({"query": "x", "maxResults": 0})).contains("between"));
    assert!(bad("memory_search", json!({"query": "x", "bogus": 1})).contains("unknown argument"));
    assert!(bad("memory_get", json!({"path": "  "})).contains("must not be empty"));
    assert!(bad("memory_search", json!(["query"])).contains("not a JSON object"));
    assert!(
        admit(
            &config,
            "memory_search",
            &json!({"query": "x", "maxResults": 3})
        )
        .is_ok()
    );
    assert!(matches!(
        admit(&config, "nope", &json!({})),
        Err(CallError::UnknownTool(_))
    ));
    assert!(matches!(
        admit(&config, "memory_append", &json!({"text": "x"})),
        Err(CallError::NotOffered(_))
    ));
}

#[test]
fn every_schema_is_an_object_schema_whose_required_fields_exist() {
    for tool in TOOLS {
        for schema in [(tool.input)(), (tool.output)()] {
            assert_eq!(schema["type"], "object", "{}", tool.name);
            let props = schema["properties"].as_object().unwrap();
            for r in schema["required"].as_array().unwrap() {
                assert!(
                    props.contains_key(r.as_str().unwrap()),
                    "{}: {r}",
                    tool.name
                );
            }
        }
        assert!(!tool.description.contains('\n'), "one line: {}", tool.name);
    }
}
