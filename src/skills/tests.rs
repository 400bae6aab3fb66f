//! Discovery, precedence and gating together.

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

    fn root(&self, source: SourceKind) -> PathBuf {
        self.dir.path().join(source.short())
    }

    fn skill_md(&self, source: SourceKind, folder: &str, frontmatter: &str) -> PathBuf {
        let dir = self.root(source).join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("SKILL.md");
        std::fs::write(&path, format!("---\n{frontmatter}\n---\nBody\n")).unwrap();
        path
    }

    fn inputs(
        &self,
        config_text: &str,
        env: &[(&str, &str)],
        permissions: Option<&str>,
    ) -> SkillsInputs {
        let config_path = self.dir.path().join("config.json5");
        std::fs::write(&config_path, config_text).unwrap();
        let host = Host::with_vars(
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
            self.dir.path(),
            self.dir.path(),
            "2026-11-29T09:00:00+00:00[UTC]".parse().unwrap(),
        );
        let config: LoadedConfig = config::load(&config_path, &host, &[]).unwrap();
        SkillsInputs {
            roots: SourceKind::ALL
                .iter()
                .map(|s| discover::Root {
                    source: *s,
                    dir: self.root(*s),
                })
                .collect(),
            config,
            env: host.vars().clone(),
            permissions_override: permissions.map(str::to_string),
            allow_symlink_targets: vec![],
            homes: vec![self.dir.path().to_path_buf()],
            workspace_dir: self.root(SourceKind::Workspace),
            managed_dir: self.root(SourceKind::Managed),
            embedded_bundled: None,
        }
    }
}

fn names(r: &SkillsReport) -> Vec<(String, &'static str)> {
    r.skills
        .iter()
        .map(|s| (s.skill.name.clone(), s.skill.source.short()))
        .collect()
}

#[test]
fn higher_sources_replace_lower_ones_whole_and_record_it() {
    let s = Setup::new();
    let low = s.skill_md(SourceKind::Extra, "deploy", "name: deploy\ndescription: from extra\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"nope-bin\"]}}}");
    s.skill_md(
        SourceKind::Bundled,
        "deploy",
        "name: deploy\ndescription: from bundled",
    );
    s.skill_md(
        SourceKind::Workspace,
        "deploy-ws",
        "name: deploy\ndescription: from workspace",
    );
    s.skill_md(
        SourceKind::Personal,
        "only-personal",
        "name: solo\ndescription: personal",
    );
    let r = report(&s.inputs("{}", &[("PATH", "/usr/bin:/bin")], None));
    assert_eq!(
        names(&r),
        vec![
            ("deploy".to_string(), "workspace"),
            ("solo".to_string(), "personal")
        ]
    );
    let deploy = &r.skills[0];
    assert_eq!(deploy.skill.description, "from workspace");
    assert!(
        deploy.eligibility.eligible,
        "the replacement is whole: no requirement carried over"
    );
    assert_eq!(deploy.skill.shadows.len(), 2);
    assert_eq!(deploy.skill.shadows[0], low);
}

#[test]
fn every_gate_reason_is_reported() {
    let s = Setup::new();
    s.skill_md(
        SourceKind::Workspace,
        "many-gates",
        "name: many\ndescription: d\nmetadata: {\"openclaw\":{\"os\":[\"macos\"],\"requires\":{\"bins\":[\"nope-a\",\"sh\"],\"anyBins\":[\"nope-b\",\"nope-c\"],\"env\":[\"NEED_ME\"],\"config\":[\"feature.flag\"],\"env_any\":[\"A1\",\"A2\"],\"checks\":[\"tts\",\"telepathy\"]},\"permissions\":[\"admin\",\"read\"]}}",
    );
    let r = report(&s.inputs("{}", &[("PATH", "/usr/bin:/bin")], None));
    let e = &r.skills[0].eligibility;
    assert!(!e.eligible);
    assert_eq!(e.missing.os, vec!["darwin"]);
    assert_eq!(e.missing.bins, vec!["nope-a"]);
    assert_eq!(e.missing.any_bins, vec!["nope-b", "nope-c"]);
    assert_eq!(e.missing.env, vec!["NEED_ME"]);
    assert_eq!(e.missing.config, vec!["feature.flag"]);
    assert_eq!(e.missing_env_any, vec!["A1", "A2"]);
    assert_eq!(e.denied_permissions, vec!["admin"]);
    // A known check is unmet (no speech provider); an unknown one is
    // ignored, as Arka does, with a diagnostic.
    assert_eq!(e.unsupported_checks, vec!["tts"]);
    assert!(
        e.reasons
            .contains(&"missing check: text-to-speech provider".to_string()),
        "{:?}",
        e.reasons
    );
    assert!(
        r.skills[0]
            .skill
            .diagnostics
            .iter()
            .any(|d| d.contains("unknown check `telepathy`"))
    );
    assert_eq!(e.reasons.len(), 8, "{:?}", e.reasons);
}

#[test]
fn env_requirements_are_met_by_the_process_entries_or_api_key() {
    let s = Setup::new();
    s.skill_md(SourceKind::Workspace, "a", "name: by-process\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"env\":[\"TOK\"]}}}");
    s.skill_md(SourceKind::Workspace, "b", "name: by-entry\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"env\":[\"ENTRY_TOK\"]}}}");
    s.skill_md(SourceKind::Workspace, "c", "name: by-key\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"env\":[\"GEMINI_API_KEY\"]},\"primaryEnv\":\"GEMINI_API_KEY\"}}");
    s.skill_md(SourceKind::Workspace, "d", "name: key-wrong-var\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"env\":[\"OTHER\"]},\"primaryEnv\":\"GEMINI_API_KEY\"}}");
    let config = "{ skills: { entries: { 'by-entry': { env: { ENTRY_TOK: 'x' } }, 'by-key': { apiKey: 'k' }, 'key-wrong-var': { apiKey: 'k' } } } }";
    let r = report(&s.inputs(config, &[("TOK", "1")], None));
    let eligible: Vec<(String, bool)> = r
        .skills
        .iter()
        .map(|s| (s.skill.name.clone(), s.eligibility.eligible))
        .collect();
    assert_eq!(
        eligible,
        vec![
            ("by-entry".into(), true),
            ("by-key".into(), true),
            ("by-process".into(), true),
            ("key-wrong-var".into(), false)
        ]
    );
    // A change of environment is seen at once (nothing is cached).
    let r = report(&s.inputs(config, &[], None));
    assert!(!r.find("by-process").unwrap().eligibility.eligible);
}

#[test]
fn disabled_allow_bundled_always_and_permissions() {
    let s = Setup::new();
    s.skill_md(SourceKind::Bundled, "b1", "name: b-allowed\ndescription: d");
    s.skill_md(SourceKind::Bundled, "b2", "name: b-blocked\ndescription: d");
    s.skill_md(SourceKind::Workspace, "off", "name: off\ndescription: d");
    s.skill_md(SourceKind::Workspace, "always", "name: always-on\ndescription: d\nmetadata: {\"openclaw\":{\"always\":true,\"requires\":{\"bins\":[\"nope\"]}}}");
    s.skill_md(SourceKind::Workspace, "always-os", "name: always-wrong-os\ndescription: d\nmetadata: {\"openclaw\":{\"always\":true,\"os\":[\"win\"]}}");
    s.skill_md(
        SourceKind::Workspace,
        "perm",
        "name: needs-shell\ndescription: d\npermissions: [shell]",
    );
    let config =
        "{ skills: { allowBundled: ['b-allowed'], entries: { off: { enabled: false } } } }";
    let r = report(&s.inputs(config, &[], None));
    let st = |n: &str| r.find(n).unwrap().eligibility.clone();
    assert!(st("b-allowed").eligible);
    assert!(st("b-blocked").blocked_by_allowlist && !st("b-blocked").eligible);
    assert!(st("off").disabled && !st("off").eligible);
    assert!(st("always-on").eligible, "always skips requirements");
    assert!(
        !st("always-wrong-os").eligible,
        "always does not override os"
    );
    assert!(st("needs-shell").eligible, "shell is allowed by default");
    // An empty SKILL_PERMISSIONS allows nothing.
    let r = report(&s.inputs(config, &[], Some("")));
    assert_eq!(
        r.find("needs-shell")
            .unwrap()
            .eligibility
            .denied_permissions,
        vec!["shell"]
    );
    let r = report(&s.inputs(config, &[], Some("read, SHELL ")));
    assert!(r.find("needs-shell").unwrap().eligibility.eligible);
}

#[test]
fn broken_files_are_reported_never_dropped_silently() {
    let s = Setup::new();
    s.skill_md(SourceKind::Workspace, "no-desc", "name: no-desc");
    let dir = s.root(SourceKind::Workspace).join("unclosed");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: unclosed\ndescription: d\n",
    )
    .unwrap();
    let big = s.root(SourceKind::Workspace).join("big");
    std::fs::create_dir_all(&big).unwrap();
    std::fs::write(
        big.join("SKILL.md"),
        format!(
            "---\nname: big\ndescription: d\n---\n{}",
            "x".repeat(260_000)
        ),
    )
    .unwrap();
    let outside = s.dir.path().join("outside/escaper");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        outside.join("SKILL.md"),
        "---\nname: escaper\ndescription: d\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, s.root(SourceKind::Workspace).join("escaper")).unwrap();
    let plugin = s.root(SourceKind::Workspace).join("Bad Plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(plugin.join("skill.json"), "{}").unwrap();
    s.skill_md(
        SourceKind::Workspace,
        "bad-name",
        "name: \"Bad Name!!/../x\"\ndescription: d",
    );
    let r = report(&s.inputs("{}", &[], None));
    assert!(r.skills.is_empty(), "{:?}", names(&r));
    let mut reasons: Vec<(String, String)> = r
        .failures
        .iter()
        .map(|f| (f.name.clone(), f.reason.clone()))
        .collect();
    reasons.sort();
    let find = |n: &str| {
        reasons
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{n} not reported"))
    };
    assert!(find("no-desc").contains("no description"));
    assert!(find("unclosed").contains("no closing"));
    assert!(find("big").contains("oversized"));
    assert!(find("escaper").contains("reason=symlink-escape"));
    assert!(find("Bad Plugin").contains("bad name"));
    assert!(
        find("bad-name").starts_with("bad name \"Bad Name!!/../x\""),
        "{}",
        find("bad-name")
    );
}

#[test]
fn symlinks_are_fine_inside_the_root_or_an_allowed_target() {
    let s = Setup::new();
    let target = s.skill_md(SourceKind::Workspace, "real", "name: real\ndescription: d");
    std::os::unix::fs::symlink(
        target.parent().unwrap(),
        s.root(SourceKind::Workspace).join("alias"),
    )
    .unwrap();
    let outside = s.dir.path().join("shared/tool");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        outside.join("SKILL.md"),
        "---\nname: shared-tool\ndescription: d\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, s.root(SourceKind::Workspace).join("shared-tool"))
        .unwrap();
    let mut inputs = s.inputs("{}", &[], None);
    inputs.allow_symlink_targets =
        vec![std::fs::canonicalize(s.dir.path().join("shared")).unwrap()];
    let r = report(&inputs);
    assert!(r.find("shared-tool").is_some(), "{:?}", r.failures);
    assert!(r.find("real").is_some());
    // The managed source follows symlinked folders anywhere.
    let managed_target = s.dir.path().join("elsewhere/m");
    std::fs::create_dir_all(&managed_target).unwrap();
    std::fs::write(
        managed_target.join("SKILL.md"),
        "---\nname: managed-link\ndescription: d\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(s.root(SourceKind::Managed)).unwrap();
    std::os::unix::fs::symlink(&managed_target, s.root(SourceKind::Managed).join("m")).unwrap();
    assert!(
        report(&s.inputs("{}", &[], None))
            .find("managed-link")
            .is_some()
    );
}

#[test]
fn skill_files_may_link_within_their_folder_but_not_out_of_it() {
    let s = Setup::new();
    // The root itself reached through a symlink: its skills are inside it.
    let real_root = s.dir.path().join("real-workspace-skills");
    std::fs::create_dir_all(real_root.join("plain")).unwrap();
    std::fs::write(
        real_root.join("plain/SKILL.md"),
        "---\nname: plain\ndescription: d\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(real_root.join("linked-file")).unwrap();
    std::fs::write(
        real_root.join("linked-file/real.md"),
        "---\nname: linked-file\ndescription: d\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("real.md", real_root.join("linked-file/SKILL.md")).unwrap();
    let secret = s.dir.path().join("secret.md");
    std::fs::write(&secret, "---\nname: leaked\ndescription: d\n---\n").unwrap();
    std::fs::create_dir_all(real_root.join("leaky")).unwrap();
    std::os::unix::fs::symlink(&secret, real_root.join("leaky/SKILL.md")).unwrap();
    std::fs::create_dir_all(real_root.join("dangling")).unwrap();
    std::os::unix::fs::symlink("missing.md", real_root.join("dangling/SKILL.md")).unwrap();
    let root = s.root(SourceKind::Workspace);
    std::fs::create_dir_all(root.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real_root, &root).unwrap();

    let r = report(&s.inputs("{}", &[], None));
    let loaded: Vec<&str> = r.skills.iter().map(|s| s.skill.name.as_str()).collect();
    assert_eq!(loaded, vec!["linked-file", "plain"], "{:?}", r.failures);
    let failures: Vec<(&str, &str)> = r
        .failures
        .iter()
        .map(|f| (f.name.as_str(), f.reason.as_str()))
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert_eq!(failures[0].0, "dangling");
    assert!(
        failures[0].1.starts_with("cannot read"),
        "{}",
        failures[0].1
    );
    assert_eq!(failures[1].0, "leaky");
    assert!(
        failures[1].1.contains("symlink leaving its skill folder"),
        "{}",
        failures[1].1
    );
}

#[test]
fn nested_roots_groups_and_limits() {
    let s = Setup::new();
    // A root holding its skills under `skills/`.
    let nested = s.root(SourceKind::Extra).join("skills/inner");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(
        nested.join("SKILL.md"),
        "---\nname: inner\ndescription: d\n---\n",
    )
    .unwrap();
    // A group folder one level down.
    let grouped = s.root(SourceKind::Workspace).join("group/member");
    std::fs::create_dir_all(&grouped).unwrap();
    std::fs::write(
        grouped.join("SKILL.md"),
        "---\nname: member\ndescription: d\n---\n",
    )
    .unwrap();
    for i in 0..5 {
        s.skill_md(
            SourceKind::Project,
            &format!("p{i}"),
            &format!("name: p{i}\ndescription: d"),
        );
    }
    let config = "{ skills: { limits: { maxCandidatesPerRoot: 3, maxSkillsLoadedPerSource: 2 } } }";
    let r = report(&s.inputs(config, &[], None));
    let got: Vec<String> = r.skills.iter().map(|s| s.skill.name.clone()).collect();
    assert_eq!(got, vec!["inner", "member", "p0", "p1"]);
    assert!(
        r.warnings.iter().any(|w| w.contains("many entries")),
        "{:?}",
        r.warnings
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("maxSkillsLoadedPerSource")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn trigger_conflicts_go_to_the_higher_source_with_a_warning() {
    let s = Setup::new();
    for (source, name) in [
        (SourceKind::Extra, "low_one"),
        (SourceKind::Workspace, "high_one"),
    ] {
        let dir = s.root(source).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("skill.json"), r#"{"triggers":["shared trigger"]}"#).unwrap();
    }
    let r = report(&s.inputs("{}", &[], None));
    assert_eq!(r.conflicts.len(), 1);
    assert_eq!(r.conflicts[0].winner, "high_one");
    assert!(r.warnings.iter().any(|w| w.contains("shared trigger")));
    let usable = r.usable();
    assert_eq!(
        route::route("shared trigger now", &usable).unwrap().skill,
        "high_one"
    );
    assert_eq!(
        route::route("low_one do it", &usable).unwrap().line,
        "low_one do it"
    );
}

#[test]
fn catalog_leaves_out_hidden_and_ineligible_skills_and_honours_the_agent_allowlist() {
    let s = Setup::new();
    s.skill_md(SourceKind::Workspace, "a", "name: a\ndescription: visible");
    s.skill_md(
        SourceKind::Workspace,
        "b",
        "name: b\ndescription: hidden\ndisable-model-invocation: true",
    );
    s.skill_md(SourceKind::Workspace, "c", "name: c\ndescription: gated\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"nope\"]}}}");
    s.skill_md(
        SourceKind::Workspace,
        "d",
        "name: d\ndescription: not allowed for the agent",
    );
    let inputs = s.inputs(
        "{ agents: { defaults: { skills: ['a', 'b', 'c'] } } }",
        &[],
        None,
    );
    let r = report(&inputs);
    let cat = catalog(&r, &inputs);
    assert_eq!(cat.included, 1);
    assert!(cat.prompt.contains("<name>a</name>"));
    for hidden in ["<name>b</name>", "<name>c</name>", "<name>d</name>"] {
        assert!(!cat.prompt.contains(hidden));
    }
    assert!(
        cat.prompt
            .contains("<location>~/workspace/a/SKILL.md</location>"),
        "{}",
        cat.prompt
    );
}

/// Sets every file and folder under `dir` an hour into the past, as an
/// existing skill set is: changes made after that are seen by their times.
fn backdate(dir: &std::path::Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(past)
            .unwrap();
    }
}

fn wall_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

/// What the tests derive from a report: each skill's name, eligibility and
/// description.
fn summary(report: &SkillsReport) -> Vec<(String, bool, String)> {
    report
        .skills
        .iter()
        .map(|s| {
            (
                s.skill.name.clone(),
                s.eligibility.eligible,
                s.skill.description.clone(),
            )
        })
        .collect()
}

#[test]
fn the_stored_snapshot_is_used_only_while_nothing_it_came_from_changed() {
    type Change = fn(&Setup, &std::path::Path);
    let bin_dir = |s: &Setup| s.dir.path().join("bin");
    let cases: Vec<(&str, Change, &str, bool)> = vec![
        ("nothing", |_, _| {}, "{}", true),
        (
            "a skill file edited",
            |s, _| {
                s.skill_md(
                    SourceKind::Workspace,
                    "a",
                    "name: a\ndescription: edited text",
                );
            },
            "{}",
            false,
        ),
        (
            "a new skill folder",
            |s, _| {
                s.skill_md(SourceKind::Managed, "new", "name: new\ndescription: added");
            },
            "{}",
            false,
        ),
        (
            "SKILL.md added to a folder that had none",
            |s, _| {
                s.skill_md(
                    SourceKind::Workspace,
                    "empty",
                    "name: empty\ndescription: now a skill",
                );
            },
            "{}",
            false,
        ),
        (
            "a skill removed",
            |s, _| std::fs::remove_dir_all(s.root(SourceKind::Workspace).join("a")).unwrap(),
            "{}",
            false,
        ),
        (
            "a required binary installed",
            |s, _| {
                let tool = s.dir.path().join("bin/mytool");
                std::fs::write(&tool, "#!/bin/sh\n").unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
            },
            "{}",
            false,
        ),
        (
            "the config changed",
            |_, _| {},
            "{skills: {entries: {a: {enabled: false}}}}",
            false,
        ),
        (
            "the cache file is corrupt",
            |_, cache| std::fs::write(cache, "{not json").unwrap(),
            "{}",
            false,
        ),
    ];
    for (what, change, config_after, stays_cached) in cases {
        let s = Setup::new();
        s.skill_md(
            SourceKind::Workspace,
            "a",
            "name: a\ndescription: first text",
        );
        std::fs::create_dir_all(s.root(SourceKind::Workspace).join("empty")).unwrap();
        s.skill_md(SourceKind::Workspace, "b", "name: tooled\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"mytool\"]}}}");
        std::fs::create_dir_all(bin_dir(&s)).unwrap();
        let path = bin_dir(&s).to_string_lossy().into_owned();
        let inputs = s.inputs("{}", &[("PATH", &path)], None);
        backdate(s.dir.path());
        let cache = s.dir.path().join("state/cache/skills.json");
        let (first, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
        assert_eq!(origin, stored::Origin::Built, "{what}");
        let (again, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
        assert_eq!(
            (origin, &again),
            (stored::Origin::Cached, &first),
            "{what}: unchanged"
        );

        change(&s, &cache);
        let inputs = if config_after == "{}" {
            inputs
        } else {
            s.inputs(config_after, &[("PATH", &path)], None)
        };
        let (after, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
        let fresh = summary(&report(&inputs));
        assert_eq!(after, fresh, "{what}: the value is the current one");
        let want = if stays_cached {
            stored::Origin::Cached
        } else {
            stored::Origin::Built
        };
        assert_eq!(origin, want, "{what}");
    }
}

#[test]
fn an_environment_value_a_gate_reads_invalidates_the_stored_snapshot() {
    let s = Setup::new();
    s.skill_md(SourceKind::Workspace, "e", "name: env-gated\ndescription: d\nmetadata: {\"openclaw\":{\"requires\":{\"env\":[\"NEED\"]}}}");
    let inputs = s.inputs("{}", &[], None);
    backdate(s.dir.path());
    let cache = s.dir.path().join("cache.json");
    let (before, _) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
    assert!(!before[0].1);
    let mut with_var = inputs.clone();
    with_var.env.insert("NEED".into(), "yes".into());
    let (after, origin) = stored::load_or_build(&cache, &with_var, wall_ns(), true, summary);
    assert_eq!(origin, stored::Origin::Built);
    assert!(after[0].1, "the gate sees the variable");
    // An unrelated variable changes nothing.
    with_var.env.insert("UNRELATED".into(), "x".into());
    let (_, origin) = stored::load_or_build(&cache, &with_var, wall_ns(), true, summary);
    assert_eq!(origin, stored::Origin::Cached);
}

#[test]
fn a_snapshot_of_files_changed_moments_ago_is_not_kept() {
    let s = Setup::new();
    s.skill_md(
        SourceKind::Workspace,
        "a",
        "name: a\ndescription: just written",
    );
    let inputs = s.inputs("{}", &[], None);
    let cache = s.dir.path().join("cache.json");
    // The skill was written now: a change within the same clock tick could
    // go unseen, so nothing is stored.
    let (_, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
    assert_eq!(origin, stored::Origin::Built);
    assert!(!cache.exists());
    let (_, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
    assert_eq!(origin, stored::Origin::Built);
}

#[test]
fn a_snapshot_that_is_not_kept_is_read_but_never_written() {
    let s = Setup::new();
    s.skill_md(SourceKind::Workspace, "a", "name: a\ndescription: d");
    let inputs = s.inputs("{}", &[], None);
    backdate(s.dir.path());
    let cache = s.dir.path().join("state/cache/skills.json");
    let (_, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), false, summary);
    assert_eq!(origin, stored::Origin::Built);
    assert!(!s.dir.path().join("state").exists(), "nothing written");
    // What a turn keeps, a reader uses.
    stored::load_or_build(&cache, &inputs, wall_ns(), true, summary);
    let (_, origin) = stored::load_or_build(&cache, &inputs, wall_ns(), false, summary);
    assert_eq!(origin, stored::Origin::Cached);
}
