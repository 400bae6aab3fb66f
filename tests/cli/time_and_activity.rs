//! `agents.defaults.userTimezone` checked where it is set and named where it
//! is read; the zone data `status` names, and the system's beside it; the
//! activity heartbeat in the notes' zone; what `heartbeat ping` accepts.

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

/// A TZif (version 2) file for a zone always `offset` seconds from UTC,
/// as a system's zoneinfo directory holds one.
fn fixed_tzif(offset: i32, abbreviation: &str, posix: &str) -> Vec<u8> {
    let chars = [abbreviation.as_bytes(), b"\0"].concat();
    let block = || {
        let mut out = b"TZif2".to_vec();
        out.extend([0u8; 15]);
        // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
        for count in [0u32, 0, 0, 0, 1, chars.len() as u32] {
            out.extend(count.to_be_bytes());
        }
        out.extend(offset.to_be_bytes());
        out.extend([0u8, 0u8]);
        out.extend(&chars);
        out
    };
    [block(), block(), format!("\n{posix}\n").into_bytes()].concat()
}

/// A system zoneinfo directory of release `version` whose Casablanca
/// stays on +01 (as releases before 2026 have it).
fn system_zoneinfo(sb: &Sandbox, version: &str) -> String {
    sb.write("zoneinfo/tzdata.zi", &format!("# version {version}\n"));
    let casablanca = sb.path("zoneinfo/Africa/Casablanca");
    std::fs::create_dir_all(casablanca.parent().unwrap()).unwrap();
    std::fs::write(&casablanca, fixed_tzif(3600, "+01", "<+01>-1")).unwrap();
    sb.path("zoneinfo").display().to_string()
}

#[test]
fn status_names_the_bundled_zone_database() {
    let sb = Sandbox::new();
    let dir = system_zoneinfo(&sb, "2026f");
    let v = sb
        .run_env(&["status", "--json"], &[("TZDIR", &dir)])
        .ok()
        .json();
    let db = &v["timeZoneDatabase"];
    assert_eq!(db["source"], "bundled", "{db}");
    assert_eq!(db["version"], "2026f", "{db}");
    // The host's zone (TZ=UTC), and the system's copy of the same release.
    assert_eq!(db["zone"], "UTC", "{db}");
    assert_eq!(db["system"]["version"], "2026f", "{db}");
    assert_eq!(db["system"]["differs"], false, "{db}");
}

#[test]
fn status_says_when_the_systems_zone_data_differs_for_the_users_zone() {
    let sb = Sandbox::new();
    let dir = system_zoneinfo(&sb, "2025b");
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {userTimezone: 'Africa/Casablanca'}}}",
    );
    let env = [("TZDIR", dir.as_str())];
    let now = ["--now", "2026-06-01T09:00:00+00:00"];
    let text = sb.run_env(&[&now[..], &["status"]].concat(), &env).ok();
    let line = "  Time zone   Africa/Casablanca: almanac uses its bundled tzdata 2026f; the system's tzdata 2025b gives other UTC offsets from 2026-09-20 01:00 UTC\n";
    assert!(text.stdout.ends_with(line), "{}", text.stdout);
    let v = sb
        .run_env(&[&now[..], &["status", "--json"]].concat(), &env)
        .ok()
        .json();
    let system = &v["timeZoneDatabase"]["system"];
    assert_eq!(v["timeZoneDatabase"]["zone"], "Africa/Casablanca");
    assert_eq!(system["version"], "2025b", "{system}");
    assert_eq!(system["differs"], true, "{system}");
    assert_eq!(system["differsFrom"], "2026-09-20T01:00:00Z", "{system}");
    // Once the difference has begun, it is there now.
    let later = sb
        .run_env(&["--now", "2026-12-01T09:00:00+00:00", "status"], &env)
        .ok();
    assert!(
        later.stdout.contains("gives other UTC offsets now\n"),
        "{}",
        later.stdout
    );
    // The same release, or a zone both copies agree on: no line.
    let same = system_zoneinfo(&sb, "2026f");
    let quiet = sb
        .run_env(&[&now[..], &["status"]].concat(), &[("TZDIR", &same)])
        .ok();
    assert!(!quiet.stdout.contains("Time zone"), "{}", quiet.stdout);
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {userTimezone: 'UTC'}}}",
    );
    let dir = system_zoneinfo(&sb, "2025b");
    std::fs::write(sb.path("zoneinfo/UTC"), fixed_tzif(0, "UTC", "UTC0")).unwrap();
    let utc = sb
        .run_env(&[&now[..], &["status"]].concat(), &[("TZDIR", &dir)])
        .ok();
    assert!(!utc.stdout.contains("Time zone"), "{}", utc.stdout);
}
