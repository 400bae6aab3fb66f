//! The lexical pieces of Telegram HTML: tags, entities and characters.
//! Chunking cuts only between them, so a cut never splits a tag or an
//! entity.

use std::ops::Range;

/// The longest entity recognised (`&` + ten characters + `;`): bounded so
/// that a stray `&` never swallows a long run of text.
pub(crate) const MAX_ENTITY: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A visible character or an entity.
    Text,
    /// A space, tab or carriage return: where a line may be cut.
    Space,
    Newline,
    /// Other Unicode whitespace (no-break spaces and the like): invisible,
    /// but not a place to cut.
    Blank,
    Open,
    Close,
    /// A self-closing tag (`<x/>`), which opens nothing.
    Void,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
}

impl Token {
    pub(crate) fn is_tag(self) -> bool {
        matches!(self.kind, Kind::Open | Kind::Close | Kind::Void)
    }

    pub(crate) fn is_space(self) -> bool {
        matches!(self.kind, Kind::Space | Kind::Newline)
    }

    pub(crate) fn range(self) -> Range<usize> {
        self.start..self.end
    }
}

/// `html` as consecutive tokens covering every byte.
pub(crate) fn tokenize(html: &str) -> Vec<Token> {
    let bytes = html.as_bytes();
    let mut tokens = Vec::with_capacity(html.len());
    let mut i = 0;
    while i < bytes.len() {
        let (end, kind) = match bytes[i] {
            b'<' => match tag_end(html, i) {
                Some(end) if bytes[i + 1] == b'/' => (end, Kind::Close),
                Some(end) if bytes[end - 2] == b'/' => (end, Kind::Void),
                Some(end) => (end, Kind::Open),
                None => (i + 1, Kind::Text),
            },
            b'&' => (entity_end(bytes, i).unwrap_or(i + 1), Kind::Text),
            b'\n' => (i + 1, Kind::Newline),
            b' ' | b'\t' | b'\r' => (i + 1, Kind::Space),
            _ => {
                let c = html[i..].chars().next().unwrap_or_default();
                let kind = if c.is_whitespace() {
                    Kind::Blank
                } else {
                    Kind::Text
                };
                (i + c.len_utf8().max(1), kind)
            }
        };
        tokens.push(Token {
            start: i,
            end,
            kind,
        });
        i = end;
    }
    tokens
}

/// The end (past `>`) of the tag starting at `start` (a `<`), if one does:
/// `<` or `</` then a letter, up to the next `>`, with no `<` before it.
/// Attribute values hold `>` and `<` only as entities (as [`crate::to_html`]
/// writes them), so a tag never scans past the next `<`: finding every tag
/// of a text takes linear time.
pub(crate) fn tag_end(html: &str, start: usize) -> Option<usize> {
    let bytes = html.as_bytes();
    let name = start + 1 + usize::from(bytes.get(start + 1) == Some(&b'/'));
    if !bytes.get(name)?.is_ascii_alphabetic() {
        return None;
    }
    let end = name + html[name..].find(['<', '>'])?;
    (bytes[end] == b'>').then_some(end + 1)
}

/// The name of the tag `tag` (`<b>`, `</b>`, `<a href="…">`: `b`, `b`, `a`).
pub(crate) fn tag_name(tag: &str) -> &str {
    let inner = tag.trim_start_matches('<').trim_start_matches('/');
    let end = inner
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(inner.len());
    &inner[..end]
}

fn entity_end(bytes: &[u8], start: usize) -> Option<usize> {
    let body = bytes
        .iter()
        .skip(start + 1)
        .take(MAX_ENTITY - 1)
        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'#'))?;
    (body > 0 && bytes[start + 1 + body] == b';').then_some(start + body + 2)
}
