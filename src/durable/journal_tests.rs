use std::io::Write;

use super::*;

fn open(path: &Path) -> io::Result<Journal> {
    Journal::open_with(path, JournalOptions::default())
}

#[test]
fn appended_records_are_readable_before_any_sync_and_torn_lines_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j/intake.jsonl");
    let journal = open(&path).unwrap();
    journal.append(br#"{"n":1}"#).unwrap();
    journal.append(br#"{"n":2}"#).unwrap();
    // Another reader sees both at once: they are in the OS, unsynced.
    let (lines, bad) = read_journal(&path, |l| {
        serde_json::from_slice::<serde_json::Value>(l).ok()
    })
    .unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(bad, 0);
    assert_eq!(journal.syncs(), 0);
    drop(journal);
    // A crash mid-write leaves a torn line; reopening closes it.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(br#"{"n":"#)
        .unwrap();
    let journal = open(&path).unwrap();
    journal.append(br#"{"n":3}"#).unwrap();
    let (lines, bad) = read_journal(&path, |l| {
        serde_json::from_slice::<serde_json::Value>(l).ok()
    })
    .unwrap();
    assert_eq!(lines.len(), 3);
    assert_eq!(bad, 1);
}

#[test]
fn a_journal_replaced_by_an_atomic_rewrite_is_reopened_before_the_next_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let journal = open(&path).unwrap();
    journal.append(br#"{"n":1}"#).unwrap();
    assert!(
        !journal.reopen_if_replaced().unwrap(),
        "still the same file"
    );
    crate::durable::atomic_replace(&path, b"{\"n\":2}\n", 0o600).unwrap();
    assert!(journal.reopen_if_replaced().unwrap());
    journal.append(br#"{"n":3}"#).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"n\":2}\n{\"n\":3}\n",
        "the record went to the file at the path, not the replaced one"
    );
}

#[test]
fn the_syncer_syncs_what_was_written_and_stops_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let journal = std::sync::Arc::new(open(&dir.path().join("j")).unwrap());
    let syncer = {
        let j = journal.clone();
        std::thread::spawn(move || j.run_syncer())
    };
    journal.append(b"{}").unwrap();
    journal.close();
    syncer.join().unwrap().unwrap();
    assert!(
        journal.syncs() >= 1,
        "the record written before close was synced"
    );
}

#[test]
fn fsyncs_start_at_most_once_per_spacing_however_fast_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let journal = std::sync::Arc::new(open(&dir.path().join("j")).unwrap());
    let syncer = {
        let j = journal.clone();
        std::thread::spawn(move || j.run_syncer())
    };
    // Each record comes after the sync before it ended: a syncer that
    // synced each at once would start one fsync per record.
    for _ in 0..5 {
        let before = journal.syncs();
        journal.append(b"{}").unwrap();
        let waiting = std::time::Instant::now();
        while journal.syncs() == before {
            assert!(waiting.elapsed() < std::time::Duration::from_secs(10));
            std::thread::yield_now();
        }
    }
    journal.close();
    syncer.join().unwrap().unwrap();
    let starts = journal.state.lock().unwrap().sync_starts.clone();
    assert!(starts.len() >= 5, "{starts:?}");
    for pair in starts.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= SYNC_SPACING, "fsyncs {gap:?} apart");
    }
}

#[test]
fn a_held_lock_excludes_a_second_taker_until_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.lock");
    let first = try_lock_file(&path).unwrap().expect("free");
    assert!(try_lock_file(&path).unwrap().is_none());
    drop(first);
    assert!(try_lock_file(&path).unwrap().is_some());
}

mod failing {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::durable::FaultyDisk;
    use crate::durable::journal_disk::Backoff;

    fn faulty_journal(path: &Path) -> (Arc<FaultyDisk>, Arc<Journal>) {
        let disk = Arc::new(FaultyDisk::default());
        let journal = Arc::new(Journal::open_with(path, disk.options()).unwrap());
        (disk, journal)
    }

    fn lines(path: &Path) -> (Vec<serde_json::Value>, usize) {
        read_journal(path, |l| serde_json::from_slice(l).ok()).unwrap()
    }

    /// Waits (without sleeping) until `done` holds, at most 10 s.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let began = Instant::now();
        while !done() {
            assert!(began.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_failed_sync_refuses_records_until_a_sync_succeeds_and_that_one_covers_the_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (disk, journal) = faulty_journal(&path);
        let health = journal.health();
        journal.append(br#"{"n":1}"#).unwrap();
        journal.sync().unwrap();
        journal.append(br#"{"n":2}"#).unwrap();
        let before_failure = journal.size_bytes().unwrap();
        disk.fail_syncs(true);
        assert!(journal.sync().is_err());
        assert!(journal.failing());
        let seen = health.borrow().clone();
        assert_eq!(seen.episodes, 1);
        assert!(
            seen.failing
                .as_deref()
                .is_some_and(|r| r.contains("cannot sync") && r.contains("j.jsonl")),
            "{seen:?}"
        );
        // Refused before anything is written.
        let refused = journal.append(br#"{"n":3}"#).unwrap_err();
        let not_synced = NotSynced::of(&refused).expect("a journal failure");
        assert!(not_synced.reason.contains("cannot sync"), "{not_synced}");
        assert_eq!(journal.size_bytes().unwrap(), before_failure);
        // Another failed retry is the same episode.
        assert!(journal.sync().is_err());
        assert_eq!(health.borrow().episodes, 1);
        disk.fail_syncs(false);
        journal.sync().unwrap();
        assert!(!journal.failing());
        assert_eq!(
            *health.borrow(),
            SyncHealth {
                failing: None,
                episodes: 1
            }
        );
        assert_eq!(disk.synced_len(), before_failure, "record 2 is on the disk");
        // Each retry wrote record 2 again before syncing it (the first
        // sync covered record 1).
        let first_len = (br#"{"n":1}"#.len() + 1) as u64;
        let rewrites = disk.written_at();
        assert_eq!(rewrites.len(), 2, "{rewrites:?}");
        assert!(
            rewrites
                .iter()
                .all(|w| *w == (first_len, (before_failure - first_len) as usize)),
            "{rewrites:?}"
        );
        journal.append(br#"{"n":4}"#).unwrap();
        let (read, bad) = lines(&path);
        assert_eq!(
            read.iter()
                .map(|v| v["n"].as_u64().unwrap())
                .collect::<Vec<_>>(),
            [1, 2, 4]
        );
        assert_eq!(bad, 0);
    }

    #[test]
    fn a_write_that_fails_half_way_is_refused_and_the_next_record_starts_on_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (disk, journal) = faulty_journal(&path);
        journal.append(br#"{"n":1}"#).unwrap();
        disk.fail_writes(true);
        let err = journal
            .append(br#"{"n":2,"text":"a longer record"}"#)
            .unwrap_err();
        assert!(NotSynced::of(&err).is_some_and(|e| e.reason.contains("cannot write")));
        assert!(journal.failing());
        assert!(
            journal.append(br#"{"n":3}"#).is_err(),
            "refused while failing"
        );
        // The disk is still full: the retry cannot close the torn line.
        assert!(journal.sync().is_err());
        assert!(journal.failing());
        disk.fail_writes(false);
        journal.sync().unwrap();
        assert!(!journal.failing());
        journal.append(br#"{"n":4}"#).unwrap();
        let (read, bad) = lines(&path);
        assert_eq!(
            read.iter()
                .map(|v| v["n"].as_u64().unwrap())
                .collect::<Vec<_>>(),
            [1, 4]
        );
        assert_eq!(bad, 1, "the torn half of record 2");
        assert_eq!(journal.health().borrow().episodes, 1);
    }

    #[test]
    fn the_syncer_outlives_failed_syncs_and_retries_until_the_disk_heals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (disk, journal) = faulty_journal(&path);
        let syncer = {
            let j = journal.clone();
            std::thread::spawn(move || j.run_syncer())
        };
        disk.fail_syncs(true);
        journal.append(br#"{"n":1}"#).unwrap();
        let written = journal.size_bytes().unwrap();
        until("the journal fails", || journal.failing());
        until("the syncer retries", || disk.failed_syncs() >= 3);
        assert!(!syncer.is_finished(), "the syncer lives on");
        assert!(journal.append(br#"{"n":2}"#).is_err());
        disk.fail_syncs(false);
        until("a retry succeeds", || !journal.failing());
        assert_eq!(
            disk.synced_len(),
            written,
            "the record written before the failure is synced"
        );
        journal.append(br#"{"n":3}"#).unwrap();
        journal.close();
        syncer.join().unwrap().unwrap();
        assert_eq!(disk.synced_len(), journal.size_bytes().unwrap());
        assert_eq!(journal.health().borrow().episodes, 1);
    }

    #[test]
    fn a_journal_closed_while_failing_ends_its_syncer_with_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, journal) = faulty_journal(&dir.path().join("j.jsonl"));
        let syncer = {
            let j = journal.clone();
            std::thread::spawn(move || j.run_syncer())
        };
        disk.fail_syncs(true);
        journal.append(b"{}").unwrap();
        until("the journal fails", || journal.failing());
        journal.close();
        assert!(syncer.join().unwrap().is_err());
    }

    #[test]
    fn sync_retries_wait_100_ms_doubling_to_5_s() {
        let waits: Vec<u128> = (1..=9)
            .map(|n| Backoff::SYNC_RETRY.delay(n).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(Backoff::SYNC_RETRY.delay(u32::MAX), Duration::from_secs(5));
    }
}
