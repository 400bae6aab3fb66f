//! Routing a command line to a skill (Arka's `skills match`).
//!
//! The text is lowercased with whitespace collapsed. Usable skills (gated
//! ones never route) are tried longest trigger first: a text equal to a
//! skill's name, or starting with `<name> `, routes to it with the rest as
//! arguments; then per trigger: equal, or starting with `<trigger> `, or —
//! for triggers of four characters or more — containing it anywhere (the
//! text after it becomes the arguments).
//!
//! A trigger declared by more than one skill belongs to the one from the
//! higher-precedence source (then the first by name); the others lose that
//! trigger only, with a warning, instead of all of them being disabled.

use std::collections::BTreeMap;

use serde::Serialize;

use super::types::Skill;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Route {
    pub skill: String,
    pub args: String,
    /// `<skill> <args>`, what Arka prints.
    pub line: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TriggerConflict {
    pub trigger: String,
    pub winner: String,
    pub losers: Vec<String>,
}

/// Trigger owners after resolving conflicts: `skill name → triggers`.
pub(crate) fn resolve_triggers(
    skills: &[&Skill],
) -> (BTreeMap<String, Vec<String>>, Vec<TriggerConflict>) {
    let mut owners: BTreeMap<String, Vec<&Skill>> = BTreeMap::new();
    for skill in skills {
        for t in &skill.triggers {
            owners.entry(t.clone()).or_default().push(skill);
        }
    }
    let mut by_skill: BTreeMap<String, Vec<String>> = skills
        .iter()
        .map(|s| (s.name.clone(), Vec::new()))
        .collect();
    let mut conflicts = Vec::new();
    for (trigger, mut claimants) in owners {
        claimants.sort_by(|a, b| b.source.cmp(&a.source).then(a.name.cmp(&b.name)));
        let winner = claimants[0];
        by_skill
            .entry(winner.name.clone())
            .or_default()
            .push(trigger.clone());
        if claimants.len() > 1 {
            conflicts.push(TriggerConflict {
                trigger,
                winner: winner.name.clone(),
                losers: claimants[1..].iter().map(|s| s.name.clone()).collect(),
            });
        }
    }
    (by_skill, conflicts)
}

/// Routes `text` among `usable` skills.
pub(crate) fn route(text: &str, usable: &[&Skill]) -> Option<Route> {
    let text = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    if text.is_empty() {
        return None;
    }
    let (triggers, _) = resolve_triggers(usable);
    let mut ordered: Vec<(&Skill, &Vec<String>)> = usable
        .iter()
        .map(|s| {
            (
                *s,
                triggers
                    .get(&s.name)
                    .expect("every usable skill has an entry"),
            )
        })
        .collect();
    ordered.sort_by(|a, b| {
        let longest = |t: &Vec<String>| t.iter().map(|x| x.chars().count()).max().unwrap_or(0);
        longest(b.1)
            .cmp(&longest(a.1))
            .then(a.0.name.cmp(&b.0.name))
    });
    let make = |skill: &Skill, rest: &str| {
        let args = rest
            .trim_matches(|c: char| c == ' ' || c == ',' || c == ':' || c == '-')
            .to_string();
        let line = if args.is_empty() {
            skill.name.clone()
        } else {
            format!("{} {args}", skill.name)
        };
        Route {
            skill: skill.name.clone(),
            args,
            line,
        }
    };
    for (skill, _) in &ordered {
        let name = skill.name.to_lowercase();
        if text == name {
            return Some(make(skill, ""));
        }
        if let Some(rest) = text.strip_prefix(&format!("{name} ")) {
            return Some(make(skill, rest));
        }
    }
    for (skill, skill_triggers) in &ordered {
        for trigger in skill_triggers.iter() {
            if text == *trigger {
                return Some(make(skill, ""));
            }
            if let Some(rest) = text.strip_prefix(&format!("{trigger} ")) {
                return Some(make(skill, rest));
            }
            if trigger.chars().count() >= 4
                && let Some(pos) = text.find(trigger.as_str())
            {
                return Some(make(skill, &text[pos + trigger.len()..]));
            }
        }
    }
    None
}
