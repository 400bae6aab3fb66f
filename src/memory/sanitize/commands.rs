//! The classes about commands in a note: execution requests, destructive
//! commands, remote scripts piped into a shell and obfuscated execution.

use super::normalize::Normalized;
use super::{EXECUTION_VERBS, is, within};

/// Signs that a command in the note is meant to do harm.
fn dangerous_content(n: &Normalized) -> bool {
    let c = &n.flat;
    destructive_command(n)
        || remote_execution_pipe(n)
        || obfuscated_execution(n)
        || [
            "curl ",
            "wget ",
            "/dev/tcp",
            "netcat",
            "nc -e",
            "base64",
            "eval ",
            "mkfs",
            "dd if=",
            "chmod 777",
            "powershell",
            "bash -c",
            "python -c",
            "| sh",
            "|sh",
            "/etc/passwd",
            "/etc/shadow",
            ".ssh",
            "id_rsa",
        ]
        .iter()
        .any(|p| c.contains(p))
}

/// `execute the following command …` when what follows is harmful or the
/// note asks for stealth; `Run the following script after deploy: make
/// release` passes.
pub(super) fn command_execution_request(n: &Normalized) -> bool {
    let stealth = [
        "silently",
        "secretly",
        "quietly",
        "immediately",
        "without asking",
        "without telling",
        "without confirmation",
        "dont tell",
        "do not tell",
        "without permission",
    ];
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            if !is(&w.text, EXECUTION_VERBS) {
                continue;
            }
            let Some(j) = within(words, i, 2, &["following", "this", "these", "below"]) else {
                continue;
            };
            if within(
                words,
                j,
                2,
                &["command*", "code", "script*", "snippet", "payload"],
            )
            .is_none()
            {
                continue;
            }
            if dangerous_content(n) || stealth.iter().any(|s| n.flat.contains(s)) {
                return true;
            }
        }
    }
    false
}

pub(super) fn destructive_command(n: &Normalized) -> bool {
    let c = &n.flat;
    for rm in [
        "rm -rf ",
        "rm -fr ",
        "rm -r -f ",
        "rm -f -r ",
        "rm --recursive --force ",
    ] {
        let mut from = 0;
        while let Some(pos) = c[from..].find(rm) {
            from += pos + rm.len();
            if dangerous_rm_target(&c[from..]) {
                return true;
            }
        }
    }
    let compact = &n.compact;
    compact.contains(":(){:|:&};:")
        || c.contains("--no-preserve-root")
        || c.contains("mkfs.")
        || c.contains("mkfs ")
        || (c.contains("dd if=") && c.contains("of=/dev/"))
        || compact.contains(">/dev/sda")
        || c.contains("chmod -r 777 /")
        || c.contains("shred /dev/")
        || c.contains("format c:")
}

/// `/`, `/*`, `~`, `~/`, `$HOME` or `*` as the target of `rm -rf`; a
/// specific path such as `node_modules` or `~/projects/old` is fine.
fn dangerous_rm_target(target: &str) -> bool {
    let ends = |s: &str| s.is_empty() || s.starts_with([' ', '*', ';', '&', '|', '\n', '"', '\'']);
    if let Some(rest) = target.strip_prefix('/') {
        return ends(rest);
    }
    for home in ["~", "$home", "${home}"] {
        if let Some(rest) = target.strip_prefix(home) {
            return ends(rest) || rest.strip_prefix('/').is_some_and(ends);
        }
    }
    target.starts_with('*')
}

/// Programs that fetch a remote script (as they appear in compacted,
/// lowercased text).
pub(crate) const REMOTE_FETCHERS: &[&str] = &[
    "curl",
    "wget",
    "invoke-webrequest",
    "invoke-restmethod",
    "iwr",
    "irm",
];

/// What a fetched script is piped into to run it (compacted: `| sudo sh`
/// is `|sudosh`).
pub(crate) const PIPED_INTERPRETERS: &[&str] = &[
    "|sh",
    "|bash",
    "|zsh",
    "|sudosh",
    "|sudobash",
    "|sudo-e",
    "|python",
    "|perl",
    "|ruby",
    "|node",
    "|iex",
    "|invoke-expression",
    "|source",
];

pub(super) fn remote_execution_pipe(n: &Normalized) -> bool {
    let c = &n.compact;
    for f in REMOTE_FETCHERS {
        let Some(pos) = c.find(f) else { continue };
        let rest = &c[pos..];
        if PIPED_INTERPRETERS.iter().any(|s| rest.contains(s)) {
            return true;
        }
    }
    [
        "bash<(curl",
        "sh<(curl",
        "bash<(wget",
        "sh<(wget",
        "$(curl",
        "$(wget",
        "`curl",
        "`wget",
    ]
    .iter()
    .any(|p| c.contains(p))
        && (c.contains("sh-c") || c.contains("bash") || c.contains("eval") || c.contains("sh<("))
}

pub(super) fn obfuscated_execution(n: &Normalized) -> bool {
    let c = &n.compact;
    let decode = [
        "base64-d",
        "base64--decode",
        "base64-d-",
        "base64-di",
        "frombase64string",
        "b64decode",
        "atob(",
    ];
    let run = [
        "|sh",
        "|bash",
        "|zsh",
        "eval",
        "exec(",
        "|iex",
        "invoke-expression",
        "|python",
        "|perl",
    ];
    (decode.iter().any(|d| c.contains(d)) && run.iter().any(|r| c.contains(r)))
        || c.contains("powershell-enc")
        || c.contains("powershell-e ")
        || c.contains("powershell-encodedcommand")
        || c.contains("pwsh-enc")
}
