//! What the heartbeat runner keeps between runs and processes, in
//! `<state dir>/heartbeat/`: each run's event (`runs.jsonl`, one JSON
//! line per run, newest last, OpenClaw's event shape) and the switch
//! (`state.json`, `{"enabled": bool}`; missing means enabled).
//!
//! Invariants:
//! * An event is appended under a lock and synced before the run that
//!   made it is reported, so `system heartbeat last` works without a
//!   gateway and after a crash.
//! * The log stays small: past [`KEEP_BYTES`] it is rewritten (atomic
//!   replace, under the same lock) keeping the newest [`KEEP_EVENTS`].
//! * Reading writes nothing; a torn or unreadable line is skipped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::durable::{self, PRIVATE_FILE_MODE};

/// Size past which the log is cut down.
const KEEP_BYTES: u64 = 256 * 1024;
/// Events kept when it is.
const KEEP_EVENTS: usize = 500;
/// Bytes read from the end of the log to find the last event.
const TAIL_BYTES: u64 = 64 * 1024;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RunStatus {
    Sent,
    OkEmpty,
    OkToken,
    Skipped,
    Failed,
}

/// One run's event (OpenClaw's heartbeat event shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunEvent {
    /// Epoch ms.
    pub ts: i64,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The start of what the model answered (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The outcome was not shown (an acknowledgement with `showOk` off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent: Option<bool>,
    /// `ok`, `alert` or `error`, when the channel uses indicators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indicator_type: Option<String>,
}

impl RunEvent {
    pub(crate) fn skipped(ts: i64, reason: &str) -> RunEvent {
        RunEvent::ended(ts, RunStatus::Skipped, reason)
    }

    /// An event with its status and reason only.
    pub(crate) fn ended(ts: i64, status: RunStatus, reason: &str) -> RunEvent {
        RunEvent {
            ts,
            status,
            reason: Some(reason.to_string()),
            preview: None,
            duration_ms: None,
            to: None,
            channel: None,
            silent: None,
            indicator_type: None,
        }
    }
}

/// Longest preview kept in an event.
pub(crate) const PREVIEW_CHARS: usize = 200;

/// The first [`PREVIEW_CHARS`] characters of `text`.
pub(crate) fn preview(text: &str) -> String {
    text.chars().take(PREVIEW_CHARS).collect()
}

/// The runner's files.
#[derive(Debug, Clone)]
pub(crate) struct RunRecord {
    dir: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SwitchFile {
    enabled: Option<bool>,
}

impl RunRecord {
    pub(crate) fn new(dir: &Path) -> RunRecord {
        RunRecord {
            dir: dir.to_path_buf(),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("runs.jsonl")
    }

    fn lock_path(&self) -> PathBuf {
        durable::lock_path_for(&self.log_path())
    }

    fn switch_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// Appends `event` (synced), cutting the log down when it grew large.
    pub(crate) fn append(&self, event: &RunEvent) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).expect("events serialise");
        line.push(b'\n');
        durable::create_private_dir_all(&self.dir)?;
        durable::with_file_lock(&self.lock_path(), || -> std::io::Result<()> {
            durable::locked_append(&self.log_path(), &line, PRIVATE_FILE_MODE, true)?;
            let size = std::fs::metadata(self.log_path())?.len();
            if size > KEEP_BYTES {
                let bytes = std::fs::read(self.log_path())?;
                let lines: Vec<&[u8]> = bytes
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .collect();
                let keep = &lines[lines.len().saturating_sub(KEEP_EVENTS)..];
                let mut out = keep.join(&b'\n');
                out.push(b'\n');
                durable::atomic_replace(&self.log_path(), &out, PRIVATE_FILE_MODE)?;
            }
            Ok(())
        })?
    }

    /// The newest event, reading only the end of the log.
    pub(crate) fn last(&self) -> std::io::Result<Option<RunEvent>> {
        Ok(self.newest(1)?.pop())
    }

    /// The newest `n` events (at most what the last [`TAIL_BYTES`] hold),
    /// oldest first.
    pub(crate) fn newest(&self, n: usize) -> std::io::Result<Vec<RunEvent>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = match std::fs::File::open(self.log_path()) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let start = len.saturating_sub(TAIL_BYTES);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        if start > 0 && !lines.is_empty() {
            // The first piece may be the end of a line cut by the seek.
            lines.remove(0);
        }
        let mut out: Vec<RunEvent> = lines
            .iter()
            .rev()
            .filter_map(|l| serde_json::from_slice(l).ok())
            .take(n)
            .collect();
        out.reverse();
        Ok(out)
    }

    /// Whether heartbeats are on (`system heartbeat enable|disable`); a
    /// missing or unreadable switch means on.
    pub(crate) fn enabled(&self) -> bool {
        durable::read_if_exists(&self.switch_path())
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<SwitchFile>(&b).ok())
            .and_then(|s| s.enabled)
            .unwrap_or(true)
    }

    /// Turns heartbeats on or off; returns whether that changed anything.
    pub(crate) fn set_enabled(&self, enabled: bool) -> std::io::Result<bool> {
        let was = self.enabled();
        if was == enabled && self.switch_path().exists() {
            return Ok(false);
        }
        durable::create_private_dir_all(&self.dir)?;
        let mut bytes = serde_json::to_vec_pretty(&SwitchFile {
            enabled: Some(enabled),
        })
        .expect("the switch serialises");
        bytes.push(b'\n');
        durable::atomic_replace(&self.switch_path(), &bytes, PRIVATE_FILE_MODE)?;
        Ok(was != enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(ts: i64, status: RunStatus) -> RunEvent {
        RunEvent {
            status,
            ..RunEvent::skipped(ts, "quiet-hours")
        }
    }

    #[test]
    fn events_round_trip_in_the_reference_shape() {
        let dir = tempfile::tempdir().unwrap();
        let record = RunRecord::new(dir.path());
        assert_eq!(record.last().unwrap(), None);
        record.append(&event(1, RunStatus::Skipped)).unwrap();
        let sent = RunEvent {
            ts: 2,
            status: RunStatus::Sent,
            reason: None,
            preview: Some("The build failed".into()),
            duration_ms: Some(12),
            to: Some("outbox".into()),
            channel: Some("outbox".into()),
            silent: None,
            indicator_type: Some("alert".into()),
        };
        record.append(&sent).unwrap();
        assert_eq!(record.last().unwrap(), Some(sent.clone()));
        let line = std::fs::read_to_string(dir.path().join("runs.jsonl")).unwrap();
        let last: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
        assert_eq!(last["status"], "sent");
        assert_eq!(last["durationMs"], 12);
        assert_eq!(last["indicatorType"], "alert");
        let first: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(first["status"], "skipped");
        assert_eq!(first["reason"], "quiet-hours");
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_log_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let record = RunRecord::new(dir.path());
        for ts in 0..2_000 {
            record.append(&event(ts, RunStatus::OkToken)).unwrap();
        }
        assert!(
            std::fs::metadata(dir.path().join("runs.jsonl"))
                .unwrap()
                .len()
                <= KEEP_BYTES
        );
        assert_eq!(record.last().unwrap().unwrap().ts, 1_999);
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("runs.jsonl"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"ts\": 5, \"sta"))
            .unwrap();
        assert_eq!(record.last().unwrap().unwrap().ts, 1_999);
        // The next event starts on a line of its own.
        record.append(&event(2_000, RunStatus::OkEmpty)).unwrap();
        assert_eq!(record.last().unwrap().unwrap().ts, 2_000);
    }

    #[test]
    fn the_switch_is_on_until_turned_off_and_reading_it_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let record = RunRecord::new(&dir.path().join("heartbeat"));
        assert!(record.enabled());
        assert!(!dir.path().join("heartbeat").exists());
        assert!(record.set_enabled(false).unwrap());
        assert!(!record.enabled());
        assert!(!record.set_enabled(false).unwrap());
        assert!(record.set_enabled(true).unwrap());
        assert!(record.enabled());
    }
}
