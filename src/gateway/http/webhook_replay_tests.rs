//! Idempotency keys: remembered through a crash and a restart, saved
//! before the intake log is emptied, aged out and capped.

use serde_json::{Value, json};

use super::super::super::intake::Record;
use super::super::webhooks::WebhookState;
use super::*;

/// A gateway directory whose intake log holds one wake accepted at
/// `at` under idempotency key `k`, answered `answer`.
fn keyed_wake_logged(at: i64, answer: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let intake = super::super::super::intake::Intake::open(dir.path()).unwrap();
    intake
        .accept(Record {
            seq: 0,
            ts: at,
            kind: "hook-wake".into(),
            session_key: "agent:main:main".into(),
            text: "deploy".into(),
            mode: "now".into(),
            trusted: false,
            hook: None,
            replay: Some(json!({"key": "k", "answer": answer})),
        })
        .unwrap();
    dir
}

#[test]
fn a_key_written_with_its_record_survives_a_crash_before_the_cache_was_saved() {
    let at = 1_796_000_000_000;
    let dir = keyed_wake_logged(at, json!({"ok": true, "mode": "now"}));
    let cache_file = dir.path().join("hooks-replay.json");
    let log = dir.path().join("intake.jsonl");
    let cache = ReplayCache::load_with_intake(&cache_file, &log, at + 1000);
    assert_eq!(
        cache.get("k", at + 1000),
        Some(&json!({"ok": true, "mode": "now"}))
    );
    let expired = ReplayCache::load_with_intake(&cache_file, &log, at + REPLAY_TTL_MS);
    assert_eq!(expired.get("k", at + REPLAY_TTL_MS), None);
}

#[test]
fn keys_held_only_by_the_log_are_saved_before_the_log_is_emptied() {
    let at = 1_796_000_000_000;
    let dir = keyed_wake_logged(at, json!({"ok": true}));
    let log = dir.path().join("intake.jsonl");
    // Nothing loaded the cache in this process (as after a restart).
    let state = WebhookState::default();
    state
        .save_replay_then(dir.path(), at + 1000, || std::fs::write(&log, ""))
        .unwrap();
    assert!(std::fs::read(&log).unwrap().is_empty());
    let cache = ReplayCache::load_with_intake(&dir.path().join(REPLAY_FILE), &log, at + 2000);
    assert_eq!(cache.get("k", at + 2000), Some(&json!({"ok": true})));
    assert!(!cache.dirty, "the saved file holds every key");
}

#[test]
fn replay_entries_expire_after_five_minutes_and_stay_under_the_cap() {
    let mut cache = ReplayCache::default();
    cache.insert("k".into(), json!(1), 0);
    assert_eq!(cache.get("k", REPLAY_TTL_MS - 1), Some(&json!(1)));
    assert_eq!(cache.get("k", REPLAY_TTL_MS), None);
    for i in 0..(REPLAY_MAX + 5) {
        cache.insert(format!("n{i}"), json!(i), 10);
    }
    assert_eq!(cache.by_key.len(), REPLAY_MAX);
    assert_eq!(cache.get("n0", 10), None);
    assert_eq!(
        cache.get(&format!("n{}", REPLAY_MAX + 4), 10),
        Some(&json!(REPLAY_MAX + 4))
    );
}
