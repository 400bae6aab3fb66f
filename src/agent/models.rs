//! The models one turn may call, in order: the chosen one, then its
//! fallbacks (`agents.defaults.model.fallbacks`, or a cron job's own
//! `fallbacks`, which replace them).
//!
//! Invariants:
//! * A call goes to the current model with that model's retries; when it
//!   still fails, the next model is tried with the same request (cleaned
//!   for its protocol), and the turn stays on the model that answered.
//! * A fallback is connected only when it is needed.
//! * What fell back, and why, is kept for the turn's report.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::provider::{
    self, Endpoint, Provider, ProviderError, Request, Response, RetryPolicy, StreamSink,
};

/// Builds a model client for an endpoint.
pub(crate) type Connect = Arc<dyn Fn(Endpoint) -> Arc<dyn Provider> + Send + Sync>;

/// One model of the chain.
pub(crate) struct Link {
    /// `provider/model`.
    pub reference: String,
    /// The name sent to the provider.
    pub name: String,
    pub endpoint: Endpoint,
    client: OnceLock<Arc<dyn Provider>>,
}

impl Link {
    pub(crate) fn new(reference: String, name: String, endpoint: Endpoint) -> Link {
        Link {
            reference,
            name,
            endpoint,
            client: OnceLock::new(),
        }
    }
}

/// The models of a turn.
pub(crate) struct Models {
    links: Vec<Link>,
    at: AtomicUsize,
    connect: Connect,
    fell_back: Mutex<Vec<String>>,
}

impl Models {
    /// `first`, already connected as `client`, then `fallbacks`.
    pub(crate) fn new(
        first: Link,
        client: Arc<dyn Provider>,
        fallbacks: Vec<Link>,
        connect: Connect,
    ) -> Models {
        let _ = first.client.set(client);
        let mut links = vec![first];
        links.extend(fallbacks);
        Models {
            links,
            at: AtomicUsize::new(0),
            connect,
            fell_back: Mutex::new(Vec::new()),
        }
    }

    fn current(&self) -> &Link {
        &self.links[self.at.load(Ordering::Acquire).min(self.links.len() - 1)]
    }

    /// The endpoint of the model calls go to now.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.current().endpoint
    }

    /// The name sent to the provider of the model calls go to now.
    pub(crate) fn name(&self) -> &str {
        &self.current().name
    }

    /// `provider/model` of the model calls go to now.
    pub(crate) fn reference(&self) -> &str {
        &self.current().reference
    }

    /// What fell back to what, and why.
    pub(crate) fn fell_back(&self) -> Vec<String> {
        self.fell_back
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn client(&self) -> Arc<dyn Provider> {
        let link = self.current();
        link.client
            .get_or_init(|| (self.connect)(link.endpoint.clone()))
            .clone()
    }

    /// Moves on to the next model after `err`; `false` when there is none.
    fn advance(&self, err: &ProviderError) -> bool {
        let at = self.at.load(Ordering::Acquire);
        if at + 1 >= self.links.len() {
            return false;
        }
        let (from, to) = (&self.links[at].reference, &self.links[at + 1].reference);
        tracing::warn!(%err, from = %from, to = %to, "model call failed; trying the next model");
        self.fell_back
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{from} failed ({err}); {to} was tried next"));
        self.at.store(at + 1, Ordering::Release);
        true
    }

    /// One call: `build` makes the request for a model (its endpoint and
    /// name), which is tried with its retries, then on the next models
    /// while it fails.
    pub(crate) async fn call(
        &self,
        build: &(dyn Fn(&Endpoint, &str) -> Request + Sync),
        sink: &mut dyn StreamSink,
        retry: &RetryPolicy,
    ) -> Result<Response, ProviderError> {
        loop {
            let request = build(self.endpoint(), self.name());
            let client = self.client();
            match provider::call_with_retries(client.as_ref(), &request, sink, retry).await {
                Ok(response) => return Ok(response),
                Err(err) => {
                    if !self.advance(&err) {
                        return Err(err);
                    }
                }
            }
        }
    }
}
