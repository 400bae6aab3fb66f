//! The background task ledger: one canonical record per task the gateway
//! runs (agent turns, cron runs, spawned runs), in the `tasks` table of the
//! state store `<state>/almanac.sqlite`, in OpenClaw's record shape plus
//! what a restartable gateway needs (owner generation, lease, lane order,
//! the request to run it again).
//!
//! Library surface, used by the gateway:
//!
//! * [`Ledger::open`] / [`Ledger::open_in_memory`]; [`Ledger::open_for_reading`]
//!   for commands that must create and change nothing;
//! * [`Ledger::next_generation`]: the gateway's start generation, allocated
//!   once per start (a counter in `meta`, incremented atomically);
//! * [`Ledger::recover_at_start`] when a gateway starts; [`Ledger::create`],
//!   [`Ledger::start`], [`Ledger::set_delivery`], [`Ledger::finish`],
//!   [`Ledger::cancel`] over a task's life; [`Ledger::renew_leases`] and
//!   [`Ledger::sweep`] every sweeper tick (60 s);
//! * [`Ledger::list`], [`Ledger::get`], [`Ledger::audit`], [`Ledger::counts`]
//!   and [`Ledger::maintenance`] for the `tasks` commands and status lines.
//!
//! Invariants:
//! * Canonical: the ledger lives only in the state store, written with
//!   `synchronous = FULL` (every commit is on disk before it returns), each
//!   read-modify-write in one `IMMEDIATE` transaction.
//! * Time is a parameter: every operation takes `now_ms` (epoch ms) and this
//!   module never reads a clock. A record's stamps never go backwards: an
//!   event is stamped no earlier than the record's previous stamps, so a
//!   clock step cannot make a record inconsistent.
//! * `queued → running → succeeded | failed | timed_out | cancelled | lost`
//!   (a queued task may also end at once); terminal states are sticky:
//!   finishing, cancelling or starting a finished task changes nothing and
//!   says so. A finished task gets `endedAt` and `cleanupAfter = endedAt +
//!   7 days`; the sweeper prunes it once that has passed.
//! * A task is declared lost only when its lease has expired and its owner
//!   is gone: the sweeper never touches a task whose lease is valid or whose
//!   owner is the live generation. A new gateway's start recovery takes
//!   over every task still running under an earlier generation (the gateway
//!   runs as one instance): re-queued when its kind is retryable, else lost.
//! * Queued tasks keep their lane and place in it (`laneKey`, `laneSeq`)
//!   across restarts and re-queueing.
//! * [`Ledger::maintenance`] previews exactly what it performs with
//!   `apply`: both run one selection, and `apply` performs it in the same
//!   transaction.

mod audit;
// Their types the integration tests use are re-exported by `crate::testing`.
pub(crate) mod record;
mod upkeep;
pub(crate) mod vocab;

#[cfg(test)]
mod tests;

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use crate::store::{Store, StoreError, StoreKind};

pub(crate) use audit::Audit;
pub(crate) use record::{NewTask, RETENTION_MS, Task, Terminal, short_id};
pub(crate) use upkeep::Maintenance;
pub(crate) use vocab::{
    AuditCode, DeliveryStatus, Runtime, Severity, Status, TerminalStatus, UnknownValue,
};

use record::{COLUMNS, from_row};

/// The state-store schema version that holds the `tasks` table.
const TASKS_SCHEMA_VERSION: u32 = 2;

/// The `meta` key of the last allocated gateway generation.
const GENERATION_KEY: &str = "gateway_generation";

/// The SQL for "now, but never before this record's earlier stamps"
/// (parameter `?1` is `now_ms`).
const STAMP: &str = "MAX(?1, created_at, COALESCE(started_at, created_at), \
     COALESCE(last_event_at, created_at))";

/// Errors callers branch on.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("no task `{0}` (looked up by task id, run id, session key and id prefix)")]
    NotFound(String),
    #[error("`{0}` is the start of more than one task id; give more of it")]
    Ambiguous(String),
    /// The operation does not apply to a task in this status (starting a
    /// task that is not queued).
    #[error("task {id} is {status}, so it cannot {action}")]
    WrongStatus {
        id: String,
        status: Status,
        action: &'static str,
    },
    #[error("invalid task: {0}")]
    Invalid(String),
    #[error("the task ledger was opened for reading only")]
    ReadOnly,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the task ledger could not be read or written")]
    Sql(#[from] rusqlite::Error),
}

/// What [`Ledger::finish`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum FinishOutcome {
    /// The task ended now.
    Finished(Task),
    /// It had already ended; nothing changed.
    AlreadyTerminal(Task),
}

/// What [`Ledger::cancel`] did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CancelOutcome {
    /// It was queued: cancelled at once.
    Cancelled(Task),
    /// It is running: the cancel is recorded (`cancelRequestedAt`, kept from
    /// the first request) and its owner stops it, then finishes it.
    Requested(Task),
    /// It had already ended; nothing changed.
    AlreadyTerminal(Task),
}

impl CancelOutcome {
    pub(crate) fn task(&self) -> &Task {
        match self {
            CancelOutcome::Cancelled(t)
            | CancelOutcome::Requested(t)
            | CancelOutcome::AlreadyTerminal(t) => t,
        }
    }
}

/// Which tasks [`Ledger::list`] returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskFilter {
    pub status: Option<Status>,
    pub runtime: Option<Runtime>,
}

/// Numbers for a status line: `N queued · M running · K issues`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Counts {
    pub queued: usize,
    pub running: usize,
    /// Audit findings (warnings and errors).
    pub issues: usize,
}

/// Prepared statements the gateway's ledger connection keeps.
const STATEMENTS_KEPT: usize = 64;

/// The task ledger over one connection to the state store.
pub struct Ledger {
    conn: Connection,
    writable: bool,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.conn.path())
            .field("writable", &self.writable)
            .finish()
    }
}

impl Ledger {
    /// Opens the state store at `path` (creating and migrating it as
    /// needed) for reading and writing.
    pub fn open(path: &Path) -> Result<Ledger, TaskError> {
        let store = Store::open(path, StoreKind::State)?;
        // Every statement of a task's life stays prepared (the default
        // cache of 16 is smaller than the ledger's statements).
        store
            .conn
            .set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        Ok(Ledger {
            conn: store.conn,
            writable: true,
        })
    }

    /// An empty ledger in memory, gone when dropped.
    pub(crate) fn open_in_memory() -> Result<Ledger, TaskError> {
        let store = Store::open_in_memory(StoreKind::State)?;
        Ok(Ledger {
            conn: store.conn,
            writable: true,
        })
    }

    /// The ledger at `path` for reading only, creating and migrating
    /// nothing: a store that does not exist yet, or whose schema predates
    /// the ledger, reads as an empty ledger.
    pub(crate) fn open_for_reading(path: &Path) -> Result<Ledger, TaskError> {
        if let Some(conn) = Store::open_existing_read_only(path)?
            && Store::schema_version(&conn)? >= TASKS_SCHEMA_VERSION
        {
            return Ok(Ledger {
                conn,
                writable: false,
            });
        }
        let mut empty = Ledger::open_in_memory()?;
        empty.writable = false;
        Ok(empty)
    }

    fn writable(&self) -> Result<(), TaskError> {
        if self.writable {
            Ok(())
        } else {
            Err(TaskError::ReadOnly)
        }
    }

    /// A write transaction: the write lock is taken first, so what is read
    /// in it is what the writes apply to.
    fn write_tx(&mut self) -> Result<rusqlite::Transaction<'_>, TaskError> {
        self.writable()?;
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// Runs `f` in one write transaction, committed when it returns `Ok`:
    /// for a caller that records rows of its own in the state store with
    /// its tasks, all or nothing, for one sync.
    pub(crate) fn batch<T>(
        &mut self,
        f: impl FnOnce(&Batch<'_>) -> Result<T, TaskError>,
    ) -> Result<T, TaskError> {
        let tx = self.write_tx()?;
        let batch = Batch { tx };
        let value = f(&batch)?;
        batch.tx.commit()?;
        Ok(value)
    }

    /// Allocates the next gateway start generation (1, 2, …), durably.
    pub fn next_generation(&mut self) -> Result<i64, TaskError> {
        self.writable()?;
        let value: String = self.conn.query_row(
            "INSERT INTO meta (key, value) VALUES (?1, '1')
             ON CONFLICT (key) DO UPDATE
                 SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
             RETURNING value",
            [GENERATION_KEY],
            |r| r.get(0),
        )?;
        value
            .parse()
            .map_err(|_| TaskError::Invalid(format!("{GENERATION_KEY} is `{value}`")))
    }

    /// The generation of the latest gateway start, if one ever started.
    pub(crate) fn latest_generation(&self) -> Result<Option<i64>, TaskError> {
        let value: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [GENERATION_KEY],
                |r| r.get(0),
            )
            .optional()?;
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// Records a new task, queued or (with [`NewTask::running`]) running.
    /// Its id is a random uuid; with a lane key it takes the next place in
    /// that lane.
    pub fn create(&mut self, new: NewTask, now_ms: i64) -> Result<Task, TaskError> {
        let tx = self.write_tx()?;
        let id = insert_task(&tx, new, now_ms)?;
        let task = fetch(&tx, &id)?.ok_or_else(|| TaskError::NotFound(id.clone()))?;
        tx.commit()?;
        Ok(task)
    }

    /// Starts a queued task under `generation`'s lease. A task that is not
    /// queued (already running, cancelled before it started) is
    /// [`TaskError::WrongStatus`]: the caller must not run it.
    pub fn start(
        &mut self,
        id: &str,
        generation: i64,
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Task, TaskError> {
        check_lease(lease_until, now_ms)?;
        let tx = self.write_tx()?;
        let task = fetch(&tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        if task.status != Status::Queued {
            return Err(TaskError::WrongStatus {
                id: id.to_string(),
                status: task.status,
                action: "start",
            });
        }
        tx.prepare_cached(&format!(
            "UPDATE tasks SET status = 'running', started_at = {STAMP},
                     last_event_at = {STAMP}, generation = ?2, lease_until = ?3
                 WHERE task_id = ?4"
        ))?
        .execute(params![now_ms, generation, lease_until, id])?;
        let task = fetch(&tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        tx.commit()?;
        Ok(task)
    }

    /// Extends the lease of every task running under `generation` to
    /// `lease_until` (never shortening one); returns how many it renewed.
    pub(crate) fn renew_leases(
        &mut self,
        generation: i64,
        lease_until: i64,
        now_ms: i64,
    ) -> Result<usize, TaskError> {
        self.writable()?;
        check_lease(lease_until, now_ms)?;
        Ok(self
            .conn
            .prepare_cached(
                "UPDATE tasks SET lease_until = MAX(COALESCE(lease_until, ?2), ?2)
             WHERE status = 'running' AND generation = ?1",
            )?
            .execute(params![generation, lease_until])?)
    }

    /// Records whether the result reached its requester. Allowed in any
    /// status: delivery follows the end of a task.
    pub fn set_delivery(
        &mut self,
        id: &str,
        delivery: DeliveryStatus,
        now_ms: i64,
    ) -> Result<Task, TaskError> {
        let tx = self.write_tx()?;
        let changed = tx
            .prepare_cached(&format!(
                "UPDATE tasks SET delivery_status = ?2, last_event_at = {STAMP}
                 WHERE task_id = ?3"
            ))?
            .execute(params![now_ms, delivery, id])?;
        if changed == 0 {
            return Err(TaskError::NotFound(id.to_string()));
        }
        let task = fetch(&tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        tx.commit()?;
        Ok(task)
    }

    /// Ends a queued or running task: `endedAt` and `cleanupAfter` are
    /// stamped, the lease released. A task that already ended is left as
    /// it is ([`FinishOutcome::AlreadyTerminal`]).
    pub fn finish(
        &mut self,
        id: &str,
        end: Terminal,
        now_ms: i64,
    ) -> Result<FinishOutcome, TaskError> {
        let tx = self.write_tx()?;
        let outcome = finish_task(&tx, id, end, now_ms)?;
        tx.commit()?;
        Ok(outcome)
    }

    /// Cancels a task: a queued one at once; for a running one the request
    /// is recorded and its owner stops it; a finished one is left as it is.
    pub(crate) fn cancel(&mut self, id: &str, now_ms: i64) -> Result<CancelOutcome, TaskError> {
        let tx = self.write_tx()?;
        let task = fetch(&tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        let outcome: fn(Task) -> CancelOutcome = match task.status {
            Status::Queued => {
                tx.prepare_cached(&format!(
                    "UPDATE tasks SET status = 'cancelled', cancel_requested_at = {STAMP},
                             ended_at = {STAMP}, last_event_at = {STAMP},
                             cleanup_after = {STAMP} + ?2
                         WHERE task_id = ?3"
                ))?
                .execute(params![now_ms, RETENTION_MS, id])?;
                CancelOutcome::Cancelled
            }
            Status::Running => {
                tx.prepare_cached(&format!(
                    "UPDATE tasks SET cancel_requested_at = {STAMP}, last_event_at = {STAMP}
                         WHERE task_id = ?2 AND cancel_requested_at IS NULL"
                ))?
                .execute(params![now_ms, id])?;
                CancelOutcome::Requested
            }
            _ => return Ok(CancelOutcome::AlreadyTerminal(task)),
        };
        let task = fetch(&tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        tx.commit()?;
        Ok(outcome(task))
    }

    /// Tasks matching `filter`, newest first, at most `limit`.
    pub(crate) fn list(
        &self,
        filter: TaskFilter,
        limit: Option<usize>,
    ) -> Result<Vec<Task>, TaskError> {
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        self.select(
            "WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR runtime = ?2)
             ORDER BY created_at DESC, rowid DESC LIMIT ?3",
            params![filter.status, filter.runtime, limit],
        )
    }

    /// Subagent runs queued or running that `session` asked for or runs
    /// in (a spawn's family check): found by the session indexes, not by
    /// reading every live run.
    pub(crate) fn live_subagents_around(&self, session: &str) -> Result<Vec<Task>, TaskError> {
        self.select(
            "WHERE (requester_session_key = ?1 OR child_session_key = ?1)
               AND runtime = ?2 AND status IN (?3, ?4)",
            params![session, Runtime::Subagent, Status::Queued, Status::Running],
        )
    }

    /// One task by task id, else the most recent by run id, else the most
    /// recent whose requester or child session is `lookup`, else the one
    /// task whose id starts with `lookup` (at least 4 characters; more than
    /// one is [`TaskError::Ambiguous`]).
    pub(crate) fn get(&self, lookup: &str) -> Result<Option<Task>, TaskError> {
        let lookup = lookup.trim();
        if lookup.is_empty() {
            return Ok(None);
        }
        for clause in [
            "WHERE task_id = ?1",
            "WHERE run_id = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1",
            "WHERE requester_session_key = ?1 OR child_session_key = ?1
             ORDER BY created_at DESC, rowid DESC LIMIT 1",
        ] {
            if let Some(task) = self.select(clause, [lookup])?.pop() {
                return Ok(Some(task));
            }
        }
        if lookup.chars().count() < 4 {
            return Ok(None);
        }
        let mut matches = self.select(
            "WHERE substr(task_id, 1, length(?1)) = ?1 LIMIT 2",
            [lookup],
        )?;
        match matches.len() {
            0 | 1 => Ok(matches.pop()),
            _ => Err(TaskError::Ambiguous(lookup.to_string())),
        }
    }

    /// How many tasks are queued and running, and how many audit findings
    /// there are at `now_ms`.
    pub(crate) fn counts(&self, now_ms: i64) -> Result<Counts, TaskError> {
        let (queued, running): (i64, i64) = self.conn.query_row(
            "SELECT COUNT(*) FILTER (WHERE status = 'queued'),
                    COUNT(*) FILTER (WHERE status = 'running')
             FROM tasks WHERE status IN ('queued', 'running')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Counts {
            queued: queued as usize,
            running: running as usize,
            issues: self.audit(now_ms)?.summary.total,
        })
    }

    /// Tasks selected by a `WHERE … ORDER BY …` clause.
    fn select(&self, clause: &str, params: impl rusqlite::Params) -> Result<Vec<Task>, TaskError> {
        select(&self.conn, clause, params)
    }
}

/// An open write transaction of the ledger ([`Ledger::batch`]).
pub(crate) struct Batch<'a> {
    tx: rusqlite::Transaction<'a>,
}

impl Batch<'_> {
    /// [`Ledger::create`] inside the batch; returns the task id.
    pub(crate) fn create(&self, new: NewTask, now_ms: i64) -> Result<String, TaskError> {
        insert_task(&self.tx, new, now_ms)
    }

    /// [`Ledger::finish`] inside the batch.
    pub(crate) fn finish(
        &self,
        id: &str,
        end: Terminal,
        now_ms: i64,
    ) -> Result<FinishOutcome, TaskError> {
        finish_task(&self.tx, id, end, now_ms)
    }

    /// Records how the delivery of task `id`'s result ended, unless it
    /// moved on from `pending` already (the deliverer told it first).
    pub(crate) fn settle_delivery(
        &self,
        id: &str,
        delivery: DeliveryStatus,
        now_ms: i64,
    ) -> Result<(), TaskError> {
        self.tx
            .prepare_cached(&format!(
                "UPDATE tasks SET delivery_status = ?2, last_event_at = {STAMP}
                 WHERE task_id = ?3 AND delivery_status = 'pending'"
            ))?
            .execute(params![now_ms, delivery, id])?;
        Ok(())
    }

    /// The transaction, for the caller's own rows.
    pub(crate) fn connection(&self) -> &Connection {
        &self.tx
    }
}

/// Inserts a new task in `tx` (the checks of [`Ledger::create`]); returns
/// its id.
fn insert_task(tx: &Connection, new: NewTask, now_ms: i64) -> Result<String, TaskError> {
    if new.task.trim().is_empty() {
        return Err(TaskError::Invalid("the task text is empty".into()));
    }
    if new.owner_key.trim().is_empty() {
        return Err(TaskError::Invalid("the owner key is empty".into()));
    }
    if let Some(lease) = new.running {
        check_lease(lease.until_ms, now_ms)?;
    }
    let request = new
        .request
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| TaskError::Invalid(format!("the request is not JSON: {e}")))?;
    let id = uuid::Uuid::new_v4().to_string();
    let lane_seq: Option<i64> = match &new.lane_key {
        Some(lane) => Some(tx.query_row(
            "SELECT COALESCE(MAX(lane_seq), 0) + 1 FROM tasks WHERE lane_key = ?1",
            [lane],
            |r| r.get(0),
        )?),
        None => None,
    };
    let (status, started_at) = match new.running {
        Some(_) => (Status::Running, Some(now_ms)),
        None => (Status::Queued, None),
    };
    tx.prepare_cached(&format!(
        "INSERT INTO tasks ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,
             ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, NULL, ?18, NULL, NULL, NULL, NULL,
             NULL, ?20, ?21, ?22, ?23, NULL, ?24)"
    ))?
    .execute(params![
        id,
        new.runtime,
        new.task_kind,
        new.source_id,
        new.run_id,
        new.requester_session_key,
        new.owner_key,
        new.scope_kind,
        new.child_session_key,
        new.parent_flow_id,
        new.parent_task_id,
        new.agent_id,
        new.label,
        new.task,
        status,
        new.delivery_status,
        new.notify_policy,
        now_ms,
        started_at,
        new.running.map(|l| l.generation),
        new.running.map(|l| l.until_ms),
        new.lane_key,
        lane_seq,
        request,
    ])?;
    Ok(id)
}

/// Ends task `id` in `tx` (see [`Ledger::finish`]).
fn finish_task(
    tx: &Connection,
    id: &str,
    end: Terminal,
    now_ms: i64,
) -> Result<FinishOutcome, TaskError> {
    let task = fetch(tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
    if task.status.is_terminal() {
        return Ok(FinishOutcome::AlreadyTerminal(task));
    }
    tx.prepare_cached(&format!(
        "UPDATE tasks SET status = ?2, error = ?3, terminal_summary = ?4,
                 terminal_outcome = ?5, ended_at = {STAMP}, last_event_at = {STAMP},
                 cleanup_after = {STAMP} + ?6, lease_until = NULL
             WHERE task_id = ?7"
    ))?
    .execute(params![
        now_ms,
        Status::from(end.status),
        end.error,
        end.terminal_summary,
        end.terminal_outcome,
        RETENTION_MS,
        id
    ])?;
    let task = fetch(tx, id)?.ok_or_else(|| TaskError::NotFound(id.to_string()))?;
    Ok(FinishOutcome::Finished(task))
}

fn check_lease(lease_until: i64, now_ms: i64) -> Result<(), TaskError> {
    if lease_until <= now_ms {
        return Err(TaskError::Invalid(format!(
            "a lease until {lease_until} has already expired at {now_ms}"
        )));
    }
    Ok(())
}

fn select(
    conn: &Connection,
    clause: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Task>, TaskError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tasks {clause}"))?;
    let tasks = stmt
        .query_map(params, from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tasks)
}

fn fetch(conn: &Connection, id: &str) -> Result<Option<Task>, TaskError> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE task_id = ?1"))?;
    Ok(stmt.query_row([id], from_row).optional()?)
}
