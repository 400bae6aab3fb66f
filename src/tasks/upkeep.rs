//! Keeping the ledger true over time: start recovery after a gateway
//! restart, and the sweeper step (lost tasks, cleanup stamps, pruning) that
//! `tasks maintenance` previews and applies.

use rusqlite::{Connection, params};
use serde::Serialize;

use super::record::RETENTION_MS;
use super::{Ledger, STAMP, TaskError};

/// What [`Ledger::recover_at_start`] did with the tasks an earlier
/// generation left running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// Marked lost: their kind is not retryable.
    pub lost: Vec<String>,
    /// Queued again in their lane places: their kind is retryable.
    pub requeued: Vec<String>,
    /// Cancelled: a cancel had been asked for before the gateway stopped.
    pub cancelled: Vec<String>,
}

/// What one sweep did (or, as a preview, would do), by task id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Running tasks whose lease expired with their owner gone: now lost.
    pub lost: Vec<String>,
    /// Finished tasks without a cleanup time: stamped `terminalAt + 7 d`.
    pub stamped: Vec<String>,
    /// Finished tasks whose cleanup time has passed: deleted.
    pub pruned: Vec<String>,
}

/// The counts `tasks maintenance` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Maintenance {
    /// Tasks marked lost.
    pub reconciled: usize,
    pub cleanup_stamped: usize,
    pub pruned: usize,
    /// Whether it was performed (else a preview).
    pub applied: bool,
}

impl Sweep {
    fn counts(&self, applied: bool) -> Maintenance {
        Maintenance {
            reconciled: self.lost.len(),
            cleanup_stamped: self.stamped.len(),
            pruned: self.pruned.len(),
            applied,
        }
    }
}

impl Ledger {
    /// Takes over what the previous gateway left: every task still running
    /// under a generation earlier than `generation` (or none) is cancelled
    /// if a cancel was asked for, queued again in its lane place if its
    /// `taskKind` is in `retryable`, else lost. Queued tasks stay queued.
    /// One transaction. The caller is the one running gateway (it holds the
    /// gateway's single-instance lock), so no earlier owner is alive.
    pub(crate) fn recover_at_start(
        &mut self,
        generation: i64,
        now_ms: i64,
        retryable: &[&str],
    ) -> Result<Recovery, TaskError> {
        let tx = self.write_tx()?;
        let orphans: Vec<(String, Option<String>, bool)> = {
            let mut stmt = tx.prepare(
                "SELECT task_id, task_kind, cancel_requested_at IS NOT NULL FROM tasks
                 WHERE status = 'running' AND (generation IS NULL OR generation < ?1)
                 ORDER BY lane_key IS NULL, lane_key, lane_seq, created_at, rowid",
            )?;
            stmt.query_map([generation], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<_, _>>()?
        };
        let mut recovery = Recovery::default();
        // Ended (cancelled or lost): one statement, the status and the
        // start of the error told apart.
        let end = |id: &str, status: &str, why: &str| {
            tx.execute(
                &format!(
                    "UPDATE tasks SET status = ?4, ended_at = {STAMP},
                         last_event_at = {STAMP}, cleanup_after = {STAMP} + ?2,
                         lease_until = NULL,
                         error = ?5 || 'the gateway that ran it stopped (generation '
                             || COALESCE(generation, 'unknown') || ')'
                     WHERE task_id = ?3"
                ),
                params![now_ms, RETENTION_MS, id, status, why],
            )
        };
        for (id, kind, cancel_requested) in orphans {
            if cancel_requested {
                end(&id, "cancelled", "cancelled; ")?;
                recovery.cancelled.push(id);
            } else if kind.is_some_and(|k| retryable.contains(&k.as_str())) {
                tx.execute(
                    &format!(
                        "UPDATE tasks SET last_event_at = {STAMP}, status = 'queued',
                             started_at = NULL, generation = NULL, lease_until = NULL
                         WHERE task_id = ?2"
                    ),
                    params![now_ms, id],
                )?;
                recovery.requeued.push(id);
            } else {
                end(&id, "lost", "")?;
                recovery.lost.push(id);
            }
        }
        tx.commit()?;
        Ok(recovery)
    }

    /// The sweeper step of the live gateway `current_generation`, performed.
    pub(crate) fn sweep(
        &mut self,
        now_ms: i64,
        current_generation: i64,
    ) -> Result<Sweep, TaskError> {
        let tx = self.write_tx()?;
        let sweep = plan(&tx, now_ms, Some(current_generation))?;
        perform(&tx, &sweep, now_ms)?;
        tx.commit()?;
        Ok(sweep)
    }

    /// The sweeper step, previewed or (`apply`) performed; both select the
    /// same tasks, and `apply` performs the selection in the transaction
    /// that made it. `current_generation: None` is a caller that runs no
    /// tasks (the command line): every owner counts as gone, and a running
    /// task is lost once its lease has expired, the lease being the
    /// owner's proof of life, renewed while it runs.
    pub(crate) fn maintenance(
        &mut self,
        now_ms: i64,
        current_generation: Option<i64>,
        apply: bool,
    ) -> Result<Maintenance, TaskError> {
        Ok(self
            .maintenance_ids(now_ms, current_generation, apply)?
            .counts(apply))
    }

    /// [`Ledger::maintenance`] with the task ids.
    pub(crate) fn maintenance_ids(
        &mut self,
        now_ms: i64,
        current_generation: Option<i64>,
        apply: bool,
    ) -> Result<Sweep, TaskError> {
        if !apply {
            // A read transaction: one consistent view for the three steps.
            let tx = self.conn.transaction()?;
            return plan(&tx, now_ms, current_generation);
        }
        let tx = self.write_tx()?;
        let sweep = plan(&tx, now_ms, current_generation)?;
        perform(&tx, &sweep, now_ms)?;
        tx.commit()?;
        Ok(sweep)
    }
}

fn ids(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<String>, TaskError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let ids = stmt
        .query_map(params, |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

/// The one selection of a sweep. Selected before anything changes: a task
/// marked lost now is stamped to be kept 7 days, so it is neither stamped
/// nor pruned by the same sweep, and a task stamped now is pruned when its
/// new cleanup time has already passed, as the preview says.
fn plan(conn: &Connection, now_ms: i64, current: Option<i64>) -> Result<Sweep, TaskError> {
    Ok(Sweep {
        lost: ids(
            conn,
            "SELECT task_id FROM tasks
             WHERE status = 'running'
               AND (lease_until IS NULL OR lease_until < ?1)
               AND (?2 IS NULL OR generation IS NULL OR generation <> ?2)
             ORDER BY created_at, rowid",
            params![now_ms, current],
        )?,
        stamped: ids(
            conn,
            "SELECT task_id FROM tasks
             WHERE status NOT IN ('queued', 'running') AND cleanup_after IS NULL
             ORDER BY created_at, rowid",
            [],
        )?,
        pruned: ids(
            conn,
            "SELECT task_id FROM tasks
             WHERE status NOT IN ('queued', 'running')
               AND COALESCE(cleanup_after, COALESCE(ended_at, last_event_at, created_at) + ?2) < ?1
             ORDER BY created_at, rowid",
            params![now_ms, RETENTION_MS],
        )?,
    })
}

/// Performs a [`plan`] made in the same transaction.
fn perform(conn: &Connection, sweep: &Sweep, now_ms: i64) -> Result<(), TaskError> {
    let list = |ids: &[String]| {
        std::rc::Rc::new(
            ids.iter()
                .map(|id| rusqlite::types::Value::Text(id.clone()))
                .collect::<Vec<_>>(),
        )
    };
    conn.execute(
        &format!(
            "UPDATE tasks SET status = 'lost', ended_at = {STAMP}, last_event_at = {STAMP},
                 cleanup_after = {STAMP} + ?2, lease_until = NULL,
                 error = 'the gateway that ran it (generation '
                     || COALESCE(generation, 'unknown') || ') stopped renewing its lease'
             WHERE task_id IN rarray(?3)"
        ),
        params![now_ms, RETENTION_MS, list(&sweep.lost)],
    )?;
    conn.execute(
        "UPDATE tasks
         SET cleanup_after = COALESCE(ended_at, last_event_at, created_at) + ?1
         WHERE task_id IN rarray(?2)",
        params![RETENTION_MS, list(&sweep.stamped)],
    )?;
    conn.execute(
        "DELETE FROM tasks WHERE task_id IN rarray(?1)",
        params![list(&sweep.pruned)],
    )?;
    Ok(())
}
