use super::*;
use crate::Peer;

fn direct(id: &str) -> Peer {
    Peer {
        kind: PeerKind::Direct,
        id: id.to_string(),
    }
}

fn key(
    scope: DmScope,
    links: &IdentityLinks,
    channel: &str,
    account: Option<&str>,
    peer: Option<&Peer>,
    thread: Option<&str>,
) -> String {
    let msg = Inbound {
        channel,
        account_id: account,
        peer,
        parent_peer: None,
        thread_id: thread,
    };
    let opts = KeyOptions {
        dm_scope: scope,
        main_key: "main",
        identity_links: links,
    };
    session_key("Ops", &msg, &opts)
}

#[test]
fn direct_messages_follow_the_dm_scope() {
    let none = IdentityLinks::default();
    let alice = direct("111");
    let tg = "telegram";
    for (scope, account, want) in [
        (DmScope::Main, None, "agent:ops:main"),
        (DmScope::PerPeer, None, "agent:ops:direct:111"),
        (
            DmScope::PerChannelPeer,
            None,
            "agent:ops:telegram:direct:111",
        ),
        (
            DmScope::PerAccountChannelPeer,
            None,
            "agent:ops:telegram:default:direct:111",
        ),
        (
            DmScope::PerAccountChannelPeer,
            Some("Work Bot"),
            "agent:ops:telegram:work-bot:direct:111",
        ),
    ] {
        assert_eq!(key(scope, &none, tg, account, Some(&alice), None), want);
    }
}

#[test]
fn the_main_key_is_configurable_and_a_message_without_peer_uses_it() {
    let none = IdentityLinks::default();
    let msg = Inbound {
        channel: "telegram",
        ..Inbound::default()
    };
    for scope in [
        DmScope::Main,
        DmScope::PerPeer,
        DmScope::PerChannelPeer,
        DmScope::PerAccountChannelPeer,
    ] {
        let opts = KeyOptions {
            dm_scope: scope,
            main_key: " Home ",
            identity_links: &none,
        };
        assert_eq!(
            session_key("ops", &msg, &opts),
            "agent:ops:home",
            "{scope:?}"
        );
    }
    let opts = KeyOptions {
        dm_scope: DmScope::Main,
        main_key: "",
        identity_links: &none,
    };
    assert_eq!(session_key("", &msg, &opts), "agent:main:main");
}

#[test]
fn groups_channels_topics_and_threads_ignore_the_dm_scope() {
    let none = IdentityLinks::default();
    let group = Peer {
        kind: PeerKind::Group,
        id: "-100123".into(),
    };
    let room = Peer {
        kind: PeerKind::Channel,
        id: "C0AB".into(),
    };
    for scope in [DmScope::Main, DmScope::PerAccountChannelPeer] {
        let k =
            |channel, peer, thread| key(scope, &none, channel, Some("work"), Some(peer), thread);
        assert_eq!(
            k("telegram", &group, None),
            "agent:ops:telegram:group:-100123"
        );
        assert_eq!(
            k("Telegram", &group, Some(" 42 ")),
            "agent:ops:telegram:group:-100123:topic:42"
        );
        assert_eq!(k("slack", &room, None), "agent:ops:slack:channel:c0ab");
        assert_eq!(
            k("slack", &room, Some("1712.5A")),
            "agent:ops:slack:channel:c0ab:thread:1712.5a"
        );
    }
}

#[test]
fn a_thread_in_a_direct_chat_extends_its_key() {
    let none = IdentityLinks::default();
    let alice = direct("111");
    assert_eq!(
        key(
            DmScope::Main,
            &none,
            "telegram",
            None,
            Some(&alice),
            Some("9")
        ),
        "agent:ops:main:thread:9"
    );
    assert_eq!(
        key(
            DmScope::PerPeer,
            &none,
            "telegram",
            None,
            Some(&alice),
            Some("9")
        ),
        "agent:ops:direct:111:thread:9"
    );
}

#[test]
fn keys_are_lowercase_and_empty_parts_are_unknown() {
    let none = IdentityLinks::default();
    let odd = direct(" AbC ");
    assert_eq!(
        key(
            DmScope::PerChannelPeer,
            &none,
            " Telegram ",
            None,
            Some(&odd),
            None
        ),
        "agent:ops:telegram:direct:abc"
    );
    let blank = direct("  ");
    assert_eq!(
        key(DmScope::PerChannelPeer, &none, "", None, Some(&blank), None),
        "agent:ops:unknown:direct:unknown"
    );
}

#[test]
fn identity_links_replace_the_peer_id_in_per_peer_scopes() {
    let links = IdentityLinks::new([
        (
            " Alice ".to_string(),
            vec!["telegram:111".to_string(), "Discord:AB9".to_string()],
        ),
        ("bob".to_string(), vec!["222".to_string()]),
    ]);
    let k = |scope, channel, id: &str| key(scope, &links, channel, None, Some(&direct(id)), None);
    // Channel-qualified entries: that channel only.
    assert_eq!(
        k(DmScope::PerPeer, "telegram", "111"),
        "agent:ops:direct:alice"
    );
    assert_eq!(
        k(DmScope::PerPeer, "discord", "ab9"),
        "agent:ops:direct:alice"
    );
    assert_eq!(
        k(DmScope::PerPeer, "whatsapp", "111"),
        "agent:ops:direct:111"
    );
    // Bare entries: any channel.
    assert_eq!(
        k(DmScope::PerChannelPeer, "signal", "222"),
        "agent:ops:signal:direct:bob"
    );
    assert_eq!(
        k(DmScope::PerAccountChannelPeer, "telegram", "222"),
        "agent:ops:telegram:default:direct:bob"
    );
    // The main scope has one session for everyone: links do not apply.
    assert_eq!(k(DmScope::Main, "telegram", "111"), "agent:ops:main");
    assert_eq!(links.canonical("Telegram", " 111 "), Some("Alice"));
    assert_eq!(links.canonical("telegram", "333"), None);
}

#[test]
fn when_two_names_claim_an_id_the_first_listed_wins() {
    let links = IdentityLinks::new([
        ("first".to_string(), vec!["telegram:7".to_string()]),
        (
            "second".to_string(),
            vec!["7".to_string(), "telegram:7".to_string()],
        ),
        ("  ".to_string(), vec!["8".to_string()]),
    ]);
    assert_eq!(links.canonical("telegram", "7"), Some("first"));
    assert_eq!(links.canonical("discord", "7"), Some("second"));
    assert_eq!(
        links.canonical("discord", "8"),
        None,
        "a blank name is left out"
    );
}

#[test]
fn dm_scopes_parse_and_print() {
    for scope in [
        DmScope::Main,
        DmScope::PerPeer,
        DmScope::PerChannelPeer,
        DmScope::PerAccountChannelPeer,
    ] {
        assert_eq!(DmScope::parse(scope.as_str()), Some(scope));
    }
    assert_eq!(DmScope::parse(" Per-Peer "), Some(DmScope::PerPeer));
    assert_eq!(DmScope::parse("per-account"), None);
    assert_eq!(DmScope::default(), DmScope::Main);
}
