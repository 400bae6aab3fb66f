//! The user's files: what almanac may move, where it may read and write
//! through symlinks, and that reading commands leave everything as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{Run, Sandbox};

const NOW: &str = "2026-11-29T17:06:00Z";
const HAND_WRITTEN: &str = include_str!("../fixtures/handwritten-memory.md");

fn sm(sb: &Sandbox, args: &[&str]) -> Run {
    sm_env(sb, args, &[])
}

fn sm_env(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut all = vec!["--now", NOW, "session-memory"];
    all.extend_from_slice(args);
    sb.run_env(&all, env)
}

/// The fixture without its stamped entries (and their continuation
/// lines): every line the user wrote otherwise.
fn hand_written_lines() -> String {
    let mut out = String::new();
    let mut in_fence = false;
    let mut in_entry = false;
    for line in HAND_WRITTEN.split_inclusive('\n') {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        let continued = in_entry && line.starts_with("  ") && !line.trim().is_empty();
        in_entry = !in_fence && (line.starts_with("- [20") || continued);
        if !in_entry {
            out.push_str(line);
        }
    }
    out
}

const PRUNE_WARNING: &str = "warning: MEMORY.md has 148 lines, over memory.session.longTermMaxLines (100); only stamped entries are pruned\n";

#[test]
fn a_long_term_append_keeps_a_hand_written_memory_and_says_what_moved() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/MEMORY.md", HAND_WRITTEN);
    let run = sm(&sb, &["append", "--long-term", "Prefers the aisle seat"]).ok();
    assert_eq!(
        run.stdout,
        "Stored: Prefers the aisle seat\n\
         Moved 1 entry from MEMORY.md to memory/archive/MEMORY-2022.md\n\
         Moved 2 entries from MEMORY.md to memory/archive/MEMORY-2023.md\n\
         Moved 9 entries from MEMORY.md to memory/archive/MEMORY-2024.md\n"
    );
    assert_eq!(run.stderr, PRUNE_WARNING);
    assert_eq!(
        sb.read(".almanac/workspace/MEMORY.md"),
        format!(
            "{}- [2026-11-29 17:06] Prefers the aisle seat\n",
            hand_written_lines()
        )
    );
    let archive = sb.read(".almanac/workspace/memory/archive/MEMORY-2024.md");
    assert!(
        archive.contains("- [2024-04-08 11:20] Batch window moved to 01:00–04:00\n  because the warehouse now starts at 05:00\n"),
        "{archive}"
    );
    // The next append finds only the note before it to move: the file
    // stays over its limit and says so again.
    let run = sm(&sb, &["append", "--long-term", "Second note"]).ok();
    assert_eq!(
        run.stdout,
        "Stored: Second note\nMoved 1 entry from MEMORY.md to memory/archive/MEMORY-2026.md\n"
    );
    assert_eq!(run.stderr, PRUNE_WARNING);
}

#[test]
fn every_long_term_path_reports_the_prune_in_json_too() {
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/MEMORY.md", HAND_WRITTEN);
    // MEMORY_AUTO_LONGTERM makes a plain append long-term.
    let run = sm_env(
        &sb,
        &["append", "--json", "Prefers the aisle seat"],
        &[("MEMORY_AUTO_LONGTERM", "1")],
    )
    .ok();
    let v = run.json();
    let pruned = &v["pruned"];
    assert_eq!(pruned["file"], "MEMORY.md");
    assert_eq!(pruned["entries"], 12);
    assert_eq!(pruned["linesBefore"], 161);
    assert_eq!(pruned["linesAfter"], 148);
    assert_eq!(pruned["maxLines"], 100);
    assert_eq!(pruned["overLimit"], true);
    assert_eq!(
        pruned["moves"][2],
        serde_json::json!({"to": "memory/archive/MEMORY-2024.md", "entries": 9})
    );
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("MEMORY.md has 148 lines"),
        "{v}"
    );
    assert_eq!(run.stderr, PRUNE_WARNING);
}

#[test]
fn a_prune_that_fits_moves_the_oldest_entries_and_warns_nothing() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/MEMORY.md",
        "# Memory\n\n**Name:** Ana\n- [2025-05-01 09:00] newer\n- [2024-01-01 09:00] older\n",
    );
    let run = sm(
        &sb,
        &[
            "--set",
            "memory.session.longTermMaxLines=5",
            "append",
            "--long-term",
            "newest",
        ],
    )
    .ok();
    assert_eq!(
        run.stdout,
        "Stored: newest\nMoved 1 entry from MEMORY.md to memory/archive/MEMORY-2024.md\n"
    );
    assert_eq!(run.stderr, "");
    assert_eq!(
        sb.read(".almanac/workspace/MEMORY.md"),
        "# Memory\n\n**Name:** Ana\n- [2025-05-01 09:00] newer\n- [2026-11-29 17:06] newest\n"
    );
}

#[test]
fn a_latin1_memory_md_refuses_the_note_and_a_retry_adds_nothing() {
    let sb = Sandbox::new();
    let original: &[u8] = b"# Long-term memory\n\n- Caf\xe9 on the corner\n";
    let path = sb.path(".almanac/workspace/MEMORY.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, original).unwrap();
    for _ in 0..2 {
        let run = sm(&sb, &["append", "--long-term", "likes tea"]);
        assert_ne!(run.code, 0);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(
            run.stderr.contains(
                "MEMORY.md is not UTF-8 text: byte 0xE9 on line 3, column 6; nothing was written"
            ),
            "{}",
            run.stderr
        );
        assert_eq!(std::fs::read(&path).unwrap(), original);
        assert!(!sb.path(".almanac/workspace/memory").exists());
    }
    // A daily note does not touch MEMORY.md.
    sm(&sb, &["append", "likes tea"]).ok();
    assert_eq!(std::fs::read(&path).unwrap(), original);
}

/// Every file under `dir` with its content (links as `-> target`).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let rel = path.strip_prefix(dir).unwrap().to_path_buf();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(rel, format!("-> {}", target.display()).into_bytes());
        } else if meta.is_dir() {
            out.insert(rel, b"/".to_vec());
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
    out
}

#[test]
fn symlinks_leaving_the_workspace_follow_one_rule_everywhere() {
    let sb = Sandbox::new();
    let ws = ".almanac/workspace";
    sb.write(
        &format!("{ws}/memory/2026-11-01.md"),
        "- planted tomatoes\n",
    );
    sb.write(
        "outside/private.md",
        "# Private\n\n- the vault code is 4321\n",
    );
    std::fs::create_dir_all(sb.path("outside/daily")).unwrap();
    std::os::unix::fs::symlink(
        sb.path("outside/private.md"),
        sb.path(&format!("{ws}/MEMORY.md")),
    )
    .unwrap();
    // Today's daily file: a dangling link to a file outside.
    std::os::unix::fs::symlink(
        sb.path("outside/daily/2026-11-29.md"),
        sb.path(&format!("{ws}/memory/2026-11-29.md")),
    )
    .unwrap();
    let outside_before = tree(&sb.path("outside"));

    // Append: refused, nothing written outside.
    for args in [
        &["append", "--long-term", "new secret"][..],
        &["append", "daily secret"][..],
    ] {
        let run = sm(&sb, args);
        assert_ne!(run.code, 0, "{args:?}");
        assert!(
            run.stderr.contains("symlink leaves the memory root")
                && run.stderr.contains("memory.allowSymlinkTargets"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(tree(&sb.path("outside")), outside_before);
    // Index and search: skipped with a warning.
    let run = sb.run(&["memory", "index"]).ok();
    assert!(
        run.stderr
            .contains("skipping MEMORY.md: symlink leaves the memory root"),
        "{}",
        run.stderr
    );
    let v = sb
        .run(&["memory", "search", "--json", "vault code"])
        .ok()
        .json();
    assert_eq!(v["results"], serde_json::json!([]), "{v}");
    assert!(
        sm(&sb, &["search", "vault"])
            .ok()
            .stdout
            .starts_with("No matching")
    );
    // Get: says what is wrong and how to allow it.
    let run = sb.run(&["memory", "get", "MEMORY.md"]).code(2);
    assert!(!run.stderr.contains("not a memory file"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("MEMORY.md: symlink leaves the memory root")
            && run
                .stderr
                .contains("add that path to memory.allowSymlinkTargets"),
        "{}",
        run.stderr
    );
    // Context and the agent prompt: the outside text is not in them.
    let context = sm(&sb, &["context", "what is the vault code"]).ok().stdout;
    assert!(!context.contains("4321"), "{context}");
    let prompt = || {
        sb.run_env(
            &[
                "--now",
                NOW,
                "agent",
                "prompt",
                "--model",
                "openai/m",
                "-m",
                "vault code?",
                "--json",
            ],
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9")],
        )
        .ok()
        .json()
    };
    let system = prompt()["system"].as_str().unwrap().to_string();
    assert!(!system.contains("4321"), "{system}");
    assert!(!system.contains("## MEMORY.md"), "{system}");
    assert_eq!(tree(&sb.path("outside")), outside_before);

    // Allowed: every path works through the links.
    sb.write(
        ".almanac/config.json5",
        &format!(
            "{{ memory: {{ allowSymlinkTargets: [\"{}\"] }} }}",
            sb.path("outside").display()
        ),
    );
    sm(
        &sb,
        &["append", "--long-term", "the safe is behind the painting"],
    )
    .ok();
    sm(&sb, &["append", "watered the tomatoes"]).ok();
    assert!(
        std::fs::symlink_metadata(sb.path(&format!("{ws}/MEMORY.md")))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        sb.read("outside/private.md")
            .ends_with("- [2026-11-29 17:06] the safe is behind the painting\n")
    );
    assert!(
        sb.read("outside/daily/2026-11-29.md")
            .contains("watered the tomatoes")
    );
    let run = sb.run(&["memory", "index"]).ok();
    assert!(!run.stderr.contains("symlink leaves"), "{}", run.stderr);
    let v = sb
        .run(&["memory", "search", "--json", "vault code"])
        .ok()
        .json();
    assert_eq!(v["results"][0]["path"], "MEMORY.md", "{v}");
    let got = sb.run(&["memory", "get", "MEMORY.md"]).ok().stdout;
    assert!(got.contains("the vault code is 4321"), "{got}");
    let context = sm(&sb, &["context", "what is the vault code"]).ok().stdout;
    assert!(context.contains("4321"), "{context}");
    let system = prompt()["system"].as_str().unwrap().to_string();
    assert!(system.contains("the vault code is 4321"), "{system}");
}

#[test]
fn retention_works_on_a_fresh_state() {
    let sb = Sandbox::new();
    // Daily files written before almanac ever ran here: no index yet.
    for day in ["2026-10-01", "2026-11-10", "2026-11-27"] {
        sb.write(
            &format!(".almanac/workspace/memory/{day}.md"),
            &format!("- note of {day}\n"),
        );
    }
    sb.write(".almanac/workspace/daily/2026-09-01.md", "- arka note\n");
    assert!(!sb.path(".almanac/index").exists());
    let run = sm(
        &sb,
        &[
            "--set",
            "memory.session.dailyRetentionDays=7",
            "append",
            "today",
        ],
    )
    .ok();
    assert!(
        run.stderr
            .contains("moved 3 daily file(s) older than 7 days to"),
        "{}",
        run.stderr
    );
    for gone in [
        "memory/2026-10-01.md",
        "memory/2026-11-10.md",
        "daily/2026-09-01.md",
    ] {
        assert!(
            !sb.path(&format!(".almanac/workspace/{gone}")).exists(),
            "{gone}"
        );
    }
    assert!(sb.path(".almanac/workspace/memory/2026-11-27.md").exists());
    // Nothing more is due: the next append moves nothing and says nothing.
    let run = sm(
        &sb,
        &[
            "--set",
            "memory.session.dailyRetentionDays=7",
            "append",
            "again",
        ],
    )
    .ok();
    assert_eq!(run.stderr, "");
}

#[test]
fn clear_says_what_moved_and_how_to_restore_it() {
    let sb = Sandbox::new();
    sm(&sb, &["append", "daily note"]).ok();
    sm(&sb, &["append", "--long-term", "long note"]).ok();
    let out = sm(&sb, &["clear", "--all"]).ok().stdout;
    let trash = sb.path(".almanac/trash/20261129T170600Z-session-memory-all");
    let ws = sb.path(".almanac/workspace");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Cleared session memory (all): daily=1 long_term=True"
    );
    assert_eq!(
        lines[1..],
        [
            format!("Moved 2 file(s) to {}:", trash.display()),
            "  memory/2026-11-29.md".to_string(),
            "  MEMORY.md".to_string(),
            "To restore them:".to_string(),
            format!(
                "  mv {} {}",
                trash.join("memory/2026-11-29.md").display(),
                ws.join("memory/2026-11-29.md").display()
            ),
            format!(
                "  mv {} {}",
                trash.join("MEMORY.md").display(),
                ws.join("MEMORY.md").display()
            ),
        ]
    );
    // The restore lines work as printed.
    for line in lines.iter().filter(|l| l.starts_with("  mv ")) {
        sb.sh().args(["-c", line.trim()]).status().unwrap();
    }
    assert!(
        sb.read(".almanac/workspace/MEMORY.md")
            .contains("long note")
    );
    assert!(
        sb.read(".almanac/workspace/memory/2026-11-29.md")
            .contains("daily note")
    );
}

/// Commands that only read: in a fresh home each creates nothing at all,
/// and over an existing setup each leaves every file as it was.
const READ_COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["config", "path"],
    &["config", "get", "memory.session.longTermMaxLines"],
    &["config", "validate"],
    &["heartbeat", "status"],
    &["heartbeat", "status", "--json"],
    &["heartbeat", "history"],
    &["session-memory", "status"],
    &["memory", "status"],
    &["memory", "get", "MEMORY.md"],
    &["skills", "list"],
    &["skills", "info", "system-health"],
    &["skills", "check"],
    &["skills", "prompt"],
    &["skills", "match", "check system health"],
    &["skills", "scan", "scan-me"],
    &["sessions"],
    &["sessions", "show", "main"],
    &["agent", "prompt", "--model", "openai/m", "-m", "hello"],
    &["completions", "bash"],
];

/// Commands whose job is searching: they may create the derived index
/// (and nothing else).
const SEARCH_COMMANDS: &[&[&str]] = &[
    &["memory", "search", "tea"],
    &["memory", "entity", "Ana"],
    &["memory", "recall", "tea"],
    &["memory", "index"],
    &["session-memory", "search", "tea"],
    &["session-memory", "context", "tea"],
];

fn run_read(sb: &Sandbox, args: &[&str]) -> Run {
    let mut all = vec!["--now", NOW];
    all.extend_from_slice(args);
    sb.run_env(&all, &[("OPENAI_BASE_URL", "http://127.0.0.1:9")])
}

#[test]
fn read_commands_create_nothing_in_a_fresh_home() {
    for args in READ_COMMANDS {
        let sb = Sandbox::new();
        std::fs::create_dir_all(sb.path("scan-me")).unwrap();
        let before = tree(sb.home());
        let run = run_read(&sb, args);
        assert!(
            run.code == 0 || args[0] == "sessions",
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(tree(sb.home()), before, "{args:?} wrote to a fresh home");
    }
    for args in SEARCH_COMMANDS {
        let sb = Sandbox::new();
        let before = tree(sb.home());
        run_read(&sb, args);
        let after = tree(sb.home());
        let created: Vec<String> = after
            .keys()
            .filter(|p| !before.contains_key(*p))
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            created.iter().all(|p| p == ".almanac"
                || p == ".almanac/index"
                || (p.starts_with(".almanac/index/") && p.ends_with(".sqlite"))),
            "{args:?} created {created:?}"
        );
    }
}

#[test]
fn read_commands_leave_an_existing_setup_as_it_was() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("scan-me")).unwrap();
    sm(&sb, &["append", "--long-term", "Ana prefers tea"]).ok();
    sb.run(&["--now", NOW, "heartbeat", "ping", "setup"]).ok();
    sb.run(&["memory", "index"]).ok();
    sb.write(".almanac/config.json5", "{ // mine\n}\n");
    let before = tree(sb.home());
    for args in READ_COMMANDS {
        run_read(&sb, args);
        let after = tree(sb.home());
        // The derived index may be brought up to date by the prompt's
        // recall; no file may appear or disappear, and nothing else change.
        let outside_index = |t: &BTreeMap<PathBuf, Vec<u8>>| -> BTreeMap<PathBuf, Vec<u8>> {
            t.iter()
                .filter(|(p, _)| !p.starts_with(".almanac/index/"))
                .map(|(p, b)| (p.clone(), b.clone()))
                .collect()
        };
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{args:?} created or removed a file"
        );
        assert_eq!(outside_index(&after), outside_index(&before), "{args:?}");
    }
}

#[test]
fn the_agents_memory_append_tool_prunes_by_the_same_rule_and_says_so() {
    use crate::agent::{text, tool_call};
    use crate::scripted::ScriptedServer;
    let sb = Sandbox::new();
    sb.write(".almanac/workspace/MEMORY.md", HAND_WRITTEN);
    let server = ScriptedServer::start(vec![
        tool_call(
            "call_1",
            "memory_append",
            serde_json::json!({"text": "Prefers the aisle seat", "longTerm": true}),
        ),
        text("Noted."),
    ]);
    sb.run_env(
        &[
            "--now",
            NOW,
            "agent",
            "--model",
            "openai/test-model",
            "-m",
            "Remember that I prefer the aisle seat",
        ],
        &[("OPENAI_BASE_URL", &server.url)],
    )
    .ok();
    assert_eq!(
        sb.read(".almanac/workspace/MEMORY.md"),
        format!(
            "{}- [2026-11-29 17:06] Prefers the aisle seat\n",
            hand_written_lines()
        )
    );
    // The model is told what moved, and that the file is still too long.
    let second = server.requests()[1].json();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result");
    let content: serde_json::Value =
        serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["pruned"]["entries"], 12, "{content}");
    assert_eq!(
        content["pruned"]["moves"][0]["to"],
        "memory/archive/MEMORY-2022.md"
    );
    assert!(
        content["warnings"][0]
            .as_str()
            .unwrap()
            .ends_with("only stamped entries are pruned"),
        "{content}"
    );
}

#[test]
fn config_set_through_a_symlinked_config_keeps_the_link() {
    let sb = Sandbox::new();
    sb.write("dotfiles/almanac.json5", "{\n  // mine\n}\n");
    std::fs::create_dir_all(sb.path(".almanac")).unwrap();
    std::os::unix::fs::symlink(
        sb.path("dotfiles/almanac.json5"),
        sb.path(".almanac/config.json5"),
    )
    .unwrap();
    sb.run(&["config", "set", "memory.session.longTermMaxLines", "200"])
        .ok();
    assert!(
        std::fs::symlink_metadata(sb.path(".almanac/config.json5"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "still a link"
    );
    let text = sb.read("dotfiles/almanac.json5");
    assert!(text.contains("// mine") && text.contains("200"), "{text}");
}
