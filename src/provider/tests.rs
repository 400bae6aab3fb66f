//! Both protocols against a local scripted server: streaming, tool calls,
//! error answers, 429 with `Retry-After`, a dropped connection and
//! malformed events. The retry waits are recorded, never slept.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

#[path = "../../tests/support/scripted_server.rs"]
mod scripted;
use scripted::{Reply, ScriptedServer, sse};

use crate::provider::http::RecordingSleeper as Recorder;

fn policy() -> (RetryPolicy, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    (
        RetryPolicy {
            sleeper: recorder.clone(),
            ..RetryPolicy::default()
        },
        recorder,
    )
}

fn endpoint(server: &ScriptedServer, api: Api) -> Endpoint {
    Endpoint {
        provider: "test".to_string(),
        api,
        base_url: server.url.clone(),
        api_key: Some("sk-test".to_string()),
        headers: vec![("x-extra".to_string(), "1".to_string())],
        timeouts: Timeouts::default(),
    }
}

fn request() -> Request {
    Request {
        model: "m1".to_string(),
        system: "You are terse.".to_string(),
        messages: vec![Message::User(vec![Block::text("What is in notes.md?")])],
        tools: vec![ToolSpec {
            name: "read".to_string(),
            description: "Read a file".to_string(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        max_tokens: 256,
        thinking: None,
    }
}

#[derive(Default)]
struct Collect(String);

impl StreamSink for Collect {
    fn text(&mut self, delta: &str) {
        self.0.push_str(delta);
    }
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn call(
    server: &ScriptedServer,
    api: Api,
    policy: &RetryPolicy,
) -> (Result<Response, ProviderError>, String) {
    let provider = connect(endpoint(server, api));
    let mut sink = Collect::default();
    let result = run(call_with_retries(
        provider.as_ref(),
        &request(),
        &mut sink,
        policy,
    ));
    (result, sink.0)
}

fn openai_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn openai_text_stream(text: &[&str]) -> Vec<String> {
    let mut events: Vec<Value> = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    events.extend(
        text.iter()
            .map(|t| openai_chunk(json!({"content": t}), None)),
    );
    events.push(openai_chunk(json!({}), Some("stop")));
    events.push(json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}));
    let mut chunks = sse(&events);
    chunks.push("data: [DONE]\n\n".to_string());
    chunks
}

#[test]
fn openai_streams_text_and_sends_the_conversation() {
    let server = ScriptedServer::start(vec![Reply::Sse(openai_text_stream(&["Hel", "lo", "!"]))]);
    let (p, _) = policy();
    let (result, streamed) = call(&server, Api::OpenAiCompletions, &p);
    let response = result.unwrap();
    assert_eq!(streamed, "Hello!");
    assert_eq!(response.content, vec![Block::text("Hello!")]);
    assert_eq!(response.stop_reason, StopReason::Stop);
    assert_eq!(
        (
            response.usage.input,
            response.usage.output,
            response.usage.total_tokens
        ),
        (12, 3, 15)
    );
    let req = &server.requests()[0];
    assert_eq!(req.path, "/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.header("x-extra"), Some("1"));
    let body = req.json();
    assert_eq!(body["model"], "m1");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "What is in notes.md?"})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "read");
}

#[test]
fn openai_tool_calls_arrive_in_fragments() {
    let events = vec![
        openai_chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_abc", "type": "function", "function": {"name": "read", "arguments": ""}}]}),
            None,
        ),
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}),
            None,
        ),
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"notes.md\"}"}}]}),
            None,
        ),
        // A second call from a server that sends no id.
        openai_chunk(
            json!({"tool_calls": [{"index": 1, "function": {"name": "read", "arguments": "{\"path\":\"b.md\"}"}}]}),
            None,
        ),
        openai_chunk(json!({}), Some("tool_calls")),
    ];
    let mut chunks = sse(&events);
    chunks.push("data: [DONE]\n\n".to_string());
    let server = ScriptedServer::start(vec![Reply::Sse(chunks)]);
    let (p, _) = policy();
    let response = call(&server, Api::OpenAiCompletions, &p).0.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![
            Block::ToolCall {
                id: "call_abc".into(),
                name: "read".into(),
                arguments: json!({"path": "notes.md"})
            },
            Block::ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                arguments: json!({"path": "b.md"})
            },
        ]
    );
}

#[test]
fn rate_limits_wait_as_long_as_the_server_asks() {
    let server = ScriptedServer::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after".into(), "7".into())],
            body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}"#
                .into(),
        },
        Reply::Status {
            status: 503,
            headers: vec![],
            body: "upstream busy".into(),
        },
        Reply::Sse(openai_text_stream(&["ok"])),
    ]);
    let (p, waits) = policy();
    let response = call(&server, Api::OpenAiCompletions, &p).0.unwrap();
    assert_eq!(response.content, vec![Block::text("ok")]);
    let waits = waits.waits();
    assert_eq!(waits[0], Duration::from_secs(7), "Retry-After honoured");
    assert!(
        waits[1] >= Duration::from_millis(1000) && waits[1] <= Duration::from_millis(1200),
        "backoff {:?}",
        waits[1]
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_huge_retry_after_is_capped_not_a_panic() {
    let limited = |value: &str| Reply::Status {
        status: 429,
        headers: vec![
            ("retry-after".into(), value.into()),
            ("date".into(), "Thu, 01 Jan 1970 00:00:00 GMT".into()),
        ],
        body: r#"{"error":{"message":"slow down"}}"#.into(),
    };
    let server = ScriptedServer::start(vec![
        limited("99999999999999999999999999999999"),
        limited("1e400"),
        limited("Thu, 30 Dec 9999 00:00:00 GMT"),
        Reply::Sse(openai_text_stream(&["ok"])),
    ]);
    let (p, waits) = policy();
    let response = call(&server, Api::OpenAiCompletions, &p).0.unwrap();
    assert_eq!(response.content, vec![Block::text("ok")]);
    // Recorded, not slept: each wait is the policy's longest.
    assert_eq!(waits.waits(), vec![p.max_retry_after; 3]);
}

#[test]
fn persistent_errors_end_after_the_retries_with_the_server_message() {
    let busy = || Reply::Status {
        status: 500,
        headers: vec![],
        body: r#"{"error":{"message":"internal trouble"}}"#.into(),
    };
    let server = ScriptedServer::start(vec![busy(), busy(), busy(), busy(), busy()]);
    let (p, waits) = policy();
    let err = call(&server, Api::OpenAiCompletions, &p).0.unwrap_err();
    assert_eq!(err.to_string(), "test answered HTTP 500: internal trouble");
    assert_eq!(server.requests().len(), 4, "one try and three retries");
    assert_eq!(waits.waits().len(), 3);
    // A client error is not retried.
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key"}}"#.into(),
    }]);
    let err = call(&server, Api::OpenAiCompletions, &p).0.unwrap_err();
    assert!(err.to_string().contains("401: Incorrect API key"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_dropped_stream_is_retried_and_never_returned_half() {
    let mut partial = openai_text_stream(&["This answer is cut"]);
    partial.truncate(2); // the role chunk and some text, no finish
    let server = ScriptedServer::start(vec![
        Reply::SseDrop(partial.clone()),
        Reply::Sse(openai_text_stream(&["Whole answer."])),
    ]);
    let (p, _) = policy();
    let response = call(&server, Api::OpenAiCompletions, &p).0.unwrap();
    assert_eq!(response.content, vec![Block::text("Whole answer.")]);
    // Without retries the drop is an error, not a truncated answer.
    let server = ScriptedServer::start(vec![Reply::SseDrop(partial)]);
    let no_retries = RetryPolicy {
        max_retries: 0,
        ..p
    };
    let err = call(&server, Api::OpenAiCompletions, &no_retries)
        .0
        .unwrap_err();
    assert!(matches!(err, ProviderError::Dropped { .. }), "{err:?}");
}

#[test]
fn malformed_answers_are_errors_and_not_retried() {
    let server = ScriptedServer::start(vec![Reply::Sse(vec![
        "data: {\"choices\": [\n\n".to_string(),
    ])]);
    let (p, _) = policy();
    let err = call(&server, Api::OpenAiCompletions, &p).0.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err:?}");
    assert_eq!(server.requests().len(), 1);
    // An error event inside the stream.
    let server = ScriptedServer::start(vec![Reply::Sse(sse(&[
        json!({"error": {"message": "context length exceeded"}}),
    ]))]);
    let err = call(&server, Api::OpenAiCompletions, &p).0.unwrap_err();
    assert_eq!(
        err.to_string(),
        "test reported an error: context length exceeded"
    );
}

#[test]
fn unreachable_servers_say_where() {
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut ep = Endpoint {
        provider: "local".into(),
        api: Api::OpenAiCompletions,
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: None,
        headers: vec![],
        timeouts: Timeouts::default(),
    };
    let (p, _) = policy();
    let no_retries = RetryPolicy {
        max_retries: 0,
        ..p
    };
    let provider = connect(ep.clone());
    let err = run(call_with_retries(
        provider.as_ref(),
        &request(),
        &mut Quiet,
        &no_retries,
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("cannot reach local at http://127.0.0.1:{port}/v1/chat/completions")
    );
    ep.api = Api::AnthropicMessages;
    let provider = connect(ep);
    let err = run(call_with_retries(
        provider.as_ref(),
        &request(),
        &mut Quiet,
        &no_retries,
    ))
    .unwrap_err();
    assert!(matches!(err, ProviderError::Unreachable { .. }));
}

fn short_timeouts(connect_ms: u64, idle_ms: u64, total_ms: u64) -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(connect_ms),
        idle: Some(Duration::from_millis(idle_ms)),
        total: Duration::from_millis(total_ms),
    }
}

fn call_with(
    server: &ScriptedServer,
    timeouts: Timeouts,
    policy: &RetryPolicy,
) -> (Result<Response, ProviderError>, Duration) {
    let provider = connect(Endpoint {
        timeouts,
        ..endpoint(server, Api::OpenAiCompletions)
    });
    let started = std::time::Instant::now();
    let result = run(call_with_retries(
        provider.as_ref(),
        &request(),
        &mut Quiet,
        policy,
    ));
    (result, started.elapsed())
}

#[test]
fn a_server_that_never_answers_fails_after_the_idle_timeout_without_retries() {
    let server = ScriptedServer::start(vec![Reply::Hang, Reply::Hang]);
    let (p, waits) = policy();
    let (result, took) = call_with(&server, short_timeouts(100, 200, 30_000), &p);
    let err = result.unwrap_err();
    assert!(
        matches!(err, ProviderError::Idle { started: false, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "test accepted the connection but sent nothing for 0.2 s (agents.defaults.llm.idleTimeoutSeconds)"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(server.requests().len(), 1, "not retried");
    assert!(waits.waits().is_empty());
}

#[test]
fn a_stream_that_stalls_midway_fails_after_the_idle_timeout() {
    let mut start = openai_text_stream(&["This answer stops"]);
    start.truncate(2);
    let server = ScriptedServer::start(vec![Reply::SseStall(start)]);
    let (p, _) = policy();
    let (result, took) = call_with(&server, short_timeouts(100, 200, 30_000), &p);
    let err = result.unwrap_err();
    assert!(
        matches!(err, ProviderError::Idle { started: true, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("stopped sending in the middle of its answer"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_long_answer_that_keeps_coming_is_cut_only_by_the_whole_answer_limit() {
    let pieces: Vec<String> = (0..8).map(|i| format!("{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let slow = || Reply::SseSlow(openai_text_stream(&pieces), Duration::from_millis(40));
    // Gaps well under the idle limit, the whole longer than it: answered.
    let server = ScriptedServer::start(vec![slow()]);
    let (p, _) = policy();
    let (result, took) = call_with(&server, short_timeouts(100, 200, 30_000), &p);
    let response = result.unwrap();
    assert_eq!(response.content, vec![Block::text("0 1 2 3 4 5 6 7 ")]);
    assert!(took > Duration::from_millis(200), "{took:?}");
    // Past the whole-answer limit: cut, and not tried again (it would be
    // cut at the same point).
    let server = ScriptedServer::start(vec![slow(), slow()]);
    let (result, _) = call_with(&server, short_timeouts(100, 200, 150), &p);
    let err = result.unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "test did not finish its answer within 0.15 s (agents.defaults.timeoutSeconds)"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn an_html_page_is_reported_as_what_it_is() {
    let portal = || Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
        body: "<!doctype html><html><body>Sign in to the Wi-Fi</body></html>".into(),
    };
    let server = ScriptedServer::start(vec![portal(), portal()]);
    let (p, _) = policy();
    let err = call(&server, Api::OpenAiCompletions, &p).0.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "test answered with an HTML page, not an event stream: check models.providers.test.baseUrl ({}/chat/completions)",
            server.url
        )
    );
    assert_eq!(server.requests().len(), 1, "not retried");
    // A JSON answer where a stream was asked for says what it said.
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: r#"{"error":{"message":"streaming is not supported"}}"#.into(),
    }]);
    let err = call(&server, Api::AnthropicMessages, &p).0.unwrap_err();
    assert!(
        err.to_string()
            .contains("answered with JSON (streaming is not supported), not an event stream"),
        "{err}"
    );
}

/// A listener whose accept queue is full: the next connection attempt is
/// never completed.
fn full_listener() -> (std::net::SocketAddr, Vec<std::net::TcpStream>, i32) {
    use std::os::fd::FromRawFd;
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        let listener = std::net::TcpListener::from_raw_fd(fd);
        let local = listener.local_addr().unwrap();
        std::mem::forget(listener);
        let mut held = Vec::new();
        while let Ok(s) = std::net::TcpStream::connect_timeout(&local, Duration::from_millis(200)) {
            held.push(s);
            assert!(held.len() < 64, "the accept queue never filled");
        }
        (local, held, fd)
    }
}

#[test]
fn a_connection_that_is_never_accepted_fails_after_the_connect_timeout() {
    let (addr, _held, fd) = full_listener();
    let ep = Endpoint {
        provider: "slow".into(),
        api: Api::OpenAiCompletions,
        base_url: format!("http://{addr}/v1"),
        api_key: None,
        headers: vec![],
        timeouts: short_timeouts(150, 10_000, 30_000),
    };
    let (p, waits) = policy();
    let no_retries = RetryPolicy {
        max_retries: 0,
        ..p
    };
    let provider = connect(ep);
    let started = std::time::Instant::now();
    let err = run(call_with_retries(
        provider.as_ref(),
        &request(),
        &mut Quiet,
        &no_retries,
    ))
    .unwrap_err();
    let took = started.elapsed();
    unsafe { libc::close(fd) };
    assert!(
        matches!(err, ProviderError::ConnectTimeout { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "slow at http://{addr}/v1/chat/completions did not accept a connection within 0.15 s (agents.defaults.llm.connectTimeoutSeconds)"
        )
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(err.is_retryable(), "connection failures are retried");
    assert!(waits.waits().is_empty());
}

fn anthropic_stream(blocks: Vec<Vec<Value>>, stop: &str) -> Vec<String> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_input_tokens": 5}}}),
    ];
    events.push(json!({"type": "ping"}));
    for block in blocks {
        events.extend(block);
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}));
    events.push(json!({"type": "message_stop"}));
    sse(&events)
}

#[test]
fn anthropic_streams_thinking_text_and_tool_use() {
    let blocks = vec![
        vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need the file."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}}),
            json!({"type": "content_block_stop", "index": 0}),
        ],
        vec![
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me "}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "look."}}),
            json!({"type": "content_block_stop", "index": 1}),
        ],
        vec![
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"notes.md\"}"}}),
            json!({"type": "content_block_stop", "index": 2}),
        ],
    ];
    let server = ScriptedServer::start(vec![Reply::Sse(anthropic_stream(blocks, "tool_use"))]);
    let (p, _) = policy();
    let (result, streamed) = call(&server, Api::AnthropicMessages, &p);
    let response = result.unwrap();
    assert_eq!(streamed, "Let me look.");
    assert_eq!(
        response.content,
        vec![
            Block::Thinking {
                thinking: "Need the file.".into(),
                signature: Some("sig==".into())
            },
            Block::text("Let me look."),
            Block::ToolCall {
                id: "toolu_01".into(),
                name: "read".into(),
                arguments: json!({"path": "notes.md"})
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (
            response.usage.input,
            response.usage.output,
            response.usage.cache_read
        ),
        (20, 9, 5)
    );
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-test"));
    assert_eq!(req.header("anthropic-version"), Some(anthropic::VERSION));
    let body = req.json();
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["tools"][0]["input_schema"]["required"][0], "path");
}

#[test]
fn anthropic_overload_is_retried_and_errors_are_clear() {
    let overloaded = sse(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let ok = anthropic_stream(
        vec![vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Fine."}}),
            json!({"type": "content_block_stop", "index": 0}),
        ]],
        "end_turn",
    );
    let server = ScriptedServer::start(vec![Reply::Sse(overloaded), Reply::Sse(ok)]);
    let (p, waits) = policy();
    let response = call(&server, Api::AnthropicMessages, &p).0.unwrap();
    assert_eq!(response.content, vec![Block::text("Fine.")]);
    assert_eq!(waits.waits().len(), 1);
    // A delta for a block that never started is malformed.
    let bad = sse(&[
        json!({"type": "message_start", "message": {"usage": {}}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}),
    ]);
    let server = ScriptedServer::start(vec![Reply::Sse(bad)]);
    let err = call(&server, Api::AnthropicMessages, &p).0.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err:?}");
}

#[test]
fn anthropic_tool_results_travel_together_in_the_next_user_message() {
    let req = Request {
        messages: vec![
            Message::User(vec![Block::text("Read both")]),
            Message::Assistant(vec![
                Block::Thinking {
                    thinking: "unsigned".into(),
                    signature: None,
                },
                Block::ToolCall {
                    id: "t1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a"}),
                },
                Block::ToolCall {
                    id: "t2".into(),
                    name: "read".into(),
                    arguments: json!({"path": "b"}),
                },
            ]),
            Message::ToolResult {
                tool_call_id: "t1".into(),
                tool_name: "read".into(),
                content: vec![Block::text("A")],
                is_error: false,
            },
            Message::ToolResult {
                tool_call_id: "t2".into(),
                tool_name: "read".into(),
                content: vec![Block::text("no such file")],
                is_error: true,
            },
            Message::User(vec![Block::text("and summarise")]),
        ],
        ..request()
    };
    let body = anthropic::body(&req);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1]["content"].as_array().unwrap().len(),
        2,
        "unsigned thinking is not sent"
    );
    let last = messages[2]["content"].as_array().unwrap();
    let kinds: Vec<&str> = last.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["tool_result", "tool_result", "text"]);
    assert_eq!(last[1]["is_error"], true);
    // OpenAI: one tool message per result, after the assistant's calls.
    let body = openai::body(&req);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec!["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(
        body["messages"][2]["tool_calls"][1]["function"]["arguments"],
        "{\"path\":\"b\"}"
    );
}

/// Each thinking level reaches the server as the protocol's own field:
/// Anthropic's `thinking` budget (with `max_tokens` above it) and
/// OpenAI's `reasoning_effort`; `off` sends neither.
#[test]
fn thinking_levels_become_each_protocols_request_fields() {
    let levels = [
        ("off", None, None),
        ("minimal", Some(1024), Some("minimal")),
        ("low", Some(2048), Some("low")),
        ("medium", Some(8192), Some("medium")),
        ("high", Some(16384), Some("high")),
        ("xhigh", Some(32768), Some("high")),
    ];
    for (name, budget, effort) in levels {
        let thinking = Thinking::parse(name);
        assert!(thinking.is_some(), "{name}");
        let replies = vec![
            Reply::Sse(openai_text_stream(&["ok"])),
            Reply::Sse(anthropic_stream(
                vec![vec![
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
                    json!({"type": "content_block_stop", "index": 0}),
                ]],
                "end_turn",
            )),
        ];
        let server = ScriptedServer::start(replies);
        let (p, _) = policy();
        let mut sink = Collect::default();
        let asked = Request {
            thinking,
            ..request()
        };
        for api in [Api::OpenAiCompletions, Api::AnthropicMessages] {
            let provider = connect(endpoint(&server, api));
            run(call_with_retries(provider.as_ref(), &asked, &mut sink, &p)).unwrap();
        }
        let sent = server.requests();
        let openai = sent[0].json();
        let anthropic = sent[1].json();
        assert_eq!(openai["reasoning_effort"].as_str(), effort, "{name}");
        match budget {
            Some(budget) => {
                assert_eq!(
                    anthropic["thinking"],
                    json!({"type": "enabled", "budget_tokens": budget}),
                    "{name}"
                );
                assert_eq!(anthropic["max_tokens"], 256 + budget, "{name}");
            }
            None => {
                assert!(anthropic.get("thinking").is_none(), "{name}");
                assert_eq!(anthropic["max_tokens"], 256);
            }
        }
        assert_eq!(openai["max_tokens"], 256);
    }
    assert_eq!(Thinking::parse("extreme"), None);
    assert_eq!(Thinking::NAMES.len(), 6);
}

/// A model endpoint that answers with a redirect does not get the key
/// forwarded to the address it names: the redirect is an error.
#[test]
fn a_redirect_is_not_followed_and_the_key_stays_home() {
    let elsewhere = ScriptedServer::start(vec![Reply::Sse(openai_text_stream(&["stolen"]))]);
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 307,
        headers: vec![(
            "location".to_string(),
            format!("{}/chat/completions", elsewhere.url),
        )],
        body: String::new(),
    }]);
    let (p, _) = policy();
    let (result, _) = call(&server, Api::OpenAiCompletions, &p);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("307") && err.contains("not followed"), "{err}");
    assert!(
        elsewhere.requests().is_empty(),
        "the key followed the redirect"
    );
}
