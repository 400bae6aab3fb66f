//! Skills use cases: where the six sources are for this app, and running a
//! skill with its own environment and limits, through the child runner.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::App;
use crate::child;
use crate::skills::discover::Root;
use crate::skills::gates::GateContext;
use crate::skills::run::{self, Plan, RunError};
use crate::skills::{self, SkillsInputs, SkillsReport, SourceKind, bundled};

impl App {
    /// The managed skills folder (`<state dir>/skills`).
    pub(crate) fn managed_skills_dir(&self) -> PathBuf {
        self.paths.state_dir.join("skills")
    }

    /// The inputs of skills for this app, for commands that only read:
    /// nothing is written (bundled skills not yet written out are read from
    /// the binary).
    pub(crate) fn skills_inputs(&self) -> (SkillsInputs, Vec<String>) {
        self.skills_inputs_with(false)
    }

    /// The inputs of skills for commands that run skills (agent turns,
    /// `skills run`): the bundled skills are written out if needed, so
    /// their files have real paths. Problems doing so are warnings.
    pub(crate) fn skills_inputs_for_running(&self) -> (SkillsInputs, Vec<String>) {
        self.skills_inputs_with(true)
    }

    fn skills_inputs_with(&self, write_bundled: bool) -> (SkillsInputs, Vec<String>) {
        let mut warnings = Vec::new();
        let mut embedded_bundled = None;
        let skills_config = &self.config.config.skills;
        let mut roots = Vec::new();
        for dir in &skills_config.load.extra_dirs {
            roots.push(Root {
                source: SourceKind::Extra,
                dir: self.host.resolve_path(dir),
            });
        }
        if let Some(path) = self.host.var("SKILLS_PATH") {
            for dir in std::env::split_paths(path).filter(|p| !p.as_os_str().is_empty()) {
                roots.push(Root {
                    source: SourceKind::Extra,
                    dir: self.host.resolve_path(&dir.to_string_lossy()),
                });
            }
        }
        let bundled_dir = match self.host.var("ALMANAC_BUNDLED_SKILLS_DIR") {
            Some(dir) => Some(self.host.resolve_path(dir)),
            None => {
                let dir = self.paths.state_dir.join("bundled-skills");
                if !write_bundled {
                    if bundled::is_current(&dir) {
                        Some(dir)
                    } else {
                        embedded_bundled = Some(dir);
                        None
                    }
                } else {
                    match self
                        .ensure_state_dir()
                        .and_then(|()| bundled::materialize(&dir))
                    {
                        Ok(()) => Some(dir),
                        Err(err) => {
                            warnings.push(format!(
                                "bundled skills unavailable: cannot write {}: {err}",
                                dir.display()
                            ));
                            None
                        }
                    }
                }
            }
        };
        if let Some(dir) = bundled_dir {
            roots.push(Root {
                source: SourceKind::Bundled,
                dir,
            });
        }
        roots.push(Root {
            source: SourceKind::Managed,
            dir: self.managed_skills_dir(),
        });
        if let Some(home) = &self.host.home {
            roots.push(Root {
                source: SourceKind::Personal,
                dir: home.join(".agents").join("skills"),
            });
        }
        let ws = &self.paths.workspace;
        roots.push(Root {
            source: SourceKind::Project,
            dir: ws.join(".agents").join("skills"),
        });
        roots.push(Root {
            source: SourceKind::Workspace,
            dir: ws.join("skills"),
        });
        let mut homes: Vec<PathBuf> = self.host.home.iter().cloned().collect();
        if let Some(real) = self
            .host
            .home
            .as_ref()
            .and_then(|h| std::fs::canonicalize(h).ok())
            && !homes.contains(&real)
        {
            homes.push(real);
        }
        let allow_symlink_targets = self.real_targets(&skills_config.load.allow_symlink_targets);
        let inputs = SkillsInputs {
            roots,
            config: self.config.clone(),
            env: self.host.vars().clone(),
            permissions_override: self.host.raw_var("SKILL_PERMISSIONS").map(str::to_string),
            allow_symlink_targets,
            homes,
            workspace_dir: ws.clone(),
            managed_dir: self.managed_skills_dir(),
            embedded_bundled,
        };
        (inputs, warnings)
    }

    /// Discovers and gates the skills (writing nothing).
    pub(crate) fn skills_report(&self) -> (SkillsInputs, SkillsReport) {
        Self::report_of(self.skills_inputs())
    }

    /// [`App::skills_report`] for running a skill: the bundled skills are
    /// written out first.
    pub(crate) fn skills_report_for_running(&self) -> (SkillsInputs, SkillsReport) {
        Self::report_of(self.skills_inputs_for_running())
    }

    fn report_of((inputs, warnings): (SkillsInputs, Vec<String>)) -> (SkillsInputs, SkillsReport) {
        let mut report = skills::report(&inputs);
        report.warnings.splice(0..0, warnings);
        (inputs, report)
    }
}

/// What `skills run` did.
#[derive(Debug)]
pub(crate) enum RunOutcome {
    /// The skill's process ran (to its end, or to its timeout).
    Ran(child::Finished),
    /// An instruction skill: print this.
    Print(String),
}

/// Why a skill did not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RefusedRun {
    /// Unknown or disabled (exit 2).
    #[error("Unknown or disabled third-party skill: {0}")]
    Unknown(String),
    /// Gated (exit 2).
    #[error("{0}")]
    Gated(String),
    /// It cannot be run as asked (exit 2).
    #[error(transparent)]
    NotRunnable(#[from] RunError),
    #[error("cannot start the skill")]
    Io(#[from] std::io::Error),
}

/// A skill ready to run.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// An instruction skill: its text.
    Print(String),
    /// Its process: program, environment and limits
    /// (`skills.run.timeoutSec`, `skills.run.maxOutputBytes`).
    Exec(child::Spec),
}

/// Gates skill `name` now and says how to run it with `args`: its own
/// environment values go to its process only.
pub(crate) fn prepare_run(
    app: &App,
    name: &str,
    args: &[String],
    stdin: child::Input,
) -> Result<Prepared, RefusedRun> {
    let (inputs, report) = app.skills_report_for_running();
    let Some(status) = report.find(name) else {
        return Err(RefusedRun::Unknown(name.to_string()));
    };
    let skill = &status.skill;
    let e = &status.eligibility;
    if e.disabled {
        return Err(RefusedRun::Unknown(name.to_string()));
    }
    if !e.eligible {
        let message = if let Some(bin) = e.missing.bins.first() {
            format!("Cannot run {}: {bin} not found on PATH.", skill.name)
        } else if let Some(var) = e.missing.env.first() {
            format!(
                "Cannot run {}: missing {var}. Set {var} in your shell environment or in skills.entries.{}.env.",
                skill.name, skill.skill_key
            )
        } else {
            format!("Cannot run {}: {}", skill.name, e.reasons.join("; "))
        };
        return Err(RefusedRun::Gated(message));
    }
    let ctx = GateContext::new(
        &inputs.env,
        &inputs.config,
        inputs.permissions_override.as_deref(),
    );
    match run::plan(skill, args, |bin| ctx.find_bin(bin))? {
        Plan::Print(text) => Ok(Prepared::Print(text)),
        Plan::Exec { program, args, cwd } => {
            let entries = &app.config.config.skills.entries;
            let entry = entries
                .get(&skill.skill_key)
                .or_else(|| entries.get(&skill.name));
            let provider_keys: Vec<&str> = crate::provider::known::provider_key_vars().collect();
            let env = run::child_env(skill, entry, &inputs.env, |var| {
                provider_keys.contains(&var)
            });
            let limits = &app.config.config.skills.run;
            Ok(Prepared::Exec(child::Spec {
                program,
                args,
                cwd,
                env,
                timeout: Duration::from_secs(u64::from(limits.timeout_sec.max(1))),
                max_output_bytes: limits.max_output_bytes as usize,
                stdin,
            }))
        }
    }
}

/// Runs skill `name` with `args` (gates re-checked now), its output handed
/// to `sink` as it comes.
pub(crate) fn run_skill(
    app: &App,
    name: &str,
    args: &[String],
    stdin: child::Input,
    sink: &mut dyn child::Sink,
) -> Result<RunOutcome, RefusedRun> {
    match prepare_run(app, name, args, stdin)? {
        Prepared::Print(text) => Ok(RunOutcome::Print(text)),
        Prepared::Exec(spec) => Ok(RunOutcome::Ran(child::run_blocking(&spec, sink)?)),
    }
}

/// `skills check`: counts and lists.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckSummary {
    pub total: usize,
    pub eligible: usize,
    pub disabled: usize,
    pub blocked: usize,
    pub missing_requirements: usize,
    pub failed: usize,
}

pub(crate) fn check_summary(report: &SkillsReport) -> CheckSummary {
    let count =
        |f: &dyn Fn(&skills::SkillStatus) -> bool| report.skills.iter().filter(|s| f(s)).count();
    CheckSummary {
        total: report.skills.len() + report.failures.len(),
        eligible: count(&|s| s.eligibility.eligible),
        disabled: count(&|s| s.eligibility.disabled),
        blocked: count(&|s| s.eligibility.blocked_by_allowlist && !s.eligibility.disabled),
        missing_requirements: count(&|s| {
            !s.eligibility.eligible
                && !s.eligibility.disabled
                && !s.eligibility.blocked_by_allowlist
        }),
        failed: report.failures.len(),
    }
}
