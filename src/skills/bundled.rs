//! The skills shipped inside the binary, written out to a folder so they
//! have real paths (the model reads `SKILL.md` by path; plugins run).
//!
//! The folder (`<state dir>/bundled-skills`, or `ALMANAC_BUNDLED_SKILLS_DIR`)
//! is derived: it is rewritten whenever its stamp differs from this
//! build's, and never holds user data. It is written only by commands that
//! run skills (agent turns, `skills run`); commands that only read parse
//! the skills from the binary instead ([`embedded_skills`]), as they would
//! be once written out.

use std::path::Path;

use super::parse::{self, MANIFEST_NAMES};
use super::types::{Skill, SourceKind};
use crate::durable::{self, PRIVATE_FILE_MODE};

/// `(relative path, contents, executable)`.
const FILES: &[(&str, &str, bool)] = &[
    (
        "demo_echo/skill.json",
        include_str!("bundled/demo_echo/skill.json"),
        false,
    ),
    (
        "demo_echo/run.sh",
        include_str!("bundled/demo_echo/run.sh"),
        true,
    ),
    (
        "system-health/SKILL.md",
        include_str!("bundled/system-health/SKILL.md"),
        false,
    ),
];

const STAMP: &str = ".almanac-bundle";

fn fingerprint() -> String {
    let mut all = String::from(env!("CARGO_PKG_VERSION"));
    for (path, text, exec) in FILES {
        all.push_str(path);
        all.push_str(text);
        all.push(if *exec { 'x' } else { '-' });
    }
    format!("{:016x}", crate::paths::fnv1a64(all.as_bytes()))
}

/// Whether `dir` holds this build's bundled skills.
pub(crate) fn is_current(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == fingerprint())
}

/// This build's bundled skills parsed from the binary, with the paths they
/// have once written out to `dir` (the same skills discovery reads there).
pub(crate) fn embedded_skills(dir: &Path) -> Vec<Skill> {
    let mut folders: Vec<&str> = FILES
        .iter()
        .filter_map(|(rel, _, _)| rel.split_once('/').map(|(folder, _)| folder))
        .collect();
    folders.dedup();
    let mut skills = Vec::new();
    for folder in folders {
        let base = dir.join(folder);
        let file = |name: &str| {
            FILES
                .iter()
                .find(|(rel, _, _)| {
                    rel.strip_prefix(folder).and_then(|r| r.strip_prefix('/')) == Some(name)
                })
                .map(|(_, text, _)| *text)
        };
        let manifest = MANIFEST_NAMES
            .iter()
            .find_map(|name| file(name).map(|text| (*name, text)));
        let parsed = match (file("SKILL.md"), manifest) {
            (Some(md), manifest) => parse::parse_skill_md(
                &base.join("SKILL.md"),
                &base,
                folder,
                SourceKind::Bundled,
                md,
            )
            .map(|mut skill| {
                if let Some((name, text)) = manifest
                    && let Ok(m) = parse::parse_manifest(
                        &base.join(name),
                        &base,
                        folder,
                        SourceKind::Bundled,
                        text,
                    )
                {
                    parse::merge_manifest_into(&mut skill, m);
                }
                skill
            }),
            (None, Some((name, text))) => {
                parse::parse_manifest(&base.join(name), &base, folder, SourceKind::Bundled, text)
            }
            (None, None) => continue,
        };
        // A shipped skill always parses (tested); its entry file is in the
        // binary even though the folder is not written out yet.
        if let Ok(mut skill) = parsed {
            skill
                .diagnostics
                .retain(|d| !(d.starts_with("entry `") && d.ends_with("` does not exist")));
            skills.push(skill);
        }
    }
    skills
}

/// Makes sure `dir` holds this build's bundled skills.
pub(crate) fn materialize(dir: &Path) -> std::io::Result<()> {
    let stamp = fingerprint();
    if std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == stamp) {
        return Ok(());
    }
    for (rel, text, exec) in FILES {
        let mode = if *exec { 0o700 } else { PRIVATE_FILE_MODE };
        let path = dir.join(rel);
        // An existing file keeps its mode in atomic_replace; set ours.
        durable::atomic_replace(&path, text.as_bytes(), mode)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    durable::atomic_replace(&dir.join(STAMP), stamp.as_bytes(), PRIVATE_FILE_MODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_skills_are_what_discovery_reads_once_written_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("bundled");
        let embedded = embedded_skills(&root);
        assert!(!root.exists(), "nothing written");
        assert_eq!(embedded.len(), 2);
        materialize(&root).unwrap();
        assert!(is_current(&root));
        let limits = crate::config::SkillsLimits::default();
        let discovered =
            super::super::discover::discover(&super::super::discover::DiscoverOptions {
                roots: vec![super::super::discover::Root {
                    source: SourceKind::Bundled,
                    dir: root.clone(),
                }],
                limits: &limits,
                allow_symlink_targets: Vec::new(),
                home: None,
                preloaded: Vec::new(),
            });
        assert!(discovered.failures.is_empty(), "{:?}", discovered.failures);
        let json = |skills: &[Skill]| serde_json::to_value(skills).unwrap();
        assert_eq!(json(&discovered.skills), json(&embedded));
    }

    #[test]
    fn materialize_writes_once_and_repairs_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("bundled");
        materialize(&root).unwrap();
        let run = root.join("demo_echo/run.sh");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&run).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(root.join("system-health/SKILL.md").is_file());
        // A changed stamp (another build) rewrites the files.
        std::fs::write(root.join("system-health/SKILL.md"), "tampered").unwrap();
        std::fs::write(root.join(STAMP), "other").unwrap();
        materialize(&root).unwrap();
        assert!(
            std::fs::read_to_string(root.join("system-health/SKILL.md"))
                .unwrap()
                .starts_with("---\nname: system-health")
        );
    }
}
