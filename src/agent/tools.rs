//! The tools a model can call in a turn.
//!
//! * `read`: a file in the workspace or a skill folder (relative paths are
//!   workspace-relative; `~` is the home), with an optional line window;
//! * `write` / `edit`: inside the workspace only, written crash-safely;
//! * `exec`: a shell command in the workspace, only when the `shell`
//!   permission is allowed, with a timeout, an output cap, and an
//!   environment from which values configured for skills are removed;
//! * `memory_search`, `memory_get`, `memory_append`: the memory commands;
//! * a tool per skill declared with `command-dispatch: tool`.
//!
//! Work that belongs to other subsystems (memory, skills) goes through
//! [`Services`], which the app implements: this module never reaches into
//! the app. Every failure is an error result the model can read, never a
//! failed turn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::provider::ToolSpec;

/// Largest tool output given back to the model, in characters.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Default and largest `exec` timeout, in seconds.
pub const EXEC_TIMEOUT_SECS: u64 = 60;
pub const EXEC_MAX_TIMEOUT_SECS: u64 = 600;

/// What tools need from other subsystems.
pub trait Services: Send + Sync {
    fn memory_search(
        &self,
        query: &str,
        max_results: Option<usize>,
        min_score: Option<f64>,
    ) -> Result<Value, String>;
    fn memory_get(
        &self,
        path: &str,
        from: Option<usize>,
        lines: Option<usize>,
    ) -> Result<Value, String>;
    fn memory_append(&self, text: &str, long_term: bool) -> Result<Value, String>;
    /// Runs a skill; its output and exit code.
    fn run_skill(&self, skill: &str, args: &[String]) -> Result<(String, i32), String>;
}

/// A skill offered as a tool.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SkillTool {
    /// The tool name (the skill's `command-tool`, else its command name).
    pub tool: String,
    pub skill: String,
    pub description: String,
}

/// The tools of one turn.
pub struct Tools<'a> {
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
    /// Folders `read` may open besides the workspace (skill folders).
    pub read_roots: Vec<PathBuf>,
    pub allow_shell: bool,
    /// The environment of `exec` children (skill values already removed).
    pub exec_env: BTreeMap<String, String>,
    pub memory_search: bool,
    pub memory_write: bool,
    pub skills: Vec<SkillTool>,
    pub services: &'a dyn Services,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub text: String,
    pub is_error: bool,
}

impl Output {
    fn ok(text: impl Into<String>) -> Output {
        Output {
            text: cap(text.into()),
            is_error: false,
        }
    }

    fn err(text: impl Into<String>) -> Output {
        Output {
            text: cap(text.into()),
            is_error: true,
        }
    }
}

fn cap(text: String) -> String {
    if text.chars().count() <= MAX_OUTPUT_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
    format!("{kept}\n[output cut at {MAX_OUTPUT_CHARS} characters]")
}

impl Tools<'_> {
    /// The specs the model is given.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters,
        };
        let mut out = vec![
            spec(
                "read",
                "Read a text file: workspace-relative, or absolute inside the workspace or a skill folder. Optional 1-based `offset` and `limit` in lines.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ),
            spec(
                "write",
                "Create or replace a file inside the workspace with `content`.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
            spec(
                "edit",
                "Replace the one occurrence of `old_text` with `new_text` in a workspace file.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}),
            ),
        ];
        if self.allow_shell {
            out.push(spec(
                "exec",
                "Run a shell command in the workspace. Output is capped; the default timeout is 60 s.",
                json!({"type": "object", "properties": {"command": {"type": "string"}, "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": EXEC_MAX_TIMEOUT_SECS}}, "required": ["command"]}),
            ));
        }
        if self.memory_search {
            out.push(spec(
                "memory_search",
                "Mandatory recall step: search MEMORY.md and memory/*.md before answering about prior work, decisions, dates, people, preferences or todos. Returns the best lines with path and line numbers.",
                json!({"type": "object", "properties": {"query": {"type": "string"}, "maxResults": {"type": "integer", "minimum": 1}, "minScore": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["query"]}),
            ));
            out.push(spec(
                "memory_get",
                "Read lines of a memory file (MEMORY.md, memory/…): `path`, optional 1-based `from` and `lines`.",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "from": {"type": "integer", "minimum": 1}, "lines": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ));
        }
        if self.memory_write {
            out.push(spec(
                "memory_append",
                "Store a durable note in today's memory file (or MEMORY.md with `longTerm`).",
                json!({"type": "object", "properties": {"text": {"type": "string"}, "longTerm": {"type": "boolean"}}, "required": ["text"]}),
            ));
        }
        for skill in &self.skills {
            out.push(spec(
                &skill.tool,
                &skill.description,
                json!({"type": "object", "properties": {"args": {"type": "string", "description": "The arguments, as typed after the command"}}}),
            ));
        }
        out
    }

    /// Runs one call.
    pub async fn call(&self, name: &str, arguments: &Value) -> Output {
        let args = match arguments {
            Value::Object(_) => arguments,
            Value::String(raw) => {
                return Output::err(format!("the arguments are not a JSON object: {raw}"));
            }
            _ => return Output::err("the arguments must be a JSON object"),
        };
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        let number = |k: &str| args.get(k).and_then(Value::as_u64).map(|n| n as usize);
        match name {
            "read" => match text("path") {
                Some(path) => self.read(path, number("offset"), number("limit")),
                None => Output::err("`path` is required"),
            },
            "write" => match (text("path"), text("content")) {
                (Some(path), Some(content)) => self.write(path, content),
                _ => Output::err("`path` and `content` are required"),
            },
            "edit" => match (text("path"), text("old_text"), text("new_text")) {
                (Some(path), Some(old), Some(new)) => self.edit(path, old, new),
                _ => Output::err("`path`, `old_text` and `new_text` are required"),
            },
            "exec" if self.allow_shell => match text("command") {
                Some(command) => {
                    let timeout = args
                        .get("timeout_seconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(EXEC_TIMEOUT_SECS)
                        .clamp(1, EXEC_MAX_TIMEOUT_SECS);
                    self.exec(command, Duration::from_secs(timeout)).await
                }
                None => Output::err("`command` is required"),
            },
            "exec" => Output::err(
                "exec is not allowed: the `shell` permission is not granted (SKILL_PERMISSIONS)",
            ),
            "memory_search" if self.memory_search => match text("query") {
                Some(q) => json_output(self.services.memory_search(
                    q,
                    number("maxResults"),
                    args.get("minScore").and_then(Value::as_f64),
                )),
                None => Output::err("`query` is required"),
            },
            "memory_get" if self.memory_search => match text("path") {
                Some(p) => {
                    json_output(self.services.memory_get(p, number("from"), number("lines")))
                }
                None => Output::err("`path` is required"),
            },
            "memory_append" if self.memory_write => match text("text") {
                Some(t) => json_output(
                    self.services.memory_append(
                        t,
                        args.get("longTerm")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ),
                ),
                None => Output::err("`text` is required"),
            },
            other => match self.skills.iter().find(|s| s.tool == other) {
                Some(skill) => {
                    let words = split_args(text("args").unwrap_or(""));
                    match self.services.run_skill(&skill.skill, &words) {
                        Ok((out, 0)) => Output::ok(out),
                        Ok((out, code)) => Output::err(format!("exit code {code}\n{out}")),
                        Err(e) => Output::err(e),
                    }
                }
                None => Output::err(format!("there is no tool named {other}")),
            },
        }
    }

    /// A path the tools may touch: inside the workspace, or for reading
    /// also inside a skill folder.
    fn resolve(&self, path: &str, for_write: bool) -> Result<PathBuf, String> {
        let path = path.trim();
        if path.is_empty() {
            return Err("empty path".into());
        }
        let expanded = match (path.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(path),
        };
        let joined = if expanded.is_absolute() {
            expanded
        } else {
            self.workspace.join(expanded)
        };
        let lexical = crate::paths::normalize(&joined)
            .ok_or_else(|| format!("{path} leaves the workspace"))?;
        // Resolve symlinks of what exists, then check where it really is.
        let real = real_path(&lexical);
        let inside = |root: &Path| {
            let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
            real.starts_with(&root)
        };
        if inside(&self.workspace) || (!for_write && self.read_roots.iter().any(|r| inside(r))) {
            Ok(lexical)
        } else if for_write {
            Err(format!(
                "{path} is outside the workspace; only workspace files can be written"
            ))
        } else {
            Err(format!(
                "{path} is outside the workspace and the skill folders"
            ))
        }
    }

    fn read(&self, path: &str, offset: Option<usize>, limit: Option<usize>) -> Output {
        let full = match self.resolve(path, false) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let bytes = match std::fs::read(&full) {
            Ok(b) => b,
            Err(e) => return Output::err(format!("cannot read {path}: {e}")),
        };
        if bytes.iter().take(8000).any(|b| *b == 0) {
            return Output::err(format!("{path} is a binary file"));
        }
        let text = String::from_utf8_lossy(&bytes);
        if offset.is_none() && limit.is_none() {
            return Output::ok(text.into_owned());
        }
        let start = offset.unwrap_or(1).max(1) - 1;
        let lines: Vec<&str> = text
            .lines()
            .skip(start)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        Output::ok(lines.join("\n"))
    }

    fn write(&self, path: &str, content: &str) -> Output {
        let full = match self.resolve(path, true) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let mode = existing_mode(&full).unwrap_or(0o644);
        match crate::durable::atomic_replace(&full, content.as_bytes(), mode) {
            Ok(()) => Output::ok(format!("wrote {} bytes to {path}", content.len())),
            Err(e) => Output::err(format!("cannot write {path}: {e}")),
        }
    }

    fn edit(&self, path: &str, old: &str, new: &str) -> Output {
        let full = match self.resolve(path, true) {
            Ok(p) => p,
            Err(e) => return Output::err(e),
        };
        let text = match std::fs::read_to_string(&full) {
            Ok(t) => t,
            Err(e) => return Output::err(format!("cannot read {path}: {e}")),
        };
        if old.is_empty() {
            return Output::err("`old_text` is empty");
        }
        match text.matches(old).count() {
            0 => return Output::err(format!("`old_text` does not occur in {path}")),
            1 => {}
            n => {
                return Output::err(format!(
                    "`old_text` occurs {n} times in {path}; give more context so it is unique"
                ));
            }
        }
        let edited = text.replacen(old, new, 1);
        let mode = existing_mode(&full).unwrap_or(0o644);
        match crate::durable::atomic_replace(&full, edited.as_bytes(), mode) {
            Ok(()) => Output::ok(format!("edited {path}")),
            Err(e) => Output::err(format!("cannot write {path}: {e}")),
        }
    }

    async fn exec(&self, command: &str, timeout: Duration) -> Output {
        let mut child = tokio::process::Command::new("sh");
        child
            .arg("-c")
            .arg(command)
            .current_dir(&self.workspace)
            .env_clear()
            .envs(&self.exec_env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = match child.spawn() {
            Ok(c) => c,
            Err(e) => return Output::err(format!("cannot start the command: {e}")),
        };
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Err(_) => Output::err(format!(
                "the command did not finish within {} s and was stopped",
                timeout.as_secs()
            )),
            Ok(Err(e)) => Output::err(format!("the command failed: {e}")),
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                let err = String::from_utf8_lossy(&out.stderr);
                if !err.trim().is_empty() {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&err);
                }
                let code = out.status.code().unwrap_or(-1);
                if out.status.success() {
                    Output::ok(text)
                } else {
                    Output::err(format!("exit code {code}\n{text}"))
                }
            }
        }
    }
}

fn json_output(result: Result<Value, String>) -> Output {
    match result {
        Ok(v) => Output::ok(serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => Output::err(e),
    }
}

fn existing_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

/// The real location of `path`: its longest existing ancestor resolved,
/// with the rest appended (a file to be created has no real path yet).
fn real_path(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut cursor = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cursor) {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            cursor.file_name().map(|n| n.to_os_string()),
            cursor.parent(),
        ) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                cursor = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Arguments typed after a command, split like a shell would split plain
/// words and quotes (nothing is expanded).
pub fn split_args(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                    any = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if any || !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoServices;

    impl Services for NoServices {
        fn memory_search(
            &self,
            query: &str,
            _: Option<usize>,
            _: Option<f64>,
        ) -> Result<Value, String> {
            Ok(json!({"results": [], "query": query}))
        }
        fn memory_get(&self, _: &str, _: Option<usize>, _: Option<usize>) -> Result<Value, String> {
            Err("not a memory file".into())
        }
        fn memory_append(&self, text: &str, _: bool) -> Result<Value, String> {
            Ok(json!({"stored": text}))
        }
        fn run_skill(&self, skill: &str, args: &[String]) -> Result<(String, i32), String> {
            Ok((format!("{skill}: {}", args.join("|")), 0))
        }
    }

    fn tools<'a>(ws: &Path, services: &'a dyn Services, shell: bool) -> Tools<'a> {
        Tools {
            workspace: ws.to_path_buf(),
            home: None,
            read_roots: vec![],
            allow_shell: shell,
            exec_env: BTreeMap::from([
                ("PATH".to_string(), "/usr/bin:/bin".to_string()),
                ("VISIBLE".to_string(), "yes".to_string()),
            ]),
            memory_search: true,
            memory_write: true,
            skills: vec![SkillTool {
                tool: "echo_tool".into(),
                skill: "demo_echo".into(),
                description: "Echo".into(),
            }],
            services,
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn files_stay_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.join("link.txt")).unwrap();
        let t = tools(&ws, &NoServices, false);
        let w = run(t.call(
            "write",
            &json!({"path": "notes/a.md", "content": "one\ntwo\nthree\n"}),
        ));
        assert!(!w.is_error, "{w:?}");
        assert_eq!(
            run(t.call(
                "read",
                &json!({"path": "notes/a.md", "offset": 2, "limit": 1})
            ))
            .text,
            "two"
        );
        let e = run(t.call(
            "edit",
            &json!({"path": "notes/a.md", "old_text": "two", "new_text": "2"}),
        ));
        assert!(!e.is_error, "{e:?}");
        assert_eq!(
            std::fs::read_to_string(ws.join("notes/a.md")).unwrap(),
            "one\n2\nthree\n"
        );
        let twice = run(t.call(
            "edit",
            &json!({"path": "notes/a.md", "old_text": "e", "new_text": "E"}),
        ));
        assert!(twice.is_error && twice.text.contains("occurs"), "{twice:?}");
        for (tool, args) in [
            ("read", json!({"path": "../secret.txt"})),
            ("read", json!({"path": "link.txt"})),
            ("write", json!({"path": "link.txt", "content": "x"})),
            (
                "write",
                json!({"path": dir.path().join("x.txt").to_str().unwrap(), "content": "x"}),
            ),
            (
                "write",
                json!({"path": "../../../../etc/x", "content": "x"}),
            ),
        ] {
            let out = run(t.call(tool, &args));
            assert!(out.is_error, "{tool} {args}: {out:?}");
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join("secret.txt")).unwrap(),
            "s"
        );
        let bad = run(t.call("read", &Value::String("{not json".into())));
        assert!(bad.is_error && bad.text.contains("not a JSON object"));
    }

    #[test]
    fn exec_needs_the_shell_permission_and_keeps_to_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), &NoServices, false);
        assert!(!t.specs().iter().any(|s| s.name == "exec"));
        let refused = run(t.call("exec", &json!({"command": "echo hi"})));
        assert!(
            refused.is_error && refused.text.contains("shell"),
            "{refused:?}"
        );
        let t = tools(dir.path(), &NoServices, true);
        let out = run(t.call(
            "exec",
            &json!({"command": "echo $VISIBLE; echo ${SECRET_TOKEN:-unset}; exit 3"}),
        ));
        assert!(out.is_error);
        assert!(
            out.text.contains("exit code 3") && out.text.contains("yes\nunset"),
            "{out:?}"
        );
        let big = run(t.call("exec", &json!({"command": "yes x | head -c 100000"})));
        assert!(
            big.text
                .ends_with(&format!("[output cut at {MAX_OUTPUT_CHARS} characters]"))
        );
    }

    #[test]
    fn memory_and_skill_tools_go_through_services() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), &NoServices, false);
        let names: Vec<String> = t.specs().into_iter().map(|s| s.name).collect();
        for n in [
            "read",
            "write",
            "edit",
            "memory_search",
            "memory_get",
            "memory_append",
            "echo_tool",
        ] {
            assert!(names.contains(&n.to_string()), "{n}");
        }
        let out = run(t.call("echo_tool", &json!({"args": "hello 'big world'"})));
        assert_eq!(out.text, "demo_echo: hello|big world");
        assert!(run(t.call("memory_get", &json!({"path": "x"}))).is_error);
        assert!(run(t.call("nope", &json!({}))).is_error);
    }

    #[test]
    fn argument_splitting() {
        assert_eq!(
            split_args("a  b 'c d' \"e\" ''"),
            vec!["a", "b", "c d", "e", ""]
        );
        assert!(split_args("   ").is_empty());
    }
}
