//! The skills shipped inside the binary, written out to a folder so they
//! have real paths (the model reads `SKILL.md` by path; plugins run).
//!
//! The folder (`<state dir>/bundled-skills`, or `ALMANAC_BUNDLED_SKILLS_DIR`)
//! is derived: it is rewritten whenever its stamp differs from this
//! build's, and never holds user data.

use std::path::Path;

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

/// Makes sure `dir` holds this build's bundled skills.
pub fn materialize(dir: &Path) -> std::io::Result<()> {
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
