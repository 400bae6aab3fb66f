//! What `exec` may run in allowlist mode: a command line is read as simple
//! commands joined by `|`, `&&`, `||`, `;` (or a newline), each program is
//! checked against the allowlist (with per-program argument rules for the
//! built-in safe bins), and what runs is the validated words re-quoted, so
//! the shell cannot expand anything the check did not see.
//!
//! Anything else a shell would interpret is refused rather than guessed
//! at: `$` (variables, `$(…)`), backticks, redirections and here-documents
//! (`<`, `>`), `&` (background), subshells and groups (`(`, `)`, `{`,
//! `}`), unquoted globs (`*`, `?`, `[`), a leading `~`, variable
//! assignments before a command, and `#` comments. Quoted text is literal.
//!
//! Pure: no I/O, nothing is looked up on disk (a refusal never depends on
//! which files exist).

use std::collections::BTreeMap;
use std::fmt;
use std::iter::Peekable;
use std::str::Chars;

/// How two simple commands are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Pipe,
    And,
    Or,
    Then,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Pipe => " | ",
            Op::And => " && ",
            Op::Or => " || ",
            Op::Then => "; ",
        }
    }
}

/// One simple command: its words (the program first) and what joins it to
/// the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Simple {
    pub words: Vec<String>,
    pub then: Option<Op>,
}

/// Why a command is not run as allowlisted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("{0}")]
    Syntax(String),
    #[error("`{0}` is a path; name allowed programs by their bare name")]
    Path(String),
    #[error("`{0}` is not an allowed program")]
    NotAllowed(String),
    #[error("`{program}`: {why}")]
    Argument { program: String, why: String },
}

fn syntax(what: &str) -> Refusal {
    Refusal::Syntax(format!(
        "{what} is not allowed (quote it to pass it literally)"
    ))
}

/// Reads `command` into simple commands, or says what is not allowed.
pub(crate) fn parse(command: &str) -> Result<Vec<Simple>, Refusal> {
    let mut out: Vec<Simple> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    // The current word has been plain unquoted characters so far.
    let mut plain = true;
    let mut chars = command.chars().peekable();

    fn end_word(words: &mut Vec<String>, word: &mut String, in_word: &mut bool, plain: &mut bool) {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
        *plain = true;
    }
    let join = |out: &mut Vec<Simple>, words: &mut Vec<String>, op: Op| -> Result<(), Refusal> {
        if words.is_empty() {
            return Err(Refusal::Syntax(format!(
                "`{}` has no command before it",
                op.text().trim()
            )));
        }
        out.push(Simple {
            words: std::mem::take(words),
            then: Some(op),
        });
        Ok(())
    };

    while let Some(c) = chars.next() {
        match c {
            '\0' => return Err(Refusal::Syntax("a NUL character is not allowed".into())),
            ' ' | '\t' | '\r' => end_word(&mut words, &mut word, &mut in_word, &mut plain),
            '\n' => {
                end_word(&mut words, &mut word, &mut in_word, &mut plain);
                // A newline ends a command like `;`; after an operator or
                // on an empty line it is only a line break.
                if !words.is_empty() {
                    join(&mut out, &mut words, Op::Then)?;
                }
            }
            ';' => {
                end_word(&mut words, &mut word, &mut in_word, &mut plain);
                if chars.peek() == Some(&';') {
                    return Err(syntax("`;;`"));
                }
                join(&mut out, &mut words, Op::Then)?;
            }
            '|' => {
                end_word(&mut words, &mut word, &mut in_word, &mut plain);
                let op = if chars.peek() == Some(&'|') {
                    chars.next();
                    Op::Or
                } else {
                    Op::Pipe
                };
                join(&mut out, &mut words, op)?;
            }
            '&' => {
                if chars.peek() == Some(&'&') {
                    chars.next();
                    end_word(&mut words, &mut word, &mut in_word, &mut plain);
                    join(&mut out, &mut words, Op::And)?;
                } else {
                    return Err(syntax("`&` (running in the background)"));
                }
            }
            '\'' => {
                in_word = true;
                plain = false;
                single_quoted(&mut chars, &mut word)?;
            }
            '"' => {
                in_word = true;
                plain = false;
                double_quoted(&mut chars, &mut word)?;
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some('\0') => {
                    return Err(Refusal::Syntax("a NUL character is not allowed".into()));
                }
                Some(c) => {
                    word.push(c);
                    in_word = true;
                    plain = false;
                }
                None => return Err(Refusal::Syntax("the command ends with `\\`".into())),
            },
            '$' => return Err(syntax("`$` (variables, `$(…)` command substitution)")),
            '`' => return Err(syntax("a backtick (command substitution)")),
            '<' | '>' => {
                return Err(syntax(&format!(
                    "`{c}` (redirection; read files with the `read` tool)"
                )));
            }
            '(' | ')' => return Err(syntax(&format!("`{c}` (subshell)"))),
            '{' | '}' => return Err(syntax(&format!("`{c}` (command group or brace expansion)"))),
            '*' | '?' | '[' => {
                return Err(syntax(&format!("an unquoted `{c}` (file name pattern)")));
            }
            '~' if !in_word => return Err(syntax("a leading `~` (home folder expansion)")),
            '#' if !in_word => return Err(syntax("`#` (comment)")),
            '=' if words.is_empty() && plain && in_word && is_name(&word) => {
                return Err(Refusal::Syntax(format!(
                    "`{word}=…` (setting a variable) is not allowed"
                )));
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word, &mut plain);
    if words.is_empty() {
        match out.last_mut() {
            None => return Err(Refusal::Syntax("the command is empty".into())),
            Some(last) if last.then == Some(Op::Then) => last.then = None,
            Some(last) => {
                return Err(Refusal::Syntax(format!(
                    "the command ends with `{}`",
                    last.then.map(|o| o.text().trim()).unwrap_or("")
                )));
            }
        }
    } else {
        out.push(Simple { words, then: None });
    }
    Ok(out)
}

/// Reads a single-quoted string (the opening quote read) into `word`:
/// every character literal up to the closing quote.
fn single_quoted(chars: &mut Peekable<Chars<'_>>, word: &mut String) -> Result<(), Refusal> {
    loop {
        match chars.next() {
            Some('\'') => return Ok(()),
            Some('\0') => {
                return Err(Refusal::Syntax("a NUL character is not allowed".into()));
            }
            Some(c) => word.push(c),
            None => return Err(Refusal::Syntax("a quote is not closed".into())),
        }
    }
}

/// Reads a double-quoted string (the opening quote read) into `word`,
/// refusing the expansions the shell would make inside it.
fn double_quoted(chars: &mut Peekable<Chars<'_>>, word: &mut String) -> Result<(), Refusal> {
    loop {
        match chars.next() {
            Some('"') => return Ok(()),
            Some('\\') => match chars.next() {
                Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                Some('\n') => {}
                Some(c) => {
                    word.push('\\');
                    word.push(c);
                }
                None => return Err(Refusal::Syntax("a quote is not closed".into())),
            },
            Some('$') => {
                return Err(Refusal::Syntax(
                    "`$` (expansion) is not allowed, even in double quotes; use single quotes for a literal `$`".into(),
                ));
            }
            Some('`') => {
                return Err(Refusal::Syntax(
                    "a backtick (command substitution) is not allowed, even in double quotes; use single quotes".into(),
                ));
            }
            Some('\0') => {
                return Err(Refusal::Syntax("a NUL character is not allowed".into()));
            }
            Some(c) => word.push(c),
            None => return Err(Refusal::Syntax("a quote is not closed".into())),
        }
    }
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A word as a shell would read it back literally: single-quoted.
pub(crate) fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The shell text that runs exactly `commands`, every word quoted.
pub(crate) fn requote(commands: &[Simple]) -> String {
    let mut out = String::new();
    for c in commands {
        let words: Vec<String> = c.words.iter().map(|w| quote(w)).collect();
        out.push_str(&words.join(" "));
        if let Some(op) = c.then {
            out.push_str(op.text());
        }
    }
    out
}

/// What a program's operands (non-option arguments) may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// None: the program reads standard input only (`-` is allowed).
    None,
    /// Any text (the program never opens them as files).
    Any,
    /// Only `+FORMAT` (date).
    DateFormat,
}

/// The arguments a built-in safe bin accepts. Options not listed are
/// refused (file-reading and file-writing ones are never listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Profile {
    /// Options that take no value.
    pub flags: &'static [&'static str],
    /// Options whose value follows (`-k 2`, `-k2`, `--key 2`, `--key=2`).
    pub valued: &'static [&'static str],
    /// Options with an optional value, attached only (`-Idate`,
    /// `--iso-8601=date`).
    pub optional: &'static [&'static str],
    pub operands: Operands,
    /// No option parsing: every argument is text (echo, printf).
    pub raw: bool,
}

const HELP: [&str; 2] = ["--help", "--version"];

macro_rules! flags {
    ($($f:literal),* $(,)?) => { &[$($f,)* HELP[0], HELP[1]] };
}

const TEXT: Profile = Profile {
    flags: &[],
    valued: &[],
    optional: &[],
    operands: Operands::Any,
    raw: true,
};

/// The built-in safe bins and their argument rules. `sort`, `uniq`, `cut`
/// and `wc` read standard input only; `date` cannot read (`-f`, `-r`) or set
/// (`-s`) anything; `tr` and `seq` take text, never files.
pub(crate) const PROFILES: &[(&str, Profile)] = &[
    ("echo", TEXT),
    ("printf", TEXT),
    (
        "date",
        Profile {
            flags: flags!["-u", "--utc", "--universal", "-R", "--rfc-email", "--debug"],
            valued: &["-d", "--date"],
            optional: &["-I", "--iso-8601", "--rfc-3339"],
            operands: Operands::DateFormat,
            raw: false,
        },
    ),
    (
        "seq",
        Profile {
            flags: flags!["-w", "--equal-width"],
            valued: &["-f", "--format", "-s", "--separator"],
            optional: &[],
            operands: Operands::Any,
            raw: false,
        },
    ),
    (
        "tr",
        Profile {
            flags: flags![
                "-c",
                "-C",
                "-d",
                "-s",
                "-t",
                "--complement",
                "--delete",
                "--squeeze-repeats",
                "--truncate-set1"
            ],
            valued: &[],
            optional: &[],
            operands: Operands::Any,
            raw: false,
        },
    ),
    (
        "cut",
        Profile {
            flags: flags![
                "-n",
                "-s",
                "-z",
                "--only-delimited",
                "--complement",
                "--zero-terminated"
            ],
            valued: &[
                "-b",
                "-c",
                "-f",
                "-d",
                "--bytes",
                "--characters",
                "--fields",
                "--delimiter",
                "--output-delimiter",
            ],
            optional: &[],
            operands: Operands::None,
            raw: false,
        },
    ),
    (
        "sort",
        Profile {
            flags: flags![
                "-b",
                "-d",
                "-f",
                "-g",
                "-i",
                "-M",
                "-h",
                "-n",
                "-R",
                "-r",
                "-V",
                "-c",
                "-C",
                "-s",
                "-u",
                "-z",
                "--ignore-leading-blanks",
                "--dictionary-order",
                "--ignore-case",
                "--general-numeric-sort",
                "--ignore-nonprinting",
                "--month-sort",
                "--human-numeric-sort",
                "--numeric-sort",
                "--random-sort",
                "--reverse",
                "--version-sort",
                "--stable",
                "--unique",
                "--zero-terminated",
                "--debug"
            ],
            valued: &[
                "-k",
                "-t",
                "-S",
                "--key",
                "--field-separator",
                "--buffer-size",
                "--parallel",
                "--sort",
            ],
            optional: &["--check"],
            operands: Operands::None,
            raw: false,
        },
    ),
    (
        "uniq",
        Profile {
            flags: flags![
                "-c",
                "-d",
                "-D",
                "-u",
                "-i",
                "-z",
                "--count",
                "--repeated",
                "--unique",
                "--ignore-case",
                "--zero-terminated"
            ],
            valued: &[
                "-f",
                "-s",
                "-w",
                "--skip-fields",
                "--skip-chars",
                "--check-chars",
            ],
            optional: &["--all-repeated", "--group"],
            operands: Operands::None,
            raw: false,
        },
    ),
    (
        "wc",
        Profile {
            flags: flags![
                "-c",
                "-m",
                "-l",
                "-w",
                "-L",
                "--bytes",
                "--chars",
                "--lines",
                "--words",
                "--max-line-length"
            ],
            valued: &[],
            optional: &["--total"],
            operands: Operands::None,
            raw: false,
        },
    ),
];

/// The argument rules of a built-in safe bin.
pub(crate) fn profile(program: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|(n, _)| *n == program).map(|(_, p)| p)
}

impl Profile {
    /// Checks a built-in safe bin's arguments.
    pub(crate) fn check(&self, program: &str, args: &[String]) -> Result<(), Refusal> {
        if self.raw {
            return Ok(());
        }
        let refuse = |why: String| Refusal::Argument {
            program: program.to_string(),
            why,
        };
        let mut i = 0;
        let mut operands_only = false;
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            let negative_number = self.operands == Operands::Any
                && arg.len() > 1
                && arg[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.');
            if operands_only || arg == "-" || !arg.starts_with('-') || negative_number {
                self.check_operand(arg).map_err(refuse)?;
                continue;
            }
            if arg == "--" {
                operands_only = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v)),
                    None => (arg.to_string(), None),
                };
                let name = name.as_str();
                if self.flags.contains(&name) {
                    if value.is_some() {
                        return Err(refuse(format!("option `{name}` takes no value")));
                    }
                } else if self.valued.contains(&name) {
                    if value.is_none() {
                        if i >= args.len() {
                            return Err(refuse(format!("option `{name}` needs a value")));
                        }
                        i += 1;
                    }
                } else if !self.optional.contains(&name) {
                    return Err(refuse(self.unknown_option(name)));
                }
                continue;
            }
            // A cluster of short options: `-rn`, `-k2`, `-t,`.
            let letters: Vec<char> = arg[1..].chars().collect();
            for (j, letter) in letters.iter().enumerate() {
                let option = format!("-{letter}");
                let option = option.as_str();
                if self.flags.contains(&option) {
                    continue;
                }
                if self.valued.contains(&option) {
                    if j + 1 == letters.len() {
                        if i >= args.len() {
                            return Err(refuse(format!("option `{option}` needs a value")));
                        }
                        i += 1;
                    }
                    break;
                }
                if self.optional.contains(&option) {
                    break;
                }
                return Err(refuse(self.unknown_option(option)));
            }
        }
        Ok(())
    }

    fn unknown_option(&self, option: &str) -> String {
        format!(
            "option `{option}` is not allowed (allowed: {})",
            self.flags
                .iter()
                .chain(self.valued)
                .chain(self.optional)
                .filter(|o| !HELP.contains(o))
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        )
    }

    fn check_operand(&self, arg: &str) -> Result<(), String> {
        match self.operands {
            Operands::Any => Ok(()),
            Operands::None if arg == "-" => Ok(()),
            Operands::None => Err(format!(
                "`{arg}`: it reads standard input only, no file operands (read files with the `read` tool)"
            )),
            Operands::DateFormat if arg.starts_with('+') => Ok(()),
            Operands::DateFormat => Err(format!("`{arg}`: only a `+FORMAT` operand is allowed")),
        }
    }
}

/// How an allowed program's arguments are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A built-in safe bin: its profile.
    Profiled(&'static Profile),
    /// A program the user (or an eligible skill, with
    /// `tools.exec.autoAllowSkills`) allowed: any arguments.
    AnyArguments,
}

/// The programs allowlist mode runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowlist {
    entries: BTreeMap<String, Rule>,
}

/// Programs never added to the allowlist on a skill's behalf: they run
/// other programs or code (shells, interpreters, `env`, `xargs`, …).
const RUNS_OTHER_PROGRAMS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "fish",
    "dash",
    "ksh",
    "mksh",
    "csh",
    "tcsh",
    "busybox",
    "env",
    "xargs",
    "sudo",
    "su",
    "doas",
    "nohup",
    "timeout",
    "nice",
    "ionice",
    "time",
    "watch",
    "exec",
    "eval",
    "command",
    "builtin",
    "find",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "node",
    "nodejs",
    "deno",
    "bun",
    "npx",
    "ruby",
    "perl",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "osascript",
    "pwsh",
    "powershell",
    "ssh",
    "make",
    "script",
    "strace",
    "gdb",
];

/// Whether `program` runs other programs or code, so a skill cannot bring
/// it into the allowlist.
pub(crate) fn runs_other_programs(program: &str) -> bool {
    RUNS_OTHER_PROGRAMS.contains(&program)
        || ["python", "pypy", "perl", "ruby", "php", "node", "lua"]
            .iter()
            .any(|p| program.starts_with(p))
}

impl Allowlist {
    /// `safe_bins` (`tools.exec.safeBins`): built-in names keep their
    /// profile, other names run with any arguments; `skill_bins` (with
    /// `autoAllowSkills`) run with any arguments unless they run other
    /// programs.
    pub(crate) fn new<'a>(
        safe_bins: impl IntoIterator<Item = &'a str>,
        skill_bins: impl IntoIterator<Item = &'a str>,
    ) -> Allowlist {
        let mut entries = BTreeMap::new();
        for name in skill_bins {
            let name = name.trim();
            if is_bare_name(name) && !runs_other_programs(name) && profile(name).is_none() {
                entries.insert(name.to_string(), Rule::AnyArguments);
            }
        }
        for name in safe_bins {
            let name = name.trim();
            if !is_bare_name(name) {
                continue;
            }
            let rule = match profile(name) {
                Some(p) => Rule::Profiled(p),
                None => Rule::AnyArguments,
            };
            entries.insert(name.to_string(), rule);
        }
        Allowlist { entries }
    }

    /// The allowed program names, sorted.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    pub(crate) fn rule(&self, program: &str) -> Option<Rule> {
        self.entries.get(program).copied()
    }

    /// Parses and checks `command`; the shell text to run exactly what was
    /// checked.
    pub(crate) fn check(&self, command: &str) -> Result<String, Refusal> {
        let commands = parse(command)?;
        for c in &commands {
            let (program, args) = c.words.split_first().expect("a simple command has words");
            if program.contains('/') {
                return Err(Refusal::Path(program.clone()));
            }
            match self.rule(program) {
                None => return Err(Refusal::NotAllowed(program.clone())),
                Some(Rule::AnyArguments) => {}
                Some(Rule::Profiled(p)) => p.check(program, args)?,
            }
        }
        Ok(requote(&commands))
    }
}

fn is_bare_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.chars().any(char::is_whitespace)
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("(none)");
        }
        f.write_str(&self.names().join(", "))
    }
}

#[cfg(test)]
mod tests;
