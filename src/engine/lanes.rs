//! Session lanes: at most one turn per session key at a time, the others
//! waiting in arrival order.
//!
//! Entering is two steps so the caller can record its place before it
//! waits: [`Lanes::enqueue`] takes a ticket at once (or refuses when the
//! lane's queue is full), and [`Ticket::enter`] waits for the turn. A lane
//! hands itself to the next live ticket when its guard drops; a ticket
//! given up while waiting is skipped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Why a request could not join a lane.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum LaneError {
    #[error(
        "session {key} has {waiting} requests waiting (the most a session queues); try again later"
    )]
    Full { key: String, waiting: usize },
}

#[derive(Debug, Default)]
struct Lane {
    busy: bool,
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// All lanes of one engine.
#[derive(Debug)]
pub(crate) struct Lanes {
    lanes: Mutex<HashMap<String, Lane>>,
    capacity: usize,
}

/// A place in a lane.
#[derive(Debug)]
pub(crate) struct Ticket {
    lanes: Arc<Lanes>,
    key: String,
    /// `None`: the lane was free and is ours already.
    wait: Option<oneshot::Receiver<()>>,
    entered: bool,
}

/// The lane, held: dropping it lets the next ticket in.
#[derive(Debug)]
pub(crate) struct LaneGuard {
    lanes: Arc<Lanes>,
    key: String,
}

impl Lanes {
    /// Lanes whose queues hold at most `capacity` waiting requests.
    pub(crate) fn new(capacity: usize) -> Arc<Lanes> {
        Arc::new(Lanes {
            lanes: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        })
    }

    /// Takes a place in `key`'s lane.
    pub(crate) fn enqueue(self: &Arc<Self>, key: &str) -> Result<Ticket, LaneError> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let lane = lanes.entry(key.to_string()).or_default();
        let wait = if lane.busy {
            lane.waiting.retain(|tx| !tx.is_closed());
            if lane.waiting.len() >= self.capacity {
                return Err(LaneError::Full {
                    key: key.to_string(),
                    waiting: lane.waiting.len(),
                });
            }
            let (tx, rx) = oneshot::channel();
            lane.waiting.push_back(tx);
            Some(rx)
        } else {
            lane.busy = true;
            None
        };
        Ok(Ticket {
            lanes: self.clone(),
            key: key.to_string(),
            wait,
            entered: false,
        })
    }

    /// Whether `key`'s lane would take one more request now (a caller
    /// that records the request first asks before recording it).
    pub(crate) fn room(&self, key: &str) -> Result<(), LaneError> {
        let waiting = self.waiting(key);
        if waiting >= self.capacity {
            return Err(LaneError::Full {
                key: key.to_string(),
                waiting,
            });
        }
        Ok(())
    }

    /// Whether a turn runs or waits in `key`'s lane.
    pub(crate) fn busy(&self, key: &str) -> bool {
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes.get(key).is_some_and(|l| l.busy)
    }

    /// Requests waiting in `key`'s lane (not counting the running one).
    pub(crate) fn waiting(&self, key: &str) -> usize {
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes
            .get(key)
            .map_or(0, |l| l.waiting.iter().filter(|tx| !tx.is_closed()).count())
    }

    fn release(&self, key: &str) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(lane) = lanes.get_mut(key) else {
            return;
        };
        while let Some(tx) = lane.waiting.pop_front() {
            if tx.send(()).is_ok() {
                return;
            }
        }
        lane.busy = false;
        if lane.waiting.is_empty() {
            lanes.remove(key);
        }
    }
}

impl Ticket {
    /// Waits until the lane is this ticket's, without entering it (a
    /// queued run waits here before it builds its turn). Cancel-safe: given
    /// up, the ticket still holds its place.
    pub(crate) async fn ready(&mut self) {
        if let Some(wait) = self.wait.as_mut() {
            let _ = wait.await;
            self.wait = None;
        }
    }

    /// Waits for the lane.
    pub(crate) async fn enter(mut self) -> LaneGuard {
        if let Some(wait) = self.wait.take() {
            // The sender is dropped only by a release that found this
            // ticket closed, which cannot happen while we wait here.
            let _ = wait.await;
        }
        self.entered = true;
        LaneGuard {
            lanes: self.lanes.clone(),
            key: self.key.clone(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.entered {
            return;
        }
        match self.wait.take() {
            // Never waited: the lane was ours, give it on.
            None => self.lanes.release(&self.key),
            // Given up while waiting. If the lane was handed to us in the
            // meantime, pass it on; otherwise `release` skips our closed
            // sender.
            Some(mut rx) => {
                if rx.try_recv().is_ok() {
                    self.lanes.release(&self.key);
                }
            }
        }
    }
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        self.lanes.release(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn one_turn_per_lane_in_enqueue_order() {
        let lanes = Lanes::new(128);
        let order = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..20u64 {
            let ticket = lanes.enqueue("agent:main:main").unwrap();
            let (order, running) = (order.clone(), running.clone());
            handles.push(tokio::spawn(async move {
                let _guard = ticket.enter().await;
                assert_eq!(
                    running.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two turns at once"
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                order.lock().unwrap().push(i);
                running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
        assert!(
            lanes.lanes.lock().unwrap().is_empty(),
            "a lane nobody holds or waits for is gone"
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn other_sessions_do_not_wait() {
        let lanes = Lanes::new(4);
        let _a = lanes.enqueue("a").unwrap().enter().await;
        let b = tokio::time::timeout(std::time::Duration::from_millis(1), async {
            lanes.enqueue("b").unwrap().enter().await
        })
        .await;
        assert!(b.is_ok());
    }

    #[test]
    fn a_full_lane_refuses_and_an_abandoned_ticket_frees_its_place() {
        let lanes = Lanes::new(2);
        let running = lanes.enqueue("k").unwrap();
        let w1 = lanes.enqueue("k").unwrap();
        let _w2 = lanes.enqueue("k").unwrap();
        assert_eq!(
            lanes.enqueue("k").unwrap_err(),
            LaneError::Full {
                key: "k".into(),
                waiting: 2
            }
        );
        drop(w1);
        assert_eq!(lanes.waiting("k"), 1);
        assert!(lanes.enqueue("k").is_ok());
        drop(running);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_abandoned_waiter_is_skipped() {
        let lanes = Lanes::new(8);
        let first = lanes.enqueue("k").unwrap().enter().await;
        let gone = lanes.enqueue("k").unwrap();
        let next = lanes.enqueue("k").unwrap();
        drop(gone);
        drop(first);
        let entered = tokio::time::timeout(std::time::Duration::from_millis(1), next.enter()).await;
        assert!(entered.is_ok(), "the lane passed over the abandoned ticket");
    }
}
