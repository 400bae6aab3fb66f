//! The command socket, `<state dir>/gateway.sock`: a command the gateway
//! can answer whole (`memory search`) sends its command line here and
//! prints the answer, instead of parsing it, reading the settings and
//! finding the gateway itself (see `gateway_client::forward`).
//!
//! Invariants:
//! * The socket is made 0600 before it is listened on, and a peer whose
//!   user id is not the gateway's is closed unanswered.
//! * What a command line means is decided by the command line's own code
//!   ([`AnswerCommand`], given by the caller of [`super::run`]), with the
//!   settings read as that command would read them; the gateway adds only
//!   its warm search. A command it does not answer is declined, and runs
//!   on its own.
//! * A request is read whole (at most `MAX_REQUEST` bytes, within
//!   [`READ_LIMIT`]) before any work; the work crosses the engine's one
//!   blocking boundary.
//! * The socket file is removed when the gateway stops; one left by a
//!   gateway killed with -9 is replaced at the next start (the instance
//!   lock is held by then) and refuses connections meanwhile.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::supervisor::{Component, ComponentKind};
use crate::app::memory::{ResolvedSearch, Searched};
use crate::gateway_client::forward::{ForwardAnswer, ForwardedCommand, MAX_REQUEST};
use crate::host::Host;

/// How long a peer may take to send its request.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// What the gateway lends a forwarded command.
pub(crate) trait WarmSearch: Sync {
    /// `req` searched with the gateway's warm model and index, as
    /// `POST /v1/memory/search` searches it.
    fn search(&self, req: &ResolvedSearch) -> anyhow::Result<Searched>;
    /// The gateway's host: its executable, time zone and environment.
    fn host(&self) -> &Host;
    /// The state directory the gateway serves.
    fn state_dir(&self) -> PathBuf;
    /// Whether the gateway keeps the index of memory root `root` in step.
    fn watches(&self, root: &Path) -> bool;
}

/// Answers a forwarded command line, or declines it.
pub(crate) type AnswerCommand = fn(&dyn WarmSearch, ForwardedCommand) -> ForwardAnswer;

impl WarmSearch for Shared {
    fn search(&self, req: &ResolvedSearch) -> anyhow::Result<Searched> {
        let searched = super::semantic::search(self, req)?;
        self.semantic.forwarded_answered();
        Ok(searched)
    }

    fn host(&self) -> &Host {
        &self.host
    }

    fn state_dir(&self) -> PathBuf {
        self.engine.app().paths.state_dir.clone()
    }

    fn watches(&self, root: &Path) -> bool {
        self.info.watching.iter().any(|w| w == root)
    }
}

/// Binds the socket at `path`, 0600, replacing a stale file.
fn bind(path: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
    crate::durable::remove_if_exists(path)?;
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    // Nobody connects before `listen` returned; the mode is set before
    // the first accept, and the peer's id is checked anyway.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves the command socket under the supervisor.
pub(crate) struct CommandSocket {
    pub listener: std::os::unix::net::UnixListener,
    pub path: PathBuf,
    pub answer: AnswerCommand,
}

impl CommandSocket {
    /// The socket for `state_dir`, answered by `answer`; `None` (logged)
    /// when it cannot be made: commands then ask over HTTP, as before.
    pub(crate) fn open(state_dir: &Path, answer: AnswerCommand) -> Option<CommandSocket> {
        let path = crate::gateway_client::forward::socket_path(state_dir);
        match bind(&path) {
            Ok(listener) => Some(CommandSocket {
                listener,
                path,
                answer,
            }),
            Err(err) => {
                tracing::warn!("no command socket at {}: {err}", path.display());
                None
            }
        }
    }
}

impl Drop for CommandSocket {
    fn drop(&mut self) {
        let _ = crate::durable::remove_if_exists(&self.path);
    }
}

impl Component for CommandSocket {
    fn kind(&self) -> ComponentKind {
        ComponentKind::CommandSocket
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> futures_util::future::BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let listener = tokio::net::UnixListener::from_std(self.listener.try_clone()?)?;
            let connections = tokio_util::task::TaskTracker::new();
            let own_uid = effective_uid();
            loop {
                let (stream, _) = tokio::select! {
                    () = stop.cancelled() => break,
                    accepted = listener.accept() => accepted?,
                };
                if stream.peer_cred().map(|c| c.uid()).ok() != Some(own_uid) {
                    continue;
                }
                let shared = shared.clone();
                let answer = self.answer;
                connections.spawn(async move {
                    if let Err(err) = serve_one(stream, shared, answer).await {
                        tracing::debug!("a forwarded command was not answered: {err:#}");
                    }
                });
            }
            connections.close();
            connections.wait().await;
            Ok(())
        })
    }
}

/// This process's effective user id.
fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

async fn serve_one(
    mut stream: tokio::net::UnixStream,
    shared: Arc<Shared>,
    answer: AnswerCommand,
) -> anyhow::Result<()> {
    let mut body = Vec::new();
    let mut limited = (&mut stream).take(MAX_REQUEST as u64 + 1);
    tokio::time::timeout(READ_LIMIT, limited.read_to_end(&mut body)).await??;
    let reply = if body.len() > MAX_REQUEST {
        ForwardAnswer::Declined {
            reason: "the request is too large".into(),
        }
    } else {
        match serde_json::from_slice::<ForwardedCommand>(&body) {
            Ok(command) => {
                // The model's helper is woken now, to be awake when the
                // query comes (it is the only command forwarded).
                shared.semantic.expect_query();
                let engine = shared.engine.clone();
                engine
                    .blocking(move || answer(shared.as_ref(), command))
                    .await?
            }
            Err(err) => ForwardAnswer::Declined {
                reason: format!("not a command line: {err}"),
            },
        }
    };
    if let ForwardAnswer::Declined { reason } = &reply {
        tracing::debug!(%reason, "a forwarded command was declined");
    }
    stream.write_all(&serde_json::to_vec(&reply)?).await?;
    stream.shutdown().await?;
    Ok(())
}
