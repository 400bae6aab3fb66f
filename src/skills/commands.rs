//! Slash-command names for user-invocable skills, and the invocation
//! matrix (`user-invocable` × `disable-model-invocation`).
//!
//! Names (OpenClaw's rules): lowercase, runs of characters outside
//! `[a-z0-9_]` become `_`, leading and trailing `_` removed, at most 32
//! characters, `skill` when nothing is left; a name already taken (by a
//! built-in command or an earlier skill, compared case-insensitively) gets
//! `_2`, `_3`, … within the 32 characters.

use std::collections::HashSet;

use serde::Serialize;

use super::types::{Dispatch, Skill};

/// Chat commands the agent has itself; skills never take these names.
pub(crate) const RESERVED: &[&str] = &[
    "help",
    "commands",
    "status",
    "new",
    "reset",
    "stop",
    "model",
    "models",
    "think",
    "verbose",
    "reasoning",
    "compact",
    "context",
    "usage",
    "config",
    "debug",
    "restart",
    "skill",
    "skills",
    "whoami",
    "tasks",
    "memory",
    "cron",
    "heartbeat",
];

const MAX_LEN: usize = 32;
const MAX_DESCRIPTION: usize = 100;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SlashCommand {
    pub name: String,
    pub skill_name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<Dispatch>,
}

/// The slash commands of `skills` (eligible, in name order), skipping
/// those that are not user-invocable.
pub(crate) fn slash_commands<'a>(skills: impl IntoIterator<Item = &'a Skill>) -> Vec<SlashCommand> {
    let mut used: HashSet<String> = RESERVED.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    for skill in skills.into_iter().filter(|s| s.user_invocable) {
        let base = sanitize(&skill.name);
        let name = unique(&base, &used);
        used.insert(name.clone());
        let description = skill.description.trim();
        let description = if description.is_empty() {
            skill.name.as_str()
        } else {
            description
        };
        let description = if description.chars().count() > MAX_DESCRIPTION {
            format!(
                "{}…",
                description
                    .chars()
                    .take(MAX_DESCRIPTION - 1)
                    .collect::<String>()
            )
        } else {
            description.to_string()
        };
        out.push(SlashCommand {
            name,
            skill_name: skill.name.clone(),
            description,
            dispatch: skill.dispatch.clone(),
        });
    }
    out
}

pub(crate) fn sanitize(name: &str) -> String {
    let mut out = String::new();
    let mut last_underscore = false;
    for c in name.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            if c == '_' {
                if last_underscore {
                    continue;
                }
                last_underscore = true;
            } else {
                last_underscore = false;
            }
            out.push(c);
        } else if !last_underscore {
            out.push('_');
            last_underscore = true;
        }
    }
    let trimmed: String = out.trim_matches('_').chars().take(MAX_LEN).collect();
    let trimmed = trimmed.trim_end_matches('_').to_string();
    if trimmed.is_empty() {
        "skill".to_string()
    } else {
        trimmed
    }
}

fn unique(base: &str, used: &HashSet<String>) -> String {
    if !used.contains(base) {
        return base.to_string();
    }
    for n in 2..=999 {
        let suffix = format!("_{n}");
        let head: String = base.chars().take(MAX_LEN - suffix.len()).collect();
        let candidate = format!("{head}{suffix}");
        if !used.contains(&candidate) {
            return candidate;
        }
    }
    format!("{}_x", base.chars().take(MAX_LEN - 2).collect::<String>())
}

/// Where a skill appears: in the model's catalog, as a slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Exposure {
    pub in_catalog: bool,
    pub slash_command: bool,
}

pub(crate) fn exposure(skill: &Skill) -> Exposure {
    Exposure {
        in_catalog: !skill.disable_model_invocation,
        slash_command: skill.user_invocable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_table() {
        for (name, want) in [
            ("Image Lab", "image_lab"),
            ("image-lab", "image_lab"),
            ("__weird__name__", "weird_name"),
            ("Word / DOCX", "word_docx"),
            ("日本語", "skill"),
            ("a".repeat(40).as_str(), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ] {
            assert_eq!(sanitize(name), want, "{name}");
        }
    }

    #[test]
    fn collisions_get_numbered_suffixes_within_32_chars() {
        let mut used: HashSet<String> = ["help", "deploy"].iter().map(|s| s.to_string()).collect();
        assert_eq!(unique("deploy", &used), "deploy_2");
        used.insert("deploy_2".into());
        assert_eq!(unique("deploy", &used), "deploy_3");
        let long = "x".repeat(32);
        used.insert(long.clone());
        let next = unique(&long, &used);
        assert_eq!(next.len(), 32);
        assert!(next.ends_with("_2"));
        assert_eq!(unique("help", &used), "help_2");
    }
}
