//! Finding skills in their six sources and merging them by name.
//!
//! Per root (OpenClaw's rules): a root with a `skills/` folder whose
//! children hold `SKILL.md` is read from there; a root that is itself a
//! skill is one skill; otherwise each child folder (hidden folders and
//! `node_modules` skipped, symlinks followed) is a skill, or a group whose
//! children are skills. Limits per root and per source apply with a
//! warning. A skill whose real path leaves its root (except in the managed
//! and personal sources, where only files leaving their own folder count)
//! is not loaded and is reported with the reason.
//!
//! Merge: sources are read lowest precedence first; a later skill replaces
//! a same-named one whole, and the replacement is recorded. The result is
//! sorted by name.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::parse::{self, MANIFEST_NAMES};
use super::types::{LoadFailure, Skill, SourceKind};
use crate::config::SkillsLimits;

/// One folder to read skills from.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    pub source: SourceKind,
    pub dir: PathBuf,
}

/// Inputs of discovery.
#[derive(Debug, Clone)]
pub(crate) struct DiscoverOptions<'a> {
    pub roots: Vec<Root>,
    pub limits: &'a SkillsLimits,
    /// Real paths symlinked skills in the workspace, project and extra
    /// sources may point into.
    pub allow_symlink_targets: Vec<PathBuf>,
    /// For `~` in messages.
    pub home: Option<PathBuf>,
    /// Skills read elsewhere (the bundled skills from the binary), merged
    /// with the precedence of their source.
    pub preloaded: Vec<Skill>,
}

/// What discovery found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Discovery {
    pub skills: Vec<Skill>,
    pub failures: Vec<LoadFailure>,
    pub warnings: Vec<String>,
    /// Every folder listed or probed and every skill file read: a change
    /// of any of them (their modification time, size or identity) can
    /// change the outcome, and nothing else on disk can.
    pub watched: Vec<PathBuf>,
}

pub(crate) fn discover(opts: &DiscoverOptions<'_>) -> Discovery {
    let mut out = Discovery::default();
    let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
    // Listing the roots is cheap and serial; reading and parsing the
    // skills is spread over the cores, and the results are taken back in
    // listing order so the outcome does not depend on scheduling.
    let mut plans = Vec::new();
    for source in SourceKind::ALL {
        for root in opts.roots.iter().filter(|r| r.source == source) {
            plans.push(plan_root(root, opts));
        }
    }
    let visits: Vec<(&RootPlan, &Folder)> = plans
        .iter()
        .flat_map(|p| p.visits.iter().map(move |v| (p, v)))
        .collect();
    let mut results = crate::par::map(&visits, |(plan, visit)| {
        let mut local = Discovery::default();
        visit_folder(plan, visit, opts, &mut local);
        local
    })
    .into_iter();
    let mut plans = plans.into_iter().peekable();
    for source in SourceKind::ALL {
        let mut loaded_for_source: Vec<Skill> = Vec::new();
        while let Some(plan) = plans.next_if(|p| p.root.source == source) {
            out.warnings.extend(plan.warnings);
            out.watched.extend(plan.watched);
            for mut local in results.by_ref().take(plan.visits.len()) {
                out.warnings.append(&mut local.warnings);
                out.failures.append(&mut local.failures);
                out.watched.append(&mut local.watched);
                loaded_for_source.append(&mut local.skills);
            }
        }
        loaded_for_source.extend(
            opts.preloaded
                .iter()
                .filter(|s| s.source == source)
                .cloned(),
        );
        let cap = opts.limits.max_skills_loaded_per_source as usize;
        if loaded_for_source.len() > cap {
            loaded_for_source.sort_by(|a, b| a.name.cmp(&b.name));
            out.warnings.push(format!(
                "{} {} skills found; only the first {cap} by name are loaded (skills.limits.maxSkillsLoadedPerSource)",
                loaded_for_source.len(),
                source.short()
            ));
            loaded_for_source.truncate(cap);
        }
        for mut skill in loaded_for_source {
            if let Some(previous) = by_name.remove(&skill.name) {
                if previous.source == skill.source {
                    out.warnings.push(format!(
                        "two {} skills are named `{}`: {} replaces {}",
                        source.short(),
                        skill.name,
                        skill.file_path.display(),
                        previous.file_path.display()
                    ));
                }
                skill.shadows = previous.shadows;
                skill.shadows.push(previous.file_path);
            }
            by_name.insert(skill.name.clone(), skill);
        }
    }
    out.skills = by_name.into_values().collect();
    out.skills.sort_by(|a, b| {
        a.name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then(a.name.cmp(&b.name))
    });
    out
}

/// A folder met during the walk and where it really is. The real path is
/// carried down from the canonical root and only resolved again where a
/// symlink is crossed, which keeps discovery to a few system calls per skill.
#[derive(Debug, Clone)]
struct Folder {
    path: PathBuf,
    real: PathBuf,
}

/// A skill's files in a folder, as probed.
#[derive(Debug)]
struct SkillFiles {
    /// The open folder: its files are looked up from here rather than by
    /// walking the whole path again for each (most of the cost of a large
    /// skill set is path lookups).
    dir: OwnedFd,
    /// `SKILL.md`, when it is a file (or a link to one).
    skill_md: Option<Probed>,
    /// The first manifest present.
    manifest: Option<Probed>,
}

#[derive(Debug)]
struct Probed {
    name: &'static str,
    path: PathBuf,
    /// A symlink: its target must be resolved for the containment check.
    is_link: bool,
}

/// What to read in one root.
struct RootPlan<'a> {
    root: &'a Root,
    real_root: PathBuf,
    /// Warnings from listing the root.
    warnings: Vec<String>,
    /// The root and the folders listed in it (see [`Discovery::watched`]).
    watched: Vec<PathBuf>,
    /// The root itself when it is one skill, else its child folders: each
    /// a skill or a group of skills.
    visits: Vec<Folder>,
}

/// Lists one root: the root itself when it is one skill, else its child
/// folders (from `skills/` when that holds skills).
fn plan_root<'a>(root: &'a Root, opts: &DiscoverOptions<'_>) -> RootPlan<'a> {
    let mut plan = RootPlan {
        root,
        real_root: PathBuf::new(),
        warnings: Vec::new(),
        watched: vec![root.dir.clone()],
        visits: Vec::new(),
    };
    let Ok(real_root) = std::fs::canonicalize(&root.dir) else {
        return plan;
    };
    if !real_root.is_dir() {
        return plan;
    }
    plan.real_root = real_root.clone();
    let top = Folder {
        path: root.dir.clone(),
        real: real_root,
    };
    if probe(&top.path).is_some() {
        plan.visits.push(top);
        return plan;
    }
    if let Some(nested) = subfolder(&top, "skills") {
        let mut warnings = Vec::new();
        let children = children(&nested, opts.limits, root, &mut warnings, &mut plan.watched);
        if children.iter().any(|c| probe(&c.path).is_some()) {
            plan.warnings = warnings;
            plan.visits = children;
            return plan;
        }
    }
    let children = children(
        &top,
        opts.limits,
        root,
        &mut plan.warnings,
        &mut plan.watched,
    );
    plan.visits = children;
    plan
}

/// Loads the skill in `visit`, or the skills of a group folder.
fn visit_folder(
    plan: &RootPlan<'_>,
    folder: &Folder,
    opts: &DiscoverOptions<'_>,
    out: &mut Discovery,
) {
    if let Some(files) = probe(&folder.path) {
        files.watch(&mut out.watched);
        if let Some(skill) = load_skill_dir(folder, files, plan.root, &plan.real_root, opts, out) {
            out.skills.push(skill);
        }
        return;
    }
    // A group folder: its children may be skills.
    let grandchildren = children(
        folder,
        opts.limits,
        plan.root,
        &mut out.warnings,
        &mut out.watched,
    );
    for grandchild in grandchildren {
        let Some(files) = probe(&grandchild.path) else {
            continue;
        };
        files.watch(&mut out.watched);
        if let Some(skill) =
            load_skill_dir(&grandchild, files, plan.root, &plan.real_root, opts, out)
        {
            out.skills.push(skill);
        }
    }
}

/// `parent/name` when it is a folder (or a link to one).
fn subfolder(parent: &Folder, name: &str) -> Option<Folder> {
    let path = parent.path.join(name);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    folder_at(parent, path, name, meta.file_type())
}

fn folder_at(
    parent: &Folder,
    path: PathBuf,
    name: &str,
    file_type: std::fs::FileType,
) -> Option<Folder> {
    if file_type.is_dir() {
        let real = parent.real.join(name);
        return Some(Folder { path, real });
    }
    if file_type.is_symlink() && path.is_dir() {
        let real = std::fs::canonicalize(&path).ok()?;
        return Some(Folder { path, real });
    }
    None
}

/// Child folders of `dir`, sorted, within the candidate limits.
fn children(
    dir: &Folder,
    limits: &SkillsLimits,
    root: &Root,
    warnings: &mut Vec<String>,
    watched: &mut Vec<PathBuf>,
) -> Vec<Folder> {
    watched.push(dir.path.clone());
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return Vec::new();
    };
    let max = limits.max_candidates_per_root as usize;
    let scan_cap = (max * 10).clamp(1000, 10_000);
    let mut folders = Vec::new();
    let mut truncated_scan = false;
    for (i, entry) in entries.filter_map(Result::ok).enumerate() {
        if i >= scan_cap {
            truncated_scan = true;
            break;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        // The entry's type comes with the listing; a symlink is followed,
        // so a linked skill folder counts.
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if let Some(folder) = folder_at(dir, entry.path(), &name, file_type) {
            folders.push((name, folder));
        }
    }
    if truncated_scan {
        warnings.push(format!(
            "Skills root looks suspiciously large, truncating discovery: {} ({})",
            dir.path.display(),
            root.source.short()
        ));
    } else if folders.len() > max {
        warnings.push(format!(
            "Skills root has many entries, truncating discovery: {} has {} folders; the first {max} by name are read (skills.limits.maxCandidatesPerRoot)",
            dir.path.display(),
            folders.len()
        ));
    }
    folders.sort_by(|a, b| a.0.cmp(&b.0));
    folders.truncate(max);
    // A folder that holds no skill yet becomes one when a file is added
    // to it, which changes the folder, not its parent.
    watched.extend(folders.iter().map(|(_, folder)| folder.path.clone()));
    folders.into_iter().map(|(_, folder)| folder).collect()
}

impl SkillFiles {
    fn watch(&self, watched: &mut Vec<PathBuf>) {
        watched.extend(
            self.skill_md
                .iter()
                .chain(&self.manifest)
                .map(|f| f.path.clone()),
        );
    }
}

/// The skill files of `dir`, or `None` when it holds no skill.
fn probe(dir: &Path) -> Option<SkillFiles> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let file_type = |name: &str, flags: AtFlags| {
        rustix::fs::statat(&fd, name, flags)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode))
    };
    let probe_file = |name: &'static str| -> Option<Probed> {
        let is_link = match file_type(name, AtFlags::SYMLINK_NOFOLLOW)? {
            FileType::RegularFile => false,
            // A dangling link is still a skill file, reported as unreadable
            // rather than skipped.
            FileType::Symlink
                if matches!(
                    file_type(name, AtFlags::empty()),
                    Some(FileType::RegularFile) | None
                ) =>
            {
                true
            }
            _ => return None,
        };
        Some(Probed {
            name,
            path: dir.join(name),
            is_link,
        })
    };
    let skill_md = probe_file("SKILL.md");
    let manifest = MANIFEST_NAMES.iter().find_map(|m| probe_file(m));
    (skill_md.is_some() || manifest.is_some()).then_some(SkillFiles {
        dir: fd,
        skill_md,
        manifest,
    })
}

/// Loads the skill in `folder` (SKILL.md, a manifest, or both).
fn load_skill_dir(
    folder: &Folder,
    files: SkillFiles,
    root: &Root,
    real_root: &Path,
    opts: &DiscoverOptions<'_>,
    out: &mut Discovery,
) -> Option<Skill> {
    let dir = folder.path.as_path();
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // SKILL.md leads and a manifest beside it adds to it; a manifest alone
    // is the skill.
    let primary_is_skill_md = files.skill_md.is_some();
    let dir_fd = files.dir;
    let (primary, manifest) = match (files.skill_md, files.manifest) {
        (Some(md), manifest) => (md, manifest),
        (None, Some(m)) => (m, None),
        (None, None) => return None,
    };
    let fail = |out: &mut Discovery, file: &Path, reason: String| {
        out.failures.push(LoadFailure {
            name: dir_name.clone(),
            file_path: file.to_path_buf(),
            source: root.source,
            reason,
        });
    };
    // Containment: where the files really are.
    let real_dir = &folder.real;
    let escapes_root = !real_dir.starts_with(real_root)
        && !opts
            .allow_symlink_targets
            .iter()
            .any(|t| real_dir.starts_with(t))
        && !root.source.follows_symlinks_freely();
    if escapes_root {
        let reason = if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            "symlink-escape"
        } else {
            "path-escape"
        };
        fail(
            out,
            &primary.path,
            format!(
                "Skipping escaped skill path outside its configured root: source={} root={} reason={reason} requested={} resolved={}",
                root.source.label(),
                tilde(&root.dir, opts),
                tilde(dir, opts),
                tilde(real_dir, opts)
            ),
        );
        return None;
    }
    for file in std::iter::once(&primary)
        .chain(manifest.iter())
        .filter(|f| f.is_link)
    {
        match std::fs::canonicalize(&file.path) {
            Ok(real_file) if real_file.starts_with(real_dir) => {}
            Ok(real_file) => {
                fail(
                    out,
                    &file.path,
                    format!(
                        "the file is a symlink leaving its skill folder (resolves to {})",
                        tilde(&real_file, opts)
                    ),
                );
                return None;
            }
            Err(e) => {
                fail(out, &file.path, format!("cannot read: {e}"));
                return None;
            }
        }
    }
    let max_bytes = opts.limits.max_skill_file_bytes;
    let read = |out: &mut Discovery, probed: &Probed| -> Option<String> {
        let file = probed.path.as_path();
        match read_capped(&dir_fd, probed.name, max_bytes) {
            Ok(Capped::Text(text)) => Some(text),
            Ok(Capped::Oversized) => {
                let size = std::fs::metadata(file)
                    .map(|m| m.len())
                    .unwrap_or(max_bytes + 1);
                fail(
                    out,
                    file,
                    format!(
                        "Skipping skill due to oversized {}: {size} bytes, the limit is {max_bytes} (skills.limits.maxSkillFileBytes)",
                        file.file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    ),
                );
                None
            }
            Ok(Capped::NotUtf8) => {
                fail(out, file, "not UTF-8 text".to_string());
                None
            }
            Err(e) => {
                fail(out, file, format!("cannot read: {e}"));
                None
            }
        }
    };
    let primary_text = read(out, &primary)?;
    let parsed = if primary_is_skill_md {
        parse::parse_skill_md(&primary.path, dir, &dir_name, root.source, &primary_text)
    } else {
        parse::parse_manifest(&primary.path, dir, &dir_name, root.source, &primary_text)
    };
    let mut skill = match parsed {
        Ok(skill) => skill,
        Err(reason) => {
            fail(out, &primary.path, reason);
            return None;
        }
    };
    if let Some(manifest) = &manifest
        && let Some(text) = read(out, manifest)
    {
        match parse::parse_manifest(&manifest.path, dir, &dir_name, root.source, &text) {
            Ok(m) => parse::merge_manifest_into(&mut skill, m),
            Err(reason) => skill
                .diagnostics
                .push(format!("{} ignored: {reason}", manifest.path.display())),
        }
    }
    Some(skill)
}

enum Capped {
    Text(String),
    Oversized,
    NotUtf8,
}

/// Reads at most `max_bytes` of file `name` in `dir`: the limit holds even
/// for a file that grows between the listing and the read.
fn read_capped(dir: &OwnedFd, name: &str, max_bytes: u64) -> std::io::Result<Capped> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut bytes = Vec::with_capacity(4096);
    std::fs::File::from(fd)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Ok(Capped::Oversized);
    }
    Ok(String::from_utf8(bytes).map_or(Capped::NotUtf8, Capped::Text))
}

fn tilde(path: &Path, opts: &DiscoverOptions<'_>) -> String {
    match &opts.home {
        Some(home) => match path.strip_prefix(home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        },
        None => path.display().to_string(),
    }
}
