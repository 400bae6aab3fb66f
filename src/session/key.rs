//! Session keys (OpenClaw's grammar), pure.
//!
//! | kind | key |
//! |---|---|
//! | main | `agent:<agentId>:<mainKey>` (`main`) |
//! | global scope | `global` |
//! | DM, `per-peer` | `agent:<agentId>:direct:<peerId>` |
//! | DM, `per-channel-peer` | `agent:<agentId>:<channel>:direct:<peerId>` |
//! | DM, `per-account-channel-peer` | `agent:<agentId>:<channel>:<accountId>:direct:<peerId>` |
//! | group / room | `agent:<agentId>:<channel>:group:<id>` / `…:channel:<id>` |
//! | thread | `<baseKey>:thread:<threadId>` |
//! | cron | `agent:<agentId>:cron:<jobId>` |
//! | webhook | `agent:<agentId>:hook:<id>` |
//!
//! Keys are stored lowercased; a `dm` chat type after the agent id is
//! read as `direct`.

/// Normalises an agent (or account) id: `[a-z0-9][a-z0-9_-]{0,63}`, other
/// runs of characters become `-`; empty is `fallback`.
pub fn normalize_id(id: &str, fallback: &str) -> String {
    let lower = id.trim().to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut dash = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
            dash = false;
        } else if !dash {
            out.push('-');
            dash = true;
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(64).collect();
    let trimmed = trimmed.trim_end_matches('-').to_string();
    if trimmed.is_empty() {
        fallback.to_string()
    } else {
        trimmed
    }
}

/// The main session of an agent.
pub fn main_key(agent_id: &str, main_key: &str) -> String {
    format!(
        "agent:{}:{}",
        normalize_id(agent_id, "main"),
        normalize_main(main_key)
    )
}

fn normalize_main(main_key: &str) -> String {
    let k = main_key.trim().to_lowercase();
    if k.is_empty() { "main".to_string() } else { k }
}

/// The store key for a requested key: empty or `main` is the agent's main
/// session; `agent:<id>:<rest>` keeps `<rest>` under the normalised id
/// (`agent:<id>:main` is the configured main key); anything else is
/// lowercased and put under `agent:<agentId>:`. With the `global` scope
/// every key is `global`.
pub fn resolve(request: Option<&str>, agent_id: &str, main: &str, global_scope: bool) -> String {
    if global_scope {
        return "global".to_string();
    }
    let agent = normalize_id(agent_id, "main");
    let request = request.map(str::trim).unwrap_or("").to_lowercase();
    if request.is_empty() || request == "main" {
        return main_key(&agent, main);
    }
    if request == "global" {
        return request;
    }
    if let Some(rest) = request.strip_prefix("agent:") {
        let (id, tail) = rest.split_once(':').unwrap_or((rest, ""));
        let id = normalize_id(id, "main");
        if tail.is_empty() || tail == "main" {
            return main_key(&id, main);
        }
        return format!("agent:{id}:{}", direct_for_dm(tail));
    }
    format!("agent:{agent}:{}", direct_for_dm(&request))
}

/// The legacy `dm` chat type written as `direct` (`telegram:dm:42` →
/// `telegram:direct:42`), in the part after the agent id only: an agent
/// may be called `dm`.
fn direct_for_dm(tail: &str) -> String {
    let parts: Vec<&str> = tail.split(':').collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            if *part == "dm" && i < last {
                "direct"
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join(":")
}

/// The agent id of a store key (`main` for `global` and foreign keys).
pub fn agent_of(key: &str) -> String {
    key.strip_prefix("agent:")
        .and_then(|rest| rest.split(':').next())
        .map(|id| normalize_id(id, "main"))
        .unwrap_or_else(|| "main".to_string())
}

/// How direct messages map to sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmScope {
    Main,
    PerPeer,
    PerChannelPeer,
    PerAccountChannelPeer,
}

impl DmScope {
    pub fn parse(text: &str) -> Option<DmScope> {
        match text {
            "main" => Some(DmScope::Main),
            "per-peer" => Some(DmScope::PerPeer),
            "per-channel-peer" => Some(DmScope::PerChannelPeer),
            "per-account-channel-peer" => Some(DmScope::PerAccountChannelPeer),
            _ => None,
        }
    }
}

/// The key of a direct message from `peer` on `channel`.
pub fn direct_key(
    agent_id: &str,
    main: &str,
    scope: DmScope,
    channel: &str,
    account: &str,
    peer: &str,
) -> String {
    let agent = normalize_id(agent_id, "main");
    let peer = peer.trim().to_lowercase();
    if peer.is_empty() || scope == DmScope::Main {
        return main_key(&agent, main);
    }
    let channel = channel.trim().to_lowercase();
    let account = normalize_id(account, "default");
    match scope {
        DmScope::Main => unreachable!("handled above"),
        DmScope::PerPeer => format!("agent:{agent}:direct:{peer}"),
        DmScope::PerChannelPeer => format!("agent:{agent}:{channel}:direct:{peer}"),
        DmScope::PerAccountChannelPeer => {
            format!("agent:{agent}:{channel}:{account}:direct:{peer}")
        }
    }
}

/// The key of a group (`kind` `group`) or room (`channel`) conversation.
pub fn group_key(agent_id: &str, channel: &str, kind: &str, id: &str) -> String {
    let channel = match channel.trim().to_lowercase() {
        c if c.is_empty() => "unknown".to_string(),
        c => c,
    };
    let id = match id.trim().to_lowercase() {
        i if i.is_empty() => "unknown".to_string(),
        i => i,
    };
    format!(
        "agent:{}:{channel}:{kind}:{id}",
        normalize_id(agent_id, "main")
    )
}

/// A thread under `base`.
pub fn thread_key(base: &str, thread: &str) -> String {
    format!("{base}:thread:{}", thread.trim().to_lowercase())
}

/// The chat type a key resets as: `thread`, `group` (groups and rooms),
/// else `direct`.
pub fn chat_type(key: &str) -> &'static str {
    if key.contains(":thread:") || key.contains(":topic:") {
        "thread"
    } else if key.contains(":group:") || key.contains(":channel:") {
        "group"
    } else {
        "direct"
    }
}

/// The channel a key names, if any (`agent:<id>:<channel>:…`).
pub fn channel_of(key: &str) -> Option<&str> {
    let mut parts = key.split(':');
    if parts.next() != Some("agent") {
        return None;
    }
    parts.next()?;
    let third = parts.next()?;
    let fourth = parts.next()?;
    let known = [
        "direct",
        "group",
        "channel",
        "cron",
        "hook",
        "thread",
        "subagent",
        "acp",
        "heartbeat",
    ];
    (!known.contains(&third) && !third.is_empty() && !fourth.is_empty()).then_some(third)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(normalize_id("Main", "main"), "main");
        assert_eq!(normalize_id(" My Agent!! ", "main"), "my-agent");
        assert_eq!(normalize_id("", "main"), "main");
        assert_eq!(normalize_id("---", "default"), "default");
        assert_eq!(normalize_id(&"x".repeat(80), "main").len(), 64);
    }

    #[test]
    fn request_keys() {
        let cases = [
            (None, "agent:main:main"),
            (Some(""), "agent:main:main"),
            (Some("main"), "agent:main:main"),
            (Some("MAIN"), "agent:main:main"),
            (Some("agent:Ops:main"), "agent:ops:main"),
            (
                Some("agent:ops:telegram:dm:42"),
                "agent:ops:telegram:direct:42",
            ),
            (Some("agent:dm:main"), "agent:dm:main"),
            (Some("agent:dm:dm:7"), "agent:dm:direct:7"),
            (Some("telegram:dm:42"), "agent:main:telegram:direct:42"),
            (Some("notes:dm"), "agent:main:notes:dm"),
            (Some("cron:Nightly"), "agent:main:cron:nightly"),
            (Some("hook:gmail:abc"), "agent:main:hook:gmail:abc"),
            (Some("global"), "global"),
        ];
        for (request, want) in cases {
            assert_eq!(resolve(request, "main", "main", false), want, "{request:?}");
        }
        assert_eq!(resolve(Some("anything"), "main", "main", true), "global");
        assert_eq!(resolve(None, "Work", "home", false), "agent:work:home");
        // An agent called `dm` keeps its name when its key is read back.
        let dm = resolve(None, "DM", "main", false);
        assert_eq!(resolve(Some(&dm), "DM", "main", false), "agent:dm:main");
    }

    #[test]
    fn direct_group_thread_keys_and_types() {
        let peer = |scope| direct_key("main", "main", scope, "Telegram", "", "User42");
        assert_eq!(peer(DmScope::Main), "agent:main:main");
        assert_eq!(peer(DmScope::PerPeer), "agent:main:direct:user42");
        assert_eq!(
            peer(DmScope::PerChannelPeer),
            "agent:main:telegram:direct:user42"
        );
        assert_eq!(
            peer(DmScope::PerAccountChannelPeer),
            "agent:main:telegram:default:direct:user42"
        );
        let group = group_key("main", "discord", "group", "G1");
        assert_eq!(group, "agent:main:discord:group:g1");
        assert_eq!(
            thread_key(&group, "T9"),
            "agent:main:discord:group:g1:thread:t9"
        );
        assert_eq!(chat_type(&thread_key(&group, "t")), "thread");
        assert_eq!(chat_type(&group), "group");
        assert_eq!(chat_type("agent:main:slack:channel:c1"), "group");
        assert_eq!(chat_type("agent:main:main"), "direct");
        assert_eq!(
            channel_of("agent:main:telegram:direct:42"),
            Some("telegram")
        );
        assert_eq!(channel_of("agent:main:main"), None);
        assert_eq!(channel_of("agent:main:cron:job"), None);
        assert_eq!(agent_of("agent:ops:main"), "ops");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn resolving_is_stable_and_lowercase(request in "[A-Za-z0-9:_ -]{0,40}", agent in "[A-Za-z0-9 _-]{0,12}") {
                let key = resolve(Some(&request), &agent, "main", false);
                prop_assert_eq!(&key, &key.to_lowercase());
                prop_assert!(key.starts_with("agent:") || key == "global");
                prop_assert_eq!(resolve(Some(&key), &agent, "main", false), key);
            }

            /// Any requested key (`--session-key`, a webhook's): a key,
            /// never a panic, and what is read back from it agrees.
            #[test]
            fn any_key_resolves(request in ".{0,80}", agent in ".{0,20}", main in ".{0,10}", global in any::<bool>()) {
                let key = resolve(Some(&request), &agent, &main, global);
                prop_assert!(key.starts_with("agent:") || key == "global");
                let _ = (chat_type(&key), channel_of(&key));
                let id = agent_of(&key);
                prop_assert!(!id.is_empty() && id.len() <= 64);
            }

            #[test]
            fn ids_are_valid_and_idempotent(id in ".{0,80}") {
                let n = normalize_id(&id, "main");
                prop_assert!(!n.is_empty() && n.len() <= 64);
                prop_assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'));
                prop_assert_eq!(normalize_id(&n, "main"), n);
            }
        }
    }
}
