//! Settings: one typed [`Config`] with defaults, read from `config.json5`
//! and layered defaults → file → environment → flags.
//!
//! The file uses OpenClaw's key paths for the settings almanac shares with
//! it (`agents.defaults.workspace`, `skills.entries.<key>`, …), so sections of
//! an `openclaw.json` can be copied over.
//!
//! Invariants:
//! * Unknown keys never fail a load; each is reported once per command as a
//!   warning naming its key path.
//! * A value of the wrong type fails the load with one error naming the key
//!   path and the expected type.
//! * A value of the right type that cannot be used ([`value_problems`]: an
//!   unknown `userTimezone`) is refused by `config set` and `--set`
//!   ([`ConfigError::BadValue`]) and reported as a warning naming the key
//!   and the fallback when read from the file.
//! * `config set` / `config unset` edit the file text in place (see
//!   [`edit`]), keeping comments and formatting, verify by re-parsing that
//!   exactly the intended value changed, and write atomically under a lock.

pub(crate) mod edit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::durable;
use crate::host::Host;

/// Where an effective setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    Flag,
    Env,
    Config,
    Default,
}

/// The typed configuration. Every field has a default; the file only
/// needs the keys a user wants to change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Config {
    pub agents: AgentsConfig,
    pub models: ModelsConfig,
    pub session: SessionConfig,
    pub logging: LoggingConfig,
    pub memory: MemoryConfig,
    pub security: SecurityConfig,
    pub activity: ActivityConfig,
    pub skills: SkillsConfig,
    pub tools: ToolsConfig,
    pub gateway: GatewayConfig,
    pub delivery: DeliveryConfig,
    pub channels: ChannelsConfig,
    pub cron: CronConfig,
    pub hooks: HooksConfig,
}

/// Webhooks into the gateway (`hooks.*`, OpenClaw's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HooksConfig {
    /// Serve `<path>/wake`, `<path>/agent` and the mappings.
    pub enabled: bool,
    /// The hook token (required when enabled; must differ from the
    /// gateway's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Where the hooks live on the gateway (`/hooks`; not `/`, not under
    /// `/v1`).
    pub path: String,
    /// Largest request body accepted.
    pub max_body_bytes: u64,
    /// The session of `/agent` runs that name none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_session_key: Option<String>,
    /// Lets a request choose its session key.
    pub allow_request_session_key: bool,
    /// Session keys a hook may use must start with one of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_session_key_prefixes: Option<Vec<String>>,
    /// Agent ids a request may name (`*`: any; unset: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_agent_ids: Option<Vec<String>>,
    /// Built-in mappings appended after `mappings` (`gmail`).
    pub presets: Vec<String>,
    /// Payloads at `<path>/<name>` turned into a wake or an agent run.
    pub mappings: Vec<HookMappingConfig>,
    /// Internal hooks (`HOOK.md` handlers on events).
    pub internal: InternalHooksConfig,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            enabled: false,
            token: None,
            path: "/hooks".to_string(),
            max_body_bytes: 256 * 1024,
            default_session_key: None,
            allow_request_session_key: false,
            allowed_session_key_prefixes: None,
            allowed_agent_ids: None,
            presets: Vec::new(),
            mappings: Vec::new(),
            internal: InternalHooksConfig::default(),
        }
    }
}

/// Internal hooks (`hooks.internal.*`, OpenClaw's keys): `HOOK.md`
/// folders whose handler runs on events such as `command:new`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct InternalHooksConfig {
    /// Off by default: nothing is discovered or run until this is on.
    pub enabled: bool,
    /// Per-hook settings by hook name.
    pub entries: BTreeMap<String, HookEntryConfig>,
    pub load: HooksLoadConfig,
    /// Seconds a handler may run before its process group is killed.
    pub timeout_seconds: u32,
}

impl Default for InternalHooksConfig {
    fn default() -> Self {
        InternalHooksConfig {
            enabled: false,
            entries: BTreeMap::new(),
            load: HooksLoadConfig::default(),
            timeout_seconds: 10,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HooksLoadConfig {
    /// More folders of managed hooks (`~` allowed).
    pub extra_dirs: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookEntryConfig {
    /// `true` turns a workspace hook on, `false` turns any hook off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Environment values given to this hook's handler only.
    pub env: BTreeMap<String, String>,
    /// Settings of the hook itself (`messages`, `paths`, …), kept as written.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `hooks.mappings[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookMappingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<HookMatchConfig>,
    /// `agent` (default) or `wake`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_unsafe_external_content: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// JavaScript transforms are not supported; a mapping with one is
    /// refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<Value>,
    /// A signature that stands in for the hook token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<HookSignatureConfig>,
}

/// `hooks.mappings[].match`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookMatchConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `hooks.mappings[].signature`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HookSignatureConfig {
    /// `github` or `stripe`.
    pub scheme: String,
    pub secret: String,
    /// Stripe: how old a signed timestamp may be (default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u64>,
}

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

/// Where the results of unattended turns go (`delivery.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct DeliveryConfig {
    pub webhook: WebhookDeliveryConfig,
}

/// `delivery.webhook.*`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WebhookDeliveryConfig {
    /// Lets a webhook URL the model gave reach loopback, private,
    /// link-local and other non-public addresses (URLs from the config
    /// always may).
    pub allow_private_network: bool,
}

/// The gateway daemon (`gateway.*`, OpenClaw's keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GatewayConfig {
    /// TCP port of the control API and webhooks.
    pub port: u16,
    /// Where it listens: `loopback` (127.0.0.1), `lan` (every interface)
    /// or `custom` (`customBindHost`).
    pub bind: GatewayBind,
    /// The address for `bind: custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_bind_host: Option<String>,
    pub auth: GatewayAuth,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            port: 18789,
            bind: GatewayBind::Loopback,
            custom_bind_host: None,
            auth: GatewayAuth::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum GatewayBind {
    Loopback,
    Lan,
    Custom,
}

/// `gateway.auth`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GatewayAuth {
    /// The bearer token of the control API (env `ALMANAC_GATEWAY_TOKEN`).
    /// Unset: one is generated into `<state dir>/gateway.token`, which
    /// serves a loopback bind only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Skills (`skills.*`, as in OpenClaw).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsConfig {
    /// When non-empty, only these bundled skills (by key or name) are used.
    pub allow_bundled: Vec<String>,
    pub load: SkillsLoadConfig,
    pub limits: SkillsLimits,
    /// Per-skill settings by skill key.
    pub entries: BTreeMap<String, SkillEntryConfig>,
    pub install: SkillsInstallConfig,
    /// Permissions skills may declare (`SKILL_PERMISSIONS`); default
    /// `read, write, network, shell`. An empty list allows none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_permissions: Option<Vec<String>>,
    pub run: SkillsRunConfig,
}

/// Limits of a skill's process (`skills run`, skill tools in agent turns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsRunConfig {
    /// Seconds a skill may run before its whole process group is stopped.
    pub timeout_sec: u32,
    /// Bytes of output (stdout and stderr together) shown; the rest is
    /// read and dropped.
    pub max_output_bytes: u32,
}

impl Default for SkillsRunConfig {
    fn default() -> Self {
        SkillsRunConfig {
            timeout_sec: 600,
            max_output_bytes: 1_000_000,
        }
    }
}

/// The agent's tools (`tools.*`, OpenClaw's keys): which tools the model
/// is offered, and what `exec` may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ToolsConfig {
    /// The base set of tools; unset is `full` (no restriction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ToolProfile>,
    /// Tool names and `group:*` entries (`*` wildcards, any case) added to
    /// the profile's set; without a profile, the only tools offered.
    pub allow: Vec<String>,
    /// Tools never offered, whatever else says (deny wins).
    pub deny: Vec<String>,
    pub exec: ExecConfig,
}

/// `tools.profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ToolProfile {
    Minimal,
    Coding,
    Messaging,
    Full,
}

/// `tools.exec.*`: what the `exec` tool may run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ExecConfig {
    /// `deny` (no command runs), `allowlist` (only `safeBins`, checked
    /// word by word) or `full` (any command, as given).
    pub security: ExecSecurity,
    /// Approval on a terminal: `off`, `on-miss` (when the allowlist does
    /// not allow a command) or `always`. Unset: `on-miss` when
    /// `security.actions` is on, else `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<ExecAsk>,
    /// Programs `allowlist` mode runs. The built-in ones keep their
    /// argument rules (standard input only, no file options); any other
    /// name runs with any arguments.
    pub safe_bins: Vec<String>,
    /// Also allow the binaries eligible skills require (`requires.bins`),
    /// with any arguments; shells and interpreters are never added this way.
    pub auto_allow_skills: bool,
    /// Default seconds a command may run (the model may ask for up to
    /// 600, or this when larger).
    pub timeout_sec: u32,
}

/// The programs `tools.exec.safeBins` holds by default: stream filters and
/// pure utilities that read no file, run no other program and reach no
/// network.
pub(crate) const DEFAULT_SAFE_BINS: &[&str] = &[
    "echo", "printf", "date", "seq", "tr", "cut", "sort", "uniq", "wc",
];

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            security: ExecSecurity::Allowlist,
            ask: None,
            safe_bins: DEFAULT_SAFE_BINS.iter().map(|b| b.to_string()).collect(),
            auto_allow_skills: false,
            timeout_sec: 60,
        }
    }
}

/// `tools.exec.security`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExecSecurity {
    Deny,
    Allowlist,
    Full,
}

/// `tools.exec.ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ExecAsk {
    Off,
    OnMiss,
    Always,
}

impl ToolsConfig {
    /// The effective `tools.exec.ask`: as set, else from `security.actions`
    /// (under the `security.enabled` master switch).
    pub(crate) fn exec_ask(&self, security: &SecurityConfig) -> ExecAsk {
        self.exec
            .ask
            .unwrap_or(if security.enabled && security.actions {
                ExecAsk::OnMiss
            } else {
                ExecAsk::Off
            })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsLoadConfig {
    /// Extra skill folders, lowest precedence (`~` allowed).
    pub extra_dirs: Vec<String>,
    /// Watch skill folders for changes (the gateway's snapshot).
    pub watch: bool,
    pub watch_debounce_ms: u64,
    /// Real paths that symlinked skills in the workspace, project and extra
    /// folders may point into.
    pub allow_symlink_targets: Vec<String>,
}

impl Default for SkillsLoadConfig {
    fn default() -> Self {
        SkillsLoadConfig {
            extra_dirs: Vec::new(),
            watch: true,
            watch_debounce_ms: 250,
            allow_symlink_targets: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsLimits {
    pub max_candidates_per_root: u32,
    pub max_skills_loaded_per_source: u32,
    pub max_skills_in_prompt: u32,
    pub max_skills_prompt_chars: u32,
    pub max_skill_file_bytes: u64,
}

impl Default for SkillsLimits {
    fn default() -> Self {
        SkillsLimits {
            max_candidates_per_root: 300,
            max_skills_loaded_per_source: 200,
            max_skills_in_prompt: 150,
            max_skills_prompt_chars: 30_000,
            max_skill_file_bytes: 256_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillEntryConfig {
    /// `false` turns the skill off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Environment values given to this skill's runs only.
    pub env: BTreeMap<String, String>,
    /// Given to the skill as its `primaryEnv` variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Free-form settings for the skill.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub config: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsInstallConfig {
    pub prefer_brew: bool,
    pub node_manager: String,
}

impl Default for SkillsInstallConfig {
    fn default() -> Self {
        SkillsInstallConfig {
            prefer_brew: true,
            node_manager: "npm".to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentsConfig {
    pub defaults: AgentDefaults,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct AgentDefaults {
    /// Skills the agent may use, by name; unset means all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// The agent workspace (`~` allowed); default `<state dir>/workspace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// IANA zone of the user, for dates in notes and schedules; default
    /// the host's zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_timezone: Option<String>,
    /// Memory search (OpenClaw's `memorySearch`).
    pub memory_search: MemorySearchConfig,
    /// The model of agent turns: `provider/model`, or `{primary,
    /// fallbacks}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The model's context window in tokens, when the provider does not
    /// say; compaction starts near it.
    pub context_tokens: u32,
    /// Longest answer a turn asks the model for, in tokens.
    pub max_tokens: u32,
    /// Seconds one model call may take, its whole streamed answer
    /// included; reaching it ends the call (not retried).
    pub timeout_seconds: u32,
    /// How long a model call waits for the connection and for the answer
    /// to keep coming (`agents.defaults.llm`).
    pub llm: LlmConfig,
    /// Most model calls in one turn (each tool round is one).
    pub max_steps: u32,
    /// Characters of each workspace bootstrap file put in the prompt.
    pub bootstrap_max_chars: u32,
    /// Characters of all bootstrap files together.
    pub bootstrap_total_max_chars: u32,
    /// Turns running at once across sessions (one per session always).
    pub max_concurrent: u32,
    /// Periodic heartbeat turns (OpenClaw's `agents.defaults.heartbeat`).
    pub heartbeat: HeartbeatConfig,
}

impl Default for AgentDefaults {
    fn default() -> Self {
        AgentDefaults {
            skills: None,
            workspace: None,
            user_timezone: None,
            memory_search: MemorySearchConfig::default(),
            model: None,
            context_tokens: 128_000,
            max_tokens: 4_096,
            timeout_seconds: 600,
            llm: LlmConfig::default(),
            max_steps: 16,
            bootstrap_max_chars: 20_000,
            bootstrap_total_max_chars: 150_000,
            max_concurrent: 4,
            heartbeat: HeartbeatConfig::default(),
        }
    }
}

/// `agents.defaults.heartbeat`: the agent wakes on an interval, reads
/// `HEARTBEAT.md`, and stays quiet or tells its person something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HeartbeatConfig {
    /// The interval (`30m`, `1h30m`; a bare number is minutes); `0m`
    /// turns heartbeats off.
    pub every: String,
    /// Where an alert goes: `none` (the run happens, nothing is
    /// delivered), `last` (where the session's last message came from;
    /// the outbox for sessions driven from the command line), `outbox`,
    /// or `webhook` (`to`, signed with `webhookSecret`).
    pub target: HeartbeatTarget,
    /// The webhook URL of `target: webhook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The key that signs webhook deliveries (HMAC-SHA256).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// Only run inside this daily window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_hours: Option<ActiveHoursConfig>,
    /// The prompt's workspace files are `HEARTBEAT.md` only, and no
    /// memory is recalled.
    pub light_context: bool,
    /// A fresh session (`<key>:heartbeat`) for every run.
    pub isolated_session: bool,
    /// `provider/model` for heartbeat runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Replaces the default prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Characters that may remain beside `HEARTBEAT_OK` for the reply to
    /// count as an acknowledgement.
    pub ack_max_chars: i64,
    /// Also deliver the model's reasoning.
    pub include_reasoning: bool,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            every: "30m".to_string(),
            target: HeartbeatTarget::None,
            to: None,
            webhook_secret: None,
            active_hours: None,
            light_context: false,
            isolated_session: false,
            model: None,
            prompt: None,
            ack_max_chars: 300,
            include_reasoning: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HeartbeatTarget {
    None,
    Last,
    Outbox,
    Webhook,
}

/// `activeHours`: `[start, end)` in `HH:MM` (`end` may be `24:00`; an
/// `end` before `start` wraps midnight), in `timezone` (`user`, the
/// default: `agents.defaults.userTimezone`; `local`: the host's; or an
/// IANA name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ActiveHoursConfig {
    pub start: String,
    pub end: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// `channels`: per delivery channel settings by channel name, and
/// `defaults` for all of them; almanac's channels are `outbox` and
/// `webhook`. Only the heartbeat visibility is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct ChannelsConfig {
    pub by_name: BTreeMap<String, ChannelConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ChannelConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatVisibilityConfig>,
}

/// `channels.<channel>.heartbeat`: what heartbeat outcomes are shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct HeartbeatVisibilityConfig {
    /// Deliver `HEARTBEAT_OK` acknowledgements (default false; when
    /// false the token is removed from every delivered reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_ok: Option<bool>,
    /// Deliver alerts (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_alerts: Option<bool>,
    /// Emit indicator events (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_indicator: Option<bool>,
}

/// Effective heartbeat visibility on one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeartbeatVisibility {
    pub show_ok: bool,
    pub show_alerts: bool,
    pub use_indicator: bool,
}

impl ChannelsConfig {
    /// The visibility on `channel`: its own keys over `channels.defaults`
    /// over the built-in defaults (false / true / true).
    pub(crate) fn heartbeat_visibility(&self, channel: &str) -> HeartbeatVisibility {
        let own = self.by_name.get(channel).and_then(|c| c.heartbeat.as_ref());
        let defaults = self
            .by_name
            .get("defaults")
            .and_then(|c| c.heartbeat.as_ref());
        let pick = |f: fn(&HeartbeatVisibilityConfig) -> Option<bool>, built_in: bool| {
            own.and_then(f)
                .or_else(|| defaults.and_then(f))
                .unwrap_or(built_in)
        };
        HeartbeatVisibility {
            show_ok: pick(|v| v.show_ok, false),
            show_alerts: pick(|v| v.show_alerts, true),
            use_indicator: pick(|v| v.use_indicator, true),
        }
    }
}

/// `agents.defaults.llm`: timeouts of a model call besides the whole
/// answer's (`agents.defaults.timeoutSeconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct LlmConfig {
    /// The longest silence once connected, in seconds: before the answer
    /// starts and between two pieces of it (OpenClaw's key); 0: none.
    pub idle_timeout_seconds: u32,
    /// Seconds to set up the connection (TCP and TLS).
    pub connect_timeout_seconds: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            idle_timeout_seconds: 120,
            connect_timeout_seconds: 10,
        }
    }
}

/// `provider/model`, or a primary with fallbacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum ModelRef {
    Name(String),
    Chain {
        primary: String,
        #[serde(default)]
        fallbacks: Vec<String>,
    },
}

impl ModelRef {
    pub(crate) fn primary(&self) -> &str {
        match self {
            ModelRef::Name(name) => name,
            ModelRef::Chain { primary, .. } => primary,
        }
    }
}

/// `models.*`: model providers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ModelsConfig {
    /// By provider id (`openai`, `anthropic`, `ollama`, or any name).
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// `models.providers.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ProviderConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The wire protocol: `openai-completions` or `anthropic-messages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
}

/// `session.*`: how messages map to sessions and when sessions reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SessionConfig {
    /// `per-sender` or `global` (everything in one session).
    pub scope: String,
    /// `main`, `per-peer`, `per-channel-peer` or `per-account-channel-peer`.
    pub dm_scope: String,
    /// The main session's key under `agent:<id>:`.
    pub main_key: String,
    pub reset: ResetConfig,
    /// Per chat type (`direct`, `group`, `thread`; `dm` is read as
    /// `direct`).
    pub reset_by_type: BTreeMap<String, ResetConfig>,
    /// Per channel; replaces the rest for that channel.
    pub reset_by_channel: BTreeMap<String, ResetConfig>,
    /// Messages that start a new session (default `/new`, `/reset`).
    pub reset_triggers: Vec<String>,
    /// Legacy idle expiry in minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_minutes: Option<u32>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            scope: "per-sender".to_string(),
            dm_scope: "main".to_string(),
            main_key: "main".to_string(),
            reset: ResetConfig::default(),
            reset_by_type: BTreeMap::new(),
            reset_by_channel: BTreeMap::new(),
            reset_triggers: Vec::new(),
            idle_minutes: None,
        }
    }
}

/// A reset policy; unset fields fall back to the wider one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ResetConfig {
    /// `daily` or `idle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Hour of the daily reset, host-local (default 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_hour: Option<u32>,
    /// Minutes without activity after which a session resets (0: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_minutes: Option<u32>,
}

/// `agents.defaults.memorySearch`: what the memory index covers and the
/// defaults of `memory search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchConfig {
    pub enabled: bool,
    /// More Markdown to index: folders (walked for `.md`) or single `.md`
    /// files, absolute or relative to the workspace.
    pub extra_paths: Vec<String>,
    pub query: MemoryQueryConfig,
    /// Where vectors come from: `local` (a sentence model run in
    /// almanac), `openai` (aliases `ollama`, `openai-compatible`: an
    /// OpenAI-compatible `/v1/embeddings` endpoint) or `none` (lexical
    /// only). Unset: `local` when a local model is installed, else `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The embedding model's name (the remote model; for `local`, a label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub remote: MemorySearchRemote,
    pub local: MemorySearchLocal,
    /// The provider to use when the chosen one cannot start (`none`,
    /// `local`, `openai`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl Default for MemorySearchConfig {
    fn default() -> Self {
        MemorySearchConfig {
            enabled: true,
            extra_paths: Vec::new(),
            query: MemoryQueryConfig::default(),
            provider: None,
            model: None,
            remote: MemorySearchRemote::default(),
            local: MemorySearchLocal::default(),
            fallback: None,
        }
    }
}

/// `memorySearch.remote`: the embeddings endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchRemote {
    /// The API's base URL (`http://127.0.0.1:11434/v1`); `/embeddings` is
    /// added. Unset: OpenAI's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Unset: `OPENAI_API_KEY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `memorySearch.local`: the local sentence model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemorySearchLocal {
    /// A folder holding `config.json`, `model.safetensors` and
    /// `tokenizer.json`. Unset: the model `memory model install` put in
    /// the state directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemoryQueryConfig {
    /// Results returned when a search does not say (`--max-results`).
    pub max_results: u32,
    /// Results scoring below this are dropped (`--min-score`), in [0, 1].
    pub min_score: f64,
}

impl Default for MemoryQueryConfig {
    fn default() -> Self {
        MemoryQueryConfig {
            max_results: 6,
            min_score: 0.35,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct LoggingConfig {
    /// Log level written to stderr when no `-v` / `ALMANAC_LOG` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MemoryConfig {
    pub session: SessionMemoryConfig,
    /// Real paths (`~` allowed) that memory files and folders may be
    /// symlinks into; any other link leaving the memory root is skipped by
    /// readers and refused by writers.
    pub allow_symlink_targets: Vec<String>,
}

/// Session memory (`almanac session-memory …`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SessionMemoryConfig {
    /// `SESSION_MEMORY`: off refuses appends and empties the context.
    pub enabled: bool,
    /// `SESSION_MEMORY_DIR`: the memory root; default the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// `MEMORY_LONGTERM_MAX_LINES`: MEMORY.md is pruned (whole entries,
    /// oldest first, archived) when it grows past this many lines.
    pub long_term_max_lines: u32,
    /// `MEMORY_AUTO_LONGTERM`: every append is a long-term note.
    pub auto_long_term: bool,
    /// Longest note accepted, in characters.
    pub max_note_chars: u32,
    /// Default token budget of `session-memory context`.
    pub context_budget_tokens: u32,
    /// Daily files older than this many days are moved to the trash after
    /// an append; 0 keeps them all.
    pub daily_retention_days: u32,
}

impl Default for SessionMemoryConfig {
    fn default() -> Self {
        SessionMemoryConfig {
            enabled: true,
            dir: None,
            long_term_max_lines: 100,
            auto_long_term: false,
            max_note_chars: 16_000,
            context_budget_tokens: 600,
            daily_retention_days: 0,
        }
    }
}

/// Safety switches, shared with Arka's environment variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SecurityConfig {
    /// `SECURITY`: master switch of the checks below.
    pub enabled: bool,
    /// `SECURITY_LLM`: model-assisted checks (reported; almanac's memory
    /// gate does not depend on a model).
    pub llm: bool,
    /// `SECURITY_SANITIZE`: the prompt-injection gate on memory notes.
    pub sanitize: bool,
    /// `SECURITY_ACTIONS`: confirmation of risky actions; the default of
    /// `tools.exec.ask` (on: `on-miss`, off: `off`).
    pub actions: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            enabled: true,
            llm: true,
            sanitize: true,
            actions: true,
        }
    }
}

impl SecurityConfig {
    /// Whether notes are checked for prompt injection before they are
    /// stored.
    pub(crate) fn memory_gate(&self) -> bool {
        self.enabled && self.sanitize
    }
}

/// The activity heartbeat (`heartbeat.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ActivityConfig {
    /// `HEARTBEAT_HISTORY`: events kept in the history ring (1–100).
    pub history_size: u32,
    /// `AGENT_NAME`: the `agent` field.
    pub agent_name: String,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        ActivityConfig {
            history_size: 20,
            agent_name: "almanac".to_string(),
        }
    }
}

/// Environment variables that set a config key (the env layer).
pub(crate) const ENV_KEYS: &[(&str, &str)] = &[
    ("ALMANAC_WORKSPACE", "agents.defaults.workspace"),
    ("SESSION_MEMORY", "memory.session.enabled"),
    ("SESSION_MEMORY_DIR", "memory.session.dir"),
    (
        "MEMORY_LONGTERM_MAX_LINES",
        "memory.session.longTermMaxLines",
    ),
    ("MEMORY_AUTO_LONGTERM", "memory.session.autoLongTerm"),
    ("SECURITY", "security.enabled"),
    ("SECURITY_LLM", "security.llm"),
    ("SECURITY_SANITIZE", "security.sanitize"),
    ("SECURITY_ACTIONS", "security.actions"),
    ("HEARTBEAT_HISTORY", "activity.historySize"),
    ("AGENT_NAME", "activity.agentName"),
    ("ALMANAC_GATEWAY_TOKEN", "gateway.auth.token"),
    ("ALMANAC_GATEWAY_PORT", "gateway.port"),
    ("ALMANAC_CRON_WEBHOOK_TOKEN", "cron.webhookToken"),
    ("ALMANAC_HEARTBEAT_EVERY", "agents.defaults.heartbeat.every"),
];

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("cannot read config file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write config file {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {} is not UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("config file {} is not valid JSON5: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("config file {}: the top level must be an object", path.display())]
    NotAnObject { path: PathBuf },
    #[error("{source_name}: `{key}`: {message}")]
    Type {
        source_name: String,
        key: String,
        message: String,
    },
    /// A value given on the command line (`config set`, `--set`) that the
    /// key cannot take.
    #[error("{source_name}: `{key}`: {message}")]
    BadValue {
        source_name: String,
        key: String,
        message: String,
    },
    #[error("invalid config key `{0}`: use dot-separated names such as agents.defaults.workspace")]
    BadKey(String),
    #[error("unknown config key `{0}`; `almanac config validate` lists the keys in use")]
    UnknownKey(String),
    #[error(transparent)]
    Edit(#[from] edit::EditError),
    #[error("editing the config file would also change other values; nothing was written")]
    EditVerification,
}

/// The config file as read from disk.
#[derive(Debug, Clone)]
pub(crate) struct ConfigFile {
    pub path: PathBuf,
    pub exists: bool,
    /// The file's value (an empty object when there is no file).
    pub raw: Value,
    /// Key paths present in the file that almanac does not know.
    pub unknown_keys: Vec<String>,
}

/// The effective configuration and where its values came from.
#[derive(Debug, Clone)]
pub(crate) struct LoadedConfig {
    pub config: Config,
    pub file: ConfigFile,
    /// Keys whose effective value came from the environment or a flag.
    pub origins: BTreeMap<String, Origin>,
    /// Problems that did not stop the load: environment values that could
    /// not be used, values out of range that were clamped.
    pub warnings: Vec<String>,
}

impl LoadedConfig {
    /// The origin of an effective key.
    pub(crate) fn origin(&self, key: &str) -> Origin {
        if let Some(origin) = self.origins.get(key) {
            return *origin;
        }
        if lookup(&self.file.raw, key).is_some() {
            Origin::Config
        } else {
            Origin::Default
        }
    }

    /// The effective value of `key`: typed settings first, then unknown keys
    /// kept from the file.
    pub(crate) fn get(&self, key: &str) -> Option<Value> {
        let effective = serde_json::to_value(&self.config).expect("config serialises");
        lookup(&effective, key)
            .filter(|v| !v.is_null())
            .or_else(|| lookup(&self.file.raw, key))
            .cloned()
    }
}

/// Reads the config file at `path` (a missing file means all defaults).
pub(crate) fn read_file(path: &Path) -> Result<(Config, ConfigFile), ConfigError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let file = ConfigFile {
                path: path.to_path_buf(),
                exists: false,
                raw: Value::Object(Default::default()),
                unknown_keys: Vec::new(),
            };
            return Ok((Config::default(), file));
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
        path: path.to_path_buf(),
    })?;
    let raw = parse_json5(&text, path)?;
    let (config, unknown_keys) = typed(&raw, &path.display().to_string())?;
    Ok((
        config,
        ConfigFile {
            path: path.to_path_buf(),
            exists: true,
            raw,
            unknown_keys,
        },
    ))
}

/// Loads the file and applies the environment and flag layers.
/// `flag_values` are `(key, value)` pairs from flags, applied last.
pub(crate) fn load(
    path: &Path,
    host: &Host,
    flag_values: &[(String, String)],
) -> Result<LoadedConfig, ConfigError> {
    let (config, file) = read_file(path)?;
    tracing::debug!(
        path = %path.display(),
        exists = file.exists,
        unknown_keys = file.unknown_keys.len(),
        "config file read"
    );
    apply_layers(config, file, host, flag_values)
}

/// The environment and flag layers over the defaults alone, for reporting
/// what still holds when the config file itself is unusable.
pub(crate) fn load_without_file(
    path: &Path,
    host: &Host,
    flag_values: &[(String, String)],
) -> Result<LoadedConfig, ConfigError> {
    let file = ConfigFile {
        path: path.to_path_buf(),
        exists: path.exists(),
        raw: Value::Object(Default::default()),
        unknown_keys: Vec::new(),
    };
    apply_layers(Config::default(), file, host, flag_values)
}

fn apply_layers(
    config: Config,
    file: ConfigFile,
    host: &Host,
    flag_values: &[(String, String)],
) -> Result<LoadedConfig, ConfigError> {
    let mut loaded = LoadedConfig {
        config,
        file,
        origins: BTreeMap::new(),
        warnings: Vec::new(),
    };
    for (var, key) in ENV_KEYS {
        // Environment values are often set for other tools too; one that
        // does not fit is ignored with a warning rather than breaking every
        // command.
        if let Some(value) = host.var(var) {
            match apply_layer(&mut loaded, key, value, var) {
                Ok(()) => {
                    loaded.origins.insert((*key).to_string(), Origin::Env);
                }
                Err(err) => loaded
                    .warnings
                    .push(format!("ignoring {var}={value:?}: {err}")),
            }
        }
    }
    for (key, value) in flag_values {
        if !is_known_key(key) {
            return Err(ConfigError::UnknownKey(key.clone()));
        }
        let source_name = format!("--set {key}");
        apply_layer(&mut loaded, key, value, &source_name).map_err(given_value)?;
        if let Some(problem) = value_problems(&loaded.config)
            .into_iter()
            .find(|(k, _)| k == key)
        {
            return Err(ConfigError::BadValue {
                source_name,
                key: key.clone(),
                message: problem.1,
            });
        }
        loaded.origins.insert(key.clone(), Origin::Flag);
    }
    loaded.warnings.extend(loaded.config.clamp_ranges());
    let host_zone = host.time_zone().iana_name().unwrap_or("local").to_string();
    for (key, problem) in value_problems(&loaded.config) {
        let fallback = match key {
            USER_TIMEZONE => format!("using the host's zone ({host_zone})"),
            CRON_RETRY_BACKOFF => "using 30 s, 1 min, 5 min".to_string(),
            _ => "ignored".to_string(),
        };
        loaded
            .warnings
            .push(format!("{key}: {problem}; {fallback}"));
    }
    Ok(loaded)
}

/// The key of the user's time zone.
pub(crate) const USER_TIMEZONE: &str = "agents.defaults.userTimezone";

const CRON_RETRY_BACKOFF: &str = "cron.retry.backoffMs";

/// Values of the right type that almanac cannot use, as (key path,
/// problem). A load reports each as a warning; `config set`, `--set` and
/// `config validate` refuse them.
pub(crate) fn value_problems(config: &Config) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if let Some(zone) = config.agents.defaults.user_timezone.as_deref()
        && jiff::tz::TimeZone::get(zone).is_err()
    {
        problems.push((
            USER_TIMEZONE,
            format!("`{zone}` is not a known IANA time zone (for example Europe/Paris or UTC)"),
        ));
    }
    let gateway = &config.gateway;
    if gateway.bind == GatewayBind::Custom
        && gateway
            .custom_bind_host
            .as_deref()
            .is_none_or(|h| h.trim().parse::<std::net::IpAddr>().is_err())
    {
        problems.push((
            "gateway.customBindHost",
            "gateway.bind is `custom`: set gateway.customBindHost to an IP address".to_string(),
        ));
    }
    let heartbeat = &config.agents.defaults.heartbeat;
    let every = heartbeat.every.trim();
    if let Err(err) =
        almanac_heartbeat::duration::parse(every, almanac_heartbeat::duration::Unit::Minutes)
    {
        problems.push((
            "agents.defaults.heartbeat.every",
            format!("`{every}` is not a duration ({err}); heartbeats are off"),
        ));
    }
    if heartbeat.target == HeartbeatTarget::Webhook {
        match heartbeat.to.as_deref().map(str::trim) {
            None | Some("") => problems.push((
                "agents.defaults.heartbeat.to",
                "target is `webhook`: set `to` to an http(s) URL; alerts are not delivered"
                    .to_string(),
            )),
            Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => problems
                .push((
                    "agents.defaults.heartbeat.to",
                    format!("`{url}` is not an http(s) URL"),
                )),
            Some(_) => {}
        }
    }
    let cron = &config.cron;
    if cron.retry.backoff_ms.is_empty() {
        problems.push((
            CRON_RETRY_BACKOFF,
            "an empty list gives no wait between attempts".to_string(),
        ));
    }
    if cron.failure_alert.mode == Some(CronAlertMode::Webhook)
        && let Some(problem) =
            webhook_url_problem(cron.failure_alert.to.as_deref(), "alerts are not delivered")
    {
        problems.push(("cron.failureAlert.to", problem));
    }
    if let Some(dest) = &cron.failure_destination
        && dest.mode == Some(CronAlertMode::Webhook)
        && let Some(problem) = webhook_url_problem(dest.to.as_deref(), "failures are not reported")
    {
        problems.push(("cron.failureDestination.to", problem));
    }
    if let Some(hours) = &heartbeat.active_hours {
        let (_, diagnostics) = almanac_heartbeat::schedule::ActiveHours::parse(
            &hours.start,
            &hours.end,
            hours.timezone.as_deref(),
        );
        for d in diagnostics {
            problems.push(("agents.defaults.heartbeat.activeHours", d));
        }
    }
    problems
}

/// What is wrong with `to` as the URL of a `webhook` mode, if anything;
/// `unused` says what then goes nowhere.
fn webhook_url_problem(to: Option<&str>, unused: &str) -> Option<String> {
    match to.map(str::trim) {
        None | Some("") => Some(format!(
            "mode is `webhook`: set `to` to an http(s) URL; {unused}"
        )),
        Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => {
            Some(format!("`{url}` is not an http(s) URL"))
        }
        Some(_) => None,
    }
}

/// A type error in a value given on the command line is a bad value.
fn given_value(err: ConfigError) -> ConfigError {
    match err {
        ConfigError::Type {
            source_name,
            key,
            message,
        } => ConfigError::BadValue {
            source_name,
            key,
            message,
        },
        other => other,
    }
}

impl Config {
    /// Brings numeric settings into their valid ranges, returning a warning
    /// for each value changed.
    pub(crate) fn clamp_ranges(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut clamp = |name: &str, value: &mut u32, min: u32, max: u32| {
            let clamped = (*value).clamp(min, max);
            if clamped != *value {
                warnings.push(format!(
                    "{name} = {value} is outside {min}..={max}; using {clamped}"
                ));
                *value = clamped;
            }
        };
        let s = &mut self.memory.session;
        clamp(
            "memory.session.longTermMaxLines",
            &mut s.long_term_max_lines,
            3,
            1_000_000,
        );
        clamp(
            "memory.session.maxNoteChars",
            &mut s.max_note_chars,
            1,
            10_000_000,
        );
        clamp(
            "memory.session.contextBudgetTokens",
            &mut s.context_budget_tokens,
            16,
            1_000_000,
        );
        clamp(
            "activity.historySize",
            &mut self.activity.history_size,
            1,
            100,
        );
        clamp(
            "tools.exec.timeoutSec",
            &mut self.tools.exec.timeout_sec,
            1,
            86_400,
        );
        clamp(
            "agents.defaults.maxConcurrent",
            &mut self.agents.defaults.max_concurrent,
            1,
            64,
        );
        clamp(
            "cron.maxConcurrentRuns",
            &mut self.cron.max_concurrent_runs,
            1,
            64,
        );
        clamp(
            "cron.runLog.keepLines",
            &mut self.cron.run_log.keep_lines,
            1,
            1_000_000,
        );
        clamp(
            "cron.retry.maxAttempts",
            &mut self.cron.retry.max_attempts,
            0,
            100,
        );
        clamp(
            "cron.failureAlert.after",
            &mut self.cron.failure_alert.after,
            1,
            1_000_000,
        );
        let run = &mut self.skills.run;
        clamp("skills.run.timeoutSec", &mut run.timeout_sec, 1, 86_400);
        clamp(
            "skills.run.maxOutputBytes",
            &mut run.max_output_bytes,
            1_024,
            1_073_741_824,
        );
        warnings
    }
}

fn apply_layer(
    loaded: &mut LoadedConfig,
    key: &str,
    text: &str,
    source_name: &str,
) -> Result<(), ConfigError> {
    let path = split_key(key)?;
    let mut effective = serde_json::to_value(&loaded.config).expect("config serialises");
    let value = coerce_value(&path, text, source_name)?;
    insert_at(&mut effective, &path, value);
    let (config, _) = typed(&effective, source_name)?;
    loaded.config = config;
    Ok(())
}

/// Reads a value given on the command line or in the environment: JSON5
/// when it parses and fits the key's type, else the plain string. The value
/// is checked on its own, so problems elsewhere in the file (reported
/// separately) never block fixing this key.
fn coerce_value(path: &[&str], text: &str, source_name: &str) -> Result<Value, ConfigError> {
    let attempt = |candidate: Value| -> Result<Value, ConfigError> {
        let mut trial = Value::Object(Default::default());
        insert_at(&mut trial, path, candidate.clone());
        typed(&trial, source_name).map(|_| candidate)
    };
    let first = match json5::from_str::<Value>(text) {
        Ok(parsed) if !parsed.is_string() => match attempt(parsed) {
            Ok(v) => Ok(v),
            Err(typed_err) => attempt(Value::String(text.to_string())).map_err(|_| typed_err),
        },
        Ok(parsed) => attempt(parsed),
        Err(_) => attempt(Value::String(text.to_string())),
    };
    // Boolean settings read `on/off/yes/no` as environment variables do.
    match (first, crate::host::parse_bool(text)) {
        (Err(err), Some(b)) => attempt(Value::Bool(b)).map_err(|_| err),
        (result, _) => result,
    }
}

fn parse_json5(text: &str, path: &Path) -> Result<Value, ConfigError> {
    let value: Value = json5::from_str(text).map_err(|e| {
        let message = match e.position() {
            Some(pos) => format!("{e} (line {}, column {})", pos.line + 1, pos.column + 1),
            None => e.to_string(),
        };
        ConfigError::Syntax {
            path: path.to_path_buf(),
            message,
        }
    })?;
    if !value.is_object() {
        return Err(ConfigError::NotAnObject {
            path: path.to_path_buf(),
        });
    }
    Ok(value)
}

/// Deserialises the typed config from a value, collecting unknown keys.
fn typed(value: &Value, source_name: &str) -> Result<(Config, Vec<String>), ConfigError> {
    check_sections_are_objects(value, &default_shape(), &mut Vec::new(), source_name)?;
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path| unknown.push(clean_path(&path.to_string()));
    let ignored = serde_ignored::Deserializer::new(value, &mut record);
    let config: Config = serde_path_to_error::deserialize(ignored).map_err(|e| {
        let key = clean_path(&e.path().to_string());
        ConfigError::Type {
            source_name: source_name.to_string(),
            key,
            message: e.inner().to_string(),
        }
    })?;
    Ok((config, unknown))
}

/// The serialised defaults: every section (struct or map) is an object.
fn default_shape() -> Value {
    serde_json::to_value(Config::default()).expect("config serialises")
}

/// serde accepts a list for a struct (`defaults: []` would silently mean
/// "all defaults"); a section written as anything but an object is a type
/// error instead.
fn check_sections_are_objects(
    value: &Value,
    shape: &Value,
    path: &mut Vec<String>,
    source_name: &str,
) -> Result<(), ConfigError> {
    let (Value::Object(shape), Some(map)) = (shape, value.as_object()) else {
        return Ok(());
    };
    for (key, sub_shape) in shape {
        let Some(sub_value) = map.get(key) else {
            continue;
        };
        path.push(key.clone());
        if sub_shape.is_object() && !sub_value.is_object() && !sub_value.is_null() {
            return Err(ConfigError::Type {
                source_name: source_name.to_string(),
                key: path.join("."),
                message: format!("invalid type: {}, expected an object", type_name(sub_value)),
            });
        }
        check_sections_are_objects(sub_value, sub_shape, path, source_name)?;
        path.pop();
    }
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Drops the `?` segments serde adds for `Option` layers.
fn clean_path(path: &str) -> String {
    path.split('.')
        .filter(|s| *s != "?" && !s.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

/// Splits `a.b.c`, refusing empty segments.
pub(crate) fn split_key(key: &str) -> Result<Vec<&str>, ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    if key.is_empty() || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(ConfigError::BadKey(key.to_string()));
    }
    Ok(parts)
}

/// Whether setting `key` would be read by almanac (not reported unknown).
pub(crate) fn is_known_key(key: &str) -> bool {
    let Ok(path) = split_key(key) else {
        return false;
    };
    let mut probe = Value::Object(Default::default());
    // A placeholder of any type: an unknown key is reported as ignored
    // whatever its value, a known one either loads or fails on its type.
    insert_at(&mut probe, &path, Value::Null);
    match typed(&probe, "probe") {
        Ok((_, unknown)) => unknown.is_empty(),
        Err(_) => true,
    }
}

fn lookup<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(value, |v, k| v.get(k))
}

fn insert_at(root: &mut Value, path: &[&str], value: Value) {
    let mut cursor = root;
    for key in &path[..path.len() - 1] {
        if !cursor.is_object() {
            *cursor = Value::Object(Default::default());
        }
        cursor = cursor
            .as_object_mut()
            .expect("object")
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    if !cursor.is_object() {
        *cursor = Value::Object(Default::default());
    }
    cursor
        .as_object_mut()
        .expect("object")
        .insert(path[path.len() - 1].to_string(), value);
}

fn remove_at(root: &mut Value, path: &[&str]) -> bool {
    let mut cursor = root;
    for key in &path[..path.len() - 1] {
        match cursor.get_mut(*key) {
            Some(next) => cursor = next,
            None => return false,
        }
    }
    cursor
        .as_object_mut()
        .is_some_and(|m| m.shift_remove(path[path.len() - 1]).is_some())
}

/// What `config set` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetOutcome {
    pub key: String,
    pub value: Value,
    pub path: PathBuf,
    pub created_file: bool,
    /// Problems elsewhere in the file that remain after the edit.
    pub remaining_problem: Option<String>,
}

/// Sets `key` to the value written as `text` in the config file at `path`.
pub(crate) fn set(path: &Path, key: &str, text: &str) -> Result<SetOutcome, ConfigError> {
    let parts = split_key(key)?;
    if !is_known_key(key) {
        return Err(ConfigError::UnknownKey(key.to_string()));
    }
    edit_file(path, |current_text, current_value| {
        let source_name = path.display().to_string();
        let value = coerce_value(&parts, text, &source_name).map_err(given_value)?;
        let mut trial = Value::Object(Default::default());
        insert_at(&mut trial, &parts, value.clone());
        let (trial, _) = typed(&trial, &source_name)?;
        if let Some((_, message)) = value_problems(&trial).into_iter().find(|(k, _)| *k == key) {
            return Err(ConfigError::BadValue {
                source_name,
                key: key.to_string(),
                message,
            });
        }
        let new_text = edit::set(current_text, &parts, &value)?;
        let mut expected = current_value.clone();
        insert_at(&mut expected, &parts, value.clone());
        Ok(Some((new_text, expected, value)))
    })
    .map(|(created_file, value, remaining_problem)| SetOutcome {
        key: key.to_string(),
        value: value.unwrap_or(Value::Null),
        path: path.to_path_buf(),
        created_file,
        remaining_problem,
    })
}

/// Removes `key` from the config file; `false` when it was not set.
pub(crate) fn unset(path: &Path, key: &str) -> Result<bool, ConfigError> {
    let parts = split_key(key)?;
    edit_file(path, |current_text, current_value| {
        let Some(new_text) = edit::unset(current_text, &parts)? else {
            return Ok(None);
        };
        let mut expected = current_value.clone();
        remove_at(&mut expected, &parts);
        Ok(Some((new_text, expected, Value::Null)))
    })
    .map(|(_, value, _)| value.is_some())
}

type EditResult = Result<Option<(String, Value, Value)>, ConfigError>;

/// Read-modify-write of the config file under its lock. The edit returns
/// the new text, the value the new text must parse to, and the set value.
fn edit_file(
    path: &Path,
    apply: impl FnOnce(&str, &Value) -> EditResult,
) -> Result<(bool, Option<Value>, Option<String>), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        durable::create_private_dir_all(parent).map_err(write_err)?;
    }
    let lock_path = lock_path_for(path);
    durable::with_file_lock(&lock_path, || {
        let (text, exists) = match std::fs::read(path) {
            Ok(bytes) => (
                String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
                    path: path.to_path_buf(),
                })?,
                true,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let current = if text.trim().is_empty() || only_comments(&text) {
            Value::Object(Default::default())
        } else {
            parse_json5(&text, path)?
        };
        let Some((new_text, expected, value)) = apply(&text, &current)? else {
            return Ok((false, None, None));
        };
        let reparsed = parse_json5(&new_text, path)?;
        if reparsed != expected {
            return Err(ConfigError::EditVerification);
        }
        let remaining_problem = match typed(&reparsed, &path.display().to_string()) {
            Ok((config, _)) => value_problems(&config)
                .into_iter()
                .next()
                .map(|(key, problem)| format!("`{key}`: {problem}")),
            Err(e) => Some(e.to_string()),
        };
        durable::atomic_replace(path, new_text.as_bytes(), durable::PRIVATE_FILE_MODE)
            .map_err(write_err)?;
        Ok((!exists, Some(value), remaining_problem))
    })
    .map_err(write_err)?
}

fn only_comments(text: &str) -> bool {
    json5::from_str::<Value>(text).is_err()
        && text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim().starts_with("//"))
}

fn lock_path_for(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests;
