use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::config::{CronConfig, CronFailureAlertConfig};

const STARTED: i64 = 1_795_000_000_000;
const ENDED: i64 = STARTED + 5_000;
const MIN: i64 = 60_000;

fn job_with(schedule: Value, extra: Value) -> CronJob {
    let mut value = json!({
        "id": "3f2a9c1e-0000-4000-8000-000000000001",
        "name": "daily brief",
        "enabled": true,
        "createdAtMs": STARTED - 86_400_000,
        "updatedAtMs": STARTED - 86_400_000,
        "schedule": schedule,
        "sessionTarget": "isolated",
        "payload": {"kind": "agentTurn", "message": "Summarise my inbox"},
        "delivery": {"mode": "announce"},
        "state": {}
    });
    for (key, field) in extra.as_object().unwrap() {
        value[key] = field.clone();
    }
    serde_json::from_value(value).expect("a job")
}

fn at_job(extra: Value) -> CronJob {
    job_with(
        json!({"kind": "at", "at": "2026-11-19T09:00:00.000Z"}),
        extra,
    )
}

fn every_job(extra: Value) -> CronJob {
    job_with(json!({"kind": "every", "everyMs": 3_600_000}), extra)
}

fn cron_job(extra: Value) -> CronJob {
    job_with(
        json!({"kind": "cron", "expr": "0 7 * * *", "tz": "UTC"}),
        extra,
    )
}

fn end(status: RunStatus, error: Option<&str>) -> RunEnd {
    RunEnd {
        status,
        error: error.map(str::to_string),
        started_ms: STARTED,
        ended_ms: ENDED,
        manual: false,
        delivered: None,
        delivery_requested: false,
        delivery_error: None,
        timed_out: false,
    }
}

fn ok() -> RunEnd {
    end(RunStatus::Ok, None)
}

fn failed(error: &str) -> RunEnd {
    end(RunStatus::Error, Some(error))
}

fn config() -> CronConfig {
    CronConfig::default()
}

fn alerts_on() -> CronConfig {
    CronConfig {
        failure_alert: CronFailureAlertConfig {
            enabled: true,
            ..CronFailureAlertConfig::default()
        },
        ..CronConfig::default()
    }
}

#[test]
fn transient_classes_follow_the_patterns() {
    use TransientClass::*;
    let cases: &[(&str, Option<TransientClass>)] = &[
        ("Rate limit reached for gpt-4", Some(RateLimit)),
        ("RATE LIMIT", Some(RateLimit)),
        ("rate_limit_exceeded", Some(RateLimit)),
        ("Too Many Requests", Some(RateLimit)),
        ("openai answered HTTP 429: slow down", Some(RateLimit)),
        (
            "Resource has been exhausted (e.g. check quota)",
            Some(RateLimit),
        ),
        ("blocked by Cloudflare", Some(RateLimit)),
        ("Tokens per day limit hit", Some(RateLimit)),
        ("anthropic answered HTTP 529: busy", Some(Overloaded)),
        ("Overloaded", Some(Overloaded)),
        ("the model is experiencing high demand", Some(Overloaded)),
        ("temporarily overloaded, try later", Some(Overloaded)),
        ("Capacity exceeded", Some(Overloaded)),
        ("Network error", Some(Network)),
        ("read ECONNRESET", Some(Network)),
        ("connect ECONNREFUSED 127.0.0.1:443", Some(Network)),
        ("TypeError: fetch failed", Some(Network)),
        ("socket hang up", Some(Network)),
        (
            "cannot reach openai at https://api.openai.com/v1",
            Some(Network),
        ),
        (
            "tcp connect error: Connection refused (os error 111)",
            Some(Network),
        ),
        (
            "the connection to openai closed in the middle of the answer",
            Some(Network),
        ),
        ("Request timeout", Some(Timeout)),
        ("connect ETIMEDOUT 10.0.0.1:443", Some(Timeout)),
        (
            "openai did not finish its answer within 60 s (agents.defaults.timeoutSeconds)",
            Some(Timeout),
        ),
        ("openai answered HTTP 503: unavailable", Some(ServerError)),
        ("status=500", Some(ServerError)),
        ("(502)", Some(ServerError)),
        ("599 at the edge", Some(ServerError)),
        // Not standalone 5xx tokens.
        ("took 500ms", None),
        ("job 15030 failed", None),
        ("error5030", None),
        ("v503", None),
        ("code_503", None),
        ("HTTP 499", None),
        ("HTTP 600", None),
        // Permanent.
        ("invalid api key", None),
        ("openai answered HTTP 401: Unauthorized", None),
        ("cron: job execution timed out", None),
        ("", None),
    ];
    for (error, class) in cases {
        assert_eq!(transient_class(error), *class, "{error:?}");
    }
}

#[test]
fn an_error_in_two_classes_is_retried_when_either_is_allowed() {
    let both = "HTTP 503: temporarily overloaded";
    assert_eq!(transient_class(both), Some(TransientClass::Overloaded));
    assert!(is_transient(both, &[TransientClass::ServerError]));
    assert!(is_transient(both, &[TransientClass::Overloaded]));
    assert!(!is_transient(both, &[TransientClass::Network]));
    assert!(!is_transient("rate limit", &[]));
}

#[test]
fn error_reasons_are_read_from_the_text() {
    let cases: &[(Option<&str>, bool, &str)] = &[
        (Some("anything"), true, "timeout"),
        (None, false, "unknown"),
        (
            Some("openai answered HTTP 401: Unauthorized"),
            false,
            "auth",
        ),
        (Some("HTTP 403"), false, "auth"),
        (Some("Invalid API key provided"), false, "auth"),
        (Some("HTTP 402: Payment Required"), false, "billing"),
        (
            Some("HTTP 429: You exceeded your current quota (insufficient_quota)"),
            false,
            "billing",
        ),
        (Some("Your credit balance is too low"), false, "billing"),
        (Some("HTTP 404: model_not_found"), false, "model_not_found"),
        (
            Some("The model `gpt-9` does not exist"),
            false,
            "model_not_found",
        ),
        (Some("unknown model: foo"), false, "model_not_found"),
        (Some("HTTP 429: Rate limit reached"), false, "rate_limit"),
        (Some("Overloaded"), false, "rate_limit"),
        (Some("request timeout"), false, "timeout"),
        (Some("operation timed out"), false, "timeout"),
        (Some("HTTP 400: Bad Request"), false, "format"),
        (Some("openai sent a malformed answer: eof"), false, "format"),
        (Some("read ECONNRESET"), false, "unknown"),
        (Some("something odd"), false, "unknown"),
    ];
    for (error, timed_out, reason) in cases {
        assert_eq!(error_reason(*error, *timed_out), *reason, "{error:?}");
    }
}

#[test]
fn a_run_writes_its_record_into_the_state() {
    let mut job = every_job(json!({"state": {
        "runningAtMs": STARTED,
        "nextRunAtMs": STARTED,
        "lastError": "old",
        "lastErrorReason": "auth",
        "custom": 1
    }}));
    job.state.last_delivery_error = Some("old".into());
    let mut run = failed("HTTP 401: no");
    run.delivery_requested = true;
    let applied = apply(&job, &run, Some(STARTED + 3_600_000), &config());
    let s = &applied.state;
    assert_eq!(s.running_at_ms, None);
    assert_eq!(s.last_run_at_ms, Some(STARTED));
    assert_eq!(s.last_run_status, Some(RunStatus::Error));
    assert_eq!(s.last_status, Some(RunStatus::Error));
    assert_eq!(s.last_duration_ms, Some(5_000));
    assert_eq!(s.last_error.as_deref(), Some("HTTP 401: no"));
    assert_eq!(s.last_error_reason.as_deref(), Some("auth"));
    assert_eq!(s.last_delivery_error, None);
    assert_eq!(
        s.extra.get("custom"),
        Some(&json!(1)),
        "unknown fields stay"
    );

    let applied = apply(&job, &ok(), Some(STARTED + 3_600_000), &config());
    assert_eq!(applied.state.last_error, None);
    assert_eq!(
        applied.state.last_error_reason, None,
        "only failures have one"
    );
    assert_eq!(applied.state.last_run_status, Some(RunStatus::Ok));

    let skipped = end(
        RunStatus::Skipped,
        Some("main job requires non-empty systemEvent text"),
    );
    let applied = apply(&job, &skipped, Some(STARTED + 3_600_000), &config());
    assert_eq!(
        applied.state.last_error.as_deref(),
        Some("main job requires non-empty systemEvent text")
    );
    assert_eq!(applied.state.last_error_reason, None);

    let mut timed_out = end(RunStatus::Error, None);
    timed_out.timed_out = true;
    let applied = apply(&job, &timed_out, None, &config());
    assert_eq!(applied.state.last_error.as_deref(), Some(TIMED_OUT_ERROR));
    assert_eq!(applied.state.last_error_reason.as_deref(), Some("timeout"));
}

#[test]
fn delivery_status_table() {
    let cases = [
        (Some(true), true, "delivered"),
        (Some(true), false, "delivered"),
        (Some(false), true, "not-delivered"),
        (None, true, "unknown"),
        (None, false, "not-requested"),
    ];
    for (delivered, requested, status) in cases {
        let mut run = ok();
        run.delivered = delivered;
        run.delivery_requested = requested;
        run.delivery_error = delivered
            .is_some_and(|d| !d)
            .then(|| "chat not found".to_string());
        let applied = apply(&every_job(json!({})), &run, None, &config());
        assert_eq!(
            applied.state.last_delivery_status.as_deref(),
            Some(status),
            "{delivered:?} {requested}"
        );
        assert_eq!(applied.state.last_delivered, delivered);
        assert_eq!(applied.state.last_delivery_error, run.delivery_error);
    }
}

#[test]
fn failures_count_and_anything_else_resets_the_count_and_the_alert_time() {
    let job =
        every_job(json!({"state": {"consecutiveErrors": 4, "lastFailureAlertAtMs": STARTED - 1}}));
    let cases = [
        (RunStatus::Error, Some(5), Some(STARTED - 1)),
        (
            RunStatus::Other("crashed".into()),
            Some(5),
            Some(STARTED - 1),
        ),
        (RunStatus::Ok, Some(0), None),
        (RunStatus::Skipped, Some(0), None),
    ];
    for (status, errors, alert_at) in cases {
        let applied = apply(&job, &end(status.clone(), Some("x")), None, &config());
        assert_eq!(applied.state.consecutive_errors, errors, "{status:?}");
        assert_eq!(
            applied.state.last_failure_alert_at_ms, alert_at,
            "{status:?}"
        );
    }
}

/// A one-shot job's run and what follows it.
struct OneShotCase {
    name: &'static str,
    job: Value,
    run: RunEnd,
    config: CronConfig,
    after: AfterRun,
    retry_at: Option<i64>,
}

/// The default config with these retry settings.
fn retry_cfg(max: u32, backoff: &[u64], on: &[TransientClass]) -> CronConfig {
    let mut c = config();
    c.retry.max_attempts = max;
    c.retry.backoff_ms = backoff.to_vec();
    c.retry.retry_on = on.to_vec();
    c
}

/// Runs that end well or are skipped.
fn one_shot_completions() -> Vec<OneShotCase> {
    vec![
        OneShotCase {
            name: "ok removes it (deleteAfterRun unset)",
            job: json!({}),
            run: ok(),
            config: config(),
            after: AfterRun::Delete,
            retry_at: None,
        },
        OneShotCase {
            name: "ok keeps it disabled with deleteAfterRun false",
            job: json!({"deleteAfterRun": false}),
            run: ok(),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "skipped disables, never removes",
            job: json!({"deleteAfterRun": true}),
            run: end(RunStatus::Skipped, Some("nothing to do")),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
    ]
}

/// Runs that fail: retried after a delay, or given up.
fn one_shot_failures() -> Vec<OneShotCase> {
    let all = &TransientClass::ALL;
    let timed_out = {
        let mut r = failed("request timeout");
        r.timed_out = true;
        r
    };
    vec![
        OneShotCase {
            name: "first transient error: retry after 30 s",
            job: json!({}),
            run: failed("HTTP 503"),
            config: config(),
            after: AfterRun::Keep,
            retry_at: Some(ENDED + 30_000),
        },
        OneShotCase {
            name: "second: 1 min",
            job: json!({"state": {"consecutiveErrors": 1}}),
            run: failed("rate limit"),
            config: config(),
            after: AfterRun::Keep,
            retry_at: Some(ENDED + 60_000),
        },
        OneShotCase {
            name: "third: 5 min",
            job: json!({"state": {"consecutiveErrors": 2}}),
            run: failed("fetch failed"),
            config: config(),
            after: AfterRun::Keep,
            retry_at: Some(ENDED + 300_000),
        },
        OneShotCase {
            name: "fourth: attempts used up",
            job: json!({"state": {"consecutiveErrors": 3}}),
            run: failed("fetch failed"),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "the last delay repeats",
            job: json!({"state": {"consecutiveErrors": 3}}),
            run: failed("overloaded"),
            config: retry_cfg(5, &[1_000, 2_000], all),
            after: AfterRun::Keep,
            retry_at: Some(ENDED + 2_000),
        },
        OneShotCase {
            name: "an empty delay list is the default one",
            job: json!({}),
            run: failed("overloaded"),
            config: retry_cfg(3, &[], all),
            after: AfterRun::Keep,
            retry_at: Some(ENDED + 30_000),
        },
        OneShotCase {
            name: "permanent error",
            job: json!({}),
            run: failed("invalid api key"),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "a class not in retryOn",
            job: json!({}),
            run: failed("HTTP 503"),
            config: retry_cfg(3, &[30_000], &[TransientClass::Network]),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "maxAttempts 0",
            job: json!({}),
            run: failed("HTTP 503"),
            config: retry_cfg(0, &[30_000], all),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "stopped at its time limit",
            job: json!({}),
            run: timed_out,
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "disabled while it ran",
            job: json!({"enabled": false}),
            run: failed("HTTP 503"),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
        OneShotCase {
            name: "an error without text is permanent",
            job: json!({}),
            run: end(RunStatus::Error, None),
            config: config(),
            after: AfterRun::Disable,
            retry_at: None,
        },
    ]
}

#[test]
fn one_shot_rules() {
    let mut cases = one_shot_completions();
    cases.extend(one_shot_failures());
    for case in cases {
        let job = at_job(case.job);
        let applied = apply(&job, &case.run, Some(ENDED + 999_999), &case.config);
        assert_eq!(applied.after, case.after, "{}", case.name);
        assert_eq!(applied.retry_at_ms, case.retry_at, "{}", case.name);
        assert_eq!(
            applied.state.next_run_at_ms, case.retry_at,
            "{}: a one-shot's next run is its retry or nothing",
            case.name
        );
        assert_eq!(applied.not_before_ms, None, "{}", case.name);
    }
}

#[test]
fn recurring_rules() {
    struct Case {
        name: &'static str,
        job: CronJob,
        run: RunEnd,
        natural: Option<i64>,
        next: Option<i64>,
        not_before: Option<i64>,
    }
    let manual = |mut r: RunEnd| {
        r.manual = true;
        r
    };
    let cases = vec![
        Case {
            name: "every ok: the natural next",
            job: every_job(json!({})),
            run: ok(),
            natural: Some(ENDED + 3_600_000),
            next: Some(ENDED + 3_600_000),
            not_before: None,
        },
        Case {
            name: "every ok: no refire gap",
            job: every_job(json!({})),
            run: ok(),
            natural: Some(ENDED - 1_000),
            next: Some(ENDED - 1_000),
            not_before: None,
        },
        Case {
            name: "cron ok: at least 2 s after the end",
            job: cron_job(json!({})),
            run: ok(),
            natural: Some(ENDED - 1_000),
            next: Some(ENDED + 2_000),
            not_before: None,
        },
        Case {
            name: "cron skipped: the same",
            job: cron_job(json!({})),
            run: end(RunStatus::Skipped, Some("busy")),
            natural: Some(ENDED + 500),
            next: Some(ENDED + 2_000),
            not_before: None,
        },
        Case {
            name: "cron ok: a later natural next stands",
            job: cron_job(json!({})),
            run: ok(),
            natural: Some(ENDED + 86_400_000),
            next: Some(ENDED + 86_400_000),
            not_before: None,
        },
        Case {
            name: "first error, natural next later than the backoff",
            job: cron_job(json!({})),
            run: failed("boom"),
            natural: Some(ENDED + 86_400_000),
            next: Some(ENDED + 86_400_000),
            not_before: Some(ENDED + 30_000),
        },
        Case {
            name: "first error, natural next sooner: 30 s",
            job: every_job(json!({})),
            run: failed("boom"),
            natural: Some(ENDED + 1_000),
            next: Some(ENDED + 30_000),
            not_before: Some(ENDED + 30_000),
        },
        Case {
            name: "third error: 5 min",
            job: every_job(json!({"state": {"consecutiveErrors": 2}})),
            run: failed("boom"),
            natural: Some(ENDED + 1_000),
            next: Some(ENDED + 5 * MIN),
            not_before: Some(ENDED + 5 * MIN),
        },
        Case {
            name: "fourth error: 15 min",
            job: every_job(json!({"state": {"consecutiveErrors": 3}})),
            run: failed("boom"),
            natural: Some(ENDED + 1_000),
            next: Some(ENDED + 15 * MIN),
            not_before: Some(ENDED + 15 * MIN),
        },
        Case {
            name: "tenth error: capped at 60 min",
            job: every_job(json!({"state": {"consecutiveErrors": 9}})),
            run: failed("boom"),
            natural: Some(ENDED + 1_000),
            next: Some(ENDED + 60 * MIN),
            not_before: Some(ENDED + 60 * MIN),
        },
        Case {
            name: "error without a natural next: nothing to run",
            job: cron_job(json!({})),
            run: failed("boom"),
            natural: None,
            next: None,
            not_before: Some(ENDED + 30_000),
        },
        Case {
            name: "disabled while it ran",
            job: every_job(json!({"enabled": false})),
            run: ok(),
            natural: Some(ENDED + 1_000),
            next: None,
            not_before: None,
        },
        Case {
            name: "a forced run keeps the slot the job waited for",
            job: every_job(json!({"state": {"nextRunAtMs": ENDED + 1_800_000}})),
            run: manual(ok()),
            natural: Some(ENDED + 3_600_000),
            next: Some(ENDED + 1_800_000),
            not_before: None,
        },
        Case {
            name: "a forced run of a job whose slot passed: the natural next",
            job: every_job(json!({"state": {"nextRunAtMs": STARTED - 1}})),
            run: manual(ok()),
            natural: Some(ENDED + 3_600_000),
            next: Some(ENDED + 3_600_000),
            not_before: None,
        },
        Case {
            name: "a scheduled run moves on to the natural next",
            job: every_job(json!({"state": {"nextRunAtMs": ENDED + 1_800_000}})),
            run: ok(),
            natural: Some(ENDED + 3_600_000),
            next: Some(ENDED + 3_600_000),
            not_before: None,
        },
        Case {
            name: "a forced run that failed still backs off",
            job: every_job(json!({"state": {"nextRunAtMs": ENDED + 1_000}})),
            run: manual(failed("boom")),
            natural: Some(ENDED + 3_600_000),
            next: Some(ENDED + 30_000),
            not_before: Some(ENDED + 30_000),
        },
    ];
    for case in cases {
        let applied = apply(&case.job, &case.run, case.natural, &config());
        assert_eq!(applied.state.next_run_at_ms, case.next, "{}", case.name);
        assert_eq!(applied.not_before_ms, case.not_before, "{}", case.name);
        assert_eq!(applied.after, AfterRun::Keep, "{}", case.name);
        assert_eq!(applied.retry_at_ms, None, "{}", case.name);
    }
}

#[test]
fn backoff_steps() {
    let cases = [
        (0, 30_000),
        (1, 30_000),
        (2, 60_000),
        (3, 300_000),
        (4, 900_000),
        (5, 3_600_000),
        (6, 3_600_000),
        (u32::MAX, 3_600_000),
    ];
    for (errors, wait) in cases {
        assert_eq!(error_backoff_ms(errors), wait, "{errors}");
    }
}

#[test]
fn failure_alert_rules() {
    struct Case {
        name: &'static str,
        job: CronJob,
        config: CronConfig,
        alert: bool,
    }
    let prior = |n: u32, extra: Value| {
        let mut value = json!({"state": {"consecutiveErrors": n}});
        for (k, v) in extra.as_object().unwrap() {
            value[k] = v.clone();
        }
        every_job(value)
    };
    let cases = vec![
        Case {
            name: "off by default",
            job: prior(5, json!({})),
            config: config(),
            alert: false,
        },
        Case {
            name: "global on, first failure",
            job: prior(0, json!({})),
            config: alerts_on(),
            alert: false,
        },
        Case {
            name: "global on, second failure",
            job: prior(1, json!({})),
            config: alerts_on(),
            alert: true,
        },
        Case {
            name: "a job's own failureAlert turns it on",
            job: prior(1, json!({"failureAlert": {}})),
            config: config(),
            alert: true,
        },
        Case {
            name: "a job's own `after`",
            job: prior(1, json!({"failureAlert": {"after": 3}})),
            config: alerts_on(),
            alert: false,
        },
        Case {
            name: "a job's own `after`, reached",
            job: prior(2, json!({"failureAlert": {"after": 3}})),
            config: alerts_on(),
            alert: true,
        },
        Case {
            name: "global `after`",
            job: prior(0, json!({})),
            config: {
                let mut c = alerts_on();
                c.failure_alert.after = 1;
                c
            },
            alert: true,
        },
        Case {
            name: "failureAlert false opts out",
            job: prior(5, json!({"failureAlert": false})),
            config: alerts_on(),
            alert: false,
        },
        Case {
            name: "best-effort delivery never alerts",
            job: prior(
                5,
                json!({"delivery": {"mode": "announce", "bestEffort": true}}),
            ),
            config: alerts_on(),
            alert: false,
        },
        Case {
            name: "inside the cooldown",
            job: prior(
                5,
                json!({"state": {"consecutiveErrors": 5, "lastFailureAlertAtMs": ENDED - 59 * MIN}}),
            ),
            config: alerts_on(),
            alert: false,
        },
        Case {
            name: "the cooldown passed",
            job: prior(
                5,
                json!({"state": {"consecutiveErrors": 5, "lastFailureAlertAtMs": ENDED - 60 * MIN}}),
            ),
            config: alerts_on(),
            alert: true,
        },
        Case {
            name: "a job's own cooldown",
            job: prior(
                5,
                json!({
                    "failureAlert": {"cooldownMs": 1_000},
                    "state": {"consecutiveErrors": 5, "lastFailureAlertAtMs": ENDED - 2_000}
                }),
            ),
            config: alerts_on(),
            alert: true,
        },
        Case {
            name: "a global cooldown",
            job: prior(
                5,
                json!({"state": {"consecutiveErrors": 5, "lastFailureAlertAtMs": ENDED - 2 * MIN}}),
            ),
            config: {
                let mut c = alerts_on();
                c.failure_alert.cooldown_ms = 60_000;
                c
            },
            alert: true,
        },
    ];
    for case in cases {
        let before = case.job.state.last_failure_alert_at_ms;
        let applied = apply(&case.job, &failed("boom"), None, &case.config);
        assert_eq!(applied.alert.is_some(), case.alert, "{}", case.name);
        let expected_at = if case.alert { Some(ENDED) } else { before };
        assert_eq!(
            applied.state.last_failure_alert_at_ms, expected_at,
            "{}",
            case.name
        );
    }
    // A success never alerts, even past the threshold.
    let applied = apply(&prior(5, json!({})), &ok(), None, &alerts_on());
    assert_eq!(applied.alert, None);
}

#[test]
fn failure_alert_text_and_destination() {
    let long: String = "é".repeat(150) + &"x".repeat(100);
    let job = every_job(json!({
        "state": {"consecutiveErrors": 2},
        "failureAlert": {"channel": "telegram", "accountId": "bot2"}
    }));
    let mut cfg = alerts_on();
    cfg.failure_alert.mode = Some(crate::config::CronAlertMode::Webhook);
    cfg.failure_alert.channel = Some("slack".into());
    cfg.failure_alert.to = Some("https://alerts.example/hook".into());
    let alert = apply(&job, &failed(&long), None, &cfg).alert.expect("due");
    let quoted: String = long.chars().take(200).collect();
    assert_eq!(
        alert.text,
        format!("Cron job \"daily brief\" failed 3 times\nLast error: {quoted}")
    );
    assert_eq!(alert.mode, Some(DeliveryMode::Webhook), "global fills in");
    assert_eq!(alert.channel.as_deref(), Some("telegram"), "the job's wins");
    assert_eq!(alert.to.as_deref(), Some("https://alerts.example/hook"));
    assert_eq!(alert.account_id.as_deref(), Some("bot2"));

    let job = every_job(json!({
        "state": {"consecutiveErrors": 1},
        "failureAlert": {"mode": "announce", "to": "123"}
    }));
    let alert = apply(&job, &failed("short"), None, &cfg)
        .alert
        .expect("due");
    assert_eq!(
        alert.text,
        "Cron job \"daily brief\" failed 2 times\nLast error: short"
    );
    assert_eq!(alert.mode, Some(DeliveryMode::Announce));
    assert_eq!(alert.to.as_deref(), Some("123"));
    assert_eq!(alert.channel.as_deref(), Some("slack"));
}

#[test]
fn schedule_errors_count_and_disable_at_three() {
    let job = cron_job(json!({"state": {"nextRunAtMs": ENDED}}));
    let (state, disable, event) = schedule_error(&job, "bad expression");
    assert_eq!(state.schedule_error_count, Some(1));
    assert_eq!(state.next_run_at_ms, None);
    assert_eq!(
        state.last_error.as_deref(),
        Some("schedule error: bad expression")
    );
    assert!(!disable);
    assert_eq!(event, None);

    let job = cron_job(json!({"state": {"nextRunAtMs": ENDED, "scheduleErrorCount": 1}}));
    let (state, disable, event) = schedule_error(&job, "bad expression");
    assert_eq!(state.schedule_error_count, Some(2));
    assert!(!disable);
    assert_eq!(event, None);

    let job = cron_job(json!({"state": {"scheduleErrorCount": 2}}));
    let (state, disable, event) = schedule_error(&job, "unknown zone Mars/Olympus");
    assert_eq!(state.schedule_error_count, Some(3));
    assert!(disable);
    let event = event.expect("an event");
    assert!(
        event.starts_with(
            "⚠️ Cron job \"daily brief\" has been auto-disabled after 3 consecutive schedule errors."
        ),
        "{event}"
    );
    assert!(event.contains("unknown zone Mars/Olympus"), "{event}");
    assert!(
        event.contains(&format!("almanac cron enable {}", job.id)),
        "{event}"
    );
}

#[test]
fn a_computed_next_run_ends_a_run_of_schedule_errors() {
    let job = cron_job(json!({"state": {"scheduleErrorCount": 2}}));
    let applied = apply(&job, &ok(), Some(ENDED + 86_400_000), &config());
    assert_eq!(applied.state.schedule_error_count, None);
    let applied = apply(&job, &ok(), None, &config());
    assert_eq!(applied.state.schedule_error_count, Some(2));
}

#[test]
fn backoff_window_before_a_run() {
    let errored = |errors: Option<u32>| {
        let mut state = json!({
            "lastRunAtMs": STARTED,
            "lastDurationMs": 5_000,
            "lastStatus": "error",
            "lastRunStatus": "error"
        });
        if let Some(n) = errors {
            state["consecutiveErrors"] = json!(n);
        }
        json!({ "state": state })
    };
    let cases: Vec<(&str, CronJob, i64, Option<i64>)> = vec![
        (
            "inside, first error",
            every_job(errored(Some(1))),
            ENDED + 29_999,
            Some(ENDED + 30_000),
        ),
        (
            "at its end",
            every_job(errored(Some(1))),
            ENDED + 30_000,
            None,
        ),
        (
            "third error: 5 min",
            cron_job(errored(Some(3))),
            ENDED + 4 * MIN,
            Some(ENDED + 5 * MIN),
        ),
        (
            "no count is one error",
            cron_job(errored(None)),
            ENDED,
            Some(ENDED + 30_000),
        ),
        (
            "last run ok",
            every_job(
                json!({"state": {"lastRunAtMs": STARTED, "lastStatus": "ok", "consecutiveErrors": 0}}),
            ),
            ENDED,
            None,
        ),
        ("never ran", every_job(json!({})), ENDED, None),
        (
            "a one-shot retries on its own",
            at_job(errored(Some(1))),
            ENDED,
            None,
        ),
    ];
    for (name, job, now, until) in cases {
        assert_eq!(in_backoff(&job, now), until, "{name}");
    }
}

#[test]
fn stale_slots() {
    let slot = STARTED;
    let cases = [
        (slot, false),
        (slot + STALE_AFTER_MS, false),
        (slot + STALE_AFTER_MS + 1, true),
        (slot + 24 * 3_600_000, true),
        (slot - 1_000, false),
    ];
    for (started, stale) in cases {
        assert_eq!(is_stale(slot, started), stale, "{}", started - slot);
    }
}

proptest! {
    #[test]
    fn backoff_never_runs_before_the_schedule_nor_waits_past_an_hour(
        ended in 0i64..4_000_000_000_000,
        prior in 0u32..50,
        offset in -10_000_000i64..100_000_000,
        every in any::<bool>(),
    ) {
        let state = json!({"state": {"consecutiveErrors": prior}});
        let job = if every { every_job(state) } else { cron_job(state) };
        let mut run = failed("boom");
        run.started_ms = ended - 1_000;
        run.ended_ms = ended;
        let natural = ended + offset;
        let applied = apply(&job, &run, Some(natural), &config());
        let next = applied.state.next_run_at_ms.expect("a next run");
        prop_assert!(next >= natural);
        prop_assert!(next >= ended + 30_000);
        prop_assert_eq!(applied.not_before_ms, Some(ended + error_backoff_ms(prior + 1)));
        if natural <= ended + 60 * MIN {
            prop_assert!(next <= ended + 60 * MIN);
        } else {
            prop_assert_eq!(next, natural);
        }
    }
}
