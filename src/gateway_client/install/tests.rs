use super::*;
use crate::config::Origin;
use crate::paths::{PathFlags, Paths};

const NOW: &str = "2026-11-29T09:00:00+00:00[UTC]";
const EXE: &str = "/usr/local/bin/almanac";

fn host(vars: &[(&str, &str)]) -> Host {
    let mut host = Host::with_vars(
        vars.iter().copied(),
        Path::new("/home/u"),
        Path::new("/work"),
        NOW.parse().unwrap(),
    );
    host.set_exe(PathBuf::from(EXE));
    host
}

/// The paths a command with `flags` resolves on `host` (a workspace flag
/// is the config's flag layer).
fn resolve(flags: &PathFlags, host: &Host) -> Paths {
    let state = paths::resolve_state(flags, host).unwrap();
    let (workspace, origin) = match (&flags.workspace, host.var("ALMANAC_WORKSPACE")) {
        (Some(ws), _) => (Some(ws.as_str()), Origin::Flag),
        (None, Some(ws)) => (Some(ws), Origin::Env),
        (None, None) => (None, Origin::Default),
    };
    paths::resolve_workspace(state, workspace, origin, host)
}

fn spec(flags: &PathFlags, host: &Host) -> ServiceSpec {
    ServiceSpec::new(host.exe().unwrap(), &resolve(flags, host), host).unwrap()
}

fn profile(name: &str) -> PathFlags {
    PathFlags {
        profile: Some(name.to_string()),
        ..Default::default()
    }
}

#[test]
fn systemd_unit_for_the_default_profile() {
    let h = host(&[]);
    let text = render(Platform::Systemd, &spec(&PathFlags::default(), &h)).unwrap();
    assert_eq!(
        text,
        "# Written by almanac gateway install: the almanac gateway as a systemd user service.
# `almanac gateway uninstall` removes this file. Provider keys and
# tokens are not written here: set them in almanac's config file or
# in an EnvironmentFile= you control.
[Unit]
Description=almanac gateway

[Service]
ExecStart=/usr/local/bin/almanac gateway run
Restart=on-failure
RestartSec=2
KillSignal=SIGTERM
TimeoutStopSec=15

[Install]
WantedBy=default.target
"
    );
}

#[test]
fn systemd_unit_for_a_profile_with_location_variables() {
    let h = host(&[
        ("ALMANAC_CONFIG", "conf/almanac.json5"),
        ("ALMANAC_WORKSPACE", "~/notes"),
        ("OPENAI_API_KEY", "sk-secret"),
    ]);
    let text = render(Platform::Systemd, &spec(&profile("work"), &h)).unwrap();
    let service: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Description=almanac gateway (profile work)")
        .take(6)
        .collect();
    assert_eq!(
        service,
        [
            "Description=almanac gateway (profile work)",
            "",
            "[Service]",
            "ExecStart=/usr/local/bin/almanac --profile work gateway run",
            "Environment=ALMANAC_CONFIG=/work/conf/almanac.json5",
            "Environment=ALMANAC_WORKSPACE=/home/u/notes",
        ]
    );
    assert!(!text.contains("OPENAI") && !text.contains("sk-secret"));
}

#[test]
fn launchd_agent_for_a_profile() {
    let h = host(&[("ALMANAC_STATE_DIR", "/srv/almanac")]);
    let text = render(Platform::Launchd, &spec(&profile("work"), &h)).unwrap();
    assert_eq!(
        text,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">
<!-- Written by almanac gateway install: the almanac gateway as a launchd agent.
     `almanac gateway uninstall` removes this file. Provider keys and
     tokens are not written here: set them in almanac's config file. -->
<plist version=\"1.0\">
<dict>
\t<key>Label</key>
\t<string>ai.almanac.gateway.work</string>
\t<key>ProgramArguments</key>
\t<array>
\t\t<string>/usr/local/bin/almanac</string>
\t\t<string>--profile</string>
\t\t<string>work</string>
\t\t<string>gateway</string>
\t\t<string>run</string>
\t</array>
\t<key>EnvironmentVariables</key>
\t<dict>
\t\t<key>ALMANAC_STATE_DIR</key>
\t\t<string>/srv/almanac</string>
\t</dict>
\t<key>RunAtLoad</key>
\t<true/>
\t<key>KeepAlive</key>
\t<dict>
\t\t<key>SuccessfulExit</key>
\t\t<false/>
\t</dict>
\t<key>ExitTimeOut</key>
\t<integer>15</integer>
\t<key>StandardOutPath</key>
\t<string>/home/u/.almanac-work/logs/gateway.out.log</string>
\t<key>StandardErrorPath</key>
\t<string>/home/u/.almanac-work/logs/gateway.err.log</string>
</dict>
</plist>
"
    );
}

#[test]
fn systemd_quotes_spaces_and_doubles_percent_and_dollar() {
    // `$` is doubled in arguments only: the program is never expanded.
    let mut h = host(&[("ALMANAC_STATE_DIR", "/data/100% \"mine\" $HOME\\x")]);
    h.set_exe(PathBuf::from("/opt/my apps/$1/almanac"));
    let flags = PathFlags {
        config: Some("/etc/al%manac/c $1.json5".into()),
        ..Default::default()
    };
    let text = render(Platform::Systemd, &spec(&flags, &h)).unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
            .to_string()
    };
    assert_eq!(
        line("ExecStart="),
        r#"ExecStart="/opt/my apps/$1/almanac" --config "/etc/al%%manac/c $$1.json5" gateway run"#
    );
    // `$` means nothing in Environment=; `%` still starts a specifier.
    assert_eq!(
        line("Environment="),
        r#"Environment="ALMANAC_STATE_DIR=/data/100%% \"mine\" $HOME\\x""#
    );
}

/// Undoes systemd's quoting of one word as systemd.syntax describes it,
/// so the quoting is checked against the rules, not only against itself.
fn systemd_unquote(word: &str, dollars_expand: bool) -> String {
    let quoted = word.len() >= 2 && word.starts_with('"') && word.ends_with('"');
    let inner = if quoted {
        &word[1..word.len() - 1]
    } else {
        word
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                assert!(quoted, "escape outside quotes in {word}");
                let next = chars.next().expect("trailing backslash");
                assert!(matches!(next, '\\' | '"'), "unexpected escape in {word}");
                out.push(next);
            }
            '%' => {
                assert_eq!(chars.next(), Some('%'), "lone % in {word}");
                out.push('%');
            }
            '$' if dollars_expand => {
                assert_eq!(chars.next(), Some('$'), "lone $ in {word}");
                out.push('$');
            }
            '"' => panic!("unescaped quote inside {word}"),
            c => {
                if !quoted {
                    assert!(!c.is_whitespace() && c != '\'', "{word}");
                }
                out.push(c);
            }
        }
    }
    out
}

#[test]
fn systemd_words_round_trip() {
    for word in [
        "/usr/bin/almanac",
        "/home/u/My Files/state",
        "/tmp/100%",
        "/tmp/$HOME/${X}",
        r#"/tmp/quote"d\back"#,
        "/tmp/it's",
        "/tmp/ünïcode",
        "",
    ] {
        for dollars in [true, false] {
            let quoted = systemd_word(word, dollars);
            assert_eq!(systemd_unquote(&quoted, dollars), word, "{quoted}");
        }
    }
}

#[test]
fn launchd_escapes_xml_in_every_value() {
    let mut h = host(&[("ALMANAC_WORKSPACE", "/home/u/R&D <notes>")]);
    h.set_exe(PathBuf::from("/opt/a&b/almanac"));
    let flags = PathFlags {
        state_dir: Some("/srv/<state>".into()),
        ..Default::default()
    };
    let text = render(Platform::Launchd, &spec(&flags, &h)).unwrap();
    for expected in [
        "<string>/opt/a&amp;b/almanac</string>",
        "<string>/srv/&lt;state&gt;</string>",
        "<string>/home/u/R&amp;D &lt;notes&gt;</string>",
        "<string>/srv/&lt;state&gt;/logs/gateway.err.log</string>",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
    // Outside the markup, no raw `&`, `<` or `>` is left in character data.
    for line in text.lines().filter(|l| l.contains("<string>")) {
        let data = line
            .trim()
            .strip_prefix("<string>")
            .and_then(|l| l.strip_suffix("</string>"))
            .unwrap();
        assert!(!data.contains(['<', '>']), "{line}");
        assert!(
            data.split('&')
                .skip(1)
                .all(|rest| ["amp;", "lt;", "gt;"].iter().any(|e| rest.starts_with(e))),
            "{line}"
        );
    }
}

#[test]
fn only_almanac_location_variables_reach_the_service() {
    let h = host(&[
        ("OPENAI_API_KEY", "sk-openai"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("GITHUB_TOKEN", "ghp_token"),
        ("ALMANAC_NOW", "2026-01-01T00:00:00Z"),
        ("ALMANAC_LOG", "debug"),
        ("ALMANAC_PROFILE", "home"),
        ("ALMANAC_STATE_DIR", "state"),
        ("ALMANAC_CONFIG", ""),
        ("PATH", "/usr/bin"),
    ]);
    assert_eq!(
        location_env(&h).unwrap(),
        [
            ("ALMANAC_STATE_DIR".to_string(), "/work/state".to_string()),
            ("ALMANAC_PROFILE".to_string(), "home".to_string()),
        ]
    );
    for platform in [Platform::Systemd, Platform::Launchd] {
        let text = render(platform, &spec(&PathFlags::default(), &h)).unwrap();
        for secret in [
            "sk-openai",
            "sk-ant",
            "ghp_token",
            "ALMANAC_NOW",
            "ALMANAC_LOG",
            "PATH",
        ] {
            assert!(!text.contains(secret), "{secret} in\n{text}");
        }
        assert!(text.contains("ALMANAC_PROFILE"));
    }
}

#[test]
fn location_flags_are_only_those_the_environment_does_not_already_give() {
    let flags = |state_dir: Option<&str>,
                 profile: Option<&str>,
                 config: Option<&str>,
                 workspace: Option<&str>| PathFlags {
        state_dir: state_dir.map(str::to_string),
        profile: profile.map(str::to_string),
        config: config.map(str::to_string),
        workspace: workspace.map(str::to_string),
    };
    let cases: Vec<(PathFlags, Vec<(&str, &str)>, &str)> = vec![
        (flags(None, None, None, None), vec![], ""),
        (
            flags(None, Some("work"), None, None),
            vec![],
            "--profile work",
        ),
        (flags(None, Some("default"), None, None), vec![], ""),
        // The environment already names the profile.
        (
            flags(None, None, None, None),
            vec![("ALMANAC_PROFILE", "work")],
            "",
        ),
        // A flag over another profile in the environment.
        (
            flags(None, Some("default"), None, None),
            vec![("ALMANAC_PROFILE", "work")],
            "--profile default",
        ),
        (
            flags(Some("st"), None, None, None),
            vec![],
            "--state-dir /work/st",
        ),
        (
            flags(Some("/srv/a"), Some("work"), None, None),
            vec![],
            "--profile work --state-dir /srv/a",
        ),
        // The state directory the environment names needs no flag.
        (
            flags(Some("/srv/a"), None, None, None),
            vec![("ALMANAC_STATE_DIR", "/srv/a")],
            "",
        ),
        (
            flags(None, None, Some("~/c.json5"), Some("ws")),
            vec![],
            "--config /home/u/c.json5 --workspace /work/ws",
        ),
        // The config file the environment names needs no flag.
        (
            flags(Some("/srv/a"), None, None, None),
            vec![("ALMANAC_CONFIG", "/etc/almanac.json5")],
            "--state-dir /srv/a",
        ),
    ];
    for (flags, vars, want) in cases {
        let h = host(&vars);
        let paths = resolve(&flags, &h);
        let got = location_flags(&paths, &h).unwrap().join(" ");
        assert_eq!(got, want, "{flags:?} {vars:?}");
        // The service, seeing only what the file gives it, resolves the same.
        let mut service_vars: Vec<(String, String)> = location_env(&h).unwrap();
        service_vars.push(("UNRELATED".into(), "x".into()));
        let service_host = Host::with_vars(
            service_vars,
            Path::new("/home/u"),
            Path::new("/"),
            NOW.parse().unwrap(),
        );
        let args = location_flags(&paths, &h).unwrap();
        let mut service_flags = PathFlags::default();
        for pair in args.chunks(2) {
            let value = Some(pair[1].clone());
            match pair[0].as_str() {
                "--profile" => service_flags.profile = value,
                "--state-dir" => service_flags.state_dir = value,
                "--config" => service_flags.config = value,
                "--workspace" => service_flags.workspace = value,
                other => panic!("{other}"),
            }
        }
        let service = resolve(&service_flags, &service_host);
        assert_eq!(
            (
                &service.profile,
                &service.state_dir,
                &service.config_path,
                &service.workspace
            ),
            (
                &paths.profile,
                &paths.state_dir,
                &paths.config_path,
                &paths.workspace
            ),
            "{want}"
        );
    }
}

#[test]
fn service_files_are_named_by_profile_and_respect_xdg_config_home() {
    let h = host(&[]);
    for (platform, profile, want) in [
        (
            Platform::Systemd,
            "default",
            "/home/u/.config/systemd/user/almanac-gateway.service",
        ),
        (
            Platform::Systemd,
            "work",
            "/home/u/.config/systemd/user/almanac-gateway-work.service",
        ),
        (
            Platform::Launchd,
            "default",
            "/home/u/Library/LaunchAgents/ai.almanac.gateway.plist",
        ),
        (
            Platform::Launchd,
            "work",
            "/home/u/Library/LaunchAgents/ai.almanac.gateway.work.plist",
        ),
    ] {
        assert_eq!(
            service_path(platform, &h, profile).unwrap(),
            PathBuf::from(want)
        );
    }
    let xdg = host(&[("XDG_CONFIG_HOME", "/cfg")]);
    assert_eq!(
        service_path(Platform::Systemd, &xdg, "default").unwrap(),
        PathBuf::from("/cfg/systemd/user/almanac-gateway.service")
    );
    // A relative XDG_CONFIG_HOME is invalid and ignored.
    let relative = host(&[("XDG_CONFIG_HOME", "cfg")]);
    assert_eq!(
        service_dir(Platform::Systemd, &relative).unwrap(),
        PathBuf::from("/home/u/.config/systemd/user")
    );
    assert_eq!(
        enablement_link(Platform::Systemd, Path::new("/c/systemd/user/a.service")),
        Some(PathBuf::from(
            "/c/systemd/user/default.target.wants/a.service"
        ))
    );
    assert_eq!(
        enablement_link(Platform::Launchd, Path::new("/x/a.plist")),
        None
    );
}

#[test]
fn control_characters_are_refused_not_written() {
    let h = host(&[("ALMANAC_STATE_DIR", "/srv/a\nExecStartPre=/bin/evil")]);
    for platform in [Platform::Systemd, Platform::Launchd] {
        let err = render(platform, &spec(&PathFlags::default(), &h)).unwrap_err();
        assert!(matches!(err, InstallError::ControlCharacter(_)), "{err}");
    }
}

#[test]
fn only_files_with_the_marker_are_replaced_or_removed() {
    let h = host(&[]);
    let text = render(Platform::Systemd, &spec(&PathFlags::default(), &h)).unwrap();
    let path = Path::new("/u/a.service");
    let older = text.replace("gateway run", "gateway run --old");
    let foreign = "[Service]\nExecStart=/bin/true\n";
    assert_eq!(
        install_change(path, None, &text).unwrap(),
        InstallChange::Create
    );
    assert_eq!(
        install_change(path, Some(text.as_bytes()), &text).unwrap(),
        InstallChange::Unchanged
    );
    assert_eq!(
        install_change(path, Some(older.as_bytes()), &text).unwrap(),
        InstallChange::Replace
    );
    assert!(matches!(
        install_change(path, Some(foreign.as_bytes()), &text),
        Err(InstallError::Foreign {
            verb: "replace",
            ..
        })
    ));
    assert!(!uninstall_change(path, None).unwrap());
    assert!(uninstall_change(path, Some(older.as_bytes())).unwrap());
    assert!(matches!(
        uninstall_change(path, Some(foreign.as_bytes())),
        Err(InstallError::Foreign { verb: "remove", .. })
    ));
    let plist = render(Platform::Launchd, &spec(&PathFlags::default(), &h)).unwrap();
    assert!(is_ours(plist.as_bytes()));
    assert!(!is_ours(b""));
}

#[test]
fn enablement_links_are_recognised_by_target() {
    let unit = Path::new("/c/systemd/user/almanac-gateway.service");
    let link = Path::new("/c/systemd/user/default.target.wants/almanac-gateway.service");
    for (target, want) in [
        ("/c/systemd/user/almanac-gateway.service", true),
        ("../almanac-gateway.service", true),
        ("/c/systemd/user/other.service", false),
        ("/etc/systemd/user/almanac-gateway.service", false),
    ] {
        assert_eq!(
            link_points_to(link, Path::new(target), unit),
            want,
            "{target}"
        );
    }
}

#[test]
fn next_steps_name_the_service_and_quote_the_path() {
    let systemd = install_commands(Platform::Systemd, Path::new("/x"), "work", false);
    assert_eq!(
        systemd[0],
        "systemctl --user daemon-reload && systemctl --user enable --now almanac-gateway-work.service"
    );
    let launchd = install_commands(
        Platform::Launchd,
        Path::new("/Users/u/Library/LaunchAgents/ai.almanac.gateway.plist"),
        "default",
        true,
    );
    assert_eq!(
        launchd,
        [
            "launchctl bootout gui/$UID/ai.almanac.gateway",
            "launchctl bootstrap gui/$UID /Users/u/Library/LaunchAgents/ai.almanac.gateway.plist",
        ]
    );
    assert_eq!(shell_word("/it's here"), r"'/it'\''s here'");
    assert_eq!(
        uninstall_commands(Platform::Launchd, "work"),
        ["launchctl bootout gui/$UID/ai.almanac.gateway.work"]
    );
}
