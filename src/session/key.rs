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
pub(crate) fn normalize_id(id: &str, fallback: &str) -> String {
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
pub(crate) fn main_key(agent_id: &str, main_key: &str) -> String {
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
pub(crate) fn resolve(
    request: Option<&str>,
    agent_id: &str,
    main: &str,
    global_scope: bool,
) -> String {
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

/// The chat type a key resets as: `thread`, `group` (groups and rooms),
/// else `direct`.
pub(crate) fn chat_type(key: &str) -> &'static str {
    if key.contains(":thread:") || key.contains(":topic:") {
        "thread"
    } else if key.contains(":group:") || key.contains(":channel:") {
        "group"
    } else {
        "direct"
    }
}

/// The channel a key names, if any (`agent:<id>:<channel>:…`).
pub(crate) fn channel_of(key: &str) -> Option<&str> {
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
    fn chat_types_and_channels_of_keys() {
        for (key, chat, channel) in [
            ("agent:main:main", "direct", None),
            ("agent:main:direct:user42", "direct", None),
            (
                "agent:main:telegram:direct:user42",
                "direct",
                Some("telegram"),
            ),
            (
                "agent:main:telegram:default:direct:user42",
                "direct",
                Some("telegram"),
            ),
            ("agent:main:discord:group:g1", "group", Some("discord")),
            ("agent:main:slack:channel:c1", "group", Some("slack")),
            (
                "agent:main:discord:group:g1:thread:t9",
                "thread",
                Some("discord"),
            ),
            ("agent:main:cron:job", "direct", None),
            ("global", "direct", None),
        ] {
            assert_eq!(chat_type(key), chat, "{key}");
            assert_eq!(channel_of(key), channel, "{key}");
        }
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
                if let Some(rest) = key.strip_prefix("agent:") {
                    let id = rest.split(':').next().unwrap_or_default();
                    prop_assert_eq!(normalize_id(id, "main"), id);
                }
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
