//! Finding hooks: the bundled ones, then each root's child folders holding a `HOOK.md` (hidden
//! folders and `node_modules` skipped, sorted by name) and the hook
//! folders a package among them declares in its `package.json`
//! (`openclaw.hooks`, paths that stay inside the package), read with the
//! skills' frontmatter and metadata rules; the handler is the executable
//! file `handler` beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use almanac_markdown::frontmatter::{self, BlockStatus};

use super::{Handler, Hook, HookFailure, HookSource};
use crate::config::LoadedConfig;
use crate::skills::parse;

/// Largest `HOOK.md` read.
const MAX_HOOK_FILE_BYTES: u64 = 256_000;

/// Handler files of OpenClaw's hooks that almanac cannot run.
const UNSUPPORTED_HANDLERS: &[&str] = &["handler.ts", "handler.js", "index.ts", "index.js"];

/// One folder of hooks.
#[derive(Debug, Clone)]
pub(crate) struct HookRoot {
    pub source: HookSource,
    pub dir: PathBuf,
}

/// Everything hooks are computed from.
#[derive(Debug, Clone)]
pub(crate) struct HooksInputs {
    /// Lowest precedence first.
    pub roots: Vec<HookRoot>,
    pub config: LoadedConfig,
    /// The process environment (PATH, variables hooks require).
    pub env: BTreeMap<String, String>,
}

/// What discovery found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Sorted by name.
    pub hooks: Vec<Hook>,
    pub failures: Vec<HookFailure>,
    pub warnings: Vec<String>,
}

/// Reads the hooks of `roots`, merging same-named ones by source.
pub(crate) fn discover(roots: &[HookRoot], bundled: Vec<Hook>) -> Found {
    let mut found = Found::default();
    let mut by_name: BTreeMap<String, Hook> =
        bundled.into_iter().map(|h| (h.name.clone(), h)).collect();
    let mut ordered: Vec<&HookRoot> = roots.iter().collect();
    ordered.sort_by_key(|r| r.source);
    for root in ordered {
        let (dirs, warnings) = hook_dirs(root);
        found.warnings.extend(warnings);
        for dir in dirs {
            let hook = match load(&dir, root.source) {
                Ok(hook) => hook,
                Err(reason) => {
                    found.failures.push(HookFailure {
                        name: folder_name(&dir),
                        file_path: dir.join("HOOK.md"),
                        source: root.source,
                        reason,
                    });
                    continue;
                }
            };
            match by_name.get(&hook.name) {
                Some(previous) if !hook.source.may_replace(previous.source) => {
                    found.warnings.push(format!(
                        "{} hook `{}` ({}) ignored: a {} hook of that name exists ({}) and a {0} hook may not replace it",
                        hook.source.short(),
                        hook.name,
                        hook.file_path.display(),
                        previous.source.short(),
                        previous.file_path.display()
                    ));
                }
                Some(previous) if previous.source != hook.source => {
                    by_name.insert(hook.name.clone(), hook);
                }
                Some(previous) => {
                    found.warnings.push(format!(
                        "two {} hooks are named `{}`: {} replaces {}",
                        hook.source.short(),
                        hook.name,
                        hook.file_path.display(),
                        previous.file_path.display()
                    ));
                    by_name.insert(hook.name.clone(), hook);
                }
                None => {
                    by_name.insert(hook.name.clone(), hook);
                }
            }
        }
    }
    found.hooks = by_name.into_values().collect();
    found
}

fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The child folders of a root that hold a `HOOK.md`, sorted, then the
/// hook folders packages among them declare (`package.json`
/// `openclaw.hooks`, paths inside the package); a folder linked from
/// elsewhere counts only in the managed source. Also what could not be
/// used, as warnings.
fn hook_dirs(root: &HookRoot) -> (Vec<PathBuf>, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(&root.dir) else {
        return (Vec::new(), Vec::new());
    };
    let real_root = std::fs::canonicalize(&root.dir).unwrap_or_else(|_| root.dir.clone());
    let inside = |p: &Path, within: &Path| {
        root.source == HookSource::Managed
            || std::fs::canonicalize(p).is_ok_and(|real| real.starts_with(within))
    };
    let mut children: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name != "node_modules"
        })
        .map(|e| e.path())
        .filter(|p| inside(p, &real_root))
        .collect();
    children.sort();
    let mut dirs = Vec::new();
    let mut warnings = Vec::new();
    for child in children {
        if child.join("HOOK.md").is_file() {
            dirs.push(child);
        } else if child.join("package.json").is_file() {
            match package_hooks(&child) {
                Ok(declared) => dirs.extend(declared),
                Err(why) => warnings.push(format!(
                    "hook package {} skipped: {why}",
                    child.join("package.json").display()
                )),
            }
        }
    }
    (dirs, warnings)
}

/// The hook folders `package.json` of `package` declares in
/// `openclaw.hooks`: each inside the package and holding a `HOOK.md`.
fn package_hooks(package: &Path) -> Result<Vec<PathBuf>, String> {
    let manifest = package.join("package.json");
    let text = read_capped(&manifest)?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(declared) = json.pointer("/openclaw/hooks") else {
        return Ok(Vec::new());
    };
    let Some(paths) = declared.as_array() else {
        return Err("`openclaw.hooks` is not a list of folders".into());
    };
    let real_package = std::fs::canonicalize(package).map_err(|e| e.to_string())?;
    let mut dirs = Vec::new();
    for path in paths {
        let Some(path) = path.as_str() else {
            return Err("`openclaw.hooks` lists something that is not a path".into());
        };
        let dir = package.join(path);
        match std::fs::canonicalize(&dir) {
            Ok(real) if real.starts_with(&real_package) && real != real_package => {}
            Ok(_) => return Err(format!("`{path}` is outside the package")),
            Err(e) => return Err(format!("`{path}`: {e}")),
        }
        if !dir.join("HOOK.md").is_file() {
            return Err(format!("`{path}` has no HOOK.md"));
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Loads the hook in `dir`.
fn load(dir: &Path, source: HookSource) -> Result<Hook, String> {
    let file_path = dir.join("HOOK.md");
    let text = read_capped(&file_path)?;
    parse_hook_md(&text, dir, source)
}

fn read_capped(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_HOOK_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_HOOK_FILE_BYTES {
        return Err(format!(
            "HOOK.md is larger than {MAX_HOOK_FILE_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Parses `HOOK.md` text of the hook folder `dir`.
pub(crate) fn parse_hook_md(text: &str, dir: &Path, source: HookSource) -> Result<Hook, String> {
    let fm = frontmatter::parse(text);
    match fm.status {
        BlockStatus::Missing => {
            return Err("no frontmatter: HOOK.md must start with a `---` line".to_string());
        }
        BlockStatus::Unclosed => {
            return Err("the frontmatter has no closing `---` line".to_string());
        }
        BlockStatus::Present => {}
    }
    let mut diagnostics: Vec<String> = fm.diagnostics.iter().map(ToString::to_string).collect();
    let field = |k: &str| fm.get(k).map(str::trim).filter(|v| !v.is_empty());
    let dir_name = folder_name(dir);
    let name = field("name").unwrap_or(&dir_name).to_string();
    if name.is_empty() || name.chars().any(|c| c.is_control() || c == '/' || c == '.') {
        return Err(format!(
            "bad name {name:?}: a hook name is a word such as `session-memory`"
        ));
    }
    let (block, gating) = parse::metadata_gating(field("metadata"), &mut diagnostics);
    let mut events: Vec<String> = block
        .as_ref()
        .and_then(|b| b.get("events"))
        .map(parse::list_from_value)
        .unwrap_or_default();
    if events.is_empty()
        && let Some(top) = field("events")
    {
        events = parse::list_from_value(&serde_json::Value::String(top.to_string()));
    }
    if events.is_empty() {
        diagnostics.push("no `events` in metadata.openclaw: the hook never runs".to_string());
    }
    let handler = find_handler(dir);
    if let Handler::Unsupported { path } = &handler {
        diagnostics.push(format!(
            "{} is not supported: almanac runs an executable file named `handler`",
            path.display()
        ));
    }
    Ok(Hook {
        name,
        description: field("description").unwrap_or_default().to_string(),
        source,
        file_path: dir.join("HOOK.md"),
        base_dir: dir.to_path_buf(),
        emoji: gating.emoji,
        homepage: field("homepage").map(str::to_string).or(gating.homepage),
        events,
        always: gating.always,
        os: gating.os,
        requires: gating.requires,
        install: gating.install,
        handler,
        diagnostics,
    })
}

/// The handler beside `HOOK.md`.
fn find_handler(dir: &Path) -> Handler {
    let path = dir.join("handler");
    if path.is_file() {
        return Handler::Executable { path };
    }
    UNSUPPORTED_HANDLERS
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .map_or(Handler::Missing, |path| Handler::Unsupported { path })
}
