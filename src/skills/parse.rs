//! Reading one skill: a `SKILL.md` folder (YAML frontmatter + Markdown) or
//! a plugin manifest (`skill.json`, `manifest.json`, `plugin.json`).
//!
//! Rules (shared by both formats, so OpenClaw, Arka and Hermes skills gate
//! the same way):
//! * `metadata` is JSON5 (one-line JSON, or a YAML map the frontmatter
//!   parser turned into JSON); its first object among `openclaw`,
//!   `clawdbot`, `moltbot`, `arka`, `hermes` is the skill's metadata block.
//! * The block's `requires`, `os` and `permissions` are merged into the
//!   top-level ones the same way for all three: the block wins where it
//!   says something (`requires` key by key), the top level fills the rest.
//! * `os` accepts the names people write: `macos`/`mac`/`osx` → `darwin`,
//!   `win`/`windows` → `win32`.
//! * Lists accept a JSON array or a comma-separated string.
//! * Install specs are validated per kind; an invalid one is dropped with a
//!   diagnostic, never silently.
//! * Names are identifiers: `SKILL.md` names follow the AgentSkills rule
//!   (lowercase letters, digits, `-`, and `_` as Arka writes it; at most 64
//!   characters), plugin names Arka's (`^[a-z][a-z0-9_-]{1,48}$`).
//! * A skill that cannot load returns the reason (never dropped silently).

use std::path::Path;

use almanac_markdown::frontmatter::{self, BlockStatus};
use serde_json::{Map, Value};

use super::types::{Dispatch, InstallSpec, Requirements, RunSpec, Skill, SkillFormat, SourceKind};

/// The metadata keys a block may live under, first match wins.
const METADATA_KEYS: &[&str] = &["openclaw", "clawdbot", "moltbot", "arka", "hermes"];

/// Longest `SKILL.md` name (AgentSkills).
const MAX_NAME_CHARS: usize = 64;

/// File names of plugin manifests, in the order they are looked for.
pub(crate) const MANIFEST_NAMES: &[&str] = &["skill.json", "manifest.json", "plugin.json"];

/// Entry files looked for when a manifest names none.
const DEFAULT_ENTRIES: &[&str] = &[
    "run.py",
    "main.py",
    "skill.py",
    "run.sh",
    "index.js",
    "index.mjs",
    "run",
];

/// Parses `SKILL.md` text. `dir_name` names the skill when the frontmatter
/// does not.
pub(crate) fn parse_skill_md(
    path: &Path,
    base_dir: &Path,
    dir_name: &str,
    source: SourceKind,
    text: &str,
) -> Result<Skill, String> {
    let fm = frontmatter::parse(text);
    match fm.status {
        BlockStatus::Missing => {
            return Err("no frontmatter: SKILL.md must start with a `---` line".to_string());
        }
        BlockStatus::Unclosed => {
            return Err("the frontmatter has no closing `---` line".to_string());
        }
        BlockStatus::Present => {}
    }
    let mut diagnostics: Vec<String> = fm.diagnostics.iter().map(ToString::to_string).collect();
    let field = |k: &str| fm.get(k).map(str::trim).filter(|v| !v.is_empty());
    let name = field("name").unwrap_or(dir_name).to_string();
    validate_skill_name(&name, field("name").is_none())?;
    let description = field("description")
        .ok_or_else(|| "no description: the frontmatter needs a `description`".to_string())?
        .to_string();

    let (block, meta_diag) = metadata_block(field("metadata"));
    diagnostics.extend(meta_diag);
    let top = Top {
        requires: field("requires").and_then(|t| json_object(t, "requires", &mut diagnostics)),
        os: field("os").map(list_from_text),
        permissions: field("permissions").map(list_from_text),
    };
    let mut skill = base_skill(
        name,
        description,
        path,
        base_dir,
        source,
        SkillFormat::SkillMd,
    );
    skill.homepage = field("homepage").map(str::to_string);
    skill.user_invocable = field("user-invocable")
        .and_then(crate::host::parse_bool)
        .unwrap_or(true);
    skill.disable_model_invocation = field("disable-model-invocation")
        .and_then(crate::host::parse_bool)
        .unwrap_or(false);
    skill.version = field("version").map(str::to_string);
    skill.triggers = field("triggers").map(list_from_text).unwrap_or_default();
    let dispatch = field("command-dispatch").or(field("command_dispatch"));
    let tool = field("command-tool").or(field("command_tool"));
    if dispatch.is_some_and(|d| d.eq_ignore_ascii_case("tool")) {
        match tool {
            Some(tool) => {
                skill.dispatch = Some(Dispatch {
                    kind: "tool",
                    tool_name: tool.to_string(),
                    arg_mode: "raw",
                });
            }
            None => diagnostics
                .push("`command-dispatch: tool` without `command-tool`: ignored".to_string()),
        }
    }
    apply_metadata(&mut skill, block.as_ref(), top, &mut diagnostics);
    skill.run = Some(RunSpec::Prompt);
    skill.diagnostics = diagnostics;
    finish_triggers(&mut skill);
    Ok(skill)
}

/// Parses a plugin manifest (JSON or JSON5). `dir` is the plugin folder.
pub(crate) fn parse_manifest(
    path: &Path,
    dir: &Path,
    dir_name: &str,
    source: SourceKind,
    text: &str,
) -> Result<Skill, String> {
    let value: Value =
        json5_value(text).map_err(|e| format!("the manifest is not valid JSON: {e}"))?;
    let Value::Object(m) = value else {
        return Err("the manifest is not a JSON object".to_string());
    };
    let mut diagnostics = Vec::new();
    let text_field = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let name = text_field("name").unwrap_or(dir_name).to_string();
    validate_plugin_name(&name)?;
    let description = text_field("description")
        .map(str::to_string)
        .unwrap_or_else(|| format!("Plugin {name}"));
    if text_field("description").is_none() {
        diagnostics.push("no `description` in the manifest; a generic one is shown".to_string());
    }
    let mut skill = base_skill(
        name.clone(),
        description,
        path,
        dir,
        source,
        SkillFormat::Manifest,
    );
    skill.version = Some(text_field("version").unwrap_or("0.1.0").to_string());
    skill.homepage = text_field("homepage").map(str::to_string);
    skill.disabled_by_manifest = m.get("enabled") == Some(&Value::Bool(false));
    skill.triggers = m.get("triggers").map(list_from_value).unwrap_or_default();
    if let Some(b) = m
        .get("user-invocable")
        .or(m.get("userInvocable"))
        .and_then(as_bool)
    {
        skill.user_invocable = b;
    }
    if let Some(b) = m
        .get("disable-model-invocation")
        .or(m.get("disableModelInvocation"))
        .and_then(as_bool)
    {
        skill.disable_model_invocation = b;
    }
    let (block, meta_diag) = match m.get("metadata") {
        Some(Value::Object(meta)) => first_block(meta),
        Some(Value::String(s)) => metadata_block(Some(s)),
        Some(_) => (
            None,
            vec!["`metadata` is not an object: ignored".to_string()],
        ),
        None => (None, Vec::new()),
    };
    diagnostics.extend(meta_diag);
    let top = Top {
        requires: m.get("requires").and_then(|v| v.as_object().cloned()),
        os: m.get("os").map(list_from_value),
        permissions: m.get("permissions").map(list_from_value),
    };
    if m.get("always").and_then(as_bool) == Some(true) {
        skill.always = true;
    }
    apply_metadata(&mut skill, block.as_ref(), top, &mut diagnostics);
    skill.run = Some(run_spec(&m, dir, &name, &mut diagnostics));
    skill.diagnostics = diagnostics;
    finish_triggers(&mut skill);
    Ok(skill)
}

/// Fills a SKILL.md skill with what a manifest next to it adds: how to run
/// it, its triggers and version.
pub(crate) fn merge_manifest_into(skill: &mut Skill, manifest: Skill) {
    skill.run = manifest.run;
    for t in manifest.triggers {
        if !skill.triggers.contains(&t) {
            skill.triggers.push(t);
        }
    }
    if skill.version.is_none() {
        skill.version = manifest.version;
    }
    skill.disabled_by_manifest |= manifest.disabled_by_manifest;
    skill.diagnostics.extend(manifest.diagnostics);
}

fn base_skill(
    name: String,
    description: String,
    path: &Path,
    base_dir: &Path,
    source: SourceKind,
    format: SkillFormat,
) -> Skill {
    Skill {
        skill_key: name.clone(),
        name,
        description,
        file_path: path.to_path_buf(),
        base_dir: base_dir.to_path_buf(),
        source,
        format,
        emoji: None,
        homepage: None,
        primary_env: None,
        version: None,
        always: false,
        os: Vec::new(),
        requires: Requirements::default(),
        permissions: Vec::new(),
        install: Vec::new(),
        user_invocable: true,
        disable_model_invocation: false,
        disabled_by_manifest: false,
        dispatch: None,
        triggers: Vec::new(),
        run: None,
        diagnostics: Vec::new(),
        shadows: Vec::new(),
    }
}

/// `SKILL.md` names follow the AgentSkills rule: 1–64 lowercase letters,
/// digits and hyphens, neither starting nor ending with a hyphen, no
/// `--`. An underscore is accepted too, as Arka and Hermes skills use it
/// (`demo_echo`). The name may differ from the folder's (OpenClaw merges
/// skills by name, and many published skills do); a skill without a
/// `name` takes the folder's, which must then follow the rule.
fn validate_skill_name(name: &str, from_folder: bool) -> Result<(), String> {
    let bad = |why: &str| {
        let shown: String = name.chars().take(80).collect();
        let origin = if from_folder {
            " (the folder's name)"
        } else {
            ""
        };
        Err(format!(
            "bad name {shown:?}{origin}: {why}; a skill name is 1–{MAX_NAME_CHARS} lowercase letters, digits and `-` (or `_`), not starting or ending with `-`"
        ))
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return bad(&format!("longer than {MAX_NAME_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return bad("it contains control characters");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return bad(&format!("{c:?} is not allowed"));
    }
    if name.starts_with(['-', '_']) || name.ends_with(['-', '_']) {
        return bad("it starts or ends with a separator");
    }
    if name.contains("--") {
        return bad("it contains `--`");
    }
    Ok(())
}

/// Plugin names are identifiers (`^[a-z][a-z0-9_-]{1,48}$`, as Arka has
/// them).
fn validate_plugin_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && (2..=49).contains(&name.len())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad name `{name}`: plugin names are lowercase letters, digits, `_` and `-` (2–49, starting with a letter)"
        ))
    }
}

/// Top-level `requires` / `os` / `permissions` before merging.
struct Top {
    requires: Option<Map<String, Value>>,
    os: Option<Vec<String>>,
    permissions: Option<Vec<String>>,
}

/// Parses JSON5 text. Nearly all of it is plain JSON in practice, which the
/// JSON parser reads far faster; JSON5 is the fallback, and reads any JSON
/// to the same value.
fn json5_value(text: &str) -> Result<Value, json5::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(_) => json5::from_str(text),
    }
}

/// What a `metadata` block says about gating, for files other than skills
/// (`HOOK.md`) that use the same block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gating {
    pub emoji: Option<String>,
    pub homepage: Option<String>,
    pub always: bool,
    pub os: Vec<String>,
    pub requires: Requirements,
    pub install: Vec<InstallSpec>,
}

/// Reads the `metadata` frontmatter text: its block (first of
/// `openclaw`, `clawdbot`, `moltbot`, `arka`, `hermes`) and the gating
/// it declares, with the same rules as a skill's.
pub(crate) fn metadata_gating(
    text: Option<&str>,
    diagnostics: &mut Vec<String>,
) -> (Option<Map<String, Value>>, Gating) {
    let (block, meta_diag) = metadata_block(text);
    diagnostics.extend(meta_diag);
    let mut gating = Gating::default();
    let Some(b) = &block else {
        return (block, gating);
    };
    let text = |k: &str| {
        b.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    gating.emoji = text("emoji");
    gating.homepage = text("homepage");
    gating.always = b.get("always") == Some(&Value::Bool(true));
    gating.os = b
        .get("os")
        .map(list_from_value)
        .unwrap_or_default()
        .iter()
        .map(|o| normalize_os(o))
        .collect();
    if let Some(Value::Object(requires)) = b.get("requires") {
        gating.requires = requirements(requires, diagnostics);
    }
    if let Some(Value::Array(specs)) = b.get("install") {
        for (i, spec) in specs.iter().enumerate() {
            match install_spec(spec, i) {
                Ok(spec) => gating.install.push(spec),
                Err(why) => diagnostics.push(format!("install option {} dropped: {why}", i + 1)),
            }
        }
    }
    (block, gating)
}

/// Parses the `metadata` text and picks its block.
fn metadata_block(text: Option<&str>) -> (Option<Map<String, Value>>, Vec<String>) {
    let Some(text) = text else {
        return (None, Vec::new());
    };
    match json5_value(text) {
        Ok(Value::Object(meta)) => first_block(&meta),
        Ok(_) => (
            None,
            vec!["`metadata` is not an object: ignored".to_string()],
        ),
        Err(e) => (
            None,
            vec![format!("`metadata` is not valid JSON5 ({e}): ignored")],
        ),
    }
}

fn first_block(meta: &Map<String, Value>) -> (Option<Map<String, Value>>, Vec<String>) {
    let block = METADATA_KEYS
        .iter()
        .find_map(|k| meta.get(*k).and_then(Value::as_object).cloned());
    (block, Vec::new())
}

fn json_object(text: &str, key: &str, diagnostics: &mut Vec<String>) -> Option<Map<String, Value>> {
    match json5_value(text) {
        Ok(Value::Object(m)) => Some(m),
        _ => {
            diagnostics.push(format!("`{key}` is not a map: ignored"));
            None
        }
    }
}

fn apply_metadata(
    skill: &mut Skill,
    block: Option<&Map<String, Value>>,
    top: Top,
    diagnostics: &mut Vec<String>,
) {
    let get = |k: &str| block.and_then(|b| b.get(k));
    let text = |k: &str| {
        get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    skill.emoji = text("emoji").or(skill.emoji.take());
    if let Some(h) = text("homepage") {
        skill.homepage.get_or_insert(h);
    }
    if let Some(key) = text("skillKey") {
        skill.skill_key = key;
    }
    skill.primary_env = text("primaryEnv");
    if get("always") == Some(&Value::Bool(true)) {
        skill.always = true;
    }
    // requires: the block wins key by key, the top level fills gaps.
    let mut requires = top.requires.unwrap_or_default();
    if let Some(Value::Object(block_requires)) = get("requires") {
        for (k, v) in block_requires {
            requires.insert(k.clone(), v.clone());
        }
    }
    skill.requires = requirements(&requires, diagnostics);
    let os = get("os")
        .map(list_from_value)
        .or(top.os)
        .unwrap_or_default();
    skill.os = os.iter().map(|o| normalize_os(o)).collect();
    skill.permissions = get("permissions")
        .map(list_from_value)
        .or(top.permissions)
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.to_ascii_lowercase())
        .collect();
    if let Some(Value::Array(specs)) = get("install") {
        for (i, spec) in specs.iter().enumerate() {
            match install_spec(spec, i) {
                Ok(spec) => skill.install.push(spec),
                Err(why) => diagnostics.push(format!("install option {} dropped: {why}", i + 1)),
            }
        }
    }
}

fn requirements(m: &Map<String, Value>, diagnostics: &mut Vec<String>) -> Requirements {
    let list = |k: &str| m.get(k).map(list_from_value).unwrap_or_default();
    let mut config = Vec::new();
    if let Some(value) = m.get("config") {
        match value {
            Value::Array(items) => {
                for item in items {
                    match item.as_str() {
                        Some(s) if !s.trim().is_empty() => config.push(s.trim().to_string()),
                        _ => diagnostics.push(
                            "`requires.config` entries must be config paths (strings): one skipped"
                                .to_string(),
                        ),
                    }
                }
            }
            other => config = list_from_value(other),
        }
    }
    let mut checks = list("checks");
    checks.retain(|c| {
        let known = super::gates::check_description(c).is_some();
        if !known {
            diagnostics.push(format!("unknown check `{c}` in `requires.checks`: ignored"));
        }
        known
    });
    Requirements {
        bins: list("bins"),
        any_bins: m
            .get("anyBins")
            .or(m.get("any_bins"))
            .map(list_from_value)
            .unwrap_or_default(),
        env: list("env"),
        env_any: m
            .get("env_any")
            .or(m.get("envAny"))
            .map(list_from_value)
            .unwrap_or_default(),
        env_optional: m
            .get("env_optional")
            .or(m.get("envOptional"))
            .map(list_from_value)
            .unwrap_or_default(),
        config,
        checks,
        note: m.get("note").and_then(Value::as_str).map(str::to_string),
    }
}

/// Canonical OS names (`darwin`, `linux`, `win32`) for what people write.
pub(crate) fn normalize_os(os: &str) -> String {
    match os.trim().to_ascii_lowercase().as_str() {
        "macos" | "mac" | "osx" | "darwin" | "macosx" => "darwin".to_string(),
        "win" | "windows" | "win32" | "win64" => "win32".to_string(),
        other => other.to_string(),
    }
}

/// A list from a JSON array (strings kept, others as text) or a
/// comma-separated string; trimmed, empties dropped.
pub(crate) fn list_from_value(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.trim().to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect(),
        Value::String(s) => list_from_text(s),
        _ => Vec::new(),
    }
}

/// A list from frontmatter text: JSON array text, or comma-separated.
fn list_from_text(text: &str) -> Vec<String> {
    let mut t = text.trim();
    if t.starts_with('[') {
        if let Ok(v) = json5_value(t) {
            return list_from_value(&v);
        }
        // A YAML flow list with bare words: `[linux, darwin]`.
        t = t.trim_start_matches('[').trim_end_matches(']');
    }
    t.split(',')
        .map(|s| s.trim().trim_matches(['"', '\'']).to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => crate::host::parse_bool(s),
        _ => None,
    }
}

/// Validates one install spec (OpenClaw's rules per kind).
fn install_spec(value: &Value, index: usize) -> Result<InstallSpec, String> {
    let m = value.as_object().ok_or("not an object")?;
    let s = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let kind = s("kind")
        .or(s("type"))
        .ok_or("no `kind`")?
        .to_ascii_lowercase();
    let (target, label) = match kind.as_str() {
        "brew" => {
            let formula = s("formula")
                .or(s("cask"))
                .ok_or("brew needs `formula` or `cask`")?;
            check_chars(formula, "formula", |c| {
                c.is_ascii_alphanumeric() || "@+._/-".contains(c)
            })?;
            if formula.contains("..") {
                return Err("the formula contains `..`".into());
            }
            (formula.to_string(), format!("Install {formula} (brew)"))
        }
        "node" => {
            let package = s("package").ok_or("node needs `package`")?;
            if package.starts_with('-')
                || package.contains("://")
                || package.starts_with('.')
                || package.starts_with('/')
                || package.contains('\\')
                || package.chars().any(char::is_whitespace)
            {
                return Err(format!("`{package}` is not a package-registry name"));
            }
            (package.to_string(), format!("Install {package} (npm)"))
        }
        "go" => {
            let module = s("module").ok_or("go needs `module`")?;
            if module.contains('\\') || module.contains("://") {
                return Err("the module contains `\\` or `://`".into());
            }
            let (path, version) = module
                .split_once('@')
                .map_or((module, None), |(p, v)| (p, Some(v)));
            let part_ok = |p: &str| {
                p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._~+-/".contains(c))
            };
            if !part_ok(path) || version.is_some_and(|v| !part_ok(v)) {
                return Err(format!("`{module}` is not a Go module path"));
            }
            (module.to_string(), format!("Install {module} (go)"))
        }
        "uv" => {
            let package = s("package").ok_or("uv needs `package`")?;
            if package.contains('\\') || package.contains("://") {
                return Err("the package contains `\\` or `://`".into());
            }
            check_chars(package, "package", |c| {
                c.is_ascii_alphanumeric() || "._-[]=<>!~+,".contains(c)
            })?;
            (package.to_string(), format!("Install {package} (uv)"))
        }
        "download" => {
            let url = s("url").ok_or("download needs `url`")?;
            if url.chars().any(char::is_whitespace)
                || !(url.starts_with("https://") || url.starts_with("http://"))
            {
                return Err(format!("`{url}` is not an http(s) URL"));
            }
            if let Some(sha) = s("sha256")
                && (sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()))
            {
                return Err("`sha256` must be 64 hex digits".into());
            }
            let last = url.trim_end_matches('/').rsplit('/').next().unwrap_or(url);
            (url.to_string(), format!("Download {last}"))
        }
        other => {
            return Err(format!(
                "unknown kind `{other}` (brew, node, go, uv or download)"
            ));
        }
    };
    Ok(InstallSpec {
        id: s("id")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}-{index}")),
        label: s("label").map(str::to_string).unwrap_or(label),
        bins: m.get("bins").map(list_from_value).unwrap_or_default(),
        os: m
            .get("os")
            .map(list_from_value)
            .unwrap_or_default()
            .iter()
            .map(|o| normalize_os(o))
            .collect(),
        kind,
        target,
    })
}

fn check_chars(value: &str, what: &str, allowed: impl Fn(char) -> bool) -> Result<(), String> {
    let first_ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || value.starts_with('-') || !value.chars().all(allowed) {
        return Err(format!("`{value}` is not a valid {what}"));
    }
    Ok(())
}

/// How a plugin runs, from its manifest.
fn run_spec(
    m: &Map<String, Value>,
    dir: &Path,
    name: &str,
    diagnostics: &mut Vec<String>,
) -> RunSpec {
    let kind = m
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match kind.as_str() {
        "command" => {
            if let Some(command) = m.get("command").and_then(Value::as_str) {
                return RunSpec::Command {
                    command: command.to_string(),
                };
            }
            diagnostics.push("`type: command` without `command`".to_string());
        }
        "prompt" => return RunSpec::Prompt,
        "mcp" => return RunSpec::Mcp,
        _ => {}
    }
    if let Some(entry) = m.get("entry").and_then(Value::as_str) {
        let path = dir.join(entry);
        if !path.is_file() {
            diagnostics.push(format!("entry `{entry}` does not exist"));
        }
        return RunSpec::Entry { entry: path };
    }
    let fish = format!("{name}.fish");
    for candidate in DEFAULT_ENTRIES
        .iter()
        .copied()
        .chain(std::iter::once(fish.as_str()))
    {
        let path = dir.join(candidate);
        if path.is_file() {
            return RunSpec::Entry { entry: path };
        }
    }
    RunSpec::Prompt
}

/// Lowercases and de-duplicates triggers, putting the name-derived trigger
/// first unless it is declared or the name begins a declared trigger.
fn finish_triggers(skill: &mut Skill) {
    let mut triggers: Vec<String> = Vec::new();
    for t in skill.triggers.drain(..) {
        let t = t
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        if !t.is_empty() && !triggers.contains(&t) {
            triggers.push(t);
        }
    }
    let auto = skill.name.to_lowercase().replace('_', " ");
    let name_lower = skill.name.to_lowercase();
    if !triggers.contains(&auto) && !triggers.iter().any(|t| t.starts_with(&name_lower)) {
        triggers.insert(0, auto);
    }
    skill.triggers = triggers;
}

#[cfg(test)]
mod tests;
