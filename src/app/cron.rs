//! The `cron` commands: adding, changing, removing, enabling and listing
//! scheduled jobs in the job store, reading their run logs, and asking a
//! running gateway to run one now. The model's `cron` tool
//! (`app/cron_tool.rs`) uses the same functions.
//!
//! Everything but `cron run` works on the files, with or without a
//! gateway: changes are read-modify-writes under the store's lock, and a
//! running gateway is told at once (the command over its control API; a
//! turn inside the gateway directly). `cron list`, `cron status` and
//! `cron runs` change nothing on disk but the derived index.
//!
//! One way in for every new job and every change: a job built from the
//! command's flags and one the tool gives as JSON both go through
//! [`add_job`], and every change through [`change_job`] (the defaults of
//! a new or changed schedule, the [`Requester`]'s rules, the job rules of
//! [`CronJob::validate`], the next run, one write under the lock). What the
//! flags of `cron add` and `cron edit` say is read in `cron_flags.rs`.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::App;
use crate::cron::job::{
    Check, CronJob, Delivery, DeliveryMode, JobError, JobState, PayloadKind, ScheduleKind,
    ScheduleSpec, SessionTarget,
};
use crate::cron::runlog::{self, RunPage, RunQuery};
use crate::cron::{CronError, CronStore, ListQuery, Listing, schedule};
use crate::delivery::url::UrlOrigin;

pub(crate) use super::cron_flags::{DeliveryChoice, JobFlags};
use super::cron_flags::{
    apply, check_schedule_only_flags, deprecated_flags, job_from_flags, new_schedule,
};

/// How long `cron run` waits for the gateway's answer.
pub(crate) const RUN_ANSWER_WAIT: Duration = Duration::from_secs(60);

impl App {
    /// `cron.store` (`~` expanded), else `<state dir>/cron/jobs.json`.
    pub(crate) fn cron_store_path(&self) -> PathBuf {
        match self.config.config.cron.store.as_deref().map(str::trim) {
            Some(path) if !path.is_empty() => self.host.resolve_path(path),
            _ => self.paths.state_dir.join("cron").join("jobs.json"),
        }
    }

    /// The job store, its index in the state store, cron expressions
    /// without a zone in the host's.
    pub(crate) fn cron_store(&self) -> CronStore {
        CronStore::new(
            self.cron_store_path(),
            self.paths.state_store(),
            self.host.time_zone().clone(),
        )
    }

    /// The warning every cron command gives while `cron.enabled` is off.
    pub(crate) fn cron_switch_warning(&self) -> Option<String> {
        (!self.config.config.cron.enabled)
            .then(|| "cron.enabled is false: jobs are kept, but the gateway runs none".to_string())
    }
}

/// A job as `cron add`, `edit`, `enable` and `disable` print it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobChanged {
    pub ok: bool,
    pub job: CronJob,
    /// What was done besides what was asked.
    #[serde(skip)]
    pub notes: Vec<String>,
    /// Whether the store changed (enabling an enabled job does not).
    #[serde(skip)]
    pub written: bool,
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// What `cron rm` did: `{ok, removed, id}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Removed {
    pub ok: bool,
    pub removed: bool,
    pub id: String,
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `cron status`: `{enabled, storePath, jobs, nextWakeAtMs}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CronStatus {
    pub enabled: bool,
    pub store_path: PathBuf,
    pub jobs: usize,
    pub next_wake_at_ms: Option<i64>,
    /// Jobs that are enabled.
    #[serde(skip)]
    pub enabled_jobs: usize,
    /// Whether a gateway runs (jobs run only while one does).
    #[serde(skip)]
    pub gateway_running: bool,
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// Damaged stores moved aside, newest first (the store was restored
    /// from its last good copy); empty once they are removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<PathBuf>,
}

pub(super) fn invalid(field: &str, message: impl Into<String>) -> CronError {
    CronError::Job(JobError::Invalid {
        field: field.to_string(),
        message: message.into(),
    })
}

/// Who asks for a job or a change of one. The user (a `cron` command)
/// may do whatever the job rules allow; the model (its `cron` tool) only
/// for its own agent, its webhook URLs must not reach this machine or its
/// networks (unless `delivery.webhook.allowPrivateNetwork`), and the jobs
/// it creates say so (`"createdBy": "agent"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requester {
    /// A `cron` command.
    User,
    /// The model, in a turn of `agent_id` in the session `session_key`.
    Agent {
        agent_id: String,
        session_key: String,
    },
    /// A client of the MCP server (a model too), for `agent_id`, whose
    /// main session is `session_key`.
    Mcp {
        agent_id: String,
        session_key: String,
    },
}

impl Requester {
    /// The agent and session of a model's request (`None`: the user's).
    pub(crate) fn model(&self) -> Option<(&str, &str)> {
        match self {
            Requester::User => None,
            Requester::Agent {
                agent_id,
                session_key,
            }
            | Requester::Mcp {
                agent_id,
                session_key,
            } => Some((agent_id, session_key)),
        }
    }

    /// The job's `createdBy` for a model's request.
    fn created_by(&self) -> &'static str {
        match self {
            Requester::Mcp { .. } => crate::cron::job::CREATED_BY_MCP,
            _ => crate::cron::job::CREATED_BY_AGENT,
        }
    }
}

/// The agent a job with `agent_id` runs as: that one, or the default
/// agent for none.
pub(crate) fn job_agent(app: &App, agent_id: Option<&str>) -> String {
    match agent_id.map(str::trim).filter(|a| !a.is_empty()) {
        Some(id) => normalize_agent_id(id),
        None => app
            .agents()
            .map(|a| a.default_agent().id.clone())
            .unwrap_or_else(|_| crate::agents::MAIN.to_string()),
    }
}

/// A job's `agentId` names an agent of the config (none: the default).
fn check_agent(app: &App, job: &CronJob) -> Result<(), JobError> {
    let Some(id) = job.agent_id.as_deref() else {
        return Ok(());
    };
    match app.agents() {
        Ok(agents) => agents
            .require(id)
            .map(|_| ())
            .map_err(|e| JobError::Invalid {
                field: "agentId".into(),
                message: e.to_string(),
            }),
        // A config whose agents cannot be read fails elsewhere with its
        // own message.
        Err(_) => Ok(()),
    }
}

/// `cron add`: a new job from `flags` (which must give a name, one
/// schedule and one payload).
pub(crate) fn add(app: &App, flags: &JobFlags) -> anyhow::Result<JobChanged> {
    let now_ms = app.now_ms();
    let mut notes = Vec::new();
    let job = job_from_flags(flags, now_ms, &mut notes)?;
    let mut added = add_job(app, job, &Requester::User)?;
    tell_gateway(app, added.written);
    added.notes.extend(notes);
    added.warnings.extend(deprecated_flags(flags));
    Ok(added)
}

/// A new job as JSON (the model's `cron` tool): OpenClaw's job schema,
/// older spellings read as the store reads them. The id, the times and
/// the runtime state are almanac's to set.
pub(crate) fn add_from_json(
    app: &App,
    value: &Value,
    requester: &Requester,
    prepare: impl FnOnce(&mut CronJob),
) -> anyhow::Result<JobChanged> {
    let Value::Object(given) = value else {
        return Err(invalid("job", "a job is a JSON object").into());
    };
    let mut map = given.clone();
    for field in SET_BY_ALMANAC {
        map.shift_remove(*field);
    }
    map.insert("id".into(), json!(uuid::Uuid::new_v4().to_string()));
    let mut job = CronJob::from_json(&Value::Object(map))?;
    prepare(&mut job);
    add_job(app, job, requester)
}

/// Fields of a job only almanac sets: given in a new job they are
/// ignored, in a change they are refused.
const SET_BY_ALMANAC: &[&str] = &[
    "id",
    "jobId",
    "createdAtMs",
    "updatedAtMs",
    "state",
    crate::cron::job::CREATED_BY,
    crate::cron::job::USER_WEBHOOKS,
];

/// Adds `job` (from flags or JSON) to the store: the defaults of a new
/// job filled in (an id, its times, `current` resolved, `deleteAfterRun`
/// for one-shots, an announce for agent turns, the stagger of a
/// top-of-hour expression, an interval's anchor, `at` in its stored
/// form), the requester's rules and the job rules checked, its next run
/// planned, then one read-modify-write under the store's lock. A running
/// gateway is not told: the caller does that, as it can.
pub(crate) fn add_job(
    app: &App,
    mut job: CronJob,
    requester: &Requester,
) -> anyhow::Result<JobChanged> {
    let now = app.host.now_ts();
    let now_ms = now.as_millisecond();
    if job.id.trim().is_empty() {
        job.id = uuid::Uuid::new_v4().to_string();
    }
    job.created_at_ms = now_ms;
    job.updated_at_ms = now_ms;
    job.state = JobState::default();
    job.agent_id = job.agent_id.as_deref().map(normalize_agent_id);
    if let Some((agent_id, session_key)) = requester.model() {
        job.session_key = Some(session_key.to_string());
        job.mark_created_by(requester.created_by());
        // A job a turn of another agent than the default schedules is
        // that agent's.
        if job.agent_id.is_none() && job_agent(app, None) != normalize_agent_id(agent_id) {
            job.agent_id = Some(normalize_agent_id(agent_id));
        }
    }
    resolve_current(&mut job);
    if job.schedule.kind == ScheduleKind::At && job.delete_after_run.is_none() {
        job.delete_after_run = Some(true);
    }
    if job.payload.kind == PayloadKind::AgentTurn && job.delivery.is_none() {
        job.delivery = Some(Delivery::new(DeliveryMode::Announce));
    }
    complete_schedule(&mut job.schedule, None, now_ms);
    check_requester(app, None, &job, requester)?;
    check_agent(app, &job)?;
    plan_next_run(app, &mut job, now_ms);
    job.validate(&Check {
        now_ms,
        host_zone: app.host.time_zone(),
        at_is_new: job.schedule.kind == ScheduleKind::At,
    })?;
    let changed = app.cron_store().add(&job, now)?;
    let mut warnings = changed.warnings;
    warnings.extend(app.cron_switch_warning());
    Ok(JobChanged {
        ok: true,
        job,
        notes: Vec::new(),
        written: changed.written.is_some(),
        warnings,
    })
}

/// What a new or changed schedule gets that was not given: the stored
/// form of an `at` time, the anchor of an interval (now), and for a cron
/// expression the previous schedule's stagger when it was one too, else
/// the default window of a top-of-hour expression.
fn complete_schedule(schedule: &mut ScheduleSpec, previous: Option<&ScheduleSpec>, now_ms: i64) {
    match schedule.kind {
        ScheduleKind::At => {
            if let Ok(at) = schedule.at_ms() {
                schedule.at = Some(crate::cron::job::iso_ms(at));
            }
        }
        ScheduleKind::Every => {
            if schedule.anchor_ms.is_none() {
                schedule.anchor_ms = Some(now_ms);
            }
        }
        ScheduleKind::Cron => {
            if schedule.stagger_ms.is_none() {
                schedule.stagger_ms = previous
                    .filter(|p| p.kind == ScheduleKind::Cron)
                    .and_then(|p| p.stagger_ms)
                    .or_else(|| {
                        let default =
                            schedule::default_stagger(schedule.expr.as_deref().unwrap_or(""));
                        (default > 0).then_some(default)
                    });
            }
        }
    }
}

/// `current` is resolved when a job is created or changed: the session
/// it was asked from (`session:<key>`), else a fresh one each run.
pub(super) fn resolve_current(job: &mut CronJob) {
    if job.session_target == SessionTarget::Current {
        job.session_target = match &job.session_key {
            Some(key) => SessionTarget::Session(key.clone()),
            None => SessionTarget::Isolated,
        };
    }
}

/// The rules of what the model may schedule (none for the user):
/// its own agent only, and webhook URLs that do not reach this machine or
/// its networks unless `delivery.webhook.allowPrivateNetwork`; the URLs
/// of a job the user created stay the user's. `previous` is the job
/// before a change.
fn check_requester(
    app: &App,
    previous: Option<&CronJob>,
    job: &CronJob,
    requester: &Requester,
) -> Result<(), CronError> {
    let Some((agent_id, _)) = requester.model() else {
        return Ok(());
    };
    if job_agent(app, job.agent_id.as_deref()) != normalize_agent_id(agent_id) {
        return Err(invalid(
            "agentId",
            format!(
                "`{}` is another agent: jobs scheduled from a turn run as its own agent, `{agent_id}`",
                job.agent()
            ),
        ));
    }
    // What came from outside stays marked: the model can neither lift
    // the marking nor take the mark of where it came from away.
    let was_unsafe =
        previous.is_some_and(|p| p.payload.allow_unsafe_external_content == Some(true));
    if job.payload.allow_unsafe_external_content == Some(true) && !was_unsafe {
        return Err(invalid(
            "payload.allowUnsafeExternalContent",
            "only the user lets external content reach the model unmarked (almanac cron edit, or jobs.json)",
        ));
    }
    if let Some(source) = previous.and_then(|p| p.payload.external_content_source.as_ref())
        && job.payload.external_content_source.as_ref() != Some(source)
    {
        return Err(invalid(
            "payload.externalContentSource",
            "where a job's message came from is not the model's to change",
        ));
    }
    let allow_private = app.config.config.delivery.webhook.allow_private_network;
    let before = previous.map(CronJob::webhook_urls).unwrap_or_default();
    for (field, url) in job.webhook_urls() {
        if before.contains(&(field, url)) {
            continue;
        }
        if previous.is_some_and(|p| !p.created_by_agent()) {
            return Err(invalid(
                field,
                "the webhook addresses of a job the user created are the user's to change (almanac cron edit)",
            ));
        }
        crate::delivery::url::check_url(url, UrlOrigin::Model, allow_private)
            .map_err(|refused| invalid(field, refused.to_string()))?;
    }
    Ok(())
}

/// A running gateway re-reads the store at once after a command changed
/// it (it would at its next tick, within a minute, anyway).
pub(crate) fn tell_gateway(app: &App, written: bool) {
    if !written {
        return;
    }
    if let Ok(Some(client)) = app.gateway_client()
        && let Err(err) = client.post("/v1/cron/reload", &json!({}), Duration::from_secs(5))
    {
        tracing::debug!(%err, "the gateway was not told of the change");
    }
}

/// `cron edit`: changes the job `lookup` names as `flags` say.
pub(crate) fn edit(app: &App, lookup: &str, flags: &JobFlags) -> anyhow::Result<JobChanged> {
    if *flags == JobFlags::default() {
        return Err(invalid(
            "edit",
            "nothing to change: give the flags of the fields to change",
        )
        .into());
    }
    let mut changed = change_job(app, lookup, &Requester::User, |job, now_ms, notes| {
        if let Some(schedule) = new_schedule(flags, Some(&job.schedule), now_ms)? {
            check_schedule_only_flags(flags, &schedule)?;
            job.schedule = schedule;
        }
        apply(job, flags, false, notes)
    })?;
    tell_gateway(app, changed.written);
    changed.warnings.extend(deprecated_flags(flags));
    Ok(changed)
}

/// A change of a job as JSON (the model's `cron` tool): `patch` holds the
/// fields to change (`null` clears one). `schedule` is replaced whole
/// (a cron expression keeps its stagger unless one is given); `payload`,
/// `delivery` and `failureAlert` are merged field by field, except that a
/// payload of another kind replaces the old one, whose target then
/// follows it (`main` for a system event, `isolated` for an agent turn)
/// unless the patch names one. The id, times, runtime state and who
/// created the job are almanac's; a turn cannot move a job to another
/// session key.
pub(crate) fn update_from_json(
    app: &App,
    lookup: &str,
    patch: &Value,
    requester: &Requester,
) -> anyhow::Result<JobChanged> {
    let Value::Object(patch) = patch else {
        return Err(invalid("patch", "a patch is a JSON object of the fields to change").into());
    };
    if patch.is_empty() {
        return Err(invalid("patch", "nothing to change: the patch is empty").into());
    }
    let mut refused: Vec<&str> = SET_BY_ALMANAC.to_vec();
    if requester.model().is_some() {
        refused.push("sessionKey");
    }
    if let Some(field) = refused.iter().find(|f| patch.contains_key(**f)) {
        return Err(invalid(field, "is not for a change to set").into());
    }
    change_job(app, lookup, requester, |job, _, notes| {
        let mut map = job.to_map();
        let mut kind_changed = false;
        for (key, value) in patch {
            let merged = match (key.as_str(), map.get_mut(key), value) {
                (_, _, Value::Null) | ("schedule", _, _) => false,
                ("payload", Some(Value::Object(old)), Value::Object(new))
                    if payload_kind(new).is_none_or(|k| old.get("kind") == Some(&k)) =>
                {
                    merge_patch(old, new);
                    true
                }
                ("delivery" | "failureAlert", Some(Value::Object(old)), Value::Object(new)) => {
                    merge_patch(old, new);
                    true
                }
                _ => false,
            };
            if merged {
                continue;
            }
            if value.is_null() {
                map.shift_remove(key);
            } else {
                kind_changed |= key == "payload";
                map.insert(key.clone(), value.clone());
            }
        }
        let target_given = patch.contains_key("sessionTarget");
        if kind_changed && !target_given {
            // The target follows a payload of the other kind.
            map.shift_remove("sessionTarget");
        }
        let before = job.clone();
        let mut changed = CronJob::from_json(&Value::Object(map))?;
        if changed.session_target == SessionTarget::Main
            && before.session_target != SessionTarget::Main
            && changed
                .delivery
                .as_ref()
                .is_some_and(|d| d.mode == DeliveryMode::Announce)
            && !patch.contains_key("delivery")
        {
            changed.delivery = None;
            notes.push(
                "its announce delivery was dropped: a main job's result is the heartbeat's".into(),
            );
        }
        *job = changed;
        Ok(())
    })
}

/// The kind of a payload given as JSON: its `kind`, else the kind its
/// fields mean (`message`: an agent turn, `text`: a system event).
fn payload_kind(payload: &serde_json::Map<String, Value>) -> Option<Value> {
    match payload.get("kind") {
        Some(kind) => Some(kind.clone()),
        None if payload.contains_key("message") => Some(json!("agentTurn")),
        None if payload.contains_key("text") => Some(json!("systemEvent")),
        None => None,
    }
}

/// RFC 7386's merge: `patch`'s fields over `target`'s, objects merged
/// field by field, `null` removing a field.
fn merge_patch(
    target: &mut serde_json::Map<String, Value>,
    patch: &serde_json::Map<String, Value>,
) {
    for (key, value) in patch {
        match (target.get_mut(key), value) {
            (_, Value::Null) => {
                target.shift_remove(key);
            }
            (Some(Value::Object(old)), Value::Object(new)) => merge_patch(old, new),
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Changes the job `lookup` names (its id, or the start of one) with
/// `change`, under the store's lock: then the schedule completed as for
/// a new job, `current` resolved (to the requester's session for the
/// model), the requester's rules and the job rules checked (an `at` time
/// the change set must lie ahead), the next run planned again when the
/// schedule or the switch changed, and the store written when its bytes
/// differ. A running gateway is not told: the caller does that.
pub(crate) fn change_job(
    app: &App,
    lookup: &str,
    requester: &Requester,
    change: impl FnOnce(&mut CronJob, i64, &mut Vec<String>) -> Result<(), CronError>,
) -> anyhow::Result<JobChanged> {
    let now = app.host.now_ts();
    let now_ms = now.as_millisecond();
    let store = app.cron_store();
    let id = store.resolve(lookup, now_ms)?;
    let mut notes = Vec::new();
    let changed = store.modify_job(&id, now, |stored| {
        let current = stored.clone();
        let mut job = current.clone();
        change(&mut job, now_ms, &mut notes)?;
        // What only almanac sets stays as it was.
        job.id = current.id.clone();
        job.created_at_ms = current.created_at_ms;
        job.state = current.state.clone();
        job.updated_at_ms = now_ms;
        job.agent_id = job.agent_id.as_deref().map(normalize_agent_id);
        if job.schedule != current.schedule {
            complete_schedule(&mut job.schedule, Some(&current.schedule), now_ms);
        }
        if job.session_target == SessionTarget::Current
            && let Some((_, session_key)) = requester.model()
        {
            job.session_target = SessionTarget::Session(session_key.to_string());
        }
        resolve_current(&mut job);
        check_requester(app, Some(&current), &job, requester)?;
        // A URL the user sets in a job the model made is the user's.
        if *requester == Requester::User && job.created_by_agent() {
            let before = current.webhook_urls();
            let set: Vec<String> = job
                .webhook_urls()
                .into_iter()
                .filter(|url| !before.contains(url))
                .map(|(_, url)| url.to_string())
                .collect();
            for url in set {
                job.mark_set_by_user(&url);
            }
        }
        if job.schedule != current.schedule || job.enabled != current.enabled {
            job.state.next_run_at_ms = None;
        }
        plan_next_run(app, &mut job, now_ms);
        let at_is_new = job.schedule.kind == ScheduleKind::At
            && (current.schedule.kind != ScheduleKind::At
                || current.schedule.at != job.schedule.at);
        if job.agent_id != current.agent_id {
            check_agent(app, &job)?;
        }
        job.validate(&Check {
            now_ms,
            host_zone: app.host.time_zone(),
            at_is_new,
        })?;
        *stored = job.clone();
        Ok(job)
    })?;
    let mut warnings = changed.warnings;
    warnings.extend(app.cron_switch_warning());
    Ok(JobChanged {
        ok: true,
        job: changed.value,
        notes,
        written: changed.written.is_some(),
        warnings,
    })
}

/// The target a new job of `kind` gets when none is named.
pub(super) fn default_target(kind: PayloadKind) -> SessionTarget {
    match kind {
        PayloadKind::SystemEvent => SessionTarget::Main,
        PayloadKind::AgentTurn => SessionTarget::Isolated,
    }
}

/// `cron enable` / `cron disable`.
pub(crate) fn set_enabled(app: &App, lookup: &str, enabled: bool) -> anyhow::Result<JobChanged> {
    let now = app.host.now_ts();
    let now_ms = now.as_millisecond();
    let store = app.cron_store();
    let id = store.resolve(lookup, now_ms)?;
    let changed = store.modify_job(&id, now, |job| {
        if job.enabled != enabled {
            job.enabled = enabled;
            job.updated_at_ms = now_ms;
            job.state.next_run_at_ms = None;
        }
        plan_next_run(app, job, now_ms);
        Ok(job.clone())
    })?;
    tell_gateway(app, changed.written.is_some());
    let mut warnings = changed.warnings;
    warnings.extend(app.cron_switch_warning());
    Ok(JobChanged {
        ok: true,
        job: changed.value,
        notes: Vec::new(),
        written: changed.written.is_some(),
        warnings,
    })
}

/// `cron rm`.
pub(crate) fn remove(app: &App, lookup: &str) -> anyhow::Result<Removed> {
    let (removed, written) = remove_job(app, lookup)?;
    tell_gateway(app, written);
    Ok(removed)
}

/// Removes the job `lookup` names; whether the store was written. A
/// running gateway is not told: the caller does that.
pub(crate) fn remove_job(app: &App, lookup: &str) -> anyhow::Result<(Removed, bool)> {
    let now = app.host.now_ts();
    let store = app.cron_store();
    let id = store.resolve(lookup, now.as_millisecond())?;
    let changed = store.remove(&id, now)?;
    Ok((
        Removed {
            ok: true,
            removed: changed.value,
            id,
            warnings: changed.warnings,
        },
        changed.written.is_some(),
    ))
}

/// `cron list`: a page of jobs from the index.
pub(crate) fn list(app: &App, query: &ListQuery) -> anyhow::Result<Listing> {
    let mut listing = app.cron_store().list(query, app.now_ms())?;
    listing.warnings.extend(app.cron_switch_warning());
    Ok(listing)
}

/// `cron status`.
pub(crate) fn status(app: &App) -> anyhow::Result<CronStatus> {
    let store = app.cron_store();
    let overview = store.overview(app.now_ms())?;
    let mut warnings = overview.warnings;
    warnings.extend(app.cron_switch_warning());
    let damaged = store.damaged_copies();
    if let Some(newest) = damaged.first() {
        warnings.push(format!(
            "{} did not parse and was restored from its last good copy; the damaged file is {} (remove it once you have looked at it)",
            store.path().display(),
            newest.display()
        ));
    }
    Ok(CronStatus {
        enabled: app.config.config.cron.enabled,
        store_path: store.path().to_path_buf(),
        jobs: overview.jobs,
        next_wake_at_ms: overview.next_wake_at_ms,
        enabled_jobs: overview.enabled,
        gateway_running: crate::gateway_client::discovery::running(&app.paths).is_some(),
        warnings,
        damaged,
    })
}

/// `cron runs`: the run log of the job `lookup` names (a removed job's
/// log is found by its whole id).
pub(crate) fn runs(app: &App, lookup: &str, query: &RunQuery) -> anyhow::Result<RunPage> {
    let store = app.cron_store();
    let runs_dir = store.runs_dir();
    let by_name = runlog::log_path(&runs_dir, lookup.trim())
        .ok()
        .filter(|p| p.exists());
    let id = match by_name {
        Some(_) => lookup.trim().to_string(),
        None => match store.resolve(lookup, app.now_ms()) {
            Ok(id) => id,
            // A job removed since (a one-shot that ran) keeps its log.
            Err(CronError::NotFound(missing)) => {
                let logged =
                    runlog::ids_with_prefix(&runs_dir, lookup.trim()).map_err(|source| {
                        CronError::Io {
                            path: runs_dir.clone(),
                            source,
                        }
                    })?;
                match logged.as_slice() {
                    [id] => id.clone(),
                    [] => return Err(CronError::NotFound(missing).into()),
                    _ => return Err(CronError::Ambiguous(lookup.to_string()).into()),
                }
            }
            Err(err) => return Err(err.into()),
        },
    };
    Ok(runlog::read(&runs_dir, &id, query)?)
}

/// `cron run`: asks the running gateway to run the job now (`due`: only
/// if it is due). The gateway's answer: `{ok, ran?, enqueued?, reason?,
/// runId?}`.
pub(crate) fn run(app: &App, lookup: &str, due: bool) -> anyhow::Result<Value> {
    let client = app.require_gateway()?;
    let id = app.cron_store().resolve(lookup, app.now_ms())?;
    let path = format!(
        "/v1/cron/jobs/{}/run",
        crate::gateway_client::client::path_segment(&id)
    );
    let mode = if due { "due" } else { "force" };
    let mut answer = client.post(&path, &json!({"mode": mode}), RUN_ANSWER_WAIT)?;
    if answer.get("id").is_none()
        && let Value::Object(map) = &mut answer
    {
        map.insert("id".into(), json!(id));
    }
    Ok(answer)
}

/// An agent id as OpenClaw normalises it: lower case, runs of other
/// characters as `-`, at most 64 characters, empty → `main`.
pub(super) fn normalize_agent_id(text: &str) -> String {
    let lower = text.trim().to_ascii_lowercase();
    let mut out = String::new();
    for c in lower.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_matches('-').chars().take(64).collect();
    if out.is_empty() {
        crate::cron::job::DEFAULT_AGENT.to_string()
    } else {
        out
    }
}

/// Fills the job's next run when it has none (and clears it while the job
/// is disabled): what `cron list` shows before a gateway has run it.
fn plan_next_run(app: &App, job: &mut CronJob, now_ms: i64) {
    if !job.enabled {
        job.state.next_run_at_ms = None;
        job.state.running_at_ms = None;
        return;
    }
    if job.state.next_run_at_ms.is_none() {
        job.state.next_run_at_ms = schedule::next_run(job, now_ms, app.host.time_zone());
    }
}

#[cfg(test)]
#[path = "cron_tests.rs"]
pub(crate) mod tests;
