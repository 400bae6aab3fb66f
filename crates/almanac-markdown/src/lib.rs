//! Pure parsing of the Markdown files almanac reads and writes.
//!
//! Nothing in this crate touches the file system, the clock or the
//! environment: every function takes text (and, where time matters, a date)
//! and returns a value plus diagnostics. Parsers never fail wholesale; a
//! malformed file yields as much as could be read and a list of
//! [`Diagnostic`]s saying what was wrong and where.

pub mod frontmatter;
pub mod notes;
pub mod retain;

use std::fmt;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The input was read, but part of it was ignored or guessed.
    Warning,
    /// The input could not be used for its purpose.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// A problem found while parsing, with the 1-based line it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// 1-based line in the parsed text, when the problem has one.
    pub line: Option<usize>,
    pub message: String,
}

impl Diagnostic {
    pub fn warning(line: Option<usize>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            line,
            message: message.into(),
        }
    }

    pub fn error(line: Option<usize>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} (line {}): {}", self.severity, line, self.message),
            None => write!(f, "{}: {}", self.severity, self.message),
        }
    }
}

/// Replaces CRLF and lone CR line endings with LF.
pub fn normalize_newlines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\r') {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}
