//! The README's agent tour, run line by line as it is written, against the
//! scripted model server, with no config file; the configuration page's
//! examples; and the model a session keeps.

use serde_json::Value;

use crate::agent::text;
use crate::common::{Run, Sandbox};
use crate::scripted::ScriptedServer;

const README: &str = include_str!("../../README.md");
const AGENT_PAGE: &str = include_str!("../../docs/agent.md");
const CONFIGURATION_PAGE: &str = include_str!("../../docs/configuration.md");

/// The shell block of the README that shows `agent prompt`.
fn tour_block() -> Vec<&'static str> {
    let mut blocks = README.split("```sh\n").skip(1).map(|rest| {
        rest.split("```")
            .next()
            .expect("a closed block")
            .lines()
            .collect::<Vec<_>>()
    });
    blocks
        .find(|lines| lines.iter().any(|l| l.starts_with("almanac agent prompt")))
        .expect("the README has an agent tour")
}

/// Splits a shell line into words: double and single quotes, and an
/// unquoted `#` after a space starts a comment.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut prev_space = true;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '#') if prev_space => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
        prev_space = c.is_whitespace();
    }
    words.extend(word);
    words
}

#[test]
fn the_readme_agent_tour_works_as_written() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        text("You booked the dentist."),
        text("The week before: a flight."),
        text("Hi, a new session."),
    ]);
    let mut env: Vec<(String, String)> = Vec::new();
    let mut runs: Vec<(String, Run, usize)> = Vec::new();
    for line in tour_block() {
        let words = words(line);
        match words.first().map(String::as_str) {
            Some("export") => {
                let (name, value) = words[1].split_once('=').unwrap();
                // The one change: the model server is the scripted one.
                let value = if name.ends_with("_BASE_URL") {
                    server.url.clone()
                } else {
                    value.to_string()
                };
                env.push((name.to_string(), value));
            }
            Some("almanac") => {
                let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
                let vars: Vec<(&str, &str)> =
                    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let run = sb.run_env(&args, &vars);
                assert_eq!(
                    run.code, 0,
                    "`{line}` failed\nstdout:\n{}\nstderr:\n{}",
                    run.stdout, run.stderr
                );
                runs.push((line.to_string(), run, server.requests().len()));
            }
            _ => {}
        }
    }
    assert!(!sb.path(".almanac/config.json5").exists(), "no config file");
    let find = |start: &str| {
        runs.iter()
            .find(|(line, _, _)| line.starts_with(start))
            .unwrap_or_else(|| panic!("the tour has `{start}`"))
    };
    let requests = server.requests();
    let model_of = |i: usize| requests[i].json()["model"].clone();
    // The second turn keeps the session's model.
    let (_, second, _) = find("almanac agent -m \"and the week before?\"");
    let second: Value = second.json();
    assert_eq!(second["model"], "openai/llama3.1");
    assert_eq!(second["reply"], "The week before: a flight.");
    assert_eq!(model_of(1), "llama3.1");
    let messages = requests[1].json()["messages"].as_array().unwrap().len();
    assert_eq!(messages, 4, "system, the first turn, the new message");
    // `agent prompt` sends nothing.
    let (_, prompt, after_prompt) = find("almanac agent prompt");
    assert_eq!(*after_prompt, 2, "nothing sent by agent prompt");
    assert!(
        prompt.stdout.contains("# System prompt"),
        "{}",
        prompt.stdout
    );
    assert!(
        prompt.stdout.contains("and the week before?"),
        "the session's conversation: {}",
        prompt.stdout
    );
    // `/new provider/model`: a new session with that model.
    assert_eq!(model_of(2), "qwen2.5");
    let (_, sessions, _) = find("almanac sessions ");
    assert!(sessions.stdout.contains("qwen2.5"), "{}", sessions.stdout);
    let (_, show, _) = find("almanac sessions show");
    assert!(
        show.stdout.contains("Hi, a new session."),
        "{}",
        show.stdout
    );
    assert_eq!(requests.len(), 3);
    // The agent page shows the same commands.
    let tour = tour_block().join("\n");
    assert!(AGENT_PAGE.contains(&tour), "docs/agent.md shows the tour");
}

fn turn(sb: &Sandbox, server: &ScriptedServer, now: &str, args: &[&str]) -> Value {
    let mut all = vec!["--now", now, "agent"];
    all.extend_from_slice(args);
    all.push("--json");
    sb.run_env(&all, &[("OPENAI_BASE_URL", &server.url)])
        .ok()
        .json()
}

#[test]
fn a_session_keeps_its_model() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start((0..6).map(|_| text("ok")).collect());
    let day1 = "2026-11-29T09:00:00+00:00";
    turn(&sb, &server, day1, &["--model", "openai/first", "-m", "a"]);
    // The next day's first turn starts a new session, with the model the
    // session last used.
    let v = turn(&sb, &server, "2026-11-30T09:00:00+00:00", &["-m", "b"]);
    assert_eq!(v["started"], "daily");
    assert_eq!(v["model"], "openai/first");
    // A model chosen with /new is the session's, over --model of a single
    // turn.
    turn(
        &sb,
        &server,
        "2026-11-30T09:01:00+00:00",
        &["-m", "/new openai/chosen"],
    );
    let v = turn(
        &sb,
        &server,
        "2026-11-30T09:02:00+00:00",
        &["--model", "openai/once", "-m", "c"],
    );
    assert_eq!(v["model"], "openai/once");
    let v = turn(&sb, &server, "2026-11-30T09:03:00+00:00", &["-m", "d"]);
    assert_eq!(v["model"], "openai/chosen");
    let models: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.json()["model"].clone())
        .collect();
    assert_eq!(models, ["first", "first", "chosen", "once", "chosen"]);
    // Without a model anywhere, a turn changes nothing.
    let fresh = Sandbox::new();
    fresh.run(&["agent", "-m", "hi"]).code(2);
    assert!(!fresh.path(".almanac/agents").exists());
}

#[test]
fn agent_prompt_needs_no_key_and_sends_nothing() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![]);
    // No key for the public endpoints: the prompt is shown all the same.
    for model in ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"] {
        let v = sb
            .run(&["agent", "prompt", "--model", model, "-m", "hello", "--json"])
            .ok()
            .json();
        assert_eq!(v["model"], model);
    }
    // The session's model, from a stored entry, needs no key either.
    sb.write(
        ".almanac/agents/main/sessions/sessions.json",
        r#"{"agent:main:main": {"sessionId": "s1", "updatedAt": 1, "modelProvider": "anthropic", "model": "claude-x"}}"#,
    );
    let v = sb
        .run_env(
            &["agent", "prompt", "-m", "hello", "--json"],
            &[("OPENAI_BASE_URL", &server.url)],
        )
        .ok()
        .json();
    assert_eq!(v["model"], "anthropic/claude-x");
    assert!(server.requests().is_empty());
}

#[test]
fn the_configuration_page_examples_work_on_a_fresh_install() {
    let sb = Sandbox::new();
    let block = CONFIGURATION_PAGE
        .split("```sh\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .find(|b| b.contains("almanac config get"))
        .expect("docs/configuration.md shows config commands");
    let mut got = None;
    for line in block.lines().filter(|l| l.starts_with("almanac ")) {
        let words = words(line);
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let run = sb.run(&args);
        assert_eq!(run.code, 0, "`{line}`: {}", run.stderr);
        if line.starts_with("almanac config get") {
            got = Some(run.stdout);
        }
    }
    let workspace = sb.path(".almanac/workspace").display().to_string();
    assert_eq!(got.unwrap(), format!("{workspace}\n"));
    // The example of `config get --help` too, on another fresh home.
    let fresh = Sandbox::new();
    let help = fresh.run(&["config", "get", "--help"]).ok().stdout;
    assert!(help.contains("e.g. agents.defaults.workspace"), "{help}");
    let v = fresh
        .run(&["config", "get", "agents.defaults.workspace", "--json"])
        .ok()
        .json();
    assert_eq!(v["origin"], "default");
    assert!(!fresh.path(".almanac").exists(), "a read creates nothing");
}

#[test]
fn config_get_prints_the_exec_ask_in_use_when_it_follows_security_actions() {
    let sb = Sandbox::new();
    let v = sb
        .run(&["config", "get", "tools.exec.ask", "--json"])
        .ok()
        .json();
    assert_eq!(
        (v["value"].as_str(), v["origin"].as_str()),
        (Some("on-miss"), Some("default"))
    );
    let off = sb.run(&[
        "--set",
        "security.actions=false",
        "config",
        "get",
        "tools.exec.ask",
    ]);
    assert_eq!(off.ok().stdout, "off\n");
    let set = sb.run(&[
        "--set",
        "tools.exec.ask=always",
        "config",
        "get",
        "tools.exec.ask",
    ]);
    assert_eq!(set.ok().stdout, "always\n");
}

#[test]
fn the_readme_says_how_to_install_which_rust_and_the_license() {
    let manifest = include_str!("../../Cargo.toml");
    let field = |name: &str| {
        manifest
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_else(|| panic!("Cargo.toml declares {name}"))
    };
    assert!(README.contains("cargo install --path ."), "install step");
    let rust = field("rust-version");
    assert!(
        README.contains(&format!("Rust {rust} or newer")),
        "the README names Rust {rust}"
    );
    assert_eq!(field("license"), "MIT");
    let license = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/LICENSE"))
        .expect("a LICENSE file");
    assert!(license.starts_with("MIT License\n"), "{license}");
    assert!(license.contains("Copyright (c) 2026 The almanac developers"));
    // The README still opens with build-and-run, then the test command,
    // an executable script that checks formatting and lints, fetches the
    // local model and runs every test.
    let first_blocks: Vec<&str> = README
        .split("```sh\n")
        .skip(1)
        .take(2)
        .map(|b| b.split("```").next().unwrap().trim())
        .collect();
    assert_eq!(first_blocks[0], "cargo run --release -- status");
    assert_eq!(first_blocks[1], "scripts/test");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test");
    let mode = std::fs::metadata(&script)
        .expect("scripts/test")
        .permissions();
    assert!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111 != 0,
        "scripts/test is executable"
    );
    let script = std::fs::read_to_string(&script).unwrap();
    for step in [
        "cargo fmt --all --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "bench/fetch_model.sh",
        "cargo test --workspace",
    ] {
        assert!(script.contains(step), "scripts/test runs `{step}`");
    }
}
