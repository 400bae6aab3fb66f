//! The skill model shared by parsing, discovery, gating and the catalog.

use std::path::PathBuf;

use serde::Serialize;

/// Where a skill was found, lowest precedence first: a skill from a later
/// source replaces a same-named one from an earlier source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SourceKind {
    /// `skills.load.extraDirs` and `SKILLS_PATH`.
    Extra,
    /// Shipped with almanac.
    Bundled,
    /// `<state dir>/skills`.
    Managed,
    /// `~/.agents/skills`.
    Personal,
    /// `<workspace>/.agents/skills`.
    Project,
    /// `<workspace>/skills`.
    Workspace,
}

impl SourceKind {
    pub(crate) const ALL: [SourceKind; 6] = [
        SourceKind::Extra,
        SourceKind::Bundled,
        SourceKind::Managed,
        SourceKind::Personal,
        SourceKind::Project,
        SourceKind::Workspace,
    ];

    /// OpenClaw's label (the `source` field of `skills list --json`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            SourceKind::Extra => "openclaw-extra",
            SourceKind::Bundled => "openclaw-bundled",
            SourceKind::Managed => "openclaw-managed",
            SourceKind::Personal => "agents-skills-personal",
            SourceKind::Project => "agents-skills-project",
            SourceKind::Workspace => "openclaw-workspace",
        }
    }

    /// The short name shown in text output.
    pub(crate) fn short(self) -> &'static str {
        match self {
            SourceKind::Extra => "extra",
            SourceKind::Bundled => "bundled",
            SourceKind::Managed => "managed",
            SourceKind::Personal => "personal",
            SourceKind::Project => "project",
            SourceKind::Workspace => "workspace",
        }
    }

    /// Whether symlinked skill folders may point anywhere (each file must
    /// still stay inside its own skill folder).
    pub(crate) fn follows_symlinks_freely(self) -> bool {
        matches!(self, SourceKind::Managed | SourceKind::Personal)
    }
}

impl Serialize for SourceKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.label())
    }
}

/// What a skill needs before it can be used.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Requirements {
    pub bins: Vec<String>,
    pub any_bins: Vec<String>,
    pub env: Vec<String>,
    /// At least one of these variables (Arka's `env_any`).
    pub env_any: Vec<String>,
    /// Shown only (Arka's `env_optional`).
    pub env_optional: Vec<String>,
    /// Config paths that must be truthy.
    pub config: Vec<String>,
    /// Named probes (Arka's `checks`).
    pub checks: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One validated install option.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstallSpec {
    pub id: String,
    pub kind: String,
    pub label: String,
    pub bins: Vec<String>,
    pub os: Vec<String>,
    /// The formula, package, module or URL.
    pub target: String,
}

/// A skill's install options as `skills.install` prefers them: brew
/// options first with `preferBrew` (the default), else last; node
/// packages named with `nodeManager` (`npm`, `pnpm`, `yarn` or `bun`).
pub(crate) fn preferred_install(
    specs: &[InstallSpec],
    config: &crate::config::SkillsInstallConfig,
) -> Vec<InstallSpec> {
    let manager = match config.node_manager.trim() {
        m @ ("npm" | "pnpm" | "yarn" | "bun") => m,
        _ => "npm",
    };
    let mut out: Vec<InstallSpec> = specs
        .iter()
        .map(|spec| {
            let mut spec = spec.clone();
            if spec.kind == "node" {
                spec.label = format!("Install {} ({manager})", spec.target);
            }
            spec
        })
        .collect();
    // A stable sort: the skill's own order within each group.
    out.sort_by_key(|spec| (spec.kind == "brew") != config.prefer_brew);
    out
}

/// How `skills run` starts a skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub(crate) enum RunSpec {
    /// An entry file run by the interpreter its extension names (or
    /// directly when executable): `.py` python3, `.sh` bash, `.fish` fish,
    /// `.js`/`.mjs` node.
    Entry { entry: PathBuf },
    /// A command template (`{args}` is replaced by the arguments).
    Command { command: String },
    /// Prints the skill file (an instruction skill).
    Prompt,
    /// An MCP server skill.
    Mcp,
}

/// A slash command bypassing the model (`command-dispatch: tool`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Dispatch {
    pub kind: &'static str,
    pub tool_name: String,
    pub arg_mode: &'static str,
}

/// The file format a skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SkillFormat {
    SkillMd,
    Manifest,
}

/// A loaded skill.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Skill {
    pub name: String,
    pub description: String,
    /// The SKILL.md (or manifest) file.
    pub file_path: PathBuf,
    pub base_dir: PathBuf,
    pub source: SourceKind,
    pub format: SkillFormat,
    pub skill_key: String,
    pub emoji: Option<String>,
    pub homepage: Option<String>,
    pub primary_env: Option<String>,
    pub version: Option<String>,
    pub always: bool,
    pub os: Vec<String>,
    pub requires: Requirements,
    pub permissions: Vec<String>,
    pub install: Vec<InstallSpec>,
    pub user_invocable: bool,
    pub disable_model_invocation: bool,
    /// `enabled: false` in a plugin manifest.
    pub disabled_by_manifest: bool,
    pub dispatch: Option<Dispatch>,
    pub triggers: Vec<String>,
    pub run: Option<RunSpec>,
    /// Problems that did not stop the skill from loading.
    pub diagnostics: Vec<String>,
    /// Lower-precedence skills of the same name this one replaced.
    pub shadows: Vec<PathBuf>,
}

/// A skill file that could not be loaded, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadFailure {
    /// The skill folder's name (the skill has no usable name).
    pub name: String,
    pub file_path: PathBuf,
    pub source: SourceKind,
    pub reason: String,
}
