//! `almanac agent` and `almanac sessions` against local scripted servers
//! speaking the OpenAI-compatible and Anthropic streaming protocols.

use serde_json::{Value, json};

use crate::common::{Run, Sandbox};
use crate::scripted::{Reply, ScriptedServer, sse};

const NOW: &str = "2026-11-29T09:00:00+00:00";

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// An OpenAI-compatible streamed text answer.
pub(crate) fn text(answer: &str) -> Reply {
    let mut chunks = sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": answer}), None),
        chunk(json!({}), Some("stop")),
        json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}}),
    ]);
    chunks.push("data: [DONE]\n\n".into());
    Reply::Sse(chunks)
}

/// An OpenAI-compatible streamed tool call.
pub(crate) fn tool_call(id: &str, name: &str, args: Value) -> Reply {
    let mut chunks = sse(&[
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]);
    chunks.push("data: [DONE]\n\n".into());
    Reply::Sse(chunks)
}

fn agent_at(sb: &Sandbox, server: &ScriptedServer, now: &str, args: &[&str]) -> Run {
    let mut all = vec!["--now", now, "agent", "--model", "openai/test-model"];
    all.extend_from_slice(args);
    sb.run_env(&all, &[("OPENAI_BASE_URL", &server.url)])
}

fn agent(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Run {
    agent_at(sb, server, NOW, args)
}

fn transcript_lines(sb: &Sandbox, session_id: &str) -> Vec<Value> {
    let path = sb.path(&format!(".almanac/agents/main/sessions/{session_id}.jsonl"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_turn_reads_a_file_with_a_tool_and_answers() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/notes.md", "hello world\n");
    sb.write(
        ".almanac/workspace/AGENTS.md",
        "Always answer in one sentence.\n",
    );
    let server = ScriptedServer::start(vec![
        tool_call("call_1", "read", json!({"path": "notes.md"})),
        text("The note says hello world."),
    ]);
    let v = agent(
        &sb,
        &server,
        &["--message", "What is in notes.md?", "--json"],
    )
    .ok()
    .json();
    assert_eq!(v["reply"], "The note says hello world.");
    assert_eq!(v["sessionKey"], "agent:main:main");
    assert_eq!(v["started"], "first");
    assert_eq!(v["model"], "openai/test-model");
    assert_eq!(v["steps"], 2);
    assert_eq!(v["toolCalls"][0]["name"], "read");
    assert_eq!(v["toolCalls"][0]["isError"], false);
    assert_eq!(v["usage"]["totalTokens"], 107);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json();
    assert_eq!(first["model"], "test-model");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("Always answer in one sentence."),
        "bootstrap files are in the prompt"
    );
    assert!(
        system.contains("<available_skills>"),
        "the skills catalog is in the prompt"
    );
    assert!(system.contains("## Memory Recall"));
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for t in [
        "read",
        "write",
        "edit",
        "exec",
        "memory_search",
        "memory_get",
        "memory_append",
    ] {
        assert!(tools.contains(&t), "{t} in {tools:?}");
    }
    // The second call carries the tool result.
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(result["tool_call_id"], "call_1");
    assert_eq!(result["content"], "hello world\n");
    // The transcript: header, user, assistant (call), tool result, answer.
    let lines = transcript_lines(&sb, v["sessionId"].as_str().unwrap());
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 3);
    let roles: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["user", "assistant", "toolResult", "assistant"]);
    assert_eq!(lines[2]["message"]["content"][0]["type"], "toolCall");
    assert_eq!(lines[2]["message"]["stopReason"], "toolUse");
    assert_eq!(lines[3]["parentId"], lines[2]["id"]);
    // sessions.json records the turn.
    let s = sb.run(&["sessions", "--json"]).ok().json();
    assert_eq!(s["count"], 1);
    assert_eq!(s["sessions"][0]["key"], "agent:main:main");
    assert_eq!(s["sessions"][0]["totalTokens"], 107);
    assert_eq!(s["sessions"][0]["modelProvider"], "openai");
    let show = sb.run(&["sessions", "show", "main", "--json"]).ok().json();
    assert_eq!(show["messages"].as_array().unwrap().len(), 4);
    // Text output is the reply alone.
    let server = ScriptedServer::start(vec![text("Done.")]);
    let run = agent(&sb, &server, &["--message", "Thanks"]).ok();
    assert_eq!(run.stdout, "Done.\n");
}

#[test]
fn anthropic_messages_protocol() {
    let sb = Sandbox::new();
    let events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 50, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Bonjour."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ];
    let server = ScriptedServer::start(vec![Reply::Sse(sse(&events))]);
    let run = sb
        .run_env(
            &[
                "--now",
                NOW,
                "agent",
                "--model",
                "anthropic/claude-test",
                "--message",
                "Say hello in French",
                "--json",
            ],
            &[
                ("ANTHROPIC_BASE_URL", &server.url),
                ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ],
        )
        .ok();
    let v = run.json();
    assert_eq!(v["reply"], "Bonjour.");
    assert_eq!(v["usage"]["input"], 50);
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-ant-test"));
    let body = req.json();
    assert!(body["system"].as_str().unwrap().contains("## Runtime"));
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "Say hello in French"
    );
}

#[test]
fn errors_are_one_clear_line() {
    let sb = Sandbox::new();
    // No model anywhere.
    let run = sb.run(&["agent", "--message", "hi"]).code(2);
    assert!(
        run.stderr.starts_with("error: no model is configured"),
        "{}",
        run.stderr
    );
    // The public endpoint without a key.
    let run = sb
        .run(&["agent", "--model", "openai/gpt-x", "--message", "hi"])
        .code(2);
    assert!(
        run.stderr
            .contains("no API key for openai: set OPENAI_API_KEY"),
        "{}",
        run.stderr
    );
    let run = sb
        .run(&["agent", "--model", "gpt-x", "--message", "hi"])
        .code(2);
    assert!(
        run.stderr.contains("not a model reference"),
        "{}",
        run.stderr
    );
    // Unreachable.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("http://127.0.0.1:{port}/v1");
    let run = sb
        .run_env(
            &["agent", "--model", "openai/m", "--message", "hi"],
            &[("OPENAI_BASE_URL", &url)],
        )
        .code(1);
    assert!(
        run.stderr.contains(&format!(
            "error: cannot reach openai at {url}/chat/completions"
        )),
        "{}",
        run.stderr
    );
    // Refused by the server (not retried).
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
    }]);
    let run = agent(&sb, &server, &["--message", "hi"]).code(1);
    assert!(
        run.stderr
            .contains("openai answered HTTP 401: Incorrect API key provided"),
        "{}",
        run.stderr
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn rate_limits_dropped_streams_and_malformed_answers() {
    let sb = Sandbox::new();
    let mut dropped = match text("This answer will be cut") {
        Reply::Sse(c) => c,
        _ => unreachable!(),
    };
    dropped.truncate(2);
    let server = ScriptedServer::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after".into(), "0".into())],
            body: r#"{"error":{"message":"Rate limit"}}"#.into(),
        },
        Reply::SseDrop(dropped),
        text("Finally whole."),
    ]);
    let v = agent(&sb, &server, &["--message", "hi", "--json"])
        .ok()
        .json();
    assert_eq!(v["reply"], "Finally whole.");
    assert_eq!(server.requests().len(), 3);
    // The transcript has the whole answer only.
    let lines = transcript_lines(&sb, v["sessionId"].as_str().unwrap());
    assert_eq!(lines.len(), 3, "header, user, one answer");
    let server = ScriptedServer::start(vec![Reply::Sse(vec![
        "data: {\"choices\":[{\"delta\":\n\n".into(),
    ])]);
    let run = agent(&sb, &server, &["--message", "again"]).code(1);
    assert!(
        run.stderr.contains("sent a malformed answer"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_killed_turn_leaves_a_transcript_the_next_turn_can_use() {
    let sb = Sandbox::new();
    // The slow command runs as given.
    sb.write(
        ".almanac/config.json5",
        "{ tools: { exec: { security: 'full' } } }",
    );
    let first = ScriptedServer::start(vec![text("Hi, I am here.")]);
    let v = agent(&sb, &first, &["--message", "Are you there?", "--json"])
        .ok()
        .json();
    let session = v["sessionId"].as_str().unwrap().to_string();
    // Turn 2: the model asks for a slow command; almanac is killed while it
    // runs, after the call was stored and before its result.
    let second = ScriptedServer::start(vec![tool_call(
        "call_slow",
        "exec",
        json!({"command": "sleep 5"}),
    )]);
    let mut child = sb
        .cmd()
        .args([
            "--now",
            NOW,
            "agent",
            "--model",
            "openai/test-model",
            "--message",
            "Run the slow job",
        ])
        .env("OPENAI_BASE_URL", &second.url)
        .spawn()
        .unwrap();
    let path = sb.path(&format!(".almanac/agents/main/sessions/{session}.jsonl"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains("call_slow")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call was never stored"
        );
        std::thread::yield_now();
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Turn 3 resumes the same session with a valid conversation.
    let third = ScriptedServer::start(vec![text("Sorry, the job was interrupted.")]);
    let v = agent(&sb, &third, &["--message", "Did it finish?", "--json"])
        .ok()
        .json();
    assert_eq!(v["sessionId"], session.as_str());
    assert!(
        v["repairs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("had none")),
        "{v}"
    );
    let body = third.requests()[0].json();
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec![
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "user"
        ]
    );
    assert_eq!(messages[5]["tool_call_id"], "call_slow");
    assert!(
        messages[5]["content"]
            .as_str()
            .unwrap()
            .contains("No result was recorded")
    );
    // Every line of the transcript is whole.
    for line in std::fs::read_to_string(&path).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

#[test]
fn daily_and_idle_resets_and_explicit_ones() {
    let sb = Sandbox::new();
    let replies = || (0..3).map(|_| text("ok")).collect::<Vec<_>>();
    let at = |now: &str| {
        let server = ScriptedServer::start(replies());
        agent_at(&sb, &server, now, &["--message", "hello", "--json"])
            .ok()
            .json()
    };
    let a = at("2026-11-29T09:00:00+00:00");
    let b = at("2026-11-30T03:59:00+00:00");
    assert_eq!(
        a["sessionId"], b["sessionId"],
        "before 04:00 the session goes on"
    );
    assert!(b.get("started").is_none());
    let c = at("2026-11-30T04:00:00+00:00");
    assert_ne!(c["sessionId"], b["sessionId"]);
    assert_eq!(c["started"], "daily");
    // The old transcript is kept.
    assert!(
        sb.path(&format!(
            ".almanac/agents/main/sessions/{}.jsonl",
            a["sessionId"].as_str().unwrap()
        ))
        .exists()
    );
    // Idle minutes, whichever comes first.
    sb.write(
        ".almanac/config.json5",
        "{ session: { reset: { idleMinutes: 30 } } }",
    );
    let d = at("2026-11-30T10:00:00+00:00");
    let e = at("2026-11-30T10:30:00+00:00");
    assert_eq!(d["sessionId"], e["sessionId"], "exactly 30 minutes idle");
    let f = at("2026-11-30T11:00:01+00:00");
    assert_eq!(f["started"], "idle");
    // /new with a model: a new session that keeps that model.
    let server = ScriptedServer::start(replies());
    let g = agent_at(
        &sb,
        &server,
        "2026-11-30T11:01:00+00:00",
        &["--message", "/new openai/other-model", "--json"],
    )
    .ok()
    .json();
    assert_eq!(g["started"], "new");
    assert_eq!(g["model"], "openai/other-model");
    assert_eq!(server.requests()[0].json()["model"], "other-model");
    let server = ScriptedServer::start(replies());
    let h = sb
        .run_env(
            &[
                "--now",
                "2026-11-30T11:02:00+00:00",
                "agent",
                "--message",
                "/reset and go on",
                "--json",
            ],
            &[("OPENAI_BASE_URL", &server.url)],
        )
        .ok()
        .json();
    assert_eq!(h["started"], "reset");
    assert_eq!(
        h["model"], "openai/other-model",
        "an explicit reset keeps the chosen model"
    );
    assert_eq!(
        server.requests()[0].json()["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"],
        "and go on"
    );
}

#[test]
fn near_the_window_notes_are_flushed_and_old_turns_summarised() {
    let sb = Sandbox::new();
    // Long answers fill the window turn by turn; the fifth turn is over
    // the threshold (0.65 of 9,000 tokens), the fourth is not.
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { contextTokens: 9000 } } }",
    );
    let long = "We talked about the Lisbon trip at length. ".repeat(140); // ~6,000 characters
    for i in 0..4 {
        let server = ScriptedServer::start(vec![text(&format!("{long} ({i})"))]);
        agent(
            &sb,
            &server,
            &["--message", &format!("Tell me more, part {i}")],
        )
        .ok();
    }
    // This turn is over the threshold: flush, summary, then the answer.
    let server = ScriptedServer::start(vec![
        tool_call(
            "call_flush",
            "memory_append",
            json!({"text": "User plans a trip to Lisbon in May"}),
        ),
        text("NO_REPLY"),
        text("The user is planning a Lisbon trip; details were discussed at length."),
        text("You are going to Lisbon."),
    ]);
    let v = agent(&sb, &server, &["--message", "Where am I going?", "--json"])
        .ok()
        .json();
    assert_eq!(v["reply"], "You are going to Lisbon.");
    assert_eq!(v["compaction"]["flushedNotes"], 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let flush = requests[0].json();
    assert!(
        flush["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Pre-compaction memory flush turn")
    );
    let flush_tools: Vec<&str> = flush["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(flush_tools, vec!["memory_append"]);
    // The note is in today's memory file.
    let daily = sb.read(".almanac/workspace/memory/2026-11-29.md");
    assert!(
        daily.contains("User plans a trip to Lisbon in May"),
        "{daily}"
    );
    // The answer's request starts from the summary and keeps the last turns.
    let last = requests[3].json();
    let messages = last["messages"].as_array().unwrap();
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("The user is planning a Lisbon trip"),
        "{}",
        messages[1]
    );
    assert!(
        messages.len() < 10,
        "older turns are summarised: {}",
        messages.len()
    );
    let s = sb.run(&["sessions", "--json"]).ok().json();
    assert_eq!(s["sessions"][0]["compactionCount"], 1);
    // The transcript keeps everything.
    let lines = transcript_lines(&sb, v["sessionId"].as_str().unwrap());
    assert!(lines.iter().any(|l| l["type"] == "compaction"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["message"]["role"] == "user")
            .count(),
        5
    );
}

#[test]
fn exec_children_do_not_get_skill_secrets() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "{ skills: { entries: { weather: { env: { WEATHER_TOKEN: 's3cret' } } } }, tools: { exec: { security: 'full' } } }",
    );
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "exec",
            json!({"command": "echo token=${WEATHER_TOKEN:-unset} other=${OTHER:-unset}"}),
        ),
        text("done"),
    ]);
    let run = sb
        .run_env(
            &[
                "--now",
                NOW,
                "agent",
                "--model",
                "openai/m",
                "--message",
                "check",
                "--json",
            ],
            &[
                ("OPENAI_BASE_URL", &server.url),
                ("WEATHER_TOKEN", "s3cret"),
                ("OTHER", "visible"),
            ],
        )
        .ok();
    let v = run.json();
    assert_eq!(
        v["toolCalls"][0]["output"], "token=unset other=unset\n",
        "neither a skill's value nor a variable outside the allowlist"
    );
    // Without the shell permission there is no exec tool.
    let server = ScriptedServer::start(vec![text("ok")]);
    sb.run_env(
        &["agent", "--model", "openai/m", "--message", "hi"],
        &[
            ("OPENAI_BASE_URL", &server.url),
            ("SKILL_PERMISSIONS", "read"),
        ],
    )
    .ok();
    let tools: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!tools.contains(&"exec".to_string()), "{tools:?}");
}

#[test]
fn prompt_shows_what_the_model_would_get() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/SOUL.md", "Be warm.\n");
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "# Memory\n\n- Prefers tea\n",
    );
    let v = sb
        .run_env(
            &[
                "--now",
                NOW,
                "agent",
                "prompt",
                "--model",
                "openai/m",
                "--message",
                "What do I drink?",
                "--json",
            ],
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9")],
        )
        .ok()
        .json();
    assert_eq!(v["sessionKey"], "agent:main:main");
    let system = v["system"].as_str().unwrap();
    assert!(system.contains("## SOUL.md\n\nBe warm."));
    assert!(system.contains("## MEMORY.md"));
    assert!(
        system.contains("Prefers tea"),
        "recalled session notes or MEMORY.md"
    );
    assert!(system.contains("Current time: 2026-11-29 09:00"));
    assert_eq!(v["messages"].as_array().unwrap().len(), 1);
    assert!(v["estimatedTokens"].as_u64().unwrap() > 100);
}

/// Sets every file and folder under `dir` an hour into the past, as an
/// existing setup is.
fn backdate(dir: &std::path::Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
        if meta.is_dir() || meta.is_file() {
            std::fs::File::open(&path)
                .unwrap()
                .set_modified(past)
                .unwrap();
        }
    }
}

#[test]
fn turns_reuse_the_skills_until_a_skill_changes() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("bin")).unwrap();
    let bin = sb.path("bin").to_string_lossy().into_owned();
    // A turn: whether its skills came from the stored snapshot, and the
    // system prompt the model got.
    let turn = || -> (Value, String) {
        let server = ScriptedServer::start(vec![text("ok")]);
        let v = sb
            .run_env(
                &[
                    "--now",
                    NOW,
                    "agent",
                    "--model",
                    "openai/test-model",
                    "-m",
                    "hi",
                    "--json",
                ],
                &[("OPENAI_BASE_URL", &server.url), ("PATH", &bin)],
            )
            .ok()
            .json();
        let system = server.requests()[0].json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string();
        (v["timings"]["skills"].clone(), system)
    };
    let prompt = || {
        sb.run_env(
            &[
                "agent", "prompt", "--model", "openai/m", "-m", "hi", "--json",
            ],
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9"), ("PATH", &bin)],
        )
        .ok()
        .json()
    };
    sb.write(
        ".almanac/workspace/skills/weather/SKILL.md",
        "---\nname: weather\ndescription: Forecasts the weather.\n---\n",
    );
    // `agent prompt` shows the skills but keeps nothing.
    assert_eq!(prompt()["skills"], "built");
    assert!(!sb.path(".almanac/cache").exists());
    assert!(!sb.path(".almanac/bundled-skills").exists());
    // The first turn writes the bundled skills; then the setup is an hour
    // old.
    turn();
    backdate(sb.home());
    let (origin, first) = turn();
    assert_eq!(origin, "built");
    let (origin, again) = turn();
    assert_eq!(origin, "cached", "nothing changed");
    assert_eq!(again, first);
    assert!(again.contains("Forecasts the weather."));
    // What turns keep, `agent prompt` uses.
    assert_eq!(prompt()["skills"], "cached");

    sb.write(
        ".almanac/workspace/skills/weather/SKILL.md",
        "---\nname: weather\ndescription: Tells the weather of tomorrow.\n---\n",
    );
    let (origin, system) = turn();
    assert_eq!(origin, "built");
    assert!(
        system.contains("Tells the weather of tomorrow."),
        "{system}"
    );
    assert!(!system.contains("Forecasts the weather."));

    sb.write(
        ".almanac/workspace/skills/tides/SKILL.md",
        "---\nname: tides\ndescription: Gives the tide times.\n---\n",
    );
    let (origin, system) = turn();
    assert_eq!(origin, "built");
    assert!(system.contains("Gives the tide times."));

    std::fs::remove_dir_all(sb.path(".almanac/workspace/skills/weather")).unwrap();
    let (_, system) = turn();
    assert!(!system.contains("weather."));
}

#[test]
fn each_of_several_reset_triggers_starts_a_new_session() {
    let sb = Sandbox::new();
    // The short trigger comes after a longer one it is not a prefix of.
    sb.write(
        ".almanac/config.json5",
        r#"{ session: { resetTriggers: ["/start-over-please", "/x"] } }"#,
    );
    let turn = |message: &str| {
        let server = ScriptedServer::start(vec![text("ok")]);
        agent(&sb, &server, &["--message", message, "--json"])
            .ok()
            .json()
    };
    let first = turn("hello");
    let short = turn("/x");
    assert_eq!(short["started"], "new", "{short}");
    assert_ne!(short["sessionId"], first["sessionId"]);
    let long = turn("/START-OVER-PLEASE and carry on");
    assert_eq!(long["started"], "new", "{long}");
    assert_ne!(long["sessionId"], short["sessionId"]);
    // The defaults are replaced, not added to.
    let plain = turn("/new");
    assert!(plain.get("started").is_none(), "{plain}");
    assert_eq!(plain["sessionId"], long["sessionId"]);
}

#[test]
fn new_with_a_model_that_cannot_be_used_leaves_the_session_alone() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text("ok")]);
    let first = agent(&sb, &server, &["--message", "hello", "--json"])
        .ok()
        .json();
    let store = ".almanac/agents/main/sessions/sessions.json";
    let before = sb.read(store);
    let sessions_dir = sb.path(".almanac/agents/main/sessions");
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&sessions_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let files_before = files();
    for (message, expected) in [
        ("/new nosuch/model", "unknown provider `nosuch`"),
        ("/reset openai/", "not a model reference"),
    ] {
        let server = ScriptedServer::start(vec![text("ok")]);
        let run = agent(&sb, &server, &["--message", message]);
        assert_ne!(run.code, 0, "{message}: {}", run.stdout);
        assert!(run.stderr.contains(expected), "{message}: {}", run.stderr);
        assert!(server.requests().is_empty(), "nothing was sent");
        assert_eq!(sb.read(store), before, "{message}: the entry is untouched");
        assert_eq!(files(), files_before, "{message}: no new transcript");
    }
    let server = ScriptedServer::start(vec![text("still here")]);
    let next = agent(&sb, &server, &["--message", "hello again", "--json"])
        .ok()
        .json();
    assert_eq!(next["sessionId"], first["sessionId"]);
}

const QUEUE: &str = ".almanac/agents/main/sessions/system-events.json";

fn queue_events(sb: &Sandbox, texts: &[&str]) {
    let events: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"text": t, "ts": 1_795_942_000_000i64 + i as i64, "trusted": true}))
        .collect();
    sb.write(QUEUE, &json!({"agent:main:main": events}).to_string());
}

fn queued(sb: &Sandbox) -> Vec<String> {
    let v: Value = serde_json::from_str(&sb.read(QUEUE)).unwrap();
    v["agent:main:main"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["text"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn last_user_text(server: &ScriptedServer) -> String {
    let body = server.requests().last().unwrap().json();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn system_events_leave_the_queue_only_once_their_turn_is_in_the_transcript() {
    let sb = Sandbox::new();
    queue_events(&sb, &["Backup finished"]);
    // The model call fails: the events stay queued.
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 400,
        headers: vec![],
        body: r#"{"error":{"message":"bad request"}}"#.into(),
    }]);
    agent(&sb, &server, &["--message", "anything new?"]).code(1);
    assert!(
        last_user_text(&server).contains("System: ["),
        "sent with the message"
    );
    assert_eq!(queued(&sb), vec!["Backup finished"], "still queued");
    // A server error retried to the end: the same.
    let busy = || Reply::Status {
        status: 500,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"error":{"message":"internal trouble"}}"#.into(),
    };
    let server = ScriptedServer::start(vec![busy(), busy(), busy(), busy()]);
    agent(&sb, &server, &["--message", "anything new?"]).code(1);
    assert_eq!(queued(&sb), vec!["Backup finished"]);
    // A turn that completes: delivered, recorded, and gone.
    let server = ScriptedServer::start(vec![text("The backup finished.")]);
    let v = agent(&sb, &server, &["--message", "anything new?", "--json"])
        .ok()
        .json();
    assert!(last_user_text(&server).contains("Backup finished"));
    assert!(queued(&sb).is_empty(), "{}", sb.read(QUEUE));
    let lines = transcript_lines(&sb, v["sessionId"].as_str().unwrap());
    let record = lines.last().unwrap();
    assert_eq!(record["type"], "custom");
    assert_eq!(record["customType"], "system-events");
    assert_eq!(record["data"]["delivered"].as_array().unwrap().len(), 1);
    // A crash after the transcript was synced but before the queue was
    // updated leaves the delivered event queued: the next turn drops it
    // and delivers only what is new.
    queue_events(&sb, &["Backup finished", "Disk almost full"]);
    let server = ScriptedServer::start(vec![text("Disk noted.")]);
    agent(&sb, &server, &["--message", "and now?"]).ok();
    let sent = last_user_text(&server);
    assert!(sent.contains("Disk almost full"), "{sent}");
    assert!(!sent.contains("Backup finished"), "{sent}");
    assert!(queued(&sb).is_empty());
}

#[test]
fn a_corrupt_event_queue_is_moved_aside_with_a_warning() {
    let sb = Sandbox::new();
    let garbage = "{\"agent:main:main\": [{\"text\": \"Deploy finish";
    sb.write(QUEUE, garbage);
    let server = ScriptedServer::start(vec![text("Hello.")]);
    let run = agent(&sb, &server, &["--message", "hi"]).ok();
    assert!(
        run.stderr
            .contains("warning: the system event queue did not parse"),
        "{}",
        run.stderr
    );
    let dir = sb.path(".almanac/agents/main/sessions");
    let moved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("system-events.json.corrupt-"))
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "{:?}",
        std::fs::read_dir(&dir).unwrap().collect::<Vec<_>>()
    );
    assert_eq!(std::fs::read_to_string(&moved[0]).unwrap(), garbage);
    assert!(
        run.stderr.contains(&moved[0].display().to_string()),
        "{}",
        run.stderr
    );
}

#[test]
fn a_silent_server_or_a_web_page_fails_fast_with_a_clear_message() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { llm: { idleTimeoutSeconds: 1, connectTimeoutSeconds: 1 } } } }",
    );
    let server = ScriptedServer::start(vec![Reply::Hang, Reply::Hang]);
    let started = std::time::Instant::now();
    let run = agent(&sb, &server, &["--message", "hi"]).code(1);
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    assert!(
        run.stderr.contains(
            "error: openai accepted the connection but sent nothing for 1 s (agents.defaults.llm.idleTimeoutSeconds)"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(server.requests().len(), 1, "not retried");
    let server = ScriptedServer::start(vec![Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "text/html".into())],
        body: "<html><title>Hotel Wi-Fi</title></html>".into(),
    }]);
    let run = agent(&sb, &server, &["--message", "hi"]).code(1);
    assert!(
        run.stderr.contains(
            "answered with an HTML page, not an event stream: check models.providers.openai.baseUrl"
        ),
        "{}",
        run.stderr
    );
}
