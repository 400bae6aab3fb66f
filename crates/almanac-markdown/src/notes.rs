//! Memory notes: how a Markdown memory file splits into the units people
//! read and search, and how a note is written.
//!
//! A file is a sequence of [`Block`]s:
//!
//! * a **heading** (`#`… followed by a space): never a search result itself,
//!   but it names the section (`heading_path`) of every block under it;
//! * a **list item** (`-`, `*`, `+` or `1.` at the start of a line) together
//!   with its continuation lines (indented lines, and blank lines followed by
//!   an indented line);
//! * any other non-empty **line** on its own.
//!
//! A list item that starts with a stamp, `- [YYYY-MM-DD HH:MM] text`,
//! `- [YYYY-MM-DD] text` or `- [HH:MM] text`, is a dated note. The stamp is
//! local time with minute resolution, as Arka and OpenClaw write it.

/// A date and optional time of day written in a note's stamp.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp {
    /// `YYYY-MM-DD`, when the stamp has a date.
    pub date: Option<String>,
    /// `HH:MM` (seconds dropped), when the stamp has a time.
    pub time: Option<String>,
}

impl Stamp {
    /// `YYYY-MM-DD HH:MM`, `YYYY-MM-DD` or `HH:MM`.
    pub fn display(&self) -> String {
        match (&self.date, &self.time) {
            (Some(d), Some(t)) => format!("{d} {t}"),
            (Some(d), None) => d.clone(),
            (None, Some(t)) => t.clone(),
            (None, None) => String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Heading { level: u8 },
    Item,
    Line,
}

/// One unit of a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    /// 1-based first and last line (inclusive).
    pub start_line: usize,
    pub end_line: usize,
    /// The text without list marker and stamp; continuation lines are
    /// de-indented and joined with `\n`. For headings, the heading text.
    pub body: String,
    pub stamp: Option<Stamp>,
    /// Titles of the enclosing headings, outermost first (for a heading,
    /// the headings above it).
    pub heading_path: Vec<String>,
}

/// Where a parse of a file's first lines stopped: what those lines leave
/// open for the lines after them. Kept beside an index, it lets a file that
/// only grew at its end be parsed from the old end alone
/// ([`parse_blocks_resumed`]). It is exact for resuming only after text
/// that ended with a line break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    /// Lines read: the next line is number `lines + 1`.
    pub lines: usize,
    /// The enclosing headings, outermost first: level and title.
    pub headings: Vec<(u8, String)>,
    /// The marker of a code fence left open (`` ``` `` or `~~~`).
    pub fence: Option<&'static str>,
}

impl Resume {
    /// The fence marker `text` names, if it is one (for a stored state).
    pub fn fence_named(text: &str) -> Option<&'static str> {
        fence_marker(text).filter(|m| *m == text)
    }
}

/// Splits a memory file into blocks. Never fails.
pub fn parse_blocks(text: &str) -> Vec<Block> {
    parse_blocks_after(text, 1)
}

/// [`parse_blocks`], and where the parse stopped (to resume it when the
/// file grows).
pub fn parse_blocks_with_end(text: &str) -> (Vec<Block>, Resume) {
    parse_blocks_resumed(text, &Resume::default())
}

/// The blocks of `more`, text that follows lines whose parse stopped at
/// `from` (which must have ended with a line break), numbered and nested
/// as in a parse of the whole; and where this parse stopped. Equals the
/// whole parse's blocks from line `from.lines + 1` on unless a block of
/// the earlier lines continues into `more` (the caller checks that the
/// first line of `more` is neither blank nor indented).
pub fn parse_blocks_resumed(more: &str, from: &Resume) -> (Vec<Block>, Resume) {
    let more = crate::normalize_newlines(more);
    let lines = split_lines(&more);
    let mut state = from.clone();
    let blocks = parse_lines(&lines, &mut state);
    (blocks, state)
}

/// The blocks that start on or after line `first_line` (1-based), with the
/// same heading paths [`parse_blocks`] gives them, reading the lines before
/// only for headings and code fences. It equals `parse_blocks` filtered to
/// `start_line >= first_line` unless a block straddles that line (the caller
/// checks that the line before is not continued).
pub fn parse_blocks_after(text: &str, first_line: usize) -> Vec<Block> {
    let text = crate::normalize_newlines(text);
    let lines = split_lines(&text);
    let skip = first_line.saturating_sub(1).min(lines.len());
    let mut state = Resume::default();
    for line in &lines[..skip] {
        step_outside_blocks(line, &mut state);
    }
    state.lines = skip;
    parse_lines(&lines[skip..], &mut state)
}

/// Where a parse of `text` stops (the end state of
/// [`parse_blocks_with_end`]).
pub fn resume_after(text: &str) -> Resume {
    parse_blocks_with_end(text).1
}

/// The lines of normalised text; a final line break ends the last line
/// rather than starting an empty one.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// Follows headings and fences through a line whose blocks are not wanted.
fn step_outside_blocks(line: &str, state: &mut Resume) {
    let trimmed = line.trim();
    if let Some(fence) = state.fence {
        if trimmed.starts_with(fence) {
            state.fence = None;
        }
    } else if let Some(fence) = fence_marker(trimmed) {
        state.fence = Some(fence);
    } else if let Some((level, title)) = heading(line) {
        state.headings.retain(|(l, _)| *l < level);
        state.headings.push((level, title.to_string()));
    }
}

/// The blocks of `lines`, which follow the lines `state` describes;
/// `state` then describes them too.
fn parse_lines(lines: &[&str], state: &mut Resume) -> Vec<Block> {
    let offset = state.lines;
    let headings = &mut state.headings;
    let mut in_fence = state.fence;
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let number = offset + i + 1;
        i += 1;
        let trimmed = line.trim();
        if let Some(fence) = in_fence {
            if trimmed.starts_with(fence) {
                in_fence = None;
            } else if !trimmed.is_empty() {
                blocks.push(line_block(number, trimmed, headings));
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(fence) = fence_marker(trimmed) {
            in_fence = Some(fence);
            continue;
        }
        if let Some((level, title)) = heading(line) {
            headings.retain(|(l, _)| *l < level);
            blocks.push(Block {
                kind: BlockKind::Heading { level },
                start_line: number,
                end_line: number,
                body: title.to_string(),
                stamp: None,
                heading_path: headings.iter().map(|(_, t)| t.clone()).collect(),
            });
            headings.push((level, title.to_string()));
            continue;
        }
        if let Some(content) = list_item_content(line) {
            let mut body_lines = vec![content.to_string()];
            let mut end = number;
            // Continuation: indented lines, and blank lines that are
            // followed by an indented line.
            let mut j = i;
            while j < lines.len() {
                let next = lines[j];
                if is_continuation(next) {
                    body_lines.push(dedent(next).to_string());
                    end = offset + j + 1;
                    j += 1;
                } else if next.trim().is_empty()
                    && lines.get(j + 1).is_some_and(|after| is_continuation(after))
                {
                    body_lines.push(String::new());
                    j += 1;
                } else {
                    break;
                }
            }
            i = end - offset;
            let first = body_lines[0].clone();
            let (stamp, rest) = split_stamp(&first);
            body_lines[0] = rest.to_string();
            let body = body_lines.join("\n").trim_end().to_string();
            blocks.push(Block {
                kind: BlockKind::Item,
                start_line: number,
                end_line: end,
                body,
                stamp,
                heading_path: headings.iter().map(|(_, t)| t.clone()).collect(),
            });
            continue;
        }
        blocks.push(line_block(number, trimmed, headings));
    }
    state.fence = in_fence;
    state.lines = offset + lines.len();
    blocks
}

fn line_block(number: usize, trimmed: &str, headings: &[(u8, String)]) -> Block {
    Block {
        kind: BlockKind::Line,
        start_line: number,
        end_line: number,
        body: trimmed.to_string(),
        stamp: None,
        heading_path: headings.iter().map(|(_, t)| t.clone()).collect(),
    }
}

fn fence_marker(trimmed: &str) -> Option<&'static str> {
    if trimmed.starts_with("```") {
        Some("```")
    } else if trimmed.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

/// An ATX heading: up to 3 spaces, 1–6 `#`, then a space or end of line.
pub fn heading(line: &str) -> Option<(u8, &str)> {
    let stripped = line.trim_start_matches(' ');
    if line.len() - stripped.len() > 3 {
        return None;
    }
    let hashes = stripped.bytes().take_while(|b| *b == b'#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = &stripped[hashes..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim_end();
    Some((hashes as u8, title))
}

/// The content of a list item line (after the marker), if `line` is one.
/// Items start at column 0 or 1; deeper indentation is continuation.
pub fn list_item_content(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 1 {
        return None;
    }
    let rest = &line[indent..];
    let marker_len = if rest.starts_with(['-', '*', '+']) {
        1
    } else {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 || !matches!(rest.as_bytes().get(digits), Some(b'.' | b')')) {
            return None;
        }
        digits + 1
    };
    let after = &rest[marker_len..];
    if after.is_empty() {
        return Some("");
    }
    if !after.starts_with([' ', '\t']) {
        return None;
    }
    Some(after.trim_start())
}

fn is_continuation(line: &str) -> bool {
    (line.starts_with("  ") || line.starts_with('\t')) && !line.trim().is_empty()
}

fn dedent(line: &str) -> &str {
    line.strip_prefix('\t')
        .or_else(|| line.strip_prefix("  "))
        .unwrap_or(line)
}

/// Splits a leading `[YYYY-MM-DD HH:MM]`, `[YYYY-MM-DD]` or `[HH:MM]`
/// stamp (seconds allowed) off `text`.
pub fn split_stamp(text: &str) -> (Option<Stamp>, &str) {
    let Some(inner_end) = text.strip_prefix('[').and_then(|t| t.find(']')) else {
        return (None, text);
    };
    let inner = &text[1..1 + inner_end];
    let rest = text[inner_end + 2..].trim_start();
    let mut parts = inner.split(' ').filter(|p| !p.is_empty());
    let (first, second) = (parts.next(), parts.next());
    if parts.next().is_some() {
        return (None, text);
    }
    let stamp = match (first, second) {
        (Some(d), Some(t)) if is_date(d) => time_of(t).map(|t| Stamp {
            date: Some(d.to_string()),
            time: Some(t),
        }),
        (Some(d), None) if is_date(d) => Some(Stamp {
            date: Some(d.to_string()),
            time: None,
        }),
        (Some(t), None) => time_of(t).map(|t| Stamp {
            date: None,
            time: Some(t),
        }),
        _ => None,
    };
    match stamp {
        Some(stamp) => (Some(stamp), rest),
        None => (None, text),
    }
}

/// `YYYY-MM-DD` with a plausible month and day.
pub fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return false;
    }
    let month: u8 = s[5..7].parse().unwrap_or(0);
    let day: u8 = s[8..10].parse().unwrap_or(0);
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// `HH:MM` or `HH:MM:SS` → `HH:MM`.
fn time_of(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = (b.len() == 5 || (b.len() == 8 && b[5] == b':'))
        && b[2] == b':'
        && b[..2].iter().all(u8::is_ascii_digit)
        && b[3..5].iter().all(u8::is_ascii_digit)
        && (b.len() == 5 || b[6..8].iter().all(u8::is_ascii_digit));
    if !ok {
        return None;
    }
    let hour: u8 = s[..2].parse().ok()?;
    let minute: u8 = s[3..5].parse().ok()?;
    (hour < 24 && minute < 60).then(|| s[..5].to_string())
}

/// The date of a daily note file name: `YYYY-MM-DD.md`, or
/// `YYYY-MM-DD-<slug>.md` as session hooks write.
pub fn daily_file_date(file_name: &str) -> Option<&str> {
    let stem = file_name.strip_suffix(".md")?;
    let date = stem.get(..10)?;
    if !is_date(date) {
        return None;
    }
    match stem.as_bytes().get(10) {
        None | Some(b'-') => Some(date),
        _ => None,
    }
}

/// Formats a note as a list item: `- [<stamp>] <first line>` and the
/// remaining lines indented by two spaces (blank lines kept as blank).
/// Trailing whitespace is trimmed from every line.
pub fn format_note(stamp: &str, text: &str) -> String {
    let text = crate::normalize_newlines(text);
    let mut lines = text.trim().split('\n').map(str::trim_end);
    let mut out = format!("- [{stamp}] {}\n", lines.next().unwrap_or(""));
    let mut pending_blank = false;
    for line in lines {
        if line.trim().is_empty() {
            pending_blank = true;
            continue;
        }
        if pending_blank {
            out.push('\n');
            pending_blank = false;
        }
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(date: Option<&str>, time: Option<&str>) -> Option<Stamp> {
        Some(Stamp {
            date: date.map(String::from),
            time: time.map(String::from),
        })
    }

    #[test]
    fn blocks_of_a_typical_memory_file() {
        let text = "# Long-term memory\n\n## Preferences\n- [2026-11-29 17:06] Always use dark terminal theme\n- likes tea\n  and biscuits\n\nFree text line\n### Food\n1. sushi\n";
        let blocks = parse_blocks(text);
        let summary: Vec<(BlockKind, usize, usize, &str, Vec<&str>)> = blocks
            .iter()
            .map(|b| {
                (
                    b.kind,
                    b.start_line,
                    b.end_line,
                    b.body.as_str(),
                    b.heading_path.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    BlockKind::Heading { level: 1 },
                    1,
                    1,
                    "Long-term memory",
                    vec![]
                ),
                (
                    BlockKind::Heading { level: 2 },
                    3,
                    3,
                    "Preferences",
                    vec!["Long-term memory"]
                ),
                (
                    BlockKind::Item,
                    4,
                    4,
                    "Always use dark terminal theme",
                    vec!["Long-term memory", "Preferences"]
                ),
                (
                    BlockKind::Item,
                    5,
                    6,
                    "likes tea\nand biscuits",
                    vec!["Long-term memory", "Preferences"]
                ),
                (
                    BlockKind::Line,
                    8,
                    8,
                    "Free text line",
                    vec!["Long-term memory", "Preferences"]
                ),
                (
                    BlockKind::Heading { level: 3 },
                    9,
                    9,
                    "Food",
                    vec!["Long-term memory", "Preferences"]
                ),
                (
                    BlockKind::Item,
                    10,
                    10,
                    "sushi",
                    vec!["Long-term memory", "Preferences", "Food"]
                ),
            ]
        );
        assert_eq!(blocks[2].stamp, stamp(Some("2026-11-29"), Some("17:06")));
        assert_eq!(blocks[3].stamp, None);
    }

    #[test]
    fn stamp_forms_table() {
        let cases = [
            (
                "[2026-11-29 17:06] x",
                stamp(Some("2026-11-29"), Some("17:06")),
                "x",
            ),
            (
                "[2026-11-29 17:06:59] x",
                stamp(Some("2026-11-29"), Some("17:06")),
                "x",
            ),
            ("[2026-11-29] x", stamp(Some("2026-11-29"), None), "x"),
            (
                "[13:56] Caroline: hi",
                stamp(None, Some("13:56")),
                "Caroline: hi",
            ),
            ("[25:00] x", None, "[25:00] x"),
            ("[2026-13-01 10:00] x", None, "[2026-13-01 10:00] x"),
            ("[link](http://x) y", None, "[link](http://x) y"),
            ("[ ] todo", None, "[ ] todo"),
            ("no stamp", None, "no stamp"),
        ];
        for (text, want_stamp, want_rest) in cases {
            let (got, rest) = split_stamp(text);
            assert_eq!(got, want_stamp, "{text}");
            assert_eq!(rest, want_rest, "{text}");
        }
    }

    #[test]
    fn blank_line_inside_an_item_continues_only_before_indented_text() {
        let blocks = parse_blocks("- first\n\n  second para\n\nNot part\n");
        assert_eq!(blocks[0].body, "first\n\nsecond para");
        assert_eq!((blocks[0].start_line, blocks[0].end_line), (1, 3));
        assert_eq!(blocks[1].body, "Not part");
    }

    #[test]
    fn fenced_code_lines_are_lines_and_hashes_inside_are_not_headings() {
        let blocks = parse_blocks("```sh\n# not a heading\nrm x\n```\n#tag is text\n");
        let kinds: Vec<_> = blocks.iter().map(|b| (b.kind, b.body.as_str())).collect();
        assert_eq!(
            kinds,
            vec![
                (BlockKind::Line, "# not a heading"),
                (BlockKind::Line, "rm x"),
                (BlockKind::Line, "#tag is text"),
            ]
        );
    }

    #[test]
    fn daily_file_names() {
        for (name, want) in [
            ("2026-11-29.md", Some("2026-11-29")),
            ("2026-11-29-standup.md", Some("2026-11-29")),
            ("2026-11-29x.md", None),
            ("notes.md", None),
            ("2026-11-29.txt", None),
        ] {
            assert_eq!(daily_file_date(name), want, "{name}");
        }
    }

    #[test]
    fn format_note_keeps_lines_as_continuations() {
        assert_eq!(
            format_note(
                "2026-11-29 09:00",
                "  Prefers standups  \r\nat 9am\n\n\nsharp  "
            ),
            "- [2026-11-29 09:00] Prefers standups\n  at 9am\n\n  sharp\n"
        );
        assert_eq!(
            format_note("2026-11-29 09:00", "one"),
            "- [2026-11-29 09:00] one\n"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_and_blocks_are_ordered_and_disjoint(text in "(?s).{0,600}") {
                let blocks = parse_blocks(&text);
                let mut last_end = 0;
                for b in &blocks {
                    prop_assert!(b.start_line > last_end);
                    prop_assert!(b.end_line >= b.start_line);
                    last_end = b.end_line;
                }
            }

            #[test]
            fn parsing_after_a_line_matches_the_full_parse(
                lines in proptest::collection::vec(
                    prop_oneof![
                        Just("# Title".to_string()),
                        Just("## Section".to_string()),
                        Just("```".to_string()),
                        Just(String::new()),
                        "- \\[2026-11-29 09:00\\] [a-z ]{0,12}",
                        "[a-z][a-z ]{0,12}",
                        "  [a-z]{1,8}",
                    ],
                    0..30,
                ),
                cut in 1usize..32,
            ) {
                let text = lines.join("\n");
                let full = parse_blocks(&text);
                let straddles = full.iter().any(|b| b.start_line < cut && b.end_line >= cut);
                prop_assume!(!straddles);
                let expected: Vec<Block> = full.into_iter().filter(|b| b.start_line >= cut).collect();
                prop_assert_eq!(parse_blocks_after(&text, cut), expected);
            }

            #[test]
            fn a_resumed_parse_matches_the_full_parse(
                lines in proptest::collection::vec(
                    prop_oneof![
                        Just("# Title".to_string()),
                        Just("## Section".to_string()),
                        Just("```".to_string()),
                        Just("~~~".to_string()),
                        Just(String::new()),
                        "- \\[2026-11-29 09:00\\] [a-z ]{0,12}",
                        "[a-z][a-z ]{0,12}",
                        "  [a-z]{1,8}",
                        Just("  # indented".to_string()),
                        Just("  ```".to_string()),
                    ],
                    0..30,
                ),
                cut in 0usize..32,
                crlf in any::<bool>(),
            ) {
                let cut = cut.min(lines.len());
                let eol = if crlf { "\r\n" } else { "\n" };
                let head: String = lines[..cut].iter().map(|l| format!("{l}{eol}")).collect();
                let more = lines[cut..].join(eol);
                let whole = format!("{head}{more}");
                let (full, full_end) = parse_blocks_with_end(&whole);
                let straddles = full.iter().any(|b| b.start_line <= cut && b.end_line > cut);
                prop_assume!(!straddles);
                let (_, head_end) = parse_blocks_with_end(&head);
                prop_assert_eq!(head_end.lines, cut);
                let (resumed, resumed_end) = parse_blocks_resumed(&more, &head_end);
                let expected: Vec<Block> = full.into_iter().filter(|b| b.start_line > cut).collect();
                prop_assert_eq!(resumed, expected);
                prop_assert_eq!(resumed_end, full_end);
            }

            #[test]
            fn formatted_notes_parse_back(
                lines in proptest::collection::vec("[A-Za-z0-9][A-Za-z0-9 ,.!?éß中文]{0,30}", 1..6),
                blank_after_first in any::<bool>(),
            ) {
                let mut text = lines.join("\n");
                if blank_after_first && lines.len() > 1 {
                    text = format!("{}\n\n{}", lines[0], lines[1..].join("\n"));
                }
                let written = format_note("2026-11-29 09:00", &text);
                let blocks = parse_blocks(&written);
                prop_assert_eq!(blocks.len(), 1);
                let expected: Vec<String> = crate::normalize_newlines(&text)
                    .trim()
                    .split('\n')
                    .map(|l| l.trim_end().to_string())
                    .collect();
                let expected = expected.join("\n");
                prop_assert_eq!(&blocks[0].body, &expected);
                prop_assert_eq!(blocks[0].stamp.clone(), Some(Stamp { date: Some("2026-11-29".into()), time: Some("09:00".into()) }));
            }
        }
    }
}
