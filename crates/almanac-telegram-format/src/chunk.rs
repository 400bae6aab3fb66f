//! Splitting Telegram HTML into messages within a length limit.
//!
//! Each chunk is self-contained: the tags open where it starts are
//! reopened first (copied from the input, attributes and all), and the tags
//! open where it ends are closed last; both count towards the limit. A
//! chunk whose reopened and closing tags would take more than half the
//! limit (a link with a huge URL, a small limit) is sent without tags, as
//! is one where a single tag does not fit at all: the text survives, its
//! formatting there does not.

use std::ops::Range;

use crate::ChunkMode;
use crate::token::{Kind, MAX_ENTITY, Token, tag_name, tokenize};
use crate::utf16_len;

/// The smallest limit honoured: a chunk must hold at least the longest
/// entity, which is never cut. Smaller limits are raised to this.
pub const MIN_LIMIT: usize = MAX_ENTITY + 4;

/// How many open elements a closing tag looks through for its own: far
/// more than Telegram HTML nests.
const MAX_CLOSE_SEARCH: usize = 64;

/// Splits `html` (as [`crate::to_html`] makes it) into messages of at most
/// `limit` UTF-16 units each (at least [`MIN_LIMIT`]), tags included.
///
/// Cuts fall, in order of preference, at a paragraph break (a blank line),
/// a line break, a space, then anywhere between characters, never inside
/// a tag or an entity; `mode` says how much a full message counts against
/// a better place to cut (see [`ChunkMode`]). The whitespace at a cut is
/// dropped, except the indentation of the line after it. Tags open at a
/// cut are closed before it and reopened after it. No chunk is empty or
/// only whitespace; text that fits in one message comes back unchanged.
///
/// Input with mismatched tags is cut the same way without panicking, but
/// its chunks are only as well-formed as it is.
#[must_use]
pub fn chunk_html(html: &str, limit: usize, mode: ChunkMode) -> Vec<String> {
    let limit = limit.max(MIN_LIMIT);
    let doc = Doc::parse(html);
    let n = doc.tokens.len();
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < n {
        let cut = doc.plan(start, limit, mode);
        let mut end = cut.end;
        // A tag opened just before the cut would be closed empty; it is
        // reopened in the next chunk instead.
        while end > start && doc.tokens[end - 1].kind == Kind::Open {
            end -= 1;
        }
        if doc.tokens[start..end].iter().any(|t| t.kind == Kind::Text) {
            chunks.push(doc.render(start..end, cut.plain));
        }
        start = cut.next;
        // Tags closing at the start of a chunk were closed by the one
        // before.
        while start < n && doc.tokens[start].kind == Kind::Close {
            start += 1;
        }
    }
    chunks
}

/// An element open at some point of the input.
struct Element<'a> {
    /// Its opening tag, reopened as written.
    open: Range<usize>,
    name: &'a str,
    parent: Option<usize>,
    /// The UTF-16 length of reopening it and its ancestors.
    reopen16: usize,
    /// The UTF-16 length of closing it and its ancestors.
    close16: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Paragraph = 0,
    Line = 1,
    Space = 2,
}

/// A run of whitespace where a chunk may end: its kind, and the token the
/// next chunk starts at (after the run's last newline, which keeps the
/// next line's indentation).
#[derive(Debug, Clone, Copy)]
struct Break {
    class: Class,
    next: usize,
}

/// Where one chunk ends, where the next starts, and whether this one is
/// sent without tags.
#[derive(Debug, Clone, Copy)]
struct Cut {
    end: usize,
    next: usize,
    plain: bool,
}

/// The input, tokenized, with running UTF-16 lengths and the element open
/// before each token, so a chunk's length is found in constant time.
struct Doc<'a> {
    html: &'a str,
    tokens: Vec<Token>,
    /// `units[i]`: UTF-16 length of `tokens[..i]`.
    units: Vec<usize>,
    /// `text_units[i]`: the same without tags.
    text_units: Vec<usize>,
    /// `open_at[i]`: the innermost element open before `tokens[i]`.
    open_at: Vec<Option<usize>>,
    elements: Vec<Element<'a>>,
    /// `breaks[i]`: the break starting at `tokens[i]`, if any.
    breaks: Vec<Option<Break>>,
}

impl<'a> Doc<'a> {
    fn parse(html: &'a str) -> Self {
        let tokens = tokenize(html);
        let n = tokens.len();
        let mut doc = Doc {
            html,
            units: Vec::with_capacity(n + 1),
            text_units: Vec::with_capacity(n + 1),
            open_at: Vec::with_capacity(n + 1),
            elements: Vec::new(),
            breaks: breaks(&tokens),
            tokens,
        };
        let (mut units, mut text_units, mut current) = (0, 0, None);
        for &token in &doc.tokens {
            doc.units.push(units);
            doc.text_units.push(text_units);
            doc.open_at.push(current);
            let text = &html[token.range()];
            let len = utf16_len(text);
            units += len;
            if !token.is_tag() {
                text_units += len;
            }
            match token.kind {
                Kind::Open => {
                    let name = tag_name(text);
                    let (reopen16, close16) = current.map_or((0, 0), |p: usize| {
                        (doc.elements[p].reopen16, doc.elements[p].close16)
                    });
                    doc.elements.push(Element {
                        open: token.range(),
                        name,
                        parent: current,
                        reopen16: reopen16 + len,
                        close16: close16 + utf16_len(name) + 3,
                    });
                    current = Some(doc.elements.len() - 1);
                }
                // A closing tag closes the nearest open element of its
                // name (and any left open inside it); a stray one nothing.
                // The search is bounded so that stray tags under deeply
                // nested ones cost constant time each.
                Kind::Close => {
                    let name = tag_name(text);
                    let mut element = current;
                    for _ in 0..MAX_CLOSE_SEARCH {
                        let Some(e) = element else { break };
                        if doc.elements[e].name.eq_ignore_ascii_case(name) {
                            current = doc.elements[e].parent;
                            break;
                        }
                        element = doc.elements[e].parent;
                    }
                }
                _ => {}
            }
        }
        doc.units.push(units);
        doc.text_units.push(text_units);
        doc.open_at.push(current);
        doc
    }

    fn reopen16(&self, element: Option<usize>) -> usize {
        element.map_or(0, |e| self.elements[e].reopen16)
    }

    fn close16(&self, element: Option<usize>) -> usize {
        element.map_or(0, |e| self.elements[e].close16)
    }

    /// Where the chunk starting at `tokens[start]` ends.
    fn plan(&self, start: usize, limit: usize, mode: ChunkMode) -> Cut {
        let open = self.open_at[start];
        if self.reopen16(open) + self.close16(open) <= limit / 2
            && let Some(cut) = self.scan(start, limit, mode, false)
        {
            return cut;
        }
        // Without tags every token fits (the limit holds the longest
        // entity), so this always moves on.
        self.scan(start, limit, mode, true).unwrap_or(Cut {
            end: start + 1,
            next: start + 1,
            plain: true,
        })
    }

    /// The best cut for the chunk starting at `tokens[start]`, with its
    /// tags or `plain`; `None` when not even one token fits.
    fn scan(&self, start: usize, limit: usize, mode: ChunkMode, plain: bool) -> Option<Cut> {
        let n = self.tokens.len();
        let base = if plain {
            0
        } else {
            self.reopen16(self.open_at[start])
        };
        let mut best: [Option<(usize, usize)>; 3] = [None; 3];
        let (mut clean, mut any) = (None, None);
        for i in start + 1..=n {
            let body = if plain {
                self.text_units[i] - self.text_units[start]
            } else {
                self.units[i] - self.units[start]
            };
            if base + body > limit {
                break;
            }
            let cost = base
                + body
                + if plain {
                    0
                } else {
                    self.close16(self.open_at[i])
                };
            if cost > limit {
                continue;
            }
            if i == n {
                return Some(Cut {
                    end: n,
                    next: n,
                    plain,
                });
            }
            if let Some(brk) = self.breaks[i] {
                best[brk.class as usize] = Some((i, cost));
            }
            if self.tokens[i - 1].kind != Kind::Open {
                clean = Some(i);
            }
            any = Some(i);
        }
        if let Some(end) = choose(best, mode, limit / 2) {
            let next = self.breaks[end].map_or(end, |brk| brk.next);
            return Some(Cut { end, next, plain });
        }
        clean.or(any).map(|end| Cut {
            end,
            next: end,
            plain,
        })
    }

    /// The chunk of `tokens[range]`: with the tags open at its start
    /// reopened and those open at its end closed, or without any tag.
    fn render(&self, range: Range<usize>, plain: bool) -> String {
        let offset = |i: usize| self.tokens.get(i).map_or(self.html.len(), |t| t.start);
        if plain {
            return self.tokens[range]
                .iter()
                .filter(|t| !t.is_tag())
                .map(|t| &self.html[t.range()])
                .collect();
        }
        let mut chain = Vec::new();
        let mut element = self.open_at[range.start];
        while let Some(e) = element {
            chain.push(e);
            element = self.elements[e].parent;
        }
        let mut out = String::new();
        for &e in chain.iter().rev() {
            out.push_str(&self.html[self.elements[e].open.clone()]);
        }
        out.push_str(&self.html[offset(range.start)..offset(range.end)]);
        let mut element = self.open_at[range.end];
        while let Some(e) = element {
            out.push_str("</");
            out.push_str(self.elements[e].name);
            out.push('>');
            element = self.elements[e].parent;
        }
        out
    }
}

/// The breaks of `tokens`, at the first token of each run of whitespace.
fn breaks(tokens: &[Token]) -> Vec<Option<Break>> {
    let mut breaks = vec![None; tokens.len()];
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i].is_space() {
            i += 1;
            continue;
        }
        let first = i;
        let (mut newlines, mut after_newline) = (0, i);
        while i < tokens.len() && tokens[i].is_space() {
            if tokens[i].kind == Kind::Newline {
                newlines += 1;
                after_newline = i + 1;
            }
            i += 1;
        }
        breaks[first] = Some(match newlines {
            0 => Break {
                class: Class::Space,
                next: i,
            },
            1 => Break {
                class: Class::Line,
                next: after_newline,
            },
            _ => Break {
                class: Class::Paragraph,
                next: after_newline,
            },
        });
    }
    breaks
}

/// The break to cut at among the last fitting one of each class (position
/// and chunk length): the best class that leaves the chunk at least
/// `min_fill` long, else the last break at all. In `Newline` mode a space
/// is used only when there is no line break to cut at.
fn choose(best: [Option<(usize, usize)>; 3], mode: ChunkMode, min_fill: usize) -> Option<usize> {
    let [paragraph, line, space] = best;
    let filled = |c: Option<(usize, usize)>| c.filter(|&(_, cost)| cost >= min_fill);
    let last = |cs: &[Option<(usize, usize)>]| cs.iter().flatten().max_by_key(|c| c.0).copied();
    let pick = match mode {
        ChunkMode::Newline if paragraph.is_some() || line.is_some() => filled(paragraph)
            .or(filled(line))
            .or_else(|| last(&[paragraph, line])),
        _ => filled(paragraph)
            .or(filled(line))
            .or(filled(space))
            .or_else(|| last(&best)),
    };
    pick.map(|(i, _)| i)
}
