//! What an idle gateway keeps resident: after work that built and dropped
//! a lot (a memory refresh, a job store read) and once its start has
//! settled, it gives back the allocators' free pages, the memory that is
//! the process's own.
//!
//! It leaves the executable's mapped code alone: those pages are the
//! file's, shared with the page cache, and the kernel reclaims them itself
//! under memory pressure. Unmapping them after start lowered the resident
//! figure by about 9 MB and the private one not at all, and made the
//! first request after idle fault its code back in (`/v1/status` 0.7 to
//! 0.9 ms instead of 0.6 to 0.7 ms; bench/gateway.sh prints it).

/// Returns the allocators' free memory to the OS, after work that built
/// and dropped a lot (a memory refresh, a job store read): mimalloc's (the
/// gateway's allocator, `host::allocator`) and glibc's (SQLite's, and
/// what was allocated before the gateway started).
pub(crate) fn release_free_memory() {
    // Each runtime worker's heap is collected by the worker itself, when
    // it next parks (`host::allocator::give_back_if_asked`).
    crate::host::allocator::ask_every_thread_to_give_back();
    // SAFETY: mi_collect only frees and returns the calling thread's and
    // abandoned free pages; other threads' are returned by mimalloc itself
    // once they stay free.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Wakes the runtime's parked workers (up to `workers`) with a task that
/// does nothing: each parks again at once, and gives back its heap's free
/// pages as it does when [`release_free_memory`] asked it to. Without
/// this, a worker parked before the ask holds them until its next wake,
/// which an idle gateway may not have for minutes.
pub(crate) fn wake_the_workers(workers: usize) {
    for _ in 0..workers {
        tokio::spawn(tokio::task::yield_now());
    }
}

/// Keeps glibc's allocator (SQLite's) to a few arenas: glibc gives each
/// busy thread one (the blocking pool has many), and what one frees is
/// kept in it, so a long-running daemon's resident memory would grow with
/// its thread count.
pub(crate) fn limit_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before the runtime
    // starts its threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
