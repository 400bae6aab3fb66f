use jiff::Timestamp;
use proptest::prelude::*;

use super::*;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 86_400_000;

fn ms(iso: &str) -> i64 {
    iso.parse::<Timestamp>().unwrap().as_millisecond()
}

fn cron(expr: &str, tz: Option<&str>, stagger_ms: Option<u64>) -> Schedule {
    Schedule::Cron {
        expr: expr.to_string(),
        tz: tz.map(str::to_string),
        stagger_ms,
    }
}

fn utc() -> TimeZone {
    TimeZone::UTC
}

#[test]
fn zones_resolve_by_name_or_fall_back_to_the_host() {
    let host = TimeZone::get("Europe/Paris").unwrap();
    assert_eq!(resolve_zone(None, &host).unwrap(), host);
    assert_eq!(resolve_zone(Some("  "), &host).unwrap(), host);
    assert_eq!(
        resolve_zone(Some(" Asia/Kolkata "), &host)
            .unwrap()
            .iana_name(),
        Some("Asia/Kolkata")
    );
    let err = resolve_zone(Some("Mars/Base"), &host).unwrap_err();
    assert_eq!(err, ScheduleError::UnknownZone("Mars/Base".to_string()));
    assert_eq!(err.to_string(), "unknown time zone `Mars/Base`");
}

#[test]
fn default_stagger_only_for_recurring_top_of_hour() {
    for (expr, want) in [
        ("0 * * * *", TOP_OF_HOUR_STAGGER_MS),
        ("0 */2 * * *", TOP_OF_HOUR_STAGGER_MS),
        ("0 9-17/2,* * * *", TOP_OF_HOUR_STAGGER_MS),
        ("0 0 * * * *", TOP_OF_HOUR_STAGGER_MS),
        ("  0   *  * * 1-5 ", TOP_OF_HOUR_STAGGER_MS),
        ("0 7 * * *", 0),
        ("5 * * * *", 0),
        ("0 0 7 * * *", 0),
        ("30 0 * * * *", 0),
        ("@hourly", 0),
        ("0 * * * * * *", 0),
        ("", 0),
    ] {
        assert_eq!(default_stagger_ms(expr), want, "{expr:?}");
    }
}

#[test]
fn stagger_offset_is_the_hash_prefix_modulo_the_window() {
    // SHA-256("job-1") begins 0x026ab639 (40 547 897).
    assert_eq!(stagger_offset_ms("job-1", 300_000), 40_547_897 % 300_000);
    assert_eq!(stagger_offset_ms("job-1", u64::MAX), 40_547_897);
    assert_eq!(stagger_offset_ms("job-1", 1), 0);
    assert_eq!(stagger_offset_ms("job-1", 0), 0);
    // Different jobs spread out.
    let offsets: std::collections::BTreeSet<u64> = (0..50)
        .map(|i| stagger_offset_ms(&format!("job-{i}"), 300_000))
        .collect();
    assert!(offsets.len() > 45);
}

#[test]
fn at_runs_until_it_succeeds_after_its_time() {
    let at = Schedule::At { at_ms: 1_000 };
    let next = |last, ok| next_run_ms(&at, "j", last, ok, 0, 5_000, &utc()).unwrap();
    assert_eq!(next(None, false), Some(1_000), "past, never run: still due");
    assert_eq!(next(Some(1_000), false), Some(1_000), "failed: due again");
    assert_eq!(next(Some(1_000), true), None, "done");
    assert_eq!(
        next(Some(500), true),
        Some(1_000),
        "moved after its last run"
    );
}

#[test]
fn every_follows_the_last_run_then_the_anchor_grid() {
    let every = Schedule::Every {
        every_ms: 10 * MINUTE as u64,
        anchor_ms: Some(1_000_000),
    };
    let next = |last, now| next_run_ms(&every, "j", last, true, 0, now, &utc()).unwrap();
    // Before the anchor: the anchor.
    assert_eq!(next(None, 0), Some(1_000_000));
    // On a grid point: the next one (strictly after now).
    assert_eq!(next(None, 1_000_000), Some(1_000_000 + 10 * MINUTE));
    assert_eq!(next(None, 1_000_001), Some(1_000_000 + 10 * MINUTE));
    // The last run plus the interval while that is ahead.
    assert_eq!(
        next(Some(1_234_567), 1_300_000),
        Some(1_234_567 + 10 * MINUTE)
    );
    // Else back on the grid.
    assert_eq!(
        next(Some(1_234_567), 1_000_000 + 25 * MINUTE),
        Some(1_000_000 + 30 * MINUTE)
    );
    // Anchor defaults to the creation time; an interval of 0 is 1 ms.
    let from_creation = Schedule::Every {
        every_ms: 0,
        anchor_ms: None,
    };
    assert_eq!(
        next_run_ms(&from_creation, "j", None, true, 500, 510, &utc()).unwrap(),
        Some(511)
    );
}

#[test]
fn cron_next_run_uses_the_zone_and_the_stagger() {
    let host = TimeZone::get("Europe/Paris").unwrap();
    let now = ms("2026-12-02T07:30:00Z");
    // Exact, in the host's zone (Paris, UTC+1).
    let daily = cron("0 9 * * *", None, None);
    assert_eq!(
        next_run_ms(&daily, "j", None, true, 0, now, &host).unwrap(),
        Some(ms("2026-12-02T08:00:00Z"))
    );
    // In the job's zone.
    let tokyo = cron("0 9 * * *", Some("Asia/Tokyo"), None);
    assert_eq!(
        next_run_ms(&tokyo, "j", None, true, 0, now, &host).unwrap(),
        Some(ms("2026-12-03T00:00:00Z"))
    );
    // Hourly gets the default window: top of the hour plus the job's offset.
    let hourly = cron("0 * * * *", Some("UTC"), None);
    let offset = stagger_offset_ms("job-1", TOP_OF_HOUR_STAGGER_MS) as i64;
    assert_eq!(offset, 40_547_897 % 300_000);
    assert_eq!(
        next_run_ms(&hourly, "job-1", None, true, 0, now, &host).unwrap(),
        Some(ms("2026-12-02T08:00:00Z") + offset)
    );
    // Within the window after the hour, the hour's staggered slot is still
    // ahead.
    let just_after_hour = ms("2026-12-02T08:00:00Z") + 1_000;
    assert_eq!(
        next_run_ms(&hourly, "job-1", None, true, 0, just_after_hour, &host).unwrap(),
        Some(ms("2026-12-02T08:00:00Z") + offset)
    );
    // Past it: the next hour's.
    assert_eq!(
        next_run_ms(
            &hourly,
            "job-1",
            None,
            true,
            0,
            ms("2026-12-02T08:00:00Z") + offset,
            &host
        )
        .unwrap(),
        Some(ms("2026-12-02T09:00:00Z") + offset)
    );
    // An explicit window of 0 keeps it exact.
    let exact = cron("0 * * * *", Some("UTC"), Some(0));
    assert_eq!(
        next_run_ms(&exact, "job-1", None, true, 0, now, &host).unwrap(),
        Some(ms("2026-12-02T08:00:00Z"))
    );
}

#[test]
fn cron_errors_are_reported() {
    let bad_expr = cron("61 * * * *", None, None);
    assert!(matches!(
        next_run_ms(&bad_expr, "j", None, true, 0, 0, &utc()),
        Err(ScheduleError::Expression(_))
    ));
    let bad_zone = cron("0 * * * *", Some("Mars/Base"), None);
    assert_eq!(
        next_run_ms(&bad_zone, "j", None, true, 0, 0, &utc()).unwrap_err(),
        ScheduleError::UnknownZone("Mars/Base".to_string())
    );
    assert!(slots_between(&bad_zone, "j", 0, 0, DAY, &utc(), 10).is_empty());
    assert_eq!(previous_slot_ms(&bad_expr, "j", 0, DAY, &utc()), None);
    // A schedule that never fires has no next run.
    let never = cron("0 0 30 2 *", None, None);
    assert_eq!(
        next_run_ms(&never, "j", None, true, 0, 0, &utc()).unwrap(),
        None
    );
}

#[test]
fn slots_between_lists_missed_slots_in_order() {
    let start = ms("2026-12-02T00:00:00Z");
    let daily = cron("0 9 * * *", Some("UTC"), None);
    assert_eq!(
        slots_between(&daily, "j", 0, start, start + 3 * DAY, &utc(), 10),
        vec![
            start + 9 * HOUR,
            start + DAY + 9 * HOUR,
            start + 2 * DAY + 9 * HOUR
        ]
    );
    // `after` excluded, `until` included, `limit` respected.
    assert_eq!(
        slots_between(
            &daily,
            "j",
            0,
            start + 9 * HOUR,
            start + DAY + 9 * HOUR,
            &utc(),
            10
        ),
        vec![start + DAY + 9 * HOUR]
    );
    assert_eq!(
        slots_between(&daily, "j", 0, start, start + 30 * DAY, &utc(), 2).len(),
        2
    );
    assert!(slots_between(&daily, "j", 0, start, start + 30 * DAY, &utc(), 0).is_empty());
    assert!(slots_between(&daily, "j", 0, start, start, &utc(), 5).is_empty());
    // Staggered.
    let hourly = cron("0 * * * *", Some("UTC"), None);
    let offset = stagger_offset_ms("job-1", TOP_OF_HOUR_STAGGER_MS) as i64;
    assert_eq!(
        slots_between(
            &hourly,
            "job-1",
            0,
            start,
            start + 2 * HOUR + offset,
            &utc(),
            10
        ),
        vec![
            start + offset,
            start + HOUR + offset,
            start + 2 * HOUR + offset
        ]
    );
    // Every: the grid through the anchor.
    let every = Schedule::Every {
        every_ms: 15 * MINUTE as u64,
        anchor_ms: None,
    };
    assert_eq!(
        slots_between(
            &every,
            "j",
            start + 5 * MINUTE,
            start,
            start + HOUR,
            &utc(),
            10
        ),
        vec![
            start + 5 * MINUTE,
            start + 20 * MINUTE,
            start + 35 * MINUTE,
            start + 50 * MINUTE
        ]
    );
    // At: its time when in range.
    let at = Schedule::At {
        at_ms: start + HOUR,
    };
    assert_eq!(
        slots_between(&at, "j", 0, start, start + HOUR, &utc(), 10),
        vec![start + HOUR]
    );
    assert!(slots_between(&at, "j", 0, start + HOUR, start + DAY, &utc(), 10).is_empty());
}

#[test]
fn previous_slot_is_strictly_before() {
    let start = ms("2026-12-02T00:00:00Z");
    let hourly = cron("0 * * * *", Some("UTC"), None);
    let offset = stagger_offset_ms("job-1", TOP_OF_HOUR_STAGGER_MS) as i64;
    let slot = start + HOUR + offset;
    assert_eq!(
        previous_slot_ms(&hourly, "job-1", 0, slot, &utc()),
        Some(start + offset)
    );
    assert_eq!(
        previous_slot_ms(&hourly, "job-1", 0, slot + 1, &utc()),
        Some(slot)
    );
    let every = Schedule::Every {
        every_ms: 10,
        anchor_ms: Some(100),
    };
    assert_eq!(previous_slot_ms(&every, "j", 0, 100, &utc()), None);
    assert_eq!(previous_slot_ms(&every, "j", 0, 101, &utc()), Some(100));
    assert_eq!(previous_slot_ms(&every, "j", 0, 120, &utc()), Some(110));
    let at = Schedule::At { at_ms: 50 };
    assert_eq!(previous_slot_ms(&at, "j", 0, 50, &utc()), None);
    assert_eq!(previous_slot_ms(&at, "j", 0, 51, &utc()), Some(50));
}

/// The retries guard against an evaluator that answers a time not after
/// its argument: from the next second, then from the next UTC midnight.
#[test]
fn first_future_retries_from_the_next_second_then_midnight() {
    let cursor = ms("2026-11-01T06:10:00.250Z");
    // Answers its argument rounded down to the hour: in the past until
    // asked from a later hour.
    let stale = |from: i64| Some(from.div_euclid(HOUR) * HOUR);
    assert_eq!(
        first_future(cursor, stale),
        Some(ms("2026-11-02T00:00:00Z"))
    );
    // Right from the next second.
    let asked = std::cell::RefCell::new(Vec::new());
    let second = |from: i64| {
        asked.borrow_mut().push(from);
        Some(if from == cursor { cursor } else { from + 5 })
    };
    assert_eq!(
        first_future(cursor, second),
        Some(ms("2026-11-01T06:10:01.005Z"))
    );
    assert_eq!(asked.borrow().len(), 2);
    // Nothing at all: no retries.
    let calls = std::cell::Cell::new(0);
    let none = |_| {
        calls.set(calls.get() + 1);
        None
    };
    assert_eq!(first_future(cursor, none), None);
    assert_eq!(calls.get(), 1);
    // Never in the future.
    assert_eq!(first_future(cursor, |_| Some(0)), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The next run is the first slot after now, and the previous slot
    /// before it is at most now.
    #[test]
    fn next_run_previous_slot_and_slots_agree(
        expr in prop::sample::select(vec![
            "0 * * * *", "*/7 * * * *", "30 2 * * *", "0 9 * * 1-5", "0 0 0 * * *",
            "15 */3 * * *", "0 0 L * *", "0 12 * * 5L",
        ]),
        tz in prop::sample::select(vec!["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]),
        job in "[a-z0-9-]{1,12}",
        now in 1_767_225_600_000i64..1_830_297_600_000, // 2026 .. 2028
    ) {
        let schedule = cron(expr, Some(tz), None);
        let next = next_run_ms(&schedule, &job, None, true, 0, now, &utc()).unwrap().unwrap();
        prop_assert!(next > now);
        let listed = slots_between(&schedule, &job, 0, now, next, &utc(), 5);
        prop_assert_eq!(listed, vec![next]);
        let previous = previous_slot_ms(&schedule, &job, 0, next, &utc()).unwrap();
        prop_assert!(previous < next);
        // Looking back can find a time a spring-forward moved past `now`
        // (asked at 03:10 on that night, 02:30 moved to 03:30 is passed
        // over going forward), so the bound holds where clocks never jump.
        if tz == "UTC" {
            prop_assert!(previous <= now, "{} {} {}", previous, now, next);
        }
    }
}

#[test]
fn prepared_slots_walk_the_same_slots_as_slots_between() {
    let host = TimeZone::get("Europe/Berlin").unwrap();
    let schedules = [
        Schedule::At {
            at_ms: 1_800_000_000_000,
        },
        Schedule::Every {
            every_ms: 90_000,
            anchor_ms: Some(1_799_999_000_000),
        },
        Schedule::Cron {
            expr: "0 * * * *".into(),
            tz: None,
            stagger_ms: None,
        },
        Schedule::Cron {
            expr: "*/7 30 2 * * *".into(),
            tz: Some("America/New_York".into()),
            stagger_ms: Some(0),
        },
    ];
    let from = 1_799_990_000_000;
    let until = from + 3 * 86_400_000;
    for schedule in &schedules {
        let listed = slots_between(schedule, "job-1", from, from, until, &host, 500);
        let prepared = Slots::new(schedule, "job-1", from, &host).unwrap();
        let mut walked = Vec::new();
        let mut cursor = from;
        while let Some(slot) = prepared.next_after(cursor).filter(|&s| s <= until) {
            walked.push(slot);
            if walked.len() == 500 {
                break;
            }
            cursor = slot;
        }
        assert_eq!(walked, listed, "{schedule:?}");
        if let Some(&last) = listed.last() {
            assert_eq!(
                prepared.previous_before(last + 1),
                Some(last),
                "{schedule:?}"
            );
        }
    }
}
