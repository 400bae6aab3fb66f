//! A live stream of the outbox ([`super::Deliverer::follow`]): entries
//! this process writes as they are announced, others' as the file is
//! read, none twice, none skipped.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::outbox::{Announced, Appended, Entry, Reader};

/// A live stream's state.
pub(super) struct Follow {
    pub(super) env: std::sync::Arc<dyn super::Env>,
    pub(super) stop: CancellationToken,
    pub(super) announced: broadcast::Receiver<Arc<Appended>>,
    /// `None` only while a read of the file is under way.
    pub(super) reader: Option<Reader>,
    pub(super) queue: VecDeque<Entry>,
    pub(super) check: tokio::time::Interval,
}

impl Follow {
    pub(super) async fn next(mut self) -> Option<(Entry, Follow)> {
        loop {
            if let Some(entry) = self.queue.pop_front() {
                return Some((entry, self));
            }
            let read_file = tokio::select! {
                () = self.stop.cancelled() => return None,
                announced = self.announced.recv() => match announced {
                    Ok(appended) => match self.reader.as_mut()?.announced(&appended) {
                        Announced::Next(entry) => {
                            self.queue.push_back(*entry);
                            false
                        }
                        Announced::Seen => false,
                        Announced::Gap => true,
                    },
                    // Announcements were missed: the file has them all.
                    Err(broadcast::error::RecvError::Lagged(_)) => true,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.check.tick() => true,
            };
            if read_file {
                let mut reader = self.reader.take()?;
                let (reader, polled) = self
                    .env
                    .blocking(move || {
                        let polled = reader.poll();
                        (reader, polled)
                    })
                    .await
                    .ok()?;
                self.reader = Some(reader);
                match polled {
                    Ok(polled) => {
                        if polled.unreadable > 0 {
                            tracing::warn!(
                                unreadable = polled.unreadable,
                                "skipped unreadable outbox lines"
                            );
                        }
                        self.queue.extend(polled.entries);
                    }
                    Err(err) => tracing::warn!(%err, "cannot read the outbox; trying again"),
                }
            }
        }
    }
}
