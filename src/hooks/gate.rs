//! Whether a hook runs: the switches first (`hooks.internal.enabled`,
//! `hooks.internal.entries.<name>.enabled`, workspace hooks off until
//! enabled), then its requirements with the skills' gates, then its
//! handler (only an executable `handler` runs).

use serde::Serialize;

use super::{Handler, Hook};
use crate::skills::gates::{self, GateContext, Missing};

/// The outcome of gating one hook.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookGate {
    /// Switched on (by default or by its entry) and `hooks.internal.enabled`.
    pub enabled: bool,
    /// Requirements met (or `always`).
    pub eligible: bool,
    /// Enabled, eligible and with a handler almanac can run.
    pub runnable: bool,
    pub missing: Missing,
    /// Every reason it does not run, in a fixed order.
    pub reasons: Vec<String>,
}

impl HookGate {
    /// The status word `hooks list` prints.
    pub(crate) fn status(&self) -> &'static str {
        if self.runnable {
            "ready"
        } else if !self.enabled {
            "disabled"
        } else if !self.eligible {
            "missing"
        } else {
            "unsupported"
        }
    }
}

/// Evaluates every gate of `hook`.
pub(crate) fn evaluate(hook: &Hook, ctx: &GateContext<'_>) -> HookGate {
    let internal = &ctx.config.config.hooks.internal;
    let entry = internal.entries.get(&hook.name);
    let mut reasons = Vec::new();
    if !internal.enabled {
        reasons.push("internal hooks are off (hooks.internal.enabled)".to_string());
    }
    let switched_on = match entry.and_then(|e| e.enabled) {
        Some(on) => on,
        None => hook.source.enabled_by_default(),
    };
    if !switched_on {
        reasons.push(match entry.and_then(|e| e.enabled) {
            Some(false) => format!(
                "disabled in config (hooks.internal.entries.{}.enabled = false)",
                hook.name
            ),
            _ => format!(
                "{} hooks are off until enabled (hooks.internal.entries.{}.enabled = true)",
                hook.source.short(),
                hook.name
            ),
        });
    }
    let enabled = internal.enabled && switched_on;
    let mut missing = Missing::default();
    if !gates::os_allowed(&hook.os, ctx) {
        missing.os = hook.os.clone();
        reasons.push(format!(
            "os: needs {} (this is {})",
            hook.os.join(", "),
            ctx.platform
        ));
    }
    let mut requirements_met = true;
    if !hook.always {
        let env_ok = |var: &str| {
            ctx.env.get(var).is_some_and(|v| !v.trim().is_empty())
                || entry.is_some_and(|e| e.env.get(var).is_some_and(|v| !v.trim().is_empty()))
        };
        let check = gates::check_requirements(&hook.requires, ctx, &env_ok);
        requirements_met = check.met();
        missing.bins = check.missing.bins;
        missing.any_bins = check.missing.any_bins;
        missing.env = check.missing.env;
        missing.config = check.missing.config;
        reasons.extend(check.reasons);
    }
    let eligible = missing.os.is_empty() && requirements_met;
    let handler_ok = match &hook.handler {
        Handler::Executable { path } => {
            use std::os::unix::fs::PermissionsExt;
            let executable = path
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
            if !executable {
                reasons.push(format!("{} is not executable", path.display()));
            }
            // A workspace hook's handler is the workspace's own file, not
            // a link to a program elsewhere.
            let contained = hook.source != super::HookSource::Workspace
                || match (
                    std::fs::canonicalize(path),
                    std::fs::canonicalize(&hook.base_dir),
                ) {
                    (Ok(real), Ok(dir)) => real.starts_with(dir),
                    _ => false,
                };
            if !contained {
                reasons.push(format!("{} leads outside its hook folder", path.display()));
            }
            executable && contained
        }
        Handler::Unsupported { path } => {
            reasons.push(format!(
                "unsupported handler {}: almanac runs an executable file named `handler`",
                path.display()
            ));
            false
        }
        Handler::Builtin { .. } => true,
        Handler::Missing => {
            reasons.push("no handler: add an executable file named `handler`".to_string());
            false
        }
    };
    HookGate {
        enabled,
        eligible,
        runnable: enabled && eligible && handler_ok,
        missing,
        reasons,
    }
}
