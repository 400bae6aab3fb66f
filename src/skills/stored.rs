//! The skills snapshot kept between commands, for agent turns.
//!
//! Each turn needs the catalog and the skill tools; reading and gating
//! every skill again costs milliseconds with a large skill set. A turn
//! instead keeps what it derived from the skills in a cache file and uses
//! it again only when nothing it came from changed:
//!
//! * every folder discovery listed or probed and every skill file it read
//!   ([`super::discover::Discovery::watched`]): modification time, size
//!   and identity, so an added, edited, replaced or removed skill is seen;
//! * the folders of `PATH` (a binary installed or removed changes its
//!   folder), the environment values gating reads, `SKILL_PERMISSIONS`,
//!   the effective config and the config file, the roots, and almanac's
//!   own version.
//!
//! Invariants: a snapshot is never used when any of those differ; a file
//! changed within [`RACY_WINDOW`] of the build (file times are coarse) is
//! not trusted, so that snapshot is not kept; the cache is derived, so an
//! unreadable, corrupt or foreign cache file is rebuilt, never an error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{SkillsInputs, SkillsReport};

/// Bumped when the file's shape changes.
const FORMAT: u32 = 2;

/// Changes this close to the build may share a time stamp with a later
/// change (file times tick in milliseconds on Linux and in seconds on
/// some file systems), so a snapshot holding one is not kept.
pub(crate) const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Watched paths under one folder (a skills root or a `PATH` folder),
/// relative to it: each is looked up from the open folder, which is
/// cheaper than resolving every absolute path again. `""` is the folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Group {
    dir: PathBuf,
    paths: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheFile<T> {
    format: u32,
    almanac: String,
    /// [`super::snapshot::inputs_fingerprint`] with the variables in `vars`.
    inputs: u64,
    /// The environment variables gating read.
    vars: Vec<String>,
    watched: Vec<Group>,
    /// A hash of every watched path's modification time, size and
    /// identity (or its absence).
    stamps: u64,
    value: T,
}

/// Whether a turn's skills came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    Cached,
    Built,
}

/// The value derived from the skills of `inputs`, from `cache` when it is
/// current, else from a fresh report through `derive` (and then, with
/// `keep`, kept in `cache` unless a watched file changed within
/// [`RACY_WINDOW`] of `wall_ns`, the real time in Unix ns). Without `keep`
/// (a command that only shows what a turn would get) nothing is written.
pub(crate) fn load_or_build<T: Serialize + DeserializeOwned>(
    cache: &Path,
    inputs: &SkillsInputs,
    wall_ns: i128,
    keep: bool,
    derive: impl FnOnce(&SkillsReport) -> T,
) -> (T, Origin) {
    if let Some(value) = load(cache, inputs) {
        return (value, Origin::Cached);
    }
    let report = super::report(inputs);
    let value = derive(&report);
    if !keep {
        return (value, Origin::Built);
    }
    let vars = super::snapshot::required_vars(&report);
    let mut anchors: Vec<PathBuf> = inputs.roots.iter().map(|r| r.dir.clone()).collect();
    let path_dirs = path_dirs(inputs);
    anchors.extend(path_dirs.iter().cloned());
    let mut paths = report.watched.clone();
    paths.extend(path_dirs);
    let watched = group(paths, &anchors);
    let (stamps, newest) = stamp(&watched);
    let racy = newest >= wall_ns - RACY_WINDOW.as_nanos() as i128;
    let file = CacheFile {
        format: FORMAT,
        almanac: env!("CARGO_PKG_VERSION").to_string(),
        inputs: super::snapshot::inputs_fingerprint(inputs, &vars),
        vars,
        watched,
        stamps,
        value,
    };
    if racy {
        tracing::debug!(path = %cache.display(), watched = ?file.watched.iter().map(|g| (g.dir.display().to_string(), g.paths.len())).collect::<Vec<_>>(), "skills changed a moment ago: the cache is not kept");
    } else if let Err(err) = store(cache, &file) {
        tracing::debug!(%err, path = %cache.display(), "skills cache not written");
    }
    (file.value, Origin::Built)
}

/// The cached value when every input and watched path is as recorded.
fn load<T: DeserializeOwned>(cache: &Path, inputs: &SkillsInputs) -> Option<T> {
    let bytes = std::fs::read(cache).ok()?;
    let file: CacheFile<T> = match serde_json::from_slice(&bytes) {
        Ok(file) => file,
        Err(err) => {
            tracing::debug!(%err, path = %cache.display(), "skills cache unreadable; rebuilding");
            return None;
        }
    };
    if file.format != FORMAT || file.almanac != env!("CARGO_PKG_VERSION") {
        return None;
    }
    // A new PATH changes the fingerprint; its folders are watched.
    if super::snapshot::inputs_fingerprint(inputs, &file.vars) != file.inputs {
        tracing::debug!(path = %cache.display(), "skills cache made for other inputs; rebuilding");
        return None;
    }
    if stamp(&file.watched).0 != file.stamps {
        tracing::debug!(path = %cache.display(), "a watched skills path changed; rebuilding");
        return None;
    }
    Some(file.value)
}

/// `paths` grouped under the deepest of `anchors` holding them (a path
/// under none is a group of its own).
fn group(mut paths: Vec<PathBuf>, anchors: &[PathBuf]) -> Vec<Group> {
    paths.sort();
    paths.dedup();
    let mut groups: Vec<Group> = Vec::new();
    for path in paths {
        let anchor = anchors
            .iter()
            .filter(|a| path.starts_with(a))
            .max_by_key(|a| a.as_os_str().len());
        let (dir, rel) = match anchor.and_then(|a| {
            let rel = path.strip_prefix(a).ok()?.to_str()?.to_string();
            Some((a.clone(), rel))
        }) {
            Some(found) => found,
            None => (path.clone(), String::new()),
        };
        match groups.iter_mut().find(|g| g.dir == dir) {
            Some(g) => g.paths.push(rel),
            None => groups.push(Group {
                dir,
                paths: vec![rel],
            }),
        }
    }
    groups
}

/// A hash of what every watched path looks like now (symlinks followed: a
/// linked skill changes when its target does), and the newest
/// modification time among them (Unix ns).
fn stamp(groups: &[Group]) -> (u64, i128) {
    let mut bytes: Vec<u8> = Vec::with_capacity(groups.len() * 64);
    let mut newest = i128::MIN;
    for g in groups {
        let dir = rustix::fs::open(
            &g.dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        );
        for rel in &g.paths {
            let stat = match &dir {
                Ok(fd) if rel.is_empty() => rustix::fs::fstat(fd).ok(),
                Ok(fd) => rustix::fs::statat(fd, rel.as_str(), AtFlags::empty()).ok(),
                Err(_) => None,
            };
            match stat {
                Some(st) => {
                    let modified =
                        i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
                    newest = newest.max(modified);
                    bytes.extend_from_slice(&st.st_mtime.to_le_bytes());
                    bytes.extend_from_slice(&st.st_mtime_nsec.to_le_bytes());
                    bytes.extend_from_slice(&st.st_size.to_le_bytes());
                    bytes.extend_from_slice(&st.st_ino.to_le_bytes());
                    bytes.extend_from_slice(&st.st_dev.to_le_bytes());
                }
                None => bytes.push(0),
            }
        }
    }
    (crate::paths::fnv1a64(&bytes), newest)
}

/// Replaced whole (a reader sees the old file or the new one).
fn store<T: Serialize>(cache: &Path, file: &CacheFile<T>) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(file).map_err(std::io::Error::other)?;
    if let Some(dir) = cache.parent() {
        crate::durable::create_private_dir_all(dir)?;
    }
    crate::durable::atomic_replace(cache, &bytes, crate::durable::PRIVATE_FILE_MODE)
}

/// The folders of `PATH`, where gating looks for binaries.
fn path_dirs(inputs: &SkillsInputs) -> Vec<PathBuf> {
    inputs
        .env
        .get("PATH")
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}
