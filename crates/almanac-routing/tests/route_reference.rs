//! The indexed router against a plain reading of the rules: for random
//! small configs and messages, `Router::route` chooses what a loop over
//! the tiers and the bindings in config order chooses.

use almanac_routing::{
    Binding, Inbound, Peer, PeerKind, Router, Tier, normalize_account_id, normalize_id,
};
use proptest::prelude::*;

const CHANNELS: &[&str] = &["telegram", " Telegram", "discord", ""];
const ACCOUNTS: &[Option<&str>] = &[
    None,
    Some(""),
    Some("*"),
    Some("default"),
    Some("Default"),
    Some("work"),
    Some("WORK"),
    Some("home"),
];
const IDS: &[&str] = &["1", "2", " 1", "-100", "-100:topic:7", "A", "a", " "];
const THREADS: &[Option<&str>] = &[None, Some("7"), Some("8"), Some(" ")];
const AGENTS: &[&str] = &["a", "B", "c d", " "];
const KINDS: &[PeerKind] = &[PeerKind::Direct, PeerKind::Group, PeerKind::Channel];

fn peer() -> impl Strategy<Value = Option<Peer>> {
    prop::option::of(
        (prop::sample::select(KINDS), prop::sample::select(IDS)).prop_map(|(kind, id)| Peer {
            kind,
            id: id.to_string(),
        }),
    )
}

fn binding() -> impl Strategy<Value = Binding> {
    (
        prop::sample::select(AGENTS),
        prop::sample::select(CHANNELS),
        prop::sample::select(ACCOUNTS),
        peer(),
    )
        .prop_map(|(agent, channel, account, peer)| Binding {
            agent_id: agent.to_string(),
            channel: channel.to_string(),
            account_id: account.map(str::to_string),
            peer,
        })
}

#[derive(Debug, Clone)]
struct Message {
    channel: &'static str,
    account: Option<&'static str>,
    peer: Option<Peer>,
    parent: Option<Peer>,
    thread: Option<&'static str>,
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop::sample::select(CHANNELS),
        prop::sample::select(ACCOUNTS),
        peer(),
        peer(),
        prop::sample::select(THREADS),
    )
        .prop_map(|(channel, account, peer, parent, thread)| Message {
            channel,
            account,
            peer,
            parent,
            thread,
        })
}

/// The rules read literally: each tier in turn, each binding in order.
fn reference(bindings: &[Binding], default: &str, m: &Message) -> (String, Tier, Option<usize>) {
    let channel = m.channel.trim().to_lowercase();
    let account = normalize_account_id(m.account.unwrap_or(""));
    let topic = match (&m.peer, m.thread.map(str::trim)) {
        (Some(p), Some(t)) if p.kind == PeerKind::Group && !t.is_empty() => Some(t),
        _ => None,
    };
    let own: Option<(PeerKind, String)> = m.peer.as_ref().map(|p| match topic {
        Some(t) => (PeerKind::Group, format!("{}:topic:{t}", p.id.trim())),
        None => (p.kind, p.id.trim().to_string()),
    });
    let parent = m
        .parent
        .as_ref()
        .or(topic.and(m.peer.as_ref()))
        .map(|p| (p.kind, p.id.trim().to_string()));
    let same_chat = |b: &Peer, chat: &Option<(PeerKind, String)>| {
        chat.as_ref().is_some_and(|(kind, id)| {
            let kinds =
                b.kind == *kind || (b.kind != PeerKind::Direct && *kind != PeerKind::Direct);
            kinds && b.id.trim() == id
        })
    };
    let pattern = |b: &Binding| b.account_id.as_deref().unwrap_or("").trim().to_string();
    let applies = |b: &Binding| {
        let usable =
            !b.channel.trim().is_empty() && b.peer.as_ref().is_none_or(|p| !p.id.trim().is_empty());
        let p = pattern(b);
        usable
            && b.channel.trim().to_lowercase() == channel
            && (p == "*" || normalize_account_id(&p) == account)
    };
    type Test<'t> = Box<dyn Fn(&Binding) -> bool + 't>;
    let tiers: [(Tier, Test); 4] = [
        (
            Tier::Peer,
            Box::new(|b| b.peer.as_ref().is_some_and(|p| same_chat(p, &own))),
        ),
        (
            Tier::ParentPeer,
            Box::new(|b| b.peer.as_ref().is_some_and(|p| same_chat(p, &parent))),
        ),
        (
            Tier::Account,
            Box::new(|b| b.peer.is_none() && pattern(b) != "*"),
        ),
        (
            Tier::Channel,
            Box::new(|b| b.peer.is_none() && pattern(b) == "*"),
        ),
    ];
    for (tier, test) in &tiers {
        for (i, b) in bindings.iter().enumerate() {
            if applies(b) && test(b) {
                let agent = if b.agent_id.trim().is_empty() {
                    default
                } else {
                    &b.agent_id
                };
                return (normalize_id(agent), *tier, Some(i));
            }
        }
    }
    (normalize_id(default), Tier::Default, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn router_matches_the_reference(
        bindings in prop::collection::vec(binding(), 0..12),
        messages in prop::collection::vec(message(), 1..8),
    ) {
        let router = Router::new(&bindings, "Main");
        for m in &messages {
            let inbound = Inbound {
                channel: m.channel,
                account_id: m.account,
                peer: m.peer.as_ref(),
                parent_peer: m.parent.as_ref(),
                thread_id: m.thread,
            };
            let got = router.route(&inbound);
            let got = (got.agent_id.to_string(), got.tier, got.binding);
            prop_assert_eq!(got, reference(&bindings, "Main", m), "{:?}", m);
        }
    }
}
