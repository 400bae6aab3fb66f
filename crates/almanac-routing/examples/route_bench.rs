//! Routing and session-key cost per message: 50 agents, 500 bindings (DMs
//! and groups bound to agents, forum topics, thread parents, accounts, a
//! few `"*"` channel bindings), 200,000 messages that reach every tier.
//! Prints the median of 5 rounds.
//!
//!   cargo run --release -q -p almanac-routing --example route_bench

use std::hint::black_box;
use std::time::Instant;

use almanac_routing::{
    Binding, DmScope, IdentityLinks, Inbound, KeyOptions, Peer, PeerKind, Router, Tier, session_key,
};

const AGENTS: usize = 50;
const MESSAGES: usize = 200_000;
const ROUNDS: usize = 5;

/// SplitMix64: a fixed, dependency-free stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn peer(kind: PeerKind, id: String) -> Option<Peer> {
    Some(Peer { kind, id })
}

/// The ids the bindings name, so that messages can hit them.
struct World {
    bindings: Vec<Binding>,
    dms: Vec<(String, Option<String>)>,
    groups: Vec<String>,
    topics: Vec<(String, u32)>,
    parents: Vec<String>,
    accounts: Vec<String>,
}

fn world(rng: &mut Rng) -> World {
    let mut w = World {
        bindings: Vec::new(),
        dms: Vec::new(),
        groups: Vec::new(),
        topics: Vec::new(),
        parents: Vec::new(),
        accounts: (0..20).map(|i| format!("bot-{i}")).collect(),
    };
    let mut bind = |agent: usize, channel: &str, account: Option<&str>, peer: Option<Peer>| {
        w.bindings.push(Binding {
            agent_id: format!("Agent-{}", agent % AGENTS),
            channel: channel.to_string(),
            account_id: account.map(str::to_string),
            peer,
        });
    };
    // 300 people's DMs, on the default account, a named one or any.
    for _ in 0..300 {
        let id = (100_000_000 + rng.next() % 900_000_000).to_string();
        let account = match rng.below(4) {
            0 => Some(w.accounts[rng.below(w.accounts.len())].clone()),
            1 => Some("*".to_string()),
            _ => None,
        };
        bind(
            rng.below(AGENTS),
            "telegram",
            account.as_deref(),
            peer(PeerKind::Direct, id.clone()),
        );
        w.dms.push((id, account.filter(|a| a != "*")));
    }
    // 100 groups, 30 forum topics of some of them, 40 Discord channels
    // whose threads inherit their binding.
    for _ in 0..100 {
        let id = format!("-100{}", 1_000_000_000 + rng.next() % 9_000_000_000);
        bind(
            rng.below(AGENTS),
            "telegram",
            Some("*"),
            peer(PeerKind::Group, id.clone()),
        );
        w.groups.push(id);
    }
    for _ in 0..30 {
        let group = w.groups[rng.below(w.groups.len())].clone();
        let topic = 2 + rng.below(500) as u32;
        let id = format!("{group}:topic:{topic}");
        bind(
            rng.below(AGENTS),
            "telegram",
            Some("*"),
            peer(PeerKind::Group, id),
        );
        w.topics.push((group, topic));
    }
    for _ in 0..40 {
        let id = (900_000_000_000_000_000 + rng.next() % 99_999_999_999_999_999).to_string();
        bind(
            rng.below(AGENTS),
            "discord",
            None,
            peer(PeerKind::Channel, id.clone()),
        );
        w.parents.push(id);
    }
    // One agent per bot account, the default account's catch-all, and
    // channels taken whole.
    for i in 0..20 {
        let account = w.accounts[i].clone();
        bind(i, "telegram", Some(&account), None);
    }
    bind(0, "Telegram", None, None);
    for (agent, channel) in [(1, "slack"), (2, "whatsapp"), (3, "signal"), (4, "discord")] {
        bind(agent, channel, Some("*"), None);
    }
    // Later duplicates of earlier bindings: they never win.
    while w.bindings.len() < 500 {
        let copy = w.bindings[rng.below(w.bindings.len())].clone();
        w.bindings.push(copy);
    }
    w
}

struct Message {
    channel: &'static str,
    account: Option<String>,
    peer: Option<Peer>,
    parent: Option<Peer>,
    thread: Option<String>,
}

fn message(w: &World, rng: &mut Rng) -> Message {
    let mut m = Message {
        channel: "telegram",
        account: None,
        peer: None,
        parent: None,
        thread: None,
    };
    match rng.below(20) {
        // A bound person (peer).
        0..=5 => {
            let (id, account) = &w.dms[rng.below(w.dms.len())];
            m.account = account.clone();
            m.peer = peer(PeerKind::Direct, id.clone());
        }
        // A bound group, a bound topic, another topic of a bound group.
        6..=8 => m.peer = peer(PeerKind::Group, w.groups[rng.below(w.groups.len())].clone()),
        9 => {
            let (group, topic) = &w.topics[rng.below(w.topics.len())];
            m.peer = peer(PeerKind::Group, group.clone());
            m.thread = Some(topic.to_string());
        }
        10 => {
            m.peer = peer(PeerKind::Group, w.groups[rng.below(w.groups.len())].clone());
            m.thread = Some("1".to_string());
        }
        // A thread under a bound Discord channel (parent peer).
        11..=12 => {
            m.channel = "discord";
            m.peer = peer(PeerKind::Channel, stranger(rng));
            m.parent = peer(
                PeerKind::Channel,
                w.parents[rng.below(w.parents.len())].clone(),
            );
        }
        // A stranger writing to a bot account (account).
        13..=15 => {
            m.account = Some(w.accounts[rng.below(w.accounts.len())].to_uppercase());
            m.peer = peer(PeerKind::Direct, stranger(rng));
        }
        // A channel taken whole (channel).
        16..=17 => {
            m.channel = ["slack", "whatsapp", "signal"][rng.below(3)];
            m.peer = peer(PeerKind::Direct, stranger(rng));
        }
        // A channel nobody bound (default).
        _ => {
            m.channel = "matrix";
            m.peer = peer(PeerKind::Direct, stranger(rng));
        }
    }
    m
}

/// A sender no binding names.
fn stranger(rng: &mut Rng) -> String {
    (500_000_000 + rng.next() % 400_000_000).to_string()
}

fn inbound(m: &Message) -> Inbound<'_> {
    Inbound {
        channel: m.channel,
        account_id: m.account.as_deref(),
        peer: m.peer.as_ref(),
        parent_peer: m.parent.as_ref(),
        thread_id: m.thread.as_deref(),
    }
}

/// Median nanoseconds per message of `ROUNDS` runs of `run`.
fn median_ns(mut run: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_nanos() as f64 / MESSAGES as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() {
    let mut rng = Rng(0x5eed_0a1b_a5e5_0001);
    let w = world(&mut rng);
    let messages: Vec<Message> = (0..MESSAGES).map(|_| message(&w, &mut rng)).collect();
    let router = Router::new(&w.bindings, "main");

    let mut tiers = [0usize; 5];
    let agents: Vec<&str> = messages
        .iter()
        .map(|m| {
            let r = router.route(&inbound(m));
            tiers[r.tier as usize] += 1;
            r.agent_id
        })
        .collect();
    let routing = median_ns(|| {
        for m in &messages {
            black_box(router.route(black_box(&inbound(m))));
        }
    });

    let links = IdentityLinks::new(w.dms.iter().take(40).enumerate().map(|(i, (id, _))| {
        (
            format!("person-{i}"),
            vec![format!("telegram:{id}"), format!("discord:{i}")],
        )
    }));
    let opts = KeyOptions {
        dm_scope: DmScope::PerChannelPeer,
        main_key: "main",
        identity_links: &links,
    };
    let keys = median_ns(|| {
        for (m, agent) in messages.iter().zip(&agents) {
            black_box(session_key(agent, black_box(&inbound(m)), &opts));
        }
    });

    let names = [
        Tier::Peer,
        Tier::ParentPeer,
        Tier::Account,
        Tier::Channel,
        Tier::Default,
    ];
    let mix: Vec<String> = names
        .iter()
        .zip(tiers)
        .map(|(t, n)| format!("{} {n}", t.as_str()))
        .collect();
    println!("messages: {MESSAGES} ({})", mix.join(", "));
    println!(
        "routing: {routing:.0} ns per message ({AGENTS} agents, {} bindings)",
        w.bindings.len()
    );
    println!("session key: {keys:.0} ns per message");
}
