//! What the cron runner does once runs end: each job's outcome applied
//! (its backoff, a one-shot's retry, disabled or deleted, a failure
//! alert), schedules that could not be worked out counted until the job
//! is disabled, and the runtime state written back to `jobs.json`.

use std::cmp::Reverse;
use std::sync::Arc;

use super::super::cron_run::{Finished, carries_over, schedule_problem, status_of};
use super::Runner;
use crate::cron::job::CronJob;
use crate::cron::outcome::{self, AfterRun, RunEnd};
use crate::cron::slots::{Ended, SlotTrigger};
use crate::cron::store::{Fingerprint, RuntimeUpdate};

impl Runner {
    /// Runs that ended on their own task since the last look.
    pub(super) fn take_finished(&self) -> Vec<Finished> {
        std::mem::take(&mut *self.finished.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// What becomes of each job after its run ended
    /// ([`outcome::apply`]): its new state waits for the next write-back;
    /// a failed recurring job waits out its backoff, a one-shot that hit
    /// a passing error gets its next attempt, a spent or failed one-shot
    /// is disabled or removed, and a failure alert goes out when due.
    pub(super) fn settle(&mut self, finished: Vec<Finished>) {
        let app = self.shared.engine.app();
        let config = &app.config.config.cron;
        for end in finished {
            let natural = self
                .followed
                .get(&end.id)
                .filter(|_| !self.retrying.contains(&end.id))
                .and_then(|f| f.next);
            let run_end = RunEnd {
                status: status_of(end.status),
                error: end.error.clone(),
                started_ms: end.started_ms,
                ended_ms: end.ended_ms,
                manual: end.trigger == SlotTrigger::Manual,
                delivered: end.delivered,
                delivery_requested: end
                    .job
                    .delivery
                    .as_ref()
                    .is_some_and(|d| d.mode != crate::cron::job::DeliveryMode::None),
                delivery_error: end.delivery_error.clone(),
                timed_out: end.status == Ended::TimedOut,
            };
            let mut applied = outcome::apply(&end.job, &run_end, natural, config);
            if let Some(f) = self.followed.get_mut(&end.id) {
                if let Some(until) = applied.not_before_ms {
                    self.backoff.insert(end.id.clone(), until);
                    // The slot it runs at next: the first one after the
                    // backoff.
                    if applied.state.next_run_at_ms.is_some() {
                        applied.state.next_run_at_ms = f.slots.next_after(until - 1);
                    }
                }
                if let Some(at) = applied.retry_at_ms {
                    f.next = Some(at);
                    self.retrying.insert(end.id.clone());
                    self.queue.push(Reverse((at, end.id.clone())));
                }
                if carries_over(&end.job.state, &applied.state) {
                    // What the next run counts from (consecutive errors,
                    // the last alert) lives in the job's text.
                    let mut job = (*end.job).clone();
                    job.state = applied.state.clone();
                    if let Ok(text) = serde_json::to_string(&job) {
                        f.text = Arc::from(text);
                    }
                }
            }
            if let Some(alert) = applied.alert.take() {
                self.raise_alert(&end.job, alert);
            }
            match applied.after {
                AfterRun::Keep => {
                    self.states.insert(end.id, (applied.state, false));
                }
                AfterRun::Disable => {
                    self.followed.remove(&end.id);
                    self.states.insert(end.id, (applied.state, true));
                }
                AfterRun::Delete => {
                    self.followed.remove(&end.id);
                    self.states.remove(&end.id);
                    self.removals.push(end.id);
                }
            }
        }
    }

    /// Sends a failure alert where the job's settings say (off the tick).
    fn raise_alert(&self, job: &Arc<CronJob>, alert: outcome::Alert) {
        tracing::warn!(job = %job.id, "{}", alert.text);
        let shared = self.shared.clone();
        let job = job.clone();
        self.runs.spawn(async move {
            super::super::cron_delivery::send_alert(&shared, &job, &alert).await;
        });
    }

    /// Queues `text` as a system event on the main session, with a wake
    /// (a notice from the runner itself): trusted unless `job_of_model`
    /// (the job's name and fields are then the model's words).
    pub(super) fn queue_notice(&self, job_id: &str, text: String, job_of_model: bool) {
        let shared = self.shared.clone();
        let reason = format!("cron:{job_id}:disabled");
        self.runs.spawn(async move {
            let book = shared.clone();
            let queued = shared
                .engine
                .blocking(move || {
                    super::super::cron_delivery::queue_alert_event(
                        &book,
                        text,
                        reason,
                        !job_of_model,
                    )
                })
                .await;
            if !matches!(queued, Ok(Ok(()))) {
                tracing::warn!("a cron notice could not be queued");
            }
        });
    }

    /// Works out again the schedules that could not be: each failure
    /// counts ([`outcome::schedule_error`]); the third disables the job
    /// and says so in a system event. A schedule's zone comes from the
    /// zone database (files), so they are worked out on the blocking
    /// boundary.
    pub(super) async fn check_broken(&mut self) {
        self.broken_checked = Some(tokio::time::Instant::now());
        let host = self.shared.engine.app().host.time_zone().clone();
        let jobs: Vec<(String, CronJob)> = self
            .broken
            .iter()
            .map(|(id, job)| (id.clone(), job.clone()))
            .collect();
        let problems = self
            .shared
            .engine
            .blocking(move || {
                jobs.into_iter()
                    .map(|(id, job)| (id, schedule_problem(&job, &host).err()))
                    .collect::<Vec<_>>()
            })
            .await;
        let problems = match problems {
            Ok(problems) => problems,
            Err(err) => {
                tracing::warn!(%err, "cron schedules not worked out again");
                return;
            }
        };
        for (id, problem) in problems {
            let Some(job) = self.broken.get_mut(&id) else {
                continue;
            };
            let Some(problem) = problem else {
                // It works now (the zone database changed): follow it.
                self.broken.remove(&id);
                self.fingerprint = None;
                continue;
            };
            let (state, disable, notice) = outcome::schedule_error(job, &problem);
            let job_of_model = job.created_by_agent();
            job.state = state.clone();
            self.states.insert(id.clone(), (state, disable));
            if disable {
                tracing::warn!(job = %id, "cron job disabled after repeated schedule errors: {problem}");
                self.broken.remove(&id);
            }
            if let Some(text) = notice {
                self.queue_notice(&id, text, job_of_model);
            }
        }
    }

    /// Writes waiting runtime state and removals back to `jobs.json` (one
    /// rewrite for the states, one for the removals).
    pub(super) async fn flush_states(&mut self) {
        let updates: Vec<RuntimeUpdate> = self
            .states
            .drain()
            .map(|(id, (state, disable))| RuntimeUpdate { id, state, disable })
            .collect();
        let removals = std::mem::take(&mut self.removals);
        if updates.is_empty() && removals.is_empty() {
            return;
        }
        let app = self.shared.engine.app();
        let store = self.shared.cron.store(&app);
        let now = self.shared.host.now_ts();
        let known = self.fingerprint;
        let written = self
            .shared
            .engine
            .blocking(
                move || -> Result<Option<Fingerprint>, crate::cron::CronError> {
                    // The file as the runner last read it, or changed since
                    // by someone else (then it is read again at the next tick).
                    let unchanged = known == Some(store.fingerprint()?);
                    let mut last = None;
                    if !updates.is_empty() {
                        last = store.update_runtime(&updates, now)?.written.or(last);
                    }
                    if !removals.is_empty() {
                        let changed = store.modify(now, |file| {
                            for id in &removals {
                                file.remove(id);
                            }
                            Ok(())
                        })?;
                        last = changed.written.or(last);
                    }
                    super::super::resident::release_free_memory();
                    Ok(last.filter(|_| unchanged))
                },
            )
            .await;
        match written {
            Ok(Ok(ours)) => {
                // Our own write: no need to re-read it.
                if let Some(fingerprint) = ours {
                    self.fingerprint = Some(Some(fingerprint));
                }
            }
            Ok(Err(err)) => tracing::warn!(%err, "cron runtime state not written back"),
            Err(err) => tracing::warn!(%err, "cron runtime state not written back"),
        }
    }
}
