//! A scheduled job as `jobs.json` holds it: OpenClaw's job schema, the
//! legacy spellings it still reads, almanac's `catchUp`, and the rules a
//! job must satisfy before it is added or changed.
//!
//! Every object keeps the fields it does not know (`extra`), so a job
//! written by a newer OpenClaw, or by hand, goes back to the file with
//! them. Reading is lenient (a job in the file that breaks a rule is still
//! read; the runner decides what to do with it); [`CronJob::validate`] is what
//! `cron add` and `cron edit` apply.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::schedule;

/// The agent a job without `agentId` names (the default agent runs it).
pub(crate) const DEFAULT_AGENT: &str = "main";

/// How far in the past an `at` time may be when it is set.
pub(crate) const AT_PAST_MS: i64 = 60_000;
/// How far ahead an `at` time may be when it is set (10 years).
pub(crate) const AT_FUTURE_MS: i64 = 10 * 365 * 24 * 3_600_000 + 2 * 24 * 3_600_000;

/// The job field (almanac's, kept like any field OpenClaw does not know)
/// that says who created the job: [`CREATED_BY_AGENT`] when the model did,
/// with its `cron` tool. Webhook URLs in such a job are the model's, and
/// delivery treats them so.
pub(crate) const CREATED_BY: &str = "createdBy";
/// [`CREATED_BY`]'s value on a job the model created.
pub(crate) const CREATED_BY_AGENT: &str = "agent";
/// `createdBy` of a job a client of the MCP server added (a model too).
pub(crate) const CREATED_BY_MCP: &str = "mcp";
/// The job field (almanac's) listing the webhook URLs of a job the model
/// created that the user has since set from the command line: those are
/// the user's.
pub(crate) const USER_WEBHOOKS: &str = "userWebhooks";

/// One job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CronJob {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The session the job was created from (wake and reminder routing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Unset means true for `at` jobs ([`CronJob::deletes_after_run`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    #[serde(default)]
    pub created_at_ms: i64,
    #[serde(default)]
    pub updated_at_ms: i64,
    pub schedule: ScheduleSpec,
    pub session_target: SessionTarget,
    #[serde(default)]
    pub wake_mode: WakeMode,
    pub payload: Payload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_alert: Option<FailureAlert>,
    /// almanac's missed-run policy; unset is [`CatchUp::Once`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUp>,
    #[serde(default)]
    pub state: JobState,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn yes() -> bool {
    true
}

impl CronJob {
    /// Whether a successful run of this job removes it: `deleteAfterRun`,
    /// true by default for `at` jobs, and honoured only for them.
    pub(crate) fn deletes_after_run(&self) -> bool {
        self.schedule.kind == ScheduleKind::At && self.delete_after_run.unwrap_or(true)
    }

    /// The missed-run policy.
    pub(crate) fn catch_up(&self) -> CatchUp {
        self.catch_up.unwrap_or_default()
    }

    /// The agent the job runs as.
    pub(crate) fn agent(&self) -> &str {
        self.agent_id.as_deref().unwrap_or(DEFAULT_AGENT)
    }

    /// A job given as JSON (a tool call), in today's shape or an older
    /// spelling (kinds inferred, legacy fields folded in, a missing
    /// `sessionTarget` taken from the payload); read as leniently as the
    /// store reads, the rules are [`CronJob::validate`]'s.
    pub(crate) fn from_json(value: &Value) -> Result<CronJob, JobError> {
        let Value::Object(map) = value else {
            return Err(JobError::Invalid {
                field: "job".into(),
                message: "a job is a JSON object".into(),
            });
        };
        CronJob::deserialize(Value::Object(super::legacy::normalize(map))).map_err(|e| {
            JobError::Invalid {
                field: "job".into(),
                message: e.to_string(),
            }
        })
    }

    /// The job as a JSON object (its unknown fields included).
    pub(crate) fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self).expect("a job serialises") {
            Value::Object(map) => map,
            _ => unreachable!("a job is an object"),
        }
    }

    /// Checks the rules a job must satisfy when it is added or changed.
    /// `at_is_new`: the `at` time was set by this change, so it must lie
    /// between a minute ago and ten years ahead.
    pub(crate) fn validate(&self, check: &Check<'_>) -> Result<(), JobError> {
        let invalid = |field: &str, message: String| {
            Err(JobError::Invalid {
                field: field.to_string(),
                message,
            })
        };
        if self.id.trim().is_empty() {
            return invalid("id", "must not be empty".into());
        }
        if self.name.trim().is_empty() {
            return invalid("name", "a job needs a name (--name)".into());
        }
        self.schedule.validate(check)?;
        if let SessionTarget::Session(id) = &self.session_target {
            check_session_id(id)?;
        }
        match (&self.session_target, self.payload.kind) {
            (SessionTarget::Main, PayloadKind::SystemEvent) => {}
            (SessionTarget::Main, PayloadKind::AgentTurn) => {
                return invalid(
                    "payload",
                    "a `main` job queues a system event (--system-event); an agent turn (--message) runs in an isolated, current or session:<id> target".into(),
                );
            }
            (_, PayloadKind::AgentTurn) => {}
            (_, PayloadKind::SystemEvent) => {
                return invalid(
                    "payload",
                    format!(
                        "a `{}` job runs an agent turn (--message); a system event (--system-event) goes to the `main` session",
                        self.session_target
                    ),
                );
            }
        }
        match self.payload.kind {
            PayloadKind::SystemEvent if self.payload.text.as_deref().is_none_or(blank) => {
                return invalid("payload.text", "the system event text is empty".into());
            }
            PayloadKind::AgentTurn if self.payload.message.as_deref().is_none_or(blank) => {
                return invalid("payload.message", "the message is empty".into());
            }
            _ => {}
        }
        if let Some(thinking) = &self.payload.thinking
            && !THINKING_LEVELS.contains(&thinking.as_str())
        {
            return invalid(
                "payload.thinking",
                format!("`{thinking}` is not one of {}", THINKING_LEVELS.join(", ")),
            );
        }
        if let Some(delivery) = &self.delivery {
            let isolated_like = self.session_target != SessionTarget::Main;
            if delivery.mode == DeliveryMode::Announce && !isolated_like {
                return invalid(
                    "delivery.mode",
                    "a `main` job's result is the heartbeat's: announce needs an isolated, current or session:<id> target (a webhook works for any)".into(),
                );
            }
            if delivery.mode == DeliveryMode::Webhook {
                check_http_url("delivery.to", delivery.to.as_deref())?;
            }
            if let Some(dest) = &delivery.failure_destination {
                if !isolated_like && delivery.mode != DeliveryMode::Webhook {
                    return invalid(
                        "delivery.failureDestination",
                        "only isolated-like jobs, or jobs delivering to a webhook, take a failure destination".into(),
                    );
                }
                if dest.mode == Some(DeliveryMode::Webhook) {
                    check_http_url("delivery.failureDestination.to", dest.to.as_deref())?;
                }
            }
        }
        if let Some(FailureAlert::On(alert)) = &self.failure_alert {
            if alert.after == Some(0) {
                return invalid("failureAlert.after", "must be at least 1".into());
            }
            if alert.mode == Some(DeliveryMode::Webhook) {
                check_http_url("failureAlert.to", alert.to.as_deref())?;
            }
        }
        Ok(())
    }
}

fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// What [`CronJob::validate`] needs besides the job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check<'a> {
    pub now_ms: i64,
    /// The zone of cron expressions without `tz`.
    pub host_zone: &'a jiff::tz::TimeZone,
    /// The `at` time was set by this change.
    pub at_is_new: bool,
}

/// The thinking levels a payload may ask for.
pub(crate) const THINKING_LEVELS: &[&str] = crate::provider::Thinking::NAMES;

/// A job that breaks a rule of the schema, named by its field.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JobError {
    #[error("`{field}`: {message}")]
    Invalid { field: String, message: String },
    /// A cron expression that does not compile: `detail` names the field
    /// and its position.
    #[error("`schedule.expr` `{expr}`: {detail}")]
    Expression {
        expr: String,
        detail: almanac_cron::ExprError,
    },
    #[error("`schedule.tz`: `{0}` is not a known IANA time zone (for example Europe/Paris or UTC)")]
    UnknownZone(String),
}

fn check_http_url(field: &str, url: Option<&str>) -> Result<(), JobError> {
    let url = url.map(str::trim).unwrap_or("");
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(JobError::Invalid {
            field: field.to_string(),
            message: if url.is_empty() {
                "a webhook needs an http(s) URL".to_string()
            } else {
                format!("`{url}` is not an http(s) URL")
            },
        }),
    }
}

/// A `session:<id>` id: non-empty, without `/`, `\` or NUL.
pub(crate) fn check_session_id(id: &str) -> Result<(), JobError> {
    if id.trim().is_empty() || id.contains(['/', '\\', '\0']) {
        return Err(JobError::Invalid {
            field: "sessionTarget".into(),
            message: format!(
                "`session:{}` needs a session id without `/`, `\\` or NUL",
                id.escape_debug()
            ),
        });
    }
    Ok(())
}

/// `schedule`: one of three kinds, each with its own fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScheduleSpec {
    pub kind: ScheduleKind,
    /// `at`: an ISO-8601 time (stored as `2026-11-29T09:00:00.000Z`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// `every`: the interval.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "floored_ms"
    )]
    pub every_ms: Option<u64>,
    /// `every`: the grid's origin (default the creation time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_ms: Option<i64>,
    /// `cron`: the expression (5 fields, or 6 with seconds first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// `cron`: the IANA zone; unset is the host's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// `cron`: the window a job's fixed offset from each slot is chosen in.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "floored_ms"
    )]
    pub stagger_ms: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Milliseconds written as any non-negative number, floored.
fn floored_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = Option::<f64>::deserialize(deserializer)?;
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v >= 0.0 => Ok(Some(v.floor() as u64)),
        Some(v) => Err(serde::de::Error::custom(format!(
            "{v} is not a number of milliseconds"
        ))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScheduleKind {
    At,
    Every,
    Cron,
}

impl ScheduleSpec {
    /// A one-shot at `at_ms`.
    pub(crate) fn at(at_ms: i64) -> ScheduleSpec {
        ScheduleSpec {
            kind: ScheduleKind::At,
            at: Some(iso_ms(at_ms)),
            ..ScheduleSpec::empty(ScheduleKind::At)
        }
    }

    /// Every `every_ms` from `anchor_ms`.
    pub(crate) fn every(every_ms: u64, anchor_ms: i64) -> ScheduleSpec {
        ScheduleSpec {
            every_ms: Some(every_ms),
            anchor_ms: Some(anchor_ms),
            ..ScheduleSpec::empty(ScheduleKind::Every)
        }
    }

    /// A cron expression in `tz` (the host's when `None`).
    pub(crate) fn cron(expr: &str, tz: Option<String>, stagger_ms: Option<u64>) -> ScheduleSpec {
        ScheduleSpec {
            expr: Some(expr.trim().to_string()),
            tz,
            stagger_ms,
            ..ScheduleSpec::empty(ScheduleKind::Cron)
        }
    }

    fn empty(kind: ScheduleKind) -> ScheduleSpec {
        ScheduleSpec {
            kind,
            at: None,
            every_ms: None,
            anchor_ms: None,
            expr: None,
            tz: None,
            stagger_ms: None,
            extra: Map::new(),
        }
    }

    /// The `at` time in epoch ms.
    pub(crate) fn at_ms(&self) -> Result<i64, JobError> {
        let text = self.at.as_deref().unwrap_or("");
        schedule::parse_stored_at(text).ok_or_else(|| JobError::Invalid {
            field: "schedule.at".into(),
            message: if text.is_empty() {
                "an `at` schedule needs a time".into()
            } else {
                format!("`{text}` is not an ISO-8601 time")
            },
        })
    }

    fn validate(&self, check: &Check<'_>) -> Result<(), JobError> {
        let invalid = |field: &str, message: &str| {
            Err(JobError::Invalid {
                field: field.to_string(),
                message: message.to_string(),
            })
        };
        match self.kind {
            ScheduleKind::At => {
                let at = self.at_ms()?;
                if check.at_is_new {
                    if at < check.now_ms - AT_PAST_MS {
                        return Err(JobError::Invalid {
                            field: "schedule.at".into(),
                            message: format!(
                                "{} is more than a minute in the past",
                                self.at.as_deref().unwrap_or("")
                            ),
                        });
                    }
                    if at > check.now_ms + AT_FUTURE_MS {
                        return Err(JobError::Invalid {
                            field: "schedule.at".into(),
                            message: format!(
                                "{} is more than 10 years ahead",
                                self.at.as_deref().unwrap_or("")
                            ),
                        });
                    }
                }
            }
            ScheduleKind::Every => match self.every_ms {
                None | Some(0) => {
                    return invalid("schedule.everyMs", "an interval of at least 1 ms");
                }
                Some(_) if self.anchor_ms.is_some_and(|a| a < 0) => {
                    return invalid("schedule.anchorMs", "must not be negative");
                }
                Some(_) => {}
            },
            ScheduleKind::Cron => {
                let expr = self.expr.as_deref().unwrap_or("");
                if expr.trim().is_empty() {
                    return invalid("schedule.expr", "a cron schedule needs an expression");
                }
                schedule::check_expression(expr)?;
                if let Some(tz) = &self.tz {
                    schedule::check_zone(tz, check.host_zone)?;
                }
            }
        }
        Ok(())
    }
}

/// Epoch ms as JavaScript's `toISOString()` writes it.
pub(crate) fn iso_ms(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        Err(_) => ms.to_string(),
    }
}

/// Where a job runs: `main` (a system event in the agent's main session),
/// `isolated` (a fresh session per run), `current` (resolved when the job
/// is created) or `session:<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionTarget {
    Main,
    Isolated,
    Current,
    Session(String),
}

impl std::fmt::Display for SessionTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionTarget::Main => f.write_str("main"),
            SessionTarget::Isolated => f.write_str("isolated"),
            SessionTarget::Current => f.write_str("current"),
            SessionTarget::Session(id) => write!(f, "session:{id}"),
        }
    }
}

impl std::str::FromStr for SessionTarget {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "main" => Ok(SessionTarget::Main),
            "isolated" => Ok(SessionTarget::Isolated),
            "current" => Ok(SessionTarget::Current),
            other => match other.strip_prefix("session:") {
                Some(id) => Ok(SessionTarget::Session(id.to_string())),
                None => Err(format!(
                    "`{text}` is not a session target (main, isolated, current or session:<id>)"
                )),
            },
        }
    }
}

impl Serialize for SessionTarget {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionTarget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// When a `main` job's event is acted on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum WakeMode {
    /// A heartbeat run right away.
    #[default]
    #[serde(rename = "now")]
    Now,
    /// The next scheduled heartbeat.
    #[serde(rename = "next-heartbeat")]
    NextHeartbeat,
}

impl WakeMode {
    pub(crate) const NAMES: &'static [&'static str] = &["now", "next-heartbeat"];

    pub(crate) fn parse(text: &str) -> Option<WakeMode> {
        match text {
            "now" => Some(WakeMode::Now),
            "next-heartbeat" => Some(WakeMode::NextHeartbeat),
            _ => None,
        }
    }
}

/// What a job does when it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Payload {
    pub kind: PayloadKind,
    /// `systemEvent`: the event's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `agentTurn`: the message of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Replaces the configured fallback models (`[]`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The run's time limit (0 or less: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unsafe_external_content: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_context: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_content_source: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Payload {
    /// A system event for the main session.
    pub(crate) fn system_event(text: &str) -> Payload {
        Payload {
            text: Some(text.to_string()),
            ..Payload::empty(PayloadKind::SystemEvent)
        }
    }

    /// An agent turn.
    pub(crate) fn agent_turn(message: &str) -> Payload {
        Payload {
            message: Some(message.to_string()),
            ..Payload::empty(PayloadKind::AgentTurn)
        }
    }

    fn empty(kind: PayloadKind) -> Payload {
        Payload {
            kind,
            text: None,
            message: None,
            model: None,
            fallbacks: None,
            thinking: None,
            timeout_seconds: None,
            allow_unsafe_external_content: None,
            light_context: None,
            tools_allow: None,
            external_content_source: None,
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum PayloadKind {
    SystemEvent,
    AgentTurn,
}

/// Where a job's result goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Delivery {
    pub mode: DeliveryMode,
    /// `last` (the main session's last route) or a channel id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A string or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// A delivery that fails does not fail the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_effort: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_destination: Option<FailureDestination>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Delivery {
    pub(crate) fn new(mode: DeliveryMode) -> Delivery {
        Delivery {
            mode,
            channel: None,
            to: None,
            thread_id: None,
            account_id: None,
            best_effort: None,
            failure_destination: None,
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DeliveryMode {
    None,
    Announce,
    Webhook,
}

/// Where a failed run is reported, when not where results go.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FailureDestination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeliveryMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `failureAlert`: `false` (never), or when and where to alert after
/// consecutive failures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FailureAlert {
    Off,
    On(FailureAlertConfig),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FailureAlertConfig {
    /// Consecutive failures before the first alert (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The least time between two alerts (default 1 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeliveryMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Serialize for FailureAlert {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FailureAlert::Off => serializer.serialize_bool(false),
            FailureAlert::On(config) => config.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for FailureAlert {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(false) => Ok(FailureAlert::Off),
            Value::Bool(true) => Ok(FailureAlert::On(FailureAlertConfig::default())),
            other @ Value::Object(_) => serde_json::from_value(other)
                .map(FailureAlert::On)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "failureAlert is false or an object, not {other}"
            ))),
        }
    }
}

/// What to do about slots a job missed while no gateway ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CatchUp {
    /// Run once for all the missed slots.
    #[default]
    Once,
    /// Run once for each missed slot.
    All,
    /// Run none of them; record them as missed.
    Skip,
}

impl CatchUp {
    pub(crate) const NAMES: &'static [&'static str] = &["once", "all", "skip"];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CatchUp::Once => "once",
            CatchUp::All => "all",
            CatchUp::Skip => "skip",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<CatchUp> {
        match text {
            "once" => Some(CatchUp::Once),
            "all" => Some(CatchUp::All),
            "skip" => Some(CatchUp::Skip),
            _ => None,
        }
    }
}

/// How a run ended (`lastRunStatus`); a value this version does not know
/// is kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunStatus {
    Ok,
    Error,
    Skipped,
    Other(String),
}

impl RunStatus {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Skipped => "skipped",
            RunStatus::Other(s) => s,
        }
    }

    pub(crate) fn parse(text: &str) -> RunStatus {
        match text {
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            "skipped" => RunStatus::Skipped,
            other => RunStatus::Other(other.to_string()),
        }
    }
}

impl Serialize for RunStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RunStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(RunStatus::parse(&String::deserialize(deserializer)?))
    }
}

/// A job's runtime state, written by the runner. Changes to it alone do
/// not refresh `jobs.json.bak`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_status: Option<RunStatus>,
    /// The same as `lastRunStatus` (OpenClaw writes both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<RunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// `auth`, `format`, `rate_limit`, `billing`, `timeout`,
    /// `model_not_found` or `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_duration_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_alert_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_error_count: Option<u32>,
    /// `delivered`, `not-delivered`, `unknown` or `not-requested`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivered: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl JobState {
    /// The last run's status, from either spelling.
    pub(crate) fn last(&self) -> Option<&RunStatus> {
        self.last_run_status.as_ref().or(self.last_status.as_ref())
    }
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
