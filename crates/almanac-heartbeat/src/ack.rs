//! Telling an acknowledgement from an alert, and keeping [`ACK_TOKEN`] out
//! of what people read.
//!
//! [`strip`] decides what a reply is:
//!
//! 1. Empty or whitespace: skipped.
//! 2. A second, markup-normalised copy is made: HTML tags and `&nbsp;`
//!    become spaces, and leading and trailing runs of `*`, `` ` ``, `~` and
//!    `_` go, so `**HEARTBEAT_OK**` and `<b>HEARTBEAT_OK</b>` are seen.
//! 3. Neither copy contains the token: delivered unchanged.
//! 4. On each copy, repeatedly: a token at the very end, optionally
//!    followed by up to four non-word characters (`.`, `!!!`), is removed,
//!    the characters after it kept only when text precedes it; otherwise a
//!    leading token is removed and the text left-trimmed. (The end rule
//!    goes first so that `HEARTBEAT_OK.` leaves nothing rather than `.`.)
//!    Whitespace runs then collapse to one space. The original copy's
//!    result is preferred when it removed something and has a letter or
//!    digit left (`**HEARTBEAT_OK**` leaves only `****` there).
//! 5. Nothing removed (the token only mid-text): delivered unchanged.
//! 6. Removed and nothing left: skipped. In heartbeat mode a remainder of
//!    at most `max_ack_chars` characters is an acknowledgement too.
//!    Otherwise the remainder is delivered.
//!
//! [`scrub`] removes the token from text that is delivered anyway, wherever
//! it stands, so a person never sees it.

use crate::ACK_TOKEN;

/// The `ackMaxChars` default.
pub const DEFAULT_MAX_ACK_CHARS: i64 = 300;

/// Where the reply comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A heartbeat turn: a short remark next to the token is still an ack.
    Heartbeat,
    /// An ordinary message: only the token itself is dropped.
    Message,
}

/// Why a reply is not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Empty or whitespace.
    Empty,
    /// The token and nothing else.
    AckOnly,
    /// The token and a remainder short enough to count as an ack
    /// (heartbeat mode).
    ShortAck,
}

/// What to do with a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Skip(SkipReason),
    Deliver(String),
}

/// The decision of [`strip`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stripped {
    pub outcome: Outcome,
    /// Whether a token was removed from the start or end.
    pub stripped_token: bool,
}

/// Decides whether `text` is an acknowledgement or something to deliver.
/// A negative `max_ack_chars` counts as 0.
pub fn strip(text: &str, mode: Mode, max_ack_chars: i64) -> Stripped {
    let result = |outcome, stripped_token| Stripped {
        outcome,
        stripped_token,
    };
    if text.trim().is_empty() {
        return result(Outcome::Skip(SkipReason::Empty), false);
    }
    let normalized = normalize_markup(text);
    if !text.contains(ACK_TOKEN) && !normalized.contains(ACK_TOKEN) {
        return result(Outcome::Deliver(text.to_string()), false);
    }
    let (original_rest, original_stripped) = strip_edges(text);
    let (normalized_rest, normalized_stripped) = strip_edges(&normalized);
    // A remainder of bare markers (`****` from `**HEARTBEAT_OK**`) is no
    // reason to prefer the original copy.
    let has_content = original_rest.chars().any(char::is_alphanumeric);
    let rest = if original_stripped && has_content {
        original_rest
    } else if normalized_stripped {
        normalized_rest
    } else if original_stripped {
        original_rest
    } else {
        return result(Outcome::Deliver(text.to_string()), false);
    };
    if rest.is_empty() {
        return result(Outcome::Skip(SkipReason::AckOnly), true);
    }
    let limit = usize::try_from(max_ack_chars.max(0)).unwrap_or(usize::MAX);
    if mode == Mode::Heartbeat && rest.chars().count() <= limit {
        return result(Outcome::Skip(SkipReason::ShortAck), true);
    }
    result(Outcome::Deliver(rest), true)
}

/// The copy of step 2: tags and `&nbsp;` as spaces, emphasis and code
/// markers at both ends removed.
fn normalize_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Once a `<` has no `>` after it, no later one has either.
    let mut tags_close = true;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after_open) = tail.strip_prefix('<') {
            let close = if tags_close {
                after_open.find('>')
            } else {
                None
            };
            match close {
                Some(close) => {
                    out.push(' ');
                    rest = &after_open[close + 1..];
                }
                None => {
                    tags_close = false;
                    out.push('<');
                    rest = after_open;
                }
            }
        } else if tail
            .get(..6)
            .is_some_and(|s| s.eq_ignore_ascii_case("&nbsp;"))
        {
            out.push(' ');
            rest = &tail[6..];
        } else {
            out.push('&');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out.trim()
        .trim_start_matches(MARKUP)
        .trim_end_matches(MARKUP)
        .trim()
        .to_string()
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Step 4 on one copy: the remainder with collapsed whitespace, and whether
/// a token was removed.
fn strip_edges(text: &str) -> (String, bool) {
    // The current text is `body` followed by `tail`: the characters kept
    // after tokens removed from the end, all non-word characters.
    let mut body = text.trim();
    let mut tail = String::new();
    let mut stripped = false;
    loop {
        if let Some(rest) = end_token_removed(body, &mut tail) {
            body = rest;
            stripped = true;
            continue;
        }
        // The tail holds no word characters, so a leading token lies wholly
        // in `body`.
        if let Some(rest) = body.strip_prefix(ACK_TOKEN) {
            body = rest.trim_start();
            stripped = true;
            continue;
        }
        break;
    }
    let joined = format!("{body}{tail}");
    (
        joined.split_whitespace().collect::<Vec<_>>().join(" "),
        stripped,
    )
}

/// Rule (b) on `body` followed by `tail`: the new body (and tail) when a
/// token ends the text.
fn end_token_removed<'a>(body: &'a str, tail: &mut String) -> Option<&'a str> {
    const MAX_TRAILING: usize = 4;
    let room = MAX_TRAILING.checked_sub(tail.chars().count())?;
    let trailing: usize = body
        .chars()
        .rev()
        .take(room + 1)
        .take_while(|&c| !is_word_char(c))
        .map(char::len_utf8)
        .sum();
    let after = &body[body.len() - trailing..];
    if after.chars().count() > room {
        return None;
    }
    let before = body[..body.len() - trailing]
        .strip_suffix(ACK_TOKEN)?
        .trim_end();
    if before.is_empty() {
        tail.clear();
    } else {
        *tail = format!("{}{tail}", after.trim_start());
    }
    Some(before)
}

/// Trims and collapses whitespace runs to one space: the form in which an
/// alert is compared with the previous one to suppress duplicates.
pub fn normalize_for_duplicate(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes [`ACK_TOKEN`] wherever it stands, with markup wrapped around it
/// alone (`**…**`, `` `…` ``, `<b>…</b>`, brackets, quotes), punctuation
/// attached to it (`HEARTBEAT_OK.`), a separator or bullet left dangling
/// before it, and lines it leaves empty; spaces around it become one. The
/// result never contains the token, even when removing one occurrence
/// joins the text around it into another. Text without the token is
/// returned unchanged; otherwise the result is trimmed.
pub fn scrub(text: &str) -> String {
    if !text.contains(ACK_TOKEN) {
        return text.to_string();
    }
    // The output is built one character at a time and a token is removed
    // the moment its last character arrives, so the output never holds one;
    // tidying only removes output or skips input, which keeps it so (the
    // few characters tidying adds cannot end a token).
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(c) = text[at..].chars().next() {
        out.push(c);
        at += c.len_utf8();
        if out.ends_with(ACK_TOKEN) {
            out.truncate(out.len() - ACK_TOKEN.len());
            at = tidy(&mut out, text, at);
        }
    }
    out.trim().to_string()
}

const SPACES: [char; 2] = [' ', '\t'];
const MARKUP: [char; 4] = ['*', '`', '~', '_'];
/// Punctuation that attaches to the word before it.
const CLOSING_PUNCTUATION: [char; 7] = ['.', '!', '?', ',', ';', ':', '…'];

/// After a token was removed between `out` and `text[at..]`: removes what
/// wrapped or trailed it and joins the two sides. Returns where reading
/// goes on.
fn tidy(out: &mut String, text: &str, mut at: usize) -> usize {
    // Wrappers, innermost first.
    while let Some((cut, skip)) = wrapper(out, &text[at..]) {
        out.truncate(out.len() - cut);
        at += skip;
    }

    // Punctuation right after the token.
    let rest = &text[at..];
    let punctuation = rest.len() - rest.trim_start_matches(CLOSING_PUNCTUATION).len();
    let left = out.trim_end_matches(SPACES);
    let at_line_start = left.is_empty() || left.ends_with('\n');
    if punctuation > 0 {
        if at_line_start {
            at += punctuation;
        } else if let Some(separator) = left.strip_suffix([',', ';']) {
            // "Done, HEARTBEAT_OK." reads "Done."
            let keep = separator.trim_end_matches(SPACES).len();
            out.truncate(keep);
        } else if left.ends_with(CLOSING_PUNCTUATION) {
            at += punctuation;
        }
    }

    let right = &text[at..];
    let right_trimmed = right.trim_start_matches(SPACES);
    let at_line_end = right_trimmed.is_empty()
        || right_trimmed.starts_with('\n')
        || right_trimmed.starts_with("\r\n");
    if at_line_end && punctuation == 0 {
        drop_dangling_separator(out);
    }

    let left_len = out.trim_end_matches(SPACES).len();
    let had_space = left_len < out.len() || right_trimmed.len() < right.len();
    let left = &out[..left_len];
    let at_line_start = left.is_empty() || left.ends_with('\n');
    at += right.len() - right_trimmed.len();
    match (at_line_start, at_line_end) {
        (true, true) => {
            // The line held nothing else: drop it, and a blank line after
            // it when one is already before it.
            out.truncate(left_len);
            let newline = if right_trimmed.starts_with("\r\n") {
                2
            } else {
                1
            };
            if !right_trimmed.is_empty() {
                at += newline;
                let blank_before = out.is_empty() || out.ends_with("\n\n");
                let next = &text[at..];
                if blank_before && (next.starts_with('\n') || next.starts_with("\r\n")) {
                    at += if next.starts_with('\n') { 1 } else { 2 };
                }
            }
        }
        // Keep the line's indentation.
        (true, false) => {}
        (false, true) => out.truncate(left_len),
        (false, false) => {
            let closes = right_trimmed.starts_with(CLOSING_PUNCTUATION)
                || right_trimmed.starts_with([')', ']', '}']);
            if closes {
                out.truncate(left_len);
            } else if had_space {
                out.truncate(left_len);
                out.push(' ');
            }
        }
    }
    at
}

/// A pair wrapped around the removed token: bytes to cut from the end of
/// `out` and to skip at the start of `rest`.
fn wrapper(out: &str, rest: &str) -> Option<(usize, usize)> {
    // Emphasis and code markers, touching the token on both sides.
    let before = out.len() - out.trim_end_matches(MARKUP).len();
    let after = rest.len() - rest.trim_start_matches(MARKUP).len();
    if before > 0 && after > 0 {
        let outside_before = out[..out.len() - before].chars().next_back();
        let outside_after = rest[after..].chars().next();
        let delimits = |c: Option<char>| !c.is_some_and(char::is_alphanumeric);
        if delimits(outside_before) && delimits(outside_after) {
            return Some((before, after));
        }
    }

    // An HTML element, brackets or quotes, with optional spaces inside.
    let left = out.trim_end_matches(SPACES);
    let right = rest.trim_start_matches(SPACES);
    let cut_spaces = out.len() - left.len();
    let skip_spaces = rest.len() - right.len();
    if let Some((open, close)) = html_element(left, right) {
        return Some((cut_spaces + open, skip_spaces + close));
    }
    const PAIRS: [(char, char); 8] = [
        ('(', ')'),
        ('[', ']'),
        ('{', '}'),
        ('"', '"'),
        ('\'', '\''),
        ('“', '”'),
        ('‘', '’'),
        ('«', '»'),
    ];
    let opening = left.chars().next_back()?;
    let closing = right.chars().next()?;
    if !PAIRS.contains(&(opening, closing)) {
        return None;
    }
    let is_quote = matches!(opening, '"' | '\'');
    if is_quote {
        // A straight quote opens only at a word boundary ("it's").
        let outside = left[..left.len() - 1].chars().next_back();
        if outside.is_some_and(char::is_alphanumeric) {
            return None;
        }
    }
    Some((
        cut_spaces + opening.len_utf8(),
        skip_spaces + closing.len_utf8(),
    ))
}

/// `<name …>` at the end of `left` and `</name>` at the start of `right`:
/// their lengths.
fn html_element(left: &str, right: &str) -> Option<(usize, usize)> {
    if !left.ends_with('>') {
        return None;
    }
    // Tags are short; looking further back would make long text slow.
    let window_start = left.len().saturating_sub(256);
    let window_start = (window_start..left.len()).find(|&i| left.is_char_boundary(i))?;
    let open_at = window_start + left[window_start..].rfind('<')?;
    let tag = &left[open_at + 1..left.len() - 1];
    let name_len = tag
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(tag.len());
    let name = &tag[..name_len];
    if name.is_empty()
        || !name.starts_with(|c: char| c.is_ascii_alphabetic())
        || tag[name_len..].contains('<')
        || !(tag[name_len..].is_empty() || tag[name_len..].starts_with(char::is_whitespace))
    {
        return None;
    }
    let close = right.strip_prefix("</")?;
    let close_name = close.get(..name.len())?;
    if !close_name.eq_ignore_ascii_case(name) {
        return None;
    }
    let after_name = &close[name.len()..];
    let end = after_name.trim_start().strip_prefix('>')?;
    Some((left.len() - open_at, right.len() - end.len()))
}

/// Removes a separator or bullet left at the end of `out` with nothing
/// after it on its line (`Done, `, `All clear — `, `- `).
fn drop_dangling_separator(out: &mut String) {
    let left = out.trim_end_matches(SPACES);
    let Some(last) = left.chars().next_back() else {
        return;
    };
    let before = &left[..left.len() - last.len_utf8()];
    let removable = match last {
        ',' | ';' => true,
        '-' | '–' | '—' | '*' | '+' | '•' => {
            before.is_empty() || before.ends_with(char::is_whitespace)
        }
        _ => false,
    };
    if removable {
        let keep = before.trim_end_matches(SPACES).len();
        out.truncate(keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deliver(text: &str) -> Stripped {
        Stripped {
            outcome: Outcome::Deliver(text.to_string()),
            stripped_token: true,
        }
    }

    fn skip(reason: SkipReason) -> Stripped {
        Stripped {
            outcome: Outcome::Skip(reason),
            stripped_token: reason != SkipReason::Empty,
        }
    }

    fn unchanged(text: &str) -> Stripped {
        Stripped {
            outcome: Outcome::Deliver(text.to_string()),
            stripped_token: false,
        }
    }

    #[test]
    fn strip_in_heartbeat_mode() {
        let long_alert = format!("{} HEARTBEAT_OK", "Disk almost full. ".repeat(20).trim());
        let long_expected = "Disk almost full. ".repeat(20).trim().to_string();
        let cases: Vec<(&str, Stripped)> = vec![
            ("", skip(SkipReason::Empty)),
            ("  \n\t ", skip(SkipReason::Empty)),
            ("HEARTBEAT_OK", skip(SkipReason::AckOnly)),
            ("  HEARTBEAT_OK\n", skip(SkipReason::AckOnly)),
            ("**HEARTBEAT_OK**", skip(SkipReason::AckOnly)),
            ("`HEARTBEAT_OK`", skip(SkipReason::AckOnly)),
            ("<b>HEARTBEAT_OK</b>", skip(SkipReason::AckOnly)),
            ("~~_HEARTBEAT_OK_~~", skip(SkipReason::AckOnly)),
            ("&nbsp;HEARTBEAT_OK&NBSP;", skip(SkipReason::AckOnly)),
            ("&amp;&nbsp;HEARTBEAT_OK", skip(SkipReason::ShortAck)),
            ("HEARTBEAT_OK.", skip(SkipReason::AckOnly)),
            ("HEARTBEAT_OK!!!", skip(SkipReason::AckOnly)),
            ("HEARTBEAT_OK HEARTBEAT_OK", skip(SkipReason::AckOnly)),
            ("All quiet. HEARTBEAT_OK", skip(SkipReason::ShortAck)),
            ("HEARTBEAT_OK nothing new today", skip(SkipReason::ShortAck)),
            (
                "Nothing urgent.\n\nHEARTBEAT_OK",
                skip(SkipReason::ShortAck),
            ),
            (long_alert.as_str(), deliver(&long_expected)),
            (
                "Your flight leaves at 9. Reply HEARTBEAT_OK if seen.",
                unchanged("Your flight leaves at 9. Reply HEARTBEAT_OK if seen."),
            ),
            ("The server is down!", unchanged("The server is down!")),
            // Five trailing characters are too many to be punctuation.
            (
                "Check HEARTBEAT_OK!!!!!",
                unchanged("Check HEARTBEAT_OK!!!!!"),
            ),
            ("HEARTBEAT_OK!!!!!", skip(SkipReason::ShortAck)),
        ];
        for (text, expected) in cases {
            assert_eq!(
                strip(text, Mode::Heartbeat, DEFAULT_MAX_ACK_CHARS),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn markup_normalisation() {
        let cases = [
            ("<b>HEARTBEAT_OK</b>", "HEARTBEAT_OK"),
            ("**HEARTBEAT_OK**", "HEARTBEAT_OK"),
            ("a < b &nbsp;c&NBSP;", "a < b  c"),
            ("<<x>y", "y"),
            ("x <a href=\"u\">link</a> &amp; ~y~", "x  link  &amp; ~y"),
            ("`HEARTBEAT_OK`.", "HEARTBEAT_OK`."),
        ];
        for (text, expected) in cases {
            assert_eq!(normalize_markup(text), expected, "{text:?}");
        }
    }

    #[test]
    fn strip_edges_steps() {
        let cases = [
            ("HEARTBEAT_OK", "", true),
            ("All good. HEARTBEAT_OK!!!", "All good.!!!", true),
            ("All good HEARTBEAT_OK ---", "All good---", true),
            ("x HEARTBEAT_OK!!!!!", "x HEARTBEAT_OK!!!!!", false),
            ("HEARTBEAT_OK!!!!!", "!!!!!", true),
            ("x HEARTBEAT_OK! HEARTBEAT_OK!!", "x!!!", true),
            (
                "x HEARTBEAT_OK!! HEARTBEAT_OK!!!",
                "x HEARTBEAT_OK!!!!!",
                true,
            ),
            ("HEARTBEAT_OK a\n\n b HEARTBEAT_OK", "a b", true),
            ("a HEARTBEAT_OK b", "a HEARTBEAT_OK b", false),
            ("HEARTBEAT_OKAY", "AY", true),
            ("x HEARTBEAT_OK 👍", "x👍", true),
        ];
        for (text, rest, stripped) in cases {
            assert_eq!(strip_edges(text), (rest.to_string(), stripped), "{text:?}");
        }
    }

    #[test]
    fn strip_limits_and_modes() {
        let text = "Checked everything, all fine. HEARTBEAT_OK";
        let rest = "Checked everything, all fine.";
        assert_eq!(strip(text, Mode::Message, 300), deliver(rest));
        assert_eq!(strip(text, Mode::Heartbeat, 29), skip(SkipReason::ShortAck));
        assert_eq!(strip(text, Mode::Heartbeat, 28), deliver(rest));
        assert_eq!(strip(text, Mode::Heartbeat, -5), deliver(rest));
        assert_eq!(
            strip("HEARTBEAT_OK", Mode::Message, 300),
            skip(SkipReason::AckOnly)
        );
        assert_eq!(
            strip("HEARTBEAT_OK", Mode::Heartbeat, -1),
            skip(SkipReason::AckOnly)
        );
        // The original copy's result is preferred while it is not empty.
        assert_eq!(
            strip("HEARTBEAT_OK <b>Disk full</b>", Mode::Message, 0),
            deliver("<b>Disk full</b>")
        );
        // Markers left around the token do not count as text.
        assert_eq!(
            strip("**HEARTBEAT_OK**", Mode::Message, 0),
            skip(SkipReason::AckOnly)
        );
        assert_eq!(
            strip("**HEARTBEAT_OK**!", Mode::Message, 0),
            skip(SkipReason::AckOnly)
        );
        assert_eq!(
            strip("HEARTBEAT_OK!", Mode::Message, 0),
            skip(SkipReason::AckOnly)
        );
        // Only the normalised copy can see the token.
        assert_eq!(
            strip("**HEARTBEAT_OK** Disk full", Mode::Message, 0),
            deliver("** Disk full")
        );
    }

    #[test]
    fn scrub_cases() {
        let cases = [
            ("HEARTBEAT_OK", ""),
            ("  HEARTBEAT_OK \n", ""),
            ("**HEARTBEAT_OK**", ""),
            ("`HEARTBEAT_OK`", ""),
            ("<b>HEARTBEAT_OK</b>", ""),
            ("<b> HEARTBEAT_OK </b>", ""),
            ("**<code>HEARTBEAT_OK</code>**", ""),
            ("<strong class=\"x\">**HEARTBEAT_OK**</strong>", ""),
            ("HEARTBEAT_OK.", ""),
            ("HEARTBEAT_OK!!!", ""),
            ("**HEARTBEAT_OK**.", ""),
            ("\"HEARTBEAT_OK\"", ""),
            ("- HEARTBEAT_OK", ""),
            ("All good. HEARTBEAT_OK", "All good."),
            ("All good. HEARTBEAT_OK.", "All good."),
            ("All good HEARTBEAT_OK.", "All good."),
            ("All set! **HEARTBEAT_OK**", "All set!"),
            ("Done, HEARTBEAT_OK.", "Done."),
            ("Done, HEARTBEAT_OK", "Done"),
            ("Nothing new — HEARTBEAT_OK", "Nothing new"),
            ("Fine.HEARTBEAT_OK", "Fine."),
            (
                "Inbox is clear (HEARTBEAT_OK) and the calendar is empty.",
                "Inbox is clear and the calendar is empty.",
            ),
            ("Reply with HEARTBEAT_OK when done", "Reply with when done"),
            ("A\tHEARTBEAT_OK\tB", "A B"),
            ("fooHEARTBEAT_OKbar", "foobar"),
            ("Alert: disk full.\nHEARTBEAT_OK\n", "Alert: disk full."),
            (
                "Line one\n\nHEARTBEAT_OK\n\nLine two",
                "Line one\n\nLine two",
            ),
            (
                "Line one\r\nHEARTBEAT_OK\r\nLine two",
                "Line one\r\nLine two",
            ),
            (
                "Checked:\n- inbox: fine\n- HEARTBEAT_OK\n- calendar: fine",
                "Checked:\n- inbox: fine\n- calendar: fine",
            ),
            ("  - nested HEARTBEAT_OK\n", "- nested"),
            ("Status:\n  HEARTBEAT_OK more", "Status:\n  more"),
            ("MY_HEARTBEAT_OK_FLAG", "MY__FLAG"),
            ("it's HEARTBEAT_OK'", "it's '"),
            // Removing one occurrence must not leave another behind.
            ("HEARTBEAT_HEARTBEAT_OKOK", ""),
            ("HEARTBEAT_OKHEARTBEAT_OK", ""),
            ("HHEARTBEAT_OKEARTBEAT_OK", ""),
            ("HEARTBEAT_**HEARTBEAT_OK**OK", "HEARTBEAT_****OK"),
            ("HEARTBEAT_<b>HEARTBEAT_OK</b>OK x", "x"),
            ("HEART HEARTBEAT_OKBEAT_OK", "HEART BEAT_OK"),
            // Untouched without the token.
            ("", ""),
            ("   ", "   "),
            ("heartbeat_ok is lower case", "heartbeat_ok is lower case"),
            (" Report:\n- a \n", " Report:\n- a \n"),
        ];
        for (text, expected) in cases {
            assert_eq!(scrub(text), expected, "{text:?}");
        }
    }

    #[test]
    fn duplicate_form() {
        assert_eq!(
            normalize_for_duplicate("  Disk   full\n\non  /home \t"),
            "Disk full on /home"
        );
        assert_eq!(
            normalize_for_duplicate("Disk full on /home"),
            normalize_for_duplicate("Disk full\non /home\n")
        );
        assert_eq!(normalize_for_duplicate(" \n "), "");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn fragments() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop_oneof![
                    Just("HEARTBEAT_OK"),
                    Just("HEARTBEAT_"),
                    Just("HEARTBEAT"),
                    Just("HEART"),
                    Just("BEAT_OK"),
                    Just("_OK"),
                    Just("OK"),
                    Just("K"),
                    Just("*"),
                    Just("**"),
                    Just("`"),
                    Just("_"),
                    Just("~"),
                    Just("<b>"),
                    Just("</b>"),
                    Just("<"),
                    Just(">"),
                    Just("&nbsp;"),
                    Just(" "),
                    Just("\t"),
                    Just("\n"),
                    Just("\r\n"),
                    Just("."),
                    Just("!"),
                    Just(","),
                    Just("-"),
                    Just("—"),
                    Just("("),
                    Just(")"),
                    Just("\""),
                    Just("'"),
                    Just("é"),
                    Just("all good"),
                ],
                0..24,
            )
            .prop_map(|parts| parts.concat())
        }

        proptest! {
            #[test]
            fn scrub_never_leaves_the_token(text in fragments()) {
                let scrubbed = scrub(&text);
                prop_assert!(!scrubbed.contains(ACK_TOKEN), "{:?} -> {:?}", text, scrubbed);
                prop_assert_eq!(scrub(&scrubbed), scrubbed.clone());
            }

            #[test]
            fn scrub_never_leaves_the_token_in_any_text(text in "\\PC{0,60}") {
                prop_assert!(!scrub(&text).contains(ACK_TOKEN));
                if !text.contains(ACK_TOKEN) {
                    prop_assert_eq!(scrub(&text), text);
                }
            }

            #[test]
            fn delivered_replies_scrub_clean(
                text in fragments(),
                heartbeat in any::<bool>(),
                max in -10i64..400,
            ) {
                let mode = if heartbeat { Mode::Heartbeat } else { Mode::Message };
                let stripped = strip(&text, mode, max);
                match &stripped.outcome {
                    Outcome::Deliver(delivered) => {
                        prop_assert!(!delivered.trim().is_empty());
                        prop_assert!(!scrub(delivered).contains(ACK_TOKEN));
                        if !stripped.stripped_token {
                            prop_assert_eq!(delivered, &text);
                        }
                    }
                    Outcome::Skip(SkipReason::Empty) => prop_assert!(text.trim().is_empty()),
                    Outcome::Skip(_) => prop_assert!(stripped.stripped_token),
                }
            }
        }
    }
}
