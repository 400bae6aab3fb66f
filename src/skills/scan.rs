//! Install-time security scan of a skill folder (`skills scan DIR`).
//!
//! Scans code (`.js .ts .mjs .cjs .mts .cts .jsx .tsx .py .sh .bash .fish`)
//! and `SKILL.md` (its text and code blocks), at most 500 files of at most
//! 1 MiB, skipping hidden folders and `node_modules`. One finding per rule
//! per file, with the first line it fires on. Severities: a *critical*
//! finding blocks an install unless it is forced; *warn* findings are
//! reported; *info* is informational only.
//!
//! Rules on source code run with comments removed (strings kept).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::memory::sanitize;

const MAX_FILES: usize = 500;
const MAX_FILE_BYTES: u64 = 1024 * 1024;
const CODE_EXTENSIONS: &[&str] = &[
    "js", "ts", "mjs", "cjs", "mts", "cts", "jsx", "tsx", "py", "sh", "bash", "fish",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warn,
    Critical,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub rule_id: &'static str,
    pub severity: Severity,
    pub file: PathBuf,
    pub line: usize,
    pub message: &'static str,
    pub evidence: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanReport {
    pub scanned_files: usize,
    pub critical: usize,
    pub warn: usize,
    pub info: usize,
    pub findings: Vec<Finding>,
    pub truncated: bool,
}

impl ScanReport {
    /// Whether an install should stop (unless forced).
    pub fn blocks_install(&self) -> bool {
        self.critical > 0
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Js,
    Python,
    Shell,
    Markdown,
}

/// Scans `dir`.
pub fn scan_dir(dir: &Path) -> std::io::Result<ScanReport> {
    let mut files = Vec::new();
    let mut truncated = false;
    collect(dir, &mut files, &mut truncated)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut report = ScanReport {
        truncated,
        ..ScanReport::default()
    };
    for (path, lang) in files {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        report.scanned_files += 1;
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
        for finding in scan_text(&text, lang, &rel) {
            match finding.severity {
                Severity::Critical => report.critical += 1,
                Severity::Warn => report.warn += 1,
                Severity::Info => report.info += 1,
            }
            report.findings.push(finding);
        }
    }
    Ok(report)
}

fn collect(
    dir: &Path,
    out: &mut Vec<(PathBuf, Lang)>,
    truncated: &mut bool,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        if out.len() >= MAX_FILES {
            *truncated = true;
            return Ok(());
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if !name.starts_with('.') && name != "node_modules" {
                collect(&path, out, truncated)?;
            }
            continue;
        }
        if !ft.is_file()
            || entry
                .metadata()
                .map(|m| m.len() > MAX_FILE_BYTES)
                .unwrap_or(true)
        {
            continue;
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let lang = if name == "SKILL.md" {
            Lang::Markdown
        } else if !CODE_EXTENSIONS.contains(&ext) {
            continue;
        } else if ext == "py" {
            Lang::Python
        } else if matches!(ext, "sh" | "bash" | "fish") {
            Lang::Shell
        } else {
            Lang::Js
        };
        out.push((path, lang));
    }
    Ok(())
}

/// The findings of one file's text.
fn scan_text(text: &str, lang: Lang, rel: &Path) -> Vec<Finding> {
    let code = match lang {
        Lang::Js => strip_js_comments(text),
        Lang::Python | Lang::Shell => strip_hash_comments(text),
        Lang::Markdown => text.to_string(),
    };
    let lines: Vec<&str> = code.lines().collect();
    let raw_lines: Vec<&str> = text.lines().collect();
    let lower = code.to_lowercase();
    let mut findings = Vec::new();
    let mut add =
        |rule_id: &'static str, severity: Severity, line: usize, message: &'static str| {
            if findings.iter().any(|f: &Finding| f.rule_id == rule_id) {
                return;
            }
            let evidence_line = raw_lines
                .get(line.saturating_sub(1))
                .copied()
                .unwrap_or("")
                .trim();
            findings.push(Finding {
                rule_id,
                severity,
                file: rel.to_path_buf(),
                line,
                message,
                evidence: evidence(evidence_line),
            });
        };
    let find_line = |pred: &dyn Fn(&str) -> bool| lines.iter().position(|l| pred(l)).map(|i| i + 1);
    let network_send = |l: &str| {
        let l = l.to_lowercase();
        [
            "fetch(",
            ".post(",
            "post(",
            "http.request(",
            "https.request(",
            "requests.post(",
            "requests.get(",
            "urlopen(",
            "axios",
            "curl ",
            "wget ",
        ]
        .iter()
        .any(|p| l.contains(p))
    };

    if lang == Lang::Js && code.contains("child_process") {
        let exec_call = |l: &str| {
            [
                "exec(",
                "execSync(",
                "spawn(",
                "spawnSync(",
                "execFile(",
                "execFileSync(",
            ]
            .iter()
            .any(|c| {
                l.match_indices(c).any(|(i, _)| {
                    let before = &l[..i];
                    !before.ends_with('.')
                        || before.ends_with("cp.")
                        || before.ends_with("childProcess.")
                        || before.ends_with("child_process.")
                })
            })
        };
        if let Some(n) = find_line(&exec_call) {
            add(
                "dangerous-exec",
                Severity::Critical,
                n,
                "Shell command execution detected (child_process)",
            );
        }
    }
    if lang == Lang::Python
        && let Some(n) = find_line(&|l: &str| {
            l.contains("os.system(")
                || l.contains("os.popen(")
                || (l.contains("subprocess.") && l.contains("shell=True"))
        })
    {
        add(
            "dangerous-exec",
            Severity::Critical,
            n,
            "Shell command execution detected (os.system / shell=True)",
        );
    }
    let dynamic = |l: &str| match lang {
        Lang::Js => contains_call(l, "eval(") || l.contains("new Function("),
        Lang::Python => contains_call(l, "eval(") || contains_call(l, "exec("),
        _ => false,
    };
    if let Some(n) = find_line(&dynamic) {
        add(
            "dynamic-code-execution",
            Severity::Critical,
            n,
            "Dynamic code execution detected",
        );
    }
    if let Some(n) = find_line(&|l: &str| {
        let l = l.to_lowercase();
        [
            "stratum+tcp",
            "stratum+ssl",
            "coinhive",
            "cryptonight",
            "xmrig",
        ]
        .iter()
        .any(|p| l.contains(p))
    }) {
        add(
            "crypto-mining",
            Severity::Critical,
            n,
            "Possible crypto-mining reference detected",
        );
    }
    if lang == Lang::Js
        && let Some(n) = find_line(&suspicious_websocket)
    {
        add(
            "suspicious-network",
            Severity::Warn,
            n,
            "WebSocket connection to a non-standard port",
        );
    }
    let reads_files = match lang {
        Lang::Js => code.contains("readFile"),
        Lang::Python => code.contains("open(") || code.contains("read_text("),
        _ => false,
    };
    if reads_files && let Some(n) = find_line(&network_send) {
        add(
            "potential-exfiltration",
            Severity::Warn,
            n,
            "File read combined with a network send (possible exfiltration)",
        );
    }
    if let Some(n) = find_line(&obfuscated) {
        add(
            "obfuscated-code",
            Severity::Warn,
            n,
            "Obfuscated code (hex escapes or a long base64 payload)",
        );
    }
    let env_marker = match lang {
        Lang::Js => Some("process.env"),
        Lang::Python => Some("os.environ"),
        _ => None,
    };
    if let Some(marker) = env_marker {
        for (i, l) in lines.iter().enumerate() {
            if !l.contains(marker) {
                continue;
            }
            let from = i.saturating_sub(8);
            let to = (i + 8).min(lines.len().saturating_sub(1));
            if lines[from..=to].iter().any(|l| network_send(l)) {
                add(
                    "env-harvesting",
                    Severity::Critical,
                    i + 1,
                    "Environment variables read near a network send (possible credential harvesting)",
                );
                break;
            }
        }
    }
    if let Some(n) = find_line(&|l: &str| literal_secret(l).is_some()) {
        add(
            "literal-secret",
            Severity::Critical,
            n,
            "A credential is written in the skill",
        );
    }
    if let Some(n) = find_line(&pipe_to_shell) {
        add(
            "shell-pipe-to-shell",
            Severity::Critical,
            n,
            "Downloads piped straight into a shell",
        );
    }
    if let Some(pos) = [
        "process.env",
        "$env",
        "${env",
        "os.environ",
        " env |",
        " env>",
    ]
    .iter()
    .filter_map(|m| lower.find(m))
    .find(|&p| {
        let window: String = lower[p..].chars().take(80).collect();
        ["fetch", "curl", "wget", "http"]
            .iter()
            .any(|n| window.contains(n))
    }) {
        let n = lower[..pos].matches('\n').count() + 1;
        add(
            "secret-exfiltration",
            Severity::Critical,
            n,
            "Environment values sent over the network",
        );
    }
    if let Some(n) = find_line(&destructive_delete) {
        add(
            "destructive-delete",
            Severity::Warn,
            n,
            "Recursive delete of a root, home or current folder",
        );
    }
    if let Some(n) = find_line(&|l: &str| {
        let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
        l.contains("chmod 777") || l.contains("chmod -R 777")
    }) {
        add(
            "unsafe-permissions",
            Severity::Warn,
            n,
            "World-writable permissions (chmod 777)",
        );
    }
    if lang == Lang::Markdown {
        let mut in_code = false;
        for (i, l) in raw_lines.iter().enumerate() {
            if l.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            match sanitize::scan(l).map(|f| f.label) {
                Some(sanitize::IGNORE_PREVIOUS | sanitize::DISREGARD_RULES) => add(
                    "prompt-injection-ignore-instructions",
                    Severity::Critical,
                    i + 1,
                    "Instructions telling the model to ignore its instructions",
                ),
                Some(
                    sanitize::PROMPT_EXTRACTION
                    | sanitize::EMBEDDED_SYSTEM
                    | sanitize::TEMPLATE_MARKER,
                ) => add(
                    "prompt-injection-system",
                    Severity::Critical,
                    i + 1,
                    "Instructions posing as or extracting the system prompt",
                ),
                _ => {}
            }
            if tool_without_permission(l) {
                add(
                    "prompt-injection-tool",
                    Severity::Critical,
                    i + 1,
                    "Instructions to use tools without the user's permission",
                );
            }
        }
    }
    findings.sort_by_key(|f| f.line);
    findings
}

fn contains_call(line: &str, call: &str) -> bool {
    line.match_indices(call).any(|(i, _)| {
        let before = line[..i].chars().last();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
    })
}

fn suspicious_websocket(line: &str) -> bool {
    let Some(pos) = line.find("new WebSocket(") else {
        return false;
    };
    let rest = &line[pos..];
    let Some(url_start) = rest.find("ws") else {
        return false;
    };
    let url: String = rest[url_start..]
        .chars()
        .take_while(|c| !matches!(c, '"' | '\'' | '`' | ')'))
        .collect();
    let Some(after_scheme) = url.split_once("://").map(|(_, r)| r) else {
        return false;
    };
    let host_port = after_scheme.split('/').next().unwrap_or("");
    match host_port.rsplit_once(':') {
        Some((_, port)) => !matches!(port, "80" | "443" | "8080" | "8443" | "3000"),
        None => false,
    }
}

fn obfuscated(line: &str) -> bool {
    let mut run = 0;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i + 3 < bytes.len() {
        if bytes[i] == b'\\'
            && bytes[i + 1] == b'x'
            && bytes[i + 2].is_ascii_hexdigit()
            && bytes[i + 3].is_ascii_hexdigit()
        {
            run += 1;
            if run >= 6 {
                return true;
            }
            i += 4;
        } else {
            run = 0;
            i += 1;
        }
    }
    if ["atob(", "Buffer.from(", "b64decode(", "base64.b64decode("]
        .iter()
        .any(|p| line.contains(p))
    {
        return line.split(['"', '\'', '`']).any(|s| {
            s.len() >= 200
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=')
        });
    }
    false
}

/// The kind of credential written on `line`, if any.
fn literal_secret(line: &str) -> Option<&'static str> {
    let tokens = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    for t in tokens {
        if t.starts_with("sk-") && t.len() >= 35 {
            return Some("api key");
        }
        if ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]
            .iter()
            .any(|p| t.starts_with(p))
            && t.len() >= 36
        {
            return Some("github token");
        }
        if t.starts_with("github_pat_") && t.len() >= 40 {
            return Some("github token");
        }
        if ["xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"]
            .iter()
            .any(|p| t.starts_with(p))
            && t.len() >= 20
        {
            return Some("slack token");
        }
        if t.starts_with("AIza") && t.len() == 39 {
            return Some("google key");
        }
    }
    if line.contains("-----BEGIN") && line.contains("PRIVATE KEY-----") {
        return Some("private key");
    }
    None
}

fn pipe_to_shell(line: &str) -> bool {
    let compact: String = line
        .to_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let fetch = ["curl", "wget"]
        .iter()
        .filter_map(|f| compact.find(f))
        .min();
    match fetch {
        Some(pos) => ["|sh", "|bash", "|zsh", "|sudosh", "|sudobash"]
            .iter()
            .any(|s| compact[pos..].contains(s)),
        None => false,
    }
}

fn destructive_delete(line: &str) -> bool {
    let l = line.split_whitespace().collect::<Vec<_>>().join(" ");
    for rm in ["rm -rf ", "rm -fr "] {
        let mut from = 0;
        while let Some(p) = l[from..].find(rm) {
            let target = &l[from + p + rm.len()..];
            let word = target
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches(['"', '\'']);
            if matches!(
                word,
                "/" | "/*" | "~" | "~/" | "~/*" | "$HOME" | "${HOME}" | "$HOME/" | "." | "./" | "*"
            ) {
                return true;
            }
            from += p + rm.len();
        }
    }
    false
}

fn tool_without_permission(line: &str) -> bool {
    let l = line.to_lowercase();
    let verb = ["run ", "execute ", "invoke ", "call "]
        .iter()
        .any(|v| l.contains(v));
    verb && l.contains("tool")
        && l.contains("without")
        && ["permission", "approval", "asking", "confirmation"]
            .iter()
            .any(|p| l.contains(p))
}

/// The line as evidence: trimmed, at most 120 characters, credentials
/// redacted.
fn evidence(line: &str) -> String {
    if literal_secret(line).is_some() {
        return "[REDACTED CREDENTIAL]".to_string();
    }
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(120).collect::<String>())
    } else {
        line.to_string()
    }
}

fn strip_js_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string: Option<char> = None;
    while let Some(c) = chars.next() {
        match in_string {
            Some(q) => {
                out.push(c);
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else if c == q {
                    in_string = None;
                }
            }
            None => {
                if c == '/' && chars.peek() == Some(&'/') {
                    while let Some(&n) = chars.peek() {
                        if n == '\n' {
                            break;
                        }
                        chars.next();
                    }
                } else if c == '/' && chars.peek() == Some(&'*') {
                    chars.next();
                    let mut prev = ' ';
                    for n in chars.by_ref() {
                        if n == '\n' {
                            out.push('\n');
                        }
                        if prev == '*' && n == '/' {
                            break;
                        }
                        prev = n;
                    }
                } else {
                    if matches!(c, '"' | '\'' | '`') {
                        in_string = Some(c);
                    }
                    out.push(c);
                }
            }
        }
    }
    out
}

fn strip_hash_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut quote: Option<char> = None;
            for (i, c) in line.char_indices() {
                match (quote, c) {
                    (None, '#') if i == 0 || line[..i].ends_with(char::is_whitespace) => {
                        if line.starts_with("#!") && i == 0 {
                            return line;
                        }
                        return &line[..i];
                    }
                    (None, '"' | '\'') => quote = Some(c),
                    (Some(q), c) if c == q => quote = None,
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
