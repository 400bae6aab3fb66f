//! Cron posts against a local webhook receiver (an axum server on
//! 127.0.0.1), the outbox and the intake; the runner's turns against the
//! local scripted model server.

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::gateway::supervisor::Component;

// The provider tests' scripted model server, in a module of its own here.
#[allow(clippy::duplicate_mod)]
#[path = "../../tests/support/scripted_server.rs"]
mod scripted;
use scripted::{Reply, ScriptedServer, sse};

/// The test gateway's fixed time: 2026-12-01T10:00:00Z.
const NOW: i64 = 1_796_119_200_000;
const HOUR: i64 = 3_600_000;

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Got {
    headers: HeaderMap,
    body: Value,
}

/// A webhook receiver that takes everything (200).
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    async fn start() -> (String, Receiver) {
        let receiver = Receiver::default();
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, receiver)
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    fn bodies(&self) -> Vec<Value> {
        self.got().into_iter().map(|g| g.body).collect()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> &'static str {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    r.got.lock().unwrap().push(Got { headers, body });
    "ok"
}

/// A gateway's shared state over `dir` with `config`.
fn shared(dir: &Path, config: &str) -> Arc<Shared> {
    let state = dir.join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    std::fs::write(state.join("config.json5"), config).unwrap();
    crate::gateway::test_shared(dir, "t")
}

fn job(value: Value) -> Arc<CronJob> {
    let mut value = value;
    let defaults = json!({
        "enabled": true,
        "createdAtMs": NOW - 24 * HOUR,
        "updatedAtMs": NOW - 24 * HOUR,
        "schedule": {"kind": "cron", "expr": "0 * * * *", "tz": "UTC", "staggerMs": 0},
    });
    for (k, v) in defaults.as_object().unwrap() {
        value
            .as_object_mut()
            .unwrap()
            .entry(k.clone())
            .or_insert(v.clone());
    }
    Arc::new(CronJob::from_json(&value).unwrap())
}

/// A `main` job whose results go to `url`.
fn event_job(url: &str) -> Arc<CronJob> {
    job(json!({
        "id": "stretch", "name": "Stretch",
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": "Stand up"},
        "delivery": {"mode": "webhook", "to": url},
    }))
}

/// An isolated job announcing its results, with more `fields`.
fn turn_job(fields: Value) -> Arc<CronJob> {
    let mut value = json!({
        "id": "brief", "name": "Morning brief",
        "sessionTarget": "isolated",
        "payload": {"kind": "agentTurn", "message": "Summarise my inbox"},
    });
    for (k, v) in fields.as_object().unwrap() {
        value[k] = v.clone();
    }
    job(value)
}

/// The record of a run of `job_id` for the slot `slot`, started `late`
/// after it.
fn record(job_id: &str, slot: i64, late: i64, status: RunStatus, text: &str) -> RunRecord {
    let mut r = RunRecord::finished(job_id, slot + late + 1_500);
    r.status = Some(status.clone());
    if status == RunStatus::Error {
        r.error = Some(text.to_string());
    } else {
        r.summary = Some(text.to_string());
    }
    r.session_key = Some("agent:main:main".into());
    r.run_at_ms = Some(slot + late);
    r.duration_ms = Some(1_500);
    r.next_run_at_ms = Some(slot + HOUR);
    r.extra.insert("slotMs".into(), json!(slot));
    r
}

fn outbox(dir: &Path) -> Vec<crate::delivery::outbox::Entry> {
    crate::delivery::outbox::read_all(&dir.join("state/outbox"))
        .unwrap()
        .0
}

fn journal(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("state/outbox/deliveries.jsonl")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_posts_its_event_with_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{ cron: { webhookToken: 'cron-t0ken' } }");
    let job = event_job(&url);
    let slot = NOW - 60_000;
    let ended = deliver_end(
        &shared,
        Some(&job),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert_eq!(ended.delivered, Some(true));
    assert_eq!(ended.delivery_status.as_deref(), Some("delivered"));
    assert_eq!(ended.delivery_error, None);
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["authorization"], "Bearer cron-t0ken");
    assert_eq!(got[0].headers["content-type"], "application/json");
    assert!(got[0].headers.contains_key("idempotency-key"));
    assert_eq!(
        got[0].body,
        json!({
            "jobId": "stretch",
            "action": "finished",
            "status": "ok",
            "summary": "Stand up",
            "sessionKey": "agent:main:main",
            "runAtMs": slot,
            "durationMs": 1_500,
            "nextRunAtMs": slot + HOUR,
            "slotMs": slot,
        })
    );
    // The journal names where the token is read from, never the token.
    let journal = journal(dir.path());
    assert!(
        journal.contains(r#""bearerFrom":"cron.webhookToken""#),
        "{journal}"
    );
    assert!(journal.contains(r#""timeoutMs":10000"#), "{journal}");
    assert!(!journal.contains("cron-t0ken"));

    // Without a token nothing is claimed; a run without a summary posts
    // nothing.
    let other = tempfile::tempdir().unwrap();
    let shared = self::shared(other.path(), "{}");
    deliver_end(
        &shared,
        Some(&job),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    let mut quiet = record("stretch", slot, 0, RunStatus::Ok, "");
    quiet.summary = None;
    let ended = deliver_end(&shared, Some(&job), slot, quiet).await;
    assert_eq!(ended.delivery_status, None);
    let got = receiver.got();
    assert_eq!(got.len(), 2, "one more: the run with a summary");
    assert!(!got[1].headers.contains_key("authorization"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_model_made_may_not_post_to_this_machine_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{}");
    let slot = NOW - 60_000;
    let mut by_model = (*event_job(&url)).clone();
    by_model.mark_created_by(crate::cron::job::CREATED_BY_AGENT);
    let by_model = Arc::new(by_model);
    let ended = deliver_end(
        &shared,
        Some(&by_model),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert!(receiver.got().is_empty(), "nothing was sent");
    assert_eq!(ended.status, Some(RunStatus::Ok), "the run did not fail");
    assert_eq!(ended.delivered, Some(false));
    assert_eq!(ended.delivery_status.as_deref(), Some("not-delivered"));
    let error = ended.delivery_error.unwrap();
    assert!(error.contains("127.0.0.1 is a loopback address"), "{error}");
    assert!(
        error.contains("delivery.webhook.allowPrivateNetwork"),
        "{error}"
    );

    // The same URL in a job the user made goes where it says.
    let ended = deliver_end(
        &shared,
        Some(&event_job(&url)),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert_eq!(ended.delivered, Some(true));
    assert_eq!(receiver.got().len(), 1);

    // The switch lets the model's URLs reach this machine.
    let allowed = tempfile::tempdir().unwrap();
    let shared = self::shared(
        allowed.path(),
        "{ delivery: { webhook: { allowPrivateNetwork: true } } }",
    );
    let ended = deliver_end(
        &shared,
        Some(&by_model),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert_eq!(ended.delivered, Some(true));
    assert_eq!(receiver.got().len(), 2);
}

/// `cron.webhookToken` goes only to URLs the user gave: a job the model
/// made posts to its URL unsigned (the run log says so), also its failure
/// notice, until the user sets that URL from the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_token_never_goes_to_an_address_the_model_chose() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(
        dir.path(),
        "{ cron: { webhookToken: 'cron-t0ken' }, delivery: { webhook: { allowPrivateNetwork: true } } }",
    );
    let slot = NOW - 60_000;
    let mut by_model = (*event_job(&url)).clone();
    by_model.mark_created_by(crate::cron::job::CREATED_BY_AGENT);
    let ended = deliver_end(
        &shared,
        Some(&Arc::new(by_model.clone())),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert_eq!(ended.delivered, Some(true));
    assert_eq!(
        ended.extra["deliveryNote"],
        "sent without cron.webhookToken: the model chose this address"
    );
    let failed = deliver_end(
        &shared,
        Some(&Arc::new(by_model.clone())),
        slot,
        record("stretch", slot, 0, RunStatus::Error, "boom"),
    )
    .await;
    assert_eq!(failed.status, Some(RunStatus::Error));
    let got = receiver.got();
    assert_eq!(got.len(), 2, "the event and the failure notice");
    for post in &got {
        assert!(
            !post.headers.contains_key("authorization"),
            "{:?}",
            post.headers
        );
    }
    assert!(!journal(dir.path()).contains("bearerFrom"));
    // Once the user set the URL, it is the user's: signed.
    by_model.mark_set_by_user(&url);
    let ended = deliver_end(
        &shared,
        Some(&Arc::new(by_model)),
        slot,
        record("stretch", slot, 0, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert!(!ended.extra.contains_key("deliveryNote"));
    let got = receiver.got();
    assert_eq!(got[2].headers["authorization"], "Bearer cron-t0ken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_reported_to_its_failure_destination() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{ cron: { webhookToken: 'cron-t0ken' } }");
    let slot = NOW - 60_000;
    let failed = || record("brief", slot, 0, RunStatus::Error, "model overloaded");
    let own = turn_job(json!({"delivery": {
        "mode": "announce",
        "failureDestination": {"mode": "webhook", "to": url},
    }}));
    let ended = deliver_end(&shared, Some(&own), slot, failed()).await;
    assert_eq!(
        ended.delivery_status, None,
        "a notice is not the run's result"
    );
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["authorization"], "Bearer cron-t0ken");
    assert_eq!(
        got[0].body,
        json!({
            "jobId": "brief",
            "jobName": "Morning brief",
            "message": "Cron job \"Morning brief\" failed: model overloaded",
            "status": "error",
            "error": "model overloaded",
            "runAtMs": slot,
            "durationMs": 1_500,
            "nextRunAtMs": slot + HOUR,
        })
    );
    assert!(outbox(dir.path()).is_empty(), "not announced as well");

    // Runs that did not fail, and best-effort jobs, report nothing.
    let ok = record("brief", slot, 0, RunStatus::Ok, "All read");
    deliver_end(&shared, Some(&own), slot, ok).await;
    let best_effort = turn_job(json!({"delivery": {
        "mode": "announce", "bestEffort": true,
        "failureDestination": {"mode": "webhook", "to": url},
    }}));
    deliver_end(&shared, Some(&best_effort), slot, failed()).await;
    assert_eq!(receiver.got().len(), 1);

    // Without a destination of its own: where the job's results go, the
    // outbox here, after a warning sign.
    let plain = turn_job(json!({}));
    deliver_end(&shared, Some(&plain), slot, failed()).await;
    let entries = outbox(dir.path());
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].text,
        "⚠️ Cron job \"Morning brief\" failed: model overloaded"
    );
    assert_eq!(entries[0].source, crate::delivery::Source::Cron);

    // `cron.failureDestination` comes before that, and is the user's URL
    // even for a job the model made.
    let global = tempfile::tempdir().unwrap();
    let shared = self::shared(
        global.path(),
        &format!("{{ cron: {{ failureDestination: {{ mode: 'webhook', to: '{url}' }} }} }}"),
    );
    let mut by_model = (*plain).clone();
    by_model.mark_created_by(crate::cron::job::CREATED_BY_AGENT);
    deliver_end(&shared, Some(&Arc::new(by_model)), slot, failed()).await;
    let got = receiver.got();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].body["jobId"], "brief");
    assert!(!got[1].headers.contains_key("authorization"));
    assert!(outbox(global.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_started_more_than_three_hours_late_is_not_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{}");
    let job = event_job(&url);
    let slot = NOW - 4 * HOUR;
    let late = deliver_end(
        &shared,
        Some(&job),
        slot,
        record("stretch", slot, 3 * HOUR + 1, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert!(receiver.got().is_empty());
    assert_eq!(late.status, Some(RunStatus::Ok));
    assert_eq!(late.delivered, Some(false));
    assert_eq!(late.delivery_status.as_deref(), Some("not-delivered"));
    assert!(late.delivery_error.unwrap().contains("3 h after its slot"));
    // Three hours exactly is still in time.
    let in_time = deliver_end(
        &shared,
        Some(&job),
        slot,
        record("stretch", slot, 3 * HOUR, RunStatus::Ok, "Stand up"),
    )
    .await;
    assert_eq!(in_time.delivered, Some(true));
    assert_eq!(receiver.got().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_recorded_in_the_tick_send_from_a_task_and_only_when_they_have_something_to_send() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{}");
    let tracker = TaskTracker::new();
    let slot = NOW - 60_000;
    spawn_end(&tracker, &shared, Some(&event_job(&url)), slot, || {
        record("stretch", slot, 0, RunStatus::Ok, "Stand up")
    });
    // A `main` job without a webhook: its record is not even built.
    let quiet = job(json!({
        "id": "quiet", "name": "Quiet", "sessionTarget": "main",
        "payload": {"kind": "systemEvent", "text": "hush"},
    }));
    spawn_end(&tracker, &shared, Some(&quiet), slot, || -> RunRecord {
        panic!("the record of a run with nothing to send was built")
    });
    spawn_end(&tracker, &shared, None, slot, || -> RunRecord {
        panic!("the record of an unreadable job was built")
    });
    tracker.close();
    tracker.wait().await;
    assert_eq!(receiver.bodies().len(), 1);
    assert_eq!(receiver.bodies()[0]["summary"], "Stand up");
}

fn alert(mode: Option<DeliveryMode>, to: Option<&str>) -> Alert {
    Alert {
        text: "Cron job \"Morning brief\" failed 3 times\nLast error: model overloaded".into(),
        mode,
        channel: None,
        to: to.map(str::to_string),
        account_id: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_alerts_go_to_their_webhook_the_outbox_or_the_main_session() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{ cron: { webhookToken: 'cron-t0ken' } }");
    let brief = turn_job(json!({}));

    send_alert(
        &shared,
        &brief,
        &alert(Some(DeliveryMode::Webhook), Some(&url)),
    )
    .await;
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["authorization"], "Bearer cron-t0ken");
    assert_eq!(
        got[0].body,
        json!({
            "jobId": "brief",
            "jobName": "Morning brief",
            "message": "Cron job \"Morning brief\" failed 3 times\nLast error: model overloaded",
        })
    );

    // Announced, or unset for a job announcing its results: the outbox.
    send_alert(&shared, &brief, &alert(Some(DeliveryMode::Announce), None)).await;
    send_alert(&shared, &brief, &alert(None, None)).await;
    let entries = outbox(dir.path());
    assert_eq!(entries.len(), 2);
    for entry in &entries {
        assert_eq!(entry.text, alert(None, None).text);
        assert_eq!(entry.source, crate::delivery::Source::Cron);
    }

    // Unset for a job posting to a webhook: that webhook.
    let hooked = turn_job(json!({"delivery": {"mode": "webhook", "to": url}}));
    send_alert(&shared, &hooked, &alert(None, None)).await;
    assert_eq!(receiver.got().len(), 2);
    assert_eq!(receiver.bodies()[1]["jobId"], "brief");

    // Nowhere to go: a system event for the main session, and a wake.
    let mut bus = shared.bus.subscribe();
    let before = shared.intake.last_accepted();
    let stretch = job(json!({
        "id": "stretch", "name": "Stretch", "sessionTarget": "main",
        "payload": {"kind": "systemEvent", "text": "Stand up"},
    }));
    send_alert(&shared, &stretch, &alert(None, None)).await;
    assert_eq!(shared.intake.last_accepted(), before + 1);
    let intake = std::fs::read_to_string(dir.path().join("state/gateway/intake.jsonl")).unwrap();
    let queued: Value = serde_json::from_str(intake.lines().last().unwrap()).unwrap();
    assert_eq!(queued["text"], alert(None, None).text);
    assert_eq!(queued["sessionKey"], "agent:main:main");
    assert_eq!(queued["kind"], "cron");
    assert_eq!(
        bus.recv().await.unwrap(),
        GatewayEvent::Wake {
            reason: "cron:stretch:failure-alert".into(),
            session_key: "agent:main:main".into(),
        }
    );
    assert_eq!(receiver.got().len(), 2);
    assert_eq!(outbox(dir.path()).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_url_is_the_users_only_when_it_comes_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(
        dir.path(),
        &format!("{{ cron: {{ failureAlert: {{ mode: 'webhook', to: '{url}' }} }} }}"),
    );
    let mut by_model = (*turn_job(json!({}))).clone();
    by_model.mark_created_by(crate::cron::job::CREATED_BY_AGENT);
    // `cron.failureAlert.to`, the user's: posted.
    send_alert(
        &shared,
        &by_model,
        &alert(Some(DeliveryMode::Webhook), Some(&url)),
    )
    .await;
    assert_eq!(receiver.got().len(), 1);
    // The same URL as the job's own `failureAlert.to`: the model's, refused.
    by_model.failure_alert = Some(FailureAlert::On(crate::cron::job::FailureAlertConfig {
        mode: Some(DeliveryMode::Webhook),
        to: Some(url.clone()),
        ..Default::default()
    }));
    send_alert(
        &shared,
        &by_model,
        &alert(Some(DeliveryMode::Webhook), Some(&url)),
    )
    .await;
    assert_eq!(receiver.got().len(), 1, "refused");
    assert!(journal(dir.path()).contains("loopback address"));
}

/// An OpenAI-compatible streamed answer.
fn answer(text: &str) -> Reply {
    let chunk = |delta: Value, finish: Option<&str>| json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut chunks = sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": text}), None),
        chunk(json!({}), Some("stop")),
    ]);
    chunks.push("data: [DONE]\n\n".into());
    Reply::Sse(chunks)
}

/// Writes `jobs` as the job store.
fn write_jobs(dir: &Path, jobs: &[Arc<CronJob>]) {
    let state = dir.join("state");
    std::fs::create_dir_all(state.join("cron")).unwrap();
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| serde_json::to_value(&**j).unwrap())
        .collect();
    std::fs::write(
        state.join("cron/jobs.json"),
        serde_json::to_vec_pretty(&json!({"version": 1, "jobs": jobs})).unwrap(),
    )
    .unwrap();
}

/// Runs the cron runner until the runs its start caught up have ended:
/// stopped before it starts, it still takes one tick (the catch-up of
/// the slots its jobs passed) and waits for the runs it started.
async fn run_caught_up(shared: &Arc<Shared>) {
    let stop = CancellationToken::new();
    stop.cancel();
    Arc::new(crate::gateway::cron::CronRunner)
        .start(shared.clone(), stop)
        .await
        .unwrap();
}

fn run_log(dir: &Path, job_id: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("state/cron/runs/{job_id}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_answer_shows_the_token_as_its_own_channel_says_and_late_runs_deliver_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let reply = "Backups ran. HEARTBEAT_OK";
    let server = ScriptedServer::start(vec![answer(reply), answer(reply), answer(reply)]);
    let shared = shared(
        dir.path(),
        &format!(
            "{{ models: {{ providers: {{ openai: {{ baseUrl: '{}' }} }} }},
                agents: {{ defaults: {{ model: 'openai/test-model' }} }},
                channels: {{ outbox: {{ heartbeat: {{ showOk: true }} }} }},
                cron: {{ webhookToken: 'cron-t0ken' }} }}",
            server.url
        ),
    );
    // Each ran a minute ago but the last, whose slot is four hours old.
    let at = |expr: &str| json!({"kind": "cron", "expr": expr, "tz": "UTC", "staggerMs": 0});
    let announced = turn_job(json!({"id": "announced", "schedule": at("59 9 * * *")}));
    let hooked = turn_job(json!({
        "id": "hooked", "schedule": at("59 9 * * *"),
        "delivery": {"mode": "webhook", "to": url},
    }));
    let late = turn_job(json!({"id": "late", "schedule": at("0 6 * * *")}));
    write_jobs(dir.path(), &[announced, hooked, late]);
    run_caught_up(&shared).await;
    assert_eq!(server.requests().len(), 3, "three turns");

    // The outbox shows acknowledgements: the token stays.
    let entries = outbox(dir.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].session_key, "agent:main:cron:announced");
    assert_eq!(entries[0].text, reply);
    // The webhook does not (the default): its event's summary is without.
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["authorization"], "Bearer cron-t0ken");
    let event = &got[0].body;
    assert_eq!(event["jobId"], "hooked");
    assert_eq!(event["action"], "finished");
    assert_eq!(event["status"], "ok");
    assert_eq!(event["summary"], "Backups ran.");
    // An isolated run is known by its own session row.
    let key = event["sessionKey"].as_str().unwrap();
    assert!(key.starts_with("agent:main:cron:hooked:run:"), "{key}");
    assert_eq!(event["runAtMs"], NOW);
    assert_eq!(event["slotMs"], NOW - 60_000);
    let hooked_log = run_log(dir.path(), "hooked");
    assert_eq!(hooked_log[0]["deliveryStatus"], "delivered");
    assert_eq!(hooked_log[0]["delivered"], true);

    // The late run ran and delivered nothing.
    let late_log = run_log(dir.path(), "late");
    assert_eq!(late_log.len(), 1);
    assert_eq!(late_log[0]["status"], "ok");
    assert_eq!(late_log[0]["delivered"], false);
    assert_eq!(late_log[0]["deliveryStatus"], "not-delivered");
    assert_eq!(late_log[0]["slotMs"], NOW - 4 * HOUR);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_only_run_posts_its_event_after_the_tick() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start().await;
    let shared = shared(dir.path(), "{}");
    let stretch = job(json!({
        "id": "stretch", "name": "Stretch",
        "schedule": {"kind": "cron", "expr": "59 9 * * *", "tz": "UTC", "staggerMs": 0},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": "Stand up"},
        "delivery": {"mode": "webhook", "to": url},
    }));
    write_jobs(dir.path(), &[stretch]);
    run_caught_up(&shared).await;
    let bodies = receiver.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["jobId"], "stretch");
    assert_eq!(bodies[0]["summary"], "Stand up");
    assert_eq!(bodies[0]["sessionKey"], "agent:main:main");
    assert_eq!(run_log(dir.path(), "stretch")[0]["status"], "ok");
}
