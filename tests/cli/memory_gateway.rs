//! Memory search through a running gateway: its warm model and the
//! vectors it keeps in memory answer `memory search`, exactly as the
//! command would on its own, and a gateway that cannot answer is passed
//! over.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Run, Sandbox};
use crate::gateway::{Gateway, eventually};
use crate::memory_hybrid::{notes, snippets, with_model};

const NOW: &str = "2026-11-29T09:00:00+00:00";

fn search(sb: &Sandbox, extra: &[&str], query: &str) -> Run {
    let mut args = vec!["--now", NOW, "memory", "search", "--max-results", "5"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", query]);
    sb.run_env(&args, &[("ALMANAC_LOG", "debug")]).ok()
}

fn memory_status(gw: &Gateway) -> Value {
    let (code, status) = gw.request("GET", "/v1/status", None);
    assert_eq!(code, 200, "{status}");
    status["memorySearch"].clone()
}

const LOADS_MODEL: &str = "loading the local sentence model";
const BY_GATEWAY: &str = "memory search answered by the gateway";

#[test]
fn a_running_gateway_embeds_in_the_background_and_answers_searches_as_the_command_would() {
    let sb = Sandbox::new();
    with_model(&sb);
    notes(&sb);
    let gw = Gateway::start(&sb, &[]);
    // Nothing was indexed before: the gateway's watcher builds the index
    // and its embedder gives every note a vector without being asked.
    let embedded = eventually(Duration::from_secs(120), || {
        let m = memory_status(&gw);
        (m["withoutVector"] == 0 && m["embedded"].as_u64() > Some(0)).then_some(m)
    });
    assert_eq!(embedded["embedded"], 10, "{embedded}");
    assert_eq!(embedded["searches"], 0);
    let status = sb.run(&["memory", "status", "--json"]).ok().json();
    assert_eq!(status["vectors"]["withoutVector"], 0, "{status}");

    // A paraphrase sharing no word with its line, answered by the gateway:
    // the command never loads the model.
    let query = "groceries I picked up";
    let first = search(&sb, &["--json"], query);
    assert!(first.stderr.contains(BY_GATEWAY), "{}", first.stderr);
    assert!(!first.stderr.contains(LOADS_MODEL), "{}", first.stderr);
    let first = first.json();
    assert_eq!(first["mode"], "hybrid", "{first}");
    assert_eq!(first["provider"], "local");
    assert_eq!(first["model"], "all-MiniLM-L6-v2");
    let hits = snippets(&first);
    assert!(
        hits.iter().take(3).any(|s| s.contains("milk, eggs")),
        "{hits:#?}"
    );
    assert!(first["results"][0]["vectorScore"].as_f64().unwrap() > 0.0);
    let after = memory_status(&gw);
    assert_eq!(after["searches"], 1, "{after}");
    assert_eq!(after["providerLoaded"], true);
    assert_eq!(after["vectorsInMemory"], 10);
    assert_eq!(after["providerStarts"], 1, "one model for everything");

    // A note appended by another program: the watcher indexes it, the
    // embedder gives it a vector, and the next search takes that one
    // vector from the index's change log.
    let note = sb.path(".almanac/workspace/memory/2026-11-20.md");
    let mut text = std::fs::read_to_string(&note).unwrap();
    text.push_str("- [16:00] Picked up the dry cleaning: two shirts and a wool coat\n");
    std::fs::write(&note, text).unwrap();
    eventually(Duration::from_secs(60), || {
        let m = memory_status(&gw);
        (m["embedded"] == 11 && m["withoutVector"] == 0).then_some(())
    });
    let laundry = search(&sb, &["--json"], "laundry errand").json();
    assert_eq!(laundry["mode"], "hybrid");
    assert!(
        snippets(&laundry)
            .iter()
            .take(3)
            .any(|s| s.contains("dry cleaning")),
        "{laundry}"
    );
    let caught_up = memory_status(&gw);
    assert_eq!(caught_up["vectorsInMemory"], 11, "{caught_up}");
    assert_eq!(caught_up["providerStarts"], 1);

    // What the command will be compared with: text and JSON; a time
    // phrase, a range and a floor travel with the request.
    let through = search(&sb, &["--json"], query);
    assert!(through.stderr.contains(BY_GATEWAY), "{}", through.stderr);
    let through_json_text = through.stdout.clone();
    let through_json = through.json();
    let through_text = search(&sb, &[], query);
    assert!(through_text.stderr.contains(BY_GATEWAY));
    let ranged_args = ["--json", "--since", "2026-11-01", "--min-score", "0.01"];
    let ranged = search(&sb, &ranged_args, "what did I buy last week");
    assert!(ranged.stderr.contains(BY_GATEWAY));
    assert_eq!(memory_status(&gw)["searches"], 5);

    // Settings that choose another model than the gateway's: it refuses,
    // and the command searches on its own, lexically as it was told.
    let lexical = sb
        .run_env(
            &[
                "--now",
                NOW,
                "--set",
                "agents.defaults.memorySearch.provider=none",
                "memory",
                "search",
                "--json",
                "printer paper",
            ],
            &[("ALMANAC_LOG", "debug")],
        )
        .ok();
    assert!(!lexical.stderr.contains(BY_GATEWAY), "{}", lexical.stderr);
    assert!(!lexical.stderr.contains(LOADS_MODEL), "{}", lexical.stderr);
    assert!(
        lexical.stderr.contains("did not answer"),
        "{}",
        lexical.stderr
    );
    assert_eq!(lexical.json()["mode"], "fts-only");
    assert_eq!(memory_status(&gw)["searches"], 5);

    // Without the gateway, the command answers the same, loading the
    // model itself.
    drop(gw);
    let here = search(&sb, &["--json"], query);
    assert!(!here.stderr.contains(BY_GATEWAY), "{}", here.stderr);
    assert!(here.stderr.contains(LOADS_MODEL), "{}", here.stderr);
    assert_eq!(here.json(), through_json);
    // Written by the gateway or here, the document is the same bytes.
    assert_eq!(here.stdout, through_json_text);
    assert_eq!(search(&sb, &[], query).stdout, through_text.stdout);
    assert_eq!(
        search(&sb, &ranged_args, "what did I buy last week").json(),
        ranged.json()
    );
    assert_eq!(search(&sb, &["--json"], "laundry errand").json(), laundry);
}
