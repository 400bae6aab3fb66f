//! The pure rules of multi-agent routing, with OpenClaw's semantics: which
//! agent an inbound chat message goes to, and the session it lands in.
//!
//! * [`Router`] holds the configured [`Binding`]s and the default agent,
//!   and gives each [`Inbound`] message its agent, the [`Tier`] that chose
//!   it and the binding's index in config order. Tiers, most specific
//!   first: the chat itself (`binding.peer`), the chat's parent — a forum
//!   topic's group, a thread's channel (`binding.peer.parent`), the
//!   account (`binding.account`), any account of the channel
//!   (`accountId: "*"`, `binding.channel`), then the default agent. Within
//!   a tier the first binding in config order wins.
//! * [`session_key`] builds the session key for the routed agent: a direct
//!   message's by [`DmScope`] (with [`IdentityLinks`] joining one person's
//!   ids across channels), a group's or channel's by chat, with the thread
//!   or forum topic appended.
//! * [`normalize_id`] and [`normalize_account_id`] are the id rules both
//!   share.
//!
//! Invariants:
//! * Channels, account ids and agent ids compare case-insensitively (they
//!   are normalised once when the router is built and once per message);
//!   peer ids compare exactly after trimming (chat ids are opaque strings).
//! * A binding without `accountId` matches only the default account
//!   ([`DEFAULT_ACCOUNT`]); `"*"` matches every account.
//! * Group and channel peers match each other's bindings (a channel may
//!   report a chat as either); a direct peer matches only direct bindings.
//! * A binding that can never match (no channel, a peer with an empty id)
//!   is ignored; nothing here fails or panics on user input.
//! * Routing a message costs a handful of hash lookups, whatever the
//!   number of bindings: the tables are built once in [`Router::new`].
//! * Whether the chosen agent exists is the caller's question: the router
//!   returns the binding's agent id as configured (normalised).
//!
//! Nothing in this crate touches the file system, the clock or the
//! environment.

mod key;
mod normalize;
mod route;

pub use key::{DmScope, IdentityLinks, KeyOptions, session_key};
pub use normalize::{normalize_account_id, normalize_id};
pub use route::{Routed, Router, Tier};

/// The account a message is on when its channel names none.
pub const DEFAULT_ACCOUNT: &str = "default";

/// The kind of chat a message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerKind {
    /// A one-to-one chat with a person.
    Direct,
    /// A group chat (a Telegram group or supergroup, a WhatsApp group).
    Group,
    /// A channel (a Discord or Slack channel, a Telegram channel).
    Channel,
}

impl PeerKind {
    /// Reads `direct`, `group` or `channel` (any case; `dm` is read as
    /// `direct`); anything else is `None`.
    pub fn parse(s: &str) -> Option<PeerKind> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("direct") || s.eq_ignore_ascii_case("dm") {
            Some(PeerKind::Direct)
        } else if s.eq_ignore_ascii_case("group") {
            Some(PeerKind::Group)
        } else if s.eq_ignore_ascii_case("channel") {
            Some(PeerKind::Channel)
        } else {
            None
        }
    }

    /// The kind as written in config and session keys.
    pub fn as_str(&self) -> &'static str {
        match self {
            PeerKind::Direct => "direct",
            PeerKind::Group => "group",
            PeerKind::Channel => "channel",
        }
    }
}

/// A chat: its kind and the id the channel gives it (a Telegram chat id, a
/// Discord channel id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    pub kind: PeerKind,
    pub id: String,
}

/// One binding: `{agentId, match: {channel, accountId?, peer?}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub agent_id: String,
    pub channel: String,
    /// `None` or empty: the default account only; `"*"`: every account.
    pub account_id: Option<String>,
    pub peer: Option<Peer>,
}

/// Where a message came from.
///
/// For a Telegram forum topic, `peer` is the group and `thread_id` the
/// topic: routing then looks for a binding on the topic first (OpenClaw
/// names it `<chatId>:topic:<threadId>`), then on the group as the parent
/// peer. For a thread that is a chat of its own (a Discord thread),
/// `peer` is the thread and `parent_peer` the channel it hangs off. For a
/// reply thread inside a chat (a Slack thread), `peer` is the chat and
/// `thread_id` the thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inbound<'a> {
    pub channel: &'a str,
    /// `None` (or empty): the default account.
    pub account_id: Option<&'a str>,
    /// `None`: no chat is known; keyed as a direct message without a peer.
    pub peer: Option<&'a Peer>,
    pub parent_peer: Option<&'a Peer>,
    pub thread_id: Option<&'a str>,
}

impl Inbound<'_> {
    /// The topic a group message is in, if any: the thread id of a message
    /// whose peer is a group.
    fn group_topic(&self) -> Option<&str> {
        let peer = self.peer?;
        let thread = self.thread_id?.trim();
        (peer.kind == PeerKind::Group && !thread.is_empty()).then_some(thread)
    }
}
