use super::*;
use crate::app::memory_json::{JsonHit, SNIPPET_CHARS};

/// `memory search --json` as it was first written: OpenClaw's fields,
/// then every field of the outcome but its hits, through a JSON tree.
fn through_a_tree(searched: &app_memory::Searched) -> serde_json::Value {
    let results: Vec<JsonHit> = searched
        .outcome
        .hits
        .iter()
        .map(|hit| JsonHit::of(hit, SNIPPET_CHARS))
        .collect();
    let mut doc = serde_json::json!({
        "results": results,
        "provider": searched.semantic.provider,
        "model": searched.semantic.model,
        "mode": searched.semantic.mode,
        "citations": "auto",
    });
    let extra = serde_json::to_value(&searched.outcome).unwrap();
    for (k, v) in extra.as_object().unwrap() {
        if k != "hits" {
            doc.as_object_mut().unwrap().insert(k.clone(), v.clone());
        }
    }
    doc
}

#[test]
fn search_json_is_written_in_one_pass_byte_for_byte_as_through_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let app = crate::app::testing::test_app(dir.path(), "{}");
    let root = app.memory().root;
    std::fs::create_dir_all(root.join("memory")).unwrap();
    std::fs::write(
        root.join("memory/2026-11-30.md"),
        "# 2026-11-30\n\n- [09:00] Ana fixed the printer on the second floor\n\
         - [10:00] Lunch with Ana at the pier\n",
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    // Words only, a time phrase that matches, one that does not, and
    // nothing found: every optional field present and absent.
    for query in [
        "printer",
        "printer yesterday",
        "printer last year",
        "Ana lunch",
        "nothing like this",
    ] {
        let req = SearchRequest {
            query: query.into(),
            context: 1,
            ..Default::default()
        };
        let searched = app_memory::search(&app, &req).unwrap();
        let typed =
            String::from_utf8(crate::app::memory_json::search_json(&searched).unwrap()).unwrap();
        let tree = serde_json::to_string_pretty(&through_a_tree(&searched)).unwrap();
        assert_eq!(typed, tree, "{query}");
        let doc: serde_json::Value = serde_json::from_str(&typed).unwrap();
        seen.extend(doc.as_object().unwrap().keys().cloned());
    }
    for key in ["timeRange", "timePhrase", "unmatchedTimePhrase", "entities"] {
        assert!(seen.contains(key), "no search wrote {key}: {seen:?}");
    }
}
