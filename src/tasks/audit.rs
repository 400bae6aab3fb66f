//! The ledger audit: findings per task with OpenClaw's codes and
//! thresholds, errors first, then oldest.

use std::collections::BTreeMap;

use serde::Serialize;

use super::record::Task;
use super::vocab::{AuditCode, DeliveryStatus, NotifyPolicy, Severity, Status};
use super::{Ledger, TaskError, select};

/// A task queued this long is `stale_queued`.
pub(super) const STALE_QUEUED_MS: i64 = 10 * 60 * 1000;
/// A task running this long is `stale_running`.
pub(super) const STALE_RUNNING_MS: i64 = 30 * 60 * 1000;

/// One thing wrong with one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Finding {
    pub severity: Severity,
    pub code: AuditCode,
    pub task_id: String,
    /// The whole record, as OpenClaw's audit gives it.
    pub task: Task,
    pub detail: String,
    /// How long the condition has held (or the task has been in its state).
    pub age_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditSummary {
    pub total: usize,
    pub warnings: usize,
    pub errors: usize,
    /// Findings per code (codes with none left out).
    pub by_code: BTreeMap<AuditCode, usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Audit {
    pub findings: Vec<Finding>,
    pub summary: AuditSummary,
}

impl Audit {
    /// Findings of `tasks` at `now_ms`: errors first, then oldest.
    pub(crate) fn of(tasks: &[Task], now_ms: i64) -> Audit {
        let mut findings: Vec<Finding> = tasks.iter().flat_map(|t| findings(t, now_ms)).collect();
        findings.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(b.age_ms.cmp(&a.age_ms))
                .then_with(|| a.task_id.cmp(&b.task_id))
                .then(a.code.cmp(&b.code))
        });
        Audit::from_findings(findings)
    }

    fn from_findings(findings: Vec<Finding>) -> Audit {
        let mut summary = AuditSummary {
            total: findings.len(),
            ..AuditSummary::default()
        };
        for f in &findings {
            match f.severity {
                Severity::Warn => summary.warnings += 1,
                Severity::Error => summary.errors += 1,
            }
            *summary.by_code.entry(f.code).or_default() += 1;
        }
        Audit { findings, summary }
    }

    /// Only the findings of `severity` and `code` (when given), the summary
    /// counting those; then at most `limit` of them listed.
    pub(crate) fn filtered(
        self,
        severity: Option<Severity>,
        code: Option<AuditCode>,
        limit: Option<usize>,
    ) -> Audit {
        let kept = self
            .findings
            .into_iter()
            .filter(|f| severity.is_none_or(|s| f.severity == s))
            .filter(|f| code.is_none_or(|c| f.code == c))
            .collect();
        let mut audit = Audit::from_findings(kept);
        if let Some(limit) = limit {
            audit.findings.truncate(limit);
        }
        audit
    }
}

/// What is wrong with one task at `now_ms`.
fn findings(task: &Task, now_ms: i64) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |code: AuditCode, since: i64, detail: String| {
        out.push(Finding {
            severity: code.severity(),
            code,
            task_id: task.task_id.clone(),
            task: task.clone(),
            detail,
            age_ms: now_ms.saturating_sub(since).max(0),
        })
    };
    let ended = task.terminal_at();
    match task.status {
        Status::Queued if now_ms - task.created_at >= STALE_QUEUED_MS => add(
            AuditCode::StaleQueued,
            task.created_at,
            format!("queued for {}", human_duration(now_ms - task.created_at)),
        ),
        Status::Running => {
            let since = task.started_at.unwrap_or(task.created_at);
            if now_ms - since >= STALE_RUNNING_MS {
                add(
                    AuditCode::StaleRunning,
                    since,
                    format!("running for {}", human_duration(now_ms - since)),
                );
            }
        }
        Status::Lost => add(
            AuditCode::Lost,
            ended,
            task.error.clone().unwrap_or_else(|| "lost".to_string()),
        ),
        _ => {}
    }
    if task.delivery_status == DeliveryStatus::Failed && task.notify_policy != NotifyPolicy::Silent
    {
        add(
            AuditCode::DeliveryFailed,
            ended,
            format!(
                "the result was not delivered (notify {})",
                task.notify_policy
            ),
        );
    }
    if task.status.is_terminal() && task.status != Status::Lost && task.cleanup_after.is_none() {
        add(
            AuditCode::MissingCleanup,
            ended,
            "ended without a cleanup time (the next sweep stamps one)".to_string(),
        );
    }
    let mut odd = Vec::new();
    if task.started_at.is_some_and(|s| s < task.created_at) {
        odd.push("started before it was created");
    }
    if let (Some(end), Some(start)) = (task.ended_at, task.started_at)
        && end < start
    {
        odd.push("ended before it started");
    }
    if task.status.is_active() && task.ended_at.is_some() {
        odd.push("has an end time but is still active");
    }
    if !odd.is_empty() {
        add(
            AuditCode::InconsistentTimestamps,
            task.created_at,
            odd.join("; "),
        );
    }
    out
}

/// `45s`, `12m`, `3h 5m`, `2d 4h`.
pub(crate) fn human_duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

impl Ledger {
    /// The audit at `now_ms`.
    pub(crate) fn audit(&self, now_ms: i64) -> Result<Audit, TaskError> {
        // Only rows that can have a finding are read: the ledger keeps a
        // week of finished runs.
        let candidates = select(
            &self.conn,
            "WHERE status IN ('queued', 'running', 'lost')
                OR delivery_status = 'failed'
                OR cleanup_after IS NULL
                OR started_at < created_at
                OR ended_at < started_at",
            [],
        )?;
        Ok(Audit::of(&candidates, now_ms))
    }
}
