//! Which files under a memory root are memory, and what kind each is.
//!
//! * `MEMORY.md` (or `memory.md`): long-term memory;
//! * `memory/YYYY-MM-DD.md` (and `memory/YYYY-MM-DD-<slug>.md`): daily notes
//!   (OpenClaw's layout, written by almanac);
//! * `daily/YYYY-MM-DD.md`: daily notes in Arka's layout (read);
//! * `memory/archive/**.md`: long-term entries pruned from MEMORY.md;
//! * any other `memory/**/*.md` or `daily/*.md`: topic notes.
//!
//! Hidden entries, `node_modules` and temporary files are skipped; a
//! symlink whose target leaves the root is skipped with a warning.

use std::path::{Path, PathBuf};

use almanac_markdown::notes::daily_file_date;

/// The kind of a memory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    LongTerm,
    Daily,
    Archive,
    Topic,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::LongTerm => "long_term",
            FileKind::Daily => "daily",
            FileKind::Archive => "archive",
            FileKind::Topic => "topic",
        }
    }

    pub fn parse(s: &str) -> FileKind {
        match s {
            "long_term" => FileKind::LongTerm,
            "daily" => FileKind::Daily,
            "archive" => FileKind::Archive,
            _ => FileKind::Topic,
        }
    }
}

/// Classifies a root-relative path (`/`-separated); `None` when the file
/// is not memory.
pub fn classify(rel: &str) -> Option<(FileKind, Option<String>)> {
    if !rel.ends_with(".md") {
        return None;
    }
    if rel == "MEMORY.md" || rel == "memory.md" {
        return Some((FileKind::LongTerm, None));
    }
    let (dir, name) = rel.rsplit_once('/')?;
    if name.starts_with('.') {
        return None;
    }
    if dir == "memory/archive" || dir.starts_with("memory/archive/") {
        return Some((FileKind::Archive, None));
    }
    if dir == "memory" || dir == "daily" || dir.starts_with("memory/") {
        return Some(match daily_file_date(name) {
            Some(date) => (FileKind::Daily, Some(date.to_string())),
            None => (FileKind::Topic, None),
        });
    }
    None
}

/// The directories whose entries can be memory files (relative to the
/// root; `""` is the root itself). `memory/` is walked recursively by
/// [`walk`], `daily/` is not.
pub const TOP_DIRS: &[&str] = &["", "memory", "daily"];

/// A memory file found on disk.
#[derive(Debug, Clone)]
pub struct Found {
    pub rel: String,
    pub kind: FileKind,
    pub day: Option<String>,
    pub meta: std::fs::Metadata,
}

/// What a walk found, plus directories seen and warnings.
#[derive(Debug, Default)]
pub struct Walk {
    pub files: Vec<Found>,
    /// Every directory listed (relative), with its modification time.
    pub dirs: Vec<(String, i64)>,
    pub warnings: Vec<String>,
}

/// Lists every memory file under `root`.
pub fn walk(root: &Path) -> Walk {
    let mut walk = Walk::default();
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    for top in TOP_DIRS {
        let recursive = *top == "memory";
        list_dir(root, &real_root, top, recursive, &mut walk);
    }
    walk
}

/// Lists the memory files directly in (or, when `recursive`, below) the
/// root-relative directory `rel_dir`.
pub fn list_dir(root: &Path, real_root: &Path, rel_dir: &str, recursive: bool, walk: &mut Walk) {
    let dir = if rel_dir.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel_dir)
    };
    let Ok(meta) = std::fs::metadata(&dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    walk.dirs.push((rel_dir.to_string(), mtime_ns(&meta)));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        walk.warnings.push(format!("cannot list {}", dir.display()));
        return;
    };
    let mut subdirs = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            walk.warnings.push(format!(
                "skipping {}: the name is not UTF-8",
                entry.path().display()
            ));
            continue;
        };
        if name.starts_with('.')
            || name == "node_modules"
            || crate::durable::is_temp_file_name(name)
        {
            continue;
        }
        let rel = if rel_dir.is_empty() {
            name.to_string()
        } else {
            format!("{rel_dir}/{name}")
        };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let meta = if file_type.is_symlink() {
            match std::fs::canonicalize(&path) {
                Ok(target) if target.starts_with(real_root) => match std::fs::metadata(&target) {
                    Ok(meta) => meta,
                    Err(_) => continue,
                },
                Ok(target) => {
                    walk.warnings.push(format!(
                        "skipping {}: symlink leaves the memory root (points to {})",
                        rel,
                        target.display()
                    ));
                    continue;
                }
                Err(_) => continue,
            }
        } else if file_type.is_dir() || file_type.is_file() {
            match entry.metadata() {
                Ok(meta) => meta,
                Err(_) => continue,
            }
        } else {
            continue;
        };
        if meta.is_dir() {
            if recursive {
                subdirs.push(rel);
            }
            continue;
        }
        if let Some((kind, day)) = classify(&rel) {
            walk.files.push(Found {
                rel,
                kind,
                day,
                meta,
            });
        }
    }
    for sub in subdirs {
        list_dir(root, real_root, &sub, true, walk);
    }
}

/// Modification time in nanoseconds since the epoch.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// Inode number (changes when an editor saves by renaming a new file).
pub fn inode(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.ino() as i64
}

/// The long-term file of a root: `MEMORY.md`, or `memory.md` when only
/// that exists.
pub fn long_term_path(root: &Path) -> PathBuf {
    let upper = root.join("MEMORY.md");
    if !upper.exists() && root.join("memory.md").is_file() {
        return root.join("memory.md");
    }
    upper
}

/// The root-relative path of a daily note file for `date`.
pub fn daily_rel(date: &str) -> String {
    format!("memory/{date}.md")
}

/// Number of daily note files (`memory/**` and Arka's `daily/`), counted
/// from directory listings alone.
pub fn count_daily_files(root: &Path) -> usize {
    fn count(dir: &Path, recursive: bool) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut n = 0;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if recursive && name != "archive" && name != "node_modules" {
                    n += count(&entry.path(), true);
                }
            } else if daily_file_date(name).is_some() {
                n += 1;
            }
        }
        n
    }
    count(&root.join("memory"), true) + count(&root.join("daily"), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let cases = [
            ("MEMORY.md", Some((FileKind::LongTerm, None))),
            ("memory.md", Some((FileKind::LongTerm, None))),
            (
                "memory/2026-11-29.md",
                Some((FileKind::Daily, Some("2026-11-29"))),
            ),
            (
                "memory/2026-11-29-standup.md",
                Some((FileKind::Daily, Some("2026-11-29"))),
            ),
            (
                "daily/2026-11-29.md",
                Some((FileKind::Daily, Some("2026-11-29"))),
            ),
            ("memory/projects.md", Some((FileKind::Topic, None))),
            ("memory/people/alice.md", Some((FileKind::Topic, None))),
            (
                "memory/2024/2024-01-01.md",
                Some((FileKind::Daily, Some("2024-01-01"))),
            ),
            (
                "memory/archive/MEMORY-2025.md",
                Some((FileKind::Archive, None)),
            ),
            ("daily/notes.md", Some((FileKind::Topic, None))),
            ("AGENTS.md", None),
            ("notes/x.md", None),
            ("memory/2026-11-29.txt", None),
            ("memory/.hidden.md", None),
        ];
        for (rel, want) in cases {
            let want = want.map(|(k, d): (FileKind, Option<&str>)| (k, d.map(String::from)));
            assert_eq!(classify(rel), want, "{rel}");
        }
    }

    #[test]
    fn walk_finds_memory_and_skips_escaping_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("memory/topics")).unwrap();
        std::fs::create_dir_all(root.join("daily")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        for (rel, text) in [
            ("MEMORY.md", "# m"),
            ("AGENTS.md", "# a"),
            ("memory/2026-11-29.md", "- x"),
            ("memory/topics/food.md", "- sushi"),
            ("daily/2026-11-28.md", "- y"),
            ("memory/.2026-11-27.md.123.tmp", "partial"),
        ] {
            crate::durable::atomic_replace(&root.join(rel), text.as_bytes(), 0o600).unwrap();
        }
        crate::durable::atomic_replace(&outside.join("secret.md"), b"- s", 0o600).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), root.join("memory/leak.md")).unwrap();
        std::os::unix::fs::symlink(
            root.join("memory/topics/food.md"),
            root.join("memory/food-link.md"),
        )
        .unwrap();
        let walk = walk(&root);
        let mut rels: Vec<&str> = walk.files.iter().map(|f| f.rel.as_str()).collect();
        rels.sort();
        assert_eq!(
            rels,
            vec![
                "MEMORY.md",
                "daily/2026-11-28.md",
                "memory/2026-11-29.md",
                "memory/food-link.md",
                "memory/topics/food.md"
            ]
        );
        assert_eq!(walk.warnings.len(), 1, "{:?}", walk.warnings);
        assert!(walk.warnings[0].contains("memory/leak.md"));
        let dirs: Vec<&str> = walk.dirs.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(dirs, vec!["", "memory", "memory/topics", "daily"]);
        assert_eq!(count_daily_files(&root), 2);
    }
}
