use serde_json::{Value, json};

use super::*;
use crate::cron::legacy;

const NOW: i64 = 1_795_000_000_000;

fn check(at_is_new: bool) -> Check<'static> {
    static UTC: std::sync::LazyLock<jiff::tz::TimeZone> =
        std::sync::LazyLock::new(|| jiff::tz::TimeZone::UTC);
    Check {
        now_ms: NOW,
        host_zone: &UTC,
        at_is_new,
    }
}

fn job(value: Value) -> CronJob {
    serde_json::from_value(value).expect("a job")
}

/// A valid isolated agent-turn job to vary.
fn base() -> Value {
    json!({
        "id": "3f2a9c1e-0000-4000-8000-000000000001",
        "name": "daily brief",
        "enabled": true,
        "createdAtMs": NOW,
        "updatedAtMs": NOW,
        "schedule": {"kind": "cron", "expr": "0 7 * * *", "tz": "Europe/Paris"},
        "sessionTarget": "isolated",
        "wakeMode": "now",
        "payload": {"kind": "agentTurn", "message": "Summarise my inbox"},
        "delivery": {"mode": "announce"},
        "state": {}
    })
}

fn with(mut value: Value, path: &[&str], new: Value) -> Value {
    let mut cursor = &mut value;
    for key in &path[..path.len() - 1] {
        cursor = &mut cursor[*key];
    }
    if new.is_null() {
        cursor
            .as_object_mut()
            .unwrap()
            .shift_remove(path[path.len() - 1]);
    } else {
        cursor[path[path.len() - 1]] = new;
    }
    value
}

/// A main-session job with a system event and no delivery.
fn main_event() -> Value {
    let v = with(base(), &["sessionTarget"], json!("main"));
    let v = with(v, &["delivery"], Value::Null);
    with(
        v,
        &["payload"],
        json!({"kind": "systemEvent", "text": "Stand up"}),
    )
}

/// A validation case: what is varied, the job, the field named in the
/// error or None.
type ValidationCase = (&'static str, Value, Option<&'static str>);

/// Where a job runs, for which agent, and where its result goes.
fn target_and_delivery_cases() -> Vec<ValidationCase> {
    vec![
        ("the base job", base(), None),
        ("a main system event", main_event(), None),
        (
            "no name",
            with(base(), &["name"], json!("  ")),
            Some("name"),
        ),
        (
            "main with an agent turn",
            with(
                with(base(), &["sessionTarget"], json!("main")),
                &["delivery"],
                Value::Null,
            ),
            Some("payload"),
        ),
        (
            "isolated with a system event",
            with(
                base(),
                &["payload"],
                json!({"kind": "systemEvent", "text": "x"}),
            ),
            Some("payload"),
        ),
        (
            "session:<id> with an agent turn",
            with(base(), &["sessionTarget"], json!("session:ops")),
            None,
        ),
        (
            "session id with a slash",
            with(base(), &["sessionTarget"], json!("session:a/b")),
            Some("sessionTarget"),
        ),
        (
            "session id with a backslash",
            with(base(), &["sessionTarget"], json!("session:a\\b")),
            Some("sessionTarget"),
        ),
        (
            "session id with NUL",
            with(base(), &["sessionTarget"], json!("session:a\u{0}b")),
            Some("sessionTarget"),
        ),
        (
            "empty session id",
            with(base(), &["sessionTarget"], json!("session:")),
            Some("sessionTarget"),
        ),
        // Whether `agentId` names an agent is the config's to say.
        (
            "any agent id",
            with(base(), &["agentId"], json!("ops")),
            None,
        ),
        (
            "the main agent by name",
            with(base(), &["agentId"], json!("main")),
            None,
        ),
        (
            "webhook to an http URL",
            with(
                base(),
                &["delivery"],
                json!({"mode": "webhook", "to": " https://example.com/hook "}),
            ),
            None,
        ),
        (
            "webhook to something else",
            with(
                base(),
                &["delivery"],
                json!({"mode": "webhook", "to": "ftp://example.com"}),
            ),
            Some("delivery.to"),
        ),
        (
            "webhook without a URL",
            with(base(), &["delivery"], json!({"mode": "webhook"})),
            Some("delivery.to"),
        ),
        (
            "webhook on a main job",
            with(
                main_event(),
                &["delivery"],
                json!({"mode": "webhook", "to": "http://127.0.0.1:9/x"}),
            ),
            None,
        ),
        (
            "announce on a main job",
            with(main_event(), &["delivery"], json!({"mode": "announce"})),
            Some("delivery.mode"),
        ),
        (
            "failure destination on a main announce-less job",
            with(
                main_event(),
                &["delivery"],
                json!({"mode": "none", "failureDestination": {"mode": "announce"}}),
            ),
            Some("delivery.failureDestination"),
        ),
        (
            "webhook failure destination that is not a URL",
            with(
                base(),
                &["delivery"],
                json!({"mode": "announce", "failureDestination": {"mode": "webhook", "to": "nope"}}),
            ),
            Some("delivery.failureDestination.to"),
        ),
    ]
}

/// What a job says and when it runs.
fn payload_and_schedule_cases() -> Vec<ValidationCase> {
    vec![
        (
            "empty message",
            with(base(), &["payload", "message"], json!(" ")),
            Some("payload.message"),
        ),
        (
            "unknown thinking level",
            with(base(), &["payload", "thinking"], json!("deep")),
            Some("payload.thinking"),
        ),
        (
            "failure alert after 0",
            with(base(), &["failureAlert"], json!({"after": 0})),
            Some("failureAlert.after"),
        ),
        (
            "every 0 ms",
            with(
                base(),
                &["schedule"],
                json!({"kind": "every", "everyMs": 0}),
            ),
            Some("schedule.everyMs"),
        ),
        (
            "every with a negative anchor",
            with(
                base(),
                &["schedule"],
                json!({"kind": "every", "everyMs": 1000, "anchorMs": -1}),
            ),
            Some("schedule.anchorMs"),
        ),
        (
            "cron without an expression",
            with(base(), &["schedule"], json!({"kind": "cron"})),
            Some("schedule.expr"),
        ),
        (
            "at that is not a time",
            with(
                base(),
                &["schedule"],
                json!({"kind": "at", "at": "tomorrow-ish"}),
            ),
            Some("schedule.at"),
        ),
    ]
}

#[test]
fn validation_table() {
    let mut cases = target_and_delivery_cases();
    cases.extend(payload_and_schedule_cases());
    let mut failures = Vec::new();
    for (what, value, field) in cases {
        let result = job(value).validate(&check(false));
        let got = match &result {
            Ok(()) => None,
            Err(JobError::Invalid { field, .. }) => Some(field.clone()),
            Err(other) => Some(format!("{other}")),
        };
        if got.as_deref() != field {
            failures.push(format!("{what}: expected {field:?}, got {result:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn at_times_must_lie_between_a_minute_ago_and_ten_years_ahead() {
    let at = |ms: i64| {
        with(
            base(),
            &["schedule"],
            json!({"kind": "at", "at": iso_ms(ms)}),
        )
    };
    let year = 365 * 86_400_000;
    for (ms, ok) in [
        (NOW - 59_000, true),
        (NOW - 61_000, false),
        (NOW + 9 * year, true),
        (NOW + 11 * year, false),
    ] {
        let result = job(at(ms)).validate(&check(true));
        assert_eq!(result.is_ok(), ok, "{}: {result:?}", iso_ms(ms));
        // A time set earlier is not judged again.
        assert!(job(at(ms)).validate(&check(false)).is_ok());
    }
}

#[test]
fn an_invalid_expression_names_its_field_and_position() {
    let bad = with(base(), &["schedule", "expr"], json!("0 25 * * *"));
    match job(bad).validate(&check(false)) {
        Err(JobError::Expression { detail, .. }) => {
            assert_eq!(detail.field, "hour");
            assert_eq!(detail.position, 2);
        }
        other => panic!("{other:?}"),
    }
    let err = job(with(base(), &["schedule", "expr"], json!("61 * * * *")))
        .validate(&check(false))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "`schedule.expr` `61 * * * *`: field 1 (minute): 61 is out of range 0-59"
    );
}

#[test]
fn an_unknown_zone_is_named() {
    let bad = with(base(), &["schedule", "tz"], json!("Mars/Olympus"));
    let err = job(bad).validate(&check(false)).unwrap_err();
    assert!(
        matches!(&err, JobError::UnknownZone(z) if z == "Mars/Olympus"),
        "{err}"
    );
    assert!(err.to_string().contains("IANA"), "{err}");
}

#[test]
fn unknown_fields_are_kept_at_every_level() {
    let mut value = base();
    value["futureField"] = json!({"a": 1});
    value["schedule"]["jitter"] = json!(3);
    value["payload"]["voice"] = json!("calm");
    value["delivery"]["threadId"] = json!(42);
    value["delivery"]["priority"] = json!("high");
    value["state"]["lastSeenBy"] = json!("openclaw");
    let parsed = job(value.clone());
    assert_eq!(serde_json::to_value(&parsed).unwrap(), value);
}

#[test]
fn defaults_and_special_values() {
    let mut value = base();
    value.as_object_mut().unwrap().shift_remove("enabled");
    value.as_object_mut().unwrap().shift_remove("wakeMode");
    value["schedule"] = json!({"kind": "at", "at": "2026-11-29T09:00:00.000Z"});
    value["failureAlert"] = json!(false);
    value["state"] = json!({"lastStatus": "ok", "lastRunStatus": "missed"});
    let parsed = job(value);
    assert!(parsed.enabled, "enabled by default");
    assert_eq!(parsed.wake_mode, WakeMode::Now);
    assert!(parsed.deletes_after_run(), "at jobs are removed by default");
    assert_eq!(parsed.failure_alert, Some(FailureAlert::Off));
    assert_eq!(parsed.catch_up(), CatchUp::Once);
    assert_eq!(
        parsed.state.last_run_status,
        Some(RunStatus::Other("missed".into()))
    );
    let back = serde_json::to_value(&parsed).unwrap();
    assert_eq!(back["failureAlert"], json!(false));
    assert_eq!(back["state"]["lastRunStatus"], json!("missed"));
    // deleteAfterRun is honoured only for `at` jobs.
    let mut every = parsed.clone();
    every.schedule = ScheduleSpec::every(60_000, NOW);
    every.delete_after_run = Some(true);
    assert!(!every.deletes_after_run());
    let mut kept = parsed;
    kept.delete_after_run = Some(false);
    assert!(!kept.deletes_after_run());
}

#[test]
fn catch_up_is_kept_in_the_file() {
    let value = with(base(), &["catchUp"], json!("skip"));
    let parsed = job(value);
    assert_eq!(parsed.catch_up(), CatchUp::Skip);
    assert_eq!(serde_json::to_value(&parsed).unwrap()["catchUp"], "skip");
    assert!(
        serde_json::from_value::<CronJob>(with(base(), &["catchUp"], json!("sometimes"))).is_err()
    );
}

#[test]
fn at_times_are_written_as_javascript_writes_them() {
    assert_eq!(iso_ms(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
    assert_eq!(iso_ms(1_795_000_000_123), "2026-11-18T11:06:40.123Z");
    let spec = ScheduleSpec::at(1_795_000_000_123);
    assert_eq!(spec.at_ms().unwrap(), 1_795_000_000_123);
}

#[test]
fn legacy_jobs_are_read_into_todays_shape() {
    let old = json!({
        "jobId": "legacy-1",
        "name": "old reminder",
        "enabled": "false",
        "schedule": {"atMs": 1_795_000_000_000_i64},
        "message": "Water the plants",
        "model": "openai/gpt-4o",
        "thinking": "low",
        "deliver": true,
        "channel": "telegram",
        "to": "123",
        "bestEffortDeliver": true,
        "state": {}
    });
    let normalized = legacy::normalize(old.as_object().unwrap());
    let job: CronJob = serde_json::from_value(Value::Object(normalized.clone())).unwrap();
    assert_eq!(job.id, "legacy-1");
    assert!(!job.enabled);
    assert_eq!(job.schedule.kind, ScheduleKind::At);
    assert_eq!(job.schedule.at.as_deref(), Some("2026-11-18T11:06:40.000Z"));
    assert_eq!(job.payload.kind, PayloadKind::AgentTurn);
    assert_eq!(job.payload.message.as_deref(), Some("Water the plants"));
    assert_eq!(job.payload.model.as_deref(), Some("openai/gpt-4o"));
    assert_eq!(job.payload.thinking.as_deref(), Some("low"));
    assert_eq!(job.session_target, SessionTarget::Isolated);
    let delivery = job.delivery.unwrap();
    assert_eq!(delivery.mode, DeliveryMode::Announce);
    assert_eq!(delivery.channel.as_deref(), Some("telegram"));
    assert_eq!(delivery.to.as_deref(), Some("123"));
    assert_eq!(delivery.best_effort, Some(true));
    for gone in [
        "jobId",
        "message",
        "model",
        "thinking",
        "deliver",
        "channel",
        "to",
        "bestEffortDeliver",
    ] {
        assert!(!normalized.contains_key(gone), "{gone} stays at the top");
    }

    // A cron schedule spelled `cron`, a system event without a kind, and
    // a delivery mode spelled `deliver`.
    let old = json!({
        "id": "legacy-2",
        "name": "n",
        "schedule": {"cron": "*/5 * * * *", "tz": "UTC"},
        "payload": {"text": "ping", "deliver": false, "provider": "slack"},
        "delivery": {"mode": "deliver"}
    });
    let normalized = legacy::normalize(old.as_object().unwrap());
    let job: CronJob = serde_json::from_value(Value::Object(normalized.clone())).unwrap();
    assert_eq!(job.schedule.kind, ScheduleKind::Cron);
    assert_eq!(job.schedule.expr.as_deref(), Some("*/5 * * * *"));
    assert_eq!(job.payload.kind, PayloadKind::SystemEvent);
    assert_eq!(job.session_target, SessionTarget::Main);
    assert_eq!(job.delivery.unwrap().mode, DeliveryMode::Announce);
    assert!(normalized["payload"].get("deliver").is_none());
    assert!(normalized["payload"].get("provider").is_none());
    assert_eq!(
        normalized["schedule"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap(),
        "kind",
        "the inferred kind leads"
    );

    // `every` inferred; a job written today is left as it is.
    let old = json!({"id": "x", "schedule": {"everyMs": 60000.7}, "payload": {"kind": "systemEvent", "text": "t"}, "sessionTarget": "main"});
    let job: CronJob =
        serde_json::from_value(Value::Object(legacy::normalize(old.as_object().unwrap()))).unwrap();
    assert_eq!(job.schedule.kind, ScheduleKind::Every);
    assert_eq!(job.schedule.every_ms, Some(60_000), "floored");
    let today = base();
    assert_eq!(
        Value::Object(legacy::normalize(today.as_object().unwrap())),
        today
    );
}

#[test]
fn session_targets_read_and_write() {
    for text in ["main", "isolated", "current", "session:ops-room"] {
        let target: SessionTarget = text.parse().unwrap();
        assert_eq!(target.to_string(), text);
    }
    assert!("elsewhere".parse::<SessionTarget>().is_err());
}
