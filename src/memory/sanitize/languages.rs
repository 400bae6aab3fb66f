//! Instruction overrides and system-prompt extraction in languages other
//! than English.
//!
//! Languages written with spaces between words are read word by word, as
//! the English detectors read (a verb, then within a few words a noun for
//! instructions with a qualifier such as "all" or "previous" next to it);
//! where the verb may come last (German, Dutch, Turkish), the noun may
//! stand before it too. Chinese, Japanese and Korean are read as text
//! without spaces: a verb with a noun and a qualifier within a few
//! characters either side. Every word of the tables goes through the same
//! folding as the text (case, accents, look-alike letters), so the tables
//! are written as people write the words.

mod spaced;
mod unspaced;

use std::collections::HashMap;
use std::sync::OnceLock;

use super::instructions::EarlierText;
use super::normalize::{Normalized, Word, fold};
use super::{DISREGARD_RULES, IGNORE_PREVIOUS, any_in, before, is, negated_by, within};
use spaced::SPACED;
use unspaced::UNSPACED;

/// A table with every entry folded as text is.
struct Folded {
    ignore: Vec<String>,
    forget: Vec<String>,
    qualifiers: Vec<String>,
    nouns: Vec<String>,
    everything: Vec<String>,
    told: Vec<String>,
    not_before: Vec<String>,
    not_after: Vec<String>,
    verb_last: bool,
    reveal: Vec<String>,
    /// See [`spaced::Spaced::earlier`] and [`unspaced::Unspaced::earlier`]; `orders` holds
    /// the `reveal` verbs too (`earlier_lead` and `and` are empty for
    /// unspaced languages).
    earlier: Vec<String>,
    earlier_lead: Vec<String>,
    orders: Vec<String>,
    and: Vec<String>,
    /// Phrases as folded words (spaced) or one folded string (unspaced).
    prompt: Vec<Vec<String>>,
    /// See [`unspaced::Unspaced::window`] (unused for spaced languages).
    window: usize,
}

fn fold_all(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| fold(w)).collect()
}

/// The spaced languages' tables, and their verbs indexed so that a word
/// is looked up once whatever the number of languages.
struct SpacedTables {
    langs: Vec<Folded>,
    /// Override verb → (language, label) pairs.
    verbs: HashMap<String, Vec<(usize, &'static str)>>,
    /// "Show"-like verb → languages.
    reveals: HashMap<String, Vec<usize>>,
}

fn spaced() -> &'static SpacedTables {
    static TABLES: OnceLock<SpacedTables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let langs: Vec<Folded> = SPACED
            .iter()
            .map(|l| Folded {
                ignore: fold_all(l.ignore),
                forget: fold_all(l.forget),
                qualifiers: fold_all(l.qualifiers),
                nouns: fold_all(l.nouns),
                everything: fold_all(l.everything),
                told: fold_all(l.told),
                not_before: fold_all(l.not_before),
                not_after: fold_all(l.not_after),
                verb_last: l.verb_last,
                reveal: fold_all(l.reveal),
                earlier: fold_all(l.earlier),
                earlier_lead: fold_all(l.earlier_lead),
                orders: fold_all(&[l.reveal, l.orders].concat()),
                and: fold_all(l.and),
                prompt: l.prompt.iter().map(|p| fold_all(p)).collect(),
                window: 0,
            })
            .collect();
        let mut verbs: HashMap<String, Vec<(usize, &'static str)>> = HashMap::new();
        let mut reveals: HashMap<String, Vec<usize>> = HashMap::new();
        for (k, lang) in langs.iter().enumerate() {
            for verb in &lang.ignore {
                verbs
                    .entry(verb.clone())
                    .or_default()
                    .push((k, IGNORE_PREVIOUS));
            }
            for verb in &lang.forget {
                verbs
                    .entry(verb.clone())
                    .or_default()
                    .push((k, DISREGARD_RULES));
            }
            for verb in &lang.reveal {
                reveals.entry(verb.clone()).or_default().push(k);
            }
        }
        SpacedTables {
            langs,
            verbs,
            reveals,
        }
    })
}

fn unspaced() -> &'static [Folded] {
    static TABLES: OnceLock<Vec<Folded>> = OnceLock::new();
    TABLES.get_or_init(|| {
        UNSPACED
            .iter()
            .map(|l| Folded {
                ignore: fold_all(l.ignore),
                forget: fold_all(l.forget),
                qualifiers: fold_all(l.qualifiers),
                nouns: fold_all(l.nouns),
                everything: Vec::new(),
                told: Vec::new(),
                not_before: fold_all(l.not_before),
                not_after: fold_all(l.not_after),
                verb_last: true,
                reveal: fold_all(l.reveal),
                earlier: fold_all(l.earlier),
                earlier_lead: Vec::new(),
                orders: fold_all(&[l.reveal, l.orders].concat()),
                and: Vec::new(),
                prompt: vec![fold_all(l.prompt)],
                window: l.window,
            })
            .collect()
    })
}

/// The verbs of the languages written with spaces that are plain ASCII
/// once folded (the anchors the first look needs).
pub(super) fn ascii_verbs() -> impl Iterator<Item = String> {
    // Only the verbs are folded here, not the whole tables: the first look
    // needs them in every command that reads memory back, the tables only
    // for text it lets through.
    SPACED
        .iter()
        .flat_map(|l| l.ignore.iter().chain(l.forget).chain(l.reveal))
        .map(|w| fold(w))
        .filter(|w| w.is_ascii())
}

/// The label of an override in another language, if any.
pub(super) fn override_instructions(n: &Normalized) -> Option<&'static str> {
    spaced_override(n).or_else(|| unspaced_override(n))
}

fn spaced_override(n: &Normalized) -> Option<&'static str> {
    let tables = spaced();
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            let Some(found) = tables.verbs.get(&w.text) else {
                continue;
            };
            for &(k, label) in found {
                let lang = &tables.langs[k];
                if negated_by(words, i, &lang.not_before)
                    || words
                        .get(i + 1)
                        .is_some_and(|next| is(&next.text, &lang.not_after))
                {
                    continue;
                }
                if let Some(j) = within(words, i, 6, &lang.nouns) {
                    let span_end = (j + 2).min(words.len() - 1);
                    if any_in(&words[i + 1..=span_end], &lang.qualifiers) {
                        return Some(label);
                    }
                }
                if lang.verb_last
                    && let Some(j) = before(words, i, 6, &lang.nouns)
                    && any_in(&words[j.saturating_sub(3)..i], &lang.qualifiers)
                {
                    return Some(label);
                }
                if let Some(j) = within(words, i, 2, &lang.everything)
                    && within(words, j, 5, &lang.told).is_some()
                {
                    return Some(label);
                }
                let earlier = EarlierText {
                    earlier: lang.earlier.as_slice(),
                    lead: &lang.earlier_lead,
                    and: &lang.and,
                    orders: &lang.orders,
                };
                if earlier.then_order(n, words, i) {
                    return Some(label);
                }
            }
        }
    }
    None
}

fn unspaced_override(n: &Normalized) -> Option<&'static str> {
    let text = n.compact.as_str();
    if !has_unspaced_script(text) {
        return None;
    }
    for lang in unspaced() {
        for (verbs, label) in [
            (&lang.ignore, IGNORE_PREVIOUS),
            (&lang.forget, DISREGARD_RULES),
        ] {
            for verb in verbs {
                for (at, _) in text.match_indices(verb.as_str()) {
                    let end = at + verb.len();
                    let (ahead, after) = (&text[..at], &text[end..]);
                    let negated = lang
                        .not_before
                        .iter()
                        .any(|neg| ahead.ends_with(neg.as_str()))
                        || lang
                            .not_after
                            .iter()
                            .any(|neg| after.starts_with(neg.as_str()));
                    if negated {
                        continue;
                    }
                    let window = format!(
                        "{}{}",
                        tail_chars(ahead, lang.window),
                        head_chars(after, lang.window)
                    );
                    if lang.nouns.iter().any(|w| window.contains(w.as_str()))
                        && lang.qualifiers.iter().any(|w| window.contains(w.as_str()))
                    {
                        return Some(label);
                    }
                    // The earlier text right by the verb (`忽略以上`,
                    // `上記を無視`), then an order after it.
                    let (near_before, near_after) = (tail_chars(ahead, 4), head_chars(after, 4));
                    let earlier = lang.earlier.iter().any(|w| {
                        near_before.contains(w.as_str()) || near_after.contains(w.as_str())
                    });
                    let order = head_chars(after, lang.window);
                    if earlier && lang.orders.iter().any(|w| order.contains(w.as_str())) {
                        return Some(label);
                    }
                }
            }
        }
    }
    None
}

/// "Show me your system prompt" in another language.
pub(super) fn prompt_extraction(n: &Normalized) -> bool {
    spaced_extraction(n) || unspaced_extraction(n)
}

fn spaced_extraction(n: &Normalized) -> bool {
    let tables = spaced();
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            let Some(found) = tables.reveals.get(&w.text) else {
                continue;
            };
            for &k in found {
                let lang = &tables.langs[k];
                if negated_by(words, i, &lang.not_before) {
                    continue;
                }
                let end = (i + 7).min(words.len());
                if (i + 1..end).any(|j| lang.prompt.iter().any(|p| phrase_at(words, j, p))) {
                    return true;
                }
                if lang.verb_last
                    && (i.saturating_sub(6)..i)
                        .any(|j| lang.prompt.iter().any(|p| phrase_at(words, j, p)))
                {
                    return true;
                }
            }
        }
    }
    false
}

fn phrase_at(words: &[Word], i: usize, phrase: &[String]) -> bool {
    phrase.len() <= words.len() - i && phrase.iter().zip(&words[i..]).all(|(p, w)| w.text == *p)
}

fn unspaced_extraction(n: &Normalized) -> bool {
    let text = n.compact.as_str();
    if !has_unspaced_script(text) {
        return false;
    }
    unspaced().iter().any(|lang| {
        lang.reveal.iter().any(|verb| {
            text.match_indices(verb.as_str()).any(|(at, _)| {
                let window = format!(
                    "{}{}",
                    tail_chars(&text[..at], lang.window),
                    head_chars(&text[at + verb.len()..], lang.window)
                );
                lang.prompt[0].iter().any(|p| window.contains(p.as_str()))
            })
        })
    })
}

/// Whether `text` holds Chinese, Japanese or Korean characters (Hangul
/// as the conjoining letters folding leaves).
fn has_unspaced_script(text: &str) -> bool {
    !text.is_ascii()
        && text.chars().any(|c| {
            matches!(c,
                '\u{1100}'..='\u{11FF}'
                | '\u{3040}'..='\u{30FF}'
                | '\u{3130}'..='\u{318F}'
                | '\u{3400}'..='\u{4DBF}'
                | '\u{4E00}'..='\u{9FFF}'
                | '\u{AC00}'..='\u{D7AF}'
                | '\u{F900}'..='\u{FAFF}')
        })
}

/// The last `n` characters of `text`.
fn tail_chars(text: &str, n: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &text[start..]
}

/// The first `n` characters of `text`.
fn head_chars(text: &str, n: usize) -> &str {
    let end = text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    &text[..end]
}
