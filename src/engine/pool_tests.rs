use std::sync::mpsc;

use super::*;

fn new_pool() -> &'static Pool {
    Box::leak(Box::default())
}

fn state(pool: &Pool) -> (usize, u64) {
    let state = pool.lock();
    (state.threads, state.give_backs)
}

/// Waits (yielding) until `ready` holds: the pool's own timers decide when.
fn until(mut ready: impl FnMut() -> bool) {
    while !ready() {
        std::thread::yield_now();
    }
}

#[tokio::test]
async fn work_that_waits_for_later_work_gets_a_thread_of_its_own() {
    let pool = new_pool();
    let (tx, rx) = mpsc::channel::<u32>();
    let first = tokio::spawn(run_on(pool, move || rx.recv().unwrap() + 1));
    // The first job holds its thread until the second has run.
    while state(pool).0 != 1 {
        tokio::task::yield_now().await;
    }
    let second = run_on(pool, move || tx.send(41).unwrap()).await;
    assert!(second.is_ok());
    let Ok(Ok(answer)) = first.await else {
        panic!("the first job did not finish")
    };
    assert_eq!(answer, 42);
    assert_eq!(state(pool).0, 2);
}

#[tokio::test]
async fn a_thread_gives_its_pages_back_when_idle_not_after_every_piece() {
    let pool = new_pool();
    for n in 0..200 {
        let back = run_on(pool, move || vec![n; 4096].iter().sum::<u32>()).await;
        assert!(back.is_ok());
    }
    let (threads, give_backs) = state(pool);
    assert_eq!(threads, 1, "one piece at a time needs one thread");
    assert!(
        give_backs < 50,
        "200 pieces back to back gave pages back {give_backs} times"
    );
    // Idle now: it gives them back once, and then not again.
    until(|| state(pool).1 > give_backs);
    let after = state(pool).1;
    let more = run_on(pool, || ()).await;
    assert!(more.is_ok());
    until(|| state(pool).1 > after);
    assert_eq!(state(pool).1, after + 1);
}

#[tokio::test]
async fn pieces_one_after_another_go_to_the_thread_idle_the_shortest() {
    let pool = new_pool();
    // A burst of three pieces that wait for each other leaves three threads.
    let all_in = std::sync::Arc::new(std::sync::Barrier::new(3));
    let burst: Vec<_> = (0..3)
        .map(|_| {
            let all_in = all_in.clone();
            tokio::spawn(run_on(pool, move || {
                all_in.wait();
            }))
        })
        .collect();
    for piece in burst {
        assert!(matches!(piece.await, Ok(Ok(()))));
    }
    assert_eq!(state(pool).0, 3);
    let mut ran_on = std::collections::HashSet::new();
    for _ in 0..12 {
        let Ok(thread) = run_on(pool, || std::thread::current().id()).await else {
            panic!("a piece did not run")
        };
        ran_on.insert(thread);
    }
    // Taking turns, each thread would find its pages given back.
    assert_eq!(ran_on.len(), 1, "pieces one at a time ran on {ran_on:?}");
}

#[tokio::test]
async fn a_panic_in_a_piece_reaches_its_waiter_and_the_thread_lives_on() {
    let pool = new_pool();
    let failed = run_on(pool, || -> u32 { panic!("a bug in a piece") }).await;
    let Err(Failed::Panicked(panic)) = failed else {
        panic!("the panic was not handed back")
    };
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"a bug in a piece"));
    let next = run_on(pool, || 7).await;
    assert!(matches!(next, Ok(7)));
    assert_eq!(state(pool).0, 1);
}
