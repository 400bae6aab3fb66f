//! The line predicates the scan's rules are made of: network sends and
//! uploads, credential files read or named, secrets written in, downloads
//! piped into a shell, encoded text run, destructive deletes, odd
//! sockets, obfuscation, and prompt text that reaches for tools.

use crate::memory::sanitize;

/// Whether the line sends a request (code or shell).
pub(super) fn network_send(l: &str) -> bool {
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

pub(super) fn contains_call(line: &str, call: &str) -> bool {
    line.match_indices(call).any(|(i, _)| {
        let before = line[..i].chars().last();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
    })
}

pub(super) fn suspicious_websocket(line: &str) -> bool {
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

pub(super) fn obfuscated(line: &str) -> bool {
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
pub(super) fn literal_secret(line: &str) -> Option<&'static str> {
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

pub(super) fn pipe_to_shell(line: &str) -> bool {
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
pub(super) fn mentions_secret(line: &str) -> bool {
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
pub(super) fn network(line: &str) -> bool {
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
pub(super) fn reads_secret(line: &str) -> bool {
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
pub(super) fn sends_data(line: &str) -> bool {
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
pub(super) fn uploads_file_or_stdin(line: &str) -> bool {
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
pub(super) fn decode_and_run(line: &str) -> bool {
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

pub(super) fn destructive_delete(line: &str) -> bool {
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

pub(super) fn tool_without_permission(line: &str) -> bool {
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
