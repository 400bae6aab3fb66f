//! Sending a reply: the model's Markdown as Telegram HTML, cut into
//! messages of at most the account's `textChunkLimit` (UTF-16 units) on
//! paragraph or line boundaries without splitting an entity, each sent
//! again as plain text when Telegram cannot parse its HTML.
//!
//! A reply of several messages keeps how many went out, so a retry after
//! a failure sends the rest, not the first ones again.

use almanac_telegram_format::{ChunkMode, chunk_html, strip_html, to_html};

use super::Account;
use super::api::{ApiError, BotApi, Outgoing};

/// Where a reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chat<'a> {
    pub chat_id: &'a str,
    pub thread_id: Option<i64>,
    /// The message it answers (the first chunk replies to it).
    pub reply_to: Option<i64>,
}

/// The messages `markdown` is sent as on `account`.
pub(crate) fn chunks(account: &Account, markdown: &str) -> Vec<String> {
    let mode = if account.newline_chunks() {
        ChunkMode::Newline
    } else {
        ChunkMode::Length
    };
    chunk_html(&to_html(markdown), account.chunk_limit(), mode)
}

/// Sends the chunks of `markdown` after the first `sent`; the number sent
/// in all, or the error with the number sent before it.
pub(crate) async fn send_reply(
    api: &BotApi,
    account: &Account,
    chat: &Chat<'_>,
    markdown: &str,
    sent: usize,
) -> Result<usize, (ApiError, usize)> {
    let parts = chunks(account, markdown);
    let link_preview = account.settings.link_preview.unwrap_or(true);
    let mut done = sent;
    for (i, html) in parts.iter().enumerate().skip(sent) {
        let mut out = Outgoing {
            chat_id: chat.chat_id,
            text: html,
            html: true,
            thread_id: chat.thread_id,
            reply_to: chat.reply_to.filter(|_| i == 0),
            link_preview,
        };
        let plain;
        let result = match api.send_message(&out).await {
            Err(err) if err.is_parse_error() => {
                plain = strip_html(html);
                out.text = &plain;
                out.html = false;
                api.send_message(&out).await
            }
            other => other,
        };
        match result {
            Ok(_) => done += 1,
            Err(err) => return Err((err, done)),
        }
    }
    Ok(done)
}
