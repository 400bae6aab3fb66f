//! The id rules: agent and account ids, channels, main keys.

use std::borrow::Cow;

use crate::DEFAULT_ACCOUNT;

/// The agent id every config without agents has, and the fallback for an
/// id with no usable character.
const DEFAULT_AGENT: &str = "main";
const MAX_ID_CHARS: usize = 64;

/// Normalises an agent id: trimmed and lowercased; characters outside
/// `[a-z0-9_-]` become `-` (a run of them one `-`); no leading or trailing
/// `-`; at most 64 characters; empty is `main`. The application's session
/// keys use the same rule, so an agent keeps its sessions whichever side
/// names it.
pub fn normalize_id(s: &str) -> String {
    normalized(s, DEFAULT_AGENT).into_owned()
}

/// Normalises an account id by the same rule as [`normalize_id`]; empty
/// (or nothing usable) is [`DEFAULT_ACCOUNT`].
pub fn normalize_account_id(s: &str) -> String {
    normalized(s, DEFAULT_ACCOUNT).into_owned()
}

/// The id rule, borrowing when `s` is already in normal form (the common
/// case on the per-message path).
pub(crate) fn normalized<'a>(s: &'a str, fallback: &'a str) -> Cow<'a, str> {
    if is_normal_id(s) {
        return Cow::Borrowed(s);
    }
    let lower = s.trim().to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut dash = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
            dash = false;
        } else if !dash {
            out.push('-');
            dash = true;
        }
    }
    let capped: String = out.trim_matches('-').chars().take(MAX_ID_CHARS).collect();
    let capped = capped.trim_end_matches('-');
    if capped.is_empty() {
        Cow::Borrowed(fallback)
    } else {
        Cow::Owned(capped.to_string())
    }
}

/// Whether the id rule would return `s` unchanged.
fn is_normal_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ID_CHARS
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// A channel name or identity token: trimmed and lowercased, nothing else.
pub(crate) fn token(s: &str) -> Cow<'_, str> {
    let t = s.trim();
    if t.bytes().any(|c| c.is_ascii_uppercase() || !c.is_ascii()) {
        Cow::Owned(t.to_lowercase())
    } else {
        Cow::Borrowed(t)
    }
}

/// Lowercases without allocating when there is nothing to lower.
pub(crate) fn lower(s: &str) -> Cow<'_, str> {
    if s.bytes().any(|c| c.is_ascii_uppercase() || !c.is_ascii()) {
        Cow::Owned(s.to_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

/// The session's main key: trimmed and lowercased, empty is `main`.
pub(crate) fn main_key(s: &str) -> Cow<'_, str> {
    let t = token(s);
    if t.is_empty() {
        Cow::Borrowed(DEFAULT_AGENT)
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_follow_the_application_rule() {
        for (raw, want) in [
            ("Main", "main"),
            ("  ops  ", "ops"),
            ("Home Bot!", "home-bot"),
            ("a..b", "a-b"),
            ("a--b", "a--b"),
            ("-x-", "x"),
            ("_prod", "_prod"),
            ("", "main"),
            ("!!!", "main"),
            ("Ünïcode", "n-code"),
        ] {
            assert_eq!(normalize_id(raw), want, "{raw:?}");
        }
        let long = format!("{}!b", "a".repeat(63));
        assert_eq!(
            normalize_id(&long),
            "a".repeat(63),
            "no trailing dash after the cap"
        );
        assert_eq!(normalize_id(&"x".repeat(80)).len(), 64);
    }

    #[test]
    fn account_ids_fall_back_to_the_default_account() {
        assert_eq!(normalize_account_id(""), "default");
        assert_eq!(normalize_account_id(" ?? "), "default");
        assert_eq!(normalize_account_id("Work Bot"), "work-bot");
    }

    #[test]
    fn normal_ids_are_borrowed() {
        assert!(matches!(
            normalized("ops_2", "main"),
            Cow::Borrowed("ops_2")
        ));
        assert!(matches!(normalized("Ops", "main"), Cow::Owned(_)));
        assert!(matches!(token("telegram"), Cow::Borrowed(_)));
        assert_eq!(token(" Telegram "), "telegram");
        assert_eq!(main_key("  "), "main");
        assert_eq!(main_key(" Home "), "home");
    }
}
