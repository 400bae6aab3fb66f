//! Running the handlers of one event through the child runner: each in
//! its own process group with the allowlisted environment plus its
//! entry's `env`, the event as JSON on stdin, killed at the timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Handler, Hook, HookEvent};
use crate::child;
use crate::config::InternalHooksConfig;

/// Output of a handler kept for the log.
const MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// The time a handler may run: `hooks.internal.timeoutSeconds`, at
/// least one second.
pub(crate) fn timeout(config: &InternalHooksConfig) -> Duration {
    Duration::from_secs(u64::from(config.timeout_seconds.max(1)))
}

/// The child spec of `hook`'s handler for `event`; `None` when it has no
/// handler almanac can run.
pub(crate) fn spec(
    hook: &Hook,
    event: &HookEvent,
    process_env: &BTreeMap<String, String>,
    config: &InternalHooksConfig,
) -> Option<child::Spec> {
    let Handler::Executable { path } = &hook.handler else {
        return None;
    };
    let mut env = child::env::base(process_env);
    if let Some(entry) = config.entries.get(&hook.name) {
        for (name, value) in &entry.env {
            // As for skills: never almanac's own settings, nor a key that
            // changes how programs load or run.
            if child::env::is_almanac_setting(name) || child::env::is_dangerous_key(name) {
                tracing::warn!(hook = %hook.name, key = %name, "hook environment key left out");
                continue;
            }
            env.insert(name.clone(), value.clone());
        }
    }
    let stdin = serde_json::to_vec(event).expect("an event serialises");
    Some(child::Spec {
        program: path.clone(),
        args: Vec::new(),
        cwd: hook.base_dir.clone(),
        env,
        timeout: timeout(config),
        max_output_bytes: MAX_OUTPUT_BYTES,
        stdin: child::Input::Bytes(stdin),
    })
}

/// Runs `hooks`' handlers for `event` one after the other; a failure is
/// logged and the next one runs. Returns how each ended.
pub(crate) async fn run_handlers(
    hooks: &[&Hook],
    event: &HookEvent,
    process_env: &BTreeMap<String, String>,
    config: &InternalHooksConfig,
    builtin: &super::bundled::BuiltinContext,
) -> Vec<std::io::Result<child::Finished>> {
    let name = event.name();
    let mut outcomes = Vec::new();
    for hook in hooks {
        if let Handler::Builtin { name: builtin_name } = &hook.handler {
            if let Err(err) = super::bundled::run(builtin_name, event, builtin) {
                tracing::warn!(hook = %hook.name, event = %name, %err, "hook failed");
            }
            continue;
        }
        let Some(spec) = spec(hook, event, process_env, config) else {
            continue;
        };
        let mut capture = child::Capture::default();
        let result = child::run(&spec, &mut capture).await;
        let output = capture.text();
        match &result {
            Ok(done) if done.timed_out => tracing::warn!(
                hook = %hook.name, event = %name, timeout_s = spec.timeout.as_secs(),
                "hook handler stopped at its timeout"
            ),
            Ok(done) if !done.success() => tracing::warn!(
                hook = %hook.name, event = %name, code = done.exit_code(), output = %output.trim(),
                "hook handler failed"
            ),
            Ok(_) => tracing::debug!(hook = %hook.name, event = %name, "hook handler ran"),
            Err(err) => tracing::warn!(
                hook = %hook.name, event = %name, %err, "hook handler could not start"
            ),
        }
        outcomes.push(result);
    }
    outcomes
}
