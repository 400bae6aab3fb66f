//! The threads that run the engine's blocking work (see
//! [`super::Engine::blocking`]).
//!
//! Why not the runtime's own blocking pool: a thread that goes idle
//! should give its allocator's free pages back, once, and only then.
//! Giving them back after every piece (the only hook the runtime's pool
//! leaves) made the next piece fault the same pages in again: a sixth of
//! a busy gateway's CPU. Here a thread gives them back when it has found
//! no work for [`GIVE_BACK_AFTER`], so a burst runs on warm pages and the
//! gateway after it holds only live data.
//!
//! Work goes to the thread that went idle last. Woken in turn instead
//! (a condition variable wakes its oldest waiter), the threads a burst
//! left took turns at a gateway's searches one after another: each found
//! its pages given back and faulted them in again (150 faults and 25
//! `madvise` calls per hybrid search on three threads). The threads left
//! idle give their pages back once and end.
//!
//! Invariants: a job submitted runs (a new thread starts whenever none is
//! free, idle or between two jobs, so work that waits for other work
//! never waits for a thread); a job's panic is caught and handed to its
//! waiter; a thread idle for [`KEEP_ALIVE`] ends.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Idle time after which a thread gives its free pages back.
pub(crate) const GIVE_BACK_AFTER: Duration = Duration::from_millis(10);
/// Idle time after which a thread ends.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A job runs its work and returns how to hand the outcome over, which
/// the thread does once it counts itself free again: the waiter's next
/// job then finds it rather than starting another thread.
type Job = Box<dyn FnOnce() -> Handover + Send>;
type Handover = Box<dyn FnOnce() + Send>;
type Panic = Box<dyn std::any::Any + Send>;

/// Why a job gave no value.
pub(super) enum Failed {
    Panicked(Panic),
    /// The job never ran: no thread could be started.
    NotRun,
}

/// Runs `work` on a pool thread, inside the caller's runtime (so it may
/// wait on it), and returns its value or its panic.
pub(super) async fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Failed> {
    run_on(pool(), work).await
}

async fn run_on<T: Send + 'static>(
    pool: &'static Pool,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Failed> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::try_current().ok();
    // Tests pause the runtime's clock, which jumps ahead whenever the
    // runtime idles unless a blocking task of its own runs: one waits
    // for the job, as the runtime's pool would have run it.
    #[cfg(test)]
    let (ran_tx, ran_rx) = std::sync::mpsc::channel::<()>();
    #[cfg(test)]
    let clock_held = tokio::task::spawn_blocking(move || {
        let _ = ran_rx.recv();
    });
    let job: Job = Box::new(move || {
        let outcome = {
            let _runtime = runtime.as_ref().map(tokio::runtime::Handle::enter);
            std::panic::catch_unwind(AssertUnwindSafe(work))
        };
        Box::new(move || {
            let _ = tx.send(outcome);
            // After the send: the clock stays held until the waiter is due.
            #[cfg(test)]
            drop(ran_tx);
        })
    });
    pool.submit(job);
    let outcome = rx.await;
    #[cfg(test)]
    let _ = clock_held.await;
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => Err(Failed::Panicked(panic)),
        Err(_) => Err(Failed::NotRun),
    }
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

#[derive(Default)]
struct Pool {
    state: Mutex<State>,
}

/// An idle thread's own bell: told of work through it alone.
#[derive(Default)]
struct Waiter {
    bell: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for work and not yet told of any, the one that
    /// went idle last at the end.
    idle: Vec<Arc<Waiter>>,
    /// Threads told of work and not yet awake.
    told: Vec<Arc<Waiter>>,
    /// Threads running a job.
    busy: usize,
    threads: usize,
    /// Times a thread gave its free pages back (for tests).
    give_backs: u64,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn submit(&'static self, job: Job) {
        let mut state = self.lock();
        state.jobs.push_back(job);
        // Threads that will look at the queue before they wait: those
        // between two jobs (or starting) and those told of work.
        let between = state
            .threads
            .saturating_sub(state.busy + state.idle.len() + state.told.len());
        if state.jobs.len() <= between + state.told.len() {
            return;
        }
        if let Some(waiter) = state.idle.pop() {
            waiter.bell.notify_one();
            state.told.push(waiter);
            return;
        }
        state.threads += 1;
        drop(state);
        let started = std::thread::Builder::new()
            .name("almanac-blocking".into())
            .spawn(move || self.serve());
        if let Err(e) = started {
            tracing::error!("cannot start a thread for blocking work: {e}");
            let mut state = self.lock();
            state.threads -= 1;
            if state.threads == 0 {
                // Nobody would ever run them: their waiters hear so.
                state.jobs.clear();
            }
        }
    }

    /// A thread's life: jobs while there are any; free pages given back
    /// once it has been idle a moment; the end once idle for long.
    fn serve(&self) {
        let me = Arc::new(Waiter::default());
        let mut ran_since_give_back = false;
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                state.busy += 1;
                drop(state);
                let handover = job();
                ran_since_give_back = true;
                self.lock().busy -= 1;
                handover();
                state = self.lock();
                continue;
            }
            let wait = if ran_since_give_back {
                GIVE_BACK_AFTER
            } else {
                KEEP_ALIVE
            };
            let (held, told) = Self::wait_for_work(&me, state, wait);
            state = held;
            if told {
                continue;
            }
            if ran_since_give_back {
                drop(state);
                crate::host::allocator::release_thread_free_pages();
                ran_since_give_back = false;
                state = self.lock();
                state.give_backs += 1;
            } else if state.jobs.is_empty() {
                state.threads -= 1;
                return;
            }
        }
    }

    /// Waits up to `wait` to be told of work: whether it was.
    fn wait_for_work<'a>(
        me: &Arc<Waiter>,
        mut state: MutexGuard<'a, State>,
        wait: Duration,
    ) -> (MutexGuard<'a, State>, bool) {
        let deadline = Instant::now() + wait;
        state.idle.push(me.clone());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (held, _) = me
                .bell
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner());
            state = held;
            if let Some(at) = state.told.iter().position(|w| Arc::ptr_eq(w, me)) {
                // The submitter took this thread off the idle list.
                state.told.swap_remove(at);
                return (state, true);
            }
            if Instant::now() >= deadline {
                state.idle.retain(|w| !Arc::ptr_eq(w, me));
                return (state, false);
            }
        }
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
