//! One heartbeat run, from the decision to run to the recorded event:
//! the gates (switch, interval, quiet hours, a busy session,
//! `HEARTBEAT.md` empty or with no task due, nothing visible), the
//! prompt, the reply protocol (`HEARTBEAT_OK`, acknowledgements,
//! duplicates), delivery through the caller, and what is kept (the run's
//! event, the tasks' last runs, the last alert).
//!
//! The turn and the delivery are the caller's ([`Runner`]): the gateway
//! runs the turn in the session's lane and delivers through its
//! deliverer; nothing here waits on the network.
//!
//! Invariants:
//! * No model call when a gate says no: a disabled or quiet run, an
//!   effectively empty `HEARTBEAT.md`, a file whose tasks are none due,
//!   or a channel that shows nothing.
//! * A task's last run is stored only after a run whose reply was
//!   handled (not on a failure or a skip before the turn).
//! * With `showOk` off, no delivered text holds `HEARTBEAT_OK`.

use almanac_heartbeat::{ack, duration, file, prompt, schedule};
use serde::Serialize;

use std::time::Duration;

use super::App;
use crate::activity::runs::{self, RunEvent, RunRecord, RunStatus};
use crate::config::{HeartbeatConfig, HeartbeatTarget, HeartbeatVisibility};
use crate::session::store::SessionEntry;
use crate::trigger::{ChatRoute, HeartbeatTurn, TurnRequest};

/// Alerts equal to the last one are not sent again within this window.
const DUPLICATE_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

impl App {
    /// The heartbeat runner's record (events, switch) of this app's
    /// agent: the default agent's where it always was, another agent's
    /// under `agents/<id>/heartbeat/`.
    pub(crate) fn heartbeat_runs(&self) -> RunRecord {
        if self.default_agent {
            return RunRecord::new(&self.paths.heartbeat_runs_dir());
        }
        let dir = self.paths.state_dir.join("agents").join(&self.agent);
        RunRecord::new(&dir.join("heartbeat"))
    }

    fn heartbeat_config(&self) -> &HeartbeatConfig {
        &self.config.config.agents.defaults.heartbeat
    }

    /// The heartbeat interval; `None` when `every` turns it off (`0m`, a
    /// negative or unreadable value).
    pub(crate) fn heartbeat_interval_ms(&self) -> Option<u64> {
        interval_ms(&self.heartbeat_config().every)
    }

    /// When the next interval heartbeat is due after `now_ms`: on the
    /// agent's own phase within the interval (stable for a state
    /// directory), `None` when heartbeats are off.
    pub(crate) fn next_heartbeat_ms(&self, now_ms: i64) -> Option<i64> {
        let interval = self.heartbeat_interval_ms()?;
        let seed = self.paths.state_dir.to_string_lossy();
        let phase = schedule::phase_ms(&seed, &self.agent, interval);
        Some(schedule::next_due(now_ms, interval, phase))
    }
}

/// `every` in ms; `None` for off.
pub(crate) fn interval_ms(every: &str) -> Option<u64> {
    let parsed = duration::parse(every.trim(), duration::Unit::Minutes).ok()?;
    let ms = u64::try_from(parsed.as_millis()).ok()?;
    (ms > 0).then_some(ms)
}

/// Where a run's alert goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destination {
    /// `none`, `outbox`, `webhook` or `chat`.
    pub channel: &'static str,
    /// The webhook URL, or the chat.
    pub to: Option<String>,
    /// Why nothing can be delivered (`target-none`, `no-target`).
    pub unresolved: Option<&'static str>,
    /// A chat's route (for `chat`).
    pub route: Option<ChatRoute>,
}

/// A run that passed the gates: the turn to run and what to do with its
/// reply.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub request: TurnRequest,
    /// The session whose entry keeps the tasks' last runs and the last
    /// alert (the same unless the session is isolated).
    pub base_key: String,
    /// The due tasks the prompt names.
    pub due_tasks: Vec<String>,
    pub destination: Destination,
    pub visibility: HeartbeatVisibility,
    pub ack_max_chars: i64,
    pub include_reasoning: bool,
    /// Epoch ms the run started.
    pub started_ms: i64,
    /// Diagnostics about `HEARTBEAT.md` and the settings.
    pub warnings: Vec<String>,
}

/// What a run does after the gates.
#[derive(Debug)]
pub(crate) enum Prepared {
    Skip(RunEvent),
    Run(Box<Plan>),
}

/// What the turn answered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reply {
    pub text: String,
    pub reasoning: String,
}

/// Where a delivered text went.
#[derive(Debug, Clone, Default)]
pub(crate) struct Delivered {
    pub to: Option<String>,
    /// The receiver has not taken it yet (why); it is retried.
    pub pending: Option<String>,
}

/// The turn and the delivery of a run.
pub(crate) trait Runner {
    fn turn(&mut self, request: TurnRequest) -> anyhow::Result<Reply>;
    fn deliver(&mut self, plan: &Plan, text: &str) -> anyhow::Result<Delivered>;
}

/// Why a wake asked for a run: `interval`, `manual`, `wake`,
/// `exec-event`, `cron:<id>`, `hook:<name>`, `retry`.
fn bypasses_file_gates(reason: &str) -> bool {
    matches!(reason, "wake" | "exec-event")
        || reason.starts_with("cron:")
        || reason.starts_with("hook:")
        || reason == "cron"
        || reason == "hook"
}

/// The gates, in the reference's order, and the plan of a run that
/// passes them. `lane_busy`: a turn runs or waits in the session's lane.
pub(crate) fn prepare(app: &App, reason: &str, lane_busy: bool) -> Prepared {
    let now = app.host.now_ts();
    let now_ms = now.as_millisecond();
    let config = app.heartbeat_config();
    let skip = |why: &str| Prepared::Skip(RunEvent::skipped(now_ms, why));
    if !app.heartbeat_runs().enabled() || app.heartbeat_interval_ms().is_none() {
        return skip("disabled");
    }
    let mut warnings = Vec::new();
    if let Some(hours) = &config.active_hours {
        let (parsed, problems) =
            schedule::ActiveHours::parse(&hours.start, &hours.end, hours.timezone.as_deref());
        warnings.extend(problems);
        if let Some(window) = parsed
            && !window.is_active(now, &app.user_time_zone(), app.host.time_zone())
        {
            return skip("quiet-hours");
        }
    }
    if lane_busy {
        return skip("requests-in-flight");
    }
    let sessions = app.sessions(Some(&app.agent));
    let base_key = sessions.resolve_key(None);
    let heartbeat_file = app.paths.workspace.join("HEARTBEAT.md");
    let text = std::fs::read(&heartbeat_file)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let bypass = bypasses_file_gates(reason);
    let parsed = text.as_deref().map(file::parse);
    if let Some(parsed) = &parsed {
        warnings.extend(parsed.diagnostics.iter().cloned());
    }
    let entry = stored_entry(app, &base_key);
    let last_runs = entry
        .as_ref()
        .map(|e| e.heartbeat_task_state.clone())
        .unwrap_or_default();
    let mut due_tasks = Vec::new();
    if let (Some(text), Some(parsed)) = (&text, &parsed) {
        if !bypass && parsed.tasks.is_empty() && file::is_effectively_empty(text) {
            return skip("empty-heartbeat-file");
        }
        due_tasks = file::due_tasks(&parsed.tasks, |name| last_runs.get(name).copied(), now_ms)
            .into_iter()
            .cloned()
            .collect::<Vec<_>>();
        if !bypass && !parsed.tasks.is_empty() && due_tasks.is_empty() {
            return skip("no-tasks-due");
        }
    }
    let destination = if config.target == HeartbeatTarget::Last {
        let (chat, legacy_webhook) = agent_last_route(app, &base_key);
        destination(config, chat, legacy_webhook)
    } else {
        destination(config, None, false)
    };
    let visibility = if destination.channel == "none" {
        // Nothing is delivered: what a shown run would be is kept as the
        // reference keeps it, so acknowledgements stay silent.
        HeartbeatVisibility {
            show_ok: false,
            show_alerts: true,
            use_indicator: true,
        }
    } else {
        app.config
            .config
            .channels
            .heartbeat_visibility(destination.channel_name())
    };
    if !visibility.show_ok && !visibility.show_alerts && !visibility.use_indicator {
        return skip("alerts-disabled");
    }
    let time = prompt::time_text(&now.to_zoned_datetime(app.user_time_zone()));
    let message = match &parsed {
        Some(parsed) if !due_tasks.is_empty() => {
            let due: Vec<&file::Task> = due_tasks.iter().collect();
            prompt::tasks_body(&due, &parsed.other_content, &time)
        }
        _ => prompt::prompt_body(
            prompt::resolve_prompt(config.prompt.as_deref()),
            &heartbeat_file,
            &time,
        ),
    };
    let session_key = if config.isolated_session {
        isolated_key(&base_key)
    } else {
        base_key.clone()
    };
    let request = TurnRequest {
        message,
        session_key: Some(session_key.clone()),
        agent: Some(app.agent.clone()),
        model: config.model.clone().filter(|m| !m.trim().is_empty()),
        heartbeat: Some(HeartbeatTurn {
            light_context: config.light_context,
            fresh_session: config.isolated_session,
        }),
        channel: None,
        shape: Default::default(),
        ..Default::default()
    };
    Prepared::Run(Box::new(Plan {
        request,
        base_key,
        due_tasks: due_tasks.iter().map(|t| t.name.clone()).collect(),
        destination,
        visibility,
        ack_max_chars: config.ack_max_chars,
        include_reasoning: config.include_reasoning,
        started_ms: now_ms,
        warnings,
    }))
}

/// `<key>:heartbeat`, never with the suffix twice.
fn isolated_key(base: &str) -> String {
    let mut key = base;
    while let Some(rest) = key.strip_suffix(":heartbeat") {
        key = rest;
    }
    format!("{key}:heartbeat")
}

fn destination(
    config: &HeartbeatConfig,
    last: Option<ChatRoute>,
    legacy_webhook: bool,
) -> Destination {
    let webhook = || match config
        .to
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(url) => Destination::new("webhook", Some(url.to_string()), None),
        None => Destination::new("webhook", None, Some("no-target")),
    };
    let outbox = Destination::new("outbox", None, None);
    match config.target {
        HeartbeatTarget::None => Destination::new("none", None, Some("target-none")),
        HeartbeatTarget::Outbox => outbox,
        HeartbeatTarget::Webhook => webhook(),
        HeartbeatTarget::Telegram => match config
            .to
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            Some(chat) => {
                let route = ChatRoute {
                    channel: "telegram".to_string(),
                    to: chat.to_string(),
                    account_id: config.account_id.clone(),
                    thread_id: None,
                    reply_to: None,
                };
                Destination {
                    channel: "chat",
                    to: Some(route.to.clone()),
                    unresolved: None,
                    route: Some(route),
                }
            }
            None => Destination::new("chat", None, Some("no-target")),
        },
        // The chat the user last wrote from; a session last delivered to
        // the heartbeat's webhook (as kept by earlier versions) keeps it;
        // with neither, the outbox stands in.
        HeartbeatTarget::Last => match last {
            Some(route) => Destination {
                channel: "chat",
                to: Some(route.to.clone()),
                unresolved: None,
                route: Some(route),
            },
            None if legacy_webhook => webhook(),
            None => outbox,
        },
    }
}

impl Destination {
    fn new(channel: &'static str, to: Option<String>, unresolved: Option<&'static str>) -> Self {
        Destination {
            channel,
            to,
            unresolved,
            route: None,
        }
    }

    /// The channel whose `channels.<name>.heartbeat` settings apply: a
    /// chat's own channel, else the destination's kind.
    pub(crate) fn channel_name(&self) -> &str {
        match &self.route {
            Some(route) => &route.channel,
            None => self.channel,
        }
    }
}

/// A session's chat route: the chat of the last message a user sent in
/// it (deliveries never change it).
pub(crate) fn chat_route(entry: &SessionEntry) -> Option<ChatRoute> {
    let channel = entry.last_channel.as_deref()?;
    let to = entry.last_to.as_deref()?;
    (!channel.is_empty() && !to.is_empty()).then(|| ChatRoute {
        channel: channel.to_string(),
        to: to.to_string(),
        account_id: entry.last_account_id.clone(),
        thread_id: None,
        reply_to: None,
    })
}

/// The agent's last route: the chat of the newest message a user sent to
/// any of its sessions; else, when its main session was last delivered
/// to the heartbeat's webhook by an earlier version, that webhook.
fn agent_last_route(app: &App, base_key: &str) -> (Option<ChatRoute>, bool) {
    let (map, _) = app.sessions(Some(&app.agent)).store().load();
    let newest = map
        .values()
        .filter_map(SessionEntry::from_value)
        .filter_map(|e| {
            Some((
                e.last_interaction_at.unwrap_or(e.updated_at),
                chat_route(&e)?,
            ))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, route)| route);
    let legacy_webhook = map
        .get(base_key)
        .and_then(SessionEntry::from_value)
        .is_some_and(|e| e.last_channel.as_deref() == Some("webhook") && e.last_to.is_none());
    (newest, legacy_webhook)
}

/// The agent's last route as a `last` delivery target means it (for a
/// hook's or a cron job's result): a chat, a heartbeat webhook kept by an
/// earlier version while its URL is configured, else the outbox.
pub(crate) fn last_route(app: &App) -> Destination {
    let configured = &app.config.config.agents.defaults.heartbeat;
    let key = app.sessions(Some(&app.agent)).resolve_key(None);
    let (chat, legacy_webhook) = agent_last_route(app, &key);
    // A heartbeat turned back to the outbox is no route to its webhook.
    let legacy_webhook = legacy_webhook && configured.target != HeartbeatTarget::Outbox;
    let config = HeartbeatConfig {
        target: HeartbeatTarget::Last,
        ..configured.clone()
    };
    match destination(&config, chat, legacy_webhook) {
        // A webhook route that lost its URL falls back to the outbox.
        Destination {
            unresolved: Some(_),
            ..
        } => Destination::new("outbox", None, None),
        route => route,
    }
}

/// The chat session `key` last heard its user on, when it was a chat.
pub(crate) fn session_chat_route(app: &App, key: &str) -> Option<ChatRoute> {
    chat_route(&stored_entry(app, key)?)
}

fn stored_entry(app: &App, key: &str) -> Option<SessionEntry> {
    app.sessions(Some(&app.agent))
        .store()
        .load()
        .0
        .get(key)
        .and_then(SessionEntry::from_value)
}

/// Runs one heartbeat: the gates, the turn, the reply protocol, the
/// delivery, the record. Returns the run's event (also appended to the
/// run log, except a `requests-in-flight` skip unless `record_busy`: a
/// retried streak is recorded once).
pub(crate) fn run_once(
    app: &App,
    reason: &str,
    lane_busy: bool,
    record_busy: bool,
    runner: &mut dyn Runner,
) -> anyhow::Result<RunEvent> {
    let event = match prepare(app, reason, lane_busy) {
        Prepared::Skip(event) => event,
        Prepared::Run(plan) => {
            for w in &plan.warnings {
                tracing::warn!("{w}");
            }
            run_plan(app, &plan, runner)
        }
    };
    let busy = event.reason.as_deref() == Some("requests-in-flight");
    if record_busy || !busy {
        app.ensure_state_dir()?;
        app.heartbeat_runs().append(&event)?;
    }
    Ok(event)
}

fn run_plan(app: &App, plan: &Plan, runner: &mut dyn Runner) -> RunEvent {
    let began = std::time::Instant::now();
    let mut event = RunEvent {
        ts: plan.started_ms,
        status: RunStatus::Failed,
        reason: None,
        preview: None,
        duration_ms: None,
        to: plan.destination.to.clone(),
        channel: Some(plan.destination.channel_name().to_string()),
        silent: None,
        indicator_type: None,
    };
    let indicator = |kind: &str| plan.visibility.use_indicator.then(|| kind.to_string());
    let reply = match runner.turn(plan.request.clone()) {
        Ok(reply) => reply,
        Err(err) => {
            event.reason = Some(one_line(&format!("{err:#}")));
            event.indicator_type = indicator("error");
            event.duration_ms = Some(began.elapsed().as_millis() as u64);
            return event;
        }
    };
    event.preview = Some(runs::preview(reply.text.trim())).filter(|p| !p.is_empty());
    let verdict = judge(plan, &reply, stored_entry(app, &plan.base_key).as_ref());
    let mut sent_text = None;
    match verdict {
        Verdict::Ack(status) => {
            event.status = status;
            event.indicator_type = indicator("ok");
            if plan.visibility.show_ok && plan.destination.unresolved.is_none() {
                match runner.deliver(plan, almanac_heartbeat::ACK_TOKEN) {
                    Ok(d) => event.to = d.to.or(event.to),
                    Err(err) => event.reason = Some(one_line(&format!("{err:#}"))),
                }
            } else {
                event.silent = Some(true);
            }
        }
        Verdict::Skip(reason) => {
            event.status = RunStatus::Skipped;
            event.reason = Some(reason.to_string());
            if reason != "duplicate" {
                event.indicator_type = indicator("alert");
            }
        }
        Verdict::Deliver(texts) => {
            event.indicator_type = indicator("alert");
            let mut failure = None;
            for text in &texts {
                match runner.deliver(plan, text) {
                    Ok(d) => {
                        event.to = d.to.or(event.to.take());
                        if let Some(why) = d.pending {
                            event.reason = Some(format!("delivery pending: {why}"));
                        }
                    }
                    Err(err) => {
                        failure = Some(one_line(&format!("{err:#}")));
                        break;
                    }
                }
            }
            match failure {
                None => {
                    event.status = RunStatus::Sent;
                    sent_text = texts.last().cloned();
                }
                Some(why) => {
                    event.status = RunStatus::Failed;
                    event.reason = Some(why);
                    event.indicator_type = indicator("error");
                }
            }
        }
    }
    event.duration_ms = Some(began.elapsed().as_millis() as u64);
    if event.status != RunStatus::Failed
        && let Err(err) = remember(app, plan, sent_text.as_deref())
    {
        tracing::warn!("heartbeat state not kept: {err}");
    }
    event
}

/// What to do with a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// An acknowledgement (`ok-empty`, `ok-token`).
    Ack(RunStatus),
    /// Not delivered: `duplicate`, `target-none`, `no-target`,
    /// `alerts-disabled`.
    Skip(&'static str),
    /// Deliver these texts, in order (reasoning first when asked for).
    Deliver(Vec<String>),
}

fn judge(plan: &Plan, reply: &Reply, entry: Option<&SessionEntry>) -> Verdict {
    let text = reply.text.trim();
    if text.is_empty() {
        return Verdict::Ack(RunStatus::OkEmpty);
    }
    let alert = match ack::strip(text, ack::Mode::Heartbeat, plan.ack_max_chars).outcome {
        ack::Outcome::Skip(_) => return Verdict::Ack(RunStatus::OkToken),
        ack::Outcome::Deliver(rest) => rest,
    };
    let alert = if plan.visibility.show_ok {
        alert
    } else {
        ack::scrub(&alert)
    };
    if alert.trim().is_empty() {
        return Verdict::Ack(RunStatus::OkToken);
    }
    if let Some(entry) = entry
        && let (Some(last), Some(at)) = (&entry.last_heartbeat_text, entry.last_heartbeat_sent_at)
        && plan.started_ms - at < DUPLICATE_WINDOW_MS
        && ack::normalize_for_duplicate(last) == ack::normalize_for_duplicate(&alert)
    {
        return Verdict::Skip("duplicate");
    }
    if let Some(why) = plan.destination.unresolved {
        return Verdict::Skip(why);
    }
    if !plan.visibility.show_alerts {
        return Verdict::Skip("alerts-disabled");
    }
    let mut texts = Vec::new();
    let reasoning = reply.reasoning.trim();
    if plan.include_reasoning && !reasoning.is_empty() {
        let reasoning = if plan.visibility.show_ok {
            reasoning.to_string()
        } else {
            ack::scrub(reasoning)
        };
        if !reasoning.trim().is_empty() {
            texts.push(format!("Reasoning:\n{reasoning}"));
        }
    }
    texts.push(alert);
    Verdict::Deliver(texts)
}

/// After a handled reply: the due tasks' last runs, and the alert sent.
fn remember(app: &App, plan: &Plan, sent: Option<&str>) -> std::io::Result<()> {
    if plan.due_tasks.is_empty() && sent.is_none() {
        return Ok(());
    }
    let sessions = app.sessions(Some(&app.agent));
    let now = app.host.now_ts();
    sessions.store().update(now, |map| {
        let value = map
            .entry(plan.base_key.clone())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        let mut entry = SessionEntry::from_value(value).unwrap_or_else(|| SessionEntry {
            // A stub for a key no turn ran in yet (an isolated run's base).
            session_id: plan.base_key.replace(':', "_"),
            updated_at: plan.started_ms,
            ..SessionEntry::default()
        });
        for task in &plan.due_tasks {
            entry
                .heartbeat_task_state
                .insert(task.clone(), plan.started_ms);
        }
        if let Some(text) = sent {
            entry.last_heartbeat_text = Some(text.to_string());
            entry.last_heartbeat_sent_at = Some(plan.started_ms);
        }
        entry.write_into(value);
    })?;
    Ok(())
}

/// A heartbeat alert whose webhook delivery ran out of retries: it no
/// longer counts as sent, so the same alert is not held back as a
/// duplicate, and a `failed` event records the delivery's reason.
pub(crate) fn delivery_gave_up(
    app: &App,
    session_key: &str,
    text: &str,
    delivery_id: &str,
    reason: &str,
) -> anyhow::Result<()> {
    let now = app.host.now_ts();
    app.sessions(Some(&app.agent)).store().update(now, |map| {
        if let Some(value) = map.get_mut(session_key)
            && let Some(mut entry) = SessionEntry::from_value(value)
            && entry.last_heartbeat_text.as_deref() == Some(text)
        {
            entry.last_heartbeat_text = None;
            entry.last_heartbeat_sent_at = None;
            entry.write_into(value);
        }
    })?;
    let mut event = RunEvent::ended(
        now.as_millisecond(),
        RunStatus::Failed,
        &one_line(&format!("delivery {delivery_id} failed: {reason}")),
    );
    event.preview = Some(runs::preview(text.trim()));
    app.heartbeat_runs().append(&event)?;
    Ok(())
}

fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(300).collect()
}

/// `system heartbeat last`: the newest run's event, if any.
pub(crate) fn last_event(app: &App) -> anyhow::Result<Option<RunEvent>> {
    Ok(app.heartbeat_runs().last()?)
}

/// `system heartbeat enable|disable`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Switched {
    pub enabled: bool,
    pub changed: bool,
}

/// Persists the switch; a running gateway is told at once.
pub(crate) fn set_enabled(app: &App, enabled: bool) -> anyhow::Result<Switched> {
    app.ensure_state_dir()?;
    let changed = app.heartbeat_runs().set_enabled(enabled)?;
    if let Some(client) = app.gateway_client()? {
        let path = if enabled {
            "/v1/system/heartbeat/enable"
        } else {
            "/v1/system/heartbeat/disable"
        };
        client.post(path, &serde_json::json!({}), Duration::from_secs(5))?;
    }
    Ok(Switched { enabled, changed })
}

/// `system heartbeat run-now`: through the running gateway only; waits
/// until the outcome and any delivery are recorded.
pub(crate) fn run_now(app: &App) -> anyhow::Result<RunEvent> {
    let client = app.require_gateway()?;
    // A turn, then a delivery that may be retried once: the model's own
    // time limit plus a margin.
    let limit =
        Duration::from_secs(u64::from(app.config.config.agents.defaults.timeout_seconds) + 120);
    let body = if app.default_agent {
        serde_json::json!({})
    } else {
        serde_json::json!({"agentId": app.agent})
    };
    let value = client.post("/v1/system/heartbeat/run", &body, limit)?;
    Ok(serde_json::from_value(value)?)
}

#[cfg(test)]
#[path = "heartbeat_tests.rs"]
mod tests;
