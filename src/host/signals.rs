//! The signals that ask a long-running command (the gateway, `mcp serve`)
//! to stop: SIGTERM and SIGINT.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT, listened for from [`StopSignals::listen`] on: one
/// that comes before [`StopSignals::recv`] is kept for it, whereas one
/// that comes before `listen` finds either no handler (the process dies
/// without its shutdown) or tokio's with no listener (it is dropped).
/// Each is `None` when it cannot be listened for.
pub(crate) struct StopSignals {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl StopSignals {
    /// Listens from now on (inside a runtime with its signal driver).
    pub(crate) fn listen() -> StopSignals {
        StopSignals {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Waits for either (forever when neither can be listened for).
    pub(crate) async fn recv(&mut self) {
        async fn one(signal: Option<&mut Signal>) {
            let received = match signal {
                Some(signal) => signal.recv().await,
                None => None,
            };
            if received.is_none() {
                std::future::pending::<()>().await;
            }
        }
        tokio::select! {
            () = one(self.term.as_mut()) => {}
            () = one(self.int.as_mut()) => {}
        }
    }
}
