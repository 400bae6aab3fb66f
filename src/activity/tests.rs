use super::*;

fn now(text: &str) -> ZonedDateTime {
    text.parse().unwrap()
}

fn snapshot() -> Snapshot {
    Snapshot {
        agent: "almanac".into(),
        security: SecurityFlags {
            enabled: true,
            llm: false,
            actions: true,
        },
        routines_enabled: 2,
        memory: MemoryCounts {
            json_entries: 0,
            session_daily: 3,
            longterm_lines: 7,
        },
    }
}

#[test]
fn ping_writes_arkas_fields_and_the_event_counter() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(dir.path());
    let t = now("2026-11-29T17:07:22.211727+01:00[Europe/Paris]");
    let out = tracker
        .ping("goal.completed", "cli", &snapshot(), 20, &t)
        .unwrap();
    assert_eq!(out.events_total, 1);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&tracker.path).unwrap()).unwrap();
    assert_eq!(v["ts"], json!(1795968442.211727));
    assert_eq!(v["when"], "2026-11-29 17:07:22");
    assert_eq!(v["last_activity"], "goal.completed");
    assert_eq!(v["source"], "cli");
    assert_eq!(v["agent"], "almanac");
    assert_eq!(
        v["security"],
        json!({"enabled": true, "llm": false, "actions": true})
    );
    assert_eq!(v["routines_enabled"], 2);
    assert_eq!(
        v["memory"],
        json!({"json_entries": 0, "session_daily": 3, "longterm_lines": 7})
    );
    assert_eq!(v["channels"], v["hermes"]);
    assert_eq!(
        v["history"],
        json!([{"ts": 1795968442.211727, "when": "2026-11-29 17:07:22", "activity": "goal.completed", "source": "cli"}])
    );
    assert_eq!(v["events_total"], 1);
    assert_eq!(v["updated_at"], "2026-11-29T17:07:22.211727+01:00");
}

#[test]
fn history_is_a_bounded_ring_and_the_counter_keeps_counting() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(dir.path());
    let t = now("2026-11-29T09:00:00+00:00[UTC]");
    for i in 0..30 {
        tracker
            .ping(&format!("e{i}"), "cli", &snapshot(), 5, &t)
            .unwrap();
    }
    let loaded = tracker.peek().unwrap();
    let rows = history_rows(&loaded.state);
    let names: Vec<&str> = rows.iter().map(|r| r.activity.as_str()).collect();
    assert_eq!(names, vec!["e25", "e26", "e27", "e28", "e29"]);
    assert_eq!(loaded.state["events_total"], 30);
}

#[test]
fn unknown_keys_survive_and_non_ascii_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(dir.path());
    std::fs::write(
        &tracker.path,
        r#"{"custom": {"keep": [1, 2]}, "history": []}"#,
    )
    .unwrap();
    let t = now("2026-11-29T09:00:00+00:00[UTC]");
    tracker
        .ping("café 喜欢", "cli", &snapshot(), 20, &t)
        .unwrap();
    let text = std::fs::read_to_string(&tracker.path).unwrap();
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains("caf\\u00e9 \\u559c\\u6b22"), "{text}");
    assert!(text.starts_with("{\n  \"custom\": {"), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["custom"], json!({"keep": [1, 2]}));
    assert_eq!(v["last_activity"], "café 喜欢");
}

#[test]
fn corrupt_files_are_quarantined_with_a_warning_and_never_crash() {
    let t = now("2026-11-29T09:00:00+00:00[UTC]");
    let cases: &[(&str, &[u8])] = &[
        ("truncated", b"{\"history\": [{\"ts\": 1"),
        ("list", b"[1, 2]"),
        ("not utf-8", b"{\"agent\": \"\xff\xfe\"}"),
        (
            "wrong types",
            b"{\"history\": \"oops\", \"memory\": 5, \"custom\": true}",
        ),
    ];
    for (label, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        let tracker = Tracker::new(dir.path());
        std::fs::write(&tracker.path, bytes).unwrap();
        let out = tracker.ping("after", "cli", &snapshot(), 20, &t).unwrap();
        let warning = out.warning.unwrap_or_else(|| panic!("{label}: no warning"));
        assert!(warning.contains("moved it to"), "{label}: {warning}");
        let moved: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("heartbeat.json.corrupt-")
            })
            .collect();
        assert_eq!(moved.len(), 1, "{label}");
        assert_eq!(
            std::fs::read(moved[0].path()).unwrap(),
            *bytes,
            "{label}: original kept"
        );
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(&tracker.path).unwrap()).unwrap();
        assert_eq!(v["last_activity"], "after", "{label}");
        assert_eq!(v["history"].as_array().unwrap().len(), 1, "{label}");
        // The next ping has nothing left to repair: the warning is shown once.
        assert!(
            tracker
                .ping("again", "cli", &snapshot(), 20, &t)
                .unwrap()
                .warning
                .is_none()
        );
    }
    // Valid fields of a partly broken file carry over.
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(dir.path());
    std::fs::write(
        &tracker.path,
        br#"{"history": "oops", "custom": true, "events_total": 41}"#,
    )
    .unwrap();
    tracker.ping("x", "cli", &snapshot(), 20, &t).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&tracker.path).unwrap()).unwrap();
    assert_eq!(v["custom"], true);
    assert_eq!(v["events_total"], 42);
}

#[test]
fn history_rows_are_normalised() {
    let state: Map<String, Value> = serde_json::from_str(
        r#"{"history": [5, {"activity": "only-activity"}, {"ts": 1.5, "when": "w", "activity": "a", "source": "s"}]}"#,
    )
    .unwrap();
    assert_eq!(
        history_rows(&state),
        vec![
            HistoryRow {
                ts: None,
                when: String::new(),
                activity: "only-activity".into(),
                source: String::new()
            },
            HistoryRow {
                ts: Some(1.5),
                when: "w".into(),
                activity: "a".into(),
                source: "s".into()
            },
        ]
    );
}

#[test]
fn concurrent_pings_from_threads_are_all_counted() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(dir.path());
    let t = now("2026-11-29T09:00:00+00:00[UTC]");
    std::thread::scope(|s| {
        for w in 0..8 {
            let tracker = tracker.clone();
            let t = t.clone();
            s.spawn(move || {
                for i in 0..25 {
                    tracker
                        .ping(&format!("w{w}.{i}"), "cli", &snapshot(), 100, &t)
                        .unwrap();
                }
            });
        }
    });
    let loaded = tracker.peek().unwrap();
    assert_eq!(loaded.state["events_total"], 200);
    assert_eq!(history_rows(&loaded.state).len(), 100);
}

#[test]
fn routine_and_json_memory_counts_tolerate_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("routines.json");
    for (text, want) in [
        (r#"[{"enabled": true}, {}, {"enabled": false}]"#, 2),
        ("[1]", 0),
        ("{broken", 0),
        ("{}", 0),
    ] {
        std::fs::write(&p, text).unwrap();
        assert_eq!(count_routines(&p), want, "{text}");
    }
    assert_eq!(count_routines(&dir.path().join("missing.json")), 0);
    std::fs::write(&p, "[1, 2, 3]").unwrap();
    assert_eq!(count_json_memory(&p), 3);
}

#[test]
fn names_are_one_line_of_at_most_200_characters() {
    let long = "é".repeat(MAX_NAME_CHARS);
    for ok in ["", "goal.completed", "deploy done", "日本語", long.as_str()] {
        assert_eq!(check_name("activity", ok), Ok(()), "{ok:?}");
    }
    for bad in ["a\nb", "a\r", "x\u{2028}y", "\u{0b}", "end\n"] {
        assert!(
            matches!(
                check_name("activity", bad),
                Err(PingError::MultiLine { .. })
            ),
            "{bad:?}"
        );
    }
    let too_long = "a".repeat(MAX_NAME_CHARS + 1);
    assert_eq!(
        check_name("source", &too_long).unwrap_err().to_string(),
        format!(
            "the source has 201 characters; the limit is 200: {:?}…",
            "a".repeat(40)
        )
    );
}

#[test]
fn peek_reads_without_writing_even_a_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = Tracker::new(&dir.path().join("state"));
    let loaded = tracker.peek().unwrap();
    assert!(loaded.state.is_empty() && loaded.warning.is_none());
    assert!(!dir.path().join("state").exists(), "nothing created");

    let t = now("2026-11-29T17:07:22+01:00[Europe/Paris]");
    tracker.ping("one", "cli", &snapshot(), 20, &t).unwrap();
    std::fs::remove_file(dir.path().join("state/heartbeat.json.lock")).unwrap();
    let loaded = tracker.peek().unwrap();
    assert_eq!(loaded.state["last_activity"], "one");
    assert!(
        !dir.path().join("state/heartbeat.json.lock").exists(),
        "no lock file"
    );

    let bad = br#"{"last_activity": "kept", "history": 7}"#;
    std::fs::write(&tracker.path, bad).unwrap();
    let loaded = tracker.peek().unwrap();
    assert_eq!(loaded.state["last_activity"], "kept");
    assert!(!loaded.state.contains_key("history"));
    let warning = loaded.warning.unwrap();
    assert!(
        warning.contains("`history` has the wrong type"),
        "{warning}"
    );
    assert!(
        warning.contains("the next ping moves it aside"),
        "{warning}"
    );
    assert_eq!(std::fs::read(&tracker.path).unwrap(), bad, "left as it is");
    let names: Vec<String> = std::fs::read_dir(dir.path().join("state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["heartbeat.json"], "nothing moved aside");
}
