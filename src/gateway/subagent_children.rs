//! The children a gateway holds in memory: those accepted and not yet
//! ended (by parent session, counted against `maxChildrenPerAgent` before
//! the ledger has them), the slots of those running (at most
//! `maxConcurrent`), those waiting for a slot (a kill stops them where
//! they wait), steering messages for running children, and the relays
//! running per parent session (one at a time; announces that arrive
//! meanwhile get one more turn of it).

use std::collections::{HashMap, HashSet};

/// The children this gateway accepted, by parent session, until they
/// end; and those running at once, at most `maxConcurrent` (read at each
/// start, so a reloaded config applies to the next child).
#[derive(Debug, Default)]
pub(crate) struct Children {
    accepted: std::sync::Mutex<HashMap<String, HashSet<String>>>,
    running: std::sync::Mutex<usize>,
    freed: tokio::sync::Notify,
    /// Children waiting for a slot, by task id: killing one wakes it.
    waiting: std::sync::Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// Steering messages for a child's running turn, by its session key.
    steering: std::sync::Mutex<HashMap<String, Vec<String>>>,
    /// Relays running, by parent session: whether an announce came since.
    relays: std::sync::Mutex<HashMap<String, bool>>,
}

/// One child's place among those running; given back when dropped.
pub(crate) struct Slot<'a>(&'a Children);

impl Children {
    /// `run_id` was accepted for `parent`.
    pub(crate) fn accepted(&self, parent: &str, run_id: &str) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        accepted
            .entry(parent.to_string())
            .or_default()
            .insert(run_id.to_string());
    }

    /// `run_id`, a child of `parent`, ended.
    pub(crate) fn ended(&self, parent: &str, run_id: &str) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(runs) = accepted.get_mut(parent) {
            runs.remove(run_id);
            if runs.is_empty() {
                accepted.remove(parent);
            }
        }
    }

    /// The children of `parent` accepted here and not ended.
    pub(crate) fn accepted_of(&self, parent: &str) -> HashSet<String> {
        let accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        accepted.get(parent).cloned().unwrap_or_default()
    }

    /// Whether a relay must start for `parent`: none runs for it now.
    /// When one does, it is told to look again once its turn is done.
    pub(crate) fn relay_wanted(&self, parent: &str) -> bool {
        let mut relays = self.relays.lock().unwrap_or_else(|p| p.into_inner());
        match relays.get_mut(parent) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                relays.insert(parent.to_string(), false);
                true
            }
        }
    }

    /// Whether the relay of `parent` must look again (an announce came
    /// while it ran); when not, it is done and the next announce starts
    /// another.
    pub(crate) fn relay_again(&self, parent: &str) -> bool {
        let mut relays = self.relays.lock().unwrap_or_else(|p| p.into_inner());
        match relays.get_mut(parent) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                relays.remove(parent);
                false
            }
        }
    }

    /// Children waiting for a slot now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Stops task `task_id` waiting for a slot; whether it was waiting.
    pub(crate) fn stop_waiting(&self, task_id: &str) -> bool {
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.get(task_id).map(|t| t.cancel()).is_some()
    }

    /// Queues `text` for the running turn of `session_key`.
    pub(crate) fn steer(&self, session_key: &str, text: String) {
        let mut steering = self.steering.lock().unwrap_or_else(|p| p.into_inner());
        steering
            .entry(session_key.to_string())
            .or_default()
            .push(text);
    }

    /// The steering waiting for `session_key`, taken.
    pub(crate) fn take_steering(&self, session_key: &str) -> Vec<String> {
        let mut steering = self.steering.lock().unwrap_or_else(|p| p.into_inner());
        steering.remove(session_key).unwrap_or_default()
    }

    /// Waits for a slot as task `task_id`; `None` when it was stopped
    /// while it waited ([`Children::stop_waiting`]).
    pub(crate) async fn take_or_stop(&self, task_id: &str, max: usize) -> Option<Slot<'_>> {
        let stop = tokio_util::sync::CancellationToken::new();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task_id.to_string(), stop.clone());
        let slot = tokio::select! {
            slot = self.take(max) => Some(slot),
            () = stop.cancelled() => None,
        };
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id);
        slot
    }

    /// Waits until fewer than `max` children run, then counts this one.
    pub(crate) async fn take(&self, max: usize) -> Slot<'_> {
        loop {
            // Asked before looking, so a slot freed between the look and
            // the wait is not missed.
            let freed = self.freed.notified();
            {
                let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                if *running < max.max(1) {
                    *running += 1;
                    return Slot(self);
                }
            }
            freed.await;
        }
    }

    /// Children running now.
    #[cfg(test)]
    fn running(&self) -> usize {
        *self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut running = self.0.running.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        drop(running);
        self.0.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn no_more_children_run_than_the_limit_and_a_freed_slot_lets_the_next_in() {
        let slots = std::sync::Arc::new(Children::default());
        let first = slots.take(2).await;
        let _second = slots.take(2).await;
        assert_eq!(slots.running(), 2);
        let waiting = {
            let slots = slots.clone();
            tokio::spawn(async move {
                let _third = slots.take(2).await;
                slots.running()
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a third waits while two run");
        drop(first);
        assert_eq!(waiting.await.unwrap(), 2);
        assert_eq!(slots.running(), 1);
    }
}
