//! Entity mentions in note text: `@Name` tags, speakers (`Caroline: …`),
//! and capitalised names (`Zephyrine Labs`, `Lisbon`).
//!
//! A mention is a tag, a speaker, a capitalised name in the middle of a
//! sentence, or a run of several capitalised words. A single capitalised
//! word that starts a sentence is not taken (`Went home` is not a name);
//! such a name is still found by its words. Keys fold case, accents and
//! the `-`/`_` of tags, so `@The-Castle` and `The Castle` are one entity.

use super::terms;

/// One mention in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mention {
    /// The folded key (see [`key`]).
    pub key: String,
    /// As written.
    pub display: String,
}

/// Most words in a capitalised run.
const MAX_RUN: usize = 4;

/// The key of a name: folded, `-` and `_` as spaces, single-spaced.
pub(crate) fn key(name: &str) -> String {
    let folded = terms::fold(name.trim().trim_start_matches('@'));
    folded
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words that are capitalised for reasons other than being a name.
fn is_common_word(lower: &str) -> bool {
    matches!(
        lower,
        "hey"
            | "hi"
            | "hello"
            | "yes"
            | "yeah"
            | "no"
            | "nope"
            | "ok"
            | "okay"
            | "oh"
            | "wow"
            | "thanks"
            | "thank"
            | "sure"
            | "great"
            | "cool"
            | "awesome"
            | "congrats"
            | "congratulations"
            | "sorry"
            | "please"
            | "well"
            | "so"
            | "also"
            | "then"
            | "today"
            | "tomorrow"
            | "yesterday"
            | "tonight"
            | "monday"
            | "tuesday"
            | "wednesday"
            | "thursday"
            | "friday"
            | "saturday"
            | "sunday"
            | "january"
            | "february"
            | "march"
            | "april"
            | "may"
            | "june"
            | "july"
            | "august"
            | "september"
            | "october"
            | "november"
            | "december"
            | "note"
            | "todo"
            | "done"
            | "fixed"
            | "added"
            | "update"
    ) || terms::is_stop_word(lower)
}

#[derive(Debug, Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    /// Starts a sentence (or the text).
    initial: bool,
    /// Only spaces separate it from the previous word.
    joined: bool,
}

fn words(text: &str) -> Vec<Word<'_>> {
    fn push<'a>(out: &mut Vec<Word<'a>>, text: &'a str, initial: &mut bool, joined: bool) {
        let w = text.trim_matches(|c: char| c == '\'' || c == '\u{2019}' || c == '-');
        if !w.is_empty() {
            out.push(Word {
                text: w,
                initial: *initial,
                joined,
            });
            *initial = false;
        }
    }
    let mut out = Vec::new();
    let mut initial = true;
    let mut joined = false;
    let mut start: Option<usize> = None;
    let is_word_char = |c: char| c.is_alphanumeric() || c == '\'' || c == '\u{2019}' || c == '-';
    for (i, c) in text.char_indices() {
        if is_word_char(c) {
            if start.is_none() {
                start = Some(i);
            }
            continue;
        }
        if let Some(s) = start.take() {
            push(&mut out, &text[s..i], &mut initial, joined);
            joined = true;
        }
        if c.is_whitespace() {
            continue;
        }
        joined = false;
        if matches!(
            c,
            '.' | '!' | '?' | ':' | ';' | '\n' | '"' | '\u{201c}' | '(' | '['
        ) {
            initial = true;
        }
    }
    if let Some(s) = start {
        push(&mut out, &text[s..], &mut initial, joined);
    }
    out
}

fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !first.is_uppercase() {
        return false;
    }
    let letters: Vec<char> = word.chars().filter(|c| c.is_alphabetic()).collect();
    let has_lower = letters.iter().any(|c| c.is_lowercase());
    // `Alice`, `McDonald`, `OpenClaw`; acronyms of 3+ letters (`NASA`).
    has_lower
        || (letters.len() >= 3
            && letters.len() == word.chars().filter(|c| c.is_alphanumeric()).count())
}

/// The mentions in `text` (a note body), in order, each key once.
pub(crate) fn mentions(text: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    let mut add = |display: &str| {
        let key = key(display);
        if key.is_empty() || key.chars().all(|c| c.is_numeric() || c == ' ') {
            return;
        }
        if !found.iter().any(|m| m.key == key) {
            found.push(Mention {
                key,
                display: display.to_string(),
            });
        }
    };
    // Tags.
    for (i, _) in text.match_indices('@') {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric()) {
            continue; // an e-mail address
        }
        let rest = &text[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        let tag = rest[..end].trim_end_matches('-');
        if tag.chars().next().is_some_and(char::is_alphabetic) {
            add(tag);
        }
    }
    // A speaker: `Name:` or `Two Names:` at the start.
    let head = text.trim_start();
    if let Some(colon) = head.find(':') {
        let name = &head[..colon];
        let parts: Vec<&str> = name.split_whitespace().collect();
        if (1..=3).contains(&parts.len())
            && parts
                .iter()
                .all(|p| is_capitalised(p) && !is_common_word(&p.to_lowercase()))
        {
            add(name.trim());
        }
    }
    // Capitalised runs.
    let words = words(text);
    let mut i = 0;
    while i < words.len() {
        if !is_capitalised(words[i].text) || words[i].text.starts_with(|c: char| c.is_numeric()) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < words.len()
            && j - i < MAX_RUN
            && words[j].joined
            && !words[j].initial
            && is_capitalised(words[j].text)
        {
            j += 1;
        }
        let run = &words[i..j];
        i = j;
        // One capitalised word starting a sentence says nothing.
        if run.len() == 1 && run[0].initial {
            continue;
        }
        // A sentence-initial common word is not part of the name after it
        // (`Hey Mel` → `Mel`).
        let skip = usize::from(run[0].initial && is_common_word(&run[0].text.to_lowercase()));
        let run = &run[skip..];
        if run.len() == 1 && is_common_word(&run[0].text.to_lowercase()) {
            continue;
        }
        let display = run.iter().map(|w| w.text).collect::<Vec<_>>().join(" ");
        add(&display);
    }
    found
}

/// Keys a query may name: tags and every run of one to four words.
pub(crate) fn query_keys(query: &str) -> Vec<String> {
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-' || c == '_' || c == '@'))
        .map(|w| w.trim_matches(|c: char| c == '\'' || c == '-'))
        .map(|w| w.strip_suffix("'s").unwrap_or(w))
        .filter(|w| !w.is_empty())
        .collect();
    let mut keys = Vec::new();
    for start in 0..words.len() {
        for len in 1..=MAX_RUN.min(words.len() - start) {
            let run = &words[start..start + len];
            if run
                .iter()
                .all(|w| is_common_word(w.to_lowercase().trim_start_matches('@')))
            {
                continue;
            }
            let k = key(&run.join(" "));
            if !k.is_empty() && !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_in_notes() {
        let cases: &[(&str, &[&str])] = &[
            ("Caroline: Hey Mel! Good to see you!", &["Caroline", "Mel"]),
            (
                "badge number for Zephyrine Labs is ZL-48213",
                &["Zephyrine Labs"],
            ),
            ("Alice moved the standup before lunch (#1234)", &[]),
            (
                "Met @Peter and @The-Castle crew in Lisbon.",
                &["Peter", "The-Castle", "Lisbon"],
            ),
            ("Went home early. Then called Bob.", &["Bob"]),
            (
                "Quillfeather hotel confirmation QF-5521 for the Lisbon trip",
                &["Lisbon"],
            ),
            ("Zephyrine Labs sent the badge", &["Zephyrine Labs"]),
            ("mail me at me@example.com", &[]),
            ("The NASA launch moved to Monday", &["NASA"]),
            ("I think we should go", &[]),
            ("服务器迁移完成", &[]),
        ];
        for (text, want) in cases {
            let got: Vec<String> = mentions(text).into_iter().map(|m| m.display).collect();
            assert_eq!(got, *want, "in {text:?}");
        }
    }

    #[test]
    fn keys_fold_tags_and_names_together() {
        assert_eq!(key("@The-Castle"), "the castle");
        assert_eq!(key("The Castle"), "the castle");
        assert_eq!(key("Zoë"), "zoe");
        assert_eq!(key("STRASSE"), key("Straße"));
    }

    #[test]
    fn query_keys_cover_runs() {
        let keys = query_keys("What did Caroline research about Zephyrine Labs?");
        for k in ["caroline", "zephyrine labs", "zephyrine", "research"] {
            assert!(keys.contains(&k.to_string()), "{k} in {keys:?}");
        }
        assert!(!keys.contains(&"what".to_string()));
        assert!(query_keys("tell me about @Peter's trip").contains(&"peter".to_string()));
    }
}
