use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use super::*;
use crate::host::Host;

fn host(vars: &[(&str, &str)]) -> Host {
    Host::with_vars(
        vars.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        Path::new("/home/u"),
        Path::new("/cwd"),
        "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
    )
}

const JSON5_WITH_EVERYTHING: &str = r#"// my almanac settings
{
  agents: {
    defaults: {
      workspace: '~/.openclaw/workspace', // single quotes
      userTimezone: "Europe/Paris",
    },
  },
  logging: { level: "debug", },
  wizard: { lastRunVersion: "x" }, // OpenClaw section almanac ignores
  /* trailing comma above, block comment here */
}
"#;

#[test]
fn json5_with_comments_trailing_commas_and_unknown_key_loads_with_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, JSON5_WITH_EVERYTHING).unwrap();
    let (config, file) = read_file(&path).unwrap();
    assert_eq!(
        config.agents.defaults.workspace.as_deref(),
        Some("~/.openclaw/workspace")
    );
    assert_eq!(
        config.agents.defaults.user_timezone.as_deref(),
        Some("Europe/Paris")
    );
    assert_eq!(config.logging.level, Some(LogLevel::Debug));
    assert_eq!(file.unknown_keys, vec!["wizard".to_string()]);
}

#[test]
fn unknown_nested_keys_are_named_by_full_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(
        &path,
        "{ agents: { defaults: { worksapce: 'x', heartbeat2: {} } } }",
    )
    .unwrap();
    let (_, file) = read_file(&path).unwrap();
    assert_eq!(
        file.unknown_keys,
        vec![
            "agents.defaults.worksapce".to_string(),
            "agents.defaults.heartbeat2".to_string()
        ]
    );
}

#[test]
fn wrong_types_fail_with_the_key_path_and_expected_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let cases = [
        (
            "{ agents: { defaults: { workspace: 5 } } }",
            "`agents.defaults.workspace`",
            "expected a string",
        ),
        (
            "{ agents: { defaults: [] } }",
            "`agents.defaults`",
            "expected an object",
        ),
        (
            "{ logging: { level: 'loud' } }",
            "`logging.level`",
            "unknown variant `loud`",
        ),
    ];
    for (text, key, expected) in cases {
        std::fs::write(&path, text).unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
        assert!(err.contains(expected), "{err}");
    }
}

#[test]
fn syntax_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(
        &path,
        "{\n  agents: {\n    defaults: { workspace 'x' }\n  }\n}",
    )
    .unwrap();
    let err = read_file(&path).unwrap_err().to_string();
    assert!(err.contains("not valid JSON5"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    std::fs::write(&path, "[1, 2]").unwrap();
    assert!(matches!(
        read_file(&path).unwrap_err(),
        ConfigError::NotAnObject { .. }
    ));
    std::fs::write(&path, b"{ a: '\xff' }").unwrap();
    assert!(matches!(
        read_file(&path).unwrap_err(),
        ConfigError::NotUtf8 { .. }
    ));
}

#[test]
fn layers_defaults_file_env_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(
        &path,
        "{ agents: { defaults: { workspace: '/from/file' } } }",
    )
    .unwrap();

    let file_only = load(&path, &host(&[]), &[]).unwrap();
    assert_eq!(
        file_only.config.agents.defaults.workspace.as_deref(),
        Some("/from/file")
    );
    assert_eq!(
        file_only.origin("agents.defaults.workspace"),
        Origin::Config
    );
    assert_eq!(
        file_only.origin("agents.defaults.userTimezone"),
        Origin::Default
    );

    let env = load(&path, &host(&[("ALMANAC_WORKSPACE", "/from/env")]), &[]).unwrap();
    assert_eq!(
        env.config.agents.defaults.workspace.as_deref(),
        Some("/from/env")
    );
    assert_eq!(env.origin("agents.defaults.workspace"), Origin::Env);

    let flags = vec![(
        "agents.defaults.workspace".to_string(),
        "/from/flag".to_string(),
    )];
    let flag = load(&path, &host(&[("ALMANAC_WORKSPACE", "/from/env")]), &flags).unwrap();
    assert_eq!(
        flag.config.agents.defaults.workspace.as_deref(),
        Some("/from/flag")
    );
    assert_eq!(flag.origin("agents.defaults.workspace"), Origin::Flag);

    let missing = load(&dir.path().join("none.json5"), &host(&[]), &[]).unwrap();
    assert!(!missing.file.exists);
    assert_eq!(missing.config, Config::default());
}

#[test]
fn flag_layer_refuses_unknown_keys_and_bad_types() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let unknown = vec![("agents.defaults.nope".to_string(), "1".to_string())];
    assert!(matches!(
        load(&path, &host(&[]), &unknown).unwrap_err(),
        ConfigError::UnknownKey(_)
    ));
    let bad = vec![("logging.level".to_string(), "shouting".to_string())];
    let err = load(&path, &host(&[]), &bad).unwrap_err().to_string();
    assert!(err.contains("logging.level"), "{err}");
}

#[test]
fn get_reads_effective_values_then_unknown_file_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, JSON5_WITH_EVERYTHING).unwrap();
    let loaded = load(&path, &host(&[("ALMANAC_WORKSPACE", "/env/ws")]), &[]).unwrap();
    assert_eq!(
        loaded.get("agents.defaults.workspace"),
        Some(Value::String("/env/ws".into()))
    );
    assert_eq!(
        loaded.get("wizard.lastRunVersion"),
        Some(Value::String("x".into()))
    );
    assert_eq!(loaded.get("agents.defaults.nothing"), None);
}

#[test]
fn set_keeps_comments_and_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, JSON5_WITH_EVERYTHING).unwrap();
    let outcome = set(&path, "agents.defaults.workspace", "/srv/notes").unwrap();
    assert!(!outcome.created_file);
    let text = std::fs::read_to_string(&path).unwrap();
    let expected = JSON5_WITH_EVERYTHING.replace("'~/.openclaw/workspace'", "\"/srv/notes\"");
    assert_eq!(text, expected);

    set(&path, "logging.level", "warn").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("logging: { level: \"warn\", },"), "{text}");
    assert!(text.contains("// OpenClaw section almanac ignores"));
    assert!(text.contains("/* trailing comma above, block comment here */"));
}

#[test]
fn set_creates_a_private_file_and_coerces_values_to_the_key_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state").join("config.json5");
    let outcome = set(&path, "agents.defaults.workspace", "123").unwrap();
    assert!(outcome.created_file);
    // `123` parses as a number, but the key takes a string.
    assert_eq!(outcome.value, Value::String("123".into()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (config, _) = read_file(&path).unwrap();
    assert_eq!(config.agents.defaults.workspace.as_deref(), Some("123"));
}

#[test]
fn set_refuses_unknown_keys_and_wrong_types_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, JSON5_WITH_EVERYTHING).unwrap();
    assert!(matches!(
        set(&path, "agents.defaults.worksapce", "x").unwrap_err(),
        ConfigError::UnknownKey(_)
    ));
    let err = set(&path, "logging.level", "[1,2]")
        .unwrap_err()
        .to_string();
    assert!(err.contains("logging.level"), "{err}");
    assert!(matches!(
        set(&path, "agents..x", "1").unwrap_err(),
        ConfigError::BadKey(_)
    ));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        JSON5_WITH_EVERYTHING
    );
}

#[test]
fn set_can_fix_one_bad_key_while_another_stays_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(
        &path,
        "{ agents: { defaults: { workspace: 5 } }, logging: { level: 'loud' } }",
    )
    .unwrap();
    let outcome = set(&path, "agents.defaults.workspace", "/w").unwrap();
    let remaining = outcome
        .remaining_problem
        .expect("logging.level is still bad");
    assert!(remaining.contains("logging.level"), "{remaining}");
}

#[test]
fn set_on_a_syntax_error_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, "{ agents: ").unwrap();
    assert!(matches!(
        set(&path, "agents.defaults.workspace", "/w").unwrap_err(),
        ConfigError::Syntax { .. }
    ));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ agents: ");
}

#[test]
fn unset_removes_the_key_and_reports_absence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    std::fs::write(&path, JSON5_WITH_EVERYTHING).unwrap();
    assert!(unset(&path, "agents.defaults.userTimezone").unwrap());
    assert!(!unset(&path, "agents.defaults.userTimezone").unwrap());
    let (config, _) = read_file(&path).unwrap();
    assert_eq!(config.agents.defaults.user_timezone, None);
    assert_eq!(
        config.agents.defaults.workspace.as_deref(),
        Some("~/.openclaw/workspace")
    );
}

#[test]
fn known_key_probe() {
    for (key, known) in [
        ("agents.defaults.workspace", true),
        ("agents.defaults", true),
        ("logging.level", true),
        ("agents.defaults.bogus", false),
        ("channels", true),
        ("channels.outbox.heartbeat.showOk", true),
        ("heartbeat.bogus", false),
        ("", false),
    ] {
        assert_eq!(is_known_key(key), known, "{key}");
    }
}

#[test]
fn an_unknown_time_zone_is_refused_where_it_is_given_and_named_where_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let err = set(&path, USER_TIMEZONE, "Europe/Pariss").unwrap_err();
    assert!(
        matches!(&err, ConfigError::BadValue { key, .. } if key == USER_TIMEZONE),
        "{err}"
    );
    assert!(!path.exists(), "nothing written");
    set(&path, USER_TIMEZONE, "Europe/Paris").unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    // A wrong type on the command line is the command's fault too.
    let err = set(&path, "agents.defaults.maxSteps", "many").unwrap_err();
    assert!(matches!(err, ConfigError::BadValue { .. }), "{err}");
    let flags = [(USER_TIMEZONE.to_string(), "Nowhere".to_string())];
    assert!(matches!(
        load(&path, &host(&[]), &flags),
        Err(ConfigError::BadValue { .. })
    ));
    // Written by hand: a warning naming the key and the zone used instead.
    std::fs::write(
        &path,
        "{ agents: { defaults: { userTimezone: 'Mars/Base' } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    assert_eq!(
        loaded.warnings,
        vec![
            "agents.defaults.userTimezone: `Mars/Base` is not a known IANA time zone (for example Europe/Paris or UTC); using the host's zone (UTC)"
                .to_string()
        ]
    );
    let (config, _) = read_file(&path).unwrap();
    assert_eq!(value_problems(&config).len(), 1);
}

#[test]
fn tools_section_defaults_values_and_the_ask_default_from_security_actions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let defaults = load(&path, &host(&[]), &[]).unwrap().config;
    assert_eq!(defaults.tools.profile, None);
    assert_eq!(defaults.tools.exec.security, ExecSecurity::Allowlist);
    assert_eq!(defaults.tools.exec.safe_bins, DEFAULT_SAFE_BINS);
    assert!(!defaults.tools.exec.auto_allow_skills);
    assert_eq!(defaults.tools.exec.timeout_sec, 60);
    assert_eq!(defaults.skills.run, SkillsRunConfig::default());
    let ask = |vars: &[(&str, &str)], text: &str| {
        std::fs::write(&path, text).unwrap();
        let c = load(&path, &host(vars), &[]).unwrap().config;
        c.tools.exec_ask(&c.security)
    };
    assert_eq!(
        ask(&[], "{}"),
        ExecAsk::OnMiss,
        "security.actions is on by default"
    );
    assert_eq!(ask(&[("SECURITY_ACTIONS", "0")], "{}"), ExecAsk::Off);
    assert_eq!(ask(&[("SECURITY", "off")], "{}"), ExecAsk::Off);
    assert_eq!(
        ask(
            &[("SECURITY_ACTIONS", "0")],
            "{ tools: { exec: { ask: 'always' } } }"
        ),
        ExecAsk::Always,
        "a value set wins"
    );
    std::fs::write(
        &path,
        "{ tools: { profile: 'coding', allow: ['weather'], deny: ['group:runtime'], exec: { security: 'full', safeBins: ['jq'], autoAllowSkills: true, timeoutSec: 0 } }, skills: { run: { timeoutSec: 5, maxOutputBytes: 10 } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let tools = &loaded.config.tools;
    assert_eq!(tools.profile, Some(ToolProfile::Coding));
    assert_eq!(tools.exec.security, ExecSecurity::Full);
    assert_eq!(tools.exec.safe_bins, vec!["jq"]);
    assert_eq!(tools.exec.timeout_sec, 1, "clamped");
    assert_eq!(loaded.config.skills.run.max_output_bytes, 1_024, "clamped");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("tools.exec.timeoutSec"))
    );
    for bad in [
        "{ tools: { profile: 'everything' } }",
        "{ tools: { exec: { ask: 'sometimes' } } }",
        "{ tools: { exec: { security: 'yolo' } } }",
    ] {
        std::fs::write(&path, bad).unwrap();
        assert!(
            matches!(load(&path, &host(&[]), &[]), Err(ConfigError::Type { .. })),
            "{bad}"
        );
    }
    std::fs::write(&path, "{}").unwrap();
    set(&path, "tools.exec.security", "full").unwrap();
    set(&path, "tools.exec.ask", "on-miss").unwrap();
    let c = load(&path, &host(&[]), &[]).unwrap().config;
    assert_eq!(
        (c.tools.exec.security, c.tools.exec.ask),
        (ExecSecurity::Full, Some(ExecAsk::OnMiss))
    );
}

#[test]
fn delivery_webhook_allow_private_network_is_a_known_boolean_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    assert!(!Config::default().delivery.webhook.allow_private_network);
    std::fs::write(
        &path,
        "{ delivery: { webhook: { allowPrivateNetwork: true, allowPrivate: true } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    assert!(loaded.config.delivery.webhook.allow_private_network);
    assert_eq!(
        loaded.file.unknown_keys,
        vec!["delivery.webhook.allowPrivate".to_string()]
    );
    assert!(is_known_key("delivery.webhook.allowPrivateNetwork"));
    std::fs::write(
        &path,
        "{ delivery: { webhook: { allowPrivateNetwork: 'yes' } } }",
    )
    .unwrap();
    let err = load(&path, &host(&[]), &[]).unwrap_err().to_string();
    assert!(
        err.contains("delivery.webhook.allowPrivateNetwork"),
        "{err}"
    );
}

#[test]
fn cron_keys_defaults_sizes_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let defaults = Config::default().cron;
    assert!(defaults.enabled);
    assert_eq!(defaults.store, None);
    assert_eq!(defaults.max_concurrent_runs, 1);
    assert_eq!(defaults.run_log.max_bytes, ByteSize(2_000_000));
    assert_eq!(defaults.run_log.keep_lines, 2_000);
    for key in [
        "cron.enabled",
        "cron.store",
        "cron.maxConcurrentRuns",
        "cron.runLog.maxBytes",
        "cron.runLog.keepLines",
    ] {
        assert!(is_known_key(key), "{key}");
    }
    std::fs::write(
        &path,
        "{ cron: { enabled: false, store: '~/jobs.json', maxConcurrentRuns: 0, runLog: { maxBytes: '2mb', keepLines: 50 }, sessionRetention: '24h' } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let cron = &loaded.config.cron;
    assert!(!cron.enabled);
    assert_eq!(cron.store.as_deref(), Some("~/jobs.json"));
    assert_eq!(cron.run_log.max_bytes, ByteSize(2 * 1024 * 1024));
    assert_eq!(cron.run_log.keep_lines, 50);
    assert_eq!(cron.max_concurrent_runs, 1, "clamped");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("cron.maxConcurrentRuns")),
        "{:?}",
        loaded.warnings
    );
    assert!(
        loaded.file.unknown_keys.is_empty(),
        "{:?}",
        loaded.file.unknown_keys
    );
    assert_eq!(cron.session_retention.ms(), Some(24 * 3_600_000));
    for (json, ms) in [
        ("false", None),
        ("6", Some(6 * 3_600_000)),
        ("'90m'", Some(90 * 60_000)),
        ("'2d'", Some(48 * 3_600_000)),
    ] {
        std::fs::write(&path, format!("{{ cron: {{ sessionRetention: {json} }} }}")).unwrap();
        let loaded = load(&path, &host(&[]), &[]).unwrap();
        assert_eq!(loaded.config.cron.session_retention.ms(), ms, "{json}");
    }
    std::fs::write(&path, "{ cron: { sessionRetention: 'soon' } }").unwrap();
    let err = load(&path, &host(&[]), &[]).unwrap_err().to_string();
    assert!(err.contains("cron.sessionRetention"), "{err}");
    for (text, bytes) in [
        ("2000000", Some(2_000_000)),
        ("500kb", Some(512_000)),
        ("1.5 MB", Some(1_572_864)),
        ("1g", Some(1 << 30)),
        ("lots", None),
        ("-1mb", None),
    ] {
        assert_eq!(ByteSize::parse(text).ok().map(|b| b.0), bytes, "{text}");
    }
    std::fs::write(&path, "{ cron: { runLog: { maxBytes: 'big' } } }").unwrap();
    let err = load(&path, &host(&[]), &[]).unwrap_err().to_string();
    assert!(err.contains("cron.runLog.maxBytes"), "{err}");
    // From the command line too.
    let loaded = load(
        &path.with_file_name("none.json5"),
        &host(&[]),
        &[("cron.runLog.maxBytes".into(), "1kb".into())],
    )
    .unwrap();
    assert_eq!(loaded.config.cron.run_log.max_bytes, ByteSize(1024));
}

#[test]
fn cron_retry_and_failure_alert_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let defaults = Config::default().cron;
    assert_eq!(defaults.retry.max_attempts, 3);
    assert_eq!(defaults.retry.backoff_ms, vec![30_000, 60_000, 300_000]);
    assert_eq!(defaults.retry.retry_on, TransientClass::ALL.to_vec());
    let alert = &defaults.failure_alert;
    assert!(!alert.enabled);
    assert_eq!(alert.after, 2);
    assert_eq!(alert.cooldown_ms, 3_600_000);
    assert_eq!(
        (&alert.mode, &alert.channel, &alert.to),
        (&None, &None, &None)
    );
    for key in [
        "cron.retry.maxAttempts",
        "cron.retry.backoffMs",
        "cron.retry.retryOn",
        "cron.failureAlert.enabled",
        "cron.failureAlert.after",
        "cron.failureAlert.cooldownMs",
        "cron.failureAlert.mode",
        "cron.failureAlert.channel",
        "cron.failureAlert.to",
        "cron.failureAlert.accountId",
    ] {
        assert!(is_known_key(key), "{key}");
    }
    assert!(!is_known_key("cron.retry.jitter"));

    std::fs::write(
        &path,
        "{ cron: { retry: { maxAttempts: 5, backoffMs: [1000, 2000], retryOn: ['rate_limit', 'server_error'], jitter: true },
                   failureAlert: { enabled: true, after: 0, cooldownMs: 60000, mode: 'announce', channel: 'telegram', to: '123' } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let cron = &loaded.config.cron;
    assert_eq!(cron.retry.max_attempts, 5);
    assert_eq!(cron.retry.backoff_ms, vec![1_000, 2_000]);
    assert_eq!(
        cron.retry.retry_on,
        vec![TransientClass::RateLimit, TransientClass::ServerError]
    );
    assert!(cron.failure_alert.enabled);
    assert_eq!(cron.failure_alert.after, 1, "clamped");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("cron.failureAlert.after")),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(cron.failure_alert.cooldown_ms, 60_000);
    assert_eq!(cron.failure_alert.mode, Some(CronAlertMode::Announce));
    assert_eq!(cron.failure_alert.channel.as_deref(), Some("telegram"));
    assert_eq!(cron.failure_alert.to.as_deref(), Some("123"));
    assert_eq!(
        loaded.file.unknown_keys,
        vec!["cron.retry.jitter".to_string()]
    );

    // A class that does not exist is a type error naming the key.
    std::fs::write(&path, "{ cron: { retry: { retryOn: ['sometimes'] } } }").unwrap();
    let err = load(&path, &host(&[]), &[]).unwrap_err().to_string();
    assert!(err.contains("cron.retry.retryOn"), "{err}");

    // Usable types, unusable values: a warning from the file, refused on
    // the command line.
    std::fs::write(
        &path,
        "{ cron: { retry: { backoffMs: [] }, failureAlert: { mode: 'webhook' } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let warnings = loaded.warnings.join("\n");
    assert!(
        warnings.contains("cron.retry.backoffMs") && warnings.contains("30 s, 1 min, 5 min"),
        "{warnings}"
    );
    assert!(warnings.contains("cron.failureAlert.to"), "{warnings}");
    let err = load(
        &path.with_file_name("none.json5"),
        &host(&[]),
        &[("cron.retry.backoffMs".into(), "[]".into())],
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::BadValue { .. }), "{err}");
    let loaded = load(
        &path.with_file_name("none.json5"),
        &host(&[]),
        &[("cron.retry.retryOn".into(), "['network']".into())],
    )
    .unwrap();
    assert_eq!(
        loaded.config.cron.retry.retry_on,
        vec![TransientClass::Network]
    );
}

#[test]
fn cron_webhook_token_and_failure_destination_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json5");
    let defaults = Config::default().cron;
    assert_eq!(defaults.webhook_token, None);
    assert_eq!(defaults.failure_destination, None);
    for key in [
        "cron.webhookToken",
        "cron.failureDestination",
        "cron.failureDestination.mode",
        "cron.failureDestination.channel",
        "cron.failureDestination.to",
        "cron.failureDestination.accountId",
    ] {
        assert!(is_known_key(key), "{key}");
    }

    std::fs::write(
        &path,
        "{ cron: { webhookToken: 'file-token',
                   failureDestination: { mode: 'webhook', to: 'https://ops.example/cron', accountId: 'ops', priority: 'high' } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let cron = &loaded.config.cron;
    assert_eq!(cron.webhook_token.as_deref(), Some("file-token"));
    let dest = cron.failure_destination.as_ref().unwrap();
    assert_eq!(dest.mode, Some(CronAlertMode::Webhook));
    assert_eq!(dest.to.as_deref(), Some("https://ops.example/cron"));
    assert_eq!(dest.account_id.as_deref(), Some("ops"));
    assert_eq!(dest.channel, None);
    // A key almanac does not know is reported, as everywhere else.
    assert_eq!(
        loaded.file.unknown_keys,
        vec!["cron.failureDestination.priority".to_string()]
    );
    assert_eq!(loaded.get("cron.webhookToken"), Some("file-token".into()));

    // The environment wins over the file, as for the gateway's token.
    let loaded = load(
        &path,
        &host(&[("ALMANAC_CRON_WEBHOOK_TOKEN", "env-token")]),
        &[],
    )
    .unwrap();
    assert_eq!(
        loaded.config.cron.webhook_token.as_deref(),
        Some("env-token")
    );
    assert_eq!(loaded.origin("cron.webhookToken"), Origin::Env);
    assert_eq!(loaded.get("cron.webhookToken"), Some("env-token".into()));

    // A webhook destination without a usable URL: a warning from the file,
    // refused on the command line; a wrong type is an error naming the key.
    std::fs::write(
        &path,
        "{ cron: { failureDestination: { mode: 'webhook' } } }",
    )
    .unwrap();
    let loaded = load(&path, &host(&[]), &[]).unwrap();
    let warnings = loaded.warnings.join("\n");
    assert!(
        warnings.contains("cron.failureDestination.to") && warnings.contains("not reported"),
        "{warnings}"
    );
    let err = load(
        &path.with_file_name("none.json5"),
        &host(&[]),
        &[
            ("cron.failureDestination.mode".into(), "webhook".into()),
            ("cron.failureDestination.to".into(), "ftp://x".into()),
        ],
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::BadValue { .. }), "{err}");
    std::fs::write(&path, "{ cron: { failureDestination: { mode: 'pager' } } }").unwrap();
    let err = load(&path, &host(&[]), &[]).unwrap_err().to_string();
    assert!(err.contains("cron.failureDestination.mode"), "{err}");
}
