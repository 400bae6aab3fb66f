//! Notes that mention an attack phrase while talking about attacks.
//!
//! "Read an article about prompt injection attacks like 'ignore previous
//! instructions' — need to harden the bot" is a note about an attack, not
//! one. The line between the two:
//!
//! * every phrase that matches is inside quotes (`"…"`, `'…'`, `“…”`,
//!   `‘…’`, `«…»`, `„…“`, `「…」`, `『…』` or backticks), or is the rest
//!   of a clause that gives it as an example (`attacks such as …`, `the
//!   classic example is …`) or reports it as an order given to someone
//!   else (`attacks tell models to …`), and the words outside match
//!   nothing, so no order is given in the note's own voice;
//! * the words outside the quotes talk about attacks (injection,
//!   jailbreak, attack, exploit, payload …, in the languages the detectors
//!   know);
//! * each quote is short (at most [`MAX_QUOTE_WORDS`] words) and is only
//!   talk aimed at a model — an override, a persona, developer mode,
//!   bypassing safety or asking for the system prompt. A quote holding a
//!   payload (a command, a secret file, sending data, a chat-template
//!   marker) is an attack wherever it stands.

use std::sync::OnceLock;

use super::normalize::{Normalized, fold};
use super::{
    BYPASS_SAFETY, DEVELOPER_MODE, DISREGARD_RULES, IGNORE_PREVIOUS, JAILBREAK_PERSONA,
    PROMPT_EXTRACTION, all_matches, any_in, first_match,
};

/// The longest quote that can be a mention.
const MAX_QUOTE_WORDS: usize = 16;

/// Classes a quoted phrase may belong to and still be talked about.
const QUOTABLE: &[&str] = &[
    IGNORE_PREVIOUS,
    DISREGARD_RULES,
    JAILBREAK_PERSONA,
    DEVELOPER_MODE,
    BYPASS_SAFETY,
    PROMPT_EXTRACTION,
];

/// Words that say the note is about attacks (prefixes end in `*`).
const TOPIC: &[&str] = &[
    "injection*",
    "jailbreak*",
    "attack*",
    "exploit*",
    "payload*",
    "phishing",
    "adversarial",
    "malicious",
    "redteam*",
    "hacker*",
    "hacking",
    "vulnerab*",
    "inyeccion*",
    "ataque*",
    "injektion*",
    "angriff*",
    "attaque*",
    "injecao",
    "injecoes",
    "iniezion*",
    "attacc*",
    "aanval*",
    "atak*",
    "инъекци*",
    "атак*",
];
/// The same for scripts written without spaces.
const TOPIC_UNSPACED: &[&str] = &[
    "注入",
    "攻击",
    "攻擊",
    "攻撃",
    "越狱",
    "越獄",
    "脱獄",
    "インジェクション",
    "인젝션",
    "공격",
];

fn topic_words() -> &'static (Vec<String>, Vec<String>) {
    static WORDS: OnceLock<(Vec<String>, Vec<String>)> = OnceLock::new();
    WORDS.get_or_init(|| {
        (
            TOPIC.iter().map(|w| fold(w)).collect(),
            TOPIC_UNSPACED.iter().map(|w| fold(w)).collect(),
        )
    })
}

/// Cues after which the rest of the clause is a phrase talked about, as if
/// it were quoted: examples (`attacks such as …`, `the classic example is
/// …`).
const EXAMPLE_CUES: &[&[&str]] = &[
    &["such", "as"],
    &["like"],
    &["e.g."],
    &["for", "example"],
    &["for", "instance"],
    &["example", "is"],
    &["examples", "are"],
    &["example:"],
    &["examples:"],
    &["phrase"],
    &["phrases"],
];
/// Verbs of reported orders: `attacks tell models to …` reports the order
/// after `to`, within a few words of the verb.
const REPORTING_VERBS: &[&str] = &[
    "tell",
    "tells",
    "told",
    "telling",
    "ask",
    "asks",
    "asked",
    "asking",
    "trick",
    "tricks",
    "tricked",
    "tricking",
    "instruct",
    "instructs",
    "instructed",
    "urge",
    "urges",
    "persuade",
    "persuades",
    "convince",
    "convinces",
];

/// Whether `text` only quotes attack phrases, or gives them as examples
/// or reported orders, while talking about attacks.
pub(super) fn quotes_an_attack(text: &str) -> bool {
    let quotes = quoted_spans(text);
    if !quotes.is_empty() && mentions_only(text, &quotes) {
        return true;
    }
    let mut spans = quotes.clone();
    for span in example_spans(text) {
        if !quotes.iter().any(|q| q.0 < span.1 && span.0 < q.1) {
            spans.push(span);
        }
    }
    spans.sort_unstable();
    // Cues may stand inside one another's clause (`phrases like …`).
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged != quotes && mentions_only(text, &merged)
}

/// The rest of the clause after each example cue or reported order in
/// plain ASCII text (byte ranges, ending before `. ; , ! ?` or a line
/// break).
fn example_spans(text: &str) -> Vec<(usize, usize)> {
    if !text.is_ascii() {
        return Vec::new();
    }
    let lower = text.to_ascii_lowercase();
    let words: Vec<(usize, &str)> = lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | ':')))
        .scan(0, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut starts = Vec::new();
    for (k, &(_, word)) in words.iter().enumerate() {
        let bare = word.trim_end_matches(['.', ':']);
        if REPORTING_VERBS.contains(&bare) {
            if let Some(&(to, _)) = words[k + 1..].iter().take(4).find(|(_, w)| *w == "to") {
                starts.push(to + 2);
            }
            continue;
        }
        for cue in EXAMPLE_CUES {
            let matches = cue.len() <= words.len() - k
                && cue
                    .iter()
                    .zip(&words[k..])
                    .all(|(c, (_, w))| w == c || w.trim_end_matches(['.', ':']) == *c);
            if matches {
                let (last_at, last) = words[k + cue.len() - 1];
                starts.push(last_at + last.len());
            }
        }
    }
    starts
        .into_iter()
        .filter_map(|start| {
            let rest = &text[start..];
            let end = rest
                .find(['.', ';', ',', '!', '?', '\n'])
                .map_or(text.len(), |e| start + e);
            let span = text[start..end].trim_start_matches([' ', ':', '\t']);
            let begin = end - span.len();
            (!span.trim().is_empty()).then_some((begin, end))
        })
        .collect()
}

/// Whether, with `spans` taken as quotes, the words outside them give no
/// order and talk about attacks, and the spans hold short attack phrases
/// of the quotable kinds only (at least one).
fn mentions_only(text: &str, quotes: &[(usize, usize)]) -> bool {
    let mut outside = String::with_capacity(text.len());
    let mut last = 0;
    for &(start, end) in quotes {
        outside.push_str(&text[last..start]);
        outside.push_str(" … ");
        last = end;
    }
    outside.push_str(&text[last..]);
    let outside = Normalized::new(&outside);
    if first_match(&outside).is_some() || !talks_about_attacks(&outside) {
        return false;
    }
    let mut quoted_attack = false;
    for &(start, end) in quotes {
        let quote = Normalized::new(&text[start..end]);
        let found = all_matches(&quote);
        if found.is_empty() {
            continue;
        }
        if quote.words().len() > MAX_QUOTE_WORDS || found.iter().any(|l| !QUOTABLE.contains(l)) {
            return false;
        }
        quoted_attack = true;
    }
    quoted_attack
}

fn talks_about_attacks(n: &Normalized) -> bool {
    let (spaced, unspaced) = topic_words();
    any_in(n.words(), spaced) || unspaced.iter().any(|w| n.compact.contains(w.as_str()))
}

/// Byte ranges of the text inside quotes (the quote marks excluded). An
/// ASCII `'` or a `’` counts as a quote mark only where it does not stand
/// between letters, so `don't` opens nothing.
fn quoted_spans(text: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let letter_at = |k: Option<usize>| {
        k.and_then(|k| chars.get(k))
            .is_some_and(|(_, c)| c.is_alphanumeric())
    };
    let mut spans = Vec::new();
    let mut open: Option<(char, usize)> = None;
    for (k, &(at, c)) in chars.iter().enumerate() {
        let before = k.checked_sub(1);
        let after = Some(k + 1);
        match open {
            Some((close, start)) => {
                let closes = c == close
                    && (!matches!(c, '\'' | '’') || !letter_at(after) || !letter_at(before));
                if closes {
                    if at > start {
                        spans.push((start, at));
                    }
                    open = None;
                }
            }
            None => {
                let close = match c {
                    '"' => '"',
                    '`' => '`',
                    '“' => '”',
                    '„' => '“',
                    '«' => '»',
                    '「' => '」',
                    '『' => '』',
                    '‘' => '’',
                    '\'' if !letter_at(before) => '\'',
                    _ => continue,
                };
                open = Some((close, at + c.len_utf8()));
            }
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_and_reported_orders_are_read_as_quoted() {
        let cases: &[(&str, &[&str])] = &[
            (
                "Prompt injection attacks tell models to ignore previous instructions; our filter should catch them.",
                &["ignore previous instructions"],
            ),
            (
                "Notes on prompt injection: the classic example is ignore all previous instructions",
                &["ignore all previous instructions"],
            ),
            (
                "attack phrases like ignore the rules, e.g. act as DAN",
                &["like ignore the rules", "ignore the rules", "act as DAN"],
            ),
            ("Ask Bob to water the plants", &["water the plants"]),
            ("nothing here", &[]),
        ];
        for (text, want) in cases {
            let got: Vec<&str> = example_spans(text)
                .into_iter()
                .map(|(a, b)| &text[a..b])
                .collect();
            assert_eq!(got, *want, "{text:?}");
        }
    }

    #[test]
    fn quoted_spans_skip_apostrophes() {
        let text = "don't say 'ignore this' or “that” and \"x\"";
        let spans: Vec<&str> = quoted_spans(text)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect();
        assert_eq!(spans, vec!["ignore this", "that", "x"]);
    }
}
