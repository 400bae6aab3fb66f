//! The import graph of the top-level modules of `src/`, read from their
//! non-test code with comments and literals skipped, and the checks of it
//! against the layer table: every import in its module's row, no cycle.
//! Each check takes the source files as `(path, text)` pairs, so the
//! tests on the real tree and the tests on planted sources share them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{is_test_file, non_test_code};

/// One token of Rust source, as far as paths need: comments, string,
/// byte and character literals, lifetimes and numbers leave none.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok<'a> {
    Ident(&'a str),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    line: usize,
}

fn is_ident_start(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphabetic()
}

fn is_ident_char(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric()
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i, &mut line),
            b'"' => i = skip_string(b, i + 1, &mut line),
            b'\'' => i = skip_char_or_lifetime(text, i),
            c if is_ident_start(c) => {
                let start = i;
                while i < b.len() && is_ident_char(b[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                // `b"…"`, `c"…"` and `b'…'` need nothing more: the literal
                // follows as if unprefixed. Raw strings do.
                match (word, b.get(i)) {
                    ("r" | "br" | "cr", Some(b'"' | b'#')) => {
                        let end = raw_string_or_ident(text, word, i, line, &mut out);
                        line += text[i..end].matches('\n').count();
                        i = end;
                    }
                    _ => out.push(Token {
                        tok: Tok::Ident(word),
                        line,
                    }),
                }
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && is_ident_char(b[i]) {
                    i += 1;
                }
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                out.push(Token {
                    tok: Tok::PathSep,
                    line,
                });
                i += 2;
            }
            c if c.is_ascii_whitespace() || !c.is_ascii() => i += 1,
            c => {
                out.push(Token {
                    tok: Tok::Punct(c as char),
                    line,
                });
                i += 1;
            }
        }
    }
    out
}

/// After the prefix `word` (`r`, `br` or `cr`) at `i`: a raw string
/// (skipped) or a raw identifier `r#name` (pushed); where the lexer goes on.
fn raw_string_or_ident<'a>(
    text: &'a str,
    word: &'a str,
    i: usize,
    line: usize,
    out: &mut Vec<Token<'a>>,
) -> usize {
    let b = text.as_bytes();
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    let open = i + hashes;
    if b.get(open) == Some(&b'"') {
        let close = format!("\"{}", "#".repeat(hashes));
        return match text[open + 1..].find(&close) {
            Some(at) => open + 1 + at + close.len(),
            None => b.len(),
        };
    }
    if word == "r" && hashes == 1 && b.get(open).is_some_and(|&c| is_ident_start(c)) {
        let mut end = open;
        while end < b.len() && is_ident_char(b[end]) {
            end += 1;
        }
        out.push(Token {
            tok: Tok::Ident(&text[open..end]),
            line,
        });
        return end;
    }
    out.push(Token {
        tok: Tok::Ident(word),
        line,
    });
    i
}

/// From the `/*` at `i`, past its (possibly nested) end.
fn skip_block_comment(b: &[u8], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            *line += usize::from(b[i] == b'\n');
            i += 1;
        }
    }
    i
}

/// From just inside an opening `"` at `i`, past the closing one.
fn skip_string(b: &[u8], mut i: usize, line: &mut usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => {
                *line += usize::from(b.get(i + 1) == Some(&b'\n'));
                i += 2;
            }
            b'"' => return i + 1,
            c => {
                *line += usize::from(c == b'\n');
                i += 1;
            }
        }
    }
    i
}

/// From the `'` at `i`, past a character literal or a lifetime.
fn skip_char_or_lifetime(text: &str, i: usize) -> usize {
    let b = text.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        let mut end = i + 3;
        while end < b.len() && b[end] != b'\'' && b[end] != b'\n' {
            end += 1;
        }
        return end + 1;
    }
    let width = text[i + 1..].chars().next().map_or(0, char::len_utf8);
    if b.get(i + 1 + width) == Some(&b'\'') {
        return i + 2 + width;
    }
    let mut end = i + 1;
    while end < b.len() && is_ident_char(b[end]) {
        end += 1;
    }
    end
}

fn is_punct(token: Option<&Token>, c: char) -> bool {
    token.is_some_and(|t| t.tok == Tok::Punct(c))
}

fn is_ident(token: Option<&Token>, word: &str) -> bool {
    token.is_some_and(|t| t.tok == Tok::Ident(word))
}

/// `#[cfg(test)]` at `i`: how many tokens it takes.
fn cfg_test_at(toks: &[Token], i: usize) -> Option<usize> {
    let inner = usize::from(is_punct(toks.get(i + 1), '!'));
    let want = ["[", "cfg", "(", "test", ")", "]"];
    let at = |k: usize| toks.get(i + 1 + inner + k);
    let matches = is_punct(toks.get(i), '#')
        && want.iter().enumerate().all(|(k, w)| match at(k) {
            Some(Token {
                tok: Tok::Ident(word),
                ..
            }) => word == w,
            Some(Token {
                tok: Tok::Punct(c), ..
            }) => w.len() == 1 && w.starts_with(*c),
            _ => false,
        });
    matches.then_some(1 + inner + want.len())
}

/// The tokens outside items marked `#[cfg(test)]` (a helper, a test-only
/// field, variant, match arm or impl); none if the file itself is
/// (`#![cfg(test)]`).
fn without_test_items(toks: Vec<Token<'_>>) -> Vec<Token<'_>> {
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let Some(len) = cfg_test_at(&toks, i) else {
            out.push(toks[i]);
            i += 1;
            continue;
        };
        if is_punct(toks.get(i + 1), '!') {
            return Vec::new();
        }
        i += len;
        while is_punct(toks.get(i), '#') && is_punct(toks.get(i + 1), '[') {
            i = past_group(&toks, i + 1);
        }
        i = end_of_item(&toks, i);
    }
    out
}

/// From the opening bracket at `i`, past its matching close.
fn past_group(toks: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < toks.len() {
        match toks[i].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn",
    "impl",
    "struct",
    "enum",
    "union",
    "trait",
    "mod",
    "use",
    "static",
    "const",
    "type",
    "macro_rules",
    "extern",
];

/// Where the item (or field, variant, statement, match arm) starting at
/// `start` ends. An item ends at its `;` or its closing brace; the others
/// also at a `,` outside brackets, and a field's type at a `,` outside
/// its generic arguments.
fn end_of_item(toks: &[Token], start: usize) -> usize {
    let mut first = start;
    while matches!(
        toks.get(first).map(|t| t.tok),
        Some(Tok::Ident("pub" | "async" | "unsafe" | "default"))
    ) {
        first += 1;
        if is_punct(toks.get(first), '(') {
            first = past_group(toks, first);
        }
    }
    let word = match toks.get(first).map(|t| t.tok) {
        Some(Tok::Ident(word)) => word,
        _ => "",
    };
    let item = ITEM_KEYWORDS.contains(&word);
    let field = !item && is_punct(toks.get(first + 1), ':');
    let (mut depth, mut angles) = (0usize, 0usize);
    let mut i = start;
    while i < toks.len() {
        let previous_dash = i > 0 && is_punct(toks.get(i - 1), '-');
        match toks[i].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') if depth == 0 => return i,
            Tok::Punct(close @ (')' | ']' | '}')) => {
                depth -= 1;
                if depth == 0 && close == '}' {
                    match toks.get(i + 1).map(|t| t.tok) {
                        Some(Tok::Punct(';' | ',')) => return i + 2,
                        Some(Tok::Punct('.' | '?') | Tok::Ident("else")) => {}
                        _ => return i + 1,
                    }
                }
            }
            Tok::Punct('<') if field => angles += 1,
            Tok::Punct('>') if field && !previous_dash => angles = angles.saturating_sub(1),
            Tok::Punct(';') if depth == 0 => return i + 1,
            Tok::Punct(',') if depth == 0 && !item && angles == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The module path of a source file: `src/a/b/c.rs` is `a::b::c`,
/// `src/a/b/mod.rs` is `a::b`, `src/lib.rs` the crate root.
fn module_path(rel: &str) -> Vec<String> {
    let inner = rel.strip_prefix("src/").unwrap_or(rel);
    let mut parts: Vec<String> = inner.split('/').map(str::to_string).collect();
    let file = parts.pop().unwrap_or_default();
    if !matches!(file.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
        parts.push(file.trim_end_matches(".rs").to_string());
    }
    parts
}

/// Files of modules declared only for tests (`#[cfg(test)] mod x;`, or
/// any `mod x;` of a test file): each an exact path, or a folder ending
/// in `/` for its submodules.
pub(super) fn test_only_modules(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let dir = match rel.rsplit_once('/') {
            Some((dir, "mod.rs" | "lib.rs" | "main.rs")) => {
                format!("{dir}/")
            }
            _ => format!("{}/", rel.trim_end_matches(".rs")),
        };
        let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        let test_file = is_test_file(rel);
        let (mut test_attr, mut path_attr) = (false, None);
        for line in text.lines().map(str::trim) {
            if line == "#[cfg(test)]" {
                test_attr = true;
            } else if let Some(path) = line.strip_prefix("#[path = \"") {
                path_attr = path.strip_suffix("\"]").map(str::to_string);
            } else if !line.starts_with("#[") && !line.starts_with("//") {
                let declared = line
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .strip_prefix("mod ")
                    .and_then(|rest| rest.strip_suffix(';'));
                if let Some(name) = declared.filter(|_| test_attr || test_file) {
                    match &path_attr {
                        Some(path) => out.push(format!("{parent}/{path}")),
                        None => {
                            out.push(format!("{dir}{name}.rs"));
                            out.push(format!("{dir}{name}/"));
                        }
                    }
                }
                test_attr = false;
                path_attr = None;
            }
        }
    }
    out
}

/// Whether `rel` is one of the `test_only_modules`.
pub(super) fn in_test_only_module(rel: &str, test_only: &[String]) -> bool {
    test_only
        .iter()
        .any(|t| rel == t || (t.ends_with('/') && rel.starts_with(t.as_str())))
}

/// The Rust files of `src/` that are not test code, by path.
fn code_files(files: &[(String, String)]) -> Vec<&(String, String)> {
    let test_only = test_only_modules(files);
    let mut out: Vec<_> = files
        .iter()
        .filter(|(rel, _)| rel.starts_with("src/") && rel.ends_with(".rs") && !is_test_file(rel))
        .filter(|(rel, _)| !in_test_only_module(rel, &test_only))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The top-level modules: the folders and files directly under `src/`
/// with non-test code, except the crate root and the binary.
pub(super) fn top_modules(files: &[(String, String)]) -> BTreeSet<String> {
    code_files(files)
        .into_iter()
        .filter_map(|(rel, _)| module_path(rel).into_iter().next())
        .filter(|m| m != "lib" && m != "main")
        .collect()
}

/// One import: the top-level module of a file names another, at `at`
/// (`path:line`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Edge {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) at: String,
}

/// The first segments a path tail names, from `j` (just after `crate::`
/// or a `super::` chain reaching the crate root): `x` of `x::…`, and each
/// element's first segment in a group `{a::X, b::{Y, Z}, c}`.
fn tail_names<'a>(toks: &[Token<'a>], j: usize) -> Vec<(&'a str, usize)> {
    match toks.get(j).map(|t| t.tok) {
        Some(Tok::Ident(name)) => vec![(name, toks[j].line)],
        Some(Tok::Punct('{')) => {
            let mut names = Vec::new();
            let (mut depth, mut element_start) = (1usize, true);
            for token in &toks[j + 1..] {
                match token.tok {
                    Tok::Ident(name) if depth == 1 && element_start => {
                        names.push((name, token.line));
                    }
                    Tok::Punct('{') => depth += 1,
                    Tok::Punct('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                element_start = depth == 1 && token.tok == Tok::Punct(',');
            }
            names
        }
        _ => Vec::new(),
    }
}

/// Whether the path segment at `i` starts a path (not `a::super`), a
/// leading `self::` aside.
fn starts_path(toks: &[Token], i: usize) -> bool {
    if i == 0 || toks[i - 1].tok != Tok::PathSep {
        return true;
    }
    i >= 2 && is_ident(toks.get(i - 2), "self") && (i == 2 || toks[i - 3].tok != Tok::PathSep)
}

/// The imports of one file to other top-level modules.
fn file_edges(rel: &str, text: &str, modules: &BTreeSet<String>) -> Vec<Edge> {
    let file_module = module_path(rel);
    let Some(top) = file_module.first() else {
        return Vec::new();
    };
    let code = non_test_code(text);
    let toks = without_test_items(tokens(&code));
    let mut edges = Vec::new();
    // Inline `mod name { … }` blocks, with the brace depth inside each.
    let mut scopes: Vec<(&str, usize)> = Vec::new();
    let mut depth = 0;
    for i in 0..toks.len() {
        let named = match toks[i].tok {
            Tok::Punct('{') => {
                depth += 1;
                if let (true, Some(Tok::Ident(name))) = (
                    i >= 2 && is_ident(toks.get(i - 2), "mod"),
                    toks.get(i - 1).map(|t| t.tok),
                ) {
                    scopes.push((name, depth));
                }
                continue;
            }
            Tok::Punct('}') => {
                if scopes.last().is_some_and(|s| s.1 == depth) {
                    scopes.pop();
                }
                depth = depth.saturating_sub(1);
                continue;
            }
            Tok::Ident("crate") if toks.get(i + 1).map(|t| t.tok) == Some(Tok::PathSep) => {
                if !starts_path(&toks, i) {
                    continue;
                }
                tail_names(&toks, i + 2)
            }
            Tok::Ident("super") if starts_path(&toks, i) => {
                let mut j = i;
                while is_ident(toks.get(j), "super")
                    && toks.get(j + 1).map(|t| t.tok) == Some(Tok::PathSep)
                {
                    j += 2;
                }
                // Up from the module the code is in, inline ones included:
                // only a chain reaching the crate root leaves this module.
                let here = file_module.len() + scopes.len();
                if (j - i) / 2 != here {
                    continue;
                }
                tail_names(&toks, j)
            }
            _ => continue,
        };
        for (name, line) in named {
            if name != top && modules.contains(name) {
                edges.push(Edge {
                    from: top.clone(),
                    to: name.to_string(),
                    at: format!("{rel}:{line}"),
                });
            }
        }
    }
    edges
}

/// Every import between top-level modules in the non-test code of
/// `files`, in file and line order.
pub(super) fn import_edges(files: &[(String, String)]) -> Vec<Edge> {
    let modules = top_modules(files);
    code_files(files)
        .into_iter()
        .flat_map(|(rel, text)| file_edges(rel, text, &modules))
        .collect()
}

/// What in `files` breaks the layer table: a module without a row, and
/// each import not in its module's row.
pub(super) fn layer_violations(
    files: &[(String, String)],
    layers: &[(&str, &[&str])],
) -> Vec<String> {
    let rows: BTreeMap<&str, &[&str]> = layers.iter().copied().collect();
    let mut out: Vec<String> = top_modules(files)
        .into_iter()
        .filter(|m| !rows.contains_key(m.as_str()))
        .map(|m| format!("add {m} to the layer table"))
        .collect();
    for edge in import_edges(files) {
        if let Some(row) = rows.get(edge.from.as_str())
            && !row.contains(&edge.to.as_str())
        {
            out.push(format!(
                "{}: {} imports {} (not in {}'s row)",
                edge.at, edge.from, edge.to, edge.from
            ));
        }
    }
    out
}

/// `None` if the imports of `files` sort topologically; else one shortest
/// cycle, `a -> b -> a`, with where each hop is imported, and every module
/// on a cycle.
pub(super) fn import_cycle(files: &[(String, String)]) -> Option<String> {
    let mut hops: BTreeMap<(String, String), String> = BTreeMap::new();
    for edge in import_edges(files) {
        hops.entry((edge.from, edge.to)).or_insert(edge.at);
    }
    let mut pending: BTreeMap<&str, usize> = BTreeMap::new();
    for (from, to) in hops.keys() {
        pending.entry(from.as_str()).or_insert(0);
        *pending.entry(to.as_str()).or_insert(0) += 1;
    }
    let mut ready: VecDeque<&str> = pending
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(m, _)| *m)
        .collect();
    while let Some(module) = ready.pop_front() {
        pending.remove(module);
        for (from, to) in hops.keys() {
            if from == module
                && let Some(n) = pending.get_mut(to.as_str())
            {
                *n -= 1;
                if *n == 0 {
                    ready.push_back(to.as_str());
                }
            }
        }
    }
    if pending.is_empty() {
        return None;
    }
    // What the sort leaves is the modules on a cycle and those they
    // import: name only the former.
    let left: BTreeSet<&str> = pending.keys().copied().collect();
    let cycles: Vec<Vec<&str>> = left
        .iter()
        .filter_map(|start| shortest_cycle(start, &left, &hops))
        .collect();
    let cycle = cycles.iter().min_by_key(|c| c.len())?;
    let mut text = cycle.join(" -> ");
    for pair in cycle.windows(2) {
        let at = &hops[&(pair[0].to_string(), pair[1].to_string())];
        text.push_str(&format!("\n  {} -> {}: {at}", pair[0], pair[1]));
    }
    let on_cycles: Vec<&str> = cycles.iter().map(|c| c[0]).collect();
    text.push_str(&format!("\nmodules on a cycle: {}", on_cycles.join(", ")));
    Some(text)
}

/// The shortest path of imports from `start` back to it within `left`,
/// both ends included.
fn shortest_cycle<'a>(
    start: &'a str,
    left: &BTreeSet<&'a str>,
    hops: &'a BTreeMap<(String, String), String>,
) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(module) = queue.pop_front() {
        for (from, to) in hops.keys() {
            if from != module || !left.contains(to.as_str()) {
                continue;
            }
            if to == start {
                let mut path = vec![start, module];
                let mut at = module;
                while at != start {
                    at = came_from[at];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(to.as_str()) {
                came_from.insert(to.as_str(), module);
                queue.push_back(to.as_str());
            }
        }
    }
    None
}

/// The layer table of ARCHITECTURE.md: the Markdown table
/// `Module | Owns | May import` under the heading "Layers", each module
/// and import in backticks, `—` for none.
pub(super) fn layers_in_doc(doc: &str) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut lines = doc
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.trim_start_matches('#').trim() == "Layers"))
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with('|'));
    let cells = |line: &str| -> Vec<String> {
        let line = line.trim();
        let line = line.strip_prefix('|').unwrap_or(line);
        let line = line.strip_suffix('|').unwrap_or(line);
        line.split('|').map(|c| c.trim().to_string()).collect()
    };
    let header = lines.next().ok_or("no table under a \"Layers\" heading")?;
    if cells(header) != ["Module", "Owns", "May import"] {
        return Err(format!(
            "the Layers table's header is `{header}`, not `| Module | Owns | May import |`"
        ));
    }
    lines.next(); // the |---|---|---| line
    let mut table = BTreeMap::new();
    for line in lines.take_while(|l| l.trim_start().starts_with('|')) {
        let row = cells(line);
        let [module, _, imports] = row.as_slice() else {
            return Err(format!("not three cells: {line}"));
        };
        let module = match ticked(module).as_slice() {
            [one] => one.clone(),
            _ => return Err(format!("not one module in backticks: {line}")),
        };
        let imports: BTreeSet<String> = if imports == "—" {
            BTreeSet::new()
        } else {
            ticked(imports).into_iter().collect()
        };
        if imports.is_empty() && row[2] != "—" {
            return Err(format!("no import in backticks, nor `—`: {line}"));
        }
        if table.insert(module.clone(), imports).is_some() {
            return Err(format!("`{module}` has two rows"));
        }
    }
    Ok(table)
}

/// The words in backticks in `cell`.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// How the table of the document differs from `layers`.
pub(super) fn table_differences(
    doc: &BTreeMap<String, BTreeSet<String>>,
    layers: &[(&str, &[&str])],
) -> Vec<String> {
    let code: BTreeMap<String, BTreeSet<String>> = layers
        .iter()
        .map(|(m, row)| (m.to_string(), row.iter().map(|i| i.to_string()).collect()))
        .collect();
    let mut out = Vec::new();
    if code.len() != layers.len() {
        out.push("LAYERS has a module twice".to_string());
    }
    for (module, row) in &code {
        let Some(written) = doc.get(module) else {
            out.push(format!("`{module}` is in LAYERS, not in ARCHITECTURE.md"));
            continue;
        };
        for import in row.difference(written) {
            out.push(format!(
                "`{module}` may import `{import}` in LAYERS, not in ARCHITECTURE.md"
            ));
        }
        for import in written.difference(row) {
            out.push(format!(
                "`{module}` may import `{import}` in ARCHITECTURE.md, not in LAYERS"
            ));
        }
    }
    for module in doc.keys().filter(|m| !code.contains_key(*m)) {
        out.push(format!("`{module}` is in ARCHITECTURE.md, not in LAYERS"));
    }
    out
}
