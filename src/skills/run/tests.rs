use super::*;
use crate::skills::types::{Requirements, SkillFormat, SourceKind};

fn skill(run: RunSpec, dir: &Path) -> Skill {
    Skill {
        name: "demo".into(),
        description: "d".into(),
        file_path: dir.join("skill.json"),
        base_dir: dir.to_path_buf(),
        source: SourceKind::Workspace,
        format: SkillFormat::Manifest,
        skill_key: "demo".into(),
        emoji: None,
        homepage: None,
        primary_env: Some("DEMO_API_KEY".into()),
        version: None,
        always: false,
        os: vec![],
        requires: Requirements::default(),
        permissions: vec![],
        install: vec![],
        user_invocable: true,
        disable_model_invocation: false,
        disabled_by_manifest: false,
        dispatch: None,
        triggers: vec![],
        run: Some(run),
        diagnostics: vec![],
        shadows: vec![],
    }
}

fn bins(name: &str) -> Option<PathBuf> {
    Some(PathBuf::from(format!("/usr/bin/{name}")))
}

#[test]
fn skill_env_adds_configured_values_without_overriding_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let s = skill(RunSpec::Prompt, dir.path());
    let entry = SkillEntryConfig {
        env: [
            ("TOKEN", "from-config"),
            ("USER_SET", "from-config"),
            ("PATH", "/evil"),
            ("LD_PRELOAD", "x.so"),
            ("EMPTY", ""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        api_key: Some("sk-from-config".into()),
        ..SkillEntryConfig::default()
    };
    let user: BTreeMap<String, String> = [("USER_SET", "mine"), ("PATH", "/usr/bin")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = skill_env(&s, Some(&entry), &user);
    assert_eq!(env.get("TOKEN").map(String::as_str), Some("from-config"));
    assert_eq!(
        env.get("DEMO_API_KEY").map(String::as_str),
        Some("sk-from-config")
    );
    assert!(!env.contains_key("USER_SET"), "never overrides the user");
    assert!(
        !env.contains_key("PATH") && !env.contains_key("LD_PRELOAD"),
        "dangerous keys are never injected"
    );
    assert!(!env.contains_key("EMPTY"));
    assert!(skill_env(&s, None, &user).is_empty());
}

#[test]
fn command_templates_never_reach_a_shell_and_refuse_metacharacters() {
    let dir = tempfile::tempdir().unwrap();
    let s = skill(
        RunSpec::Command {
            command: "echo 'hello there' {args} --end".into(),
        },
        dir.path(),
    );
    let args = vec!["a".to_string(), "b c".to_string()];
    assert_eq!(
        plan(&s, &args, bins).unwrap(),
        Plan::Exec {
            program: PathBuf::from("/usr/bin/echo"),
            args: vec![
                "hello there".into(),
                "a".into(),
                "b c".into(),
                "--end".into()
            ],
            cwd: dir.path().to_path_buf()
        }
    );
    for bad in [
        "x; rm -rf /",
        "a && b",
        "a || b",
        "a | b",
        "> out",
        "< in",
        "`id`",
        "$(id)",
        "$HOME",
        "a\nb",
    ] {
        let err = plan(&s, &[bad.to_string()], bins).unwrap_err();
        assert!(matches!(err, RunError::Metacharacter { .. }), "{bad:?}");
    }
}

#[test]
fn entries_run_by_their_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    for (file, interpreter) in [
        ("run.py", "python3"),
        ("run.sh", "bash"),
        ("index.js", "node"),
        ("x.fish", "fish"),
    ] {
        let entry = dir.path().join(file);
        std::fs::write(&entry, "x").unwrap();
        let s = skill(
            RunSpec::Entry {
                entry: entry.clone(),
            },
            dir.path(),
        );
        match plan(&s, &["arg".into()], bins).unwrap() {
            Plan::Exec { program, args, .. } => {
                assert_eq!(
                    program,
                    PathBuf::from(format!("/usr/bin/{interpreter}")),
                    "{file}"
                );
                assert_eq!(
                    args,
                    vec![entry.to_string_lossy().into_owned(), "arg".to_string()]
                );
            }
            other => panic!("{other:?}"),
        }
    }
    let missing_interpreter = skill(
        RunSpec::Entry {
            entry: dir.path().join("run.py"),
        },
        dir.path(),
    );
    assert!(
        plan(&missing_interpreter, &[], |_| None)
            .unwrap_err()
            .to_string()
            .contains("python3 not found on PATH")
    );
    let mcp = skill(RunSpec::Mcp, dir.path());
    assert!(
        plan(&mcp, &[], bins)
            .unwrap_err()
            .to_string()
            .contains("MCP")
    );
}

#[test]
fn word_splitting() {
    assert_eq!(
        split_words(r#"a "b c" 'd e' f\ g"#).unwrap(),
        vec!["a", "b c", "d e", "f g"]
    );
    assert_eq!(split_words("").unwrap(), Vec::<String>::new());
    assert!(split_words("'unclosed").is_none());
}

#[test]
fn a_skill_process_gets_the_allowlist_and_what_the_skill_declares() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = skill(RunSpec::Prompt, dir.path());
    s.requires.env = vec![
        "GITHUB_TOKEN".into(),
        "OPENAI_API_KEY".into(),
        "ALMANAC_CONFIG".into(),
    ];
    s.requires.env_any = vec!["LD_PRELOAD".into()];
    let entry = SkillEntryConfig {
        env: [("SKILL_SECRET", "from-config"), ("USER_VAR", "from-config")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        api_key: Some("k-123".into()),
        ..SkillEntryConfig::default()
    };
    let host: BTreeMap<String, String> = [
        ("PATH", "/usr/bin:."),
        ("HOME", "/h"),
        ("GITHUB_TOKEN", "ghp-user"),
        ("OPENAI_API_KEY", "sk-provider"),
        ("ANTHROPIC_API_KEY", "sk-other"),
        ("ALMANAC_CONFIG", "/c"),
        ("LD_PRELOAD", "/x.so"),
        ("USER_VAR", "mine"),
        ("UNDECLARED_TOKEN", "t"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let env = child_env(&s, Some(&entry), &host, |name| name == "OPENAI_API_KEY");
    let want: BTreeMap<String, String> = [
        ("PATH", "/usr/bin"),
        ("HOME", "/h"),
        ("GITHUB_TOKEN", "ghp-user"),
        ("USER_VAR", "mine"),
        ("SKILL_SECRET", "from-config"),
        ("DEMO_API_KEY", "k-123"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(env, want);
}
