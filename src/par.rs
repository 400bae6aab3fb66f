//! Small data parallelism for the few places where a command has enough
//! independent work to use the cores (reading a thousand skills, stating
//! thousands of memory files): scoped threads, results in input order, so
//! the outcome never depends on scheduling.

/// `f` over `items` on up to four threads, results in item order. Small
/// inputs stay on the calling thread.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    const MIN_PER_THREAD: usize = 32;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(4)
        .min(items.len() / MIN_PER_THREAD);
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        for (i, r) in work() {
            slots[i] = Some(r);
        }
        for helper in helpers {
            let done = helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (i, r) in done {
                slots[i] = Some(r);
            }
        }
    });
    slots
        .into_iter()
        .map(|r| r.expect("every item is mapped once"))
        .collect()
}

/// `a` and `b`, on two threads when `parallel` (`a` on a helper), else one
/// after the other on this one: a server running many turns at once has
/// its cores busy already, and a thread per step would only add its start
/// and a fresh allocator heap.
pub(crate) fn join<A: Send, B>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    if !parallel {
        let a = a();
        return (a, b());
    }
    std::thread::scope(|scope| {
        let helper = scope.spawn(a);
        let b = b();
        let a = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (a, b)
    })
}
