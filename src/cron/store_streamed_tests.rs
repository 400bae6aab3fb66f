//! A change of one job, an addition and a removal as a stream write what
//! the full path writes (the file, its backup, the index), byte for byte,
//! on the same store; and every other job stays as it was read.

use std::path::Path;

use serde_json::{Value, json};

use super::super::{Changed, CronStore};
use crate::cron::CronError;
use crate::cron::index::ListQuery;
use crate::cron::job::{CronJob, JobState, RunStatus};

const NOW_MS: i64 = 1_795_000_000_000;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(NOW_MS).unwrap()
}

fn store_in(dir: &Path) -> CronStore {
    CronStore::new(
        dir.join("cron").join("jobs.json"),
        dir.join("almanac.sqlite"),
        jiff::tz::TimeZone::UTC,
    )
}

fn job_value(i: usize) -> Value {
    json!({
        "id": format!("j-{i:04}"),
        "name": format!("Job {i}"),
        "enabled": !i.is_multiple_of(7),
        "createdAtMs": NOW_MS - 1_000_000,
        "updatedAtMs": NOW_MS - 500_000,
        "schedule": {"kind": "every", "everyMs": 60_000 * (1 + i % 30), "anchorMs": NOW_MS - 1_000_000},
        "sessionTarget": "main",
        "wakeMode": "now",
        "payload": {"kind": "systemEvent", "text": format!("Reminder {i}"), "futureField": [i, 2.5]},
        "labels": {"team": "ops"},
        "state": {"nextRunAtMs": NOW_MS + i as i64 * 1000, "lastRunStatus": "ok"}
    })
}

/// A store of `n` jobs as a writer other than almanac may leave it: a
/// top-level field almanac does not know, one job written on one line
/// (`j-0003`), one in an older spelling (`old-1`), and no final newline.
fn sample(n: usize) -> String {
    let mut jobs: Vec<Value> = (0..n).map(job_value).collect();
    jobs[3] = json!("ONE LINE");
    jobs.push(json!("OLD SPELLING"));
    let doc = json!({"version": 1, "jobs": jobs, "openclawMeta": {"migratedAt": "2026-04-01"}});
    let one_line = serde_json::to_string(&job_value(3)).unwrap();
    let old = r#"{"jobId": "old-1", "name": "Old", "enabled": "true", "schedule": {"everyMs": 3600000}, "text": "Stretch", "state": {}}"#;
    serde_json::to_string_pretty(&doc)
        .unwrap()
        .replace("\"ONE LINE\"", &one_line)
        .replace("\"OLD SPELLING\"", old)
}

/// The same store twice, each indexed (as a command finds it after
/// resolving the job it names).
struct Twins {
    _dirs: [tempfile::TempDir; 2],
    streamed: CronStore,
    full: CronStore,
}

fn twins(text: &str) -> Twins {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let [streamed, full] = [store_in(dirs[0].path()), store_in(dirs[1].path())];
    for store in [&streamed, &full] {
        std::fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        std::fs::write(store.path(), text).unwrap();
        store.list(&ListQuery::default(), NOW_MS).unwrap();
    }
    Twins {
        _dirs: dirs,
        streamed,
        full,
    }
}

fn text(store: &CronStore) -> String {
    std::fs::read_to_string(store.path()).unwrap()
}

fn bak(store: &CronStore) -> Option<String> {
    std::fs::read_to_string(store.backup_path()).ok()
}

/// What a change gave, without the fingerprint (which names the file).
fn outcome<T: std::fmt::Debug>(result: &Result<Changed<T>, CronError>) -> String {
    match result {
        Ok(changed) => format!(
            "{:?} {:?} written: {}",
            changed.value,
            changed.warnings,
            changed.written.is_some()
        ),
        Err(err) => format!("error: {err}"),
    }
}

/// Asserts that both twins hold the same bytes, backup and index rows,
/// and that both changes gave the same.
fn assert_same<T: std::fmt::Debug>(
    twins: &Twins,
    streamed: &Result<Changed<T>, CronError>,
    full: &Result<Changed<T>, CronError>,
) {
    // Warnings name the store's path, the one thing the twins differ in.
    let neutral = |store: &CronStore, text: String| {
        text.replace(&store.path().display().to_string(), "jobs.json")
    };
    assert_eq!(
        neutral(&twins.streamed, outcome(streamed)),
        neutral(&twins.full, outcome(full))
    );
    assert_eq!(text(&twins.streamed), text(&twins.full));
    assert_eq!(bak(&twins.streamed), bak(&twins.full));
    let rows = |store: &CronStore| neutral(store, index_rows(store).join("\n"));
    assert_eq!(rows(&twins.streamed), rows(&twins.full));
}

/// The index as a write left it: every row, what it recorded of the
/// file, and whether that is the file as it is now.
fn index_rows(store: &CronStore) -> Vec<String> {
    let path = store
        .path()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("almanac.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT position, job_id, name, enabled, schedule, next_run_at_ms, updated_at_ms, job
             FROM cron_jobs ORDER BY job_id, position",
        )
        .unwrap();
    let mut rows: Vec<String> = stmt
        .query_map([], |r| {
            Ok((0..8)
                .map(|i| match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(text) => {
                        String::from_utf8_lossy(text).into_owned()
                    }
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("|"))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.push(
        conn.query_row(
            "SELECT warnings, jobs, enabled_jobs FROM cron_index",
            [],
            |r| {
                Ok(format!(
                    "{:?}",
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?
                    )
                ))
            },
        )
        .unwrap(),
    );
    let index = crate::cron::index::CronIndex::open(&path).unwrap();
    let fingerprint = store.fingerprint().unwrap().unwrap();
    let describes = index
        .describes(store.path(), fingerprint, "UTC")
        .unwrap()
        .is_some();
    rows.push(format!("describes the file: {describes}"));
    rows
}

/// `change` of job `id` through [`CronStore::modify_job`] on one twin and
/// the full path on the other.
fn change_both<T: std::fmt::Debug>(
    source: &str,
    id: &str,
    change: impl Fn(&mut CronJob) -> Result<T, CronError>,
) -> Twins {
    let twins = twins(source);
    let streamed = twins.streamed.modify_job(id, now(), &change);
    let full = twins.full.modify(now(), |file| {
        let job = file
            .get_mut(id)
            .ok_or_else(|| CronError::NotFound(id.to_string()))?;
        change(job)
    });
    assert_same(&twins, &streamed, &full);
    twins
}

/// The element of job `id` in a store's text (as written, by its id line).
fn element_of<'t>(text: &'t str, id: &str) -> &'t str {
    let at = text.find(&format!("\"id\": \"{id}\"")).unwrap();
    let start = text[..at].rfind("\n    {").unwrap();
    let end = at + text[at..].find("\n    }").unwrap();
    &text[start..end]
}

#[test]
fn a_change_of_one_job_writes_what_the_full_path_writes_and_leaves_the_rest_as_read() {
    let source = sample(300);
    // A change of its definition: only its element changes, and the
    // previous file becomes the backup.
    let twins = change_both(&source, "j-0100", |job| {
        job.name = "Renamed".into();
        job.updated_at_ms = NOW_MS;
        Ok(job.name.clone())
    });
    let written = text(&twins.streamed);
    let before = element_of(&source, "j-0100");
    let after = element_of(&written, "j-0100");
    assert!(after.contains("\"name\": \"Renamed\""), "{after}");
    assert!(after.contains("\"futureField\""), "{after}");
    assert_eq!(written, source.replacen(before, after, 1));
    assert_eq!(bak(&twins.streamed).as_deref(), Some(source.as_str()));

    // Runtime state only: no backup.
    let twins = change_both(&source, "j-0200", |job| {
        job.state.last_run_at_ms = Some(NOW_MS);
        job.state.last_run_status = Some(RunStatus::Error);
        Ok(())
    });
    assert_ne!(text(&twins.streamed), source);
    assert_eq!(bak(&twins.streamed), None);

    // Disabled and enabled as the commands do it.
    for id in ["j-0001", "j-0007"] {
        change_both(&source, id, |job| {
            job.enabled = !job.enabled;
            job.updated_at_ms = NOW_MS;
            job.state.next_run_at_ms = None;
            Ok(job.enabled)
        });
    }
    // The job written on one line comes out in the written form, as the
    // full path writes it; the job in an older spelling goes the full
    // path and comes out in today's.
    change_both(&source, "j-0003", |job| {
        job.description = Some("now described".into());
        Ok(())
    });
    change_both(&source, "old-1", |job| {
        job.name = "Newer".into();
        Ok(())
    });
}

#[test]
fn a_change_that_changes_nothing_or_is_refused_writes_nothing() {
    let source = sample(50);
    for id in ["j-0010", "j-0003"] {
        let twins = change_both(&source, id, |_| Ok(()));
        // The job on one line is written out anew by both paths; the
        // others are not written at all.
        if id == "j-0010" {
            assert_eq!(text(&twins.streamed), source);
        }
        assert_eq!(bak(&twins.streamed), None);
    }
    let twins = change_both(&source, "j-0010", |job| {
        job.name = "Never".into();
        Err::<(), _>(CronError::BadJobId("refused".into()))
    });
    assert_eq!(text(&twins.streamed), source);
    let twins = change_both(&source, "no-such-job", |_| Ok(()));
    assert_eq!(text(&twins.streamed), source);
}

#[test]
fn an_id_twice_a_sidecar_or_a_stale_index_give_the_full_paths_result() {
    // Two jobs with one id: the first is changed.
    let mut doc: Value = serde_json::from_str(&sample(20)).unwrap();
    let mut twin = job_value(5);
    twin["name"] = json!("Second of j-0005");
    doc["jobs"].as_array_mut().unwrap().push(twin);
    let dup = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    let twins = change_both(&dup, "j-0005", |job| {
        job.name = "First".into();
        Ok(())
    });
    assert!(text(&twins.streamed).contains("Second of j-0005"));

    // OpenClaw's state sidecar.
    let twins = twins_with(&sample(20), |store| {
        let side = store.sidecar_path();
        std::fs::write(side, r#"{"jobs": {"j-0002": {"lastRunStatus": "error"}}}"#).unwrap();
    });
    let streamed = twins.streamed.modify_job("j-0002", now(), |job| {
        job.name = "Side".into();
        Ok(())
    });
    let full = twins.full.modify(now(), |file| {
        file.get_mut("j-0002").unwrap().name = "Side".into();
        Ok(())
    });
    assert_same(&twins, &streamed, &full);

    // An index built before the file changed by hand.
    let twins = twins_with(&sample(20), |store| {
        let edited = text(store).replace("\"Job 4\"", "\"Job four\"");
        std::fs::write(store.path(), edited).unwrap();
    });
    let streamed = twins.streamed.modify_job("j-0006", now(), |job| {
        job.name = "Six".into();
        Ok(())
    });
    let full = twins.full.modify(now(), |file| {
        file.get_mut("j-0006").unwrap().name = "Six".into();
        Ok(())
    });
    assert_same(&twins, &streamed, &full);
}

/// [`twins`], then `then` on both stores.
fn twins_with(source: &str, then: impl Fn(&CronStore)) -> Twins {
    let twins = twins(source);
    then(&twins.streamed);
    then(&twins.full);
    twins
}

#[test]
fn an_addition_and_a_removal_write_what_the_full_path_writes() {
    let source = sample(100);
    let mut added = job_of(job_value(1000));
    added.state = JobState::default();
    let pair = twins(&source);
    let add_both = |pair: &Twins| {
        let streamed = pair.streamed.add(&added, now());
        let full = pair.full.modify(now(), |file| {
            file.push(added.clone());
            Ok(())
        });
        assert_same(pair, &streamed, &full);
    };
    add_both(&pair);
    assert_eq!(bak(&pair.streamed).as_deref(), Some(source.as_str()));
    // An id the store holds already: the full path, which adds it too.
    add_both(&pair);

    for id in ["j-0000", "j-0050", "old-1", "j-0099", "gone"] {
        let pair = twins(&source);
        let streamed = pair.streamed.remove(id, now());
        let full = pair
            .full
            .modify(now(), |file| Ok(file.remove(id).is_some()));
        assert_same(&pair, &streamed, &full);
    }
}

#[test]
fn the_index_follows_a_streamed_change_row_by_row() {
    let twins = twins(&sample(300));
    let store = &twins.streamed;
    let index = store
        .path()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("almanac.sqlite");
    let conn = rusqlite::Connection::open(&index).unwrap();
    // A row the changes do not touch, marked: a rebuild would undo it.
    conn.execute(
        "UPDATE cron_jobs SET job = json_set(job, '$.name', 'from the index') WHERE job_id = 'j-0001'",
        [],
    )
    .unwrap();
    let name_of = |id: &str| -> Option<String> {
        let query = ListQuery {
            enabled: crate::cron::EnabledFilter::All,
            query: Some(id.to_string()),
            ..ListQuery::default()
        };
        let listing = store.list(&query, NOW_MS).unwrap();
        listing
            .jobs
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["name"].as_str().unwrap().to_string())
    };
    let total = || store.overview(NOW_MS).unwrap().jobs;
    let jobs = total();
    store
        .modify_job("j-0100", now(), |job| {
            job.name = "Renamed".into();
            Ok(())
        })
        .unwrap();
    assert_eq!(name_of("j-0100").as_deref(), Some("Renamed"));
    store.remove("j-0200", now()).unwrap();
    assert_eq!(name_of("j-0200"), None);
    assert_eq!(total(), jobs - 1);
    let added = job_of(job_value(5000));
    store.add(&added, now()).unwrap();
    assert_eq!(name_of("j-5000").as_deref(), Some("Job 5000"));
    assert_eq!(total(), jobs);
    assert_eq!(
        name_of("j-0001").as_deref(),
        Some("from the index"),
        "the other rows were not rebuilt"
    );
}

fn job_of(value: Value) -> CronJob {
    serde::Deserialize::deserialize(value).unwrap()
}
