//! The MCP server driven by the official Python SDK (`mcp`, in the
//! virtual environment bench/mcp_venv.sh makes) over stdio and over the
//! gateway's `/mcp`, and by raw JSON-RPC lines for the bad input an SDK
//! would not send.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::gateway::Gateway;

const READING: [&str; 8] = [
    "cron_list",
    "heartbeat_last",
    "memory_get",
    "memory_search",
    "session_memory_context",
    "session_memory_search",
    "skill_get",
    "skills_list",
];
const WRITING: [&str; 4] = ["cron_add", "cron_remove", "memory_append", "system_event"];

/// The Python of the virtual environment with the MCP SDK.
fn python() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/python");
    assert!(
        path.exists(),
        "the MCP SDK's virtual environment is missing: run bench/mcp_venv.sh (scripts/test does)"
    );
    path
}

fn driver() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/mcp_client.py")
}

fn home(writes: bool) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "# Memory\n- The user's dog is named Biscuit.\n",
    );
    sb.write(
        ".almanac/config.json5",
        &json!({"mcp": {"allowWrites": writes}}).to_string(),
    );
    sb
}

/// Runs the Python driver with `args`; its JSON report.
fn drive(sb: &Sandbox, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(driver())
        .args(args)
        .env_clear()
        .env("HOME", sb.home())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TZ", "UTC")
        .current_dir(sb.home())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

fn names(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// What every run of the driver must show, whatever the transport.
fn check_report(report: &Value, writes: bool) {
    let mut want: Vec<&str> = READING.to_vec();
    if writes {
        want.extend(WRITING);
    }
    assert_eq!(report["tools"], json!(names(&want)));
    for (name, call) in report["calls"].as_object().unwrap() {
        assert_eq!(call["isError"], false, "{name}: {call}");
    }
    let hits = &report["calls"]["memory_search"]["structured"]["hits"];
    assert!(hits.to_string().contains("Biscuit"), "{hits}");
    assert!(
        report["calls"]["session_memory_context"]["structured"]["text"]
            .as_str()
            .unwrap()
            .contains("Biscuit")
    );
    assert!(
        report["calls"]["skill_get"]["structured"]["body"]
            .as_str()
            .unwrap()
            .contains("Disk")
    );
    for bad in ["wrongType", "missing", "unknownTool"] {
        assert_eq!(
            report["bad"][bad]["error"]["code"], -32602,
            "{bad}: {report}"
        );
    }
    assert!(
        report["bad"]["wrongType"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`query` must be a string")
    );
    assert!(
        report["resources"]
            .to_string()
            .contains("memory://MEMORY.md")
    );
    assert!(
        report["resources"]
            .to_string()
            .contains("skill://system-health")
    );
    assert_eq!(
        report["templates"],
        json!(["memory://daily/{date}", "skill://{name}"])
    );
    assert!(report["memoryMd"].as_str().unwrap().contains("Biscuit"));
    // Resource not found: -32002 before 2026-07-28, invalid params since.
    let missing = if report["protocolVersion"] == "2026-07-28" {
        -32602
    } else {
        -32002
    };
    assert_eq!(report["missingResource"]["code"], missing);
    assert_eq!(report["afterErrors"]["text"], "# Memory");
}

fn check_writes(sb: &Sandbox, report: &Value) {
    let added = &report["calls"]["cron_add"]["structured"]["job"];
    assert_eq!(added["createdBy"], "mcp", "{added}");
    assert_eq!(
        report["calls"]["cron_remove"]["structured"]["removed"],
        true
    );
    let daily = std::fs::read_dir(sb.path(".almanac/workspace/memory"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(daily.contains("The user's cat is called Miso."), "{daily}");
}

#[test]
fn the_sdk_over_stdio_lists_and_calls_every_tool_and_reads_resources() {
    let sb = home(true);
    let almanac = env!("CARGO_BIN_EXE_almanac");
    let report = drive(&sb, &["stdio", almanac, "auto"]);
    assert_eq!(report["protocolVersion"], "2026-07-28");
    check_report(&report, true);
    check_writes(&sb, &report);
}

#[test]
fn a_client_of_the_previous_protocol_connects_with_the_initialize_handshake() {
    let sb = home(false);
    let almanac = env!("CARGO_BIN_EXE_almanac");
    let report = drive(&sb, &["stdio", almanac, "legacy"]);
    assert_eq!(report["protocolVersion"], "2025-11-25");
    // Without mcp.allowWrites, nothing that writes is offered.
    check_report(&report, false);
    assert!(!sb.path(".almanac/workspace/memory").exists());
}

#[test]
fn the_sdk_over_the_gateways_http_endpoint_calls_every_tool() {
    let sb = home(true);
    let gw = Gateway::start(&sb, &[]);
    let url = format!("http://127.0.0.1:{}/mcp", gw.port);
    let report = drive(&sb, &["http", &url, &gw.token, "legacy"]);
    check_report(&report, true);
    check_writes(&sb, &report);
    let modern = drive(&sb, &["http", &url, &gw.token, "auto"]);
    assert_eq!(modern["protocolVersion"], "2026-07-28");
}

#[test]
fn a_client_that_reinitialises_survives_a_gateway_restart() {
    let sb = home(false);
    let gw = Gateway::start(&sb, &[]);
    let port = gw.port;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut client = Command::new(python())
        .arg(driver())
        .args(["http-restart", &url, &gw.token])
        .env("HOME", sb.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "RESTART");
    drop(gw);
    let _restarted = Gateway::start_on(&sb, &[], port);
    writeln!(client.stdin.as_mut().unwrap()).unwrap();
    let report: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(client.wait().unwrap().success());
    assert_eq!(report["before"], 1, "{report}");
    assert_ne!(report["oldSession"], "answered", "{report}");
    assert_eq!(report["after"], 1, "{report}");
}

#[test]
fn mcp_over_http_checks_token_origin_session_and_body_size() {
    let sb = home(false);
    let gw = Gateway::start(&sb, &[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |headers: &[(&str, &str)], body: &str| {
        let mut req = ureq_like(gw.port, body);
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        raw_status(gw.port, &req, body)
    };
    let auth = format!("Bearer {}", gw.token);
    let accept = ("accept", "application/json, text/event-stream");
    assert_eq!(post(&[accept], &init.to_string()), 401);
    assert_eq!(
        post(&[("authorization", &auth), accept], &init.to_string()),
        200
    );
    assert_eq!(
        post(
            &[
                ("authorization", &auth),
                accept,
                ("origin", "http://evil.example")
            ],
            &init.to_string()
        ),
        403
    );
    let own_origin = format!("http://127.0.0.1:{}", gw.port);
    assert_eq!(
        post(
            &[("authorization", &auth), accept, ("origin", &own_origin)],
            &init.to_string()
        ),
        200
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    assert_eq!(
        post(
            &[
                ("authorization", &auth),
                accept,
                ("mcp-session-id", "no-such-session")
            ],
            &list
        ),
        404
    );
    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"pad": "x".repeat(1024 * 1024 + 10)}})
        .to_string();
    assert_eq!(post(&[("authorization", &auth), accept], &huge), 413);
}

/// The head of a POST to `/mcp` without its end of headers.
fn ureq_like(port: u16, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    )
}

fn raw_status(port: u16, head: &str, body: &str) -> u16 {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(b"\r\n").unwrap();
    let _ = stream.write_all(body.as_bytes());
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).unwrap();
    String::from_utf8_lossy(&first[9..12]).parse().unwrap()
}

/// `almanac mcp serve` spoken to line by line.
struct LineClient {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    notices: mpsc::Receiver<String>,
}

impl LineClient {
    fn start(sb: &Sandbox) -> LineClient {
        let mut child = sb
            .cmd()
            .args(["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, notices) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut s = LineClient {
            input: child.stdin.take(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
            notices,
        };
        let init = s.ask(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        assert_eq!(init["result"]["serverInfo"]["name"], "almanac");
        s.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.as_bytes());
        s
    }

    fn send_line(&mut self, line: &[u8]) {
        let input = self.input.as_mut().unwrap();
        input.write_all(line).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn ask(&mut self, message: &Value) -> Value {
        self.send_line(message.to_string().as_bytes());
        self.read()
    }

    fn call(&mut self, id: u64, name: &str, args: Value) -> Value {
        self.ask(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}))
    }

    /// Waits for a stderr line holding `text`.
    fn notice(&self, text: &str) -> String {
        loop {
            let line = self
                .notices
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no notice with {text:?}"));
            if line.contains(text) {
                return line;
            }
        }
    }
}

impl Drop for LineClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bad_lines_get_json_rpc_errors_and_the_server_keeps_serving() {
    let sb = home(false);
    let mut server = LineClient::start(&sb);
    let mut long = vec![b' '; 4 * 1024 * 1024 + 1];
    long[0] = b'{';
    server.send_line(&long);
    let too_long = server.read();
    assert_eq!(too_long["error"]["code"], -32600, "{too_long}");
    assert!(
        too_long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4 MiB")
    );
    server.send_line(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": ");
    assert_eq!(server.read()["error"]["code"], -32700);
    server.send_line(&[0xff, 0xfe, b'{']);
    assert_eq!(server.read()["error"]["code"], -32700);
    let unknown = server.ask(&json!({"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}));
    assert_eq!(
        (unknown["id"].clone(), unknown["error"]["code"].clone()),
        (json!(6), json!(-32601))
    );
    let wrong = server.call(7, "memory_get", json!({"path": ["MEMORY.md"]}));
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    let refused = server.call(8, "memory_append", json!({"text": "x"}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let ok = server.call(9, "memory_get", json!({"path": "MEMORY.md"}));
    assert!(
        ok["result"]["structuredContent"]["text"]
            .as_str()
            .unwrap()
            .contains("Biscuit")
    );
    // A stop: what arrives after it is refused, the server ends.
    // SAFETY: signals the server this test started.
    unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) };
    server.notice("stopping");
    let late = server.call(10, "memory_get", json!({"path": "MEMORY.md"}));
    assert_eq!(
        (late["id"].clone(), late["error"]["code"].clone()),
        (json!(10), json!(-32000))
    );
    server.input = None;
    assert!(server.child.wait().unwrap().success());
}

#[test]
fn stdio_forwards_to_a_running_gateway_and_serves_alone_once_it_stops() {
    let sb = home(false);
    let gw = Gateway::start(&sb, &[]);
    let mut server = LineClient::start(&sb);
    let first = server.call(1, "memory_search", json!({"query": "Biscuit"}));
    assert!(
        first["result"]["structuredContent"]
            .to_string()
            .contains("Biscuit")
    );
    server.notice(&format!("tool calls go to the gateway on port {}", gw.port));
    drop(gw);
    let second = server.call(2, "memory_search", json!({"query": "Biscuit"}));
    assert!(
        second["result"]["structuredContent"]
            .to_string()
            .contains("Biscuit"),
        "{second}"
    );
    server.notice("serving from this process");
}

#[test]
fn agent_id_picks_the_agents_memory_and_the_tool_lists_follow_the_config() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/MEMORY.md", "# Main\n- main's note\n");
    sb.write(
        ".almanac/workspace-work/MEMORY.md",
        "# Work\n- the work agent's note\n",
    );
    sb.write(
        ".almanac/config.json5",
        r#"{agents: {list: [{id: "main", default: true}, {id: "work", workspace: "~/.almanac/workspace-work"}]},
            mcp: {allowWrites: true, tools: {deny: ["memory_search", "cron_remove"]}}}"#,
    );
    let mut server = LineClient::start(&sb);
    let listed = server.ask(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"memory_append") && names.contains(&"cron_add"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"memory_search") && !names.contains(&"cron_remove"),
        "{names:?}"
    );
    let denied = server.call(2, "memory_search", json!({"query": "note"}));
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    let work = server.call(
        3,
        "memory_get",
        json!({"path": "MEMORY.md", "agentId": "work"}),
    );
    assert!(
        work["result"]["structuredContent"]["text"]
            .as_str()
            .unwrap()
            .contains("work agent")
    );
    let main = server.call(4, "memory_get", json!({"path": "MEMORY.md"}));
    assert!(
        main["result"]["structuredContent"]["text"]
            .as_str()
            .unwrap()
            .contains("main's note")
    );
    let unknown = server.call(
        5,
        "memory_get",
        json!({"path": "MEMORY.md", "agentId": "nobody"}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let appended = server.call(
        6,
        "memory_append",
        json!({"text": "Work standup moved to 10", "longTerm": true, "agentId": "work"}),
    );
    assert_eq!(appended["result"]["isError"], false, "{appended}");
    assert!(
        sb.read(".almanac/workspace-work/MEMORY.md")
            .contains("Work standup moved to 10")
    );
    assert!(!sb.read(".almanac/workspace/MEMORY.md").contains("standup"));
}
