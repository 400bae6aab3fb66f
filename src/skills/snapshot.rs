//! What makes the skills turns keep stale, and which file changes matter.
//!
//! * [`inputs_fingerprint`] hashes every input of gating but the files
//!   (PATH, the variables skills require, `SKILLS_PATH`,
//!   `SKILL_PERMISSIONS`, the config), so the stored snapshot
//!   ([`super::stored`]) is rebuilt when one changes.
//! * The gateway's skills watcher reacts to changes of `SKILL.md` and
//!   manifest files (and skill folders) under the roots ([`relevant`]),
//!   ignoring `.git`, `node_modules` and build folders; a root that does
//!   not exist yet is watched through its nearest existing parent until
//!   it is created ([`arm_roots`]).

use std::path::{Path, PathBuf};

use super::parse::MANIFEST_NAMES;
use super::{SkillsInputs, SkillsReport};

/// Path segments whose changes never matter.
const IGNORED_SEGMENTS: &[&str] = &[
    ".git",
    "node_modules",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    "build",
    ".cache",
];

/// The environment variables the skills of `report` read for gating and
/// their own keys, sorted.
pub(crate) fn required_vars(report: &SkillsReport) -> Vec<String> {
    let mut vars: Vec<String> = report
        .skills
        .iter()
        .flat_map(|s| {
            s.skill
                .requires
                .env
                .iter()
                .chain(&s.skill.requires.env_any)
                .chain(s.skill.primary_env.iter())
        })
        .cloned()
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

/// A hash of every input of gating but the files: `PATH`, `SKILLS_PATH`,
/// `HOME`, `SKILL_PERMISSIONS`, the values of `vars`, the effective
/// config, the config file's identity, the roots and the folders symlinked
/// skills may point into.
pub(crate) fn inputs_fingerprint(inputs: &SkillsInputs, vars: &[String]) -> u64 {
    let mut text = String::new();
    for key in ["PATH", "SKILLS_PATH", "HOME"] {
        text.push_str(inputs.env.get(key).map_or("", String::as_str));
        text.push('\0');
    }
    text.push_str(inputs.permissions_override.as_deref().unwrap_or("\u{1}"));
    for v in vars {
        text.push_str(v);
        text.push('=');
        text.push_str(inputs.env.get(v).map_or("\u{1}", String::as_str));
        text.push('\0');
    }
    // Gates read config keys (`requires.config`), which environment
    // variables and flags can set as well as the file.
    if let Ok(config) = serde_json::to_string(&inputs.config.config) {
        text.push_str(&config);
    }
    let config = &inputs.config.file.path;
    if let Ok(meta) = std::fs::metadata(config) {
        use std::os::unix::fs::MetadataExt;
        text.push_str(&format!(
            "{}:{}:{}:{}",
            config.display(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.size()
        ));
    }
    for root in &inputs.roots {
        text.push_str(root.source.short());
        text.push_str(&root.dir.to_string_lossy());
        text.push('\0');
    }
    if let Some(dir) = &inputs.embedded_bundled {
        text.push_str("embedded bundled ");
        text.push_str(&dir.to_string_lossy());
        text.push('\0');
    }
    for dir in inputs.allow_symlink_targets.iter().chain(&inputs.homes) {
        text.push_str(&dir.to_string_lossy());
        text.push('\0');
    }
    crate::paths::fnv1a64(text.as_bytes())
}

/// Watches each root in `missing` that exists now (recursively) and drops
/// it from the list; for the others, watches the nearest existing parent
/// (not recursively) so their creation is seen.
pub(crate) fn arm_roots(
    watcher: &mut notify::RecommendedWatcher,
    missing: &mut Vec<PathBuf>,
) -> notify::Result<()> {
    use notify::{RecursiveMode, Watcher};
    let mut still_missing = Vec::new();
    let nearest_parent = |root: &Path| {
        root.ancestors()
            .skip(1)
            .find(|a| a.is_dir())
            .map(Path::to_path_buf)
    };
    for root in missing.drain(..) {
        loop {
            if root.is_dir() {
                watcher.watch(&root, RecursiveMode::Recursive)?;
                break;
            }
            let Some(parent) = nearest_parent(&root) else {
                still_missing.push(root);
                break;
            };
            // A parent that vanishes meanwhile is retried on the next event.
            let _ = watcher.watch(&parent, RecursiveMode::NonRecursive);
            // A deeper folder created before the watch took hold sends no
            // event: look again until nothing changed.
            if nearest_parent(&root).as_ref() == Some(&parent) && !root.is_dir() {
                still_missing.push(root);
                break;
            }
        }
    }
    *missing = still_missing;
    Ok(())
}

/// Whether a changed path can change the skills.
pub(crate) fn relevant(path: &Path) -> bool {
    if path
        .components()
        .any(|c| IGNORED_SEGMENTS.iter().any(|s| c.as_os_str() == *s))
    {
        return false;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name == "SKILL.md" || MANIFEST_NAMES.contains(&name.as_str()) || !name.contains('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_skill_files_and_folders_are_relevant() {
        for (path, want) in [
            ("/ws/skills/x/SKILL.md", true),
            ("/ws/skills/x/skill.json", true),
            ("/ws/skills/new-skill", true),
            ("/ws/skills/x/README.md", false),
            ("/ws/skills/x/node_modules/y/SKILL.md", false),
            ("/ws/skills/.git/SKILL.md", false),
            ("/ws/skills/x/scripts/run.py", false),
        ] {
            assert_eq!(relevant(Path::new(path)), want, "{path}");
        }
    }

    /// A root created after watching began is seen: an event above it
    /// arms it (as the gateway's watcher does), and then a skill written
    /// into it sends its own event.
    #[test]
    fn a_root_created_later_is_watched_once_it_exists() {
        use std::sync::mpsc;
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        // Neither the root nor its parents exist yet.
        let root = dir.path().join("later/workspace/skills");
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher = notify::recommended_watcher(tx).unwrap();
        let mut missing = vec![root.clone()];
        arm_roots(&mut watcher, &mut missing).unwrap();
        assert_eq!(missing, std::slice::from_ref(&root), "not there yet");
        // Waits for the watcher's events, not a fixed time.
        let deadline = Instant::now() + Duration::from_secs(10);
        let next_event = || {
            let left = deadline.saturating_duration_since(Instant::now());
            rx.recv_timeout(left).expect("an event in time").unwrap()
        };
        std::fs::create_dir_all(root.join("late")).unwrap();
        while !missing.is_empty() {
            let event = next_event();
            if event
                .paths
                .iter()
                .any(|p| missing.iter().any(|root| root.starts_with(p)))
            {
                arm_roots(&mut watcher, &mut missing).unwrap();
            }
        }
        let skill = root.join("late/SKILL.md");
        std::fs::write(&skill, "---\nname: late\ndescription: d\n---\n").unwrap();
        while !next_event().paths.contains(&skill) {}
        assert!(relevant(&skill));
    }
}
