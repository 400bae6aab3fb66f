use jiff::Timestamp;
use jiff::tz::TimeZone;
use proptest::prelude::*;

use super::*;

fn zone(name: &str) -> TimeZone {
    TimeZone::get(name).unwrap()
}

fn ms(iso: &str) -> i64 {
    iso.parse::<Timestamp>().unwrap().as_millisecond()
}

fn iso(ms: i64) -> String {
    Timestamp::from_millisecond(ms).unwrap().to_string()
}

/// The next `count` fires as ISO strings.
fn fires(expr: &str, tz: &str, from: &str, count: usize) -> Vec<String> {
    next_fires(expr, &zone(tz), ms(from), count)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .into_iter()
        .map(iso)
        .collect()
}

/// Expected values as the reference library (croner 10) gives them.
#[test]
#[expect(clippy::too_many_lines, reason = "a flat table of reference values")]
fn next_fires_table() {
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "*/15 * * * *",
            "UTC",
            "2026-01-01T00:07:00Z",
            &[
                "2026-01-01T00:15:00Z",
                "2026-01-01T00:30:00Z",
                "2026-01-01T00:45:00Z",
            ],
        ),
        (
            "0 9 * * MON-FRI",
            "Europe/Paris",
            "2026-12-04T12:00:00Z",
            &[
                "2026-12-07T08:00:00Z",
                "2026-12-08T08:00:00Z",
                "2026-12-09T08:00:00Z",
            ],
        ),
        // Both day fields restricted: either matches.
        (
            "0 9 1 * MON",
            "UTC",
            "2026-06-01T10:00:00Z",
            &[
                "2026-06-08T09:00:00Z",
                "2026-06-15T09:00:00Z",
                "2026-06-22T09:00:00Z",
            ],
        ),
        // `+`: both must match (the 1st falling on a Monday).
        (
            "0 9 1 * +MON",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-06-01T09:00:00Z",
                "2027-02-01T09:00:00Z",
                "2027-03-01T09:00:00Z",
            ],
        ),
        (
            "0 0 L * *",
            "UTC",
            "2026-01-31T00:00:00Z",
            &[
                "2026-02-28T00:00:00Z",
                "2026-03-31T00:00:00Z",
                "2026-04-30T00:00:00Z",
            ],
        ),
        (
            "0 0 LW * *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-30T00:00:00Z",
                "2026-02-27T00:00:00Z",
                "2026-03-31T00:00:00Z",
            ],
        ),
        (
            "0 0 15W * *",
            "UTC",
            "2026-02-01T00:00:00Z",
            &[
                "2026-02-16T00:00:00Z",
                "2026-03-16T00:00:00Z",
                "2026-04-15T00:00:00Z",
            ],
        ),
        // 1 February 2026 is a Sunday: the nearest weekday in the month is
        // Monday the 2nd.
        (
            "0 0 1W * *",
            "UTC",
            "2026-02-01T00:00:00Z",
            &[
                "2026-02-02T00:00:00Z",
                "2026-03-02T00:00:00Z",
                "2026-04-01T00:00:00Z",
            ],
        ),
        (
            "0 0 * * 5L",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-30T00:00:00Z",
                "2026-02-27T00:00:00Z",
                "2026-03-27T00:00:00Z",
            ],
        ),
        (
            "0 0 * * MON#2",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-12T00:00:00Z",
                "2026-02-09T00:00:00Z",
                "2026-03-09T00:00:00Z",
            ],
        ),
        (
            "30 */10 9-17 * * *",
            "UTC",
            "2026-01-01T08:59:00Z",
            &[
                "2026-01-01T09:00:30Z",
                "2026-01-01T09:10:30Z",
                "2026-01-01T09:20:30Z",
            ],
        ),
        (
            "0 12 * * 7",
            "Asia/Kolkata",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-04T06:30:00Z",
                "2026-01-11T06:30:00Z",
                "2026-01-18T06:30:00Z",
            ],
        ),
        (
            "@weekly",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-04T00:00:00Z",
                "2026-01-11T00:00:00Z",
                "2026-01-18T00:00:00Z",
            ],
        ),
        (
            "@midnight",
            "America/New_York",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-01T05:00:00Z",
                "2026-01-02T05:00:00Z",
                "2026-01-03T05:00:00Z",
            ],
        ),
        (
            "0 0 29 2 *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2028-02-29T00:00:00Z",
                "2032-02-29T00:00:00Z",
                "2036-02-29T00:00:00Z",
            ],
        ),
        // Never: no next fire, not an error.
        ("0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z", &[]),
        // `L` beside a day: that day and the last.
        (
            "0 9 15L * *",
            "UTC",
            "2026-02-01T00:00:00Z",
            &[
                "2026-02-15T09:00:00Z",
                "2026-02-28T09:00:00Z",
                "2026-03-15T09:00:00Z",
            ],
        ),
        // Only the values a step reaches need be in range.
        (
            "50-70/30 * * * *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-01T00:50:00Z",
                "2026-01-01T01:50:00Z",
                "2026-01-01T02:50:00Z",
            ],
        ),
        (
            "0 0 9 * 1-5/2 *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-01T09:00:00Z",
                "2026-01-02T09:00:00Z",
                "2026-01-03T09:00:00Z",
            ],
        ),
        (
            "0 10 * jan,jul sat-sun",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-03T10:00:00Z",
                "2026-01-04T10:00:00Z",
                "2026-01-10T10:00:00Z",
            ],
        ),
        // The reference's leniencies: an empty `#` is every Friday, and
        // letters after a number are ignored.
        (
            "0 9 * * 5#",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-02T09:00:00Z",
                "2026-01-09T09:00:00Z",
                "2026-01-16T09:00:00Z",
            ],
        ),
        (
            "0 9 5WW * *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-05T09:00:00Z",
                "2026-02-05T09:00:00Z",
                "2026-03-05T09:00:00Z",
            ],
        ),
        // Strictly after, also within a second.
        (
            "*/20 * * * * *",
            "UTC",
            "2026-01-01T00:00:00.500Z",
            &[
                "2026-01-01T00:00:20Z",
                "2026-01-01T00:00:40Z",
                "2026-01-01T00:01:00Z",
            ],
        ),
        (
            "*/20 * * * * *",
            "UTC",
            "2026-01-01T00:00:20Z",
            &[
                "2026-01-01T00:00:40Z",
                "2026-01-01T00:01:00Z",
                "2026-01-01T00:01:20Z",
            ],
        ),
    ];
    for (expr, tz, from, want) in cases {
        assert_eq!(
            fires(expr, tz, from, 3),
            *want,
            "{expr} in {tz} from {from}"
        );
    }
}

/// A day field written `?` does not restrict: Mondays, not every day (the
/// reference reads `?` there as all days, so the OR with Monday is every
/// day).
#[test]
fn a_question_mark_day_field_does_not_restrict() {
    assert_eq!(
        fires("0 9 ? * MON", "UTC", "2026-01-01T00:00:00Z", 2),
        ["2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z"]
    );
    assert_eq!(
        fires("0 9 15 * ?", "UTC", "2026-01-01T00:00:00Z", 2),
        ["2026-01-15T09:00:00Z", "2026-02-15T09:00:00Z"]
    );
    // Elsewhere `?` is `*`.
    assert_eq!(
        fires("0 ? 1 1 *", "UTC", "2026-01-01T05:30:00Z", 2),
        ["2026-01-01T06:00:00Z", "2026-01-01T07:00:00Z"]
    );
}

/// Names belong to their own field: croner-rust would read `MON` in the
/// month field as January; the reference refuses it.
#[test]
fn names_are_read_only_in_their_field() {
    let err = compile("0 9 * MON *").unwrap_err();
    assert_eq!((err.field, err.position), ("month", 4));
    let err = compile("0 9 * * JAN").unwrap_err();
    assert_eq!((err.field, err.position), ("day of week", 5));
}

#[test]
fn errors_name_the_field_and_its_position() {
    let cases: &[(&str, &str, usize, &str)] = &[
        ("61 * * * *", "minute", 1, "61 is out of range 0-59"),
        ("0 61 * * * *", "minute", 2, "61 is out of range 0-59"),
        ("60 * * * * *", "second", 1, "60 is out of range 0-59"),
        ("0 24 * * *", "hour", 2, "24 is out of range 0-23"),
        ("0 0 0 * *", "day of month", 3, "0 is out of range 1-31"),
        ("0 0 32 * *", "day of month", 3, "32 is out of range 1-31"),
        ("0 0 * 13 *", "month", 4, "13 is out of range 1-12"),
        ("0 0 * * 8", "day of week", 5, "8 is out of range 0-7"),
        ("*/0 * * * *", "minute", 1, "a step of 0 is not allowed"),
        (
            "*/61 * * * *",
            "minute",
            1,
            "the step 61 is larger than the field's 60 values",
        ),
        (
            "5/10 * * * *",
            "minute",
            1,
            "`5/10` steps from a single number: write `*/10`, or a range such as `5-59/10`",
        ),
        (
            "/10 * * * *",
            "minute",
            1,
            "`/10` has no start: write `*/10`",
        ),
        ("5-3 * * * *", "minute", 1, "the range `5-3` runs backwards"),
        (
            "1,,2 * * * *",
            "minute",
            1,
            "a value is missing (is there a stray comma?)",
        ),
        ("0 0 * * L", "day of week", 5, "`L` is not a number"),
        (
            "0 0 * * 1#6",
            "day of week",
            5,
            "`#6` must be #1 to #5, or #L for the last",
        ),
        ("0 0 W * *", "day of month", 3, "`W` is not a number"),
        (
            "0 0 1-5W * *",
            "day of month",
            3,
            "`W` cannot be used in a range (`1-5W`)",
        ),
        ("0 0 LW,15 * *", "day of month", 3, "`W` is not a number"),
        (
            "0 0 * * +",
            "day of week",
            5,
            "`+` must be followed by the days of the week to match",
        ),
        ("x * * * *", "minute", 1, "`x` is not allowed in this field"),
        (
            "0 9 * * MONDAY",
            "day of week",
            5,
            "`d` is not allowed in this field",
        ),
        (
            "0 0 1 * * * *",
            "expression",
            0,
            "7 fields: a year field is not supported (write 5 fields, or 6 with a leading second)",
        ),
        (
            "* * * *",
            "expression",
            0,
            "4 fields: a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading second",
        ),
        ("", "expression", 0, "the cron expression is empty"),
        (
            "@reboot",
            "expression",
            0,
            "@reboot is not a schedule: it names an event, not a time",
        ),
        (
            "@often",
            "expression",
            0,
            "1 field: a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading second",
        ),
    ];
    for (expr, field, position, message) in cases {
        let err = compile(expr).expect_err(expr);
        assert_eq!(
            (err.field, err.position, err.message.as_str()),
            (*field, *position, *message),
            "{expr}"
        );
    }
    assert_eq!(
        compile("0 61 * * * *").unwrap_err().to_string(),
        "field 2 (minute): 61 is out of range 0-59"
    );
    assert_eq!(
        compile("* * * *").unwrap_err().to_string(),
        "4 fields: a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading second"
    );
}

#[test]
fn seconds_and_source_are_kept() {
    let six = compile(" 0 0 9 * * * ").unwrap();
    assert!(six.has_seconds());
    assert_eq!(six.as_str(), "0 0 9 * * *");
    assert!(!compile("0 9 * * *").unwrap().has_seconds());
    assert!(!compile("@hourly").unwrap().has_seconds());
}

#[test]
fn previous_fire_is_strictly_before() {
    let utc = zone("UTC");
    let expr = compile("0 9 * * *").unwrap();
    let at_nine = ms("2026-03-10T09:00:00Z");
    assert_eq!(expr.prev_before(at_nine, &utc), Some(at_nine - 86_400_000));
    assert_eq!(expr.prev_before(at_nine + 1, &utc), Some(at_nine));
    assert_eq!(expr.next_after(at_nine - 1, &utc), Some(at_nine));
    assert_eq!(expr.next_after(at_nine, &utc), Some(at_nine + 86_400_000));
    // Nothing before year 1 … and nothing from the year 3000 on.
    let never = compile("0 0 30 2 *").unwrap();
    assert_eq!(never.prev_before(at_nine, &utc), None);
    assert_eq!(expr.next_after(ms("2999-12-31T09:00:00Z"), &utc), None);
}

/// On the night clocks spring forward, a daily job whose time is skipped
/// fires once, moved forward by the gap.
#[test]
fn a_skipped_daily_time_fires_once_moved_by_the_gap() {
    for (tz, day_before, day_start, day_end, want) in [
        (
            "America/New_York",
            "2026-03-07T12:00:00Z",
            "2026-03-08T05:00:00Z",
            "2026-03-09T04:00:00Z",
            "2026-03-08T07:30:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-28T23:00:00Z",
            "2026-03-29T22:00:00Z",
            "2026-03-29T01:30:00Z",
        ),
    ] {
        assert_eq!(fires("30 2 * * *", tz, day_before, 1), [want], "{tz}");
        let on_the_day: Vec<String> = fires("30 2 * * *", tz, day_start, 3)
            .into_iter()
            .filter(|fire| fire.as_str() < day_end)
            .collect();
        assert_eq!(on_the_day, [want], "{tz}");
    }
    // An hourly job at :30 fires at 01:30 and 03:30 (twice, from 02:30
    // moved and the real 03:30, which are the same instant: once).
    assert_eq!(
        fires("30 * * * *", "America/New_York", "2026-03-08T06:00:00Z", 3),
        [
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:30:00Z",
            "2026-03-08T08:30:00Z"
        ]
    );
}

/// On the night clocks fall back, a daily job whose time repeats fires
/// once, in the first pass.
#[test]
fn a_repeated_daily_time_fires_once() {
    for (expr, tz, day_start, want) in [
        (
            "30 1 * * *",
            "America/New_York",
            "2026-11-01T04:00:00Z",
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-24T22:00:00Z",
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
    ] {
        assert_eq!(fires(expr, tz, day_start, 2), want, "{expr} in {tz}");
        // Asked during the second pass, the next fire is the next day's.
        let second_pass = match tz {
            "America/New_York" => "2026-11-01T06:10:00Z",
            _ => "2026-10-25T01:10:00Z",
        };
        assert_eq!(fires(expr, tz, second_pass, 1), [want[1]], "{expr} in {tz}");
    }
    // Every 30 minutes through the repeated hour: 01:00 and 01:30 once
    // each, then 02:00 EST.
    assert_eq!(
        fires(
            "*/30 * * * *",
            "America/New_York",
            "2026-11-01T04:45:00Z",
            4
        ),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-01T07:30:00Z"
        ]
    );
    // Asked inside the second pass, the repeated hour's times are passed
    // over instead of answering a time already gone.
    assert_eq!(
        fires(
            "*/30 * * * *",
            "America/New_York",
            "2026-11-01T06:10:00Z",
            1
        ),
        ["2026-11-01T07:00:00Z"]
    );
    let new_york = zone("America/New_York");
    let every_half_hour = compile("*/30 * * * *").unwrap();
    assert_eq!(
        every_half_hour
            .prev_before(ms("2026-11-01T06:10:00Z"), &new_york)
            .map(iso),
        Some("2026-11-01T05:00:00Z".to_string())
    );
}

/// Several times in a skipped hour: the search from before the gap finds
/// the first, moved forward; from that instant on, the clock reads 03:15
/// and the hour's other times lie behind it, so the next fire is the next
/// day's (as with the reference). croner-rust would skip the hour
/// entirely, as it moves only patterns with a single fixed time (and
/// those to 03:00, not 03:30).
#[test]
fn a_skipped_hour_fires_once_at_its_first_time_moved_forward() {
    assert_eq!(
        fires(
            "15,45 2 * * *",
            "America/New_York",
            "2026-03-08T05:00:00Z",
            3
        ),
        [
            "2026-03-08T07:15:00Z",
            "2026-03-09T06:15:00Z",
            "2026-03-09T06:45:00Z"
        ]
    );
    // Every half hour: 01:30 EST, then 02:00 moved to 03:00 EDT, 03:30.
    assert_eq!(
        fires(
            "*/30 * * * *",
            "America/New_York",
            "2026-03-08T06:15:00Z",
            4
        ),
        [
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
            "2026-03-08T08:00:00Z"
        ]
    );
}

// A brute-force reference for simple five-field expressions in UTC: the
// values of each field are chosen, written out as lists, ranges or steps,
// and the matching minutes are found by walking the calendar.

#[derive(Debug, Clone)]
struct Simple {
    minutes: Vec<u32>,
    hours: Vec<u32>,
    /// `None`: `*`.
    days: Option<Vec<u32>>,
    months: Vec<u32>,
    /// `None`: `*`; 0 is Sunday.
    weekdays: Option<Vec<u32>>,
}

/// A field's values and a way to write them.
fn field(min: u32, max: u32) -> impl Strategy<Value = (Vec<u32>, String)> {
    prop_oneof![
        Just(((min..=max).collect(), "*".to_string())),
        (min..=max).prop_map(|n| (vec![n], n.to_string())),
        (min..=max, min..=max).prop_map(|(a, b)| {
            let (a, b) = (a.min(b), a.max(b));
            ((a..=b).collect(), format!("{a}-{b}"))
        }),
        (1..=(max - min + 1)).prop_map(move |step| {
            (
                (min..=max).step_by(step as usize).collect(),
                format!("*/{step}"),
            )
        }),
        (min..=max, min..=max, 1..=(max - min + 1).min(10)).prop_map(|(a, b, step)| {
            let (a, b) = (a.min(b), a.max(b));
            (
                (a..=b).step_by(step as usize).collect(),
                format!("{a}-{b}/{step}"),
            )
        }),
        prop::collection::btree_set(min..=max, 1..4).prop_map(|set| {
            let values: Vec<u32> = set.into_iter().collect();
            let text = values
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            (values, text)
        }),
    ]
}

fn simple() -> impl Strategy<Value = (Simple, String)> {
    (
        field(0, 59),
        field(0, 23),
        field(1, 31),
        field(1, 12),
        field(0, 6),
    )
        .prop_map(|(minute, hour, day, month, weekday)| {
            let text = format!(
                "{} {} {} {} {}",
                minute.1, hour.1, day.1, month.1, weekday.1
            );
            let simple = Simple {
                minutes: minute.0,
                hours: hour.0,
                days: (day.1 != "*").then_some(day.0),
                months: month.0,
                weekdays: (weekday.1 != "*").then_some(weekday.0),
            };
            (simple, text)
        })
}

impl Simple {
    fn day_matches(&self, date: jiff::civil::Date) -> bool {
        let day = date.day() as u32;
        let weekday = date.weekday().to_sunday_zero_offset() as u32;
        let by_day = self.days.as_ref().map(|d| d.contains(&day));
        let by_weekday = self.weekdays.as_ref().map(|w| w.contains(&weekday));
        match (by_day, by_weekday) {
            (None, None) => true,
            (Some(d), None) => d,
            (None, Some(w)) => w,
            // Both restricted: either (Vixie cron).
            (Some(d), Some(w)) => d || w,
        }
    }

    /// The first matching minute after `after`, within 9 years.
    fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let start = TimeZone::UTC.to_datetime(after);
        let mut date = start.date();
        for _ in 0..(9 * 366) {
            if self.months.contains(&(date.month() as u32)) && self.day_matches(date) {
                for &hour in &self.hours {
                    for &minute in &self.minutes {
                        let at = jiff::tz::Offset::UTC
                            .to_timestamp(date.at(hour as i8, minute as i8, 0, 0))
                            .unwrap();
                        if at > after {
                            return Some(at);
                        }
                    }
                }
            }
            date = date.tomorrow().unwrap();
        }
        None
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn next_after_agrees_with_a_brute_force_walk(
        (reference, text) in simple(),
        start in 1_767_225_600i64..1_893_456_000, // 2026-01-01 .. 2030-01-01
    ) {
        let after = Timestamp::from_second(start).unwrap();
        let expr = compile(&text).unwrap();
        let ours = expr.next_after(after.as_millisecond(), &TimeZone::UTC);
        let want = reference.next_after(after).map(|t| t.as_millisecond());
        // The brute force looks 9 years ahead; anything it finds must be
        // found, and nothing may be found earlier.
        if let Some(want) = want {
            prop_assert_eq!(ours, Some(want), "{} from {}", text, after);
        } else if let Some(ours) = ours {
            prop_assert!(ours - after.as_millisecond() > 8 * 366 * 86_400_000, "{} from {}", text, after);
        }
    }

    #[test]
    fn compile_never_panics_and_names_a_real_field(text in "[0-9*/,#LW?+@a-z -]{0,30}") {
        if let Err(err) = compile(&text) {
            prop_assert!(err.position <= 6);
            prop_assert_eq!(err.position == 0, err.field == "expression");
            prop_assert!(!err.message.contains("prepared"), "{}: {}", text, err);
        }
    }
}

#[test]
fn jobs_with_one_expression_share_its_compiled_copy() {
    let a = compile_shared("17 4 * * 1-5").unwrap();
    let b = compile_shared("17 4 * * 1-5").unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let other = compile_shared("18 4 * * 1-5").unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a, &other));
    // An error is reported each time, never kept as a value.
    assert_eq!(compile_shared("61 * * * *").unwrap_err().field, "minute");
    assert!(compile_shared("61 * * * *").is_err());
    // Past the limit the memo starts afresh but keeps answering.
    for minute in 0..60 {
        for hour in 0..10 {
            compile_shared(&format!("{minute} {hour} * * *")).unwrap();
        }
    }
    let c = compile_shared("17 4 * * 1-5").unwrap();
    assert_eq!(
        c.next_after(0, &jiff::tz::TimeZone::UTC),
        a.next_after(0, &jiff::tz::TimeZone::UTC)
    );
}
