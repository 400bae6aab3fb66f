//! Text-preserving edits of a JSON5 document.
//!
//! `config set` and `config unset` change one value and keep everything else
//! byte for byte: comments, key order, quoting style, trailing commas and
//! indentation. The document is scanned into a light tree of byte spans
//! (objects with their members; arrays and scalars as opaque spans); an edit
//! replaces, inserts or removes one span. The caller re-parses the result and
//! checks that exactly the intended value changed.

use serde_json::Value;

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum EditError {
    #[error("cannot set `{0}`: it is not an object in the config file")]
    NotAnObject(String),
    #[error("the top level of the config file is not an object")]
    RootNotObject,
    #[error("the config file could not be scanned at byte {0}")]
    Scan(usize),
}

#[derive(Debug)]
enum Node {
    Object(Obj),
    Other { start: usize, end: usize },
}

impl Node {
    fn start(&self) -> usize {
        match self {
            Node::Object(o) => o.open,
            Node::Other { start, .. } => *start,
        }
    }
    fn end(&self) -> usize {
        match self {
            Node::Object(o) => o.close + 1,
            Node::Other { end, .. } => *end,
        }
    }
}

#[derive(Debug)]
struct Obj {
    open: usize,
    close: usize,
    members: Vec<Member>,
}

#[derive(Debug)]
struct Member {
    key: String,
    key_start: usize,
    value: Node,
    /// Index of the comma after the value, if any.
    comma: Option<usize>,
}

impl Member {
    fn end(&self) -> usize {
        self.comma.map_or(self.value.end(), |c| c + 1)
    }
}

struct Scanner<'a> {
    src: &'a str,
    bytes: &'a [u8],
}

impl<'a> Scanner<'a> {
    fn new(src: &'a str) -> Self {
        Scanner {
            src,
            bytes: src.as_bytes(),
        }
    }

    fn skip_ws(&self, mut pos: usize) -> usize {
        loop {
            let rest = &self.src[pos..];
            let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
            pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                pos = self.src[pos..]
                    .find('\n')
                    .map_or(self.src.len(), |i| pos + i);
            } else if trimmed.starts_with("/*") {
                pos = self.src[pos + 2..]
                    .find("*/")
                    .map_or(self.src.len(), |i| pos + 2 + i + 2);
            } else {
                return pos;
            }
        }
    }

    fn string_end(&self, start: usize) -> Result<usize, EditError> {
        let quote = self.bytes[start];
        let mut i = start + 1;
        while i < self.bytes.len() {
            match self.bytes[i] {
                b'\\' => i += 2,
                b if b == quote => return Ok(i + 1),
                _ => i += 1,
            }
        }
        Err(EditError::Scan(start))
    }

    fn value(&self, pos: usize) -> Result<Node, EditError> {
        match self.bytes.get(pos) {
            Some(b'{') => self.object(pos).map(Node::Object),
            Some(b'[') => {
                let mut i = self.skip_ws(pos + 1);
                loop {
                    match self.bytes.get(i) {
                        Some(b']') => {
                            return Ok(Node::Other {
                                start: pos,
                                end: i + 1,
                            });
                        }
                        Some(b',') => i = self.skip_ws(i + 1),
                        Some(_) => {
                            let item = self.value(i)?;
                            i = self.skip_ws(item.end());
                        }
                        None => return Err(EditError::Scan(pos)),
                    }
                }
            }
            Some(b'"') | Some(b'\'') => Ok(Node::Other {
                start: pos,
                end: self.string_end(pos)?,
            }),
            Some(_) => {
                let len = self.src[pos..]
                    .find(|c: char| c.is_whitespace() || matches!(c, ',' | ']' | '}' | '/' | ':'))
                    .unwrap_or(self.src.len() - pos);
                if len == 0 {
                    return Err(EditError::Scan(pos));
                }
                Ok(Node::Other {
                    start: pos,
                    end: pos + len,
                })
            }
            None => Err(EditError::Scan(pos)),
        }
    }

    fn object(&self, open: usize) -> Result<Obj, EditError> {
        let mut members = Vec::new();
        let mut pos = self.skip_ws(open + 1);
        loop {
            match self.bytes.get(pos) {
                Some(b'}') => {
                    return Ok(Obj {
                        open,
                        close: pos,
                        members,
                    });
                }
                None => return Err(EditError::Scan(open)),
                _ => {}
            }
            let key_start = pos;
            let (key, key_end) = match self.bytes[pos] {
                b'"' | b'\'' => {
                    let end = self.string_end(pos)?;
                    let literal = &self.src[pos..end];
                    let key: String = json5::from_str(literal).map_err(|_| EditError::Scan(pos))?;
                    (key, end)
                }
                _ => {
                    let len = self.src[pos..]
                        .find(|c: char| c.is_whitespace() || c == ':' || c == '/')
                        .unwrap_or(self.src.len() - pos);
                    (self.src[pos..pos + len].to_string(), pos + len)
                }
            };
            pos = self.skip_ws(key_end);
            if self.bytes.get(pos) != Some(&b':') {
                return Err(EditError::Scan(pos));
            }
            pos = self.skip_ws(pos + 1);
            let value = self.value(pos)?;
            pos = self.skip_ws(value.end());
            let comma = if self.bytes.get(pos) == Some(&b',') {
                let c = pos;
                pos = self.skip_ws(pos + 1);
                Some(c)
            } else {
                None
            };
            members.push(Member {
                key,
                key_start,
                value,
                comma,
            });
        }
    }
}

/// Sets `path` to `value` in the JSON5 `text`, creating missing objects.
pub(crate) fn set(text: &str, path: &[&str], value: &Value) -> Result<String, EditError> {
    assert!(!path.is_empty(), "config path must not be empty");
    let scanner = Scanner::new(text);
    let unit = indent_unit(text);
    let start = scanner.skip_ws(0);
    if start >= text.len() {
        // Empty document (possibly comments only): append a new object.
        let member = render_member(path, value, &unit, &unit);
        let mut out = text.trim_end().to_string();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{{\n{unit}{member}\n}}\n"));
        return Ok(out);
    }
    let Node::Object(mut obj) = scanner.value(start)? else {
        return Err(EditError::RootNotObject);
    };
    for (i, segment) in path.iter().enumerate() {
        let found = obj.members.iter().rposition(|m| m.key == *segment);
        let Some(index) = found else {
            return Ok(insert_member(text, &obj, &path[i..], value, &unit));
        };
        let member = obj.members.swap_remove(index);
        if i + 1 == path.len() {
            let indent = line_indent(text, member.key_start);
            let rendered = render_value(value, &indent, &unit);
            return Ok(splice(
                text,
                &[(member.value.start(), member.value.end(), rendered)],
            ));
        }
        match member.value {
            Node::Object(inner) => obj = inner,
            Node::Other { .. } => return Err(EditError::NotAnObject(path[..=i].join("."))),
        }
    }
    unreachable!("the loop returns on the last segment")
}

/// Removes `path` from `text`; `None` when it is not set.
pub(crate) fn unset(text: &str, path: &[&str]) -> Result<Option<String>, EditError> {
    let scanner = Scanner::new(text);
    let start = scanner.skip_ws(0);
    if start >= text.len() {
        return Ok(None);
    }
    let Node::Object(mut obj) = scanner.value(start)? else {
        return Err(EditError::RootNotObject);
    };
    for (i, segment) in path.iter().enumerate() {
        let Some(index) = obj.members.iter().rposition(|m| m.key == *segment) else {
            return Ok(None);
        };
        let member = obj.members.swap_remove(index);
        if i + 1 == path.len() {
            return Ok(Some(remove_member(text, &member)));
        }
        match member.value {
            Node::Object(inner) => obj = inner,
            Node::Other { .. } => return Ok(None),
        }
    }
    Ok(None)
}

fn remove_member(text: &str, member: &Member) -> String {
    let line_start = text[..member.key_start].rfind('\n').map_or(0, |i| i + 1);
    let end = member.end();
    let line_end = text[end..].find('\n').map_or(text.len(), |i| end + i);
    let alone_before = text[line_start..member.key_start].trim().is_empty();
    let rest = text[end..line_end].trim();
    let alone_after = rest.is_empty() || rest.starts_with("//");
    if alone_before && alone_after {
        // Drop the whole line, including its newline.
        let cut_end = (line_end + 1).min(text.len());
        return splice(text, &[(line_start, cut_end, String::new())]);
    }
    let after_ws = end + (text[end..].len() - text[end..].trim_start_matches([' ', '\t']).len());
    splice(text, &[(member.key_start, after_ws, String::new())])
}

fn insert_member(text: &str, obj: &Obj, path: &[&str], value: &Value, unit: &str) -> String {
    let multiline = text[obj.open..=obj.close].contains('\n');
    let Some(last) = obj.members.last() else {
        let base = line_indent(text, obj.open);
        let inner = format!("{base}{unit}");
        let member = render_member(path, value, &inner, unit);
        let between = &text[obj.open + 1..obj.close];
        if between.trim().is_empty() {
            return splice(
                text,
                &[(
                    obj.open + 1,
                    obj.close,
                    format!("\n{inner}{member}\n{base}"),
                )],
            );
        }
        return splice(
            text,
            &[(obj.open + 1, obj.open + 1, format!("\n{inner}{member}"))],
        );
    };
    if !multiline {
        let member = render_member(path, value, "", unit);
        return match last.comma {
            Some(c) => splice(text, &[(c + 1, c + 1, format!(" {member},"))]),
            None => splice(
                text,
                &[(last.value.end(), last.value.end(), format!(", {member}"))],
            ),
        };
    }
    let indent = line_indent(text, last.key_start);
    let member = render_member(path, value, &indent, unit);
    let after = last.end();
    let line_end = text[after..].find('\n').map_or(text.len(), |i| after + i);
    let rest = text[after..line_end].trim();
    let insert_at = if rest.is_empty() || rest.starts_with("//") {
        line_end
    } else {
        after
    };
    // Keep the object's style: a trailing comma after the new member only if
    // the old last member had one; otherwise the old last member gains one.
    match last.comma {
        Some(_) => splice(
            text,
            &[(insert_at, insert_at, format!("\n{indent}{member},"))],
        ),
        None if insert_at == last.value.end() => splice(
            text,
            &[(insert_at, insert_at, format!(",\n{indent}{member}"))],
        ),
        None => splice(
            text,
            &[
                (insert_at, insert_at, format!("\n{indent}{member}")),
                (last.value.end(), last.value.end(), ",".to_string()),
            ],
        ),
    }
}

/// Applies non-overlapping `(start, end, replacement)` edits.
fn splice(text: &str, edits: &[(usize, usize, String)]) -> String {
    let mut edits: Vec<&(usize, usize, String)> = edits.iter().collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (start, end, replacement) in edits {
        out.replace_range(*start..*end, replacement);
    }
    out
}

fn line_indent(text: &str, pos: usize) -> String {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The document's indentation step: a tab if lines are tab-indented, else
/// the smallest positive run of leading spaces (2 by default).
fn indent_unit(text: &str) -> String {
    let mut smallest: Option<usize> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with('\t') {
            return "\t".to_string();
        }
        let spaces = line.len() - line.trim_start_matches(' ').len();
        if spaces > 0 {
            smallest = Some(smallest.map_or(spaces, |s| s.min(spaces)));
        }
    }
    " ".repeat(smallest.unwrap_or(2))
}

fn render_member(path: &[&str], value: &Value, indent: &str, unit: &str) -> String {
    let (first, rest) = path.split_first().expect("non-empty path");
    let mut nested = value.clone();
    for key in rest.iter().rev() {
        let mut map = serde_json::Map::new();
        map.insert((*key).to_string(), nested);
        nested = Value::Object(map);
    }
    format!(
        "{}: {}",
        render_key(first),
        render_value(&nested, indent, unit)
    )
}

fn render_key(key: &str) -> String {
    let mut chars = key.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        key.to_string()
    } else {
        Value::String(key.to_string()).to_string()
    }
}

/// Renders a value for a member whose key line is indented by `indent`.
fn render_value(value: &Value, indent: &str, unit: &str) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let inner = format!("{indent}{unit}");
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{inner}{}: {}",
                        render_key(k),
                        render_value(v, &inner, unit)
                    )
                })
                .collect();
            format!("{{\n{},\n{indent}}}", members.join(",\n"))
        }
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            let inner = format!("{indent}{unit}");
            let items: Vec<String> = items
                .iter()
                .map(|v| format!("{inner}{}", render_value(v, &inner, unit)))
                .collect();
            format!("[\n{},\n{indent}]", items.join(",\n"))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(Value::to_string).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const COMMENTED: &str = r#"// almanac config
{
  // where my notes live
  agents: {
    defaults: {
      workspace: "~/.openclaw/workspace", // shared with OpenClaw
    },
  },
  /* logging */
  logging: { level: 'info' },
}
"#;

    #[test]
    fn set_table() {
        let cases: &[(&str, &str, &[&str], Value, &str)] = &[
            (
                "replace a nested string keeps comments",
                COMMENTED,
                &["agents", "defaults", "workspace"],
                json!("/srv/ws"),
                "// almanac config\n{\n  // where my notes live\n  agents: {\n    defaults: {\n      workspace: \"/srv/ws\", // shared with OpenClaw\n    },\n  },\n  /* logging */\n  logging: { level: 'info' },\n}\n",
            ),
            (
                "insert into a multi-line object with trailing commas",
                COMMENTED,
                &["agents", "defaults", "userTimezone"],
                json!("Europe/Paris"),
                "// almanac config\n{\n  // where my notes live\n  agents: {\n    defaults: {\n      workspace: \"~/.openclaw/workspace\", // shared with OpenClaw\n      userTimezone: \"Europe/Paris\",\n    },\n  },\n  /* logging */\n  logging: { level: 'info' },\n}\n",
            ),
            (
                "insert into a one-line object",
                COMMENTED,
                &["logging", "file"],
                json!("/tmp/a.log"),
                "// almanac config\n{\n  // where my notes live\n  agents: {\n    defaults: {\n      workspace: \"~/.openclaw/workspace\", // shared with OpenClaw\n    },\n  },\n  /* logging */\n  logging: { level: 'info', file: \"/tmp/a.log\" },\n}\n",
            ),
            (
                "create missing parents",
                "{\n  a: 1\n}\n",
                &["skills", "load", "extraDirs"],
                json!(["~/s", "/opt/s"]),
                "{\n  a: 1,\n  skills: {\n    load: {\n      extraDirs: [\"~/s\", \"/opt/s\"],\n    },\n  }\n}\n",
            ),
            (
                "empty file",
                "",
                &["agents", "defaults", "workspace"],
                json!("/w"),
                "{\n  agents: {\n    defaults: {\n      workspace: \"/w\",\n    },\n  }\n}\n",
            ),
            (
                "comment-only file keeps the comment",
                "// just a comment\n",
                &["x"],
                json!(true),
                "// just a comment\n{\n  x: true\n}\n",
            ),
            (
                "empty object",
                "{\n  agents: {},\n}\n",
                &["agents", "list"],
                json!([]),
                "{\n  agents: {\n    list: []\n  },\n}\n",
            ),
            (
                "quoted keys are matched by their value",
                "{ \"agents\": { 'defaults': { \"workspace\": 'a' } } }",
                &["agents", "defaults", "workspace"],
                json!("b"),
                "{ \"agents\": { 'defaults': { \"workspace\": \"b\" } } }",
            ),
            (
                "keys that are not identifiers are quoted",
                "{}",
                &["skills", "entries", "image-lab", "enabled"],
                json!(false),
                "{\n  skills: {\n    entries: {\n      \"image-lab\": {\n        enabled: false,\n      },\n    },\n  }\n}",
            ),
            (
                "tabs are kept",
                "{\n\ta: 1,\n}\n",
                &["b"],
                json!(2),
                "{\n\ta: 1,\n\tb: 2,\n}\n",
            ),
        ];
        for (label, text, path, value, want) in cases {
            let got = set(text, path, value).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(&got, want, "case: {label}");
            let parsed: Value =
                json5::from_str(&got).unwrap_or_else(|e| panic!("{label}: {e}\n{got}"));
            let mut cursor = &parsed;
            for key in *path {
                cursor = &cursor[*key];
            }
            assert_eq!(cursor, value, "case: {label}");
        }
    }

    #[test]
    fn set_through_a_scalar_is_refused() {
        let err = set("{ agents: 'x' }", &["agents", "defaults"], &json!(1)).unwrap_err();
        assert_eq!(err, EditError::NotAnObject("agents".into()));
        assert_eq!(
            set("[1]", &["a"], &json!(1)).unwrap_err(),
            EditError::RootNotObject
        );
    }

    #[test]
    fn unset_table() {
        let cases: &[(&str, &str, &[&str], Option<&str>)] = &[
            (
                "remove a line with its comment",
                COMMENTED,
                &["agents", "defaults", "workspace"],
                Some(
                    "// almanac config\n{\n  // where my notes live\n  agents: {\n    defaults: {\n    },\n  },\n  /* logging */\n  logging: { level: 'info' },\n}\n",
                ),
            ),
            (
                "remove from a one-line object",
                "{ a: 1, b: 2 }",
                &["a"],
                Some("{ b: 2 }"),
            ),
            ("absent key", "{ a: 1 }", &["b"], None),
            ("absent parent", "{ a: 1 }", &["b", "c"], None),
        ];
        for (label, text, path, want) in cases {
            let got = unset(text, path).unwrap();
            assert_eq!(got.as_deref(), *want, "case: {label}");
            if let Some(got) = got {
                json5::from_str::<Value>(&got).unwrap_or_else(|e| panic!("{label}: {e}"));
            }
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<bool>().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                "[a-z ]{0,8}".prop_map(Value::from),
            ]
        }

        proptest! {
            /// Setting any path in any small document changes exactly that
            /// value: re-parsing gives the old document with the one change.
            #[test]
            fn set_changes_only_the_target(
                doc in proptest::collection::btree_map("[a-c]", proptest::collection::btree_map("[a-c]", leaf(), 0..3), 0..3),
                path in proptest::collection::vec("[a-d]", 1..4),
                value in leaf(),
                pretty in any::<bool>(),
            ) {
                let doc = serde_json::to_value(&doc).unwrap();
                let text = if pretty { serde_json::to_string_pretty(&doc).unwrap() } else { doc.to_string() };
                let path_refs: Vec<&str> = path.iter().map(String::as_str).collect();
                let mut expected = doc.clone();
                let mut cursor = &mut expected;
                let mut blocked = false;
                for key in &path[..path.len() - 1] {
                    if !cursor.is_object() { blocked = true; break; }
                    cursor = cursor.as_object_mut().unwrap().entry(key.clone()).or_insert_with(|| Value::Object(Default::default()));
                }
                if blocked || !cursor.is_object() {
                    prop_assert!(set(&text, &path_refs, &value).is_err());
                } else {
                    cursor.as_object_mut().unwrap().insert(path.last().unwrap().clone(), value.clone());
                    let edited = set(&text, &path_refs, &value).unwrap();
                    let reparsed: Value = json5::from_str(&edited).unwrap();
                    prop_assert_eq!(reparsed, expected);
                }
            }
        }
    }
}
