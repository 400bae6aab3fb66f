//! The `tasks` commands over the task ledger in the state store: list,
//! show, audit and maintenance. Reading creates and migrates nothing (a
//! state store that does not exist yet is an empty ledger); maintenance
//! writes only with `apply`, and only when its preview found something to
//! do. The command line runs no tasks: its maintenance goes by the
//! leases, and never declares lost a task of the gateway that runs now
//! (it owns the latest generation and renews its leases even when a
//! suspended machine let them lapse).
//!
//! While a gateway runs, list and show ask it: it has recorded every run
//! it acknowledged before it answers, where the ledger may lag the
//! acknowledgement by a batch of its intake.

use anyhow::Context;
use serde::Serialize;

use super::App;
use crate::tasks::{Audit, AuditCode, Ledger, Maintenance, Severity, Task, TaskError, TaskFilter};

/// `tasks list --json`: `{"tasks": [...]}`.
#[derive(Debug, Serialize)]
pub(crate) struct TaskList {
    pub tasks: Vec<Task>,
}

impl App {
    /// "Now" (`--now` when given) in epoch milliseconds, the ledger's time.
    pub(crate) fn now_ms(&self) -> i64 {
        self.host.now_ms()
    }

    /// An epoch-ms time of the ledger as the user reads it: in
    /// `agents.defaults.userTimezone`, to the second.
    pub(crate) fn local_time(&self, ms: i64) -> String {
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(t) => t
                .to_zoned_datetime(self.user_time_zone())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
                .to_string(),
            Err(_) => ms.to_string(),
        }
    }

    pub(crate) fn ledger_for_reading(&self) -> anyhow::Result<Ledger> {
        let path = self.paths.state_store();
        Ledger::open_for_reading(&path)
            .with_context(|| format!("cannot read the task ledger in {}", path.display()))
    }
}

/// Tasks matching `filter`, newest first.
pub(crate) fn list(
    app: &App,
    filter: TaskFilter,
    limit: Option<usize>,
) -> anyhow::Result<TaskList> {
    if let Some(client) = app.gateway_client()? {
        let mut query = Vec::new();
        if let Some(status) = filter.status {
            query.push(format!("status={status}"));
        }
        if let Some(runtime) = filter.runtime {
            query.push(format!("runtime={runtime}"));
        }
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        let path = if query.is_empty() {
            "/v1/tasks".to_string()
        } else {
            format!("/v1/tasks?{}", query.join("&"))
        };
        let answer = client.get(&path)?;
        return Ok(TaskList {
            tasks: serde_json::from_value(answer["tasks"].clone())
                .context("the gateway's task list")?,
        });
    }
    Ok(TaskList {
        tasks: app.ledger_for_reading()?.list(filter, limit)?,
    })
}

/// One task by id, id prefix, run id or session key; [`TaskError::NotFound`]
/// when none matches.
pub(crate) fn show(app: &App, lookup: &str) -> anyhow::Result<Task> {
    if let Some(client) = app.gateway_client()? {
        let segment = crate::gateway_client::client::path_segment(lookup);
        let answer = client.get(&format!("/v1/tasks/{segment}"))?;
        return serde_json::from_value(answer["task"].clone()).context("the gateway's task");
    }
    match app.ledger_for_reading()?.get(lookup)? {
        Some(task) => Ok(task),
        None => Err(TaskError::NotFound(lookup.to_string()).into()),
    }
}

/// The audit now, only `severity` and `code` when given, at most `limit`
/// findings listed (the summary counts them all).
pub(crate) fn audit(
    app: &App,
    severity: Option<Severity>,
    code: Option<AuditCode>,
    limit: Option<usize>,
) -> anyhow::Result<Audit> {
    let audit = app.ledger_for_reading()?.audit(app.now_ms())?;
    Ok(audit.filtered(severity, code, limit))
}

/// The sweeper step now: previewed, or performed with `apply`.
pub(crate) fn maintenance(app: &App, apply: bool) -> anyhow::Result<Maintenance> {
    let now = app.now_ms();
    let mut reader = app.ledger_for_reading()?;
    let owner_alive = crate::gateway_client::discovery::lock_held(&app.paths);
    let current = if owner_alive {
        reader.latest_generation()?
    } else {
        None
    };
    let preview = reader.maintenance(now, current, false)?;
    let nothing_to_do = preview.reconciled + preview.cleanup_stamped + preview.pruned == 0;
    if !apply || nothing_to_do {
        return Ok(Maintenance {
            applied: apply,
            ..preview
        });
    }
    let path = app.paths.state_store();
    let mut ledger = Ledger::open(&path)
        .with_context(|| format!("cannot open the task ledger in {}", path.display()))?;
    Ok(ledger.maintenance(now, current, true)?)
}
