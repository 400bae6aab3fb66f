//! The delivery component: the gateway's row for the [`Deliverer`]'s
//! work. At its first start it resumes the webhook deliveries an earlier
//! gateway left pending; it answers in `gateway status` for the outbox
//! and the deliveries journal (one that cannot be synced shows here).
//!
//! [`Deliverer`]: crate::delivery::Deliverer

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::supervisor::{Component, ComponentKind};

pub(crate) struct Delivery;

impl Component for Delivery {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Delivery
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            // What is left pending is taken once: a restart resumes
            // nothing twice.
            crate::delivery::resume_pending(&shared.deliverer).await;
            stop.cancelled().await;
            Ok(())
        })
    }

    fn journals(
        &self,
        shared: &Shared,
    ) -> Vec<tokio::sync::watch::Receiver<crate::durable::SyncHealth>> {
        shared.deliverer.journals()
    }
}
