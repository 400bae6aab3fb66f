//! Webhook mappings (`hooks.mappings`, `hooks.presets`): a payload at
//! `<hooks.path>/<name>` turned into a wake or an agent run through
//! `{{ … }}` templates, and the signatures that may stand in for the hook
//! token on a mapping.
//!
//! Invariants:
//! * Presets come after the user's mappings; the first match wins.
//! * Templates only read: `path`, `now`, `headers.<name>`, `query.<k>`,
//!   `payload.<path>` or a bare payload path (`a.b[0].c`); the segments
//!   `__proto__`, `prototype` and `constructor` read nothing. Strings are
//!   inserted as they are, numbers and booleans as text, objects as JSON,
//!   anything missing as nothing.
//! * JavaScript `transform` modules and the Gmail watcher are not
//!   supported: a mapping with a transform is refused with that said.
//! * A signature is checked over the body's exact bytes with HMAC-SHA256
//!   in constant time; a Stripe-style one also within its tolerance of
//!   now, so an old signed body cannot be replayed.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::config::{HookMappingConfig, HookMatchConfig, HooksConfig};

/// Stripe's default tolerance for a signed timestamp.
const DEFAULT_TOLERANCE_SECONDS: u64 = 300;

/// The mappings in match order: the user's, then the presets'.
pub(crate) fn all(config: &HooksConfig) -> Vec<HookMappingConfig> {
    let mut list = config.mappings.clone();
    for preset in &config.presets {
        if preset.trim().eq_ignore_ascii_case("gmail") {
            list.push(gmail());
        }
    }
    list
}

/// The `gmail` preset's mapping (the Gmail watcher that feeds it is not
/// part of almanac; a sender may post the same payload).
fn gmail() -> HookMappingConfig {
    HookMappingConfig {
        id: Some("gmail".into()),
        matches: Some(HookMatchConfig {
            path: Some("gmail".into()),
            source: None,
        }),
        action: Some("agent".into()),
        wake_mode: Some("now".into()),
        name: Some("Gmail".into()),
        session_key: Some("hook:gmail:{{messages[0].id}}".into()),
        message_template: Some(
            "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n{{messages[0].snippet}}\n{{messages[0].body}}".into(),
        ),
        ..HookMappingConfig::default()
    }
}

/// Problems that keep the mappings from being served.
pub(crate) fn problems(config: &HooksConfig) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, m) in config.mappings.iter().enumerate() {
        if m.transform.is_some() {
            problems.push(format!(
                "hooks.mappings[{i}].transform: JavaScript transform modules are not supported; use messageTemplate / textTemplate"
            ));
        }
        if let Some(action) = m.action.as_deref()
            && action != "agent"
            && action != "wake"
        {
            problems.push(format!(
                "hooks.mappings[{i}].action `{action}` is not one of agent, wake"
            ));
        }
        if let Some(sig) = &m.signature {
            if sig.scheme != "github" && sig.scheme != "stripe" {
                problems.push(format!(
                    "hooks.mappings[{i}].signature.scheme `{}` is not one of github, stripe",
                    sig.scheme
                ));
            }
            if sig.secret.trim().is_empty() {
                problems.push(format!("hooks.mappings[{i}].signature.secret is empty"));
            }
        }
    }
    for preset in &config.presets {
        if !preset.trim().eq_ignore_ascii_case("gmail") {
            problems.push(format!("hooks.presets: `{preset}` is not a preset (gmail)"));
        }
    }
    problems
}

fn path_matches(m: &HookMappingConfig, sub: &str) -> bool {
    m.matches
        .as_ref()
        .and_then(|x| x.path.as_deref())
        .is_none_or(|p| p.trim().trim_matches('/') == sub)
}

/// The first mapping for `sub` and `payload`.
pub(crate) fn find<'a>(
    mappings: &'a [HookMappingConfig],
    sub: &str,
    payload: &Value,
) -> Option<(usize, &'a HookMappingConfig)> {
    mappings.iter().enumerate().find(|(_, m)| {
        path_matches(m, sub)
            && m.matches
                .as_ref()
                .and_then(|x| x.source.as_deref())
                .is_none_or(|s| payload["source"].as_str() == Some(s))
    })
}

/// The signed mappings whose path is `sub` (their signature may stand in
/// for the token).
pub(crate) fn signed_for<'a>(
    mappings: &'a [HookMappingConfig],
    sub: &str,
) -> Vec<&'a HookMappingConfig> {
    mappings
        .iter()
        .filter(|m| m.signature.is_some() && path_matches(m, sub))
        .collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `headers` carry a valid signature of `body` for `mapping`
/// (`now_s`: seconds since the epoch).
pub(crate) fn signature_valid(
    mapping: &HookMappingConfig,
    headers: &HeaderMap,
    body: &[u8],
    now_s: i64,
) -> bool {
    let Some(sig) = &mapping.signature else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, sig.secret.as_bytes());
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match sig.scheme.as_str() {
        "github" => header("x-hub-signature-256")
            .and_then(|v| v.trim().strip_prefix("sha256="))
            .and_then(hex_decode)
            .is_some_and(|tag| ring::hmac::verify(&key, body, &tag).is_ok()),
        "stripe" => {
            let Some(value) = header("stripe-signature") else {
                return false;
            };
            let mut timestamp = None;
            let mut tags = Vec::new();
            for part in value.split(',') {
                match part.trim().split_once('=') {
                    Some(("t", t)) => timestamp = t.trim().parse::<i64>().ok(),
                    Some(("v1", v)) => tags.extend(hex_decode(v)),
                    _ => {}
                }
            }
            let Some(t) = timestamp else { return false };
            let tolerance = sig.tolerance_seconds.unwrap_or(DEFAULT_TOLERANCE_SECONDS);
            if now_s.abs_diff(t) > tolerance {
                return false;
            }
            let mut signed = format!("{t}.").into_bytes();
            signed.extend_from_slice(body);
            tags.iter()
                .any(|tag| ring::hmac::verify(&key, &signed, tag).is_ok())
        }
        _ => false,
    }
}

/// What a template may read.
pub(crate) struct Context<'a> {
    pub path: &'a str,
    pub now: String,
    pub headers: &'a HeaderMap,
    pub query: Vec<(String, String)>,
    pub payload: &'a Value,
}

const BLOCKED: &[&str] = &["__proto__", "prototype", "constructor"];

/// `a.b[0].c` as segments; `None` when a blocked segment is named.
fn segments(path: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        let name_end = rest.find('[').unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !name.is_empty() {
            out.push(name.to_string());
        }
        rest = &rest[name_end..];
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']')?;
            out.push(inner[..close].trim_matches(['"', '\'']).to_string());
            rest = &inner[close + 1..];
        }
    }
    if out.iter().any(|s| BLOCKED.contains(&s.as_str())) {
        return None;
    }
    Some(out)
}

fn lookup<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    let mut current = value;
    for segment in segments(path)? {
        current = match current {
            Value::Object(map) => map.get(&segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

fn as_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(other) => other.to_string(),
    }
}

fn evaluate(expr: &str, ctx: &Context) -> String {
    let expr = expr.trim();
    match expr {
        "path" => return ctx.path.to_string(),
        "now" => return ctx.now.clone(),
        _ => {}
    }
    if let Some(name) = expr.strip_prefix("headers.") {
        if BLOCKED.contains(&name) {
            return String::new();
        }
        return ctx
            .headers
            .get(name.to_ascii_lowercase())
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
    }
    if let Some(name) = expr.strip_prefix("query.") {
        return ctx
            .query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
    }
    let path = expr.strip_prefix("payload.").unwrap_or(expr);
    if path == "payload" {
        return as_text(Some(ctx.payload));
    }
    as_text(lookup(ctx.payload, path))
}

/// `template` with each `{{ expr }}` replaced.
pub(crate) fn render(template: &str, ctx: &Context) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                out.push_str(&evaluate(&after[..close], ctx));
                rest = &after[close + 2..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `/wake` or `/agent` body a mapping makes of a payload, and which of
/// the two it is.
pub(crate) fn action(m: &HookMappingConfig, ctx: &Context) -> (bool, Value) {
    let rendered = |t: &Option<String>| {
        t.as_deref()
            .map(|t| render(t, ctx).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    if m.action.as_deref() == Some("wake") {
        let text = rendered(&m.text_template).unwrap_or_default();
        return (
            true,
            json!({"text": text, "mode": m.wake_mode.as_deref().unwrap_or("now")}),
        );
    }
    let mut body = serde_json::Map::new();
    body.insert(
        "message".into(),
        json!(rendered(&m.message_template).unwrap_or_default()),
    );
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            body.insert(k.into(), v);
        }
    };
    put("name", rendered(&m.name).map(Value::from));
    put("sessionKey", rendered(&m.session_key).map(Value::from));
    put("to", rendered(&m.to).map(Value::from));
    put("model", rendered(&m.model).map(Value::from));
    put("thinking", rendered(&m.thinking).map(Value::from));
    put("agentId", m.agent_id.clone().map(Value::from));
    put("channel", m.channel.clone().map(Value::from));
    put("wakeMode", m.wake_mode.clone().map(Value::from));
    put("deliver", m.deliver.map(Value::from));
    put("timeoutSeconds", m.timeout_seconds.map(Value::from));
    put(
        "allowUnsafeExternalContent",
        m.allow_unsafe_external_content.map(Value::from),
    );
    (false, Value::Object(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ctx<'a>(payload: &'a Value, headers: &'a HeaderMap) -> Context<'a> {
        Context {
            path: "github",
            now: "2026-12-01T10:00:00Z".into(),
            headers,
            query: vec![("ref".into(), "main".into())],
            payload,
        }
    }

    #[test]
    fn templates_read_the_payload_headers_and_query_and_nothing_else() {
        let payload = json!({"a": {"b": [{"c": "deep"}]}, "n": 3, "ok": true, "o": {"k": 1}});
        let mut headers = HeaderMap::new();
        headers.insert("x-github-event", HeaderValue::from_static("push"));
        let ctx = ctx(&payload, &headers);
        for (template, want) in [
            ("{{ a.b[0].c }}", "deep"),
            ("{{payload.a.b[0].c}}", "deep"),
            ("{{n}}/{{ok}}/{{o}}", "3/true/{\"k\":1}"),
            ("{{missing.x}}|{{a.b[9].c}}", "|"),
            (
                "{{headers.X-GitHub-Event}} on {{query.ref}} at {{path}}",
                "push on main at github",
            ),
            ("{{a.__proto__}}{{constructor}}{{a.prototype.x}}", ""),
            ("{{now}}", "2026-12-01T10:00:00Z"),
            ("open {{ never closed", "open {{ never closed"),
        ] {
            assert_eq!(render(template, &ctx), want, "{template}");
        }
    }

    fn signed(scheme: &str) -> HookMappingConfig {
        HookMappingConfig {
            signature: Some(crate::config::HookSignatureConfig {
                scheme: scheme.into(),
                secret: "s3cret".into(),
                tolerance_seconds: None,
            }),
            ..HookMappingConfig::default()
        }
    }

    fn hmac_hex(message: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cret");
        ring::hmac::sign(&key, message)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn github_and_stripe_signatures_are_checked_over_the_exact_body() {
        let body = br#"{"x":1}"#;
        let mut headers = HeaderMap::new();
        let good = format!("sha256={}", hmac_hex(body));
        headers.insert("x-hub-signature-256", HeaderValue::from_str(&good).unwrap());
        assert!(signature_valid(&signed("github"), &headers, body, 0));
        assert!(!signature_valid(
            &signed("github"),
            &headers,
            br#"{"x":2}"#,
            0
        ));
        assert!(!signature_valid(&signed("stripe"), &headers, body, 0));

        let now = 1_796_000_000;
        let stripe = |t: i64| {
            let mut msg = format!("{t}.").into_bytes();
            msg.extend_from_slice(body);
            let mut h = HeaderMap::new();
            let value = format!("t={t},v1=00ff,v1={}", hmac_hex(&msg));
            h.insert("stripe-signature", HeaderValue::from_str(&value).unwrap());
            h
        };
        assert!(signature_valid(
            &signed("stripe"),
            &stripe(now - 10),
            body,
            now
        ));
        // Outside the replay window.
        assert!(!signature_valid(
            &signed("stripe"),
            &stripe(now - 301),
            body,
            now
        ));
        assert!(!signature_valid(
            &signed("stripe"),
            &stripe(now - 10),
            b"{}",
            now
        ));
    }
}
