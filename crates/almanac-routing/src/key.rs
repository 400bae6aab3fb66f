//! Session keys for routed messages (OpenClaw's grammar), all lowercase:
//!
//! | message | key |
//! |---|---|
//! | direct, `main` scope, or no peer | `agent:<agent>:<mainKey>` |
//! | direct, `per-peer` | `agent:<agent>:direct:<peer>` |
//! | direct, `per-channel-peer` | `agent:<agent>:<channel>:direct:<peer>` |
//! | direct, `per-account-channel-peer` | `agent:<agent>:<channel>:<account>:direct:<peer>` |
//! | group / channel | `agent:<agent>:<channel>:group:<chat>` / `…:channel:<chat>` |
//! | forum topic (a group with a thread) | `<group key>:topic:<thread>` |
//! | other threads | `<key>:thread:<thread>` |
//!
//! In the per-peer scopes a linked identity's canonical name stands for
//! the peer id, so one person's chats on several channels share a session.

use std::collections::HashMap;

use crate::normalize::{lower, main_key, normalized, token};
use crate::{DEFAULT_ACCOUNT, Inbound, PeerKind};

/// How direct messages are split into sessions (`session.dmScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DmScope {
    /// Every direct message shares the agent's main session.
    #[default]
    Main,
    /// One session per person, across channels.
    PerPeer,
    /// One session per person and channel.
    PerChannelPeer,
    /// One session per person, channel and account.
    PerAccountChannelPeer,
}

impl DmScope {
    /// Reads `main`, `per-peer`, `per-channel-peer` or
    /// `per-account-channel-peer` (any case); anything else is `None`.
    pub fn parse(s: &str) -> Option<DmScope> {
        match &*token(s) {
            "main" => Some(DmScope::Main),
            "per-peer" => Some(DmScope::PerPeer),
            "per-channel-peer" => Some(DmScope::PerChannelPeer),
            "per-account-channel-peer" => Some(DmScope::PerAccountChannelPeer),
            _ => None,
        }
    }

    /// The scope as written in config.
    pub fn as_str(&self) -> &'static str {
        match self {
            DmScope::Main => "main",
            DmScope::PerPeer => "per-peer",
            DmScope::PerChannelPeer => "per-channel-peer",
            DmScope::PerAccountChannelPeer => "per-account-channel-peer",
        }
    }
}

/// One person's ids across channels (`session.identityLinks`): canonical
/// name → ids, each `"<channel>:<id>"` (that channel only) or a bare
/// `"<id>"` (any channel). Ids compare case-insensitively; when ids of
/// several names match, the name listed first wins.
#[derive(Debug, Clone, Default)]
pub struct IdentityLinks {
    names: Vec<Box<str>>,
    /// Lowercased id → index of its first name.
    by_id: HashMap<Box<str>, usize>,
}

impl IdentityLinks {
    /// Names with no text, and empty ids, are left out.
    pub fn new(links: impl IntoIterator<Item = (String, Vec<String>)>) -> IdentityLinks {
        let mut out = IdentityLinks::default();
        for (name, ids) in links {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let index = out.names.len();
            out.names.push(name.into());
            for id in &ids {
                let id = token(id);
                if !id.is_empty() {
                    out.by_id.entry(id.into_owned().into()).or_insert(index);
                }
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The canonical name linked to `peer_id` on `channel`, if any.
    pub fn canonical(&self, channel: &str, peer_id: &str) -> Option<&str> {
        let peer_id = peer_id.trim();
        if self.is_empty() || peer_id.is_empty() {
            return None;
        }
        let peer = lower(peer_id);
        let bare = self.by_id.get(&*peer).copied();
        let channel = token(channel);
        let scoped = if channel.is_empty() {
            None
        } else {
            self.by_id
                .get(format!("{channel}:{peer}").as_str())
                .copied()
        };
        let index = match (bare, scoped) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(&self.names[index])
    }
}

/// What shapes a session key besides the message: the config's
/// `session.dmScope`, `session.mainKey` and `session.identityLinks`.
#[derive(Debug, Clone, Copy)]
pub struct KeyOptions<'a> {
    pub dm_scope: DmScope,
    /// Empty is `main`.
    pub main_key: &'a str,
    pub identity_links: &'a IdentityLinks,
}

/// The session key of `msg` for `agent_id` (see the module table).
///
/// A message without a peer is a direct message with no one to tell apart:
/// the main session. A peer with an empty id is `unknown`; so is an empty
/// channel.
pub fn session_key(agent_id: &str, msg: &Inbound<'_>, opts: &KeyOptions<'_>) -> String {
    let agent = normalized(agent_id, "main");
    let channel = token(msg.channel);
    let channel = if channel.is_empty() {
        "unknown"
    } else {
        &channel
    };
    let peer_id = match msg.peer {
        None => "",
        Some(peer) if peer.id.trim().is_empty() => "unknown",
        Some(peer) => peer.id.trim(),
    };
    let kind = msg.peer.map_or(PeerKind::Direct, |p| p.kind);
    let mut key = String::with_capacity(48 + channel.len() + peer_id.len());
    key.push_str("agent:");
    key.push_str(&agent);
    key.push(':');
    match kind {
        PeerKind::Direct => {
            let linked = match opts.dm_scope {
                DmScope::Main => None,
                _ => opts.identity_links.canonical(channel, peer_id),
            };
            let peer = lower(linked.unwrap_or(peer_id));
            match opts.dm_scope {
                _ if peer.is_empty() => key.push_str(&main_key(opts.main_key)),
                DmScope::Main => key.push_str(&main_key(opts.main_key)),
                DmScope::PerPeer => push_all(&mut key, &["direct:", &peer]),
                DmScope::PerChannelPeer => push_all(&mut key, &[channel, ":direct:", &peer]),
                DmScope::PerAccountChannelPeer => {
                    let account = normalized(msg.account_id.unwrap_or(""), DEFAULT_ACCOUNT);
                    push_all(&mut key, &[channel, ":", &account, ":direct:", &peer]);
                }
            }
        }
        PeerKind::Group | PeerKind::Channel => {
            push_all(
                &mut key,
                &[channel, ":", kind.as_str(), ":", &lower(peer_id)],
            );
        }
    }
    if let Some(thread) = msg.thread_id.map(str::trim).filter(|t| !t.is_empty()) {
        let mark = if kind == PeerKind::Group {
            ":topic:"
        } else {
            ":thread:"
        };
        push_all(&mut key, &[mark, &lower(thread)]);
    }
    key
}

fn push_all(key: &mut String, parts: &[&str]) {
    for part in parts {
        key.push_str(part);
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
