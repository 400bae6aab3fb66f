use super::*;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills")
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn fixture_corpus_reads_like_openclaw() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
            .unwrap();
    let expected = expected.as_object().unwrap();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs.len(),
        expected.len(),
        "every fixture has an expectation"
    );
    for dir in dirs {
        let key = dir.file_name().unwrap().to_string_lossy().into_owned();
        let want = &expected[&key];
        let path = dir.join("SKILL.md");
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        let skill = parse_skill_md(&path, &dir, &key, SourceKind::Workspace, &text)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(skill.name, want["name"].as_str().unwrap(), "{key}: name");
        assert_eq!(
            skill.description,
            want["description"].as_str().unwrap(),
            "{key}: description"
        );
        assert_eq!(skill.requires.bins, strs(&want["bins"]), "{key}: bins");
        assert_eq!(
            skill.requires.any_bins,
            strs(&want["anyBins"]),
            "{key}: anyBins"
        );
        assert_eq!(skill.requires.env, strs(&want["env"]), "{key}: env");
        assert_eq!(
            skill.requires.config,
            strs(&want["config"]),
            "{key}: config"
        );
        assert_eq!(skill.os, strs(&want["os"]), "{key}: os");
        assert_eq!(
            skill.primary_env.as_deref(),
            want["primaryEnv"].as_str(),
            "{key}: primaryEnv"
        );
        assert_eq!(
            skill.emoji.as_deref(),
            want["emoji"].as_str(),
            "{key}: emoji"
        );
        let install: Vec<String> = skill.install.iter().map(|i| i.kind.clone()).collect();
        assert_eq!(install, strs(&want["install"]), "{key}: install");
        if let Some(tool) = want.get("dispatchTool") {
            assert_eq!(
                skill.dispatch.as_ref().map(|d| d.tool_name.as_str()),
                tool.as_str(),
                "{key}"
            );
        }
        if let Some(env_any) = want.get("envAny") {
            assert_eq!(skill.requires.env_any, strs(env_any), "{key}: env_any");
        }
        if let Some(perms) = want.get("permissions") {
            assert_eq!(skill.permissions, strs(perms), "{key}: permissions");
        }
        if let Some(hidden) = want.get("disableModelInvocation") {
            assert_eq!(
                skill.disable_model_invocation,
                hidden.as_bool().unwrap(),
                "{key}"
            );
        }
    }
}

#[test]
fn files_that_cannot_load_say_why() {
    let p = Path::new("/x/SKILL.md");
    let dir = Path::new("/x");
    let cases = [
        ("# no frontmatter\n", "no frontmatter"),
        ("---\nname: x\ndescription: d\n", "no closing"),
        ("---\nname: x\n---\n", "no description"),
        ("---\nname: x\ndescription: \"  \"\n---\n", "no description"),
        (
            &format!("---\nname: {}\ndescription: d\n---\n", "n".repeat(65)),
            "bad name",
        ),
        (
            "---\nname: \"a\\u0007b\"\ndescription: d\n---\n",
            "bad name",
        ),
    ];
    for (text, want) in cases {
        let err = parse_skill_md(p, dir, "x", SourceKind::Workspace, text).unwrap_err();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn skill_names_follow_the_agentskills_rule() {
    let p = Path::new("/x/SKILL.md");
    let dir = Path::new("/x");
    let parse = |name: &str| {
        let text = format!("---\nname: {name}\ndescription: d\n---\n");
        parse_skill_md(p, dir, "folder", SourceKind::Workspace, &text)
    };
    for good in [
        "pdf-processing",
        "a",
        "1password",
        "demo_echo",
        "nano-banana-pro",
        &"n".repeat(64),
    ] {
        assert_eq!(parse(good).map(|s| s.name).as_deref(), Ok(good), "{good}");
    }
    for bad in [
        "\"Bad Name!!/../x\"",
        "PDF-Processing",
        "-pdf",
        "pdf-",
        "pdf--processing",
        "pdf processing",
        "../escape",
        "über-skill",
        "a.b",
    ] {
        let err = parse(bad).map(|s| s.name).unwrap_err();
        assert!(err.starts_with("bad name"), "{bad}: {err}");
    }
    // Without a `name`, the folder's name must follow the rule.
    let text = "---\ndescription: d\n---\n";
    let err = parse_skill_md(p, dir, "My Skill", SourceKind::Workspace, text).unwrap_err();
    assert!(err.contains("the folder's name"), "{err}");
    assert_eq!(
        parse_skill_md(p, dir, "my-skill", SourceKind::Workspace, text)
            .unwrap()
            .name,
        "my-skill"
    );
}

#[test]
fn metadata_problems_are_diagnostics_not_failures() {
    let p = Path::new("/x/SKILL.md");
    let text = "---\nname: x\ndescription: d\nmetadata: {not json at all\n---\n";
    let skill = parse_skill_md(p, Path::new("/x"), "x", SourceKind::Workspace, text).unwrap();
    assert!(
        skill.diagnostics.iter().any(|d| d.contains("metadata")),
        "{:?}",
        skill.diagnostics
    );
    let text = "---\nname: x\ndescription: d\nmetadata: {\"openclaw\":{\"install\":[{\"kind\":\"brew\",\"formula\":\"-rf\"},{\"kind\":\"pip\"},{\"kind\":\"download\",\"url\":\"ftp://x\"},{\"kind\":\"go\",\"module\":\"github.com/a/b@v1.2.3\"}]}}\n---\n";
    let skill = parse_skill_md(p, Path::new("/x"), "x", SourceKind::Workspace, text).unwrap();
    assert_eq!(skill.install.len(), 1);
    assert_eq!(skill.install[0].kind, "go");
    assert_eq!(skill.install[0].label, "Install github.com/a/b@v1.2.3 (go)");
    assert_eq!(
        skill
            .diagnostics
            .iter()
            .filter(|d| d.starts_with("install option"))
            .count(),
        3,
        "{:?}",
        skill.diagnostics
    );
}

#[test]
fn metadata_block_is_the_first_object_among_known_keys() {
    let p = Path::new("/x/SKILL.md");
    let text = "---\nname: x\ndescription: d\nmetadata: {\"other\":{},\"openclaw\":\"not an object\",\"clawdbot\":{\"requires\":{\"bins\":[\"a\"]}},\"arka\":{\"requires\":{\"bins\":[\"b\"]}}}\n---\n";
    let skill = parse_skill_md(p, Path::new("/x"), "x", SourceKind::Workspace, text).unwrap();
    assert_eq!(skill.requires.bins, vec!["a"]);
}

#[test]
fn install_spec_validation_table() {
    let ok = |v: Value| install_spec(&v, 0).is_ok();
    let cases = [
        (serde_json::json!({"kind": "brew", "formula": "uv"}), true),
        (
            serde_json::json!({"kind": "brew", "cask": "1password-cli"}),
            true,
        ),
        (
            serde_json::json!({"kind": "brew", "formula": "antoniorodr/memo/memo"}),
            true,
        ),
        (
            serde_json::json!({"kind": "brew", "formula": "../evil"}),
            false,
        ),
        (
            serde_json::json!({"kind": "brew", "formula": "a\\b"}),
            false,
        ),
        (
            serde_json::json!({"kind": "node", "package": "@scope/pkg@1.2.3"}),
            true,
        ),
        (
            serde_json::json!({"kind": "node", "package": "https://evil/x.tgz"}),
            false,
        ),
        (
            serde_json::json!({"kind": "node", "package": "--global"}),
            false,
        ),
        (
            serde_json::json!({"kind": "go", "module": "golang.org/x/tools/cmd/goimports@latest"}),
            true,
        ),
        (
            serde_json::json!({"kind": "go", "module": "http://x"}),
            false,
        ),
        (
            serde_json::json!({"kind": "uv", "package": "ruff>=0.5"}),
            true,
        ),
        (serde_json::json!({"kind": "uv", "package": "-e ."}), false),
        (
            serde_json::json!({"kind": "download", "url": "https://x.io/tool.tar.gz"}),
            true,
        ),
        (
            serde_json::json!({"kind": "download", "url": "https://x.io/a b"}),
            false,
        ),
        (
            serde_json::json!({"kind": "download", "url": "https://x.io/t", "sha256": "abc"}),
            false,
        ),
        (serde_json::json!({"type": "BREW", "formula": "jq"}), true),
        (serde_json::json!({"formula": "jq"}), false),
    ];
    for (spec, want) in cases {
        assert_eq!(ok(spec.clone()), want, "{spec}");
    }
}

#[test]
fn manifests_arkas_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skill.json");
    std::fs::write(dir.path().join("run.py"), "print(1)").unwrap();
    let text = r#"{"name":"hello_ok","triggers":["Say Hello","greet the world","say hello"],"requires":{"bins":["sh"],"any_bins":["bash","zsh"]},"os":["linux","darwin"],"permissions":["READ"],"enabled":true,
        "metadata":{"openclaw":{"requires":{"bins":["missing-meta-bin"]},"os":["linux"],"permissions":["read"]},"arka":{"requires":{"env":["X"]}}}}"#;
    let s = parse_manifest(&path, dir.path(), "hello_ok", SourceKind::Extra, text).unwrap();
    assert_eq!(s.triggers, vec!["hello ok", "say hello", "greet the world"]);
    // The metadata block wins for bins; the top level keeps anyBins.
    assert_eq!(s.requires.bins, vec!["missing-meta-bin"]);
    assert_eq!(s.requires.any_bins, vec!["bash", "zsh"]);
    assert!(
        s.requires.env.is_empty(),
        "the arka block is not read when openclaw exists"
    );
    assert_eq!(s.os, vec!["linux"]);
    assert_eq!(s.permissions, vec!["read"]);
    assert_eq!(s.version.as_deref(), Some("0.1.0"));
    assert_eq!(
        s.run,
        Some(RunSpec::Entry {
            entry: dir.path().join("run.py")
        })
    );
    for bad in ["Hello", "h", "1abc", "with space", "x".repeat(50).as_str()] {
        let text = format!("{{\"name\":\"{bad}\"}}");
        let err = parse_manifest(&path, dir.path(), "d", SourceKind::Extra, &text).unwrap_err();
        assert!(err.contains("bad name"), "{bad}: {err}");
    }
    let disabled = parse_manifest(
        &path,
        dir.path(),
        "off_one",
        SourceKind::Extra,
        r#"{"enabled":false}"#,
    )
    .unwrap();
    assert!(disabled.disabled_by_manifest);
    let cmd = parse_manifest(
        &path,
        dir.path(),
        "cmd_one",
        SourceKind::Extra,
        r#"{"type":"command","command":"echo {args}"}"#,
    )
    .unwrap();
    assert_eq!(
        cmd.run,
        Some(RunSpec::Command {
            command: "echo {args}".into()
        })
    );
}

#[test]
fn os_aliases() {
    for (input, want) in [
        ("macos", "darwin"),
        ("Mac", "darwin"),
        ("OSX", "darwin"),
        ("win", "win32"),
        ("Windows", "win32"),
        ("linux", "linux"),
        ("freebsd", "freebsd"),
    ] {
        assert_eq!(normalize_os(input), want, "{input}");
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsing_never_panics(text in "(?s).{0,300}") {
            let _ = parse_skill_md(Path::new("/x/SKILL.md"), Path::new("/x"), "x", SourceKind::Workspace, &text);
            let _ = parse_manifest(Path::new("/x/skill.json"), Path::new("/x"), "x_y", SourceKind::Workspace, &text);
        }

        #[test]
        fn metadata_values_of_any_shape_never_panic(meta in "[\\[\\]{}\",:a-z0-9 ]{0,80}") {
            let text = format!("---\nname: x\ndescription: d\nmetadata: {meta}\n---\n");
            let _ = parse_skill_md(Path::new("/x/SKILL.md"), Path::new("/x"), "x", SourceKind::Workspace, &text);
        }
    }
}
