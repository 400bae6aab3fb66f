//! What the MCP server reads: the skills (`skills_list`, `skill_get`) and
//! its resources, `memory://MEMORY.md`, `memory://daily/{date}` and
//! `skill://{name}`. Memory text passes the read-time injection rule as
//! `memory get` does.

use serde_json::{Value, json};

use super::App;

/// The long-term memory file's resource.
pub(crate) const LONG_TERM_URI: &str = "memory://MEMORY.md";
/// The template of a daily file's resource.
pub(crate) const DAILY_TEMPLATE: &str = "memory://daily/{date}";
/// The template of a skill's resource.
pub(crate) const SKILL_TEMPLATE: &str = "skill://{name}";

/// `skills_list`: name, description, source, whether it can run here and
/// why not.
pub(crate) fn skills_list(app: &App, eligible_only: bool) -> Value {
    let (_, report) = app.skills_report();
    let skills: Vec<Value> = report
        .skills
        .iter()
        .filter(|s| !eligible_only || s.eligibility.eligible)
        .map(|s| {
            json!({
                "name": s.skill.name,
                "description": s.skill.description,
                "source": s.skill.source.label(),
                "eligible": s.eligibility.eligible,
                "reasons": s.eligibility.reasons,
            })
        })
        .collect();
    json!({"skills": skills})
}

/// `skill_get`: the skill's instructions, its SKILL.md without the front
/// matter (a plugin's manifest as it is).
pub(crate) fn skill_get(app: &App, name: &str) -> Result<Value, String> {
    // The bundled skills' files are written out as for a run.
    let (_, report) = app.skills_report_for_running();
    let Some(found) = report.find(name) else {
        return Err(format!("no skill named `{name}` (skills_list lists them)"));
    };
    let path = &found.skill.file_path;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(json!({
        "name": found.skill.name,
        "path": path.display().to_string(),
        "body": without_front_matter(&text),
    }))
}

/// `text` after a leading `---` front-matter block, if it has one.
fn without_front_matter(text: &str) -> String {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text.to_string();
    };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            after.trim_start_matches(['\r', '\n']).to_string()
        }
        None => text.to_string(),
    }
}

/// A resource listed: its URI, name, description and MIME type.
pub(crate) struct Listed {
    pub uri: String,
    pub name: String,
    pub description: String,
}

/// The resources listed: the long-term memory and every skill (daily
/// files through their template).
pub(crate) fn list(app: &App) -> Vec<Listed> {
    let mut out = vec![Listed {
        uri: LONG_TERM_URI.into(),
        name: "MEMORY.md".into(),
        description: "Long-term memory: the facts and preferences kept across days".into(),
    }];
    let (_, report) = app.skills_report();
    out.extend(report.skills.iter().map(|s| Listed {
        uri: format!("skill://{}", s.skill.name),
        name: s.skill.name.clone(),
        description: s.skill.description.clone(),
    }));
    out
}

/// Why a resource cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("no resource at `{0}` (memory://MEMORY.md, memory://daily/YYYY-MM-DD, skill://NAME)")]
    NotFound(String),
    #[error("{0}")]
    Failed(String),
}

/// The text of the resource at `uri`, with its MIME type.
pub(crate) fn read(app: &App, uri: &str) -> Result<(String, &'static str), ReadError> {
    if uri == LONG_TERM_URI {
        return memory_text(app, "MEMORY.md");
    }
    if let Some(date) = uri.strip_prefix("memory://daily/") {
        let day: jiff::civil::Date = date.parse().map_err(|_| ReadError::NotFound(uri.into()))?;
        let path = format!("memory/{day}.md");
        if !app.memory().root.join(&path).is_file() {
            return Err(ReadError::NotFound(uri.into()));
        }
        return memory_text(app, &path);
    }
    if let Some(name) = uri.strip_prefix("skill://") {
        let found = skill_get(app, name).map_err(|_| ReadError::NotFound(uri.into()))?;
        let body = found["body"].as_str().unwrap_or_default().to_string();
        return Ok((body, "text/markdown"));
    }
    Err(ReadError::NotFound(uri.into()))
}

fn memory_text(app: &App, path: &str) -> Result<(String, &'static str), ReadError> {
    let got = super::memory::get(app, path, None, None)
        .map_err(|e| ReadError::Failed(format!("{e:#}")))?;
    Ok((got.text, "text/markdown"))
}

#[cfg(test)]
mod tests {
    use super::without_front_matter;

    #[test]
    fn the_body_of_a_skill_leaves_its_front_matter_out() {
        let text = "---\nname: x\ndescription: y\n---\n\n# Steps\n1. do\n";
        assert_eq!(without_front_matter(text), "# Steps\n1. do\n");
        assert_eq!(
            without_front_matter("# No front matter\n"),
            "# No front matter\n"
        );
    }
}
