//! Enforces the dependency rules written in ARCHITECTURE.md by reading the
//! source tree: the layer table (which top-level module may import which,
//! checked on the import graph `graph` reads, which must have no cycle)
//! and the rules on what code may do where, each a list of what it forbids
//! and where.

use std::path::{Path, PathBuf};

mod graph;

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
    /// A short stable id, by which tests pick the rule.
    name: &'static str,
    description: &'static str,
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
        name: "ddl-only-in-store",
        description: "only the store module holds SQL DDL",
        applies_to: |rel| !rel.starts_with("src/store/") && rel != "src/architecture_tests.rs",
        forbidden: DDL,
    },
    Rule {
        name: "cli-holds-no-storage",
        description: "the CLI layer holds no storage or file-writing code",
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
        name: "cli-parses-and-prints",
        description: "the CLI layer parses and prints: no runtime, file, store, engine or gateway connection of its own",
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
        name: "model-calls-only-in-agent",
        description: "only the agent module calls a model (the provider module speaks the protocols; the engine builds the clients)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/agent/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["call_with_retries(", ".call(&request", "Provider::call("],
    },
    Rule {
        name: "model-clients-only-in-engine",
        description: "model clients are built only by the engine",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/engine/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["provider::connect(", "http::client("],
    },
    Rule {
        name: "writes-only-through-durable",
        description: "canonical files are written only through the durable module",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/durable/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["fs::write(", "File::create(", ".truncate(true)"],
    },
    Rule {
        name: "file-changes-only-in-durable",
        description: "files are opened for writing, renamed, copied or removed only by the durable module (and SQLite files by the store)",
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
        name: "pure-crates-do-no-io",
        description: "the pure crates do no I/O and read no clock or environment",
        applies_to: |rel| {
            rel.starts_with("crates/almanac-markdown/")
                || rel.starts_with("crates/almanac-heartbeat/")
                || rel.starts_with("crates/almanac-cron/")
                || rel.starts_with("crates/almanac-routing/src/")
                || rel.starts_with("crates/almanac-telegram-format/src/")
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
        name: "processes-only-in-child",
        description: "only the child module starts processes",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/child/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["process::Command", "Command::new("],
    },
    Rule {
        name: "environment-only-in-host",
        description: "only the host module reads the process environment and clock",
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
        name: "http-clients-only-in-engine",
        description: "HTTP clients are built only by the engine (and, for its endpoints, the provider module)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/engine/")
                && !rel.starts_with("src/provider/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["Client::builder(", "reqwest::Client::new("],
    },
    Rule {
        name: "calendar-clock-only-in-host",
        description: "only the host module reads the calendar clock (the durable module salts temporary names with it)",
        applies_to: |rel| {
            rel.starts_with("src/")
                && !rel.starts_with("src/host/")
                && !rel.starts_with("src/durable/")
                && rel != "src/architecture_tests.rs"
        },
        forbidden: &["SystemTime::now", "UNIX_EPOCH.elapsed"],
    },
];

/// The rule named `name`.
fn rule(name: &str) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no rule named {name}"))
}

/// Each top-level module of `src/` and the top-level modules it may
/// import; the "Layers" table of ARCHITECTURE.md says the same. Lower
/// layers first. A row for a module not in `src/` is allowed.
#[rustfmt::skip]
const LAYERS: &[(&str, &[&str])] = &[
    ("durable", &["host"]),
    ("host", &[]),
    ("par", &[]),
    ("provider", &[]),
    ("child", &[]),
    ("trigger", &["provider", "session"]),
    ("config", &["durable", "host"]),
    ("paths", &["config", "durable", "host"]),
    ("store", &["durable", "host", "paths"]),
    ("tasks", &["durable", "host", "paths", "store"]),
    ("activity", &["durable", "host"]),
    ("session", &["config", "durable", "host", "paths", "provider"]),
    ("agents", &["config", "host", "paths", "session"]),
    ("channels", &["config", "durable", "host", "paths"]),
    ("memory", &["config", "durable", "host", "par", "paths", "provider", "store"]),
    ("skills", &["child", "config", "durable", "host", "memory", "par", "paths"]),
    ("cron", &["config", "durable", "host", "paths", "provider", "store"]),
    ("agent", &["child", "config", "durable", "host", "memory", "paths", "provider", "session"]),
    ("hooks", &["agent", "child", "config", "durable", "host", "memory", "paths", "provider", "session", "skills"]),
    ("delivery", &["channels", "config", "durable", "host", "memory", "paths", "provider", "tasks", "trigger"]),
    ("gateway_client", &["config", "durable", "host", "paths", "trigger"]),
    ("app", &["activity", "agent", "agents", "channels", "child", "config", "cron", "delivery", "durable", "gateway_client", "hooks", "host", "memory", "par", "paths", "provider", "session", "skills", "store", "tasks", "trigger"]),
    ("engine", &["activity", "agent", "agents", "app", "channels", "child", "config", "cron", "delivery", "durable", "gateway_client", "hooks", "host", "memory", "par", "paths", "provider", "session", "skills", "store", "tasks", "trigger"]),
    ("mcp", &["app"]),
    ("gateway", &["activity", "agents", "app", "channels", "config", "cron", "delivery", "durable", "engine", "gateway_client", "hooks", "host", "mcp", "memory", "par", "paths", "session", "skills", "store", "tasks", "trigger"]),
    ("entry", &["activity", "agent", "agents", "app", "channels", "config", "cron", "delivery", "durable", "engine", "gateway", "gateway_client", "hooks", "host", "mcp", "memory", "paths", "session", "skills", "tasks", "trigger"]),
    ("cli", &["activity", "agent", "agents", "app", "channels", "child", "config", "cron", "delivery", "durable", "entry", "gateway_client", "hooks", "host", "memory", "paths", "session", "skills", "tasks", "trigger"]),
];

#[test]
fn dependency_rules_hold() {
    let files = all_sources();
    let test_only = graph::test_only_modules(&files);
    let mut violations = Vec::new();
    for (rel, text) in &files {
        if is_test_file(rel) || graph::in_test_only_module(rel, &test_only) {
            continue;
        }
        let code = non_test_code(text);
        for rule in RULES {
            if !(rule.applies_to)(rel) {
                continue;
            }
            for needle in rule.forbidden {
                for (n, line) in code.lines().enumerate() {
                    let trimmed = line.trim_start();
                    if trimmed.starts_with("//") {
                        continue;
                    }
                    if line.contains(needle) {
                        violations.push(format!(
                            "{rel}:{}: `{needle}` ({}: {})",
                            n + 1,
                            rule.name,
                            rule.description
                        ));
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
fn module_layers_point_down() {
    let violations = graph::layer_violations(&all_sources(), LAYERS);
    assert!(
        violations.is_empty(),
        "imports outside the layer table (LAYERS; ARCHITECTURE.md, Layers):\n{}",
        violations.join("\n")
    );
}

#[test]
fn module_graph_is_acyclic() {
    if let Some(cycle) = graph::import_cycle(&all_sources()) {
        panic!("the imports between top-level modules have a cycle:\n{cycle}");
    }
}

#[test]
fn layer_table_matches_architecture_md() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let table = graph::layers_in_doc(&doc).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let differences = graph::table_differences(&table, LAYERS);
    assert!(
        differences.is_empty(),
        "the Layers table of ARCHITECTURE.md and LAYERS differ:\n{}",
        differences.join("\n")
    );
}

/// The folders directly under `src/` that hold a module of the product.
fn module_dirs() -> Vec<String> {
    let test_only = graph::test_only_modules(&all_sources());
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root().join("src")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if dir.is_dir() && !graph::in_test_only_module(&format!("src/{name}/"), &test_only) {
            dirs.push(name);
        }
    }
    dirs
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
    for name in module_dirs() {
        let module = root().join("src").join(&name).join("mod.rs");
        let text = std::fs::read_to_string(&module).unwrap_or_default();
        if !text.starts_with("//!") {
            missing.push(format!("src/{name}/"));
        }
    }
    for lib in [
        "crates/almanac-markdown/src/lib.rs",
        "crates/almanac-heartbeat/src/lib.rs",
        "crates/almanac-cron/src/lib.rs",
        "crates/almanac-routing/src/lib.rs",
        "crates/almanac-telegram-format/src/lib.rs",
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
    for name in module_dirs() {
        assert!(
            doc.contains(&format!("src/{name}/")),
            "ARCHITECTURE.md does not describe src/{name}/"
        );
    }
}

#[test]
fn rule_names_are_unique_kebab_case_ids() {
    let mut seen = std::collections::BTreeSet::new();
    for rule in RULES {
        assert!(seen.insert(rule.name), "two rules named {}", rule.name);
        assert!(
            !rule.name.is_empty()
                && rule.name.split('-').all(|w| !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())),
            "rule name `{}` is not a kebab-case id",
            rule.name
        );
    }
}

#[test]
fn rules_catch_what_they_forbid() {
    // Guard against a rule that can never fire (a typo in a needle or a
    // path filter that matches nothing).
    let cli_sample = "let c = rusqlite::Connection::open(p)?;";
    let storage = rule("cli-holds-no-storage");
    assert!((storage.applies_to)("src/cli/x.rs"));
    assert!(storage.forbidden.iter().any(|n| cli_sample.contains(n)));
    let ddl = rule("ddl-only-in-store");
    assert!((ddl.applies_to)("src/memory/mod.rs"));
    assert!(!(ddl.applies_to)("src/store/mod.rs"));
    assert!(
        rule("cli-parses-and-prints")
            .forbidden
            .iter()
            .any(|n| "std::fs::write(p, b)".contains(n))
    );
    let opens = rule("file-changes-only-in-durable");
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
    let clients = rule("http-clients-only-in-engine");
    assert!((clients.applies_to)("src/delivery/webhook.rs"));
    assert!(!(clients.applies_to)("src/engine/mod.rs"));
    assert!(
        clients
            .forbidden
            .iter()
            .any(|n| "reqwest::Client::builder().build()".contains(n))
    );
    let connect = rule("model-clients-only-in-engine");
    assert!((connect.applies_to)("src/gateway/heartbeat.rs"));
    assert!(
        connect
            .forbidden
            .iter()
            .any(|n| "let c = provider::connect(&endpoint)?;".contains(n))
    );
    let pure = rule("pure-crates-do-no-io");
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
    let clock = rule("calendar-clock-only-in-host");
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

/// A synthetic source tree: `(path, text)` pairs.
fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(rel, text)| (rel.to_string(), text.to_string()))
        .collect()
}

/// Modules for the synthetic trees, each with nothing in it.
const EMPTY_MODULES: &[(&str, &str)] = &[
    ("src/app/mod.rs", "//! App.\n"),
    ("src/durable/mod.rs", "//! Durable.\n"),
    ("src/engine/mod.rs", "//! Engine.\n"),
    ("src/gateway/mod.rs", "//! Gateway.\n"),
    ("src/store/mod.rs", "//! Store.\n"),
];

/// The edges of `files` (over `EMPTY_MODULES`) as `from -> to at`.
fn edges_of(files: &[(&str, &str)]) -> Vec<String> {
    let all: Vec<_> = EMPTY_MODULES.iter().chain(files).copied().collect();
    graph::import_edges(&tree(&all))
        .into_iter()
        .map(|e| format!("{} -> {} at {}", e.from, e.to, e.at))
        .collect()
}

#[test]
fn grouped_imports_across_lines_are_edges_at_their_lines() {
    let delivery = "//! Delivery.\nuse crate::{\n    engine::Engine,\n    durable::x,\n};\nuse crate::{app::X, store::{Y, Z}, gateway};\n";
    let files = [("src/delivery/mod.rs", delivery)];
    assert_eq!(
        edges_of(&files),
        [
            "delivery -> engine at src/delivery/mod.rs:3",
            "delivery -> durable at src/delivery/mod.rs:4",
            "delivery -> app at src/delivery/mod.rs:6",
            "delivery -> store at src/delivery/mod.rs:6",
            "delivery -> gateway at src/delivery/mod.rs:6",
        ]
    );
    let all: Vec<_> = EMPTY_MODULES.iter().chain(&files).copied().collect();
    let layers: &[(&str, &[&str])] = &[
        ("app", &[]),
        ("durable", &[]),
        ("engine", &[]),
        ("gateway", &[]),
        ("store", &[]),
        ("delivery", &["durable", "app", "store", "gateway"]),
    ];
    assert_eq!(
        graph::layer_violations(&tree(&all), layers),
        ["src/delivery/mod.rs:3: delivery imports engine (not in delivery's row)"]
    );
}

#[test]
fn super_chains_resolve_against_the_module_path() {
    let files = [
        // delivery::sub: two levels up is the crate root.
        ("src/delivery/sub/mod.rs", "use super::super::app::App;\n"),
        // delivery::sub::x: two levels up is delivery, three the root.
        (
            "src/delivery/sub/x.rs",
            "use super::super::app::App;\nfn f() { super::super::super::store::open(); }\n",
        ),
        (
            "src/gateway/y.rs",
            "use super::super::{engine::E, store};\n",
        ),
        // Inside an inline module `super` is the file's module.
        (
            "src/par.rs",
            "use super::durable::X;\nmod inner {\n    use super::app;\n}\npub(in super::super) struct Y;\n",
        ),
    ];
    assert_eq!(
        edges_of(&files),
        [
            "delivery -> app at src/delivery/sub/mod.rs:1",
            "delivery -> store at src/delivery/sub/x.rs:2",
            "gateway -> engine at src/gateway/y.rs:1",
            "gateway -> store at src/gateway/y.rs:1",
            "par -> durable at src/par.rs:1",
        ]
    );
}

#[test]
fn paths_in_expressions_renames_and_macros_are_edges() {
    let gateway = "fn f(a: A) {\n    let r = crate::app::agent::run_turn(a);\n}\nuse crate::engine as e;\nconst Q: &str = crate::store::sql!(\"x\");\n";
    let files = [("src/gateway/x.rs", gateway)];
    assert_eq!(
        edges_of(&files),
        [
            "gateway -> app at src/gateway/x.rs:2",
            "gateway -> engine at src/gateway/x.rs:4",
            "gateway -> store at src/gateway/x.rs:5",
        ]
    );
    let all: Vec<_> = EMPTY_MODULES.iter().chain(&files).copied().collect();
    let layers: &[(&str, &[&str])] = &[
        ("app", &[]),
        ("durable", &[]),
        ("engine", &[]),
        ("store", &[]),
        ("gateway", &["engine", "store"]),
    ];
    assert_eq!(
        graph::layer_violations(&tree(&all), layers),
        ["src/gateway/x.rs:2: gateway imports app (not in gateway's row)"]
    );
}

#[test]
fn comments_literals_and_test_code_name_no_module() {
    let store = r##"//! Mentions crate::app in a doc.
/// crate::app::App
// use crate::app;
/* crate::app /* nested crate::app */ still crate::app */
const A: &str = "crate::app::x \" crate::app
    crate::app";
const B: &str = r#"crate::app "quoted" crate::app"#;
const C: &[u8] = b"crate::app";
const D: char = '"';
const E: char = '\'';
const F: u8 = b'"';
const G: &str = "\\";
const H: &[u8] = br#"crate::app"#;
fn f<'a>(r#type: &'a str) -> &'a str { r#type }
#[cfg(test)]
fn helper() { crate::app::x(); }
struct S {
    #[cfg(test)]
    probe: Vec<crate::app::Probe, crate::app::Other>,
    kept: u8,
}
use crate::durable::Y;
#[cfg(test)]
mod tests {
    use crate::app::App;
}
"##;
    assert_eq!(
        edges_of(&[("src/store/mod.rs", store)]),
        ["store -> durable at src/store/mod.rs:22"]
    );
    let tests_only = [
        ("src/lib.rs", "#[cfg(test)]\nmod probe;\n"),
        ("src/probe.rs", "use crate::app::App;\n"),
        ("src/probe/deep.rs", "use crate::app::App;\n"),
        ("src/store/tests.rs", "use crate::app::App;\n"),
        ("src/store/ledger_tests.rs", "use crate::app::App;\n"),
        ("src/store/tests/more.rs", "use crate::app::App;\n"),
        (
            "src/engine/only.rs",
            "#![cfg(test)]\nuse crate::app::App;\n",
        ),
    ];
    assert_eq!(edges_of(&tests_only), Vec::<String>::new());
    let all: Vec<_> = EMPTY_MODULES.iter().chain(&tests_only).copied().collect();
    assert!(!graph::top_modules(&tree(&all)).contains("probe"));
}

#[test]
fn a_planted_upward_import_and_cycle_are_reported() {
    let clean = [
        ("src/durable/mod.rs", "//! Durable.\n"),
        ("src/store/mod.rs", "use crate::durable::Disk;\n"),
        ("src/app/mod.rs", "use crate::{durable, store::Store};\n"),
    ];
    let layers: &[(&str, &[&str])] = &[
        ("durable", &[]),
        ("store", &["durable"]),
        ("app", &["durable", "store"]),
        ("trigger", &[]),
    ];
    assert_eq!(
        graph::layer_violations(&tree(&clean), layers),
        Vec::<String>::new()
    );
    assert_eq!(graph::import_cycle(&tree(&clean)), None);

    let mut planted = clean;
    planted[1].1 = "use crate::durable::Disk;\npub(crate) fn f() -> crate::app::App { todo!() }\n";
    assert_eq!(
        graph::layer_violations(&tree(&planted), layers),
        ["src/store/mod.rs:2: store imports app (not in store's row)"]
    );
    let cycle = graph::import_cycle(&tree(&planted)).expect("a cycle");
    assert!(cycle.starts_with("app -> store -> app\n"), "{cycle}");
    assert!(cycle.contains("app -> store: src/app/mod.rs:1"), "{cycle}");
    assert!(
        cycle.contains("store -> app: src/store/mod.rs:2"),
        "{cycle}"
    );

    let unlisted = &layers[1..];
    assert_eq!(
        graph::layer_violations(&tree(&clean), unlisted),
        ["add durable to the layer table"]
    );
}

#[test]
fn the_layer_table_is_read_from_markdown() {
    let doc = "# A\n\n## Layers\n\nWho imports whom.\n\n| Module | Owns | May import |\n|---|---|---|\n| `durable` | files, `x` | — |\n| `store` | SQLite | `durable`, `host` |\n\nAfter.\n";
    let table = graph::layers_in_doc(doc).unwrap();
    assert_eq!(table.len(), 2);
    assert!(table["durable"].is_empty());
    let layers: &[(&str, &[&str])] = &[("durable", &[]), ("store", &["durable"]), ("app", &[])];
    assert_eq!(
        graph::table_differences(&table, layers),
        [
            "`app` is in LAYERS, not in ARCHITECTURE.md",
            "`store` may import `host` in ARCHITECTURE.md, not in LAYERS",
        ]
    );
    assert!(graph::layers_in_doc("# A\n\n| Module | Owns | May import |\n").is_err());
    assert!(graph::layers_in_doc("## Layers\n\n| `a` | b |\n").is_err());
}
