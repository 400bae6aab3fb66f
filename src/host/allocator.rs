//! The process's allocator: the system's until a long-running server asks
//! for mimalloc ([`serve_from_mimalloc`]), then mimalloc for everything
//! allocated after.
//!
//! Why two: a short command (a `session-memory` call from a script) pays
//! for mimalloc's set-up and for the first page of every size class it
//! touches, about a hundred page faults, a sixth of its start, and gains
//! nothing from it. The gateway answers thousands of small requests across
//! worker threads, where mimalloc serves them with less CPU and an idle
//! gateway gives its free pages back (`gateway::resident`).
//!
//! Invariant: a block is freed or resized by the allocator that made it.
//! Before the switch every block is the system's; after it, mimalloc owns
//! exactly the blocks inside its own segments (`mi_is_in_heap_region`),
//! so a block made before the switch still goes back to the system.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mimalloc::MiMalloc;

/// Set once, never cleared: from then on new blocks come from mimalloc.
static SERVING: AtomicBool = AtomicBool::new(false);

/// The global allocator (installed in `lib.rs`).
pub(crate) struct Allocator;

/// Makes every later allocation mimalloc's. Call before a server starts
/// its threads; blocks allocated before stay the system's until freed.
pub(crate) fn serve_from_mimalloc() {
    // Pages freed are given back at once rather than 10 ms later: the
    // delayed purge runs only when the same thread allocates again, so a
    // burst of turns left each idle blocking thread holding what it had
    // freed (1,000 chat messages: 52 MB kept against 20 MB; the gateway's
    // request rates did not move).
    // SAFETY: setting an option only changes how later frees purge.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
    SERVING.store(true, Ordering::Release);
}

/// Gives back the pages this thread's heap holds free (blocks freed here
/// and those other threads freed into its pages). For a pool thread that
/// has gone idle: mimalloc collects a heap only when its own thread
/// allocates again.
pub(crate) fn release_thread_free_pages() {
    if SERVING.load(Ordering::Acquire) {
        // SAFETY: collecting only frees what is free.
        unsafe { libmimalloc_sys::mi_collect(false) }
    }
}

/// Bumped by [`ask_every_thread_to_give_back`]: a thread that has not
/// given back since the last bump does at its next [`give_back_if_asked`].
static GIVE_BACK_ROUND: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last [`GIVE_BACK_ROUND`] this thread gave back in.
    static GAVE_BACK_IN: Cell<u64> = const { Cell::new(0) };
}

/// Asks every thread that calls [`give_back_if_asked`] when it goes idle
/// (the runtime's workers) to give its free pages back once, the next
/// time it does: a heap is mimalloc's per thread, and only its own thread
/// can collect it.
pub(crate) fn ask_every_thread_to_give_back() {
    GIVE_BACK_ROUND.fetch_add(1, Ordering::AcqRel);
}

/// For a thread about to go idle: gives its free pages back if asked
/// since it last did ([`ask_every_thread_to_give_back`]). An atomic load
/// otherwise, so it can run at every park of a runtime worker.
pub(crate) fn give_back_if_asked() {
    gave_back_as_asked(&GIVE_BACK_ROUND);
}

/// [`give_back_if_asked`] against the asks counted in `rounds`, telling
/// whether it gave back.
fn gave_back_as_asked(rounds: &AtomicU64) -> bool {
    let round = rounds.load(Ordering::Acquire);
    let asked = GAVE_BACK_IN.with(|gave| gave.replace(round) != round);
    if asked {
        release_thread_free_pages();
    }
    asked
}

/// `mi_option_purge_delay` in mimalloc v2's option enum (the crate does
/// not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Whether mimalloc made `ptr` (only possible after the switch).
fn mimallocs(ptr: *mut u8) -> bool {
    // SAFETY: the lookup reads mimalloc's own segment map for any address;
    // it never dereferences `ptr`.
    SERVING.load(Ordering::Acquire)
        && unsafe { libmimalloc_sys::mi_is_in_heap_region(ptr.cast_const().cast()) }
}

// SAFETY: every method forwards to one of two sound allocators, and a
// block always returns to the one that made it (see the module doc).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe {
            if SERVING.load(Ordering::Relaxed) {
                MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if SERVING.load(Ordering::Relaxed) {
                MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` goes back to the allocator that made it.
        unsafe {
            if mimallocs(ptr) {
                MiMalloc.dealloc(ptr, layout);
            } else {
                System.dealloc(ptr, layout);
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is resized by the allocator that made it, which
        // then owns the result.
        unsafe {
            if mimallocs(ptr) {
                MiMalloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_from_before_the_switch_go_back_to_the_system() {
        // The test binary runs on this allocator; whichever side is active,
        // blocks made before and after a switch are freed and resized by
        // their maker (a mismatch would abort the process).
        let switched_already = SERVING.load(Ordering::Acquire);
        let before: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 97]).collect();
        let big_before = vec![7u8; 1 << 20];
        // Another test may switch this process while this one runs.
        let switched_meanwhile = SERVING.load(Ordering::Acquire) != switched_already;
        serve_from_mimalloc();
        let after: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 97]).collect();
        let mut grown = before.clone();
        for (i, v) in grown.iter_mut().enumerate() {
            v.resize(v.len() * 3 + i, 1);
        }
        for (i, v) in before.into_iter().enumerate() {
            let mut v = v;
            v.resize(v.len() * 5, 2);
            assert_eq!(v[0], i as u8);
        }
        assert!(after.iter().all(|v| mimallocs(v.as_ptr().cast_mut())));
        // (Another test may have switched this process first.)
        if !switched_meanwhile {
            assert_eq!(mimallocs(big_before.as_ptr().cast_mut()), switched_already);
        }
        let aligned = Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: a non-zero layout, freed with the same layout.
        unsafe {
            let p = Allocator.alloc(aligned);
            assert!(!p.is_null() && (p as usize).is_multiple_of(4096));
            Allocator.dealloc(p, aligned);
        }
        drop((after, grown, big_before));
    }

    #[test]
    fn each_thread_gives_back_once_per_ask() {
        // Asks of its own: other tests' give-backs ask the process's.
        static ROUNDS: AtomicU64 = AtomicU64::new(0);
        let ask = || ROUNDS.fetch_add(1, Ordering::AcqRel);
        ask();
        assert!(gave_back_as_asked(&ROUNDS), "asked: gives back");
        assert!(
            !gave_back_as_asked(&ROUNDS),
            "once per ask, not at every park"
        );
        // Another thread has its own heap: it gives back too, once.
        std::thread::spawn(|| {
            assert!(gave_back_as_asked(&ROUNDS));
            assert!(!gave_back_as_asked(&ROUNDS));
        })
        .join()
        .unwrap();
        ask();
        assert!(gave_back_as_asked(&ROUNDS), "the next ask: again");
    }

    #[test]
    fn a_server_gives_freed_pages_back_at_once() {
        // SAFETY: reading an option.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        // The index names the purge delay: its default is 10 ms (unless
        // this process switched already or the environment set it).
        let switched_already = SERVING.load(Ordering::Acquire);
        if !switched_already && std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(default, 10);
        }
        serve_from_mimalloc();
        // SAFETY: reading an option.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
            0
        );
    }
}
