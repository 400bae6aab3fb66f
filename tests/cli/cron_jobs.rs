//! `almanac cron …`: scheduled jobs in `cron/jobs.json`, edited by the
//! commands under the store's lock, listed from the derived index; runs
//! and runtime state recorded through the library as the gateway records
//! them.

use serde_json::{Value, json};

use crate::common::Sandbox;

const NOW: &str = "2026-11-29T09:00:00+00:00";
const STORE: &str = ".almanac/cron/jobs.json";

fn now_ms() -> i64 {
    NOW.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// `almanac --now NOW args…`.
fn cron(sb: &Sandbox, args: &[&str]) -> crate::common::Run {
    let mut all = vec!["--now", NOW, "cron"];
    all.extend_from_slice(args);
    sb.run(&all)
}

fn ids(list: &Value) -> Vec<String> {
    list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn add_list_edit_disable_remove() {
    let sb = Sandbox::new();
    let added = cron(
        &sb,
        &[
            "add",
            "--name",
            "Morning brief",
            "--cron",
            "0 7 * * *",
            "--tz",
            "Europe/Paris",
            "--message",
            "Summarise my inbox",
            "--catch-up",
            "skip",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(added["ok"], true);
    let job = &added["job"];
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(uuid_version(&id), Some(4), "{id}");
    assert_eq!(
        job["schedule"],
        json!({"kind": "cron", "expr": "0 7 * * *", "tz": "Europe/Paris"})
    );
    assert_eq!(job["sessionTarget"], "isolated");
    assert_eq!(
        job["payload"],
        json!({"kind": "agentTurn", "message": "Summarise my inbox"})
    );
    assert_eq!(job["delivery"], json!({"mode": "announce"}));
    assert_eq!(job["catchUp"], "skip");
    assert_eq!(job["createdAtMs"], now_ms());
    // 07:00 in Paris on 30 November is 06:00 UTC.
    let next = "2026-11-30T06:00:00Z".parse::<jiff::Timestamp>().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"], next.as_millisecond());

    let text = cron(
        &sb,
        &[
            "add",
            "--name",
            "Stand up",
            "--every",
            "30m",
            "--system-event",
            "Stand up and stretch",
        ],
    )
    .ok()
    .stdout;
    assert!(text.starts_with("Added "), "{text}");
    assert!(
        text.contains("\"Stand up\" (every 30m (from 2026-11-29 09:00 UTC))"),
        "{text}"
    );
    assert!(
        text.contains("Next run: 2026-11-29 09:30:00 UTC."),
        "{text}"
    );

    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 2);
    assert_eq!(list["offset"], 0);
    assert_eq!(list["limit"], 200);
    assert_eq!(list["hasMore"], false);
    assert_eq!(list["nextOffset"], Value::Null);
    assert_eq!(list["jobs"][0]["name"], "Stand up", "soonest first");
    assert_eq!(list["jobs"][1]["id"], id.as_str());
    let table = cron(&sb, &["list"]).ok().stdout;
    assert!(
        table.contains("cron 0 7 * * * (Europe/Paris)")
            && table.contains("2026-11-30 06:00:00 UTC"),
        "every schedule shows its zone:\n{table}"
    );

    // Edit by an id prefix: only what is given changes.
    let edited = cron(
        &sb,
        &[
            "edit",
            &id[..8],
            "--name",
            "Morning brief (short)",
            "--cron",
            "30 6 * * 1-5",
            "--json",
        ],
    )
    .ok()
    .json();
    let job = &edited["job"];
    assert_eq!(job["name"], "Morning brief (short)");
    assert_eq!(job["schedule"]["expr"], "30 6 * * 1-5");
    assert_eq!(job["schedule"]["tz"], "Europe/Paris", "the zone stays");
    assert_eq!(job["payload"]["message"], "Summarise my inbox");
    assert_eq!(job["catchUp"], "skip");
    // Monday 30 November, 06:30 in Paris.
    let next = "2026-11-30T05:30:00Z".parse::<jiff::Timestamp>().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"], next.as_millisecond());

    let disabled = cron(&sb, &["disable", &id[..8], "--json"]).ok().json();
    assert_eq!(disabled["job"]["enabled"], false);
    assert_eq!(disabled["job"]["state"].get("nextRunAtMs"), None);
    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 1, "disabled jobs are left out");
    let all = cron(&sb, &["list", "--all", "--json"]).ok().json();
    assert_eq!(all["total"], 2);
    let off = cron(&sb, &["list", "--disabled", "--json"]).ok().json();
    assert_eq!(ids(&off), vec![id.to_string()]);
    let enabled = cron(&sb, &["enable", &id, "--json"]).ok().json();
    assert_eq!(enabled["job"]["enabled"], true);
    assert_eq!(
        enabled["job"]["state"]["nextRunAtMs"],
        next.as_millisecond()
    );

    let status = cron(&sb, &["status", "--json"]).ok().json();
    assert_eq!(status["enabled"], true);
    assert_eq!(status["jobs"], 2);
    assert_eq!(
        status["storePath"],
        sb.path(STORE).display().to_string().as_str()
    );
    let half_past = "2026-11-29T09:30:00Z".parse::<jiff::Timestamp>().unwrap();
    assert_eq!(status["nextWakeAtMs"], half_past.as_millisecond());

    let removed = cron(&sb, &["rm", &id[..8], "--json"]).ok().json();
    assert_eq!(removed, json!({"ok": true, "removed": true, "id": id}));
    let list = cron(&sb, &["list", "--all", "--json"]).ok().json();
    assert_eq!(list["total"], 1);
    let err = cron(&sb, &["remove", &id]).code(1).stderr;
    assert!(err.contains("no cron job"), "{err}");

    // The file is OpenClaw's format, with a backup of the previous one.
    let file: Value = serde_json::from_str(&sb.read(STORE)).unwrap();
    assert_eq!(file["version"], 1);
    assert_eq!(file["jobs"].as_array().unwrap().len(), 1);
    assert!(sb.path(".almanac/cron/jobs.json.bak").exists());
}

fn uuid_version(id: &str) -> Option<u32> {
    let parts: Vec<&str> = id.split('-').collect();
    if parts.len() != 5 || id.len() != 36 {
        return None;
    }
    parts[2].chars().next()?.to_digit(16)
}

#[test]
fn cron_run_needs_the_gateway() {
    let sb = Sandbox::new();
    let added = cron(
        &sb,
        &[
            "add",
            "--name",
            "n",
            "--every",
            "1h",
            "--system-event",
            "x",
            "--json",
        ],
    )
    .ok()
    .json();
    let id = added["job"]["id"].as_str().unwrap();
    let run = cron(&sb, &["run", id]).code(1);
    assert_eq!(
        run.stderr,
        "error: gateway not running (start it with `almanac gateway run`)\n"
    );
    cron(&sb, &["run", id, "--due"]).code(1);
}

#[test]
fn bad_jobs_are_refused_naming_what_is_wrong() {
    let sb = Sandbox::new();
    let add = |extra: &[&str]| {
        let mut args = vec!["add", "--name", "x"];
        args.extend_from_slice(extra);
        cron(&sb, &args)
    };
    let err = add(&["--cron", "0 25 * * *", "--message", "m"])
        .code(2)
        .stderr;
    assert_eq!(
        err,
        "error: `schedule.expr` `0 25 * * *`: field 2 (hour): 25 is out of range 0-23\n"
    );
    let err = add(&[
        "--cron",
        "0 7 * * *",
        "--tz",
        "Mars/Olympus",
        "--message",
        "m",
    ])
    .code(2)
    .stderr;
    assert!(
        err.contains("`Mars/Olympus` is not a known IANA time zone"),
        "{err}"
    );
    let cases: &[(&[&str], &str)] = &[
        (&["--message", "m"], "give one of --at, --every or --cron"),
        (&["--every", "1h"], "give one of --system-event"),
        (&["--every", "soon", "--message", "m"], "is not a duration"),
        (
            &["--every", "1h", "--tz", "UTC", "--message", "m"],
            "cannot be used with",
        ),
        (
            &["--at", "2026-11-29T08:00:00Z", "--message", "m"],
            "more than a minute in the past",
        ),
        (
            &["--at", "2040-01-01", "--message", "m"],
            "more than 10 years ahead",
        ),
        (&["--at", "whenever", "--message", "m"], "is not a time"),
        (
            &["--every", "1h", "--session", "main", "--message", "m"],
            "`payload`",
        ),
        (
            &[
                "--every",
                "1h",
                "--session",
                "isolated",
                "--system-event",
                "e",
            ],
            "`payload`",
        ),
        (
            &[
                "--every",
                "1h",
                "--session",
                "session:a/b",
                "--message",
                "m",
            ],
            "`sessionTarget`",
        ),
        (
            &["--every", "1h", "--agent", "ops", "--message", "m"],
            "unknown agent `ops`",
        ),
        (
            &["--every", "1h", "--webhook", "ftp://x", "--message", "m"],
            "not an http(s) URL",
        ),
        (
            &["--every", "1h", "--stagger", "30s", "--message", "m"],
            "apply to --cron",
        ),
        (
            &["--every", "1h", "--delete-after-run", "--message", "m"],
            "apply to --at jobs",
        ),
        (
            &["--every", "1h", "--system-event", "e", "--model", "a/b"],
            "apply to agent turns",
        ),
        (
            &["--every", "1h", "--message", "m", "--thinking", "deep"],
            "invalid value",
        ),
    ];
    for (extra, needle) in cases {
        let run = add(extra);
        assert_eq!(run.code, 2, "{extra:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(needle), "{extra:?}: {}", run.stderr);
    }
    assert!(!sb.path(STORE).exists(), "nothing was written");
}

#[test]
fn times_and_zones() {
    let sb = Sandbox::new();
    // An offset-less --at is UTC, or in --tz.
    let utc = cron(
        &sb,
        &[
            "add",
            "--name",
            "a",
            "--at",
            "2026-11-29T18:00",
            "--system-event",
            "e",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(utc["job"]["schedule"]["at"], "2026-11-29T18:00:00.000Z");
    assert_eq!(utc["job"]["deleteAfterRun"], true);
    let tokyo = cron(
        &sb,
        &[
            "add",
            "--name",
            "b",
            "--at",
            "2026-11-29T18:00",
            "--tz",
            "Asia/Tokyo",
            "--keep-after-run",
            "--system-event",
            "e",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(tokyo["job"]["schedule"]["at"], "2026-11-29T09:00:00.000Z");
    assert_eq!(tokyo["job"]["deleteAfterRun"], false);
    let relative = cron(
        &sb,
        &[
            "add",
            "--name",
            "c",
            "--at",
            "20m",
            "--system-event",
            "e",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        relative["job"]["schedule"]["at"],
        "2026-11-29T09:20:00.000Z"
    );
    // A top-of-hour expression is staggered unless --exact; the host's
    // zone is named when the job has none.
    let hourly = cron(
        &sb,
        &[
            "add",
            "--name",
            "h",
            "--cron",
            "0 * * * *",
            "--system-event",
            "e",
        ],
    )
    .ok()
    .stdout;
    assert!(
        hourly.contains("(cron 0 * * * * (host zone UTC), staggered within 5m)"),
        "{hourly}"
    );
    let exact = cron(
        &sb,
        &[
            "add",
            "--name",
            "x",
            "--cron",
            "0 * * * *",
            "--exact",
            "--system-event",
            "e",
            "--json",
        ],
    )
    .ok()
    .json();
    assert_eq!(exact["job"]["schedule"]["staggerMs"], 0);
    // --tz alone changes a cron job's zone.
    let id = exact["job"]["id"].as_str().unwrap();
    let moved = cron(&sb, &["edit", id, "--tz", "Asia/Kolkata", "--json"])
        .ok()
        .json();
    assert_eq!(moved["job"]["schedule"]["tz"], "Asia/Kolkata");
    assert_eq!(moved["job"]["schedule"]["staggerMs"], 0);
    let err = cron(&sb, &["edit", id, "--tz", "Nowhere/City"])
        .code(2)
        .stderr;
    assert!(err.contains("`Nowhere/City`"), "{err}");
}

#[test]
fn runs_and_runtime_state_recorded_by_the_gateway_show() {
    let sb = Sandbox::new();
    let added = cron(
        &sb,
        &[
            "add",
            "--name",
            "n",
            "--every",
            "1h",
            "--system-event",
            "x",
            "--json",
        ],
    )
    .ok()
    .json();
    let id = added["job"]["id"].as_str().unwrap().to_string();
    let state_dir = sb.path(".almanac");
    for (n, status) in ["ok", "error", "ok"].iter().enumerate() {
        almanac::testing::append_cron_run(
            &state_dir,
            &id,
            status,
            &format!("run {n}"),
            now_ms() + n as i64 * 60_000,
        )
        .unwrap();
    }
    let runs = cron(&sb, &["runs", "--id", &id[..6], "--json"]).ok().json();
    assert_eq!(runs["jobId"], id.as_str());
    assert_eq!(runs["total"], 3);
    let summaries: Vec<&str> = runs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries, ["run 2", "run 1", "run 0"]);
    assert_eq!(runs["entries"][0]["action"], "finished");
    let limited = cron(&sb, &["runs", "--id", &id, "--limit", "1", "--json"])
        .ok()
        .json();
    assert_eq!(limited["entries"].as_array().unwrap().len(), 1);
    assert_eq!(limited["hasMore"], true);
    cron(&sb, &["runs", "--id", &id, "--limit", "0"]).code(2);
    let text = cron(&sb, &["runs", "--id", &id]).ok().stdout;
    assert!(text.lines().next().unwrap().contains("ok"), "{text}");

    // The runner's state: in the listing, without refreshing the backup.
    let backup = std::fs::read(sb.path(".almanac/cron/jobs.json.bak")).ok();
    almanac::testing::record_cron_state(
        &state_dir,
        &id,
        json!({"lastRunAtMs": now_ms(), "lastRunStatus": "ok", "lastStatus": "ok",
               "nextRunAtMs": now_ms() + 3_600_000}),
        now_ms(),
    )
    .unwrap();
    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["jobs"][0]["state"]["lastRunStatus"], "ok");
    assert_eq!(
        std::fs::read(sb.path(".almanac/cron/jobs.json.bak")).ok(),
        backup
    );
    // A removed job's runs are still there by its whole id.
    cron(&sb, &["rm", &id]).ok();
    let runs = cron(&sb, &["runs", "--id", &id, "--json"]).ok().json();
    assert_eq!(runs["total"], 3);
}

#[test]
fn hand_edits_show_and_reading_never_writes_the_store() {
    let sb = Sandbox::new();
    cron(
        &sb,
        &[
            "add",
            "--name",
            "one",
            "--every",
            "1h",
            "--system-event",
            "x",
        ],
    )
    .ok();
    cron(
        &sb,
        &[
            "add",
            "--name",
            "two",
            "--every",
            "2h",
            "--system-event",
            "y",
        ],
    )
    .ok();
    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 2);
    // By hand: rename one job, drop the other, add a field almanac does
    // not know.
    let mut file: Value = serde_json::from_str(&sb.read(STORE)).unwrap();
    let jobs = file["jobs"].as_array_mut().unwrap();
    jobs.truncate(1);
    jobs[0]["name"] = json!("one, renamed");
    jobs[0]["myNote"] = json!("mine");
    sb.write(STORE, &serde_json::to_string_pretty(&file).unwrap());
    let before = sb.read(STORE);
    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["jobs"][0]["name"], "one, renamed");
    assert_eq!(list["jobs"][0]["myNote"], "mine");
    cron(&sb, &["status"]).ok();
    cron(&sb, &["list", "--all", "--query", "renamed"]).ok();
    assert_eq!(sb.read(STORE), before, "reading never writes the store");
    // A change through the commands keeps the hand-added field.
    let id = list["jobs"][0]["id"].as_str().unwrap();
    cron(&sb, &["edit", id, "--description", "kept"]).ok();
    let file: Value = serde_json::from_str(&sb.read(STORE)).unwrap();
    assert_eq!(file["jobs"][0]["myNote"], "mine");
    assert_eq!(file["jobs"][0]["description"], "kept");
}

#[test]
fn a_damaged_store_is_never_an_empty_schedule_in_silence() {
    let sb = Sandbox::new();
    for name in ["one", "two"] {
        cron(
            &sb,
            &[
                "add",
                "--name",
                name,
                "--every",
                "1h",
                "--system-event",
                "x",
            ],
        )
        .ok();
    }
    sb.write(STORE, "{\"version\": 1, \"jobs\": [ oops");
    let list = cron(&sb, &["list", "--json"]).ok();
    assert_eq!(
        list.json()["total"],
        2,
        "the last good copy holds both jobs (the backup only the first)"
    );
    assert!(
        list.stderr.starts_with("warning: the job store ")
            && list.stderr.contains("is damaged")
            && list.stderr.contains("jobs.json.last-good"),
        "{}",
        list.stderr
    );
    assert_eq!(sb.read(STORE), "{\"version\": 1, \"jobs\": [ oops");
    // The next change moves it aside and goes on from that copy.
    let added = cron(
        &sb,
        &[
            "add",
            "--name",
            "three",
            "--every",
            "1h",
            "--system-event",
            "x",
        ],
    )
    .ok();
    assert!(added.stderr.contains("moved it to"), "{}", added.stderr);
    let names: Vec<String> = std::fs::read_dir(sb.path(".almanac/cron"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("jobs.json.corrupt-")),
        "{names:?}"
    );
    let list = cron(&sb, &["list", "--json"]).ok();
    assert_eq!(list.json()["total"], 3);
    assert_eq!(list.stderr, "");
}

#[test]
fn commands_in_parallel_lose_no_job() {
    let sb = Sandbox::new();
    let children: Vec<_> = (0..12)
        .map(|n| {
            sb.cmd()
                .args([
                    "--now",
                    NOW,
                    "cron",
                    "add",
                    "--name",
                    &format!("job {n}"),
                    "--every",
                    "1h",
                    "--system-event",
                    "x",
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 12);
}

#[test]
fn paging_and_the_switch() {
    let sb = Sandbox::new();
    for n in 0..5 {
        cron(
            &sb,
            &[
                "add",
                "--name",
                &format!("job {n}"),
                "--every",
                &format!("{}m", 10 + n),
                "--system-event",
                "x",
            ],
        )
        .ok();
    }
    let page = cron(&sb, &["list", "--limit", "2", "--offset", "2", "--json"])
        .ok()
        .json();
    let names: Vec<&str> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["job 2", "job 3"]);
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["nextOffset"], 4);
    cron(&sb, &["list", "--limit", "201"]).code(2);
    let text = cron(&sb, &["list", "--limit", "2"]).ok().stdout;
    assert!(text.contains("1–2 of 5; --offset 2 shows more."), "{text}");
    let off = sb
        .run(&["--set", "cron.enabled=false", "cron", "status", "--json"])
        .ok();
    assert_eq!(off.json()["enabled"], false);
    assert!(
        off.stderr.contains("cron.enabled is false"),
        "{}",
        off.stderr
    );
}

#[test]
fn a_running_gateway_runs_a_job_added_by_a_command_and_cron_run_runs_it_now() {
    use crate::gateway::{Gateway, eventually};
    let sb = Sandbox::new();
    let gw = Gateway::start(&sb, &[]);
    let added = cron(
        &sb,
        &[
            "add",
            "--name",
            "tick",
            "--cron",
            "* * * * * *",
            "--tz",
            "UTC",
            "--system-event",
            "tick",
            "--wake",
            "next-heartbeat",
            "--json",
        ],
    )
    .ok()
    .json();
    let id = added["job"]["id"].as_str().unwrap().to_string();
    // Told of the change, the runner runs the job within seconds, each
    // slot once.
    let runs: Vec<Value> = eventually(std::time::Duration::from_secs(20), || {
        let runs = cron(&sb, &["runs", "--id", &id, "--json"]).ok().json();
        let list = runs["entries"].as_array().cloned().unwrap_or_default();
        (list.len() >= 2).then_some(list)
    });
    let mut slots: Vec<i64> = runs.iter().map(|r| r["slotMs"].as_i64().unwrap()).collect();
    let n = slots.len();
    slots.dedup();
    assert_eq!(slots.len(), n, "a slot ran twice: {runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{runs:?}");
    // Each run is a cron task in the ledger.
    let tasks = sb
        .run(&["tasks", "list", "--runtime", "cron", "--json"])
        .ok()
        .json();
    assert!(!tasks["tasks"].as_array().unwrap().is_empty());
    // `cron run` runs it now, through the gateway.
    let ran = cron(&sb, &["run", &id[..8], "--json"]).ok().json();
    assert_eq!(ran["ran"], true, "{ran}");
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    assert!(status["nextCronAtMs"].is_i64(), "{status}");
    drop(gw);
}

#[test]
fn a_turn_schedules_a_reminder_that_cron_list_shows() {
    use crate::agent::{text, tool_call};
    use crate::scripted::ScriptedServer;

    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "cron",
            json!({
                "action": "add",
                "job": {
                    "name": "Call Ana",
                    "schedule": {"kind": "at", "at": "2026-11-30T09:00:00"},
                    "sessionTarget": "main",
                    "payload": {"kind": "systemEvent", "text": "Call Ana back"}
                },
                "contextMessages": 1
            }),
        ),
        text("I will remind you at 9 tomorrow."),
    ]);
    let turn = sb
        .run_env(
            &[
                "--now",
                NOW,
                "agent",
                "--model",
                "openai/test-model",
                "--message",
                "Remind me at 9 tomorrow to call Ana",
                "--json",
            ],
            &[("OPENAI_BASE_URL", &server.url)],
        )
        .ok()
        .json();
    assert_eq!(turn["reply"], "I will remind you at 9 tomorrow.");
    let requests = server.requests();
    let offered: Vec<String> = requests[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"cron".to_string()), "{offered:?}");
    // The model was told what it scheduled.
    let result = requests[1].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap();
    let told: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(told["ok"], true, "{result}");

    let list = cron(&sb, &["list", "--json"]).ok().json();
    assert_eq!(list["total"], 1, "{list}");
    let job = &list["jobs"][0];
    assert_eq!(job["id"], told["job"]["id"]);
    assert_eq!(job["name"], "Call Ana");
    assert_eq!(
        job["schedule"],
        json!({"kind": "at", "at": "2026-11-30T09:00:00.000Z"})
    );
    assert_eq!(job["sessionTarget"], "main");
    assert_eq!(job["sessionKey"], "agent:main:main");
    assert_eq!(job["createdBy"], "agent");
    assert_eq!(
        job["payload"]["text"],
        "Call Ana back\n\nRecent context:\n- User: Remind me at 9 tomorrow to call Ana"
    );
    let at = "2026-11-30T09:00:00Z".parse::<jiff::Timestamp>().unwrap();
    assert_eq!(job["state"]["nextRunAtMs"], at.as_millisecond());
    let stored: Value = serde_json::from_str(&sb.read(STORE)).unwrap();
    assert_eq!(stored["jobs"][0]["createdBy"], "agent");
}

#[test]
fn a_turn_in_the_gateway_schedules_through_it_and_wakes_the_main_session() {
    use std::time::Duration;

    use crate::agent::{text, tool_call};
    use crate::gateway::{Gateway, eventually};
    use crate::scripted::ScriptedServer;

    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "cron",
            json!({"action": "add", "job": {
                "name": "Stretch",
                "schedule": {"kind": "every", "everyMs": 3_600_000},
                "payload": {"kind": "systemEvent", "text": "Stand up"}
            }}),
        ),
        tool_call(
            "c2",
            "cron",
            json!({"action": "wake", "text": "Water the plants", "mode": "next-heartbeat"}),
        ),
        text("Done."),
        text("Noted."),
    ]);
    let gw = Gateway::start(&sb, &[("OPENAI_BASE_URL", &server.url)]);
    let (_, status) = gw.request("GET", "/v1/status", None);
    assert!(status["nextCronAtMs"].is_null(), "{status}");
    let agent = |message: &str| {
        sb.run_env(
            &[
                "agent",
                "--model",
                "openai/test-model",
                "--message",
                message,
                "--json",
            ],
            &[("OPENAI_BASE_URL", &server.url)],
        )
        .ok()
        .json()
    };
    let turn = agent("Remind me to stretch every hour");
    assert_eq!(turn["reply"], "Done.", "{turn}");
    let results: Vec<Value> = server.requests()[2].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results[0]["ok"], true, "{results:?}");
    assert_eq!(results[1]["queued"], true, "{results:?}");

    // The job is in the store, and the gateway's runner follows it at
    // once (it was told, not left to its next tick).
    let list = sb.run(&["cron", "list", "--json"]).ok().json();
    assert_eq!(list["total"], 1, "{list}");
    let job = &list["jobs"][0];
    assert_eq!(job["id"], results[0]["job"]["id"]);
    assert_eq!(job["createdBy"], "agent");
    let next = job["state"]["nextRunAtMs"].as_i64().unwrap();
    eventually(Duration::from_secs(10), || {
        let (_, status) = gw.request("GET", "/v1/status", None);
        (status["nextCronAtMs"].as_i64() == Some(next)).then_some(())
    });

    // The wake queued its event for the main session's next turn.
    agent("Anything else?");
    let last = server.requests().last().unwrap().json();
    let asked = last["messages"].as_array().unwrap().last().unwrap().clone();
    // The model's words, shown as untrusted.
    assert!(
        asked.to_string().contains("System (untrusted): [")
            && asked.to_string().contains("Water the plants"),
        "{asked}"
    );
}
