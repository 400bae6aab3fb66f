//! Discovery, precedence, gating, the config switches and handlers.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::discover::{HookRoot, HooksInputs};
use super::*;
use crate::config::{self, LoadedConfig};
use crate::host::Host;

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self, source: HookSource) -> PathBuf {
        self.dir.path().join(source.short())
    }

    /// A hook folder with `HOOK.md` and, when given, an executable
    /// `handler` script.
    fn hook(&self, source: HookSource, folder: &str, frontmatter: &str, handler: Option<&str>) {
        let dir = self.root(source).join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("HOOK.md"),
            format!("---\n{frontmatter}\n---\nDocs\n"),
        )
        .unwrap();
        if let Some(script) = handler {
            let path = dir.join("handler");
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    fn inputs(&self, config_text: &str, env: &[(&str, &str)]) -> HooksInputs {
        let config_path = self.dir.path().join("config.json5");
        std::fs::write(&config_path, config_text).unwrap();
        let mut vars: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.push(("PATH".into(), std::env::var("PATH").unwrap_or_default()));
        let host = Host::with_vars(
            vars,
            self.dir.path(),
            self.dir.path(),
            "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
        );
        let config: LoadedConfig = config::load(&config_path, &host, &[]).unwrap();
        HooksInputs {
            roots: [HookSource::Managed, HookSource::Workspace]
                .iter()
                .map(|s| HookRoot {
                    source: *s,
                    dir: self.root(*s),
                })
                .collect(),
            config,
            env: host.vars().clone(),
        }
    }
}

const ON: &str = r#"{hooks: {internal: {enabled: true}}}"#;

fn meta(events: &str) -> String {
    format!("description: test hook\nmetadata: {{\"openclaw\": {{\"events\": [{events}]}}}}")
}

#[test]
fn a_managed_hook_replaces_a_managed_one_and_a_workspace_hook_never_replaces_a_managed_one() {
    let s = Setup::new();
    s.hook(
        HookSource::Managed,
        "audit",
        &format!("name: audit\n{}", meta("\"command\"")),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Workspace,
        "audit",
        &format!("name: audit\n{}", meta("\"command:new\"")),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Workspace,
        "mine",
        &meta("\"command:new\""),
        Some("#!/bin/sh\n"),
    );
    let report = report(&s.inputs(ON, &[]));
    let audit = report.find("audit").unwrap();
    assert_eq!(audit.hook.source, HookSource::Managed);
    assert_eq!(audit.hook.events, vec!["command"]);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("workspace hook `audit`") && w.contains("ignored")),
        "{:?}",
        report.warnings
    );
    // The name comes from the folder when the frontmatter has none.
    assert_eq!(
        report.find("mine").unwrap().hook.source,
        HookSource::Workspace
    );
}

#[test]
fn the_switches_decide_which_hooks_run() {
    let s = Setup::new();
    s.hook(
        HookSource::Managed,
        "logger",
        &meta("\"command\""),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Workspace,
        "notes",
        &meta("\"command:new\""),
        Some("#!/bin/sh\n"),
    );
    let cases: &[(&str, bool, bool)] = &[
        // config, managed runs, workspace runs
        ("{}", false, false),
        (ON, true, false),
        (
            r#"{hooks: {internal: {enabled: true, entries: {notes: {enabled: true}}}}}"#,
            true,
            true,
        ),
        (
            r#"{hooks: {internal: {enabled: true, entries: {logger: {enabled: false}, notes: {enabled: true}}}}}"#,
            false,
            true,
        ),
        (
            r#"{hooks: {internal: {enabled: false, entries: {notes: {enabled: true}}}}}"#,
            false,
            false,
        ),
    ];
    for (config_text, logger, notes) in cases {
        let report = report(&s.inputs(config_text, &[]));
        assert_eq!(
            report.find("logger").unwrap().gate.runnable,
            *logger,
            "{config_text}"
        );
        assert_eq!(
            report.find("notes").unwrap().gate.runnable,
            *notes,
            "{config_text}"
        );
    }
}

#[test]
fn requirements_gate_hooks_like_skills() {
    let s = Setup::new();
    s.hook(
        HookSource::Managed,
        "needs-env",
        "description: d\nmetadata: {\"openclaw\": {\"events\": [\"command\"], \"requires\": {\"env\": [\"HOOK_TOKEN\"]}}}",
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "needs-bin",
        "description: d\nmetadata: {\"openclaw\": {\"events\": [\"command\"], \"requires\": {\"bins\": [\"no-such-binary-here\"]}}}",
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "always",
        "description: d\nmetadata: {\"openclaw\": {\"events\": [\"command\"], \"always\": true, \"requires\": {\"bins\": [\"no-such-binary-here\"]}}}",
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "other-os",
        "description: d\nmetadata: {\"openclaw\": {\"events\": [\"command\"], \"os\": [\"plan9\"]}}",
        Some("#!/bin/sh\n"),
    );
    let r = report(&s.inputs(ON, &[]));
    let env = r.find("needs-env").unwrap();
    assert!(!env.gate.runnable);
    assert_eq!(env.gate.missing.env, vec!["HOOK_TOKEN"]);
    assert_eq!(env.gate.status(), "missing");
    assert_eq!(
        r.find("needs-bin").unwrap().gate.missing.bins,
        vec!["no-such-binary-here"]
    );
    assert!(r.find("always").unwrap().gate.runnable);
    assert_eq!(r.find("other-os").unwrap().gate.missing.os, vec!["plan9"]);
    // Provided by the process or by the hook's entry.
    let r = report(&s.inputs(ON, &[("HOOK_TOKEN", "x")]));
    assert!(r.find("needs-env").unwrap().gate.runnable);
    let r = report(&s.inputs(
        r#"{hooks: {internal: {enabled: true, entries: {"needs-env": {env: {HOOK_TOKEN: "y"}}}}}}"#,
        &[],
    ));
    assert!(r.find("needs-env").unwrap().gate.runnable);
}

#[test]
fn typescript_and_javascript_handlers_are_reported_unsupported() {
    let s = Setup::new();
    for (folder, file) in [
        ("ts", "handler.ts"),
        ("js", "handler.js"),
        ("index", "index.js"),
    ] {
        s.hook(HookSource::Managed, folder, &meta("\"command:new\""), None);
        std::fs::write(
            s.root(HookSource::Managed).join(folder).join(file),
            "export default 1",
        )
        .unwrap();
    }
    s.hook(HookSource::Managed, "none", &meta("\"command:new\""), None);
    let r = report(&s.inputs(ON, &[]));
    for folder in ["ts", "js", "index"] {
        let h = r.find(folder).unwrap();
        assert!(
            matches!(h.hook.handler, Handler::Unsupported { .. }),
            "{folder}"
        );
        assert!(!h.gate.runnable);
        assert_eq!(h.gate.status(), "unsupported");
        assert!(
            h.gate
                .reasons
                .iter()
                .any(|r| r.contains("unsupported handler"))
        );
    }
    assert_eq!(r.find("none").unwrap().hook.handler, Handler::Missing);
    assert!(
        r.handlers_for("command:new")
            .iter()
            .all(|h| h.source == HookSource::Bundled)
    );
}

#[test]
fn type_level_subscribers_run_before_exact_ones_in_listing_order() {
    let s = Setup::new();
    s.hook(
        HookSource::Managed,
        "b-exact",
        &meta("\"command:new\""),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "c-type",
        &meta("\"command\""),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "a-reset",
        &meta("\"command:reset\""),
        Some("#!/bin/sh\n"),
    );
    s.hook(
        HookSource::Managed,
        "d-compact",
        &meta("\"session:compact:before\""),
        Some("#!/bin/sh\n"),
    );
    let r = report(&s.inputs(ON, &[]));
    let names = |event: &str| -> Vec<String> {
        r.handlers_for(event)
            .iter()
            .map(|h| h.name.clone())
            .collect()
    };
    // The bundled `command-logger` subscribes to `command`, the bundled
    // `session-memory` to `command:new` and `command:reset`.
    assert_eq!(
        names("command:new"),
        vec!["c-type", "command-logger", "b-exact", "session-memory"]
    );
    assert_eq!(
        names("command:reset"),
        vec!["c-type", "command-logger", "a-reset", "session-memory"]
    );
    assert_eq!(names("session:compact:before"), vec!["d-compact"]);
    assert!(names("session:compact:after").is_empty());
    // `command` does not match `commands:x`.
    assert!(names("commandx:new").is_empty());
}

#[test]
fn bad_frontmatter_is_a_failure_with_its_reason() {
    let s = Setup::new();
    let dir = s.root(HookSource::Managed).join("broken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("HOOK.md"), "no frontmatter here\n").unwrap();
    let r = report(&s.inputs(ON, &[]));
    assert!(r.hooks.iter().all(|h| h.hook.source == HookSource::Bundled));
    assert_eq!(r.failures.len(), 1);
    assert!(r.failures[0].reason.contains("no frontmatter"));
}

#[test]
fn a_handler_gets_the_event_on_stdin_and_only_the_allowlisted_environment() {
    let s = Setup::new();
    let out = s.dir.path().join("out");
    s.hook(
        HookSource::Managed,
        "echo",
        &meta("\"command:new\""),
        Some(&format!(
            "#!/bin/sh\ncat > {0}/event.json\nenv > {0}/env.txt\n",
            out.display()
        )),
    );
    std::fs::create_dir_all(&out).unwrap();
    let inputs = s.inputs(
        r#"{hooks: {internal: {enabled: true, entries: {echo: {env: {HOOK_SETTING: "v", LD_PRELOAD: "/tmp/evil.so", BASH_ENV: "/tmp/evil.sh", NODE_OPTIONS: "--require /tmp/evil.js", PATH: "/tmp/evil"}}}}}}"#,
        &[("OPENAI_API_KEY", "secret"), ("ALMANAC_STATE_DIR", "/x")],
    );
    let r = report(&inputs);
    let event = HookEvent::new(
        "command:new",
        "agent:main:main",
        serde_json::json!({"commandSource": "cli"}),
        "2026-11-29T09:00:00Z".parse().unwrap(),
    );
    let handlers = r.handlers_for(&event.name());
    let outcomes = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run::run_handlers(
            &handlers,
            &event,
            &inputs.env,
            &inputs.config.config.hooks.internal,
            &bundled::BuiltinContext {
                state_dir: s.dir.path().join("state"),
                session_memory_messages: None,
                notes: bundled::NoteRules::in_root(&s.dir.path().join("ws")),
            },
        ));
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].as_ref().unwrap().success());
    let got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("event.json")).unwrap()).unwrap();
    assert_eq!(got["type"], "command");
    assert_eq!(got["action"], "new");
    assert_eq!(got["sessionKey"], "agent:main:main");
    assert_eq!(got["context"]["commandSource"], "cli");
    assert_eq!(got["messages"], serde_json::json!([]));
    let env = std::fs::read_to_string(out.join("env.txt")).unwrap();
    assert!(env.contains("HOOK_SETTING=v"));
    // Keys that change how programs load or run are dropped, as for skills.
    assert!(!env.contains("evil"), "{env}");
    assert!(!env.contains("OPENAI_API_KEY"));
    assert!(!env.contains("ALMANAC_STATE_DIR"));
}

#[test]
fn the_timeout_defaults_to_ten_seconds_and_is_at_least_one() {
    let s = Setup::new();
    let t = |text: &str| run::timeout(&s.inputs(text, &[]).config.config.hooks.internal);
    assert_eq!(t("{}").as_secs(), 10);
    assert_eq!(
        t(r#"{hooks: {internal: {timeoutSeconds: 1}}}"#).as_secs(),
        1
    );
    assert_eq!(
        t(r#"{hooks: {internal: {timeoutSeconds: 0}}}"#).as_secs(),
        1
    );
}

#[test]
fn a_managed_hook_replaces_a_bundled_one_and_a_workspace_hook_does_not() {
    let s = Setup::new();
    let r = report(&s.inputs(ON, &[]));
    let logger = r.find("command-logger").unwrap();
    assert_eq!(logger.hook.source, HookSource::Bundled);
    assert!(logger.gate.runnable, "bundled hooks are on by default");
    s.hook(
        HookSource::Workspace,
        "command-logger",
        &meta("\"command\""),
        Some("#!/bin/sh\n"),
    );
    let r = report(&s.inputs(ON, &[]));
    assert_eq!(
        r.find("command-logger").unwrap().hook.source,
        HookSource::Bundled
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("workspace hook `command-logger`"))
    );
    s.hook(
        HookSource::Managed,
        "command-logger",
        &meta("\"command:new\""),
        Some("#!/bin/sh\n"),
    );
    let r = report(&s.inputs(ON, &[]));
    assert_eq!(
        r.find("command-logger").unwrap().hook.source,
        HookSource::Managed
    );
    let off = report(&s.inputs(
        r#"{hooks: {internal: {enabled: true, entries: {"command-logger": {enabled: false}}}}}"#,
        &[],
    ));
    assert!(!off.find("command-logger").unwrap().gate.runnable);
}

#[test]
fn the_command_logger_appends_one_line_per_command() {
    let state = tempfile::tempdir().unwrap();
    let ctx = bundled::BuiltinContext {
        state_dir: state.path().to_path_buf(),
        session_memory_messages: None,
        notes: bundled::NoteRules::in_root(&state.path().join("ws")),
    };
    let at = "2026-11-29T09:00:00Z".parse().unwrap();
    let new = HookEvent::new(
        "command:new",
        "agent:main:main",
        serde_json::json!({"senderId": "cli", "commandSource": "cli"}),
        at,
    );
    let reset = HookEvent::new("command:reset", "agent:main:x", serde_json::json!({}), at);
    let message = HookEvent::new("message:sent", "agent:main:x", serde_json::json!({}), at);
    for event in [&new, &reset, &message] {
        bundled::run("command-logger", event, &ctx).unwrap();
    }
    let text = std::fs::read_to_string(state.path().join("logs/commands.log")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            serde_json::json!({"timestamp": "2026-11-29T09:00:00.000Z", "action": "new", "sessionKey": "agent:main:main", "senderId": "cli", "source": "cli"}),
            serde_json::json!({"timestamp": "2026-11-29T09:00:00.000Z", "action": "reset", "sessionKey": "agent:main:x", "senderId": "unknown", "source": "unknown"}),
        ]
    );
}

#[test]
fn session_memory_writes_nothing_for_a_session_without_messages() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = bundled::BuiltinContext {
        state_dir: dir.path().join("state"),
        session_memory_messages: None,
        notes: bundled::NoteRules::in_root(&dir.path().join("ws")),
    };
    let event = HookEvent::new(
        "command:new",
        "agent:main:main",
        serde_json::json!({"previousSessionFile": dir.path().join("missing.jsonl")}),
        "2026-11-29T09:00:00Z".parse().unwrap(),
    );
    assert_eq!(bundled::save_session(&event, &ctx).unwrap(), None);
    assert!(!dir.path().join("ws/memory").exists());
}

#[test]
fn a_workspace_handler_linked_from_outside_its_folder_does_not_run() {
    let s = Setup::new();
    s.hook(
        HookSource::Workspace,
        "linked",
        &meta("\"command:new\""),
        None,
    );
    let outside = s.dir.path().join("elsewhere.sh");
    std::fs::write(&outside, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(
        &outside,
        s.root(HookSource::Workspace).join("linked/handler"),
    )
    .unwrap();
    let r = report(&s.inputs(
        r#"{hooks: {internal: {enabled: true, entries: {linked: {enabled: true}}}}}"#,
        &[],
    ));
    let h = r.find("linked").unwrap();
    assert!(!h.gate.runnable);
    assert!(
        h.gate
            .reasons
            .iter()
            .any(|r| r.contains("outside its hook folder"))
    );
}

#[test]
fn a_package_declares_its_hook_folders_and_none_outside_it() {
    let s = Setup::new();
    let package = s.root(HookSource::Workspace).join("ops-pack");
    for (folder, name) in [("hooks/deploy", "deploy"), ("hooks/audit", "pack-audit")] {
        let dir = package.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("HOOK.md"),
            format!("---\nname: {name}\n{}\n---\n", meta("\"command:new\"")),
        )
        .unwrap();
    }
    std::fs::write(
        package.join("package.json"),
        r#"{"name": "ops-pack", "openclaw": {"hooks": ["./hooks/deploy", "hooks/audit"]}}"#,
    )
    .unwrap();
    // A second package pointing out of itself is skipped with a reason.
    s.hook(HookSource::Workspace, "plain", &meta("\"command\""), None);
    let escaping = s.root(HookSource::Workspace).join("bad-pack");
    std::fs::create_dir_all(&escaping).unwrap();
    std::fs::write(
        escaping.join("package.json"),
        r#"{"openclaw": {"hooks": ["../plain"]}}"#,
    )
    .unwrap();
    let report = report(&s.inputs(ON, &[]));
    for name in ["deploy", "pack-audit", "plain"] {
        let found = report
            .find(name)
            .unwrap_or_else(|| panic!("{name}: {report:?}"));
        assert_eq!(found.hook.source, HookSource::Workspace);
    }
    assert_eq!(
        report.find("deploy").unwrap().hook.file_path,
        package.join("./hooks/deploy").join("HOOK.md")
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("bad-pack") && w.contains("outside the package")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn legacy_handler_modules_are_reported_unsupported() {
    let s = Setup::new();
    let quiet = report(&s.inputs(ON, &[]));
    assert!(
        !quiet.warnings.iter().any(|w| w.contains("handlers")),
        "{:?}",
        quiet.warnings
    );
    let legacy = report(&s.inputs(
        r#"{hooks: {internal: {enabled: true, handlers: [{event: "command:new", module: "./h.js"}]}}}"#,
        &[],
    ));
    assert!(
        legacy
            .warnings
            .iter()
            .any(|w| w.contains("hooks.internal.handlers lists 1 legacy JavaScript")),
        "{:?}",
        legacy.warnings
    );
}
