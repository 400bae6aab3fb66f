//! Who may talk to the bot, decided before any binding chooses an agent:
//! `dmPolicy` (`pairing` default, `allowlist`, `open`, `disabled`) with
//! `allowFrom` and the senders pairing approved; `groupPolicy`
//! (`allowlist` default, `open`, `disabled`) with `groupAllowFrom` (else
//! `allowFrom`), `groups` and `requireMention`. Pure.

use serde_json::Value;

use super::store::entry_text;
use super::update::{ChatKind, Inbound};
use crate::config::TelegramSettings;

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It reaches the agent.
    Allow,
    /// An unknown sender in `pairing` mode: a code, no model call.
    Pair,
    /// A group message not addressed to the bot: kept as the group's
    /// history for the next one that is.
    History,
    /// Nothing: why.
    Drop(&'static str),
}

/// Whether `inbound`'s sender is in `list` (ids, `@usernames`, `tg:`
/// or `telegram:` prefixed ids, or `*`).
pub(crate) fn listed(list: &[String], inbound: &Inbound) -> bool {
    let id = inbound.from_id.to_string();
    let user = inbound.from_username.as_deref().map(str::to_lowercase);
    list.iter().any(|entry| {
        let entry = entry.trim();
        let bare = entry
            .strip_prefix("telegram:")
            .or_else(|| entry.strip_prefix("tg:"))
            .unwrap_or(entry);
        bare == "*"
            || bare == id
            || bare
                .strip_prefix('@')
                .is_some_and(|u| user.as_deref() == Some(&u.to_lowercase()))
    })
}

fn texts(list: Option<&Vec<Value>>) -> Vec<String> {
    list.map(|l| l.iter().filter_map(entry_text).collect())
        .unwrap_or_default()
}

/// The decision for `inbound` under `settings`; `approved`: the senders
/// pairing approved; `addressed`: the message mentions or replies to
/// the bot (groups only).
pub(crate) fn decide(
    settings: &TelegramSettings,
    approved: &[String],
    inbound: &Inbound,
    addressed: bool,
) -> Decision {
    let mut allowed = texts(settings.allow_from.as_ref());
    allowed.extend(approved.iter().cloned());
    if inbound.chat == ChatKind::Direct {
        return match settings.dm_policy.as_deref().unwrap_or("pairing") {
            "disabled" => Decision::Drop("direct messages are disabled"),
            "open" => Decision::Allow,
            _ if listed(&allowed, inbound) => Decision::Allow,
            "allowlist" => Decision::Drop("sender not in allowFrom"),
            _ => Decision::Pair,
        };
    }
    let policy = settings.group_policy.as_deref().unwrap_or("allowlist");
    if policy == "disabled" || inbound.chat == ChatKind::Channel {
        return Decision::Drop("groups are disabled");
    }
    let groups = settings.groups.as_ref();
    let chat = inbound.chat_id.to_string();
    let group = groups.and_then(|g| g.get(&chat).or_else(|| g.get("*")));
    if groups.is_some_and(|g| !g.is_empty()) && group.is_none() {
        return Decision::Drop("group not in groups");
    }
    if group.is_some_and(|g| g.enabled == Some(false)) {
        return Decision::Drop("group disabled");
    }
    if policy == "allowlist" {
        let mut senders = match &settings.group_allow_from {
            Some(list) => texts(Some(list)),
            None => allowed.clone(),
        };
        senders.extend(texts(group.and_then(|g| g.allow_from.as_ref())));
        if !listed(&senders, inbound) {
            return Decision::Drop("sender not in groupAllowFrom");
        }
    }
    let require_mention = group.and_then(|g| g.require_mention).unwrap_or(true);
    if require_mention && !addressed {
        return Decision::History;
    }
    Decision::Allow
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(chat: ChatKind, from: i64) -> Inbound {
        Inbound {
            update_id: 1,
            message_id: 1,
            chat_id: if chat == ChatKind::Direct { from } else { -100 },
            chat,
            thread_id: None,
            from_id: from,
            from_username: Some("Ada".into()),
            from_name: "Ada".into(),
            text: "hi".into(),
            quoted: None,
            replies_to_bot: false,
            forwarded_from: None,
            mentions: Vec::new(),
        }
    }

    fn settings(json: &str) -> TelegramSettings {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn direct_messages_follow_the_dm_policy() {
        let dm = inbound(ChatKind::Direct, 42);
        let table = [
            (r#"{}"#, &[][..], Decision::Pair),
            (r#"{}"#, &["42".to_string()][..], Decision::Allow),
            (r#"{"allowFrom": [42]}"#, &[][..], Decision::Allow),
            (r#"{"allowFrom": ["@ada"]}"#, &[][..], Decision::Allow),
            (r#"{"allowFrom": ["tg:42"]}"#, &[][..], Decision::Allow),
            (
                r#"{"dmPolicy": "allowlist", "allowFrom": [7]}"#,
                &[][..],
                Decision::Drop("sender not in allowFrom"),
            ),
            (
                r#"{"dmPolicy": "allowlist"}"#,
                &["42".to_string()][..],
                Decision::Allow,
            ),
            (r#"{"dmPolicy": "open"}"#, &[][..], Decision::Allow),
            (
                r#"{"dmPolicy": "disabled", "allowFrom": [42]}"#,
                &[][..],
                Decision::Drop("direct messages are disabled"),
            ),
        ];
        for (config, approved, want) in table {
            assert_eq!(
                decide(&settings(config), approved, &dm, false),
                want,
                "{config}"
            );
        }
    }

    #[test]
    fn group_messages_follow_the_group_policy_the_groups_and_mentions() {
        let group = inbound(ChatKind::Group, 42);
        let table = [
            (
                r#"{}"#,
                false,
                Decision::Drop("sender not in groupAllowFrom"),
            ),
            (r#"{"allowFrom": [42]}"#, false, Decision::History),
            (r#"{"allowFrom": [42]}"#, true, Decision::Allow),
            (
                r#"{"groupAllowFrom": [42], "allowFrom": [7]}"#,
                true,
                Decision::Allow,
            ),
            (r#"{"groupPolicy": "open"}"#, true, Decision::Allow),
            (
                r#"{"groupPolicy": "open", "groups": {"-5": {}}}"#,
                true,
                Decision::Drop("group not in groups"),
            ),
            (
                r#"{"groupPolicy": "open", "groups": {"-100": {"requireMention": false}}}"#,
                false,
                Decision::Allow,
            ),
            (
                r#"{"groupPolicy": "open", "groups": {"*": {"enabled": false}}}"#,
                true,
                Decision::Drop("group disabled"),
            ),
            (
                r#"{"groupPolicy": "disabled"}"#,
                true,
                Decision::Drop("groups are disabled"),
            ),
        ];
        for (config, addressed, want) in table {
            assert_eq!(
                decide(&settings(config), &[], &group, addressed),
                want,
                "{config}"
            );
        }
    }
}
