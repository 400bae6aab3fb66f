//! A command line the running gateway answers whole: the command sends
//! its arguments, working directory and the environment variables that
//! decide its settings over `<state dir>/gateway.sock`, and prints what
//! comes back. It then parses nothing and reads no configuration itself:
//! the gateway, already loaded, does that for it.
//!
//! Invariants:
//! * The socket is the user's alone: the gateway creates it 0600 in the
//!   state directory and answers only a peer of its own user id.
//! * Only the variables [`forwarded_var`] names cross it: none holds a
//!   secret (a provider key goes as "set", never as its value).
//! * Anything short of a whole answer (no socket, a refusal, an error, a
//!   late or malformed reply) is `None`: the command then runs as it
//!   would have without the socket, so nothing is lost by trying.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The socket's name in the state directory.
pub(crate) const SOCKET_FILE: &str = "gateway.sock";

/// The most a forwarded command may take in bytes (its arguments and
/// variables), and the most of an answer a command reads.
pub(crate) const MAX_REQUEST: usize = 256 * 1024;
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Stands for a provider key's value: whether it is set decides the
/// settings, and its value stays with the command.
pub(crate) const SET_NOT_SENT: &str = "(set)";

/// Variables whose value decides where a command's state is and how it
/// reads its settings and the time.
const FORWARDED: &[&str] = &[
    "HOME",
    "TZ",
    "TZDIR",
    "ALMANAC_NOW",
    "ALMANAC_STATE_DIR",
    "ALMANAC_PROFILE",
    "ALMANAC_CONFIG",
];

/// Variables sent only as [`SET_NOT_SENT`] when set.
const SENT_AS_SET: &[&str] = &["OPENAI_API_KEY"];

/// How `name=value` crosses the socket: its value, [`SET_NOT_SENT`] or
/// not at all. `settings_vars` are the names the configuration reads
/// (`config::ENV_KEYS`); their secrets (tokens) are not sent.
pub(crate) fn forwarded_var<'a>(
    name: &str,
    value: &'a str,
    settings_vars: &[&str],
) -> Option<&'a str> {
    if SENT_AS_SET.contains(&name) {
        return (!value.is_empty()).then_some(SET_NOT_SENT);
    }
    let secret = name.ends_with("_TOKEN") || name.ends_with("_KEY");
    (FORWARDED.contains(&name) || (settings_vars.contains(&name) && !secret)).then_some(value)
}

/// What a command sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ForwardedCommand {
    /// The command's almanac version (another version's gateway may
    /// parse or print it otherwise, and declines).
    pub version: String,
    /// The arguments after the program's name.
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub vars: BTreeMap<String, String>,
}

/// What the gateway answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub(crate) enum ForwardAnswer {
    /// The command's output and exit code.
    Answered {
        stdout: String,
        stderr: String,
        code: u8,
    },
    /// Not answered here (why, for the gateway's log): the command runs
    /// on its own.
    Declined { reason: String },
}

/// The socket of the gateway that would serve `state_dir`.
pub(crate) fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_FILE)
}

/// `command` answered by the gateway listening on `socket`, or `None`
/// (see the module's invariants). Waits at most `limit` for the answer.
pub(crate) fn forward(
    socket: &Path,
    command: &ForwardedCommand,
    limit: Duration,
) -> Option<(String, String, u8)> {
    let body = serde_json::to_vec(command).ok()?;
    if body.len() > MAX_REQUEST {
        return None;
    }
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_write_timeout(Some(limit)).ok()?;
    stream.write_all(&body).ok()?;
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER as u64)
        .read_to_end(&mut answer)
        .ok()?;
    match serde_json::from_slice(&answer).ok()? {
        ForwardAnswer::Answered {
            stdout,
            stderr,
            code,
        } => Some((stdout, stderr, code)),
        ForwardAnswer::Declined { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_cross_and_settings_do() {
        let settings = [
            "ALMANAC_WORKSPACE",
            "ALMANAC_GATEWAY_TOKEN",
            "SESSION_MEMORY",
        ];
        assert_eq!(
            forwarded_var("OPENAI_API_KEY", "sk-123", &settings),
            Some(SET_NOT_SENT)
        );
        assert_eq!(forwarded_var("OPENAI_API_KEY", "", &settings), None);
        assert_eq!(
            forwarded_var("ALMANAC_GATEWAY_TOKEN", "t0k", &settings),
            None
        );
        assert_eq!(forwarded_var("ANTHROPIC_API_KEY", "x", &settings), None);
        assert_eq!(forwarded_var("PATH", "/bin", &settings), None);
        assert_eq!(
            forwarded_var("ALMANAC_WORKSPACE", "/w", &settings),
            Some("/w")
        );
        assert_eq!(forwarded_var("SESSION_MEMORY", "on", &settings), Some("on"));
        assert_eq!(forwarded_var("TZ", "UTC", &settings), Some("UTC"));
        assert_eq!(forwarded_var("HOME", "/h", &settings), Some("/h"));
    }

    #[test]
    fn no_socket_or_a_refusal_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let socket = socket_path(dir.path());
        let command = ForwardedCommand {
            version: "0".into(),
            args: vec!["memory".into(), "search".into(), "x".into()],
            cwd: dir.path().to_path_buf(),
            vars: BTreeMap::new(),
        };
        assert_eq!(forward(&socket, &command, Duration::from_secs(5)), None);
        // A socket file nobody listens on (a gateway killed with -9).
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        assert_eq!(forward(&socket, &command, Duration::from_secs(5)), None);
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("b.sock")).unwrap();
        let serving = std::thread::spawn(move || {
            for (n, reply) in [
                r#"{"kind":"declined","reason":"not mine"}"#,
                "not json",
                r#"{"kind":"answered","stdout":"out\n","stderr":"","code":0}"#,
            ]
            .into_iter()
            .enumerate()
            {
                let (mut conn, _) = listener.accept().unwrap();
                let mut got = Vec::new();
                conn.read_to_end(&mut got).unwrap();
                let sent: ForwardedCommand = serde_json::from_slice(&got).unwrap();
                assert_eq!(sent.args.len(), 3, "request {n}");
                conn.write_all(reply.as_bytes()).unwrap();
            }
        });
        let socket = dir.path().join("b.sock");
        assert_eq!(forward(&socket, &command, Duration::from_secs(5)), None);
        assert_eq!(forward(&socket, &command, Duration::from_secs(5)), None);
        assert_eq!(
            forward(&socket, &command, Duration::from_secs(5)),
            Some(("out\n".into(), String::new(), 0))
        );
        serving.join().unwrap();
    }
}
