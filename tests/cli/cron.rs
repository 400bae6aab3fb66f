//! `almanac cron next`: the next fire times of an expression, read in a
//! zone, after a time; the refusals of a bad expression or zone.

use serde_json::json;

use crate::common::Sandbox;

const NOW: &str = "2026-12-02T07:30:00Z";

fn next(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut all = vec!["--now", NOW, "cron", "next"];
    all.extend_from_slice(args);
    all.push("--json");
    sb.run_env(&all, env).ok().json()
}

#[test]
fn json_lists_the_next_fires_after_now_in_utc() {
    let sb = Sandbox::new();
    assert_eq!(
        next(&sb, &["0 9 * * *", "--tz", "Europe/Paris"], &[]),
        json!({"next": [
            "2026-12-02T08:00:00Z",
            "2026-12-03T08:00:00Z",
            "2026-12-04T08:00:00Z",
            "2026-12-05T08:00:00Z",
            "2026-12-06T08:00:00Z",
        ]})
    );
    // Without --tz, the host's zone (TZ); --count.
    assert_eq!(
        next(&sb, &["0 9 * * *", "--count", "2"], &[("TZ", "Asia/Tokyo")]),
        json!({"next": ["2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z"]})
    );
    // The fields may come as separate arguments.
    assert_eq!(
        next(&sb, &["0", "9", "*", "*", "*", "--count", "1"], &[]),
        json!({"next": ["2026-12-02T09:00:00Z"]})
    );
    // Reading needs no state: nothing is created.
    assert!(!sb.path(".almanac").exists());
}

#[test]
fn from_without_an_offset_is_utc_and_seconds_are_kept() {
    let sb = Sandbox::new();
    assert_eq!(
        next(
            &sb,
            &[
                "0 9 * * *",
                "--tz",
                "Europe/Paris",
                "--from",
                "2026-12-10T08:00:00",
                "--count",
                "1"
            ],
            &[("TZ", "America/New_York")]
        ),
        json!({"next": ["2026-12-11T08:00:00Z"]})
    );
    assert_eq!(
        next(
            &sb,
            &[
                "*/20 * * * * *",
                "--tz",
                "UTC",
                "--from",
                "2026-12-10T08:00:00+01:00",
                "--count",
                "3"
            ],
            &[]
        ),
        json!({"next": ["2026-12-10T07:00:20Z", "2026-12-10T07:00:40Z", "2026-12-10T07:01:00Z"]})
    );
}

#[test]
fn daylight_saving_nights_fire_once() {
    let sb = Sandbox::new();
    // 02:30 does not exist in New York on 8 March 2026: it fires at 03:30.
    assert_eq!(
        next(
            &sb,
            &[
                "30 2 * * *",
                "--tz",
                "America/New_York",
                "--from",
                "2026-03-07T12:00:00Z",
                "--count",
                "2"
            ],
            &[]
        ),
        json!({"next": ["2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"]})
    );
    // 01:30 happens twice on 1 November 2026: it fires once.
    assert_eq!(
        next(
            &sb,
            &[
                "30 1 * * *",
                "--tz",
                "America/New_York",
                "--from",
                "2026-10-31T12:00:00Z",
                "--count",
                "2"
            ],
            &[]
        ),
        json!({"next": ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]})
    );
}

#[test]
fn text_names_the_zone_then_one_line_per_fire() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "--now",
            NOW,
            "cron",
            "next",
            "0 9 * * *",
            "--tz",
            "Europe/Paris",
            "--count",
            "2",
        ])
        .ok();
    assert_eq!(
        run.stdout,
        "Time zone: Europe/Paris\n\
         2026-12-02 09:00:00 Europe/Paris (2026-12-02T08:00:00Z)\n\
         2026-12-03 09:00:00 Europe/Paris (2026-12-03T08:00:00Z)\n"
    );
    let never = sb.run(&["cron", "next", "0 0 30 2 *", "--tz", "UTC"]).ok();
    assert_eq!(
        never.stdout,
        "Time zone: UTC\nNo fire time before the year 3000.\n"
    );
}

#[test]
fn a_bad_expression_or_zone_is_refused_in_one_line() {
    let sb = Sandbox::new();
    let run = sb.run(&["cron", "next", "0 61 * * * *", "--json"]).code(2);
    assert_eq!(
        run.stderr,
        "error: invalid cron expression `0 61 * * * *`: field 2 (minute): 61 is out of range 0-59\n"
    );
    assert_eq!(run.stdout, "");
    let run = sb
        .run(&["cron", "next", "0 9 * * *", "--tz", "Mars/Base"])
        .code(2);
    assert_eq!(run.stderr, "error: unknown time zone `Mars/Base`\n");
    let run = sb.run(&["cron", "next", "0 9 * * MON#6"]).code(2);
    assert_eq!(
        run.stderr,
        "error: invalid cron expression `0 9 * * MON#6`: field 5 (day of week): `#6` must be #1 to #5, or #L for the last\n"
    );
    let run = sb.run(&["cron", "next", "0 9 * *"]).code(2);
    assert!(
        run.stderr
            .starts_with("error: invalid cron expression `0 9 * *`: 4 fields"),
        "{}",
        run.stderr
    );
    sb.run(&["cron", "next", "0 9 * * *", "--from", "someday"])
        .code(2);
    sb.run(&["cron", "next", "0 9 * * *", "--count", "1001"])
        .code(2);
    sb.run(&["cron", "next", "0 9 * * *", "--count", "1000"])
        .ok();
}
