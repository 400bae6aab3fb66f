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

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{SkillsInputs, SkillsReport};

/// Bumped when the file's shape changes.
const FORMAT: u32 = 1;

/// Changes this close to the build may share a time stamp with a later
/// change (file times tick in milliseconds on Linux and in seconds on
/// some file systems), so a snapshot holding one is not kept.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What a path looked like when the snapshot was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "kind"
)]
pub enum Stamp {
    Missing,
    Present {
        modified_s: i64,
        modified_ns: i64,
        size: u64,
        inode: u64,
        device: u64,
    },
}

impl Stamp {
    /// The stamp of `path` now (symlinks followed: a linked skill changes
    /// when its target does).
    pub fn of(path: &Path) -> Stamp {
        match std::fs::metadata(path) {
            Ok(meta) => Stamp::Present {
                modified_s: meta.mtime(),
                modified_ns: meta.mtime_nsec(),
                size: meta.size(),
                inode: meta.ino(),
                device: meta.dev(),
            },
            Err(_) => Stamp::Missing,
        }
    }

    /// Whether it was modified at or after `since` (Unix ns).
    fn modified_since(&self, since_ns: i128) -> bool {
        match self {
            Stamp::Missing => false,
            Stamp::Present {
                modified_s,
                modified_ns,
                ..
            } => i128::from(*modified_s) * 1_000_000_000 + i128::from(*modified_ns) >= since_ns,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheFile<T> {
    format: u32,
    almanac: String,
    /// [`inputs_fingerprint`] with the variables in `vars`.
    inputs: u64,
    /// The environment variables gating read.
    vars: Vec<String>,
    watched: Vec<(PathBuf, Stamp)>,
    value: T,
}

/// Whether a turn's skills came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Cached,
    Built,
}

/// The value derived from the skills of `inputs`, from `cache` when it is
/// current, else from a fresh report through `derive` (and then kept in
/// `cache` unless a watched file changed within [`RACY_WINDOW`] of
/// `wall_ns`, the real time in Unix ns).
pub fn load_or_build<T: Serialize + DeserializeOwned>(
    cache: &Path,
    inputs: &SkillsInputs,
    wall_ns: i128,
    derive: impl FnOnce(&SkillsReport) -> T,
) -> (T, Origin) {
    if let Some(value) = load(cache, inputs) {
        return (value, Origin::Cached);
    }
    let report = super::report(inputs);
    let value = derive(&report);
    let vars = super::snapshot::required_vars(&report);
    let mut paths = report.watched.clone();
    paths.extend(path_dirs(inputs));
    paths.sort();
    paths.dedup();
    let watched: Vec<(PathBuf, Stamp)> = paths
        .into_iter()
        .map(|p| {
            let stamp = Stamp::of(&p);
            (p, stamp)
        })
        .collect();
    let racy_since = wall_ns - RACY_WINDOW.as_nanos() as i128;
    let racy = watched.iter().any(|(_, s)| s.modified_since(racy_since));
    let file = CacheFile {
        format: FORMAT,
        almanac: env!("CARGO_PKG_VERSION").to_string(),
        inputs: super::snapshot::inputs_fingerprint(inputs, &vars),
        vars,
        watched,
        value,
    };
    if !racy && let Err(err) = store(cache, &file) {
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
    if super::snapshot::inputs_fingerprint(inputs, &file.vars) != file.inputs {
        return None;
    }
    // PATH folders are part of the watched list; a new PATH changes the
    // fingerprint above.
    let unchanged = file
        .watched
        .iter()
        .all(|(path, stamp)| Stamp::of(path) == *stamp);
    unchanged.then_some(file.value)
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
