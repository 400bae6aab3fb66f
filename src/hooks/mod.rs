//! Internal hooks: `HOOK.md` folders whose handler runs when something
//! happens (`command:new`, `command:reset`, `session:compact:before`,
//! `message:received`, `gateway:startup`, …).
//!
//! * [`bundled`]: almanac's own hooks (built-in handlers);
//! * [`discover`]: the sources (bundled, managed `<state>/hooks` and
//!   `hooks.internal.load.extraDirs`, then `<workspace>/hooks`), `HOOK.md`
//!   read with the skills' frontmatter and metadata rules, the handler
//!   found beside it;
//! * [`gate`]: whether a hook runs: `hooks.internal.enabled`,
//!   `hooks.internal.entries.<name>.enabled` (workspace hooks only when
//!   set to `true`), then the skills' gates (`os`, `requires.*`,
//!   `always`);
//! * [`event`]: the event document handlers receive;
//! * [`run`]: running the handlers of one event.
//!
//! Invariants:
//! * With `hooks.internal.enabled` off (the default) nothing is read or
//!   run: firing an event costs one comparison.
//! * A handler is an executable file named `handler`; it runs through
//!   `src/child/` (its own process group, the allowlisted environment plus
//!   its entry's `env`, the event as JSON on stdin) and is killed whole at
//!   `hooks.internal.timeoutSeconds`. `handler.ts` / `handler.js` /
//!   `index.ts` / `index.js` are reported as unsupported, never run.
//! * Firing never waits for a handler: handlers run on a thread of their
//!   own, events in the order they were fired, each event's handlers one
//!   after the other (type-level subscribers first); a failing handler is
//!   logged and the next one runs. A short-lived command waits for them
//!   ([`wait_pending`]) after its work is done, each bounded by its
//!   timeout.
//! * A hook's name collision is resolved by source: a managed hook
//!   replaces a same-named bundled or managed one, a workspace hook
//!   another workspace one; a workspace hook never replaces a managed one (it is ignored
//!   with a warning), so a checked-out workspace cannot swap a trusted
//!   hook.

pub(crate) mod bundled;
pub(crate) mod discover;
pub(crate) mod event;
pub(crate) mod gate;
pub(crate) mod run;
pub(crate) mod session_note;

use std::path::PathBuf;

use serde::Serialize;

pub(crate) use event::HookEvent;

/// Where a hook was found, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum HookSource {
    /// Built into almanac.
    Bundled,
    /// `<state dir>/hooks` and `hooks.internal.load.extraDirs`.
    Managed,
    /// `<workspace>/hooks`: off until its entry is enabled.
    Workspace,
}

impl HookSource {
    /// OpenClaw's label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            HookSource::Bundled => "openclaw-bundled",
            HookSource::Managed => "openclaw-managed",
            HookSource::Workspace => "openclaw-workspace",
        }
    }

    pub(crate) fn short(self) -> &'static str {
        match self {
            HookSource::Bundled => "bundled",
            HookSource::Managed => "managed",
            HookSource::Workspace => "workspace",
        }
    }

    /// Whether a hook from this source is on without an entry saying so.
    pub(crate) fn enabled_by_default(self) -> bool {
        matches!(self, HookSource::Bundled | HookSource::Managed)
    }

    /// Whether a hook from this source may replace a same-named hook
    /// from `other`: its own source, and managed over bundled.
    pub(crate) fn may_replace(self, other: HookSource) -> bool {
        self == other || (self == HookSource::Managed && other == HookSource::Bundled)
    }
}

impl Serialize for HookSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.label())
    }
}

/// What runs when a hook fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub(crate) enum Handler {
    /// The executable `handler` file.
    Executable { path: PathBuf },
    /// A handler almanac cannot run (`handler.ts`, `index.js`, …).
    Unsupported { path: PathBuf },
    /// No handler file at all.
    Missing,
    /// One of almanac's own hooks, run in-process.
    Builtin { name: String },
}

/// One loaded hook.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hook {
    pub name: String,
    pub description: String,
    pub source: HookSource,
    /// The `HOOK.md` file.
    pub file_path: PathBuf,
    pub base_dir: PathBuf,
    pub emoji: Option<String>,
    pub homepage: Option<String>,
    /// The events subscribed to: `type` or `type:action`.
    pub events: Vec<String>,
    pub always: bool,
    pub os: Vec<String>,
    pub requires: crate::skills::types::Requirements,
    pub install: Vec<crate::skills::types::InstallSpec>,
    pub handler: Handler,
    /// Problems that did not stop the hook from loading.
    pub diagnostics: Vec<String>,
}

impl Hook {
    /// Whether the hook subscribes to `event` (`command:new` is matched
    /// by `command` and `command:new`), and at which level: 0 for its
    /// type, 1 for the exact name.
    pub(crate) fn subscription(&self, event: &str) -> Option<u8> {
        let mut best = None;
        for e in &self.events {
            if e == event {
                return Some(1);
            }
            if event
                .strip_prefix(e.as_str())
                .is_some_and(|rest| rest.starts_with(':'))
            {
                best = Some(0);
            }
        }
        best
    }
}

/// A `HOOK.md` that could not be loaded, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookFailure {
    pub name: String,
    pub file_path: PathBuf,
    pub source: HookSource,
    pub reason: String,
}

/// A hook with its gating outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookStatus {
    #[serde(flatten)]
    pub hook: Hook,
    #[serde(flatten)]
    pub gate: gate::HookGate,
}

/// The hooks of a setup, gated.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HooksReport {
    /// `hooks.internal.enabled`.
    pub internal_enabled: bool,
    pub hooks: Vec<HookStatus>,
    pub failures: Vec<HookFailure>,
    pub warnings: Vec<String>,
}

impl HooksReport {
    pub(crate) fn find(&self, name: &str) -> Option<&HookStatus> {
        self.hooks.iter().find(|h| h.hook.name == name)
    }

    /// The hooks that run for `event`, in running order: type-level
    /// subscribers, then exact ones, each in listing order.
    pub(crate) fn handlers_for(&self, event: &str) -> Vec<&Hook> {
        let runnable = || self.hooks.iter().filter(|h| h.gate.runnable);
        let level = |l: u8| {
            runnable()
                .filter(move |h| h.hook.subscription(event) == Some(l))
                .map(|h| &h.hook)
        };
        level(0).chain(level(1)).collect()
    }
}

/// Discovers and gates the hooks of `inputs`.
pub(crate) fn report(inputs: &discover::HooksInputs) -> HooksReport {
    let found = discover::discover(&inputs.roots, bundled::hooks());
    let ctx = crate::skills::gates::GateContext::new(&inputs.env, &inputs.config, None);
    let hooks = found
        .hooks
        .into_iter()
        .map(|hook| {
            let gate = gate::evaluate(&hook, &ctx);
            HookStatus { hook, gate }
        })
        .collect();
    let mut warnings = found.warnings;
    // OpenClaw's legacy list of handler modules: JavaScript, which almanac
    // does not run.
    if let Some(serde_json::Value::Array(legacy)) = inputs.config.get("hooks.internal.handlers")
        && !legacy.is_empty()
    {
        warnings.push(format!(
            "hooks.internal.handlers lists {} legacy JavaScript handler module(s), which are not supported: \
             give each a hook folder with HOOK.md and an executable `handler`",
            legacy.len()
        ));
    }
    HooksReport {
        internal_enabled: inputs.config.config.hooks.internal.enabled,
        hooks,
        failures: found.failures,
        warnings,
    }
}

/// The chain of threads running fired events (see [`wait_pending`]).
static PENDING: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> = std::sync::Mutex::new(None);

/// Runs `work` after every event fired before it, on a thread of its own.
pub(crate) fn enqueue(work: impl FnOnce() + Send + 'static) {
    let mut tail = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let previous = tail.take();
    let spawned = std::thread::Builder::new()
        .name("hooks".into())
        .spawn(move || {
            if let Some(previous) = previous {
                let _ = previous.join();
            }
            work();
        });
    match spawned {
        Ok(handle) => *tail = Some(handle),
        Err(err) => tracing::warn!(%err, "cannot start a thread for hooks; event dropped"),
    }
}

/// Waits until every fired event's handlers have ended (each at most its
/// timeout): a command calls this before it exits, so no handler is left
/// running past its timeout in a process that is gone.
pub(crate) fn wait_pending() {
    let tail = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(tail) = tail {
        let _ = tail.join();
    }
}

#[cfg(test)]
mod tests;
