//! The pure rules of Telegram formatting: a model's Markdown reply turned
//! into messages for the Bot API's HTML parse mode.
//!
//! * [`to_html`] renders Markdown as Telegram's HTML subset (`<b>`, `<i>`,
//!   `<s>`, `<code>`, `<pre>`, `<a>`, `<blockquote>`).
//! * [`chunk_html`] splits that HTML into messages within a length limit,
//!   in [`ChunkMode::Length`] or [`ChunkMode::Newline`].
//! * [`utf16_len`] measures text as Telegram does.
//! * [`strip_html`] gives the plain text to send when Telegram rejects the
//!   HTML ("can't parse entities").
//!
//! Invariants:
//! * [`to_html`]'s output is well-formed: every tag it opens is closed,
//!   properly nested, and `<`, `>` and `&` in the text are escaped. Markdown
//!   markers without a partner stay literal text; nothing fails or panics
//!   on any input.
//! * Every chunk [`chunk_html`] returns is at most `limit` UTF-16 units,
//!   tags included, and (for well-formed input) well-formed: a cut inside
//!   open tags closes them at the end of the chunk and reopens them, with
//!   the same attributes, at the start of the next. No cut falls inside a
//!   tag or an entity; no chunk is empty or whitespace only; the chunks'
//!   text (tags removed) is the input's, but for whitespace at the cuts.
//! * The limit is measured on the markup, which is never less than the
//!   text Telegram counts after parsing it, so a chunk within the limit is
//!   within Telegram's.

mod chunk;
mod html;
mod token;

pub use chunk::{MIN_LIMIT, chunk_html};
pub use html::to_html;

/// Where [`chunk_html`] prefers to cut a message that is too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChunkMode {
    /// Fill each message: cut at the last paragraph break, line break or
    /// space in the second half of the room a message has (in that order
    /// of preference), else at the last of any of them, else anywhere
    /// outside a tag or entity.
    #[default]
    Length,
    /// Cut only at line breaks (the last paragraph break or line break in
    /// the second half of the room, else the last one at all); a line too
    /// long for one message is cut as in [`ChunkMode::Length`].
    Newline,
}

/// The length of `s` as Telegram counts it: UTF-16 code units, so a
/// character outside the Basic Multilingual Plane (most emoji) counts 2.
#[must_use]
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The plain text of `html`, for a message Telegram could not parse: tags
/// removed, and `&lt;`, `&gt;`, `&amp;` and `&quot;` unescaped (other
/// entities stay as written). A `<` that does not start a tag stays.
#[must_use]
pub fn strip_html(html: &str) -> String {
    let bytes = html.as_bytes();
    let mut out = String::with_capacity(html.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let skip = match bytes[i] {
            b'<' => token::tag_end(html, i).map(|end| (end, "")),
            b'&' => ["&lt;", "&gt;", "&amp;", "&quot;"]
                .into_iter()
                .zip(["<", ">", "&", "\""])
                .find(|(entity, _)| html[i..].starts_with(entity))
                .map(|(entity, plain)| (i + entity.len(), plain)),
            _ => None,
        };
        match skip {
            Some((end, plain)) => {
                out.push_str(&html[copied..i]);
                out.push_str(plain);
                i = end;
                copied = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&html[copied..]);
    out
}

#[cfg(test)]
mod tests;
