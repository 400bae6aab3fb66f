//! The skills catalog offered to the model (`<available_skills>`), within a
//! character budget.
//!
//! Formats (OpenClaw's, byte for byte): *full* lists name, description and
//! location; *compact* lists name and location. Steps:
//! 1. the visible skills (eligible, not `disable-model-invocation`, allowed
//!    for the agent), sorted by name, cut to `maxSkillsInPrompt`;
//! 2. full format if it fits;
//! 3. else compact format if it fits the budget less 150 characters kept
//!    for the warning line;
//! 4. else the longest prefix of the compact list that fits, found by
//!    binary search, with an "included X of Y" warning.
//!
//! The whole block (warning line included) never exceeds the budget.
//! Locations under the home directory are shown as `~/…`.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Characters kept for the warning line when the catalog is cut.
pub(crate) const NOTE_RESERVE: usize = 150;

const HEADER_FULL: &str = "The following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nWhen a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.";
const HEADER_COMPACT: &str = "The following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its name.\nWhen a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.";

/// One skill as the catalog shows it.
#[derive(Debug, Clone)]
pub(crate) struct CatalogSkill {
    pub name: String,
    pub description: String,
    pub location: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Format {
    Full,
    Compact,
}

/// The catalog block and how it was made.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Catalog {
    /// What the model gets (warning line, then the catalog); empty when no
    /// skill is visible.
    pub prompt: String,
    pub format: Format,
    pub included: usize,
    /// Visible skills before any cut.
    pub visible: usize,
    pub truncated: bool,
    /// Names of visible skills left out.
    pub dropped: Vec<String>,
    pub budget: usize,
    pub chars: usize,
}

/// Builds the catalog of `skills` (already filtered to the visible ones and
/// sorted by name).
pub(crate) fn build(
    skills: &[CatalogSkill],
    max_skills: usize,
    budget: usize,
    homes: &[PathBuf],
) -> Catalog {
    let visible = skills.len();
    let by_count = &skills[..skills.len().min(max_skills)];
    let count_cut = visible > by_count.len();
    let shown: Vec<CatalogSkill> = by_count
        .iter()
        .map(|s| CatalogSkill {
            location: PathBuf::from(compact_home(&s.location, homes)),
            ..s.clone()
        })
        .collect();
    let finish = |format: Format, included: usize, catalog: String, truncated: bool| {
        let note = if truncated {
            let suffix = if format == Format::Compact {
                " (compact format, descriptions omitted)"
            } else {
                ""
            };
            format!(
                "⚠️ Skills truncated: included {included} of {visible}{suffix}. Run `almanac skills check` to audit."
            )
        } else if format == Format::Compact {
            "⚠️ Skills catalog using compact format (descriptions omitted). Run `almanac skills check` to audit.".to_string()
        } else {
            String::new()
        };
        let prompt = [note, catalog]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        Catalog {
            chars: prompt.chars().count(),
            prompt,
            format,
            included,
            visible,
            truncated,
            dropped: skills[included..].iter().map(|s| s.name.clone()).collect(),
            budget,
        }
    };
    if shown.is_empty() {
        return finish(Format::Full, 0, String::new(), count_cut);
    }
    let full = render(&shown, Format::Full);
    let full_budget = if count_cut {
        budget.saturating_sub(NOTE_RESERVE)
    } else {
        budget
    };
    if full.chars().count() <= full_budget {
        return finish(Format::Full, shown.len(), full, count_cut);
    }
    let limit = budget.saturating_sub(NOTE_RESERVE);
    let compact = render(&shown, Format::Compact);
    if compact.chars().count() <= limit {
        return finish(Format::Compact, shown.len(), compact, count_cut);
    }
    // The longest prefix that fits.
    let (mut lo, mut hi) = (0usize, shown.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if render(&shown[..mid], Format::Compact).chars().count() <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let catalog = if lo == 0 {
        String::new()
    } else {
        render(&shown[..lo], Format::Compact)
    };
    finish(Format::Compact, lo, catalog, true)
}

/// The catalog text for `skills` in `format`.
pub(crate) fn render(skills: &[CatalogSkill], format: Format) -> String {
    let mut lines: Vec<String> = vec![String::new(), String::new()];
    lines.push(match format {
        Format::Full => HEADER_FULL.to_string(),
        Format::Compact => HEADER_COMPACT.to_string(),
    });
    lines.push(String::new());
    lines.push("<available_skills>".to_string());
    for s in skills {
        lines.push("  <skill>".to_string());
        lines.push(format!("    <name>{}</name>", xml_escape(&s.name)));
        if format == Format::Full {
            lines.push(format!(
                "    <description>{}</description>",
                xml_escape(&s.description)
            ));
        }
        lines.push(format!(
            "    <location>{}</location>",
            xml_escape(&s.location.to_string_lossy())
        ));
        lines.push("  </skill>".to_string());
    }
    lines.push("</available_skills>".to_string());
    lines.join("\n")
}

pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            other => out.push(other),
        }
    }
    out
}

/// `path` with the longest matching home directory shown as `~`.
pub(crate) fn compact_home(path: &Path, homes: &[PathBuf]) -> String {
    let mut homes: Vec<&PathBuf> = homes.iter().collect();
    homes.sort_by_key(|h| std::cmp::Reverse(h.as_os_str().len()));
    for home in homes {
        if let Ok(rest) = path.strip_prefix(home)
            && !rest.as_os_str().is_empty()
        {
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests;
