//! Typed facts in `## Retain` sections of daily notes.
//!
//! One list item per fact:
//!
//! ```text
//! - W @Peter: Currently in Marrakech (Nov 27–Dec 1, 2025) for Andy's birthday.
//! - O(c=0.95) @Peter: Prefers concise replies on WhatsApp.
//! - B @warelay: Fixed the Baileys WS crash (see memory/2025-11-27.md).
//! - S: The week was mostly release work.
//! ```
//!
//! `W` is a world fact, `B` an experience (first person), `O` an opinion
//! with an optional confidence in [0, 1], `S` an observation or summary.
//! Zero or more `@Entity` tags follow, then `:` and the fact. An item that
//! does not follow the format is not a fact; the reason says why, so the
//! caller can report it without dropping the note.

/// The kind of a retained fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKind {
    World,
    Experience,
    Opinion,
    Observation,
}

impl FactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::World => "world",
            FactKind::Experience => "experience",
            FactKind::Opinion => "opinion",
            FactKind::Observation => "observation",
        }
    }

    pub fn parse(text: &str) -> Option<FactKind> {
        match text {
            "world" => Some(FactKind::World),
            "experience" => Some(FactKind::Experience),
            "opinion" => Some(FactKind::Opinion),
            "observation" => Some(FactKind::Observation),
            _ => None,
        }
    }
}

/// One parsed `## Retain` record.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub kind: FactKind,
    /// For opinions, when given (`O(c=0.9)`).
    pub confidence: Option<f64>,
    /// The `@Entity` tags without `@`, as written.
    pub entities: Vec<String>,
    /// The fact itself.
    pub content: String,
}

/// Whether a heading title names a retain section.
pub fn is_retain_heading(title: &str) -> bool {
    title.trim().eq_ignore_ascii_case("retain")
}

/// Parses the body of one list item (without the `- ` marker).
pub fn parse_fact(body: &str) -> Result<Fact, String> {
    let text = body.trim();
    let mut chars = text.chars();
    let kind = match chars.next() {
        Some('W') => FactKind::World,
        Some('B') => FactKind::Experience,
        Some('O') => FactKind::Opinion,
        Some('S') => FactKind::Observation,
        _ => return Err("a retained fact starts with its type: W, B, O or S".to_string()),
    };
    let mut rest = &text[1..];
    let mut confidence = None;
    if let Some(after) = rest.strip_prefix('(') {
        let Some(close) = after.find(')') else {
            return Err("`(` after the type is not closed".to_string());
        };
        let inner = after[..close].trim();
        let value = inner
            .strip_prefix("c=")
            .or_else(|| inner.strip_prefix("c ="))
            .map(str::trim)
            .ok_or_else(|| format!("`({inner})` is not a confidence such as (c=0.9)"))?;
        let c: f64 = value
            .parse()
            .map_err(|_| format!("confidence `{value}` is not a number"))?;
        if !(0.0..=1.0).contains(&c) {
            return Err(format!("confidence {c} is outside 0..1"));
        }
        if kind != FactKind::Opinion {
            return Err("only opinions (O) carry a confidence".to_string());
        }
        confidence = Some(c);
        rest = &after[close + 1..];
    }
    // The type is a word of its own: `Went home` is not a fact.
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace) || rest.starts_with(':')) {
        return Err("a retained fact starts with its type: W, B, O or S".to_string());
    }
    let mut entities = Vec::new();
    let mut rest = rest.trim_start();
    while let Some(after) = rest.strip_prefix('@') {
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '\'')))
            .unwrap_or(after.len());
        let name = after[..end].trim_end_matches('.');
        if name.is_empty() {
            return Err("`@` without an entity name".to_string());
        }
        entities.push(name.to_string());
        rest = after[name.len()..].trim_start();
    }
    let content = match rest.strip_prefix(':') {
        Some(c) => c.trim(),
        None if entities.is_empty() => rest.trim(),
        None => return Err("`:` missing after the entities".to_string()),
    };
    if content.is_empty() {
        return Err("the fact is empty".to_string());
    }
    Ok(Fact {
        kind,
        confidence,
        entities,
        content: content.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records() {
        let ok = |body: &str| parse_fact(body).unwrap();
        let f = ok("W @Peter: Currently in Marrakech (Nov 27–Dec 1, 2025) for Andy's birthday.");
        assert_eq!(f.kind, FactKind::World);
        assert_eq!(f.entities, vec!["Peter"]);
        assert_eq!(
            f.content,
            "Currently in Marrakech (Nov 27–Dec 1, 2025) for Andy's birthday."
        );
        let f = ok("O(c=0.95) @Peter: Prefers concise replies (<1500 chars) on WhatsApp.");
        assert_eq!((f.kind, f.confidence), (FactKind::Opinion, Some(0.95)));
        let f = ok("B @warelay @Baileys: Fixed the WS crash.");
        assert_eq!(f.entities, vec!["warelay", "Baileys"]);
        assert_eq!(f.kind, FactKind::Experience);
        let f = ok("S: A quiet week.");
        assert_eq!((f.kind, f.entities.len()), (FactKind::Observation, 0));
        assert_eq!(f.content, "A quiet week.");
        let f = ok("W Water boils at 100 °C at sea level.");
        assert_eq!(f.content, "Water boils at 100 °C at sea level.");
        let f = ok("O @The-Castle: Too loud on Fridays.");
        assert_eq!(f.entities, vec!["The-Castle"]);
    }

    #[test]
    fn not_records() {
        for (body, why) in [
            ("Went home early", "type"),
            ("X @Peter: fact", "type"),
            ("O(c=1.5) @Peter: fact", "outside"),
            ("O(c=high) @Peter: fact", "not a number"),
            ("W(c=0.5) @Peter: fact", "only opinions"),
            ("O(c=0.5 @Peter: fact", "not closed"),
            ("W @Peter fact", "`:` missing"),
            ("W @: fact", "without an entity"),
            ("W @Peter:   ", "empty"),
            ("", "type"),
        ] {
            let err = parse_fact(body).unwrap_err();
            assert!(err.contains(why), "{body:?}: {err}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(body in ".{0,60}") {
                let _ = parse_fact(&body);
            }

            #[test]
            fn written_records_read_back(
                kind in prop::sample::select(vec!['W', 'B', 'O', 'S']),
                c in prop::option::of(0u8..=100),
                entities in prop::collection::vec("[A-Z][a-z]{1,8}(-[A-Z][a-z]{1,5})?", 0..3),
                content in "[A-Za-z0-9][A-Za-z0-9 ,.!?()]{0,40}[A-Za-z0-9.!?)]",
            ) {
                let c = if kind == 'O' { c } else { None };
                let mut body = kind.to_string();
                if let Some(c) = c {
                    body.push_str(&format!("(c={})", f64::from(c) / 100.0));
                }
                for e in &entities {
                    body.push_str(&format!(" @{e}"));
                }
                body.push_str(&format!(": {content}"));
                let fact = parse_fact(&body).unwrap();
                prop_assert_eq!(fact.entities, entities);
                prop_assert_eq!(fact.content, content.trim());
                prop_assert_eq!(fact.confidence, c.map(|c| f64::from(c) / 100.0));
            }
        }
    }
}
