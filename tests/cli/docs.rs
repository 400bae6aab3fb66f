//! The documentation holds together: every page opens with its title,
//! every link between the README and the pages reaches a file and a
//! heading, and the gateway's page lists the components a running
//! gateway reports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::Sandbox;
use crate::gateway::Gateway;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("a docs folder");
    let mut docs: Vec<PathBuf> = docs
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of a page outside its fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// A heading's anchor as GitHub makes it: lower case, punctuation
/// dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// The targets of the Markdown links of a line: `[text](target)`.
fn links(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(i, _)| line[i + 2..].split_once(')').map(|(t, _)| t))
        .collect()
}

#[test]
fn every_page_opens_with_its_title_and_every_link_reaches_a_heading() {
    let pages = pages();
    assert!(pages.len() > 2, "{pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        assert!(text.starts_with("# "), "{name} opens with `# Title`");
        for line in prose(&text) {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
                let file = if file.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(file)
                };
                if !file.exists() {
                    broken.push(format!("{name}: {target}: no such file"));
                } else if !fragment.is_empty() {
                    let linked = std::fs::read_to_string(&file).unwrap_or_default();
                    if !anchors(&linked).contains(fragment) {
                        broken.push(format!("{name}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_gateway_page_lists_the_components_a_running_gateway_reports() {
    let page = include_str!("../../docs/gateway.md");
    let section = page
        .split_once("\n## Components\n")
        .expect("docs/gateway.md has a `## Components` section")
        .1;
    let section = section.split("\n## ").next().unwrap();
    let documented: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("* `")?.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect();
    let sb = Sandbox::new();
    let _gw = Gateway::start(&sb, &[]);
    let status = sb.run(&["gateway", "status", "--json"]).ok().json();
    let running: BTreeSet<String> = status["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!running.is_empty(), "{status}");
    assert_eq!(documented, running, "docs/gateway.md, ## Components");
}
