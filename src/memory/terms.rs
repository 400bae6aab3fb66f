//! Search terms: how note text and queries become index terms.
//!
//! Both sides go through the same steps, so a query finds what a note says
//! however either is written:
//!
//! 1. NFKC normalisation, invisible characters removed, case folded
//!    (`Straße` → `strasse`), diacritics removed (`café` → `cafe`);
//! 2. words are maximal runs of letters and digits; CJK runs (Han, kana,
//!    Hangul) become single characters and overlapping pairs, so `喜欢站会`
//!    finds `用户喜欢早上九点开站会` by its words;
//! 3. English stop words and single ASCII letters are dropped;
//! 4. ASCII words are stemmed (Porter2: `meetings` → `meet`).
//!
//! The output is a space-separated term string that FTS5's `unicode61`
//! tokenizer splits back into exactly these terms.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;

const MAX_TERM_CHARS: usize = 48;

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// English stop words (the function words of questions and notes).
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "arent",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "d",
    "did",
    "didnt",
    "do",
    "does",
    "doesnt",
    "doing",
    "dont",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "hes",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "im",
    "in",
    "into",
    "is",
    "isnt",
    "it",
    "its",
    "itself",
    "ive",
    "just",
    "lets",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "she",
    "shes",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "thats",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "theyre",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasnt",
    "we",
    "were",
    "werent",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "youre",
    "yours",
    "yourself",
    "yourselves",
];

pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Whether `c` belongs to a script written without spaces between words.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F)
}

/// Folds text for matching: NFKC, invisible characters removed, lowercase,
/// `ß` → `ss`, diacritics removed.
pub(crate) fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.nfkd() {
        // Only Latin-style accents are dropped; marks such as kana voicing
        // change the word and are recomposed below.
        let accent = ('\u{0300}'..='\u{036F}').contains(&c);
        if accent || super::sanitize::is_invisible_char(c) {
            continue;
        }
        if c == 'ß' {
            out.push_str("ss");
        } else if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    // Re-compose what NFKD split but folding kept (Hangul, kana voicing).
    out.nfc().collect()
}

/// A unit produced by [`segments`].
enum Segment<'a> {
    Word(&'a str),
    Cjk(Vec<char>),
}

fn segments(folded: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut word_start: Option<usize> = None;
    let mut cjk: Vec<char> = Vec::new();
    for (i, c) in folded.char_indices() {
        if is_cjk(c) {
            if let Some(s) = word_start.take() {
                out.push(Segment::Word(&folded[s..i]));
            }
            cjk.push(c);
        } else if c.is_alphanumeric() {
            if !cjk.is_empty() {
                out.push(Segment::Cjk(std::mem::take(&mut cjk)));
            }
            word_start.get_or_insert(i);
        } else {
            if let Some(s) = word_start.take() {
                out.push(Segment::Word(&folded[s..i]));
            }
            if !cjk.is_empty() {
                out.push(Segment::Cjk(std::mem::take(&mut cjk)));
            }
        }
    }
    if let Some(s) = word_start {
        out.push(Segment::Word(&folded[s..]));
    }
    if !cjk.is_empty() {
        out.push(Segment::Cjk(cjk));
    }
    out
}

fn word_term(word: &str) -> Option<String> {
    if word.len() == 1 && word.as_bytes()[0].is_ascii_alphabetic() {
        return None;
    }
    if is_stop_word(word) {
        return None;
    }
    let word: String = word.chars().take(MAX_TERM_CHARS).collect();
    if word.bytes().all(|b| b.is_ascii_lowercase()) {
        Some(stemmer().stem(&word).into_owned())
    } else {
        Some(word)
    }
}

/// Terms to index for `text`: every word term, and for CJK runs every
/// character and every overlapping pair.
pub(crate) fn index_terms(text: &str) -> String {
    let folded = fold(text);
    let mut out = String::with_capacity(folded.len() + 16);
    let mut push = |term: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(term);
    };
    for segment in segments(&folded) {
        match segment {
            Segment::Word(w) => {
                if let Some(term) = word_term(w) {
                    push(&term);
                }
            }
            Segment::Cjk(chars) => {
                let mut buf = [0u8; 8];
                for (i, c) in chars.iter().enumerate() {
                    push(c.encode_utf8(&mut buf));
                    if let Some(next) = chars.get(i + 1) {
                        let pair: String = [*c, *next].iter().collect();
                        push(&pair);
                    }
                }
            }
        }
    }
    out
}

/// Terms of a query, in order, without duplicates. CJK runs of two or more
/// characters contribute their pairs (more precise than single characters).
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let folded = fold(query);
    let mut terms: Vec<String> = Vec::new();
    let mut push = |term: String| {
        if !terms.contains(&term) {
            terms.push(term);
        }
    };
    for segment in segments(&folded) {
        match segment {
            Segment::Word(w) => {
                if let Some(term) = word_term(w) {
                    push(term);
                }
            }
            Segment::Cjk(chars) if chars.len() == 1 => push(chars[0].to_string()),
            Segment::Cjk(chars) => {
                for pair in chars.windows(2) {
                    push(pair.iter().collect());
                }
            }
        }
    }
    terms
}

/// Rough token count of `text` for budgets: a token per four ASCII bytes
/// and one per other character (CJK text is about a token a character).
pub(crate) fn estimate_tokens(text: &str) -> usize {
    let (ascii, other) = text.chars().fold((0usize, 0usize), |(a, o), c| {
        if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
    });
    ascii.div_ceil(4) + other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn index_terms_table() {
        let cases = [
            ("Prefers morning standups at 9am", "prefer morn standup 9am"),
            ("Meetings with the team", "meet team"),
            ("Straße and CAFÉ", "strass cafe"),
            ("badge ZL-48213", "badg zl 48213"),
            ("a b c", ""),
            ("喜欢站会", "喜 喜欢 欢 欢站 站 站会 会"),
            ("Alice 喜欢 tea", "alic 喜 喜欢 欢 tea"),
            ("ign\u{200b}ore", "ignor"),
            ("NFD cafe\u{301}", "nfd cafe"),
        ];
        for (text, want) in cases {
            assert_eq!(index_terms(text), want, "{text:?}");
        }
    }

    #[test]
    fn query_terms_table() {
        let cases: &[(&str, &[&str])] = &[
            (
                "What did we decide about the standup?",
                &["decid", "standup"],
            ),
            ("meetings meeting", &["meet"]),
            ("喜欢站会", &["喜欢", "欢站", "站会"]),
            ("茶", &["茶"]),
            ("\"quoted\" AND (NEAR OR) * ^ -x:", &["quot", "near"]),
            ("!!! ??? ...", &[]),
            ("the", &[]),
        ];
        for (query, want) in cases {
            assert_eq!(query_terms(query), *want, "{query:?}");
        }
    }

    #[test]
    fn every_query_term_of_a_text_is_among_its_index_terms() {
        for text in [
            "Quillfeather hotel confirmation QF-5521",
            "牙医预约时间是下午三点半",
            "Pistachio Marmalade recipe",
        ] {
            let indexed: Vec<&str> = index_terms(text).leak().split(' ').collect();
            for term in query_terms(text) {
                assert!(
                    indexed.contains(&term.as_str()),
                    "{term} missing for {text}"
                );
            }
        }
    }

    #[test]
    fn token_estimates() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("喜欢站会"), 4);
    }
}
