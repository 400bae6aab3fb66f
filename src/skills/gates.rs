//! Whether a skill can be used here and now, with every reason it cannot.
//!
//! All gates are evaluated and all failures reported (not just the first):
//! `skills.entries.<key>.enabled`, `enabled: false` in a manifest,
//! `skills.allowBundled`, `os`, `requires.bins`, `requires.anyBins`,
//! `requires.env` (process environment, `skills.entries.<key>.env`, or
//! `apiKey` with `primaryEnv`), `requires.env_any`, `requires.config`
//! (truthy config path), `permissions` against the allowed set, and named
//! checks. `always: true` lets a skill past its requirements (not past
//! being disabled, the bundled allowlist or `os`).
//!
//! Nothing is cached between commands: each evaluation reads the current
//! environment, PATH and config, so a change is seen by the next command.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use super::types::{Requirements, Skill, SourceKind};
use crate::config::{LoadedConfig, SkillEntryConfig};

/// The permissions allowed when nothing says otherwise.
pub(crate) const DEFAULT_PERMISSIONS: &[&str] = &["read", "write", "network", "shell"];

/// Directories searched for binaries besides `PATH` (as OpenClaw does).
const EXTRA_BIN_DIRS: &[&str] = &[
    "/opt/homebrew/bin",
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// What gating reads: environment, PATH, platform, config.
pub(crate) struct GateContext<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub platform: &'static str,
    pub config: &'a LoadedConfig,
    /// `None` means the default set.
    pub allowed_permissions: HashSet<String>,
    bin_dirs: Vec<PathBuf>,
    bin_cache: std::cell::RefCell<HashMap<String, bool>>,
}

impl<'a> GateContext<'a> {
    /// `permissions_override` is `SKILL_PERMISSIONS` as set (an empty value
    /// allows none); otherwise `skills.allowPermissions`, else the default.
    pub(crate) fn new(
        env: &'a BTreeMap<String, String>,
        config: &'a LoadedConfig,
        permissions_override: Option<&str>,
    ) -> GateContext<'a> {
        let allowed_permissions: HashSet<String> = match permissions_override {
            Some(list) => list
                .split(',')
                .map(|p| p.trim().to_ascii_lowercase())
                .filter(|p| !p.is_empty())
                .collect(),
            None => match &config.config.skills.allow_permissions {
                Some(list) => list.iter().map(|p| p.trim().to_ascii_lowercase()).collect(),
                None => DEFAULT_PERMISSIONS.iter().map(|p| p.to_string()).collect(),
            },
        };
        let mut bin_dirs: Vec<PathBuf> = env
            .get("PATH")
            .map(|p| std::env::split_paths(p).collect())
            .unwrap_or_default();
        for extra in EXTRA_BIN_DIRS {
            let extra = PathBuf::from(extra);
            if !bin_dirs.contains(&extra) {
                bin_dirs.push(extra);
            }
        }
        GateContext {
            env,
            platform: current_platform(),
            config,
            allowed_permissions,
            bin_dirs,
            bin_cache: Default::default(),
        }
    }

    /// Whether an executable `name` is on PATH (memoised per command).
    pub(crate) fn has_bin(&self, name: &str) -> bool {
        if let Some(found) = self.bin_cache.borrow().get(name) {
            return *found;
        }
        let found = self.find_bin(name).is_some();
        self.bin_cache.borrow_mut().insert(name.to_string(), found);
        found
    }

    pub(crate) fn find_bin(&self, name: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        if name.contains('/') {
            let p = PathBuf::from(name);
            return p
                .metadata()
                .ok()
                .filter(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .map(|_| p);
        }
        self.bin_dirs.iter().map(|d| d.join(name)).find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    }

    fn entry(&self, skill: &Skill) -> Option<&SkillEntryConfig> {
        self.config
            .config
            .skills
            .entries
            .get(&skill.skill_key)
            .or_else(|| self.config.config.skills.entries.get(&skill.name))
    }
}

/// `darwin`, `linux` or `win32` (OpenClaw's names).
pub(crate) fn current_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// The unmet requirements, in OpenClaw's `missing` shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Missing {
    pub bins: Vec<String>,
    pub any_bins: Vec<String>,
    pub env: Vec<String>,
    pub config: Vec<String>,
    pub os: Vec<String>,
}

impl Missing {
    pub(crate) fn is_empty(&self) -> bool {
        self.bins.is_empty()
            && self.any_bins.is_empty()
            && self.env.is_empty()
            && self.config.is_empty()
            && self.os.is_empty()
    }

    /// `bins: a, b; anyBins: …; env: …; config: …; os: …`
    pub(crate) fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (label, list) in [
            ("bins", &self.bins),
            ("anyBins", &self.any_bins),
            ("env", &self.env),
            ("config", &self.config),
            ("os", &self.os),
        ] {
            if !list.is_empty() {
                parts.push(format!("{label}: {}", list.join(", ")));
            }
        }
        parts.join("; ")
    }
}

/// The outcome of gating one skill.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Eligibility {
    pub eligible: bool,
    pub disabled: bool,
    pub blocked_by_allowlist: bool,
    pub missing: Missing,
    /// Arka's gates that OpenClaw's shape has no field for.
    pub missing_env_any: Vec<String>,
    pub denied_permissions: Vec<String>,
    pub unsupported_checks: Vec<String>,
    /// Every reason, in a fixed order.
    pub reasons: Vec<String>,
}

impl Eligibility {
    /// The status word OpenClaw prints.
    pub(crate) fn status(&self) -> &'static str {
        if self.eligible {
            "ready"
        } else if self.disabled {
            "disabled"
        } else if self.blocked_by_allowlist {
            "blocked"
        } else {
            "missing"
        }
    }
}

/// What a named check (Arka's `requires.checks`) probes for; `None` for a
/// name no probe exists for (such names are ignored, with a diagnostic).
pub(crate) fn check_description(name: &str) -> Option<&'static str> {
    match name {
        "stt" => Some("speech-to-text provider"),
        "tts" => Some("text-to-speech provider"),
        "image_gen" => Some("image generation provider"),
        _ => None,
    }
}

/// Evaluates every gate of `skill`.
pub(crate) fn evaluate(skill: &Skill, ctx: &GateContext<'_>) -> Eligibility {
    let entry = ctx.entry(skill);
    let mut reasons = Vec::new();
    let disabled_config = entry.and_then(|e| e.enabled) == Some(false);
    if disabled_config {
        reasons.push(format!(
            "disabled in config (skills.entries.{}.enabled = false)",
            skill.skill_key
        ));
    }
    if skill.disabled_by_manifest {
        reasons.push("disabled in its manifest (enabled: false)".to_string());
    }
    let disabled = disabled_config || skill.disabled_by_manifest;
    let allow = &ctx.config.config.skills.allow_bundled;
    let blocked_by_allowlist = skill.source == SourceKind::Bundled
        && !allow.is_empty()
        && !allow
            .iter()
            .any(|a| a == &skill.skill_key || a == &skill.name);
    if blocked_by_allowlist {
        reasons.push("bundled skill not in skills.allowBundled".to_string());
    }
    let mut missing = Missing::default();
    if !os_allowed(&skill.os, ctx) {
        missing.os = skill.os.clone();
        reasons.push(format!(
            "os: needs {} (this is {})",
            skill.os.join(", "),
            ctx.platform
        ));
    }
    let mut denied_permissions = Vec::new();
    let met = if skill.always {
        RequirementsCheck::default()
    } else {
        check_requirements(&skill.requires, ctx, &|v| {
            env_satisfied(v, skill, entry, ctx)
        })
    };
    reasons.extend(met.reasons);
    missing.bins = met.missing.bins;
    missing.any_bins = met.missing.any_bins;
    missing.env = met.missing.env;
    missing.config = met.missing.config;
    let missing_env_any = met.missing_env_any;
    let unsupported_checks = met.unsupported_checks;
    for p in &skill.permissions {
        if !ctx.allowed_permissions.contains(p) {
            denied_permissions.push(p.clone());
        }
    }
    if !denied_permissions.is_empty() {
        reasons.push(format!(
            "permission not allowed: {}",
            denied_permissions.join(", ")
        ));
    }
    let eligible = !disabled
        && !blocked_by_allowlist
        && missing.is_empty()
        && missing_env_any.is_empty()
        && denied_permissions.is_empty()
        && unsupported_checks.is_empty();
    Eligibility {
        eligible,
        disabled,
        blocked_by_allowlist,
        missing,
        missing_env_any,
        denied_permissions,
        unsupported_checks,
        reasons,
    }
}

/// What [`check_requirements`] found unmet.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequirementsCheck {
    /// Unmet bins, anyBins, env and config (never `os`).
    pub missing: Missing,
    pub missing_env_any: Vec<String>,
    pub unsupported_checks: Vec<String>,
    pub reasons: Vec<String>,
}

impl RequirementsCheck {
    pub(crate) fn met(&self) -> bool {
        self.missing.is_empty()
            && self.missing_env_any.is_empty()
            && self.unsupported_checks.is_empty()
    }
}

/// Checks `requires` (bins, anyBins, env, env_any, config, checks);
/// `env_ok` says whether a variable is provided. Shared by skills and
/// hooks, which differ only in where configured variables come from.
pub(crate) fn check_requirements(
    req: &Requirements,
    ctx: &GateContext<'_>,
    env_ok: &dyn Fn(&str) -> bool,
) -> RequirementsCheck {
    let mut out = RequirementsCheck::default();
    out.missing.bins = req
        .bins
        .iter()
        .filter(|b| !ctx.has_bin(b))
        .cloned()
        .collect();
    if !out.missing.bins.is_empty() {
        out.reasons
            .push(format!("missing bins: {}", out.missing.bins.join(", ")));
    }
    if !req.any_bins.is_empty() && !req.any_bins.iter().any(|b| ctx.has_bin(b)) {
        out.missing.any_bins = req.any_bins.clone();
        out.reasons
            .push(format!("needs one of: {}", req.any_bins.join(", ")));
    }
    out.missing.env = req.env.iter().filter(|v| !env_ok(v)).cloned().collect();
    if !out.missing.env.is_empty() {
        out.reasons
            .push(format!("missing env: {}", out.missing.env.join(", ")));
    }
    if !req.env_any.is_empty() && !req.env_any.iter().any(|v| env_ok(v)) {
        out.missing_env_any = req.env_any.clone();
        out.reasons
            .push(format!("needs one of env: {}", req.env_any.join(", ")));
    }
    out.missing.config = req
        .config
        .iter()
        .filter(|p| !config_truthy(ctx.config, p))
        .cloned()
        .collect();
    if !out.missing.config.is_empty() {
        out.reasons
            .push(format!("missing config: {}", out.missing.config.join(", ")));
    }
    // almanac has no speech or image provider of its own yet, so a
    // skill that needs one cannot work here.
    out.unsupported_checks = req.checks.clone();
    for check in &out.unsupported_checks {
        let description = check_description(check).unwrap_or(check);
        out.reasons.push(format!("missing check: {description}"));
    }
    out
}

/// Whether this platform is among `os` (an empty list allows any).
pub(crate) fn os_allowed(os: &[String], ctx: &GateContext<'_>) -> bool {
    os.is_empty() || os.iter().any(|o| o == ctx.platform)
}

fn env_satisfied(
    var: &str,
    skill: &Skill,
    entry: Option<&SkillEntryConfig>,
    ctx: &GateContext<'_>,
) -> bool {
    if ctx.env.get(var).is_some_and(|v| !v.trim().is_empty()) {
        return true;
    }
    if let Some(entry) = entry {
        if entry.env.get(var).is_some_and(|v| !v.trim().is_empty()) {
            return true;
        }
        if entry
            .api_key
            .as_deref()
            .is_some_and(|k| !k.trim().is_empty())
            && skill.primary_env.as_deref() == Some(var)
        {
            return true;
        }
    }
    false
}

/// A dotted config path is truthy: set and not false, 0, empty or null.
/// `browser.enabled` and `browser.evaluateEnabled` default to true.
pub(crate) fn config_truthy(config: &LoadedConfig, path: &str) -> bool {
    match config.get(path) {
        None => matches!(path, "browser.enabled" | "browser.evaluateEnabled"),
        Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(b)) => b,
        Some(serde_json::Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(serde_json::Value::String(s)) => !s.trim().is_empty(),
        Some(_) => true,
    }
}
