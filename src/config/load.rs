//! Reading the config: the file parsed as JSON5 and typed, the
//! environment and flag layers over it, and the diagnostics of a load
//! (unknown keys, type errors, unusable values, clamped ranges).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::keys::{
    CRON_RETRY_BACKOFF, ENV_KEYS, USER_TIMEZONE, insert_at, is_known_key, lookup, split_key,
};
use super::{Config, CronAlertMode, GatewayBind, HeartbeatTarget, Origin, edit};
use crate::host::Host;

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
    /// The file's value (an empty object when there is no file); shared,
    /// since every copy of an app holds it and none changes it.
    pub raw: std::sync::Arc<Value>,
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
                raw: std::sync::Arc::new(Value::Object(Default::default())),
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
            raw: std::sync::Arc::new(raw),
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
        raw: std::sync::Arc::new(Value::Object(Default::default())),
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
pub(super) fn given_value(err: ConfigError) -> ConfigError {
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
        let sub = &mut self.agents.defaults.subagents;
        clamp(
            "agents.defaults.subagents.maxConcurrent",
            &mut sub.max_concurrent,
            1,
            64,
        );
        clamp(
            "agents.defaults.subagents.maxSpawnDepth",
            &mut sub.max_spawn_depth,
            1,
            5,
        );
        clamp(
            "agents.defaults.subagents.maxChildrenPerAgent",
            &mut sub.max_children_per_agent,
            1,
            1_000,
        );
        clamp(
            "agents.defaults.subagents.runTimeoutSeconds",
            &mut sub.run_timeout_seconds,
            0,
            7 * 86_400,
        );
        clamp(
            "agents.defaults.subagents.archiveAfterMinutes",
            &mut sub.archive_after_minutes,
            1,
            525_600,
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
pub(super) fn coerce_value(
    path: &[&str],
    text: &str,
    source_name: &str,
) -> Result<Value, ConfigError> {
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

pub(super) fn parse_json5(text: &str, path: &Path) -> Result<Value, ConfigError> {
    // Most configs are plain JSON (OpenClaw writes its own so): a strict
    // JSON parser reads them several times faster than JSON5's grammar,
    // which stays the reader of everything else and of every error.
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && value.is_object()
    {
        return Ok(value);
    }
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
pub(super) fn typed(
    value: &Value,
    source_name: &str,
) -> Result<(Config, Vec<String>), ConfigError> {
    check_sections_are_objects(value, default_shape(), &mut Vec::new(), source_name)?;
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
/// Made once per process: each layer a command applies (a `--set`, an
/// environment value) is read typed several times.
fn default_shape() -> &'static Value {
    static SHAPE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SHAPE.get_or_init(|| serde_json::to_value(Config::default()).expect("config serialises"))
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
