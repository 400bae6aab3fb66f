//! `almanac outbox list | tail`: reading what unattended turns delivered
//! to the outbox. Entries are written through the library, as the gateway
//! and commands write them.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use almanac::testing::append_outbox;
use serde_json::{Value, json};

use crate::common::Sandbox;

const NOW: &str = "2026-11-29T09:00:00+00:00";
const MIN: i64 = 60_000;

fn now_ms() -> i64 {
    NOW.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn texts(v: &Value) -> Vec<&str> {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect()
}

/// Every file and folder under `dir`, as relative paths.
fn tree(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn reading_an_empty_outbox_creates_nothing() {
    let sb = Sandbox::new();
    let list = sb.run(&["outbox", "list", "--json"]).ok();
    assert_eq!(list.json(), json!({"entries": []}));
    assert_eq!(list.stderr, "");
    assert_eq!(
        sb.run(&["outbox", "list"]).ok().stdout,
        "The outbox is empty.\n"
    );
    assert_eq!(sb.run(&["outbox", "tail"]).ok().stdout, "");
    assert_eq!(sb.run(&["outbox", "tail", "--json"]).ok().stdout, "");
    assert!(!sb.path(".almanac").exists(), "no state directory");
    assert_eq!(tree(sb.home()), Vec::<String>::new());
}

#[test]
fn entries_are_listed_newest_last_in_the_users_time_zone() {
    let sb = Sandbox::new();
    let state = sb.path(".almanac");
    // Past the 30 days an outbox keeps: not shown, even before a gateway
    // prunes it.
    append_outbox(
        &state,
        "cron",
        "agent:main:main",
        "Too old",
        now_ms() - 31 * 24 * 60 * MIN,
    )
    .unwrap();
    for n in 0..25 {
        let source = ["heartbeat", "cron", "hook"][n % 3];
        let text = format!("Result {n}\nwith details below");
        append_outbox(
            &state,
            source,
            "agent:main:main",
            &text,
            now_ms() - (25 - n as i64) * MIN,
        )
        .unwrap();
    }
    let before = tree(sb.home());
    let list = sb.run(&["outbox", "list", "--json"]).ok().json();
    let all = texts(&list);
    assert_eq!(all.len(), 20, "twenty by default");
    assert_eq!(all.first(), Some(&"Result 5\nwith details below"));
    assert_eq!(all.last(), Some(&"Result 24\nwith details below"));
    let newest = &list["entries"][19];
    assert_eq!(newest["source"], "heartbeat");
    assert_eq!(newest["sessionKey"], "agent:main:main");
    assert_eq!(newest["agentId"], "main");
    assert_eq!(newest["ts"], now_ms() - MIN);
    assert!(newest["id"].as_str().unwrap().parse::<u64>().is_ok());
    assert!(newest.get("taskId").is_none());
    let ids: Vec<u64> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));

    let everything = sb
        .run(&["outbox", "list", "--limit", "100", "--json"])
        .ok()
        .json();
    assert_eq!(texts(&everything).len(), 25);
    assert!(!texts(&everything).contains(&"Too old"));

    let three = sb
        .run(&["outbox", "list", "--limit", "3", "--json"])
        .ok()
        .json();
    assert_eq!(texts(&three).len(), 3);
    assert_eq!(texts(&three)[2], "Result 24\nwith details below");

    // One line per entry: local time, source, session, the first line.
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { userTimezone: 'Europe/Paris' } } }",
    );
    let text = sb.run(&["outbox", "list", "--limit", "2"]).ok().stdout;
    assert_eq!(
        text,
        "2026-11-29 09:58:00 CET  hook       agent:main:main  Result 23\n\
         2026-11-29 09:59:00 CET  heartbeat  agent:main:main  Result 24\n"
    );
    let tail = sb.run(&["outbox", "tail"]).ok().stdout;
    assert_eq!(tail.lines().count(), 10);
    assert!(tail.lines().last().unwrap().ends_with("Result 24"));

    // A torn line is skipped with a warning.
    let file = state.join("outbox/outbox.jsonl");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"{\"id\":\"1\",\"ts\":");
    std::fs::write(&file, bytes).unwrap();
    let run = sb.run(&["outbox", "list", "--limit", "1", "--json"]).ok();
    assert_eq!(texts(&run.json()), ["Result 24\nwith details below"]);
    assert_eq!(
        run.stderr,
        "warning: skipped 1 unreadable line(s) of the outbox\n"
    );
    let mut after = tree(sb.home());
    after.retain(|p| p != ".almanac/config.json5");
    assert_eq!(after, before, "reading created nothing");
}

#[test]
fn tail_follow_prints_new_entries_as_they_are_written() {
    let sb = Sandbox::new();
    let state = sb.path(".almanac");
    append_outbox(
        &state,
        "heartbeat",
        "agent:main:main",
        "already there",
        now_ms(),
    )
    .unwrap();
    let mut child = sb
        .cmd()
        .args(["outbox", "tail", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, received) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || -> Value {
        let line = received
            .recv_timeout(Duration::from_secs(10))
            .expect("a line within 10 s");
        serde_json::from_str(&line).unwrap()
    };
    assert_eq!(next()["text"], "already there");
    // Written by another process while it follows.
    append_outbox(&state, "cron", "cron:daily", "new one", now_ms() + MIN).unwrap();
    let entry = next();
    assert_eq!(
        (&entry["text"], &entry["source"]),
        (&json!("new one"), &json!("cron"))
    );
    append_outbox(&state, "hook", "hook:gh", "and another", now_ms() + 2 * MIN).unwrap();
    assert_eq!(next()["text"], "and another");
    let _ = child.kill();
    let _ = child.wait();
}
