//! Printing helpers and the error → exit code policy.

use std::io::Write;

use serde::Serialize;

use crate::config::LoadedConfig;
use crate::paths::PathError;

/// An error caused by how the command was invoked (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);

impl UsageError {
    pub(crate) fn wrap(err: impl std::fmt::Display) -> anyhow::Error {
        anyhow::Error::new(UsageError(err.to_string()))
    }
}

/// Exit code of a command that ran and failed (I/O, an unreachable or
/// refusing server, a damaged file, a lookup that found nothing).
pub(super) const FAILURE: u8 = 1;
/// Exit code of a usage error (bad arguments or values) or of a refusal by
/// a gate or policy.
pub(super) const REFUSED: u8 = 2;

/// Exit code for an error: [`REFUSED`] when any error of its chain is a
/// usage error or a refusal ([`is_refusal`]), else [`FAILURE`].
pub(super) fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(is_refusal) {
        REFUSED
    } else {
        FAILURE
    }
}

/// Whether `error` (of any type) is `E` and `refused` says so.
fn refused<E: std::error::Error + 'static>(
    error: &(dyn std::error::Error + 'static),
    refused: impl Fn(&E) -> bool,
) -> bool {
    error.downcast_ref::<E>().is_some_and(refused)
}

/// The one list of errors that exit 2, by type (never by message text).
/// Every error not listed here exits 1. A new refusal is one more line.
fn is_refusal(error: &(dyn std::error::Error + 'static)) -> bool {
    use crate::app::memory::{BadRange, GetError};
    use crate::app::skills::RefusedRun;
    use crate::config::ConfigError;
    use crate::entry::ModelError;
    use crate::gateway_client::install::InstallError;
    use crate::host::HostError;
    use crate::memory::write::AppendError;
    use crate::skills::run::RunError;

    // Usage errors: how the command was invoked.
    refused::<UsageError>(error, |_| true)
        || refused::<HostError>(error, |_| true)
        || refused::<PathError>(error, |e| matches!(e, PathError::BadProfile(_)))
        || refused::<BadRange>(error, |_| true)
        || refused::<ConfigError>(error, |e| {
            matches!(
                e,
                ConfigError::BadKey(_) | ConfigError::UnknownKey(_) | ConfigError::BadValue { .. }
            )
        })
        || refused::<ModelError>(error, |_| true)
        || refused::<crate::trigger::BadTarget>(error, |_| true)
        || refused::<crate::agents::UnknownAgent>(error, |_| true)
        || refused::<crate::entry::GatewayError>(error, |e| {
            matches!(
                e,
                crate::entry::GatewayError::TokenRequired(_)
                    | crate::entry::GatewayError::BadBind(_)
                    | crate::entry::GatewayError::NoCustomHost
            )
        })
        || refused::<crate::app::gateway::BadEvent>(error, |_| true)
        || refused::<crate::cron::JobError>(error, |_| true)
        || refused::<crate::cron::CronError>(error, |e| {
            matches!(
                e,
                crate::cron::CronError::Job(_) | crate::cron::CronError::BadJobId(_)
            )
        })
        || refused::<crate::app::cron_next::CronNextError>(error, |_| true)
        // Refusals by a gate or policy.
        || refused::<AppendError>(error, |e| {
            matches!(
                e,
                AppendError::Disabled
                    | AppendError::Empty
                    | AppendError::TooLong { .. }
                    | AppendError::Blocked { .. }
                    | AppendError::Outside(_)
            )
        })
        || refused::<GetError>(error, |e| {
            matches!(e, GetError::NotMemory(_) | GetError::Outside(_))
        })
        || refused::<RefusedRun>(error, |e| !matches!(e, RefusedRun::Io(_)))
        || refused::<RunError>(error, |_| true)
        || refused::<InstallError>(error, |e| matches!(e, InstallError::Foreign { .. }))
}

/// A hint printed under an error, by its type.
fn hint_for(err: &anyhow::Error) -> Option<&'static str> {
    use crate::memory::write::AppendError;
    err.chain()
        .find_map(|cause| match cause.downcast_ref::<AppendError>() {
            Some(AppendError::Blocked { .. }) => {
                Some("rephrase the note, or pass --force to store it anyway")
            }
            _ => None,
        })
}

/// `error: <message>`, one `caused by:` line per cause and a `hint:` line
/// when there is one, on stderr.
pub(super) fn print_error(err: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "error: {err}");
    for cause in err.chain().skip(1) {
        let _ = writeln!(stderr, "  caused by: {cause}");
    }
    if let Some(hint) = hint_for(err) {
        let _ = writeln!(stderr, "  hint: {hint}");
    }
}

/// One warning line per unknown config key and per setting that could not
/// be used as given.
pub(super) fn print_config_warnings(config: &LoadedConfig) {
    let mut stderr = std::io::stderr().lock();
    for warning in config_warnings(config) {
        let _ = writeln!(stderr, "warning: {warning}");
    }
}

/// What loading the settings has to say: values ignored, keys unknown.
pub(super) fn config_warnings(config: &LoadedConfig) -> Vec<String> {
    let file = &config.file;
    let unknown = file.unknown_keys.iter().map(|key| {
        format!(
            "unknown config key `{key}` in {} (ignored)",
            file.path.display()
        )
    });
    config.warnings.iter().cloned().chain(unknown).collect()
}

pub(super) fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

/// Pretty JSON on stdout with a final newline.
/// Untrusted text (what a model asks for) as a person reads it on a
/// terminal: control, zero-width and bidi characters are escaped, so none
/// can move the cursor, colour or hide part of the line.
pub(super) fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || crate::memory::sanitize::is_invisible_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
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
pub(super) fn restore_default_sigpipe() {
    // SAFETY: called once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A one-line progress bar on stderr, drawn only when stderr is a
/// terminal and at most a few times a second.
pub(super) struct Progress {
    label: &'static str,
    on: bool,
    started: std::time::Instant,
    drawn: Option<std::time::Instant>,
}

impl Progress {
    pub(super) fn new(label: &'static str) -> Progress {
        use std::io::IsTerminal;
        Progress {
            label,
            on: std::io::stderr().is_terminal(),
            started: std::time::Instant::now(),
            drawn: None,
        }
    }

    pub(super) fn show(&mut self, done: usize, of: usize) {
        if !self.on
            || self
                .drawn
                .is_some_and(|at| at.elapsed() < std::time::Duration::from_millis(200) && done < of)
        {
            return;
        }
        self.drawn = Some(std::time::Instant::now());
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = done as f64 / secs;
        let width = 30;
        let filled = (done * width).checked_div(of).unwrap_or(width).min(width);
        let left = if rate > 0.0 && of > done {
            format!(", {:.0} s left", (of - done) as f64 / rate)
        } else {
            String::new()
        };
        eprint!(
            "\r{} [{}{}] {done}/{of} ({rate:.0}/s{left})  ",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled)
        );
    }

    pub(super) fn finish(&mut self) {
        if self.on && self.drawn.is_some() {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn terminal_safe_text_cannot_rewrite_the_line() {
        let cases = [
            ("ls -l", "ls -l"),
            ("echo hi\rrm -rf ~", "echo hi\\rrm -rf ~"),
            ("a\nb", "a\\nb"),
            ("\u{1b}[2Kls", "\\u{1b}[2Kls"),
            ("echo \u{202e}txt.exe", "echo \\u{202e}txt.exe"),
            ("zero\u{200b}width", "zero\\u{200b}width"),
            ("café", "café"),
        ];
        for (text, want) in cases {
            assert_eq!(terminal_safe(text), want, "{text:?}");
        }
    }

    use super::*;
    use crate::activity::PingError;
    use crate::app::skills::RefusedRun;
    use crate::gateway_client::install::InstallError;
    use crate::memory::write::AppendError;

    #[test]
    fn exit_codes_come_from_the_error_types_in_the_chain() {
        use anyhow::Context;
        let blocked = || AppendError::Blocked { label: "x" };
        let cases: Vec<(anyhow::Error, u8)> = vec![
            (anyhow::Error::new(blocked()), REFUSED),
            (anyhow::Error::new(AppendError::Disabled), REFUSED),
            // A refusal under context is still a refusal.
            (
                Err::<(), _>(blocked()).context("storing").unwrap_err(),
                REFUSED,
            ),
            (
                anyhow::Error::new(AppendError::Io {
                    path: "m.md".into(),
                    source: std::io::Error::other("disk full"),
                }),
                FAILURE,
            ),
            (anyhow::Error::new(RefusedRun::Unknown("x".into())), REFUSED),
            (
                anyhow::Error::new(RefusedRun::Io(std::io::Error::other("x"))),
                FAILURE,
            ),
            (
                anyhow::Error::new(PingError::MultiLine {
                    field: "activity",
                    text: "a\nb".into(),
                }),
                FAILURE,
            ),
            (UsageError::wrap("bad flag"), REFUSED),
            (
                anyhow::Error::new(InstallError::Foreign {
                    path: "a.service".into(),
                    verb: "remove",
                }),
                REFUSED,
            ),
            (anyhow::Error::new(InstallError::NoExecutable), FAILURE),
            (
                anyhow::Error::new(crate::app::cron_next::CronNextError::UnknownZone(
                    "Mars/Base".into(),
                )),
                REFUSED,
            ),
            // The text of a message decides nothing.
            (
                anyhow::anyhow!("Memory blocked: Blocked suspicious instruction"),
                FAILURE,
            ),
        ];
        for (err, code) in cases {
            assert_eq!(exit_code_for(&err), code, "{err:#}");
        }
    }
}
