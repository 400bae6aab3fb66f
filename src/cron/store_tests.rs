use std::path::Path;

use serde_json::json;

use super::*;
use crate::cron::job::{CronJob, Payload, ScheduleSpec, SessionTarget, WakeMode};

const NOW_MS: i64 = 1_795_000_000_000;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(NOW_MS).unwrap()
}

struct Fixture {
    dir: tempfile::TempDir,
    store: CronStore,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = CronStore::new(
            dir.path().join("cron").join("jobs.json"),
            dir.path().join("almanac.sqlite"),
            jiff::tz::TimeZone::UTC,
        );
        Fixture { dir, store }
    }

    fn write(&self, text: &str) {
        std::fs::create_dir_all(self.store.path().parent().unwrap()).unwrap();
        std::fs::write(self.store.path(), text).unwrap();
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.store.path()).unwrap()
    }

    fn bak(&self) -> Option<String> {
        std::fs::read_to_string(self.store.backup_path()).ok()
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.store.path().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn new_job(id: &str, name: &str) -> CronJob {
    CronJob {
        id: id.to_string(),
        agent_id: None,
        session_key: None,
        name: name.to_string(),
        description: None,
        enabled: true,
        delete_after_run: None,
        created_at_ms: NOW_MS,
        updated_at_ms: NOW_MS,
        schedule: ScheduleSpec::every(60_000, NOW_MS),
        session_target: SessionTarget::Main,
        wake_mode: WakeMode::Now,
        payload: Payload::system_event("ping"),
        delivery: None,
        failure_alert: None,
        catch_up: None,
        state: JobState::default(),
        extra: Default::default(),
    }
}

/// A store as OpenClaw writes it (its key order, no final newline), with
/// fields almanac does not know at every level and one legacy job.
const OPENCLAW_STORE: &str = r#"{
  "version": 1,
  "jobs": [
    {
      "id": "a1",
      "agentId": "main",
      "name": "Morning brief",
      "enabled": true,
      "createdAtMs": 1794000000000,
      "updatedAtMs": 1794000000000,
      "schedule": {
        "kind": "cron",
        "expr": "0 7 * * *",
        "tz": "Europe/Berlin",
        "futureScheduleField": [
          1,
          2.5
        ]
      },
      "sessionTarget": "isolated",
      "wakeMode": "now",
      "payload": {
        "kind": "agentTurn",
        "message": "Brief me \u00e9t\u00e9 \ud83c\udf1e",
        "model": "anthropic/claude-sonnet-4"
      },
      "delivery": {
        "mode": "announce",
        "channel": "telegram",
        "to": "12345",
        "threadId": 7
      },
      "labels": {
        "team": "ops"
      },
      "state": {
        "nextRunAtMs": 1795050000000,
        "lastRunAtMs": 1794963600000,
        "lastRunStatus": "ok",
        "lastStatus": "ok",
        "lastDurationMs": 4210,
        "sidecarHint": true
      }
    },
    {
      "jobId": "legacy-b2",
      "name": "Old reminder",
      "enabled": "true",
      "schedule": {
        "everyMs": 3600000
      },
      "text": "Stretch",
      "state": {}
    },
    {
      "state": {},
      "payload": {
        "kind": "systemEvent",
        "text": "Drink water"
      },
      "id": "c3",
      "name": "Water",
      "schedule": {
        "kind": "every",
        "everyMs": 1800000,
        "anchorMs": 1794000000000
      },
      "sessionTarget": "main",
      "enabled": true
    }
  ],
  "openclawMeta": {
    "migratedAt": "2026-04-01"
  }
}"#;

fn block_of<'a>(text: &'a str, id_line: &str) -> &'a str {
    // The job object around `id_line`, from its opening brace line.
    let at = text.find(id_line).unwrap();
    let start = text[..at].rfind("\n    {").unwrap();
    let end = at + text[at..].find("\n    }").unwrap();
    &text[start..end]
}

#[test]
fn an_openclaw_store_round_trips_byte_for_byte() {
    let fx = Fixture::new();
    fx.write(OPENCLAW_STORE);
    let loaded = fx.store.load(now()).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.file.len(), 3);
    assert_eq!(
        String::from_utf8(loaded.file.to_bytes()).unwrap(),
        OPENCLAW_STORE,
        "nothing changed: the same bytes"
    );
    // A change that touches nothing writes nothing.
    let changed = fx.store.modify(now(), |_| Ok(())).unwrap();
    assert_eq!(changed.written, None);
    assert_eq!(fx.text(), OPENCLAW_STORE);

    // The runner records a run of c3: only c3's text changes, in its own
    // key order, and its unknown parts stay.
    let mut state = loaded.file.get("c3").unwrap().state.clone();
    state.last_run_at_ms = Some(NOW_MS);
    state.last_run_status = Some(crate::cron::job::RunStatus::Ok);
    state.next_run_at_ms = Some(NOW_MS + 1_800_000);
    let done = fx
        .store
        .update_states(&[("c3".to_string(), state)], now())
        .unwrap();
    assert_eq!(done.value.updated, 1);
    let text = fx.text();
    assert_eq!(
        block_of(&text, "\"id\": \"a1\""),
        block_of(OPENCLAW_STORE, "\"id\": \"a1\"")
    );
    assert_eq!(
        block_of(&text, "\"jobId\": \"legacy-b2\""),
        block_of(OPENCLAW_STORE, "\"jobId\": \"legacy-b2\""),
        "an untouched legacy job stays as written"
    );
    assert!(text.ends_with("\n  }\n}"), "no final newline, as read");
    assert!(text.contains("\"openclawMeta\""));
    let c3 = block_of(&text, "\"id\": \"c3\"");
    let keys: Vec<&str> = c3
        .lines()
        .filter(|l| l.starts_with("      \"") && !l.starts_with("       "))
        .map(|l| l.trim().split('"').nth(1).unwrap())
        .collect();
    assert_eq!(
        &keys[..7],
        [
            "state",
            "payload",
            "id",
            "name",
            "schedule",
            "sessionTarget",
            "enabled"
        ],
        "{c3}"
    );
    assert!(c3.contains("\"lastRunStatus\": \"ok\""), "{c3}");
    // Runtime fields only: the backup is not refreshed.
    assert_eq!(fx.bak(), None);
}

#[test]
fn a_changed_job_keeps_fields_almanac_does_not_know() {
    let fx = Fixture::new();
    fx.write(OPENCLAW_STORE);
    fx.store
        .modify(now(), |file| {
            file.get_mut("a1").unwrap().name = "Morning brief, shorter".into();
            Ok(())
        })
        .unwrap();
    let text = fx.text();
    let a1 = block_of(&text, "\"id\": \"a1\"");
    for kept in [
        "\"futureScheduleField\"",
        "\"threadId\": 7",
        "\"labels\"",
        "\"sidecarHint\": true",
        "\"name\": \"Morning brief, shorter\"",
        "été 🌞",
    ] {
        assert!(a1.contains(kept), "{kept} in {a1}");
    }
    // More than runtime changed: the previous file is the backup.
    assert_eq!(fx.bak().as_deref(), Some(OPENCLAW_STORE));
}

#[test]
fn the_backup_is_refreshed_only_when_more_than_runtime_fields_change() {
    let fx = Fixture::new();
    let add = |id: &str| {
        fx.store
            .modify(now(), |file| {
                file.push(new_job(id, id));
                Ok(())
            })
            .unwrap()
    };
    add("one");
    assert_eq!(fx.bak(), None, "there was no previous file");
    let after_one = fx.text();
    add("two");
    assert_eq!(fx.bak().as_deref(), Some(after_one.as_str()));
    let after_two = fx.text();
    // State and updatedAtMs alone: the backup stays the older copy.
    fx.store
        .modify(now(), |file| {
            let job = file.get_mut("one").unwrap();
            job.state.running_at_ms = Some(NOW_MS);
            job.updated_at_ms = NOW_MS + 5;
            Ok(())
        })
        .unwrap();
    assert_ne!(fx.text(), after_two);
    assert_eq!(fx.bak().as_deref(), Some(after_one.as_str()));
    // Disabling is a change of the definition.
    let before_disable = fx.text();
    fx.store
        .modify(now(), |file| {
            file.get_mut("two").unwrap().enabled = false;
            Ok(())
        })
        .unwrap();
    assert_eq!(fx.bak().as_deref(), Some(before_disable.as_str()));
    // Removing too.
    let before_remove = fx.text();
    assert!(fx.store.remove("one", now()).unwrap().value);
    assert_eq!(fx.bak().as_deref(), Some(before_remove.as_str()));
    assert!(!fx.store.remove("one", now()).unwrap().value);
}

#[test]
fn new_files_are_two_space_indented_private_and_end_with_a_newline() {
    let fx = Fixture::new();
    fx.store
        .modify(now(), |file| {
            file.push(new_job("n1", "first"));
            Ok(())
        })
        .unwrap();
    let text = fx.text();
    assert!(text.starts_with("{\n  \"version\": 1,\n  \"jobs\": [\n    {\n      \"id\": \"n1\""));
    assert!(text.ends_with("}\n"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fx.store.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_damaged_store_is_moved_aside_and_its_last_good_copy_restored_with_a_warning() {
    let fx = Fixture::new();
    for id in ["k1", "k2"] {
        fx.store
            .modify(now(), |file| {
                file.push(new_job(id, id));
                Ok(())
            })
            .unwrap();
    }
    // The backup holds k1 only, the last good copy both; the file is then
    // damaged.
    let good = fx.text();
    assert!(fx.bak().unwrap().contains("k1") && !fx.bak().unwrap().contains("k2"));
    fx.write("{\"version\": 1, \"jobs\": [ {\"id\": \"k1\",");

    // A command that only reads changes nothing and shows the last good
    // copy.
    let read = fx.store.read().unwrap();
    assert_eq!(read.file.jobs().count(), 2);
    assert!(
        read.warnings[0].contains("damaged") && read.warnings[0].contains("jobs.json.last-good"),
        "{:?}",
        read.warnings
    );
    assert!(read.fingerprint.is_none());
    assert_eq!(
        fx.files(),
        [
            "jobs.json",
            "jobs.json.bak",
            "jobs.json.last-good",
            "jobs.json.lock"
        ]
    );

    // The runner or a change moves it aside and restores that copy: the
    // last change is kept.
    let loaded = fx.store.load(now()).unwrap();
    assert_eq!(
        loaded
            .file
            .jobs()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>(),
        ["k1", "k2"]
    );
    assert!(
        loaded.warnings[0].contains("moved it to") && loaded.warnings[0].contains("restored"),
        "{:?}",
        loaded.warnings
    );
    let repaired = loaded.repaired.unwrap();
    assert!(
        repaired
            .restored_from
            .unwrap()
            .ends_with("jobs.json.last-good")
    );
    assert_eq!(repaired.jobs, 2);
    let files = fx.files();
    assert!(
        files.iter().any(|f| f.starts_with("jobs.json.corrupt-")),
        "{files:?}"
    );
    assert_eq!(fx.text(), good, "the last good copy is the store again");
    assert_eq!(fx.store.damaged_copies().len(), 1);
    let corrupt = files
        .iter()
        .find(|f| f.starts_with("jobs.json.corrupt-"))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.store.path().with_file_name(corrupt)).unwrap(),
        "{\"version\": 1, \"jobs\": [ {\"id\": \"k1\",",
        "the damaged bytes are kept"
    );
}

/// A last good copy older than the backup (a change it did not follow)
/// loses to the backup.
#[test]
fn the_newer_of_the_last_good_copy_and_the_backup_is_restored() {
    let fx = Fixture::new();
    fx.store
        .modify(now(), |file| {
            file.push(new_job("old", "old"));
            Ok(())
        })
        .unwrap();
    let copy = fx.store.last_good_path();
    let stale = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(stale)
        .unwrap();
    let newer = "{\"version\": 1, \"jobs\": []}";
    std::fs::write(fx.store.backup_path(), newer).unwrap();
    fx.write("{broken");
    let loaded = fx.store.load(now()).unwrap();
    assert!(
        loaded
            .repaired
            .unwrap()
            .restored_from
            .unwrap()
            .ends_with("jobs.json.bak")
    );
    assert_eq!(fx.text(), newer);
}

#[test]
fn a_damaged_store_without_a_backup_is_reported_not_silently_empty() {
    let fx = Fixture::new();
    fx.write("not json at all {{{");
    let read = fx.store.read().unwrap();
    assert_eq!(read.file.len(), 0);
    assert!(
        read.warnings[0].contains("no usable copy"),
        "{:?}",
        read.warnings
    );
    assert_eq!(fx.text(), "not json at all {{{", "a read leaves it");
    let loaded = fx.store.load(now()).unwrap();
    assert!(
        loaded.warnings[0].contains("no usable copy"),
        "{:?}",
        loaded.warnings
    );
    assert!(!fx.store.path().exists());
}

#[test]
fn json5_shapes_and_unreadable_jobs() {
    let fx = Fixture::new();
    // JSON5: comments, unquoted keys, trailing commas.
    fx.write(
        "// hand-written\n{ version: 1, jobs: [ { id: 'j5', name: 'five', schedule: { kind: 'every', everyMs: 5000 }, sessionTarget: 'main', payload: { kind: 'systemEvent', text: 'x' }, }, ], }",
    );
    let loaded = fx.store.read().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.file.get("j5").unwrap().name, "five");
    // Written back as JSON even for runtime state alone: the hand-written
    // file is kept as the backup.
    let hand_written = fx.text();
    fx.store
        .update_states(
            &[(
                "j5".into(),
                JobState {
                    next_run_at_ms: Some(NOW_MS),
                    ..JobState::default()
                },
            )],
            now(),
        )
        .unwrap();
    assert!(
        fx.text().starts_with("{\n  \"version\": 1,"),
        "{}",
        fx.text()
    );
    assert_eq!(fx.bak().as_deref(), Some(hand_written.as_str()));

    // Other shapes are read as no jobs, with a warning.
    for text in ["[]", "{\"version\": 1}", "{\"jobs\": {\"a\": 1}}", "7"] {
        fx.write(text);
        let loaded = fx.store.read().unwrap();
        assert_eq!(loaded.file.len(), 0, "{text}");
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("read as no jobs")),
            "{text}: {:?}",
            loaded.warnings
        );
    }
    // An empty file is an empty store.
    fx.write("  \n");
    let loaded = fx.store.read().unwrap();
    assert!(loaded.warnings.is_empty() && loaded.file.len() == 0);

    // Null entries are dropped; a job that cannot be read is kept as it
    // is, reported, and written back untouched; a changed job gains only
    // what changed (no defaults spelled out).
    fx.write(
        r#"{"version": 1, "jobs": [null, {"id": "bad", "name": "no schedule"}, {"id": "ok", "name": "fine", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "t"}}]}"#,
    );
    let loaded = fx.store.read().unwrap();
    assert_eq!(loaded.file.len(), 2);
    assert_eq!(loaded.file.jobs().count(), 1);
    assert!(
        loaded.warnings[0].contains("(bad)") && loaded.warnings[0].contains("cannot be read"),
        "{:?}",
        loaded.warnings
    );
    fx.store
        .modify(now(), |file| {
            file.get_mut("ok").unwrap().name = "finer".into();
            Ok(())
        })
        .unwrap();
    let written: serde_json::Value = serde_json::from_str(&fx.text()).unwrap();
    assert_eq!(
        written["jobs"],
        json!([
            {"id": "bad", "name": "no schedule"},
            {"id": "ok", "name": "finer", "schedule": {"kind": "every", "everyMs": 1000},
             "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "t"}}
        ])
    );
}

#[test]
fn sidecar_state_fills_jobs_without_their_own() {
    let fx = Fixture::new();
    fx.write(
        r#"{"version": 1, "jobs": [
            {"id": "s1", "name": "a", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "t"}},
            {"id": "s2", "name": "b", "schedule": {"kind": "every", "everyMs": 1000}, "sessionTarget": "main", "payload": {"kind": "systemEvent", "text": "t"}, "state": {"lastRunStatus": "error"}}
        ]}"#,
    );
    std::fs::write(
        fx.store.sidecar_path(),
        r#"{"jobs": {"s1": {"lastRunStatus": "ok", "nextRunAtMs": 5}, "s2": {"lastRunStatus": "ok"}}}"#,
    )
    .unwrap();
    assert!(fx.store.sidecar_path().ends_with("jobs-state.json"));
    let loaded = fx.store.read().unwrap();
    let s1 = loaded.file.get("s1").unwrap();
    assert_eq!(s1.state.next_run_at_ms, Some(5));
    let s2 = loaded.file.get("s2").unwrap();
    assert_eq!(
        s2.state.last_run_status,
        Some(crate::cron::job::RunStatus::Error),
        "the job's own state wins"
    );
}

#[test]
fn concurrent_writers_lose_no_job() {
    let fx = Fixture::new();
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let store = fx.store.clone();
            std::thread::spawn(move || {
                for n in 0..15 {
                    let id = format!("t{t}-{n}");
                    store
                        .modify(now(), |file| {
                            file.push(new_job(&id, &id));
                            Ok(())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let loaded = fx.store.read().unwrap();
    assert_eq!(loaded.file.jobs().count(), 30);
}

#[test]
fn the_fingerprint_changes_with_every_write() {
    let fx = Fixture::new();
    assert_eq!(fx.store.fingerprint().unwrap(), None);
    fx.write("{\"version\": 1, \"jobs\": []}");
    let first = fx.store.fingerprint().unwrap().unwrap();
    assert_eq!(fx.store.fingerprint().unwrap(), Some(first), "stable");
    fx.store
        .modify(now(), |file| {
            file.push(new_job("f1", "f"));
            Ok(())
        })
        .unwrap();
    let changed = fx
        .store
        .modify(now(), |file| {
            file.push(new_job("f2", "f"));
            Ok(())
        })
        .unwrap();
    let second = fx.store.fingerprint().unwrap();
    assert_ne!(second, Some(first));
    assert_eq!(changed.written, second, "a writer learns what it wrote");
    let unchanged = fx.store.modify(now(), |_| Ok(())).unwrap();
    assert_eq!(unchanged.written, None);
    let _ = Path::new(fx.dir.path());
}

#[test]
fn an_error_in_a_change_writes_nothing() {
    let fx = Fixture::new();
    fx.write(OPENCLAW_STORE);
    let err = fx
        .store
        .modify(now(), |file| {
            file.get_mut("a1").unwrap().name = "changed".into();
            Err::<(), _>(CronError::NotFound("x".into()))
        })
        .unwrap_err();
    assert!(matches!(err, CronError::NotFound(_)));
    assert_eq!(fx.text(), OPENCLAW_STORE);
}
