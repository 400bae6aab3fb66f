use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use serde_json::json;

use super::*;
use crate::app::GlobalOptions;
use crate::cron::job::FailureAlert;
use crate::host::Host;

const NOW: &str = "2026-11-29T09:00:00+00:00[UTC]";

fn app(dir: &Path) -> App {
    let state = dir.join("state");
    let host = Host::with_vars(
        [("ALMANAC_STATE_DIR", state.display().to_string())],
        dir,
        dir,
        NOW.parse().unwrap(),
    );
    App::load(&GlobalOptions::default(), host).expect("app loads")
}

fn flags(name: &str) -> JobFlags {
    JobFlags {
        name: Some(name.into()),
        every: Some("1h".into()),
        system_event: Some("ping".into()),
        ..JobFlags::default()
    }
}

#[test]
fn concurrent_adds_lose_no_job() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    std::thread::scope(|scope| {
        for t in 0..2 {
            let app = &app;
            scope.spawn(move || {
                for n in 0..10 {
                    add(app, &flags(&format!("t{t} n{n}"))).unwrap();
                }
            });
        }
    });
    let listing = list(&app, &ListQuery::default()).unwrap();
    assert_eq!(listing.total, 20);
    let mut names: Vec<String> = listing
        .jobs
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20);
}

#[test]
fn edits_change_only_what_is_given_and_keep_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let added = add(
        &app,
        &JobFlags {
            name: Some("hourly".into()),
            cron: Some("0 * * * *".into()),
            message: Some("check".into()),
            model: Some("openai/gpt-4o".into()),
            ..JobFlags::default()
        },
    )
    .unwrap();
    let id = added.job.id.clone();
    assert_eq!(
        added.job.schedule.stagger_ms,
        Some(300_000),
        "top of the hour"
    );
    assert_eq!(
        added.job.delivery.as_ref().map(|d| d.mode),
        Some(DeliveryMode::Announce)
    );

    // A new expression keeps the job's stagger; --tz alone moves it.
    let edited = edit(
        &app,
        &id[..8],
        &JobFlags {
            cron: Some("0 */2 * * *".into()),
            ..JobFlags::default()
        },
    )
    .unwrap();
    assert_eq!(edited.job.schedule.stagger_ms, Some(300_000));
    assert_eq!(edited.job.payload.model.as_deref(), Some("openai/gpt-4o"));
    let moved = edit(
        &app,
        &id,
        &JobFlags {
            tz: Some("Asia/Tokyo".into()),
            exact: true,
            ..JobFlags::default()
        },
    )
    .unwrap();
    assert_eq!(moved.job.schedule.tz.as_deref(), Some("Asia/Tokyo"));
    assert_eq!(moved.job.schedule.stagger_ms, Some(0));
    assert_eq!(moved.job.schedule.expr.as_deref(), Some("0 */2 * * *"));

    // Turning it into a reminder targets the main session and drops the
    // announce, saying so.
    let reminder = edit(
        &app,
        &id,
        &JobFlags {
            system_event: Some("stretch".into()),
            ..JobFlags::default()
        },
    )
    .unwrap();
    assert_eq!(reminder.job.session_target, SessionTarget::Main);
    assert_eq!(reminder.job.payload.kind, PayloadKind::SystemEvent);
    assert_eq!(reminder.job.delivery, None);
    assert_eq!(reminder.notes.len(), 1, "{:?}", reminder.notes);

    // Failure alerts: on with details, then off.
    let alert = edit(
        &app,
        &id,
        &JobFlags {
            failure_alert_after: Some(3),
            failure_alert_cooldown: Some("30m".into()),
            ..JobFlags::default()
        },
    )
    .unwrap();
    match alert.job.failure_alert {
        Some(FailureAlert::On(config)) => {
            assert_eq!(config.after, Some(3));
            assert_eq!(config.cooldown_ms, Some(1_800_000));
        }
        other => panic!("{other:?}"),
    }
    let off = edit(
        &app,
        &id,
        &JobFlags {
            failure_alert: Some(false),
            ..JobFlags::default()
        },
    )
    .unwrap();
    assert_eq!(off.job.failure_alert, Some(FailureAlert::Off));

    // Nothing given, a job that breaks a rule: refused, nothing written.
    let before = std::fs::read(app.cron_store_path()).unwrap();
    assert!(edit(&app, &id, &JobFlags::default()).is_err());
    let err = edit(
        &app,
        &id,
        &JobFlags {
            session: Some("isolated".into()),
            ..JobFlags::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("`payload`"), "{err}");
    assert_eq!(std::fs::read(app.cron_store_path()).unwrap(), before);
}

#[test]
fn current_resolves_to_the_callers_session_or_isolated() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let turn = |key: Option<&str>| JobFlags {
        name: Some("t".into()),
        every: Some("1h".into()),
        message: Some("m".into()),
        session: Some("current".into()),
        session_key: key.map(str::to_string),
        ..JobFlags::default()
    };
    let with_key = add(&app, &turn(Some("agent:main:telegram:42"))).unwrap();
    assert_eq!(
        with_key.job.session_target,
        SessionTarget::Session("agent:main:telegram:42".into())
    );
    let without = add(&app, &turn(None)).unwrap();
    assert_eq!(without.job.session_target, SessionTarget::Isolated);
}

#[test]
fn the_store_follows_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("state/config.json5"),
        "{ cron: { store: '~/elsewhere/jobs.json', runLog: { maxBytes: '1kb', keepLines: 3 } } }",
    )
    .unwrap();
    let app = app(dir.path());
    assert_eq!(
        app.cron_store_path(),
        dir.path().join("elsewhere/jobs.json")
    );
    assert_eq!(
        app.cron_store().runs_dir(),
        dir.path().join("elsewhere/runs")
    );
    let limits = runlog::Limits::from(&app.config.config.cron.run_log);
    assert_eq!(
        limits,
        runlog::Limits {
            max_bytes: 1024,
            keep_lines: 3
        }
    );
    add(&app, &flags("there")).unwrap();
    assert!(dir.path().join("elsewhere/jobs.json").exists());
}

/// A one-request HTTP server standing in for the gateway: records the
/// request and answers `answer`.
pub(crate) fn fake_gateway(answer: serde_json::Value) -> (u16, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let text = answer.to_string();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
        .unwrap();
        format!("{head}{}", String::from_utf8(body).unwrap())
    });
    (port, handle)
}

/// Makes the gateway on `port` (this process) the one `app` finds, as
/// long as the lock returned (none when this test holds it already) is
/// kept.
#[must_use]
pub(crate) fn publish_fake_gateway(app: &App, port: u16) -> Option<crate::durable::HeldLock> {
    let info = crate::gateway::state::test_info(std::process::id(), "127.0.0.1", port);
    crate::gateway::state::publish(&app.paths, &info).unwrap();
    crate::gateway::state::acquire_lock(&app.paths).unwrap()
}

#[test]
fn run_asks_the_gateway_for_the_whole_id_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let job = add(&app, &flags("now please")).unwrap().job;
    let err = run(&app, &job.id, false).unwrap_err();
    assert!(
        err.downcast_ref::<crate::gateway::client::NotRunning>()
            .is_some(),
        "{err}"
    );
    let (port, server) = fake_gateway(json!({"ok": true, "ran": false, "reason": "not-due"}));
    let _gateway = publish_fake_gateway(&app, port);
    let answer = run(&app, &job.id[..8], true).unwrap();
    assert_eq!(answer["reason"], "not-due");
    assert_eq!(answer["id"], job.id.as_str());
    let request = server.join().unwrap();
    // The id is one path segment, percent-encoded.
    let line = request.lines().next().unwrap();
    let path = percent_encoding::percent_decode_str(line)
        .decode_utf8()
        .unwrap();
    assert_eq!(path, format!("POST /v1/cron/jobs/{}/run HTTP/1.1", job.id));
    assert!(request.ends_with(r#"{"mode":"due"}"#), "{request}");
}

/// The URLs the user sets in a job the model made become the user's (and
/// so get `cron.webhookToken`); the model can neither claim that, nor let
/// external content reach the model unmarked.
#[test]
fn what_the_user_sets_in_a_models_job_is_the_users_and_the_model_cannot_claim_it() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let model = Requester::Agent {
        agent_id: "main".into(),
        session_key: "agent:main:main".into(),
    };
    let job = json!({
        "name": "Report",
        "schedule": {"kind": "every", "everyMs": 3_600_000},
        "payload": {"kind": "agentTurn", "message": "Report"},
        "delivery": {"mode": "webhook", "to": "https://hooks.example.org/model"},
    });
    let added = add_from_json(&app, &job, &model, |_| {}).unwrap();
    let id = added.job.id.clone();
    assert!(added.job.url_is_models("https://hooks.example.org/model"));
    let claim = update_from_json(
        &app,
        &id,
        &json!({"userWebhooks": ["https://hooks.example.org/model"]}),
        &model,
    );
    assert!(claim.unwrap_err().to_string().contains("userWebhooks"));
    let unsafe_patch = json!({"payload": {"allowUnsafeExternalContent": true}});
    let err = update_from_json(&app, &id, &unsafe_patch, &model).unwrap_err();
    assert!(
        err.to_string().contains("allowUnsafeExternalContent"),
        "{err}"
    );
    let mut unsafe_job = job.clone();
    unsafe_job["payload"]["allowUnsafeExternalContent"] = json!(true);
    assert!(add_from_json(&app, &unsafe_job, &model, |_| {}).is_err());
    // The user's edit of the webhook makes that URL the user's.
    let edited = edit(
        &app,
        &id,
        &JobFlags {
            delivery: Some(DeliveryChoice::Webhook(
                "https://hooks.example.org/mine".into(),
            )),
            ..JobFlags::default()
        },
    )
    .unwrap();
    assert!(edited.job.created_by_agent());
    assert!(!edited.job.url_is_models("https://hooks.example.org/mine"));
    // The user may also let external content through.
    let allowed = update_from_json(&app, &id, &unsafe_patch, &Requester::User).unwrap();
    assert_eq!(
        allowed.job.payload.allow_unsafe_external_content,
        Some(true)
    );
}

/// The runs of a job removed since (a one-shot that ran) are still found
/// by the first characters of its id.
#[test]
fn runs_of_a_removed_job_are_found_by_its_id_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let added = add(&app, &flags("once")).unwrap();
    let id = added.job.id.clone();
    let mut record = crate::cron::runlog::RunRecord::finished(&id, app.now_ms());
    record.status = Some(crate::cron::job::RunStatus::Ok);
    let runs_dir = app.cron_store().runs_dir();
    crate::cron::runlog::append(
        &runs_dir,
        &record,
        crate::cron::runlog::Limits::from(&app.config.config.cron.run_log),
    )
    .unwrap();
    remove(&app, &id).unwrap();
    let page = runs(&app, &id[..8], &RunQuery::default()).unwrap();
    assert_eq!(page.job_id, id);
    assert_eq!(page.entries.len(), 1);
    let err = runs(&app, "ffffffff-nothing", &RunQuery::default()).unwrap_err();
    assert!(err.to_string().contains("ffffffff-nothing"), "{err}");
}
