//! Skills: `SKILL.md` folders and `skill.json` / `manifest.json` /
//! `plugin.json` plugins from six sources, gated, listed, offered to the
//! model as a budgeted catalog, routed and run.
//!
//! * [`parse`]: one skill file → a [`Skill`] or the reason it cannot load;
//! * [`discover`]: sources, precedence, limits, containment;
//! * [`gates`]: eligibility with every failing reason;
//! * [`catalog`]: the `<available_skills>` block within its budget;
//! * [`commands`]: slash-command names and the invocation matrix;
//! * [`route`]: Arka-style routing of a command line to a skill;
//! * [`run`]: running plugins with a per-run environment;
//! * [`scan`]: the install-time security scan;
//! * [`snapshot`]: the fingerprint of gating inputs (PATH, environment,
//!   config) and which file changes the gateway's watcher acts on;
//! * [`stored`]: what agent turns keep of the skills between commands.
//!
//! Invariants: no skill is dropped silently (a file that cannot load is a
//! [`LoadFailure`] with its reason); across commands only agent turns keep
//! anything, and only while every file discovery read and every gating
//! input is unchanged (`skills` commands and `skills run` always read and
//! gate afresh); the process environment is never modified for a skill.

pub(crate) mod bundled;
pub(crate) mod catalog;
pub(crate) mod commands;
pub(crate) mod discover;
pub(crate) mod gates;
pub(crate) mod parse;
pub(crate) mod route;
pub(crate) mod run;
pub(crate) mod scan;
pub(crate) mod snapshot;
pub(crate) mod stored;
pub(crate) mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub(crate) use types::{LoadFailure, Skill, SourceKind};

use crate::config::LoadedConfig;
use discover::{DiscoverOptions, Root};
use gates::{Eligibility, GateContext};

/// Everything skills are computed from.
#[derive(Debug, Clone)]
pub(crate) struct SkillsInputs {
    pub roots: Vec<Root>,
    pub config: LoadedConfig,
    /// The process environment (PATH, variables skills require).
    pub env: BTreeMap<String, String>,
    /// `SKILL_PERMISSIONS` when set (an empty value allows none).
    pub permissions_override: Option<String>,
    pub allow_symlink_targets: Vec<PathBuf>,
    /// Home directories, for `~` in locations and messages.
    pub homes: Vec<PathBuf>,
    pub workspace_dir: PathBuf,
    pub managed_dir: PathBuf,
    /// When set, the bundled skills are read from the binary as if written
    /// out to this folder (which is then not among the roots): commands
    /// that only read do not write them out first.
    pub embedded_bundled: Option<PathBuf>,
}

/// A skill with its gating outcome.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SkillStatus {
    pub skill: Skill,
    pub eligibility: Eligibility,
}

/// The skills of a setup, gated.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SkillsReport {
    pub skills: Vec<SkillStatus>,
    pub failures: Vec<LoadFailure>,
    pub warnings: Vec<String>,
    pub conflicts: Vec<route::TriggerConflict>,
    /// What on disk the report was read from ([`discover::Discovery::watched`]).
    #[serde(skip)]
    pub watched: Vec<PathBuf>,
}

impl SkillsReport {
    pub(crate) fn find(&self, name: &str) -> Option<&SkillStatus> {
        self.skills
            .iter()
            .find(|s| s.skill.name == name)
            .or_else(|| self.skills.iter().find(|s| s.skill.skill_key == name))
            .or_else(|| {
                self.skills
                    .iter()
                    .find(|s| s.skill.name.eq_ignore_ascii_case(name))
            })
    }

    /// Eligible skills, in name order.
    pub(crate) fn usable(&self) -> Vec<&Skill> {
        self.skills
            .iter()
            .filter(|s| s.eligibility.eligible)
            .map(|s| &s.skill)
            .collect()
    }
}

/// Discovers and gates the skills of `inputs`.
pub(crate) fn report(inputs: &SkillsInputs) -> SkillsReport {
    let limits = &inputs.config.config.skills.limits;
    let discovery = discover::discover(&DiscoverOptions {
        roots: inputs.roots.clone(),
        limits,
        allow_symlink_targets: inputs.allow_symlink_targets.clone(),
        home: inputs.homes.first().cloned(),
        preloaded: inputs
            .embedded_bundled
            .as_deref()
            .map(bundled::embedded_skills)
            .unwrap_or_default(),
    });
    let ctx = GateContext::new(
        &inputs.env,
        &inputs.config,
        inputs.permissions_override.as_deref(),
    );
    let skills: Vec<SkillStatus> = discovery
        .skills
        .into_iter()
        .map(|skill| {
            let eligibility = gates::evaluate(&skill, &ctx);
            SkillStatus { skill, eligibility }
        })
        .collect();
    let usable: Vec<&Skill> = skills
        .iter()
        .filter(|s| s.eligibility.eligible)
        .map(|s| &s.skill)
        .collect();
    let (_, conflicts) = route::resolve_triggers(&usable);
    let mut warnings = discovery.warnings;
    for c in &conflicts {
        warnings.push(format!(
            "trigger `{}` is declared by {} and {}; it routes to {}",
            c.trigger,
            c.winner,
            c.losers.join(", "),
            c.winner
        ));
    }
    SkillsReport {
        skills,
        failures: discovery.failures,
        warnings,
        conflicts,
        watched: discovery.watched,
    }
}

/// The catalog the model gets: eligible skills without
/// `disable-model-invocation`, allowed for the agent (`agents.defaults.skills`).
pub(crate) fn catalog(report: &SkillsReport, inputs: &SkillsInputs) -> catalog::Catalog {
    let allow = inputs.config.config.agents.defaults.skills.as_ref();
    let visible: Vec<catalog::CatalogSkill> = report
        .skills
        .iter()
        .filter(|s| s.eligibility.eligible && !s.skill.disable_model_invocation)
        .filter(|s| allow.is_none_or(|a| a.iter().any(|n| n == &s.skill.name)))
        .map(|s| catalog::CatalogSkill {
            name: s.skill.name.clone(),
            description: s.skill.description.clone(),
            location: s.skill.file_path.clone(),
        })
        .collect();
    let limits = &inputs.config.config.skills.limits;
    catalog::build(
        &visible,
        limits.max_skills_in_prompt as usize,
        limits.max_skills_prompt_chars as usize,
        &inputs.homes,
    )
}

#[cfg(test)]
mod tests;
