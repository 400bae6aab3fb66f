//! almanac's own hooks, embedded in the binary and run in-process (their
//! handler is built in): `command-logger`, the audit log of commands.
//! They are on by default (when `hooks.internal.enabled` is), and a
//! managed hook of the same name replaces one.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Event, Handler, Hook, HookSource};

/// The built-in hooks: name and `HOOK.md` text.
const BUNDLED: &[(&str, &str)] = &[(
    "command-logger",
    include_str!("bundled/command-logger/HOOK.md"),
)];

/// Where built-in hooks keep what they write: the state directory.
#[derive(Debug, Clone)]
pub(crate) struct BuiltinContext {
    pub state_dir: PathBuf,
}

/// The bundled hooks, parsed from the binary.
pub(crate) fn hooks() -> Vec<Hook> {
    BUNDLED
        .iter()
        .filter_map(|(name, text)| {
            let dir = Path::new("(bundled)").join(name);
            let mut hook = super::discover::parse_hook_md(text, &dir, HookSource::Bundled).ok()?;
            hook.handler = Handler::Builtin {
                name: (*name).to_string(),
            };
            hook.diagnostics.clear();
            Some(hook)
        })
        .collect()
}

/// Runs the built-in handler `name` for `event`.
pub(crate) fn run(name: &str, event: &Event, ctx: &BuiltinContext) -> Result<(), String> {
    match name {
        "command-logger" => log_command(event, &ctx.state_dir),
        other => Err(format!("no built-in hook named `{other}`")),
    }
}

/// One line of `<state>/logs/commands.log`.
pub(crate) fn command_log_line(event: &Event) -> Value {
    let text = |key: &str| {
        event
            .context
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string()
    };
    json!({
        "timestamp": event.timestamp,
        "action": event.action,
        "sessionKey": event.session_key,
        "senderId": text("senderId"),
        "source": text("commandSource"),
    })
}

fn log_command(event: &Event, state_dir: &Path) -> Result<(), String> {
    if event.kind != "command" {
        return Ok(());
    }
    let path = state_dir.join("logs").join("commands.log");
    let mut line = command_log_line(event).to_string();
    line.push('\n');
    crate::durable::locked_append(
        &path,
        line.as_bytes(),
        crate::durable::PRIVATE_FILE_MODE,
        false,
    )
    .map_err(|e| format!("cannot append to {}: {e}", path.display()))
}
