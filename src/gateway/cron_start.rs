//! Starting the cron runner's slots: the due slots claimed and their
//! tasks created in one transaction (one sync); event-only runs queued
//! and recorded in the tick itself, the others on their own tasks under
//! `cron.maxConcurrentRuns`; and `cron run`.

use std::collections::HashMap;
use std::sync::Arc;

use super::super::Shared;
use super::super::cron_run::{
    Claimed, RunOutcome, ended_slot, event_record, finished, queued, run_id, run_record, run_slot,
    run_task, takes_time, terminal, unreadable,
};
use super::super::intake::Record;
use super::{Due, Runner};
use crate::cron::job::CronJob;
use crate::cron::runlog::{self, RunRecord};
use crate::cron::slots::{self, SlotTrigger};

impl Runner {
    /// Claims `due` and creates each claimed slot's task in one
    /// transaction (one sync), then runs them: a job that only queues an
    /// event (`next-heartbeat`) runs in the tick itself, the whole batch
    /// queued and recorded together; one that takes time (a turn, a
    /// heartbeat run) gets its own task under the `maxConcurrentRuns`
    /// limit. A job whose previous run is still going skips the slot,
    /// recorded so.
    /// Returns the run ids of the runs started, by job.
    pub(super) async fn start_runs(
        &mut self,
        due: Vec<Due>,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let now = self.shared.host.now_ms();
        let generation = self.shared.tasks.generation;
        let mut busy = Vec::new();
        let mut wanted = Vec::new();
        {
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            for d in due {
                if running.contains(&d.id) {
                    busy.push((
                        d.id,
                        d.slot_ms,
                        "skipped: the previous run was still running".to_string(),
                    ));
                } else {
                    wanted.push(d);
                }
            }
        }
        let shared = self.shared.clone();
        let claimed = self
            .shared
            .engine
            .blocking(move || claim(&shared, wanted, &busy, now, generation))
            .await??;
        let started: Vec<(String, String)> = claimed
            .iter()
            .map(|run| (run.due.id.clone(), run.run_id.clone()))
            .collect();
        let mut instant = Vec::new();
        for run in claimed {
            let lasting = run.job.as_ref().is_ok_and(|job| takes_time(job));
            if !lasting {
                instant.push(run);
                continue;
            }
            let job_id = run.due.id.clone();
            self.running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(job_id.clone());
            let shared = self.shared.clone();
            let running = self.running.clone();
            let finished = self.finished.clone();
            let ended = self.ended.clone();
            let permits = self.permits.clone();
            self.runs.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let end = run_slot(&shared, run).await;
                running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&job_id);
                if let Some(end) = end {
                    finished.lock().unwrap_or_else(|p| p.into_inner()).push(end);
                    ended.notify_one();
                }
            });
        }
        if !instant.is_empty() {
            self.run_instant(instant).await?;
        }
        Ok(started)
    }

    /// Runs a batch of event-only slots: every event queued, then every
    /// task and slot ended in one transaction and the run logs appended.
    async fn run_instant(&mut self, batch: Vec<Claimed>) -> anyhow::Result<()> {
        let shared = self.shared.clone();
        let done = self
            .shared
            .engine
            .blocking(move || record_instant(&shared, batch))
            .await?;
        let (done, ended) = done;
        for (run, outcome) in &done {
            super::super::cron_delivery::spawn_end(
                &self.runs,
                &self.shared,
                run.job.as_ref().ok(),
                run.due.slot_ms,
                || run_record(run, outcome, ended),
            );
        }
        let finished = done
            .into_iter()
            .filter_map(|(run, outcome)| finished(run, outcome, ended))
            .collect();
        self.settle(finished);
        Ok(())
    }

    /// `cron run`: the job now (`force`), or only when a slot is due.
    pub(super) async fn manual(&mut self, lookup: &str, only_due: bool) -> serde_json::Value {
        let now = self.shared.host.now_ms();
        let id = match self.followed.keys().find(|id| id.as_str() == lookup) {
            Some(id) => id.clone(),
            None => {
                let mut matches = self.followed.keys().filter(|id| id.starts_with(lookup));
                match (matches.next(), matches.next()) {
                    (Some(id), None) => id.clone(),
                    (None, _) => {
                        return serde_json::json!({"ok": false, "error": format!("no enabled cron job `{lookup}`")});
                    }
                    _ => {
                        return serde_json::json!({"ok": false, "error": format!("`{lookup}` is the start of more than one job id")});
                    }
                }
            }
        };
        if self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id)
        {
            return serde_json::json!({"ok": true, "ran": false, "reason": "already-running", "jobId": id});
        }
        let f = &self.followed[&id];
        if only_due && f.next.is_none_or(|next| next > now) {
            return serde_json::json!({"ok": true, "ran": false, "reason": "not-due", "jobId": id});
        }
        // `--due` runs the slot that is due (the timer then finds it
        // claimed); a forced run is a slot of its own, at now.
        let due = Due {
            id: id.clone(),
            text: f.text.clone(),
            slot_ms: if only_due { f.next.unwrap_or(now) } else { now },
            trigger: if only_due {
                SlotTrigger::Due
            } else {
                SlotTrigger::Manual
            },
        };
        // The run id is the run's task's and its run-log line's.
        match self.start_runs(vec![due]).await {
            Ok(started) => match started.into_iter().find(|(job, _)| *job == id) {
                Some((_, run_id)) => {
                    serde_json::json!({"ok": true, "ran": true, "enqueued": true, "runId": run_id, "jobId": id})
                }
                None => {
                    serde_json::json!({"ok": true, "ran": false, "reason": "already-running", "jobId": id})
                }
            },
            Err(err) => serde_json::json!({"ok": false, "error": format!("{err:#}")}),
        }
    }
}

/// Claims the `wanted` slots (those of `busy` jobs recorded skipped) and
/// creates each claimed slot's task, in one transaction: one sync of the
/// state store, so blocking ([`crate::engine::assert_not_async`]). A slot
/// claimed before (by the timer, or an earlier start) is left out.
fn claim(
    shared: &Shared,
    wanted: Vec<Due>,
    busy: &[(String, i64, String)],
    now: i64,
    generation: i64,
) -> Result<Vec<Claimed>, crate::tasks::TaskError> {
    crate::engine::assert_not_async("claiming cron slots");
    // The jobs, read from their text.
    let jobs: Vec<Result<Arc<CronJob>, String>> = wanted
        .iter()
        .map(|d| {
            crate::cron::store::job_from_text(&d.text)
                .map(Arc::new)
                .map_err(|e| format!("the job cannot be read: {e}"))
        })
        .collect();
    let claims: Vec<(String, i64, SlotTrigger)> = wanted
        .iter()
        .map(|d| (d.id.clone(), d.slot_ms, d.trigger))
        .collect();
    let mut tasks = shared.tasks.with(|ledger| {
        ledger.batch(|batch| {
            if !busy.is_empty() {
                slots::record_missed_in(batch.connection(), busy, now)?;
            }
            let claimed = slots::claim_in(batch.connection(), &claims, generation, now)?;
            let by_id: HashMap<&str, Option<&CronJob>> = wanted
                .iter()
                .zip(&jobs)
                .map(|(d, job)| (d.id.as_str(), job.as_ref().ok().map(|j| &**j)))
                .collect();
            let mut tasks = HashMap::with_capacity(claimed.len());
            for (id, slot) in claimed {
                let job = by_id.get(id.as_str()).copied().flatten();
                let task = batch.create(run_task(&id, job, now, generation), now)?;
                tasks.insert((id, slot), task);
            }
            Ok(tasks)
        })
    })?;
    let runs: Vec<Claimed> = wanted
        .into_iter()
        .zip(jobs)
        .filter_map(|(due, job)| {
            let task_id = tasks.remove(&(due.id.clone(), due.slot_ms))?;
            Some(Claimed {
                run_id: run_id(&due.id, now),
                due,
                job,
                task_id,
                started_ms: now,
            })
        })
        .collect();
    Ok(runs)
}

/// Runs a batch of event-only slots: every event queued in one write to
/// the intake, then every task and slot ended in one transaction and the
/// run logs appended; blocking ([`crate::engine::assert_not_async`]).
/// Returns each run's outcome and when they ended.
fn record_instant(shared: &Shared, batch: Vec<Claimed>) -> (Vec<(Claimed, RunOutcome)>, i64) {
    crate::engine::assert_not_async("recording event-only cron runs");
    let app = shared.engine.app();
    // Every event of the batch in one write to the intake.
    let mut outcomes: Vec<Option<RunOutcome>> = Vec::with_capacity(batch.len());
    let mut records: Vec<Record> = Vec::new();
    for run in &batch {
        match &run.job {
            Ok(job) => match event_record(shared, &app, job) {
                Ok(record) => {
                    records.push(record);
                    outcomes.push(None);
                }
                Err(skipped) => outcomes.push(Some(skipped)),
            },
            Err(problem) => outcomes.push(Some(unreadable(problem))),
        }
    }
    let accepted = if records.is_empty() {
        Ok(())
    } else {
        shared
            .intake
            .accept_all(&mut records)
            .map_err(|e| e.to_string())
    };
    let mut records = records.into_iter();
    let done: Vec<(Claimed, RunOutcome)> = batch
        .into_iter()
        .zip(outcomes)
        .map(|(run, outcome)| {
            let outcome = outcome.unwrap_or_else(|| {
                let record = records.next().expect("a record per queued event");
                queued(&accepted, record)
            });
            (run, outcome)
        })
        .collect();
    let ended = shared.host.now_ms();
    let rows: Vec<slots::EndedSlot> = done
        .iter()
        .map(|(run, outcome)| ended_slot(run, outcome))
        .collect();
    let written = shared.tasks.with(|ledger| {
        ledger.batch(|batch| {
            for (run, outcome) in &done {
                batch.finish(&run.task_id, terminal(outcome), ended)?;
                // A webhook post follows from a task of its own
                // and tells the task; until then nothing went.
                batch.settle_delivery(
                    &run.task_id,
                    crate::tasks::DeliveryStatus::NotApplicable,
                    ended,
                )?;
            }
            slots::finish_in(batch.connection(), &rows, ended)?;
            Ok(())
        })
    });
    if let Err(err) = written {
        tracing::warn!(%err, "the end of cron runs was not recorded");
    }
    let records: Vec<RunRecord> = done
        .iter()
        .map(|(run, outcome)| run_record(run, outcome, ended))
        .collect();
    let limits = runlog::Limits::from(&app.config.config.cron.run_log);
    let logged = runlog::append_all(&shared.cron.store(&app).runs_dir(), &records, limits, false);
    for err in logged.map_or_else(
        |err| vec![err],
        |each| each.into_iter().filter_map(Result::err).collect(),
    ) {
        tracing::warn!(%err, "cron run log not written");
    }
    (done, ended)
}
