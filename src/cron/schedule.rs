//! The bridge to the schedule rules (`almanac-cron`): what a job's
//! `schedule` means in epoch milliseconds, and how it reads to a person.

use almanac_cron::Schedule;
use jiff::tz::TimeZone;

use super::job::{CronJob, JobError, RunStatus, ScheduleKind, ScheduleSpec};

/// A stored `at` time (ISO-8601; without an offset it is UTC; all digits
/// are epoch ms) in epoch ms. Durations, which only mean something when
/// typed, are not stored times.
pub(crate) fn parse_stored_at(text: &str) -> Option<i64> {
    let t = text.trim();
    let digits = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let dated = t.len() >= 10
        && t.as_bytes()[4] == b'-'
        && t.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    if !(digits || dated) {
        return None;
    }
    almanac_cron::parse_at(t, 0, None).ok()
}

/// Compiles `expr`, or says which field is wrong and where.
pub(crate) fn check_expression(expr: &str) -> Result<(), JobError> {
    almanac_cron::compile(expr.trim())
        .map(|_| ())
        .map_err(|detail| JobError::Expression {
            expr: expr.trim().to_string(),
            detail,
        })
}

/// Checks that `tz` names a zone.
pub(crate) fn check_zone(tz: &str, host: &TimeZone) -> Result<(), JobError> {
    almanac_cron::resolve_zone(Some(tz), host)
        .map(|_| ())
        .map_err(|_| JobError::UnknownZone(tz.trim().to_string()))
}

/// The job's schedule as the rules take it.
pub(crate) fn to_schedule(spec: &ScheduleSpec) -> Result<Schedule, JobError> {
    Ok(match spec.kind {
        ScheduleKind::At => Schedule::At {
            at_ms: spec.at_ms()?,
        },
        ScheduleKind::Every => Schedule::Every {
            every_ms: spec.every_ms.unwrap_or(0),
            anchor_ms: spec.anchor_ms,
        },
        ScheduleKind::Cron => Schedule::Cron {
            expr: spec.expr.clone().unwrap_or_default(),
            tz: spec.tz.clone(),
            stagger_ms: spec.stagger_ms,
        },
    })
}

/// The next run of `job` after `now_ms` as the runner plans it, from its
/// last run; `None` when it has none (or its schedule cannot be used).
pub(crate) fn next_run(job: &CronJob, now_ms: i64, host: &TimeZone) -> Option<i64> {
    let schedule = to_schedule(&job.schedule).ok()?;
    let last_ok = job.state.last() == Some(&RunStatus::Ok);
    almanac_cron::next_run_ms(
        &schedule,
        &job.id,
        job.state.last_run_at_ms,
        last_ok,
        job.created_at_ms,
        now_ms,
        host,
    )
    .ok()
    .flatten()
}

/// The schedule in a few words, always with its zone: `cron 0 7 * * *
/// (Europe/Paris)`, `every 30m (from 2026-11-29 09:00 UTC)`, `at
/// 2026-11-29 09:00:00 UTC`.
pub(crate) fn summary(spec: &ScheduleSpec, host: &TimeZone) -> String {
    match spec.kind {
        ScheduleKind::At => match spec.at_ms() {
            Ok(ms) => match jiff::Timestamp::from_millisecond(ms) {
                Ok(t) => format!("at {}", t.strftime("%Y-%m-%d %H:%M:%S UTC")),
                Err(_) => format!("at {ms}"),
            },
            Err(_) => format!("at {}", spec.at.as_deref().unwrap_or("?")),
        },
        ScheduleKind::Every => {
            let every = spec.every_ms.map_or_else(|| "?".to_string(), duration_text);
            // The grid is the same in every zone; its origin is shown in UTC.
            match spec
                .anchor_ms
                .and_then(|a| jiff::Timestamp::from_millisecond(a).ok())
            {
                Some(anchor) => format!(
                    "every {every} (from {})",
                    anchor.strftime("%Y-%m-%d %H:%M UTC")
                ),
                None => format!("every {every}"),
            }
        }
        ScheduleKind::Cron => {
            let zone = match &spec.tz {
                Some(tz) => tz.clone(),
                None => format!("host zone {}", host.iana_name().unwrap_or("local")),
            };
            let mut text = format!("cron {} ({zone})", spec.expr.as_deref().unwrap_or("?"));
            if let Some(stagger) = spec.stagger_ms.filter(|s| *s > 0) {
                text.push_str(&format!(", staggered within {}", duration_text(stagger)));
            }
            text
        }
    }
}

/// Milliseconds as the largest whole unit: `30m`, `1h`, `1500ms`.
pub(crate) fn duration_text(ms: u64) -> String {
    const UNITS: &[(u64, &str)] = &[
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (size, unit) in UNITS {
        if ms >= *size && ms.is_multiple_of(*size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A duration as the cron commands take it (`30s`, `20m`, `1.5h`, `2d`),
/// in ms, above zero.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    almanac_cron::parse_duration_ms(text).map_err(|e| e.to_string())
}

/// `--at`: an ISO time (in `zone` when it has no offset, else UTC), a
/// duration from now (`20m`), or epoch ms.
pub(crate) fn parse_at_flag(
    text: &str,
    now_ms: i64,
    zone: Option<&TimeZone>,
) -> Result<i64, String> {
    almanac_cron::parse_at(text, now_ms, zone).map_err(|e| e.to_string())
}

/// The stagger window a new cron job gets when none is given.
pub(crate) fn default_stagger(expr: &str) -> u64 {
    almanac_cron::default_stagger_ms(expr)
}
