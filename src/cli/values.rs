//! Parsers of flag values with ranges: a value out of range or not a
//! number is a usage error naming what is allowed, never a panic further
//! down (an allocation sized by a huge count, an overflowing sum).

use crate::memory::index::recall::MAX_ENTITY_LINES;
use crate::memory::index::search::{MAX_CONTEXT, MAX_RESULTS};

/// A whole number in `min..=max`.
fn whole(text: &str, min: usize, max: usize) -> Result<usize, String> {
    let t = text.trim();
    let out_of_range = || format!("expected a whole number from {min} to {max}, got `{text}`");
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range());
    }
    match t.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(out_of_range()),
    }
}

/// `memory search --max-results`: 1 to [`MAX_RESULTS`].
pub(super) fn max_results(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_RESULTS)
}

/// `session-memory search --limit`: 0 to [`MAX_RESULTS`].
pub(super) fn limit(text: &str) -> Result<usize, String> {
    whole(text, 0, MAX_RESULTS)
}

/// Neighbouring lines either side of a result: 0 to [`MAX_CONTEXT`].
pub(super) fn context_lines(text: &str) -> Result<usize, String> {
    whole(text, 0, MAX_CONTEXT)
}

/// `memory entity --lines`: 1 to [`MAX_ENTITY_LINES`].
pub(super) fn entity_lines(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_ENTITY_LINES)
}

/// The most tasks or findings `tasks` lists.
pub(super) const MAX_TASK_LIMIT: usize = 100_000;

/// `tasks list|audit --limit`: 1 to [`MAX_TASK_LIMIT`].
pub(super) fn task_limit(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_TASK_LIMIT)
}

/// The most entries `outbox list` shows.
pub(super) const MAX_OUTBOX_LIMIT: usize = 100_000;

/// `outbox list --limit`: 1 to [`MAX_OUTBOX_LIMIT`].
pub(super) fn outbox_limit(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_OUTBOX_LIMIT)
}

/// The most fire times `cron next` lists.
pub(super) const MAX_CRON_COUNT: usize = 1000;

/// `cron next --count`: 1 to [`MAX_CRON_COUNT`].
pub(super) fn cron_count(text: &str) -> Result<usize, String> {
    whole(text, 1, MAX_CRON_COUNT)
}

/// A score floor: a finite number from 0 to 1.
pub(super) fn score(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("expected a number from 0 to 1, got `{text}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    use crate::cli::Cli;

    #[test]
    fn ranges_and_messages() {
        assert_eq!(max_results("5"), Ok(5));
        assert_eq!(max_results(" 1000 "), Ok(1000));
        assert_eq!(limit("0"), Ok(0));
        assert_eq!(context_lines("0"), Ok(0));
        assert_eq!(entity_lines("3"), Ok(3));
        assert_eq!(score("0.25"), Ok(0.25));
        assert_eq!(task_limit("100000"), Ok(100_000));
        assert_eq!(cron_count("1000"), Ok(1000));
        for bad in ["0", "1001"] {
            let err = cron_count(bad).unwrap_err();
            assert!(err.contains("from 1 to 1000"), "{bad}: {err}");
        }
        for bad in ["0", "100001", "-1"] {
            let err = task_limit(bad).unwrap_err();
            assert!(err.contains("from 1 to 100000"), "{bad}: {err}");
        }
        for bad in [
            "0",
            "1001",
            "-1",
            "+3",
            "1e3",
            "",
            "18446744073709551616",
            "٣",
        ] {
            let err = max_results(bad).unwrap_err();
            assert!(err.contains("from 1 to 1000"), "{bad}: {err}");
        }
        for bad in ["NaN", "inf", "-0.1", "1.01", "x", "1e309"] {
            assert!(score(bad).is_err(), "{bad}");
        }
    }

    /// Every flag that takes a number, with the command around it.
    const NUMERIC_FLAGS: &[(&[&str], &str)] = &[
        (&["memory", "search", "q"], "--max-results"),
        (&["memory", "search", "q"], "--limit"),
        (&["memory", "search", "q"], "-n"),
        (&["memory", "search", "q"], "--min-score"),
        (&["memory", "search", "q"], "--context"),
        (&["memory", "get", "MEMORY.md"], "--from"),
        (&["memory", "get", "MEMORY.md"], "--lines"),
        (&["memory", "entity", "Ana"], "--lines"),
        (&["memory", "recall", "q"], "--budget"),
        (&["session-memory", "search", "q"], "--limit"),
        (&["session-memory", "context", "q"], "--budget"),
        (&["session-memory", "clear"], "--older-than"),
        (&["heartbeat", "history"], "--limit"),
        (&["cron", "next", "0 9 * * *"], "--count"),
    ];

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn number_text() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<u64>().prop_map(|n| n.to_string()),
                any::<u128>().prop_map(|n| n.to_string()),
                any::<i64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|n| n.to_string()),
                "[0-9]{0,40}",
                ".{0,20}",
                Just("NaN".to_string()),
                Just("-inf".to_string()),
            ]
        }

        proptest! {
            /// Any text: a value in range or an error that says the range.
            #[test]
            fn parsers_accept_only_their_range(text in number_text()) {
                for (parse, min, max) in [
                    (max_results as fn(&str) -> Result<usize, String>, 1, MAX_RESULTS),
                    (limit, 0, MAX_RESULTS),
                    (context_lines, 0, MAX_CONTEXT),
                    (entity_lines, 1, MAX_ENTITY_LINES),
                ] {
                    match parse(&text) {
                        Ok(n) => prop_assert!((min..=max).contains(&n)),
                        Err(e) => prop_assert!(e.contains(&format!("from {min} to {max}")), "{}", e),
                    }
                }
                if let Ok(x) = score(&text) {
                    prop_assert!((0.0..=1.0).contains(&x));
                }
            }

            /// The whole command line, parsed as the binary parses it:
            /// every numeric flag, given any value, parses or is refused
            /// as a usage error; it never panics.
            #[test]
            fn numeric_flags_never_panic(text in number_text(), which in 0..NUMERIC_FLAGS.len()) {
                let (command, flag) = NUMERIC_FLAGS[which];
                let mut args = vec!["almanac"];
                args.extend_from_slice(command);
                let value = format!("{flag}={text}");
                let value = if flag == "-n" { format!("-n{text}") } else { value };
                args.push(&value);
                if let Err(err) = Cli::try_parse_from(&args) {
                    prop_assert!(err.use_stderr(), "{}", err);
                }
            }
        }
    }
}
