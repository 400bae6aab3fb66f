//! A helper thread that shares a query's matrix products with the thread
//! that runs the query.
//!
//! A query's forward pass is some forty products of a few rows by a
//! weight matrix, each tens of microseconds long: too short to hand to a
//! thread pool (waking its threads and handing the work over cost about
//! as much as the work), long enough that a second core halves it. The
//! helper here spins a little while between products, so it is awake for
//! the next one, and parks when none comes.
//!
//! Invariants:
//! * The asking thread works on the tasks itself; the helper only takes
//!   tasks nobody has taken. A busy or descheduled helper delays nothing
//!   but the task it holds.
//! * [`Crew::for_each`] returns only once the helper has let go of the
//!   job: it never touches the caller's data afterwards.
//! * A task that panics on the helper makes [`Crew::for_each`] panic on
//!   the asking thread, as it would have had that thread run it.
//! * One asker at a time shares the helper: a second thread asking
//!   meanwhile runs its tasks alone (a posted job is the asker's, and
//!   only the asker takes it back).
//! * Dropping the crew stops and joins its thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the helper waits, awake, for the next product before it
/// parks: longer than the gaps between a pass's products.
const STAY_AWAKE: Duration = Duration::from_micros(200);

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const RUNNING: u8 = 2;
const STOP: u8 = 3;

/// Tasks `0..tasks`, each run once by whichever thread takes it.
struct Job<'a> {
    next: AtomicUsize,
    tasks: usize,
    run: &'a (dyn Fn(usize) + Sync),
    /// A task panicked on the helper (the asking thread panics in turn).
    helper_panicked: AtomicBool,
}

impl Job<'_> {
    fn work(&self) {
        loop {
            let task = self.next.fetch_add(1, Ordering::Relaxed);
            if task >= self.tasks {
                return;
            }
            (self.run)(task);
        }
    }
}

struct Shared {
    state: AtomicU8,
    /// A thread is in [`Crew::for_each`] with the helper.
    asked: AtomicBool,
    /// The posted job (a `Job` on the asking thread's stack), valid while
    /// `state` is `POSTED` or `RUNNING`.
    job: AtomicPtr<()>,
}

/// One helper thread for [`Crew::for_each`].
pub(crate) struct Crew {
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
}

impl Crew {
    /// A crew with one helper; `None` on a single core or when no thread
    /// can be started (the work then runs on the asking thread alone).
    pub(crate) fn new() -> Option<Crew> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores < 2 {
            return None;
        }
        let shared = Arc::new(Shared {
            state: AtomicU8::new(IDLE),
            asked: AtomicBool::new(false),
            job: AtomicPtr::new(std::ptr::null_mut()),
        });
        let theirs = shared.clone();
        let helper = std::thread::Builder::new()
            .name("almanac-embed-crew".into())
            .spawn(move || help(&theirs))
            .ok()?;
        Some(Crew {
            shared,
            helper: Some(helper),
        })
    }

    /// Runs `run(0..tasks)`, each task once, on this thread and the
    /// helper (unless another thread has it); returns when all have run.
    pub(crate) fn for_each(&self, tasks: usize, run: &(dyn Fn(usize) + Sync)) {
        let job = Job {
            next: AtomicUsize::new(0),
            tasks,
            run,
            helper_panicked: AtomicBool::new(false),
        };
        let shared = tasks > 1
            && self
                .shared
                .asked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        if shared {
            self.shared.job.store(
                std::ptr::from_ref(&job).cast_mut().cast(),
                Ordering::Relaxed,
            );
            self.shared.state.store(POSTED, Ordering::Release);
            if let Some(helper) = &self.helper {
                helper.thread().unpark();
            }
        }
        // Not unwound past the wait below: the helper may hold the job.
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work()));
        if shared {
            // Take the job back; if the helper holds it, wait for it to
            // finish the task in its hands.
            if self
                .shared
                .state
                .compare_exchange(POSTED, IDLE, Ordering::Acquire, Ordering::Acquire)
                .is_err()
            {
                wait_while(&self.shared.state, RUNNING);
            }
            self.shared.asked.store(false, Ordering::Release);
        }
        if let Err(panic) = mine {
            std::panic::resume_unwind(panic);
        }
        if job.helper_panicked.load(Ordering::Acquire) {
            panic!("a task shared with the helper thread panicked there");
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.shared.state.store(STOP, Ordering::Release);
        if let Some(helper) = self.helper.take() {
            helper.thread().unpark();
            let _ = helper.join();
        }
    }
}

/// Spins (then yields) until `state` is no longer `value`.
fn wait_while(state: &AtomicU8, value: u8) {
    let mut spins = 0u32;
    while state.load(Ordering::Acquire) == value {
        if spins < 10_000 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The helper's loop: take posted jobs, stay awake a while after each,
/// park when none comes, end on `STOP`.
fn help(shared: &Shared) {
    let mut awake_since = Instant::now();
    let mut spins = 0u32;
    loop {
        match shared.state.load(Ordering::Acquire) {
            STOP => return,
            POSTED => {
                if shared
                    .state
                    .compare_exchange(POSTED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    // SAFETY: the asking thread keeps the job alive until
                    // it sees the state leave RUNNING, set just below.
                    let job = unsafe { &*shared.job.load(Ordering::Relaxed).cast::<Job<'_>>() };
                    // A panic is handed to the asking thread, and the
                    // helper lives on: the asker must not wait forever.
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work()))
                        .is_err()
                    {
                        job.helper_panicked.store(true, Ordering::Release);
                    }
                    shared.state.store(IDLE, Ordering::Release);
                }
                awake_since = Instant::now();
            }
            _ => {
                spins = spins.wrapping_add(1);
                // The clock is read now and then: reading it is slower
                // than a turn of this loop.
                if !spins.is_multiple_of(64) || awake_since.elapsed() < STAY_AWAKE {
                    std::hint::spin_loop();
                } else {
                    // An unpark since the last park returns at once.
                    std::thread::park();
                    awake_since = Instant::now();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_task_runs_once_whoever_takes_it() {
        let Some(crew) = Crew::new() else { return };
        for tasks in [0, 1, 2, 7, 64] {
            for _ in 0..200 {
                let seen = Mutex::new(vec![0u32; tasks]);
                crew.for_each(tasks, &|t| seen.lock().unwrap()[t] += 1);
                assert_eq!(*seen.lock().unwrap(), vec![1; tasks]);
            }
        }
    }

    #[test]
    fn askers_on_several_threads_each_get_every_task_run_once() {
        let Some(crew) = Crew::new() else { return };
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    for _ in 0..2000 {
                        let seen: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
                        crew.for_each(16, &|t| {
                            // Long enough for the helper to be in a task
                            // when another thread asks.
                            let until = Instant::now() + Duration::from_micros(2);
                            while Instant::now() < until {
                                std::hint::spin_loop();
                            }
                            seen[t].fetch_add(1, Ordering::Relaxed);
                        });
                        assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
                    }
                });
            }
        });
    }

    #[test]
    fn a_task_that_panics_anywhere_panics_the_asker_and_the_crew_lives_on() {
        let Some(crew) = Crew::new() else { return };
        for _ in 0..50 {
            let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crew.for_each(16, &|t| assert!(t != 7, "task 7 fails"));
            }));
            assert!(asked.is_err());
        }
        let seen = Mutex::new(0);
        crew.for_each(16, &|_| *seen.lock().unwrap() += 1);
        assert_eq!(*seen.lock().unwrap(), 16);
    }
}
