//! Choosing the agent for a message: bindings indexed once, a few hash
//! lookups per message.

use std::collections::HashMap;

use crate::normalize::{normalized, token};
use crate::{Binding, DEFAULT_ACCOUNT, Inbound, PeerKind};

/// Which rule chose the agent, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// A binding on the chat itself.
    Peer,
    /// A binding on the chat's parent: a forum topic's group, a thread's
    /// channel.
    ParentPeer,
    /// A binding on the message's account (without `accountId`: the
    /// default account).
    Account,
    /// A binding on every account of the channel (`accountId: "*"`).
    Channel,
    /// No binding matched: the default agent.
    Default,
}

impl Tier {
    /// OpenClaw's name for the tier (its `matchedBy`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Tier::Peer => "binding.peer",
            Tier::ParentPeer => "binding.peer.parent",
            Tier::Account => "binding.account",
            Tier::Channel => "binding.channel",
            Tier::Default => "default",
        }
    }
}

/// The agent a message goes to, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed<'r> {
    /// Normalised (see [`crate::normalize_id`]).
    pub agent_id: &'r str,
    pub tier: Tier,
    /// The chosen binding's index in config order; `None` for the default.
    pub binding: Option<usize>,
}

/// The bindings of one configuration, indexed for routing.
#[derive(Debug, Clone)]
pub struct Router {
    channels: HashMap<Box<str>, ChannelTable>,
    /// Each binding's agent, normalised, by config index.
    agents: Vec<Box<str>>,
    default_agent: Box<str>,
    /// Whether any group binding names a forum topic (`<chat>:topic:<id>`);
    /// without one, a topic's id is never built.
    topic_bindings: bool,
}

#[derive(Debug, Clone, Default)]
struct ChannelTable {
    /// Each account some binding names, with the channel's `"*"` bindings
    /// merged in.
    accounts: HashMap<Box<str>, Tiers>,
    /// Any other account: the `"*"` bindings alone.
    other: Tiers,
}

/// The first binding (config index) of each tier for one channel and
/// account.
#[derive(Debug, Clone, Default)]
struct Tiers {
    direct: HashMap<Box<str>, usize>,
    /// Groups and channels share one table: either kind matches the other.
    group: HashMap<Box<str>, usize>,
    account: Option<usize>,
    channel: Option<usize>,
}

impl Tiers {
    fn peer(&self, kind: PeerKind, id: &str) -> Option<usize> {
        match kind {
            PeerKind::Direct => self.direct.get(id).copied(),
            PeerKind::Group | PeerKind::Channel => self.group.get(id).copied(),
        }
    }

    fn add(&mut self, index: usize, rule: &Rule) {
        let first = |slot: &mut Option<usize>| {
            slot.get_or_insert(index);
        };
        match &rule.peer {
            Some((PeerKind::Direct, id)) => {
                self.direct.entry(id.as_str().into()).or_insert(index);
            }
            Some((_, id)) => {
                self.group.entry(id.as_str().into()).or_insert(index);
            }
            None if rule.account.is_none() => first(&mut self.channel),
            None => first(&mut self.account),
        }
    }
}

/// A binding normalised: channel, account (`None` for `"*"`) and peer.
struct Rule {
    channel: String,
    account: Option<String>,
    peer: Option<(PeerKind, String)>,
}

impl Rule {
    /// `None` for a binding that can never match.
    fn of(binding: &Binding) -> Option<Rule> {
        let channel = token(&binding.channel).into_owned();
        let peer = match &binding.peer {
            Some(p) if p.id.trim().is_empty() => return None,
            Some(p) => Some((p.kind, p.id.trim().to_string())),
            None => None,
        };
        let pattern = binding.account_id.as_deref().unwrap_or("").trim();
        let account = (pattern != "*").then(|| normalized(pattern, DEFAULT_ACCOUNT).into_owned());
        (!channel.is_empty()).then_some(Rule {
            channel,
            account,
            peer,
        })
    }
}

impl Router {
    /// Indexes `bindings` (kept in their order: the index a [`Routed`]
    /// names is the position in this slice). Bindings that can never match
    /// are skipped; an empty agent id means the default agent.
    pub fn new(bindings: &[Binding], default_agent: &str) -> Router {
        let default_agent: Box<str> = normalized(default_agent, "main").into();
        let agents = bindings
            .iter()
            .map(|b| {
                if b.agent_id.trim().is_empty() {
                    default_agent.clone()
                } else {
                    normalized(&b.agent_id, "main").into()
                }
            })
            .collect();
        let rules: Vec<(usize, Rule)> = bindings
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Rule::of(b).map(|r| (i, r)))
            .collect();
        // Every named account first, so that a `"*"` binding reaches each
        // of them whatever its place in the list.
        let mut channels: HashMap<Box<str>, ChannelTable> = HashMap::new();
        for (_, rule) in &rules {
            let table = channels.entry(rule.channel.as_str().into()).or_default();
            if let Some(account) = &rule.account {
                table.accounts.entry(account.as_str().into()).or_default();
            }
        }
        let mut topic_bindings = false;
        for (index, rule) in &rules {
            let table = channels
                .get_mut(rule.channel.as_str())
                .expect("added above");
            match &rule.account {
                Some(account) => table
                    .accounts
                    .get_mut(account.as_str())
                    .expect("added above")
                    .add(*index, rule),
                None => {
                    table.other.add(*index, rule);
                    for tiers in table.accounts.values_mut() {
                        tiers.add(*index, rule);
                    }
                }
            }
            topic_bindings |= matches!(&rule.peer,
                Some((kind, id)) if *kind != PeerKind::Direct && id.contains(":topic:"));
        }
        Router {
            channels,
            agents,
            default_agent,
            topic_bindings,
        }
    }

    /// The agent for `msg`: the first matching binding of the most
    /// specific tier, else the default agent.
    pub fn route(&self, msg: &Inbound<'_>) -> Routed<'_> {
        self.find(msg).map_or(
            Routed {
                agent_id: &self.default_agent,
                tier: Tier::Default,
                binding: None,
            },
            |(tier, index)| Routed {
                agent_id: &self.agents[index],
                tier,
                binding: Some(index),
            },
        )
    }

    fn find(&self, msg: &Inbound<'_>) -> Option<(Tier, usize)> {
        let table = self.channels.get(&*token(msg.channel))?;
        let account = normalized(msg.account_id.unwrap_or(""), DEFAULT_ACCOUNT);
        let tiers = table.accounts.get(&*account).unwrap_or(&table.other);
        let topic = msg.group_topic();
        if let Some(peer) = msg.peer {
            let hit = match topic {
                Some(topic) if self.topic_bindings => {
                    let id = format!("{}:topic:{topic}", peer.id.trim());
                    tiers.peer(PeerKind::Group, &id)
                }
                // A topic's own binding can only name the topic.
                Some(_) => None,
                None => tiers.peer(peer.kind, peer.id.trim()),
            };
            if let Some(index) = hit {
                return Some((Tier::Peer, index));
            }
        }
        // A forum topic's parent is its group.
        let parent = msg.parent_peer.or(topic.and(msg.peer));
        if let Some(parent) = parent
            && let Some(index) = tiers.peer(parent.kind, parent.id.trim())
        {
            return Some((Tier::ParentPeer, index));
        }
        if let Some(index) = tiers.account {
            return Some((Tier::Account, index));
        }
        tiers.channel.map(|index| (Tier::Channel, index))
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
