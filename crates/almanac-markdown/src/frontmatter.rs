//! YAML frontmatter at the top of a Markdown file (`SKILL.md`, `HOOK.md`).
//!
//! The reading rules match what skill authors already rely on:
//!
//! 1. Line endings are normalised to LF.
//! 2. A file that does not start with `---` has no frontmatter.
//! 3. The block ends at the first later line starting with `---`; without one
//!    the frontmatter is unclosed and treated as absent.
//! 4. The block is read twice: by a lenient line parser (`key: value`,
//!    indented continuation lines, one pair of surrounding quotes removed) and
//!    as YAML 1.2. YAML wins, except where the line parser saw one-line JSON
//!    (`metadata: {"openclaw": …}`) or YAML misread an unquoted `key: a: b`.
//!    When YAML fails, the line parser's result is used alone and the failure
//!    is reported as a diagnostic instead of dropping the file. A block of
//!    plain `key: value` lines, whose values YAML would read as the same
//!    strings, skips the YAML pass: the outcome is the same and a large
//!    skill set loads several times faster.
//!
//! Every value ends up as a string: scalars as their text, maps and lists as
//! compact JSON, so `metadata` written as a nested YAML map and `metadata`
//! written as one-line JSON read the same.

use std::collections::BTreeMap;

use yaml_rust2::{Yaml, YamlLoader};

use crate::{Diagnostic, normalize_newlines};

/// Whether and how a frontmatter block was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStatus {
    /// The text does not start with `---`.
    Missing,
    /// The text starts with `---` but no closing `---` line follows.
    Unclosed,
    /// A complete block was found.
    Present,
}

/// The parsed frontmatter of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontmatter {
    pub status: BlockStatus,
    /// Flat map of key to string value (maps and lists as compact JSON).
    pub fields: BTreeMap<String, String>,
    /// The Markdown after the closing `---` line (the whole text when there
    /// is no complete block), with LF line endings.
    pub body: String,
    /// 1-based line of the text on which `body` starts.
    pub body_line: usize,
    pub diagnostics: Vec<Diagnostic>,
}

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

/// Splits off and parses the frontmatter block of `text`.
pub fn parse(text: &str) -> Frontmatter {
    let text = normalize_newlines(text);
    // Editors on Windows may start the file with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text.as_ref());
    let mut diagnostics = Vec::new();

    if !text.starts_with("---") {
        return Frontmatter {
            status: BlockStatus::Missing,
            fields: BTreeMap::new(),
            body: text.to_string(),
            body_line: 1,
            diagnostics,
        };
    }
    let Some(close) = text
        .get(3..)
        .and_then(|rest| rest.find("\n---"))
        .map(|i| i + 3)
    else {
        diagnostics.push(Diagnostic::error(
            Some(1),
            "frontmatter starts with `---` but has no closing `---` line",
        ));
        return Frontmatter {
            status: BlockStatus::Unclosed,
            fields: BTreeMap::new(),
            body: text.to_string(),
            body_line: 1,
            diagnostics,
        };
    };
    // The block starts after the opening line; a text of just `---\n---`
    // has an empty block.
    let block_start = text.find('\n').map_or(text.len(), |i| i + 1).min(close);
    let block = &text[block_start..close];
    let after_close = close + 1; // start of the closing `---` line
    let body_start = text[after_close..]
        .find('\n')
        .map_or(text.len(), |i| after_close + i + 1);
    let body_line = text[..body_start].matches('\n').count() + 1;
    // Lines inside `block` are numbered from the line after the opening `---`.
    let first_block_line = text[..block_start].matches('\n').count() + 1;

    let line_fields = parse_lines(block);
    if reads_the_same_without_yaml(block) {
        return Frontmatter {
            status: BlockStatus::Present,
            fields: line_fields,
            body: text[body_start..].to_string(),
            body_line,
            diagnostics,
        };
    }
    let fields = match parse_yaml(block) {
        Ok(YamlOutcome::Map(yaml_fields)) => merge(yaml_fields, &line_fields),
        Ok(YamlOutcome::NotAMap) => {
            if !block.trim().is_empty() {
                diagnostics.push(Diagnostic::warning(
                    Some(first_block_line),
                    "frontmatter is YAML but not a key/value mapping; read line by line instead",
                ));
            }
            line_fields
        }
        Err((line, message)) => {
            diagnostics.push(Diagnostic::warning(
                Some(first_block_line + line.saturating_sub(1)),
                format!("frontmatter is not valid YAML ({message}); read line by line instead"),
            ));
            line_fields
        }
    };

    Frontmatter {
        status: BlockStatus::Present,
        fields,
        body: text[body_start..].to_string(),
        body_line,
        diagnostics,
    }
}

/// The lenient line parser: `key: value` at column 0, where `key` is
/// `[A-Za-z0-9_-]+`; an empty inline value followed by indented lines takes
/// those lines as a multi-line value.
pub fn parse_lines(block: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = block.split('\n').collect();
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let Some((key, inline)) = split_key_line(line) else {
            continue;
        };
        let inline = inline.trim();
        if inline.is_empty() && lines.get(i).is_some_and(|next| starts_indented(next)) {
            let mut collected = Vec::new();
            while i < lines.len() {
                let next = lines[i];
                if !next.trim().is_empty() && !starts_indented(next) {
                    break;
                }
                collected.push(next);
                i += 1;
            }
            let value = collected.join("\n");
            let value = value.trim();
            if !value.is_empty() {
                fields.insert(key.to_string(), value.to_string());
            }
            continue;
        }
        let value = strip_matching_quotes(inline);
        if !value.is_empty() {
            fields.insert(key.to_string(), value.to_string());
        }
    }
    fields
}

/// Whether YAML is sure to read `block` as the line parser does: every
/// line is blank, a `#` comment, or `key: value` with a distinct key, where
/// the value is a plain string YAML would not resolve to another type,
/// strip a comment from, or reject; or one-line JSON (which the line
/// parser's reading wins for anyway).
fn reads_the_same_without_yaml(block: &str) -> bool {
    let mut keys: Vec<&str> = Vec::new();
    for line in block.split('\n') {
        let trimmed = line.trim_end_matches(' ');
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, value)) = split_key_line(trimmed) else {
            return false;
        };
        if !key.starts_with(|c: char| c.is_ascii_alphabetic())
            || is_yaml_keyword(key)
            || keys.contains(&key)
        {
            return false;
        }
        keys.push(key);
        if value.is_empty() {
            // An empty value with nothing indented below: absent either way.
            continue;
        }
        if value.starts_with('{') || value.starts_with('[') {
            if serde_json::from_str::<serde_json::Value>(value).is_err() {
                return false;
            }
            continue;
        }
        if !is_plain_yaml_string(value) {
            return false;
        }
    }
    true
}

/// A plain scalar YAML reads as exactly this text.
fn is_plain_yaml_string(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return false;
    };
    // Indicators, quotes, and the starts of numbers and special floats.
    if "-?:,[]{}#&*!|>'\"%@`+.~".contains(first) || first.is_ascii_digit() || first.is_whitespace()
    {
        return false;
    }
    if is_yaml_keyword(value)
        || value.ends_with(':')
        || value.contains(": ")
        || value.contains(" #")
        || value.contains(":\t")
    {
        return false;
    }
    // Control characters, tabs and the byte-order mark make YAML fail, and
    // YAML 1.1 line breaks would split the value.
    !value
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{feff}' | '\u{85}' | '\u{2028}' | '\u{2029}'))
}

/// Words YAML resolves to null or a boolean.
fn is_yaml_keyword(text: &str) -> bool {
    matches!(
        text,
        "null"
            | "Null"
            | "NULL"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "y"
            | "Y"
            | "n"
            | "N"
            | "yes"
            | "Yes"
            | "YES"
            | "no"
            | "No"
            | "NO"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    )
}

fn starts_indented(line: &str) -> bool {
    line.starts_with(' ') || line.starts_with('\t')
}

/// Matches `^([A-Za-z0-9_-]+):\s*(.*)$`.
fn split_key_line(line: &str) -> Option<(&str, &str)> {
    let key_len = line
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        .count();
    if key_len == 0 || line.as_bytes().get(key_len) != Some(&b':') {
        return None;
    }
    Some((&line[..key_len], line[key_len + 1..].trim_start()))
}

fn strip_matching_quotes(value: &str) -> &str {
    let bytes = value.as_bytes();
    if bytes.len() >= 2 {
        let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
        if (first == b'"' || first == b'\'') && first == last {
            return &value[1..value.len() - 1];
        }
    }
    value
}

enum YamlOutcome {
    Map(BTreeMap<String, String>),
    NotAMap,
}

fn parse_yaml(block: &str) -> Result<YamlOutcome, (usize, String)> {
    let docs =
        YamlLoader::load_from_str(block).map_err(|e| (e.marker().line(), e.info().to_string()))?;
    let Some(Yaml::Hash(map)) = docs.into_iter().next() else {
        return Ok(YamlOutcome::NotAMap);
    };
    let mut fields = BTreeMap::new();
    for (key, value) in map {
        let Some(key) = scalar_text(&key) else {
            continue;
        };
        let key = key.trim().to_string();
        if key.is_empty() {
            continue;
        }
        let value = match value {
            Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => continue,
            Yaml::String(s) => s.trim().to_string(),
            Yaml::Hash(_) | Yaml::Array(_) => yaml_to_json(&value).to_string(),
            other => match scalar_text(&other) {
                Some(text) => text,
                None => continue,
            },
        };
        fields.insert(key, value);
    }
    Ok(YamlOutcome::Map(fields))
}

fn scalar_text(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(match r.parse::<f64>() {
            Ok(f) => number_text(f),
            Err(_) => r.clone(),
        }),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Formats a float the way a JSON number prints (`1.0` → `1`).
fn number_text(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// Converts a YAML value to JSON; non-string keys become their text.
pub fn yaml_to_json(value: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(r.clone()), Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| scalar_text(k).map(|k| (k, yaml_to_json(v))))
                .collect(),
        ),
    }
}

/// YAML values win, except where the line parser saw raw JSON (`{…}` or
/// `[…]`) or YAML turned an unquoted `key: a: b` into a map.
fn merge(
    mut yaml: BTreeMap<String, String>,
    lines: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    for (key, line_value) in lines {
        let line_is_json = line_value.starts_with('{') || line_value.starts_with('[');
        let yaml_made_map = yaml.get(key).is_some_and(|v| v.starts_with('{'))
            && !line_value.contains('\n')
            && line_value != "|"
            && line_value != ">";
        if line_is_json || yaml_made_map {
            yaml.insert(key.clone(), line_value.clone());
        }
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> BTreeMap<String, String> {
        parse(text).fields
    }

    #[test]
    fn table_of_frontmatter_styles() {
        let cases: &[(&str, &str, &[(&str, &str)])] = &[
            (
                "plain keys",
                "---\nname: weather\ndescription: Get the weather\n---\nbody",
                &[("name", "weather"), ("description", "Get the weather")],
            ),
            (
                "quoted values",
                "---\nname: \"quoted\"\ndescription: 'single'\n---\n",
                &[("name", "quoted"), ("description", "single")],
            ),
            (
                "one-line JSON metadata stays raw JSON",
                "---\nname: x\nmetadata: {\"openclaw\":{\"emoji\":\"🎨\",\"requires\":{\"bins\":[\"uv\"]}}}\n---\n",
                &[
                    ("name", "x"),
                    (
                        "metadata",
                        "{\"openclaw\":{\"emoji\":\"🎨\",\"requires\":{\"bins\":[\"uv\"]}}}",
                    ),
                ],
            ),
            (
                "nested YAML metadata becomes JSON",
                "---\nname: x\nmetadata:\n  openclaw:\n    requires:\n      bins: [uv, git]\n---\n",
                &[
                    ("name", "x"),
                    (
                        "metadata",
                        "{\"openclaw\":{\"requires\":{\"bins\":[\"uv\",\"git\"]}}}",
                    ),
                ],
            ),
            (
                "unquoted colon in description falls back to lines",
                "---\nname: x\ndescription: Use this: for everything\n---\n",
                &[("name", "x"), ("description", "Use this: for everything")],
            ),
            (
                "YAML block scalar wins over the line parser",
                "---\nname: x\ndescription: |\n  first line\n  second line\n---\n",
                &[("name", "x"), ("description", "first line\nsecond line")],
            ),
            (
                "booleans and numbers become strings",
                "---\nuser-invocable: false\nversion: 1.50\ncount: 3\n---\n",
                &[
                    ("user-invocable", "false"),
                    ("version", "1.5"),
                    ("count", "3"),
                ],
            ),
            (
                "null and empty values are dropped",
                "---\nname:\nhomepage: ~\ndescription: d\n---\n",
                &[("description", "d")],
            ),
            (
                "CRLF line endings",
                "---\r\nname: crlf\r\ndescription: works\r\n---\r\nbody",
                &[("name", "crlf"), ("description", "works")],
            ),
            (
                "JSON5-ish metadata with trailing comma keeps the line value",
                "---\nname: x\nmetadata: { openclaw: { emoji: \"x\", }, }\n---\n",
                &[
                    ("name", "x"),
                    ("metadata", "{ openclaw: { emoji: \"x\", }, }"),
                ],
            ),
        ];
        for (label, text, expected) in cases {
            let got = fields(text);
            let expected: BTreeMap<String, String> = expected
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, expected, "case: {label}");
        }
    }

    #[test]
    fn missing_and_unclosed_blocks_are_reported() {
        let missing = parse("# Title\nname: x\n");
        assert_eq!(missing.status, BlockStatus::Missing);
        assert!(missing.fields.is_empty());
        assert_eq!(missing.body, "# Title\nname: x\n");

        let unclosed = parse("---\nname: x\ndescription: y\n");
        assert_eq!(unclosed.status, BlockStatus::Unclosed);
        assert!(unclosed.fields.is_empty());
        assert_eq!(unclosed.diagnostics.len(), 1);
        assert_eq!(unclosed.diagnostics[0].severity, crate::Severity::Error);
    }

    #[test]
    fn body_and_body_line_follow_the_closing_delimiter() {
        let fm = parse("---\nname: x\n---\n# Heading\ntext\n");
        assert_eq!(fm.body, "# Heading\ntext\n");
        assert_eq!(fm.body_line, 4);
        let empty = parse("---\n---\n");
        assert_eq!(empty.status, BlockStatus::Present);
        assert!(empty.fields.is_empty());
        assert_eq!(empty.body, "");
        let bom = parse("\u{feff}---\nname: x\n---\n");
        assert_eq!(bom.status, BlockStatus::Present);
        assert_eq!(bom.get("name"), Some("x"));
    }

    #[test]
    fn yaml_errors_become_warnings_with_a_line() {
        let fm = parse("---\nname: x\ndescription: a: b\n---\n");
        assert_eq!(fm.get("description"), Some("a: b"));
        assert_eq!(fm.diagnostics.len(), 1);
        let d = &fm.diagnostics[0];
        assert_eq!(d.severity, crate::Severity::Warning);
        assert_eq!(d.line, Some(3), "{d}");
    }

    #[test]
    fn line_parser_multiline_values() {
        let fields = parse_lines("description:\n  one\n\n  two\nname: n");
        assert_eq!(fields.get("description").unwrap(), "one\n\n  two");
        assert_eq!(fields.get("name").unwrap(), "n");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(text in ".{0,400}") {
                let _ = parse(&text);
            }

            #[test]
            fn never_panics_on_frontmatter_shaped_input(
                lines in proptest::collection::vec("[a-z:{}\\[\\]\"' |>-]{0,20}", 0..12)
            ) {
                let text = format!("---\n{}\n---\nbody", lines.join("\n"));
                let _ = parse(&text);
            }

            #[test]
            fn crlf_reads_the_same_as_lf(
                pairs in proptest::collection::vec(("[a-z][a-z_-]{0,8}", "[A-Za-z0-9 ,.]{1,30}"), 0..8)
            ) {
                let block: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                let lf = format!("---\n{}\n---\nbody\n", block.join("\n"));
                let crlf = lf.replace('\n', "\r\n");
                prop_assert_eq!(parse(&lf), parse(&crlf));
            }

            /// The fast path gives what the YAML pass would have given.
            #[test]
            fn skipping_yaml_changes_nothing(
                lines in proptest::collection::vec(
                    prop_oneof![
                        ("[a-zA-Z][a-zA-Z0-9_-]{0,6}", "[ -~éß中]{0,24}").prop_map(|(k, v)| format!("{k}: {v}")),
                        ("[a-z]{1,4}", "(true|null|~|yes|-1|0x1F|1e3|\\.5|\\[1, 2\\]|\\{\"a\": 1\\}|\\{a: 1\\}|a: b|a #c|'q'|\"d\")")
                            .prop_map(|(k, v)| format!("{k}: {v}")),
                        "(# note|| |  indented|- item)".prop_map(String::from),
                    ],
                    0..8,
                )
            ) {
                let block = lines.join("\n");
                if reads_the_same_without_yaml(&block) {
                    let line_fields = parse_lines(&block);
                    let full = match parse_yaml(&block) {
                        Ok(YamlOutcome::Map(yaml_fields)) => merge(yaml_fields, &line_fields),
                        Ok(YamlOutcome::NotAMap) => {
                            prop_assert!(block.trim().is_empty() || line_fields.is_empty(), "not a map: {block:?}");
                            line_fields.clone()
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("YAML fails on {block:?}: {e:?}"))),
                    };
                    prop_assert_eq!(line_fields, full, "block {:?}", block);
                }
            }

            #[test]
            fn simple_pairs_round_trip(
                pairs in proptest::collection::btree_map("[a-z][a-z_]{0,8}", "[A-Za-z][A-Za-z0-9 ]{0,20}[A-Za-z0-9]", 0..8)
            ) {
                let block: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: \"{v}\"")).collect();
                let text = format!("---\n{}\n---\n", block.join("\n"));
                let parsed = parse(&text);
                prop_assert_eq!(parsed.status, BlockStatus::Present);
                prop_assert_eq!(parsed.fields, pairs);
            }
        }
    }
}
