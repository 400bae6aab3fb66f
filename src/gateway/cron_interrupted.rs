//! Runs a crash (or kill -9) cut off: what the next gateway does of them.
//!
//! Invariants:
//! * Each is a run-log line (`status: error`, `error: "interrupted: …"`,
//!   with its slot and run id) written when the runner starts, so `cron
//!   runs` shows it; its slot stays `interrupted` in the ledger.
//! * Its job's `catchUp` decides whether it runs again: `once` (the
//!   default) and `all` run the job once more at the start, unless a
//!   catch-up run of it is planned anyway; `skip` does not.
//! * A one-shot (`at`) that does not run again is disabled, its state
//!   saying why (`lastError`), so `cron list --all` shows it: never left
//!   enabled with no next slot.

use std::collections::HashMap;

use super::cron::{Due, Followed};
use crate::cron::job::{CatchUp, JobState, RunStatus, ScheduleKind};
use crate::cron::runlog::{self, RunRecord};
use crate::cron::slots::{Interrupted, SlotTrigger};

/// The error of a run a crash cut off.
pub(super) const INTERRUPTED: &str = "interrupted: the gateway stopped while it ran";

/// The run-log lines of the runs `cut` left (blocking).
pub(super) fn log_lines(
    runs_dir: &std::path::Path,
    cut: &[Interrupted],
    now_ms: i64,
    limits: runlog::Limits,
) {
    let records: Vec<RunRecord> = cut
        .iter()
        .map(|run| {
            let mut record = RunRecord::finished(&run.job_id, now_ms);
            record.status = Some(RunStatus::Error);
            record.error = Some(INTERRUPTED.to_string());
            record.run_at_ms = Some(run.claimed_at);
            record.duration_ms = Some(now_ms - run.claimed_at);
            record
                .extra
                .insert("slotMs".into(), serde_json::json!(run.slot_ms));
            record.extra.insert(
                "runId".into(),
                serde_json::json!(super::cron_run::run_id(&run.job_id, run.claimed_at)),
            );
            record
        })
        .collect();
    match runlog::append_all(runs_dir, &records, limits, false) {
        Ok(each) => {
            for err in each.into_iter().filter_map(Result::err) {
                tracing::warn!(%err, "the run-log line of an interrupted cron run was not written");
            }
        }
        Err(err) => {
            tracing::warn!(%err, "the run-log lines of interrupted cron runs were not written")
        }
    }
}

/// What comes of the runs `cut` left, by their jobs (`followed`): the
/// runs to start now (none for a job `catch_up` runs anyway), and the
/// one-shots to disable with their new state.
pub(super) fn plan(
    cut: &[Interrupted],
    followed: &HashMap<String, Followed>,
    catch_up: &[Due],
    now_ms: i64,
) -> (Vec<Due>, Vec<(String, JobState)>) {
    let mut again: Vec<Due> = Vec::new();
    let mut disable = Vec::new();
    for run in cut {
        let Some(f) = followed.get(&run.job_id) else {
            // Removed or disabled since: nothing to run.
            continue;
        };
        let Ok(job) = crate::cron::store::job_from_text(&f.text) else {
            continue;
        };
        let runs_anyway = catch_up.iter().chain(&again).any(|d| d.id == job.id);
        match job.catch_up() {
            CatchUp::Once | CatchUp::All => {
                if !runs_anyway {
                    again.push(Due {
                        id: job.id.clone(),
                        text: f.text.clone(),
                        slot_ms: now_ms,
                        trigger: SlotTrigger::CatchUp,
                    });
                }
            }
            CatchUp::Skip if job.schedule.kind == ScheduleKind::At => {
                let mut state = job.state.clone();
                state.last_run_at_ms = Some(run.claimed_at);
                state.last_run_status = Some(RunStatus::Error);
                state.last_status = Some(RunStatus::Error);
                state.last_error = Some(format!(
                    "{INTERRUPTED}; not run again (catchUp: skip): disabled"
                ));
                state.next_run_at_ms = None;
                state.running_at_ms = None;
                disable.push((job.id.clone(), state));
            }
            CatchUp::Skip => {}
        }
    }
    (again, disable)
}
