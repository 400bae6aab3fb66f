//! Duration strings as written in configuration and in `HEARTBEAT.md`.
//!
//! Grammar (ASCII case-insensitive, surrounding whitespace ignored): one or
//! more tokens `N[unit]` written without gaps, where `N` is digits with an
//! optional decimal part (`1.5`) and the unit is `ms`, `s`, `m`, `h` or `d`.
//! `30m`, `1.5h`, `1h30m` and `2m500ms` are durations; `1h 30m`, `1h30`,
//! `.5h` and `-5m` are not. A single number without a unit is read in the
//! caller's default unit (`30` is thirty minutes for a heartbeat interval).
//!
//! The value is exact: decimals are summed as decimals, not floats, and
//! the total is rounded once to whole milliseconds (halves round up).

use std::fmt;
use std::time::Duration;

/// A unit of a duration token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Milliseconds,
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl Unit {
    /// Every unit, largest first.
    pub const ALL: [Unit; 5] = [
        Unit::Days,
        Unit::Hours,
        Unit::Minutes,
        Unit::Seconds,
        Unit::Milliseconds,
    ];

    /// Milliseconds in one of this unit.
    pub const fn millis(self) -> u64 {
        match self {
            Unit::Milliseconds => 1,
            Unit::Seconds => 1_000,
            Unit::Minutes => 60_000,
            Unit::Hours => 3_600_000,
            Unit::Days => 86_400_000,
        }
    }

    /// The suffix written after the number (`ms`, `s`, `m`, `h`, `d`).
    pub const fn suffix(self) -> &'static str {
        match self {
            Unit::Milliseconds => "ms",
            Unit::Seconds => "s",
            Unit::Minutes => "m",
            Unit::Hours => "h",
            Unit::Days => "d",
        }
    }
}

/// Why a duration string was refused. The text it carries is the input,
/// shortened when long, for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing but whitespace.
    Empty,
    /// Starts with `-`.
    Negative(String),
    /// Does not follow the grammar.
    Invalid(String),
    /// More milliseconds than fit in 64 bits.
    TooLarge(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => f.write_str("the duration is empty"),
            DurationError::Negative(text) => write!(f, "the duration `{text}` is negative"),
            DurationError::Invalid(text) => write!(
                f,
                "`{text}` is not a duration (write e.g. 30m, 1.5h or 1h30m; units ms, s, m, h, d)"
            ),
            DurationError::TooLarge(text) => write!(f, "the duration `{text}` is too large"),
        }
    }
}

impl std::error::Error for DurationError {}

/// At most this many characters of the input are quoted in an error.
const QUOTED_CHARS: usize = 40;

fn quoted(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(QUOTED_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// Parses a duration string; a bare number is read in `default_unit`.
/// The result has whole milliseconds.
pub fn parse(text: &str, default_unit: Unit) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    if trimmed.starts_with('-') {
        return Err(DurationError::Negative(quoted(trimmed)));
    }
    let invalid = || DurationError::Invalid(quoted(trimmed));
    let too_large = || DurationError::TooLarge(quoted(trimmed));
    let bytes = trimmed.as_bytes();
    let mut total = ExactSum::default();
    let mut pos = 0;
    while pos < bytes.len() {
        let (whole, fraction, after_number) = scan_number(bytes, pos).ok_or_else(invalid)?;
        let (unit, after_unit) = match scan_unit(bytes, after_number) {
            Some(found) => found,
            // Only a lone number may leave out its unit.
            None if pos == 0 && after_number == bytes.len() => (default_unit, after_number),
            None => return Err(invalid()),
        };
        total
            .add(whole, fraction, unit.millis())
            .ok_or_else(too_large)?;
        pos = after_unit;
    }
    total
        .rounded_millis()
        .map(Duration::from_millis)
        .ok_or_else(too_large)
}

/// Writes a duration in the grammar [`parse`] reads, largest units first
/// and zero parts left out (`1h30m`, `2m500ms`, `0ms`). Sub-millisecond
/// parts are dropped.
pub fn format(duration: Duration) -> String {
    let mut rest = duration.as_millis();
    if rest == 0 {
        return "0ms".to_string();
    }
    let mut out = String::new();
    for unit in Unit::ALL {
        let size = u128::from(unit.millis());
        let count = rest / size;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(unit.suffix());
            rest %= size;
        }
    }
    out
}

/// `digits[.digits]` at `pos`: the whole and fractional digit runs and the
/// position after them.
fn scan_number(bytes: &[u8], pos: usize) -> Option<(&[u8], &[u8], usize)> {
    let digits_end = |from: usize| {
        from + bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let whole_end = digits_end(pos);
    if whole_end == pos {
        return None;
    }
    if bytes.get(whole_end) != Some(&b'.') {
        return Some((&bytes[pos..whole_end], &[], whole_end));
    }
    let fraction_end = digits_end(whole_end + 1);
    if fraction_end == whole_end + 1 {
        return None;
    }
    Some((
        &bytes[pos..whole_end],
        &bytes[whole_end + 1..fraction_end],
        fraction_end,
    ))
}

fn scan_unit(bytes: &[u8], pos: usize) -> Option<(Unit, usize)> {
    let lower = |i: usize| bytes.get(i).map(u8::to_ascii_lowercase);
    let unit = match (lower(pos)?, lower(pos + 1)) {
        (b'm', Some(b's')) => return Some((Unit::Milliseconds, pos + 2)),
        (b's', _) => Unit::Seconds,
        (b'm', _) => Unit::Minutes,
        (b'h', _) => Unit::Hours,
        (b'd', _) => Unit::Days,
        _ => return None,
    };
    Some((unit, pos + 1))
}

/// A sum of decimal token values in milliseconds, kept exact: whole
/// milliseconds plus the decimal digits of the fractional millisecond.
#[derive(Default)]
struct ExactSum {
    whole: u128,
    fraction: Vec<u8>,
}

impl ExactSum {
    /// Adds `whole.fraction` times `unit_millis`; `None` on overflow.
    fn add(&mut self, whole: &[u8], fraction: &[u8], unit_millis: u64) -> Option<()> {
        let mut value: u128 = 0;
        for digit in whole {
            value = value
                .checked_mul(10)?
                .checked_add(u128::from(digit - b'0'))?;
            if value > u128::from(u64::MAX) {
                return None;
            }
        }
        self.whole = self
            .whole
            .checked_add(value.checked_mul(u128::from(unit_millis))?)?;
        // The fraction times the unit, by long multiplication from the last
        // digit: the carry out of the first digit is whole milliseconds.
        let significant =
            fraction.len() - fraction.iter().rev().take_while(|&&d| d == b'0').count();
        let mut scaled = vec![0u8; significant];
        let mut carry: u64 = 0;
        for i in (0..significant).rev() {
            let product = u64::from(fraction[i] - b'0') * unit_millis + carry;
            scaled[i] = (product % 10) as u8;
            carry = product / 10;
        }
        self.whole = self.whole.checked_add(u128::from(carry))?;
        if self.fraction.len() < scaled.len() {
            self.fraction.resize(scaled.len(), 0);
        }
        let mut carry = 0u8;
        for i in (0..self.fraction.len()).rev() {
            let digit = self.fraction[i] + scaled.get(i).copied().unwrap_or(0) + carry;
            self.fraction[i] = digit % 10;
            carry = digit / 10;
        }
        self.whole = self.whole.checked_add(u128::from(carry))?;
        if self.whole > u128::from(u64::MAX) {
            return None;
        }
        Some(())
    }

    fn rounded_millis(&self) -> Option<u64> {
        let round_up = self.fraction.first().is_some_and(|&d| d >= 5);
        u64::try_from(self.whole + u128::from(round_up)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str, unit: Unit) -> Result<u64, DurationError> {
        parse(text, unit).map(|d| d.as_millis() as u64)
    }

    #[test]
    fn accepted_forms() {
        let cases: &[(&str, Unit, u64)] = &[
            ("30m", Unit::Milliseconds, 1_800_000),
            ("30M", Unit::Milliseconds, 1_800_000),
            ("  45s ", Unit::Milliseconds, 45_000),
            ("250ms", Unit::Minutes, 250),
            ("250MS", Unit::Minutes, 250),
            ("2d", Unit::Minutes, 172_800_000),
            ("1.5h", Unit::Minutes, 5_400_000),
            ("1h30m", Unit::Minutes, 5_400_000),
            ("2m500ms", Unit::Minutes, 120_500),
            ("1d2h3m4s5ms", Unit::Minutes, 93_784_005),
            ("1m1m", Unit::Minutes, 120_000),
            ("0m", Unit::Minutes, 0),
            ("0", Unit::Minutes, 0),
            ("30", Unit::Minutes, 1_800_000),
            ("30", Unit::Hours, 108_000_000),
            ("30", Unit::Milliseconds, 30),
            ("1.5", Unit::Minutes, 90_000),
            ("007s", Unit::Minutes, 7_000),
            // Rounded once, at the end, halves up.
            ("1.5ms", Unit::Minutes, 2),
            ("1.4ms", Unit::Minutes, 1),
            ("0.4ms0.4ms", Unit::Minutes, 1),
            ("0.0005s", Unit::Minutes, 1),
            ("0.00049999999999999999999s", Unit::Minutes, 0),
            ("0.333333333333333333333333333h", Unit::Minutes, 1_200_000),
        ];
        for (text, unit, expected) in cases {
            assert_eq!(ms(text, *unit), Ok(*expected), "{text:?} in {unit:?}");
        }
    }

    #[test]
    fn refused_forms() {
        assert_eq!(ms("", Unit::Minutes), Err(DurationError::Empty));
        assert_eq!(ms(" \t ", Unit::Minutes), Err(DurationError::Empty));
        assert_eq!(
            ms("-5m", Unit::Minutes),
            Err(DurationError::Negative("-5m".into()))
        );
        for text in [
            "1h 30m", "1h30", "30x", "m", ".5h", "5.h", "1.2.3h", "+5m", "5 m", "1h-30m", "5mm",
            "1e3ms", "½h", "5m!", "5ms5",
        ] {
            assert_eq!(
                ms(text, Unit::Minutes),
                Err(DurationError::Invalid(text.into())),
                "{text:?}"
            );
        }
        assert!(matches!(
            ms("99999999999999999999999d", Unit::Minutes),
            Err(DurationError::TooLarge(_))
        ));
        assert!(matches!(
            ms("213503982335d", Unit::Minutes),
            Err(DurationError::TooLarge(_))
        ));
        assert_eq!(
            ms("213503982334d", Unit::Minutes),
            Ok(18_446_744_073_657_600_000)
        );
    }

    #[test]
    fn errors_read_as_sentences_and_quote_little() {
        let long = "x".repeat(100);
        let message = parse(&long, Unit::Minutes).unwrap_err().to_string();
        assert!(message.starts_with(&format!("`{}…` is not a duration", "x".repeat(40))));
        assert_eq!(
            parse("-1h", Unit::Minutes).unwrap_err().to_string(),
            "the duration `-1h` is negative"
        );
    }

    #[test]
    fn formats_largest_units_first() {
        assert_eq!(format(Duration::from_millis(0)), "0ms");
        assert_eq!(format(Duration::from_millis(5_400_000)), "1h30m");
        assert_eq!(format(Duration::from_millis(120_500)), "2m500ms");
        assert_eq!(format(Duration::from_millis(93_784_005)), "1d2h3m4s5ms");
        assert_eq!(format(Duration::from_micros(1_999)), "1ms");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn unit() -> impl Strategy<Value = Unit> {
            prop::sample::select(Unit::ALL.to_vec())
        }

        proptest! {
            #[test]
            fn composites_parse_to_their_exact_sum(
                tokens in prop::collection::vec((0u64..100_000, prop::option::of(0u64..1000), unit()), 1..6),
                upper in any::<bool>(),
            ) {
                let mut text = String::new();
                // Thousandths of a millisecond, summed exactly.
                let mut thousandths: u128 = 0;
                for (whole, millis_fraction, unit) in &tokens {
                    match millis_fraction {
                        Some(f) => text.push_str(&format!("{whole}.{f:03}")),
                        None => text.push_str(&whole.to_string()),
                    }
                    text.push_str(unit.suffix());
                    let value = u128::from(*whole) * 1000 + u128::from(millis_fraction.unwrap_or(0));
                    thousandths += value * u128::from(unit.millis());
                }
                if upper {
                    text = text.to_uppercase();
                }
                let expected = ((thousandths + 500) / 1000) as u64;
                prop_assert_eq!(ms(&text, Unit::Minutes), Ok(expected));
            }

            #[test]
            fn formatted_durations_parse_back(millis in any::<u64>()) {
                let written = format(Duration::from_millis(millis));
                prop_assert_eq!(ms(&written, Unit::Days), Ok(millis));
            }

            #[test]
            fn bare_numbers_take_the_default_unit(n in 0u64..1_000_000, unit in unit()) {
                prop_assert_eq!(ms(&n.to_string(), unit), Ok(n * unit.millis()));
            }

            #[test]
            fn never_panics(text in "\\PC{0,40}") {
                let _ = parse(&text, Unit::Minutes);
            }

            #[test]
            fn never_panics_near_the_grammar(text in "[0-9.msMShdD -]{0,30}") {
                if let Ok(d) = parse(&text, Unit::Minutes) {
                    prop_assert!(!text.trim().is_empty());
                    prop_assert!(d.subsec_nanos() % 1_000_000 == 0);
                }
            }
        }
    }
}
