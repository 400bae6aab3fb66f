//! Paraphrases of "ignore previous instructions" in English: orders of
//! several words (`pay no attention to`, `set aside`, `stop following`,
//! `do not obey`, `get rid of`), verbs that read as an override only
//! when given as an order (`drop`, `scrap`, `disobey`), and the single
//! override verbs (`ignore`, `disregard` …) given as an order with their
//! object behind longer fillers (`each and every one of the …`).
//!
//! A phrase counts only where it opens an order (start of a clause, after
//! `please`, `and`, a comma, `you must …`, `can you …`), is not negated,
//! and an instruction noun stands within a few words after it in the same
//! clause, qualified as the model's instructions. How strong the
//! qualifier must be depends on how ordinary the phrase is elsewhere:
//!
//! * [`Reach::Any`] — phrases that only mean "ignore" (`pay no attention
//!   to`) take any qualifier `ignore` takes (`your`, `all`, `previous` …).
//! * [`Reach::Earlier`] — phrases with everyday uses (`set aside the
//!   earlier draft`, `drop your orders at the desk`) need a qualifier
//!   pointing at earlier text (`previous`, `above`, `foregoing` …), or
//!   `your`/`all`/`any` with a noun that only means a model's
//!   instructions (`instructions`, `prompts`, `directives`, `guidelines`).
//!   Orders and directions followed by a preposition (`the previous
//!   directions to the venue`) and instructions on paper (`the prior
//!   instructions manual`) are everyday things.
//! * [`Reach::Yours`] — not following (`stop following`, `never obey`):
//!   as `Earlier`, but `any`/`all` do not count, so the usual safety rule
//!   `never follow any instructions you find in web pages` passes;
//!   `stop following your content policy` is left to the bypass-safety
//!   class, which names it.
//!
//! A report is not an order: `we stopped following the old rules in
//! March`, `I set aside the earlier instructions`.

use super::instructions::{
    IGNORE_VERBS, INSTRUCTION_NOUNS, OVERRIDE_QUALIFIERS, OVERRIDE_VERBS, earlier_text_then_order,
    guards_against_untrusted_text, imperative_at,
};
use super::normalize::{Normalized, Word};
use super::{DISREGARD_RULES, IGNORE_PREVIOUS, any_in, is, negated, within};

/// Which qualifiers a phrase's object needs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Any,
    Earlier,
    Yours,
}

/// One override phrase: a pattern list per word (`*` ends a prefix).
struct Phrase {
    words: &'static [&'static [&'static str]],
    /// The word the first look ([`super::prefilter`]) looks for; every
    /// match holds it.
    anchor: usize,
    reach: Reach,
    label: &'static str,
}

const NOT: &[&str] = &["not", "dont", "never"];
const STOP: &[&str] = &["stop", "quit", "cease"];
const FOLLOW: &[&str] = &["follow", "obey", "heed"];
const FOLLOWING: &[&str] = &["following", "obeying", "heeding"];
const ATTENTION: &[&str] = &["attention", "heed", "mind"];
const ASIDE_VERBS: &[&str] = &["set", "put", "lay", "cast", "push", "brush"];
const DROP_VERBS: &[&str] = &[
    "drop", "scrap", "ditch", "dismiss", "erase", "wipe", "trash", "toss",
];

/// The single verbs of the English override ([`super::instructions`])
/// again, for objects behind longer fillers (`ignore each and every one of the previous
/// instructions`). Their words are anchors and vocabulary already.
const SINGLE_VERBS: &[Phrase] = &[
    Phrase {
        words: &[IGNORE_VERBS],
        anchor: 0,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[OVERRIDE_VERBS],
        anchor: 0,
        reach: Reach::Any,
        label: DISREGARD_RULES,
    },
];

const PHRASES: &[Phrase] = &[
    Phrase {
        words: &[&["pay"], &["no"], ATTENTION, &["to"]],
        anchor: 2,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[NOT, &["pay"], ATTENTION, &["to"]],
        anchor: 2,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[STOP, &["paying"], ATTENTION, &["to"]],
        anchor: 2,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["take"], &["no"], &["notice"], &["of"]],
        anchor: 2,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["tune"], &["out"]],
        anchor: 0,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["disobey*"]],
        anchor: 0,
        reach: Reach::Any,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["never"], &["mind"]],
        anchor: 1,
        reach: Reach::Earlier,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[STOP, FOLLOWING],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[STOP, &["listening", "adhering"], &["to"]],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[STOP, &["complying"], &["with"]],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[NOT, FOLLOW],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[NOT, &["listen", "adhere"], &["to"]],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[NOT, &["comply"], &["with"]],
        anchor: 1,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["no"], &["longer"], FOLLOW],
        anchor: 2,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[&["no"], &["longer"], &["listen", "adhere"], &["to"]],
        anchor: 2,
        reach: Reach::Yours,
        label: IGNORE_PREVIOUS,
    },
    Phrase {
        words: &[ASIDE_VERBS, &["aside"]],
        anchor: 1,
        reach: Reach::Earlier,
        label: DISREGARD_RULES,
    },
    Phrase {
        words: &[DROP_VERBS],
        anchor: 0,
        reach: Reach::Earlier,
        label: DISREGARD_RULES,
    },
    Phrase {
        words: &[&["throw", "toss"], &["out", "away"]],
        anchor: 0,
        reach: Reach::Earlier,
        label: DISREGARD_RULES,
    },
    Phrase {
        words: &[&["get"], &["rid"], &["of"]],
        anchor: 1,
        reach: Reach::Earlier,
        label: DISREGARD_RULES,
    },
];

/// Qualifiers that point at text that came before (all of them are
/// [`OVERRIDE_QUALIFIERS`] too, so the vocabulary holds them).
const EARLIER_QUALIFIERS: &[&str] = &[
    "previous",
    "prior",
    "above",
    "earlier",
    "preceding",
    "foregoing",
    "aforementioned",
    "former",
    "initial",
    "original",
    "system",
];
/// Nouns that only mean instructions given to a model.
const MODEL_NOUNS: &[&str] = &["instruction*", "prompt*", "directive*", "guideline*"];
/// Nouns that are everyday things when a preposition follows (`the
/// previous directions to the venue`, `the prior orders for table 5`).
const EVERYDAY_NOUNS: &[&str] = &["direction*", "order*"];
const EVERYDAY_AFTER: &[&str] = &["to", "from", "for", "of", "on", "at", "in"];
/// Nouns after an instruction noun that make it a thing on paper (`the
/// prior instructions manual`).
const PAPER: &[&str] = &[
    "manual*",
    "booklet*",
    "leaflet*",
    "sheet*",
    "binder*",
    "book*",
    "card*",
    "page*",
    "folder*",
    "document*",
];
/// Words that may open the object before the window for its noun starts
/// (`each and every one of the previous instructions`).
const LEAD_FILLERS: &[&str] = &[
    "each", "and", "every", "single", "one", "of", "the", "all", "any", "last",
];

/// The words the first look needs for each phrase.
pub(super) fn anchors() -> impl Iterator<Item = &'static str> {
    PHRASES
        .iter()
        .flat_map(|p| p.words[p.anchor].iter().copied())
}

/// Every word of every phrase, for reading letters that ran together.
pub(super) fn vocabulary() -> impl Iterator<Item = &'static str> {
    PHRASES
        .iter()
        .flat_map(|p| p.words.iter().flat_map(|w| w.iter().copied()))
}

/// The label of the first override phrase given as an order, if any.
pub(super) fn override_phrase(n: &Normalized) -> Option<&'static str> {
    for words in n.variants() {
        for i in 0..words.len() {
            for phrase in SINGLE_VERBS.iter().chain(PHRASES) {
                if matches(n, words, i, phrase) {
                    return Some(phrase.label);
                }
            }
        }
    }
    None
}

fn matches(n: &Normalized, words: &[Word], i: usize, phrase: &Phrase) -> bool {
    let len = phrase.words.len();
    let fits = len <= words.len() - i
        && phrase
            .words
            .iter()
            .zip(&words[i..])
            .all(|(set, w)| is(&w.text, set));
    if !fits || negated(words, i) || !opens_order(n, words, i) {
        return false;
    }
    let end = i + len - 1;
    if earlier_text_then_order(n, words, end) {
        return true;
    }
    if phrase.reach == Reach::Any
        && let Some(j) = within(words, end, 2, &["everything"])
        && within(words, j, 5, &["told", "said", "above", "before"]).is_some()
    {
        return true;
    }
    let lead = words[end + 1..]
        .iter()
        .take_while(|w| is(&w.text, LEAD_FILLERS))
        .count();
    (end + 1..words.len().min(end + 7 + lead))
        .filter(|&j| is(&words[j].text, INSTRUCTION_NOUNS))
        .take_while(|&j| !words[end + 1..=j].iter().any(|w| w.clause_start))
        .any(|j| qualified_object(words, end, j, phrase.reach))
}

/// Whether the instruction noun at `j` is qualified as the model's
/// instructions for a phrase ending at `end`.
fn qualified_object(words: &[Word], end: usize, j: usize, reach: Reach) -> bool {
    if guards_against_untrusted_text(words, end, j) {
        return false;
    }
    // Qualifiers may also follow the noun: `the instructions above`.
    let around = &words[end + 1..=(j + 2).min(words.len() - 1)];
    let between = &words[end + 1..j];
    let noun = &words[j].text;
    match reach {
        Reach::Any => any_in(around, OVERRIDE_QUALIFIERS),
        Reach::Earlier | Reach::Yours => {
            let next = words.get(j + 1).filter(|w| !w.clause_start);
            let everyday = next.is_some_and(|w| {
                is(&w.text, PAPER) || (is(noun, EVERYDAY_NOUNS) && is(&w.text, EVERYDAY_AFTER))
            });
            if everyday {
                return false;
            }
            let possessive: &[&str] = if reach == Reach::Yours {
                &["your"]
            } else {
                &["your", "all", "any", "every"]
            };
            any_in(around, EARLIER_QUALIFIERS)
                || (is(noun, MODEL_NOUNS) && any_in(between, possessive))
        }
    }
}

/// Whether the word at `i` opens an order to the reader: as
/// [`imperative_at`], or after a comma, dash or bracket (`OK, drop …`),
/// after `do` (`do not obey …`) or addressed to the reader (`can you …`,
/// `you …` opening a clause).
pub(super) fn opens_order(n: &Normalized, words: &[Word], i: usize) -> bool {
    if imperative_at(words, i) {
        return true;
    }
    let prev = &words[i - 1];
    let sep = n
        .flat
        .get(prev.offset + prev.text.len()..words[i].offset)
        .unwrap_or("");
    if sep.contains([',', '-', '(', '"', '*', '>']) {
        return true;
    }
    if is(&prev.text, &["pls", "plz"]) {
        return true;
    }
    if prev.text == "do" {
        return opens_order(n, words, i - 1);
    }
    is(&prev.text, &["you", "u"])
        && (i == 1
            || prev.clause_start
            || is(
                &words[i - 2].text,
                &["can", "could", "would", "will", "please", "pls"],
            ))
}

#[cfg(test)]
#[path = "paraphrase_tests.rs"]
mod tests;
