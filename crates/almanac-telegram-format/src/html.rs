//! Markdown to Telegram's HTML subset.
//!
//! Blocks are read line by line (fenced code, blockquotes, headings,
//! bullets); inline markup is read within one line, so a marker left open
//! on one line never formats the next. Every construct is emitted as a
//! whole (opening tag, content, closing tag) once its closing marker is
//! found, which is what keeps the output well-formed.

use std::collections::HashMap;
use std::ops::Range;

/// How deep inline constructs nest before further markers stay literal:
/// bounds the recursion on adversarial input (real replies nest two or
/// three deep).
const MAX_DEPTH: u8 = 8;

/// The kinds of emphasis run: `~~`, then `*`, `**`, `***`, `_`, `__`,
/// `___`.
const EMPHASIS_KINDS: usize = 7;

/// Schemes a link may use; anything else (`javascript:`, relative paths)
/// stays literal text.
const SCHEMES: &[&str] = &["http://", "https://", "tg://", "mailto:"];

/// `markdown` as Telegram HTML (see the crate docs for the invariants).
///
/// * fenced code (```` ``` ```` with an optional language) →
///   `<pre><code class="language-x">…</code></pre>`, content escaped and
///   not otherwise formatted; an unclosed fence runs to the end, as in
///   CommonMark;
/// * `` `code` `` → `<code>`; `**b**`, `__b__` → `<b>`; `*i*`, `_i_` →
///   `<i>` (underscores only at word boundaries, so `snake_case` stays);
///   `***bi***` → `<b><i>`; `~~s~~` → `<s>`;
/// * `[text](url)` → `<a href="url">` for http, https, tg and mailto
///   URLs only;
/// * `# heading` → `<b>heading</b>`; `> quote` lines → one
///   `<blockquote>`; `- item` and `* item` → `• item`.
#[must_use]
pub fn to_html(markdown: &str) -> String {
    let lines: Vec<&str> = markdown
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 8);
    let mut i = 0;
    while i < lines.len() {
        if i > 0 {
            out.push('\n');
        }
        if let Some(fence) = Fence::open(lines[i]) {
            i = fence.render(&lines, i + 1, &mut out);
        } else if quote_content(lines[i]).is_some() {
            out.push_str("<blockquote>");
            let mut first = true;
            while let Some(content) = lines.get(i).and_then(|line| quote_content(line)) {
                if !first {
                    out.push('\n');
                }
                first = false;
                block_line(content, &mut out);
                i += 1;
            }
            out.push_str("</blockquote>");
        } else {
            block_line(lines[i], &mut out);
            i += 1;
        }
    }
    out
}

/// An opening code fence: its indentation (removed from the content's
/// lines too), its length in backticks and its language.
struct Fence<'a> {
    indent: usize,
    ticks: usize,
    language: Option<&'a str>,
}

impl<'a> Fence<'a> {
    fn open(line: &'a str) -> Option<Self> {
        let rest = line.trim_start_matches([' ', '\t']);
        let ticks = rest.len() - rest.trim_start_matches('`').len();
        let info = rest[ticks..].trim();
        // A backtick in the info string makes the line inline code
        // (```` ```x``` ````), as in CommonMark.
        if ticks < 3 || info.contains('`') {
            return None;
        }
        let language = info.split_whitespace().next().filter(|lang| {
            lang.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+-#.".contains(&b))
        });
        Some(Fence {
            indent: line.len() - rest.len(),
            ticks,
            language,
        })
    }

    fn closes(&self, line: &str) -> bool {
        let line = line.trim();
        line.len() >= self.ticks && line.bytes().all(|b| b == b'`')
    }

    /// Writes the block whose content starts at `lines[first]`; returns
    /// the index of the line after its closing fence.
    fn render(&self, lines: &[&str], first: usize, out: &mut String) -> usize {
        out.push_str("<pre><code");
        if let Some(language) = self.language {
            out.push_str(" class=\"language-");
            out.push_str(language);
            out.push('"');
        }
        out.push('>');
        let mut i = first;
        while i < lines.len() && !self.closes(lines[i]) {
            if i > first {
                out.push('\n');
            }
            let line = lines[i];
            let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
            escape_into(out, &line[indent.min(self.indent)..]);
            i += 1;
        }
        out.push_str("</code></pre>");
        (i + 1).min(lines.len())
    }
}

/// The content of a blockquote line (`> x`, up to three spaces before the
/// `>`, one space after it dropped).
fn quote_content(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return None;
    }
    let content = rest.strip_prefix('>')?;
    Some(content.strip_prefix(' ').unwrap_or(content))
}

/// One line outside code: a heading, a bullet or plain text.
fn block_line(line: &str, out: &mut String) {
    let rest = line.trim_start_matches(' ');
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    let after = &rest[hashes..];
    if line.len() - rest.len() <= 3
        && (1..=6).contains(&hashes)
        && (after.is_empty() || after.starts_with([' ', '\t']))
    {
        // An optional closing sequence of `#`s is not part of the title.
        let title = after.trim();
        let trimmed = title.trim_end_matches('#');
        let title = if trimmed.is_empty() || trimmed.ends_with([' ', '\t']) {
            trimmed.trim_end()
        } else {
            title
        };
        if !title.is_empty() {
            out.push_str("<b>");
            inline(title, out);
            out.push_str("</b>");
        }
        return;
    }
    let rest = line.trim_start_matches([' ', '\t']);
    if let Some(item) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("* ")) {
        escape_into(out, &line[..line.len() - rest.len()]);
        out.push_str("• ");
        inline(item, out);
        return;
    }
    inline(line, out);
}

/// Inline markup of one line of text.
fn inline(text: &str, out: &mut String) {
    Inline::new(text).render(0..text.len(), 0, true, out);
}

/// A recognised inline construct and the byte just past it.
enum Span {
    Code(Range<usize>),
    Link {
        text: Range<usize>,
        url: Range<usize>,
    },
    Emphasis(&'static [&'static str], Range<usize>),
}

/// No partner (see [`Inline::partner`]).
const NONE: usize = usize::MAX;

/// One line's inline markup. Positions are byte offsets into `s`; the
/// markers are ASCII, so any position holding one is a char boundary.
struct Inline<'a> {
    s: &'a str,
    /// For a `[`, a `(` and the first backtick of a run: where its
    /// partner is (the matching `]` or `)`, counting nested pairs; the
    /// next run of as many backticks), or [`NONE`]. Found once per line,
    /// so that a long line of unmatched markers costs linear time, not
    /// a scan to the end of the line per marker.
    partner: Vec<usize>,
}

impl<'a> Inline<'a> {
    fn new(s: &'a str) -> Self {
        let bytes = s.as_bytes();
        let mut partner = vec![NONE; bytes.len()];
        let (mut brackets, mut parens) = (Vec::new(), Vec::new());
        for (i, &b) in bytes.iter().enumerate() {
            let (stack, opens) = match b {
                b'[' | b']' => (&mut brackets, b == b'['),
                b'(' | b')' => (&mut parens, b == b'('),
                _ => continue,
            };
            if opens {
                stack.push(i);
            } else if let Some(open) = stack.pop() {
                partner[open] = i;
            }
        }
        let mut next_run: HashMap<usize, usize> = HashMap::new();
        let mut i = bytes.len();
        while i > 0 {
            let end = i;
            while i > 0 && bytes[i - 1] == b'`' {
                i -= 1;
            }
            if i == end {
                i -= 1;
            } else {
                partner[i] = next_run.insert(end - i, i).unwrap_or(NONE);
            }
        }
        Inline { s, partner }
    }

    fn byte(&self, i: usize) -> u8 {
        self.s.as_bytes()[i]
    }

    fn render(&self, range: Range<usize>, depth: u8, links: bool, out: &mut String) {
        let (mut i, end) = (range.start, range.end);
        let mut copied = i;
        // Per kind of emphasis run, the first opener in this range that
        // found no closer: a later one finds none either.
        let mut unclosed = [NONE; EMPHASIS_KINDS];
        while i < end {
            let found = match self.byte(i) {
                b'`' => self.code_span(i, end),
                b'[' if links && depth < MAX_DEPTH => self.link(i, end),
                b'*' | b'_' | b'~' if depth < MAX_DEPTH => self.emphasis(i, end, &mut unclosed),
                _ => None,
            };
            let Some((span, after)) = found else {
                // A marker without a partner is literal, all of its run:
                // an unmatched `**` is not retried as two `*`.
                i += match self.byte(i) {
                    b @ (b'`' | b'*' | b'_' | b'~') => self.run(i, end, b),
                    _ => 1,
                };
                continue;
            };
            escape_into(out, &self.s[copied..i]);
            match span {
                Span::Code(code) => {
                    out.push_str("<code>");
                    escape_into(out, &self.s[code]);
                    out.push_str("</code>");
                }
                Span::Link { text, url } => {
                    out.push_str("<a href=\"");
                    escape_attr_into(out, &self.s[url]);
                    out.push_str("\">");
                    self.render(text, depth + 1, false, out);
                    out.push_str("</a>");
                }
                Span::Emphasis(tags, inner) => {
                    for tag in tags {
                        out.push('<');
                        out.push_str(tag);
                        out.push('>');
                    }
                    self.render(inner, depth + 1, links, out);
                    for tag in tags.iter().rev() {
                        out.push_str("</");
                        out.push_str(tag);
                        out.push('>');
                    }
                }
            }
            i = after;
            copied = after;
        }
        escape_into(out, &self.s[copied..end]);
    }

    /// The length of the run of `b` starting at `i`, within `end`.
    fn run(&self, i: usize, end: usize, b: u8) -> usize {
        self.s.as_bytes()[i..end]
            .iter()
            .take_while(|&&x| x == b)
            .count()
    }

    /// The partner of the marker at `i`, if it is before `end`.
    fn partner(&self, i: usize, end: usize) -> Option<usize> {
        Some(self.partner[i]).filter(|&p| p < end)
    }

    /// `` `code` ``: a run of backticks closed by a run of the same length.
    fn code_span(&self, i: usize, end: usize) -> Option<(Span, usize)> {
        let n = self.run(i, end, b'`');
        let j = self.partner(i, end).filter(|&j| j + n <= end)?;
        let mut code = i + n..j;
        // One space each side is padding (`` ` `x` ` ``), as in CommonMark,
        // unless the code is only spaces.
        let body = &self.s[code.clone()];
        if body.len() > 2 && body.starts_with(' ') && body.ends_with(' ') && body.trim() != "" {
            code = code.start + 1..code.end - 1;
        }
        Some((Span::Code(code), j + n))
    }

    /// `[text](url)` with a non-empty text and an allowed scheme.
    fn link(&self, i: usize, end: usize) -> Option<(Span, usize)> {
        let close = self.partner(i, end)?;
        if close == i + 1 || close + 1 >= end || self.byte(close + 1) != b'(' {
            return None;
        }
        let paren = self.partner(close + 1, end)?;
        // The destination is the first word; a title after it is dropped.
        let dest = &self.s[close + 2..paren];
        let mut start = close + 2 + (dest.len() - dest.trim_start().len());
        let mut url_end = self.s[start..paren]
            .find(char::is_whitespace)
            .map_or(paren, |k| start + k);
        if self.s[start..url_end].starts_with('<') && self.s[start..url_end].ends_with('>') {
            start += 1;
            url_end -= 1;
        }
        let lower = self.s[start..url_end.max(start)].to_ascii_lowercase();
        if !SCHEMES.iter().any(|scheme| lower.starts_with(scheme)) {
            return None;
        }
        let url = start..url_end;
        Some((
            Span::Link {
                text: i + 1..close,
                url,
            },
            paren + 1,
        ))
    }

    /// `*i*`, `_i_`, `**b**`, `__b__`, `***bi***`, `___bi___`, `~~s~~`: an
    /// opening run followed by a non-space, closed by a run of the same
    /// length preceded by a non-space. Underscores also need a word
    /// boundary outside each run.
    fn emphasis(
        &self,
        i: usize,
        end: usize,
        unclosed: &mut [usize; EMPHASIS_KINDS],
    ) -> Option<(Span, usize)> {
        let b = self.byte(i);
        let n = self.run(i, end, b);
        let (kind, tags): (usize, &'static [&'static str]) = match (b, n) {
            (b'~', 2) => (0, &["s"]),
            (b'*' | b'_', 1..=3) => {
                let tags: &[&str] = [&["i"][..], &["b"], &["b", "i"]][n - 1];
                (usize::from(b == b'_') * 3 + n, tags)
            }
            _ => return None,
        };
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
        let before = |j: usize| self.s[..j].chars().next_back();
        let after = |j: usize| self.s[j..].chars().next();
        if i + n >= end
            || space(after(i + n))
            || (b == b'_' && word(before(i)))
            || i >= unclosed[kind]
        {
            return None;
        }
        let mut j = i + n;
        while j < end {
            match self.byte(j) {
                // Markers inside code are code.
                b'`' => {
                    j = match self.code_span(j, end) {
                        Some((_, after)) => after,
                        None => j + self.run(j, end, b'`'),
                    };
                }
                x if x == b => {
                    let m = self.run(j, end, b);
                    if m == n
                        && j > i + n
                        && !space(before(j))
                        && !(b == b'_' && word(after(j + m)))
                    {
                        return Some((Span::Emphasis(tags, i + n..j), j + m));
                    }
                    j += m;
                }
                _ => j += 1,
            }
        }
        unclosed[kind] = unclosed[kind].min(i);
        None
    }
}

/// `text` with `<`, `>` and `&` escaped.
fn escape_into(out: &mut String, text: &str) {
    let mut copied = 0;
    for (i, b) in text.bytes().enumerate() {
        let entity = match b {
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'&' => "&amp;",
            _ => continue,
        };
        out.push_str(&text[copied..i]);
        out.push_str(entity);
        copied = i + 1;
    }
    out.push_str(&text[copied..]);
}

/// An attribute value: as text, and `"` escaped too.
fn escape_attr_into(out: &mut String, value: &str) {
    for part in value.split_inclusive('"') {
        match part.strip_suffix('"') {
            Some(head) => {
                escape_into(out, head);
                out.push_str("&quot;");
            }
            None => escape_into(out, part),
        }
    }
}
