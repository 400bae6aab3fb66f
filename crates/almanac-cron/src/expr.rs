//! Cron expressions with the semantics of the `croner` JavaScript library
//! (version 10), which the OpenClaw cron jobs almanac reads were written
//! for.
//!
//! Grammar: five fields (`minute hour day-of-month month day-of-week`), or
//! six with a leading `second`, separated by whitespace; or a nickname
//! (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`). In each field: `*`, a number, a range `a-b`, a step `*/n`
//! or `a-b/n`, and comma lists of those; `?` means `*`. Months and days of
//! the week also take English names (`JAN`, `mon-fri`); the day of the
//! week runs 0–7, both 0 and 7 being Sunday. Day of month: `L` (the last
//! day), `LW` (the last weekday, alone), `15W` (the weekday nearest the
//! 15th, never leaving the month). Day of week: `5L` (the last Friday),
//! `MON#2` (the second Monday), and a leading `+` that joins the two day
//! fields with AND. Without `+`, when both day fields are restricted a day
//! matches either (Vixie cron's OR); a day field that is `*` or `?` does
//! not restrict.
//!
//! What the reference library accepts is accepted here with the same
//! meaning, including its leniencies (a number followed by stray letters
//! it allows, as in `5WW`); what it refuses is refused, with an
//! [`ExprError`] naming the field. Two deliberate differences: a year
//! field (a seventh field) is refused, and a day field written exactly `?`
//! does not restrict, so `0 9 ? * MON` means Mondays (the reference reads
//! it as every day).
//!
//! The fields are checked and expanded here, then handed to the `croner`
//! crate in a plain form it reads the same way (numbers, `L`, `LW`, `nW`,
//! `d#n`, `dL`); its search walks the wall clock. How a wall-clock time
//! becomes an instant, across daylight-saving changes, is the rule of the
//! `wall` module: a time a spring-forward skips moves forward by the gap,
//! a time a fall-back repeats fires in its first pass.

use std::fmt;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::wall::Slot;

/// Why an expression was refused: the field and its place in the
/// expression as written, or the whole expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// `"second"`, `"minute"`, `"hour"`, `"day of month"`, `"month"`,
    /// `"day of week"`, or `"expression"` for the expression as a whole.
    pub field: &'static str,
    /// The field's place in the expression as written, from 1 (in a
    /// five-field expression the minute is field 1); 0 for the whole
    /// expression.
    pub position: usize,
    /// What is wrong, in a plain sentence.
    pub message: String,
}

impl ExprError {
    fn whole(message: impl Into<String>) -> ExprError {
        ExprError {
            field: "expression",
            position: 0,
            message: message.into(),
        }
    }
}

impl fmt::Display for ExprError {
    /// `field 2 (minute): 61 is out of range 0-59`, or the message alone
    /// for the whole expression.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.position == 0 {
            f.write_str(&self.message)
        } else {
            write!(
                f,
                "field {} ({}): {}",
                self.position, self.field, self.message
            )
        }
    }
}

impl std::error::Error for ExprError {}

/// A compiled expression. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CronExpr {
    source: String,
    has_seconds: bool,
    cron: Cron,
}

/// The latest year a fire time may fall in: the reference library gives
/// up at year 3000, so a schedule with nothing before then has no next
/// run.
const LAST_YEAR: i16 = 2999;

impl CronExpr {
    /// The first fire time strictly after `after_ms`, in `zone`, or `None`
    /// when there is none before the year 3000.
    ///
    /// The search walks the wall clock forward from `after_ms`'s second;
    /// each matching wall-clock time fires at the instant the crate's
    /// daylight-saving rule gives it. In the second pass through a repeated
    /// hour (after a fall-back) the matching times of that hour have
    /// already fired, in the first pass, so they are passed over.
    pub fn next_after(&self, after_ms: i64, zone: &TimeZone) -> Option<i64> {
        let after = Timestamp::from_millisecond(after_ms).ok()?;
        let mut from = Slot::at_instant(after, zone);
        loop {
            let found = self.cron.find_next_occurrence(&from, false).ok()?;
            if found.wall_year() > LAST_YEAR {
                return None;
            }
            if found.instant() > after {
                return Some(found.instant().as_millisecond());
            }
            from = found;
        }
    }

    /// The latest fire time strictly before `before_ms`, in `zone`: the
    /// wall clock walked backward, under the same rule as
    /// [`CronExpr::next_after`].
    pub fn prev_before(&self, before_ms: i64, zone: &TimeZone) -> Option<i64> {
        let before = Timestamp::from_millisecond(before_ms).ok()?;
        let mut from = Slot::at_instant(before, zone);
        // Within a second, the second's own wall-clock time is already
        // before `before_ms`.
        let mut inclusive = before.subsec_nanosecond() != 0;
        loop {
            let found = self.cron.find_previous_occurrence(&from, inclusive).ok()?;
            if found.instant() < before {
                return Some(found.instant().as_millisecond());
            }
            from = found;
            inclusive = false;
        }
    }

    /// Whether the expression was written with a seconds field.
    pub fn has_seconds(&self) -> bool {
        self.has_seconds
    }

    /// The expression as written (surrounding whitespace removed).
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// The next `count` fire times of `expr` strictly after `from_ms`, in
/// `tz`, each after the one before; fewer when the schedule ends.
pub fn next_fires(
    expr: &str,
    tz: &TimeZone,
    from_ms: i64,
    count: usize,
) -> Result<Vec<i64>, ExprError> {
    let compiled = compile(expr)?;
    let mut fires = Vec::with_capacity(count.min(1024));
    let mut cursor = from_ms;
    while fires.len() < count {
        let Some(next) = compiled.next_after(cursor, tz) else {
            break;
        };
        fires.push(next);
        cursor = next;
    }
    Ok(fires)
}

/// Most compiled expressions [`compile_shared`] keeps.
pub const SHARED_LIMIT: usize = 512;

/// [`compile`], shared: jobs with the same expression share one compiled
/// copy (a compiled expression holds a few kilobytes; a hundred thousand
/// jobs commonly use a few dozen expressions). At most [`SHARED_LIMIT`]
/// are kept; when that many are held the memo starts afresh. Errors are
/// not kept.
pub fn compile_shared(expr: &str) -> Result<std::sync::Arc<CronExpr>, ExprError> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static SHARED: OnceLock<Mutex<HashMap<String, Arc<CronExpr>>>> = OnceLock::new();
    let memo = SHARED.get_or_init(Mutex::default);
    if let Some(found) = memo
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(expr)
        .cloned()
    {
        return Ok(found);
    }
    let compiled = Arc::new(compile(expr)?);
    let mut memo = memo.lock().unwrap_or_else(|p| p.into_inner());
    if memo.len() >= SHARED_LIMIT {
        memo.clear();
    }
    memo.insert(expr.to_string(), compiled.clone());
    Ok(compiled)
}

/// Compiles an expression (see the module documentation for the grammar).
pub fn compile(expr: &str) -> Result<CronExpr, ExprError> {
    let source = expr.trim();
    if source.is_empty() {
        return Err(ExprError::whole("the cron expression is empty"));
    }
    let expanded = expand_nickname(source)?;
    let words: Vec<&str> = expanded.split_whitespace().collect();
    let has_seconds = match words.len() {
        5 => false,
        6 => true,
        7 => {
            return Err(ExprError::whole(
                "7 fields: a year field is not supported (write 5 fields, or 6 with a leading second)",
            ));
        }
        n => {
            return Err(ExprError::whole(format!(
                "{n} field{}: a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading second",
                if n == 1 { "" } else { "s" }
            )));
        }
    };
    let fields = Fields::parse(&words, has_seconds)?;
    let canonical = fields.canonical();
    let cron = CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Disallowed)
        .build()
        .parse(&canonical)
        .map_err(|err| {
            ExprError::whole(format!(
                "the expression could not be prepared for evaluation ({err})"
            ))
        })?;
    Ok(CronExpr {
        source: source.to_string(),
        has_seconds,
        cron,
    })
}

/// Replaces a nickname with its expression; anything else is returned as
/// it is (an `@` elsewhere is refused later as a character no field
/// allows).
fn expand_nickname(source: &str) -> Result<std::borrow::Cow<'_, str>, ExprError> {
    if !source.contains('@') {
        return Ok(source.into());
    }
    let expansion = match source.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        "@reboot" => {
            return Err(ExprError::whole(
                "@reboot is not a schedule: it names an event, not a time",
            ));
        }
        _ => return Ok(source.into()),
    };
    Ok(expansion.into())
}

/// A field of the expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Field {
    const ALL: [Field; 6] = [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
    ];

    fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day of month",
            Field::Month => "month",
            Field::DayOfWeek => "day of week",
        }
    }

    /// The smallest value written in the field.
    fn min(self) -> u64 {
        match self {
            Field::DayOfMonth | Field::Month => 1,
            _ => 0,
        }
    }

    /// The largest value written in the field (7 is Sunday again).
    fn max(self) -> u64 {
        match self {
            Field::Second | Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 7,
        }
    }

    /// How many distinct values the field has: the largest step allowed.
    fn size(self) -> u64 {
        match self {
            Field::Second | Field::Minute => 60,
            Field::Hour => 24,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 7,
        }
    }

    /// The characters allowed once names and `?` have been replaced.
    fn allows(self, c: char) -> bool {
        matches!(c, '0'..='9' | '*' | '/' | ',' | '-')
            || (self == Field::DayOfMonth && matches!(c, 'W' | 'w' | 'L' | 'l'))
            || (self == Field::DayOfWeek && matches!(c, '#' | 'L' | 'l'))
    }
}

/// Which occurrences in the month a day of the week matches, as bits:
/// bits 0–4 the first to fifth, bit 5 the last.
const EVERY_OCCURRENCE: u8 = 0b11_1111;
const LAST_OCCURRENCE: u8 = 1 << 5;

/// The `#n` or `L` suffix of a day-of-week value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occurrence {
    Every,
    Last,
    Nth(u8),
}

/// The expression's fields, expanded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Fields {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1–31.
    days: u64,
    /// Days whose nearest weekday matches (`15W`), bits 1–31.
    nearest_weekdays: u64,
    last_day: bool,
    last_weekday: bool,
    /// Bits 1–12.
    months: u64,
    /// Per day of the week (0 Sunday), the occurrences it matches.
    weekdays: [u8; 7],
    star_dom: bool,
    star_dow: bool,
    dom_and_dow: bool,
}

impl Fields {
    fn parse(words: &[&str], has_seconds: bool) -> Result<Fields, ExprError> {
        let mut fields = Fields::default();
        // The field texts in order second..day-of-week, with their
        // positions in the expression as written.
        let mut texts: Vec<(Field, String, usize)> = Vec::with_capacity(6);
        let skip = usize::from(!has_seconds);
        for (index, field) in Field::ALL.into_iter().enumerate() {
            let (text, position) = match index.checked_sub(skip) {
                Some(at) => (words[at].to_string(), at + 1),
                // A five-field expression fires at second 0.
                None => ("0".to_string(), 0),
            };
            texts.push((field, text, position));
        }

        // Day of month: `LW` alone, or `L` anywhere (removed, meaning
        // "also the last day").
        let dom = &mut texts[3].1;
        if dom.eq_ignore_ascii_case("LW") {
            fields.last_weekday = true;
            dom.clear();
        } else if dom.contains(['L', 'l']) {
            fields.last_day = true;
            dom.retain(|c| c != 'L' && c != 'l');
        }
        fields.star_dom = dom == "*" || dom == "?";

        let month = &mut texts[4].1;
        if month.len() >= 3 {
            *month = replace_names(month, &MONTH_NAMES);
        }

        let dow = &mut texts[5].1;
        if dow.len() >= 3 {
            *dow = replace_names(dow, &DAY_NAMES);
        }
        if let Some(rest) = dow.strip_prefix('+') {
            if rest.is_empty() {
                return Err(error_at(
                    &texts[5],
                    "`+` must be followed by the days of the week to match",
                ));
            }
            fields.dom_and_dow = true;
            *dow = rest.to_string();
        }
        let dow = &texts[5].1;
        fields.star_dow = dow == "*" || dow == "?";

        for entry in &mut texts {
            entry.1 = entry.1.replace('?', "*");
        }
        for entry in &texts {
            if let Some(c) = entry.1.chars().find(|&c| !entry.0.allows(c)) {
                return Err(error_at(
                    entry,
                    format!("`{c}` is not allowed in this field"),
                ));
            }
        }
        for entry in &texts {
            fields
                .part(entry.0, &entry.1)
                .map_err(|message| error_at(entry, message))?;
        }
        Ok(fields)
    }

    /// One comma-separated field, or one item of it.
    fn part(&mut self, field: Field, text: &str) -> Result<(), String> {
        if text.is_empty() {
            if field == Field::DayOfMonth && (self.last_day || self.last_weekday) {
                return Ok(());
            }
            return Err("a value is missing (is there a stray comma?)".to_string());
        }
        if text == "*" {
            self.fill(field);
            return Ok(());
        }
        if text.contains(',') {
            return text.split(',').try_for_each(|item| self.part(field, item));
        }
        match (text.contains('-'), text.contains('/')) {
            (true, true) => self.stepped_range(field, text),
            (true, false) => self.range(field, text),
            (false, true) => self.step(field, text),
            (false, false) => self.number(field, text),
        }
    }

    fn number(&mut self, field: Field, text: &str) -> Result<(), String> {
        let (value, occurrence) = split_occurrence(field, text)?;
        let nearest = text.contains(['W', 'w']);
        if nearest && field != Field::DayOfMonth {
            return Err("`W` is only allowed in the day-of-month field".to_string());
        }
        let n = leading_number(value).ok_or_else(|| format!("`{text}` is not a number"))?;
        check_range(field, n)?;
        if nearest {
            self.nearest_weekdays |= 1 << n;
        } else {
            self.set(field, n, occurrence);
        }
        Ok(())
    }

    fn range(&mut self, field: Field, text: &str) -> Result<(), String> {
        if text.contains(['W', 'w']) {
            return Err(format!("`W` cannot be used in a range (`{text}`)"));
        }
        let (value, occurrence) = split_occurrence(field, text)?;
        let bounds: Vec<&str> = value.split('-').collect();
        let [from, to] = bounds[..] else {
            return Err(format!("`{text}` is not a range (write from-to)"));
        };
        let from = leading_number(from)
            .ok_or_else(|| format!("the range `{text}` does not start with a number"))?;
        let to = leading_number(to)
            .ok_or_else(|| format!("the range `{text}` does not end with a number"))?;
        if from > to {
            return Err(format!("the range `{text}` runs backwards"));
        }
        check_range(field, from)?;
        check_range(field, to)?;
        for n in from..=to {
            self.set(field, n, occurrence);
        }
        Ok(())
    }

    fn stepped_range(&mut self, field: Field, text: &str) -> Result<(), String> {
        if text.contains(['W', 'w']) {
            return Err(format!("`W` cannot be used in a stepped range (`{text}`)"));
        }
        let (value, occurrence) = split_occurrence(field, text)?;
        let parsed = value.split_once('-').and_then(|(from, rest)| {
            let (to, step) = rest.split_once('/')?;
            Some((digits(from)?, digits(to)?, digits(step)?))
        });
        let Some((from, to, step)) = parsed else {
            return Err(format!(
                "`{text}` is not a stepped range (write from-to/step)"
            ));
        };
        if from > to {
            return Err(format!("the range `{text}` runs backwards"));
        }
        check_step(field, step)?;
        // Only the values the step reaches must be in range (`50-70/30`
        // is minute 50).
        let mut n = from;
        while n <= to {
            check_range(field, n)?;
            self.set(field, n, occurrence);
            n += step;
        }
        Ok(())
    }

    fn step(&mut self, field: Field, text: &str) -> Result<(), String> {
        if text.contains(['W', 'w']) {
            return Err(format!("`W` cannot be used with a step (`{text}`)"));
        }
        let (value, occurrence) = split_occurrence(field, text)?;
        let parts: Vec<&str> = value.split('/').collect();
        let [start, step] = parts[..] else {
            return Err(format!("`{text}` is not a step (write */step)"));
        };
        if start != "*" {
            return Err(if start.is_empty() {
                format!("`{text}` has no start: write `*/{step}`")
            } else {
                format!(
                    "`{text}` steps from a single number: write `*/{step}`, or a range such as `{start}-{}/{step}`",
                    field.max()
                )
            });
        }
        let step =
            leading_number(step).ok_or_else(|| format!("the step in `{text}` is not a number"))?;
        check_step(field, step)?;
        let mut index = 0;
        while index < field.size() {
            self.set(field, field.min() + index, occurrence);
            index += step;
        }
        Ok(())
    }

    fn fill(&mut self, field: Field) {
        let min = field.min();
        for n in min..min + field.size() {
            self.set(field, n, Occurrence::Every);
        }
    }

    /// Sets one value, already known to be in range.
    fn set(&mut self, field: Field, n: u64, occurrence: Occurrence) {
        let bit = 1u64 << n;
        match field {
            Field::Second => self.seconds |= bit,
            Field::Minute => self.minutes |= bit,
            Field::Hour => self.hours |= bit,
            Field::DayOfMonth => self.days |= bit,
            Field::Month => self.months |= bit,
            Field::DayOfWeek => {
                let day = &mut self.weekdays[(n % 7) as usize];
                match occurrence {
                    Occurrence::Every => *day = EVERY_OCCURRENCE,
                    Occurrence::Last => *day |= LAST_OCCURRENCE,
                    Occurrence::Nth(k) => *day |= 1 << (k - 1),
                }
            }
        }
    }

    /// The six fields in the plain form croner reads exactly as meant.
    fn canonical(&self) -> String {
        let list = |bits: u64, range: std::ops::RangeInclusive<u64>| -> Vec<String> {
            range
                .filter(|n| bits & (1 << n) != 0)
                .map(|n| n.to_string())
                .collect()
        };
        let dom = if self.star_dom {
            "*".to_string()
        } else {
            let mut items = list(self.days, 1..=31);
            items.extend(
                list(self.nearest_weekdays, 1..=31)
                    .into_iter()
                    .map(|day| format!("{day}W")),
            );
            if self.last_day {
                items.push("L".to_string());
            }
            if self.last_weekday {
                items.push("LW".to_string());
            }
            items.join(",")
        };
        let dow = if self.star_dow {
            "*".to_string()
        } else {
            let mut items = Vec::new();
            for (day, &bits) in self.weekdays.iter().enumerate() {
                if bits == EVERY_OCCURRENCE {
                    items.push(day.to_string());
                    continue;
                }
                for k in 1..=5 {
                    if bits & (1 << (k - 1)) != 0 {
                        items.push(format!("{day}#{k}"));
                    }
                }
                if bits & LAST_OCCURRENCE != 0 {
                    items.push(format!("{day}L"));
                }
            }
            let joined = items.join(",");
            if self.dom_and_dow {
                format!("+{joined}")
            } else {
                joined
            }
        };
        [
            list(self.seconds, 0..=59).join(","),
            list(self.minutes, 0..=59).join(","),
            list(self.hours, 0..=23).join(","),
            dom,
            list(self.months, 1..=12).join(","),
            dow,
        ]
        .join(" ")
    }
}

fn error_at(entry: &(Field, String, usize), message: impl Into<String>) -> ExprError {
    ExprError {
        field: entry.0.name(),
        position: entry.2,
        message: message.into(),
    }
}

fn check_range(field: Field, n: u64) -> Result<(), String> {
    if n < field.min() || n > field.max() {
        Err(format!(
            "{n} is out of range {}-{}",
            field.min(),
            field.max()
        ))
    } else {
        Ok(())
    }
}

fn check_step(field: Field, step: u64) -> Result<(), String> {
    if step == 0 {
        Err("a step of 0 is not allowed".to_string())
    } else if step > field.size() {
        Err(format!(
            "the step {step} is larger than the field's {} values",
            field.size()
        ))
    } else {
        Ok(())
    }
}

/// Splits a day-of-week value from its `#n` or `L` suffix. Elsewhere
/// neither passes the character check, but the rule is stated whole.
fn split_occurrence(field: Field, text: &str) -> Result<(&str, Occurrence), String> {
    if let Some((value, rest)) = text.split_once('#') {
        if field != Field::DayOfWeek {
            return Err("`#` is only allowed in the day-of-week field".to_string());
        }
        // Only what lies between the first and a second `#` counts.
        let nth = rest.split('#').next().unwrap_or("");
        let occurrence = if nth.is_empty() {
            Occurrence::Every
        } else if nth.eq_ignore_ascii_case("L") {
            Occurrence::Last
        } else {
            match digits(nth) {
                Some(k @ 1..=5) => Occurrence::Nth(k as u8),
                _ => return Err(format!("`#{nth}` must be #1 to #5, or #L for the last")),
            }
        };
        return Ok((value, occurrence));
    }
    if let Some(value) = text.strip_suffix(['L', 'l']) {
        if field != Field::DayOfWeek {
            return Err(
                "`L` is only allowed in the day-of-month and day-of-week fields".to_string(),
            );
        }
        return Ok((value, Occurrence::Last));
    }
    Ok((text, Occurrence::Every))
}

/// The number at the start of `text` (at least one digit; what follows is
/// ignored, as the reference library does), saturating when huge.
fn leading_number(text: &str) -> Option<u64> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    digits(&text[..end])
}

/// `text` as a number when it is only ASCII digits (at least one),
/// saturating when huge.
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

const MONTH_NAMES: [(&str, &str); 12] = [
    ("jan", "1"),
    ("feb", "2"),
    ("mar", "3"),
    ("apr", "4"),
    ("may", "5"),
    ("jun", "6"),
    ("jul", "7"),
    ("aug", "8"),
    ("sep", "9"),
    ("oct", "10"),
    ("nov", "11"),
    ("dec", "12"),
];

/// `-sun` first, so that a range ending on Sunday (`sat-sun`) ends on 7.
const DAY_NAMES: [(&str, &str); 8] = [
    ("-sun", "-7"),
    ("sun", "0"),
    ("mon", "1"),
    ("tue", "2"),
    ("wed", "3"),
    ("thu", "4"),
    ("fri", "5"),
    ("sat", "6"),
];

/// Replaces every name, in any case. Letters that are not part of a name
/// are kept (in lower case, which no field tells apart).
fn replace_names(text: &str, names: &[(&str, &str)]) -> String {
    let mut out = text.to_ascii_lowercase();
    for (name, number) in names {
        out = out.replace(name, number);
    }
    out
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
