//! `skills.*` and `tools.*`: which skills load and how they run, and which
//! tools the model is offered and what `exec` may run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::SecurityConfig;

/// Skills (`skills.*`, as in OpenClaw).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsConfig {
    /// When non-empty, only these bundled skills (by key or name) are used.
    pub allow_bundled: Vec<String>,
    pub load: SkillsLoadConfig,
    pub limits: SkillsLimits,
    /// Per-skill settings by skill key.
    pub entries: BTreeMap<String, SkillEntryConfig>,
    pub install: SkillsInstallConfig,
    /// Permissions skills may declare (`SKILL_PERMISSIONS`); default
    /// `read, write, network, shell`. An empty list allows none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_permissions: Option<Vec<String>>,
    pub run: SkillsRunConfig,
}

/// Limits of a skill's process (`skills run`, skill tools in agent turns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsRunConfig {
    /// Seconds a skill may run before its whole process group is stopped.
    pub timeout_sec: u32,
    /// Bytes of output (stdout and stderr together) shown; the rest is
    /// read and dropped.
    pub max_output_bytes: u32,
}

impl Default for SkillsRunConfig {
    fn default() -> Self {
        SkillsRunConfig {
            timeout_sec: 600,
            max_output_bytes: 1_000_000,
        }
    }
}

/// The agent's tools (`tools.*`, OpenClaw's keys): which tools the model
/// is offered, and what `exec` may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ToolsConfig {
    /// The base set of tools; unset is `full` (no restriction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ToolProfile>,
    /// Tool names and `group:*` entries (`*` wildcards, any case) added to
    /// the profile's set; without a profile, the only tools offered.
    pub allow: Vec<String>,
    /// Tools never offered, whatever else says (deny wins).
    pub deny: Vec<String>,
    pub exec: ExecConfig,
    /// The tools a spawned child is offered.
    pub subagents: super::SubagentToolsConfig,
}

/// `tools.profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ToolProfile {
    Minimal,
    Coding,
    Messaging,
    Full,
}

/// `tools.exec.*`: what the `exec` tool may run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ExecConfig {
    /// `deny` (no command runs), `allowlist` (only `safeBins`, checked
    /// word by word) or `full` (any command, as given).
    pub security: ExecSecurity,
    /// Approval on a terminal: `off`, `on-miss` (when the allowlist does
    /// not allow a command) or `always`. Unset: `on-miss` when
    /// `security.actions` is on, else `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<ExecAsk>,
    /// Programs `allowlist` mode runs. The built-in ones keep their
    /// argument rules (standard input only, no file options); any other
    /// name runs with any arguments.
    pub safe_bins: Vec<String>,
    /// Also allow the binaries eligible skills require (`requires.bins`),
    /// with any arguments; shells and interpreters are never added this way.
    pub auto_allow_skills: bool,
    /// Default seconds a command may run (the model may ask for up to
    /// 600, or this when larger).
    pub timeout_sec: u32,
}

/// The programs `tools.exec.safeBins` holds by default: stream filters and
/// pure utilities that read no file, run no other program and reach no
/// network.
pub(crate) const DEFAULT_SAFE_BINS: &[&str] = &[
    "echo", "printf", "date", "seq", "tr", "cut", "sort", "uniq", "wc",
];

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            security: ExecSecurity::Allowlist,
            ask: None,
            safe_bins: DEFAULT_SAFE_BINS.iter().map(|b| b.to_string()).collect(),
            auto_allow_skills: false,
            timeout_sec: 60,
        }
    }
}

/// `tools.exec.security`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExecSecurity {
    Deny,
    Allowlist,
    Full,
}

/// `tools.exec.ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ExecAsk {
    Off,
    OnMiss,
    Always,
}

impl ToolsConfig {
    /// The effective `tools.exec.ask`: as set, else from `security.actions`
    /// (under the `security.enabled` master switch).
    pub(crate) fn exec_ask(&self, security: &SecurityConfig) -> ExecAsk {
        self.exec
            .ask
            .unwrap_or(if security.enabled && security.actions {
                ExecAsk::OnMiss
            } else {
                ExecAsk::Off
            })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsLoadConfig {
    /// Extra skill folders, lowest precedence (`~` allowed).
    pub extra_dirs: Vec<String>,
    /// Watch skill folders for changes (the gateway's snapshot).
    pub watch: bool,
    pub watch_debounce_ms: u64,
    /// Real paths that symlinked skills in the workspace, project and extra
    /// folders may point into.
    pub allow_symlink_targets: Vec<String>,
}

impl Default for SkillsLoadConfig {
    fn default() -> Self {
        SkillsLoadConfig {
            extra_dirs: Vec::new(),
            watch: true,
            watch_debounce_ms: 250,
            allow_symlink_targets: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsLimits {
    pub max_candidates_per_root: u32,
    pub max_skills_loaded_per_source: u32,
    pub max_skills_in_prompt: u32,
    pub max_skills_prompt_chars: u32,
    pub max_skill_file_bytes: u64,
}

impl Default for SkillsLimits {
    fn default() -> Self {
        SkillsLimits {
            max_candidates_per_root: 300,
            max_skills_loaded_per_source: 200,
            max_skills_in_prompt: 150,
            max_skills_prompt_chars: 30_000,
            max_skill_file_bytes: 256_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillEntryConfig {
    /// `false` turns the skill off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Environment values given to this skill's runs only.
    pub env: BTreeMap<String, String>,
    /// Given to the skill as its `primaryEnv` variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Free-form settings for the skill.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub config: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SkillsInstallConfig {
    pub prefer_brew: bool,
    pub node_manager: String,
}

impl Default for SkillsInstallConfig {
    fn default() -> Self {
        SkillsInstallConfig {
            prefer_brew: true,
            node_manager: "npm".to_string(),
        }
    }
}
