//! State dir, profiles, workspace, config, status, CLI conventions.

use crate::common::{Sandbox, mode};

#[test]
fn status_json_reports_the_resolved_locations() {
    let sb = Sandbox::new();
    let run = sb.run(&["status", "--json"]).ok();
    let v = run.json();
    let home = sb.home().display().to_string();
    assert_eq!(v["profile"], "default");
    assert_eq!(v["stateDir"], format!("{home}/.almanac"));
    assert_eq!(v["workspace"], format!("{home}/.almanac/workspace"));
    assert_eq!(v["configPath"], format!("{home}/.almanac/config.json5"));
    assert_eq!(v["storePath"], format!("{home}/.almanac/almanac.sqlite"));
    assert_eq!(v["subsystems"]["config"]["exists"], false);
    // Inspection creates nothing.
    assert!(!sb.path(".almanac").exists());
}

#[test]
fn profiles_and_state_dir_overrides() {
    let sb = Sandbox::new();
    let home = sb.home().display().to_string();
    let cases: &[(&[&str], &[(&str, &str)], &str, &str)] = &[
        (&["--profile", "work"], &[], "work", ".almanac-work"),
        (&[], &[("ALMANAC_PROFILE", "lab")], "lab", ".almanac-lab"),
        (
            &[],
            &[("ALMANAC_STATE_DIR", "custom/state")],
            "default",
            "custom/state",
        ),
        (
            &["--state-dir", "flag-state"],
            &[("ALMANAC_STATE_DIR", "/nope")],
            "default",
            "flag-state",
        ),
    ];
    for (flags, env, profile, dir) in cases {
        let mut args = vec!["status", "--json"];
        args.extend_from_slice(flags);
        let v = sb.run_env(&args, env).ok().json();
        assert_eq!(v["profile"], *profile, "{flags:?} {env:?}");
        assert_eq!(v["stateDir"], format!("{home}/{dir}"), "{flags:?} {env:?}");
        assert_eq!(v["workspace"], format!("{home}/{dir}/workspace"));
    }
}

#[test]
fn bad_profile_name_is_a_usage_error() {
    let sb = Sandbox::new();
    let run = sb.run(&["status", "--profile", "../escape"]).code(2);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert!(
        run.stderr.contains("invalid profile name"),
        "{}",
        run.stderr
    );
}

#[test]
fn usage_errors_exit_2_and_unknown_commands_too() {
    let sb = Sandbox::new();
    sb.run(&["status", "--no-such-flag"]).code(2);
    sb.run(&["no-such-command"]).code(2);
    sb.run(&["config"]).code(2);
    sb.run(&["--now", "not a time", "status"]).code(2);
    let help = sb.run(&["--help"]).ok();
    assert!(help.stdout.contains("status"));
    let version = sb.run(&["--version"]).ok();
    assert!(version.stdout.starts_with("almanac "));
}

#[test]
fn existing_openclaw_workspace_just_works_and_keeps_its_permissions() {
    let sb = Sandbox::new();
    sb.write(".openclaw/workspace/AGENTS.md", "# Agents\n");
    sb.write(".openclaw/workspace/MEMORY.md", "# Long-term memory\n");
    sb.write(
        ".openclaw/workspace/memory/2026-11-28.md",
        "- [2026-11-28 09:00] hi\n",
    );
    let ws = sb.path(".openclaw/workspace");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = sb
        .run(&["status", "--json", "--workspace", "~/.openclaw/workspace"])
        .ok()
        .json();
    assert_eq!(v["workspace"], ws.display().to_string());
    assert_eq!(v["subsystems"]["workspace"]["origin"], "flag");
    assert_eq!(
        v["subsystems"]["workspace"]["files"],
        serde_json::json!(["AGENTS.md", "MEMORY.md"])
    );
    assert_eq!(v["subsystems"]["memory"]["dailyFiles"], 1);
    assert_eq!(v["subsystems"]["memory"]["longTermLines"], 1);
    assert_eq!(mode(&ws), 0o755);
}

#[test]
fn workspace_from_config_env_and_flag() {
    let sb = Sandbox::new();
    sb.run(&[
        "config",
        "set",
        "agents.defaults.workspace",
        "~/from-config",
    ])
    .ok();
    let home = sb.home().display().to_string();
    let v = sb.run(&["status", "--json"]).ok().json();
    assert_eq!(v["workspace"], format!("{home}/from-config"));
    assert_eq!(v["subsystems"]["workspace"]["origin"], "config");
    let v = sb
        .run_env(&["status", "--json"], &[("ALMANAC_WORKSPACE", "/from-env")])
        .ok()
        .json();
    assert_eq!(v["workspace"], "/from-env");
    assert_eq!(v["subsystems"]["workspace"]["origin"], "env");
    let v = sb
        .run_env(
            &["status", "--json", "--workspace", "/from-flag"],
            &[("ALMANAC_WORKSPACE", "/from-env")],
        )
        .ok()
        .json();
    assert_eq!(v["workspace"], "/from-flag");
}

const COMMENTED: &str = "// personal settings\n{\n  agents: {\n    defaults: {\n      workspace: '~/notes', // my notes\n    },\n  },\n  wizard: { lastRunVersion: 'x' }, // copied from openclaw.json\n}\n";

#[test]
fn config_file_with_comments_trailing_commas_and_unknown_key_loads_with_a_warning() {
    let sb = Sandbox::new();
    sb.write(".almanac/config.json5", COMMENTED);
    let run = sb.run(&["config", "get", "agents.defaults.workspace"]).ok();
    assert_eq!(run.stdout, "~/notes\n");
    assert!(
        run.stderr.contains("warning: unknown config key `wizard`"),
        "{}",
        run.stderr
    );
    let v = sb.run(&["config", "validate", "--json"]).ok().json();
    assert_eq!(v["valid"], true);
    assert_eq!(v["unknownKeys"], serde_json::json!(["wizard"]));
}

#[test]
fn config_with_a_wrong_type_fails_naming_the_key_path() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/config.json5",
        "{ agents: { defaults: { workspace: 42 } } }",
    );
    let run = sb
        .run(&["config", "get", "agents.defaults.workspace"])
        .code(1);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert!(
        run.stderr.contains("`agents.defaults.workspace`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("expected a string"), "{}", run.stderr);
    let v = sb.run(&["config", "validate", "--json"]).code(1).json();
    assert_eq!(v["valid"], false);
    // status still reports, and fails.
    let v = sb.run(&["status", "--json"]).code(1).json();
    assert_eq!(v["subsystems"]["config"]["valid"], false);
}

#[test]
fn config_set_keeps_other_keys_and_comments_and_writes_privately() {
    let sb = Sandbox::new();
    let path = sb.write(".almanac/config.json5", COMMENTED);
    let run = sb
        .run(&[
            "config",
            "set",
            "agents.defaults.userTimezone",
            "Europe/Paris",
            "--json",
        ])
        .ok();
    assert_eq!(run.json()["value"], "Europe/Paris");
    let text = sb.read(".almanac/config.json5");
    assert_eq!(
        text,
        COMMENTED.replace(
            "      workspace: '~/notes', // my notes\n",
            "      workspace: '~/notes', // my notes\n      userTimezone: \"Europe/Paris\",\n"
        )
    );
    // A file the user created keeps the permissions they gave it.
    assert_eq!(mode(&path), 0o644);
    assert_eq!(
        sb.run(&["config", "get", "agents.defaults.userTimezone"])
            .ok()
            .stdout,
        "Europe/Paris\n"
    );
    // Unknown keys are refused, the file is untouched.
    let before = sb.read(".almanac/config.json5");
    let run = sb
        .run(&["config", "set", "agents.defaults.wrokspace", "x"])
        .code(2);
    assert!(run.stderr.contains("unknown config key"), "{}", run.stderr);
    assert_eq!(sb.read(".almanac/config.json5"), before);
    // unset
    sb.run(&["config", "unset", "agents.defaults.userTimezone"])
        .ok();
    assert_eq!(sb.read(".almanac/config.json5"), COMMENTED);
}

#[test]
fn config_set_on_a_fresh_home_creates_private_state() {
    let sb = Sandbox::new();
    sb.run(&["config", "set", "logging.level", "warn"]).ok();
    assert_eq!(mode(&sb.path(".almanac")), 0o700);
    assert_eq!(mode(&sb.path(".almanac/config.json5")), 0o600);
    let path = sb.run(&["config", "path"]).ok().stdout;
    assert_eq!(
        path.trim(),
        sb.path(".almanac/config.json5").display().to_string()
    );
}

#[test]
fn set_flag_layers_over_file_and_env() {
    let sb = Sandbox::new();
    sb.run(&["config", "set", "agents.defaults.workspace", "/file"])
        .ok();
    let v = sb
        .run_env(
            &[
                "config",
                "get",
                "agents.defaults.workspace",
                "--json",
                "--set",
                "agents.defaults.workspace=/flag",
            ],
            &[("ALMANAC_WORKSPACE", "/env")],
        )
        .ok()
        .json();
    assert_eq!(v["value"], "/flag");
    assert_eq!(v["origin"], "flag");
    sb.run(&["status", "--set", "nope.key=1"]).code(2);
}

#[test]
fn verbose_flag_and_env_turn_on_logs_on_stderr() {
    let sb = Sandbox::new();
    let quiet = sb.run(&["config", "path"]).ok();
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
    let loud = sb.run(&["-vv", "status"]).ok();
    assert!(loud.stderr.contains("DEBUG"), "{}", loud.stderr);
    let env = sb.run_env(&["status"], &[("ALMANAC_LOG", "debug")]).ok();
    assert!(env.stderr.contains("DEBUG"), "{}", env.stderr);
    sb.run_env(&["status"], &[("ALMANAC_LOG", "almanac=nonsense")])
        .code(2);
}

#[test]
fn completions_for_each_shell() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let run = sb.run(&["completions", shell]).ok();
        assert!(run.stdout.contains("almanac"), "{shell}");
        assert!(run.stdout.contains("status"), "{shell}");
        // A command's own flags are built late (only for the command that
        // runs); the completion scripts still carry every one of them.
        for flag in [
            "max-results",
            "delete-after-run",
            "session-key",
            "older-than",
        ] {
            assert!(run.stdout.contains(flag), "{shell}: {flag}");
        }
    }
    sb.run(&["completions", "tcsh"]).code(2);
}

#[test]
fn every_data_command_accepts_json() {
    let sb = Sandbox::new();
    for args in [
        &["status", "--json"][..],
        &["config", "path", "--json"],
        &["config", "validate", "--json"],
        &["config", "set", "logging.level", "info", "--json"],
        &["config", "get", "logging.level", "--json"],
        &["config", "unset", "logging.level", "--json"],
    ] {
        let run = sb.run(args).ok();
        let _ = run.json();
    }
}
