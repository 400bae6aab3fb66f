//! Older spellings of a job that `jobs.json` may still hold, read into
//! today's shape: `jobId` for `id`, `"true"`/`"false"` for `enabled`,
//! `atMs` for `at` and `cron` for `expr` in the schedule (whose `kind` may
//! be missing), top-level `message`, `model`, `thinking`, … instead of the
//! payload's (whose `kind` may be missing too), the old delivery keys
//! (`deliver`, `channel`, `to`, `bestEffortDeliver`, `provider`), which
//! become a `delivery` when the job has none, and a missing
//! `sessionTarget`. A job written today passes through unchanged.

use serde_json::{Map, Value, json};

use super::job::iso_ms;

/// Payload fields older jobs kept at the top level.
pub(super) const TOP_LEVEL_PAYLOAD_FIELDS: &[&str] = &[
    "message",
    "text",
    "model",
    "fallbacks",
    "thinking",
    "timeoutSeconds",
    "allowUnsafeExternalContent",
    "lightContext",
    "toolsAllow",
    "externalContentSource",
];

/// The delivery keys of older jobs (top level or in the payload).
pub(super) const LEGACY_DELIVERY_KEYS: &[&str] =
    &["deliver", "channel", "to", "bestEffortDeliver", "provider"];

/// `raw` in today's shape; the same map when nothing is old.
pub(crate) fn normalize(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut job = raw.clone();
    if !job.contains_key("id")
        && let Some(id) = job.get("jobId").cloned()
    {
        job.insert("id".into(), id);
    }
    job.shift_remove("jobId");
    if let Some(Value::String(text)) = job.get("enabled") {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" => {
                job.insert("enabled".into(), Value::Bool(true));
            }
            "false" => {
                job.insert("enabled".into(), Value::Bool(false));
            }
            _ => {}
        }
    }
    if let Some(Value::Object(schedule)) = job.get_mut("schedule") {
        normalize_schedule(schedule);
    }
    normalize_payload(&mut job);
    normalize_delivery(&mut job);
    if !job.contains_key("sessionTarget") {
        let target = match job.get("payload").and_then(|p| p.get("kind")) {
            Some(Value::String(kind)) if kind == "systemEvent" => Some("main"),
            Some(Value::String(kind)) if kind == "agentTurn" => Some("isolated"),
            _ => None,
        };
        if let Some(target) = target {
            job.insert("sessionTarget".into(), json!(target));
        }
    }
    job
}

fn normalize_schedule(schedule: &mut Map<String, Value>) {
    if let Some(at_ms) = schedule.shift_remove("atMs")
        && !schedule.contains_key("at")
    {
        schedule.insert("at".into(), at_ms);
    }
    if let Some(Value::Number(n)) = schedule.get("at")
        && let Some(ms) = n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))
    {
        schedule.insert("at".into(), json!(iso_ms(ms)));
    }
    if let Some(expr) = schedule.shift_remove("cron")
        && !schedule.contains_key("expr")
    {
        schedule.insert("expr".into(), expr);
    }
    if !schedule.contains_key("kind") {
        let kind = if schedule.contains_key("at") {
            Some("at")
        } else if schedule.contains_key("everyMs") {
            Some("every")
        } else if schedule.contains_key("expr") {
            Some("cron")
        } else {
            None
        };
        if let Some(kind) = kind {
            // The kind leads, as in jobs written today.
            let rest = std::mem::take(schedule);
            schedule.insert("kind".into(), json!(kind));
            schedule.extend(rest);
        }
    }
}

fn normalize_payload(job: &mut Map<String, Value>) {
    let has_top_level = TOP_LEVEL_PAYLOAD_FIELDS
        .iter()
        .any(|k| job.contains_key(*k));
    if !has_top_level && job.get("payload").is_some_and(|p| p.get("kind").is_some()) {
        return;
    }
    let mut moved = Map::new();
    for key in TOP_LEVEL_PAYLOAD_FIELDS {
        if let Some(value) = job.shift_remove(*key) {
            moved.insert((*key).to_string(), value);
        }
    }
    if !matches!(job.get("payload"), Some(Value::Object(_))) {
        job.insert("payload".into(), Value::Object(Map::new()));
    }
    let Some(Value::Object(payload)) = job.get_mut("payload") else {
        unreachable!("the payload is an object");
    };
    for (key, value) in moved {
        payload.entry(key).or_insert(value);
    }
    if !payload.contains_key("kind") {
        let kind = if payload.contains_key("message") {
            Some("agentTurn")
        } else if payload.contains_key("text") {
            Some("systemEvent")
        } else {
            None
        };
        if let Some(kind) = kind {
            let rest = std::mem::take(payload);
            payload.insert("kind".into(), json!(kind));
            payload.extend(rest);
        }
    }
}

fn normalize_delivery(job: &mut Map<String, Value>) {
    let mut legacy = Map::new();
    for key in LEGACY_DELIVERY_KEYS {
        if let Some(value) = job.shift_remove(*key) {
            legacy.insert((*key).to_string(), value);
        }
        if let Some(Value::Object(payload)) = job.get_mut("payload")
            && let Some(value) = payload.shift_remove(*key)
        {
            legacy.entry((*key).to_string()).or_insert(value);
        }
    }
    if let Some(Value::Object(delivery)) = job.get_mut("delivery")
        && delivery.get("mode") == Some(&json!("deliver"))
    {
        delivery.insert("mode".into(), json!("announce"));
    }
    if legacy.is_empty() || job.contains_key("delivery") {
        return;
    }
    let text = |key: &str| {
        legacy
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let to = text("to");
    let channel = text("channel").or_else(|| text("provider"));
    let deliver = match legacy.get("deliver") {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    };
    // An old job that asked for delivery keeps its target; one that only
    // named a target without `deliver: false` delivered there too.
    let wanted = deliver.unwrap_or(to.is_some() || channel.is_some());
    if !wanted {
        return;
    }
    let mut delivery = Map::new();
    delivery.insert("mode".into(), json!("announce"));
    if let Some(channel) = channel {
        delivery.insert("channel".into(), json!(channel));
    }
    if let Some(to) = to {
        delivery.insert("to".into(), json!(to));
    }
    if let Some(Value::Bool(best)) = legacy.get("bestEffortDeliver") {
        delivery.insert("bestEffort".into(), json!(best));
    }
    job.insert("delivery".into(), Value::Object(delivery));
}
