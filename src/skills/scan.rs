//! Install-time security scan of a skill folder (`skills scan DIR`).
//!
//! Scans code (`.js .ts .mjs .cjs .mts .cts .jsx .tsx .py .sh .bash .zsh
//! .fish`) and `SKILL.md` (its text and code blocks), at most 500 files of
//! at most 1 MiB, skipping hidden folders and `node_modules`. One finding
//! per rule per file, with the first line it fires on. Severities: a
//! *critical* finding blocks an install unless it is forced; *warn*
//! findings are reported; *info* is informational only.
//!
//! Rules on source code run with comments removed (strings kept). Besides
//! OpenClaw's rules, the shell forms of the same attacks are found in
//! every file, `SKILL.md` prose included (a model runs what it is told):
//! credential files and stores (SSH keys, cloud and tool credentials,
//! `.env`, `.netrc`, browser and keychain stores) sent over the network
//! (`credential-exfiltration`, critical; read without a send:
//! `credential-access`, warn), encoded text decoded and run
//! (`shell-decode-exec`, critical), downloads run by a shell in any form
//! (`shell-pipe-to-shell`, critical), the environment piped out
//! (`secret-exfiltration`, critical), and a file or stdin posted
//! (`data-upload`, info).
//!
//! The rules are made of line predicates ([`lines`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::memory::sanitize;
use lines::{
    contains_call, decode_and_run, destructive_delete, literal_secret, mentions_secret, network,
    network_send, obfuscated, pipe_to_shell, reads_secret, sends_data, suspicious_websocket,
    tool_without_permission, uploads_file_or_stdin,
};

const MAX_FILES: usize = 500;
const MAX_FILE_BYTES: u64 = 1024 * 1024;
const CODE_EXTENSIONS: &[&str] = &[
    "js", "ts", "mjs", "cjs", "mts", "cts", "jsx", "tsx", "py", "sh", "bash", "zsh", "fish",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Info,
    Warn,
    Critical,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Finding {
    pub rule_id: &'static str,
    pub severity: Severity,
    pub file: PathBuf,
    pub line: usize,
    pub message: &'static str,
    pub evidence: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScanReport {
    pub scanned_files: usize,
    pub critical: usize,
    pub warn: usize,
    pub info: usize,
    pub findings: Vec<Finding>,
    pub truncated: bool,
}

impl ScanReport {
    /// Whether an install should stop (unless forced).
    pub(crate) fn blocks_install(&self) -> bool {
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
pub(crate) fn scan_dir(dir: &Path) -> std::io::Result<ScanReport> {
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
        } else if matches!(ext, "sh" | "bash" | "zsh" | "fish") {
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
    let mut scan = FileScan {
        lang,
        rel,
        code: &code,
        lines: code.lines().collect(),
        raw_lines: text.lines().collect(),
        findings: Vec::new(),
    };
    scan.code_rules();
    scan.shell_rules();
    if lang == Lang::Markdown {
        scan.markdown_rules();
    }
    let mut findings = scan.findings;
    findings.sort_by_key(|f| f.line);
    findings
}

/// One file being scanned: its text with and without comments, and the
/// findings so far (one per rule).
struct FileScan<'a> {
    lang: Lang,
    rel: &'a Path,
    /// The text with comments removed (source code) or as it is.
    code: &'a str,
    lines: Vec<&'a str>,
    /// The text as it is, for evidence.
    raw_lines: Vec<&'a str>,
    findings: Vec<Finding>,
}

impl FileScan<'_> {
    /// Records a finding of `rule_id` at `line` (1-based) unless the rule
    /// already fired in this file.
    fn add(
        &mut self,
        rule_id: &'static str,
        severity: Severity,
        line: usize,
        message: &'static str,
    ) {
        if self.findings.iter().any(|f: &Finding| f.rule_id == rule_id) {
            return;
        }
        let evidence_line = self
            .raw_lines
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or("")
            .trim();
        self.findings.push(Finding {
            rule_id,
            severity,
            file: self.rel.to_path_buf(),
            line,
            message,
            evidence: evidence(evidence_line),
        });
    }

    /// The first line (1-based) `pred` holds for.
    fn find_line(&self, pred: &dyn Fn(&str) -> bool) -> Option<usize> {
        self.lines.iter().position(|l| pred(l)).map(|i| i + 1)
    }

    /// OpenClaw's rules on source code: execution, dynamic code, mining,
    /// odd sockets, file reads sent out, obfuscation, the environment
    /// harvested.
    fn code_rules(&mut self) {
        let lang = self.lang;
        if lang == Lang::Js && self.code.contains("child_process") {
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
            if let Some(n) = self.find_line(&exec_call) {
                self.add(
                    "dangerous-exec",
                    Severity::Critical,
                    n,
                    "Shell command execution detected (child_process)",
                );
            }
        }
        if lang == Lang::Python
            && let Some(n) = self.find_line(&|l: &str| {
                l.contains("os.system(")
                    || l.contains("os.popen(")
                    || (l.contains("subprocess.") && l.contains("shell=True"))
            })
        {
            self.add(
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
        if let Some(n) = self.find_line(&dynamic) {
            self.add(
                "dynamic-code-execution",
                Severity::Critical,
                n,
                "Dynamic code execution detected",
            );
        }
        if let Some(n) = self.find_line(&|l: &str| {
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
            self.add(
                "crypto-mining",
                Severity::Critical,
                n,
                "Possible crypto-mining reference detected",
            );
        }
        if lang == Lang::Js
            && let Some(n) = self.find_line(&suspicious_websocket)
        {
            self.add(
                "suspicious-network",
                Severity::Warn,
                n,
                "WebSocket connection to a non-standard port",
            );
        }
        let reads_files = match lang {
            Lang::Js => self.code.contains("readFile"),
            Lang::Python => self.code.contains("open(") || self.code.contains("read_text("),
            _ => false,
        };
        if reads_files && let Some(n) = self.find_line(&network_send) {
            self.add(
                "potential-exfiltration",
                Severity::Warn,
                n,
                "File read combined with a network send (possible exfiltration)",
            );
        }
        if let Some(n) = self.find_line(&obfuscated) {
            self.add(
                "obfuscated-code",
                Severity::Warn,
                n,
                "Obfuscated code (hex escapes or a long base64 payload)",
            );
        }
        self.env_harvesting();
    }

    /// The environment read within eight lines of a network send.
    fn env_harvesting(&mut self) {
        let env_marker = match self.lang {
            Lang::Js => "process.env",
            Lang::Python => "os.environ",
            _ => return,
        };
        let lines = &self.lines;
        let harvested = lines.iter().enumerate().find_map(|(i, l)| {
            if !l.contains(env_marker) {
                return None;
            }
            let from = i.saturating_sub(8);
            let to = (i + 8).min(lines.len().saturating_sub(1));
            lines[from..=to]
                .iter()
                .any(|l| network_send(l))
                .then_some(i + 1)
        });
        if let Some(n) = harvested {
            self.add(
                "env-harvesting",
                Severity::Critical,
                n,
                "Environment variables read near a network send (possible credential harvesting)",
            );
        }
    }

    /// Rules for every file, `SKILL.md` prose included: secrets written
    /// in, downloads run, credentials read and sent, encoded text run,
    /// uploads, the environment sent out, destructive deletes, open
    /// permissions.
    fn shell_rules(&mut self) {
        if let Some(n) = self.find_line(&|l: &str| literal_secret(l).is_some()) {
            self.add(
                "literal-secret",
                Severity::Critical,
                n,
                "A credential is written in the skill",
            );
        }
        if let Some(n) = self.find_line(&pipe_to_shell) {
            self.add(
                "shell-pipe-to-shell",
                Severity::Critical,
                n,
                "Downloads piped straight into a shell",
            );
        }
        self.credential_rules();
        if let Some(n) = self.find_line(&decode_and_run) {
            self.add(
                "shell-decode-exec",
                Severity::Critical,
                n,
                "Encoded text decoded and run (eval or a shell of base64-decoded data)",
            );
        }
        if let Some(n) = self.find_line(&uploads_file_or_stdin) {
            self.add(
                "data-upload",
                Severity::Info,
                n,
                "A file or standard input is posted over the network",
            );
        }
        self.secret_exfiltration();
        if let Some(n) = self.find_line(&destructive_delete) {
            self.add(
                "destructive-delete",
                Severity::Warn,
                n,
                "Recursive delete of a root, home or current folder",
            );
        }
        if let Some(n) = self.find_line(&|l: &str| {
            let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
            l.contains("chmod 777") || l.contains("chmod -R 777")
        }) {
            self.add(
                "unsafe-permissions",
                Severity::Warn,
                n,
                "World-writable permissions (chmod 777)",
            );
        }
    }

    /// Credential files and stores sent over the network: the shell forms
    /// (`cat ~/.aws/credentials | curl -d @- …`, `curl -F f=@~/.ssh/id_rsa`,
    /// `tar ~/.ssh | nc …`) as well as the code forms; read without a
    /// send, a warning.
    fn credential_rules(&mut self) {
        let lines = &self.lines;
        let exfiltration = self
            .find_line(&|l: &str| mentions_secret(l) && network(l))
            .or_else(|| {
                lines.iter().enumerate().find_map(|(i, l)| {
                    if !reads_secret(l) {
                        return None;
                    }
                    let from = i.saturating_sub(8);
                    let to = (i + 8).min(lines.len().saturating_sub(1));
                    lines[from..=to]
                        .iter()
                        .any(|l| sends_data(l))
                        .then_some(i + 1)
                })
            });
        if let Some(n) = exfiltration {
            self.add(
                "credential-exfiltration",
                Severity::Critical,
                n,
                "A credential file or store is read and sent over the network",
            );
        } else if let Some(n) = self.find_line(&reads_secret) {
            self.add(
                "credential-access",
                Severity::Warn,
                n,
                "A credential file or store is read (keys, cloud credentials, .env, browser or keychain stores)",
            );
        }
    }

    /// The environment piped or interpolated into a network command.
    fn secret_exfiltration(&mut self) {
        let padded = format!("\n{}", self.code.to_lowercase());
        if let Some(pos) = [
            "process.env",
            "$env",
            "${env",
            "os.environ",
            " env |",
            " env>",
            "\nenv |",
            "\nenv>",
            "printenv",
        ]
        .iter()
        .filter_map(|m| padded.find(m))
        .find(|&p| {
            let window: String = padded[p..].chars().take(80).collect();
            [
                "fetch", "curl", "wget", "http", "nc ", "ncat", "netcat", "socat", "/dev/tcp",
            ]
            .iter()
            .any(|n| window.contains(n))
        }) {
            let n = padded[..=pos].matches('\n').count();
            self.add(
                "secret-exfiltration",
                Severity::Critical,
                n.max(1),
                "Environment values sent over the network",
            );
        }
    }

    /// `SKILL.md` prose (outside code blocks) that steers the model:
    /// ignore your instructions, pose as the system, use tools unasked.
    fn markdown_rules(&mut self) {
        let mut in_code = false;
        for i in 0..self.raw_lines.len() {
            let l = self.raw_lines[i];
            if l.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            match sanitize::scan(l).map(|f| f.label) {
                Some(sanitize::IGNORE_PREVIOUS | sanitize::DISREGARD_RULES) => self.add(
                    "prompt-injection-ignore-instructions",
                    Severity::Critical,
                    i + 1,
                    "Instructions telling the model to ignore its instructions",
                ),
                Some(
                    sanitize::PROMPT_EXTRACTION
                    | sanitize::EMBEDDED_SYSTEM
                    | sanitize::TEMPLATE_MARKER,
                ) => self.add(
                    "prompt-injection-system",
                    Severity::Critical,
                    i + 1,
                    "Instructions posing as or extracting the system prompt",
                ),
                _ => {}
            }
            if tool_without_permission(l) {
                self.add(
                    "prompt-injection-tool",
                    Severity::Critical,
                    i + 1,
                    "Instructions to use tools without the user's permission",
                );
            }
        }
    }
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

mod lines;

#[cfg(test)]
mod tests;
