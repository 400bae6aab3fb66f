//! Times and durations as a person types them for a cron job: `--at`,
//! `--every` and `--stagger`.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;

use crate::ScheduleError;

/// Milliseconds in one of each duration unit, longest suffix first so
/// that `ms` is not read as `m`.
const UNITS: [(&str, u128); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Fraction digits beyond this are refused rather than rounded.
const MAX_FRACTION_DIGITS: usize = 18;

/// Parses a duration as the cron commands take it: one number, with an
/// optional decimal part, and a unit (`ms`, `s`, `m`, `h`, `d`) written
/// right after it: `30s`, `20m`, `1.5h`. Surrounding whitespace is
/// ignored; the value is exact, rounded once to whole milliseconds (halves
/// up), and must come to at least 1 ms.
pub fn parse_duration_ms(text: &str) -> Result<u64, ScheduleError> {
    let trimmed = text.trim();
    let bad = || ScheduleError::BadDuration(quoted(trimmed));
    let (number, multiplier) = UNITS
        .iter()
        .find_map(|&(suffix, millis)| Some((trimmed.strip_suffix(suffix)?, millis)))
        .ok_or_else(bad)?;
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole)
        || (number.contains('.') && !all_digits(fraction))
        || fraction.len() > MAX_FRACTION_DIGITS
    {
        return Err(bad());
    }
    let whole: u128 = whole.parse().map_err(|_| bad())?;
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| bad())?
    };
    // (whole + fraction / scale) * multiplier, rounded half up.
    let millis = whole
        .checked_mul(multiplier)
        .and_then(|m| m.checked_add((2 * fraction * multiplier + scale) / (2 * scale)))
        .filter(|&m| m <= i64::MAX as u128)
        .ok_or_else(|| ScheduleError::BadDuration(quoted(trimmed)))?;
    if millis == 0 {
        return Err(ScheduleError::ZeroDuration(quoted(trimmed)));
    }
    Ok(millis as u64)
}

/// Parses a one-shot time (`--at`):
///
/// * ISO 8601 with an offset (`Z`, `+01:00`, `+0100`): that instant;
/// * ISO 8601 without one (`2026-03-01T09:00`): read in `zone` when given
///   (a time skipped by a spring-forward moves forward by the gap, a
///   repeated one is its first pass), else in UTC;
/// * a date alone (`2026-03-01`): its midnight, the same way;
/// * only digits: epoch milliseconds (at least 1);
/// * a duration ([`parse_duration_ms`]): that long after `now_ms`.
pub fn parse_at(text: &str, now_ms: i64, zone: Option<&TimeZone>) -> Result<i64, ScheduleError> {
    let trimmed = text.trim();
    let bad = || ScheduleError::BadTime(quoted(trimmed));
    if trimmed.is_empty() {
        return Err(bad());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return match trimmed.parse::<i64>() {
            Ok(ms) if ms > 0 => Ok(ms),
            _ => Err(bad()),
        };
    }
    if looks_like_duration(trimmed) {
        let millis = parse_duration_ms(trimmed)?;
        return i64::try_from(millis)
            .ok()
            .and_then(|d| now_ms.checked_add(d))
            .filter(|&at| Timestamp::from_millisecond(at).is_ok())
            .ok_or_else(bad);
    }
    let local = |wall: DateTime| -> Result<i64, ScheduleError> {
        let zone = zone.cloned().unwrap_or(TimeZone::UTC);
        let instant = zone
            .to_ambiguous_timestamp(wall)
            .compatible()
            .map_err(|_| bad())?;
        Ok(instant.as_millisecond())
    };
    if is_date_only(trimmed) {
        let date: Date = trimmed.parse().map_err(|_| bad())?;
        return local(date.to_datetime(jiff::civil::Time::midnight()));
    }
    if !starts_with_date(trimmed) {
        return Err(bad());
    }
    if let Ok(instant) = trimmed.parse::<Timestamp>() {
        return Ok(instant.as_millisecond());
    }
    if let Some(instant) = with_basic_offset(trimmed) {
        return Ok(instant.as_millisecond());
    }
    let wall: DateTime = trimmed.parse().map_err(|_| bad())?;
    local(wall)
}

/// A number followed by letters only: meant as a duration (and refused
/// as one when it is not a valid one).
fn looks_like_duration(text: &str) -> bool {
    let body = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    body.len() < text.len()
        && !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn is_date_only(text: &str) -> bool {
    text.len() == 10 && starts_with_date(text)
}

/// `YYYY-MM-DD` at the start.
fn starts_with_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// A time ending in `±HHMM`, which the ISO parser wants as `±HH:MM`.
fn with_basic_offset(text: &str) -> Option<Timestamp> {
    let split = text.len().checked_sub(5)?;
    let (head, offset) = text.split_at_checked(split)?;
    let bytes = offset.as_bytes();
    if !matches!(bytes[0], b'+' | b'-') || !bytes[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    format!("{head}{}:{}", &offset[..3], &offset[3..])
        .parse()
        .ok()
}

/// The input, shortened when long, for a message.
fn quoted(text: &str) -> String {
    const MAX: usize = 60;
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(MAX).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_772_884_800_000; // 2026-03-07T12:00:00Z

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn durations_table() {
        for (text, want) in [
            ("30s", Some(30_000)),
            ("20m", Some(1_200_000)),
            ("1h", Some(3_600_000)),
            ("1.5h", Some(5_400_000)),
            ("2d", Some(172_800_000)),
            ("250ms", Some(250)),
            (" 45m ", Some(2_700_000)),
            ("0.5ms", Some(1)),
            ("1.0005s", Some(1_001)),
            ("0.0001s", None),
            ("0m", None),
            ("1h30m", None),
            ("1.5", None),
            ("30", None),
            ("-5m", None),
            (".5h", None),
            ("5.h", None),
            ("1H", None),
            ("1 h", None),
            ("", None),
            ("ms", None),
            ("99999999999999999999d", None),
        ] {
            assert_eq!(parse_duration_ms(text).ok(), want, "{text:?}");
        }
        assert!(matches!(
            parse_duration_ms("0s"),
            Err(ScheduleError::ZeroDuration(_))
        ));
        assert_eq!(
            parse_duration_ms("1h30m").unwrap_err().to_string(),
            "`1h30m` is not a duration: write one number and a unit (ms, s, m, h or d), e.g. 30s, 20m or 1.5h"
        );
    }

    #[test]
    fn at_times_table() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let new_york = TimeZone::get("America/New_York").unwrap();
        for (text, zone, want) in [
            ("2026-03-20T09:00:00Z", None, ms("2026-03-20T09:00:00Z")),
            (
                "2026-03-20T09:00:00+01:00",
                None,
                ms("2026-03-20T08:00:00Z"),
            ),
            ("2026-03-20T09:00:00-0500", None, ms("2026-03-20T14:00:00Z")),
            (
                "2026-03-20T09:00:00.250Z",
                None,
                ms("2026-03-20T09:00:00.250Z"),
            ),
            ("2026-03-20T09:00", None, ms("2026-03-20T09:00:00Z")),
            ("2026-03-20T09:00:00", None, ms("2026-03-20T09:00:00Z")),
            (
                "2026-03-20T09:00:00",
                Some(&berlin),
                ms("2026-03-20T08:00:00Z"),
            ),
            // An offset wins over the zone.
            (
                "2026-03-20T09:00:00Z",
                Some(&berlin),
                ms("2026-03-20T09:00:00Z"),
            ),
            ("2026-03-20", None, ms("2026-03-20T00:00:00Z")),
            ("2026-03-20", Some(&berlin), ms("2026-03-19T23:00:00Z")),
            // A skipped time moves forward by the gap.
            (
                "2026-03-08T02:30",
                Some(&new_york),
                ms("2026-03-08T07:30:00Z"),
            ),
            ("1772884800000", None, NOW),
            ("20m", None, NOW + 1_200_000),
            ("1.5h", None, NOW + 5_400_000),
        ] {
            assert_eq!(parse_at(text, NOW, zone).ok(), Some(want), "{text:?}");
        }
        for text in [
            "",
            "0",
            "tomorrow",
            "0m",
            "1h30m",
            "2026-13-01",
            "2026-03-20T25:00",
            "20-03-2026",
            "2026-03-20T09:00:00+1",
        ] {
            assert!(parse_at(text, NOW, None).is_err(), "{text:?}");
        }
        // "20" is epoch milliseconds, not a duration without a unit.
        assert_eq!(parse_at("20", NOW, None).ok(), Some(20));
        assert_eq!(
            parse_at("tomorrow", NOW, None).unwrap_err().to_string(),
            "`tomorrow` is not a time: write an ISO 8601 time (2026-03-01T09:00:00Z), a date, epoch milliseconds or a duration from now (20m)"
        );
    }
}
