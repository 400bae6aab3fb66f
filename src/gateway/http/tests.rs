use axum::body::Body;
use axum::http::{Request, header};
use tower::ServiceExt;

use super::*;

const TOKEN: &str = "s3cret-token";

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

fn post(path: &str, token: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut b = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(body.into()).unwrap()
}

fn get(path: &str, token: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(Body::empty()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_with_a_json_error_and_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), TOKEN);
    let router = router(shared.clone());
    let huge = format!(r#"{{"text": "{}"}}"#, "x".repeat(BODY_LIMIT + 10));
    let cases: Vec<(&str, Request<Body>, StatusCode, &str)> = vec![
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
    ];
    for (name, req, want, says) in cases {
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
