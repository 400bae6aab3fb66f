//! Running a skill (`skills run`), and the environment a skill's process
//! gets.
//!
//! Invariants:
//! * almanac never changes its own environment for a skill. A skill's
//!   process gets the children's allowlist ([`crate::child::env`]), the
//!   variables the skill declares (`requires.env`, `requires.envAny`,
//!   `primaryEnv`, the names in its `skills.entries.<key>.env`) from
//!   almanac's environment (never almanac's own `ALMANAC_*` settings, a
//!   model provider's key, or a variable that changes how programs load),
//!   and its configured values (`skills.entries.<key>.env`, and `apiKey`
//!   as its `primaryEnv`) where the user set nothing. No other child gets
//!   them.
//! * A command template never reaches a shell: it is split into words and
//!   `{args}` is replaced by the arguments, and arguments containing shell
//!   metacharacters are refused anyway.
//! * The interpreter follows the entry's extension (`.py` python3, `.sh`
//!   bash, `.fish` fish, `.js`/`.mjs`/`.cjs` node); an executable entry
//!   without one runs directly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::types::{RunSpec, Skill};
use crate::config::SkillEntryConfig;

/// Characters refused in command-template arguments.
const SHELL_META: &[&str] = &[";", "&&", "||", "|", ">", "<", "`", "$", "\n"];

/// Largest instruction file `skills run` prints.
pub(crate) const MAX_PROMPT_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum RunError {
    #[error("Cannot run {skill}: argument {arg:?} contains a shell metacharacter ({meta:?})")]
    Metacharacter {
        skill: String,
        arg: String,
        meta: String,
    },
    #[error("Cannot run {skill}: {reason}")]
    NotRunnable { skill: String, reason: String },
}

/// The variables a skill's run adds: configured `env` and `apiKey` (as the
/// skill's `primaryEnv`), minus any the user's environment already has.
pub(crate) fn skill_env(
    skill: &Skill,
    entry: Option<&SkillEntryConfig>,
    user_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(entry) = entry else {
        return out;
    };
    let usable = |k: &str, v: &str| {
        let taken = user_env.get(k).is_some_and(|existing| !existing.is_empty());
        !k.is_empty()
            && !v.is_empty()
            && !v.contains('\0')
            && !taken
            && !crate::child::env::is_dangerous_key(k)
    };
    for (k, v) in &entry.env {
        if usable(k, v) {
            out.insert(k.clone(), v.clone());
        }
    }
    if let (Some(key), Some(var)) = (&entry.api_key, &skill.primary_env)
        && !out.contains_key(var)
        && usable(var, key)
    {
        out.insert(var.clone(), key.clone());
    }
    out
}

/// The whole environment of `skill`'s process: the children's allowlist
/// of `host_env`, the variables the skill declares taken from `host_env`
/// (unless `withheld` or dangerous), then its configured values for those
/// still unset.
pub(crate) fn child_env(
    skill: &Skill,
    entry: Option<&SkillEntryConfig>,
    host_env: &BTreeMap<String, String>,
    withheld: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    let mut env = crate::child::env::base(host_env);
    let declared = skill
        .requires
        .env
        .iter()
        .chain(&skill.requires.env_any)
        .chain(&skill.primary_env)
        .chain(entry.into_iter().flat_map(|e| e.env.keys()));
    for name in declared {
        if withheld(name)
            || crate::child::env::is_dangerous_key(name)
            || crate::child::env::is_almanac_setting(name)
        {
            continue;
        }
        if let Some(value) = host_env.get(name).filter(|v| !v.is_empty()) {
            env.insert(name.clone(), value.clone());
        }
    }
    env.extend(skill_env(skill, entry, host_env));
    env
}

/// What to execute for a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// Start `program` with `args` in `cwd`.
    Exec {
        program: PathBuf,
        args: Vec<String>,
        cwd: PathBuf,
    },
    /// Print this text (an instruction skill).
    Print(String),
}

/// Decides how to run `skill` with `args`; `find_bin` looks up an
/// interpreter on PATH.
pub(crate) fn plan(
    skill: &Skill,
    args: &[String],
    find_bin: impl Fn(&str) -> Option<PathBuf>,
) -> Result<Plan, RunError> {
    let not_runnable = |reason: String| RunError::NotRunnable {
        skill: skill.name.clone(),
        reason,
    };
    match skill.run.as_ref().unwrap_or(&RunSpec::Prompt) {
        RunSpec::Prompt => {
            let bytes = std::fs::read(&skill.file_path).map_err(|e| {
                not_runnable(format!("cannot read {}: {e}", skill.file_path.display()))
            })?;
            let mut text =
                String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_PROMPT_BYTES)]).into_owned();
            if bytes.len() > MAX_PROMPT_BYTES {
                text.push_str("\n… (truncated at 64 KiB)\n");
            }
            Ok(Plan::Print(text))
        }
        RunSpec::Mcp => Err(not_runnable(
            "it is an MCP server skill; the agent connects to MCP servers, `skills run` does not"
                .to_string(),
        )),
        RunSpec::Command { command } => {
            for arg in args {
                if let Some(meta) = SHELL_META.iter().find(|m| arg.contains(**m)) {
                    return Err(RunError::Metacharacter {
                        skill: skill.name.clone(),
                        arg: arg.clone(),
                        meta: meta.to_string(),
                    });
                }
            }
            let words = split_words(command).ok_or_else(|| {
                not_runnable("its command template has an unclosed quote".to_string())
            })?;
            let mut argv = Vec::new();
            let mut placed = false;
            for w in words {
                if w == "{args}" {
                    argv.extend(args.iter().cloned());
                    placed = true;
                } else {
                    argv.push(w.replace("{baseDir}", &skill.base_dir.to_string_lossy()));
                }
            }
            if !placed {
                argv.extend(args.iter().cloned());
            }
            let (program, rest) = argv
                .split_first()
                .ok_or_else(|| not_runnable("its command template is empty".to_string()))?;
            let program = find_bin(program)
                .ok_or_else(|| not_runnable(format!("{program} not found on PATH.")))?;
            Ok(Plan::Exec {
                program,
                args: rest.to_vec(),
                cwd: skill.base_dir.clone(),
            })
        }
        RunSpec::Entry { entry } => {
            if !entry.is_file() {
                return Err(not_runnable(format!(
                    "its entry {} does not exist",
                    entry.display()
                )));
            }
            let ext = entry.extension().and_then(|e| e.to_str()).unwrap_or("");
            let interpreter = match ext {
                "py" => Some("python3"),
                "sh" | "bash" => Some("bash"),
                "fish" => Some("fish"),
                "js" | "mjs" | "cjs" => Some("node"),
                _ => None,
            };
            let mut full_args = Vec::new();
            let program = match interpreter {
                Some(name) => {
                    full_args.push(entry.to_string_lossy().into_owned());
                    find_bin(name)
                        .ok_or_else(|| not_runnable(format!("{name} not found on PATH.")))?
                }
                None if is_executable(entry) => entry.clone(),
                None => {
                    return Err(not_runnable(format!(
                        "no interpreter for {} (not executable, unknown extension)",
                        entry.display()
                    )));
                }
            };
            full_args.extend(args.iter().cloned());
            Ok(Plan::Exec {
                program,
                args: full_args,
                cwd: skill.base_dir.clone(),
            })
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// Splits a command template into words: whitespace separates, single and
/// double quotes group, backslash escapes the next character. `None` on an
/// unclosed quote.
pub(crate) fn split_words(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), '\\') => current.push(chars.next()?),
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                current.push(chars.next()?);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(current);
    }
    Some(words)
}

#[cfg(test)]
mod tests;
