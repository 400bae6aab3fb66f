//! Which files under a memory root are memory, and what kind each is.
//!
//! * `MEMORY.md` (or `memory.md`): long-term memory;
//! * `memory/YYYY-MM-DD.md` (and `memory/YYYY-MM-DD-<slug>.md`): daily notes
//!   (OpenClaw's layout, written by almanac);
//! * `daily/YYYY-MM-DD.md`: daily notes in Arka's layout (read);
//! * `memory/archive/**.md`: long-term entries pruned from MEMORY.md;
//! * any other `memory/**/*.md` or `daily/*.md`: topic notes.
//!
//! * extra paths (`agents.defaults.memorySearch.extraPaths`): folders
//!   walked for `.md` files and single `.md` files, inside the root or
//!   anywhere else; their files are topic notes (daily notes when the name
//!   is a date).
//!
//! Paths are relative to the root, `/`-separated; a file outside the root
//! (from an extra path) is named by its absolute path.
//!
//! Hidden entries, `node_modules` and temporary files are skipped.
//!
//! Containment, one rule for every reader and writer of memory (append,
//! index, search, get, context, the agent prompt): a memory file or folder
//! whose real path leaves the memory root (or the extra folder outside the
//! root it belongs to) is not used, unless its real path is inside one of
//! the allowed targets (`memory.allowSymlinkTargets`). [`Layout::check`]
//! decides; readers skip such a path with a warning, writers refuse it.
//! Extra single files are used as named: the user pointed at them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::paths::real_path;

use almanac_markdown::notes::daily_file_date;

/// The kind of a memory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FileKind {
    LongTerm,
    Daily,
    Archive,
    Topic,
}

impl FileKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FileKind::LongTerm => "long_term",
            FileKind::Daily => "daily",
            FileKind::Archive => "archive",
            FileKind::Topic => "topic",
        }
    }

    pub(crate) fn parse(s: &str) -> FileKind {
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
pub(crate) fn classify(rel: &str) -> Option<(FileKind, Option<String>)> {
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
pub(crate) const TOP_DIRS: &[&str] = &["", "memory", "daily"];

/// A memory file found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub rel: String,
    pub kind: FileKind,
    pub day: Option<String>,
    pub meta: std::fs::Metadata,
}

/// What a walk found, plus directories seen and warnings.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub files: Vec<Found>,
    /// Every directory listed (relative), with its modification time.
    pub dirs: Vec<(String, i64)>,
    pub warnings: Vec<String>,
}

/// A memory path whose real location is outside where memory may be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name}: symlink leaves the memory root {} (it resolves to {}); add that path to memory.allowSymlinkTargets to use it",
    base.display(),
    real.display()
)]
pub(crate) struct Escape {
    /// The path as named in the index (root-relative or absolute).
    pub name: String,
    /// Where it really is.
    pub real: PathBuf,
    /// The real folder it had to stay in.
    pub base: PathBuf,
}

/// Which files of a root are memory: the standard layout plus extra paths.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub root: PathBuf,
    /// Extra folders, as relative or absolute names (see the module doc).
    pub extra_dirs: Vec<String>,
    /// Extra single files, named the same way.
    pub extra_files: Vec<String>,
    /// Real paths memory may also be in (`memory.allowSymlinkTargets`).
    pub allowed_targets: Vec<PathBuf>,
    /// The root's real path, resolved once.
    real_root: OnceLock<PathBuf>,
}

impl PartialEq for Layout {
    fn eq(&self, other: &Layout) -> bool {
        self.root == other.root
            && self.extra_dirs == other.extra_dirs
            && self.extra_files == other.extra_files
            && self.allowed_targets == other.allowed_targets
    }
}

impl Eq for Layout {}

impl Layout {
    /// The standard layout of `root`.
    pub(crate) fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
            extra_dirs: Vec::new(),
            extra_files: Vec::new(),
            allowed_targets: Vec::new(),
            real_root: OnceLock::new(),
        }
    }

    /// This layout with `targets` (real paths) allowed as symlink targets.
    pub(crate) fn with_allowed_targets(mut self, targets: &[PathBuf]) -> Layout {
        self.allowed_targets = targets.to_vec();
        self
    }

    /// The root's real path (the root as given when it cannot be resolved).
    pub(crate) fn real_root(&self) -> &Path {
        self.real_root
            .get_or_init(|| real_path(&self.root).unwrap_or_else(|_| self.root.clone()))
    }

    /// Whether `real` is inside one of the allowed targets.
    pub(crate) fn allows(&self, real: &Path) -> bool {
        self.allowed_targets.iter().any(|t| real.starts_with(t))
    }

    /// Whether the memory file or folder `name` may be used: its real path
    /// (resolving symlinks, also for a path that does not exist yet) stays
    /// inside the root, or the extra folder outside the root it belongs
    /// to, or an allowed target. Extra files and folders are used as
    /// named.
    pub(crate) fn check(&self, name: &str) -> Result<(), Escape> {
        if name.is_empty()
            || self.extra_files.iter().any(|f| f == name)
            || self.extra_dirs.iter().any(|d| d == name)
        {
            return Ok(());
        }
        let path = self.path_of(name);
        // The common case, a plain file in a plain folder of the root, is
        // settled without resolving anything.
        if !name.starts_with('/') && !has_symlink_below(&self.root, name) {
            return Ok(());
        }
        let Ok(real) = real_path(&path) else {
            // Unresolvable (a loop, no permission): reading or writing it
            // reports the problem itself.
            return Ok(());
        };
        let parent = name.rsplit_once('/').map_or("", |(dir, _)| dir);
        let base = self.containment(parent);
        if real.starts_with(&base) || self.allows(&real) {
            return Ok(());
        }
        Err(Escape {
            name: name.to_string(),
            real,
            base,
        })
    }

    /// The standard layout plus `extra` paths (absolute). Paths that do
    /// not exist are kept (they may appear later); a folder is walked, a
    /// `.md` file indexed; anything else is reported.
    pub(crate) fn with_extra(root: &Path, extra: &[PathBuf]) -> (Layout, Vec<String>) {
        let mut layout = Layout::new(root);
        let mut warnings = Vec::new();
        for path in extra {
            let name = layout.name_of(path);
            let is_md = path.extension().is_some_and(|e| e == "md");
            if path.is_dir() || (!path.exists() && !is_md) {
                if !layout.extra_dirs.contains(&name) && classify(&format!("{name}/x.md")).is_none()
                {
                    layout.extra_dirs.push(name);
                }
            } else if is_md {
                if !layout.extra_files.contains(&name) {
                    layout.extra_files.push(name);
                }
            } else {
                warnings.push(format!(
                    "extra memory path {} is neither a folder nor a .md file; ignored",
                    path.display()
                ));
            }
        }
        (layout, warnings)
    }

    /// A path's name in the index: relative to the root when inside it,
    /// else absolute.
    pub(crate) fn name_of(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().replace('\\', "/"),
            Ok(_) => String::new(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// Where a named file or folder is.
    pub(crate) fn path_of(&self, name: &str) -> PathBuf {
        if name.is_empty() {
            self.root.clone()
        } else {
            // An absolute name replaces the root.
            self.root.join(name)
        }
    }

    /// The kind (and day) of a named file, `None` when it is not memory.
    pub(crate) fn classify(&self, rel: &str) -> Option<(FileKind, Option<String>)> {
        if let Some(found) = classify(rel) {
            return Some(found);
        }
        let in_extra_dir = self.extra_dirs.iter().any(|d| {
            d.is_empty()
                || rel
                    .strip_prefix(d.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        });
        let is_extra_file = self.extra_files.iter().any(|f| f == rel);
        if !(is_extra_file || in_extra_dir && rel.ends_with(".md")) {
            return None;
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name.starts_with('.') {
            return None;
        }
        Some(match daily_file_date(name) {
            Some(date) => (FileKind::Daily, Some(date.to_string())),
            None => (FileKind::Topic, None),
        })
    }

    /// The folders listed by a walk, with whether they are walked
    /// recursively.
    pub(crate) fn top_dirs(&self) -> Vec<(String, bool)> {
        let mut dirs: Vec<(String, bool)> = TOP_DIRS
            .iter()
            .map(|d| (d.to_string(), *d == "memory"))
            .collect();
        dirs.extend(self.extra_dirs.iter().map(|d| (d.clone(), true)));
        dirs
    }

    /// Whether new subfolders of `dir` hold memory.
    pub(crate) fn is_recursive(&self, dir: &str) -> bool {
        let under =
            |top: &str| dir == top || dir.strip_prefix(top).is_some_and(|r| r.starts_with('/'));
        under("memory") || self.extra_dirs.iter().any(|d| under(d))
    }

    /// The real folder symlinks found in `dir` must stay inside: the extra
    /// folder outside the root it belongs to, else the root.
    pub(crate) fn containment(&self, dir: &str) -> PathBuf {
        let under =
            |top: &str| dir == top || dir.strip_prefix(top).is_some_and(|r| r.starts_with('/'));
        match self
            .extra_dirs
            .iter()
            .filter(|d| d.starts_with('/') && under(d))
            .max_by_key(|d| d.len())
        {
            Some(extra) => {
                let path = self.path_of(extra);
                std::fs::canonicalize(&path).unwrap_or(path)
            }
            None => self.real_root().to_path_buf(),
        }
    }

    /// Lists every memory file.
    pub(crate) fn walk(&self) -> Walk {
        let mut walk = Walk::default();
        for (dir, recursive) in self.top_dirs() {
            // A top folder inside the root (`memory/`, `daily/`, an extra
            // folder) may itself be a link leaving it.
            if !dir.starts_with('/')
                && let Err(escape) = self.check(&dir)
            {
                // The root's listing may have reported the same link.
                let warning = format!("skipping {escape}");
                if !walk.warnings.contains(&warning) {
                    walk.warnings.push(warning);
                }
                continue;
            }
            let real_base = self.containment(&dir);
            list_dir_in(self, &real_base, &dir, recursive, &mut walk);
        }
        for name in &self.extra_files {
            let path = self.path_of(name);
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    if let Some((kind, day)) = self.classify(name) {
                        walk.files.push(Found {
                            rel: name.clone(),
                            kind,
                            day,
                            meta,
                        });
                    }
                }
                Ok(_) => walk
                    .warnings
                    .push(format!("extra memory path {name} is not a file; ignored")),
                Err(_) => {}
            }
        }
        walk.files.sort_by(|a, b| a.rel.cmp(&b.rel));
        walk.files.dedup_by(|a, b| a.rel == b.rel);
        walk
    }
}

/// Lists the memory files directly in (or, when `recursive`, below) the
/// folder named `rel_dir`; symlinks must resolve inside `real_base`.
pub(crate) fn list_dir_in(
    layout: &Layout,
    real_base: &Path,
    rel_dir: &str,
    recursive: bool,
    walk: &mut Walk,
) {
    let dir = layout.path_of(rel_dir);
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
    let mut listed = Vec::new();
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
        // The listing tells files from folders: other files need no stat.
        if file_type.is_file() && layout.classify(&rel).is_none() {
            continue;
        }
        if file_type.is_symlink() || file_type.is_dir() || file_type.is_file() {
            listed.push((rel, entry, file_type));
        }
    }
    // Stating thousands of daily files is most of a full sync: spread it.
    let stated = crate::par::map(
        &listed,
        |(rel, entry, file_type)| -> Result<Option<std::fs::Metadata>, String> {
            if !file_type.is_symlink() {
                return Ok(entry.metadata().ok());
            }
            match std::fs::canonicalize(entry.path()) {
                Ok(target) if target.starts_with(real_base) || layout.allows(&target) => {
                    Ok(std::fs::metadata(&target).ok())
                }
                Ok(target) => Err(format!(
                    "skipping {}",
                    Escape {
                        name: rel.clone(),
                        real: target,
                        base: real_base.to_path_buf(),
                    }
                )),
                Err(_) => Ok(None),
            }
        },
    );
    let mut subdirs = Vec::new();
    for ((rel, _, _), meta) in listed.into_iter().zip(stated) {
        let meta = match meta {
            Ok(Some(meta)) => meta,
            Ok(None) => continue,
            Err(warning) => {
                walk.warnings.push(warning);
                continue;
            }
        };
        if meta.is_dir() {
            if recursive {
                subdirs.push(rel);
            }
            continue;
        }
        if let Some((kind, day)) = layout.classify(&rel) {
            walk.files.push(Found {
                rel,
                kind,
                day,
                meta,
            });
        }
    }
    for sub in subdirs {
        list_dir_in(layout, real_base, &sub, true, walk);
    }
}

/// Whether a folder or the file on the way from `root` to the relative
/// `name` is a symlink (one `lstat` per component).
fn has_symlink_below(root: &Path, name: &str) -> bool {
    let mut path = root.to_path_buf();
    for part in name.split('/') {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => return true,
            Ok(_) => {}
            // Nothing further exists: nothing further can be a link.
            Err(_) => return false,
        }
    }
    false
}

/// Modification time in nanoseconds since the epoch.
pub(crate) fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// Inode number (changes when an editor saves by renaming a new file).
pub(crate) fn inode(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.ino() as i64
}

/// The long-term file of a root: `MEMORY.md`, or `memory.md` when only
/// that exists.
pub(crate) fn long_term_path(root: &Path) -> PathBuf {
    let upper = root.join("MEMORY.md");
    if !upper.exists() && root.join("memory.md").is_file() {
        return root.join("memory.md");
    }
    upper
}

/// The root-relative path of a daily note file for `date`.
pub(crate) fn daily_rel(date: &str) -> String {
    format!("memory/{date}.md")
}

/// Number of daily note files (`memory/**` and Arka's `daily/`), counted
/// from directory listings alone.
pub(crate) fn count_daily_files(root: &Path) -> usize {
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
    fn extra_paths_extend_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::create_dir_all(dir.path().join("shared")).unwrap();
        std::fs::write(root.join("people.md"), "- a").unwrap();
        std::fs::write(dir.path().join("todo.txt"), "x").unwrap();
        let extras = [
            root.join("notes"),
            dir.path().join("shared"),
            root.join("people.md"),
            dir.path().join("todo.txt"),
            root.join("memory/topics"),
        ];
        let (layout, warnings) = Layout::with_extra(&root, &extras);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("todo.txt"));
        let shared = dir.path().join("shared").display().to_string();
        assert_eq!(
            layout.extra_dirs,
            vec!["notes".to_string(), shared.clone()],
            "memory/ is walked already"
        );
        assert_eq!(layout.extra_files, vec!["people.md".to_string()]);
        let cases = [
            ("notes/garden.md", Some(FileKind::Topic)),
            ("notes/deep/2026-01-02.md", Some(FileKind::Daily)),
            ("notes/garden.txt", None),
            ("notes/.hidden.md", None),
            ("people.md", Some(FileKind::Topic)),
            ("AGENTS.md", None),
            ("notesx/a.md", None),
        ];
        for (rel, want) in cases {
            assert_eq!(layout.classify(rel).map(|(k, _)| k), want, "{rel}");
        }
        let abs = format!("{shared}/trip.md");
        assert_eq!(layout.classify(&abs).map(|(k, _)| k), Some(FileKind::Topic));
        assert_eq!(layout.path_of(&abs), dir.path().join("shared/trip.md"));
        assert!(
            layout.is_recursive("notes/deep")
                && layout.is_recursive(&shared)
                && !layout.is_recursive("daily")
        );
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
        let walk = Layout::new(&root).walk();
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

    #[test]
    fn containment_table() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        let allowed = dir.path().join("allowed");
        let shared = dir.path().join("shared");
        for d in [&root, &outside, &allowed, &shared] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(root.join("memory/topics")).unwrap();
        std::fs::write(outside.join("MEMORY.md"), "- x").unwrap();
        std::fs::write(allowed.join("a.md"), "- a").unwrap();
        std::fs::write(root.join("memory/topics/food.md"), "- sushi").unwrap();
        symlink(outside.join("MEMORY.md"), root.join("MEMORY.md")).unwrap();
        symlink(outside.join("gone.md"), root.join("memory/dangling.md")).unwrap();
        symlink(
            root.join("memory/topics/food.md"),
            root.join("memory/inside.md"),
        )
        .unwrap();
        symlink(allowed.join("a.md"), root.join("memory/allowed.md")).unwrap();
        symlink(&outside, root.join("daily")).unwrap();
        symlink(outside.join("MEMORY.md"), shared.join("leak.md")).unwrap();
        let shared_name = shared.display().to_string();
        let layout = Layout {
            extra_dirs: vec![shared_name.clone()],
            ..Layout::new(&root)
        }
        .with_allowed_targets(&[std::fs::canonicalize(&allowed).unwrap()]);
        let cases: Vec<(String, bool)> = vec![
            ("memory/topics/food.md".into(), true),
            ("memory/2026-11-29.md".into(), true),
            ("memory/new/2026-11-29.md".into(), true),
            ("memory/inside.md".into(), true),
            ("memory/allowed.md".into(), true),
            ("MEMORY.md".into(), false),
            ("memory/dangling.md".into(), false),
            ("daily".into(), false),
            ("daily/2026-11-29.md".into(), false),
            (shared_name.clone(), true),
            (format!("{shared_name}/leak.md"), false),
            (format!("{shared_name}/new.md"), true),
        ];
        for (name, ok) in cases {
            let result = layout.check(&name);
            assert_eq!(result.is_ok(), ok, "{name}: {result:?}");
            if let Err(escape) = result {
                assert_eq!(escape.name, name);
                assert!(!escape.real.starts_with(&escape.base), "{escape}");
                let text = escape.to_string();
                assert!(text.contains("memory.allowSymlinkTargets"), "{text}");
            }
        }
        // Without the allowed target, the link into it is refused too.
        let strict = Layout::new(&root);
        assert!(strict.check("memory/allowed.md").is_err());
        // The real path of things that do not exist yet.
        let real_outside = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(
            real_path(&root.join("daily/new/2026-11-29.md")).unwrap(),
            real_outside.join("new/2026-11-29.md")
        );
        assert_eq!(
            real_path(&root.join("memory/dangling.md")).unwrap(),
            real_outside.join("gone.md")
        );
    }

    #[test]
    fn walk_skips_a_memory_folder_linked_outside_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("2026-11-29.md"), "- secret").unwrap();
        std::fs::write(root.join("MEMORY.md"), "- m").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("memory")).unwrap();
        let walk = Layout::new(&root).walk();
        let rels: Vec<&str> = walk.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["MEMORY.md"]);
        assert_eq!(walk.warnings.len(), 1, "{:?}", walk.warnings);
        assert!(walk.warnings[0].starts_with("skipping memory: symlink leaves the memory root"));
        let allowed = Layout::new(&root)
            .with_allowed_targets(&[std::fs::canonicalize(&outside).unwrap()])
            .walk();
        let rels: Vec<&str> = allowed.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["MEMORY.md", "memory/2026-11-29.md"]);
        assert!(allowed.warnings.is_empty(), "{:?}", allowed.warnings);
    }
}
