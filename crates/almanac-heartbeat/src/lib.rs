//! The pure rules of almanac's heartbeat: the periodic agent turn that reads
//! `HEARTBEAT.md` and either acknowledges with [`ACK_TOKEN`] or raises an
//! alert.
//!
//! * [`duration`]: duration strings (`30m`, `1.5h`, `1h30m`).
//! * [`file`]: `HEARTBEAT.md`, its "effectively empty" rule, its `tasks:`
//!   block and which tasks are due.
//! * [`prompt`]: the text of a heartbeat turn.
//! * [`ack`]: telling an acknowledgement from an alert in the reply, and
//!   keeping the token out of anything a person reads.
//! * [`schedule`]: per-agent phase, the next due time and active hours.
//!
//! Nothing in this crate touches the file system, the clock or the
//! environment: times, paths and zones are parameters. Nothing panics on
//! user input; parsers return a value plus diagnostics (plain sentences
//! naming the line or setting concerned) rather than failing wholesale.

pub mod ack;
pub mod duration;
pub mod file;
pub mod prompt;
pub mod schedule;

/// The reply that means "nothing needs attention".
pub const ACK_TOKEN: &str = "HEARTBEAT_OK";
