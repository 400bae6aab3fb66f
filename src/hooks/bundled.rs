//! almanac's own hooks, embedded in the binary and run in-process (their
//! handler is built in): `command-logger`, the audit log of commands, and
//! `session-memory`, the previous session's conversation saved to memory
//! on `/new` and `/reset`, and `boot-md`, `BOOT.md` run as a turn when
//! the gateway starts (the gateway runs that turn).
//! They are on by default (when `hooks.internal.enabled` is), and a
//! managed hook of the same name replaces one.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Handler, Hook, HookEvent, HookSource};

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
    /// `hooks.internal.entries.session-memory.messages`.
    pub session_memory_messages: Option<usize>,
    /// Where `session-memory` writes, by the rules every memory writer
    /// follows.
    pub notes: NoteRules,
}

/// The memory root session notes go to (`SESSION_MEMORY_DIR`, else the
/// workspace) and the rules of a memory write.
#[derive(Debug, Clone)]
pub(crate) struct NoteRules {
    pub root: PathBuf,
    /// `memory.allowSymlinkTargets`, resolved.
    pub allow_symlink_targets: Vec<PathBuf>,
    /// `memory.session.maxNoteChars`.
    pub max_chars: usize,
    /// Whether notes are checked for injection.
    pub gate: bool,
}

impl NoteRules {
    /// Notes in `root` with the default limits.
    #[cfg(test)]
    pub(crate) fn in_root(root: &Path) -> NoteRules {
        NoteRules {
            root: root.to_path_buf(),
            allow_symlink_targets: Vec::new(),
            max_chars: 16_000,
            gate: true,
        }
    }
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
pub(crate) fn run(name: &str, event: &HookEvent, ctx: &BuiltinContext) -> Result<(), String> {
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
pub(crate) fn command_log_line(event: &HookEvent) -> Value {
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

fn log_command(event: &HookEvent, state_dir: &Path) -> Result<(), String> {
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
pub(crate) fn save_session(
    event: &HookEvent,
    ctx: &BuiltinContext,
) -> Result<Option<PathBuf>, String> {
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
    let keep = ctx
        .session_memory_messages
        .unwrap_or(SESSION_MEMORY_MESSAGES)
        .max(1);
    let rules = &ctx.notes;
    // The header is part of the note and of its limit.
    const HEADER_ROOM: usize = 400;
    let recent = super::session_note::conversation(
        &transcript.context(),
        keep,
        rules.max_chars.saturating_sub(HEADER_ROOM).max(200),
        rules.gate,
    );
    if recent.is_empty() {
        return Ok(None);
    }
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
    for (role, message) in &recent {
        text.push_str(&format!("{role}: {message}\n\n"));
    }
    let layout = crate::memory::files::Layout::new(&rules.root)
        .with_allowed_targets(&rules.allow_symlink_targets);
    let dir = rules.root.join("memory");
    for n in 1..100 {
        let name = if n == 1 {
            format!("{date}-{hhmm}.md")
        } else {
            format!("{date}-{hhmm}-{n}.md")
        };
        // The one containment rule of memory: never through a link
        // leaving the memory root unless `memory.allowSymlinkTargets`
        // allows its target.
        let rel = format!("memory/{name}");
        layout
            .check(&rel)
            .map_err(|e| format!("{e}; nothing written"))?;
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
