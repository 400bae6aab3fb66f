//! Spaced-out letters that ran together (`ignoreallpreviousinstructions`),
//! split into the words the detectors know.

use super::exfiltration::{SENSITIVE, SENSITIVE_PHRASES};
use super::instructions::{
    AI_CUES, EARLIER_TEXT, INSTRUCTION_NOUNS, ORDERS, OVERRIDE_QUALIFIERS, OVERRIDE_VERBS,
    PERSONA_PHRASES, PERSONA_TRIGGERS, STRONG_PERSONA,
};
use super::paraphrase;

/// Function words an attack written letter by letter may hold.
const FUNCTION_WORDS: &[&str] = &[
    "a",
    "i",
    "an",
    "the",
    "and",
    "or",
    "to",
    "of",
    "me",
    "my",
    "you",
    "your",
    "now",
    "are",
    "is",
    "be",
    "as",
    "in",
    "on",
    "from",
    "with",
    "no",
    "not",
    "do",
    "dont",
    "what",
    "this",
    "that",
    "it",
    "us",
    "we",
    "just",
    "then",
    "only",
    "here",
    "who",
    "will",
    "can",
    "must",
    "mode",
    "enabled",
    "on",
    "ai",
    "assistant",
    "admin",
    "root",
];
const EXTRACTION_WORDS: &[&str] = &[
    "reveal",
    "print",
    "show",
    "repeat",
    "output",
    "display",
    "tell",
    "give",
    "leak",
    "dump",
    "share",
    "disclose",
    "recite",
    "write",
    "system",
    "prompt",
    "hidden",
    "initial",
    "original",
    "secret",
    "developer",
    "message",
    "instructions",
];

/// The longest word of [`vocabulary`], in bytes.
const VOCABULARY_MAX_LEN: usize = 24;

/// The words the detectors look for, with the usual endings of the ones
/// given as prefixes.
fn vocabulary() -> &'static std::collections::HashSet<String> {
    static WORDS: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut set = std::collections::HashSet::new();
        let lists: &[&[&str]] = &[
            OVERRIDE_VERBS,
            OVERRIDE_QUALIFIERS,
            INSTRUCTION_NOUNS,
            EARLIER_TEXT,
            ORDERS,
            STRONG_PERSONA,
            SENSITIVE,
            AI_CUES,
            FUNCTION_WORDS,
            EXTRACTION_WORDS,
        ];
        let phrases = PERSONA_TRIGGERS
            .iter()
            .chain(PERSONA_PHRASES)
            .chain(SENSITIVE_PHRASES)
            .flat_map(|p| p.iter());
        let words = lists
            .iter()
            .flat_map(|l| l.iter())
            .chain(phrases)
            .copied()
            .chain(paraphrase::vocabulary());
        for word in words {
            match word.strip_suffix('*') {
                Some(stem) => {
                    for ending in ["", "s", "e", "es", "ed", "ing", "y", "ies", "ion", "ions"] {
                        set.insert(format!("{stem}{ending}"));
                    }
                }
                None => {
                    set.insert(word.to_string());
                }
            }
        }
        set.retain(|w| w.len() <= VOCABULARY_MAX_LEN);
        set
    })
}

/// Splits letters that ran together (`ignoreallpreviousinstructions`)
/// into the words the detectors know, in as few words as possible; `None`
/// unless the whole run reads that way, as two words or more.
pub(super) fn segment(joined: &str) -> Option<Vec<String>> {
    if !joined.is_ascii() || joined.len() < 5 || joined.len() > 256 {
        return None;
    }
    let vocab = vocabulary();
    if vocab.contains(joined) {
        return None;
    }
    let n = joined.len();
    // best[end] = (words, start of the last word) covering joined[..end].
    let mut best: Vec<Option<(usize, usize)>> = vec![None; n + 1];
    best[0] = Some((0, 0));
    for end in 1..=n {
        for start in end.saturating_sub(VOCABULARY_MAX_LEN)..end {
            let Some((count, _)) = best[start] else {
                continue;
            };
            if vocab.contains(&joined[start..end]) && best[end].is_none_or(|(c, _)| count + 1 < c) {
                best[end] = Some((count + 1, start));
            }
        }
    }
    let (count, _) = best[n]?;
    if count < 2 {
        return None;
    }
    let mut parts = Vec::with_capacity(count);
    let mut end = n;
    while end > 0 {
        let (_, start) = best[end]?;
        parts.push(joined[start..end].to_string());
        end = start;
    }
    parts.reverse();
    Some(parts)
}
