//! A local Telegram Bot API: `getMe`, `deleteWebhook`, `getUpdates`
//! (long polling on queued updates), `sendMessage`, `sendChatAction`,
//! over real HTTP at `<root>/bot<token>/<method>`. Tests queue updates,
//! script failures and read what the bot sent.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub(crate) const TOKEN: &str = "123456:TEST-token-abcdef";
pub(crate) const BOT_ID: i64 = 777;
pub(crate) const BOT_NAME: &str = "almanac_test_bot";

/// A scripted answer: status and JSON body.
pub(crate) type Scripted = (u16, Value);

#[derive(Default)]
struct State {
    next_update_id: i64,
    updates: Vec<Value>,
    sent: Vec<Value>,
    calls: Vec<(String, Value)>,
    /// Answers for the next calls of a method, before the normal ones.
    scripted: Vec<(String, VecDeque<Scripted>)>,
    /// Raw bytes for the next `getUpdates` answers (bodies that are not
    /// JSON, or huge).
    raw_updates: VecDeque<Vec<u8>>,
}

pub(crate) struct BotApi {
    pub root: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl BotApi {
    pub(crate) fn start() -> BotApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new((
            Mutex::new(State {
                next_update_id: 1000,
                ..State::default()
            }),
            Condvar::new(),
        ));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        BotApi { root, state }
    }

    /// Queues `message` (the `message` object) as a new update; its id.
    pub(crate) fn push(&self, message: Value) -> i64 {
        self.push_update(|id| json!({"update_id": id, "message": message}))
    }

    /// Queues an update made from its id.
    pub(crate) fn push_update(&self, make: impl FnOnce(i64) -> Value) -> i64 {
        let (lock, ready) = &*self.state;
        let mut state = lock.lock().unwrap();
        state.next_update_id += 1;
        let id = state.next_update_id;
        state.updates.push(make(id));
        ready.notify_all();
        id
    }

    /// Answers the next `n` calls of `method` with `answer`.
    pub(crate) fn script(&self, method: &str, answer: Scripted, n: usize) {
        let (lock, _) = &*self.state;
        let mut state = lock.lock().unwrap();
        state
            .scripted
            .push((method.to_string(), std::iter::repeat_n(answer, n).collect()));
    }

    /// Answers the next `getUpdates` with these bytes as its body.
    pub(crate) fn raw_updates(&self, body: Vec<u8>) {
        let (lock, ready) = &*self.state;
        lock.lock().unwrap().raw_updates.push_back(body);
        ready.notify_all();
    }

    /// What the bot sent with `sendMessage` (accepted ones).
    pub(crate) fn sent(&self) -> Vec<Value> {
        self.state.0.lock().unwrap().sent.clone()
    }

    /// Every call: method and body.
    pub(crate) fn calls(&self) -> Vec<(String, Value)> {
        self.state.0.lock().unwrap().calls.clone()
    }

    pub(crate) fn count(&self, method: &str) -> usize {
        self.calls().iter().filter(|(m, _)| m == method).count()
    }
}

/// A direct message from user `from` (also the chat).
pub(crate) fn dm(from: i64, text: &str) -> Value {
    json!({"message_id": 1, "date": 1, "chat": {"id": from, "type": "private"},
           "from": {"id": from, "is_bot": false, "first_name": format!("User{from}")},
           "text": text})
}

/// A message in group `chat` from user `from`.
pub(crate) fn group(chat: i64, from: i64, text: &str) -> Value {
    json!({"message_id": 2, "date": 1, "chat": {"id": chat, "type": "supergroup", "title": "Team"},
           "from": {"id": from, "is_bot": false, "first_name": format!("User{from}")},
           "text": text})
}

fn ok(result: Value) -> Scripted {
    (200, json!({"ok": true, "result": result}))
}

fn serve(stream: TcpStream, shared: &(Mutex<State>, Condvar)) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.trim_end().split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (token, method) = path
            .trim_start_matches("/bot")
            .split_once('/')
            .map(|(t, m)| (t.to_string(), m.to_string()))
            .unwrap_or_default();
        let (status, bytes) = if token == TOKEN {
            answer(shared, &method, body)
        } else {
            let b = json!({"ok": false, "error_code": 401, "description": "Unauthorized"});
            (401, b.to_string().into_bytes())
        };
        let mut out = stream.try_clone().unwrap();
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            bytes.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn answer(shared: &(Mutex<State>, Condvar), method: &str, body: Value) -> (u16, Vec<u8>) {
    let (lock, ready) = shared;
    let mut state = lock.lock().unwrap();
    state.calls.push((method.to_string(), body.clone()));
    if let Some((_, queue)) = state
        .scripted
        .iter_mut()
        .find(|(m, q)| m == method && !q.is_empty())
    {
        let (status, value) = queue.pop_front().unwrap();
        return (status, value.to_string().into_bytes());
    }
    let (status, value) = match method {
        "getMe" => {
            ok(json!({"id": BOT_ID, "is_bot": true, "first_name": "Almanac", "username": BOT_NAME}))
        }
        "deleteWebhook" | "sendChatAction" => ok(json!(true)),
        "sendMessage" => {
            state.sent.push(body);
            let id = state.sent.len();
            ok(json!({"message_id": id, "date": 1, "chat": {"id": 1}}))
        }
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
            let deadline = std::time::Instant::now() + wait;
            loop {
                if let Some(raw) = state.raw_updates.pop_front() {
                    return (200, raw);
                }
                let found: Vec<Value> = state
                    .updates
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .cloned()
                    .collect();
                let now = std::time::Instant::now();
                if !found.is_empty() || now >= deadline {
                    break ok(Value::Array(found));
                }
                state = ready.wait_timeout(state, deadline - now).unwrap().0;
            }
        }
        other => (
            404,
            json!({"ok": false, "error_code": 404, "description": format!("Not Found: {other}")}),
        ),
    };
    (status, value.to_string().into_bytes())
}
