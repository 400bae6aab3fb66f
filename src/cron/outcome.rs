//! What happens to a job after one of its runs ends: its new runtime
//! state, whether it stays, is disabled or is removed, when it may run
//! next (error backoff, one-shot retries), and whether a failure alert is
//! due. Also the schedule-error rule, the backoff window checked before a
//! run, and the stale-slot guard of delivery.
//!
//! Everything here is a pure function of its parameters: the job as the
//! store holds it, how the run ended, the next slot of the job's schedule
//! and the `cron.*` settings. Nothing reads a clock or a file; the runner
//! writes what comes back.

use crate::config::{CronAlertMode, CronConfig, DEFAULT_RETRY_BACKOFF_MS};

use super::job::{CronJob, DeliveryMode, FailureAlert, JobState, RunStatus, ScheduleKind};

pub(crate) use crate::config::TransientClass;

/// The error text of a run stopped at its time limit.
pub(crate) const TIMED_OUT_ERROR: &str = "cron: job execution timed out";

/// The wait after consecutive errors of a recurring job: 30 s, 1 min,
/// 5 min, 15 min, then 60 min for every later one.
pub(crate) const ERROR_BACKOFF_MS: [i64; 5] = [30_000, 60_000, 300_000, 900_000, 3_600_000];

/// The least gap between the end of a cron-expression job's run and its
/// next one, so a slot that ends up in the past is not fired again at once.
pub(crate) const MIN_REFIRE_GAP_MS: i64 = 2_000;

/// A run starting this long after its slot is not delivered.
pub(crate) const STALE_AFTER_MS: i64 = 3 * 3_600_000;

/// Consecutive schedule errors after which a job is disabled.
pub(crate) const SCHEDULE_ERROR_LIMIT: u32 = 3;

/// How much of the last error a failure alert quotes.
const ALERT_ERROR_CHARS: usize = 200;

/// How a run ended, as the runner saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunEnd {
    pub status: RunStatus,
    /// Why it failed, or why it was skipped.
    pub error: Option<String>,
    pub started_ms: i64,
    pub ended_ms: i64,
    /// Started by `cron run`, not by the schedule.
    pub manual: bool,
    /// Whether the result reached its destination (unset: not known).
    pub delivered: Option<bool>,
    /// The job asked for its result to be delivered.
    pub delivery_requested: bool,
    pub delivery_error: Option<String>,
    /// Stopped at the run's time limit.
    pub timed_out: bool,
}

/// What becomes of the job itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRun {
    /// It stays as it is (its state aside).
    Keep,
    /// It stays in the store with `enabled: false`.
    Disable,
    /// It is removed from the store.
    Delete,
}

/// The decision after a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Applied {
    /// The job's new runtime state.
    pub state: JobState,
    pub after: AfterRun,
    /// A recurring job that failed: no slot runs before this (the end of
    /// the run plus the backoff of its consecutive errors). `None` after
    /// a run that did not fail, and for one-shots.
    pub not_before_ms: Option<i64>,
    /// A one-shot that failed with a passing error: when it runs again
    /// (also its `nextRunAtMs`).
    pub retry_at_ms: Option<i64>,
    /// A failure alert to send now.
    pub alert: Option<Alert>,
}

/// A failure alert and where it goes (unset fields: where the job's
/// results go, as the runner resolves it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Alert {
    pub text: String,
    pub mode: Option<DeliveryMode>,
    pub channel: Option<String>,
    pub to: Option<String>,
    pub account_id: Option<String>,
}

/// The job's state after the run `end`, and what becomes of the job.
///
/// `natural_next_ms` is the next slot of the job's schedule after the run
/// (ignored for `at` jobs). For a run started by `cron run` the runner
/// computes it as if the run had not happened, so a forced run of an
/// `every` job does not move its cadence; besides, a forced run of a
/// recurring job keeps the slot the job was waiting for (its
/// `nextRunAtMs`, when still ahead of the run's end) rather than using it
/// up. A `Some` also means the schedule was computed without error, which
/// ends a run of schedule errors.
///
/// Rules:
/// * any run: `runningAtMs` cleared; `lastRunAtMs` = start,
///   `lastRunStatus`/`lastStatus`, `lastDurationMs`, `lastError`, the
///   delivery fields; a failure (any status but `ok` and `skipped`)
///   counts in `consecutiveErrors` and sets `lastErrorReason`, anything
///   else resets both and `lastFailureAlertAtMs`;
/// * `at`: `ok` with `deleteAfterRun` → removed; other `ok`/`skipped` →
///   disabled, no next run; a failure of a kind in `cron.retry.retryOn`
///   while `consecutiveErrors ≤ cron.retry.maxAttempts` → tried again at
///   end + `cron.retry.backoffMs[consecutiveErrors − 1]` (the last
///   repeats); any other failure, or a run stopped at its time limit (it
///   used its whole allowance and would likely do it again) → disabled
///   and kept;
/// * recurring failure: next = max(natural next, end + backoff), backoff
///   [`ERROR_BACKOFF_MS`] by consecutive errors; no natural next, no next
///   run (a backoff delays runs, it never adds one);
/// * recurring `ok`/`skipped`: the natural next, for cron expressions at
///   least end + 2 s;
/// * a job disabled while it ran stays disabled: no next run, no retry.
pub(crate) fn apply(
    job: &CronJob,
    end: &RunEnd,
    natural_next_ms: Option<i64>,
    config: &CronConfig,
) -> Applied {
    let failed = !matches!(end.status, RunStatus::Ok | RunStatus::Skipped);
    let error = match (&end.error, end.timed_out) {
        (Some(error), _) => Some(error.clone()),
        (None, true) => Some(TIMED_OUT_ERROR.to_string()),
        (None, false) => None,
    };

    let mut state = job.state.clone();
    state.running_at_ms = None;
    state.last_run_at_ms = Some(end.started_ms);
    state.last_run_status = Some(end.status.clone());
    state.last_status = Some(end.status.clone());
    state.last_duration_ms = Some(end.ended_ms.saturating_sub(end.started_ms).max(0));
    state.last_error = error.clone();
    state.last_error_reason = failed.then(|| error_reason(error.as_deref(), end.timed_out).into());
    state.last_delivered = end.delivered;
    state.last_delivery_status = Some(
        match (end.delivered, end.delivery_requested) {
            (Some(true), _) => "delivered",
            (Some(false), _) => "not-delivered",
            (None, true) => "unknown",
            (None, false) => "not-requested",
        }
        .to_string(),
    );
    state.last_delivery_error = end.delivery_error.clone();
    if natural_next_ms.is_some() {
        state.schedule_error_count = None;
    }

    let mut alert = None;
    if failed {
        let errors = state.consecutive_errors.unwrap_or(0).saturating_add(1);
        state.consecutive_errors = Some(errors);
        if let Some(due) = alert_due(job, errors, error.as_deref(), end.ended_ms, config) {
            state.last_failure_alert_at_ms = Some(end.ended_ms);
            alert = Some(due);
        }
    } else {
        state.consecutive_errors = Some(0);
        state.last_failure_alert_at_ms = None;
    }
    let errors = state.consecutive_errors.unwrap_or(0);

    let mut applied = Applied {
        state,
        after: AfterRun::Keep,
        not_before_ms: None,
        retry_at_ms: None,
        alert,
    };

    if job.schedule.kind == ScheduleKind::At {
        applied.state.next_run_at_ms = None;
        if !failed {
            applied.after = if end.status == RunStatus::Ok && job.deletes_after_run() {
                AfterRun::Delete
            } else {
                AfterRun::Disable
            };
        } else if job.enabled
            && !end.timed_out
            && errors <= config.retry.max_attempts
            && error
                .as_deref()
                .is_some_and(|e| is_transient(e, &config.retry.retry_on))
        {
            let retry_at = end
                .ended_ms
                .saturating_add(retry_backoff_ms(errors, config));
            applied.retry_at_ms = Some(retry_at);
            applied.state.next_run_at_ms = Some(retry_at);
        } else {
            applied.after = AfterRun::Disable;
        }
        return applied;
    }

    if !job.enabled {
        applied.state.next_run_at_ms = None;
        return applied;
    }
    let waiting_slot = job
        .state
        .next_run_at_ms
        .filter(|slot| end.manual && *slot > end.ended_ms);
    let natural = waiting_slot.or(natural_next_ms);
    applied.state.next_run_at_ms = if failed {
        let not_before = end.ended_ms.saturating_add(error_backoff_ms(errors));
        applied.not_before_ms = Some(not_before);
        natural.map(|next| next.max(not_before))
    } else if job.schedule.kind == ScheduleKind::Cron {
        natural.map(|next| next.max(end.ended_ms.saturating_add(MIN_REFIRE_GAP_MS)))
    } else {
        natural
    };
    applied
}

/// The wait after `consecutive_errors` errors of a recurring job.
pub(crate) fn error_backoff_ms(consecutive_errors: u32) -> i64 {
    let index = (consecutive_errors.max(1) as usize - 1).min(ERROR_BACKOFF_MS.len() - 1);
    ERROR_BACKOFF_MS[index]
}

/// The wait before a one-shot's next attempt after `consecutive_errors`
/// errors (`cron.retry.backoffMs`, the last entry repeating; the default
/// when the list is empty).
pub(crate) fn retry_backoff_ms(consecutive_errors: u32, config: &CronConfig) -> i64 {
    let list: &[u64] = if config.retry.backoff_ms.is_empty() {
        &DEFAULT_RETRY_BACKOFF_MS
    } else {
        &config.retry.backoff_ms
    };
    let index = (consecutive_errors.max(1) as usize - 1).min(list.len() - 1);
    i64::try_from(list[index]).unwrap_or(i64::MAX)
}

/// The end of the backoff window of a recurring job whose last run
/// failed, while `now_ms` is inside it: a slot reached before then (a
/// missed one caught up at start, say) is not run.
pub(crate) fn in_backoff(job: &CronJob, now_ms: i64) -> Option<i64> {
    if job.schedule.kind == ScheduleKind::At || job.state.last() != Some(&RunStatus::Error) {
        return None;
    }
    let started = job.state.last_run_at_ms?;
    let ended = started.saturating_add(job.state.last_duration_ms.unwrap_or(0).max(0));
    // A failed last run with no count (an older or hand-edited file) is
    // one error.
    let errors = job.state.consecutive_errors.unwrap_or(1).max(1);
    let until = ended.saturating_add(error_backoff_ms(errors));
    (now_ms < until).then_some(until)
}

/// Whether a run that started at `started_ms` for the slot `slot_ms` is
/// too late for its result to be delivered (more than 3 hours).
pub(crate) fn is_stale(slot_ms: i64, started_ms: i64) -> bool {
    started_ms.saturating_sub(slot_ms) > STALE_AFTER_MS
}

/// The job's state after its schedule could not be computed (`error`
/// says why), whether the job is now to be disabled, and the text of the
/// system event that says so.
pub(crate) fn schedule_error(job: &CronJob, error: &str) -> (JobState, bool, Option<String>) {
    let mut state = job.state.clone();
    let count = state.schedule_error_count.unwrap_or(0).saturating_add(1);
    state.schedule_error_count = Some(count);
    state.next_run_at_ms = None;
    state.last_error = Some(format!("schedule error: {error}"));
    if count < SCHEDULE_ERROR_LIMIT {
        return (state, false, None);
    }
    let text = format!(
        "⚠️ Cron job \"{name}\" has been auto-disabled after {count} consecutive schedule errors. \
         Its next run could not be worked out: {error}. It will not run until its schedule is \
         fixed (almanac cron edit {id}) and it is enabled again (almanac cron enable {id}).",
        name = job.name,
        error = first_chars(error, ALERT_ERROR_CHARS),
        id = job.id,
    );
    (state, true, Some(text))
}

/// The first of the transient classes `error` belongs to (in the order
/// of [`TransientClass::ALL`]), or `None` for an error that will not
/// pass by itself.
#[cfg(test)]
pub(crate) fn transient_class(error: &str) -> Option<TransientClass> {
    let lower = error.to_lowercase();
    TransientClass::ALL
        .into_iter()
        .find(|class| in_class(*class, &lower))
}

/// Whether `error` belongs to any of `classes`.
pub(crate) fn is_transient(error: &str, classes: &[TransientClass]) -> bool {
    let lower = error.to_lowercase();
    classes.iter().any(|class| in_class(*class, &lower))
}

/// Whether the lowercased error text reads as `class`: OpenClaw's
/// patterns, plus almanac's own words for the same failures (a provider
/// it cannot reach, a connection refused, reset or closed mid-answer).
fn in_class(class: TransientClass, lower: &str) -> bool {
    let any = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    match class {
        TransientClass::RateLimit => {
            any(&[
                "rate limit",
                "rate_limit",
                "too many requests",
                "resource has been exhausted",
                "cloudflare",
                "tokens per day",
            ]) || has_status(lower, |n| n == 429)
        }
        TransientClass::Overloaded => {
            any(&["overloaded", "high demand", "capacity exceeded"])
                || has_status(lower, |n| n == 529)
        }
        TransientClass::Network => any(&[
            "network",
            "econnreset",
            "econnrefused",
            "fetch failed",
            "socket",
            "cannot reach ",
            "connection refused",
            "connection reset",
            "closed in the middle of the answer",
        ]),
        TransientClass::Timeout => any(&["timeout", "etimedout"]),
        TransientClass::ServerError => has_status(lower, |n| (500..=599).contains(&n)),
    }
}

/// Whether `text` holds a standalone three-digit number (no letter, digit
/// or `_` touching it) that `wanted` accepts.
fn has_status(text: &str, wanted: impl Fn(u16) -> bool) -> bool {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let alone =
            (start == 0 || !word(bytes[start - 1])) && (i == bytes.len() || !word(bytes[i]));
        if alone && i - start == 3 {
            let number = text[start..i].parse().unwrap_or(0);
            if wanted(number) {
                return true;
            }
        }
    }
    false
}

/// `lastErrorReason` of a failed run: `auth`, `format`, `rate_limit`,
/// `billing`, `timeout`, `model_not_found` or `unknown`, read from the
/// error text (the first that fits, in that order of precedence: billing,
/// auth, model, rate limit or overload, timeout, format).
pub(crate) fn error_reason(error: Option<&str>, timed_out: bool) -> &'static str {
    if timed_out {
        return "timeout";
    }
    let Some(error) = error else {
        return "unknown";
    };
    let lower = error.to_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if has_status(&lower, |n| n == 402)
        || any(&[
            "billing",
            "payment required",
            "insufficient credit",
            "insufficient_quota",
            "insufficient balance",
            "credit balance",
        ])
    {
        "billing"
    } else if has_status(&lower, |n| n == 401 || n == 403)
        || any(&[
            "unauthorized",
            "unauthorised",
            "forbidden",
            "invalid api key",
            "invalid_api_key",
            "invalid x-api-key",
            "authentication",
            "permission denied",
        ])
    {
        "auth"
    } else if any(&["model_not_found", "unknown model", "no such model"])
        || (lower.contains("model") && any(&["not found", "does not exist"]))
    {
        "model_not_found"
    } else if in_class(TransientClass::RateLimit, &lower)
        || in_class(TransientClass::Overloaded, &lower)
    {
        "rate_limit"
    } else if in_class(TransientClass::Timeout, &lower) || any(&["timed out", "deadline exceeded"])
    {
        "timeout"
    } else if has_status(&lower, |n| n == 400)
        || any(&[
            "bad request",
            "invalid request",
            "invalid_request",
            "malformed",
            "invalid json",
        ])
    {
        "format"
    } else {
        "unknown"
    }
}

/// A failure alert, when one is due after the job's `errors`-th
/// consecutive failure ending at `now_ms`: alerts on (the job's own
/// `failureAlert`, else `cron.failureAlert.enabled`; `failureAlert:
/// false` opts out), at least `after` failures, results not delivered
/// best-effort, and the last alert older than the cooldown.
fn alert_due(
    job: &CronJob,
    errors: u32,
    error: Option<&str>,
    now_ms: i64,
    config: &CronConfig,
) -> Option<Alert> {
    let global = &config.failure_alert;
    let own = match &job.failure_alert {
        Some(FailureAlert::Off) => return None,
        Some(FailureAlert::On(own)) => Some(own),
        None if global.enabled => None,
        None => return None,
    };
    if job.delivery.as_ref().and_then(|d| d.best_effort) == Some(true) {
        return None;
    }
    let after = own.and_then(|o| o.after).unwrap_or(global.after).max(1);
    if errors < after {
        return None;
    }
    let cooldown = own
        .and_then(|o| o.cooldown_ms)
        .unwrap_or(global.cooldown_ms);
    let cooldown = i64::try_from(cooldown).unwrap_or(i64::MAX);
    if let Some(last) = job.state.last_failure_alert_at_ms
        && now_ms.saturating_sub(last) < cooldown
    {
        return None;
    }
    let text = format!(
        "Cron job \"{}\" failed {errors} times\nLast error: {}",
        job.name,
        first_chars(error.unwrap_or("unknown error"), ALERT_ERROR_CHARS)
    );
    let pick = |own: Option<&String>, global: &Option<String>| own.or(global.as_ref()).cloned();
    Some(Alert {
        text,
        mode: own.and_then(|o| o.mode).or(global.mode.map(|m| match m {
            CronAlertMode::Announce => DeliveryMode::Announce,
            CronAlertMode::Webhook => DeliveryMode::Webhook,
        })),
        channel: pick(own.and_then(|o| o.channel.as_ref()), &global.channel),
        to: pick(own.and_then(|o| o.to.as_ref()), &global.to),
        account_id: pick(own.and_then(|o| o.account_id.as_ref()), &global.account_id),
    })
}

fn first_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
