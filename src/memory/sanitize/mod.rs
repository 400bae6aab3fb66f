//! Prompt-injection detection for memory notes, at write time and at read
//! time.
//!
//! Invariants:
//! * Detection runs on a normalised copy of the text (NFKD, accents and
//!   zero-width and bidi controls removed, lowercase, look-alike letters
//!   read as Latin inside Latin words, spaced-out letters joined — split
//!   where the gaps are wider, or into known words —, a leet-speak
//!   variant); the stored note is the user's text as written.
//! * Each pattern class looks for the shape of an instruction aimed at the
//!   model, not for single alarming words, so ordinary notes ("Email the
//!   files to Bob", "act as the evil queen in the school play") pass. A
//!   negation counts only within its own clause. Overrides are also
//!   read in their English paraphrases (`pay no attention to`, `set
//!   aside`, `stop following` …) where they are given as orders
//!   ([`paraphrase`]), and secret files (`~/.ssh/id_rsa`, `.env`,
//!   `*.pem`, kubeconfig …) only where an order asks to send or show one
//!   ([`secret_files`]), not where a note names one. Overrides and
//!   system-prompt requests are also read in other languages
//!   ([`languages`]). A note that only quotes an attack phrase while
//!   discussing attacks is not one ([`mention`]). The corpora in
//!   `corpus/` pin both directions, other languages included.
//! * Classes are checked in a fixed order and the first match names the
//!   refusal, with the labels Arka users know. A first look
//!   ([`prefilter`]) passes plain text holding none of the words any class
//!   needs without normalising it; it never passes what a class would
//!   match.
//! * [`neutralise`] makes text safe to place in a prompt: it never adds
//!   instructions, only removes invisible characters and defangs
//!   chat-template markers.
//! * Text read back from files (search results, `memory get`, recall, the
//!   agent's bootstrap files) passes one read-time rule ([`read`]):
//!   neutralised, with each line that scans as an injection replaced by a
//!   marker naming its file and line.
//!
//! This file holds the labels, the check order and the word-set helpers;
//! the classes live in [`instructions`] (aimed at the model's
//! instructions), [`commands`] (commands in a note) and [`exfiltration`](mod@exfiltration)
//! (secrets leaving), and [`segment`](mod@segment) splits letters that ran together
//! into known words.

mod commands;
mod exfiltration;
mod instructions;
mod languages;
mod mention;
mod normalize;
mod paraphrase;
mod prefilter;
mod read;
mod secret_files;
mod segment;

pub(crate) use commands::{PIPED_INTERPRETERS, REMOTE_FETCHERS};
use commands::{
    command_execution_request, destructive_command, obfuscated_execution, remote_execution_pipe,
};
use exfiltration::{credential_harvesting, exfiltration};
use instructions::{
    bypass_safety, developer_mode, embedded_system_instructions, jailbreak_persona,
    override_instructions, prompt_extraction, template_marker,
};
pub(crate) use normalize::is_invisible as is_invisible_char;
use normalize::{Normalized, Word};
pub(crate) use read::{guard_heading, guard_note, guard_text};

/// A detected injection pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finding {
    pub label: &'static str,
}

pub(crate) const IGNORE_PREVIOUS: &str = "prompt override (ignore previous instructions)";
pub(crate) const DISREGARD_RULES: &str = "prompt override (disregard system rules)";
pub(crate) const JAILBREAK_PERSONA: &str = "jailbreak persona request";
pub(crate) const EMBEDDED_SYSTEM: &str = "embedded system instructions";
pub(crate) const TEMPLATE_MARKER: &str = "chat template injection marker";
pub(crate) const DEVELOPER_MODE: &str = "developer mode jailbreak";
pub(crate) const BYPASS_SAFETY: &str = "instruction to bypass safety";
pub(crate) const COMMAND_EXECUTION: &str = "embedded command execution request";
pub(crate) const DESTRUCTIVE_COMMAND: &str = "destructive shell command";
pub(crate) const REMOTE_EXECUTION: &str = "remote code execution pipe";
pub(crate) const EXFILTRATION: &str = "data exfiltration request";
pub(crate) const HARVESTING: &str = "credential/file harvesting";
pub(crate) const OBFUSCATED_EXECUTION: &str = "obfuscated remote execution";
pub(crate) const PROMPT_EXTRACTION: &str = "system prompt extraction";

const BYPASS_VERBS: &[&str] = &[
    "follow*", "obey*", "respect*", "apply*", "adhere*", "honor*", "honour*", "comply*",
    "enforce*", "abide*",
];
const EXFILTRATION_VERBS: &[&str] = &[
    "send*",
    "upload*",
    "post",
    "posting",
    "email*",
    "mail",
    "transmit*",
    "forward*",
    "leak*",
    "share",
    "sharing",
    "paste*",
    "copy",
    "copying",
    "publish*",
    "expose*",
    "sync",
];
const HARVESTING_VERBS: &[&str] = &[
    "read", "open", "cat", "dump", "print", "show", "reveal", "display", "list", "output", "type",
    "grab", "extract", "retrieve", "fetch", "get", "access", "leak", "steal", "harvest*",
    "collect",
];
const EXTRACTION_VERBS: &[&str] = &[
    "reveal", "print", "show", "repeat", "output", "display", "tell", "give", "leak", "dump",
    "share", "disclose", "recite", "write",
];
const EXECUTION_VERBS: &[&str] = &["execute", "run", "eval", "evaluate"];

/// The pattern classes in the order they are checked; the first match
/// names the finding.
const CHECKS: &[(&str, fn(&Normalized) -> bool)] = &[
    (IGNORE_PREVIOUS, |n| {
        override_instructions(n) == Some(IGNORE_PREVIOUS)
    }),
    (DISREGARD_RULES, |n| {
        override_instructions(n) == Some(DISREGARD_RULES)
    }),
    (JAILBREAK_PERSONA, jailbreak_persona),
    (EMBEDDED_SYSTEM, embedded_system_instructions),
    (TEMPLATE_MARKER, template_marker),
    (DEVELOPER_MODE, developer_mode),
    (BYPASS_SAFETY, bypass_safety),
    (COMMAND_EXECUTION, command_execution_request),
    (DESTRUCTIVE_COMMAND, destructive_command),
    (REMOTE_EXECUTION, remote_execution_pipe),
    (EXFILTRATION, exfiltration),
    (HARVESTING, credential_harvesting),
    (OBFUSCATED_EXECUTION, obfuscated_execution),
    (PROMPT_EXTRACTION, prompt_extraction),
];

/// Returns the first injection pattern found in `text`, if any. A note
/// that only quotes an attack phrase while discussing attacks is not one
/// (see [`mention::quotes_an_attack`]).
pub(crate) fn scan(text: &str) -> Option<Finding> {
    if !prefilter::may_match(text) {
        return None;
    }
    let label = first_match(&Normalized::new(text))?;
    if mention::quotes_an_attack(text) {
        return None;
    }
    Some(Finding { label })
}

fn first_match(n: &Normalized) -> Option<&'static str> {
    CHECKS
        .iter()
        .find(|(_, check)| check(n))
        .map(|(label, _)| *label)
}

/// Every class that matches, in check order.
fn all_matches(n: &Normalized) -> Vec<&'static str> {
    CHECKS
        .iter()
        .filter(|(_, check)| check(n))
        .map(|(label, _)| *label)
        .collect()
}

/// Prepares recalled text for a prompt: removes zero-width and bidi
/// control characters and defangs chat-template markers (`<|im_start|>`,
/// `<system>`, `[INST]`, …) so they cannot be read as turn boundaries.
pub(crate) fn neutralise(text: &str) -> String {
    // Every marker opens with `<` or `[`; text without them (and plain
    // ASCII has no invisible characters) comes back as it is.
    if text.is_ascii() && !text.contains(['<', '[']) {
        return text.to_string();
    }
    let visible: String = text
        .chars()
        .filter(|c| !normalize::is_invisible(*c))
        .collect();
    let mut out = String::with_capacity(visible.len());
    let mut rest = visible.as_str();
    'outer: while !rest.is_empty() {
        if !rest.starts_with(['<', '[']) {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        for marker in TEMPLATE_MARKERS {
            if let Some(head) = rest.get(..marker.len())
                && head.eq_ignore_ascii_case(marker)
            {
                out.extend(head.chars().map(|c| match c {
                    '<' => '‹',
                    '>' => '›',
                    '[' => '⟦',
                    ']' => '⟧',
                    other => other,
                }));
                rest = &rest[marker.len()..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("non-empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

const TEMPLATE_MARKERS: &[&str] = &[
    "<|im_start|>",
    "<|im_end|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<system>",
    "</system>",
    "<<sys>>",
    "<</sys>>",
    "[inst]",
    "[/inst]",
    "[system message]",
    "[system]",
];

// ---------------------------------------------------------------------
// Word sets. A trailing `*` matches any word with that prefix.

fn is<S: AsRef<str>>(word: &str, set: &[S]) -> bool {
    set.iter().any(|p| {
        let p = p.as_ref();
        match p.strip_suffix('*') {
            Some(prefix) => word.starts_with(prefix),
            None => word == p,
        }
    })
}

fn any_in<S: AsRef<str>>(words: &[Word], set: &[S]) -> bool {
    words.iter().any(|w| is(&w.text, set))
}

/// Positions `j` in `(i, i + window]` whose word is in `set`.
fn within<S: AsRef<str>>(words: &[Word], i: usize, window: usize, set: &[S]) -> Option<usize> {
    (i + 1..words.len().min(i + window + 1)).find(|&j| is(&words[j].text, set))
}

/// Positions `j` in `[i - window, i)` whose word is in `set`, nearest
/// first.
fn before<S: AsRef<str>>(words: &[Word], i: usize, window: usize, set: &[S]) -> Option<usize> {
    (i.saturating_sub(window)..i)
        .rev()
        .find(|&j| is(&words[j].text, set))
}

/// Whether one of `set` stands among the two words before `i` in the same
/// clause: `don't ignore…` is negated, `Never mind. Ignore…` is not.
fn negated_by<S: AsRef<str>>(words: &[Word], i: usize, set: &[S]) -> bool {
    let mut k = i;
    for _ in 0..2 {
        if k == 0 || words[k].clause_start {
            return false;
        }
        k -= 1;
        if is(&words[k].text, set) {
            return true;
        }
    }
    false
}

/// Whether the word at `i` is negated (`don't ignore…`, `never forget…`).
fn negated(words: &[Word], i: usize) -> bool {
    negated_by(
        words,
        i,
        &["dont", "not", "never", "cant", "cannot", "shouldnt", "wont"],
    )
}

#[cfg(test)]
mod tests;
