//! What a deliverer needs from the process it runs in: the clock, where
//! the outbox is, the settings and secrets it reads at each attempt, the
//! webhook clients and the boundary for blocking work. The engine gives
//! it; delivery imports nothing above itself.

use std::path::PathBuf;

use futures_util::future::BoxFuture;

/// The environment of a [`super::Deliverer`].
pub(crate) trait Env: Send + Sync + 'static {
    /// Now, in ms since the epoch, from the host's clock.
    fn now_ms(&self) -> i64;
    /// `<state dir>/outbox/`.
    fn outbox_dir(&self) -> PathBuf;
    /// `delivery.webhook.allowPrivateNetwork` as the config says now.
    fn allow_private_network(&self) -> bool;
    /// The value at config key `key` now (a signing secret, a token).
    fn config_value(&self, key: &str) -> Option<serde_json::Value>;
    /// The client webhook posts go out with; `guarded` for a URL a model
    /// gave (no proxy, public addresses only).
    fn webhook_client(&self, guarded: bool) -> reqwest::Client;
    /// One attempt at a chat's reply through its channel's client; with
    /// how many of its messages went out in all.
    fn send_chat(
        &self,
        message: super::webhook::ChatMessage,
    ) -> BoxFuture<'static, (super::webhook::AttemptOutcome, usize)>;
    /// Runs `work` off the async threads.
    fn run_blocking(
        &self,
        work: Box<dyn FnOnce() + Send>,
    ) -> BoxFuture<'static, anyhow::Result<()>>;
}

impl dyn Env {
    /// Runs `work` through [`Env::run_blocking`] and gives its value.
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        let (done, value) = tokio::sync::oneshot::channel();
        self.run_blocking(Box::new(move || {
            let _ = done.send(work());
        }))
        .await?;
        value
            .await
            .map_err(|_| anyhow::anyhow!("blocking work ended without a value"))
    }
}
