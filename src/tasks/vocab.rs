//! The closed sets of values a task record holds, each spelled once: the
//! names stored in SQLite, printed in JSON and accepted on the command line
//! are the same strings.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// A name that is not one of a vocabulary's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}` (expected one of: {})", expected.join(", "))]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
    pub expected: &'static [&'static str],
}

macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis $name:ident ($kind:literal) {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [$name] = &[$($name::$variant,)+];
            /// Every value's name, in declaration order.
            $vis const NAMES: &'static [&'static str] = &[$($text,)+];

            $vis const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(text: &str) -> Result<Self, UnknownValue> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownValue {
                        kind: $kind,
                        value: text.to_string(),
                        expected: $name::NAMES,
                    }),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e: UnknownValue| FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

vocabulary! {
    /// What runs the task.
    pub Runtime ("runtime") {
        Subagent = "subagent",
        Acp = "acp",
        Cli = "cli",
        Cron = "cron",
    }
}

vocabulary! {
    /// Where a task is in its life: `queued → running → terminal`.
    pub Status ("status") {
        Queued = "queued",
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        TimedOut = "timed_out",
        Cancelled = "cancelled",
        Lost = "lost",
    }
}

impl Status {
    /// Queued or running: the task may still change.
    pub const fn is_active(self) -> bool {
        matches!(self, Status::Queued | Status::Running)
    }

    /// Ended: the status never changes again.
    pub const fn is_terminal(self) -> bool {
        !self.is_active()
    }
}

vocabulary! {
    /// How a task ended: the terminal statuses.
    pub TerminalStatus ("terminal status") {
        Succeeded = "succeeded",
        Failed = "failed",
        TimedOut = "timed_out",
        Cancelled = "cancelled",
        Lost = "lost",
    }
}

impl From<TerminalStatus> for Status {
    fn from(end: TerminalStatus) -> Status {
        match end {
            TerminalStatus::Succeeded => Status::Succeeded,
            TerminalStatus::Failed => Status::Failed,
            TerminalStatus::TimedOut => Status::TimedOut,
            TerminalStatus::Cancelled => Status::Cancelled,
            TerminalStatus::Lost => Status::Lost,
        }
    }
}

vocabulary! {
    /// Whether the result reached whoever asked for it.
    pub DeliveryStatus ("delivery status") {
        Pending = "pending",
        Delivered = "delivered",
        SessionQueued = "session_queued",
        Failed = "failed",
        ParentMissing = "parent_missing",
        NotApplicable = "not_applicable",
    }
}

vocabulary! {
    /// Which changes the requester is told about.
    pub NotifyPolicy ("notify policy") {
        DoneOnly = "done_only",
        StateChanges = "state_changes",
        Silent = "silent",
    }
}

vocabulary! {
    /// Whether a task belongs to a session or to the system.
    pub ScopeKind ("scope") {
        Session = "session",
        System = "system",
    }
}

vocabulary! {
    /// What a finished run achieved, beyond its status.
    pub TerminalOutcome ("terminal outcome") {
        Succeeded = "succeeded",
        Blocked = "blocked",
    }
}

vocabulary! {
    /// How serious an audit finding is.
    pub(crate) Severity ("severity") {
        Warn = "warn",
        Error = "error",
    }
}

vocabulary! {
    /// What an audit finding is about.
    pub(crate) AuditCode ("audit code") {
        StaleQueued = "stale_queued",
        StaleRunning = "stale_running",
        Lost = "lost",
        DeliveryFailed = "delivery_failed",
        MissingCleanup = "missing_cleanup",
        InconsistentTimestamps = "inconsistent_timestamps",
    }
}

impl AuditCode {
    pub(crate) const fn severity(self) -> Severity {
        match self {
            AuditCode::StaleRunning | AuditCode::Lost => Severity::Error,
            AuditCode::StaleQueued
            | AuditCode::DeliveryFailed
            | AuditCode::MissingCleanup
            | AuditCode::InconsistentTimestamps => Severity::Warn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name parses back to its value, in every encoding.
    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr + serde::Serialize,
        T: serde::de::DeserializeOwned + ToSql + FromSql,
    {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for &value in all {
            let name = value.to_string();
            assert_eq!(name.parse::<T>().ok(), Some(value), "{name}");
            let json = serde_json::to_string(&value).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
            let back: T = conn.query_row("SELECT ?1", [value], |r| r.get(0)).unwrap();
            assert_eq!(back, value);
        }
    }

    #[test]
    fn names_round_trip_through_text_json_and_sql() {
        round_trips(Runtime::ALL);
        round_trips(Status::ALL);
        round_trips(TerminalStatus::ALL);
        round_trips(DeliveryStatus::ALL);
        round_trips(NotifyPolicy::ALL);
        round_trips(ScopeKind::ALL);
        round_trips(TerminalOutcome::ALL);
        round_trips(Severity::ALL);
        round_trips(AuditCode::ALL);
    }

    #[test]
    fn unknown_names_are_refused_with_the_choices() {
        let err = "done".parse::<Status>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown status `done` (expected one of: queued, running, succeeded, failed, timed_out, cancelled, lost)"
        );
        assert!("Queued".parse::<Status>().is_err(), "names are exact");
        assert!(serde_json::from_str::<Runtime>("\"shell\"").is_err());
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let read: rusqlite::Result<Status> = conn.query_row("SELECT 'nope'", [], |r| r.get(0));
        assert!(read.is_err());
    }

    #[test]
    fn terminal_statuses_are_exactly_the_non_active_ones() {
        let terminal: Vec<Status> = TerminalStatus::ALL.iter().map(|&t| t.into()).collect();
        for status in Status::ALL {
            assert_eq!(status.is_terminal(), terminal.contains(status), "{status}");
            assert_eq!(
                TerminalStatus::NAMES.contains(&status.as_str()),
                status.is_terminal()
            );
        }
    }
}
