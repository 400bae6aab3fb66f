//! Where almanac keeps things: state directory, profile, config file,
//! workspace and stores.
//!
//! Resolution (flags beat environment beat config beat defaults):
//!
//! * state dir: `--state-dir`, `--profile NAME` (`~/.almanac-NAME`),
//!   `ALMANAC_STATE_DIR`, `ALMANAC_PROFILE`, else `~/.almanac`;
//! * config file: `--config`, `ALMANAC_CONFIG`, else `<state>/config.json5`;
//! * workspace: the effective `agents.defaults.workspace` (which the config
//!   layers as `--workspace`, `ALMANAC_WORKSPACE`, the config file), else
//!   `<state>/workspace`.
//!
//! Invariants: resolution is pure (it reads a [`Host`], creates nothing);
//! [`Paths::ensure_state_dir`] and [`Paths::ensure_workspace`] create missing
//! directories 0700 and never change the permissions of directories that
//! already exist, so an existing OpenClaw workspace is used as it is.
//! Derived indexes live under the state dir, never inside the workspace.

use std::io;
use std::path::{Path, PathBuf};

use crate::config::Origin;
use crate::durable;
use crate::host::Host;

/// Path-related command-line overrides.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathFlags {
    pub state_dir: Option<String>,
    pub profile: Option<String>,
    pub workspace: Option<String>,
    pub config: Option<String>,
}

/// The state directory, profile and config path (known before the config
/// is read).
#[derive(Debug, Clone)]
pub(crate) struct StateLocation {
    pub profile: String,
    pub state_dir: PathBuf,
    pub state_dir_origin: Origin,
    pub config_path: PathBuf,
    pub config_origin: Origin,
}

/// Every resolved location.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub profile: String,
    pub state_dir: PathBuf,
    pub config_path: PathBuf,
    pub workspace: PathBuf,
    pub workspace_origin: Origin,
}

/// The profile name used when none is given.
pub(crate) const DEFAULT_PROFILE: &str = "default";

#[derive(Debug, thiserror::Error)]
pub(crate) enum PathError {
    #[error("invalid profile name `{0}`: use letters, digits, `-` and `_` (at most 64)")]
    BadProfile(String),
    #[error("cannot find the home directory: set HOME or pass --state-dir")]
    NoHome,
}

/// Resolves the state directory, profile and config file.
pub(crate) fn resolve_state(flags: &PathFlags, host: &Host) -> Result<StateLocation, PathError> {
    let flag_profile = flags.profile.as_deref().filter(|p| !p.is_empty());
    let env_profile = host.var("ALMANAC_PROFILE");
    for p in [flag_profile, env_profile].into_iter().flatten() {
        validate_profile(p)?;
    }
    let profile_dir = |name: &str| -> Result<PathBuf, PathError> {
        let home = host.home.as_ref().ok_or(PathError::NoHome)?;
        Ok(if name == DEFAULT_PROFILE {
            home.join(".almanac")
        } else {
            home.join(format!(".almanac-{name}"))
        })
    };

    let (state_dir, state_dir_origin) = if let Some(dir) = &flags.state_dir {
        (host.resolve_path(dir), Origin::Flag)
    } else if let Some(name) = flag_profile {
        (profile_dir(name)?, Origin::Flag)
    } else if let Some(dir) = host.var("ALMANAC_STATE_DIR") {
        (host.resolve_path(dir), Origin::Env)
    } else if let Some(name) = env_profile {
        (profile_dir(name)?, Origin::Env)
    } else {
        (profile_dir(DEFAULT_PROFILE)?, Origin::Default)
    };
    let profile = flag_profile
        .or(env_profile)
        .unwrap_or(DEFAULT_PROFILE)
        .to_string();

    let (config_path, config_origin) = if let Some(path) = &flags.config {
        (host.resolve_path(path), Origin::Flag)
    } else if let Some(path) = host.var("ALMANAC_CONFIG") {
        (host.resolve_path(path), Origin::Env)
    } else {
        (state_dir.join("config.json5"), Origin::Default)
    };
    Ok(StateLocation {
        profile,
        state_dir,
        state_dir_origin,
        config_path,
        config_origin,
    })
}

/// Adds the workspace, given the effective `agents.defaults.workspace`
/// and where it came from.
pub(crate) fn resolve_workspace(
    state: StateLocation,
    configured: Option<&str>,
    origin: Origin,
    host: &Host,
) -> Paths {
    let (workspace, workspace_origin) = match configured.map(str::trim).filter(|w| !w.is_empty()) {
        Some(ws) => (host.resolve_path(ws), origin),
        None => (state.state_dir.join("workspace"), Origin::Default),
    };
    Paths {
        profile: state.profile,
        state_dir: state.state_dir,
        config_path: state.config_path,
        workspace,
        workspace_origin,
    }
}

/// The paths of `state` with `workspace` (an agent's, resolved).
pub(crate) fn with_workspace(state: StateLocation, workspace: PathBuf, origin: Origin) -> Paths {
    Paths {
        profile: state.profile,
        state_dir: state.state_dir,
        config_path: state.config_path,
        workspace,
        workspace_origin: origin,
    }
}

fn validate_profile(name: &str) -> Result<(), PathError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(PathError::BadProfile(name.to_string()))
    }
}

impl Paths {
    /// The canonical store: data that exists nowhere else.
    pub(crate) fn state_store(&self) -> PathBuf {
        self.state_dir.join("almanac.sqlite")
    }

    /// What a running gateway publishes about itself (pid, address).
    pub(crate) fn gateway_file(&self) -> PathBuf {
        self.state_dir.join("gateway.json")
    }

    /// The lock a running gateway holds (one per state directory).
    pub(crate) fn gateway_lock(&self) -> PathBuf {
        self.state_dir.join("gateway.lock")
    }

    /// The generated control-API token (when `gateway.auth.token` is unset).
    pub(crate) fn gateway_token_file(&self) -> PathBuf {
        self.state_dir.join("gateway.token")
    }

    /// The gateway's own canonical files (the intake log).
    pub(crate) fn gateway_dir(&self) -> PathBuf {
        self.state_dir.join("gateway")
    }

    /// Where the results of unattended turns go: the outbox and the
    /// webhook deliveries' journal (canonical).
    pub(crate) fn outbox_dir(&self) -> PathBuf {
        self.state_dir.join("outbox")
    }

    /// The heartbeat runner's record: each run's event and the switch.
    pub(crate) fn heartbeat_runs_dir(&self) -> PathBuf {
        self.state_dir.join("heartbeat")
    }

    /// The folder of derived indexes (safe to delete).
    pub(crate) fn index_dir(&self) -> PathBuf {
        self.state_dir.join("index")
    }

    /// Installed sentence models (`memory model install`), one folder each.
    pub(crate) fn models_dir(&self) -> PathBuf {
        self.state_dir.join("models")
    }

    /// What agent turns keep of the skills between turns (derived).
    pub(crate) fn skills_cache(&self) -> PathBuf {
        self.state_dir.join("cache").join("skills-turn.json")
    }

    /// The derived index of this workspace's memory.
    pub(crate) fn workspace_index(&self) -> PathBuf {
        self.index_dir()
            .join(format!("{}.sqlite", self.index_key(&self.workspace)))
    }

    /// A stable key for a directory (its name and a hash of its real path),
    /// so two profiles or two roots never share an index or a lock.
    pub(crate) fn index_key(&self, root: &Path) -> String {
        let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let label: String = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(32)
            .collect();
        let hash = fnv1a64(real.as_os_str().as_encoded_bytes());
        format!("{label}-{:08x}", hash as u32)
    }

    /// Creates the state directory (0700) if it is missing.
    pub(crate) fn ensure_state_dir(&self) -> io::Result<()> {
        durable::create_private_dir_all(&self.state_dir)
    }

    /// Creates the workspace (0700) if it is missing.
    pub(crate) fn ensure_workspace(&self) -> io::Result<()> {
        durable::create_private_dir_all(&self.workspace)
    }
}

/// 64-bit FNV-1a: a stable, dependency-free hash for names and checksums
/// (not for security).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_extend(0xcbf2_9ce4_8422_2325, bytes)
}

/// [`fnv1a64`] of `a` followed by `bytes`, given `hash = fnv1a64(a)`: the
/// hash of a file that grew, from the hash of its old content and the
/// appended bytes alone.
pub(crate) fn fnv1a64_extend(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// `a/./b/../c` → `a/c` without touching the disk; `None` when `..` climbs
/// above the start.
pub(crate) fn normalize(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// The real path of `path`: symlinks resolved, also for a path that does
/// not exist yet (its nearest existing folder is resolved and the rest
/// appended) and for a dangling link (its target is resolved: writing
/// through the link would create that file).
pub(crate) fn real_path(path: &Path) -> std::io::Result<PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            if is_link {
                let target = crate::durable::final_target(path)?;
                if target != path {
                    return real_path(&target);
                }
            }
            match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
                    Ok(real_path(parent)?.join(name))
                }
                _ => normalize(path).ok_or(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_lexically_and_refuses_climbing_out() {
        for (path, want) in [
            ("a/./b/../c", Some("a/c")),
            ("/ws/notes/../MEMORY.md", Some("/ws/MEMORY.md")),
            ("a/..", Some("")),
            ("../x", None),
            ("a/../../x", None),
        ] {
            assert_eq!(
                normalize(Path::new(path)),
                want.map(PathBuf::from),
                "{path}"
            );
        }
    }

    fn host(vars: &[(&str, &str)]) -> Host {
        Host::with_vars(
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())),
            Path::new("/home/u"),
            Path::new("/cwd"),
            "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
        )
    }

    fn flags(state: Option<&str>, profile: Option<&str>) -> PathFlags {
        PathFlags {
            state_dir: state.map(String::from),
            profile: profile.map(String::from),
            ..PathFlags::default()
        }
    }

    #[test]
    fn state_dir_precedence_table() {
        let cases: &[(&str, PathFlags, &[(&str, &str)], &str, &str, Origin)] = &[
            (
                "default",
                flags(None, None),
                &[],
                "/home/u/.almanac",
                "default",
                Origin::Default,
            ),
            (
                "flag dir",
                flags(Some("/s"), None),
                &[("ALMANAC_STATE_DIR", "/e")],
                "/s",
                "default",
                Origin::Flag,
            ),
            (
                "flag profile beats env dir",
                flags(None, Some("work")),
                &[("ALMANAC_STATE_DIR", "/e")],
                "/home/u/.almanac-work",
                "work",
                Origin::Flag,
            ),
            (
                "env dir",
                flags(None, None),
                &[("ALMANAC_STATE_DIR", "rel")],
                "/cwd/rel",
                "default",
                Origin::Env,
            ),
            (
                "env dir beats env profile",
                flags(None, None),
                &[("ALMANAC_STATE_DIR", "/e"), ("ALMANAC_PROFILE", "p")],
                "/e",
                "p",
                Origin::Env,
            ),
            (
                "env profile",
                flags(None, None),
                &[("ALMANAC_PROFILE", "p")],
                "/home/u/.almanac-p",
                "p",
                Origin::Env,
            ),
            (
                "profile named default",
                flags(None, Some("default")),
                &[],
                "/home/u/.almanac",
                "default",
                Origin::Flag,
            ),
            (
                "tilde in flag",
                flags(Some("~/st"), None),
                &[],
                "/home/u/st",
                "default",
                Origin::Flag,
            ),
        ];
        for (label, f, vars, dir, profile, origin) in cases {
            let loc = resolve_state(f, &host(vars)).unwrap();
            assert_eq!(loc.state_dir, PathBuf::from(dir), "{label}");
            assert_eq!(loc.profile, *profile, "{label}");
            assert_eq!(loc.state_dir_origin, *origin, "{label}");
            assert_eq!(
                loc.config_path,
                PathBuf::from(dir).join("config.json5"),
                "{label}"
            );
        }
    }

    #[test]
    fn bad_profile_names_are_refused() {
        for bad in ["../x", "a b", "x/y", &"p".repeat(65)] {
            let err = resolve_state(&flags(None, Some(bad)), &host(&[])).unwrap_err();
            assert!(matches!(err, PathError::BadProfile(_)), "{bad}");
        }
    }

    #[test]
    fn workspace_resolution_table() {
        let state = || resolve_state(&PathFlags::default(), &host(&[])).unwrap();
        let cases: &[(&str, Option<&str>, Origin, &str, Origin)] = &[
            (
                "default",
                None,
                Origin::Default,
                "/home/u/.almanac/workspace",
                Origin::Default,
            ),
            (
                "config",
                Some("~/notes"),
                Origin::Config,
                "/home/u/notes",
                Origin::Config,
            ),
            (
                "blank value ignored",
                Some("  "),
                Origin::Config,
                "/home/u/.almanac/workspace",
                Origin::Default,
            ),
            (
                "relative flag",
                Some("ws"),
                Origin::Flag,
                "/cwd/ws",
                Origin::Flag,
            ),
            (
                "openclaw workspace",
                Some("~/.openclaw/workspace"),
                Origin::Flag,
                "/home/u/.openclaw/workspace",
                Origin::Flag,
            ),
        ];
        for (label, configured, origin, want, want_origin) in cases {
            let paths = resolve_workspace(state(), *configured, *origin, &host(&[]));
            assert_eq!(paths.workspace, PathBuf::from(want), "{label}");
            assert_eq!(paths.workspace_origin, *want_origin, "{label}");
        }
    }

    #[test]
    fn workspace_index_is_stable_and_distinct_per_workspace() {
        let state = resolve_state(&PathFlags::default(), &host(&[])).unwrap();
        let a = resolve_workspace(state.clone(), Some("/a/ws"), Origin::Config, &host(&[]));
        let b = resolve_workspace(state, Some("/b/ws"), Origin::Config, &host(&[]));
        assert_eq!(a.workspace_index(), a.workspace_index());
        assert_ne!(a.workspace_index(), b.workspace_index());
        assert!(a.workspace_index().starts_with("/home/u/.almanac/index"));
        assert!(a.workspace_index().to_string_lossy().contains("/ws-"));
    }
}
