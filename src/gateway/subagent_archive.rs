//! Archiving a child's session: its row leaves its agent's
//! `sessions.json` and its transcript moves to
//! `<sessions>/archive/<file>.jsonl`. A child spawned with
//! `cleanup: "delete"` is archived once its announce is queued; every
//! child, `archiveAfterMinutes` after it ended (the gateway's sweep, at
//! start and each minute).
//!
//! The row goes first: a crash between the two steps leaves a transcript
//! no row names, never a row naming a missing transcript. Nothing is
//! deleted; an archived transcript keeps its name (with a suffix when the
//! archive already holds one of that name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Shared;
use crate::app::App;
use crate::session::store::SessionEntry;
use crate::tasks::{Runtime, Task, TaskFilter};

/// The runs looked at by one sweep, newest first.
const SWEPT: usize = 5000;

/// Where a session's transcript goes when it is archived.
pub(crate) fn archived_path(transcript: &Path) -> PathBuf {
    let dir = transcript.parent().unwrap_or(Path::new("."));
    let name = transcript.file_name().unwrap_or_default();
    dir.join("archive").join(name)
}

/// Archives the session `key` of `agent`: its row removed, its
/// transcript moved. The transcript's new path, `None` when the store
/// has no such row (already archived). Blocking.
pub(crate) fn archive_session(
    app: &App,
    agent: Option<&str>,
    key: &str,
) -> anyhow::Result<Option<PathBuf>> {
    let app = app.for_agent(agent)?;
    let sessions = app.sessions(None);
    let now = app.host.now_ts();
    let (removed, _) = sessions.store().update(now, |map| map.remove(key))?;
    let Some(entry) = removed.as_ref().and_then(SessionEntry::from_value) else {
        return Ok(None);
    };
    let from = sessions.transcript_path(&entry);
    let mut to = archived_path(&from);
    let mut n = 1;
    while to.exists() {
        n += 1;
        to = archived_path(&from).with_extension(format!("{n}.jsonl"));
    }
    match crate::durable::move_file(&from, &to) {
        Ok(()) => Ok(Some(to)),
        // A session that never wrote its transcript has none to move.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "cannot move the transcript {} to {}",
            from.display(),
            to.display()
        ))),
    }
}

/// Archives the session of the child run `task` (`cleanup: "delete"`).
pub(crate) async fn archive_run(shared: &Arc<Shared>, task: &Task) {
    let app = shared.engine.app();
    let agent = task.agent_id.clone();
    let Some(key) = task.child_session_key.clone() else {
        return;
    };
    let archived = shared
        .engine
        .blocking(move || archive_session(&app, agent.as_deref(), &key))
        .await
        .and_then(|r| r);
    if let Err(err) = archived {
        tracing::warn!(task = %task.task_id, err = %format!("{err:#}"), "cannot archive a subagent's session");
    }
}

/// The ended runs whose sessions are due for the archive at `now_ms`.
pub(crate) fn due(tasks: &[Task], now_ms: i64, after_minutes: u32) -> Vec<&Task> {
    let after = i64::from(after_minutes) * 60_000;
    tasks
        .iter()
        .filter(|t| t.status.is_terminal() && t.child_session_key.is_some())
        .filter(|t| t.ended_at.is_some_and(|end| now_ms - end >= after))
        .collect()
}

/// Archives every child session that is due. Blocking; the sweep's.
pub(crate) fn sweep(shared: &Shared, now_ms: i64) {
    let app = shared.engine.app();
    let after = app
        .config
        .config
        .agents
        .defaults
        .subagents
        .archive_after_minutes;
    let filter = TaskFilter {
        status: None,
        runtime: Some(Runtime::Subagent),
    };
    let tasks = match shared.tasks.with(|l| l.list(filter, Some(SWEPT))) {
        Ok(tasks) => tasks,
        Err(err) => {
            tracing::warn!(%err, "cannot look for subagent sessions to archive");
            return;
        }
    };
    // Most are archived already: one look at each agent's (cached) store.
    let mut stores: std::collections::HashMap<
        Option<String>,
        Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    > = std::collections::HashMap::new();
    for task in due(&tasks, now_ms, after) {
        let Some(key) = task.child_session_key.as_deref() else {
            continue;
        };
        let store = stores.entry(task.agent_id.clone()).or_insert_with(|| {
            let agent_app = app.for_agent(task.agent_id.as_deref()).ok()?;
            Some(agent_app.sessions(None).store().load().0)
        });
        if !store.as_ref().is_some_and(|map| map.contains_key(key)) {
            continue;
        }
        match archive_session(&app, task.agent_id.as_deref(), key) {
            Ok(Some(to)) => {
                tracing::info!(session = %key, to = %to.display(), "subagent session archived")
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(session = %key, err = %format!("{err:#}"), "cannot archive a subagent's session")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ended_runs_older_than_the_limit_are_due() {
        let mut l = crate::tasks::Ledger::open_in_memory().unwrap();
        let mut make = |child: &str, status: crate::tasks::Status, ended: Option<i64>| {
            let mut new = crate::tasks::NewTask::new(Runtime::Subagent, child, "t");
            new.child_session_key = Some(child.to_string());
            let mut task = l.create(new, 0).unwrap();
            task.status = status;
            task.ended_at = ended;
            task
        };
        use crate::tasks::Status;
        let now = 10 * 3_600_000;
        let tasks = vec![
            make("old", Status::Succeeded, Some(now - 61 * 60_000)),
            make("fresh", Status::Failed, Some(now - 59 * 60_000)),
            make("running", Status::Running, None),
            make("edge", Status::Cancelled, Some(now - 60 * 60_000)),
        ];
        let keys: Vec<_> = due(&tasks, now, 60)
            .iter()
            .map(|t| t.child_session_key.clone().unwrap())
            .collect();
        assert_eq!(keys, ["old", "edge"]);
        assert_eq!(due(&tasks, now, 0).len(), 3);
    }

    #[test]
    fn an_archived_transcript_keeps_its_name_under_archive() {
        assert_eq!(
            archived_path(Path::new("/s/agents/main/sessions/abc.jsonl")),
            Path::new("/s/agents/main/sessions/archive/abc.jsonl")
        );
    }
}
