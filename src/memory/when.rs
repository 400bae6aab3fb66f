//! Time ranges in queries and in `--since` / `--until` values.
//!
//! Pure: "today" is a parameter. A range is a span of calendar days in the
//! user's zone, inclusive at both ends, either end open.
//!
//! In a query, the first time expression found is taken out of the text
//! and becomes the range: ISO days and months (`2025-11-27`, `2025-11`),
//! dates in words (`Nov 27`, `27 November 2025`, `October 13, 2023`),
//! months and years after a preposition (`in March 2024`, `during 2023`,
//! `in June`), and relative phrases (`today`, `yesterday`, `last week`,
//! `this month`, `past 3 days`, `2 weeks ago`). A preposition in front
//! shapes the range: `since` / `after` / `before` / `until` open one end,
//! `around` widens a day by three days each way, `between X and Y` spans
//! both. A date without a year is its latest occurrence not after today; a
//! bare month name or year needs a preposition (`may` is usually a verb and
//! `2024` an ordinary number).

use jiff::civil::Date;
use jiff::{Span, ToSpan};

/// Calendar days, inclusive; `None` is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DayRange {
    pub since: Option<Date>,
    pub until: Option<Date>,
}

impl serde::Serialize for DayRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("DayRange", 2)?;
        st.serialize_field("since", &self.since.map(|d| d.to_string()))?;
        st.serialize_field("until", &self.until.map(|d| d.to_string()))?;
        st.end()
    }
}

impl DayRange {
    pub(crate) fn contains(&self, day: Date) -> bool {
        self.since.is_none_or(|s| day >= s) && self.until.is_none_or(|u| day <= u)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.since.is_none() && self.until.is_none()
    }

    /// Both ranges at once (`None` when they do not overlap).
    pub(crate) fn intersect(&self, other: &DayRange) -> Option<DayRange> {
        let since = match (self.since, other.since) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let until = match (self.until, other.until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (since, until) {
            (Some(s), Some(u)) if s > u => None,
            _ => Some(DayRange { since, until }),
        }
    }
}

/// A time expression found in a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub range: DayRange,
    /// The words taken out, as written.
    pub phrase: String,
    /// The query without them.
    pub rest: String,
}

/// The first time expression in `query`, relative to `today`.
pub(crate) fn find_in_query(query: &str, today: Date) -> Option<Found> {
    let words = words(query);
    for start in 0..words.len() {
        if let Some((range, end)) = expression_at(&words, start, today) {
            let from = words[start].start;
            let to = words[end - 1].end;
            let mut rest = String::with_capacity(query.len());
            rest.push_str(query[..from].trim_end());
            let next = query[to..].trim_start().chars().next();
            if !rest.is_empty()
                && next.is_some_and(|c| c.is_alphanumeric() || c == '\'' || c == '"')
            {
                rest.push(' ');
            }
            rest.push_str(query[to..].trim_start());
            return Some(Found {
                range,
                phrase: query[from..to].to_string(),
                rest,
            });
        }
    }
    None
}

/// Parses a `--since` (`end = false`) or `--until` (`end = true`) value:
/// a date (`2025-11-27`), month (`2025-11`) or year (`2025`), an age
/// (`30d`, `2w`, `6m`, `1y`), or a phrase (`yesterday`, `last week`,
/// `March 2024`). A span gives its first day for `--since` and its last
/// for `--until`.
pub(crate) fn parse_bound(text: &str, today: Date, end: bool) -> Result<Date, String> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || {
        format!(
            "cannot read `{text}` as a time: use a date (2025-11-27), month (2025-11), year (2025), age (30d, 2w, 6m, 1y) or phrase (yesterday, last week, March 2024)"
        )
    };
    if let Some((n, unit)) = split_age(&t) {
        let too_far = || {
            format!(
                "`{text}` reaches back past {}, the earliest date almanac handles",
                Date::MIN
            )
        };
        let n = n.ok_or_else(too_far)?;
        let span = match unit {
            'd' => Span::new().try_days(n),
            'w' => Span::new().try_weeks(n),
            'm' => Span::new().try_months(n),
            _ => Span::new().try_years(n),
        };
        return span
            .ok()
            .and_then(|span| today.checked_sub(span).ok())
            .ok_or_else(too_far);
    }
    if let Ok(year) = t.parse::<i16>()
        && (1000..=9999).contains(&year)
    {
        let range = year_range(year).ok_or_else(bad)?;
        return Ok(if end { range.1 } else { range.0 });
    }
    let words = words(&t);
    let (range, used) = span_at(&words, 0, today, true).ok_or_else(bad)?;
    if used != words.len() {
        return Err(bad());
    }
    Ok(if end { range.1 } else { range.0 })
}

/// `30d` → (Some(30), 'd'): digits and a unit; `None` when the number is
/// too large to hold.
fn split_age(t: &str) -> Option<(Option<i64>, char)> {
    let unit = t.chars().last()?;
    let digits = &t[..t.len() - unit.len_utf8()];
    if !matches!(unit, 'd' | 'w' | 'm' | 'y')
        || digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((digits.parse().ok(), unit))
}

#[derive(Debug, Clone)]
struct Word {
    /// Lowercase, without surrounding punctuation.
    text: String,
    start: usize,
    end: usize,
}

/// Words with their byte spans; `,` `.` `?` `!` and brackets separate.
fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    let flush = |out: &mut Vec<Word>, s: usize, e: usize| {
        let raw = &text[s..e];
        let trimmed = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if trimmed.is_empty() {
            return;
        }
        let offset = raw.find(trimmed).unwrap_or(0);
        // `yesterday's` reads as `yesterday`.
        let lower = trimmed.to_lowercase();
        let text = lower
            .strip_suffix("'s")
            .or_else(|| lower.strip_suffix("\u{2019}s"))
            .unwrap_or(&lower)
            .to_string();
        out.push(Word {
            text,
            start: s + offset,
            end: s + offset + trimmed.len(),
        });
    };
    for (i, c) in text.char_indices() {
        let separator = c.is_whitespace() || matches!(c, ',' | '?' | '!' | ';' | '(' | ')' | '"');
        match (separator, start) {
            (true, Some(s)) => {
                flush(&mut out, s, i);
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        flush(&mut out, s, text.len());
    }
    out
}

/// A time expression starting at word `i`: the range and the index after
/// its last word.
fn expression_at(words: &[Word], i: usize, today: Date) -> Option<(DayRange, usize)> {
    let first = words[i].text.as_str();
    let closed = |(a, b): (Date, Date)| DayRange {
        since: Some(a),
        until: Some(b),
    };
    match first {
        "since" | "after" | "before" | "until" | "till" | "around" | "in" | "on" | "during"
        | "within" => {
            let (span, end) = span_at(words, i + 1, today, true)?;
            let range = match first {
                "since" => DayRange {
                    since: Some(span.0),
                    until: None,
                },
                "after" => DayRange {
                    since: span.1.checked_add(1.day()).ok(),
                    until: None,
                },
                "before" => DayRange {
                    since: None,
                    until: span.0.checked_sub(1.day()).ok(),
                },
                "until" | "till" => DayRange {
                    since: None,
                    until: Some(span.1),
                },
                "around" => DayRange {
                    since: span.0.checked_sub(3.days()).ok(),
                    until: span.1.checked_add(3.days()).ok(),
                },
                _ => closed(span),
            };
            Some((range, end))
        }
        "between" | "from" => {
            let (a, mid) = span_at(words, i + 1, today, true)?;
            if !matches!(
                words.get(mid).map(|w| w.text.as_str()),
                Some("and" | "to" | "until")
            ) {
                // `from X` alone is X.
                return (first == "from").then_some((closed(a), mid));
            }
            let (b, end) = span_at(words, mid + 1, today, true)?;
            Some((closed((a.0.min(b.0), a.1.max(b.1))), end))
        }
        _ => {
            let (span, end) = span_at(words, i, today, false)?;
            Some((closed(span), end))
        }
    }
}

/// A span of days at word `i`. `after_preposition` allows the forms that
/// are too ambiguous alone (a bare month name or year).
fn span_at(
    words: &[Word],
    i: usize,
    today: Date,
    after_preposition: bool,
) -> Option<((Date, Date), usize)> {
    let w = |k: usize| words.get(k).map(|w| w.text.as_str());
    let first = w(i)?;
    // ISO day or month.
    if let Some(span) = iso(first) {
        return Some((span, i + 1));
    }
    match first {
        "today" => return Some(((today, today), i + 1)),
        "yesterday" => {
            let d = today.checked_sub(1.day()).ok()?;
            return Some(((d, d), i + 1));
        }
        "this" | "last" | "past" | "previous" => {
            if let Some(unit) = w(i + 1).and_then(unit_of) {
                let span = calendar_unit(today, unit, if first == "this" { 0 } else { 1 })?;
                let span = if first == "this" {
                    (span.0, today)
                } else {
                    span
                };
                return Some((span, i + 2));
            }
            if first != "this"
                && let Some(n) = w(i + 1).and_then(number)
                && let Some(unit) = w(i + 2).and_then(unit_of)
            {
                // `past 3 days`: the last n units up to today.
                let start = match unit {
                    Unit::Day => today.checked_sub((n - 1).days()).ok()?,
                    Unit::Week => today.checked_sub((n * 7 - 1).days()).ok()?,
                    Unit::Month => today
                        .checked_sub(n.months())
                        .ok()?
                        .checked_add(1.day())
                        .ok()?,
                    Unit::Year => today
                        .checked_sub(n.years())
                        .ok()?
                        .checked_add(1.day())
                        .ok()?,
                };
                return Some(((start, today), i + 3));
            }
            return None;
        }
        _ => {}
    }
    // `3 days ago`, `2 weeks ago`.
    if let Some(n) = number(first)
        && let Some(unit) = w(i + 1).and_then(unit_of)
        && w(i + 2) == Some("ago")
    {
        return Some((calendar_unit(today, unit, n)?, i + 3));
    }
    // `Nov 27[, 2025]`, `November 27th 2025`.
    if let Some(month) = month_of(first) {
        if let Some(day) = w(i + 1).and_then(day_of_month) {
            if let Some(year) = w(i + 2).and_then(year_of) {
                let d = Date::new(year, month, day).ok()?;
                return Some(((d, d), i + 3));
            }
            let d = latest(today, month, day)?;
            return Some(((d, d), i + 2));
        }
        if let Some(year) = w(i + 1).and_then(year_of) {
            return Some((month_range(year, month)?, i + 2));
        }
        if after_preposition && (first != "may" || words[i].text.len() == 3) {
            let year = if month <= today.month() {
                today.year()
            } else {
                today.year() - 1
            };
            let (first_day, last_day) = month_range(year, month)?;
            return Some(((first_day, last_day.min(today)), i + 1));
        }
        return None;
    }
    // `27 November 2025`, `13th of October`.
    if let Some(day) = day_of_month(first) {
        let mut k = i + 1;
        if w(k) == Some("of") {
            k += 1;
        }
        if let Some(month) = w(k).and_then(month_of) {
            if let Some(year) = w(k + 1).and_then(year_of) {
                let d = Date::new(year, month, day).ok()?;
                return Some(((d, d), k + 2));
            }
            let d = latest(today, month, day)?;
            return Some(((d, d), k + 1));
        }
    }
    if after_preposition && let Some(year) = year_of(first) {
        return Some((year_range(year)?, i + 1));
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Day,
    Week,
    Month,
    Year,
}

fn unit_of(word: &str) -> Option<Unit> {
    match word {
        "day" | "days" => Some(Unit::Day),
        "week" | "weeks" => Some(Unit::Week),
        "month" | "months" => Some(Unit::Month),
        "year" | "years" => Some(Unit::Year),
        _ => None,
    }
}

/// The calendar day, week (Monday first), month or year `back` units
/// before the one holding `today`.
fn calendar_unit(today: Date, unit: Unit, back: i64) -> Option<(Date, Date)> {
    match unit {
        Unit::Day => {
            let d = today.checked_sub(back.days()).ok()?;
            Some((d, d))
        }
        Unit::Week => {
            let monday = today
                .checked_sub(i64::from(today.weekday().to_monday_zero_offset()).days())
                .ok()?
                .checked_sub((back * 7).days())
                .ok()?;
            Some((monday, monday.checked_add(6.days()).ok()?))
        }
        Unit::Month => {
            let d = today.first_of_month().checked_sub(back.months()).ok()?;
            Some((d, d.last_of_month()))
        }
        Unit::Year => year_range(i16::try_from(i64::from(today.year()) - back).ok()?),
    }
}

fn number(word: &str) -> Option<i64> {
    let n = match word {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        _ => word.parse().ok()?,
    };
    (1..=1000).contains(&n).then_some(n)
}

fn iso(word: &str) -> Option<(Date, Date)> {
    let parts: Vec<&str> = word.split('-').collect();
    let all_digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [y, m, d] if all_digits(y, 4) && all_digits(m, 2) && all_digits(d, 2) => {
            let d = Date::new(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?).ok()?;
            Some((d, d))
        }
        [y, m] if all_digits(y, 4) && all_digits(m, 2) => {
            month_range(y.parse().ok()?, m.parse().ok()?)
        }
        _ => None,
    }
}

fn month_of(word: &str) -> Option<i8> {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let word = word.strip_suffix('.').unwrap_or(word);
    if word.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| {
            *m == word
                || (word.len() == 3 && m.starts_with(word))
                || (word == "sept" && *m == "september")
        })
        .map(|i| i as i8 + 1)
}

fn day_of_month(word: &str) -> Option<i8> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") || digits.is_empty() || digits.len() > 2 {
        return None;
    }
    let day: i8 = digits.parse().ok()?;
    (1..=31).contains(&day).then_some(day)
}

fn year_of(word: &str) -> Option<i16> {
    if word.len() != 4 {
        return None;
    }
    let year: i16 = word.parse().ok()?;
    (1900..=2200).contains(&year).then_some(year)
}

fn month_range(year: i16, month: i8) -> Option<(Date, Date)> {
    let first = Date::new(year, month, 1).ok()?;
    Some((first, first.last_of_month()))
}

fn year_range(year: i16) -> Option<(Date, Date)> {
    Some((Date::new(year, 1, 1).ok()?, Date::new(year, 12, 31).ok()?))
}

/// The latest `month`/`day` not after `today` (a day that does not exist in
/// a year, such as 29 February, is looked for in earlier years).
fn latest(today: Date, month: i8, day: i8) -> Option<Date> {
    (0..8)
        .filter_map(|back| Date::new(today.year() - back, month, day).ok())
        .find(|d| *d <= today)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    const TODAY: Date = date(2026, 11, 29); // a Sunday

    fn range(query: &str) -> Option<(Option<String>, Option<String>, String)> {
        find_in_query(query, TODAY).map(|f| {
            (
                f.range.since.map(|d| d.to_string()),
                f.range.until.map(|d| d.to_string()),
                f.rest,
            )
        })
    }

    fn span(a: &str, b: &str, rest: &str) -> Option<(Option<String>, Option<String>, String)> {
        Some((Some(a.to_string()), Some(b.to_string()), rest.to_string()))
    }

    #[test]
    fn expressions_in_queries() {
        let cases: &[(&str, Option<(Option<String>, Option<String>, String)>)] = &[
            (
                "what happened on 2025-11-27",
                span("2025-11-27", "2025-11-27", "what happened"),
            ),
            (
                "deploys 2025-11",
                span("2025-11-01", "2025-11-30", "deploys"),
            ),
            (
                "standup notes in March 2024",
                span("2024-03-01", "2024-03-31", "standup notes"),
            ),
            (
                "what was true during November 2025?",
                span("2025-11-01", "2025-11-30", "what was true?"),
            ),
            ("gym in June", span("2026-06-01", "2026-06-30", "gym")),
            ("gym in December", span("2025-12-01", "2025-12-31", "gym")),
            ("budget in 2023", span("2023-01-01", "2023-12-31", "budget")),
            (
                "dentist last week",
                span("2026-11-16", "2026-11-22", "dentist"),
            ),
            (
                "dentist this week",
                span("2026-11-23", "2026-11-29", "dentist"),
            ),
            (
                "invoices last month",
                span("2026-10-01", "2026-10-31", "invoices"),
            ),
            ("trips last year", span("2025-01-01", "2025-12-31", "trips")),
            (
                "notes from yesterday",
                span("2026-11-28", "2026-11-28", "notes"),
            ),
            (
                "from 2024-01 to 2024-02 trips",
                span("2024-01-01", "2024-02-29", "trips"),
            ),
            (
                "yesterday's standup",
                span("2026-11-28", "2026-11-28", "standup"),
            ),
            ("past 3 days", span("2026-11-27", "2026-11-29", "")),
            ("2 weeks ago", span("2026-11-09", "2026-11-15", "")),
            ("4 years ago", span("2022-01-01", "2022-12-31", "")),
            ("around Nov 27", span("2026-11-24", "2026-11-30", "")),
            (
                "Peter in Marrakech around Nov 27, 2025",
                span("2025-11-24", "2025-11-30", "Peter in Marrakech"),
            ),
            (
                "painting on October 13, 2023",
                span("2023-10-13", "2023-10-13", "painting"),
            ),
            (
                "store on 1 February, 2023",
                span("2023-02-01", "2023-02-01", "store"),
            ),
            (
                "the 13th of October",
                span("2026-10-13", "2026-10-13", "the"),
            ),
            (
                "since 2026-11-01 deploys",
                Some((Some("2026-11-01".into()), None, "deploys".into())),
            ),
            (
                "before March 2024",
                Some((None, Some("2024-02-29".into()), "".into())),
            ),
            (
                "after 2024",
                Some((Some("2025-01-01".into()), None, "".into())),
            ),
            (
                "between 2024-01 and 2024-03",
                span("2024-01-01", "2024-03-31", ""),
            ),
            ("Feb 29", span("2024-02-29", "2024-02-29", "")),
            // Not time expressions.
            ("may I see the budget", None),
            ("ticket 2024 was closed", None),
            ("march to the office", None),
            ("the last one", None),
            ("room 12 on floor 3", None),
        ];
        for (query, want) in cases {
            assert_eq!(&range(query), want, "{query}");
        }
    }

    #[test]
    fn bounds() {
        let ok = |t: &str, end: bool| parse_bound(t, TODAY, end).unwrap().to_string();
        assert_eq!(ok("2025-11-27", false), "2025-11-27");
        assert_eq!(ok("2025-11", false), "2025-11-01");
        assert_eq!(ok("2025-11", true), "2025-11-30");
        assert_eq!(ok("2025", true), "2025-12-31");
        assert_eq!(ok("30d", false), "2026-10-30");
        assert_eq!(ok("2w", false), "2026-11-15");
        assert_eq!(ok("1y", false), "2025-11-29");
        assert_eq!(ok("yesterday", true), "2026-11-28");
        assert_eq!(ok("last week", false), "2026-11-16");
        assert_eq!(ok("March 2024", true), "2024-03-31");
        for bad in ["", "soon", "2025-13", "x1d", "last", "-3d", "1.5y"] {
            assert!(parse_bound(bad, TODAY, false).is_err(), "{bad}");
        }
        // Ages beyond the calendar are refused, whatever their size.
        for far in [
            "20000y",
            "99999y",
            "240000m",
            "9000000d",
            "2000000w",
            "99999999999999999999999d",
        ] {
            for end in [false, true] {
                let err = parse_bound(far, TODAY, end).unwrap_err();
                assert!(err.contains("earliest date"), "{far}: {err}");
            }
        }
        assert_eq!(ok("10000y", false), "-007974-11-29");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_date() -> impl Strategy<Value = Date> {
            (1990i16..2100, 1i8..=12, 1i8..=28).prop_map(|(y, m, d)| date(y, m, d))
        }

        /// Any day the calendar holds, its ends included.
        fn any_day_at_all() -> impl Strategy<Value = Date> {
            prop_oneof![
                Just(Date::MIN),
                Just(Date::MAX),
                (-9999i16..=9999, 1i8..=12, 1i8..=28).prop_map(|(y, m, d)| date(y, m, d)),
            ]
        }

        /// Text shaped like the values people type, numbers of any size.
        fn bound_text() -> impl Strategy<Value = String> {
            prop_oneof![
                ".{0,40}",
                (any::<u64>(), "[dwmyDWMY ]").prop_map(|(n, u)| format!("{n}{u}")),
                (any::<u128>(), "[dwmy]").prop_map(|(n, u)| format!("{n}{u}")),
                (
                    any::<i64>(),
                    prop::sample::select(vec!["days ago", "weeks ago", "years ago"])
                )
                    .prop_map(|(n, u)| format!("{n} {u}")),
                (
                    any::<u32>(),
                    prop::sample::select(vec![
                        "past", "last", "since", "after", "before", "around"
                    ]),
                    prop::sample::select(vec!["days", "weeks", "months", "years"])
                )
                    .prop_map(|(n, p, u)| format!("{p} {n} {u}")),
                (any::<i32>(), 0u8..14, 0u8..40)
                    .prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}")),
            ]
        }

        proptest! {
            #[test]
            fn never_panics(query in ".{0,80}", today in any_date()) {
                let _ = find_in_query(&query, today);
                let _ = parse_bound(&query, today, true);
            }

            /// Whatever the value and whatever "today" is (the calendar's
            /// first and last days included): a day or a clear error,
            /// never a panic; an age never lands after today.
            #[test]
            fn bounds_never_panic(text in bound_text(), today in any_day_at_all(), end in any::<bool>()) {
                let _ = find_in_query(&text, today);
                let _ = find_in_query(&format!("notes from {text} about work"), today);
                if let Ok(day) = parse_bound(&text, today, end)
                    && split_age(&text.trim().to_ascii_lowercase()).is_some()
                {
                    prop_assert!(day <= today, "{text}: {day} after {today}");
                }
            }

            /// A day written any of the usual ways is inside its own range,
            /// and the range is one day.
            #[test]
            fn written_days_give_that_day(day in any_date(), today in any_date(), style in 0usize..4) {
                let month = ["January", "February", "March", "April", "May", "June", "July",
                    "August", "September", "October", "November", "December"][day.month() as usize - 1];
                let text = match style {
                    0 => day.to_string(),
                    1 => format!("{month} {}, {}", day.day(), day.year()),
                    2 => format!("{} {month} {}", day.day(), day.year()),
                    _ => format!("{} {}th {}", &month[..3], day.day(), day.year()),
                };
                let query = format!("what did we do on {text} at the office");
                let found = find_in_query(&query, today).expect("found");
                prop_assert_eq!(found.range, DayRange { since: Some(day), until: Some(day) });
                prop_assert_eq!(found.rest, "what did we do at the office");
            }

            /// Relative phrases never reach past today, and start before
            /// they end.
            #[test]
            fn relative_ranges_are_ordered_and_not_in_the_future(
                today in any_date(),
                phrase in prop::sample::select(vec!["today", "yesterday", "last week", "this week",
                    "last month", "this month", "last year", "this year", "past 10 days",
                    "last 2 weeks", "3 months ago", "a year ago", "in March", "around Feb 3"]),
            ) {
                let found = find_in_query(phrase, today).expect("found");
                let (s, u) = (found.range.since.unwrap(), found.range.until.unwrap());
                prop_assert!(s <= u, "{phrase}: {s} > {u}");
                if phrase != "around Feb 3" {
                    prop_assert!(u <= today, "{phrase}: {u} after {today}");
                }
            }
        }
    }
}
