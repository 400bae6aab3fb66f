use serde_json::{Value, json};

use super::*;
use crate::cron::CronStore;
use crate::cron::job::JobState;

const NOW_MS: i64 = 1_795_000_000_000;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(NOW_MS).unwrap()
}

fn store(dir: &Path) -> CronStore {
    CronStore::new(
        dir.join("cron").join("jobs.json"),
        dir.join("almanac.sqlite"),
        TimeZone::UTC,
    )
}

/// A job with a next run (or none), an update time and a name.
fn job(id: &str, name: &str, next: Option<i64>, updated: i64, enabled: bool) -> Value {
    let mut state = json!({});
    if let Some(next) = next {
        state["nextRunAtMs"] = json!(next);
    }
    json!({
        "id": id,
        "name": name,
        "description": format!("about {name}"),
        "enabled": enabled,
        "createdAtMs": 1_000,
        "updatedAtMs": updated,
        "schedule": {"kind": "cron", "expr": "0 7 * * *", "tz": "Asia/Tokyo"},
        "sessionTarget": "main",
        "payload": {"kind": "systemEvent", "text": "t"},
        "state": state
    })
}

fn write_jobs(store: &CronStore, jobs: &[Value]) {
    std::fs::create_dir_all(store.path().parent().unwrap()).unwrap();
    let text = serde_json::to_string_pretty(&json!({"version": 1, "jobs": jobs})).unwrap();
    std::fs::write(store.path(), text).unwrap();
}

fn ids(listing: &Listing) -> Vec<&str> {
    listing
        .jobs
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect()
}

fn sample() -> Vec<Value> {
    vec![
        job("a", "Zeta", Some(NOW_MS + 3_000), 50, true),
        job("b", "alpha", Some(NOW_MS + 1_000), 10, true),
        job("c", "Mid", None, 40, true),
        job("d", "beta", Some(NOW_MS + 1_000), 30, true),
        job("e", "Off", Some(NOW_MS + 500), 20, false),
        job("f", "gamma", Some(NOW_MS + 2_000), 60, true),
    ]
}

fn query(limit: usize, offset: usize) -> ListQuery {
    ListQuery {
        limit,
        offset,
        ..ListQuery::default()
    }
}

#[test]
fn pages_sort_soonest_first_then_by_name_without_next_runs_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    write_jobs(&store, &sample());
    let page = store.list(&query(200, 0), NOW_MS).unwrap();
    // The cron job without state gets its next run computed (07:00 Tokyo).
    assert_eq!(ids(&page), ["b", "d", "f", "a", "c"]);
    assert_eq!(page.total, 5, "the disabled job is left out");
    assert!(!page.has_more);
    assert_eq!(page.next_offset, None);
    let c = &page.jobs[4];
    assert!(c["state"]["nextRunAtMs"].as_i64().unwrap() > NOW_MS, "{c}");

    let first = store.list(&query(2, 0), NOW_MS).unwrap();
    assert_eq!(ids(&first), ["b", "d"]);
    assert!(first.has_more);
    assert_eq!(first.next_offset, Some(2));
    let second = store.list(&query(2, 2), NOW_MS).unwrap();
    assert_eq!(ids(&second), ["f", "a"]);
    assert_eq!(second.next_offset, Some(4));
    let last = store.list(&query(2, 4), NOW_MS).unwrap();
    assert_eq!(ids(&last), ["c"]);
    assert!(!last.has_more);
    let past = store.list(&query(2, 9), NOW_MS).unwrap();
    assert!(past.jobs.is_empty() && past.total == 5 && !past.has_more);

    let all = store
        .list(
            &ListQuery {
                enabled: EnabledFilter::All,
                ..query(200, 0)
            },
            NOW_MS,
        )
        .unwrap();
    assert_eq!(
        ids(&all),
        ["b", "d", "f", "a", "c", "e"],
        "a disabled job has no next run"
    );
}

#[test]
fn other_orders_filters_and_the_file_agree_with_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let jobs = sample();
    write_jobs(&store, &jobs);
    let loaded = store.read().unwrap();
    let mut queries = Vec::new();
    for enabled in [
        EnabledFilter::All,
        EnabledFilter::Enabled,
        EnabledFilter::Disabled,
    ] {
        for sort_by in [SortBy::NextRunAtMs, SortBy::UpdatedAtMs, SortBy::Name] {
            for sort_dir in [SortDir::Asc, SortDir::Desc] {
                for q in [
                    None,
                    Some("ALPHA"),
                    Some("about"),
                    Some("asia/tokyo"),
                    Some("zzz"),
                ] {
                    for (limit, offset) in [(200, 0), (2, 1)] {
                        queries.push(ListQuery {
                            enabled,
                            query: q.map(str::to_string),
                            sort_by,
                            sort_dir,
                            limit,
                            offset,
                        });
                    }
                }
            }
        }
    }
    for q in &queries {
        let from_index = store.list(q, NOW_MS).unwrap();
        let from_file = page_in_memory(&loaded.file, q, &TimeZone::UTC, NOW_MS);
        assert_eq!(ids(&from_index), ids(&from_file), "{q:?}");
        assert_eq!(from_index.total, from_file.total, "{q:?}");
        assert_eq!(from_index.next_offset, from_file.next_offset, "{q:?}");
    }
    let by = |sort_by, sort_dir| {
        let q = ListQuery {
            enabled: EnabledFilter::All,
            sort_by,
            sort_dir,
            ..query(200, 0)
        };
        store
            .list(&q, NOW_MS)
            .unwrap()
            .jobs
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        by(SortBy::Name, SortDir::Asc),
        ["b", "d", "f", "c", "e", "a"]
    );
    assert_eq!(
        by(SortBy::Name, SortDir::Desc),
        ["a", "e", "c", "f", "d", "b"]
    );
    assert_eq!(
        by(SortBy::UpdatedAtMs, SortDir::Desc),
        ["f", "a", "c", "d", "e", "b"]
    );
    assert_eq!(
        by(SortBy::NextRunAtMs, SortDir::Desc),
        ["c", "a", "f", "b", "d", "e"]
    );
    let found = store
        .list(
            &ListQuery {
                query: Some("  BETA ".into()),
                ..query(200, 0)
            },
            NOW_MS,
        )
        .unwrap();
    assert_eq!(ids(&found), ["d"]);
}

/// Marks the row of `id` in the index so an answer from the index (and
/// not from a rebuild) can be told.
fn mark(dir: &Path, id: &str) {
    let conn = rusqlite::Connection::open(dir.join("almanac.sqlite")).unwrap();
    conn.execute(
        "UPDATE cron_jobs SET job = json_set(job, '$.name', 'from the index') WHERE job_id = ?1",
        [id],
    )
    .unwrap();
}

fn name_of(listing: &Listing, id: &str) -> String {
    listing
        .jobs
        .iter()
        .find(|j| j["id"] == id)
        .map(|j| j["name"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn the_index_answers_until_the_file_changes_then_is_rebuilt_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    write_jobs(&store, &sample());
    store.list(&query(200, 0), NOW_MS).unwrap();
    mark(dir.path(), "a");
    // Unchanged file: answered from the index.
    let listing = store.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(name_of(&listing, "a"), "from the index");
    // A hand edit: rebuilt from the file.
    let mut jobs = sample();
    jobs[1]["name"] = json!("alpha, edited by hand");
    write_jobs(&store, &jobs);
    let listing = store.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(name_of(&listing, "a"), "Zeta");
    assert_eq!(name_of(&listing, "b"), "alpha, edited by hand");

    // An edit in place that keeps the size and the modification time is
    // still seen (its change time moved).
    mark(dir.path(), "a");
    let before = std::fs::metadata(store.path()).unwrap();
    let text = std::fs::read_to_string(store.path()).unwrap();
    let edited = text.replace("\"Zeta\"", "\"Zetb\"");
    assert_eq!(edited.len(), text.len());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(store.path())
        .unwrap();
    use std::io::Write;
    (&file).write_all(edited.as_bytes()).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let listing = store.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(name_of(&listing, "a"), "Zetb");
}

#[test]
fn a_change_through_the_store_updates_only_its_rows_in_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    write_jobs(&store, &sample());
    store.list(&query(200, 0), NOW_MS).unwrap();
    mark(dir.path(), "a");
    let state = JobState {
        next_run_at_ms: Some(NOW_MS + 10),
        last_run_status: Some(crate::cron::job::RunStatus::Ok),
        ..JobState::default()
    };
    let done = store
        .update_states(
            &[("f".into(), state.clone()), ("gone".into(), state)],
            now(),
        )
        .unwrap();
    assert_eq!(done.value.updated, 1);
    assert_eq!(done.value.missing, ["gone"]);
    let listing = store.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(ids(&listing)[0], "f", "its new next run sorts first");
    assert_eq!(listing.jobs[0]["state"]["lastRunStatus"], "ok");
    assert_eq!(
        name_of(&listing, "a"),
        "from the index",
        "other rows were not rebuilt"
    );
    assert_eq!(listing.total, 5);
    // Removing a job removes its row; disabling one moves it out of the
    // enabled count.
    store.remove("b", now()).unwrap();
    let listing = store.list(&query(200, 0), NOW_MS).unwrap();
    assert!(!ids(&listing).contains(&"b"));
    assert_eq!(listing.total, 4);
    assert_eq!(name_of(&listing, "a"), "from the index");
    store
        .modify(now(), |file| {
            file.get_mut("c").unwrap().enabled = false;
            Ok(())
        })
        .unwrap();
    let overview = store.overview(NOW_MS).unwrap();
    assert_eq!((overview.jobs, overview.enabled), (5, 3));
    let off = store
        .list(
            &ListQuery {
                enabled: EnabledFilter::Disabled,
                ..query(200, 0)
            },
            NOW_MS,
        )
        .unwrap();
    assert_eq!((ids(&off), off.total), (vec!["c", "e"], 2));
    assert_eq!(
        name_of(&store.list(&query(200, 0), NOW_MS).unwrap(), "a"),
        "from the index"
    );
}

#[test]
fn deleting_the_index_loses_nothing_and_a_zone_change_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    write_jobs(&store, &sample());
    let first = store.list(&query(200, 0), NOW_MS).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("almanac.sqlite")).unwrap();
    conn.execute_batch("DELETE FROM cron_jobs; DELETE FROM cron_index;")
        .unwrap();
    let again = store.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(ids(&first), ids(&again));

    mark(dir.path(), "a");
    let elsewhere = CronStore::new(
        store.path().to_path_buf(),
        dir.path().join("almanac.sqlite"),
        TimeZone::get("America/New_York").unwrap(),
    );
    let listing = elsewhere.list(&query(200, 0), NOW_MS).unwrap();
    assert_eq!(name_of(&listing, "a"), "Zeta", "rebuilt for the new zone");
}

#[test]
fn status_counts_and_the_next_wake() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    assert_eq!(store.overview(NOW_MS).unwrap(), Overview::default());
    write_jobs(&store, &sample());
    let overview = store.overview(NOW_MS).unwrap();
    assert_eq!(overview.jobs, 6);
    assert_eq!(overview.enabled, 5);
    assert_eq!(
        overview.next_wake_at_ms,
        Some(NOW_MS + 1_000),
        "the disabled job's earlier time does not count"
    );
    let loaded = store.read().unwrap();
    let mut from_file = overview_in_memory(&loaded.file, &TimeZone::UTC, NOW_MS);
    from_file.warnings.clear();
    assert_eq!(from_file, overview);
}

#[test]
fn ids_resolve_by_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    write_jobs(
        &store,
        &[
            job("3f2a9c1e-aaaa", "one", None, 1, true),
            job("3f2b0000-bbbb", "two", None, 1, true),
        ],
    );
    assert_eq!(store.resolve("3f2a", NOW_MS).unwrap(), "3f2a9c1e-aaaa");
    assert_eq!(
        store.resolve("3f2b0000-bbbb", NOW_MS).unwrap(),
        "3f2b0000-bbbb"
    );
    assert!(matches!(
        store.resolve("3f2", NOW_MS),
        Err(CronError::Ambiguous(_))
    ));
    assert!(matches!(
        store.resolve("9", NOW_MS),
        Err(CronError::NotFound(_))
    ));
    assert!(matches!(
        store.resolve("", NOW_MS),
        Err(CronError::NotFound(_))
    ));
}

#[test]
fn a_command_that_only_reads_writes_only_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // No store: nothing is created at all.
    store.list(&query(200, 0), NOW_MS).unwrap();
    store.overview(NOW_MS).unwrap();
    assert!(!dir.path().join("almanac.sqlite").exists());
    assert!(!dir.path().join("cron").exists());
    write_jobs(&store, &sample());
    let text = std::fs::read(store.path()).unwrap();
    let fingerprint = store.fingerprint().unwrap();
    store.list(&query(200, 0), NOW_MS).unwrap();
    store.resolve("a", NOW_MS).unwrap();
    assert_eq!(std::fs::read(store.path()).unwrap(), text);
    assert_eq!(store.fingerprint().unwrap(), fingerprint);
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("cron"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["jobs.json"]);
}

#[test]
fn in_memory_index_opens() {
    let index = CronIndex::open_in_memory();
    assert!(index.recorded().unwrap().is_none());
}

/// Every row of the index, in a stable order, as text.
fn dump(dir: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(dir.join("almanac.sqlite")).unwrap();
    let mut rows = Vec::new();
    for table in ["cron_jobs", "cron_search"] {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1"))
            .unwrap();
        let columns = stmt.column_count();
        let found: Vec<String> = stmt
            .query_map([], |r| {
                let mut row = Vec::new();
                for i in 0..columns {
                    row.push(format!("{:?}", r.get_ref(i)?));
                }
                Ok(row.join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.push(format!("{table}: {}", found.len()));
        rows.extend(found);
    }
    rows
}

#[test]
fn the_streamed_rebuild_writes_the_rows_the_full_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut jobs = sample();
    jobs.push(json!({
        "jobId": "legacy", "name": "old spelling", "enabled": true,
        "createdAtMs": 1_000, "updatedAtMs": 2_000,
        "schedule": {"kind": "at", "atMs": NOW_MS + 60_000},
        "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "x"},
        "unknownField": {"kept": true},
    }));
    jobs.push(json!({
        "id": "every", "name": "every ten", "enabled": true,
        "createdAtMs": 1_000, "updatedAtMs": 2_000,
        "schedule": {"kind": "every", "everyMs": 600_000},
        "sessionTarget": "isolated",
        "payload": {"kind": "agentTurn", "message": "check"},
    }));
    write_jobs(&store, &jobs);
    // The first listing builds the index as a stream.
    let streamed_page = store.list(&query(200, 0), NOW_MS).unwrap();
    let streamed = dump(dir.path());
    assert_eq!(streamed[0], format!("cron_jobs: {}", jobs.len()));
    // The full path, on the same file.
    let loaded = store.load(now()).unwrap();
    let mut index = CronIndex::open(&dir.path().join("almanac.sqlite")).unwrap();
    let source = Source {
        store_path: store.path(),
        fingerprint: loaded.fingerprint.unwrap(),
        host_zone: &TimeZone::UTC,
        now_ms: NOW_MS,
    };
    index
        .rebuild(&source, &loaded.file, &loaded.warnings)
        .unwrap();
    assert_eq!(dump(dir.path()), streamed);
    assert_eq!(
        store.list(&query(200, 0), NOW_MS).unwrap().jobs,
        streamed_page.jobs
    );
}

#[test]
fn a_store_with_a_job_that_cannot_be_read_is_indexed_by_the_full_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut jobs = sample();
    jobs.push(json!({"id": "broken", "schedule": 5}));
    write_jobs(&store, &jobs);
    let page = store.list(&query(200, 0), NOW_MS).unwrap();
    // The readable jobs are listed as without it, and the one that is not
    // is reported.
    let other = tempfile::tempdir().unwrap();
    let clean = self::store(other.path());
    write_jobs(&clean, &sample());
    assert_eq!(page.jobs, clean.list(&query(200, 0), NOW_MS).unwrap().jobs);
    assert!(
        page.warnings.iter().any(|w| w.contains("broken")),
        "{:?}",
        page.warnings
    );
}
