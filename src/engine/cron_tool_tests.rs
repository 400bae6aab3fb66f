//! The model's `cron` tool, called as a turn calls it: the tools of an
//! assembled turn (the tool policy from the config) with the app's
//! services, on a real job store in a temporary state directory.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::agent::policy::NoApprover;
use crate::agent::tools::Output;
use crate::agent::tools::ToolSettings;
use crate::app::GlobalOptions;
use crate::app::cron::{self as app_cron, JobFlags};
use crate::app::cron_tool::{CONTEXT_MARKER, CONTEXT_PER_MESSAGE_MAX, CONTEXT_TOTAL_MAX};
use crate::app::gateway::{GatewayPort, LaterAnswer};
use crate::cron::ListQuery;
use crate::cron::job::CronJob;
use crate::engine::assemble::{AppServices, assemble};
use crate::host::Host;
use crate::trigger::TurnShape;

const NOW: &str = "2026-11-29T09:00:00+00:00[UTC]";
const KEY: &str = "agent:main:main";

fn app_with(dir: &Path, config: Option<&str>) -> App {
    let state = dir.join("state");
    if let Some(config) = config {
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("config.json5"), config).unwrap();
    }
    let host = Host::with_vars(
        [("ALMANAC_STATE_DIR", state.display().to_string())],
        dir,
        dir,
        NOW.parse().unwrap(),
    );
    App::load(&GlobalOptions::default(), host).expect("app loads")
}

fn app(dir: &Path) -> App {
    app_with(dir, None)
}

/// The tools of a turn in `KEY`, as `run_turn` assembles them.
struct Turn {
    app: App,
    services: AppServices,
    settings: ToolSettings,
    offered: Vec<String>,
}

impl Turn {
    fn new(app: &App) -> Turn {
        Turn::with_gateway(app, None)
    }

    /// The tools of a turn in `key` of `app`'s agent.
    fn in_session(app: &App, key: &str) -> Turn {
        Turn::with_gateway_in(app, None, key)
    }

    fn with_gateway(app: &App, gateway: Option<Arc<dyn GatewayPort>>) -> Turn {
        Turn::with_gateway_in(app, gateway, KEY)
    }

    fn with_gateway_in(app: &App, gateway: Option<Arc<dyn GatewayPort>>, key: &str) -> Turn {
        let model = app.model_without_key(Some("openai/test-model")).unwrap();
        let services = AppServices {
            app: app.clone(),
            read_only: false,
            gateway,
        };
        let (assembled, ()) = assemble(
            app,
            &model,
            "hello",
            None,
            &TurnShape::default(),
            caller(app, key),
            &services,
            || (),
        );
        Turn {
            app: app.clone(),
            offered: assembled
                .tool_specs
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            settings: assembled.tools,
            services,
        }
    }

    fn call(&self, args: Value) -> Output {
        let tools = Tools {
            settings: self.settings.clone(),
            services: &self.services,
            approver: &NoApprover,
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(tools.call("cron", &args))
    }

    /// A call that must succeed: its JSON answer.
    fn ok(&self, args: Value) -> Value {
        let out = self.call(args.clone());
        assert!(!out.is_error, "{args} → {}", out.text);
        serde_json::from_str(&out.text).unwrap()
    }

    /// A call that must fail: its error text.
    fn refused(&self, args: Value) -> String {
        let out = self.call(args.clone());
        assert!(out.is_error, "{args} was accepted: {}", out.text);
        out.text
    }

    /// What `cron list --all` shows.
    fn listed(&self) -> Vec<Value> {
        let query = ListQuery {
            enabled: crate::cron::EnabledFilter::All,
            ..ListQuery::default()
        };
        app_cron::list(&self.app, &query).unwrap().jobs
    }

    fn stored(&self) -> Vec<CronJob> {
        let loaded = self.app.cron_store().read().unwrap();
        loaded.file.jobs().cloned().collect()
    }
}

fn reminder(at: &str) -> Value {
    json!({
        "name": "Call Ana",
        "schedule": {"kind": "at", "at": at},
        "sessionTarget": "main",
        "payload": {"kind": "systemEvent", "text": "Call Ana back"}
    })
}

#[test]
fn add_creates_a_job_the_cron_commands_list() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    assert!(
        turn.offered.iter().any(|t| t == "cron"),
        "{:?}",
        turn.offered
    );
    // "Remind me at 9 tomorrow": an ISO time without an offset is UTC.
    let added = turn.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00")}));
    assert_eq!(added["ok"], true);
    let job = &added["job"];
    let id = job["id"].as_str().unwrap();
    assert_eq!(
        job["schedule"],
        json!({"kind": "at", "at": "2026-11-30T09:00:00.000Z"})
    );
    assert_eq!(job["sessionTarget"], "main");
    assert_eq!(job["sessionKey"], KEY);
    assert_eq!(job["createdBy"], "agent");
    assert_eq!(job["deleteAfterRun"], true);
    let at: jiff::Timestamp = "2026-11-30T09:00:00Z".parse().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"], at.as_millisecond());

    let listed = turn.listed();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["name"], "Call Ana");
    assert_eq!(listed[0]["createdBy"], "agent");
    let stored = turn.stored();
    assert!(stored[0].created_by_agent());
    assert_eq!(stored[0].session_key.as_deref(), Some(KEY));

    // The tool's own list and status see it too.
    let list = turn.ok(json!({"action": "list"}));
    assert_eq!(list["total"], 1);
    assert_eq!(list["jobs"][0]["id"], id);
    let status = turn.ok(json!({"action": "status"}));
    assert_eq!(status["jobs"], 1);
    assert_eq!(status["nextWakeAtMs"], at.as_millisecond());
    assert_eq!(status["gatewayRunning"], false);

    // A job the user adds with a command is not the model's.
    app_cron::add(
        &turn.app,
        &JobFlags {
            name: Some("mine".into()),
            every: Some("1h".into()),
            system_event: Some("ping".into()),
            ..JobFlags::default()
        },
    )
    .unwrap();
    let users = turn
        .stored()
        .into_iter()
        .find(|j| j.name == "mine")
        .unwrap();
    assert!(!users.created_by_agent());
    assert!(!users.extra.contains_key("createdBy"));
}

#[test]
fn current_is_the_callers_session_and_the_job_keeps_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    let added = turn.ok(json!({"action": "add", "job": {
        "name": "Follow up",
        "schedule": {"kind": "cron", "expr": "0 * * * *", "tz": "Europe/Paris"},
        "sessionTarget": "current",
        "sessionKey": "agent:main:someone-else",
        "payload": {"kind": "agentTurn", "message": "Any news?"}
    }}));
    let job = &added["job"];
    assert_eq!(job["sessionTarget"], format!("session:{KEY}"));
    assert_eq!(
        job["sessionKey"], KEY,
        "the caller's key, whatever was given"
    );
    assert_eq!(job["delivery"], json!({"mode": "announce"}));
    assert_eq!(
        job["schedule"]["staggerMs"], 300_000,
        "a top-of-hour expression is staggered, as for the command"
    );
    // Without a target, an agent turn runs isolated, and kinds are inferred.
    let added = turn.ok(json!({"action": "add", "job": {
        "name": "Digest",
        "schedule": {"everyMs": 3_600_000},
        "payload": {"message": "Digest"}
    }}));
    assert_eq!(added["job"]["sessionTarget"], "isolated");
    assert_eq!(added["job"]["schedule"]["kind"], "every");
    assert_eq!(added["job"]["payload"]["kind"], "agentTurn");
}

/// Writes a conversation into the session `KEY`.
fn converse(app: &App, messages: &[Message]) {
    let sessions = app.sessions(None);
    app.ensure_state_dir().unwrap();
    app.paths.ensure_workspace().unwrap();
    let now = app.host.now_ts();
    let (current, _) = sessions
        .current(KEY, None, now, &app.paths.workspace, None, false)
        .unwrap();
    let clock = move || now;
    let mut log = crate::agent::turn::Log {
        path: &current.transcript,
        leaf: None,
        taken: Default::default(),
        clock: &clock,
        unsynced: false,
    };
    for message in messages {
        log.message(message, None).unwrap();
    }
}

fn user(text: &str) -> Message {
    Message::User(vec![Block::text(text)])
}

fn assistant(text: &str) -> Message {
    Message::Assistant(vec![Block::text(text)])
}

#[test]
fn context_messages_are_the_sessions_last_ones_capped() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let mut messages = Vec::new();
    for n in 0..12 {
        messages.push(user(&format!("question {n} {}", "q".repeat(400))));
        messages.push(assistant(&format!("answer {n}")));
    }
    messages.push(user("Remind me to call Ana at 9 tomorrow"));
    messages.push(Message::Assistant(vec![Block::ToolCall {
        id: "c1".into(),
        name: "cron".into(),
        arguments: json!({}),
    }]));
    converse(&app, &messages);
    let turn = Turn::new(&app);

    // Two: the last two messages with text (a bare tool call has none).
    let added = turn.ok(
        json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z"), "contextMessages": 2}),
    );
    assert_eq!(
        added["job"]["payload"]["text"],
        format!(
            "Call Ana back{CONTEXT_MARKER}- Assistant: answer 11\n- User: Remind me to call Ana at 9 tomorrow"
        )
    );

    // Ten long ones: each cut, all of them within the total, newest kept.
    let added = turn.ok(
        json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z"), "contextMessages": 10}),
    );
    let text = added["job"]["payload"]["text"].as_str().unwrap();
    let (base, context) = text.split_once(CONTEXT_MARKER).unwrap();
    assert_eq!(base, "Call Ana back");
    assert!(context.chars().count() <= CONTEXT_TOTAL_MAX, "{context}");
    let lines: Vec<&str> = context.lines().collect();
    assert!(lines.len() >= 3 && lines.len() < 10, "{lines:?}");
    for line in &lines {
        let body = line.split_once(": ").unwrap().1;
        assert!(body.chars().count() <= CONTEXT_PER_MESSAGE_MAX, "{line}");
    }
    assert!(lines.iter().any(|l| l.ends_with('…')), "{lines:?}");
    assert_eq!(
        *lines.last().unwrap(),
        "- User: Remind me to call Ana at 9 tomorrow"
    );

    // More than ten, or not a number: refused, nothing added.
    let before = turn.stored().len();
    turn.refused(
        json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z"), "contextMessages": 11}),
    );
    turn.refused(
        json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z"), "contextMessages": "all"}),
    );
    assert_eq!(turn.stored().len(), before);

    // Without a conversation there is nothing to add.
    let other = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app_with(other.path(), None));
    let added = turn.ok(
        json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z"), "contextMessages": 5}),
    );
    assert_eq!(added["job"]["payload"]["text"], "Call Ana back");
}

fn hooked(to: &str) -> Value {
    json!({"action": "add", "job": {
        "name": "Report",
        "schedule": {"kind": "every", "everyMs": 3_600_000},
        "payload": {"kind": "agentTurn", "message": "Report"},
        "delivery": {"mode": "webhook", "to": to}
    }})
}

#[test]
fn a_webhook_the_model_gives_may_not_reach_this_machine_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.1.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
    ] {
        let why = turn.refused(hooked(url));
        assert!(
            why.contains("delivery.to") && why.contains("delivery.webhook.allowPrivateNetwork"),
            "{url}: {why}"
        );
    }
    // The failure destination and the failure alert too.
    let mut job = hooked("https://hooks.example.com/report");
    job["job"]["delivery"]["failureDestination"] =
        json!({"mode": "webhook", "to": "http://172.16.0.9/failed"});
    let why = turn.refused(job);
    assert!(why.contains("delivery.failureDestination.to"), "{why}");
    let mut job = hooked("https://hooks.example.com/report");
    job["job"]["failureAlert"] = json!({"mode": "webhook", "to": "http://100.64.0.1/alert"});
    let why = turn.refused(job);
    assert!(why.contains("failureAlert.to"), "{why}");
    assert!(turn.stored().is_empty(), "nothing refused was written");

    let added = turn.ok(hooked("https://hooks.example.com/report"));
    assert_eq!(
        added["job"]["delivery"]["to"],
        "https://hooks.example.com/report"
    );

    // With the setting, a private address is the user's choice.
    let dir = tempfile::tempdir().unwrap();
    let app = app_with(
        dir.path(),
        Some("{ delivery: { webhook: { allowPrivateNetwork: true } } }"),
    );
    let turn = Turn::new(&app);
    let added = turn.ok(hooked("http://127.0.0.1:8080/hook"));
    assert_eq!(added["job"]["delivery"]["to"], "http://127.0.0.1:8080/hook");
    assert_eq!(added["job"]["createdBy"], "agent");
}

#[test]
fn the_model_keeps_to_its_own_agent_and_the_users_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    let mut job = reminder("2026-11-30T09:00:00Z");
    job["agentId"] = json!("ops");
    let why = turn.refused(json!({"action": "add", "job": job}));
    assert!(
        why.contains("agentId") && why.contains("its own agent"),
        "{why}"
    );
    let mut job = reminder("2026-11-30T09:00:00Z");
    job["agentId"] = json!("Main");
    turn.ok(json!({"action": "add", "job": job}));

    // A job the user created keeps the webhook the user gave it.
    let users = app_cron::add(
        &turn.app,
        &JobFlags {
            name: Some("user report".into()),
            every: Some("1h".into()),
            message: Some("report".into()),
            delivery: Some(app_cron::DeliveryChoice::Webhook(
                "https://user.example.com/hook".into(),
            )),
            ..JobFlags::default()
        },
    )
    .unwrap();
    let why = turn.refused(json!({"action": "update", "id": users.job.id,
        "patch": {"delivery": {"to": "https://model.example.com/hook"}}}));
    assert!(why.contains("the user's to change"), "{why}");
    // Its other fields the model may change.
    let renamed =
        turn.ok(json!({"action": "update", "id": users.job.id, "patch": {"name": "renamed"}}));
    assert_eq!(
        renamed["job"]["delivery"]["to"],
        "https://user.example.com/hook"
    );
    assert_eq!(renamed["job"]["name"], "renamed");
    assert!(renamed["job"].get("createdBy").is_none());
    // The model may not move a job to another session key, or claim one.
    for field in ["sessionKey", "createdBy", "id", "state"] {
        let why =
            turn.refused(json!({"action": "update", "id": users.job.id, "patch": {field: "x"}}));
        assert!(why.contains(field), "{why}");
    }
}

#[test]
fn update_and_remove_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    let added = turn.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z")}));
    let id = added["job"]["id"].as_str().unwrap().to_string();

    let updated = turn.ok(json!({"action": "update", "jobId": &id[..8], "patch": {
        "name": "Call Ana (mobile)",
        "schedule": {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Paris"},
        "payload": {"text": "Call Ana on her mobile"},
    }}));
    let job = &updated["job"];
    assert_eq!(job["id"], id);
    assert_eq!(job["name"], "Call Ana (mobile)");
    assert_eq!(
        job["schedule"],
        json!({"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Paris"})
    );
    assert_eq!(
        job["payload"],
        json!({"kind": "systemEvent", "text": "Call Ana on her mobile"})
    );
    // Monday 30 November, 09:00 in Paris.
    let next: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"], next.as_millisecond());
    assert_eq!(turn.listed()[0]["name"], "Call Ana (mobile)");

    // An agent turn in place of the reminder moves to its own session.
    let updated = turn.ok(json!({"action": "update", "id": id, "patch": {
        "payload": {"message": "Prepare the call with Ana"},
        "description": "prep"
    }}));
    assert_eq!(
        updated["job"]["payload"],
        json!({"kind": "agentTurn", "message": "Prepare the call with Ana"})
    );
    assert_eq!(updated["job"]["sessionTarget"], "isolated");
    assert_eq!(updated["job"]["description"], "prep");
    let cleared = turn.ok(
        json!({"action": "update", "id": id, "patch": {"description": null, "enabled": false}}),
    );
    assert!(cleared["job"].get("description").is_none());
    assert_eq!(cleared["job"]["enabled"], false);
    assert!(cleared["job"]["state"].get("nextRunAtMs").is_none());

    let removed = turn.ok(json!({"action": "remove", "id": id}));
    assert_eq!(removed, json!({"ok": true, "removed": true, "id": id}));
    assert!(turn.listed().is_empty());
    assert!(turn.stored().is_empty());
}

#[test]
fn bad_input_is_an_error_result_never_a_failed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let turn = Turn::new(&app(dir.path()));
    let added = turn.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z")}));
    let id = added["job"]["id"].as_str().unwrap().to_string();
    let bytes = std::fs::read(turn.app.cron_store_path()).unwrap();
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "`action` is required"),
        (
            json!({"action": "explode"}),
            "`explode` is not a cron action",
        ),
        (json!({"action": "add"}), "`job` is required"),
        (
            json!({"action": "add", "job": "tomorrow"}),
            "a job is a JSON object",
        ),
        (
            json!({"action": "add", "job": reminder("2026-11-28T09:00:00Z")}),
            "more than a minute in the past",
        ),
        (
            json!({"action": "add", "job": reminder("in 20 minutes")}),
            "not an ISO-8601 time",
        ),
        (
            json!({"action": "add", "job": {"schedule": {"kind": "at", "at": "2026-11-30T09:00:00Z"}, "payload": {"kind": "systemEvent", "text": "x"}}}),
            "`name`",
        ),
        (
            json!({"action": "add", "job": {"name": "x", "payload": {"kind": "systemEvent", "text": "x"}}}),
            "schedule",
        ),
        (
            json!({"action": "add", "job": {"name": "x", "schedule": {"kind": "cron", "expr": "0 25 * * *"}, "payload": {"kind": "agentTurn", "message": "x"}}}),
            "field 2 (hour)",
        ),
        (
            json!({"action": "add", "job": {"name": "x", "schedule": {"kind": "every", "everyMs": 60000}, "sessionTarget": "main", "payload": {"kind": "agentTurn", "message": "x"}}}),
            "`payload`",
        ),
        (json!({"action": "update", "id": id}), "`patch` is required"),
        (
            json!({"action": "update", "patch": {"name": "x"}}),
            "`id` is required",
        ),
        (
            json!({"action": "update", "id": id, "patch": {}}),
            "nothing to change",
        ),
        (
            json!({"action": "update", "id": id, "patch": {"schedule": {"kind": "at", "at": "2020-01-01T00:00:00Z"}}}),
            "in the past",
        ),
        (json!({"action": "remove"}), "`id` is required"),
        (
            json!({"action": "remove", "id": "nope"}),
            "no cron job `nope`",
        ),
        (
            json!({"action": "list", "limit": 0}),
            "`limit` is a whole number from 1 to 200",
        ),
        (json!({"action": "list", "limit": 201}), "`limit`"),
        (json!({"action": "list", "sortBy": "colour"}), "`sortBy`"),
        (json!({"action": "runs"}), "`id` is required"),
        (json!({"action": "run", "id": id}), "no gateway is running"),
        (json!({"action": "run", "id": id, "mode": "soon"}), "`mode`"),
        (json!({"action": "wake"}), "`text` is required"),
        (
            json!({"action": "wake", "text": "hi", "mode": "later"}),
            "`mode`",
        ),
    ];
    for (args, want) in cases {
        let why = turn.refused(args.clone());
        assert!(why.contains(want), "{args}: {why}");
    }
    assert_eq!(
        std::fs::read(turn.app.cron_store_path()).unwrap(),
        bytes,
        "nothing refused changed the store"
    );
    // Runs of a job that never ran: none.
    let runs = turn.ok(json!({"action": "runs", "id": id, "limit": 5}));
    assert_eq!(runs["total"], 0);
}

#[test]
fn the_tool_policy_removes_the_tool() {
    for (config, offered) in [
        ("{ tools: { deny: ['cron'] } }", false),
        ("{ tools: { deny: ['group:automation'] } }", false),
        ("{ tools: { profile: 'coding' } }", false),
        ("{ tools: { profile: 'coding', allow: ['cron'] } }", true),
        ("{ tools: { allow: ['group:openclaw'] } }", true),
        ("{}", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let turn = Turn::new(&app_with(dir.path(), Some(config)));
        assert_eq!(
            turn.offered.iter().any(|t| t == "cron"),
            offered,
            "{config}: {:?}",
            turn.offered
        );
        let out = turn.call(json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z")}));
        assert_eq!(out.is_error, !offered, "{config}: {}", out.text);
        if !offered {
            assert!(out.text.contains("the tool `cron`"), "{}", out.text);
            assert!(turn.stored().is_empty());
        }
    }
}

#[test]
fn wake_without_a_gateway_queues_the_event_for_the_main_session() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let turn = Turn::new(&app);
    let woke = turn.ok(json!({"action": "wake", "text": "Check the oven", "mode": "now"}));
    assert_eq!(woke["queued"], true);
    assert_eq!(woke["viaGateway"], false);
    assert!(
        woke["warning"]
            .as_str()
            .unwrap()
            .contains("no wake happened"),
        "{woke}"
    );
    let queued = app.sessions(None).events().peek(KEY);
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].text, "Check the oven");
    assert!(!queued[0].trusted, "the model's words are not trusted");
}

/// A gateway in this process, recording what it was asked.
#[derive(Default)]
struct Recorded {
    asked: Mutex<Vec<String>>,
}

impl GatewayPort for Recorded {
    fn cron_changed(&self) {
        self.asked.lock().unwrap().push("changed".into());
    }

    fn run_cron_job(&self, job_id: String, only_due: bool) -> LaterAnswer {
        self.asked
            .lock()
            .unwrap()
            .push(format!("run {job_id} {only_due}"));
        Box::pin(std::future::ready(Ok(
            json!({"ok": true, "ran": true, "jobId": job_id}),
        )))
    }

    fn system_event(
        &self,
        text: String,
        mode: String,
        session_key: Option<String>,
        trusted: bool,
    ) -> Result<Value, String> {
        self.asked.lock().unwrap().push(format!(
            "event {text} {mode} {session_key:?} trusted={trusted}"
        ));
        Ok(json!({"ok": true, "queued": true}))
    }
    fn spawn_subagent(&self, _: &str, _: &str, _: &Value) -> Result<Value, String> {
        Err("not here".into())
    }
}

#[test]
fn in_the_gateway_the_tool_reaches_it_directly() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = Arc::new(Recorded::default());
    let turn = Turn::with_gateway(&app(dir.path()), Some(recorded.clone()));
    let added = turn.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z")}));
    let id = added["job"]["id"].as_str().unwrap().to_string();
    turn.ok(json!({"action": "update", "id": id, "patch": {"name": "again"}}));
    // A change that writes nothing tells nobody.
    turn.ok(json!({"action": "update", "id": id, "patch": {"name": "again"}}));
    let ran = turn.ok(json!({"action": "run", "id": &id[..6], "mode": "due"}));
    assert_eq!(ran["jobId"], id);
    turn.ok(json!({"action": "wake", "text": "hello"}));
    turn.ok(json!({"action": "remove", "id": id}));
    assert_eq!(
        *recorded.asked.lock().unwrap(),
        vec![
            "changed".to_string(),
            "changed".to_string(),
            format!("run {id} true"),
            // The model's words are not trusted.
            "event hello next-heartbeat None trusted=false".to_string(),
            "changed".to_string(),
        ]
    );
}

#[test]
fn outside_the_gateway_the_tool_uses_its_control_api_off_the_turns_runtime() {
    use crate::app::cron::tests::{fake_gateway, publish_fake_gateway};
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let turn = Turn::new(&app);
    let added = turn.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00Z")}));
    let id = added["job"]["id"].as_str().unwrap().to_string();
    // A change is announced to the running gateway.
    let (port, server) = fake_gateway(json!({"ok": true}));
    let _gateway = publish_fake_gateway(&app, port);
    turn.ok(json!({"action": "update", "id": id, "patch": {"name": "Call Ana now"}}));
    let request = server.join().unwrap();
    assert!(
        request.starts_with("POST /v1/cron/reload HTTP/1.1"),
        "{request}"
    );
    // `run` is the gateway's.
    let (port, server) = fake_gateway(json!({"ok": true, "ran": true, "runId": "manual:x"}));
    let _still_held = publish_fake_gateway(&app, port);
    let ran = turn.ok(json!({"action": "run", "id": &id[..8]}));
    assert_eq!(ran["ran"], true);
    assert_eq!(ran["id"], id);
    let request = server.join().unwrap();
    let line = request.lines().next().unwrap();
    let line = percent_encoding::percent_decode_str(line)
        .decode_utf8()
        .unwrap();
    assert_eq!(line, format!("POST /v1/cron/jobs/{id}/run HTTP/1.1"));
    assert!(request.ends_with(r#"{"mode":"force"}"#), "{request}");
    // `wake` asks the gateway to queue the model's words as untrusted.
    let (port, server) = fake_gateway(
        json!({"ok": true, "queued": true, "mode": "next-heartbeat", "sessionKey": KEY}),
    );
    let _again = publish_fake_gateway(&app, port);
    turn.ok(json!({"action": "wake", "text": "hello"}));
    let request = server.join().unwrap();
    assert!(
        request.starts_with("POST /v1/system/event HTTP/1.1"),
        "{request}"
    );
    assert!(request.contains(r#""trusted":false"#), "{request}");
}

#[test]
fn a_turn_sees_and_changes_its_own_agents_jobs_only() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with(
        dir.path(),
        Some(r#"{agents: {list: [{id: "home", default: true}, {id: "work"}]}}"#),
    );
    let work_app = app.for_agent(Some("work")).unwrap();
    let home = Turn::in_session(&app, "agent:home:main");
    let work = Turn::in_session(&work_app, "agent:work:main");
    let home_job = home.ok(json!({"action": "add", "job": reminder("2026-11-30T09:00:00")}));
    let work_job = work.ok(json!({"action": "add", "job": reminder("2026-11-30T10:00:00")}));
    // The default agent's jobs carry no agentId, as they always did.
    assert_eq!(home_job["job"].get("agentId"), None);
    assert_eq!(work_job["job"]["agentId"], "work");
    let ids = |turn: &Turn| -> Vec<String> {
        let list = turn.ok(json!({"action": "list"}));
        assert_eq!(list["total"], 1, "{list}");
        list["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (home_id, work_id) = (
        home_job["job"]["id"].as_str().unwrap(),
        work_job["job"]["id"].as_str().unwrap(),
    );
    assert_eq!(ids(&home), [home_id]);
    assert_eq!(ids(&work), [work_id]);
    // Another agent's job is not the turn's to see or change.
    for action in ["remove", "runs", "run"] {
        let refused = work.refused(json!({"action": action, "jobId": home_id}));
        assert!(
            refused.contains("another agent's job"),
            "{action}: {refused}"
        );
    }
    let refused =
        work.refused(json!({"action": "update", "jobId": home_id, "patch": {"name": "x"}}));
    assert!(refused.contains("another agent's job"), "{refused}");
    // Nor may a turn schedule a job for another agent.
    let mut other = reminder("2026-11-30T11:00:00");
    other["agentId"] = json!("home");
    assert!(
        work.refused(json!({"action": "add", "job": other}))
            .contains("another agent")
    );
    // Both jobs are still there.
    assert_eq!(work.listed().len(), 2);
}
