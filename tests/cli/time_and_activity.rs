//! `agents.defaults.userTimezone` checked where it is set and named where it
//! is read; the activity heartbeat in the notes' zone; what `heartbeat ping`
//! accepts.

use crate::common::Sandbox;

#[test]
fn an_invalid_user_timezone_is_refused_by_set_and_validate_and_named_at_load() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "config",
            "set",
            "agents.defaults.userTimezone",
            "Mars/Olympus",
        ])
        .code(2);
    assert!(
        run.stderr.contains("`agents.defaults.userTimezone`")
            && run.stderr.contains("not a known IANA time zone"),
        "{}",
        run.stderr
    );
    assert!(
        !sb.path(".almanac/config.json5").exists(),
        "nothing written"
    );
    sb.run(&[
        "config",
        "set",
        "agents.defaults.userTimezone",
        "Asia/Tokyo",
    ])
    .ok();
    sb.run(&["--set", "agents.defaults.userTimezone=Nowhere", "status"])
        .code(2);
    // A file edited by hand: validate fails, other commands warn and say
    // which zone they use instead.
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { userTimezone: 'Europe/Pariss' } } }",
    );
    let v = sb.run(&["config", "validate", "--json"]).code(1).json();
    assert_eq!(v["valid"], false);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("`agents.defaults.userTimezone`: `Europe/Pariss` is not a known"),
        "{v}"
    );
    let run = sb
        .run(&[
            "--now",
            "2026-11-29T23:30:00+00:00",
            "session-memory",
            "append",
            "late note",
        ])
        .ok();
    assert!(
        run.stderr.contains(
            "warning: agents.defaults.userTimezone: `Europe/Pariss` is not a known IANA time zone"
        ) && run.stderr.contains("using the host's zone (UTC)"),
        "{}",
        run.stderr
    );
    assert!(sb.path(".almanac/workspace/memory/2026-11-29.md").exists());
    let status = sb.run(&["status"]).ok();
    assert!(
        status.stderr.contains("agents.defaults.userTimezone"),
        "{}",
        status.stderr
    );
    // `config get` says which zone is in use when none is set.
    let fresh = Sandbox::new();
    assert_eq!(
        fresh
            .run(&["config", "get", "agents.defaults.userTimezone"])
            .ok()
            .stdout,
        "UTC\n"
    );
}

#[test]
fn heartbeat_times_are_in_the_notes_zone() {
    let sb = Sandbox::new();
    sb.run(&[
        "config",
        "set",
        "agents.defaults.userTimezone",
        "Asia/Tokyo",
    ])
    .ok();
    // 23:30 UTC is 08:30 the next day in Tokyo; the host runs in UTC.
    let now = "2026-11-29T23:30:00+00:00";
    sb.run(&["--now", now, "session-memory", "append", "Tea with Ana"])
        .ok();
    let note = sb.read(".almanac/workspace/memory/2026-11-30.md");
    assert!(note.contains("- [2026-11-30 08:30] Tea with Ana"), "{note}");
    sb.run(&["--now", now, "heartbeat", "ping", "goal.completed"])
        .ok();
    let file: serde_json::Value =
        serde_json::from_str(&sb.read(".almanac/heartbeat.json")).unwrap();
    assert_eq!(file["when"], "2026-11-30 08:30:00");
    assert_eq!(file["updated_at"], "2026-11-30T08:30:00+09:00");
    assert_eq!(file["ts"], 1_795_995_000.0);
    let history = sb.run(&["heartbeat", "history", "--json"]).ok().json();
    let whens: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["when"].as_str().unwrap())
        .collect();
    assert_eq!(whens, ["2026-11-30 08:30:00", "2026-11-30 08:30:00"]);
}

#[test]
fn ping_accepts_an_empty_activity_and_refuses_multi_line_and_long_names() {
    let sb = Sandbox::new();
    assert_eq!(
        sb.run(&["heartbeat", "ping", ""]).ok().stdout,
        "Heartbeat: \n"
    );
    let longest = "a".repeat(200);
    sb.run(&["heartbeat", "ping", &longest]).ok();
    let run = sb.run(&["heartbeat", "ping", "deploy\ndone"]).code(1);
    assert!(
        run.stderr
            .starts_with("error: the activity must be one line: \"deploy\\ndone\""),
        "{}",
        run.stderr
    );
    let run = sb.run(&["heartbeat", "ping", &"b".repeat(201)]).code(1);
    assert!(
        run.stderr
            .contains("the activity has 201 characters; the limit is 200"),
        "{}",
        run.stderr
    );
    let run = sb
        .run(&["heartbeat", "ping", "x", "--source", "cli\r\nInjected: yes"])
        .code(1);
    assert!(
        run.stderr.contains("the source must be one line"),
        "{}",
        run.stderr
    );
    let history = sb.run(&["heartbeat", "history", "--json"]).ok().json();
    let activities: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["activity"].as_str().unwrap())
        .collect();
    assert_eq!(
        activities,
        ["", longest.as_str()],
        "refused pings are not recorded"
    );
}
