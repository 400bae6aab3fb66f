//! When a session starts over (pure; "now" and the host zone are
//! parameters).
//!
//! Policy, as OpenClaw resolves it: a per-channel entry replaces the rest;
//! else the per-type entry (`direct`, `group`, `thread`; `dm` read as
//! `direct`) over `session.reset`; mode `daily` unless only the legacy
//! `session.idleMinutes` is set; daily hour 4 (host-local); idle minutes
//! optional in either mode — whichever comes first.
//!
//! Freshness is evaluated when a message arrives: a session is stale when
//! it started before the last daily reset time (today at the hour, or
//! yesterday's if the hour has not come yet), or when it was idle longer
//! than the idle minutes. Daily compares the session's start, idle its last
//! interaction, so heartbeats and cron bookkeeping do not keep a session
//! alive.

use jiff::ZonedDateTime;
use jiff::tz::TimeZone;

use crate::config::{ResetConfig, SessionConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Daily,
    Idle,
}

/// The reset policy of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub mode: Mode,
    /// 0..=23, host-local.
    pub at_hour: u8,
    /// 0: no idle expiry.
    pub idle_minutes: u32,
}

/// Why a session is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Stale {
    Daily,
    Idle,
}

/// The policy for a session of `chat_type` on `channel`.
pub(crate) fn policy(cfg: &SessionConfig, chat_type: &str, channel: Option<&str>) -> Policy {
    if let Some(per_channel) = channel.and_then(|c| cfg.reset_by_channel.get(c)) {
        return from_entries(per_channel, &ResetConfig::default(), None);
    }
    let by_type = cfg.reset_by_type.get(chat_type).or_else(|| {
        (chat_type == "direct")
            .then(|| cfg.reset_by_type.get("dm"))
            .flatten()
    });
    from_entries(
        by_type.unwrap_or(&ResetConfig::default()),
        &cfg.reset,
        cfg.idle_minutes,
    )
}

fn from_entries(first: &ResetConfig, second: &ResetConfig, legacy_idle: Option<u32>) -> Policy {
    let has_reset_config = first != &ResetConfig::default() || second != &ResetConfig::default();
    let mode = match first.mode.as_deref().or(second.mode.as_deref()) {
        Some("idle") => Mode::Idle,
        Some(_) => Mode::Daily,
        None if !has_reset_config && legacy_idle.is_some() => Mode::Idle,
        None => Mode::Daily,
    };
    let at_hour = first.at_hour.or(second.at_hour).unwrap_or(4).min(23) as u8;
    let idle_minutes = first
        .idle_minutes
        .or(second.idle_minutes)
        .or(legacy_idle)
        .unwrap_or(0);
    Policy {
        mode,
        at_hour,
        idle_minutes,
    }
}

/// The last daily reset time at or before `now`, in `zone`.
pub(crate) fn last_daily_reset(now_ms: i64, at_hour: u8, zone: &TimeZone) -> i64 {
    let Ok(ts) = jiff::Timestamp::from_millisecond(now_ms) else {
        return i64::MIN;
    };
    let now: ZonedDateTime = ts.to_zoned_datetime(zone.clone());
    let today_at = now
        .date()
        .at(at_hour as i8, 0, 0, 0)
        .to_zoned_datetime(zone.clone())
        .map(|z| z.timestamp().as_millisecond());
    match today_at {
        Ok(t) if t <= now_ms => t,
        _ => now
            .date()
            .yesterday()
            .ok()
            .and_then(|d| {
                d.at(at_hour as i8, 0, 0, 0)
                    .to_zoned_datetime(zone.clone())
                    .ok()
            })
            .map_or(i64::MIN, |z| z.timestamp().as_millisecond()),
    }
}

/// Whether a session that started at `started_ms` and was last active at
/// `last_active_ms` is stale at `now_ms`.
pub(crate) fn staleness(
    policy: &Policy,
    started_ms: i64,
    last_active_ms: i64,
    now_ms: i64,
    zone: &TimeZone,
) -> Option<Stale> {
    if policy.mode == Mode::Daily && started_ms < last_daily_reset(now_ms, policy.at_hour, zone) {
        return Some(Stale::Daily);
    }
    if policy.idle_minutes > 0
        && now_ms > last_active_ms.saturating_add(i64::from(policy.idle_minutes) * 60_000)
    {
        return Some(Stale::Idle);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ms(text: &str, zone: &TimeZone) -> i64 {
        text.parse::<jiff::civil::DateTime>()
            .unwrap()
            .to_zoned_datetime(zone.clone())
            .unwrap()
            .timestamp()
            .as_millisecond()
    }

    fn paris() -> TimeZone {
        TimeZone::get("Europe/Paris").unwrap()
    }

    #[test]
    fn daily_reset_at_four_host_local_boundaries() {
        let z = paris();
        let p = Policy {
            mode: Mode::Daily,
            at_hour: 4,
            idle_minutes: 0,
        };
        let started = ms("2026-11-28T22:00", &z);
        // 03:59 the next morning: still yesterday's session.
        assert_eq!(
            staleness(&p, started, started, ms("2026-11-29T03:59:59", &z), &z),
            None
        );
        // 04:00:00 exactly: a new day.
        assert_eq!(
            staleness(&p, started, started, ms("2026-11-29T04:00", &z), &z),
            Some(Stale::Daily)
        );
        // A session started at 04:00 is fresh all day, until 03:59 next day.
        let at_four = ms("2026-11-29T04:00", &z);
        assert_eq!(
            staleness(&p, at_four, at_four, ms("2026-11-30T03:59:59.999", &z), &z),
            None
        );
        assert_eq!(
            staleness(&p, at_four, at_four, ms("2026-11-30T04:00", &z), &z),
            Some(Stale::Daily)
        );
        // Started just before 04:00 is stale one minute later.
        let before = ms("2026-11-29T03:59", &z);
        assert_eq!(
            staleness(&p, before, before, ms("2026-11-29T04:00", &z), &z),
            Some(Stale::Daily)
        );
    }

    #[test]
    fn idle_and_whichever_comes_first() {
        let z = TimeZone::UTC;
        let p = Policy {
            mode: Mode::Daily,
            at_hour: 4,
            idle_minutes: 30,
        };
        let started = ms("2026-11-29T09:00", &z);
        let active = ms("2026-11-29T10:00", &z);
        assert_eq!(
            staleness(&p, started, active, ms("2026-11-29T10:30", &z), &z),
            None,
            "exactly 30 minutes"
        );
        assert_eq!(
            staleness(&p, started, active, ms("2026-11-29T10:30:00.001", &z), &z),
            Some(Stale::Idle)
        );
        // The daily reset comes first when it is earlier.
        let late = ms("2026-11-30T03:50", &z);
        assert_eq!(
            staleness(&p, late, late, ms("2026-11-30T04:01", &z), &z),
            Some(Stale::Daily)
        );
        // Idle mode never resets daily.
        let idle_only = Policy {
            mode: Mode::Idle,
            ..p
        };
        assert_eq!(
            staleness(&idle_only, started, active, ms("2026-11-30T04:05", &z), &z),
            Some(Stale::Idle)
        );
        let idle_only_no_expiry = Policy {
            mode: Mode::Idle,
            idle_minutes: 0,
            ..p
        };
        assert_eq!(
            staleness(
                &idle_only_no_expiry,
                started,
                started,
                ms("2027-01-01T00:00", &z),
                &z
            ),
            None
        );
    }

    #[test]
    fn daylight_saving_days() {
        // 2026-03-29: Paris skips 02:00-03:00; 04:00 still exists.
        let z = paris();
        let started = ms("2026-03-28T23:00", &z);
        assert_eq!(
            last_daily_reset(ms("2026-03-29T05:00", &z), 4, &z),
            ms("2026-03-29T04:00", &z)
        );
        let p = Policy {
            mode: Mode::Daily,
            at_hour: 2,
            idle_minutes: 0,
        };
        // The skipped hour resolves to a real instant; the session resets.
        assert_eq!(
            staleness(&p, started, started, ms("2026-03-29T12:00", &z), &z),
            Some(Stale::Daily)
        );
    }

    #[test]
    fn policy_resolution() {
        let mut cfg = SessionConfig::default();
        assert_eq!(
            policy(&cfg, "direct", None),
            Policy {
                mode: Mode::Daily,
                at_hour: 4,
                idle_minutes: 0
            }
        );
        cfg.idle_minutes = Some(45);
        assert_eq!(
            policy(&cfg, "direct", None).mode,
            Mode::Idle,
            "legacy idle alone means idle mode"
        );
        cfg.reset.at_hour = Some(6);
        let p = policy(&cfg, "direct", None);
        assert_eq!((p.mode, p.at_hour, p.idle_minutes), (Mode::Daily, 6, 45));
        cfg.reset_by_type = BTreeMap::from([(
            "dm".to_string(),
            ResetConfig {
                mode: Some("idle".into()),
                at_hour: None,
                idle_minutes: Some(10),
            },
        )]);
        let p = policy(&cfg, "direct", None);
        assert_eq!((p.mode, p.at_hour, p.idle_minutes), (Mode::Idle, 6, 10));
        assert_eq!(policy(&cfg, "group", None).mode, Mode::Daily);
        cfg.reset_by_channel = BTreeMap::from([(
            "telegram".to_string(),
            ResetConfig {
                mode: None,
                at_hour: Some(23),
                idle_minutes: None,
            },
        )]);
        let p = policy(&cfg, "direct", Some("telegram"));
        assert_eq!(
            (p.mode, p.at_hour, p.idle_minutes),
            (Mode::Daily, 23, 0),
            "a channel entry replaces the rest"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The last daily reset is at most a day before now, never after
            /// it, and at the hour (in the zone).
            #[test]
            fn last_reset_is_within_a_day_and_at_the_hour(now in 0i64..4_000_000_000_000, hour in 0u8..24) {
                let z = paris();
                let r = last_daily_reset(now, hour, &z);
                prop_assert!(r <= now);
                prop_assert!(now - r <= 25 * 3_600_000, "{now} {r}");
                let local = jiff::Timestamp::from_millisecond(r).unwrap().to_zoned_datetime(z.clone());
                // On a day the hour is skipped, it resolves to the next hour.
                prop_assert!(local.hour() == hour as i8 || local.hour() == hour as i8 + 1);
            }

            /// A session active now is never idle-stale, and freshness only
            /// gets worse with time.
            #[test]
            fn staleness_is_monotonic(start in 0i64..2_000_000_000_000, gap in 0i64..200_000_000, more in 0i64..200_000_000, idle in 0u32..3000, hour in 0u8..24) {
                let z = TimeZone::UTC;
                let p = Policy { mode: Mode::Daily, at_hour: hour, idle_minutes: idle };
                let now = start + gap;
                if staleness(&p, start, start, now, &z).is_some() {
                    prop_assert!(staleness(&p, start, start, now + more, &z).is_some());
                }
                let idle_mode = Policy { mode: Mode::Idle, ..p };
                prop_assert!(staleness(&idle_mode, now, now, now, &z).is_none());
            }
        }
    }
}
