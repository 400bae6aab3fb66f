//! The pure rules of almanac's cron jobs: when a job fires.
//!
//! * [`compile`] reads a cron expression (five fields, or six with a
//!   leading second) with the semantics of the JavaScript `croner` library
//!   (version 10) that OpenClaw's jobs were written for, refusing what it
//!   refuses with an [`ExprError`] naming the field; a [`CronExpr`] gives
//!   the fire time after or before an instant in a zone;
//!   [`compile_shared`] keeps a bounded memo of compiled expressions so
//!   jobs with the same expression share one.
//! * Daylight saving follows the same library: a wall-clock time that a
//!   spring-forward skips fires moved forward by the gap (`30 2 * * *` in
//!   New York fires at 03:30 on the night the clocks jump; of several
//!   times in the skipped hour, the first), and a time that a fall-back
//!   repeats fires once.
//! * [`Schedule`] is a job's `at`, `every` or `cron` schedule;
//!   [`next_run_ms`] is when it next runs, [`slots_between`] the slots it
//!   had in a stretch of time (those missed while nothing ran it),
//!   [`previous_slot_ms`] its last slot before a time. Recurring
//!   top-of-hour expressions are staggered by a per-job offset within a
//!   window ([`default_stagger_ms`], [`stagger_offset_ms`]), so that jobs
//!   do not all fire on the hour.
//! * [`parse_at`] and [`parse_duration_ms`] read the times and durations
//!   a person types for a job (`2026-03-01T09:00`, `20m`, `1.5h`).
//!
//! Times are epoch milliseconds; zones are parameters (the host's zone
//! included: it is passed in, never looked up). Nothing in this crate
//! touches the file system, the clock or the environment, and nothing
//! panics on user input.

mod expr;
mod schedule;
mod text;
mod wall;

pub use expr::{CronExpr, ExprError, SHARED_LIMIT, compile, compile_shared, next_fires};
pub use schedule::{
    Schedule, ScheduleError, Slots, TOP_OF_HOUR_STAGGER_MS, default_stagger_ms, next_run_ms,
    previous_slot_ms, resolve_zone, slots_between, stagger_offset_ms,
};
pub use text::{parse_at, parse_duration_ms};
