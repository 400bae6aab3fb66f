//! One heartbeat run through its gates, prompt and reply protocol, over
//! a real state directory and a manual clock.

use std::sync::Arc;

use super::*;
use crate::app::GlobalOptions;
use crate::host::Host;
use crate::host::ManualClock;

/// An app over a temporary state directory with `config` and, when
/// given, `HEARTBEAT.md`; its clock is `clock`.
fn app_with(
    dir: &std::path::Path,
    config: &str,
    heartbeat_md: Option<&str>,
    clock: &Arc<ManualClock>,
) -> App {
    let state = dir.join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    std::fs::write(state.join("config.json5"), config).unwrap();
    if let Some(text) = heartbeat_md {
        std::fs::write(state.join("workspace/HEARTBEAT.md"), text).unwrap();
    }
    let mut host = Host::with_vars(
        [("ALMANAC_STATE_DIR", state.display().to_string())],
        dir,
        dir,
        "2026-12-01T00:00:00+00:00[UTC]".parse().unwrap(),
    );
    host.set_clock(clock.clone());
    App::load(&GlobalOptions::default(), host).unwrap()
}

/// The model and the delivery: answers from a script, records what
/// it was asked and what was delivered.
#[derive(Default)]
struct Scripted {
    replies: Vec<(String, String)>,
    prompts: Vec<String>,
    delivered: Vec<String>,
    fail_turn: bool,
}

impl Runner for Scripted {
    fn turn(&mut self, request: TurnRequest) -> anyhow::Result<Reply> {
        self.prompts.push(request.message.clone());
        if self.fail_turn {
            anyhow::bail!("the model is unreachable");
        }
        let text = self
            .replies
            .iter()
            .find(|(marker, _)| request.message.contains(marker.as_str()))
            .map(|(_, reply)| reply.clone())
            .unwrap_or_else(|| "HEARTBEAT_OK".to_string());
        Ok(Reply {
            text,
            reasoning: String::new(),
        })
    }

    fn deliver(&mut self, _plan: &Plan, text: &str) -> anyhow::Result<Delivered> {
        self.delivered.push(text.to_string());
        Ok(Delivered::default())
    }
}

const TWO_TASKS: &str = "# Heartbeat\n\ntasks:\n- name: inbox\n  interval: 1h\n  prompt: \"Check the inbox\"\n- name: backup\n  interval: 3h\n  prompt: Check last night's backup\n";

fn outcome(event: &RunEvent) -> String {
    let status = serde_json::to_value(event.status).unwrap();
    match &event.reason {
        Some(reason) => format!("{}/{reason}", status.as_str().unwrap()),
        None => status.as_str().unwrap().to_string(),
    }
}

#[test]
fn a_day_of_half_hourly_heartbeats_calls_the_model_only_for_due_tasks_in_active_hours() {
    let dir = tempfile::tempdir().unwrap();
    let start: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let app = app_with(
        dir.path(),
        r#"{agents: {defaults: {heartbeat: {every: "30m", target: "outbox",
            activeHours: {start: "08:00", end: "20:00", timezone: "UTC"}}}}}"#,
        Some(TWO_TASKS),
        &clock,
    );
    let mut runner = Scripted {
        // The backup check finds a problem at 14:00 and again at 17:00.
        replies: vec![
            ("14:00".into(), "The backup of disk 2 failed.".into()),
            ("17:00".into(), "The backup of disk 2 failed.".into()),
        ],
        ..Scripted::default()
    };
    // (time, outcome, tasks named in the prompt)
    let table: &[(&str, &str, &[&str])] = &[
        ("00:00", "skipped/quiet-hours", &[]),
        ("07:30", "skipped/quiet-hours", &[]),
        ("08:00", "ok-token", &["inbox", "backup"]),
        ("08:30", "skipped/no-tasks-due", &[]),
        ("09:00", "ok-token", &["inbox"]),
        ("09:30", "skipped/no-tasks-due", &[]),
        ("10:00", "ok-token", &["inbox"]),
        ("11:00", "ok-token", &["inbox", "backup"]),
        ("14:00", "sent", &["inbox", "backup"]),
        ("14:30", "skipped/no-tasks-due", &[]),
        ("17:00", "skipped/duplicate", &["inbox", "backup"]),
        ("19:00", "ok-token", &["inbox"]),
        ("19:30", "skipped/no-tasks-due", &[]),
        ("20:00", "skipped/quiet-hours", &[]),
        ("23:30", "skipped/quiet-hours", &[]),
    ];
    let mut seen = std::collections::BTreeMap::new();
    for tick in 0..48 {
        let at = start + jiff::SignedDuration::from_mins(30 * tick);
        clock.set(at);
        let calls = runner.prompts.len();
        let event = run_once(&app, "interval", false, true, &mut runner).unwrap();
        let time = at.strftime("%H:%M").to_string();
        let asked: Vec<String> = if runner.prompts.len() > calls {
            let prompt = runner.prompts.last().unwrap();
            ["inbox", "backup"]
                .iter()
                .filter(|t| prompt.contains(&format!("- {t}:")))
                .map(|t| t.to_string())
                .collect()
        } else {
            Vec::new()
        };
        seen.insert(time, (outcome(&event), asked));
    }
    for (time, expected, tasks) in table {
        let (got, asked) = &seen[*time];
        assert_eq!(got, expected, "at {time}");
        assert_eq!(asked, tasks, "tasks at {time}");
    }
    // Every full hour from 08:00 to 19:00 calls the model; nothing else.
    assert_eq!(runner.prompts.len(), 12);
    let count = |what: &str| seen.values().filter(|(o, _)| o == what).count();
    assert_eq!(count("skipped/quiet-hours"), 24);
    assert_eq!(count("skipped/no-tasks-due"), 12);
    assert_eq!(count("sent"), 1);
    assert_eq!(count("skipped/duplicate"), 1);
    assert_eq!(runner.delivered, ["The backup of disk 2 failed."]);
    // Each prompt carries the time it was made.
    assert!(runner.prompts[0].contains("2026-12-01 08:00"));
    // And the log holds every run.
    assert_eq!(app.heartbeat_runs().newest(100).unwrap().len(), 48);
}

#[test]
fn a_week_with_nothing_to_do_makes_no_model_call() {
    for (name, file) in [
        (
            "effectively empty",
            Some("# Heartbeat\n\n- [ ]\n```\n```\n<!-- add tasks here -->\n"),
        ),
        (
            "no task due",
            Some("tasks:\n- name: weekly\n  interval: 30d\n  prompt: Review the week\n"),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let start: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let clock = Arc::new(ManualClock::new(start));
        let app = app_with(
            dir.path(),
            r#"{agents: {defaults: {heartbeat: {every: "30m", target: "outbox"}}}}"#,
            file,
            &clock,
        );
        if name == "no task due" {
            // The weekly review ran just before the week started.
            remember(
                &app,
                &Plan {
                    due_tasks: vec!["weekly".into()],
                    ..plan_for_test_static(start.as_millisecond() - 1000)
                },
                None,
            )
            .unwrap();
        }
        let mut runner = Scripted::default();
        for tick in 0..7 * 48 {
            clock.set(start + jiff::SignedDuration::from_mins(30 * tick));
            let event = run_once(&app, "interval", false, true, &mut runner).unwrap();
            assert_eq!(event.status, RunStatus::Skipped, "{name}");
        }
        assert!(runner.prompts.is_empty(), "{name}: {:?}", runner.prompts);
    }
}

#[test]
fn the_gates_say_why_a_run_is_skipped() {
    let start: jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    let cases: &[(&str, &str, Option<&str>, bool, &str)] = &[
        (
            "off by interval",
            r#"{agents: {defaults: {heartbeat: {every: "0m"}}}}"#,
            None,
            false,
            "skipped/disabled",
        ),
        (
            "unreadable interval",
            r#"{agents: {defaults: {heartbeat: {every: "soon"}}}}"#,
            None,
            false,
            "skipped/disabled",
        ),
        (
            "busy session",
            "{}",
            None,
            true,
            "skipped/requests-in-flight",
        ),
        (
            "empty file",
            "{}",
            Some("# Tasks\n\n-\n"),
            false,
            "skipped/empty-heartbeat-file",
        ),
        (
            "nothing visible",
            r#"{agents: {defaults: {heartbeat: {target: "outbox"}}}, channels: {outbox: {heartbeat: {showOk: false, showAlerts: false, useIndicator: false}}}}"#,
            None,
            false,
            "skipped/alerts-disabled",
        ),
        (
            "missing file runs with the default prompt",
            r#"{agents: {defaults: {heartbeat: {target: "outbox"}}}}"#,
            None,
            false,
            "sent",
        ),
        (
            "target none: an alert is not delivered",
            r#"{agents: {defaults: {heartbeat: {target: "none"}}}}"#,
            Some("Check the disks."),
            false,
            "skipped/target-none",
        ),
        (
            "webhook without a URL",
            r#"{agents: {defaults: {heartbeat: {target: "webhook"}}}}"#,
            Some("Check the disks."),
            false,
            "skipped/no-target",
        ),
    ];
    for (name, config, file, busy, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(start));
        let app = app_with(dir.path(), config, *file, &clock);
        let mut runner = Scripted {
            replies: vec![("Current time".into(), "Disk 2 is almost full.".into())],
            ..Scripted::default()
        };
        let event = run_once(&app, "interval", *busy, true, &mut runner).unwrap();
        assert_eq!(outcome(&event), *expected, "{name}");
        let called = !expected.contains("disabled")
            && !expected.contains("in-flight")
            && !expected.contains("empty")
            && *expected != "skipped/alerts-disabled";
        assert_eq!(!runner.prompts.is_empty(), called, "{name}");
        assert_eq!(!runner.delivered.is_empty(), *expected == "sent", "{name}");
    }
    // The switch.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let app = app_with(dir.path(), "{}", None, &clock);
    app.heartbeat_runs().set_enabled(false).unwrap();
    let mut runner = Scripted::default();
    let event = run_once(&app, "manual", false, true, &mut runner).unwrap();
    assert_eq!(outcome(&event), "skipped/disabled");
    assert!(runner.prompts.is_empty());
}

#[test]
fn a_wake_bypasses_the_file_gates_and_a_failed_turn_keeps_tasks_due() {
    let start: jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let app = app_with(
        dir.path(),
        r#"{agents: {defaults: {heartbeat: {target: "outbox"}}}}"#,
        Some("# Heartbeat\n"),
        &clock,
    );
    let mut runner = Scripted::default();
    assert_eq!(
        outcome(&run_once(&app, "interval", false, true, &mut runner).unwrap()),
        "skipped/empty-heartbeat-file"
    );
    assert_eq!(
        outcome(&run_once(&app, "wake", false, true, &mut runner).unwrap()),
        "ok-token"
    );
    assert_eq!(runner.prompts.len(), 1);

    let dir = tempfile::tempdir().unwrap();
    let app = app_with(dir.path(), "{}", Some(TWO_TASKS), &clock);
    let mut failing = Scripted {
        fail_turn: true,
        ..Scripted::default()
    };
    let event = run_once(&app, "interval", false, true, &mut failing).unwrap();
    assert_eq!(event.status, RunStatus::Failed);
    assert!(event.reason.unwrap().contains("unreachable"));
    // Nothing ran to completion: both tasks are still due.
    clock.set(start + jiff::SignedDuration::from_mins(1));
    let mut runner = Scripted::default();
    run_once(&app, "interval", false, true, &mut runner).unwrap();
    assert!(runner.prompts[0].contains("- inbox:") && runner.prompts[0].contains("- backup:"));
}

#[test]
fn replies_follow_the_protocol_and_never_deliver_the_token() {
    let start: jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("", "ok-empty", None),
        ("HEARTBEAT_OK", "ok-token", None),
        ("**HEARTBEAT_OK**", "ok-token", None),
        ("HEARTBEAT_OK.", "ok-token", None),
        ("All quiet today. HEARTBEAT_OK", "ok-token", None),
        (
            "Disk 2 is almost full.",
            "sent",
            Some("Disk 2 is almost full."),
        ),
        (
            "Disk 2 is almost full, HEARTBEAT_OK otherwise, please look at it soon because it will stop the backups if it fills up completely, which would be bad for everyone who relies on the nightly copies of their files and photos and documents.",
            "sent",
            None,
        ),
    ];
    for (reply, expected, delivered) in cases {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(start));
        let app = app_with(
            dir.path(),
            r#"{agents: {defaults: {heartbeat: {target: "outbox"}}}}"#,
            None,
            &clock,
        );
        let mut runner = Scripted {
            replies: vec![("HEARTBEAT".into(), reply.to_string())],
            ..Scripted::default()
        };
        let event = run_once(&app, "interval", false, true, &mut runner).unwrap();
        assert_eq!(outcome(&event), *expected, "{reply:?}");
        if let Some(text) = delivered {
            assert_eq!(runner.delivered, [text.to_string()]);
        }
        for text in &runner.delivered {
            assert!(!text.contains("HEARTBEAT_OK"), "{text:?}");
        }
        if *expected == "sent" {
            assert_eq!(runner.delivered.len(), 1);
        } else {
            assert!(runner.delivered.is_empty(), "{reply:?}");
        }
    }
}

/// Writes the agent's session entries as `entries` (key → entry).
fn write_sessions(app: &App, entries: serde_json::Value) {
    let store = app.sessions(None).store();
    store
        .update(app.host.now_ts(), |map| {
            for (key, value) in entries.as_object().unwrap() {
                map.insert(key.clone(), value.clone());
            }
        })
        .unwrap();
}

#[test]
fn deliveries_leave_the_route_alone_and_last_follows_the_chat_the_user_wrote_from() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let config =
        r#"{agents: {defaults: {heartbeat: {target: "last", to: "https://hooks.example/beat"}}}}"#;
    let app = app_with(dir.path(), config, None, &clock);
    // No chat yet: `last` is the outbox, and delivering there makes it no
    // route.
    assert_eq!(last_route(&app).channel, "outbox");
    let mut runner = Scripted {
        replies: vec![("HEARTBEAT".into(), "Disk 2 is almost full.".into())],
        ..Scripted::default()
    };
    let event = run_once(&app, "interval", false, true, &mut runner).unwrap();
    assert_eq!(
        (outcome(&event), event.channel.as_deref()),
        ("sent".into(), Some("outbox"))
    );
    let key = app.sessions(None).resolve_key(None);
    let kept = stored_entry(&app, &key).unwrap();
    assert_eq!(kept.last_channel, None, "a delivery sets no route");
    // Two chats; the newest message is from the second: `last` is there.
    write_sessions(
        &app,
        serde_json::json!({
            "agent:main:http:direct:ada": {"sessionId": "a", "updatedAt": 5, "lastInteractionAt": 10,
                "lastChannel": "http", "lastTo": "ada"},
            "agent:main:telegram:direct:42": {"sessionId": "b", "updatedAt": 5, "lastInteractionAt": 20,
                "lastChannel": "telegram", "lastTo": "42", "lastAccountId": "ops"},
        }),
    );
    let route = last_route(&app);
    assert_eq!((route.channel, route.to.as_deref()), ("chat", Some("42")));
    assert_eq!(route.route.unwrap().account_id.as_deref(), Some("ops"));
    let mut runner = Scripted {
        replies: vec![("HEARTBEAT".into(), "Disk 3 is failing.".into())],
        ..Scripted::default()
    };
    let event = run_once(&app, "interval", false, true, &mut runner).unwrap();
    assert_eq!(outcome(&event), "sent");
    assert_eq!(
        (event.channel.as_deref(), event.to.as_deref()),
        (Some("telegram"), Some("42"))
    );
    assert_eq!(runner.delivered, ["Disk 3 is failing."]);
    // The chats' routes are as the users left them.
    let (map, _) = app.sessions(None).store().load();
    let ada = SessionEntry::from_value(&map["agent:main:http:direct:ada"]).unwrap();
    assert_eq!(ada.last_to.as_deref(), Some("ada"));
    let main = SessionEntry::from_value(&map[&key]).unwrap();
    assert_eq!(main.last_channel, None);
}

#[test]
fn a_main_session_an_earlier_version_routed_to_the_webhook_keeps_that_route() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let config =
        r#"{agents: {defaults: {heartbeat: {target: "last", to: "https://hooks.example/beat"}}}}"#;
    let app = app_with(dir.path(), config, None, &clock);
    write_sessions(
        &app,
        serde_json::json!({"agent:main:main": {"sessionId": "s", "updatedAt": 1, "lastChannel": "webhook"}}),
    );
    let route = last_route(&app);
    assert_eq!(
        (route.channel, route.to.as_deref()),
        ("webhook", Some("https://hooks.example/beat"))
    );
    // Turned back to the outbox, the heartbeat is no route to it.
    let outbox = r#"{agents: {defaults: {heartbeat: {target: "outbox", to: "https://hooks.example/beat"}}}}"#;
    let app = app_with(dir.path(), outbox, None, &clock);
    assert_eq!(last_route(&app).channel, "outbox");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn with_show_ok_off_no_delivered_text_holds_the_token(
        reply in "[ a-zA-Z.!*_`<>/]{0,40}(HEARTBEAT_OK)?[ a-zA-Z.!*_`<>/]{0,40}(HEARTBEAT_OK)?[ a-zA-Z.,]{0,400}",
        reasoning in "[ a-zA-Z.]{0,20}(HEARTBEAT_OK)?[ a-z]{0,20}",
    ) {
        let start: jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let plan = Plan {
            include_reasoning: true,
            ..plan_for_test_static(start.as_millisecond())
        };
        let reply = Reply { text: reply, reasoning };
        if let Verdict::Deliver(texts) = judge(&plan, &reply, None) {
            for text in texts {
                proptest::prop_assert!(!text.contains("HEARTBEAT_OK"), "{text:?}");
            }
        }
    }
}

fn plan_for_test_static(started_ms: i64) -> Plan {
    Plan {
        request: TurnRequest::default(),
        base_key: "agent:main:main".into(),
        due_tasks: Vec::new(),
        destination: Destination {
            channel: "outbox",
            to: None,
            unresolved: None,
            route: None,
        },
        visibility: HeartbeatVisibility {
            show_ok: false,
            show_alerts: true,
            use_indicator: true,
        },
        ack_max_chars: 300,
        include_reasoning: false,
        started_ms,
        warnings: Vec::new(),
    }
}
