use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::*;
use crate::gateway_client::exchange::ExchangeError;

const TOKEN: &str = "client-test-token";

fn client_at(addr: SocketAddr, token: &str) -> Client {
    Client {
        info: discovery::test_info(std::process::id(), &addr.ip().to_string(), addr.port()),
        token: token.to_string(),
    }
}

/// The gateway's own control API on a loopback port, served until the
/// returned token is cancelled.
async fn real_gateway(
    dir: &std::path::Path,
) -> (
    SocketAddr,
    std::sync::Arc<crate::gateway::Shared>,
    tokio_util::sync::CancellationToken,
) {
    let shared = crate::gateway::test_shared(dir, TOKEN);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let router = crate::gateway::http::router(shared.clone());
    let until = stop.clone();
    tokio::spawn(crate::gateway::http::serve::serve(
        listener,
        router,
        async move { until.cancelled().await },
    ));
    (addr, shared, stop)
}

/// Runs `ask` on a blocking thread (the client blocks).
async fn blocking<T: Send + 'static>(ask: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(ask).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_asks_the_real_gateway_and_reads_its_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, shared, stop) = real_gateway(dir.path()).await;
    let app = shared.engine.app();
    let root = app.memory().root;
    std::fs::create_dir_all(root.join("memory")).unwrap();
    // An answer of many reads: far more than one read's worth of hits.
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "- [09:{:02}] The printer number {i} on floor {i} jams again\n",
                i % 60
            )
        })
        .collect();
    std::fs::write(
        root.join("memory/2026-11-30.md"),
        format!("# 2026-11-30\n\n{lines}"),
    )
    .unwrap();
    let req = crate::app::memory::SearchRequest {
        query: "printer jams".into(),
        max_results: Some(300),
        context: 1,
        ..Default::default()
    };
    let resolved = app.resolve_search(&req).unwrap().unwrap();
    let client = client_at(addr, TOKEN);
    let (status, answer, raw) = blocking(move || {
        let status = client.get("/v1/status").unwrap();
        let answer: crate::app::memory::SearchAnswer = client
            .post_for("/v1/memory/search", &resolved, Duration::from_secs(10))
            .unwrap();
        let raw = client
            .post("/v1/memory/search", &resolved, Duration::from_secs(10))
            .unwrap();
        (status, answer, raw)
    })
    .await;
    assert_eq!(status["pid"], std::process::id(), "{status}");
    assert_eq!(answer.hits.len(), 300);
    assert!(answer.hits.iter().all(|h| h.body.contains("printer")));
    assert!(
        serde_json::to_vec(&raw).unwrap().len() > 64 * 1024,
        "the answer spans many reads"
    );
    assert_eq!(raw["ok"], true);
    assert_eq!(raw["hits"].as_array().unwrap().len(), 300);

    // A wrong token: refused with the gateway's own words.
    let intruder = client_at(addr, "not-the-token");
    let err = blocking(move || intruder.get("/v1/status").unwrap_err()).await;
    let refused = err.downcast_ref::<Refused>().expect("refused");
    assert_eq!(refused.status, 401, "{err:#}");
    assert!(!refused.message.is_empty());
    // A route that is not there.
    let client = client_at(addr, TOKEN);
    let err = blocking(move || client.get("/v1/no-such-route").unwrap_err()).await;
    assert_eq!(err.downcast_ref::<Refused>().expect("refused").status, 404);
    stop.cancel();
}

#[test]
fn no_gateway_listening_is_a_clear_error() {
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let err = client_at(addr, TOKEN).get("/v1/status").unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to the gateway at http://{addr}")),
        "{err:#}"
    );
}

/// A server that reads one request and answers `answer` (raw bytes),
/// then closes; the request it read comes back through the handle.
fn raw_server(answer: impl Into<Vec<u8>>) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let answer = answer.into();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let request = read_request(&mut stream);
        stream.write_all(&answer).unwrap();
        request
    });
    (addr, serving)
}

/// One request's head and its `Content-Length` bytes of body.
fn read_request(stream: &mut std::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |n| n.trim().parse().unwrap());
            if got.len() >= end + 4 + length || n == 0 {
                return got;
            }
        }
        if n == 0 {
            return got;
        }
    }
}

#[test]
fn the_request_is_whole_and_a_chunked_answer_is_joined() {
    let (addr, serving) = raw_server(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n\
          5\r\n{\"ok\"\r\n6;ext=1\r\n: true\r\n1\r\n}\r\n0\r\nX-Trailer: y\r\n\r\n",
    );
    let answer = client_at(addr, TOKEN)
        .post(
            "/v1/system/event",
            &serde_json::json!({"text": "hé"}),
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(answer, serde_json::json!({"ok": true}));
    let request = String::from_utf8(serving.join().unwrap()).unwrap();
    let body = r#"{"text":"hé"}"#;
    assert!(
        request.starts_with("POST /v1/system/event HTTP/1.1\r\n"),
        "{request}"
    );
    for header in [
        format!("Host: {addr}"),
        format!("Authorization: Bearer {TOKEN}"),
        "Content-Type: application/json".to_string(),
        format!("Content-Length: {}", body.len()),
        "Connection: close".to_string(),
    ] {
        assert!(
            request.contains(&format!("\r\n{header}\r\n")),
            "{header}: {request}"
        );
    }
    assert!(request.ends_with(&format!("\r\n\r\n{body}")), "{request}");
}

/// What `GET /v1/status` from a server answering `answer` fails with.
fn status_error(answer: &[u8]) -> anyhow::Error {
    let (addr, serving) = raw_server(answer);
    let err = client_at(addr, TOKEN).get("/v1/status").unwrap_err();
    serving.join().unwrap();
    err
}

fn is_truncated(err: &anyhow::Error) -> bool {
    matches!(
        err.downcast_ref::<ExchangeError>(),
        Some(ExchangeError::Truncated)
    )
}

#[test]
fn an_answer_cut_short_or_longer_than_it_says_is_an_error() {
    let err = status_error(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ok\":");
    assert!(is_truncated(&err), "{err:#}");
    assert_eq!(err.to_string(), "the gateway's answer ended early");

    // A length shorter than the body: only that much is the answer, and
    // a typed reading of it fails clearly.
    let (addr, serving) = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n{\"ok\":true}");
    let err = client_at(addr, TOKEN)
        .post_for::<serde_json::Map<String, Value>, _>("/v1/x", &(), Duration::from_secs(5))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the gateway's answer to /v1/x is not understood"),
        "{err:#}"
    );
    serving.join().unwrap();

    // A head cut short, and an answer that is not HTTP.
    let err = status_error(b"HTTP/1.1 200 OK\r\nContent-Le");
    assert!(is_truncated(&err), "{err:#}");
    let err = status_error(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
    assert!(
        err.to_string()
            .starts_with("the gateway's answer is not HTTP"),
        "{err:#}"
    );
    let (addr, serving) =
        raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}");
    let err = client_at(addr, TOKEN).get("/v1/status").unwrap_err();
    assert!(
        err.to_string().contains("more than one Content-Length"),
        "{err:#}"
    );
    serving.join().unwrap();
}

#[test]
fn an_error_answer_is_refused_with_its_message() {
    let body = r#"{"error":"another model"}"#;
    let (addr, serving) = raw_server(format!(
        "HTTP/1.1 409 Conflict\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let err = client_at(addr, TOKEN).get("/v1/status").unwrap_err();
    let refused = err.downcast_ref::<Refused>().expect("refused");
    assert_eq!(
        (refused.status, refused.message.as_str()),
        (409, "another model")
    );
    serving.join().unwrap();
    // Not JSON: the text itself, as a JSON string.
    let (addr, serving) = raw_server(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops");
    let err = client_at(addr, TOKEN).get("/v1/status").unwrap_err();
    assert_eq!(err.to_string(), "the gateway answered 502: \"oops\"");
    serving.join().unwrap();
}

#[test]
fn a_gateway_that_does_not_answer_in_time_is_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Reads the request, then holds the connection open without a word
    // until the client has given up.
    let serving = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let _ = done_rx.recv();
    });
    let err = client_at(addr, TOKEN)
        .post(
            "/v1/agent",
            &serde_json::json!({}),
            Duration::from_millis(50),
        )
        .unwrap_err();
    assert!(
        matches!(
            err.downcast_ref::<ExchangeError>(),
            Some(ExchangeError::TimedOut(_))
        ),
        "{err:#}"
    );
    assert!(
        err.to_string()
            .starts_with("the gateway did not answer within"),
        "{err:#}"
    );
    done_tx.send(()).unwrap();
    serving.join().unwrap();
}

#[test]
fn a_path_that_is_not_one_token_is_never_sent() {
    let client = client_at("127.0.0.1:9".parse().unwrap(), TOKEN);
    for path in ["v1/status", "/v1/status HTTP/1.0\r\nX: y", "/a b"] {
        let err = client.get(path).unwrap_err();
        assert!(
            err.to_string().starts_with("not a request path"),
            "{path}: {err:#}"
        );
    }
}
