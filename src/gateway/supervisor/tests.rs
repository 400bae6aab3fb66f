use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// Panics on its first `failures` starts, then runs until stopped.
struct Flaky {
    starts: AtomicU32,
    failures: u32,
}

impl Component for Flaky {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Test("flaky")
    }

    fn start(
        self: Arc<Self>,
        _shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let n = self.starts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            if n < self.failures {
                panic!("flaky failure {n}");
            }
            stop.cancelled().await;
            Ok(())
        })
    }
}

/// Counts ticks until stopped: it must keep serving while another fails.
struct Steady {
    ticks: Arc<AtomicU32>,
}

impl Component for Steady {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Test("steady")
    }

    fn start(
        self: Arc<Self>,
        _shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => {
                        self.ticks.fetch_add(1, Ordering::SeqCst);
                    }
                    () = stop.cancelled() => return Ok(()),
                }
            }
        })
    }
}

/// Returns an error once, then runs.
struct Failing {
    starts: AtomicU32,
}

impl Component for Failing {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Test("failing")
    }

    fn start(
        self: Arc<Self>,
        _shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            if self.starts.fetch_add(1, Ordering::SeqCst) == 0 {
                anyhow::bail!("cannot watch /nowhere");
            }
            stop.cancelled().await;
            Ok(())
        })
    }
}

fn row<'a>(rows: &'a [ComponentStatus], name: &str) -> &'a ComponentStatus {
    rows.iter()
        .find(|r| r.name == name)
        .expect("component listed")
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_panicking_component_is_restarted_with_backoff_and_the_others_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), "t");
    let tracker = TaskTracker::new();
    let stop = CancellationToken::new();
    let flaky = Arc::new(Flaky {
        starts: AtomicU32::new(0),
        failures: 3,
    });
    let ticks = Arc::new(AtomicU32::new(0));
    for component in [
        flaky.clone() as Arc<dyn Component>,
        Arc::new(Steady {
            ticks: ticks.clone(),
        }),
        Arc::new(Failing {
            starts: AtomicU32::new(0),
        }),
    ] {
        supervise(
            component,
            shared.clone(),
            shared.registry.clone(),
            &tracker,
            stop.clone(),
        );
    }
    // Failures at 10 ms, 220 ms (after 200 ms of backoff) and 630 ms
    // (after 400 ms); the fourth start waits 800 ms more, until 1430 ms.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let rows = shared.registry.snapshot();
    assert_eq!(row(&rows, "flaky").restarts, 3, "{rows:?}");
    assert_eq!(row(&rows, "flaky").state, "restarting");
    assert_eq!(
        flaky.starts.load(Ordering::SeqCst),
        3,
        "backoff holds the fourth start"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rows = shared.registry.snapshot();
    let flaky_row = row(&rows, "flaky");
    assert_eq!(flaky_row.restarts, 3);
    assert_eq!(flaky_row.state, "running");
    assert!(
        flaky_row
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("panicked: flaky failure 2")),
        "{flaky_row:?}"
    );
    let failing = row(&rows, "failing");
    assert_eq!((failing.restarts, failing.state.as_str()), (1, "running"));
    assert_eq!(failing.last_error.as_deref(), Some("cannot watch /nowhere"));
    // The steady one never stopped: about one tick per 100 ms.
    let steady = row(&rows, "steady");
    assert_eq!(steady.restarts, 0);
    assert!(
        ticks.load(Ordering::SeqCst) >= 14,
        "{}",
        ticks.load(Ordering::SeqCst)
    );
    // What `gateway status --json` shows.
    let status = serde_json::to_value(shared.status()).unwrap();
    let shown = status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "flaky")
        .unwrap();
    assert_eq!(shown["restarts"], 3);
    assert_eq!(shown["state"], "running");
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    assert!(
        shared
            .registry
            .snapshot()
            .iter()
            .all(|r| r.state == "stopped")
    );
}

/// Runs until stopped, answering for two journals.
struct Writer {
    journals: Vec<Arc<crate::durable::Journal>>,
}

impl Component for Writer {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Test("writer")
    }

    fn start(
        self: Arc<Self>,
        _shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            stop.cancelled().await;
            Ok(())
        })
    }

    fn journals(&self, _shared: &Shared) -> Vec<watch::Receiver<SyncHealth>> {
        self.journals.iter().map(|j| j.health()).collect()
    }
}

/// Waits (yielding, no time passes) until the writer's row shows `state`
/// and `also` holds of it.
async fn writer_row(
    shared: &Shared,
    state: &str,
    also: impl Fn(&ComponentStatus) -> bool,
) -> ComponentStatus {
    for _ in 0..100 {
        let rows = shared.registry.snapshot();
        let writer = row(&rows, "writer");
        if writer.state == state && also(writer) {
            return writer.clone();
        }
        tokio::task::yield_now().await;
    }
    panic!(
        "the writer never showed it: {:?}",
        shared.registry.snapshot()
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_component_is_failing_while_a_journal_it_names_cannot_be_synced() {
    use crate::durable::{FaultyDisk, Journal};
    let dir = tempfile::tempdir().unwrap();
    let shared = crate::gateway::test_shared(dir.path(), "t");
    let disks = [
        Arc::new(FaultyDisk::default()),
        Arc::new(FaultyDisk::default()),
    ];
    let journals: Vec<Arc<Journal>> = ["a.jsonl", "b.jsonl"]
        .iter()
        .zip(&disks)
        .map(|(name, disk)| {
            Arc::new(Journal::open_with(&dir.path().join(name), disk.options()).unwrap())
        })
        .collect();
    let tracker = TaskTracker::new();
    let stop = CancellationToken::new();
    supervise(
        Arc::new(Writer {
            journals: journals.clone(),
        }),
        shared.clone(),
        shared.registry.clone(),
        &tracker,
        stop.clone(),
    );
    writer_row(&shared, "running", |_| true).await;
    for disk in &disks {
        disk.fail_syncs(true);
    }
    assert!(journals[0].sync().is_err());
    assert!(journals[1].sync().is_err());
    let failing = writer_row(&shared, "failing", |r| r.restarts == 2).await;
    assert!(failing.last_error.is_some(), "{failing:?}");
    // One syncs again: still failing, with the other's error.
    disks[0].fail_syncs(false);
    journals[0].sync().unwrap();
    writer_row(&shared, "failing", |r| {
        r.last_error
            .as_deref()
            .is_some_and(|e| e.contains("b.jsonl"))
    })
    .await;
    disks[1].fail_syncs(false);
    journals[1].sync().unwrap();
    let clear = writer_row(&shared, "running", |r| r.last_error.is_none()).await;
    assert_eq!((clear.restarts, clear.last_error), (2, None));
    stop.cancel();
    tracker.close();
    tracker.wait().await;
}
