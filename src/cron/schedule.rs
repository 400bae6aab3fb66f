//! The bridge to the schedule rules (`almanac-cron`): what a job's
//! `schedule` means in epoch milliseconds, and how it reads to a person.

use jiff::tz::TimeZone;

use super::job::{Job, JobError, ScheduleKind, ScheduleSpec};

/// A stored `at` time (ISO-8601; without an offset it is UTC; all digits
/// are epoch ms) in epoch ms.
pub(crate) fn parse_stored_at(text: &str) -> Option<i64> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().ok();
    }
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    if let Ok(dt) = t.parse::<jiff::civil::DateTime>() {
        return dt
            .to_zoned_datetime(TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_millisecond());
    }
    if let Ok(d) = t.parse::<jiff::civil::Date>() {
        return d
            .to_zoned_datetime(TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_millisecond());
    }
    None
}

/// Compiles `expr`, or says which field is wrong and where.
pub(crate) fn check_expression(expr: &str) -> Result<(), JobError> {
    let fields = expr.split_whitespace().count();
    if fields == 5 || fields == 6 {
        Ok(())
    } else {
        Err(JobError::Expression {
            expr: expr.to_string(),
            field: "expression".into(),
            position: 0,
            message: format!("expected 5 or 6 fields, found {fields}"),
        })
    }
}

/// Checks that `tz` names a zone.
pub(crate) fn check_zone(tz: &str, _host: &TimeZone) -> Result<(), JobError> {
    TimeZone::get(tz.trim())
        .map(|_| ())
        .map_err(|_| JobError::UnknownZone(tz.to_string()))
}

/// The next run of `job` after `now_ms` as the runner would plan it, for
/// jobs whose state holds none; `None` when it has none.
pub(crate) fn next_run(job: &Job, now_ms: i64, _host: &TimeZone) -> Option<i64> {
    match job.schedule.kind {
        ScheduleKind::At => job.schedule.at_ms().ok(),
        ScheduleKind::Every => {
            let every = i64::try_from(job.schedule.every_ms?).ok()?.max(1);
            let anchor = job.schedule.anchor_ms.unwrap_or(job.created_at_ms);
            if now_ms < anchor {
                return Some(anchor);
            }
            Some(anchor + ((now_ms - anchor) / every + 1) * every)
        }
        ScheduleKind::Cron => None,
    }
}

/// The schedule in a few words, always with its zone: `cron 0 7 * * *
/// (Europe/Paris)`, `every 30m`, `at 2026-11-29 09:00:00 UTC`.
pub(crate) fn summary(spec: &ScheduleSpec, host: &TimeZone) -> String {
    match spec.kind {
        ScheduleKind::At => match spec.at_ms() {
            Ok(ms) => match jiff::Timestamp::from_millisecond(ms) {
                Ok(t) => format!("at {}", t.strftime("%Y-%m-%d %H:%M:%S UTC")),
                Err(_) => format!("at {ms}"),
            },
            Err(_) => format!("at {}", spec.at.as_deref().unwrap_or("?")),
        },
        ScheduleKind::Every => match spec.every_ms {
            Some(ms) => format!("every {}", duration_text(ms)),
            None => "every ?".to_string(),
        },
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
        if ms >= *size && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A CLI duration (`30s`, `1.5h`, `20m`, `250ms`) in ms, above zero.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor = match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 6e4,
        "h" => 3.6e6,
        "d" => 8.64e7,
        _ => {
            return Err(format!(
                "`{text}` is not a duration such as 30s, 20m, 1.5h or 2d"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 30s, 20m, 1.5h or 2d"))?;
    let ms = (value * factor).floor();
    if !(ms >= 1.0 && ms < 9.0e15) {
        return Err(format!("`{text}` must be more than zero"));
    }
    Ok(ms as u64)
}

/// `--at`: an ISO time (in `zone` when it has no offset, else UTC), a
/// duration from now (`20m`), or epoch ms.
pub(crate) fn parse_at_flag(
    text: &str,
    now_ms: i64,
    zone: Option<&TimeZone>,
) -> Result<i64, String> {
    if let Ok(ms) = parse_duration(text) {
        return Ok(now_ms + ms as i64);
    }
    if let Some(zone) = zone
        && let Ok(dt) = text.trim().parse::<jiff::civil::DateTime>()
        && text.trim().parse::<jiff::Timestamp>().is_err()
    {
        return dt
            .to_zoned_datetime(zone.clone())
            .map(|z| z.timestamp().as_millisecond())
            .map_err(|e| e.to_string());
    }
    parse_stored_at(text).ok_or_else(|| {
        format!("`{text}` is not a time (ISO-8601 such as 2026-12-01T09:00, a duration such as 20m, or epoch ms)")
    })
}

/// The stagger window a new cron job gets when none is given.
pub(crate) fn default_stagger(expr: &str) -> u64 {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let top_of_hour = match fields.as_slice() {
        [minute, hour, _, _, _] => *minute == "0" && hour.contains('*'),
        [second, minute, hour, _, _, _] => *second == "0" && *minute == "0" && hour.contains('*'),
        _ => false,
    };
    if top_of_hour { 300_000 } else { 0 }
}
