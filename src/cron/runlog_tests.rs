use super::*;

fn record(job_id: &str, ts: i64, status: RunStatus) -> RunRecord {
    RunRecord {
        status: Some(status),
        summary: Some(format!("run at {ts}")),
        run_at_ms: Some(ts - 100),
        duration_ms: Some(100),
        ..RunRecord::finished(job_id, ts)
    }
}

const ROOMY: Limits = Limits {
    max_bytes: 2_000_000,
    keep_lines: 2_000,
};

#[test]
fn appended_runs_read_back_newest_first_with_filters_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    for n in 0..7 {
        let status = if n % 3 == 0 {
            RunStatus::Error
        } else {
            RunStatus::Ok
        };
        append(&runs, &record("job-1", 1_000 + n, status), ROOMY).unwrap();
    }
    append(&runs, &record("job-2", 5_000, RunStatus::Ok), ROOMY).unwrap();
    let page = read(&runs, "job-1", &RunQuery::default()).unwrap();
    assert_eq!(page.total, 7);
    let ts: Vec<i64> = page.entries.iter().map(|r| r.ts).collect();
    assert_eq!(ts, [1006, 1005, 1004, 1003, 1002, 1001, 1000]);
    let errors = read(
        &runs,
        "job-1",
        &RunQuery {
            status: Some("error".into()),
            ..RunQuery::default()
        },
    )
    .unwrap();
    let ts: Vec<i64> = errors.entries.iter().map(|r| r.ts).collect();
    assert_eq!(ts, [1006, 1003, 1000]);
    let page = read(
        &runs,
        "job-1",
        &RunQuery {
            limit: 2,
            offset: 2,
            status: None,
        },
    )
    .unwrap();
    let ts: Vec<i64> = page.entries.iter().map(|r| r.ts).collect();
    assert_eq!(ts, [1004, 1003]);
    assert_eq!(page.next_offset, Some(4));
    // No log: no runs.
    assert_eq!(
        read(&runs, "never-ran", &RunQuery::default())
            .unwrap()
            .total,
        0
    );
    // OpenClaw's line shape, snake_case usage included.
    let line = std::fs::read_to_string(runs.join("job-2.jsonl")).unwrap();
    let value: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(value["action"], "finished");
    assert_eq!(value["jobId"], "job-2");
    assert_eq!(value["runAtMs"], 4_900);
}

#[test]
fn a_log_past_its_size_keeps_its_newest_lines() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let line_len = {
        let mut bytes = serde_json::to_vec(&record("j", 1_000, RunStatus::Ok)).unwrap();
        bytes.push(b'\n');
        bytes.len() as u64
    };
    let limits = Limits {
        max_bytes: line_len * 5,
        keep_lines: 3,
    };
    let mut cut = Vec::new();
    for n in 0..6 {
        cut.push(append(&runs, &record("j", 1_000 + n, RunStatus::Ok), limits).unwrap());
    }
    // Cut when the sixth line made it larger than five lines.
    assert_eq!(cut, [false, false, false, false, false, true]);
    let page = read(&runs, "j", &RunQuery::default()).unwrap();
    let ts: Vec<i64> = page.entries.iter().map(|r| r.ts).collect();
    assert_eq!(ts, [1005, 1004, 1003]);
    let text = std::fs::read_to_string(runs.join("j.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.ends_with('\n'));
}

#[test]
fn job_ids_that_cannot_name_a_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "../x", "a/b", "a\\b", "a\0b", ".."] {
        let err = append(dir.path(), &RunRecord::finished(bad, 1), ROOMY).unwrap_err();
        assert!(matches!(err, CronError::BadJobId(_)), "{bad:?}: {err}");
        assert!(read(dir.path(), bad, &RunQuery::default()).is_err());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn torn_and_foreign_lines_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::write(
        runs.join("j.jsonl"),
        "{\"ts\":1,\"jobId\":\"j\",\"action\":\"finished\",\"status\":\"ok\"}\n{\"ts\":2,\"jobId\":\"other\",\"action\":\"finished\"}\n{\"ts\":3,\"jobId\":\"j\",\"act",
    )
    .unwrap();
    let page = read(&runs, "j", &RunQuery::default()).unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.unreadable, 2);
    // The next append starts on a line of its own.
    append(&runs, &record("j", 9, RunStatus::Ok), ROOMY).unwrap();
    let page = read(&runs, "j", &RunQuery::default()).unwrap();
    assert_eq!(page.entries[0].ts, 9);
    assert_eq!(page.total, 2);
}

#[test]
fn concurrent_appends_and_cuts_lose_no_recent_line() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let limits = Limits {
        max_bytes: 4_000,
        keep_lines: 1_000,
    };
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let runs = runs.clone();
            std::thread::spawn(move || {
                for n in 0..25 {
                    append(&runs, &record("j", t * 1_000 + n, RunStatus::Ok), limits).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let page = read(
        &runs,
        "j",
        &RunQuery {
            limit: 5_000,
            ..RunQuery::default()
        },
    )
    .unwrap();
    assert_eq!(page.unreadable, 0);
    // Every thread's last run survives the cuts.
    for t in 0..4 {
        assert!(
            page.entries.iter().any(|r| r.ts == t * 1_000 + 24),
            "thread {t}"
        );
    }
}
