//! The environment of a child process: an allowlist of almanac's own
//! variables, plus what a skill declares for itself.
//!
//! Whatever else almanac's environment holds (provider keys such as
//! `OPENAI_API_KEY`, tokens, `ALMANAC_*` settings, anything unknown) never
//! reaches a child from here.

use std::collections::BTreeMap;

/// Variables every child gets from almanac's environment, when set.
pub(crate) const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TMP",
    "TEMP",
];

/// Whether `name` is passed to every child: one of [`PASSED`] or a locale
/// category (`LC_*`).
pub(crate) fn is_passed(name: &str) -> bool {
    PASSED.contains(&name)
        || name
            .strip_prefix("LC_")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_uppercase()))
}

/// Whether `name` is almanac's own setting (`ALMANAC_*`), which no child
/// gets even when a skill names it.
pub(crate) fn is_almanac_setting(name: &str) -> bool {
    name.starts_with("ALMANAC_")
}

/// Keys that change how programs load or run (the dynamic loader, shell
/// start-up files and options, interpreters' start-up hooks and search
/// paths, the OpenSSL config); never set from config for a skill or a
/// hook, whatever the entry says.
pub(crate) fn is_dangerous_key(key: &str) -> bool {
    matches!(
        key,
        "PATH"
            | "BASH_ENV"
            | "ENV"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "PS4"
            | "PROMPT_COMMAND"
            | "IFS"
            | "OPENSSL_CONF"
            | "GCONV_PATH"
            | "NODE_OPTIONS"
            | "NODE_PATH"
            | "PYTHONPATH"
            | "PYTHONSTARTUP"
            | "PYTHONHOME"
            | "PERL5OPT"
            | "PERL5LIB"
            | "PERLLIB"
            | "RUBYOPT"
            | "RUBYLIB"
            | "JAVA_TOOL_OPTIONS"
            | "_JAVA_OPTIONS"
    ) || key.starts_with("LD_")
        || key.starts_with("DYLD_")
        || key.starts_with("BASH_FUNC_")
}

/// The environment every child starts from: the allowlisted variables of
/// `vars`, with `PATH` keeping only absolute folders (an empty or relative
/// entry would make the working directory, which the model can write to, a
/// place programs are looked up in).
pub(crate) fn base(vars: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in vars {
        if !is_passed(name) {
            continue;
        }
        let value = if name == "PATH" {
            value
                .split(':')
                .filter(|dir| dir.starts_with('/'))
                .collect::<Vec<_>>()
                .join(":")
        } else {
            value.clone()
        };
        out.insert(name.clone(), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_allowlisted_variables_pass() {
        let env = base(&vars(&[
            ("PATH", "/usr/bin::.:bin:/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("LC_", "x"),
            ("LC_lower", "x"),
            ("TZ", "UTC"),
            ("OPENAI_API_KEY", "sk-1"),
            ("ANTHROPIC_API_KEY", "sk-2"),
            ("GITHUB_TOKEN", "ghp"),
            ("ALMANAC_STATE_DIR", "/s"),
            ("AWS_SECRET_ACCESS_KEY", "a"),
            ("LD_PRELOAD", "/x.so"),
            ("SOMETHING_ELSE", "x"),
        ]));
        assert_eq!(
            env,
            vars(&[
                ("PATH", "/usr/bin:/bin"),
                ("HOME", "/home/u"),
                ("LANG", "C.UTF-8"),
                ("LC_ALL", "C"),
                ("TZ", "UTC"),
            ])
        );
        assert!(is_almanac_setting("ALMANAC_CONFIG"));
        assert!(!is_almanac_setting("ALMANACX"));
    }
}
