//! The slot ledger: which scheduled slots of which jobs were handled, in
//! the state store, so a slot is started at most once across restarts
//! and crashes.
//!
//! What it keeps, per job: its open slots (claimed, not yet ended), its
//! latest handled slot that was not a manual run (where a catch-up
//! starts), and a short history of its latest handled slots: the last
//! [`Budget::per_job`] (20), fewer when more jobs share the
//! [`Budget::total`] (100,000 rows), never fewer than one. [`SlotLedger::trim`]
//! cuts each job back to that; the runner calls it hourly and after many
//! slots, so the ledger's size follows the number of jobs, not the time
//! they have been running.
//!
//! Invariants:
//! * A slot is claimed (a committed row, `synchronous=FULL`) before its
//!   run starts; the primary key `(job_id, slot_ms)` makes a second claim
//!   of the same slot fail, whoever tries it.
//! * A scheduled slot (anything but a manual run) is claimed only when it
//!   is later than every scheduled slot of the job in the ledger: a slot
//!   the history no longer holds is still never started again.
//! * Trimming never removes an open slot or a job's latest scheduled
//!   slot.
//! * A row left `running` by an earlier gateway start is `interrupted`
//!   when the next one starts; it is not run again.
//! * A slot that passed while no gateway ran is recorded `missed` with
//!   what the job's `catchUp` policy did about it.
//! * Every operation takes "now" as a parameter.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use super::job::CatchUp;

/// How a slot came to be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotTrigger {
    Due,
    CatchUp,
    Manual,
    /// A one-shot tried again after a passing error.
    Retry,
}

impl SlotTrigger {
    fn as_str(self) -> &'static str {
        match self {
            SlotTrigger::Due => "due",
            SlotTrigger::CatchUp => "catch-up",
            SlotTrigger::Manual => "manual",
            SlotTrigger::Retry => "retry",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Ok,
    Error,
    Skipped,
    TimedOut,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Ok => "ok",
            Ended::Error => "error",
            Ended::Skipped => "skipped",
            Ended::TimedOut => "timed_out",
        }
    }
}

/// A run an earlier gateway start left running: its job, its slot, and
/// when it was claimed (and started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interrupted {
    pub job_id: String,
    pub slot_ms: i64,
    pub claimed_at: i64,
}

/// The ledger over one connection to the state store.
pub(crate) struct SlotLedger {
    conn: Connection,
}

impl SlotLedger {
    pub(crate) fn new(conn: Connection) -> SlotLedger {
        SlotLedger { conn }
    }

    /// Records slots that passed while no gateway ran and were not run,
    /// with what was done (`note`).
    pub(crate) fn record_missed(
        &mut self,
        missed: &[(String, i64, String)],
        now_ms: i64,
    ) -> rusqlite::Result<usize> {
        let tx = self.conn.transaction()?;
        let n = record_missed_in(&tx, missed, now_ms)?;
        tx.commit()?;
        Ok(n)
    }

    /// At a gateway start: runs an earlier start left `running` become
    /// `interrupted` (not run again). Returns them.
    pub(crate) fn interrupt_earlier(
        &mut self,
        generation: i64,
        now_ms: i64,
    ) -> rusqlite::Result<Vec<Interrupted>> {
        let mut stmt = self.conn.prepare(
            "UPDATE cron_slots SET status = 'interrupted', ended_at = ?2,
                    note = 'the gateway stopped while it ran'
             WHERE status = 'running' AND (generation IS NULL OR generation < ?1)
             RETURNING job_id, slot_ms, claimed_at",
        )?;
        stmt.query_map(params![generation, now_ms], |r| {
            Ok(Interrupted {
                job_id: r.get(0)?,
                slot_ms: r.get(1)?,
                claimed_at: r.get(2)?,
            })
        })?
        .collect()
    }

    /// The latest handled slot of every job (its last run or record).
    pub(crate) fn latest_slots(&self) -> rusqlite::Result<HashMap<String, i64>> {
        let mut stmt = self.conn.prepare(
            "SELECT job_id, MAX(slot_ms) FROM cron_slots WHERE trigger != 'manual' GROUP BY job_id",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
    }

    /// Claims `slots` for a run by `generation` in one transaction; returns
    /// the ones claimed ([`claim_in`]).
    pub(crate) fn claim(
        &mut self,
        slots: &[(String, i64, SlotTrigger)],
        generation: i64,
        now_ms: i64,
    ) -> rusqlite::Result<Vec<(String, i64)>> {
        let tx = self.conn.transaction()?;
        let claimed = claim_in(&tx, slots, generation, now_ms)?;
        tx.commit()?;
        Ok(claimed)
    }

    /// Records how runs ended in one transaction ([`finish_in`]).
    pub(crate) fn finish(&mut self, ended: &[EndedSlot], now_ms: i64) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        finish_in(&tx, ended, now_ms)?;
        tx.commit()
    }

    /// Cuts every job's history back to what `budget` allows it, keeping
    /// its open slots and its latest scheduled slot whatever their age;
    /// returns how many rows went. A few thousand jobs per transaction, so
    /// that claims are not held up behind one long write; the trim's own
    /// commits are not synced (a trim a power cut undoes is done again,
    /// and the claims that follow sync the log it is in).
    pub(crate) fn trim(&mut self, budget: Budget) -> rusqlite::Result<usize> {
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        let trimmed = self.trim_unsynced(budget);
        let restored = self.conn.pragma_update(None, "synchronous", "FULL");
        let removed = trimmed?;
        restored?;
        Ok(removed)
    }

    fn trim_unsynced(&mut self, budget: Budget) -> rusqlite::Result<usize> {
        let counts: Vec<(String, i64)> = {
            let mut stmt = self
                .conn
                .prepare("SELECT job_id, COUNT(*) FROM cron_slots GROUP BY job_id")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?
        };
        let keep = budget.per_job_among(counts.len());
        let over: Vec<&str> = counts
            .iter()
            .filter(|(_, n)| *n > keep as i64)
            .map(|(job, _)| job.as_str())
            .collect();
        let mut removed = 0;
        for chunk in over.chunks(TRIM_JOBS_PER_TRANSACTION) {
            let tx = self.conn.transaction()?;
            {
                let mut cut = tx.prepare_cached(
                    "DELETE FROM cron_slots
                     WHERE job_id = ?1 AND status != 'running'
                       AND slot_ms < (SELECT slot_ms FROM cron_slots WHERE job_id = ?1
                                      ORDER BY slot_ms DESC LIMIT 1 OFFSET ?2)
                       AND slot_ms IS NOT (SELECT MAX(slot_ms) FROM cron_slots
                                           WHERE job_id = ?1 AND trigger != 'manual')",
                )?;
                for job in chunk {
                    removed += cut.execute(params![job, keep as i64 - 1])?;
                }
            }
            tx.commit()?;
        }
        Ok(removed)
    }
}

/// Jobs trimmed per transaction by [`SlotLedger::trim`] (a few tens of
/// milliseconds of writing).
const TRIM_JOBS_PER_TRANSACTION: usize = 2_000;

/// How much history the ledger keeps: the last `per_job` handled slots of
/// each job, fewer each when more jobs than `total / per_job` share
/// `total` rows, and never fewer than one (the latest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    pub per_job: usize,
    pub total: usize,
}

impl Budget {
    pub(crate) const DEFAULT: Budget = Budget {
        per_job: 20,
        total: 100_000,
    };

    /// The rows each of `jobs` jobs keeps.
    pub(crate) fn per_job_among(self, jobs: usize) -> usize {
        (self.total / jobs.max(1)).clamp(1, self.per_job.max(1))
    }
}

/// One ended run: job, slot, how, error, task id.
pub(crate) type EndedSlot = (String, i64, Ended, Option<String>, Option<String>);

/// Claims `slots` for a run by `generation`, in the caller's
/// transaction; returns the ones this call claimed. Left out: a slot
/// already in the ledger (it was run, or is running, or was recorded
/// missed), and a scheduled slot no later than the job's latest
/// scheduled slot in the ledger (handled, or passed over, already).
pub(crate) fn claim_in(
    conn: &Connection,
    slots: &[(String, i64, SlotTrigger)],
    generation: i64,
    now_ms: i64,
) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut claimed = Vec::new();
    // A scheduled slot at or before one the ledger holds for the job was
    // handled (or passed over): the history may have let it go, this
    // refuses it all the same. A manual run is a slot of its own.
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO cron_slots
           (job_id, slot_ms, status, generation, claimed_at, started_at, trigger)
         SELECT ?1, ?2, 'running', ?3, ?4, ?4, ?5
         WHERE ?5 = 'manual' OR NOT EXISTS (
             SELECT 1 FROM cron_slots
             WHERE job_id = ?1 AND slot_ms >= ?2 AND trigger != 'manual')",
    )?;
    for (job, slot, trigger) in slots {
        if insert.execute(params![job, slot, generation, now_ms, trigger.as_str()])? == 1 {
            claimed.push((job.clone(), *slot));
        }
    }
    Ok(claimed)
}

/// Records how runs ended, in the caller's transaction.
pub(crate) fn finish_in(
    conn: &Connection,
    ended: &[EndedSlot],
    now_ms: i64,
) -> rusqlite::Result<()> {
    let mut update = conn.prepare_cached(
        "UPDATE cron_slots SET status = ?3, ended_at = ?4, error = ?5, task_id = ?6
         WHERE job_id = ?1 AND slot_ms = ?2 AND status = 'running'",
    )?;
    for (job, slot, how, error, task) in ended {
        update.execute(params![job, slot, how.as_str(), now_ms, error, task])?;
    }
    Ok(())
}

/// [`SlotLedger::record_missed`] in the caller's transaction.
pub(crate) fn record_missed_in(
    conn: &Connection,
    missed: &[(String, i64, String)],
    now_ms: i64,
) -> rusqlite::Result<usize> {
    let mut n = 0;
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO cron_slots
           (job_id, slot_ms, status, claimed_at, trigger, note)
         VALUES (?1, ?2, 'missed', ?3, 'catch-up', ?4)",
    )?;
    for (job, slot, note) in missed {
        n += insert.execute(params![job, slot, now_ms, note])?;
    }
    Ok(n)
}

/// What to do with the slots a job missed while no gateway ran.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct CatchUpPlan {
    /// Slots to run now, oldest first.
    pub run: Vec<i64>,
    /// Slots recorded as missed, with what was done about them.
    pub missed: Vec<(i64, String)>,
}

/// Plans the catch-up of `missed` slots (oldest first) by `policy`:
/// `once` runs the latest and records the others, `all` runs every one
/// (at most `limit`; the older rest are recorded), `skip` records all.
pub(crate) fn plan_catch_up(missed: &[i64], policy: CatchUp, limit: usize) -> CatchUpPlan {
    let mut plan = CatchUpPlan::default();
    match policy {
        CatchUp::Skip => {
            plan.missed = missed
                .iter()
                .map(|s| (*s, "skipped: catchUp is skip".to_string()))
                .collect();
        }
        CatchUp::Once => {
            if let Some((last, older)) = missed.split_last() {
                plan.run.push(*last);
                plan.missed = older
                    .iter()
                    .map(|s| {
                        (
                            *s,
                            format!("not run: catchUp once ran the latest missed slot ({last})"),
                        )
                    })
                    .collect();
            }
        }
        CatchUp::All => {
            let keep_from = missed.len().saturating_sub(limit);
            plan.missed = missed[..keep_from]
                .iter()
                .map(|s| (*s, format!("not run: more than {limit} missed slots")))
                .collect();
            plan.run = missed[keep_from..].to_vec();
        }
    }
    plan
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
