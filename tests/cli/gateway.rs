//! The gateway daemon, run as a user would: `gateway run` in the
//! background of a temporary home, spoken to over HTTP and by the CLI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent::text;
use crate::common::Sandbox;
use crate::scripted::{Reply, ScriptedServer};

/// A gateway running in the background; killed when dropped.
pub(crate) struct Gateway {
    pub child: Child,
    pub port: u16,
    pub token: String,
    /// What the gateway wrote to stderr, shown when a test fails.
    log: tempfile::NamedTempFile,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- the gateway's last log lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// Waits for `ready` to hold, up to `limit` (a condition, not a sleep).
#[track_caller]
pub(crate) fn eventually<T>(limit: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(v) = ready() {
            return v;
        }
        assert!(began.elapsed() < limit, "not ready within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Gateway {
    /// `gateway run --port 0` with `env`; returns once it published
    /// `gateway.json` and `/readyz` says every component has started (the
    /// file comes first: a loaded machine may not have polled them yet).
    pub(crate) fn start(sb: &Sandbox, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_on(sb, env, 0)
    }

    /// [`Gateway::start`] on `port` (0: any free one).
    pub(crate) fn start_on(sb: &Sandbox, env: &[(&str, &str)], port: u16) -> Gateway {
        let mut cmd = sb.cmd();
        // No interval heartbeat turn unless the test asks for one: it
        // would take a scripted answer meant for the test.
        cmd.env("ALMANAC_HEARTBEAT_EVERY", "0m");
        // Its log, shown when the test fails, unless the test sets its own.
        cmd.env("ALMANAC_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = cmd
            .args(["gateway", "run", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let pid = child.id();
        let info_path = sb.path(".almanac/gateway.json");
        let info: Value = eventually(Duration::from_secs(20), || {
            let text = std::fs::read_to_string(&info_path).ok()?;
            let v: Value = serde_json::from_str(&text).ok()?;
            (v["pid"] == pid).then_some(v)
        });
        let token = sb.read(".almanac/gateway.token").trim().to_string();
        let port = info["port"].as_u64().unwrap() as u16;
        eventually(Duration::from_secs(20), || {
            (http(port, "GET", "/readyz", None, None).0 == 200).then_some(())
        });
        Gateway {
            child,
            port,
            token,
            log,
        }
    }

    /// What the gateway has written to stderr so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// One HTTP request; `(status, JSON body)`.
    pub(crate) fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        http(self.port, method, path, Some(&self.token), body)
    }

    pub(crate) fn signal(&self, signal: libc::c_int) {
        // SAFETY: signals the gateway child this test started.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    }
}

/// A plain HTTP/1.1 request to the local gateway.
pub(crate) fn http(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{auth}\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string())),
    )
}

fn transcript(sb: &Sandbox) -> Vec<Value> {
    let sessions: Value =
        serde_json::from_str(&sb.read(".almanac/agents/main/sessions/sessions.json")).unwrap();
    let id = sessions["agent:main:main"]["sessionId"].as_str().unwrap();
    sb.read(&format!(".almanac/agents/main/sessions/{id}.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn messages(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "message")
        .map(|l| &l["message"])
        .collect()
}

fn first_text(message: &Value) -> String {
    message["content"]
        .as_array()
        .and_then(|c| c.iter().find_map(|b| b["text"].as_str()))
        .unwrap_or("")
        .to_string()
}

#[test]
fn one_gateway_per_state_dir_found_through_its_file_and_stopped_cleanly() {
    let sb = Sandbox::new();
    // Not running: status says so and exits 0; stop too.
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert_eq!(status["running"], false);
    assert_eq!(status["components"], json!([]));
    let stop = sb.run(&["gateway", "stop"]).ok();
    assert_eq!(stop.stdout.trim(), "not running");
    assert!(!sb.path(".almanac/gateway.json").exists());

    let gw = Gateway::start(&sb, &[]);
    let (code, body) = http(gw.port, "GET", "/readyz", None, None);
    assert_eq!((code, body), (200, json!({"ok": true})));
    // The files it publishes are private.
    for f in ["gateway.json", "gateway.token"] {
        assert_eq!(
            crate::common::mode(&sb.path(&format!(".almanac/{f}"))),
            0o600,
            "{f}"
        );
    }
    let info: Value = serde_json::from_str(&sb.read(".almanac/gateway.json")).unwrap();
    assert_eq!(info["address"], "127.0.0.1");
    assert_eq!(info["tokenSource"], "file");

    assert_status_lists_running_components(&sb, &gw);
    assert_malformed_requests_are_refused(&gw);
    assert_a_second_gateway_and_a_taken_port_are_refused(&sb, &gw);

    // System events go through it.
    let queued = sb
        .run(&[
            "system",
            "event",
            "--text",
            "backup done",
            "--mode",
            "now",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        queued,
        json!({"ok": true, "queued": true, "mode": "now", "sessionKey": "agent:main:main"})
    );
    let queue_path = sb.path(".almanac/agents/main/sessions/system-events.json");
    let queue: Value = eventually(Duration::from_secs(5), || {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&queue_path).ok()?).ok()?;
        v.get("agent:main:main").cloned()
    });
    assert_eq!(queue[0]["text"], "backup done");

    let stopped = sb.run(&["gateway", "stop"]).ok();
    assert!(
        stopped.stdout.contains("gateway stopped"),
        "{}",
        stopped.stdout
    );
    assert!(!sb.path(".almanac/gateway.json").exists());
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert_eq!(status["running"], false);
    // Its start wrote the file once: no warning that it had gone missing.
    let log = gw.log();
    assert!(!log.contains("gone missing"), "{log}");
}

/// `gateway status` of a running gateway: its process, port, uptime and
/// every component running, none restarted.
/// `memory` is the gateway process's: its resident size as the kernel
/// tells it for that pid (within what a moment's change allows), and
/// its private part, smaller, non-zero.
fn assert_memory_is_the_gateways_own(status: &Value, pid: u32) {
    let rss = status["memory"]["rssBytes"].as_u64().expect("rssBytes");
    let private = status["memory"]["privateBytes"]
        .as_u64()
        .expect("privateBytes");
    assert!(private > 0 && private <= rss, "{status}");
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kernel_kb: u64 = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let kernel = kernel_kb * 1024;
    assert!(
        rss > kernel / 2 && rss < kernel * 2,
        "gateway says {rss} bytes resident, the kernel {kernel}"
    );
}

fn assert_status_lists_running_components(sb: &Sandbox, gw: &Gateway) {
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert_eq!(status["running"], true);
    assert_eq!(status["pid"], gw.child.id());
    assert_eq!(status["port"], gw.port);
    assert!(status["uptimeMs"].as_i64().unwrap() >= 0);
    assert!(status.get("nextHeartbeatAtMs").is_some());
    assert!(status.get("nextCronAtMs").is_some());
    assert_memory_is_the_gateways_own(&status, gw.child.id());
    let names: Vec<&str> = status["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "control-api",
        "intake",
        "memory-watcher",
        "memory-embedder",
        "skills-watcher",
        "config-watcher",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(
        status["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["restarts"] == 0 && c["state"] == "running"),
        "{status}"
    );
}

/// Garbage on the socket, a huge header, a body over the limit, a body of
/// the wrong shape: each refused, the gateway still serves.
fn assert_malformed_requests_are_refused(gw: &Gateway) {
    let oversized = format!(
        "POST /v1/system/event HTTP/1.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 5000000\r\n\r\n{{\"text\": \"{}",
        gw.token,
        "x".repeat(64 * 1024)
    );
    for (raw, allowed) in [
        (b"GARBAGE\r\n\r\n".to_vec(), "HTTP/1.1 400"),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nx-big: {}\r\n\r\n",
                "a".repeat(1_000_000)
            )
            .into_bytes(),
            "HTTP/1.1 431",
        ),
        (oversized.into_bytes(), "HTTP/1.1 413"),
    ] {
        let mut stream = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        // A server that stopped reading must not hang the test.
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = stream.write_all(&raw);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        // Refused, or the connection closed: never an answer as if fine.
        assert!(
            text.is_empty() || text.starts_with(allowed),
            "{}",
            &text[..text.len().min(200)]
        );
    }
    let (code, body) = gw.request("POST", "/v1/system/event", Some(&json!({"text": 42})));
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["ok"], false);
    assert_eq!(http(gw.port, "GET", "/readyz", None, None).0, 200);
}

/// A second gateway on the same state directory, one on a port in use
/// and one on the LAN without a token each exit at once with one line.
fn assert_a_second_gateway_and_a_taken_port_are_refused(sb: &Sandbox, gw: &Gateway) {
    // A second gateway on the same state directory exits 1 at once.
    let began = Instant::now();
    let second = sb.run(&["gateway", "run", "--port", "0"]).code(1);
    assert!(began.elapsed() < Duration::from_secs(5));
    assert!(
        second
            .stderr
            .contains("another gateway is running on this state directory"),
        "{}",
        second.stderr
    );
    // A port in use exits 1 naming it.
    let other = Sandbox::new();
    let taken = other
        .run(&["gateway", "run", "--port", &gw.port.to_string()])
        .code(1);
    assert!(
        taken
            .stderr
            .contains(&format!("port {} on 127.0.0.1 is in use", gw.port)),
        "{}",
        taken.stderr
    );
    // Each reason is one line.
    for refused in [&second, &taken] {
        assert_eq!(
            refused.stderr.trim().lines().count(),
            1,
            "{}",
            refused.stderr
        );
    }
    // A LAN bind needs a configured token.
    let lan = other
        .run(&["gateway", "run", "--port", "0", "--bind", "lan"])
        .code(2);
    assert!(lan.stderr.contains("gateway.auth.token"), "{}", lan.stderr);
}

#[test]
fn without_a_gateway_events_wait_in_the_file_and_gateway_commands_say_not_running() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "system", "event", "--text", "hello", "--mode", "now", "--json",
        ])
        .ok();
    assert_eq!(run.json()["queued"], true);
    assert!(run.stderr.contains("no wake happened"), "{}", run.stderr);
    let queue: Value =
        serde_json::from_str(&sb.read(".almanac/agents/main/sessions/system-events.json")).unwrap();
    assert_eq!(queue["agent:main:main"][0]["text"], "hello");
    // The same text again is dropped, as the queue's rule says.
    let again = sb
        .run(&["system", "event", "--text", "hello", "--json"])
        .ok();
    assert!(
        again.stderr.contains("no heartbeat runs"),
        "{}",
        again.stderr
    );
    assert_eq!(again.json()["queued"], false);
    let bad = sb
        .run(&["system", "event", "--text", "x", "--mode", "later"])
        .code(2);
    assert!(bad.stderr.contains("mode `later`"), "{}", bad.stderr);
    let other = sb
        .run(&[
            "system",
            "event",
            "--text",
            "x",
            "--session-key",
            "agent:ops:main",
        ])
        .code(2);
    assert!(
        other.stderr.contains("unknown agent `ops`"),
        "{}",
        other.stderr
    );
    // A stale file (dead pid) means not running.
    sb.write(
        ".almanac/gateway.json",
        r#"{"pid": 4194321, "address": "127.0.0.1", "port": 9, "startedAtMs": 0, "tokenSource": "file", "generation": 1, "version": "0"}"#,
    );
    assert_eq!(
        sb.run(&["gateway", "status", "--json"]).ok().json()["running"],
        false
    );
    // A file whose pid now belongs to another process (reused after a
    // crash or a reboot): no gateway holds the lock, so nothing takes
    // that process for the gateway, let alone signals it.
    let mut stranger = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    sb.write(
        ".almanac/gateway.json",
        &format!(
            r#"{{"pid": {}, "address": "127.0.0.1", "port": 9, "startedAtMs": 0, "tokenSource": "file", "generation": 1, "version": "0"}}"#,
            stranger.id()
        ),
    );
    assert_eq!(
        sb.run(&["gateway", "status", "--json"]).ok().json()["running"],
        false
    );
    let stop = sb.run(&["gateway", "stop"]).ok();
    assert!(stop.stdout.contains("not running"), "{}", stop.stdout);
    assert!(stranger.try_wait().unwrap().is_none(), "the stranger lives");
    let queued = sb
        .run(&["system", "event", "--text", "after a reboot", "--json"])
        .ok()
        .json();
    assert_eq!(queued["queued"], true);
    let cancel = sb.run(&["tasks", "cancel", "0000"]).code(1);
    assert!(
        cancel.stderr.contains("gateway not running"),
        "{}",
        cancel.stderr
    );
    stranger.kill().unwrap();
    let _ = stranger.wait();
}

fn model_env(server: &ScriptedServer) -> Vec<(&'static str, String)> {
    vec![("OPENAI_BASE_URL", server.url.clone())]
}

#[test]
fn concurrent_turns_on_one_session_run_one_at_a_time_in_arrival_order() {
    const TURNS: usize = 100;
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model", maxConcurrent: 8}}}"#,
    );
    let replies: Vec<Reply> = (0..TURNS).map(|i| text(&format!("answer {i}"))).collect();
    let server = ScriptedServer::start(replies);
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gw = Gateway::start(&sb, &env);
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..TURNS)
            .map(|i| {
                let gw = &gw;
                scope.spawn(move || {
                    gw.request(
                        "POST",
                        "/v1/agent",
                        Some(&json!({"message": format!("question {i}")})),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Every request answered, each with its place in the lane.
    let mut by_seq: Vec<(u64, String, String)> = answers
        .iter()
        .map(|(code, body)| {
            assert_eq!(*code, 200, "{body}");
            (
                body["laneSeq"].as_u64().unwrap(),
                body["reply"].as_str().unwrap().to_string(),
                String::new(),
            )
        })
        .collect();
    by_seq.sort();
    // The model was asked one turn at a time: each request carries the
    // whole conversation before it, two messages longer each time.
    let requests = server.requests();
    assert_eq!(requests.len(), TURNS);
    for (i, r) in requests.iter().enumerate() {
        let messages = r.json()["messages"].as_array().unwrap().len();
        assert_eq!(messages, 1 + 2 * i + 1, "request {i}");
    }
    // In arrival order: the turn that joined the lane k-th got the k-th
    // answer, and the transcript holds the pairs in that order.
    for (k, (seq, reply, _)) in by_seq.iter().enumerate() {
        assert_eq!(*seq, k as u64 + 1);
        assert_eq!(reply, &format!("answer {k}"));
    }
    let lines = transcript(&sb);
    let messages = messages(&lines);
    assert_eq!(messages.len(), 2 * TURNS);
    // The k-th turn answered the question its request asked.
    let mut question_of_seq = vec![String::new(); TURNS];
    for (i, (_, body)) in answers.iter().enumerate() {
        let seq = body["laneSeq"].as_u64().unwrap() as usize;
        question_of_seq[seq - 1] = format!("question {i}");
    }
    for (k, pair) in messages.chunks(2).enumerate() {
        assert_eq!(pair[0]["role"], "user", "pair {k}");
        assert_eq!(pair[1]["role"], "assistant", "pair {k}");
        assert_eq!(first_text(pair[1]), format!("answer {k}"));
        assert!(
            first_text(pair[0]).contains(&question_of_seq[k]),
            "pair {k}"
        );
    }
    // The ledger holds every turn, in lane order, all succeeded.
    let listed = sb.run(&["tasks", "list", "--json"]).ok().json();
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), TURNS);
    for t in tasks {
        assert_eq!(t["status"], "succeeded", "{t}");
        assert_eq!(t["runtime"], "cli");
        assert_eq!(t["taskKind"], "agent");
        assert_eq!(t["laneKey"], "agent:main:main");
        let seq = t["laneSeq"].as_u64().unwrap() as usize;
        assert_eq!(t["task"], question_of_seq[seq - 1]);
    }
    // Each entry's parent is the one before it: one unforked chain.
    let entries: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("id").is_some() && l["type"] != "session")
        .collect();
    assert!(entries[0]["parentId"].is_null());
    for w in entries.windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"]);
    }
}

#[test]
fn sigterm_during_a_turn_cancels_it_within_the_deadline_and_keeps_the_transcript_whole() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model"}}}"#,
    );
    let server = ScriptedServer::start(vec![text("first answer"), Reply::Hang]);
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut gw = Gateway::start(&sb, &env);
    let (code, body) = gw.request("POST", "/v1/agent", Some(&json!({"message": "hello"})));
    assert_eq!(code, 200, "{body}");
    let port = gw.port;
    let token = gw.token.clone();
    let pending = std::thread::spawn(move || {
        http(
            port,
            "POST",
            "/v1/agent",
            Some(&token),
            Some(&json!({"message": "this one hangs"})),
        )
    });
    // The model has the second request: the turn is running.
    eventually(Duration::from_secs(10), || {
        (server.requests().len() == 2).then_some(())
    });
    let began = Instant::now();
    gw.signal(libc::SIGTERM);
    let status = eventually(Duration::from_secs(15), || gw.child.try_wait().unwrap());
    let took = began.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(10) + Duration::from_millis(500),
        "{took:?}"
    );
    let (code, body) = pending.join().unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("cancelled"),
        "{body}"
    );
    // The transcript: the first pair, then the cancelled turn's message
    // closed by an aborted answer.
    let lines = transcript(&sb);
    let messages = messages(&lines);
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(first_text(messages[1]), "first answer");
    assert_eq!(first_text(messages[2]), "this one hangs");
    assert_eq!(messages[3]["role"], "assistant");
    assert_eq!(messages[3]["stopReason"], "aborted");
    assert!(!sb.path(".almanac/gateway.json").exists());
    // The ledger says how each ended.
    let listed = sb.run(&["tasks", "list", "--json"]).ok().json();
    let mut statuses: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["cancelled", "succeeded"]);
    // The next turn (without a gateway) continues the same session.
    let server = ScriptedServer::start(vec![text("back again")]);
    let run = sb
        .run_env(
            &["agent", "--message", "are you there?", "--json"],
            &[("OPENAI_BASE_URL", &server.url)],
        )
        .ok()
        .json();
    assert_eq!(run["reply"], "back again");
    let sent = server.requests()[0].json();
    let history = sent["messages"].as_array().unwrap();
    assert!(
        history.iter().any(|m| m["content"] == "first answer"),
        "{sent}"
    );
    assert!(
        history.last().unwrap()["content"]
            .to_string()
            .contains("are you there?"),
        "{sent}"
    );
}

#[test]
fn a_note_written_by_another_process_is_found_without_a_tree_scan() {
    let sb = Sandbox::new();
    let days = 30;
    crate::common::synthetic_memory(&sb.path(".almanac/workspace"), days, 5);
    let gw = Gateway::start(&sb, &[]);
    // The watcher's first sync has built the index.
    eventually(Duration::from_secs(20), || {
        let status = sb.run(&["memory", "status", "--json"]).json();
        (status["files"].as_u64().unwrap_or(0) >= days as u64 && !status["lastSync"].is_null())
            .then_some(())
    });
    let note = sb.path(".almanac/workspace/memory/2026-11-28.md");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&note)
        .unwrap();
    writeln!(file, "- the locksmith Quillon fixed the shed door").unwrap();
    drop(file);
    let found = eventually(Duration::from_secs(2), || {
        let run = sb.run_env(
            &["memory", "search", "Quillon locksmith", "--json"],
            &[("ALMANAC_LOG", "debug")],
        );
        let v = run.json();
        (!v["results"].as_array().unwrap().is_empty()).then_some(run)
    });
    let v = found.json();
    assert_eq!(v["results"][0]["path"], "memory/2026-11-28.md");
    assert!(
        found.stderr.contains("sync=watched"),
        "the search did not scan: {}",
        found.stderr
    );
    drop(gw);
}

#[test]
fn kill_9_with_100_tasks_leaves_none_running_and_none_missing() {
    const TASKS: usize = 100;
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {defaults: {model: "openai/test-model"}}}"#,
    );
    // The first turn hangs at the model: it runs, the others queue.
    let server = ScriptedServer::start(vec![Reply::Hang]);
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gw = Gateway::start(&sb, &env);
    let clients: Vec<_> = (0..TASKS)
        .map(|i| {
            let (port, token) = (gw.port, gw.token.clone());
            std::thread::spawn(move || {
                http(
                    port,
                    "POST",
                    "/v1/agent",
                    Some(&token),
                    Some(&json!({"message": format!("job {i}")})),
                )
            })
        })
        .collect();
    // All recorded: one running, the rest queued behind it.
    eventually(Duration::from_secs(20), || {
        let (code, body) = gw.request("GET", "/v1/tasks", None);
        let tasks = body["tasks"].as_array()?.clone();
        let running = tasks.iter().filter(|t| t["status"] == "running").count();
        (code == 200 && tasks.len() == TASKS && running == 1).then_some(())
    });
    gw.signal(libc::SIGKILL);
    drop(gw);
    for c in clients {
        let _ = c.join();
    }
    // Before any restart, the CLI reads the ledger as the gateway left it.
    let before = sb.run(&["tasks", "list", "--json"]).ok().json();
    let ids: std::collections::BTreeSet<String> = before["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), TASKS);
    let running_id = before["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "running")
        .map(|t| t["taskId"].as_str().unwrap().to_string())
        .unwrap();

    let gw = Gateway::start(&sb, &env);
    let after = sb.run(&["tasks", "list", "--json"]).ok().json();
    let tasks = after["tasks"].as_array().unwrap();
    let after_ids: std::collections::BTreeSet<String> = tasks
        .iter()
        .map(|t| t["taskId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after_ids, ids, "none missing");
    assert!(tasks.iter().all(|t| t["status"] != "running"));
    for t in tasks {
        if t["taskId"] == running_id.as_str() {
            // An agent turn's caller is gone: lost, not run again.
            assert_eq!(t["status"], "lost", "{t}");
            assert!(t["error"].as_str().unwrap().contains("generation"), "{t}");
            assert!(t["endedAt"].is_i64());
        } else {
            assert_eq!(t["status"], "queued", "{t}");
        }
    }
    let audit = sb.run(&["tasks", "audit", "--json"]).ok().json();
    let lost: Vec<&Value> = audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "lost")
        .collect();
    assert_eq!(lost.len(), 1, "{audit}");
    assert_eq!(lost[0]["taskId"], running_id.as_str());
    assert_eq!(lost[0]["severity"], "error");
    // Queued work can be cancelled through the new gateway.
    let queued_id = tasks
        .iter()
        .find(|t| t["status"] == "queued")
        .map(|t| t["taskId"].as_str().unwrap().to_string())
        .unwrap();
    let cancelled = sb
        .run(&["tasks", "cancel", &queued_id, "--json"])
        .ok()
        .json();
    assert_eq!(cancelled["result"], "cancelled");
    assert_eq!(cancelled["task"]["status"], "cancelled");
    drop(gw);
    // Without a gateway, cancel says so.
    let run = sb.run(&["tasks", "cancel", &queued_id]).code(1);
    assert!(run.stderr.contains("gateway not running"), "{}", run.stderr);
}

/// Searches `words` the way a user would, until found (at most
/// `limit`): the path of the first result. The search never syncs itself.
#[track_caller]
fn found_by_search(sb: &Sandbox, words: &str, limit: Duration) -> String {
    let run = eventually(limit, || {
        let run = sb.run_env(
            &["memory", "search", words, "--json"],
            &[("ALMANAC_LOG", "debug")],
        );
        let v = run.json();
        (!v["results"].as_array().unwrap().is_empty()).then_some(run)
    });
    assert!(run.stderr.contains("sync=watched"), "{}", run.stderr);
    run.json()["results"][0]["path"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_watcher_follows_new_folders_a_rebuilt_index_and_what_changed_while_it_was_down() {
    let sb = Sandbox::new();
    // A first run: no workspace yet.
    let gw = Gateway::start(&sb, &[]);
    let window = Duration::from_secs(3);
    // The watcher's first sync, of nothing.
    eventually(Duration::from_secs(20), || {
        let status = sb.run(&["memory", "status", "--json"]).json();
        (!status["lastSync"].is_null()).then_some(())
    });
    // The workspace and its memory/ made in one go, a note already in it.
    sb.write(
        ".almanac/workspace/memory/2026-11-27.md",
        "- the tuner Ostrava came for the piano\n",
    );
    assert_eq!(
        found_by_search(&sb, "Ostrava tuner", window),
        "memory/2026-11-27.md"
    );
    // A folder of notes moved in.
    sb.write(
        "staging/garden/beds.md",
        "- planted the Zwiebelkuchen onions\n",
    );
    std::fs::rename(
        sb.path("staging/garden"),
        sb.path(".almanac/workspace/memory/garden"),
    )
    .unwrap();
    assert_eq!(
        found_by_search(&sb, "Zwiebelkuchen onions", window),
        "memory/garden/beds.md"
    );
    // ... and moved out again: its notes leave the index.
    std::fs::rename(
        sb.path(".almanac/workspace/memory/garden"),
        sb.path("staging/garden"),
    )
    .unwrap();
    eventually(window, || {
        let v = sb
            .run(&["memory", "search", "Zwiebelkuchen", "--json"])
            .json();
        v["results"].as_array().unwrap().is_empty().then_some(())
    });
    // The derived index deleted: a search builds it again, and the
    // watcher keeps the new one in step.
    std::fs::remove_dir_all(sb.path(".almanac/index")).unwrap();
    let rebuilt = sb
        .run(&["memory", "search", "Ostrava", "--json"])
        .ok()
        .json();
    assert_eq!(rebuilt["results"][0]["path"], "memory/2026-11-27.md");
    let day = sb.path(".almanac/workspace/memory/2026-11-27.md");
    let mut file = std::fs::OpenOptions::new().append(true).open(&day).unwrap();
    writeln!(file, "- the roofer Kvasnicka quoted for the gutters").unwrap();
    drop(file);
    assert_eq!(
        found_by_search(&sb, "Kvasnicka roofer", window),
        "memory/2026-11-27.md"
    );
    // Written while no gateway ran, to a file indexed before: the next
    // start reads it.
    drop(gw);
    let mut file = std::fs::OpenOptions::new().append(true).open(&day).unwrap();
    writeln!(file, "- lent the ladder to Abernethy next door").unwrap();
    drop(file);
    let gw = Gateway::start(&sb, &[]);
    assert_eq!(
        found_by_search(&sb, "Abernethy ladder", window),
        "memory/2026-11-27.md"
    );
    // Memory paths added while it runs are watched from then on.
    sb.write("notes/people.md", "- Marguerite likes tulips\n");
    sb.write(
        ".almanac/config.json5",
        &format!(
            "{{agents: {{defaults: {{memorySearch: {{extraPaths: [\"{}\"]}}}}}}}}\n",
            sb.path("notes").display()
        ),
    );
    // The first search after the change may build the index for the new
    // paths itself (whoever comes first, it or the watcher, does).
    eventually(window, || {
        let v = sb
            .run(&["memory", "search", "Marguerite tulips", "--json"])
            .json();
        (!v["results"].as_array().unwrap().is_empty()).then_some(())
    });
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(sb.path("notes/people.md"))
        .unwrap();
    writeln!(file, "- Bartholomew collects stamps").unwrap();
    drop(file);
    found_by_search(&sb, "Bartholomew stamps", window);
    drop(gw);
}

#[test]
fn config_edits_apply_live() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "// my settings\n{agents: {defaults: {model: \"openai/first-model\"}}}\n",
    );
    let replies: Vec<Reply> = (0..60).map(|i| text(&format!("answer {i}"))).collect();
    let server = ScriptedServer::start(replies);
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gw = Gateway::start(&sb, &env);
    let (code, body) = gw.request("POST", "/v1/agent", Some(&json!({"message": "hi"})));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["model"], "openai/first-model");
    sb.run(&[
        "config",
        "set",
        "agents.defaults.model",
        "openai/second-model",
    ])
    .ok();
    // A new session (no model kept from earlier turns) gets the new one.
    let mut n = 0;
    let model = eventually(Duration::from_secs(5), || {
        n += 1;
        let (code, body) = gw.request(
            "POST",
            "/v1/agent",
            Some(&json!({"message": "which model?", "sessionKey": format!("fresh-{n}")})),
        );
        assert_eq!(code, 200, "{body}");
        (body["model"] == "openai/second-model").then_some(body["model"].clone())
    });
    assert_eq!(model, "openai/second-model");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.json()["model"] == "second-model")
    );
    // A file that does not parse keeps the config in use.
    sb.write(".almanac/config.json5", "{agents: ");
    // ... and never keeps anyone from asking after the gateway.
    let asked = sb.run(&["gateway", "status", "--json"]).ok();
    assert_eq!(asked.json()["running"], true, "{}", asked.stdout);
    assert!(
        asked.stderr.contains("going on without the config file"),
        "{}",
        asked.stderr
    );
    // The watcher says so in `gateway status` (and the log).
    let watcher = |gw: &Gateway| {
        let (_, status) = gw.request("GET", "/v1/status", None);
        status["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "config-watcher")
            .unwrap()
            .clone()
    };
    let broken = eventually(Duration::from_secs(5), || {
        let w = watcher(&gw);
        w["lastError"].is_string().then_some(w)
    });
    let error = broken["lastError"].as_str().unwrap();
    assert!(
        error.contains("config.json5") && error.contains("the last good config stays in use"),
        "{broken}"
    );
    let (code, body) = gw.request(
        "POST",
        "/v1/agent",
        Some(&json!({"message": "still there?", "sessionKey": "other"})),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["model"], "openai/second-model");
    sb.write(
        ".almanac/config.json5",
        "{agents: {defaults: {model: \"openai/second-model\"}}}\n",
    );
    // Fixed: the error clears.
    let fixed = eventually(Duration::from_secs(5), || {
        let w = watcher(&gw);
        w["lastError"].is_null().then_some(w)
    });
    assert_eq!(fixed["state"], "running", "{fixed}");
}

#[test]
fn a_skill_added_while_the_gateway_runs_is_in_the_stored_snapshot_for_the_next_turn() {
    let sb = Sandbox::new();
    let gw = Gateway::start(&sb, &[]);
    sb.write(
        ".almanac/workspace/skills/tide-tables/SKILL.md",
        "---\nname: tide-tables\ndescription: Reads the tide tables for the harbour.\n---\n# Tides\n",
    );
    // Built at once, and stored once the change is old enough to trust
    // the files' times (a turn then reuses it instead of scanning).
    eventually(Duration::from_secs(8), || {
        std::fs::read_to_string(sb.path(".almanac/cache/skills-turn.json"))
            .ok()
            .filter(|stored| stored.contains("tide-tables"))
    });
    drop(gw);
}
