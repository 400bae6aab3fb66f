//! The `openai` embeddings provider against a local scripted server:
//! batching and order, retries (429 with `Retry-After`, a connection cut
//! midway), whole-batch refusal down to the index, errors without the
//! key, and which key is sent. Retry waits are recorded, never slept.

use serde_json::{Value, json};

use super::scripted::{Recorded, Reply, ScriptedServer};
use super::*;
use crate::config::MemorySearchConfig;
use crate::memory::embed::{Choice, choose};

use crate::provider::http::RecordingSleeper as Recorder;

fn settings(server: &ScriptedServer, key: Option<&str>) -> RemoteSettings {
    RemoteSettings {
        base_url: format!("{}/v1/", server.url),
        api_key: key.map(str::to_string),
        model: "nomic-embed-text".to_string(),
    }
}

/// The provider on `server` with `max_inputs` per request; the waits it
/// would sleep go to the recorder.
fn provider(settings: &RemoteSettings, max_inputs: usize) -> (OpenAi, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let retry = RetryPolicy {
        sleeper: recorder.clone(),
        ..default_retry()
    };
    let limits = Limits {
        max_inputs,
        ..Limits::default()
    };
    (OpenAi::with(settings, limits, retry).unwrap(), recorder)
}

/// The vector the scripted server gives input `i` (before normalising).
fn raw_vector(i: usize) -> Vec<f32> {
    vec![i as f32 + 1.0, 2.0, -1.0]
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    normalise(&mut v);
    v
}

/// A `200` embeddings answer listing `items` (`index`, vector) in the
/// order given.
fn answer(items: &[(usize, Vec<f32>)]) -> Reply {
    let data: Vec<Value> = items
        .iter()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"object": "list", "data": data, "model": "nomic-embed-text",
                     "usage": {"prompt_tokens": 8, "total_tokens": 8}})
        .to_string(),
    }
}

/// An answer for inputs `first..first + n` of the caller's texts, with
/// each item's `index` relative to the request, listed in reverse.
fn shuffled_answer(first: usize, n: usize) -> Reply {
    let items: Vec<(usize, Vec<f32>)> = (0..n).rev().map(|i| (i, raw_vector(first + i))).collect();
    answer(&items)
}

fn error(status: u16, headers: &[(&str, &str)], body: Value) -> Reply {
    Reply::Status {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("content-type".to_string(), "application/json".to_string())])
            .collect(),
        body: body.to_string(),
    }
}

fn inputs(req: &Recorded) -> Vec<String> {
    serde_json::from_value(req.json()["input"].clone()).unwrap()
}

#[test]
fn texts_go_in_batches_and_come_back_in_order_whatever_the_order_of_data() {
    let texts: Vec<String> = (0..150).map(|i| format!("note number {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let server = ScriptedServer::start(vec![
        shuffled_answer(0, 64),
        shuffled_answer(64, 64),
        shuffled_answer(128, 22),
    ]);
    let (p, recorder) = provider(&settings(&server, Some("sk-test")), 64);
    let vectors = p.embed(&refs).unwrap();
    let expected: Vec<Vec<f32>> = (0..150).map(|i| unit(raw_vector(i))).collect();
    assert_eq!(vectors, expected);
    for v in &vectors {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for (req, range) in requests.iter().zip([0..64, 64..128, 128..150]) {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/embeddings");
        assert_eq!(inputs(req), texts[range].to_vec());
        let body = req.json();
        assert_eq!(body["model"], "nomic-embed-text");
        assert_eq!(body["encoding_format"], "float");
    }
    assert!(recorder.waits().is_empty());
}

#[test]
fn batches_are_bounded_by_inputs_and_estimated_tokens_and_a_long_text_goes_alone() {
    let long = "x".repeat(40_000);
    let texts = ["a".repeat(12_000), "b".repeat(12_000), "c".repeat(12_000)];
    let mut refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // 3,000 tokens each: two fit under 8,000, a third does not.
    assert_eq!(batches(&refs, 96, 8_000), vec![0..2, 2..3]);
    refs.insert(1, &long);
    assert_eq!(batches(&refs, 96, 8_000), vec![0..1, 1..2, 2..4]);
    let short = vec!["hi"; 200];
    assert_eq!(batches(&short, 96, 8_000), vec![0..96, 96..192, 192..200]);
    assert!(batches(&[], 96, 8_000).is_empty());
}

#[test]
fn a_429_with_retry_after_is_waited_out_once_then_the_answer_is_used() {
    let server = ScriptedServer::start(vec![
        error(
            429,
            &[("retry-after", "7")],
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        ),
        answer(&[(0, raw_vector(0)), (1, raw_vector(1))]),
    ]);
    let (p, recorder) = provider(&settings(&server, None), 64);
    let vectors = p.embed(&["one", "two"]).unwrap();
    assert_eq!(vectors, vec![unit(raw_vector(0)), unit(raw_vector(1))]);
    assert_eq!(recorder.waits(), vec![Duration::from_secs(7)]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(inputs(&requests[1]), vec!["one", "two"]);
}

#[test]
fn a_long_retry_after_is_capped_and_retries_stop_after_four_tries() {
    let busy = || {
        error(
            503,
            &[("retry-after", "3600")],
            json!({"error": {"message": "overloaded"}}),
        )
    };
    let server = ScriptedServer::start(vec![busy(), busy(), busy(), busy(), busy()]);
    let (p, recorder) = provider(&settings(&server, None), 64);
    let err = p.embed(&["one"]).unwrap_err().to_string();
    assert!(err.contains("HTTP 503: overloaded"), "{err}");
    assert!(err.contains("4 tries"), "{err}");
    assert_eq!(server.requests().len(), 4);
    assert_eq!(recorder.waits(), vec![Duration::from_secs(30); 3]);
}

#[test]
fn an_answer_cut_off_midway_is_tried_again() {
    let full = json!({"data": [{"index": 0, "embedding": raw_vector(0)}]}).to_string();
    let cut = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        full.len(),
        &full[..full.len() / 2]
    );
    let server = ScriptedServer::start(vec![Reply::Raw(cut), answer(&[(0, raw_vector(0))])]);
    let (p, recorder) = provider(&settings(&server, None), 64);
    assert_eq!(p.embed(&["one"]).unwrap(), vec![unit(raw_vector(0))]);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(recorder.waits().len(), 1);
}

#[test]
fn a_refused_connection_is_tried_again_and_then_reported() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let remote = RemoteSettings {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: Some("sk-secret-refused".into()),
        model: "m".into(),
    };
    let (p, recorder) = provider(&remote, 64);
    let err = p.embed(&["one"]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "cannot reach http://127.0.0.1:{port}/v1/embeddings"
        )),
        "{err}"
    );
    assert!(!err.contains("sk-secret-refused"));
    assert_eq!(recorder.waits().len(), 3);
}

#[test]
fn a_missing_or_misshapen_vector_fails_the_whole_batch() {
    let server = ScriptedServer::start(vec![
        // One of three missing.
        answer(&[(2, raw_vector(2)), (0, raw_vector(0))]),
        // One of another dimension.
        answer(&[(0, raw_vector(0)), (1, vec![1.0, 0.0]), (2, raw_vector(2))]),
        // Twice the same index.
        answer(&[(0, raw_vector(0)), (0, raw_vector(1)), (2, raw_vector(2))]),
        // An index past the batch.
        answer(&[(0, raw_vector(0)), (1, raw_vector(1)), (3, raw_vector(2))]),
        // Not embeddings at all.
        Reply::Status {
            status: 200,
            headers: vec![("content-type".into(), "text/html".into())],
            body: "<html>login</html>".into(),
        },
    ]);
    let (p, recorder) = provider(&settings(&server, None), 64);
    let texts = ["a", "b", "c"];
    assert!(matches!(
        p.embed(&texts),
        Err(EmbedError::Count { got: 2, want: 3 })
    ));
    assert!(matches!(
        p.embed(&texts),
        Err(EmbedError::Dims { got: 2, want: 3 })
    ));
    let twice = p.embed(&texts).unwrap_err().to_string();
    assert!(twice.contains("two vectors for input 0"), "{twice}");
    let past = p.embed(&texts).unwrap_err().to_string();
    assert!(past.contains("input 3 of a batch of 3"), "{past}");
    let html = p.embed(&texts).unwrap_err().to_string();
    assert!(html.contains("did not answer with embeddings"), "{html}");
    // None of these is worth another try.
    assert_eq!(server.requests().len(), 5);
    assert!(recorder.waits().is_empty());
}

#[test]
fn the_dimension_of_the_first_answer_holds_for_later_ones() {
    let server = ScriptedServer::start(vec![
        answer(&[(0, raw_vector(0))]),
        answer(&[(0, vec![1.0, 0.0, 0.0, 0.0])]),
    ]);
    let (p, _) = provider(&settings(&server, None), 64);
    p.embed(&["a"]).unwrap();
    assert!(matches!(
        p.embed(&["b"]),
        Err(EmbedError::Dims { got: 4, want: 3 })
    ));
}

#[test]
fn non_finite_parts_count_as_zero() {
    let mut v = vec![f32::NAN, 3.0, f32::INFINITY, 4.0];
    normalise(&mut v);
    assert_eq!(v, vec![0.0, 0.6, 0.0, 0.8]);
    let mut zero = vec![0.0, f32::NEG_INFINITY];
    normalise(&mut zero);
    assert_eq!(zero, vec![0.0, 0.0]);
    // A number too large for f32 in the answer.
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: r#"{"data":[{"index":0,"embedding":[1e300, 0.0, 2.0]}]}"#.into(),
    }]);
    let (p, _) = provider(&settings(&server, None), 64);
    assert_eq!(p.embed(&["a"]).unwrap(), vec![vec![0.0, 0.0, 1.0]]);
}

#[test]
fn a_refused_key_is_not_retried_and_the_message_never_shows_it() {
    let key = "sk-proj-very-secret-0123456789";
    let server = ScriptedServer::start(vec![error(
        401,
        &[],
        json!({"error": {"message": format!("Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com/account/api-keys."), "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )]);
    let (p, recorder) = provider(&settings(&server, Some(key)), 64);
    let err = p.embed(&["a"]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}/v1/embeddings answered HTTP 401: Incorrect API key provided: ***.",
            server.url
        )),
        "{err}"
    );
    assert!(!err.contains(key) && !err.contains('\n'), "{err}");
    assert_eq!(server.requests().len(), 1);
    assert!(recorder.waits().is_empty());
    assert!(!format!("{:?}", settings(&server, Some(key))).contains(key));
}

#[test]
fn a_used_up_quota_says_so_and_is_not_retried() {
    let server = ScriptedServer::start(vec![error(
        429,
        &[("retry-after", "1")],
        json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}}),
    )]);
    let (p, recorder) = provider(&settings(&server, None), 64);
    let err = p.embed(&["a"]).unwrap_err().to_string();
    assert!(
        err.contains("HTTP 429: the account's quota is used up (insufficient_quota)"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(recorder.waits().is_empty());
}

#[test]
fn the_configured_key_beats_the_environment_and_no_key_sends_no_header() {
    let server = ScriptedServer::start(vec![
        answer(&[(0, raw_vector(0))]),
        answer(&[(0, raw_vector(0))]),
        answer(&[(0, raw_vector(0))]),
    ]);
    let models = std::path::Path::new("/nonexistent/models");
    let resolve = |p: &str| std::path::PathBuf::from(p);
    let mut config = MemorySearchConfig {
        provider: Some("openai".into()),
        ..MemorySearchConfig::default()
    };
    config.remote.base_url = Some(format!("{}/v1", server.url));
    let sent = |config: &MemorySearchConfig, env: Option<&str>| {
        let Choice::Remote(remote) = choose(config, models, &resolve, env.map(str::to_string))
        else {
            panic!("not remote")
        };
        provider(&remote, 64).0.embed(&["a"]).unwrap();
        let requests = server.requests();
        requests
            .last()
            .unwrap()
            .header("authorization")
            .map(str::to_string)
    };
    config.remote.api_key = Some("sk-config".into());
    assert_eq!(
        sent(&config, Some("sk-env")).as_deref(),
        Some("Bearer sk-config")
    );
    config.remote.api_key = None;
    assert_eq!(
        sent(&config, Some("sk-env")).as_deref(),
        Some("Bearer sk-env")
    );
    assert_eq!(sent(&config, None), None);
}

#[test]
fn start_builds_the_openai_provider_and_refuses_a_base_url_that_is_not_http() {
    let remote = RemoteSettings {
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: None,
        model: "text-embedding-3-small".into(),
    };
    let embedder = crate::memory::embed::start(&Choice::Remote(remote.clone())).unwrap();
    assert_eq!(embedder.provider(), "openai");
    assert_eq!(embedder.key(), "openai/text-embedding-3-small");
    let err = crate::memory::embed::start(&Choice::Remote(RemoteSettings {
        base_url: "ftp://example.com".into(),
        ..remote
    }))
    .err()
    .unwrap();
    assert!(err.contains("not an http(s) URL"), "{err}");
}

/// An index over one file of `n` notes.
fn index_with_notes(dir: &std::path::Path, n: usize) -> crate::memory::index::Index {
    let root = dir.join("ws");
    let mut text = String::from("# 2026-11-01\n\n");
    for i in 0..n {
        text.push_str(&format!(
            "- [2026-11-01 09:{:02}] Note {i} about topic {i}\n\n",
            i % 60
        ));
    }
    crate::durable::atomic_replace(&root.join("memory/2026-11-01.md"), text.as_bytes(), 0o600)
        .unwrap();
    let mut index = crate::memory::index::Index::open(
        &dir.join("index.sqlite"),
        crate::memory::files::Layout::new(&root),
        jiff::tz::TimeZone::UTC,
    )
    .unwrap();
    index
        .sync(
            crate::memory::index::SyncMode::Full,
            1_700_000_000_000_000_000,
        )
        .unwrap();
    index
}

#[test]
fn fill_vectors_keeps_finished_batches_and_stores_nothing_of_a_short_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut index = index_with_notes(tmp.path(), 100);
    let items = index.stats().unwrap().items;
    let batch = crate::memory::index::vectors::EMBED_BATCH;
    assert!(items > batch, "{items} items");
    let rest = items - batch;
    let server = ScriptedServer::start(vec![
        shuffled_answer(0, batch),
        // The second batch's answer lacks its last vector.
        shuffled_answer(0, rest - 1),
    ]);
    let (p, _) = provider(&settings(&server, None), batch);
    let key = p.key();
    let result = index.fill_vectors(&p, usize::MAX, |_| {});
    assert!(
        matches!(
            result,
            Err(crate::memory::index::vectors::FillError::Embed(
                EmbedError::Count { .. }
            ))
        ),
        "{result:?}"
    );
    let counts = index.vector_counts(&key).unwrap();
    assert_eq!((counts.with_vector, counts.without_vector), (batch, rest));
    // The refused batch's items are exactly the ones still missing.
    let missing: Vec<String> = index
        .missing_vectors(&key, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(inputs(&requests[1]), missing);
}

#[test]
fn embedding_works_from_inside_a_runtime_as_an_agent_turn_calls_it() {
    let server = ScriptedServer::start(vec![answer(&[(0, raw_vector(0))])]);
    let (p, _) = provider(&settings(&server, None), 64);
    let outer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let vectors = outer.block_on(async { p.embed(&["inside"]) }).unwrap();
    assert_eq!(vectors, vec![unit(raw_vector(0))]);
    // Started, used and dropped inside, as the memory tool does.
    let server = ScriptedServer::start(vec![answer(&[(0, raw_vector(1))])]);
    let remote = settings(&server, None);
    let vectors = outer
        .block_on(async {
            let embedder = crate::memory::embed::start(&Choice::Remote(remote)).unwrap();
            embedder.embed(&["inside"])
        })
        .unwrap();
    assert_eq!(vectors, vec![unit(raw_vector(1))]);
}
