//! Enforces the dependency rules written in ARCHITECTURE.md by reading the
//! source tree. Each rule lists what it forbids and where.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("rs" | "sql")
        ) {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn all_sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("crates"), &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Code before the first `#[cfg(test)]` module (tests may do what code
/// may not). A test-only item elsewhere (a field, a helper) is checked
/// with the code around it rather than hiding the rest of the file.
fn non_test_code(text: &str) -> String {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "#[cfg(test)]" {
            let next = text[offset + line.len()..]
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("#["));
            if next.is_some_and(|l| l.starts_with("mod ") || l.starts_with("pub(crate) mod ")) {
                return text[..offset].to_string();
            }
        }
        offset += line.len();
    }
    text.to_string()
}

fn is_test_file(rel: &str) -> bool {
    rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs") || rel.contains("/tests/")
}

struct Rule {
    name: &'static str,
    /// Files the rule applies to (path prefix), and files exempt from it.
    applies_to: fn(&str) -> bool,
    forbidden: &'static [&'static str],
}

const DDL: &[&str] = &[
    "CREATE TABLE",
    "CREATE INDEX",
    "CREATE UNIQUE INDEX",
    "CREATE VIRTUAL TABLE",
    "CREATE TRIGGER",
    "CREATE VIEW",
    "ALTER TABLE",
    "DROP TABLE",
];

const RULES: &[Rule] = &[
    Rule {
        name: "only the store module holds SQL DDL",
        applies_to: |rel| !rel.starts_with("src/store/") && rel != "src/architecture_tests.rs",
        forbidden: DDL,
    },
    Rule {
        name: "the CLI layer holds no storage or file-writing code",
        applies_to: |rel| rel.starts_with("src/cli/"),
        forbidden: &[
            "rusqlite",
            "Connection",
            "fs::write",
            "File::create",
            "OpenOptions",
            "fs::rename",
            "fs::remove",
            "atomic_replace",
            "locked_append",
        ],
    },
    Rule {
        name: "the CLI layer parses and prints: no runtime, file, store, engine or gateway connection of its own",
        applies_to: |rel| rel.starts_with("src/cli/"),
        forbidden: &[
            "tokio::runtime",
            "block_on(",
            "std::fs",
            "fs::read",
            "durable::",
            "Ledger::",
            "Engine::",
            "engine::",
            "Client::",
            "Index::open",
            "libc::kill",
            "provider::",
        ],
    },
    Rule {
        name: "only the agent module calls a model (the provider module speaks the protocols; the engine builds the clients)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/agent/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["call_with_retries(", ".call(&request", "Provider::call("],
    },
    Rule {
        name: "model clients are built only by the engine",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/engine/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["provider::connect(", "http::client("],
    },
    Rule {
        name: "the gateway (schedulers, webhooks, watchers) never imports the agent or a provider: it asks the engine for turns",
        applies_to: |rel| rel.starts_with("src/gateway/"),
        forbidden: &["crate::agent", "crate::provider", "app::agent::run_turn"],
    },
    Rule {
        name: "the agent module reaches other subsystems through its Services, never the app or the gateway",
        applies_to: |rel| rel.starts_with("src/agent/"),
        forbidden: &["crate::app", "crate::gateway", "crate::engine"],
    },
    Rule {
        name: "canonical files are written only through the durable module",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/durable/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["fs::write(", "File::create(", ".truncate(true)"],
    },
    Rule {
        name: "files are opened for writing, renamed, copied or removed only by the durable module (and SQLite files by the store)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/durable/")
                && !rel.starts_with("src/store/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &[
            ".write(true)",
            ".append(true)",
            ".create(true)",
            ".create_new(true)",
            "fs::rename(",
            "fs::copy(",
            "fs::hard_link(",
            "fs::remove_file(",
            "fs::remove_dir",
        ],
    },
    Rule {
        name: "the pure crates do no I/O and read no clock or environment",
        applies_to: |rel| {
            rel.starts_with("crates/almanac-markdown/")
                || rel.starts_with("crates/almanac-heartbeat/")
                || rel.starts_with("crates/almanac-cron/")
        },
        forbidden: &[
            "std::fs",
            "std::env",
            "std::net",
            "std::process",
            "SystemTime",
            "Instant::now",
            "Zoned::now",
            "Timestamp::now",
            "TimeZone::system",
        ],
    },
    Rule {
        name: "only the child module starts processes",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/child/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["process::Command", "Command::new("],
    },
    Rule {
        name: "only the host module reads the process environment and clock",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/host/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &[
            "std::env::var",
            "env::var(",
            "env::var_os(",
            "env::vars",
            "env::current_dir",
            "env::home_dir",
            "env::current_exe",
            "Zoned::now()",
            "Timestamp::now()",
        ],
    },
    Rule {
        name: "HTTP clients are built only by the engine (and, for its endpoints, the provider module)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/engine/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["Client::builder(", "reqwest::Client::new("],
    },
    Rule {
        name: "only the host module reads the calendar clock (the durable module salts temporary names with it)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/host/")
                && !rel.starts_with("src/durable/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["SystemTime::now", "UNIX_EPOCH.elapsed"],
    },
];

#[test]
fn dependency_rules_hold() {
    let mut violations = Vec::new();
    for (rel, text) in all_sources() {
        if is_test_file(&rel) {
            continue;
        }
        let code = non_test_code(&text);
        for rule in RULES {
            if !(rule.applies_to)(&rel) {
                continue;
            }
            for needle in rule.forbidden {
                for (n, line) in code.lines().enumerate() {
                    let trimmed = line.trim_start();
                    if trimmed.starts_with("//") {
                        continue;
                    }
                    if line.contains(needle) {
                        violations.push(format!("{rel}:{}: `{needle}` ({})", n + 1, rule.name));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "architecture violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn main_rs_stays_thin() {
    let main = std::fs::read_to_string(root().join("src/main.rs")).unwrap();
    let code_lines = main.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        code_lines <= 5,
        "src/main.rs must only call almanac::cli::main()"
    );
    assert!(main.contains("almanac::cli::main()"));
}

#[test]
fn every_subsystem_module_starts_with_a_doc_comment() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("src")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let module = dir.join("mod.rs");
        let text = std::fs::read_to_string(&module).unwrap_or_default();
        if !text.starts_with("//!") {
            missing.push(dir.display().to_string());
        }
    }
    for lib in [
        "crates/almanac-markdown/src/lib.rs",
        "crates/almanac-heartbeat/src/lib.rs",
        "crates/almanac-cron/src/lib.rs",
    ] {
        let text = std::fs::read_to_string(root().join(lib)).unwrap();
        if !text.starts_with("//!") {
            missing.push(lib.into());
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a leading //! doc: {missing:?}"
    );
}

#[test]
fn architecture_md_names_every_subsystem() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    for entry in std::fs::read_dir(root().join("src")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                doc.contains(&format!("src/{name}/")),
                "ARCHITECTURE.md does not describe src/{name}/"
            );
        }
    }
}

#[test]
fn rules_catch_what_they_forbid() {
    // Guard against a rule that can never fire (a typo in a needle or a
    // path filter that matches nothing).
    let cli_sample = "let c = rusqlite::Connection::open(p)?;";
    let rule = &RULES[1];
    assert!((rule.applies_to)("src/cli/x.rs"));
    assert!(rule.forbidden.iter().any(|n| cli_sample.contains(n)));
    assert!((RULES[0].applies_to)("src/memory/mod.rs"));
    assert!(!(RULES[0].applies_to)("src/store/mod.rs"));
    assert!(
        RULES[2]
            .forbidden
            .iter()
            .any(|n| "std::fs::write(p, b)".contains(n))
    );
    let rule = |name: &str| RULES.iter().find(|r| r.name.starts_with(name)).unwrap();
    let opens = rule("files are opened for writing");
    assert!((opens.applies_to)("src/session/transcript.rs"));
    assert!(!(opens.applies_to)("src/durable/mod.rs"));
    assert!(!(opens.applies_to)("src/store/mod.rs"));
    for sample in [
        "OpenOptions::new().append(true).open(p)",
        "std::fs::rename(a, b)",
        "fs::remove_dir_all(d)",
    ] {
        assert!(
            opens.forbidden.iter().any(|n| sample.contains(n)),
            "{sample}"
        );
    }
    assert!(
        !opens
            .forbidden
            .iter()
            .any(|n| "OpenOptions::new().read(true).open(p)".contains(n)),
        "reading is allowed"
    );
    let clients = rule("HTTP clients are built only by the engine");
    assert!((clients.applies_to)("src/delivery/webhook.rs"));
    assert!(!(clients.applies_to)("src/engine/mod.rs"));
    assert!(
        clients
            .forbidden
            .iter()
            .any(|n| "reqwest::Client::builder().build()".contains(n))
    );
    let pure = rule("the pure crates do no I/O");
    assert!((pure.applies_to)("crates/almanac-cron/src/schedule.rs"));
    assert!(!(pure.applies_to)("src/app/cron_next.rs"));
    for sample in [
        "let host = jiff::tz::TimeZone::system();",
        "let now = Timestamp::now();",
        "std::env::var(\"TZ\")",
    ] {
        assert!(
            pure.forbidden.iter().any(|n| sample.contains(n)),
            "{sample}"
        );
    }
    let agent = rule("the agent module reaches other subsystems");
    assert!((agent.applies_to)("src/agent/tools.rs"));
    assert!(!(agent.applies_to)("src/app/agent.rs"));
    assert!(
        agent
            .forbidden
            .iter()
            .any(|n| "use crate::gateway::cron::CronState;".contains(n))
    );
    let clock = rule("only the host module reads the calendar clock");
    assert!((clock.applies_to)("src/memory/write.rs"));
    assert!(!(clock.applies_to)("src/host/mod.rs"));
    assert!(
        clock
            .forbidden
            .iter()
            .any(|n| "std::time::SystemTime::now()".contains(n))
    );
}

#[test]
fn only_test_modules_are_left_out_of_the_checks() {
    let text = "fn a() {}\n#[cfg(test)]\nfn helper() {}\nfn b() { std::fs::write(p, x) }\n\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod tests {\n    fn t() { std::fs::write(p, x) }\n}\n";
    let code = non_test_code(text);
    assert!(code.contains("fn helper()"), "a test-only item is checked");
    assert!(
        code.contains("fn b()"),
        "code after a test-only item is checked"
    );
    assert!(!code.contains("fn t()"), "the test module is not");
    assert_eq!(non_test_code("fn a() {}\n"), "fn a() {}\n");
}
