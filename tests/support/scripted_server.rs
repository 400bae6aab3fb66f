//! A local HTTP server that answers with scripted replies, for tests of
//! model providers: it speaks plain HTTP/1.1 and streams server-sent
//! events, one write per chunk, so a test controls exactly what the client
//! receives (including a connection closed halfway). Shared by the unit
//! tests of the provider module and the integration tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A request the server received.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("the request body is JSON")
    }
}

/// What to answer to the next request.
#[derive(Debug, Clone)]
pub(super) enum Reply {
    /// `200 text/event-stream`: these chunks, each written on its own.
    Sse(Vec<String>),
    /// The same, then the connection is closed without ending the answer.
    SseDrop(Vec<String>),
    /// The same, then nothing more, the connection held open (until the
    /// client goes away): a stream that stalls midway.
    SseStall(Vec<String>),
    /// `200 text/event-stream`: these chunks with a pause before each.
    SseSlow(Vec<String>, std::time::Duration),
    /// Read the request and never answer (until the client goes away).
    Hang,
    /// These bytes as they are (a status line, headers and part of a
    /// body, say), then the connection is closed: an answer cut off
    /// midway.
    Raw(String),
    /// Any status with headers and a body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

/// Server-sent event chunks, one `data:` event per JSON value (with the
/// `event:` line Anthropic sends when the value has a `type`).
pub(super) fn sse(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e.get("type").and_then(|t| t.as_str()) {
            Some(kind) => format!("event: {kind}\ndata: {e}\n\n"),
            None => format!("data: {e}\n\n"),
        })
        .collect()
}

pub(super) struct ScriptedServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl ScriptedServer {
    /// Starts a server on a free local port answering `replies` in order
    /// (then `500 no scripted reply`).
    pub(super) fn start(replies: Vec<Reply>) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let replies = Arc::new(Mutex::new(std::collections::VecDeque::from(replies)));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let recorded = recorded.clone();
                let replies = replies.clone();
                std::thread::spawn(move || serve(stream, &recorded, &replies));
            }
        });
        ScriptedServer { url, requests }
    }

    pub(super) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    recorded: &Mutex<Vec<Recorded>>,
    replies: &Mutex<std::collections::VecDeque<Reply>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    recorded.lock().unwrap().push(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let reply = replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Status {
            status: 500,
            headers: Vec::new(),
            body: "{\"error\":{\"message\":\"no scripted reply\"}}".to_string(),
        });
    let mut out = stream;
    // Waits for the client to close its side.
    let wait_for_close = |reader: &mut BufReader<TcpStream>| {
        let mut sink = [0u8; 64];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
    };
    let stall = matches!(reply, Reply::SseStall(_));
    match reply {
        Reply::Hang => {
            wait_for_close(&mut reader);
            return;
        }
        Reply::Sse(chunks) | Reply::SseDrop(chunks) | Reply::SseStall(chunks) => {
            let _ = out.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
            );
            for chunk in chunks {
                let _ = out.write_all(chunk.as_bytes());
                let _ = out.flush();
            }
            if stall {
                wait_for_close(&mut reader);
                return;
            }
        }
        Reply::SseSlow(chunks, pause) => {
            let _ = out.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
            );
            let _ = out.flush();
            for chunk in chunks {
                std::thread::sleep(pause);
                if out
                    .write_all(chunk.as_bytes())
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return;
                }
            }
        }
        Reply::Raw(bytes) => {
            let _ = out.write_all(bytes.as_bytes());
        }
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(body.as_bytes());
        }
    }
    let _ = out.flush();
    let _ = out.shutdown(std::net::Shutdown::Both);
}
