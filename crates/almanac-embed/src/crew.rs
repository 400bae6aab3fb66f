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
//! The helper spins only on another CPU than its asker's. Woken onto the
//! asker's CPU (the scheduler places a woken thread near its waker) its
//! spinning would take the time the asker needs to post the next product
//! (all-MiniLM-L6-v2, 2 cores: a query after 10 ms idle took 3.3 ms with
//! a spinning helper, 2.3 ms without; `examples/warm.rs`). So it steps
//! aside: it narrows its own CPU mask to the other CPUs it may run on,
//! which moves it there at once, and keeps that mask while it parks, so
//! that it wakes there too. Parking after each task instead (still what
//! it does when no other CPU is allowed) left a query after 3 ms idle at
//! 1.5 to 1.7 ms against 0.9 back to back; stepping aside, 1.0 to 1.4
//! (after 10 ms idle: 1.7 to 2.1, and 1.2 to 1.5).
//!
//! The helper can also lead: [`Crew::lead`] hands it a whole task (a
//! query's forward pass) while the asking thread does other work of its
//! own (the words part of a search), then helps with the task's products
//! once that work is done. The two overlap on two cores instead of
//! following each other.
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
//! * The helper never spins on the CPU its asker last posted from.
//! * The helper narrows its CPU mask only by its asker's CPU, from the
//!   mask it had before; a mask set on it from outside is the one it
//!   narrows from then on.
//! * A led task runs once: on the helper, or on the asking thread if the
//!   helper has not started it when it is waited for. [`Crew::lead`]
//!   returns only once the helper has let go of it; a task that panics on
//!   the helper panics the thread that waits for it.
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

/// States of the led task's slot.
const NO_LEAD: u8 = 0;
const LEAD_POSTED: u8 = 1;
const LEAD_TAKEN: u8 = 2;
const LEAD_DONE: u8 = 3;

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
    /// The CPU the last job was posted from ([`NO_CPU`]: unknown).
    asker_cpu: AtomicUsize,
    /// A thread has a task posted for the helper to lead.
    leading: AtomicBool,
    lead_state: AtomicU8,
    /// The posted task (a `LeadJob` on the posting thread's stack), valid
    /// while `lead_state` is `LEAD_POSTED` or `LEAD_TAKEN`.
    lead: AtomicPtr<()>,
    /// Turns of the helper's waiting loop, for tests.
    #[cfg(test)]
    spins: AtomicUsize,
    /// The helper is parked, for tests.
    #[cfg(test)]
    parked: AtomicBool,
}

const NO_CPU: usize = usize::MAX;

/// The CPU this thread runs on now, when the system says.
fn current_cpu() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes nothing and only returns a number.
        let cpu = unsafe { libc::sched_getcpu() };
        if let Ok(cpu) = usize::try_from(cpu) {
            return cpu;
        }
    }
    NO_CPU
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
            asker_cpu: AtomicUsize::new(NO_CPU),
            leading: AtomicBool::new(false),
            lead_state: AtomicU8::new(NO_LEAD),
            lead: AtomicPtr::new(std::ptr::null_mut()),
            #[cfg(test)]
            spins: AtomicUsize::new(0),
            #[cfg(test)]
            parked: AtomicBool::new(false),
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
        let shared = tasks > 1 && claim(&self.shared.asked);
        if shared {
            self.shared
                .asker_cpu
                .store(current_cpu(), Ordering::Relaxed);
            self.shared.job.store(
                std::ptr::from_ref(&job).cast_mut().cast(),
                Ordering::Relaxed,
            );
            self.shared.state.store(POSTED, Ordering::Release);
            if let Some(helper) = &self.helper
                && helper.thread().id() != std::thread::current().id()
            {
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

impl Crew {
    /// Wakes the helper if it is parked: work is about to come. Awake, it
    /// waits a while for it before it parks again.
    pub(crate) fn wake(&self) {
        if let Some(helper) = &self.helper {
            helper.thread().unpark();
        }
    }

    /// Runs `meanwhile` on this thread while the helper runs `task` (its
    /// products shared through [`Crew::for_each`] as any asker's);
    /// `meanwhile` gets `task`'s result from [`Led::wait`], which helps
    /// with the task's products until it is done. Returns once the helper
    /// has let go of `task`; a task nobody waited for may not have run.
    pub(crate) fn lead<A: Send, R>(
        &self,
        task: impl FnOnce() -> A + Send,
        meanwhile: impl FnOnce(&Led<'_, A>) -> R,
    ) -> R {
        let task = std::sync::Mutex::new(Some(task));
        let out = std::sync::Mutex::new(None);
        let run = || {
            let task = task.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(task) = task {
                let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
                *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(made);
            }
        };
        let job = LeadJob { run: &run };
        let posted = self.helper.is_some() && claim(&self.shared.leading);
        if posted {
            self.shared.lead.store(
                std::ptr::from_ref(&job).cast_mut().cast(),
                Ordering::Relaxed,
            );
            self.shared.lead_state.store(LEAD_POSTED, Ordering::Release);
            self.wake();
        }
        let led = Led {
            shared: &self.shared,
            run: &run,
            out: &out,
            posted,
        };
        // Not unwound past the settling below: the helper may hold `task`.
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| meanwhile(&led)));
        led.settle();
        done.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// The task a thread posted for the helper to lead.
struct LeadJob<'a> {
    run: &'a (dyn Fn() + Sync),
}

/// A task [`Crew::lead`] handed the helper, as the posting thread sees it.
pub(crate) struct Led<'a, A> {
    shared: &'a Shared,
    /// Runs the task if nobody has (and keeps what it made in `out`).
    run: &'a (dyn Fn() + Sync),
    out: &'a std::sync::Mutex<Option<std::thread::Result<A>>>,
    /// Handed to the helper (else the task runs here when waited for).
    posted: bool,
}

impl<A> Led<'_, A> {
    /// The task's result, once: waits for the helper to finish it (helping
    /// with its products meanwhile), or runs it here if the helper has not
    /// started it. `None` once taken. A task that panicked panics here.
    pub(crate) fn wait(&self) -> Option<A> {
        if !self.posted {
            (self.run)();
        } else if take_lead(self.shared) {
            (self.run)();
            self.shared.lead_state.store(LEAD_DONE, Ordering::Release);
        } else {
            help_until_led(self.shared);
        }
        let made = self.out.lock().unwrap_or_else(|p| p.into_inner()).take();
        made.map(|made| made.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    }

    /// Takes the task back if the helper has not started it, else waits
    /// for it (helping) to finish; then frees the slot for the next lead.
    fn settle(&self) {
        if !self.posted {
            return;
        }
        if self
            .shared
            .lead_state
            .compare_exchange(LEAD_POSTED, NO_LEAD, Ordering::Acquire, Ordering::Acquire)
            .is_err()
        {
            help_until_led(self.shared);
            self.shared.lead_state.store(NO_LEAD, Ordering::Relaxed);
        }
        self.shared.leading.store(false, Ordering::Release);
    }
}

/// Helps with the products the helper posts while it leads a task, until
/// the task is done (or was never taken by the helper).
fn help_until_led(shared: &Shared) {
    let mut spins = 0u32;
    while shared.lead_state.load(Ordering::Acquire) == LEAD_TAKEN {
        if shared.state.load(Ordering::Acquire) == POSTED && take_posted_job(shared) {
            spins = 0;
        } else if spins < 100_000 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Works on the posted job of products, if it is still posted (it may
/// have been taken back or by another thread); whether it did.
fn take_posted_job(shared: &Shared) -> bool {
    if shared
        .state
        .compare_exchange(POSTED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    // SAFETY: the asking thread keeps the job alive until it sees the
    // state leave RUNNING, set just below.
    let job = unsafe { &*shared.job.load(Ordering::Relaxed).cast::<Job<'_>>() };
    // A panic is handed to the asking thread, and this thread lives on:
    // the asker must not wait forever.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work())).is_err() {
        job.helper_panicked.store(true, Ordering::Release);
    }
    shared.state.store(IDLE, Ordering::Release);
    true
}

/// Sets `flag` if it was clear; whether this thread did (and now holds
/// what it guards until it clears it).
fn claim(flag: &AtomicBool) -> bool {
    flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// Takes the posted lead task for this thread to run, if it is still
/// posted; whether it did.
fn take_lead(shared: &Shared) -> bool {
    shared
        .lead_state
        .compare_exchange(
            LEAD_POSTED,
            LEAD_TAKEN,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok()
}

/// Runs the task posted for the helper to lead, if it is still posted.
fn lead_posted(shared: &Shared) {
    if !take_lead(shared) {
        return;
    }
    // SAFETY: the posting thread keeps the job alive until it sees the
    // state leave LEAD_TAKEN, set just below.
    let job = unsafe { &*shared.lead.load(Ordering::Relaxed).cast::<LeadJob<'_>>() };
    // The task catches its own panics.
    (job.run)();
    // The products were posted from here: no asker's CPU to keep off.
    shared.asker_cpu.store(NO_CPU, Ordering::Relaxed);
    shared.lead_state.store(LEAD_DONE, Ordering::Release);
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

/// Whether the helper runs on the CPU its asker last posted from.
fn on_askers_cpu(shared: &Shared) -> bool {
    let asker = shared.asker_cpu.load(Ordering::Relaxed);
    asker != NO_CPU && current_cpu() == asker
}

/// The helper's CPU mask, narrowed to keep it off its asker's CPU.
#[derive(Default)]
struct Aside {
    /// The mask it had before it first stepped aside, and the one it set
    /// then: a mask found unlike the one set was set from outside, and
    /// becomes the one to narrow.
    #[cfg(target_os = "linux")]
    masks: Option<(libc::cpu_set_t, libc::cpu_set_t)>,
}

impl Aside {
    /// Moves this thread off `cpu` onto another it may run on; false when
    /// there is none (or the system refuses), so the caller parks. The
    /// narrowed mask stays while the helper parks: woken, it then starts
    /// on another CPU than the asker's, not on it (the scheduler's
    /// choice), which a move at each wake would pay for again.
    fn step(&mut self, cpu: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            if cpu >= libc::CPU_SETSIZE as usize {
                return false;
            }
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: the calls read and write only the sets passed, of
            // the size given, for this thread (pid 0).
            unsafe {
                let mut now: libc::cpu_set_t = std::mem::zeroed();
                if libc::sched_getaffinity(0, size, &mut now) != 0 {
                    return false;
                }
                let base = match self.masks {
                    Some((before, set)) if libc::CPU_EQUAL(&set, &now) => before,
                    _ => now,
                };
                let mut narrowed = base;
                libc::CPU_CLR(cpu, &mut narrowed);
                if libc::CPU_COUNT(&narrowed) == 0
                    || libc::sched_setaffinity(0, size, &narrowed) != 0
                {
                    return false;
                }
                self.masks = Some((base, narrowed));
            }
            true
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cpu;
            false
        }
    }
}

/// The helper's loop: take posted jobs, stay awake a while after each,
/// park when none comes, end on `STOP`.
fn help(shared: &Shared) {
    let mut awake_since = Instant::now();
    let mut spins = 0u32;
    let mut aside = Aside::default();
    loop {
        if shared.lead_state.load(Ordering::Acquire) == LEAD_POSTED {
            lead_posted(shared);
            awake_since = Instant::now();
            continue;
        }
        match shared.state.load(Ordering::Acquire) {
            STOP => return,
            POSTED => {
                if on_askers_cpu(shared) {
                    aside.step(shared.asker_cpu.load(Ordering::Relaxed));
                }
                take_posted_job(shared);
                awake_since = Instant::now();
            }
            _ => {
                spins = spins.wrapping_add(1);
                #[cfg(test)]
                shared.spins.fetch_add(1, Ordering::Relaxed);
                // The clock and the CPU are read now and then: reading
                // them is slower than a turn of this loop.
                let stay = !spins.is_multiple_of(64)
                    || (awake_since.elapsed() < STAY_AWAKE
                        && (!on_askers_cpu(shared)
                            || aside.step(shared.asker_cpu.load(Ordering::Relaxed))));
                if stay {
                    std::hint::spin_loop();
                } else {
                    // An unpark since the last park returns at once.
                    #[cfg(test)]
                    shared.parked.store(true, Ordering::Release);
                    std::thread::park();
                    #[cfg(test)]
                    shared.parked.store(false, Ordering::Release);
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

    /// Pins `thread` to `cpu`; false when it cannot.
    #[cfg(target_os = "linux")]
    fn pin(thread: libc::pthread_t, cpu: usize) -> bool {
        // SAFETY: a zeroed cpu_set_t is an empty set; the calls only read
        // the set and the thread handle of a live thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let size = std::mem::size_of::<libc::cpu_set_t>();
            libc::pthread_setaffinity_np(thread, size, &set) == 0
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_on_its_askers_cpu_does_not_spin_there() {
        use std::os::unix::thread::JoinHandleExt;
        let Some(crew) = Crew::new() else { return };
        let cpu = current_cpu();
        let helper = crew.helper.as_ref().unwrap().as_pthread_t();
        // SAFETY: pthread_self has no preconditions.
        if cpu == NO_CPU || !pin(unsafe { libc::pthread_self() }, cpu) || !pin(helper, cpu) {
            return;
        }
        let asks = 300;
        for _ in 0..asks {
            let seen: Vec<AtomicUsize> = (0..8).map(|_| AtomicUsize::new(0)).collect();
            crew.for_each(8, &|t| {
                seen[t].fetch_add(1, Ordering::Relaxed);
            });
            assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
            // The CPU goes to the helper between asks, as it would while
            // the asker does the work between two products.
            std::thread::yield_now();
        }
        // Each time it is woken it looks at its CPU within 64 turns and
        // parks; spinning out its time awake would be thousands of turns
        // for every ask.
        let spins = crew.shared.spins.load(Ordering::Relaxed);
        assert!(spins <= asks * 2 * 64, "{spins} turns spun for {asks} asks");
        // SAFETY: as above.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            for c in 0..libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut all);
            }
            let size = std::mem::size_of::<libc::cpu_set_t>();
            libc::pthread_setaffinity_np(libc::pthread_self(), size, &all);
        }
    }

    /// This thread's CPU mask.
    #[cfg(target_os = "linux")]
    fn mask() -> libc::cpu_set_t {
        // SAFETY: a zeroed cpu_set_t is an empty set, filled by the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            set
        }
    }

    /// Sets this thread's CPU mask.
    #[cfg(target_os = "linux")]
    fn set_mask(set: &libc::cpu_set_t) {
        // SAFETY: the call only reads the set.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_steps_off_its_askers_cpu_and_a_mask_set_from_outside_holds() {
        let all = mask();
        let without = |cpu: usize| {
            let mut set = all;
            // SAFETY: CPU_CLR only writes within the set.
            unsafe { libc::CPU_CLR(cpu, &mut set) };
            set
        };
        let only = |cpu: usize| {
            // SAFETY: as above.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                set
            }
        };
        let asker = current_cpu();
        // SAFETY: CPU_COUNT only reads the set.
        if asker == NO_CPU || unsafe { libc::CPU_COUNT(&all) } < 2 {
            return;
        }
        // On the asker's CPU, as a helper woken next to its asker is; a
        // wider mask does not move a running thread.
        set_mask(&only(asker));
        set_mask(&all);
        let mut aside = Aside::default();
        assert!(aside.step(asker));
        assert_ne!(current_cpu(), asker, "still on the asker's CPU");
        assert!(unsafe { libc::CPU_EQUAL(&mask(), &without(asker)) });
        // Pinned from outside to the asker's CPU: nowhere else to go, and
        // the pin stays.
        set_mask(&only(asker));
        assert!(!aside.step(asker));
        assert!(unsafe { libc::CPU_EQUAL(&mask(), &only(asker)) });
        // Let go from outside, and its asker now on the CPU it stands on:
        // it steps off that one, from the mask it was given.
        set_mask(&all);
        let now = current_cpu();
        assert!(aside.step(now));
        assert_ne!(current_cpu(), now);
        assert!(unsafe { libc::CPU_EQUAL(&mask(), &without(now)) });
        set_mask(&all);
    }

    /// Spins for `micros` microseconds.
    fn busy(micros: u64) {
        let until = Instant::now() + Duration::from_micros(micros);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_led_task_runs_on_the_helper_while_the_asker_works_and_shares_its_products() {
        let Some(crew) = Crew::new() else { return };
        let asker = std::thread::current().id();
        let mut overlapped = 0;
        let mut helped = 0;
        // On a loaded machine the helper may start late: tried until both
        // were seen.
        for _ in 0..2000 {
            if overlapped > 0 && helped > 0 {
                break;
            }
            let ran_on = Mutex::new(None);
            let tasks_by_asker = AtomicUsize::new(0);
            let asker_busy = AtomicBool::new(false);
            let seen_busy = AtomicBool::new(false);
            let sum = crew.lead(
                || {
                    *ran_on.lock().unwrap() = Some(std::thread::current().id());
                    seen_busy.store(asker_busy.load(Ordering::Acquire), Ordering::Relaxed);
                    let total = AtomicUsize::new(0);
                    for _ in 0..20 {
                        crew.for_each(8, &|t| {
                            if std::thread::current().id() == asker {
                                tasks_by_asker.fetch_add(1, Ordering::Relaxed);
                            }
                            busy(5);
                            total.fetch_add(t, Ordering::Relaxed);
                        });
                    }
                    total.into_inner()
                },
                |led| {
                    asker_busy.store(true, Ordering::Release);
                    busy(300);
                    asker_busy.store(false, Ordering::Release);
                    let first = led.wait();
                    (first, led.wait())
                },
            );
            assert_eq!(sum, (Some(20 * 28), None), "the result once, then none");
            let ran_on = ran_on.into_inner().unwrap();
            // The asker runs the task itself only when the helper had not
            // taken it by the time it was waited for.
            if ran_on != Some(asker) {
                overlapped += usize::from(seen_busy.load(Ordering::Relaxed));
                helped += usize::from(tasks_by_asker.load(Ordering::Relaxed) > 0);
            }
        }
        assert!(overlapped > 0, "the task never ran while the asker worked");
        assert!(
            helped > 0,
            "the asker never took one of the task's products"
        );
    }

    /// Yields until `done`, at most a million times; whether it came.
    fn yield_until(done: impl Fn() -> bool) -> bool {
        for _ in 0..1_000_000 {
            if done() {
                return true;
            }
            std::thread::yield_now();
        }
        done()
    }

    #[test]
    fn a_parked_helper_told_work_is_coming_wakes_and_waits_for_it_awake() {
        let Some(crew) = Crew::new() else { return };
        let shared = &crew.shared;
        for _ in 0..20 {
            assert!(yield_until(|| shared.parked.load(Ordering::Acquire)));
            let spun = shared.spins.load(Ordering::Relaxed);
            crew.wake();
            assert!(
                yield_until(|| shared.spins.load(Ordering::Relaxed) > spun + 64),
                "the helper did not wake"
            );
        }
    }

    #[test]
    fn a_lead_nobody_waits_for_is_settled_and_the_next_one_runs() {
        let Some(crew) = Crew::new() else { return };
        for _ in 0..500 {
            let runs = AtomicUsize::new(0);
            crew.lead(
                || {
                    runs.fetch_add(1, Ordering::Relaxed);
                    crew.for_each(4, &|_| busy(1));
                },
                |_| (),
            );
            // Run or taken back, never twice, and never after `lead` returned.
            let ran = runs.load(Ordering::Relaxed);
            assert!(ran <= 1);
            busy(1);
            assert_eq!(runs.load(Ordering::Relaxed), ran);
        }
        assert_eq!(crew.lead(|| 7, |led| led.wait()), Some(7));
    }

    #[test]
    fn leads_from_several_threads_each_get_their_own_result() {
        let Some(crew) = Crew::new() else { return };
        std::thread::scope(|scope| {
            for k in 0..3usize {
                let crew = &crew;
                scope.spawn(move || {
                    for i in 0..300 {
                        let got = crew.lead(
                            || {
                                let total = AtomicUsize::new(0);
                                crew.for_each(16, &|t| {
                                    total.fetch_add(t + k + i, Ordering::Relaxed);
                                });
                                total.into_inner()
                            },
                            |led| led.wait(),
                        );
                        assert_eq!(got, Some(120 + 16 * (k + i)));
                    }
                });
            }
        });
    }

    #[test]
    fn a_led_task_that_panics_panics_its_waiter_and_the_crew_lives_on() {
        let Some(crew) = Crew::new() else { return };
        for _ in 0..50 {
            let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crew.lead(
                    || {
                        crew.for_each(16, &|t| busy(u64::from(t == 3)));
                        panic!("the led task fails")
                    },
                    |led: &Led<'_, ()>| led.wait(),
                )
            }));
            assert!(waited.is_err());
            // A panic while the helper leads still waits for it.
            let meanwhile = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crew.lead(
                    || crew.for_each(16, &|_| busy(2)),
                    |_| panic!("meanwhile fails"),
                )
            }));
            assert!(meanwhile.is_err());
        }
        assert_eq!(crew.lead(|| 5, |led| led.wait()), Some(5));
        let seen = Mutex::new(0);
        crew.for_each(16, &|_| *seen.lock().unwrap() += 1);
        assert_eq!(*seen.lock().unwrap(), 16);
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
