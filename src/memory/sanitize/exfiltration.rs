//! The classes about secrets leaving: sensitive things sent to an
//! outside destination (exfiltration) and credentials read out
//! (harvesting).

use super::normalize::{Normalized, Word};
use super::{EXFILTRATION_VERBS, HARVESTING_VERBS, any_in, is, negated, secret_files};

pub(super) const SENSITIVE: &[&str] = &[
    "password*",
    "passwd",
    "passphrase*",
    "credential*",
    "apikey*",
    "cookie*",
    "mnemonic*",
    "ssn",
    "otp",
    "otps",
    "2fa",
    "pin",
];
pub(super) const SENSITIVE_PHRASES: &[&[&str]] = &[
    &["api", "key"],
    &["api", "keys"],
    &["ssh", "key"],
    &["ssh", "keys"],
    &["private", "key"],
    &["private", "keys"],
    &["secret", "key"],
    &["secret", "keys"],
    &["access", "key"],
    &["access", "keys"],
    &["seed", "phrase"],
    &["recovery", "phrase"],
    &["env", "file"],
    &["env", "vars"],
    &["environment", "variables"],
    &["credit", "card"],
    &["card", "number"],
    &["social", "security"],
    &["session", "token*"],
    &["access", "token*"],
    &["auth", "token*"],
    &["bearer", "token*"],
    &["refresh", "token*"],
    &["api", "token*"],
    &["github", "token*"],
];
const NOT_SENSITIVE_AFTER: &[&str] = &[
    "reset",
    "manager",
    "policy",
    "change",
    "hint",
    "rotation",
    "expiry",
    "requirement*",
    "rule*",
    "strength",
    "santa",
    "sauce",
    "garden",
    "recipe",
    "menu",
    "of",
];

/// Whether a sensitive thing (a password, an API key, secrets, …) is named
/// at word `i`.
fn sensitive_at(words: &[Word], i: usize) -> bool {
    let w = words[i].text.as_str();
    let next = words.get(i + 1).map(|x| x.text.as_str()).unwrap_or("");
    if is(next, NOT_SENSITIVE_AFTER) {
        return false;
    }
    if is(w, SENSITIVE) {
        return true;
    }
    if w == "secrets"
        || (w == "secret"
            && (next.is_empty()
                || is(
                    next,
                    &["to", "and", "key*", "token*", "value*", "code", "phrase"],
                )))
    {
        return true;
    }
    if is(w, &["token", "tokens"]) {
        let prev = if i > 0 {
            words[i - 1].text.as_str()
        } else {
            ""
        };
        return is(
            prev,
            &[
                "my", "all", "your", "the", "api", "access", "auth", "bearer", "session", "oauth",
                "jwt", "secret", "github", "slack", "refresh",
            ],
        ) && prev != "the"
            || is(prev, &["the"]) && next == "to";
    }
    SENSITIVE_PHRASES.iter().any(|p| {
        p.len() <= words.len() - i
            && p.iter()
                .zip(&words[i..])
                .all(|(pat, word)| is(&word.text, &[pat]))
    })
}

fn external_destination(flat: &str) -> bool {
    flat.contains("http://")
        || flat.contains("https://")
        || flat.contains("ftp://")
        || flat.contains("pastebin")
        || flat.contains("webhook")
        || flat.contains("requestbin")
        || flat.contains("ngrok")
        || flat.contains("attacker")
        || flat.contains("my server")
        || flat.contains("external server")
        || has_email_address(flat)
        || has_ipv4(flat)
}

fn has_email_address(flat: &str) -> bool {
    flat.split_whitespace().any(|t| {
        let t = t.trim_matches(|c: char| !c.is_alphanumeric());
        match t.split_once('@') {
            Some((user, domain)) => {
                !user.is_empty() && domain.contains('.') && !domain.ends_with('.')
            }
            None => false,
        }
    })
}

fn has_ipv4(flat: &str) -> bool {
    flat.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .any(|t| {
            let parts: Vec<&str> = t.split('.').collect();
            parts.len() == 4
                && parts.iter().all(|p| {
                    !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|v| v < 256)
                })
        })
}

/// `send my passwords to bob`, `upload all files to https://…`, `send me
/// ~/.ssh/id_rsa` ([`secret_files`]); `Email the files to Bob` and `Send
/// keys to the landlord` pass.
pub(super) fn exfiltration(n: &Normalized) -> bool {
    if secret_files::request(n) == Some(secret_files::Request::Send) {
        return true;
    }
    let verbs = EXFILTRATION_VERBS;
    let bulk = [
        "file*",
        "data",
        "document*",
        "everything",
        "content*",
        "database*",
        "log*",
        "history",
        "conversation*",
        "memor*",
        "folder*",
        "director*",
        "home",
    ];
    for words in n.variants() {
        // `exfiltrate the data`, but not `Don't exfiltrate private data`.
        if (0..words.len()).any(|i| is(&words[i].text, &["exfiltrat*"]) && !negated(words, i)) {
            return true;
        }
        for (i, w) in words.iter().enumerate() {
            if !is(&w.text, verbs) {
                continue;
            }
            let end = (i + 6).min(words.len());
            if (i + 1..end).any(|j| sensitive_at(words, j)) {
                return true;
            }
            if (i + 1..end).any(|j| is(&words[j].text, &bulk)) && external_destination(&n.flat) {
                return true;
            }
        }
    }
    false
}

/// `cat ~/.ssh/id_rsa`, `dump all stored passwords`; `Read the chapter on
/// passwords` and `rotate my ~/.ssh/id_rsa` pass. Files asked for to be
/// sent are named by [`exfiltration`] first.
pub(super) fn credential_harvesting(n: &Normalized) -> bool {
    if secret_files::request(n).is_some() {
        return true;
    }
    let verbs = HARVESTING_VERBS;
    let qualifiers = [
        "all", "my", "your", "stored", "saved", "every", "users", "user", "cached", "browser",
    ];
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            if !is(&w.text, verbs) {
                continue;
            }
            let end = (i + 5).min(words.len());
            let qualified = any_in(&words[i + 1..end], &qualifiers);
            if qualified && (i + 1..end).any(|j| sensitive_at(words, j)) {
                return true;
            }
            if is(&w.text, &["steal", "harvest*"]) && (i + 1..end).any(|j| sensitive_at(words, j)) {
                return true;
            }
        }
    }
    false
}
