use super::*;

/// Compares with a pinned snapshot file; `UPDATE_SNAPSHOTS=1` rewrites it.
fn assert_snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/skills/catalog/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing snapshot {}", path.display()));
    assert_eq!(
        actual, expected,
        "snapshot {name} differs (UPDATE_SNAPSHOTS=1 to accept)"
    );
}

fn skill(name: &str, description: &str, location: &str) -> CatalogSkill {
    CatalogSkill {
        name: name.to_string(),
        description: description.to_string(),
        location: PathBuf::from(location),
    }
}

fn homes() -> Vec<PathBuf> {
    vec![PathBuf::from("/home/u")]
}

fn many(n: usize, description_len: usize) -> Vec<CatalogSkill> {
    (0..n)
        .map(|i| {
            skill(
                &format!("skill-{i:04}"),
                &"d".repeat(description_len),
                &format!("/home/u/.almanac/workspace/skills/skill-{i:04}/SKILL.md"),
            )
        })
        .collect()
}

#[test]
fn fixed_and_per_skill_sizes_match_the_documented_formula() {
    let empty_full = render(&[], Format::Full);
    assert_eq!(empty_full.chars().count(), 368);
    assert_eq!(render(&[], Format::Compact).chars().count(), 361);
    let one = [skill("ab", "cde", "/f")];
    assert_eq!(
        render(&one, Format::Full).chars().count(),
        368 + 97 + 2 + 3 + 2
    );
    assert_eq!(
        render(&one, Format::Compact).chars().count(),
        361 + 65 + 2 + 2
    );
}

#[test]
fn full_format_snapshot() {
    let skills = [
        skill(
            "image-lab",
            "Generate or edit images <fast> & \"cheap\"",
            "/home/u/.almanac/workspace/skills/image-lab/SKILL.md",
        ),
        skill("weather", "Get the weather", "/opt/skills/weather/SKILL.md"),
    ];
    let c = build(&skills, 150, 30_000, &homes());
    assert_eq!(c.format, Format::Full);
    assert!(!c.truncated);
    assert_snapshot("full.txt", &c.prompt);
}

#[test]
fn compact_format_snapshot() {
    let skills = [
        skill(
            "image-lab",
            &"x".repeat(400),
            "/home/u/s/image-lab/SKILL.md",
        ),
        skill("weather", &"y".repeat(400), "/home/u/s/weather/SKILL.md"),
    ];
    // Full needs 368 + 2*97 + names, descriptions, locations > 1200.
    let c = build(&skills, 150, 1200, &homes());
    assert_eq!(c.format, Format::Compact);
    assert!(!c.truncated);
    assert_snapshot("compact.txt", &c.prompt);
}

#[test]
fn truncated_snapshot() {
    let skills = many(5, 50);
    let c = build(&skills, 150, 850, &homes());
    assert_eq!(
        (c.format, c.truncated, c.included, c.visible),
        (Format::Compact, true, 2, 5)
    );
    assert_eq!(c.dropped, vec!["skill-0002", "skill-0003", "skill-0004"]);
    assert_snapshot("truncated.txt", &c.prompt);
}

#[test]
fn five_hundred_skills_take_the_compact_and_truncated_paths_within_budget() {
    let skills = many(500, 120);
    let c = build(&skills, 500, 30_000, &homes());
    assert_eq!(c.format, Format::Compact);
    assert!(c.truncated);
    assert!(c.included > 0 && c.included < 500);
    assert!(c.chars <= 30_000, "{} > budget", c.chars);
    // The prefix is the largest that fits.
    let next = render(&skills_at_home(&skills[..=c.included]), Format::Compact)
        .chars()
        .count();
    assert!(next > 30_000 - NOTE_RESERVE);
    // With the default count limit (150) only the count cut applies when
    // compact fits.
    let c = build(&skills, 150, 30_000, &homes());
    assert!(c.truncated && c.chars <= 30_000);
    assert!(
        c.prompt.starts_with("⚠️ Skills truncated: included "),
        "{}",
        &c.prompt[..80]
    );
}

fn skills_at_home(skills: &[CatalogSkill]) -> Vec<CatalogSkill> {
    skills
        .iter()
        .map(|s| CatalogSkill {
            location: PathBuf::from(compact_home(&s.location, &homes())),
            ..s.clone()
        })
        .collect()
}

#[test]
fn budget_is_never_exceeded_for_any_size() {
    for n in [0, 1, 3, 40, 151, 320] {
        for budget in [200, 600, 1_000, 5_000, 30_000] {
            let c = build(&many(n, 80), 150, budget, &homes());
            assert!(c.chars <= budget, "n={n} budget={budget}: {}", c.chars);
            assert_eq!(c.included + c.dropped.len(), n);
        }
    }
}

#[test]
fn home_compaction_prefers_the_longest_home() {
    let homes = vec![PathBuf::from("/home/u"), PathBuf::from("/home/u/real")];
    assert_eq!(
        compact_home(Path::new("/home/u/real/x/SKILL.md"), &homes),
        "~/x/SKILL.md"
    );
    assert_eq!(
        compact_home(Path::new("/home/u/y/SKILL.md"), &homes),
        "~/y/SKILL.md"
    );
    assert_eq!(
        compact_home(Path::new("/home/user2/z"), &homes),
        "/home/user2/z"
    );
}

#[test]
fn escaping() {
    assert_eq!(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
}
