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

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::memory::sanitize;

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

/// Whether the line sends a request (code or shell).
fn network_send(l: &str) -> bool {
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
    let compact = compact_lower(line);
    let fetch = sanitize::REMOTE_FETCHERS
        .iter()
        .filter_map(|f| compact.find(f))
        .min();
    let piped = fetch.is_some_and(|pos| {
        sanitize::PIPED_INTERPRETERS
            .iter()
            .any(|s| compact[pos..].contains(s))
    });
    // `bash <(curl …)`, `sh -c "$(curl …)"`, `eval "$(wget -O- …)"`.
    let substituted = ["bash<(", "sh<(", "zsh<(", "source<(", ".<("]
        .iter()
        .any(|p| compact.contains(&format!("{p}curl")) || compact.contains(&format!("{p}wget")))
        || (["$(curl", "$(wget", "`curl", "`wget"]
            .iter()
            .any(|p| compact.contains(p))
            && [
                "sh-c",
                "bash-c",
                "zsh-c",
                "eval",
                "python-c",
                "python3-c",
                "source",
                "exec",
            ]
            .iter()
            .any(|r| compact.contains(r)));
    piped || substituted
}

fn compact_lower(line: &str) -> String {
    line.to_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// Files and stores that hold credentials, as they appear in paths.
const SECRET_PATHS: &[&str] = &[
    "~/.ssh",
    "/.ssh",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".aws/credentials",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".docker/config.json",
    ".kube/config",
    "gh/hosts.yml",
    ".gnupg",
    "/etc/shadow",
    "wallet.dat",
    // Browsers
    "google/chrome",
    "google-chrome",
    "chromium",
    "bravesoftware",
    ".mozilla/firefox",
    "firefox/profiles",
    "login data",
    "login\\ data",
    "logins.json",
    "key4.db",
    "cookies.sqlite",
    // Keychains
    "library/keychains",
    ".keychain",
];
/// Commands that print a stored secret.
const SECRET_COMMANDS: &[&str] = &[
    "security find-generic-password",
    "security find-internet-password",
    "security dump-keychain",
    "secret-tool lookup",
];

/// Whether the line names a credential file or store (or a `.env` file).
fn mentions_secret(line: &str) -> bool {
    let l = line.to_lowercase();
    SECRET_PATHS.iter().any(|p| l.contains(p))
        || SECRET_COMMANDS.iter().any(|c| l.contains(c))
        || names_env_file(&l)
}

/// `.env`, `~/.env`, `.env.local`, but not `process.env` or `os.environ`.
fn names_env_file(lower: &str) -> bool {
    lower.match_indices(".env").any(|(i, _)| {
        let before = lower[..i].chars().last();
        let after = lower[i + 4..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The words of a shell line (split at blanks, quotes and operators).
fn command_words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || "|;&()`'\"<>".contains(c))
        .filter(|w| !w.is_empty())
}

/// Whether the line talks to the network at all.
fn network(line: &str) -> bool {
    let l = line.to_lowercase();
    [
        "curl ",
        "wget ",
        "fetch(",
        "requests.",
        "httpx.",
        "urlopen(",
        "http.request(",
        "https.request(",
        "axios",
        "invoke-webrequest",
        "invoke-restmethod",
        "/dev/tcp/",
        "/dev/udp/",
        "urllib",
    ]
    .iter()
    .any(|p| l.contains(p))
        || command_words(&l).any(|w| {
            matches!(
                w,
                "nc" | "ncat" | "netcat" | "socat" | "telnet" | "iwr" | "irm" | "curl" | "wget"
            )
        })
        || (command_words(&l).any(|w| matches!(w, "scp" | "rsync" | "sftp")) && l.contains(':'))
}

/// Whether the line reads a credential file or store (rather than only
/// naming it, as `ssh -i ~/.ssh/id_ed25519` does).
fn reads_secret(line: &str) -> bool {
    if !mentions_secret(line) {
        return false;
    }
    let l = line.to_lowercase();
    SECRET_COMMANDS.iter().any(|c| l.contains(c))
        || [
            "$(<",
            "<~",
            "< ~",
            "<$home",
            "< $home",
            "@~",
            "@$home",
            "@/",
            "open(",
            "readfile",
            "read_text(",
            "read_bytes(",
            "get-content",
            "fs.read",
            "readfilesync",
        ]
        .iter()
        .any(|p| l.contains(p))
        || command_words(&l).any(|w| {
            matches!(
                w,
                "cat"
                    | "head"
                    | "tail"
                    | "less"
                    | "more"
                    | "base64"
                    | "xxd"
                    | "od"
                    | "strings"
                    | "tar"
                    | "zip"
                    | "7z"
                    | "cp"
                    | "scp"
                    | "rsync"
                    | "gpg"
                    | "openssl"
                    | "dd"
                    | "tee"
            )
        })
}

/// Whether the line sends data (not just a request) over the network.
fn sends_data(line: &str) -> bool {
    let l = line.to_lowercase();
    let words: Vec<&str> = command_words(line).collect();
    let curl = words.contains(&"curl")
        && words.iter().any(|w| {
            matches!(
                *w,
                "-d" | "-F"
                    | "-T"
                    | "--data"
                    | "--data-binary"
                    | "--data-raw"
                    | "--data-urlencode"
                    | "--form"
                    | "--upload-file"
                    | "--json"
                    | "POST"
                    | "PUT"
            ) || w.starts_with("-d@")
                || w.starts_with("--data=")
                || w.starts_with("-F")
                || w.starts_with("-XPOST")
                || w.starts_with("-XPUT")
        });
    let wget = words.contains(&"wget")
        && ["--post-file", "--post-data", "--body-file", "--body-data"]
            .iter()
            .any(|f| l.contains(f));
    let raw = words
        .iter()
        .any(|w| matches!(*w, "nc" | "ncat" | "netcat" | "socat" | "telnet"))
        || l.contains("/dev/tcp/")
        || l.contains("/dev/udp/");
    let copy = words.iter().any(|w| matches!(*w, "scp" | "rsync" | "sftp")) && l.contains(':');
    let code = [
        "requests.post(",
        "requests.put(",
        "requests.patch(",
        "httpx.post(",
        "httpx.put(",
        "axios.post(",
        "axios.put(",
        "method: 'post'",
        "method: \"post\"",
        "method:'post'",
        "method:\"post\"",
        "body:",
        "-method post",
        "-infile",
    ]
    .iter()
    .any(|p| l.contains(p));
    curl || wget || raw || copy || code
}

/// Posting a file or standard input: `curl -d @file`, `--data-binary @-`,
/// `-T`, `--upload-file`, `-F x=@file`, `wget --post-file`, `… | nc host`.
fn uploads_file_or_stdin(line: &str) -> bool {
    let words: Vec<&str> = command_words(line).collect();
    let curl = words.contains(&"curl")
        && (words.iter().any(|w| {
            matches!(*w, "-T" | "--upload-file")
                || w.starts_with('@')
                || w.contains("=@")
                || w.starts_with("-d@")
        }));
    let wget =
        words.contains(&"wget") && (line.contains("--post-file") || line.contains("--body-file"));
    let nc = words
        .iter()
        .any(|w| matches!(*w, "nc" | "ncat" | "netcat" | "socat"))
        && (line.contains('<') || line.contains('|'));
    curl || wget || nc
}

/// Encoded text decoded and run: `eval "$(echo … | base64 -d)"`,
/// `echo … | base64 --decode | bash`, `exec(base64.b64decode(…))`.
fn decode_and_run(line: &str) -> bool {
    let c = compact_lower(line);
    let decode = [
        "base64-d",
        "base64--decode",
        "base64-i-d",
        "base32-d",
        "opensslbase64-d",
        "opensslenc-base64-d",
        "xxd-r",
        "b64decode",
        "frombase64string",
        "atob(",
    ]
    .iter()
    .any(|d| c.contains(d));
    let run = [
        "eval",
        "|sh",
        "|bash",
        "|zsh",
        "|python",
        "|perl",
        "|ruby",
        "|node",
        "sh-c",
        "bash-c",
        "exec(",
        "|iex",
        "invoke-expression",
        "source<(",
        ".<(",
        "|source",
    ]
    .iter()
    .any(|r| c.contains(r));
    decode && run
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
