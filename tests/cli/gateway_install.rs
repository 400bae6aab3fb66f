//! `gateway install` and `gateway uninstall` with the real executable: the
//! one command that writes outside the state directory, always showing
//! what it writes. The systemd side (the service manager of the system the
//! tests run on).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

use crate::common::{Sandbox, mode};

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        }
        out.push(path);
    }
    out.sort();
    out
}

/// The executable as the running process sees itself.
fn exe() -> String {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_almanac"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn a_dry_run_prints_the_unit_and_writes_nothing_anywhere() {
    let sb = Sandbox::new();
    let before = files_under(sb.home());
    let run = sb.run(&["gateway", "install", "--dry-run"]).ok();
    let unit = sb.path(".config/systemd/user/almanac-gateway.service");
    assert!(
        run.stdout
            .starts_with(&format!("systemd user unit {}:\n\n", unit.display())),
        "{}",
        run.stdout
    );
    for expected in [
        format!("\nExecStart={} gateway run\n", exe()),
        "\nRestart=on-failure\nRestartSec=2\nKillSignal=SIGTERM\nTimeoutStopSec=15\n".to_string(),
        "\nWantedBy=default.target\n".to_string(),
        "\ndry run: nothing written\n".to_string(),
        "EnvironmentFile=".to_string(),
        "systemctl --user daemon-reload && systemctl --user enable --now almanac-gateway.service"
            .to_string(),
    ] {
        assert!(
            run.stdout.contains(&expected),
            "{expected:?} in\n{}",
            run.stdout
        );
    }
    let json = sb
        .run(&["gateway", "install", "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(json["action"], "dry-run");
    assert_eq!(json["platform"], "systemd");
    assert_eq!(json["path"], unit.display().to_string());
    assert!(run.stdout.contains(json["text"].as_str().unwrap()));
    let run = sb.run(&["gateway", "uninstall", "--dry-run"]).ok();
    assert_eq!(
        run.stdout,
        format!("not installed: there is no {}\n", unit.display())
    );
    assert_eq!(files_under(sb.home()), before, "a dry run creates nothing");
}

#[test]
fn install_writes_once_and_uninstall_removes_it_once() {
    let sb = Sandbox::new();
    let xdg = sb.path("xdg");
    let env = [("XDG_CONFIG_HOME", xdg.to_str().unwrap())];
    let unit = xdg.join("systemd/user/almanac-gateway.service");

    let first = sb
        .run_env(&["gateway", "install", "--json"], &env)
        .ok()
        .json();
    assert_eq!(first["action"], "written");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert_eq!(first["text"], text.as_str());
    assert!(text.starts_with("# Written by almanac gateway install"));
    assert!(text.contains(&format!("\nExecStart={} gateway run\n", exe())));
    assert_eq!(mode(&unit), 0o644);
    assert!(!sb.path(".config").exists(), "XDG_CONFIG_HOME is respected");

    let again = sb.run_env(&["gateway", "install"], &env).ok();
    assert!(
        again.stdout.contains(&format!(
            "already installed: {} is unchanged; nothing written",
            unit.display()
        )),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), text);

    // A unit of ours with other text (an older executable) is replaced.
    std::fs::write(&unit, text.replace(" gateway run", " --old gateway run")).unwrap();
    let replaced = sb.run_env(&["gateway", "install"], &env).ok();
    assert!(
        replaced.stdout.contains("replaced the earlier file"),
        "{}",
        replaced.stdout
    );
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), text);

    let dry = sb
        .run_env(&["gateway", "uninstall", "--dry-run"], &env)
        .ok();
    assert!(
        dry.stdout.contains("dry run: nothing removed"),
        "{}",
        dry.stdout
    );
    assert!(unit.exists());

    let removed = sb.run_env(&["gateway", "uninstall"], &env).ok();
    assert!(
        removed
            .stdout
            .starts_with(&format!("removed systemd user unit {}\n", unit.display())),
        "{}",
        removed.stdout
    );
    assert!(
        removed
            .stdout
            .contains("systemctl --user stop almanac-gateway.service")
    );
    assert!(!unit.exists());

    let absent = sb.run_env(&["gateway", "uninstall"], &env).ok();
    assert!(
        absent.stdout.starts_with("not installed"),
        "{}",
        absent.stdout
    );
    let absent = sb
        .run_env(&["gateway", "uninstall", "--json"], &env)
        .ok()
        .json();
    assert_eq!(absent["action"], "absent");
    assert_eq!(absent["text"], serde_json::Value::Null);
}

#[test]
fn a_unit_almanac_did_not_write_is_left_alone_with_exit_2() {
    let sb = Sandbox::new();
    let rel = ".config/systemd/user/almanac-gateway.service";
    let mine = "[Service]\nExecStart=/usr/local/bin/my-gateway\n";
    sb.write(rel, mine);
    let run = sb.run(&["gateway", "uninstall"]).code(2);
    assert!(
        run.stderr.starts_with(&format!(
            "error: refusing to remove {}: almanac did not write it",
            sb.path(rel).display()
        )),
        "{}",
        run.stderr
    );
    sb.run(&["gateway", "install"]).code(2);
    sb.run(&["gateway", "uninstall", "--dry-run"]).code(2);
    assert_eq!(sb.read(rel), mine);
}

#[test]
fn profiles_get_their_own_unit_and_keys_stay_out() {
    let sb = Sandbox::new();
    let state = sb.path("state dir");
    let run = sb
        .run_env(
            &["--profile", "work", "gateway", "install", "--dry-run"],
            &[
                ("ALMANAC_STATE_DIR", state.to_str().unwrap()),
                ("OPENAI_API_KEY", "sk-test-secret"),
                ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ],
        )
        .ok();
    assert!(
        run.stdout.contains(&format!(
            "{}:",
            sb.path(".config/systemd/user/almanac-gateway-work.service")
                .display()
        )),
        "{}",
        run.stdout
    );
    // The flag names the profile; the state directory the environment
    // gave comes with the unit's environment.
    assert!(
        run.stdout.contains(&format!(
            "\nExecStart={} --profile work gateway run\nEnvironment=\"ALMANAC_STATE_DIR={}\"\n",
            exe(),
            state.display()
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("secret") && !run.stdout.contains("API_KEY"));
}

#[test]
fn settings_the_service_will_not_see_are_named() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "--set",
            "memory.session.maxNoteChars=500",
            "gateway",
            "install",
            "--dry-run",
        ])
        .ok();
    assert_eq!(
        run.stderr,
        "warning: the service will not see these settings from this command's flags or environment: memory.session.maxNoteChars (--set); put them in the config file\n"
    );
}
