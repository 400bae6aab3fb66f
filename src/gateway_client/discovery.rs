//! What a running gateway publishes, and how clients find it: the
//! instance lock, `gateway.json` and the control-API token.
//!
//! Clients never probe a port: they read `gateway.json`, and a gateway
//! runs only while its pid is alive *and* `gateway.lock` is held. A
//! gateway killed with -9 leaves its file behind and the kernel drops its
//! lock, so a pid that was reused since (after a crash or a reboot) is
//! never taken for the gateway: nothing signals it or asks it anything.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::durable;
use crate::host::Host;
use crate::paths::Paths;

/// `<state dir>/gateway.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GatewayInfo {
    pub pid: u32,
    /// The address it listens on, e.g. `127.0.0.1`.
    pub address: String,
    pub port: u16,
    pub started_at_ms: i64,
    /// Where the token lives: `config` (`gateway.auth.token`), `env`
    /// (`ALMANAC_GATEWAY_TOKEN`) or `file` (`tokenFile`).
    pub token_source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// This start's generation (tasks it owns carry it).
    pub generation: i64,
    /// The memory roots whose index the gateway keeps in step.
    #[serde(default)]
    pub watching: Vec<PathBuf>,
    pub version: String,
}

impl GatewayInfo {
    /// `http://address:port` (a wildcard address is reached on loopback).
    pub(crate) fn base_url(&self) -> String {
        let host = match self.address.as_str() {
            "0.0.0.0" => "127.0.0.1".to_string(),
            "::" => "[::1]".to_string(),
            a if a.contains(':') => format!("[{a}]"),
            a => a.to_string(),
        };
        format!("http://{host}:{}", self.port)
    }
}

/// Whether process `pid` is alive (signal 0 reaches it, or it exists but
/// belongs to someone else).
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// A process that ended but was not yet reaped by its parent still
/// answers signal 0; on Linux its state says so.
fn is_zombie(pid: libc::pid_t) -> bool {
    use std::io::Read;
    // The state follows the command name, which is in parentheses, may
    // hold anything and is at most 15 bytes: it is within the line's
    // first bytes, read in one call (every command that finds the
    // gateway asks).
    let mut head = [0u8; 128];
    let Ok(read) =
        std::fs::File::open(format!("/proc/{pid}/stat")).and_then(|mut stat| stat.read(&mut head))
    else {
        return false;
    };
    let head = &head[..read];
    head.iter()
        .rposition(|&b| b == b')')
        .and_then(|close| {
            head[close + 1..]
                .split(u8::is_ascii_whitespace)
                .find(|field| !field.is_empty())
        })
        .is_some_and(|state| state == b"Z")
}

/// The running gateway of this state directory, if any: `gateway.json`
/// whose pid is alive while the instance lock is held. A missing,
/// unreadable or stale file is `None`.
pub(crate) fn running(paths: &Paths) -> Option<GatewayInfo> {
    let bytes = durable::read_if_exists(&paths.gateway_file()).ok()??;
    let info: GatewayInfo = serde_json::from_slice(&bytes).ok()?;
    (pid_alive(info.pid) && lock_held(paths)).then_some(info)
}

/// Whether a gateway holds this state directory's instance lock. The
/// probe holds a shared lock for an instant when none is held; a gateway
/// starting in that instant tries again ([`acquire_lock`]).
pub(crate) fn lock_held(paths: &Paths) -> bool {
    let Ok(file) = std::fs::File::open(paths.gateway_lock()) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// How long a starting gateway keeps trying for the instance lock: a
/// client's probe holds it for microseconds, another gateway for its life.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(50);

/// Takes the instance lock for a gateway's life, or `None` when another
/// gateway holds it.
pub(crate) fn acquire_lock(paths: &Paths) -> std::io::Result<Option<durable::HeldLock>> {
    let began = std::time::Instant::now();
    loop {
        if let Some(lock) = durable::try_lock_file(&paths.gateway_lock())? {
            return Ok(Some(lock));
        }
        if began.elapsed() >= LOCK_PATIENCE {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Rewrites `gateway.json` when it went missing (or holds someone
/// else's pid) while this gateway runs; `true` when it did.
pub(crate) fn republish_if_lost(paths: &Paths, info: &GatewayInfo) -> std::io::Result<bool> {
    let ours = durable::read_if_exists(&paths.gateway_file())?
        .and_then(|b| serde_json::from_slice::<GatewayInfo>(&b).ok())
        .is_some_and(|i| i.pid == info.pid);
    if ours {
        return Ok(false);
    }
    publish(paths, info)?;
    Ok(true)
}

/// Writes `gateway.json` (0600, atomically).
pub(crate) fn publish(paths: &Paths, info: &GatewayInfo) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(info).expect("gateway info serialises");
    durable::atomic_replace(&paths.gateway_file(), &bytes, durable::PRIVATE_FILE_MODE)
}

/// Removes `gateway.json` if it is ours (by pid).
pub(crate) fn unpublish(paths: &Paths, pid: u32) {
    let path = paths.gateway_file();
    let ours = durable::read_if_exists(&path)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<GatewayInfo>(&b).ok())
        .is_some_and(|i| i.pid == pid);
    if ours {
        let _ = durable::remove_if_exists(&path);
    }
}

/// Where the control-API token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenSource {
    Config,
    Env,
    File(PathBuf),
}

impl TokenSource {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            TokenSource::Config => "config",
            TokenSource::Env => "env",
            TokenSource::File(_) => "file",
        }
    }
}

/// The token set in config or the environment, if any.
pub(crate) fn configured_token(config: &Config, host: &Host) -> Option<(String, TokenSource)> {
    let from_env = host.var("ALMANAC_GATEWAY_TOKEN").map(str::trim);
    match config.gateway.auth.token.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() => {
            let source = if from_env == Some(t) {
                TokenSource::Env
            } else {
                TokenSource::Config
            };
            Some((t.to_string(), source))
        }
        _ => None,
    }
}

/// The token of a gateway on this state directory: the configured one,
/// else the generated file's; `create` generates the file when missing.
pub(crate) fn token(
    paths: &Paths,
    config: &Config,
    host: &Host,
    create: bool,
) -> std::io::Result<Option<(String, TokenSource)>> {
    if let Some(found) = configured_token(config, host) {
        return Ok(Some(found));
    }
    let path = paths.gateway_token_file();
    if let Some(bytes) = durable::read_if_exists(&path)? {
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        if !text.is_empty() {
            return Ok(Some((text, TokenSource::File(path))));
        }
    }
    if !create {
        return Ok(None);
    }
    let token = generate_token();
    durable::atomic_replace(&path, token.as_bytes(), durable::PRIVATE_FILE_MODE)?;
    Ok(Some((token, TokenSource::File(path))))
}

/// 64 hex characters from the OS's random source.
fn generate_token() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{a}{b}")
}

/// Whether two tokens are equal, in time independent of where they
/// differ.
pub(crate) fn tokens_equal(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// A `gateway.json` of a gateway at `address:port` with pid `pid`, for
/// tests.
#[cfg(test)]
pub(crate) fn test_info(pid: u32, address: &str, port: u16) -> GatewayInfo {
    GatewayInfo {
        pid,
        address: address.into(),
        port,
        started_at_ms: 0,
        token_source: "file".into(),
        token_file: None,
        generation: 1,
        watching: vec![],
        version: "test".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        for (a, b, want) in [
            ("abc", "abc", true),
            ("abc", "abd", false),
            ("abc", "abcd", false),
            ("", "", true),
        ] {
            assert_eq!(tokens_equal(a.as_bytes(), b.as_bytes()), want, "{a} {b}");
        }
        let t = generate_token();
        assert_eq!(t.len(), 64);
        assert_ne!(t, generate_token());
    }

    #[test]
    fn running_needs_the_lock_and_a_lost_file_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::app::testing::test_app(dir.path(), "{}").paths;
        let info = test_info(std::process::id(), "127.0.0.1", 9);
        publish(&paths, &info).unwrap();
        // A live pid without the lock (reused after a crash): not running.
        assert!(!lock_held(&paths));
        assert_eq!(running(&paths), None);
        let lock = acquire_lock(&paths).unwrap().expect("free");
        assert!(lock_held(&paths));
        assert_eq!(running(&paths), Some(info.clone()));
        // A second gateway does not get it, even after waiting a little.
        assert!(acquire_lock(&paths).unwrap().is_none());
        // The file deleted under a running gateway comes back.
        std::fs::remove_file(paths.gateway_file()).unwrap();
        assert_eq!(running(&paths), None);
        assert!(republish_if_lost(&paths, &info).unwrap());
        assert!(!republish_if_lost(&paths, &info).unwrap());
        assert_eq!(running(&paths), Some(info));
        drop(lock);
        assert!(!lock_held(&paths));
    }

    #[test]
    fn an_ended_process_nobody_reaped_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Waits for it to end and leaves it unreaped: a zombie.
        // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, with WNOWAIT, reaps nothing.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(rc, 0);
        assert!(is_zombie(pid as libc::pid_t));
        assert!(!pid_alive(pid));
        child.wait().unwrap();
        assert!(!pid_alive(pid));
    }

    #[test]
    fn a_dead_pid_is_not_alive_and_we_are() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        // pid_max on Linux is at most 2^22.
        assert!(!pid_alive(4_194_304 + 17));
    }

    #[test]
    fn base_url_reaches_wildcards_on_loopback() {
        let mut info = test_info(1, "0.0.0.0", 18789);
        assert_eq!(info.base_url(), "http://127.0.0.1:18789");
        info.address = "::1".into();
        assert_eq!(info.base_url(), "http://[::1]:18789");
    }
}
