//! `cron.*`: scheduled jobs, their retries, failure alerts, run logs and
//! session retention, and the sizes written with a unit.

use serde::{Deserialize, Serialize};

/// Scheduled jobs (`cron.*`, OpenClaw's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CronConfig {
    /// `false`: the gateway runs no job (jobs can still be added and
    /// edited; the commands say they will not run).
    pub enabled: bool,
    /// The job store (`~` allowed); default `<state dir>/cron/jobs.json`.
    /// Run logs go to `runs/` beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Jobs the gateway runs at once.
    pub max_concurrent_runs: u32,
    pub run_log: CronRunLogConfig,
    pub retry: CronRetryConfig,
    pub failure_alert: CronFailureAlertConfig,
    /// Sent as `Authorization: Bearer <token>` with every cron webhook
    /// post (env `ALMANAC_CRON_WEBHOOK_TOKEN`); read when a post is made,
    /// never written down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_token: Option<String>,
    /// Where a failed run is reported for every job without a
    /// `delivery.failureDestination` of its own; unset: where the job's
    /// results go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_destination: Option<CronFailureDestinationConfig>,
    /// How long the row of one isolated run (`…:cron:<jobId>:run:<id>`)
    /// stays in `sessions.json`: a duration (`"24h"`, a bare number is
    /// hours) or `false` (kept for ever). Its transcript stays.
    pub session_retention: SessionRetention,
}

/// `cron.sessionRetention`: a duration, or kept for ever (`false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct SessionRetention(pub Option<u64>);

impl SessionRetention {
    /// The default: a day.
    const DAY_MS: u64 = 24 * 3600 * 1000;

    /// Milliseconds a run row is kept; `None`: for ever.
    pub(crate) fn ms(self) -> Option<u64> {
        self.0
    }
}

impl Default for SessionRetention {
    fn default() -> Self {
        SessionRetention(Some(Self::DAY_MS))
    }
}

impl<'de> Deserialize<'de> for SessionRetention {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Switch(bool),
            Hours(f64),
            Text(String),
        }
        let expected = || {
            serde::de::Error::custom(
                "invalid type, expected a duration such as \"24h\", a number of hours, or false",
            )
        };
        let hour = 3_600_000.0;
        match Raw::deserialize(deserializer).map_err(|_| expected())? {
            Raw::Switch(false) => Ok(SessionRetention(None)),
            Raw::Switch(true) => Ok(SessionRetention::default()),
            Raw::Hours(h) if h.is_finite() && h >= 0.0 => {
                Ok(SessionRetention(Some((h * hour) as u64)))
            }
            Raw::Hours(_) => Err(expected()),
            Raw::Text(text) => {
                almanac_heartbeat::duration::parse(&text, almanac_heartbeat::duration::Unit::Hours)
                    .map(|d| SessionRetention(Some(d.as_millis() as u64)))
                    .map_err(|e| serde::de::Error::custom(format!("`{text}`: {e}")))
            }
        }
    }
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            enabled: true,
            store: None,
            max_concurrent_runs: 1,
            run_log: CronRunLogConfig::default(),
            retry: CronRetryConfig::default(),
            failure_alert: CronFailureAlertConfig::default(),
            webhook_token: None,
            failure_destination: None,
            session_retention: SessionRetention::default(),
        }
    }
}

/// `cron.retry.*`: how a one-shot (`at`) job that failed with a passing
/// error is tried again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CronRetryConfig {
    /// Consecutive failures a one-shot is tried again after (0: never).
    pub max_attempts: u32,
    /// The wait before each new attempt, in ms; the last one repeats.
    pub backoff_ms: Vec<u64>,
    /// The kinds of error worth another attempt.
    pub retry_on: Vec<TransientClass>,
}

/// The default of `cron.retry.backoffMs`: 30 s, 1 min, 5 min.
pub(crate) const DEFAULT_RETRY_BACKOFF_MS: [u64; 3] = [30_000, 60_000, 300_000];

impl Default for CronRetryConfig {
    fn default() -> Self {
        CronRetryConfig {
            max_attempts: 3,
            backoff_ms: DEFAULT_RETRY_BACKOFF_MS.to_vec(),
            retry_on: TransientClass::ALL.to_vec(),
        }
    }
}

/// A kind of error that may pass by itself (`cron.retry.retryOn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TransientClass {
    /// Too many requests, a quota per minute or day.
    RateLimit,
    /// The provider is busy.
    Overloaded,
    /// The connection failed or dropped.
    Network,
    /// A request took too long.
    Timeout,
    /// An HTTP 5xx answer.
    ServerError,
}

impl TransientClass {
    pub(crate) const ALL: [TransientClass; 5] = [
        TransientClass::RateLimit,
        TransientClass::Overloaded,
        TransientClass::Network,
        TransientClass::Timeout,
        TransientClass::ServerError,
    ];
}

/// `cron.failureAlert.*`: an alert after a job failed several times in a
/// row, for every job without a `failureAlert` of its own (a job's own
/// fields win; `failureAlert: false` on a job turns it off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CronFailureAlertConfig {
    pub enabled: bool,
    /// Consecutive failures before the first alert.
    pub after: u32,
    /// The least time between two alerts of a job, in ms.
    pub cooldown_ms: u64,
    /// `announce` (a message on a channel) or `webhook` (a POST to `to`);
    /// unset: announced where the job's results go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<CronAlertMode>,
    /// `last` or a channel id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The recipient, or the URL of a webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

impl Default for CronFailureAlertConfig {
    fn default() -> Self {
        CronFailureAlertConfig {
            enabled: false,
            after: 2,
            cooldown_ms: 3_600_000,
            mode: None,
            channel: None,
            to: None,
            account_id: None,
        }
    }
}

/// `cron.failureDestination.*`: OpenClaw's keys. almanac has no chat
/// channels: `announce` is the outbox (`channel` and `accountId` are kept
/// for OpenClaw's sake), `webhook` a POST to `to`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CronFailureDestinationConfig {
    /// `announce` (the default) or `webhook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<CronAlertMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The recipient, or the URL of a webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

/// `cron.failureAlert.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CronAlertMode {
    Announce,
    Webhook,
}

/// `cron.runLog.*`: how much of each job's run history is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CronRunLogConfig {
    /// Past this size a job's run log is cut back to its newest
    /// `keepLines` lines; bytes, or a size such as `"2mb"`.
    pub max_bytes: ByteSize,
    /// Lines kept when a run log is cut back.
    pub keep_lines: u32,
}

impl Default for CronRunLogConfig {
    fn default() -> Self {
        CronRunLogConfig {
            max_bytes: ByteSize(2_000_000),
            keep_lines: 2_000,
        }
    }
}

/// A size in bytes, written as a number or as a string with a unit
/// (`"500kb"`, `"2mb"`, `"1gb"`; powers of 1024, case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct ByteSize(pub u64);

impl ByteSize {
    /// Reads `2000000`, `"2000000"`, `"2mb"`, `"1.5 kb"`.
    pub(crate) fn parse(text: &str) -> Result<ByteSize, String> {
        let t = text.trim().to_ascii_lowercase();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let factor: u64 = match unit.trim() {
            "" | "b" => 1,
            "k" | "kb" => 1 << 10,
            "m" | "mb" => 1 << 20,
            "g" | "gb" => 1 << 30,
            _ => return Err(format!("`{text}` is not a size (bytes, or e.g. \"2mb\")")),
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size (bytes, or e.g. \"2mb\")"))?;
        let bytes = value * factor as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{text}` is out of range"));
        }
        Ok(ByteSize(bytes as u64))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "invalid type, expected a size in bytes or a string such as \"2mb\"",
            )
        })? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(text) => ByteSize::parse(&text).map_err(serde::de::Error::custom),
        }
    }
}
