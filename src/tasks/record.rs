//! The task record as stored and printed, and what a caller gives to
//! create, finish or lease one.

use serde::{Deserialize, Serialize};

use super::vocab::{
    DeliveryStatus, NotifyPolicy, Runtime, ScopeKind, Status, TerminalOutcome, TerminalStatus,
};

/// How long a terminal task is kept before the sweeper prunes it.
pub(crate) const RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// One task as the ledger holds it. JSON names are OpenClaw's task record
/// plus almanac's `generation`, `leaseUntil`, `laneKey`, `laneSeq`,
/// `cancelRequestedAt` and `request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub task_id: String,
    pub runtime: Runtime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Empty for system scope.
    pub requester_session_key: String,
    pub owner_key: String,
    pub scope_kind: ScopeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_session_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_flow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub task: String,
    pub status: Status,
    pub delivery_status: DeliveryStatus,
    pub notify_policy: NotifyPolicy,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_event_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_outcome: Option<TerminalOutcome>,
    /// The gateway start generation that owns (or last owned) it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_requested_at: Option<i64>,
    /// What is needed to run it again; opaque to the ledger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
}

impl Task {
    /// The first eight characters of the id, as lists show it.
    pub(crate) fn short_id(&self) -> &str {
        short_id(&self.task_id)
    }

    /// When it ended, else its last event, else when it was created: the
    /// time its retention counts from.
    pub(crate) fn terminal_at(&self) -> i64 {
        self.ended_at
            .or(self.last_event_at)
            .unwrap_or(self.created_at)
    }
}

/// The first eight characters of a task id (whole ids are uuids, ASCII).
pub(crate) fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// A running task's owner and how long it holds the task without renewing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The gateway start generation running it.
    pub generation: i64,
    /// Epoch ms until which the task counts as alive without a renewal.
    pub until_ms: i64,
}

/// A task to record. [`NewTask::new`] fills in the reference defaults for
/// the runtime; set the other fields as needed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub runtime: Runtime,
    pub task_kind: Option<String>,
    pub source_id: Option<String>,
    pub run_id: Option<String>,
    pub requester_session_key: String,
    pub owner_key: String,
    pub scope_kind: ScopeKind,
    pub child_session_key: Option<String>,
    pub parent_flow_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub agent_id: Option<String>,
    pub label: Option<String>,
    pub task: String,
    pub delivery_status: DeliveryStatus,
    pub notify_policy: NotifyPolicy,
    /// The session lane it runs in; its place in the lane is allocated
    /// when it is recorded.
    pub lane_key: Option<String>,
    pub request: Option<serde_json::Value>,
    /// `None`: created queued. `Some`: created running under this lease
    /// (cron runs are recorded as they start).
    pub running: Option<Lease>,
}

impl NewTask {
    /// A queued task with the defaults OpenClaw gives the runtime: cron
    /// runs are system-scoped, silent and have nothing to deliver; CLI runs
    /// are silent; spawned runs report when done.
    pub fn new(runtime: Runtime, owner_key: impl Into<String>, task: impl Into<String>) -> NewTask {
        let notify_policy = match runtime {
            Runtime::Cron | Runtime::Cli => NotifyPolicy::Silent,
            Runtime::Subagent | Runtime::Acp => NotifyPolicy::DoneOnly,
        };
        NewTask {
            runtime,
            task_kind: None,
            source_id: None,
            run_id: None,
            requester_session_key: String::new(),
            owner_key: owner_key.into(),
            scope_kind: if runtime == Runtime::Cron {
                ScopeKind::System
            } else {
                ScopeKind::Session
            },
            child_session_key: None,
            parent_flow_id: None,
            parent_task_id: None,
            agent_id: None,
            label: None,
            task: task.into(),
            delivery_status: if notify_policy == NotifyPolicy::Silent {
                DeliveryStatus::NotApplicable
            } else {
                DeliveryStatus::Pending
            },
            notify_policy,
            lane_key: None,
            request: None,
            running: None,
        }
    }
}

/// How a task ended, as its owner reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminal {
    pub status: TerminalStatus,
    pub error: Option<String>,
    pub terminal_summary: Option<String>,
    pub terminal_outcome: Option<TerminalOutcome>,
}

impl Terminal {
    /// An ending with nothing but its status.
    pub fn status(status: TerminalStatus) -> Terminal {
        Terminal {
            status,
            error: None,
            terminal_summary: None,
            terminal_outcome: None,
        }
    }
}

/// The stored columns, in the order [`from_row`] reads them.
pub(crate) const COLUMNS: &str = "task_id, runtime, task_kind, source_id, run_id, \
    requester_session_key, owner_key, scope_kind, child_session_key, parent_flow_id, \
    parent_task_id, agent_id, label, task, status, delivery_status, notify_policy, \
    created_at, started_at, ended_at, last_event_at, cleanup_after, error, \
    progress_summary, terminal_summary, terminal_outcome, generation, lease_until, \
    lane_key, lane_seq, cancel_requested_at, request";

/// A row selected with [`COLUMNS`].
pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    let request: Option<String> = row.get(31)?;
    Ok(Task {
        task_id: row.get(0)?,
        runtime: row.get(1)?,
        task_kind: row.get(2)?,
        source_id: row.get(3)?,
        run_id: row.get(4)?,
        requester_session_key: row.get(5)?,
        owner_key: row.get(6)?,
        scope_kind: row.get(7)?,
        child_session_key: row.get(8)?,
        parent_flow_id: row.get(9)?,
        parent_task_id: row.get(10)?,
        agent_id: row.get(11)?,
        label: row.get(12)?,
        task: row.get(13)?,
        status: row.get(14)?,
        delivery_status: row.get(15)?,
        notify_policy: row.get(16)?,
        created_at: row.get(17)?,
        started_at: row.get(18)?,
        ended_at: row.get(19)?,
        last_event_at: row.get(20)?,
        cleanup_after: row.get(21)?,
        error: row.get(22)?,
        progress_summary: row.get(23)?,
        terminal_summary: row.get(24)?,
        terminal_outcome: row.get(25)?,
        generation: row.get(26)?,
        lease_until: row.get(27)?,
        lane_key: row.get(28)?,
        lane_seq: row.get(29)?,
        cancel_requested_at: row.get(30)?,
        // The column only takes valid JSON; text that still fails to parse
        // is shown as it is rather than hiding the task.
        request: request
            .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))),
    })
}
