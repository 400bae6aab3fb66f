//! The Telegram poller: one supervised component per configured account,
//! long polling `getUpdates`, turning each update into a routed chat run
//! ([`super::chat_runs`]), a pairing code, a command's answer, or
//! nothing.
//!
//! Invariants:
//! * One poller per bot token per state directory: the account's lock
//!   file is held while it polls; a second gateway waits and says so.
//! * The update offset (`telegram/update-offset-<account>.json`) moves
//!   only once every update up to it is in the intake log (one write),
//!   so a kill -9 neither loses nor repeats a message: a message fed
//!   twice is one task, answered once.
//! * A flood waits at Telegram: with [`CHAT_RUNS_IN_FLIGHT`] chat runs
//!   queued or running, the poller asks for no more updates until some
//!   end, so a burst does not grow the gateway's memory.
//! * Errors never spin: 409 Conflict backs off from 5 s to 5 min, a
//!   revoked token (401) waits 5 min, a rate limit its `retry_after`,
//!   anything else 1 s doubling to a minute; each shows in `gateway
//!   status` as the account's row's last error, with the token masked.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::chat_runs::{ChatOrigin, Routed};
use super::supervisor::{Component, ComponentKind};
use crate::channels::telegram::access::{self, Decision};
use crate::channels::telegram::api::{ApiError, Me};
use crate::channels::telegram::update::{self, ChatKind, Command, Inbound, Update};
use crate::channels::telegram::{self as tg, Account, store};
use crate::trigger::{ChatContext, ChatPeer, TurnRequest};

/// How long one `getUpdates` waits for a message.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// Chat runs in flight above which the poller asks for no more updates
/// until some end: a flood waits at Telegram (which keeps updates for a
/// day) rather than in the gateway's memory. Two `getUpdates` batches.
const CHAT_RUNS_IN_FLIGHT: usize = 200;
/// How long a second poller waits before looking at the lock again.
const LOCK_RETRY: Duration = Duration::from_secs(30);

/// The poller of one account.
pub(crate) struct TelegramPoller {
    account: String,
    /// `telegram:<account>`: the component's row in `gateway status`.
    name: &'static str,
}

impl TelegramPoller {
    /// The pollers of the accounts `shared`'s config enables (read once,
    /// at start: a new account needs a restart).
    pub(crate) fn for_config(shared: &Shared) -> Vec<Arc<dyn Component>> {
        let app = shared.engine.app();
        let resolve = |file: &str| app.host.resolve_path(file);
        let env = app.host.var("TELEGRAM_BOT_TOKEN");
        tg::accounts(&app.config.config, env, &resolve)
            .into_iter()
            .map(|a| {
                // The name lives as long as the process: one per account.
                let name: &'static str = Box::leak(format!("telegram:{}", a.id).into_boxed_str());
                Arc::new(TelegramPoller {
                    account: a.id,
                    name,
                }) as Arc<dyn Component>
            })
            .collect()
    }
}

impl Component for TelegramPoller {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Telegram(self.name)
    }

    fn start(
        self: Arc<Self>,
        shared: Arc<Shared>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move { self.poll(&shared, &stop).await })
    }
}

/// Waits `wait`, or less when stopped; whether it was stopped.
async fn pause(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// The wait after `err`, given the last one.
fn backoff(err: &ApiError, last: Option<Duration>) -> Duration {
    let doubled = |from: Duration, max: Duration| last.map_or(from, |l| (l * 2).clamp(from, max));
    match err {
        ApiError::Conflict(_) => doubled(Duration::from_secs(5), Duration::from_secs(300)),
        ApiError::Unauthorized => Duration::from_secs(300),
        ApiError::RetryAfter(s) => Duration::from_secs((*s).clamp(1, 3600)),
        _ => doubled(Duration::from_secs(1), Duration::from_secs(60)),
    }
}

impl TelegramPoller {
    fn report(&self, shared: &Shared, problem: Option<String>) {
        shared.registry.report(self.kind(), problem);
    }

    async fn poll(&self, shared: &Arc<Shared>, stop: &CancellationToken) -> anyhow::Result<()> {
        // The lock is the bot's (the token's id part), not the account's:
        // two accounts or two state directories' gateways naming one
        // token would take each other's updates.
        let bot = loop {
            match shared.engine.telegram_account(Some(&self.account)) {
                Ok((_, account)) => break bot_of(account.token.as_deref().unwrap_or_default()),
                Err(why) => {
                    self.report(shared, Some(why));
                    if pause(stop, Duration::from_secs(60)).await {
                        return Ok(());
                    }
                }
            }
        };
        let _lock = match self.lock(shared, &bot, stop).await? {
            Some(lock) => lock,
            None => return Ok(()),
        };
        let mut history = History::default();
        let mut last_wait = None;
        loop {
            let (api, account) = match shared.engine.telegram_account(Some(&self.account)) {
                Ok(found) => found,
                Err(why) => {
                    self.report(shared, Some(why));
                    if pause(stop, Duration::from_secs(60)).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            let me = match api.get_me().await {
                Ok(me) => me,
                Err(err) => {
                    let wait = backoff(&err, last_wait);
                    last_wait = Some(wait);
                    self.report(shared, Some(format!("getMe: {err}")));
                    if pause(stop, wait).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            if let Err(err) = api.delete_webhook().await {
                tracing::warn!(account = %self.account, %err, "deleteWebhook failed");
            }
            let state_dir = shared.engine.app().paths.state_dir.clone();
            let mut offset =
                store::read_offset(&state_dir, &self.account, me.id).map_or(0, |o| o + 1);
            loop {
                let got = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    got = api.get_updates(offset, POLL_WAIT) => got,
                };
                let updates = match got {
                    Ok(updates) => updates,
                    Err(err) => {
                        let wait = backoff(&err, last_wait);
                        last_wait = Some(wait);
                        tracing::warn!(account = %self.account, %err, wait_s = wait.as_secs(), "getUpdates failed");
                        self.report(shared, Some(format!("getUpdates: {err}")));
                        if pause(stop, wait).await {
                            return Ok(());
                        }
                        if err == ApiError::Unauthorized {
                            break;
                        }
                        continue;
                    }
                };
                if last_wait.take().is_some() {
                    self.report(shared, None);
                }
                let Some(last) = updates.iter().filter_map(update::update_id).max() else {
                    continue;
                };
                let batch = Batch {
                    shared,
                    account: &account,
                    me: &me,
                };
                batch.take(updates, &mut history).await?;
                let at = state_dir.clone();
                let (id, bot) = (self.account.clone(), me.id);
                shared
                    .engine
                    .blocking(move || store::write_offset(&at, &id, bot, last))
                    .await??;
                offset = last + 1;
                let room = async {
                    shared.intake.runs_started().await;
                    shared
                        .webhooks
                        .room_for_chat_runs(CHAT_RUNS_IN_FLIGHT)
                        .await;
                };
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = room => {}
                }
            }
        }
    }

    /// Holds the account's poller lock; `None` when stopped first.
    async fn lock(
        &self,
        shared: &Shared,
        bot: &str,
        stop: &CancellationToken,
    ) -> anyhow::Result<Option<crate::durable::HeldLock>> {
        let state_dir = shared.engine.app().paths.state_dir.clone();
        let dir = state_dir.join("telegram");
        crate::durable::create_private_dir_all(&dir)?;
        let path = dir.join(format!("poller-bot{bot}.lock"));
        loop {
            match crate::durable::try_lock_file(&path)? {
                Some(file) => {
                    self.report(shared, None);
                    return Ok(Some(file));
                }
                None => self.report(
                    shared,
                    Some(format!(
                        "another process polls this bot ({} is locked)",
                        path.display()
                    )),
                ),
            }
            if pause(stop, LOCK_RETRY).await {
                return Ok(None);
            }
        }
    }
}

/// The bot's id, the part of its token before `:` (digits only; never
/// the secret part).
fn bot_of(token: &str) -> String {
    let id: String = token
        .split(':')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .take(20)
        .collect();
    if id.is_empty() {
        "unknown".to_string()
    } else {
        id
    }
}

/// Group messages not addressed to the bot, by chat, for the next one
/// that is.
#[derive(Default)]
struct History(HashMap<i64, VecDeque<(String, String)>>);

impl History {
    fn keep(&mut self, m: &Inbound, limit: usize) {
        let lines = self.0.entry(m.chat_id).or_default();
        lines.push_back((m.from_name.clone(), m.text.clone()));
        while lines.len() > limit {
            lines.pop_front();
        }
    }

    fn take(&mut self, chat: i64) -> Option<String> {
        let lines = self.0.remove(&chat)?;
        let text: Vec<String> = lines
            .into_iter()
            .map(|(who, text)| format!("{who}: {text}"))
            .collect();
        (!text.is_empty()).then(|| text.join("\n"))
    }
}

/// One batch of updates being taken.
struct Batch<'a> {
    shared: &'a Arc<Shared>,
    account: &'a Account,
    me: &'a Me,
}

impl Batch<'_> {
    /// Reads, checks and routes `updates`; every message for an agent is
    /// in the intake log when this returns.
    async fn take(
        &self,
        updates: Vec<serde_json::Value>,
        history: &mut History,
    ) -> anyhow::Result<()> {
        let app = self.shared.engine.app();
        let approved = store::approved(
            &app.paths.state_dir,
            &self.account.id,
            self.account.is_default,
        );
        let mut records = Vec::new();
        for raw in &updates {
            let m = match update::read(raw, self.me.id) {
                Update::Message(m) => *m,
                Update::Ignored(why) => {
                    tracing::debug!(account = %self.account.id, why, "update ignored");
                    continue;
                }
            };
            let routed = self.route(&app, &m);
            let patterns = routed
                .as_ref()
                .ok()
                .and_then(|(agent, _)| {
                    let agents = app.agents().ok()?;
                    let entry = agents.get(agent)?.entry.as_ref()?;
                    Some(entry.group_chat.mention_patterns.clone())
                })
                .unwrap_or_default();
            let addressed = m.chat == ChatKind::Direct
                || update::mentions_bot(&m, &self.me.username, &patterns);
            match access::decide(&self.account.settings, &approved, &m, addressed) {
                Decision::Drop(why) => {
                    tracing::info!(account = %self.account.id, chat = m.chat_id, why, "message dropped")
                }
                Decision::History => history.keep(&m, self.account.history_limit()),
                Decision::Pair => self.pair(&m).await,
                Decision::Allow => match update::command(&m.text, &self.me.username) {
                    Some(Command::Help) => self.answer(&m, HELP).await,
                    Some(Command::Status) => {
                        let text = status_text(routed.as_ref().ok());
                        self.answer(&m, &text).await;
                    }
                    Some(Command::Control) => {
                        match (&routed, crate::app::subagent_command::parse(&m.text)) {
                            (Ok((agent, key)), Some(parsed)) => {
                                let text = match parsed {
                                    Ok(command) => {
                                        super::subagent_control::run_command(
                                            self.shared,
                                            agent,
                                            key,
                                            command,
                                        )
                                        .await
                                    }
                                    Err(usage) => usage,
                                };
                                self.answer(&m, &text).await;
                            }
                            _ => tracing::error!(account = %self.account.id, "command not routed"),
                        }
                    }
                    _ => match routed {
                        Ok((agent, key)) => {
                            let context = context(&m, history.take(m.chat_id));
                            records.push(self.run_record(&m, agent, key, context)?);
                        }
                        Err(err) => {
                            tracing::error!(account = %self.account.id, %err, "message not routed")
                        }
                    },
                },
            }
        }
        if !records.is_empty() {
            self.shared.intake.accept_all(&mut records)?;
        }
        Ok(())
    }

    /// The agent and session key the bindings give `m`.
    fn route(&self, app: &crate::app::App, m: &Inbound) -> anyhow::Result<(String, String)> {
        let mut req = TurnRequest {
            message: m.text.clone(),
            chat_channel: Some(tg::CHANNEL.to_string()),
            account_id: Some(self.account.id.clone()),
            peer: Some(ChatPeer {
                kind: m.chat.as_str().to_string(),
                id: m.chat_id.to_string(),
            }),
            ..TurnRequest::default()
        };
        super::chat::route(app, &self.shared.chat_router, &mut req)?;
        Ok((
            req.agent.unwrap_or_default(),
            req.session_key.unwrap_or_default(),
        ))
    }

    fn run_record(
        &self,
        m: &Inbound,
        agent: String,
        key: String,
        context: Vec<ChatContext>,
    ) -> anyhow::Result<super::intake::Record> {
        let text = match &m.forwarded_from {
            // The forwarded words are someone else's: context, not the
            // sender's message.
            Some(_) => "(forwarded a message)".to_string(),
            None => m.text.clone(),
        };
        let routed = Routed {
            run_id: format!(
                "telegram:{}:{}:{}",
                self.account.id, self.me.id, m.update_id
            ),
            agent_id: agent,
            session_key: key,
            sender: m.from_name.clone(),
            text,
            origin: ChatOrigin {
                channel: tg::CHANNEL.to_string(),
                account_id: self.account.id.clone(),
                peer_kind: m.chat.as_str().to_string(),
                chat_id: m.chat_id.to_string(),
                thread_id: m.thread_id,
                message_id: Some(m.message_id),
                context,
            },
        };
        super::chat_runs::record(routed, self.shared.host.now_ms())
    }

    /// A pairing code for an unknown sender (no model call).
    async fn pair(&self, m: &Inbound) {
        let state_dir = self.shared.engine.app().paths.state_dir.clone();
        let meta = serde_json::json!({"username": m.from_username, "name": m.from_name});
        let (account, sender, now) = (
            self.account.id.clone(),
            m.from_id.to_string(),
            self.shared.host.now_ts(),
        );
        let asked = self
            .shared
            .engine
            .blocking(move || store::request_pairing(&state_dir, &account, &sender, meta, now))
            .await;
        match asked {
            Ok(Ok(store::Pairing::Code { code, .. })) => {
                let text = format!(
                    "This bot does not know you yet. Your pairing code is {code}.\nAsk its owner to run:\n`almanac pairing approve telegram {code}`"
                );
                self.answer(m, &text).await;
            }
            Ok(Ok(store::Pairing::Full)) => {
                tracing::info!(account = %self.account.id, "pairing request dropped: three are pending");
            }
            Ok(Err(err)) => tracing::error!(%err, "cannot record a pairing request"),
            Err(err) => tracing::error!(%err, "cannot record a pairing request"),
        }
    }

    /// A reply the channel gives itself, journaled like any other.
    async fn answer(&self, m: &Inbound, text: &str) {
        let origin = ChatOrigin {
            channel: tg::CHANNEL.to_string(),
            account_id: self.account.id.clone(),
            peer_kind: m.chat.as_str().to_string(),
            chat_id: m.chat_id.to_string(),
            thread_id: m.thread_id,
            message_id: Some(m.message_id),
            context: Vec::new(),
        };
        let item = crate::delivery::Item {
            source: crate::delivery::Source::Chat,
            session_key: String::new(),
            agent_id: String::new(),
            text: text.to_string(),
            task_id: None,
            to: Some(origin.chat_id.clone()),
            channel: Some(origin.channel.clone()),
            account_id: Some(origin.account_id.clone()),
        };
        let target = crate::delivery::Target::Chat(super::chat_runs::route_of(&origin));
        if let Err(err) = self.shared.deliverer.deliver(item, &target).await {
            tracing::error!(%err, "a channel reply was not recorded");
        }
    }
}

const HELP: &str = "Write to me as you would to a person. Commands:\n/new or /reset: start a fresh conversation\n/status: which agent and session you are talking to\n/stop: stop my current turn and its background runs\n/subagents: list, kill, steer or message background runs (/subagents help)\n/help: this text";

fn status_text(routed: Option<&(String, String)>) -> String {
    match routed {
        Some((agent, key)) => format!("Agent: {agent}\nSession: {key}"),
        None => "This chat is not routed to an agent.".to_string(),
    }
}

/// What came with `m` besides the sender's own words.
fn context(m: &Inbound, history: Option<String>) -> Vec<ChatContext> {
    let mut context = Vec::new();
    if let Some(history) = history {
        context.push(ChatContext {
            kind: "history".into(),
            text: history,
            from: None,
        });
    }
    if let Some((from, text)) = &m.quoted {
        context.push(ChatContext {
            kind: "quoted".into(),
            text: text.clone(),
            from: Some(from.clone()),
        });
    }
    if let Some(from) = &m.forwarded_from {
        context.push(ChatContext {
            kind: "forwarded".into(),
            text: m.text.clone(),
            from: Some(from.clone()),
        });
    }
    context
}
