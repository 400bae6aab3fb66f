//! When heartbeats fall due, and the hours in which they may run.
//!
//! Each agent runs on a fixed grid: the instants `t` (Unix milliseconds)
//! with `t ≡ phase (mod interval)`, where the phase comes from hashing a
//! per-installation seed with the agent id. Installations and agents sharing
//! an interval thus spread out instead of all firing on the hour, and an
//! agent's slots stay put across restarts.
//!
//! [`ActiveHours`] is a daily wall-clock window `[start, end)` in a chosen
//! zone, checked when a run is about to start.

use std::fmt;

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use ring::digest::{SHA256, digest};

/// The seed used when the installation has no device identity: the
/// SHA-256 of `home`, a NUL byte and `cwd`, in lowercase hex.
pub fn fallback_seed(home: &str, cwd: &str) -> String {
    let input = [home.as_bytes(), b"\0", cwd.as_bytes()].concat();
    digest(&SHA256, &input)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The agent's offset on the interval grid: the first four bytes of
/// SHA-256(`"<seed>:<agent_id>"`) as a big-endian number, modulo the
/// interval. An interval of 0 gives 0.
pub fn phase_ms(seed: &str, agent_id: &str, interval_ms: u64) -> u64 {
    if interval_ms == 0 {
        return 0;
    }
    let hash = digest(&SHA256, format!("{seed}:{agent_id}").as_bytes());
    let bytes = hash.as_ref();
    let leading = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    u64::from(leading) % interval_ms
}

/// The first slot strictly after `now_ms`: the smallest `t > now_ms` with
/// `t ≡ phase_ms (mod interval_ms)`. Exactly on a slot gives the next one.
/// An interval of 0 is taken as 1 ms; the result saturates at `i64::MAX`.
pub fn next_due(now_ms: i64, interval_ms: u64, phase_ms: u64) -> i64 {
    let interval = i128::from(interval_ms.max(1));
    let phase = i128::from(phase_ms) % interval;
    let now = i128::from(now_ms);
    let since_slot = (now - phase).rem_euclid(interval);
    let next = now - since_slot + interval;
    i64::try_from(next).unwrap_or(i64::MAX)
}

/// Which zone an [`ActiveHours`] window is read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowZone {
    /// The user's zone (`timezone` omitted, empty or `user`).
    User,
    /// The host's zone (`local`).
    Host,
    /// A named IANA zone.
    Named(TimeZone),
}

/// A daily window `[start, end)` in minutes of the day, in a zone. When
/// `end` is before `start` the window wraps past midnight; when they are
/// equal it is never open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveHours {
    start: u16,
    end: u16,
    zone: WindowZone,
}

const MINUTES_PER_DAY: u16 = 24 * 60;

impl ActiveHours {
    /// Reads an `activeHours` setting. `start` is `HH:MM` (00:00–23:59;
    /// a one-digit hour is accepted), `end` the same or `24:00`. An
    /// invalid time gives `None`: heartbeats run at any hour, and a
    /// diagnostic says so. An unknown zone falls back to the user's zone,
    /// with a diagnostic.
    pub fn parse(
        start: &str,
        end: &str,
        timezone: Option<&str>,
    ) -> (Option<ActiveHours>, Vec<String>) {
        let mut diagnostics = Vec::new();
        let start_minute = minute_of_day(start, false);
        let end_minute = minute_of_day(end, true);
        if start_minute.is_none() {
            diagnostics.push(format!(
                "activeHours start `{}` is not a time of day (HH:MM, 00:00 to 23:59); heartbeats run at any hour",
                start.trim()
            ));
        }
        if end_minute.is_none() {
            diagnostics.push(format!(
                "activeHours end `{}` is not a time of day (HH:MM, 00:00 to 24:00); heartbeats run at any hour",
                end.trim()
            ));
        }
        let (Some(start), Some(end)) = (start_minute, end_minute) else {
            return (None, diagnostics);
        };
        let zone = match timezone.map(str::trim) {
            None | Some("") => WindowZone::User,
            Some(name) if name.eq_ignore_ascii_case("user") => WindowZone::User,
            Some(name) if name.eq_ignore_ascii_case("local") => WindowZone::Host,
            Some(name) => match TimeZone::get(name) {
                Ok(zone) => WindowZone::Named(zone),
                Err(_) => {
                    diagnostics.push(format!(
                        "activeHours timezone `{name}` is not a known time zone; the user's time zone is used"
                    ));
                    WindowZone::User
                }
            },
        };
        let hours = ActiveHours { start, end, zone };
        if start == end {
            diagnostics.push(format!(
                "activeHours starts and ends at {}: the window is empty, so heartbeats never run",
                format_minute(start)
            ));
        }
        (Some(hours), diagnostics)
    }

    /// Minutes after midnight at which the window opens.
    pub fn start_minute(&self) -> u16 {
        self.start
    }

    /// Minutes after midnight at which the window closes (1440 for 24:00).
    pub fn end_minute(&self) -> u16 {
        self.end
    }

    pub fn zone(&self) -> &WindowZone {
        &self.zone
    }

    /// Whether the window can never open (start equals end).
    pub fn is_never(&self) -> bool {
        self.start == self.end
    }

    /// Whether a wall-clock minute of the day (0–1439) is inside.
    pub fn contains_minute(&self, minute: u16) -> bool {
        match self.start.cmp(&self.end) {
            std::cmp::Ordering::Equal => false,
            std::cmp::Ordering::Less => self.start <= minute && minute < self.end,
            std::cmp::Ordering::Greater => minute >= self.start || minute < self.end,
        }
    }

    /// The zone the window is read in, given the user's and the host's.
    pub fn resolve_zone<'z>(
        &'z self,
        user_zone: &'z TimeZone,
        host_zone: &'z TimeZone,
    ) -> &'z TimeZone {
        match &self.zone {
            WindowZone::User => user_zone,
            WindowZone::Host => host_zone,
            WindowZone::Named(zone) => zone,
        }
    }

    /// Whether heartbeats may run at `instant`.
    pub fn is_active(
        &self,
        instant: Timestamp,
        user_zone: &TimeZone,
        host_zone: &TimeZone,
    ) -> bool {
        let zone = self.resolve_zone(user_zone, host_zone);
        self.contains_minute(local_minute(zone, instant))
    }

    /// The first instant at or after `after` at which the window is open:
    /// `after` itself when it is open then, `None` when it never opens.
    /// Daylight-saving changes are followed: a start time skipped by a
    /// spring-forward opens the window when the clocks jump past it.
    pub fn next_active_start(
        &self,
        after: Timestamp,
        user_zone: &TimeZone,
        host_zone: &TimeZone,
    ) -> Option<Timestamp> {
        if self.is_never() {
            return None;
        }
        if self.is_active(after, user_zone, host_zone) {
            return Some(after);
        }
        let zone = self.resolve_zone(user_zone, host_zone);
        // The window can only open when the local clock reaches `start`
        // or jumps (a zone transition); a day and a half of those always
        // includes an opening, so four days is plenty.
        let horizon = after
            .checked_add(SignedDuration::from_hours(96))
            .unwrap_or(Timestamp::MAX);
        let mut candidates: Vec<Timestamp> = zone
            .following(after)
            .map(|transition| transition.timestamp())
            .take_while(|&t| t <= horizon)
            .collect();
        let mut day = zone.to_datetime(after).date().yesterday().ok();
        for _ in 0..5 {
            let Some(date) = day else { break };
            let local = date.at((self.start / 60) as i8, (self.start % 60) as i8, 0, 0);
            match zone.to_ambiguous_timestamp(local).offset() {
                AmbiguousOffset::Unambiguous { offset } => {
                    candidates.extend(offset.to_timestamp(local).ok());
                }
                AmbiguousOffset::Fold { before, after } => {
                    candidates.extend(before.to_timestamp(local).ok());
                    candidates.extend(after.to_timestamp(local).ok());
                }
                // Skipped wall-clock time: the transition is a candidate.
                AmbiguousOffset::Gap { .. } => {}
            }
            day = date.tomorrow().ok();
        }
        candidates.retain(|&t| t > after);
        candidates.sort();
        candidates
            .into_iter()
            .find(|&t| self.is_active(t, user_zone, host_zone))
    }
}

impl fmt::Display for ActiveHours {
    /// `09:00-17:00 (user time zone)`, `22:00-06:00 (Europe/Berlin)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zone = match &self.zone {
            WindowZone::User => "user time zone",
            WindowZone::Host => "host time zone",
            WindowZone::Named(zone) => zone.iana_name().unwrap_or("named time zone"),
        };
        write!(
            f,
            "{}-{} ({zone})",
            format_minute(self.start),
            format_minute(self.end)
        )
    }
}

fn local_minute(zone: &TimeZone, instant: Timestamp) -> u16 {
    let local = zone.to_datetime(instant);
    local.hour() as u16 * 60 + local.minute() as u16
}

/// `HH:MM` (or `H:MM`) as minutes after midnight; `24:00` only when
/// `allow_end_of_day`.
fn minute_of_day(text: &str, allow_end_of_day: bool) -> Option<u16> {
    let (hours, minutes) = text.trim().split_once(':')?;
    let digits = |s: &str, len: std::ops::RangeInclusive<usize>| {
        (len.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u16>().ok())
            .flatten()
    };
    let hours = digits(hours, 1..=2)?;
    let minutes = digits(minutes, 2..=2)?;
    match (hours, minutes) {
        (24, 0) if allow_end_of_day => Some(MINUTES_PER_DAY),
        (0..=23, 0..=59) => Some(hours * 60 + minutes),
        _ => None,
    }
}

fn format_minute(minute: u16) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_is_the_leading_hash_bytes_modulo_the_interval() {
        // SHA-256("device-1:main") starts 7a102be1 = 2047880161.
        assert_eq!(
            phase_ms("device-1", "main", 1_800_000),
            2_047_880_161 % 1_800_000
        );
        assert_eq!(phase_ms("device-1", "main", 1_800_000), 1_280_161);
        assert_eq!(phase_ms("device-1", "main", u64::MAX), 2_047_880_161);
        // SHA-256("device-1:ops") starts 4c0df81e = 1275983902.
        assert_eq!(phase_ms("device-1", "ops", 3_600_000), 1_583_902);
        assert_eq!(phase_ms("device-1", "main", 0), 0);
        assert_eq!(phase_ms("device-1", "main", 1), 0);
    }

    #[test]
    fn fallback_seed_hashes_home_and_cwd() {
        assert_eq!(
            fallback_seed("/home/ana", "/home/ana/work"),
            "1cbedaf75b49987dbbdf03450ac9b0b5587d6d7bd2ce8b2f43fe6d125246d761"
        );
        assert_ne!(fallback_seed("/a", "b"), fallback_seed("/a\0b", ""));
    }

    #[test]
    fn next_due_slots() {
        let cases: &[(i64, u64, u64, i64)] = &[
            (0, 1_000, 0, 1_000),
            (999, 1_000, 0, 1_000),
            (1_000, 1_000, 0, 2_000),
            (1_000, 1_000, 250, 1_250),
            (1_250, 1_000, 250, 2_250),
            (1_249, 1_000, 250, 1_250),
            (-1, 1_000, 250, 250),
            (-750, 1_000, 250, 250),
            (-751, 1_000, 250, -750),
            (5, 1_000, 1_250, 250),
            (5, 0, 0, 6),
            (i64::MAX - 1, 1_000, 0, i64::MAX),
            (i64::MIN, 1_000, 0, i64::MIN + 808),
        ];
        for &(now, interval, phase, expected) in cases {
            assert_eq!(
                next_due(now, interval, phase),
                expected,
                "{now} {interval} {phase}"
            );
        }
    }

    fn berlin() -> TimeZone {
        TimeZone::get("Europe/Berlin").unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn hours(start: &str, end: &str, zone: Option<&str>) -> ActiveHours {
        let (hours, diagnostics) = ActiveHours::parse(start, end, zone);
        let unexpected: Vec<&String> = diagnostics
            .iter()
            .filter(|d| !d.contains("the window is empty"))
            .collect();
        assert!(unexpected.is_empty(), "{unexpected:?}");
        hours.unwrap()
    }

    #[test]
    fn parsing_times_and_zones() {
        let parsed = hours("08:00", "24:00", None);
        assert_eq!((parsed.start_minute(), parsed.end_minute()), (480, 1440));
        assert_eq!(parsed.to_string(), "08:00-24:00 (user time zone)");
        assert_eq!(hours("9:05", "17:30", Some("user")).start_minute(), 545);
        assert_eq!(hours(" 00:00 ", "23:59", Some("")).end_minute(), 1439);
        assert_eq!(
            hours("22:00", "06:00", Some("LOCAL")).zone(),
            &WindowZone::Host
        );
        assert_eq!(
            hours("22:00", "06:00", Some("Europe/Berlin")).to_string(),
            "22:00-06:00 (Europe/Berlin)"
        );

        for (start, end) in [
            ("24:00", "10:00"),
            ("08:00", "24:01"),
            ("8", "10:00"),
            ("08:60", "10:00"),
            ("08:0", "10:00"),
            ("008:00", "10:00"),
            ("-1:00", "10:00"),
            ("08:00", "25:00"),
            ("08h00", "10:00"),
            ("", "10:00"),
        ] {
            let (parsed, diagnostics) = ActiveHours::parse(start, end, None);
            assert_eq!(parsed, None, "{start}-{end}");
            assert_eq!(diagnostics.len(), 1, "{start}-{end}: {diagnostics:?}");
        }
        let (parsed, diagnostics) = ActiveHours::parse("x", "y", None);
        assert_eq!(parsed, None);
        assert_eq!(
            diagnostics,
            [
                "activeHours start `x` is not a time of day (HH:MM, 00:00 to 23:59); heartbeats run at any hour",
                "activeHours end `y` is not a time of day (HH:MM, 00:00 to 24:00); heartbeats run at any hour",
            ]
        );

        let (parsed, diagnostics) = ActiveHours::parse("08:00", "20:00", Some("Mars/Olympus"));
        assert_eq!(parsed.unwrap().zone(), &WindowZone::User);
        assert_eq!(
            diagnostics,
            [
                "activeHours timezone `Mars/Olympus` is not a known time zone; the user's time zone is used"
            ]
        );

        let (parsed, diagnostics) = ActiveHours::parse("09:00", "9:00", None);
        assert!(parsed.unwrap().is_never());
        assert_eq!(
            diagnostics,
            ["activeHours starts and ends at 09:00: the window is empty, so heartbeats never run"]
        );
    }

    #[test]
    fn windows_by_minute() {
        let cases: &[(&str, &str, &[(u16, bool)])] = &[
            (
                "09:00",
                "17:00",
                &[(539, false), (540, true), (1019, true), (1020, false)],
            ),
            (
                "22:00",
                "06:00",
                &[
                    (1319, false),
                    (1320, true),
                    (0, true),
                    (359, true),
                    (360, false),
                    (720, false),
                ],
            ),
            (
                "08:00",
                "24:00",
                &[(479, false), (480, true), (1439, true), (0, false)],
            ),
            ("00:00", "24:00", &[(0, true), (1439, true)]),
            ("00:00", "00:00", &[(0, false), (720, false)]),
            (
                "12:00",
                "12:00",
                &[(719, false), (720, false), (721, false)],
            ),
            ("23:59", "00:00", &[(1438, false), (1439, true), (0, false)]),
        ];
        for (start, end, checks) in cases {
            let window = hours(start, end, None);
            for &(minute, expected) in *checks {
                assert_eq!(
                    window.contains_minute(minute),
                    expected,
                    "{start}-{end} at {minute}"
                );
            }
        }
    }

    #[test]
    fn zones_decide_the_wall_clock() {
        let utc = TimeZone::UTC;
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        let instant = at("2026-06-01T12:00:00Z"); // 14:00 in Berlin, 21:00 in Tokyo
        let window = hours("13:00", "15:00", None);
        assert!(window.is_active(instant, &berlin(), &utc));
        assert!(!window.is_active(instant, &utc, &berlin()));
        let local = hours("13:00", "15:00", Some("local"));
        assert!(local.is_active(instant, &utc, &berlin()));
        let named = hours("20:00", "22:00", Some("Asia/Tokyo"));
        assert!(named.is_active(instant, &utc, &utc));
        assert!(!hours("20:00", "22:00", None).is_active(instant, &utc, &tokyo));
    }

    #[test]
    fn daylight_saving_days_in_berlin() {
        let utc = TimeZone::UTC;
        // 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
        let spring = hours("02:30", "04:00", Some("Europe/Berlin"));
        assert!(!spring.is_active(at("2026-03-29T00:59:59Z"), &utc, &utc));
        assert!(spring.is_active(at("2026-03-29T01:00:00Z"), &utc, &utc));
        assert_eq!(
            spring.next_active_start(at("2026-03-28T23:00:00Z"), &utc, &utc),
            Some(at("2026-03-29T01:00:00Z"))
        );
        // Same window the day before, at 02:30 CET.
        assert_eq!(
            spring.next_active_start(at("2026-03-28T03:00:00Z"), &utc, &utc),
            Some(at("2026-03-29T01:00:00Z"))
        );
        assert_eq!(
            spring.next_active_start(at("2026-03-27T03:00:00Z"), &utc, &utc),
            Some(at("2026-03-28T01:30:00Z"))
        );

        // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00-03:00 happens twice.
        let fall = hours("01:30", "02:30", Some("Europe/Berlin"));
        assert!(fall.is_active(at("2026-10-25T00:15:00Z"), &utc, &utc)); // 02:15 CEST
        assert!(!fall.is_active(at("2026-10-25T00:45:00Z"), &utc, &utc)); // 02:45 CEST
        assert!(fall.is_active(at("2026-10-25T01:00:00Z"), &utc, &utc)); // 02:00 CET
        assert_eq!(
            fall.next_active_start(at("2026-10-25T00:45:00Z"), &utc, &utc),
            Some(at("2026-10-25T01:00:00Z"))
        );
        let repeated = hours("02:15", "02:20", Some("Europe/Berlin"));
        assert_eq!(
            repeated.next_active_start(at("2026-10-25T00:20:00Z"), &utc, &utc),
            Some(at("2026-10-25T01:15:00Z"))
        );
        // The local day is 25 hours long; a 09:00 start stays at 09:00 CET.
        let morning = hours("09:00", "10:00", Some("Europe/Berlin"));
        assert_eq!(
            morning.next_active_start(at("2026-10-24T08:00:00Z"), &utc, &utc),
            Some(at("2026-10-25T08:00:00Z"))
        );
    }

    #[test]
    fn next_active_start_basics() {
        let utc = TimeZone::UTC;
        let office = hours("09:00", "17:00", None);
        let inside = at("2026-12-01T10:00:00Z");
        assert_eq!(office.next_active_start(inside, &utc, &utc), Some(inside));
        assert_eq!(
            office.next_active_start(at("2026-12-01T17:00:00Z"), &utc, &utc),
            Some(at("2026-12-02T09:00:00Z"))
        );
        assert_eq!(
            office.next_active_start(at("2026-12-01T08:59:59.5Z"), &utc, &utc),
            Some(at("2026-12-01T09:00:00Z"))
        );
        let night = hours("22:00", "06:00", None);
        assert_eq!(
            night.next_active_start(at("2026-12-01T06:00:00Z"), &utc, &utc),
            Some(at("2026-12-01T22:00:00Z"))
        );
        assert_eq!(
            hours("05:00", "05:00", None).next_active_start(inside, &utc, &utc),
            None
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn time_text(max_minute: u16) -> impl Strategy<Value = String> {
            (0..=max_minute).prop_map(format_minute)
        }

        proptest! {
            #[test]
            fn next_due_is_the_next_slot(
                now in any::<i64>(),
                interval in 1u64..=(1 << 40),
                phase in any::<u64>(),
            ) {
                let due = next_due(now, interval, phase);
                prop_assume!(due != i64::MAX);
                let (now, due, interval) = (i128::from(now), i128::from(due), i128::from(interval));
                prop_assert!(due > now);
                prop_assert!(due - now <= interval);
                prop_assert_eq!(due.rem_euclid(interval), i128::from(phase) % interval);
            }

            #[test]
            fn utc_windows_match_the_minute_of_the_day(
                start in time_text(1439),
                end in time_text(1440),
                seconds in -4_000_000_000i64..4_000_000_000,
            ) {
                let window = ActiveHours::parse(&start, &end, Some("UTC")).0.unwrap();
                let minute = (seconds.rem_euclid(86_400) / 60) as u16;
                let (s, e) = (window.start_minute(), window.end_minute());
                let naive = if s < e { s <= minute && minute < e } else if s > e { minute >= s || minute < e } else { false };
                let instant = Timestamp::from_second(seconds).unwrap();
                prop_assert_eq!(window.is_active(instant, &berlin(), &berlin()), naive);
            }

            #[test]
            fn next_active_start_is_the_first_open_instant(
                start in time_text(1439),
                end in time_text(1440),
                seconds in 946_684_800i64..2_208_988_800,
                berlin_zone in any::<bool>(),
            ) {
                let zone = if berlin_zone { berlin() } else { TimeZone::UTC };
                let (window, _) = ActiveHours::parse(&start, &end, None);
                let window = window.unwrap();
                let after = Timestamp::from_second(seconds).unwrap();
                let Some(opens) = window.next_active_start(after, &zone, &zone) else {
                    prop_assert!(window.is_never());
                    return Ok(());
                };
                prop_assert!(opens >= after);
                prop_assert!(window.is_active(opens, &zone, &zone));
                if opens > after {
                    let just_before = opens - SignedDuration::from_secs(1);
                    prop_assert!(!window.is_active(just_before, &zone, &zone));
                    let mut probe = after;
                    while probe < opens {
                        prop_assert!(!window.is_active(probe, &zone, &zone), "open at {} before {}", probe, opens);
                        probe += SignedDuration::from_secs(60);
                    }
                }
            }
        }
    }
}
