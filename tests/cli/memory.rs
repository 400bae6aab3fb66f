//! `almanac memory …`: search and recall over the memory index.

use serde_json::Value;

use crate::common::{Run, Sandbox, synthetic_memory};

fn mem(sb: &Sandbox, args: &[&str]) -> Run {
    let mut all = vec!["--now", "2026-11-29T09:00:00+00:00", "memory"];
    all.extend_from_slice(args);
    sb.run(&all)
}

fn results(v: &Value) -> &Vec<Value> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v}"))
}

fn days_of(v: &Value) -> Vec<String> {
    results(v)
        .iter()
        .map(|h| h["date"].as_str().unwrap_or("").to_string())
        .collect()
}

const CHAT: &str = "# 2025-11-27

## Session 1 (Peter & Ana)

- [09:00] Ana: Where are you this week?
- [09:01] Peter: Marrakech, until Monday.
- [09:02] Ana: Nice, enjoy the souks.

## Retain

- W @Peter: Currently in Marrakech (Nov 27-Dec 1, 2025) for Andy's birthday.
- O(c=0.95) @Peter: Prefers concise replies on WhatsApp.
- B @warelay: Fixed the Baileys WS crash by wrapping the handlers.
- Peter liked the tea
";

#[test]
fn search_speaks_the_memory_search_tool_shape() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/memory/2025-11-27.md", CHAT);
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "# Memory\n\n- Ana prefers tea over coffee\n",
    );
    let v = mem(&sb, &["search", "--json", "where is Peter this week"])
        .ok()
        .json();
    let hits = results(&v);
    assert!(!hits.is_empty(), "{v}");
    assert_eq!(v["provider"], "none");
    assert_eq!(v["mode"], "fts-only");
    for hit in hits {
        for key in ["path", "startLine", "endLine", "score", "snippet", "source"] {
            assert!(hit.get(key).is_some(), "{key} missing in {hit}");
        }
        assert_eq!(hit["source"], "memory");
        assert!(
            !hit["path"].as_str().unwrap().starts_with('/'),
            "workspace-relative: {hit}"
        );
    }
    // Best first.
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // The answer follows the question: it is found though it shares only
    // the name, and the question and answer come with their neighbours.
    let lines: Vec<u64> = hits
        .iter()
        .map(|h| h["startLine"].as_u64().unwrap())
        .collect();
    assert!(lines.contains(&6), "the answer line (6) in {lines:?}");
    let answer = hits.iter().find(|h| h["startLine"] == 6).unwrap();
    assert_eq!(
        answer["context"]["before"][0],
        "Ana: Where are you this week?"
    );
    assert_eq!(answer["heading"], "2025-11-27 > Session 1 (Peter & Ana)");
    // Limits.
    let v = mem(&sb, &["search", "--json", "--max-results", "1", "Peter"])
        .ok()
        .json();
    assert_eq!(results(&v).len(), 1);
    let v = mem(&sb, &["search", "--json", "--min-score", "0.999", "Peter"])
        .ok()
        .json();
    assert!(results(&v).is_empty(), "{v}");
    // Headings never take a result slot.
    let v = mem(&sb, &["search", "--json", "-n", "20", "Session Retain"])
        .ok()
        .json();
    for hit in results(&v) {
        assert!(!hit["snippet"].as_str().unwrap().starts_with('#'), "{hit}");
    }
}

#[test]
fn questions_and_hostile_queries_never_fail() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/memory/2026-01-05.md",
        "- [2026-01-05 10:00] 用户喜欢早上九点开站会\n- [2026-01-05 11:00] Der Müller wohnt in der Straße am Café\n",
    );
    for q in [
        "\"AND\" (OR) NOT *",
        "***",
        "?!.,;",
        "-- --",
        "NEAR(a b)",
        "\u{200b}",
    ] {
        let v = mem(&sb, &["search", "--json", "--", q]).ok().json();
        assert!(results(&v).is_empty(), "{q}: {v}");
    }
    let v = mem(&sb, &["search", "--json", "喜欢站会"]).ok().json();
    assert_eq!(results(&v)[0]["startLine"], 1);
    let v = mem(&sb, &["search", "--json", "strasse cafe mueller"])
        .ok()
        .json();
    assert_eq!(results(&v)[0]["startLine"], 2, "{v}");
    let v = mem(&sb, &["search", "--json", "Who lives near the café?"])
        .ok()
        .json();
    assert_eq!(results(&v)[0]["startLine"], 2, "{v}");
}

#[test]
fn time_ranges_from_flags_and_from_the_query() {
    let sb = Sandbox::new();
    synthetic_memory(&sb.path(".almanac/workspace"), 900, 8);
    // --since / --until: only notes from that range.
    let v = mem(
        &sb,
        &[
            "search",
            "--json",
            "-n",
            "50",
            "--since",
            "2025-03-01",
            "--until",
            "2025-03-31",
            "dentist",
        ],
    )
    .ok()
    .json();
    let days = days_of(&v);
    assert!(!days.is_empty());
    assert!(
        days.iter()
            .all(|d| d.as_str() >= "2025-03-01" && d.as_str() <= "2025-03-31"),
        "{days:?}"
    );
    assert_eq!(v["timeRange"]["since"], "2025-03-01");
    // In the query.
    let v = mem(
        &sb,
        &["search", "--json", "-n", "50", "dentist in March 2025"],
    )
    .ok()
    .json();
    assert_eq!(days_of(&v), days, "same range, same notes");
    assert_eq!(v["timePhrase"], "in March 2025");
    let v = mem(
        &sb,
        &["search", "--json", "-n", "50", "what happened last week"],
    )
    .ok()
    .json();
    let days = days_of(&v);
    assert!(!days.is_empty());
    assert!(
        days.iter()
            .all(|d| d.as_str() >= "2026-11-16" && d.as_str() <= "2026-11-22"),
        "{days:?}"
    );
    // Relative bounds, and a bad one.
    let v = mem(
        &sb,
        &["search", "--json", "-n", "50", "--since", "7d", "standup"],
    )
    .ok()
    .json();
    assert!(days_of(&v).iter().all(|d| d.as_str() >= "2026-11-22"));
    let run = mem(&sb, &["search", "--since", "someday", "standup"]).code(2);
    assert!(
        run.stderr.contains("cannot read `someday` as a time"),
        "{}",
        run.stderr
    );
}

#[test]
fn needles_and_entities_in_a_long_memory() {
    let sb = Sandbox::new();
    let needles = synthetic_memory(&sb.path(".almanac/workspace"), 1200, 10);
    mem(&sb, &["index"]).ok();
    for needle in &needles {
        let v = mem(&sb, &["search", "--json", needle.query]).ok().json();
        let first = &results(&v)[0];
        assert_eq!(first["path"], needle.path.as_str(), "{}", needle.query);
        assert_eq!(first["startLine"], needle.line, "{}", needle.query);
    }
    // The planted entity: one mention, on the day it was planted.
    let v = mem(&sb, &["entity", "--json", "Zephyrine Labs"])
        .ok()
        .json();
    let planted = &needles[0];
    let day = planted
        .path
        .trim_start_matches("memory/")
        .trim_end_matches(".md");
    assert_eq!(v["display"], "Zephyrine Labs");
    assert_eq!(v["mentions"], 1);
    assert_eq!(v["firstSeen"], day);
    assert_eq!(v["lastSeen"], day);
    assert_eq!(v["lines"][0]["text"], planted.text);
    // A name that only ever starts sentences is found by its words, over
    // the whole range.
    let v = mem(&sb, &["entity", "--json", "Alice"]).ok().json();
    assert!(v["mentions"].as_u64().unwrap() > 100, "{v}");
    assert_eq!(v["lastSeen"], "2026-11-28");
    assert!(v["firstSeen"].as_str().unwrap() < "2023-09-01");
    let run = mem(&sb, &["entity", "Nobody Atall"]).code(1);
    assert!(
        run.stdout
            .contains("Nothing in memory mentions Nobody Atall")
    );
}

#[test]
fn retained_facts_and_recall_packs() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/memory/2025-11-27.md", CHAT);
    let run = mem(&sb, &["index"]).ok();
    // The item in the Retain section that is not a record is reported, and
    // still indexed as a note.
    assert!(
        run.stderr
            .contains("memory/2025-11-27.md:14: not a retained fact"),
        "{}",
        run.stderr
    );
    let v = mem(&sb, &["status", "--json"]).ok().json();
    assert_eq!(v["facts"], 3);
    let v = mem(
        &sb,
        &[
            "recall",
            "--json",
            "--budget",
            "200",
            "what does Peter prefer?",
        ],
    )
    .ok()
    .json();
    let items = v["items"].as_array().unwrap();
    assert!(!items.is_empty(), "{v}");
    assert_eq!(items[0]["kind"], "opinion", "{v}");
    assert_eq!(items[0]["confidence"], 0.95);
    assert_eq!(items[0]["source"], "memory/2025-11-27.md#L12");
    // Facts about the entity come before the supporting lines.
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    let first_note = kinds
        .iter()
        .position(|k| *k == "note")
        .unwrap_or(kinds.len());
    assert!(kinds[..first_note].contains(&"world"), "{kinds:?}");
    assert!(
        kinds[first_note..].iter().all(|k| *k == "note"),
        "{kinds:?}"
    );
    assert!(v["usedTokens"].as_u64().unwrap() <= 200);
    // A small budget keeps to it and says what it left out.
    let v = mem(&sb, &["recall", "--json", "--budget", "30", "Peter"])
        .ok()
        .json();
    assert!(v["usedTokens"].as_u64().unwrap() <= 30, "{v}");
    assert!(v["omitted"].as_u64().unwrap() > 0, "{v}");
    // The entity summary lists the facts.
    let v = mem(&sb, &["entity", "--json", "@Peter"]).ok().json();
    assert_eq!(v["facts"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn get_reads_memory_files_only() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/memory/2025-11-27.md", CHAT);
    sb.write(".almanac/workspace/AGENTS.md", "# secrets of the agent\n");
    sb.write("outside.md", "- private\n");
    let v = mem(
        &sb,
        &[
            "get",
            "--json",
            "memory/2025-11-27.md",
            "--from",
            "5",
            "--lines",
            "2",
        ],
    )
    .ok()
    .json();
    assert_eq!(v["path"], "memory/2025-11-27.md");
    assert_eq!(
        v["text"],
        "- [09:00] Ana: Where are you this week?\n- [09:01] Peter: Marrakech, until Monday."
    );
    let whole = mem(&sb, &["get", "memory/2025-11-27.md"]).ok();
    assert_eq!(whole.stdout.trim_end(), CHAT.trim_end());
    let abs = sb.path(".almanac/workspace/memory/2025-11-27.md");
    let v = mem(
        &sb,
        &["get", "--json", abs.to_str().unwrap(), "--lines", "1"],
    )
    .ok()
    .json();
    assert_eq!(v["text"], "# 2025-11-27");
    // A memory file that does not exist yet reads as empty.
    let v = mem(&sb, &["get", "--json", "memory/2020-01-01.md"])
        .ok()
        .json();
    assert_eq!(v["text"], "");
    std::os::unix::fs::symlink(
        sb.path("outside.md"),
        sb.path(".almanac/workspace/memory/link.md"),
    )
    .unwrap();
    // A link leaving the memory root says what is wrong and how to allow it.
    let run = mem(&sb, &["get", "memory/link.md"]).code(2);
    assert!(
        run.stderr
            .contains("memory/link.md: symlink leaves the memory root")
            && run.stderr.contains("memory.allowSymlinkTargets"),
        "{}",
        run.stderr
    );
    for refused in [
        "AGENTS.md",
        "../outside.md",
        "memory/../../outside.md",
        sb.path("outside.md").to_str().unwrap(),
        "memory/2025-11-27.txt",
        "",
    ] {
        let run = mem(&sb, &["get", refused]).code(2);
        assert!(
            run.stderr.contains("not a memory file"),
            "{refused}: {}",
            run.stderr
        );
    }
}

#[test]
fn extra_paths_are_indexed_and_escaping_links_skipped() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/memory/2026-01-01.md",
        "- nothing special\n",
    );
    sb.write(
        "notes/projects/garden.md",
        "- Plant the tulip bulbs before the frost\n",
    );
    sb.write("secret/keys.md", "- the tulip vault code is 1234\n");
    std::os::unix::fs::symlink(sb.path("secret/keys.md"), sb.path("notes/leak.md")).unwrap();
    sb.write(
        ".almanac/workspace/people.md",
        "- Ana likes tulip festivals\n",
    );
    let config = format!(
        "{{ agents: {{ defaults: {{ memorySearch: {{ extraPaths: [\"{}\", \"people.md\"] }} }} }} }}",
        sb.path("notes").display()
    );
    sb.write(".almanac/config.json5", &config);
    let run = mem(&sb, &["search", "--json", "-n", "10", "tulip"]).ok();
    assert!(run.stderr.contains("symlink leaves"), "{}", run.stderr);
    let v = run.json();
    let mut paths: Vec<&str> = results(&v)
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    paths.sort();
    let garden = sb.path("notes/projects/garden.md");
    assert_eq!(paths, vec![garden.to_str().unwrap(), "people.md"]);
    let v = mem(&sb, &["get", "--json", garden.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(v["text"], "- Plant the tulip bulbs before the frost\n");
}

#[test]
fn status_index_and_a_deleted_index() {
    let sb = Sandbox::new();
    synthetic_memory(&sb.path(".almanac/workspace"), 60, 10);
    let v = mem(&sb, &["status", "--json"]).ok().json();
    assert_eq!(v["files"], 0);
    assert_eq!(
        v["dirty"].as_array().unwrap().len(),
        61,
        "60 days and MEMORY.md"
    );
    let v = mem(&sb, &["index", "--json"]).ok().json();
    assert_eq!(v["sync"]["filesIndexed"], 61);
    let v = mem(&sb, &["status", "--json"]).ok().json();
    assert_eq!(v["files"], 61);
    assert_eq!(v["chunks"], 60 * 10 + 5 + 2);
    assert!(v["dirty"].as_array().unwrap().is_empty());
    assert!(v["lastSync"].as_str().is_some());
    sb.write(
        ".almanac/workspace/memory/2026-11-01.md",
        "- rewritten by hand\n",
    );
    let v = mem(&sb, &["status", "--json"]).ok().json();
    assert_eq!(v["dirty"], serde_json::json!(["memory/2026-11-01.md"]));
    let v = mem(&sb, &["index", "--json"]).ok().json();
    assert_eq!(v["sync"]["filesIndexed"], 1);
    // The index is derived: deleted, the same searches give the same
    // results.
    let queries = [
        "standup Alice",
        "牙医",
        "invoice paid last month",
        "Zephyrine badge",
        "rewritten by hand",
    ];
    let run_all = || -> Vec<String> {
        queries
            .iter()
            .map(|q| mem(&sb, &["search", "--json", "-n", "10", q]).ok().stdout)
            .chain([mem(&sb, &["entity", "--json", "Alice"]).ok().stdout])
            .collect()
    };
    let before = run_all();
    std::fs::remove_dir_all(sb.path(".almanac/index")).unwrap();
    assert_eq!(run_all(), before);
    mem(&sb, &["index", "--force"]).ok();
    assert_eq!(run_all(), before);
}

#[test]
fn disabled_memory_search_says_so() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/MEMORY.md", "- tea\n");
    let v = sb
        .run(&[
            "--set",
            "agents.defaults.memorySearch.enabled=false",
            "memory",
            "search",
            "--json",
            "tea",
        ])
        .ok()
        .json();
    assert_eq!(v["disabled"], true);
    assert!(results(&v).is_empty());
}

/// Values far out of range are refused with a usage error (exit 2) or
/// capped; no command panics (a panic exits 101).
#[test]
fn huge_values_are_refused_or_capped_never_a_panic() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/memory/2025-11-27.md", CHAT);
    let huge = "18446744073709551615";
    let refused: &[(&[&str], &str)] = &[
        (
            &["memory", "search", "--since", "20000y", "Peter"],
            "earliest date",
        ),
        (
            &[
                "memory",
                "search",
                "--until",
                "99999999999999999999999d",
                "Peter",
            ],
            "earliest date",
        ),
        (
            &["memory", "recall", "--since", "300000m", "Peter"],
            "earliest date",
        ),
        (&["memory", "search", "-n", huge, "Peter"], "from 1 to 1000"),
        (
            &["memory", "search", "--context", huge, "Peter"],
            "from 0 to 50",
        ),
        (
            &["memory", "search", "--min-score", "NaN", "Peter"],
            "from 0 to 1",
        ),
        (
            &["memory", "entity", "--lines", huge, "Peter"],
            "from 1 to 1000",
        ),
        (
            &["session-memory", "search", "--limit", huge, "Peter"],
            "from 0 to 1000",
        ),
    ];
    for (args, message) in refused {
        let mut all = vec!["--now", "2026-11-29T09:00:00+00:00"];
        all.extend_from_slice(args);
        let run = sb.run(&all);
        assert_eq!(run.code, 2, "{args:?}\n{}", run.stderr);
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}\n{}",
            run.stderr
        );
        assert!(run.stderr.contains(message), "{args:?}\n{}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let capped: &[&[&str]] = &[
        &["memory", "search", "Peter", "since 20000 years ago"],
        &["memory", "recall", "--budget", huge, "Peter"],
        &[
            "memory",
            "get",
            "memory/2025-11-27.md",
            "--from",
            huge,
            "--lines",
            huge,
        ],
        &["session-memory", "context", "--budget", huge, "Peter"],
        &["session-memory", "clear", "--older-than", "4294967295"],
        &["heartbeat", "history", "--limit", huge],
    ];
    for args in capped {
        let mut all = vec!["--now", "2026-11-29T09:00:00+00:00"];
        all.extend_from_slice(args);
        let run = sb.run(&all);
        assert_eq!(run.code, 0, "{args:?}\n{}", run.stderr);
    }
    // Nothing is older than the calendar: the daily file stays.
    assert!(sb.path(".almanac/workspace/memory/2025-11-27.md").exists());
}

/// A `200` embeddings answer with one vector per input, listed last
/// first.
fn embeddings(n: usize) -> crate::scripted::Reply {
    let data: Vec<Value> = (0..n)
        .rev()
        .map(|i| serde_json::json!({"index": i, "embedding": [1.0, i as f64, 0.5]}))
        .collect();
    crate::scripted::Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::json!({"object": "list", "data": data}).to_string(),
    }
}

#[test]
fn the_openai_provider_embeds_through_an_openai_compatible_endpoint() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/memory/2025-11-27.md", CHAT);
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "# Memory\n\n- Ana prefers tea over coffee\n",
    );
    // How many items there are, indexed without vectors.
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { memorySearch: { provider: 'none' } } } }",
    );
    mem(&sb, &["index", "--json"]).ok();
    let items = mem(&sb, &["status", "--json"]).ok().json()["chunks"]
        .as_u64()
        .unwrap() as usize;
    assert!(items > 1 && items <= 32, "{items}");
    let server = crate::scripted::ScriptedServer::start(vec![embeddings(items), embeddings(1)]);
    sb.write(
        ".almanac/config.json5",
        &format!(
            "{{ agents: {{ defaults: {{ memorySearch: {{ provider: 'ollama', model: 'nomic-embed-text', remote: {{ baseUrl: '{}/v1', apiKey: 'sk-cli-key' }} }} }} }} }}",
            server.url
        ),
    );
    let v = mem(&sb, &["index", "--json"]).ok().json();
    assert_eq!(v["vectors"]["provider"], "openai", "{v}");
    assert_eq!(v["vectors"]["model"], "nomic-embed-text");
    assert_eq!(v["vectors"]["embedded"], items);
    let v = mem(&sb, &["search", "--json", "where is Peter this week"])
        .ok()
        .json();
    assert_eq!(v["provider"], "openai", "{v}");
    assert_eq!(v["model"], "nomic-embed-text");
    assert_eq!(v["mode"], "hybrid");
    assert!(!results(&v).is_empty(), "{v}");
    let v = mem(&sb, &["status", "--json"]).ok().json();
    assert_eq!(v["provider"], "openai");
    assert_eq!(v["model"], "nomic-embed-text");
    assert_eq!(v["vectors"]["withVector"], items, "{v}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for req in &requests {
        assert_eq!(req.path, "/v1/embeddings");
        assert_eq!(req.header("authorization"), Some("Bearer sk-cli-key"));
        assert_eq!(req.json()["model"], "nomic-embed-text");
    }
    assert_eq!(requests[0].json()["input"].as_array().unwrap().len(), items);
    assert_eq!(
        requests[1].json()["input"],
        serde_json::json!(["where is Peter this week"])
    );
}
