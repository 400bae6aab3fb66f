//! From a wall-clock time in a zone to the instant it fires, across
//! daylight-saving changes, as the reference cron library (JavaScript
//! `croner` 10) does it.
//!
//! The rule, for a wall-clock time `w` in zone `z`:
//!
//! 1. Read `w` as if it were UTC, find `z`'s wall clock at that instant,
//!    and shift by the difference: the candidate `c` is `w` minus the
//!    offset `z` has near `w`.
//! 2. If `z` shows `w` at `c`, `w` exists. When `z` also shows `w` one hour
//!    before `c` (a repeated hour), that earlier instant is taken, so a
//!    repeated time fires once, in its first pass. (In a zone whose clocks
//!    go back by half an hour, the hour before never repeats `w`, and the
//!    candidate stands, which is the second pass.)
//! 3. Otherwise the candidate is corrected by what `z` showed instead; if
//!    that shows `w`, it is the instant.
//! 4. Otherwise `w` was skipped by a spring-forward, and the later of the
//!    two candidates is taken: `w` moved forward by the length of the gap
//!    (02:30 on a night when 02:00 becomes 03:00 fires at 03:30).
//!
//! [`Slot`] carries a wall-clock time together with its instant, and is
//! what croner's wall-clock search runs on: it resolves every wall-clock
//! time to exactly one instant, so croner's own handling of gaps and
//! repeated hours never comes into play.

use std::cmp::Ordering;

use croner::errors::CronError;
use croner::{CivilDate, CivilDateTime, CivilTime, CronDateTime, Resolution, Weekday};
use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// A wall-clock time (to the second) in a zone, and the instant it fires.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    wall: CivilDateTime,
    weekday: Weekday,
    instant: Timestamp,
    zone: TimeZone,
}

impl Slot {
    /// The wall clock in `zone` at `instant` (its second), and `instant`.
    pub(crate) fn at_instant(instant: Timestamp, zone: &TimeZone) -> Slot {
        let wall = zone.to_datetime(instant);
        Slot {
            wall: to_civil(wall),
            weekday: to_weekday(wall),
            instant,
            zone: zone.clone(),
        }
    }

    pub(crate) fn instant(&self) -> Timestamp {
        self.instant
    }

    pub(crate) fn wall_year(&self) -> i16 {
        // Croner keeps years within 1..=5000.
        self.wall.year() as i16
    }
}

impl CronDateTime for Slot {
    fn to_civil(&self) -> CivilDateTime {
        self.wall
    }

    fn civil_weekday(&self) -> Weekday {
        self.weekday
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> Result<Resolution<Self>, CronError> {
        let wall = to_jiff(civil)?;
        let instant = fire_instant(wall, &self.zone).ok_or(CronError::InvalidTime)?;
        Ok(Resolution::Single(Slot {
            wall: civil,
            weekday: to_weekday(wall),
            instant,
            zone: self.zone.clone(),
        }))
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        let instant = self
            .instant
            .checked_add(SignedDuration::from_secs(seconds))
            .ok()?;
        Some(Slot::at_instant(instant, &self.zone))
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.instant.cmp(&other.instant)
    }
}

/// The instant a wall-clock time in `zone` fires at (the module's rule);
/// `None` only outside the supported years.
pub(crate) fn fire_instant(wall: DateTime, zone: &TimeZone) -> Option<Timestamp> {
    let wall_seconds = as_utc_seconds(wall)?;
    let shown = |second: i64| -> Option<DateTime> {
        Some(zone.to_datetime(Timestamp::from_second(second).ok()?))
    };
    let candidate = wall_seconds + (wall_seconds - as_utc_seconds(shown(wall_seconds)?)?);
    let at_candidate = shown(candidate)?;
    let chosen = if at_candidate == wall {
        let hour_before = candidate - 3600;
        if shown(hour_before)? == wall {
            hour_before
        } else {
            candidate
        }
    } else {
        let corrected = candidate + (wall_seconds - as_utc_seconds(at_candidate)?);
        if shown(corrected)? == wall {
            corrected
        } else {
            candidate.max(corrected)
        }
    };
    Timestamp::from_second(chosen).ok()
}

/// Seconds since the epoch of `wall` read as UTC.
fn as_utc_seconds(wall: DateTime) -> Option<i64> {
    Some(Offset::UTC.to_timestamp(wall).ok()?.as_second())
}

fn to_civil(wall: DateTime) -> CivilDateTime {
    CivilDateTime::new(
        CivilDate::from_parts_unchecked(
            i32::from(wall.year()),
            wall.month() as u32,
            wall.day() as u32,
        ),
        CivilTime::from_parts_unchecked(
            wall.hour() as u32,
            wall.minute() as u32,
            wall.second() as u32,
        ),
    )
}

fn to_jiff(civil: CivilDateTime) -> Result<DateTime, CronError> {
    let year = i16::try_from(civil.year()).map_err(|_| CronError::InvalidDate)?;
    DateTime::new(
        year,
        civil.month() as i8,
        civil.day() as i8,
        civil.hour() as i8,
        civil.minute() as i8,
        civil.second() as i8,
        0,
    )
    .map_err(|_| CronError::InvalidDate)
}

fn to_weekday(wall: DateTime) -> Weekday {
    Weekday::from_days_from_sunday(wall.weekday().to_sunday_zero_offset() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fires(wall: &str, zone: &str) -> String {
        let zone = TimeZone::get(zone).unwrap();
        fire_instant(wall.parse().unwrap(), &zone)
            .unwrap()
            .to_string()
    }

    #[test]
    fn ordinary_times_fire_at_their_instant() {
        assert_eq!(
            fires("2026-06-01T09:00:00", "Europe/Berlin"),
            "2026-06-01T07:00:00Z"
        );
        assert_eq!(fires("2026-06-01T09:00:00", "UTC"), "2026-06-01T09:00:00Z");
        assert_eq!(
            fires("2026-06-01T09:00:00", "Asia/Kolkata"),
            "2026-06-01T03:30:00Z"
        );
    }

    #[test]
    fn a_skipped_time_moves_forward_by_the_gap() {
        // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT.
        assert_eq!(
            fires("2026-03-08T02:30:00", "America/New_York"),
            "2026-03-08T07:30:00Z"
        );
        assert_eq!(
            fires("2026-03-08T02:00:00", "America/New_York"),
            "2026-03-08T07:00:00Z"
        );
        // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
        assert_eq!(
            fires("2026-03-29T02:30:00", "Europe/Berlin"),
            "2026-03-29T01:30:00Z"
        );
        // Lord Howe, 2026-10-04: 02:00 becomes 02:30 (a half-hour gap).
        assert_eq!(
            fires("2026-10-04T02:15:00", "Australia/Lord_Howe"),
            "2026-10-03T15:45:00Z"
        );
    }

    #[test]
    fn a_repeated_time_fires_in_its_first_pass() {
        // New York, 2026-11-01: 01:00-01:59 happen twice (EDT, then EST).
        assert_eq!(
            fires("2026-11-01T01:30:00", "America/New_York"),
            "2026-11-01T05:30:00Z"
        );
        // Berlin, 2026-10-25: 02:00-02:59 happen twice (CEST, then CET).
        assert_eq!(
            fires("2026-10-25T02:30:00", "Europe/Berlin"),
            "2026-10-25T00:30:00Z"
        );
    }

    #[test]
    fn a_half_hour_fold_fires_in_its_second_pass() {
        // Lord Howe, 2026-04-05: 02:00 (+11) becomes 01:30 (+10:30), so
        // 01:30-01:59 happen twice; the reference takes the second.
        assert_eq!(
            fires("2026-04-05T01:45:00", "Australia/Lord_Howe"),
            "2026-04-04T15:15:00Z"
        );
    }
}
