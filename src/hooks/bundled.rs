//! almanac's own hooks, embedded in the binary and run in-process (their
//! handler is built in): `command-logger`, the audit log of commands, and
//! `session-memory`, the previous session's conversation saved to memory
//! on `/new` and `/reset`, and `boot-md`, `BOOT.md` run as a turn when
//! the gateway starts (the gateway runs that turn).
//! They are on by default (when `hooks.internal.enabled` is), and a
//! managed hook of the same name replaces one.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Event, Handler, Hook, HookSource};

/// The built-in hooks: name and `HOOK.md` text.
const BUNDLED: &[(&str, &str)] = &[
    (
        "command-logger",
        include_str!("bundled/command-logger/HOOK.md"),
    ),
    (
        "session-memory",
        include_str!("bundled/session-memory/HOOK.md"),
    ),
    ("boot-md", include_str!("bundled/boot-md/HOOK.md")),
];

/// Messages `session-memory` keeps when its entry does not say.
const SESSION_MEMORY_MESSAGES: usize = 15;

/// Where built-in hooks keep what they write, and their settings.
#[derive(Debug, Clone)]
pub(crate) struct BuiltinContext {
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    /// `hooks.internal.entries.session-memory.messages`.
    pub session_memory_messages: Option<usize>,
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
        "session-memory" => save_session(event, ctx).map(|_| ()),
        // A turn, which only the gateway can run: it does so at start
        // when this hook is runnable (`App::boot_request`).
        "boot-md" => Ok(()),
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

/// `session-memory`: the previous session's last messages written to
/// `<workspace>/memory/YYYY-MM-DD-HHMM.md` (`-2`, `-3`, … when taken).
/// The transcript is read first: a session without messages writes
/// nothing, never a file with a header alone. Returns the file written.
pub(crate) fn save_session(event: &Event, ctx: &BuiltinContext) -> Result<Option<PathBuf>, String> {
    use crate::provider::{Block, Message};
    if event.kind != "command" || !matches!(event.action.as_str(), "new" | "reset") {
        return Ok(None);
    }
    let Some(file) = event
        .context
        .get("previousSessionFile")
        .and_then(Value::as_str)
    else {
        return Ok(None);
    };
    let transcript = crate::session::transcript::read(Path::new(file))
        .map_err(|e| format!("cannot read {file}: {e}"))?;
    let text_of = |blocks: &[Block]| -> String {
        blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.trim()),
                _ => None,
            })
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let messages: Vec<(&str, String)> = transcript
        .context()
        .iter()
        .filter_map(|m| match m {
            Message::User(blocks) => Some(("user", text_of(blocks))),
            Message::Assistant(blocks) => Some(("assistant", text_of(blocks))),
            Message::ToolResult { .. } => None,
        })
        .filter(|(_, text)| !text.is_empty())
        .collect();
    if messages.is_empty() {
        return Ok(None);
    }
    let keep = ctx
        .session_memory_messages
        .unwrap_or(SESSION_MEMORY_MESSAGES)
        .max(1);
    let recent = &messages[messages.len().saturating_sub(keep)..];
    // `2026-11-29T09:00:00.000Z`: the date, and the time as the slug.
    let (date, time) = event
        .timestamp
        .split_once('T')
        .ok_or("the event has no timestamp")?;
    let hhmm: String = time.chars().filter(char::is_ascii_digit).take(4).collect();
    let hms = time.get(..8).unwrap_or(time);
    let previous_id = event
        .context
        .pointer("/previousSessionEntry/sessionId")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let source = event
        .context
        .get("commandSource")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut text = format!(
        "# Session: {date} {hms} UTC\n\n- **Session Key**: {}\n- **Session ID**: {previous_id}\n- **Source**: {source}\n\n## Conversation Summary\n\n",
        event.session_key
    );
    for (role, message) in recent {
        text.push_str(&format!("{role}: {message}\n\n"));
    }
    let dir = ctx.workspace.join("memory");
    // Never through a link leaving the workspace.
    if let (Ok(real_dir), Ok(real_ws)) = (
        std::fs::canonicalize(&dir),
        std::fs::canonicalize(&ctx.workspace),
    ) && !real_dir.starts_with(&real_ws)
    {
        return Err(format!(
            "{} leads outside the workspace; nothing written",
            dir.display()
        ));
    }
    for n in 1..100 {
        let name = if n == 1 {
            format!("{date}-{hhmm}.md")
        } else {
            format!("{date}-{hhmm}-{n}.md")
        };
        let path = dir.join(name);
        let created = crate::durable::atomic_create(
            &path,
            text.as_bytes(),
            crate::durable::PRIVATE_FILE_MODE,
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if created {
            return Ok(Some(path));
        }
    }
    Err(format!(
        "{}: too many session files for {date} {hhmm}",
        dir.display()
    ))
}
