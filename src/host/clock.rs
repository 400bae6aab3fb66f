//! The one source of "now": a [`Clock`] handed down with the [`Host`].
//!
//! A short command reads it a few times; the gateway reads it for every
//! turn and every tick, so nothing below the host keeps a frozen copy of
//! the time. Tests inject a [`ManualClock`] and move it by hand.

use jiff::Timestamp;

/// Something that tells the time.
pub(crate) trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that always says the same instant (`--now`, `ALMANAC_NOW`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FixedClock(pub Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// A clock moved by hand, shared by every holder of a clone.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct ManualClock(std::sync::Arc<std::sync::Mutex<Timestamp>>);

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new(start: Timestamp) -> ManualClock {
        ManualClock(std::sync::Arc::new(std::sync::Mutex::new(start)))
    }

    /// Moves the clock forward by `by`.
    pub(crate) fn advance(&self, by: std::time::Duration) {
        let mut now = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let span = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
        *now = now.checked_add(span).unwrap_or(Timestamp::MAX);
    }

    /// Sets the clock to `at`.
    pub(crate) fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }
}

#[cfg(test)]
impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Wall time that moves with tokio's clock, so a test on paused time
/// sees the wall clock advance as its sleeps do.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

#[cfg(test)]
impl TokioClock {
    pub(crate) fn new(base: Timestamp) -> TokioClock {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

#[cfg(test)]
impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now() - self.start;
        self.base + jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_it() {
        let start: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let clock = ManualClock::new(start);
        let other = clock.clone();
        assert_eq!(clock.now(), start);
        other.advance(std::time::Duration::from_secs(90));
        assert_eq!(clock.now().as_second() - start.as_second(), 90);
        clock.set(start);
        assert_eq!(other.now(), start);
    }

    #[test]
    fn system_clock_moves() {
        let a = SystemClock.now();
        let b = SystemClock.now();
        assert!(b >= a);
    }
}
