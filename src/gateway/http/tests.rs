use axum::body::Body;
use axum::http::{Request, header};
use tower::ServiceExt;

use super::*;

const TOKEN: &str = "s3cret-token";

pub(crate) async fn call(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

pub(crate) fn post(path: &str, token: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut b = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(body.into()).unwrap()
}

pub(crate) fn get(path: &str, token: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(Body::empty()).unwrap()
}

/// Bad requests, each with the status and the words of the error it
/// gets: (what is wrong, the request, status, the error says).
fn bad_requests() -> Vec<(&'static str, Request<Body>, StatusCode, &'static str)> {
    let huge = format!(r#"{{"text": "{}"}}"#, "x".repeat(BODY_LIMIT + 10));
    vec![
        (
            "no token",
            post("/v1/system/event", None, r#"{"text":"hi"}"#),
            StatusCode::UNAUTHORIZED,
            "missing gateway token",
        ),
        (
            "wrong token",
            post("/v1/system/event", Some("nope"), r#"{"text":"hi"}"#),
            StatusCode::UNAUTHORIZED,
            "wrong gateway token",
        ),
        (
            "unknown control route without a token",
            get("/v1/nothing", None),
            StatusCode::UNAUTHORIZED,
            "missing gateway token",
        ),
        (
            "malformed JSON",
            post("/v1/system/event", Some(TOKEN), r#"{"text": "#),
            StatusCode::BAD_REQUEST,
            "",
        ),
        (
            "a field of the wrong type",
            post("/v1/system/event", Some(TOKEN), r#"{"text": 5}"#),
            StatusCode::UNPROCESSABLE_ENTITY,
            "text",
        ),
        (
            "an unknown field",
            post(
                "/v1/system/event",
                Some(TOKEN),
                r#"{"text": "a", "sessionKye": "x"}"#,
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "sessionKye",
        ),
        (
            "not JSON at all",
            Request::post("/v1/system/event")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::from("text=hi"))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "",
        ),
        (
            "a body over the limit",
            post("/v1/system/event", Some(TOKEN), huge),
            StatusCode::PAYLOAD_TOO_LARGE,
            "",
        ),
        (
            "an empty event",
            post("/v1/system/event", Some(TOKEN), r#"{"text": "  "}"#),
            StatusCode::BAD_REQUEST,
            "text is empty",
        ),
        (
            "an unknown mode",
            post(
                "/v1/system/event",
                Some(TOKEN),
                r#"{"text": "a", "mode": "later"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "mode `later`",
        ),
        (
            "another agent",
            post(
                "/v1/agent",
                Some(TOKEN),
                r#"{"message": "hi", "agent": "ops"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "unknown agent `ops`",
        ),
        (
            "another agent, by OpenClaw's name",
            post(
                "/v1/agent",
                Some(TOKEN),
                r#"{"message": "hi", "agentId": "ops"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "unknown agent `ops`",
        ),
        (
            "an unknown field of a turn",
            post(
                "/v1/agent",
                Some(TOKEN),
                r#"{"message": "hi", "agnet": "ops"}"#,
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "agnet",
        ),
        (
            "a session key with control characters",
            post(
                "/v1/system/event",
                Some(TOKEN),
                r#"{"text": "hi", "sessionKey": "a\u001b[31mb"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "control characters",
        ),
        (
            "an empty message",
            post("/v1/agent", Some(TOKEN), r#"{"message": ""}"#),
            StatusCode::BAD_REQUEST,
            "message is empty",
        ),
        (
            "an unknown control route",
            get("/v1/nothing", Some(TOKEN)),
            StatusCode::NOT_FOUND,
            "no route GET /v1/nothing",
        ),
        (
            "an unknown route",
            get("/etc/passwd", None),
            StatusCode::NOT_FOUND,
            "no route GET /etc/passwd",
        ),
        (
            "a wrong method",
            get("/v1/system/event", Some(TOKEN)),
            StatusCode::METHOD_NOT_ALLOWED,
            "GET is not allowed",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_with_a_json_error_and_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let router = router(shared.clone());
    for (name, req, want, says) in bad_requests() {
        let (status, body) = call(&router, req).await;
        assert_eq!(status, want, "{name}: {body}");
        assert_eq!(body["ok"], false, "{name}: {body}");
        let error = body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {body}"));
        assert!(error.contains(says), "{name}: {error}");
    }
    // Nothing was accepted.
    assert_eq!(shared.intake.last_accepted(), 0);
    // The scheme's case does not matter (HTTP's rule).
    let lower = Request::get("/v1/tasks")
        .header(header::AUTHORIZATION, format!("bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let (status, body) = call(&router, lower).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The gateway still serves.
    let (status, body) = call(
        &router,
        post("/v1/system/event", Some(TOKEN), r#"{"text": "still here"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"ok": true, "queued": true, "mode": "next-heartbeat", "sessionKey": "agent:main:main"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_event_is_in_the_intake_log_before_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let router = router(shared.clone());
    let (status, body) = call(
        &router,
        post(
            "/v1/system/event",
            Some(TOKEN),
            r#"{"text": "deploy finished", "mode": "now", "sessionKey": "ops"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["sessionKey"], "agent:main:ops");
    // Read by another open of the file, no sync needed: it is in the OS.
    let (records, bad) = crate::durable::read_journal(
        &shared.engine.app().paths.gateway_dir().join("intake.jsonl"),
        |l| serde_json::from_slice::<Record>(l).ok(),
    )
    .unwrap();
    assert_eq!(bad, 0);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].text, "deploy finished");
    assert_eq!(records[0].mode, "now");
    assert_eq!(records[0].session_key, "agent:main:ops");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn bad_tokens_lock_a_client_out_but_never_the_health_routes() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let router = router(shared.clone());
    for _ in 0..LOCKOUT_AFTER {
        let (status, _) = call(&router, get("/v1/status", Some("guess"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // Locked out: even the right token waits.
    let (status, body) = call(&router, get("/v1/status", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body["error"].as_str().unwrap().contains("try again in"));
    for path in ["/healthz", "/readyz"] {
        let (status, body) = call(&router, get(path, None)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(body["ok"], true);
    }
    tokio::time::advance(LOCKOUT_WINDOW + Duration::from_secs(1)).await;
    let (status, body) = call(&router, get("/v1/status", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["running"], true);
}

#[tokio::test(flavor = "current_thread")]
async fn readyz_says_503_until_ready() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    shared
        .ready
        .store(false, std::sync::atomic::Ordering::Release);
    let router = router(shared.clone());
    let (status, body) = call(&router, get("/readyz", None)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["ok"], false);
}

/// Reads the stream until it holds `events` whole events, at most 10 s.
async fn sse_events(body: &mut Body, events: usize) -> Vec<String> {
    use http_body_util::BodyExt;
    let mut text = String::new();
    let read = async {
        while text.matches("\n\n").count() < events {
            let frame = body.frame().await.expect("the stream goes on").unwrap();
            if let Ok(data) = frame.into_data() {
                text.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the events arrive");
    text.split_terminator("\n\n")
        .map(|e| format!("{e}\n\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_stream_sends_new_entries_and_replays_what_followed_the_last_event_id() {
    use crate::delivery::{Item, Source, Target};
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let router = router(shared.clone());
    let deliver = |text: &str| {
        let item = Item {
            source: Source::Heartbeat,
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            text: text.into(),
            task_id: None,
            to: None,
            channel: None,
            account_id: None,
        };
        let shared = shared.clone();
        async move {
            let id = shared
                .deliverer
                .deliver(item, &Target::Outbox)
                .await
                .unwrap()
                .id;
            let (entries, _) = crate::delivery::outbox::read_all(&dir_of(&shared)).unwrap();
            entries.into_iter().find(|e| e.id == id).unwrap()
        }
    };
    fn dir_of(shared: &Shared) -> std::path::PathBuf {
        shared.engine.app().paths.outbox_dir()
    }
    let event = |e: &crate::delivery::outbox::Entry| {
        format!(
            "id: {}\nevent: outbox\ndata: {}\n\n",
            e.id,
            serde_json::to_string(e).unwrap()
        )
    };
    let first = deliver("first").await;
    let second = deliver("second").await;

    let (status, body) = call(&router, get("/v1/outbox/stream", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    // Connected, then written: it arrives; nothing older is replayed.
    let response = router
        .clone()
        .oneshot(get("/v1/outbox/stream", Some(TOKEN)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut live = response.into_body();
    let third = deliver("third").await;
    assert_eq!(sse_events(&mut live, 1).await, [event(&third)]);

    // After a reconnect: only what followed the last id seen, then live.
    let mut resumed = get("/v1/outbox/stream", Some(TOKEN));
    resumed
        .headers_mut()
        .insert("last-event-id", first.id.parse().unwrap());
    let mut resumed = router.clone().oneshot(resumed).await.unwrap().into_body();
    assert_eq!(
        sse_events(&mut resumed, 2).await,
        [event(&second), event(&third)]
    );
    let fourth = deliver("fourth").await;
    assert_eq!(sse_events(&mut resumed, 1).await, [event(&fourth)]);
    assert_eq!(sse_events(&mut live, 1).await, [event(&fourth)]);

    let query = format!("/v1/outbox/stream?after={}", third.id);
    let mut by_query = router
        .clone()
        .oneshot(get(&query, Some(TOKEN)))
        .await
        .unwrap()
        .into_body();
    assert_eq!(sse_events(&mut by_query, 1).await, [event(&fourth)]);

    let (status, body) = call(&router, get("/v1/outbox/stream?after=soon", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "`soon` is not an outbox entry id");
}

/// A turn in the gateway's process reaches it through its hooks: the
/// same paths as the routes, without the HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hooks_queue_an_event_as_the_route_does() {
    use crate::app::gateway::GatewayPort;
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let hooks = crate::gateway::route::Port::of(&shared);
    let mut bus = shared.bus.subscribe();
    let answer = hooks
        .system_event("Check the oven".into(), "now".into(), None, true)
        .unwrap();
    assert_eq!(
        answer,
        json!({"ok": true, "queued": true, "mode": "now", "sessionKey": "agent:main:main"})
    );
    assert_eq!(shared.intake.last_accepted(), 1, "in the intake log");
    match bus.recv().await.unwrap() {
        GatewayEvent::Wake { session_key, .. } => assert_eq!(session_key, "agent:main:main"),
        other => panic!("{other:?}"),
    }
    let refused = hooks
        .system_event("  ".into(), "now".into(), None, true)
        .unwrap_err();
    assert_eq!(refused, "text is empty");
    drop(shared);
    assert_eq!(
        hooks
            .system_event("late".into(), "now".into(), None, true)
            .unwrap_err(),
        "the gateway is stopping"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_hooks_tell_the_cron_runner_of_a_change_and_run_a_job_now() {
    use crate::app::gateway::GatewayPort;
    use crate::gateway::supervisor::Component;
    use crate::host::TokioClock;
    let dir = tempfile::tempdir().unwrap();
    let base: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
    let clock = Arc::new(TokioClock::new(base));
    std::fs::create_dir_all(dir.path().join("state/workspace")).unwrap();
    let shared = crate::gateway::test_shared_with(dir.path(), TOKEN, Some(clock), 1);
    let hooks = crate::gateway::route::Port::of(&shared);
    let stop = tokio_util::sync::CancellationToken::new();
    let runner = tokio::spawn(
        Arc::new(crate::gateway::cron::CronRunner).start(shared.clone(), stop.clone()),
    );
    // The runner has read the empty store and sleeps (a minute at most).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(shared.cron.next_wake_ms(), None);
    let app = shared.engine.app();
    let added = crate::app::cron::add(
        &app,
        &crate::app::cron::JobFlags {
            name: Some("stretch".into()),
            every: Some("1h".into()),
            system_event: Some("Stand up".into()),
            wake: Some("next-heartbeat".into()),
            ..Default::default()
        },
    )
    .unwrap();
    hooks.cron_changed();
    // Told, it reads the store at once, well before its next tick.
    let began = tokio::time::Instant::now();
    while shared.cron.next_wake_ms().is_none() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the runner was not told"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        shared.cron.next_wake_ms(),
        added.job.state.next_run_at_ms,
        "{:?}",
        added.job
    );
    let ran = hooks
        .run_cron_job(added.job.id.clone(), false)
        .await
        .unwrap();
    assert_eq!(ran["ok"], true, "{ran}");
    assert_eq!(ran["ran"], true, "{ran}");
    assert_eq!(ran["jobId"], added.job.id.as_str());
    let due = hooks
        .run_cron_job(added.job.id.clone(), true)
        .await
        .unwrap();
    // Not due (or still running from the forced run): not run again.
    assert_eq!(due["ran"], false, "{due}");
    let missing = hooks.run_cron_job("nope".into(), false).await.unwrap_err();
    assert!(missing.contains("nope"), "{missing}");
    stop.cancel();
    let _ = runner.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_search_answers_as_the_command_would_and_refuses_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let app = shared.engine.app();
    let root = app.memory().root;
    std::fs::create_dir_all(root.join("memory")).unwrap();
    std::fs::write(
        root.join("memory/2026-11-30.md"),
        "# 2026-11-30\n\n- [09:00] The printer on the second floor jams\n- [10:00] Lunch with Ana\n",
    )
    .unwrap();
    let router = router(shared.clone());
    let req = crate::app::memory::SearchRequest {
        query: "printer jams".into(),
        context: 1,
        ..Default::default()
    };
    let resolved = app.resolve_search(&req).unwrap().unwrap();
    assert_eq!(resolved.vector_key, None, "no model here: lexical");
    let body = serde_json::to_string(&resolved).unwrap();
    let (status, _) = call(&router, post("/v1/memory/search", None, body.clone())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, mut answer) = call(
        &router,
        post("/v1/memory/search", Some(TOKEN), body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["mode"], "fts-only");
    assert!(
        answer["hits"][0]["body"]
            .as_str()
            .unwrap()
            .contains("printer"),
        "{answer}"
    );
    assert_eq!(shared.semantic.status().searches, 1);
    // The same as this process finds on its own (how each brought the
    // index up to date aside).
    let here = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || crate::app::memory::search(&app, &req))
            .await
            .unwrap()
            .unwrap()
    };
    let printed_here: Value =
        serde_json::from_slice(&crate::app::memory_json::search_json(&here).unwrap()).unwrap();
    let mut here = serde_json::to_value(crate::app::memory::SearchAnswer::of(here)).unwrap();
    for v in [&mut here, &mut answer] {
        let v = v.as_object_mut().unwrap();
        v.remove("sync");
        v.remove("ok");
    }
    assert_eq!(answer, here);
    // A command that prints JSON gets the document it prints, written here.
    let printing = crate::app::memory::ResolvedSearch {
        json: true,
        ..resolved.clone()
    };
    let (status, printed) = call(
        &router,
        post(
            "/v1/memory/search",
            Some(TOKEN),
            serde_json::to_string(&printing).unwrap(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{printed}");
    assert_eq!(printed["printed"], printed_here, "{printed}");
    assert_eq!(printed["mode"], "fts-only");
    assert!(printed.get("hits").is_none(), "{printed}");
    assert_eq!(shared.semantic.status().searches, 2);
    // A command whose settings choose a model the gateway does not use:
    // refused, so it searches on its own.
    let mut other = resolved.clone();
    other.vector_key = Some("local/another-model".into());
    let (status, refused) = call(
        &router,
        post(
            "/v1/memory/search",
            Some(TOKEN),
            serde_json::to_string(&other).unwrap(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("local/another-model"),
        "{refused}"
    );
    assert_eq!(shared.semantic.status().searches, 2);
    // The gateway keeps its index connection between searches; an index
    // deleted meanwhile (and a note written) is not searched through it.
    crate::store::remove_database_files(&app.memory().index_path);
    std::fs::write(
        root.join("memory/2026-12-01.md"),
        "# 2026-12-01\n\n- [09:00] The printer on the third floor jams too\n",
    )
    .unwrap();
    let (status, again) = call(&router, post("/v1/memory/search", Some(TOKEN), body)).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let bodies: Vec<&str> = again["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["body"].as_str().unwrap())
        .collect();
    assert!(bodies.iter().any(|b| b.contains("third floor")), "{again}");
    assert_eq!(shared.semantic.status().searches, 3);
}

/// `what` within 10 s (a guard: nothing here waits for the clock).
async fn within<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .unwrap_or_else(|_| panic!("never: {what}"))
}

/// The intake's row as `GET /v1/status` (what `gateway status` reads)
/// shows it, once `ready` holds.
async fn intake_row(router: &Router, ready: impl Fn(&Value) -> bool) -> Value {
    within("the intake's row shows it", async {
        loop {
            let (_, status) = call(router, get("/v1/status", Some(TOKEN))).await;
            let row = status["components"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "intake")
                .cloned()
                .expect("the intake is listed");
            if ready(&row) {
                return row;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// While the intake log cannot be synced, the routes that write to it
/// answer 503 with a JSON error and write nothing, and `gateway status`
/// shows the intake failing with its error and a grown count; once the
/// syncer's retry succeeds, what was written before the failure is on
/// the disk, the routes answer 200 again and the error is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_writing_the_intake_answer_503_while_it_cannot_be_synced_and_status_shows_why() {
    use crate::gateway::supervisor::supervise;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("workspace")).unwrap();
    std::fs::write(
        state.join("config.json5"),
        "{hooks: {enabled: true, token: 'hook-t0ken'}}",
    )
    .unwrap();
    let disk = Arc::new(crate::durable::FaultyDisk::default());
    let shared = crate::gateway::test_shared_on(dir.path(), TOKEN, None, 1, disk.options());
    let router = router(shared.clone());
    let tracker = tokio_util::task::TaskTracker::new();
    let stop = tokio_util::sync::CancellationToken::new();
    supervise(
        Arc::new(crate::gateway::intake::Feeder),
        shared.clone(),
        shared.registry.clone(),
        &tracker,
        stop.clone(),
    );
    let journal = shared.intake.journal();
    let mut health = journal.health();
    let event = |text: &str| {
        post(
            "/v1/system/event",
            Some(TOKEN),
            format!(r#"{{"text": "{text}"}}"#),
        )
    };
    let wake = |text: &str| {
        Request::post("/hooks/wake")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, "Bearer hook-t0ken")
            .body(Body::from(format!(r#"{{"text": "{text}"}}"#)))
            .unwrap()
    };
    let (status, body) = call(&router, event("before")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    disk.fail_syncs(true);
    // In the OS before the reply, as ever: the sync after it fails.
    let (status, body) = call(&router, event("as it fails")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let written = journal.size_bytes().unwrap();
    // The syncer starts only now: both records are written before any
    // sync can fail, whenever its first sync runs.
    let syncer = {
        let journal = journal.clone();
        std::thread::spawn(move || journal.run_syncer())
    };
    within("the sync fails", health.wait_for(|h| h.failing.is_some()))
        .await
        .unwrap();
    for request in [event("refused"), wake("refused too")] {
        let (status, body) = call(&router, request).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["ok"], false);
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("intake log cannot be synced")),
            "{body}"
        );
    }
    assert_eq!(
        journal.size_bytes().unwrap(),
        written,
        "nothing refused is written"
    );
    let row = intake_row(&router, |r| r["state"] == "failing").await;
    assert_eq!(row["restarts"], 1, "{row}");
    assert!(
        row["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("cannot sync") && e.contains("intake.jsonl")),
        "{row}"
    );
    disk.fail_syncs(false);
    within("a retry succeeds", health.wait_for(|h| h.failing.is_none()))
        .await
        .unwrap();
    assert!(
        disk.synced_len() >= written,
        "the records written before the failure are on the disk"
    );
    let row = intake_row(&router, |r| r["state"] == "running").await;
    assert_eq!(row["lastError"], Value::Null, "{row}");
    assert_eq!(row["restarts"], 1, "one episode: {row}");
    for request in [event("after"), wake("after too")] {
        let (status, body) = call(&router, request).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (records, _) =
        crate::durable::read_journal(journal.path(), |l| serde_json::from_slice::<Record>(l).ok())
            .unwrap();
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, ["before", "as it fails", "after", "after too"]);
    stop.cancel();
    journal.close();
    tokio::task::spawn_blocking(move || syncer.join())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tracker.close();
    tracker.wait().await;
}
