//! The job flags of `cron add` and `cron edit`: the new job, or the
//! change of one, that the flags as given describe (a schedule, the
//! payload, where the result goes, the failure alert), before
//! [`super::cron::add_job`] or [`super::cron::change_job`] completes,
//! checks and stores it.

use super::cron::{default_target, invalid, normalize_agent_id, resolve_current};
use crate::cron::job::{
    CatchUp, CronJob, Delivery, DeliveryMode, FailureAlert, FailureAlertConfig, JobError, JobState,
    Payload, PayloadKind, ScheduleKind, ScheduleSpec, SessionTarget, WakeMode,
};
use crate::cron::{CronError, schedule};

/// Where a job's result goes, as chosen on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeliveryChoice {
    /// `--announce` (or the deprecated `--deliver`).
    Announce { deprecated_flag: bool },
    /// `--no-deliver`.
    Nowhere,
    /// `--webhook <url>`.
    Webhook(String),
}

/// The job flags of `cron add` and `cron edit`, as given. `None` (or
/// `false`) is "not given".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JobFlags {
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub delete_after_run: Option<bool>,
    pub agent: Option<String>,
    pub clear_agent: bool,
    pub session: Option<String>,
    pub session_key: Option<String>,
    pub clear_session_key: bool,
    pub wake: Option<String>,
    pub at: Option<String>,
    pub every: Option<String>,
    pub cron: Option<String>,
    pub tz: Option<String>,
    pub stagger: Option<String>,
    pub exact: bool,
    pub system_event: Option<String>,
    pub message: Option<String>,
    pub thinking: Option<String>,
    pub model: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub light_context: Option<bool>,
    pub tools: Option<Vec<String>>,
    pub clear_tools: bool,
    pub delivery: Option<DeliveryChoice>,
    pub channel: Option<String>,
    pub to: Option<String>,
    pub account: Option<String>,
    pub best_effort: Option<bool>,
    pub failure_alert: Option<bool>,
    pub failure_alert_after: Option<u32>,
    pub failure_alert_channel: Option<String>,
    pub failure_alert_to: Option<String>,
    pub failure_alert_cooldown: Option<String>,
    pub failure_alert_mode: Option<String>,
    pub failure_alert_account_id: Option<String>,
    pub catch_up: Option<String>,
}

/// The new job `flags` describe, before [`add_job`] completes it.
pub(super) fn job_from_flags(
    flags: &JobFlags,
    now_ms: i64,
    notes: &mut Vec<String>,
) -> anyhow::Result<CronJob> {
    let name = flags
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("name", "a job needs a name (--name)"))?;
    let schedule = new_schedule(flags, None, now_ms)?
        .ok_or_else(|| invalid("schedule", "give one of --at, --every or --cron"))?;
    check_schedule_only_flags(flags, &schedule)?;
    let payload = match (&flags.system_event, &flags.message) {
        (Some(text), None) => Payload::system_event(text),
        (None, Some(message)) => Payload::agent_turn(message),
        _ => {
            return Err(invalid(
                "payload",
                "give one of --system-event (a main-session reminder) or --message (an agent turn)",
            )
            .into());
        }
    };
    let mut job = CronJob {
        id: String::new(),
        agent_id: None,
        session_key: None,
        name: name.to_string(),
        description: None,
        enabled: true,
        delete_after_run: None,
        created_at_ms: now_ms,
        updated_at_ms: now_ms,
        schedule,
        session_target: default_target(payload.kind),
        wake_mode: WakeMode::Now,
        payload,
        delivery: None,
        failure_alert: None,
        catch_up: None,
        state: JobState::default(),
        extra: Default::default(),
    };
    apply(&mut job, flags, true, notes)?;
    Ok(job)
}

/// Flags given in a spelling that still works but is on its way out.
pub(super) fn deprecated_flags(flags: &JobFlags) -> Option<String> {
    (flags.delivery
        == Some(DeliveryChoice::Announce {
            deprecated_flag: true,
        }))
    .then(|| "--deliver is the former spelling of --announce".to_string())
}

/// The schedule `flags` give (`None`: they give none), `current` being
/// the job's schedule when editing.
pub(super) fn new_schedule(
    flags: &JobFlags,
    current: Option<&ScheduleSpec>,
    now_ms: i64,
) -> Result<Option<ScheduleSpec>, CronError> {
    let given = [&flags.at, &flags.every, &flags.cron]
        .iter()
        .filter(|f| f.is_some())
        .count();
    if given > 1 {
        return Err(invalid(
            "schedule",
            "give only one of --at, --every and --cron",
        ));
    }
    let tz = flags.tz.as_deref().map(str::trim);
    let zone = match tz {
        Some(name) => Some(
            jiff::tz::TimeZone::get(name)
                .map_err(|_| CronError::Job(JobError::UnknownZone(name.to_string())))?,
        ),
        None => None,
    };
    let stagger = |previous: Option<u64>, expr: &str| -> Result<Option<u64>, CronError> {
        if flags.exact {
            return Ok(Some(0));
        }
        if let Some(text) = &flags.stagger {
            return schedule::parse_duration(text)
                .map(Some)
                .map_err(|e| invalid("schedule.staggerMs", e));
        }
        if previous.is_some() {
            return Ok(previous);
        }
        let default = schedule::default_stagger(expr);
        Ok((default > 0).then_some(default))
    };
    if let Some(text) = &flags.at {
        let at = schedule::parse_at_flag(text, now_ms, zone.as_ref())
            .map_err(|e| invalid("schedule.at", e))?;
        return Ok(Some(ScheduleSpec::at(at)));
    }
    if let Some(text) = &flags.every {
        if tz.is_some() {
            return Err(invalid(
                "schedule.tz",
                "--tz does not apply to --every (an interval is the same in every zone)",
            ));
        }
        let every = schedule::parse_duration(text).map_err(|e| invalid("schedule.everyMs", e))?;
        return Ok(Some(ScheduleSpec::every(every, now_ms)));
    }
    if let Some(expr) = &flags.cron {
        let previous = current
            .filter(|c| c.kind == ScheduleKind::Cron)
            .and_then(|c| c.stagger_ms);
        let tz = match tz {
            Some(tz) => Some(tz.to_string()),
            None => current
                .filter(|c| c.kind == ScheduleKind::Cron)
                .and_then(|c| c.tz.clone()),
        };
        schedule::check_expression(expr)?;
        return Ok(Some(ScheduleSpec::cron(expr, tz, stagger(previous, expr)?)));
    }
    // `--tz` or `--stagger`/`--exact` alone change a cron schedule.
    let patches_cron = tz.is_some() || flags.stagger.is_some() || flags.exact;
    match current {
        Some(current) if patches_cron => {
            if current.kind != ScheduleKind::Cron {
                return Err(invalid(
                    "schedule",
                    "--tz, --stagger and --exact alone change a cron schedule; this job's is not one",
                ));
            }
            let mut schedule = current.clone();
            if let Some(tz) = tz {
                schedule.tz = Some(tz.to_string());
            }
            if flags.exact || flags.stagger.is_some() {
                schedule.stagger_ms = stagger(None, "")?;
            }
            Ok(Some(schedule))
        }
        _ => Ok(None),
    }
}

/// `--stagger`/`--exact` belong to cron schedules, `--tz` to cron and
/// `at` ones.
pub(super) fn check_schedule_only_flags(
    flags: &JobFlags,
    schedule: &ScheduleSpec,
) -> Result<(), CronError> {
    if (flags.stagger.is_some() || flags.exact) && schedule.kind != ScheduleKind::Cron {
        return Err(invalid(
            "schedule.staggerMs",
            "--stagger and --exact apply to --cron schedules",
        ));
    }
    if flags.stagger.is_some() && flags.exact {
        return Err(invalid(
            "schedule.staggerMs",
            "give --stagger or --exact, not both",
        ));
    }
    Ok(())
}

/// Applies the flags other than the schedule's to `job`.
pub(super) fn apply(
    job: &mut CronJob,
    flags: &JobFlags,
    adding: bool,
    notes: &mut Vec<String>,
) -> Result<(), CronError> {
    if let Some(name) = &flags.name {
        if name.trim().is_empty() {
            return Err(invalid("name", "must not be empty"));
        }
        job.name = name.trim().to_string();
    }
    if let Some(description) = &flags.description {
        job.description = Some(description.clone()).filter(|d| !d.trim().is_empty());
    }
    if let Some(enabled) = flags.enabled {
        job.enabled = enabled;
    }
    if let Some(delete) = flags.delete_after_run {
        if job.schedule.kind != ScheduleKind::At {
            return Err(invalid(
                "deleteAfterRun",
                "--delete-after-run and --keep-after-run apply to --at jobs (recurring jobs are never removed by a run)",
            ));
        }
        job.delete_after_run = Some(delete);
    }
    if flags.clear_agent {
        job.agent_id = None;
    }
    if let Some(agent) = &flags.agent {
        job.agent_id = Some(normalize_agent_id(agent));
    }
    if flags.clear_session_key {
        job.session_key = None;
    }
    if let Some(key) = &flags.session_key {
        job.session_key = Some(key.trim().to_string()).filter(|k| !k.is_empty());
    }
    if let Some(text) = &flags.wake {
        job.wake_mode = WakeMode::parse(text).ok_or_else(|| {
            invalid(
                "wakeMode",
                format!("`{text}` is not one of {}", WakeMode::NAMES.join(", ")),
            )
        })?;
    }
    apply_payload(job, flags, adding)?;
    let target_given = flags.session.is_some();
    if let Some(text) = &flags.session {
        job.session_target = text
            .parse::<SessionTarget>()
            .map_err(|e| invalid("sessionTarget", e))?;
    }
    resolve_current(job);
    apply_delivery(job, flags)?;
    if job.session_target == SessionTarget::Main
        && job
            .delivery
            .as_ref()
            .is_some_and(|d| d.mode == DeliveryMode::Announce)
        && !adding
        && (target_given || flags.system_event.is_some())
        && flags.delivery.is_none()
    {
        job.delivery = None;
        notes.push(
            "its announce delivery was dropped: a main job's result is the heartbeat's".into(),
        );
    }
    apply_failure_alert(job, flags)?;
    if let Some(text) = &flags.catch_up {
        job.catch_up = Some(CatchUp::parse(text).ok_or_else(|| {
            invalid(
                "catchUp",
                format!("`{text}` is not one of {}", CatchUp::NAMES.join(", ")),
            )
        })?);
    }
    Ok(())
}

fn apply_payload(job: &mut CronJob, flags: &JobFlags, adding: bool) -> Result<(), CronError> {
    if flags.system_event.is_some() && flags.message.is_some() {
        return Err(invalid(
            "payload",
            "give --system-event or --message, not both",
        ));
    }
    let before = job.payload.kind;
    if !adding {
        if let Some(text) = &flags.system_event {
            job.payload = Payload::system_event(text);
        }
        if let Some(message) = &flags.message {
            if job.payload.kind == PayloadKind::AgentTurn {
                job.payload.message = Some(message.clone());
            } else {
                job.payload = Payload::agent_turn(message);
            }
        }
        if job.payload.kind != before && flags.session.is_none() {
            job.session_target = default_target(job.payload.kind);
        }
    }
    let turn_flags = flags.thinking.is_some()
        || flags.model.is_some()
        || flags.timeout_seconds.is_some()
        || flags.light_context.is_some()
        || flags.tools.is_some()
        || flags.clear_tools;
    if turn_flags && job.payload.kind != PayloadKind::AgentTurn {
        return Err(invalid(
            "payload",
            "--model, --thinking, --timeout-seconds, --light-context and --tools apply to agent turns (--message)",
        ));
    }
    let payload = &mut job.payload;
    if let Some(thinking) = &flags.thinking {
        payload.thinking = Some(thinking.clone());
    }
    if let Some(model) = &flags.model {
        payload.model = Some(model.trim().to_string()).filter(|m| !m.is_empty());
    }
    if let Some(seconds) = flags.timeout_seconds {
        payload.timeout_seconds = Some(seconds);
    }
    if let Some(light) = flags.light_context {
        payload.light_context = Some(light);
    }
    if flags.clear_tools {
        payload.tools_allow = None;
    }
    if let Some(tools) = &flags.tools {
        let tools: Vec<String> = tools
            .iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        payload.tools_allow = Some(tools);
    }
    Ok(())
}

fn apply_delivery(job: &mut CronJob, flags: &JobFlags) -> Result<(), CronError> {
    match &flags.delivery {
        Some(DeliveryChoice::Announce { .. }) => {
            let mut delivery = job
                .delivery
                .take()
                .unwrap_or_else(|| Delivery::new(DeliveryMode::Announce));
            if delivery.mode == DeliveryMode::Webhook {
                delivery.to = None;
            }
            delivery.mode = DeliveryMode::Announce;
            job.delivery = Some(delivery);
        }
        Some(DeliveryChoice::Nowhere) => {
            job.delivery = Some(Delivery::new(DeliveryMode::None));
        }
        Some(DeliveryChoice::Webhook(url)) => {
            let mut delivery = job
                .delivery
                .take()
                .unwrap_or_else(|| Delivery::new(DeliveryMode::Webhook));
            delivery.mode = DeliveryMode::Webhook;
            delivery.channel = None;
            delivery.to = Some(url.trim().to_string());
            job.delivery = Some(delivery);
        }
        None => {}
    }
    let target_flags = flags.channel.is_some() || flags.to.is_some() || flags.account.is_some();
    if target_flags || flags.best_effort.is_some() {
        let delivery = job
            .delivery
            .get_or_insert_with(|| Delivery::new(DeliveryMode::Announce));
        if target_flags && delivery.mode != DeliveryMode::Announce {
            return Err(invalid(
                "delivery",
                "--channel, --to and --account choose where an announce goes (add --announce)",
            ));
        }
        if let Some(channel) = &flags.channel {
            delivery.channel = Some(channel.trim().to_string());
        }
        if let Some(to) = &flags.to {
            delivery.to = Some(to.trim().to_string());
        }
        if let Some(account) = &flags.account {
            delivery.account_id = Some(account.trim().to_string());
        }
        if let Some(best) = flags.best_effort {
            delivery.best_effort = Some(best);
        }
    }
    Ok(())
}

fn apply_failure_alert(job: &mut CronJob, flags: &JobFlags) -> Result<(), CronError> {
    let details = flags.failure_alert_after.is_some()
        || flags.failure_alert_channel.is_some()
        || flags.failure_alert_to.is_some()
        || flags.failure_alert_cooldown.is_some()
        || flags.failure_alert_mode.is_some()
        || flags.failure_alert_account_id.is_some();
    if flags.failure_alert == Some(false) {
        if details {
            return Err(invalid(
                "failureAlert",
                "--no-failure-alert turns alerts off; the other --failure-alert-* flags set them up",
            ));
        }
        job.failure_alert = Some(FailureAlert::Off);
        return Ok(());
    }
    if flags.failure_alert != Some(true) && !details {
        return Ok(());
    }
    let mut alert = match job.failure_alert.take() {
        Some(FailureAlert::On(config)) => config,
        _ => FailureAlertConfig::default(),
    };
    if let Some(after) = flags.failure_alert_after {
        alert.after = Some(after);
    }
    if let Some(channel) = &flags.failure_alert_channel {
        alert.channel = Some(channel.trim().to_string());
    }
    if let Some(to) = &flags.failure_alert_to {
        alert.to = Some(to.trim().to_string());
    }
    if let Some(text) = &flags.failure_alert_cooldown {
        let ms =
            schedule::parse_duration(text).map_err(|e| invalid("failureAlert.cooldownMs", e))?;
        alert.cooldown_ms = Some(ms);
    }
    if let Some(mode) = &flags.failure_alert_mode {
        alert.mode = Some(match mode.as_str() {
            "announce" => DeliveryMode::Announce,
            "webhook" => DeliveryMode::Webhook,
            other => {
                return Err(invalid(
                    "failureAlert.mode",
                    format!("`{other}` is not one of announce, webhook"),
                ));
            }
        });
    }
    if let Some(account) = &flags.failure_alert_account_id {
        alert.account_id = Some(account.trim().to_string());
    }
    job.failure_alert = Some(FailureAlert::On(alert));
    Ok(())
}
