//! A hand-broken `jobs.json` under a running gateway: restored from the
//! last state almanac knew to be good (its own last write), and said
//! where a user looks.

use std::time::Duration;

use serde_json::Value;

use crate::common::Sandbox;
use crate::gateway::{Gateway, eventually};

const STORE: &str = ".almanac/cron/jobs.json";

fn add(sb: &Sandbox, name: &str) -> String {
    let added = sb
        .run(&[
            "cron",
            "add",
            "--name",
            name,
            "--every",
            "1h",
            "--system-event",
            name,
            "--json",
        ])
        .ok()
        .json();
    added["job"]["id"].as_str().unwrap().to_string()
}

fn cron_component(gw: &Gateway) -> Value {
    let (_, status) = gw.request("GET", "/v1/status", None);
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cron")
        .unwrap()
        .clone()
}

/// Add a job and disable another, then break `jobs.json` by hand: the
/// store comes back with the job just added and the other still
/// disabled (not the older backup), and `gateway status`, `cron status`
/// and the main session all say what happened.
#[test]
fn a_hand_broken_store_is_restored_to_the_last_change_and_said() {
    let sb = Sandbox::new();
    let kept = add(&sb, "kept");
    let gw = Gateway::start(&sb, &[]);
    let added = add(&sb, "just added");
    sb.run(&["cron", "disable", &kept]).ok();
    let good = sb.read(STORE);
    assert!(good.contains(&added));
    // A typo by hand, and the gateway told (as at its next tick).
    sb.write(STORE, &good.replacen("\"jobs\": [", "\"jobs\": [,", 1));
    let (code, _) = gw.request("POST", "/v1/cron/reload", Some(&serde_json::json!({})));
    assert_eq!(code, 200);
    let component = eventually(Duration::from_secs(30), || {
        let c = cron_component(&gw);
        c["lastError"].is_string().then_some(c)
    });
    let said = component["lastError"].as_str().unwrap();
    assert!(
        said.contains("did not parse") && said.contains("last good copy"),
        "{said}"
    );
    let restored: Value = serde_json::from_str(&sb.read(STORE)).unwrap();
    let jobs = restored["jobs"].as_array().unwrap();
    assert!(jobs.iter().any(|j| j["id"] == added.as_str()), "{restored}");
    let other = jobs.iter().find(|j| j["id"] == kept.as_str()).unwrap();
    assert_eq!(other["enabled"], false, "still disabled: {other}");
    let status = sb.run(&["cron", "status", "--json"]).ok();
    let damaged = status.json()["damaged"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(damaged.len(), 1, "{}", status.stdout);
    assert!(status.stderr.contains("did not parse"), "{}", status.stderr);
    let queue = eventually(Duration::from_secs(10), || {
        let text =
            std::fs::read_to_string(sb.path(".almanac/agents/main/sessions/system-events.json"))
                .ok()?;
        text.contains("did not parse").then_some(text)
    });
    assert!(queue.contains("cron list --all"), "{queue}");
    // Read again as it was restored, the store still says it was
    // repaired; a change by the user clears that.
    let (code, _) = gw.request("POST", "/v1/cron/reload", Some(&serde_json::json!({})));
    assert_eq!(code, 200);
    let (code, _) = gw.request("GET", "/v1/status", None);
    assert_eq!(code, 200);
    assert!(cron_component(&gw)["lastError"].is_string());
    add(&sb, "after the repair");
    eventually(Duration::from_secs(30), || {
        cron_component(&gw)["lastError"].is_null().then_some(())
    });
    drop(gw);
}
