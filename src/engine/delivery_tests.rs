//! The deliverer, in the engine's environment, against a local webhook
//! receiver (an axum server on 127.0.0.1): retries with backoff, signatures, refusals, giving up,
//! resuming after a restart. Waits are recorded, never slept.

use crate::engine::Engine;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::delivery::webhook::{AttemptOutcome, Payload, WebhookJob};
use crate::delivery::*;
use crate::delivery::{outbox, webhook};
use crate::durable;
use crate::provider::BoxFuture;
use crate::provider::http::Sleeper;

const SECRET: &str = "hook-signing-s3cret";
const CONFIG: &str = "{ hooks: { signingSecret: 'hook-signing-s3cret' } }";

use crate::provider::http::RecordingSleeper as Recorder;

/// A wait that never ends (a gateway stopped while waiting).
struct Forever;

impl Sleeper for Forever {
    fn sleep(&self, _: Duration) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Got {
    headers: HeaderMap,
    body: Bytes,
    /// The status it answered.
    status: u16,
}

/// A webhook receiver answering from a script (then 200).
#[derive(Clone, Default)]
struct Receiver {
    script: Arc<Mutex<VecDeque<(u16, Vec<(&'static str, &'static str)>, &'static str)>>>,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    async fn start(
        script: Vec<(u16, Vec<(&'static str, &'static str)>, &'static str)>,
    ) -> (String, Receiver) {
        let receiver = Receiver {
            script: Arc::new(Mutex::new(script.into())),
            got: Arc::default(),
        };
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
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    let (status, extra, text) =
        r.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((200, Vec::new(), ""));
    r.got.lock().unwrap().push(Got {
        headers,
        body,
        status,
    });
    let mut response = (StatusCode::from_u16(status).unwrap(), text.to_string()).into_response();
    for (name, value) in extra {
        response
            .headers_mut()
            .insert(name, axum::http::HeaderValue::from_static(value));
    }
    response
}

fn deliverer(dir: &Path, config: &str, sleeper: Arc<dyn Sleeper>) -> Deliverer {
    Deliverer::open_with(
        Arc::new(Engine::new(crate::app::testing::test_app(dir, config))),
        sleeper,
    )
    .unwrap()
}

fn item(text: &str) -> Item {
    Item {
        source: Source::Heartbeat,
        session_key: "agent:main:main".into(),
        agent_id: "main".into(),
        text: text.into(),
        task_id: None,
        to: None,
        channel: None,
        account_id: None,
    }
}

fn webhook(url: &str, origin: UrlOrigin) -> Target {
    Target::Webhook {
        url: url.to_string(),
        secret: Some(SecretRef {
            key: "hooks.signingSecret".into(),
        }),
        origin,
    }
}

fn records(dir: &Path) -> Vec<webhook::Record> {
    let path = dir.join("state/outbox").join(webhook::FILE_NAME);
    let (records, unreadable) = durable::read_journal(&path, webhook::parse_record).unwrap();
    assert_eq!(unreadable, 0);
    records
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Checks the request's signature as a receiver does.
fn signature_is_valid(got: &Got) -> bool {
    signed_with(got, SECRET)
}

/// Whether the request is signed with `secret`.
fn signed_with(got: &Got, secret: &str) -> bool {
    let ts = got.headers["x-almanac-timestamp"].to_str().unwrap();
    let sig = got.headers["x-almanac-signature"].to_str().unwrap();
    let Some(hex) = sig.strip_prefix("sha256=") else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let signed = [ts.as_bytes(), b".", &got.body].concat();
    ring::hmac::verify(&key, &signed, &unhex(hex)).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_failing_three_times_gets_the_result_once_signed_with_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(vec![
        (503, vec![], "down for maintenance"),
        (503, vec![], ""),
        (503, vec![], ""),
    ])
    .await;
    let recorder = Arc::new(Recorder::default());
    let d = deliverer(dir.path(), CONFIG, recorder.clone());
    let delivery = d
        .deliver(item("Disk almost full"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    assert_eq!(delivery.channel, "webhook");
    assert_eq!(delivery.to.as_deref(), Some(url.as_str()));
    let DeliveryState::Pending {
        attempts, reason, ..
    } = &delivery.state
    else {
        panic!("{delivery:?}");
    };
    assert_eq!(*attempts, 1);
    assert_eq!(reason, "HTTP 503: down for maintenance");
    d.settled().await;

    let got = receiver.got();
    assert_eq!(
        got.iter().map(|g| g.status).collect::<Vec<_>>(),
        [503, 503, 503, 200],
        "the fourth attempt is the one delivery"
    );
    for g in &got {
        assert_eq!(g.headers["idempotency-key"], delivery.id.as_str());
        assert_eq!(g.headers["content-type"], "application/json");
        assert!(signature_is_valid(g), "{:?}", g.headers);
        assert_eq!(g.body, got[0].body, "the same body every time");
    }
    let body: serde_json::Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "id": delivery.id,
            "ts": 1_796_119_200_000_i64,
            "source": "heartbeat",
            "sessionKey": "agent:main:main",
            "text": "Disk almost full",
        })
    );
    assert_eq!(
        recorder.waits(),
        [1, 5, 30].map(Duration::from_secs),
        "the backoff between the attempts"
    );
    let records = records(dir.path());
    let states: Vec<(webhook::State, u32)> =
        records.iter().map(|r| (r.state, r.attempts)).collect();
    use webhook::State::{Delivered, Pending};
    assert_eq!(
        states,
        [
            (Pending, 0),
            (Pending, 1),
            (Pending, 2),
            (Pending, 3),
            (Delivered, 4)
        ]
    );
    assert!(records.iter().all(|r| r.id == delivery.id));
    let journal =
        std::fs::read_to_string(dir.path().join("state/outbox/deliveries.jsonl")).unwrap();
    assert!(!journal.contains(SECRET), "the secret is never written");
    assert!(journal.contains(r#""secretFrom":"hooks.signingSecret""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_receiver_fails_the_delivery_at_once_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) =
        Receiver::start(vec![(400, vec![], r#"{"error": "unknown hook"}"#)]).await;
    let recorder = Arc::new(Recorder::default());
    let d = deliverer(dir.path(), CONFIG, recorder.clone());
    let delivery = d
        .deliver(item("hello"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    assert_eq!(
        delivery.state,
        DeliveryState::Failed {
            reason: "HTTP 400: unknown hook".into()
        }
    );
    d.settled().await;
    assert_eq!(receiver.got().len(), 1, "no retry");
    assert!(recorder.waits().is_empty());
    let last = records(dir.path()).pop().unwrap();
    assert_eq!(last.state, webhook::State::Failed);
    assert_eq!(last.reason.as_deref(), Some("HTTP 400: unknown hook"));
    assert_eq!(
        last.body.map(|b| b.text).as_deref(),
        Some("hello"),
        "the text is kept with the failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_recovers_gets_every_attempt_then_the_delivery_fails() {
    let dir = tempfile::tempdir().unwrap();
    let always = (0..20).map(|_| (503, Vec::new(), "")).collect();
    let (url, receiver) = Receiver::start(always).await;
    let recorder = Arc::new(Recorder::default());
    let d = deliverer(dir.path(), CONFIG, recorder.clone());
    let delivery = d
        .deliver(item("anyone?"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    assert!(matches!(delivery.state, DeliveryState::Pending { .. }));
    d.settled().await;
    assert_eq!(receiver.got().len(), webhook::MAX_ATTEMPTS as usize);
    assert_eq!(recorder.waits(), webhook::BACKOFF.to_vec());
    let last = records(dir.path()).pop().unwrap();
    assert_eq!(last.state, webhook::State::Failed);
    assert_eq!(last.attempts, 8);
    assert_eq!(
        last.reason.as_deref(),
        Some("gave up after 8 attempts: HTTP 503")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_waits_as_long_as_the_receiver_asks() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(vec![
        (429, vec![("retry-after", "90")], ""),
        (408, vec![], ""),
    ])
    .await;
    let recorder = Arc::new(Recorder::default());
    let d = deliverer(dir.path(), CONFIG, recorder.clone());
    d.deliver(item("x"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    d.settled().await;
    assert_eq!(receiver.got().len(), 3);
    assert_eq!(
        recorder.waits(),
        [Duration::from_secs(90), Duration::from_secs(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_delivery_is_resumed_by_the_next_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(vec![(502, vec![], "")]).await;
    // The first gateway stops while it waits to try again.
    let first = deliverer(dir.path(), CONFIG, Arc::new(Forever));
    let delivery = first
        .deliver(item("carry on"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    let DeliveryState::Pending { next_at_ms, .. } = delivery.state else {
        panic!("{delivery:?}");
    };
    first.close().await;
    assert_eq!(
        records(dir.path()).last().unwrap().state,
        webhook::State::Pending
    );

    let recorder = Arc::new(Recorder::default());
    let second = deliverer(dir.path(), CONFIG, recorder.clone());
    assert_eq!(resume_pending(&second).await, 1);
    second.settled().await;
    let got = receiver.got();
    assert_eq!(got.iter().map(|g| g.status).collect::<Vec<_>>(), [502, 200]);
    assert_eq!(got[1].headers["idempotency-key"], delivery.id.as_str());
    assert_eq!(got[1].body, got[0].body);
    assert!(signature_is_valid(&got[1]));
    // Due one second after the first attempt, by the same clock.
    assert_eq!(next_at_ms - second.now_ms(), 1_000);
    assert_eq!(recorder.waits(), [Duration::from_secs(1)]);
    let last = records(dir.path()).pop().unwrap();
    assert_eq!((last.state, last.attempts), (webhook::State::Delivered, 2));
    // Nothing is left to resume.
    let third = deliverer(dir.path(), CONFIG, Arc::new(Recorder::default()));
    assert_eq!(resume_pending(&third).await, 0);
    // A later delivery's id comes after the resumed one's.
    let next = third.deliver(item("next"), &Target::None).await.unwrap();
    assert!(next.id.parse::<u64>().unwrap() > delivery.id.parse::<u64>().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_the_model_gave_may_reach_this_machine_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(Vec::new()).await;
    let d = deliverer(dir.path(), CONFIG, Arc::new(Recorder::default()));
    let refused = d
        .deliver(item("x"), &webhook(&url, UrlOrigin::Model))
        .await
        .unwrap();
    let DeliveryState::Failed { reason } = &refused.state else {
        panic!("{refused:?}");
    };
    assert!(
        reason.contains("127.0.0.1 is a loopback address"),
        "{reason}"
    );
    assert!(
        reason.contains("delivery.webhook.allowPrivateNetwork"),
        "{reason}"
    );
    assert!(receiver.got().is_empty(), "nothing was sent");

    let allowed = tempfile::tempdir().unwrap();
    let config = "{ hooks: { signingSecret: 'hook-signing-s3cret' }, delivery: { webhook: { allowPrivateNetwork: true } } }";
    let d = deliverer(allowed.path(), config, Arc::new(Recorder::default()));
    let delivered = d
        .deliver(item("x"), &webhook(&url, UrlOrigin::Model))
        .await
        .unwrap();
    assert_eq!(delivered.state, DeliveryState::Delivered);
    assert_eq!(receiver.got().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_fails_the_delivery_rather_than_sending_it_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(Vec::new()).await;
    let d = deliverer(dir.path(), "{}", Arc::new(Recorder::default()));
    let delivery = d
        .deliver(item("x"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    assert_eq!(
        delivery.state,
        DeliveryState::Failed {
            reason: "the signing secret `hooks.signingSecret` is not set".into()
        }
    );
    assert!(receiver.got().is_empty());
    // Without a secret named, the request goes unsigned.
    let unsigned = Target::Webhook {
        url: url.clone(),
        secret: None,
        origin: UrlOrigin::Config,
    };
    let delivery = d.deliver(item("x"), &unsigned).await.unwrap();
    assert_eq!(delivery.state, DeliveryState::Delivered);
    assert!(
        !receiver.got()[0]
            .headers
            .contains_key("x-almanac-signature")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_target_writes_an_entry_and_none_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = deliverer(dir.path(), "{}", Arc::new(Recorder::default()));
    let outbox_dir = dir.path().join("state/outbox");
    let mut with_task = item("Standup in 10 minutes");
    with_task.source = Source::Cron;
    with_task.task_id = Some("task-1".into());
    let delivery = d.deliver(with_task, &Target::Outbox).await.unwrap();
    assert_eq!(
        (delivery.channel, delivery.state.clone()),
        ("outbox", DeliveryState::Delivered)
    );
    let (entries, _) = outbox::read_all(&outbox_dir).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].id, delivery.id);
    assert_eq!(entries[0].task_id.as_deref(), Some("task-1"));
    assert_eq!(entries[0].source, Source::Cron);
    let none = d.deliver(item("dropped"), &Target::None).await.unwrap();
    assert_eq!(none.channel, "none");
    assert!(none.id.parse::<u64>().unwrap() > delivery.id.parse::<u64>().unwrap());
    assert_eq!(outbox::read_all(&outbox_dir).unwrap().0.len(), 1);
    assert!(records(dir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_stream_gets_entries_from_this_process_and_others_in_order() {
    use futures_util::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let d = deliverer(dir.path(), "{}", Arc::new(Recorder::default()));
    let outbox_dir = dir.path().join("state/outbox");
    d.deliver(item("before"), &Target::Outbox).await.unwrap();
    let stream = d.follow(None).await.unwrap();
    let mut stream = Box::pin(stream);
    d.deliver(item("one"), &Target::Outbox).await.unwrap();
    // Another process (a command) writes to the same file.
    outbox::append_synced(&outbox_dir, &item("two"), d.now_ms()).unwrap();
    d.deliver(item("three"), &Target::Outbox).await.unwrap();
    let mut texts = Vec::new();
    for _ in 0..3 {
        let entry = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an entry arrives")
            .expect("the stream goes on");
        texts.push(entry.text);
    }
    assert_eq!(texts, ["one", "two", "three"]);
    d.stop();
    assert!(stream.next().await.is_none(), "stopping ends the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_receiver_is_tried_again_until_the_last_attempt() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let recorder = Arc::new(Recorder::default());
    let d = deliverer(dir.path(), CONFIG, recorder.clone());
    let delivery = d
        .deliver(item("x"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    let DeliveryState::Pending { reason, .. } = &delivery.state else {
        panic!("{delivery:?}");
    };
    assert!(
        reason.starts_with("cannot connect: Connection refused"),
        "the deepest cause, without the URL again: {reason}"
    );
    d.settled().await;
    assert_eq!(recorder.waits(), webhook::BACKOFF.to_vec());
    let last = records(dir.path()).pop().unwrap();
    assert_eq!((last.state, last.attempts), (webhook::State::Failed, 8));
    assert!(
        last.reason
            .as_deref()
            .unwrap()
            .starts_with("gave up after 8 attempts: cannot connect: "),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guarded_client_refuses_a_name_resolving_to_this_machine_when_it_connects() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(Vec::new()).await;
    let engine = Engine::new(crate::app::testing::test_app(dir.path(), "{}"));
    let by_name = url.replace("127.0.0.1", "localhost");
    let job = WebhookJob {
        id: "1".into(),
        url: by_name,
        origin: UrlOrigin::Model,
        secret_from: None,
        bearer_from: None,
        timeout_ms: None,
        payload: Payload::Item(webhook::Body {
            id: "1".into(),
            ts: 0,
            source: Source::Hook,
            session_key: "hook:x".into(),
            text: "x".into(),
            task_id: None,
        }),
        attempts: 0,
        next_at_ms: None,
        task_id: None,
    };
    // The name check is skipped here: the resolver alone must refuse.
    let outcome = webhook::attempt(&engine.webhook_client(true), &job, Default::default(), 0).await;
    let AttemptOutcome::Permanent { reason } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.starts_with("localhost resolves to "), "{reason}");
    assert!(receiver.got().is_empty());
    // The open client (URLs from the config) connects.
    let outcome =
        webhook::attempt(&engine.webhook_client(false), &job, Default::default(), 0).await;
    assert_eq!(outcome, AttemptOutcome::Delivered);
    assert_eq!(receiver.got().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_alert_to_its_webhook_is_signed_with_the_heartbeat_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (url, receiver) = Receiver::start(vec![
        (503, vec![], ""),
        (502, vec![], ""),
        (503, vec![], ""),
    ])
    .await;
    let recorder = Arc::new(Recorder::default());
    let config = format!(
        "{{ agents: {{ defaults: {{ heartbeat: {{ target: 'webhook', to: '{url}', webhookSecret: 'beat-s3cret' }} }} }} }}"
    );
    let d = deliverer(dir.path(), &config, recorder.clone());
    let app = crate::app::testing::test_app(dir.path(), &config);
    let destination = crate::app::heartbeat::Destination {
        channel: "webhook",
        to: Some(url.clone()),
        unresolved: None,
        route: None,
    };
    let target = crate::gateway::heartbeat::delivery_target(&app, &destination);
    let delivery = d.deliver(item("Disk almost full"), &target).await.unwrap();
    d.settled().await;
    let got = receiver.got();
    assert_eq!(
        got.iter().map(|g| g.status).collect::<Vec<_>>(),
        [503, 502, 503, 200]
    );
    for g in &got {
        assert_eq!(g.headers["idempotency-key"], delivery.id.as_str());
        assert!(signed_with(g, "beat-s3cret"), "{:?}", g.headers);
    }
    let journal =
        std::fs::read_to_string(dir.path().join("state/outbox/deliveries.jsonl")).unwrap();
    assert!(
        !journal.contains("beat-s3cret"),
        "the secret is never written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_alert_whose_retries_run_out_is_no_longer_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let always = (0..20).map(|_| (503, Vec::new(), "")).collect();
    let (url, _receiver) = Receiver::start(always).await;
    let d = deliverer(dir.path(), CONFIG, Arc::new(Recorder::default()));
    let app = crate::app::testing::test_app(dir.path(), CONFIG);
    // The runner remembered the alert as sent when its delivery went
    // pending.
    let key = "agent:main:main";
    app.sessions(Some("main"))
        .store()
        .update(app.host.now_ts(), |map| {
            map.insert(
                key.to_string(),
                serde_json::json!({"sessionId": "s1", "updatedAt": 1, "lastHeartbeatText": "Disk almost full", "lastHeartbeatSentAt": 1}),
            );
        })
        .unwrap();
    let mut gave_up = d.gave_up();
    let delivery = d
        .deliver(item("Disk almost full"), &webhook(&url, UrlOrigin::Config))
        .await
        .unwrap();
    d.settled().await;
    let given = gave_up.try_recv().expect("the give-up is announced");
    assert_eq!(
        (
            given.id.as_str(),
            given.source,
            given.session_key.as_str(),
            given.text.as_str()
        ),
        (
            delivery.id.as_str(),
            Source::Heartbeat,
            key,
            "Disk almost full"
        )
    );
    assert_eq!(given.reason, "gave up after 8 attempts: HTTP 503");
    crate::app::heartbeat::delivery_gave_up(&app, key, &given.text, &given.id, &given.reason)
        .unwrap();
    let (sessions, _) = app.sessions(Some("main")).store().load();
    assert!(
        sessions[key].get("lastHeartbeatText").is_none(),
        "{sessions:?}"
    );
    assert_eq!(
        sessions[key]["sessionId"], "s1",
        "the rest of the entry stays"
    );
    let last = app.heartbeat_runs().last().unwrap().unwrap();
    assert_eq!(last.status, crate::activity::runs::RunStatus::Failed);
    assert!(
        last.reason
            .as_deref()
            .is_some_and(|r| r.contains("gave up after 8 attempts")),
        "{last:?}"
    );
}

/// A deliverer whose outbox or deliveries journal writes through `disk`.
fn deliverer_on(dir: &Path, disk: &Arc<durable::FaultyDisk>, outbox: bool) -> Deliverer {
    let (on_outbox, on_deliveries) = if outbox {
        (disk.options(), Default::default())
    } else {
        (Default::default(), disk.options())
    };
    Deliverer::open_on(
        Arc::new(Engine::new(crate::app::testing::test_app(dir, CONFIG))),
        Arc::new(Recorder::default()),
        on_outbox,
        on_deliveries,
    )
    .unwrap()
}

/// While the outbox cannot be synced a result is not reported delivered:
/// its caller gets the error and nothing is written; once a retried sync
/// succeeds, the entries written before the failure are on the disk and
/// results are delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_not_reported_delivered_while_the_outbox_cannot_be_synced() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(durable::FaultyDisk::default());
    let d = deliverer_on(dir.path(), &disk, true);
    let outbox_dir = dir.path().join("state/outbox");
    let texts = || -> Vec<String> {
        let (entries, _) = outbox::read_all(&outbox_dir).unwrap();
        entries.into_iter().map(|e| e.text).collect()
    };
    let mut health = d.journals().remove(0);
    d.deliver(item("before"), &Target::Outbox).await.unwrap();
    disk.fail_syncs(true);
    assert!(d.outbox_journal().sync().is_err());
    let written = d.outbox_journal().size_bytes().unwrap();
    let refused = d
        .deliver(item("refused"), &Target::Outbox)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, DeliveryError::NotSynced(_)),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("cannot be synced"),
        "{refused}"
    );
    assert_eq!(texts(), ["before"]);
    disk.fail_syncs(false);
    tokio::time::timeout(
        Duration::from_secs(10),
        health.wait_for(|h| h.failing.is_none()),
    )
    .await
    .expect("a retried sync succeeds")
    .unwrap();
    assert!(
        disk.synced_len() >= written,
        "the entry written before is on the disk"
    );
    let after = d.deliver(item("after"), &Target::Outbox).await.unwrap();
    assert_eq!(after.state, DeliveryState::Delivered);
    assert_eq!(texts(), ["before", "after"]);
    assert_eq!(health.borrow().episodes, 1);
    d.close().await;
}

/// While the deliveries journal cannot be synced a webhook result is
/// refused before it is posted (its pending record could not be kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_result_is_not_posted_while_the_deliveries_journal_cannot_be_synced() {
    let (url, receiver) = Receiver::start(Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(durable::FaultyDisk::default());
    let d = deliverer_on(dir.path(), &disk, false);
    let mut health = d.journals().remove(1);
    disk.fail_syncs(true);
    assert!(d.deliveries_journal().sync().is_err());
    let target = webhook(&url, UrlOrigin::Config);
    let refused = d.deliver(item("refused"), &target).await.unwrap_err();
    assert!(
        matches!(refused, DeliveryError::NotSynced(_)),
        "{refused:?}"
    );
    assert!(receiver.got().is_empty(), "nothing was posted");
    assert!(records(dir.path()).is_empty());
    disk.fail_syncs(false);
    tokio::time::timeout(
        Duration::from_secs(10),
        health.wait_for(|h| h.failing.is_none()),
    )
    .await
    .expect("a retried sync succeeds")
    .unwrap();
    let delivered = d.deliver(item("after"), &target).await.unwrap();
    assert_eq!(delivered.state, DeliveryState::Delivered);
    assert_eq!(receiver.got().len(), 1);
    d.close().await;
}
