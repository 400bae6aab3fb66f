//! The Telegram channel against a local Bot API and a scripted model:
//! routing by binding, pairing, groups and mentions, replies cut into
//! well-formed messages, Telegram's errors waited out, bad input, and a
//! kill -9 that neither loses nor repeats a message.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::text;
use crate::bot_api::{self, BOT_NAME, BotApi, TOKEN, dm, group};
use crate::common::Sandbox;
use crate::gateway::{Gateway, eventually};
use crate::scripted::{Reply, ScriptedServer};

const WAIT: Duration = Duration::from_secs(30);

/// Two agents (`home` the default, `work` bound to user 42), and the
/// Telegram account on `bot`; `extra` goes into `channels.telegram`.
fn setup(sb: &Sandbox, bot: &BotApi, extra: &str) {
    sb.write(
        ".almanac/config.json5",
        &format!(
            r#"{{agents: {{defaults: {{model: "openai/test-model", heartbeat: {{target: "last"}}}},
                     list: [{{id: "home", default: true}}, {{id: "work"}}]}},
            bindings: [{{agentId: "work", match: {{channel: "telegram", peer: {{kind: "direct", id: "42"}}}}}}],
            channels: {{telegram: {{botToken: "{TOKEN}", apiRoot: "{}", allowFrom: [42, 43],
                                   groupPolicy: "open", {extra}}}}}}}"#,
            bot.root
        ),
    );
    sb.write(".almanac/workspace/AGENTS.md", "HOME-RULES\n");
    sb.write(".almanac/workspace-work/AGENTS.md", "WORK-RULES\n");
    sb.write(".almanac/workspace/HEARTBEAT.md", "Check the plants.\n");
}

fn start(sb: &Sandbox, model: &ScriptedServer) -> Gateway {
    Gateway::start(
        sb,
        &[
            ("OPENAI_BASE_URL", model.url.as_str()),
            // Heartbeats run only when asked (`run-now`).
            ("ALMANAC_HEARTBEAT_EVERY", "24h"),
        ],
    )
}

/// Waits until the bot has sent `n` messages; all of them.
fn sent(bot: &BotApi, n: usize) -> Vec<Value> {
    eventually(WAIT, || {
        let sent = bot.sent();
        (sent.len() >= n).then_some(sent)
    })
}

fn asked(model: &ScriptedServer, i: usize) -> String {
    model.requests()[i].json().to_string()
}

#[test]
fn messages_reach_their_agent_once_strangers_pair_first_and_groups_need_a_mention() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    setup(&sb, &bot, "groups: {\"*\": {requireMention: true}}");
    let model = ScriptedServer::start(vec![
        text("work reply"),
        text("home reply"),
        text("The plants need water."),
        text("after pairing"),
        text("group answer"),
    ]);
    let gw = start(&sb, &model);

    bot.push(dm(42, "hello work"));
    let out = sent(&bot, 1);
    assert_eq!(
        (&out[0]["chat_id"], &out[0]["text"]),
        (&json!("42"), &json!("work reply"))
    );
    assert_eq!(out[0]["reply_parameters"]["message_id"], 1);
    assert!(asked(&model, 0).contains("WORK-RULES") && !asked(&model, 0).contains("HOME-RULES"));
    bot.push(dm(43, "hello home"));
    let out = sent(&bot, 2);
    assert_eq!(
        (&out[1]["chat_id"], &out[1]["text"]),
        (&json!("43"), &json!("home reply"))
    );
    assert!(asked(&model, 1).contains("HOME-RULES") && !asked(&model, 1).contains("WORK-RULES"));

    // The default agent's heartbeat for `last` goes to the chat its user
    // last wrote from.
    let beat = sb
        .run(&["system", "heartbeat", "run-now", "--json"])
        .ok()
        .json();
    assert_eq!(beat["status"], "sent", "{beat}");
    let out = sent(&bot, 3);
    assert_eq!(
        (&out[2]["chat_id"], &out[2]["text"]),
        (&json!("43"), &json!("The plants need water."))
    );

    // A stranger gets a code and the model is not asked.
    bot.push(dm(99, "let me in"));
    let out = sent(&bot, 4);
    let notice = out[3]["text"].as_str().unwrap();
    assert_eq!(out[3]["chat_id"], "99");
    let code = notice
        .split_whitespace()
        .find(|w| w.len() == 9 && w.ends_with('.'))
        .map(|w| w.trim_end_matches('.').to_string())
        .expect(notice);
    assert_eq!(model.requests().len(), 3, "no model call for a stranger");
    let listed = sb
        .run(&["pairing", "list", "telegram", "--json"])
        .ok()
        .json();
    assert_eq!(listed["requests"][0]["code"], code.as_str(), "{listed}");
    assert_eq!(listed["requests"][0]["id"], "99");
    sb.run(&["pairing", "approve", "telegram", &code]).ok();
    assert!(
        sb.read(".almanac/credentials/telegram-default-allowFrom.json")
            .contains("\"99\"")
    );
    bot.push(dm(99, "now?"));
    let out = sent(&bot, 5);
    assert_eq!(
        (&out[4]["chat_id"], &out[4]["text"]),
        (&json!("99"), &json!("after pairing"))
    );

    // A group message without a mention is kept as history, not answered.
    bot.push(group(-100, 42, "chatter about the release"));
    bot.push(group(-100, 43, &format!("@{BOT_NAME} when is it?")));
    let out = sent(&bot, 6);
    assert_eq!(
        (&out[5]["chat_id"], &out[5]["text"]),
        (&json!("-100"), &json!("group answer"))
    );
    let last = asked(&model, 4);
    assert!(
        last.contains("Group history") && last.contains("chatter about the release"),
        "{last}"
    );
    assert_eq!(model.requests().len(), 5);
    // Commands pass the same check and are answered by the channel.
    bot.push(dm(43, "/help"));
    let out = sent(&bot, 7);
    assert!(
        out[6]["text"].as_str().unwrap().contains("/reset"),
        "{}",
        out[6]
    );
    bot.push(dm(42, "/status"));
    let out = sent(&bot, 8);
    assert!(
        out[7]["text"].as_str().unwrap().contains("Agent: work"),
        "{}",
        out[7]
    );
    bot.push(dm(7, "/status"));
    // The stranger's command got a pairing code, not a status.
    let out = sent(&bot, 9);
    assert!(
        out[8]["text"].as_str().unwrap().contains("pairing code"),
        "{}",
        out[8]
    );
    // `/subagents` and `/stop` answer at once, without a model call, and
    // only after the same access check.
    bot.push(dm(42, "/subagents list"));
    let out = sent(&bot, 10);
    assert!(
        out[9]["text"]
            .as_str()
            .unwrap()
            .contains("No subagent runs"),
        "{}",
        out[9]
    );
    bot.push(dm(7, "/stop"));
    let out = sent(&bot, 11);
    assert!(
        out[10]["text"].as_str().unwrap().contains("pairing code"),
        "{}",
        out[10]
    );
    // Each reply went once, and the chat saw "typing" while turns ran.
    assert_eq!(bot.count("sendMessage"), 11);
    assert_eq!(model.requests().len(), 5);
    assert!(bot.count("sendChatAction") >= 1);
    drop(gw);
}

/// Tags opened and closed in order.
fn well_formed(html: &str) -> bool {
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        let Some(end) = rest[at..].find('>') else {
            return false;
        };
        let tag = &rest[at + 1..at + end];
        rest = &rest[at + end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop().as_deref() != Some(name) {
                return false;
            }
        } else {
            open.push(tag.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    open.is_empty()
}

#[test]
fn a_long_reply_arrives_in_well_formed_chunks_after_a_rate_limit_and_a_refused_entity() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    setup(&sb, &bot, "");
    let paragraph = "Plans for the week: a < b & c, and nothing else. ".repeat(9);
    let mut reply = String::from("```html\n<tag>kept & intact</tag>\n```\n\n");
    while reply.chars().count() < 9000 {
        reply.push_str(&paragraph);
        reply.push_str("\n\n");
    }
    let model = ScriptedServer::start(vec![text(&reply)]);
    let _gw = start(&sb, &model);
    // The first try is rate limited, the next refused as unparsable.
    bot.script(
        "sendMessage",
        (429, json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}})),
        1,
    );
    bot.script(
        "sendMessage",
        (400, json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: unexpected end tag"})),
        1,
    );
    bot.push(dm(42, "plan my week"));
    let out = sent(&bot, 3);
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(
        bot.count("sendMessage"),
        5,
        "429, refused, its plain retry, then two more"
    );
    for m in &out[1..] {
        let html = m["text"].as_str().unwrap();
        assert_eq!(m["parse_mode"], "HTML");
        assert!(html.encode_utf16().count() <= 4000);
        assert!(well_formed(html), "{html}");
        assert!(html.contains("a &lt; b &amp; c"), "{html}");
    }
    // The refused first chunk went as plain text, its code intact.
    assert_eq!(out[0].get("parse_mode"), None);
    assert!(
        out[0]["text"]
            .as_str()
            .unwrap()
            .contains("<tag>kept & intact</tag>")
    );
    // Nothing lost between the chunks.
    let words: usize = out
        .iter()
        .map(|m| {
            m["text"]
                .as_str()
                .unwrap()
                .matches("Plans for the week")
                .count()
        })
        .sum();
    assert_eq!(words, reply.matches("Plans for the week").count());
}

#[test]
fn conflicts_revoked_tokens_and_bad_answers_show_in_status_without_the_token() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    sb.write(
        ".almanac/config.json5",
        &format!(
            r#"{{agents: {{defaults: {{model: "openai/test-model"}}}},
            channels: {{telegram: {{apiRoot: "{}", dmPolicy: "allowlist", allowFrom: [42],
                accounts: {{good: {{botToken: "{TOKEN}"}}, twin: {{botToken: "{TOKEN}"}},
                           bad: {{botToken: "999:REVOKED-secret"}}}}}}}}}}"#,
            bot.root
        ),
    );
    bot.script("getUpdates", (409, json!({"ok": false, "error_code": 409, "description": "Conflict: terminated by other getUpdates request"})), 1);
    bot.raw_updates(b"\xff\xfe not json at all".to_vec());
    let model = ScriptedServer::start(vec![text("still here")]);
    let gw = start(&sb, &model);
    let row = |name: &str| -> Value {
        let status = sb.run(&["gateway", "status", "--json"]).ok().json();
        status["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let bad = eventually(WAIT, || {
        let r = row("telegram:bad");
        r["lastError"].as_str().is_some().then_some(r)
    });
    let error = bad["lastError"].as_str().unwrap();
    assert!(error.contains("401"), "{error}");
    assert!(!error.contains("REVOKED"), "{error}");
    // A 10 MB update from a stranger is read and dropped.
    let big = "x".repeat(10 * 1024 * 1024);
    bot.push(dm(7, &big));
    // The good account gets past the conflict and the garbage, and
    // answers.
    bot.push(dm(42, "are you there?"));
    let out = sent(&bot, 1);
    assert_eq!(out[0]["text"], "still here");
    assert_eq!(out.len(), 1);
    assert!(
        bot.count("getUpdates") < 10,
        "no tight loop: {}",
        bot.count("getUpdates")
    );
    let log = gw.log();
    assert!(
        !log.contains("REVOKED") && !log.contains("TEST-token"),
        "the token leaked into the log"
    );
    assert!(row("telegram:bad")["state"] == "running");
    // Two accounts with one token: one polls, the other waits for its
    // lock and says so.
    let waiting = |name: &str| {
        row(name)["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("another process polls this bot"))
    };
    eventually(WAIT, || {
        (waiting("telegram:good") != waiting("telegram:twin")).then_some(())
    });
}

#[test]
fn a_kill_9_after_twenty_updates_were_taken_answers_each_exactly_once_after_restart() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    setup(&sb, &bot, "");
    let hanging = ScriptedServer::start(vec![Reply::Hang; 3]);
    let gw = start(&sb, &hanging);
    let mut last = 0;
    for i in 0..20 {
        let mut m = dm(if i % 2 == 0 { 42 } else { 43 }, &format!("message {i}"));
        m["message_id"] = json!(100 + i);
        last = bot.push(m);
    }
    // Taken: the offset is past all twenty.
    eventually(WAIT, || {
        let text = std::fs::read_to_string(sb.path(".almanac/telegram/update-offset-default.json"))
            .ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        (v["lastUpdateId"] == last).then_some(())
    });
    gw.signal(libc::SIGKILL);
    drop(gw);
    assert!(bot.sent().is_empty());
    let answers: Vec<Reply> = (0..20).map(|i| text(&format!("answer {i}"))).collect();
    let model = ScriptedServer::start(answers);
    let _gw = start(&sb, &model);
    let out = sent(&bot, 20);
    // Each chat's messages answered in the order sent.
    for chat in [42, 43] {
        let replied_to: Vec<i64> = out
            .iter()
            .filter(|m| m["chat_id"].as_i64() == Some(chat) || m["chat_id"] == *chat.to_string())
            .map(|m| m["reply_parameters"]["message_id"].as_i64().unwrap())
            .collect();
        let mut sorted = replied_to.clone();
        sorted.sort_unstable();
        assert_eq!(replied_to.len(), 10, "chat {chat}: {out:?}");
        assert_eq!(replied_to, sorted, "chat {chat}");
    }
    // Every message answered, once.
    let mut answered: Vec<i64> = out
        .iter()
        .map(|m| m["reply_parameters"]["message_id"].as_i64().unwrap())
        .collect();
    answered.sort_unstable();
    assert_eq!(answered, (100..120).collect::<Vec<_>>());
    let tasks = eventually(WAIT, || {
        let list = sb.run(&["tasks", "list", "--json"]).ok().json();
        let chat: Vec<Value> = list["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["taskKind"] == "chat")
            .cloned()
            .collect();
        chat.iter()
            .all(|t| t["status"] == "succeeded")
            .then_some(chat)
    });
    assert_eq!(tasks.len(), 20);
    assert_eq!(bot.count("sendMessage"), 20);
    let _ = bot_api::BOT_ID;
}

#[test]
fn messages_of_one_chat_taken_in_one_batch_are_answered_in_the_order_sent() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    setup(&sb, &bot, "");
    // Waiting before the gateway starts: one getUpdates answers all six.
    for i in 0..6 {
        let mut m = dm(43, &format!("message {i}"));
        m["message_id"] = json!(200 + i);
        bot.push(m);
    }
    let answers: Vec<Reply> = (0..6).map(|i| text(&format!("answer {i}"))).collect();
    let model = ScriptedServer::start(answers);
    let _gw = start(&sb, &model);
    let out = sent(&bot, 6);
    let replied_to: Vec<i64> = out
        .iter()
        .map(|m| m["reply_parameters"]["message_id"].as_i64().unwrap())
        .collect();
    assert_eq!(replied_to, (200..206).collect::<Vec<_>>());
    for i in 0..6 {
        assert!(
            asked(&model, i).contains(&format!("message {i}")),
            "turn {i} answered another message: {}",
            asked(&model, i)
        );
    }
}

#[test]
fn a_flood_waits_at_telegram_until_the_runs_in_flight_drop_below_two_hundred() {
    let sb = Sandbox::new();
    let bot = BotApi::start();
    // Ten people, each in a session of their own (no lane fills up).
    sb.write(
        ".almanac/config.json5",
        &format!(
            r#"{{agents: {{defaults: {{model: "openai/test-model"}}}}, session: {{dmScope: "per-peer"}},
            channels: {{telegram: {{botToken: "{TOKEN}", apiRoot: "{}", dmPolicy: "open"}}}}}}"#,
            bot.root
        ),
    );
    // 260 messages waiting before the gateway starts: the first
    // getUpdates answers them all (this Bot API gives every waiting
    // update at once), so 260 runs are accepted together.
    const FLOOD: usize = 260;
    for i in 0..FLOOD {
        bot.push(dm(100 + (i % 10) as i64, &format!("message {i}")));
    }
    let answers: Vec<Reply> = (0..FLOOD).map(|i| text(&format!("answer {i}"))).collect();
    let model = ScriptedServer::start(answers);
    let _gw = start(&sb, &model);
    sent(&bot, FLOOD);
    // The poller asked for more only once fewer than 200 runs were in
    // flight: at least 61 ended (their replies journaled), and all but
    // the few being sent had gone out. Without the limit it asks again at
    // once, before any reply.
    let calls = bot.calls();
    let next_poll = calls
        .iter()
        .enumerate()
        .filter(|(_, (method, _))| method == "getUpdates")
        .nth(1)
        .map(|(at, _)| at)
        .expect("a second getUpdates");
    let replies_before = calls[..next_poll]
        .iter()
        .filter(|(method, _)| method == "sendMessage")
        .count();
    assert!(
        replies_before >= 40,
        "the second getUpdates came after {replies_before} replies"
    );
}

#[test]
fn heartbeat_alerts_and_hook_answers_can_name_a_telegram_chat() {
    use crate::gateway_hooks::{HOOK_TOKEN, bearer, send};
    let sb = Sandbox::new();
    let bot = BotApi::start();
    sb.write(
        ".almanac/config.json5",
        &format!(
            r#"{{agents: {{defaults: {{model: "openai/test-model", heartbeat: {{target: "telegram", to: "555"}}}}}},
            hooks: {{enabled: true, token: "{HOOK_TOKEN}"}},
            channels: {{telegram: {{botToken: "{TOKEN}", apiRoot: "{}"}}}}}}"#,
            bot.root
        ),
    );
    sb.write(".almanac/workspace/HEARTBEAT.md", "Check the disks.\n");
    let model = ScriptedServer::start(vec![text("Disk 2 is full."), text("Deploy done.")]);
    let gw = start(&sb, &model);
    let beat = sb
        .run(&["system", "heartbeat", "run-now", "--json"])
        .ok()
        .json();
    assert_eq!(
        (&beat["status"], &beat["channel"]),
        (&json!("sent"), &json!("telegram")),
        "{beat}"
    );
    let out = sent(&bot, 1);
    assert_eq!(
        (&out[0]["chat_id"], &out[0]["text"]),
        (&json!("555"), &json!("Disk 2 is full."))
    );
    let auth = bearer();
    let post = |body: &str| {
        send(
            gw.port,
            "POST",
            "/hooks/agent",
            &[("authorization", &auth)],
            body,
        )
    };
    let refused = post(r#"{"message": "deploy?", "channel": "telegram"}"#);
    assert_eq!(refused.status, 400, "{}", refused.body);
    let accepted =
        post(r#"{"message": "deploy finished", "name": "CI", "channel": "telegram", "to": "556"}"#);
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let out = sent(&bot, 2);
    assert_eq!(
        (&out[1]["chat_id"], &out[1]["text"]),
        (&json!("556"), &json!("Deploy done."))
    );
}
