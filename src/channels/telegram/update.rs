//! One update from `getUpdates`, read into what the channel needs: who
//! wrote, in which chat, the sender's own text, and what came with it
//! (a quoted reply, a forward) as context. Pure.
//!
//! Read leniently: unknown fields are ignored, a field of the wrong type
//! counts as missing; an update that is no new message (an edit, a
//! channel post, a poll…) or has no text is ignored, with why.

use serde_json::Value;

/// The kind of chat a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChatKind {
    Direct,
    Group,
    Channel,
}

impl ChatKind {
    /// The router's peer kind.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChatKind::Direct => "direct",
            ChatKind::Group => "group",
            ChatKind::Channel => "channel",
        }
    }
}

/// A message a user sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inbound {
    pub update_id: i64,
    pub message_id: i64,
    pub chat_id: i64,
    pub chat: ChatKind,
    /// A forum topic's thread.
    pub thread_id: Option<i64>,
    pub from_id: i64,
    pub from_username: Option<String>,
    pub from_name: String,
    /// The sender's own words (a text or a caption).
    pub text: String,
    /// The message it replies to: its author and text.
    pub quoted: Option<(String, String)>,
    /// Whether it replies to one of the bot's messages.
    pub replies_to_bot: bool,
    /// Where a forwarded message came from (its text is then not the
    /// sender's own words).
    pub forwarded_from: Option<String>,
    /// The `@names` the message's entities mention.
    pub mentions: Vec<String>,
}

/// What an update is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Update {
    Message(Box<Inbound>),
    /// Nothing to answer, and why (`edited`, `no-text`, `not-a-message`).
    Ignored(&'static str),
}

/// The update's id, if it has one.
pub(crate) fn update_id(update: &Value) -> Option<i64> {
    update.get("update_id")?.as_i64()
}

/// Reads one update; `bot_id` tells replies to the bot apart.
pub(crate) fn read(update: &Value, bot_id: i64) -> Update {
    if update.get("edited_message").is_some() {
        // An edit of a message already answered: answering it again
        // would double the conversation.
        return Update::Ignored("edited");
    }
    let Some(message) = update.get("message").filter(|m| m.is_object()) else {
        return Update::Ignored("not-a-message");
    };
    let text = message["text"]
        .as_str()
        .or_else(|| message["caption"].as_str())
        .unwrap_or_default();
    if text.trim().is_empty() {
        return Update::Ignored("no-text");
    }
    let chat = match message["chat"]["type"].as_str().unwrap_or("private") {
        "private" => ChatKind::Direct,
        "channel" => ChatKind::Channel,
        _ => ChatKind::Group,
    };
    let from = &message["from"];
    let reply = message.get("reply_to_message").filter(|r| r.is_object());
    let quoted = reply.and_then(|r| {
        let text = r["text"].as_str().or_else(|| r["caption"].as_str())?;
        Some((display_name(&r["from"]), text.to_string()))
    });
    let replies_to_bot =
        reply.is_some_and(|r| r["from"]["id"].as_i64() == Some(bot_id) && bot_id != 0);
    let forwarded_from = message.get("forward_origin").map(|origin| {
        let who = &origin["sender_user"];
        if who.is_object() {
            display_name(who)
        } else {
            origin["sender_user_name"]
                .as_str()
                .or_else(|| origin["chat"]["title"].as_str())
                .unwrap_or("someone")
                .to_string()
        }
    });
    Update::Message(Box::new(Inbound {
        update_id: update_id(update).unwrap_or_default(),
        message_id: message["message_id"].as_i64().unwrap_or_default(),
        chat_id: message["chat"]["id"].as_i64().unwrap_or_default(),
        chat,
        thread_id: message["message_thread_id"].as_i64(),
        from_id: from["id"].as_i64().unwrap_or_default(),
        from_username: from["username"].as_str().map(str::to_string),
        from_name: display_name(from),
        text: text.to_string(),
        quoted,
        replies_to_bot,
        forwarded_from,
        mentions: mentions(message, text),
    }))
}

/// `First Last (@user)`, as much of it as there is.
fn display_name(user: &Value) -> String {
    let first = user["first_name"].as_str().unwrap_or_default();
    let last = user["last_name"].as_str().unwrap_or_default();
    let name = format!("{first} {last}").trim().to_string();
    match (name.is_empty(), user["username"].as_str()) {
        (true, Some(u)) => format!("@{u}"),
        (false, Some(u)) => format!("{name} (@{u})"),
        (_, None) if !name.is_empty() => name,
        _ => user["id"]
            .as_i64()
            .map_or_else(|| "someone".to_string(), |id| id.to_string()),
    }
}

/// The `@names` mentioned, lowercased, from the entities (offsets in
/// UTF-16 units, as Telegram counts).
fn mentions(message: &Value, text: &str) -> Vec<String> {
    let entities = message["entities"]
        .as_array()
        .or_else(|| message["caption_entities"].as_array());
    let Some(entities) = entities else {
        return Vec::new();
    };
    let units: Vec<u16> = text.encode_utf16().collect();
    entities
        .iter()
        .filter(|e| e["type"] == "mention")
        .filter_map(|e| {
            let start = usize::try_from(e["offset"].as_u64()?).ok()?;
            let len = usize::try_from(e["length"].as_u64()?).ok()?;
            let slice = units.get(start..start.checked_add(len)?)?;
            Some(String::from_utf16_lossy(slice).to_lowercase())
        })
        .collect()
}

/// A command the channel answers itself or passes on: `/new`, `/reset`
/// (a fresh session; passed to the turn), `/status`, `/help`. A command
/// addressed to another bot (`/help@other_bot`) is none of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    New,
    Reset,
    Status,
    Help,
    /// `/stop` or `/subagents …`: the gateway's control of running work.
    Control,
}

/// The command `text` starts with, if it is one of ours.
pub(crate) fn command(text: &str, bot_username: &str) -> Option<Command> {
    let first = text.split_whitespace().next()?;
    let name = first.strip_prefix('/')?;
    let (name, addressed) = match name.split_once('@') {
        Some((name, to)) => (name, Some(to)),
        None => (name, None),
    };
    if addressed.is_some_and(|to| !to.eq_ignore_ascii_case(bot_username)) {
        return None;
    }
    match name.to_ascii_lowercase().as_str() {
        "new" => Some(Command::New),
        "reset" => Some(Command::Reset),
        "status" => Some(Command::Status),
        "help" | "start" => Some(Command::Help),
        "stop" | "subagents" => Some(Command::Control),
        _ => None,
    }
}

/// Whether a group message is addressed to the bot: it mentions
/// `@bot_username`, replies to the bot, or matches one of the agent's
/// `mentionPatterns` (case-insensitive regular expressions).
pub(crate) fn mentions_bot(inbound: &Inbound, bot_username: &str, patterns: &[String]) -> bool {
    let handle = format!("@{}", bot_username.to_lowercase());
    if inbound.replies_to_bot || inbound.mentions.contains(&handle) {
        return true;
    }
    if !bot_username.is_empty() && inbound.text.to_lowercase().contains(&handle) {
        return true;
    }
    patterns.iter().any(|p| {
        regex::RegexBuilder::new(p)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .is_ok_and(|re| re.is_match(&inbound.text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dm(text: &str) -> Value {
        json!({"update_id": 10, "message": {"message_id": 5, "date": 1,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "first_name": "Ada", "username": "ada", "is_bot": false},
            "text": text, "some_new_field": {"x": 1}}})
    }

    fn message(update: &Value) -> Inbound {
        match read(update, 7) {
            Update::Message(m) => *m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_direct_message_is_read_with_unknown_fields_ignored() {
        let m = message(&dm("hello"));
        assert_eq!(
            (m.update_id, m.chat_id, m.from_id, m.message_id),
            (10, 42, 42, 5)
        );
        assert_eq!(m.chat, ChatKind::Direct);
        assert_eq!(m.from_name, "Ada (@ada)");
        assert_eq!(m.text, "hello");
    }

    #[test]
    fn edits_posts_and_empty_messages_are_ignored_with_why() {
        let edit = json!({"update_id": 1, "edited_message": {"text": "x"}});
        assert_eq!(read(&edit, 7), Update::Ignored("edited"));
        assert_eq!(
            read(&json!({"update_id": 2, "poll": {}}), 7),
            Update::Ignored("not-a-message")
        );
        let photo =
            json!({"update_id": 3, "message": {"chat": {"id": 1, "type": "private"}, "photo": []}});
        assert_eq!(read(&photo, 7), Update::Ignored("no-text"));
        assert_eq!(
            read(&json!("not an object"), 7),
            Update::Ignored("not-a-message")
        );
    }

    #[test]
    fn replies_forwards_captions_and_mentions_are_told_apart() {
        let update = json!({"update_id": 11, "message": {"message_id": 9,
            "chat": {"id": -100, "type": "supergroup"}, "message_thread_id": 3,
            "from": {"id": 5, "first_name": "Bo"},
            "caption": "see 🙂 @Almanac_Bot now",
            "caption_entities": [{"type": "mention", "offset": 7, "length": 12}],
            "reply_to_message": {"from": {"id": 7, "first_name": "Bot"}, "text": "earlier answer"},
            "forward_origin": {"type": "user", "sender_user": {"id": 9, "first_name": "Cy"}}}});
        let m = message(&update);
        assert_eq!(m.chat, ChatKind::Group);
        assert_eq!(m.thread_id, Some(3));
        assert_eq!(m.mentions, ["@almanac_bot"]);
        assert!(m.replies_to_bot);
        assert_eq!(m.quoted, Some(("Bot".into(), "earlier answer".into())));
        assert_eq!(m.forwarded_from.as_deref(), Some("Cy"));
        assert!(mentions_bot(&m, "almanac_bot", &[]));
    }

    #[test]
    fn commands_are_ours_unless_addressed_to_another_bot() {
        assert_eq!(command("/new", "bot"), Some(Command::New));
        assert_eq!(command("/reset@Bot please", "bot"), Some(Command::Reset));
        assert_eq!(command("/status", "bot"), Some(Command::Status));
        assert_eq!(command("/help@other_bot", "bot"), None);
        assert_eq!(command("/subagents list", "bot"), Some(Command::Control));
        assert_eq!(command("/stop@other_bot", "bot"), None);
        assert_eq!(command("/weather", "bot"), None);
        assert_eq!(command("hi /new", "bot"), None);
    }

    #[test]
    fn a_group_message_is_for_the_bot_by_mention_reply_or_pattern() {
        let mut m = message(&dm("what about lunch"));
        assert!(!mentions_bot(&m, "almanac_bot", &[]));
        assert!(mentions_bot(&m, "almanac_bot", &["\\blunch\\b".into()]));
        assert!(
            !mentions_bot(&m, "almanac_bot", &["[".into()]),
            "a broken pattern matches nothing"
        );
        m.text = "hey @Almanac_bot".into();
        assert!(mentions_bot(&m, "almanac_bot", &[]));
    }
}
