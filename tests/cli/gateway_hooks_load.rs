//! Webhooks under load, spoken to over raw TCP: ten thousand crafted
//! requests of which none may be accepted, and a thousand accepted wakes
//! that a kill -9 right after their answers must neither lose nor repeat.

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::gateway::{Gateway, eventually};
use crate::gateway_hooks::{HOOK_TOKEN, bearer, hmac_hex, hooks_sandbox, queued_texts, send};

const GITHUB_SECRET: &str = "gh-load-secret";
const STRIPE_SECRET: &str = "st-load-secret";
const MAX_BODY: usize = 4096;
/// Stripe signatures further than this from now are replays.
const TOLERANCE_S: i64 = 300;

/// What a refused request may get: an error status, or the connection
/// closed without an answer (0).
const REFUSED: &[u16] = &[0, 400, 401, 404, 405, 408, 411, 413, 415, 429, 431];
/// A `token` in the query string is refused before anything else.
const QUERY_REFUSED: &[u16] = &[400];
/// Any method but POST on the hooks path, before the token is looked at.
const WRONG_METHOD: &[u16] = &[405];
/// A header value with a control byte: refused by the HTTP parser.
const MALFORMED: &[u16] = &[400];
/// A body that does not arrive, on a signed mapping (whose body is read
/// before its signature is checked).
const BODY_TIMED_OUT: &[u16] = &[408];

/// A small deterministic generator (SplitMix64): the same probes every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One crafted request and the answers it may get.
struct Probe {
    raw: Vec<u8>,
    /// Close our sending half after it: a request cut short.
    half_close: bool,
    expect: &'static [u16],
    what: &'static str,
}

/// How the body goes on the wire.
#[derive(Clone, Copy)]
enum Framing {
    Length,
    Chunked,
    BadChunked,
    /// A longer `content-length` than what is sent, then end of stream.
    Truncated,
    LengthAndChunked,
    BadLength,
    /// Headers cut off before their end, then end of stream.
    CutHeaders,
    Http10,
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn trim_blanks(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(s), Some(e)) => &bytes[s..=e],
        _ => &[],
    }
}

/// A token that is not the hook token, however the gateway trims it.
fn near_miss(rng: &mut Rng, gateway_token: &str) -> Vec<u8> {
    let t = HOOK_TOKEN.as_bytes();
    let letters: Vec<usize> = (0..t.len())
        .filter(|&i| t[i].is_ascii_alphabetic())
        .collect();
    let miss = match rng.below(15) {
        0 => t[..rng.below(t.len())].to_vec(),
        1 => t[1 + rng.below(t.len() - 1)..].to_vec(),
        2 => [t, &[*rng.pick(b"x1-_=~.!")][..]].concat(),
        3 => {
            let mut v = t.to_vec();
            let i = *rng.pick(&letters);
            v[i] ^= 0x20;
            v
        }
        4 => t.to_ascii_uppercase(),
        5 => {
            let mut v = t.to_vec();
            v.insert(1 + rng.below(t.len() - 1), *rng.pick(b" \t"));
            v
        }
        6 => {
            let mut v = t.to_vec();
            let i = rng.below(t.len());
            v[i] = if v[i] == b'z' { b'y' } else { b'z' };
            let pad = [" ", "\t", "  ", " \t "];
            [rng.pick(&pad).as_bytes(), &v, rng.pick(&pad).as_bytes()].concat()
        }
        7 => {
            let mut v = t.to_vec();
            v.insert(
                rng.below(t.len() + 1),
                *rng.pick(&[0u8, 1, 0x0b, 0x1b, 0x7f]),
            );
            v
        }
        8 => {
            let (from, to) = *rng.pick(&[
                ("-", "\u{2010}"),
                ("-", "\u{2212}"),
                ("e", "\u{0435}"),
                ("o", "\u{043e}"),
                ("h", "\u{04bb}"),
                ("1", "l"),
                ("1", "\u{0661}"),
            ]);
            HOOK_TOKEN.replacen(from, to, 1).into_bytes()
        }
        9 => Vec::new(),
        10 => gateway_token.as_bytes().to_vec(),
        11 => [t, t].concat(),
        12 => t.repeat(8192 / t.len()),
        13 => HOOK_TOKEN.replace('-', "%2D").into_bytes(),
        _ => t.iter().rev().copied().collect(),
    };
    assert_ne!(trim_blanks(&miss), t, "a near miss must not be the token");
    miss
}

/// Header lines carrying no accepted credential. The hook token itself
/// appears only where the gateway does not take it from: another scheme,
/// another header name, a second copy of a header whose first copy is
/// wrong (the first copy counts), or the body.
fn wrong_auth(rng: &mut Rng, gateway_token: &str) -> Vec<Vec<u8>> {
    let real = HOOK_TOKEN;
    let miss = near_miss(rng, gateway_token);
    let line = |name: &str, value: &[u8]| [name.as_bytes(), &b": "[..], value].concat();
    match rng.below(9) {
        0 => Vec::new(),
        1 => {
            let scheme = rng.pick(&["Bearer", "bearer", "BEARER", "bEaReR"]);
            let name = rng.pick(&["authorization", "Authorization", "AUTHORIZATION"]);
            vec![line(name, &[scheme.as_bytes(), b" ", &miss].concat())]
        }
        2 => {
            let value = rng.pick(&["Bearer", "bearer", "Bearer ", "Bearer  ", "Basic", ""]);
            vec![line("authorization", value.as_bytes())]
        }
        3 => {
            let value = match rng.below(7) {
                0 => format!("Basic {real}"),
                1 => format!("Basic {}", base64(format!(":{real}").as_bytes())),
                2 => format!("Basic {}", base64(format!("hook:{real}").as_bytes())),
                3 => format!("Token {real}"),
                4 => real.to_string(),
                5 => format!("Bearer\t{real}"),
                _ => format!("Bearer{real}"),
            };
            vec![line("authorization", value.as_bytes())]
        }
        4 => {
            let name = rng.pick(&[
                "x-openclaw-token",
                "X-OpenClaw-Token",
                "X-OPENCLAW-TOKEN",
                "x-almanac-token",
                "X-Almanac-Token",
                "x-ALMANAC-token",
            ]);
            vec![line(name, &miss)]
        }
        5 => {
            let name = rng.pick(&[
                "x-openclaw-tokens",
                "x_openclaw_token",
                "openclaw-token",
                "x-hook-token",
                "x-almanac-token-",
                "token",
                "proxy-authorization",
                "authorisation",
                "x-api-key",
            ]);
            let value = if name.contains("author") {
                format!("Bearer {real}")
            } else {
                real.to_string()
            };
            vec![line(name, value.as_bytes())]
        }
        6 => vec![line("cookie", format!("token={real}").as_bytes())],
        7 => {
            let (first, second) = *rng.pick(&[
                ("authorization", "Authorization"),
                ("x-openclaw-token", "X-OpenClaw-Token"),
                ("x-almanac-token", "x-almanac-token"),
            ]);
            let prefix: &[u8] = if first == "authorization" {
                b"Bearer "
            } else {
                b""
            };
            let real_value = [prefix, real.as_bytes()].concat();
            vec![
                line(first, &[prefix, &miss].concat()),
                line(second, &real_value),
            ]
        }
        _ => vec![
            line("authorization", format!("Basic {real}").as_bytes()),
            line("x-openclaw-token", &miss),
        ],
    }
}

fn body(rng: &mut Rng, i: usize) -> Vec<u8> {
    match rng.below(10) {
        0..=2 => json!({"text": format!("fuzz {i}"), "mode": "next-heartbeat"})
            .to_string()
            .into_bytes(),
        3 => json!({"message": format!("run {i}"), "name": "Fuzz"})
            .to_string()
            .into_bytes(),
        4 => json!({"text": format!("fuzz {i}"), "token": HOOK_TOKEN})
            .to_string()
            .into_bytes(),
        5 => rng
            .pick(&[
                &b"{not json"[..],
                b"[1, 2",
                b"\xff\xfe{}",
                b"{\"text\": \"x\"",
                b"null",
                b"42",
            ])
            .to_vec(),
        6 => Vec::new(),
        7 => {
            let size = MAX_BODY + 1 + rng.below(2 * MAX_BODY);
            format!("{{\"text\": \"{}\"}}", "x".repeat(size)).into_bytes()
        }
        8 => json!({"repository": {"full_name": format!("me/repo{i}")}, "data": {"amount": i}})
            .to_string()
            .into_bytes(),
        _ => "[".repeat(2000).into_bytes(),
    }
}

fn framing(rng: &mut Rng) -> Framing {
    match rng.below(100) {
        0..=69 => Framing::Length,
        70..=77 => Framing::Chunked,
        78..=82 => Framing::BadChunked,
        83..=88 => Framing::Truncated,
        89..=91 => Framing::LengthAndChunked,
        92..=94 => Framing::BadLength,
        95..=97 => Framing::CutHeaders,
        _ => Framing::Http10,
    }
}

/// Puts a request on the wire: `(bytes, half_close)`.
fn assemble(
    method: &str,
    target: &str,
    headers: &[Vec<u8>],
    body: &[u8],
    framing: Framing,
) -> (Vec<u8>, bool) {
    let version = if matches!(framing, Framing::Http10) {
        "HTTP/1.0"
    } else {
        "HTTP/1.1"
    };
    let mut raw = format!("{method} {target} {version}\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\n").into_bytes();
    for h in headers {
        raw.extend_from_slice(h);
        raw.extend_from_slice(b"\r\n");
    }
    let mut half_close = false;
    match framing {
        Framing::Length | Framing::Http10 => {
            raw.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
            raw.extend_from_slice(body);
        }
        Framing::Chunked => {
            raw.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            for part in body.chunks(1000) {
                raw.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                raw.extend_from_slice(part);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n\r\n");
        }
        Framing::BadChunked => {
            raw.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            raw.extend_from_slice(b"zz\r\n");
            raw.extend_from_slice(body);
            raw.extend_from_slice(b"\r\nffffffffffffffffffff\r\nx\r\n");
            half_close = true;
        }
        Framing::Truncated => {
            let declared = body.len() + 1 + body.len() / 2;
            raw.extend_from_slice(format!("content-length: {declared}\r\n\r\n").as_bytes());
            raw.extend_from_slice(body);
            half_close = true;
        }
        Framing::LengthAndChunked => {
            raw.extend_from_slice(
                format!(
                    "content-length: {}\r\ntransfer-encoding: chunked\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            raw.extend_from_slice(body);
            half_close = true;
        }
        Framing::BadLength => {
            raw.extend_from_slice(format!("content-length: {}abc\r\n\r\n", body.len()).as_bytes());
            raw.extend_from_slice(body);
            half_close = true;
        }
        Framing::CutHeaders => {
            raw.extend_from_slice(format!("content-length: {}", body.len()).as_bytes());
            let keep = raw.len() / 2 + raw.len() / 4;
            raw.truncate(keep);
            half_close = true;
        }
    }
    (raw, half_close)
}

fn github_header(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let other = [body, &b" "[..]].concat();
    let right = hmac_hex(GITHUB_SECRET, body);
    let value = match rng.below(8) {
        0 => format!("sha256={}", hmac_hex("not-the-secret", body)),
        1 => format!("sha256={}", hmac_hex(GITHUB_SECRET, &other)),
        2 => format!("sha256={}", &right[..62]),
        3 => format!("sha256={}", "zz".repeat(32)),
        4 => format!("sha1={right}"),
        5 => "sha256=".to_string(),
        6 => format!("sha256={}", hmac_hex(STRIPE_SECRET, body)),
        _ => right,
    };
    [&b"x-hub-signature-256: "[..], value.as_bytes()].concat()
}

fn stripe_header(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let now = now_s();
    let signed = |secret: &str, t: i64, body: &[u8]| {
        hmac_hex(secret, &[format!("{t}.").as_bytes(), body].concat())
    };
    let stale =
        now + if rng.chance(50) { -1 } else { 1 } * (TOLERANCE_S + 100 + rng.below(7200) as i64);
    let value = match rng.below(9) {
        0 => format!("t={stale},v1={}", signed(STRIPE_SECRET, stale, body)),
        1 => format!("t={now},v1={}", signed("not-the-secret", now, body)),
        2 => format!(
            "t={now},v1={}",
            signed(STRIPE_SECRET, now, &[body, &b"x"[..]].concat())
        ),
        3 => format!("t={now},v1={}", signed(STRIPE_SECRET, now - 1, body)),
        4 => format!("v1={}", signed(STRIPE_SECRET, now, body)),
        5 => format!("t={now}"),
        6 => format!("t=abc,v1={}", signed(STRIPE_SECRET, now, body)),
        7 => format!("t={now},v0={}", signed(STRIPE_SECRET, now, body)),
        _ => format!("t={now},v1={}", hmac_hex(STRIPE_SECRET, body)),
    };
    [&b"stripe-signature: "[..], value.as_bytes()].concat()
}

const HOOK_PATHS: &[&str] = &[
    "/hooks/wake",
    "/hooks/agent",
    "/hooks/ci",
    "/hooks",
    "/hooks/",
    "/hooks/nothing",
    "/hooks/wake/",
    "/hooks//wake",
    "/hooks/wake?mode=now",
    "/hooks/../hooks/wake",
    "/hooks/GitHub",
    "http://localhost/hooks/wake",
];

const WRONG_PATHS: &[&str] = &[
    "/hook/wake",
    "/Hooks/wake",
    "/HOOKS/WAKE",
    "/hooks-wake",
    "/hookswake",
    "/v1/hooks/wake",
    "/%68ooks/wake",
    "/hooks%2Fwake",
    "//hooks/wake",
    "/v1/system/event",
    "/v1/agent",
    "/",
    "/favicon.ico",
];

/// Query strings the gateway must recognise as a token (400).
const QUERY_TOKENS: &[&str] = &[
    "token=REAL",
    "a=1&token=REAL",
    "%74oken=REAL",
    "tok%65n=REAL",
    "%74%6F%6B%65%6E=REAL",
    "token",
    "token=",
    "x&token=REAL&y",
    "token=REAL&token=REAL",
];

/// Query strings with a token under another name: not a header either,
/// so no credential at all.
const QUERY_OTHER: &[&str] = &[
    "TOKEN=REAL",
    "Token=REAL",
    "to+ken=REAL",
    "token+=REAL",
    "+token=REAL",
    "tokens=REAL",
    "access_token=REAL",
    "hook_token=REAL",
    "token%20=REAL",
    "%54OKEN=REAL",
];

/// Whether a header value holds a byte HTTP does not allow there.
fn malformed(headers: &[Vec<u8>]) -> bool {
    headers
        .iter()
        .flatten()
        .any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

fn probe(i: usize, gateway_token: &str) -> Probe {
    let mut rng = Rng(0x5eed_0000 ^ (i as u64).wrapping_mul(0x1000_0000_01b3));
    let rng = &mut rng;
    let body = body(rng, i);
    let framing = framing(rng);
    let kind = rng.below(100);
    let (method, target, headers, expect, what): (String, String, Vec<Vec<u8>>, _, _) = match kind {
        // A token in the query string: 400 even beside the right header.
        0..=7 => {
            let query = rng.pick(QUERY_TOKENS).replace("REAL", HOOK_TOKEN);
            let method = rng.pick(&["POST", "GET", "PUT"]).to_string();
            let headers = if rng.chance(40) {
                vec![format!("authorization: {}", bearer()).into_bytes()]
            } else {
                wrong_auth(rng, gateway_token)
            };
            let text = json!({"text": format!("query {i}"), "mode": "next-heartbeat"});
            let (raw, half_close) = assemble(
                &method,
                &format!("/hooks/wake?{query}"),
                &headers,
                text.to_string().as_bytes(),
                Framing::Length,
            );
            return Probe {
                raw,
                half_close,
                expect: QUERY_REFUSED,
                what: "token in the query",
            };
        }
        8..=11 => {
            let query = rng.pick(QUERY_OTHER).replace("REAL", HOOK_TOKEN);
            let path = rng.pick(&["/hooks/wake", "/hooks/ci", "/hooks/agent"]);
            (
                "POST".into(),
                format!("{path}?{query}"),
                wrong_auth(rng, gateway_token),
                REFUSED,
                "token under another query name",
            )
        }
        // Any other method: 405 before the token is looked at.
        12..=18 => {
            let method = rng.pick(&[
                "GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "FOO", "post",
            ]);
            let path = rng.pick(&["/hooks/wake", "/hooks", "/hooks/github", "/hooks/pay"]);
            let headers = wrong_auth(rng, gateway_token);
            let (raw, half_close) = assemble(method, path, &headers, b"", Framing::Length);
            return Probe {
                raw,
                half_close,
                expect: if malformed(&headers) {
                    MALFORMED
                } else {
                    WRONG_METHOD
                },
                what: "wrong method",
            };
        }
        19..=55 => (
            "POST".into(),
            rng.pick(HOOK_PATHS).to_string(),
            wrong_auth(rng, gateway_token),
            REFUSED,
            "no valid token",
        ),
        56..=70 => {
            let mut headers = wrong_auth(rng, gateway_token);
            headers.push(github_header(rng, &body));
            headers.push(b"x-github-event: push".to_vec());
            let path = if rng.chance(85) {
                "/hooks/github"
            } else {
                rng.pick(&["/hooks/pay", "/hooks/wake", "/hooks/ci"])
            };
            (
                "POST".into(),
                path.into(),
                headers,
                REFUSED,
                "bad github signature",
            )
        }
        71..=85 => {
            let mut headers = wrong_auth(rng, gateway_token);
            headers.push(stripe_header(rng, &body));
            let path = if rng.chance(85) {
                "/hooks/pay"
            } else {
                rng.pick(&["/hooks/github", "/hooks/wake", "/hooks/agent"])
            };
            (
                "POST".into(),
                path.into(),
                headers,
                REFUSED,
                "bad stripe signature",
            )
        }
        86..=94 => {
            let mut headers = wrong_auth(rng, gateway_token);
            if rng.chance(20) {
                headers.push(format!("authorization: Bearer {}", rng.below(1000)).into_bytes());
            }
            (
                rng.pick(&["POST", "GET"]).to_string(),
                rng.pick(WRONG_PATHS).to_string(),
                headers,
                REFUSED,
                "wrong path",
            )
        }
        95..=96 => {
            let mut headers = wrong_auth(rng, gateway_token);
            for n in 0..120 {
                headers.push(format!("x-filler-{n}: {}", "f".repeat(rng.below(64))).into_bytes());
            }
            (
                "POST".into(),
                rng.pick(&["/hooks/wake", "/hooks/github"]).to_string(),
                headers,
                REFUSED,
                "too many headers",
            )
        }
        _ => {
            let raw = match rng.below(5) {
                0 => b"GARBAGE\r\n\r\n".to_vec(),
                1 => (0..rng.below(512)).map(|_| rng.next() as u8).collect(),
                2 => b"POST /hooks/wake HTTP/1.1\r\nhost: x\r\nauthori".to_vec(),
                3 => format!("POST /hooks/wake?token={HOOK_TOKEN} HTTP/1.1\r\n\x00\r\n\r\n")
                    .into_bytes(),
                _ => b"POST  /hooks/wake  HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(),
            };
            return Probe {
                raw,
                half_close: true,
                expect: REFUSED,
                what: "garbage",
            };
        }
    };
    let (raw, half_close) = assemble(&method, &target, &headers, &body, framing);
    Probe {
        raw,
        half_close,
        expect,
        what,
    }
}

/// The status of the answer to `raw` (0: closed without one).
fn exchange(port: u16, raw: &[u8], half_close: bool, hold: Option<Duration>) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|err| panic!("the gateway stopped accepting connections: {err}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // A request the server refuses early may not all be read: a broken
    // pipe here is an answer like any other.
    let _ = stream.write_all(raw);
    if let Some(hold) = hold {
        // Keep the connection open, body unfinished, for a while.
        let began = Instant::now();
        while began.elapsed() < hold {
            let _ = stream.write_all(b" ");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    if half_close {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let mut answer = Vec::new();
    if let Err(err) = stream.read_to_end(&mut answer) {
        assert!(
            !matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "no answer within 60 s"
        );
    }
    let text = String::from_utf8_lossy(&answer);
    if !text.starts_with("HTTP/1.") {
        assert!(answer.is_empty(), "not an HTTP answer: {text:?}");
        return 0;
    }
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"))
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// The intake log's records, each line of it parsed.
fn intake_records(sb: &Sandbox) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(sb.path(".almanac/gateway/intake.jsonl")) else {
        return Vec::new();
    };
    text.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("torn record {line:?}: {e}"))
        })
        .collect()
}

fn hook_wakes(sb: &Sandbox) -> Vec<String> {
    intake_records(sb)
        .iter()
        .filter(|r| r["kind"] == "hook-wake")
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ten_thousand_crafted_requests_without_the_token_or_a_signature_are_never_accepted() {
    const PROBES: usize = 10_000;
    const LANES: usize = 4;
    let mappings = r#"mappings: [
        {match: {path: "github"}, action: "wake", wakeMode: "next-heartbeat",
         textTemplate: "push on {{repository.full_name}}",
         signature: {scheme: "github", secret: "GITHUB"}},
        {match: {path: "pay"}, action: "wake", wakeMode: "next-heartbeat",
         textTemplate: "paid {{data.amount}}",
         signature: {scheme: "stripe", secret: "STRIPE", toleranceSeconds: TOLERANCE}},
        {match: {path: "ci"}, action: "wake", wakeMode: "next-heartbeat", textTemplate: "ci {{build.id}}"},
    ]"#
    .replace("GITHUB", GITHUB_SECRET)
    .replace("STRIPE", STRIPE_SECRET)
    .replace("TOLERANCE", &TOLERANCE_S.to_string());
    let sb = hooks_sandbox(&format!("maxBodyBytes: {MAX_BODY}, {mappings}"));
    let mut gw = Gateway::start(&sb, &[]);
    let (port, pid) = (gw.port, gw.child.id());
    assert_eq!(send(port, "GET", "/healthz", &[], "").status, 200);
    let rss_start = rss_kb(pid);
    let began = Instant::now();

    let mut counts: BTreeMap<u16, usize> = BTreeMap::new();
    let mut wrong: Vec<String> = Vec::new();
    std::thread::scope(|s| {
        // Bodies that never finish, on the signed mappings (read before
        // their signature is checked) and on /wake (refused unread).
        let slow: Vec<_> = (0..6)
            .map(|n| {
                s.spawn(move || {
                    let path = ["/hooks/github", "/hooks/pay", "/hooks/wake"][n % 3];
                    let raw = format!(
                        "POST {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-length: 200\r\n\r\n{{\"text\": "
                    );
                    let expect = if path == "/hooks/wake" {
                        &[401, 429][..]
                    } else {
                        BODY_TIMED_OUT
                    };
                    let status = exchange(port, raw.as_bytes(), false, Some(Duration::from_secs(2)));
                    (status, expect, path)
                })
            })
            .collect();
        let lanes: Vec<_> = (0..LANES)
            .map(|lane| {
                let token = gw.token.clone();
                s.spawn(move || {
                    let mut counts: HashMap<u16, usize> = HashMap::new();
                    let mut wrong = Vec::new();
                    for i in (lane..PROBES).step_by(LANES) {
                        let p = probe(i, &token);
                        let status = exchange(port, &p.raw, p.half_close, None);
                        *counts.entry(status).or_default() += 1;
                        if !p.expect.contains(&status) {
                            wrong.push(format!(
                                "probe {i} ({}): {status}, expected one of {:?}: {:?}",
                                p.what,
                                p.expect,
                                String::from_utf8_lossy(&p.raw[..p.raw.len().min(300)])
                            ));
                        }
                    }
                    (counts, wrong)
                })
            })
            .collect();
        for lane in lanes {
            let (c, w) = lane.join().unwrap();
            for (status, n) in c {
                *counts.entry(status).or_default() += n;
            }
            wrong.extend(w);
        }
        eprintln!("{PROBES} probes answered in {:?}", began.elapsed());
        for slow in slow {
            let (status, expect, path) = slow.join().unwrap();
            *counts.entry(status).or_default() += 1;
            if !expect.contains(&status) {
                wrong.push(format!(
                    "slow body on {path}: {status}, expected {expect:?}"
                ));
            }
        }
    });
    let elapsed = began.elapsed();
    let rss_end = rss_kb(pid);
    eprintln!(
        "{} probes in {elapsed:?}; statuses {counts:?}; RSS {rss_start} kB -> {rss_end} kB",
        counts.values().sum::<usize>()
    );

    assert!(
        wrong.is_empty(),
        "{} unexpected answers, first: {:#?}",
        wrong.len(),
        &wrong[..wrong.len().min(20)]
    );
    assert!(counts.values().sum::<usize>() >= PROBES);
    assert!(counts.keys().all(|s| !(200..300).contains(s)));
    // Locked out after the first failures: 20 on the hooks, 10 on the
    // control API (its own count); every later one was a 429.
    assert_eq!(counts.get(&401).copied(), Some(20 + 10), "{counts:?}");
    assert!(counts.get(&429).copied().unwrap_or(0) > PROBES / 4);

    // Alive, not bloated, still serving.
    assert!(
        gw.child.try_wait().unwrap().is_none(),
        "the gateway died under the fuzz"
    );
    assert!(rss_end < 64 * 1024, "RSS {rss_end} kB");
    assert!(
        rss_end < rss_start + 32 * 1024,
        "RSS {rss_start} -> {rss_end} kB"
    );
    assert_eq!(send(port, "GET", "/healthz", &[], "").status, 200);
    assert!(hook_wakes(&sb).is_empty(), "{:?}", hook_wakes(&sb));
    assert!(queued_texts(&sb).is_empty(), "{:?}", queued_texts(&sb));

    // Those who hold a credential still get through, locked-out address
    // or not: the fuzz could have seen an acceptance.
    let auth = bearer();
    let ok = send(
        port,
        "POST",
        "/hooks/wake",
        &[("authorization", &auth)],
        r#"{"text": "after the fuzz", "mode": "next-heartbeat"}"#,
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let payload = r#"{"repository": {"full_name": "me/real"}}"#;
    let signature = format!("sha256={}", hmac_hex(GITHUB_SECRET, payload.as_bytes()));
    let github = send(
        port,
        "POST",
        "/hooks/github",
        &[("x-hub-signature-256", &signature)],
        payload,
    );
    assert_eq!(github.status, 200, "{}", github.body);
    let paid = r#"{"data": {"amount": 7}}"#;
    let t = now_s();
    let stripe = format!(
        "t={t},v1={}",
        hmac_hex(STRIPE_SECRET, format!("{t}.{paid}").as_bytes())
    );
    let pay = send(
        port,
        "POST",
        "/hooks/pay",
        &[("stripe-signature", &stripe)],
        paid,
    );
    assert_eq!(pay.status, 200, "{}", pay.body);
    let accepted = ["after the fuzz", "push on me/real", "paid 7"];
    assert_eq!(hook_wakes(&sb), accepted);
    let queue = eventually(Duration::from_secs(10), || {
        let q = queued_texts(&sb);
        (q.len() >= accepted.len()).then_some(q)
    });
    assert_eq!(queue, accepted);
}

#[test]
fn a_thousand_accepted_wakes_survive_kill_9_each_once() {
    const WAKES: usize = 1000;
    const LANES: usize = 4;
    let sb = hooks_sandbox("");
    let gw = Gateway::start(&sb, &[]);
    let port = gw.port;
    let texts: Vec<String> = (0..WAKES).map(|i| format!("deploy {i:04}")).collect();
    std::thread::scope(|s| {
        for lane in 0..LANES {
            let texts = &texts;
            s.spawn(move || {
                let auth = bearer();
                for text in texts.iter().skip(lane).step_by(LANES) {
                    let a = send(
                        port,
                        "POST",
                        "/hooks/wake",
                        &[("authorization", &auth)],
                        &json!({"text": text, "mode": "next-heartbeat"}).to_string(),
                    );
                    assert_eq!(
                        (a.status, &a.body),
                        (200, &json!({"ok": true, "mode": "next-heartbeat"})),
                        "{text}"
                    );
                }
            });
        }
    });
    // Killed the moment the last answer came.
    gw.signal(libc::SIGKILL);
    drop(gw);

    let records = intake_records(&sb);
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "the log is in sequence order"
    );
    assert!(records.iter().all(|r| r["kind"] == "hook-wake"
        && r["mode"] == "next-heartbeat"
        && r["trusted"] == false));
    let mut logged = hook_wakes(&sb);
    logged.sort();
    assert_eq!(logged, texts, "each accepted wake in the log, once");

    // Fed at the next start, by the queue's rule: the newest 20 by
    // sequence, nothing twice.
    let last_seq = *seqs.last().unwrap();
    let newest: Vec<String> = records[records.len() - 20..]
        .iter()
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect();
    let gw = Gateway::start(&sb, &[]);
    eventually(Duration::from_secs(20), || {
        let applied = std::fs::read_to_string(sb.path(".almanac/gateway/intake.applied")).ok()?;
        (applied.trim().parse::<u64>().ok()? == last_seq).then_some(())
    });
    assert_eq!(last_seq, WAKES as u64);
    assert_eq!(queued_texts(&sb), newest);
    // Feeding appended nothing to the log.
    assert_eq!(intake_records(&sb), records);
    assert_eq!(send(gw.port, "GET", "/healthz", &[], "").status, 200);
}
