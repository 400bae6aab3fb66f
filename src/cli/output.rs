//! Printing helpers and the error → exit code policy.

use std::io::Write;

use serde::Serialize;

use crate::config::LoadedConfig;
use crate::paths::PathError;

/// An error caused by how the command was invoked (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn wrap(err: impl std::fmt::Display) -> anyhow::Error {
        anyhow::Error::new(UsageError(err.to_string()))
    }
}

/// Exit code for an error: 2 for usage errors, else 1.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|cause| cause.is::<UsageError>()) {
        2
    } else {
        1
    }
}

/// Marks errors in resolving the state location that come from bad flag
/// or environment values as usage errors.
pub fn classify_load_error(err: anyhow::Error) -> anyhow::Error {
    match err.downcast_ref::<PathError>() {
        Some(PathError::BadProfile(_)) => UsageError::wrap(err),
        _ => err,
    }
}

/// `error: <message>` and one `caused by:` line per cause, on stderr.
pub fn print_error(err: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "error: {err}");
    for cause in err.chain().skip(1) {
        let _ = writeln!(stderr, "  caused by: {cause}");
    }
}

/// One warning line per unknown config key and per setting that could not
/// be used as given.
pub fn print_config_warnings(config: &LoadedConfig) {
    let file = &config.file;
    let mut stderr = std::io::stderr().lock();
    for warning in &config.warnings {
        let _ = writeln!(stderr, "warning: {warning}");
    }
    for key in &file.unknown_keys {
        let _ = writeln!(
            stderr,
            "warning: unknown config key `{key}` in {} (ignored)",
            file.path.display()
        );
    }
}

pub fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

/// Pretty JSON on stdout with a final newline.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    // Large blocks: stdout is line-buffered, and pretty JSON has a line per
    // field.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// Lets `almanac … | head` end quietly, as other command-line tools do,
/// instead of failing on a closed pipe.
pub fn restore_default_sigpipe() {
    // SAFETY: called once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
