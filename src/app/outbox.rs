//! The `outbox` commands: the results of unattended turns as the outbox
//! file holds them (`<state dir>/outbox/outbox.jsonl`). Reading only:
//! nothing is created, not even the folder; torn or corrupt lines are
//! skipped and counted.

use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::App;
use crate::delivery::outbox::{self, Entry, Reader};

/// How long `outbox tail --follow` waits between looks at the file.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// `outbox list --json`: `{"entries": [...]}`, oldest first.
#[derive(Debug, Default, Serialize)]
pub(crate) struct OutboxList {
    pub entries: Vec<Entry>,
    /// Lines that could not be read (skipped).
    #[serde(skip)]
    pub unreadable: usize,
}

/// The newest `limit` entries, oldest first.
pub(crate) fn list(app: &App, limit: usize) -> anyhow::Result<OutboxList> {
    let dir = app.paths.outbox_dir();
    let (mut entries, unreadable) = outbox::read_all(&dir)
        .with_context(|| format!("cannot read the outbox in {}", dir.display()))?;
    keep_recent(app, &mut entries);
    let skip = entries.len().saturating_sub(limit);
    entries.drain(..skip);
    Ok(OutboxList {
        entries,
        unreadable,
    })
}

/// Drops entries past the outbox's retention: the gateway prunes them,
/// and without one running they are still not shown.
fn keep_recent(app: &App, entries: &mut Vec<Entry>) {
    let cutoff = app.host.now_ms().saturating_sub(outbox::RETENTION_MS);
    entries.retain(|e| e.ts >= cutoff);
}

/// Follows the outbox after what [`tail`] showed.
#[derive(Debug)]
pub(crate) struct Follower {
    reader: Reader,
}

/// The newest `last` entries, and a follower for what comes after them.
pub(crate) fn tail(app: &App, last: usize) -> anyhow::Result<(OutboxList, Follower)> {
    let path = app.paths.outbox_dir().join(outbox::FILE_NAME);
    let mut reader = Reader::new(path.clone(), None);
    let polled = reader
        .poll()
        .with_context(|| format!("cannot read the outbox {}", path.display()))?;
    let mut entries = polled.entries;
    keep_recent(app, &mut entries);
    let skip = entries.len().saturating_sub(last);
    entries.drain(..skip);
    Ok((
        OutboxList {
            entries,
            unreadable: polled.unreadable,
        },
        Follower { reader },
    ))
}

impl Follower {
    /// Waits for new entries (looking at the file every [`FOLLOW_EVERY`])
    /// and returns them; entries written by any process, across pruning.
    pub(crate) fn next_batch(&mut self) -> anyhow::Result<OutboxList> {
        loop {
            std::thread::sleep(FOLLOW_EVERY);
            let polled = self.reader.poll().context("cannot read the outbox")?;
            if !polled.entries.is_empty() || polled.unreadable > 0 {
                return Ok(OutboxList {
                    entries: polled.entries,
                    unreadable: polled.unreadable,
                });
            }
        }
    }
}
