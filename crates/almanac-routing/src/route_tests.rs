use super::*;
use crate::Peer;

/// `peer` is `""` (none) or `"<kind>:<id>"`.
fn peer(spec: &str) -> Option<Peer> {
    let (kind, id) = spec.split_once(':')?;
    Some(Peer {
        kind: PeerKind::parse(kind).expect("kind"),
        id: id.to_string(),
    })
}

/// `account` is `""` for none.
fn bind(agent: &str, channel: &str, account: &str, peer_spec: &str) -> Binding {
    Binding {
        agent_id: agent.to_string(),
        channel: channel.to_string(),
        account_id: (!account.is_empty()).then(|| account.to_string()),
        peer: peer(peer_spec),
    }
}

/// A message: channel, account (`""`: none), peer, parent peer, thread.
struct Msg(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

fn route_of(router: &Router, m: &Msg) -> (String, Tier, Option<usize>) {
    let (p, parent) = (peer(m.2), peer(m.3));
    let inbound = Inbound {
        channel: m.0,
        account_id: (!m.1.is_empty()).then_some(m.1),
        peer: p.as_ref(),
        parent_peer: parent.as_ref(),
        thread_id: (!m.4.is_empty()).then_some(m.4),
    };
    let r = router.route(&inbound);
    (r.agent_id.to_string(), r.tier, r.binding)
}

#[test]
fn every_tier_in_order_and_first_binding_wins_within_a_tier() {
    use Tier::*;
    let tg = "telegram";
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<Binding>, Msg, &str, Tier, Option<usize>)> = vec![
        ("peer beats parent peer",
         vec![bind("parent", "discord", "", "channel:C1"), bind("thread", "discord", "", "channel:T9")],
         Msg("discord", "", "channel:T9", "channel:C1", ""), "thread", Peer, Some(1)),
        ("parent peer beats account",
         vec![bind("acct", "discord", "", ""), bind("parent", "discord", "", "channel:C1")],
         Msg("discord", "", "channel:T9", "channel:C1", ""), "parent", ParentPeer, Some(1)),
        ("account beats channel",
         vec![bind("any", tg, "*", ""), bind("work", tg, "work", "")],
         Msg(tg, "work", "direct:1", "", ""), "work", Account, Some(1)),
        ("channel beats default",
         vec![bind("any", tg, "*", "")],
         Msg(tg, "other", "direct:1", "", ""), "any", Channel, Some(0)),
        ("default when nothing matches",
         vec![bind("any", tg, "*", ""), bind("dm", "discord", "*", "direct:1")],
         Msg("whatsapp", "", "direct:1", "", ""), "main", Default, None),
        ("peer tie: first in config order",
         vec![bind("a", tg, "", "direct:111"), bind("b", tg, "", "direct:111")],
         Msg(tg, "", "direct:111", "", ""), "a", Peer, Some(0)),
        ("peer tie across account-scoped and any-account bindings",
         vec![bind("star", tg, "*", "direct:111"), bind("work", tg, "work", "direct:111")],
         Msg(tg, "work", "direct:111", "", ""), "star", Peer, Some(0)),
        ("parent tie: first in config order",
         vec![bind("a", "discord", "", "channel:C1"), bind("b", "discord", "", "channel:C1")],
         Msg("discord", "", "channel:T9", "channel:C1", ""), "a", ParentPeer, Some(0)),
        ("account tie: first in config order",
         vec![bind("a", tg, "work", ""), bind("b", tg, "WORK", "")],
         Msg(tg, "work", "", "", ""), "a", Account, Some(0)),
        ("channel tie: first in config order",
         vec![bind("a", tg, "*", ""), bind("b", tg, "*", "")],
         Msg(tg, "", "", "", ""), "a", Channel, Some(0)),
        ("no accountId: the default account when none is named",
         vec![bind("a", tg, "", "")],
         Msg(tg, "", "direct:1", "", ""), "a", Account, Some(0)),
        ("no accountId: the default account named",
         vec![bind("a", tg, "", "")],
         Msg(tg, "Default", "direct:1", "", ""), "a", Account, Some(0)),
        ("no accountId: not another account",
         vec![bind("a", tg, "", "")],
         Msg(tg, "work", "direct:1", "", ""), "main", Default, None),
        ("no accountId is the account tier, ahead of an earlier *",
         vec![bind("any", tg, "*", ""), bind("a", tg, "", "")],
         Msg(tg, "", "direct:1", "", ""), "a", Account, Some(1)),
        ("* on any account",
         vec![bind("any", tg, "*", "")],
         Msg(tg, "work", "", "", ""), "any", Channel, Some(0)),
        ("* on the default account",
         vec![bind("work", tg, "work", ""), bind("any", tg, "*", "")],
         Msg(tg, "", "", "", ""), "any", Channel, Some(1)),
        ("case-insensitive channel, account and agent",
         vec![bind("Ops Bot", " Telegram ", "Work", "")],
         Msg("TELEGRAM", "WORK", "", "", ""), "ops-bot", Account, Some(0)),
        ("peer binding on another account does not match",
         vec![bind("a", tg, "work", "direct:111")],
         Msg(tg, "home", "direct:111", "", ""), "main", Default, None),
        ("peer binding on another account: not the default either",
         vec![bind("a", tg, "work", "direct:111")],
         Msg(tg, "", "direct:111", "", ""), "main", Default, None),
        ("peer binding on its account",
         vec![bind("a", tg, "work", "direct:111")],
         Msg(tg, "work", "direct:111", "", ""), "a", Peer, Some(0)),
        ("peer binding with * on any account",
         vec![bind("a", tg, "*", "group:-100")],
         Msg(tg, "work", "group:-100", "", ""), "a", Peer, Some(0)),
        ("group and channel kinds match each other",
         vec![bind("a", tg, "", "group:-100")],
         Msg(tg, "", "channel:-100", "", ""), "a", Peer, Some(0)),
        ("a direct peer does not match a group binding",
         vec![bind("a", tg, "", "group:-100")],
         Msg(tg, "", "direct:-100", "", ""), "main", Default, None),
        ("peer ids are trimmed",
         vec![bind("a", tg, "", "direct: AbC ")],
         Msg(tg, "", "direct:AbC", "", ""), "a", Peer, Some(0)),
        ("peer ids are case-sensitive",
         vec![bind("a", tg, "", "direct:AbC")],
         Msg(tg, "", "direct:abc", "", ""), "main", Default, None),
        ("a forum topic's own binding",
         vec![bind("group", tg, "", "group:-100"), bind("topic", tg, "", "group:-100:topic:7")],
         Msg(tg, "", "group:-100", "", "7"), "topic", Peer, Some(1)),
        ("another topic of the group goes to the group as parent",
         vec![bind("group", tg, "", "group:-100"), bind("topic", tg, "", "group:-100:topic:7")],
         Msg(tg, "", "group:-100", "", "8"), "group", ParentPeer, Some(0)),
        ("a topic without topic bindings goes to the group as parent",
         vec![bind("group", tg, "", "group:-100")],
         Msg(tg, "", "group:-100", "", "8"), "group", ParentPeer, Some(0)),
        ("the group itself, outside topics",
         vec![bind("group", tg, "", "group:-100"), bind("topic", tg, "", "group:-100:topic:7")],
         Msg(tg, "", "group:-100", "", ""), "group", Peer, Some(0)),
        ("a thread in a channel routes by the channel",
         vec![bind("chan", "slack", "", "channel:C1")],
         Msg("slack", "", "channel:C1", "", "1712.5"), "chan", Peer, Some(0)),
        ("a binding with an empty peer id never matches",
         vec![bind("broken", tg, "", "direct:  ")],
         Msg(tg, "", "direct:1", "", ""), "main", Default, None),
        ("a binding without a channel never matches",
         vec![bind("broken", " ", "*", ""), bind("ok", tg, "*", "")],
         Msg(tg, "", "", "", ""), "ok", Channel, Some(1)),
        ("a binding without an agent goes to the default agent",
         vec![bind(" ", tg, "*", "")],
         Msg(tg, "", "", "", ""), "main", Channel, Some(0)),
    ];
    for (name, bindings, msg, agent, tier, index) in cases {
        let router = Router::new(&bindings, "Main");
        assert_eq!(
            route_of(&router, &msg),
            (agent.to_string(), tier, index),
            "{name}"
        );
    }
}

#[test]
fn the_default_agent_is_normalised() {
    let router = Router::new(&[], " Home Agent ");
    let r = router.route(&Inbound {
        channel: "telegram",
        ..Inbound::default()
    });
    assert_eq!(
        (r.agent_id, r.tier, r.binding),
        ("home-agent", Tier::Default, None)
    );
    assert_eq!(
        Router::new(&[], "").route(&Inbound::default()).agent_id,
        "main"
    );
}

#[test]
fn tier_names_are_openclaws() {
    let names: Vec<_> = [
        Tier::Peer,
        Tier::ParentPeer,
        Tier::Account,
        Tier::Channel,
        Tier::Default,
    ]
    .iter()
    .map(Tier::as_str)
    .collect();
    assert_eq!(
        names,
        [
            "binding.peer",
            "binding.peer.parent",
            "binding.account",
            "binding.channel",
            "default"
        ]
    );
}

#[test]
fn peer_kinds_parse_with_dm_as_direct() {
    for (s, want) in [
        ("direct", Some(PeerKind::Direct)),
        ("DM", Some(PeerKind::Direct)),
        (" group ", Some(PeerKind::Group)),
        ("Channel", Some(PeerKind::Channel)),
        ("room", None),
        ("", None),
    ] {
        assert_eq!(PeerKind::parse(s), want, "{s:?}");
    }
    assert_eq!(PeerKind::Direct.as_str(), "direct");
}
