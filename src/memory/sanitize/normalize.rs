//! The normalised views of a note that the detectors read.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// One word of the normalised text.
#[derive(Debug, Clone)]
pub struct Word {
    pub text: String,
    /// Byte offset of the word in [`Normalized::flat`].
    pub offset: usize,
    /// The word opens a clause (start of text or after `. ! ? ; :` or a
    /// line break).
    pub clause_start: bool,
    /// The next non-space character after the word is `:`.
    pub colon_after: bool,
}

#[derive(Debug)]
pub struct Normalized {
    /// Lowercase ASCII-folded text; whitespace runs collapsed to one space
    /// (or one `\n` when the run held a line break).
    pub flat: String,
    /// `flat` without any whitespace, for markers written with spaces in
    /// them (`< system >`).
    pub compact: String,
    words: Vec<Word>,
    /// The words with leet-speak digits read as letters (`1gn0re`), when
    /// that changes anything.
    leet: Option<Vec<Word>>,
}

impl Normalized {
    pub fn new(text: &str) -> Normalized {
        // Plain ASCII has no look-alikes or invisible characters to undo.
        let folded = if text.is_ascii() {
            text.to_ascii_lowercase()
        } else {
            let mut folded = String::with_capacity(text.len());
            for c in text.nfkd() {
                if is_invisible(c) || is_combining_mark(c) {
                    continue;
                }
                let c = confusable(c).unwrap_or(c);
                folded.extend(c.to_lowercase());
            }
            folded.replace('ß', "ss")
        };
        let flat = collapse_whitespace(&folded);
        let compact: String = flat.chars().filter(|c| !c.is_whitespace()).collect();
        let words = join_spaced_letters(split_words(&flat));
        let leet = leet_variant(&words);
        Normalized {
            flat,
            compact,
            words,
            leet,
        }
    }

    /// The word sequences to check: the plain words, then the leet reading.
    pub fn variants(&self) -> impl Iterator<Item = &[Word]> {
        std::iter::once(self.words.as_slice()).chain(self.leet.as_deref())
    }
}

/// Characters that render as nothing: zero-width spaces and joiners, bidi
/// controls, the BOM, soft hyphens and filler characters.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
    )
}

/// Letters from other scripts that look like ASCII, and look-alike
/// punctuation that matters for markers and pipes.
fn confusable(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic
        'а' | 'А' => 'a',
        'В' | 'ь' => 'b',
        'с' | 'С' => 'c',
        'ԁ' => 'd',
        'е' | 'Е' | 'ё' | 'Ё' => 'e',
        'ɡ' => 'g',
        'һ' | 'Н' => 'h',
        'і' | 'І' | 'ї' | 'Ї' | 'ӏ' | 'Ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'К' | 'к' => 'k',
        'М' | 'м' => 'm',
        'о' | 'О' => 'o',
        'р' | 'Р' => 'p',
        'ԛ' => 'q',
        'ѕ' | 'Ѕ' => 's',
        'Т' | 'т' => 't',
        'у' | 'У' => 'y',
        'х' | 'Х' => 'x',
        'ԝ' | 'Ԝ' => 'w',
        'п' => 'n',
        // Greek
        'α' | 'Α' => 'a',
        'Β' | 'β' => 'b',
        'ε' | 'Ε' => 'e',
        'Ζ' => 'z',
        'Η' => 'h',
        'ι' | 'Ι' => 'i',
        'κ' | 'Κ' => 'k',
        'Μ' => 'm',
        'ν' | 'Ν' => 'n',
        'ο' | 'Ο' | 'σ' => 'o',
        'ρ' | 'Ρ' => 'p',
        'τ' | 'Τ' => 't',
        'υ' | 'Υ' => 'y',
        'χ' | 'Χ' => 'x',
        // Latin look-alikes and other scripts
        'ı' => 'i',
        'ȷ' => 'j',
        'ℓ' => 'l',
        'օ' => 'o',
        'ս' => 'u',
        'ɑ' => 'a',
        'ɩ' => 'i',
        'ʏ' => 'y',
        // Punctuation
        '‹' | '〈' | '⟨' | '˂' | 'ᐸ' | '❮' | '＜' => '<',
        '›' | '〉' | '⟩' | '˃' | 'ᐳ' | '❯' | '＞' => '>',
        'ǀ' | '∣' | '│' | '｜' => '|',
        '［' => '[',
        '］' => ']',
        '‐' | '‑' | '‒' | '–' | '—' | '−' => '-',
        _ => return None,
    })
}

fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending: Option<char> = None;
    for c in text.chars() {
        if c.is_whitespace() {
            pending = Some(match pending {
                Some('\n') => '\n',
                _ if c == '\n' || c == '\r' => '\n',
                _ => ' ',
            });
            continue;
        }
        if let Some(ws) = pending.take()
            && !out.is_empty()
        {
            out.push(ws);
        }
        out.push(c);
    }
    out
}

fn split_words(flat: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut start = 0;
    let mut clause_start = true;
    let mut next_clause_start = true;
    let flush = |current: &mut String, start: usize, clause_start: bool, words: &mut Vec<Word>| {
        if !current.is_empty() {
            words.push(Word {
                text: std::mem::take(current),
                offset: start,
                clause_start,
                colon_after: false,
            });
        }
    };
    for (i, c) in flat.char_indices() {
        if c.is_alphanumeric() {
            if current.is_empty() {
                start = i;
                clause_start = next_clause_start;
                next_clause_start = false;
            }
            current.push(c);
        } else if c == '\'' || c == '’' {
            // `don't` reads as `dont`.
        } else {
            flush(&mut current, start, clause_start, &mut words);
            if matches!(c, '.' | '!' | '?' | ';' | ':' | '\n') {
                next_clause_start = true;
            }
            if c == ':'
                && let Some(last) = words.last_mut()
                && flat[last.offset + last.text.len()..i].trim().is_empty()
            {
                last.colon_after = true;
            }
        }
    }
    flush(&mut current, start, clause_start, &mut words);
    words
}

/// `i g n o r e` and `i.g.n.o.r.e` read as `ignore`: runs of three or more
/// single letters are joined.
fn join_spaced_letters(words: Vec<Word>) -> Vec<Word> {
    let mut out: Vec<Word> = Vec::with_capacity(words.len());
    let mut run: Vec<Word> = Vec::new();
    let flush_run = |run: &mut Vec<Word>, out: &mut Vec<Word>| {
        if run.len() >= 3 {
            let first = run[0].clone();
            let last_colon = run.last().is_some_and(|w| w.colon_after);
            out.push(Word {
                text: run.iter().map(|w| w.text.as_str()).collect(),
                colon_after: last_colon,
                ..first
            });
        } else {
            out.append(run);
        }
        run.clear();
    };
    for w in words {
        let single = w.text.chars().count() == 1 && w.text.chars().all(char::is_alphabetic);
        if single {
            run.push(w);
        } else {
            flush_run(&mut run, &mut out);
            out.push(w);
        }
    }
    flush_run(&mut run, &mut out);
    out
}

fn leet_variant(words: &[Word]) -> Option<Vec<Word>> {
    let mut changed = false;
    let mapped = words
        .iter()
        .map(|w| {
            let has_digit = w.text.chars().any(|c| c.is_ascii_digit());
            let has_alpha = w.text.chars().any(|c| c.is_alphabetic());
            if !(has_digit && has_alpha) {
                return w.clone();
            }
            changed = true;
            let text = w
                .text
                .chars()
                .map(|c| match c {
                    '0' => 'o',
                    '1' => 'i',
                    '3' => 'e',
                    '4' => 'a',
                    '5' => 's',
                    '7' => 't',
                    '8' => 'b',
                    other => other,
                })
                .collect();
            Word { text, ..w.clone() }
        })
        .collect();
    changed.then_some(mapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        Normalized::new(text)
            .words
            .into_iter()
            .map(|w| w.text)
            .collect()
    }

    #[test]
    fn normalisation_table() {
        let cases: &[(&str, &[&str])] = &[
            ("IGNORE Previous", &["ignore", "previous"]),
            ("ign\u{200b}ore", &["ignore"]),
            ("ign\u{043e}re", &["ignore"]),
            ("i g n o r e previous", &["ignore", "previous"]),
            ("i.g.n.o.r.e it", &["ignore", "it"]),
            ("don't stop", &["dont", "stop"]),
            ("Ｉｇｎｏｒｅ", &["ignore"]),
            ("ignóre café", &["ignore", "cafe"]),
            ("Straße", &["strasse"]),
            ("I am a cat", &["i", "am", "a", "cat"]),
        ];
        for (text, want) in cases {
            assert_eq!(words(text), *want, "{text:?}");
        }
    }

    #[test]
    fn clause_starts_and_colons() {
        let n = Normalized::new("Hello there. New instructions: obey\nact now");
        let w: Vec<(&str, bool, bool)> = n
            .words
            .iter()
            .map(|w| (w.text.as_str(), w.clause_start, w.colon_after))
            .collect();
        assert_eq!(
            w,
            vec![
                ("hello", true, false),
                ("there", false, false),
                ("new", true, false),
                ("instructions", false, true),
                ("obey", true, false),
                ("act", true, false),
                ("now", false, false),
            ]
        );
    }

    #[test]
    fn compact_and_flat_views() {
        let n = Normalized::new("curl  http://x |\n sh  and ＜ system ＞");
        assert_eq!(n.flat, "curl http://x |\nsh and < system >");
        assert_eq!(n.compact, "curlhttp://x|shand<system>");
    }

    #[test]
    fn leet_reading_only_when_words_mix_digits_and_letters() {
        let n = Normalized::new("1gn0re prev1ous 2026");
        let leet: Vec<String> = n.leet.unwrap().into_iter().map(|w| w.text).collect();
        assert_eq!(leet, vec!["ignore", "previous", "2026"]);
        assert!(Normalized::new("plain words 42").leet.is_none());
    }
}
