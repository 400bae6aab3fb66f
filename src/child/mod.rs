//! Child processes: every program almanac starts (the `exec` tool, skill
//! runs, hook handlers) runs through [`run`], with an environment built by [`env`].
//!
//! Invariants:
//! * A child gets exactly the environment it is given (built from an
//!   allowlist: never a provider key, a token or almanac's own settings)
//!   and starts in its own process group.
//! * At the timeout the whole group gets SIGTERM, then SIGKILL after
//!   [`GRACE`]. When the child itself ends, whatever it left running in its
//!   group is killed, so nothing it started outlives the call; dropping the
//!   running future kills the group too.
//! * Output is read as it streams and handed to a [`Sink`] up to a byte
//!   cap; past the cap it is still read (so the child never blocks on a
//!   full pipe) and dropped. Memory stays bounded whatever the child
//!   prints.
//! * Async (tokio): nothing here blocks a thread while a child runs.

pub(crate) mod env;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// Time between SIGTERM and SIGKILL when a child is stopped at its timeout.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// What to run, and its limits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The child's whole environment.
    pub env: BTreeMap<String, String>,
    pub timeout: Duration,
    /// Bytes of output (stdout and stderr together) handed to the sink.
    pub max_output_bytes: usize,
    pub stdin: Input,
}

/// The child's standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// Nothing (end of file at once).
    Null,
    /// almanac's own standard input (a pipe or file given to a command).
    Inherit,
    /// These bytes, then end of file (a child that does not read them
    /// does not block the run).
    Bytes(Vec<u8>),
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// Receives output as it arrives.
pub(crate) trait Sink {
    fn output(&mut self, stream: Stream, bytes: &[u8]);
}

/// Keeps the output in memory (bounded by the spec's cap).
#[derive(Debug, Default)]
pub(crate) struct Capture {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Sink for Capture {
    fn output(&mut self, stream: Stream, bytes: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(bytes),
            Stream::Stderr => self.stderr.extend_from_slice(bytes),
        }
    }
}

impl Capture {
    /// Stdout, then stderr on a line of its own (lossy UTF-8).
    pub(crate) fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.stdout).into_owned();
        let err = String::from_utf8_lossy(&self.stderr);
        if !err.trim().is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&err);
        }
        text
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// It was stopped at the timeout.
    pub timed_out: bool,
    /// Output past the cap was dropped.
    pub truncated: bool,
    /// All output bytes read, kept or not.
    pub output_bytes: u64,
}

impl Finished {
    /// The exit code, or 128 + the signal (as shells report it).
    pub(crate) fn exit_code(&self) -> i32 {
        self.code.unwrap_or_else(|| 128 + self.signal.unwrap_or(0))
    }

    pub(crate) fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// Kills the process group when dropped, unless the run ended normally.
struct Group {
    pgid: Option<i32>,
    armed: bool,
}

impl Group {
    fn signal(&self, signal: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals that process group;
            // it has no memory effects. ESRCH (nothing left) is fine.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.armed {
            self.signal(libc::SIGKILL);
        }
    }
}

/// Reads from `pipe` when it is open; never completes when it is closed.
async fn read_from<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs `spec` to its end (or its timeout), streaming its output into
/// `sink`. An error means it could not be started or waited for.
pub(crate) async fn run(spec: &Spec, sink: &mut dyn Sink) -> std::io::Result<Finished> {
    use std::os::unix::process::ExitStatusExt;

    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(&spec.env)
        .stdin(match spec.stdin {
            Input::Null => Stdio::null(),
            Input::Inherit => Stdio::inherit(),
            Input::Bytes(_) => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let mut group = Group {
        pgid: child.id().and_then(|id| i32::try_from(id).ok()),
        armed: true,
    };
    if let (Input::Bytes(bytes), Some(mut stdin)) = (&spec.stdin, child.stdin.take()) {
        use tokio::io::AsyncWriteExt;
        let bytes = bytes.clone();
        // Written beside the run: a child that never reads cannot stall
        // it, and the write ends (broken pipe) when the child does.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut out_buf = vec![0u8; 16 * 1024];
    let mut err_buf = vec![0u8; 16 * 1024];
    let deadline = Instant::now() + spec.timeout;
    let mut kill_at: Option<Instant> = None;
    let mut status = None;
    let mut timed_out = false;
    let mut delivered = 0usize;
    let mut truncated = false;
    let mut output_bytes = 0u64;
    let mut deliver = |stream: Stream, bytes: &[u8], sink: &mut dyn Sink| {
        output_bytes += bytes.len() as u64;
        let room = spec.max_output_bytes.saturating_sub(delivered);
        let keep = room.min(bytes.len());
        if keep > 0 {
            sink.output(stream, &bytes[..keep]);
            delivered += keep;
        }
        if keep < bytes.len() {
            truncated = true;
        }
    };
    while stdout.is_some() || stderr.is_some() || status.is_none() {
        tokio::select! {
            read = read_from(&mut stdout, &mut out_buf) => match read {
                Ok(n) if n > 0 => deliver(Stream::Stdout, &out_buf[..n], sink),
                _ => stdout = None,
            },
            read = read_from(&mut stderr, &mut err_buf) => match read {
                Ok(n) if n > 0 => deliver(Stream::Stderr, &err_buf[..n], sink),
                _ => stderr = None,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited?);
                // What the child left running in its group goes with it.
                group.signal(libc::SIGKILL);
            },
            () = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                if status.is_some() {
                    // The child is gone but something outside its group
                    // holds the pipes open: stop reading.
                    break;
                }
                group.signal(libc::SIGTERM);
                kill_at = Some(Instant::now() + GRACE);
            },
            () = sleep_until_opt(kill_at) => {
                group.signal(libc::SIGKILL);
                kill_at = None;
            },
        }
    }
    group.armed = false;
    let status = match status {
        Some(s) => s,
        None => child.wait().await?,
    };
    Ok(Finished {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        truncated,
        output_bytes,
    })
}

/// Runs `spec` on a runtime of its own, for callers that are not async
/// (a command-line `skills run`).
pub(crate) fn run_blocking(spec: &Spec, sink: &mut dyn Sink) -> std::io::Result<Finished> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(spec, sink))
}

#[cfg(test)]
mod tests;
