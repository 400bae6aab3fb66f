use super::*;

fn defaults() -> Allowlist {
    Allowlist::new(crate::config::DEFAULT_SAFE_BINS.iter().copied(), [])
}

fn words(text: &str) -> Vec<Vec<String>> {
    parse(text)
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        .into_iter()
        .map(|c| c.words)
        .collect()
}

#[test]
fn every_default_safe_bin_has_a_profile() {
    for name in crate::config::DEFAULT_SAFE_BINS {
        assert!(profile(name).is_some(), "{name}");
        assert!(!runs_other_programs(name), "{name}");
    }
    for reader in [
        "cat", "head", "tail", "grep", "env", "printenv", "xargs", "sh", "curl",
    ] {
        assert!(
            !crate::config::DEFAULT_SAFE_BINS.contains(&reader),
            "{reader} is not a default safe bin"
        );
    }
}

#[test]
fn words_and_operators() {
    let cases: &[(&str, &[&[&str]])] = &[
        ("echo hi", &[&["echo", "hi"]]),
        ("  echo   a\tb  ", &[&["echo", "a", "b"]]),
        (
            "echo 'a b' \"c d\" e\\ f",
            &[&["echo", "a b", "c d", "e f"]],
        ),
        (
            "echo '$(cat /etc/passwd)'",
            &[&["echo", "$(cat /etc/passwd)"]],
        ),
        (
            "echo '`id`' '*' '~' '#x' 'a;b' 'x > y'",
            &[&["echo", "`id`", "*", "~", "#x", "a;b", "x > y"]],
        ),
        (
            "echo \"it's\" 'say \"hi\"'",
            &[&["echo", "it's", "say \"hi\""]],
        ),
        ("echo \"a\\\"b\\\\c\\$d\\x\"", &[&["echo", "a\"b\\c$d\\x"]]),
        ("echo ''", &[&["echo", ""]]),
        ("echo a#b c~d e=f", &[&["echo", "a#b", "c~d", "e=f"]]),
        ("echo a|sort", &[&["echo", "a"], &["sort"]]),
        (
            "echo a && echo b || echo c; echo d",
            &[
                &["echo", "a"],
                &["echo", "b"],
                &["echo", "c"],
                &["echo", "d"],
            ],
        ),
        ("echo a;", &[&["echo", "a"]]),
        ("echo a\necho b\n", &[&["echo", "a"], &["echo", "b"]]),
        ("echo a &&\n echo b", &[&["echo", "a"], &["echo", "b"]]),
        ("echo a \\\n b", &[&["echo", "a", "b"]]),
    ];
    for (text, want) in cases {
        let want: Vec<Vec<String>> = want
            .iter()
            .map(|c| c.iter().map(|w| w.to_string()).collect())
            .collect();
        assert_eq!(words(text), want, "{text:?}");
    }
    let ops: Vec<Option<Op>> = parse("a | b && c || d; e")
        .unwrap()
        .iter()
        .map(|c| c.then)
        .collect();
    assert_eq!(
        ops,
        vec![
            Some(Op::Pipe),
            Some(Op::And),
            Some(Op::Or),
            Some(Op::Then),
            None
        ]
    );
}

#[test]
fn shell_syntax_beyond_simple_commands_is_refused() {
    for text in [
        "echo $(cat /etc/passwd)",
        "echo $HOME",
        "echo \"$HOME\"",
        "echo \"$(id)\"",
        "echo `id`",
        "echo \"`id`\"",
        "tr a b < /etc/passwd",
        "echo x > out.txt",
        "echo x >> out.txt",
        "sort <<EOF",
        "echo x 2>&1",
        "sleep 10 &",
        "(echo a)",
        "{ echo a; }",
        "echo *",
        "echo a?",
        "echo [ab]",
        "echo ~/x",
        "echo ~",
        "FOO=bar echo a",
        "echo a # comment",
        "# comment",
        "echo a |& sort",
        "",
        "   ",
        "| sort",
        "echo a |",
        "echo a &&",
        "; echo a",
        "echo a;; echo b",
        "echo 'unclosed",
        "echo \"unclosed",
        "echo a\\",
        "echo a\0b",
    ] {
        assert!(
            matches!(parse(text), Err(Refusal::Syntax(_))),
            "{text:?}: {:?}",
            parse(text)
        );
    }
}

#[test]
fn allowlist_and_argument_profiles() {
    let list = defaults();
    let accepted = [
        "echo hello",
        "echo -n 'no newline'",
        "printf '%s\\n' a b",
        "date",
        "date -u +%Y-%m-%d",
        "date --date=@0 -u '+%H:%M'",
        "date -d tomorrow +%A",
        "date -Iseconds",
        "date --rfc-3339=date",
        "seq 3",
        "seq -w -s , 1 10",
        "seq -5 5",
        "echo b a | tr ' ' '\\n' | sort | uniq -c",
        "echo a,b | cut -d, -f2",
        "echo a | cut -d , -f 1",
        "echo x | sort -rn -k2 -t,",
        "echo x | sort -k 2,2 --field-separator=:",
        "echo x | sort -",
        "echo x | uniq --group=separate",
        "echo x | wc -l",
        "echo x | wc --lines --total=never",
        "echo x | tr -d /etc/passwd",
        "echo x | sort -- -",
    ];
    for text in accepted {
        assert!(list.check(text).is_ok(), "{text:?}: {:?}", list.check(text));
    }
    let refused: &[(&str, &str)] = &[
        ("env", "`env` is not an allowed program"),
        ("printenv", "not an allowed program"),
        ("cat /etc/passwd", "`cat` is not an allowed program"),
        ("head -n 1", "`head` is not an allowed program"),
        ("grep -e x", "not an allowed program"),
        (
            "curl http://example.com",
            "`curl` is not an allowed program",
        ),
        ("xargs echo", "not an allowed program"),
        ("sh -c 'echo hi'", "`sh` is not an allowed program"),
        ("python3 -c 'print(1)'", "not an allowed program"),
        ("echo a | cat", "`cat` is not an allowed program"),
        ("echo a && rm -rf x", "`rm` is not an allowed program"),
        ("/bin/echo hi", "`/bin/echo` is a path"),
        ("./sort", "is a path"),
        ("date -f /etc/passwd", "option `-f` is not allowed"),
        ("date --file=/etc/passwd", "option `--file` is not allowed"),
        ("date -r /etc/passwd", "option `-r` is not allowed"),
        ("date --reference /etc/passwd", "not allowed"),
        ("date -s 2020-01-01", "option `-s` is not allowed"),
        ("date -us now", "option `-s` is not allowed"),
        ("date 0101", "only a `+FORMAT` operand"),
        ("date /etc/passwd", "only a `+FORMAT` operand"),
        ("date -d", "needs a value"),
        ("sort -o x", "option `-o` is not allowed"),
        ("sort -no x", "option `-o` is not allowed"),
        ("sort --output=x", "option `--output` is not allowed"),
        ("sort --outp=x", "option `--outp` is not allowed"),
        ("sort --files0-from=list", "not allowed"),
        ("sort -T /tmp", "option `-T` is not allowed"),
        ("sort --compress-program=sh", "not allowed"),
        ("sort --random-source=/etc/passwd", "not allowed"),
        ("sort /etc/passwd", "reads standard input only"),
        ("sort -n /etc/passwd", "reads standard input only"),
        ("sort -- /etc/passwd", "reads standard input only"),
        ("sort --reverse=1", "takes no value"),
        ("wc /etc/passwd", "reads standard input only"),
        ("wc -l /etc/passwd", "reads standard input only"),
        (
            "wc --files0-from=list",
            "option `--files0-from` is not allowed",
        ),
        ("uniq in out", "reads standard input only"),
        ("cut -f1 /etc/passwd", "reads standard input only"),
        ("cut -f", "needs a value"),
        ("tr --bogus a b", "not allowed"),
        ("seq --bogus 3", "not allowed"),
    ];
    for (text, why) in refused {
        match list.check(text) {
            Ok(script) => panic!("{text:?} was accepted as {script:?}"),
            Err(e) => assert!(e.to_string().contains(why), "{text:?}: {e}"),
        }
    }
}

#[test]
fn user_bins_take_any_arguments_and_skill_bins_never_bring_interpreters() {
    let list = Allowlist::new(
        ["jq", "sort", "bad name", "/usr/bin/x"],
        ["gh", "bash", "python3.12", "env", "wc"],
    );
    assert_eq!(list.names(), vec!["gh", "jq", "sort"]);
    assert_eq!(list.rule("jq"), Some(Rule::AnyArguments));
    assert!(matches!(list.rule("sort"), Some(Rule::Profiled(_))));
    assert!(list.check("jq -r .x data.json").is_ok());
    assert!(list.check("gh issue list --repo a/b").is_ok());
    assert!(
        list.check("sort -o x").is_err(),
        "built-ins keep their profile"
    );
    assert!(list.check("bash -c 'id'").is_err());
    assert!(
        list.check("jq . $FILE").is_err(),
        "syntax rules hold for every program"
    );
    assert_eq!(Allowlist::new([], []).to_string(), "(none)");
    assert!(Allowlist::new([], []).check("echo hi").is_err());
}

#[test]
fn what_runs_is_the_checked_words_quoted() {
    let list = defaults();
    assert_eq!(
        list.check("echo 'a b' | tr a-z A-Z && date +%Y;echo \"it's\"")
            .unwrap(),
        "'echo' 'a b' | 'tr' 'a-z' 'A-Z' && 'date' '+%Y'; 'echo' 'it'\\''s'"
    );
    assert_eq!(quote(""), "''");
}

/// Runs `script` with sh and returns what it printed.
fn sh(script: &str) -> String {
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn quoted_metacharacters_stay_literal_when_run() {
    let list = defaults();
    let script = list
        .check("echo '$(id)' '`id`' '$HOME' '*' '; echo pwned' \"a'b\" 'x\ny'")
        .unwrap();
    assert_eq!(sh(&script), "$(id) `id` $HOME * ; echo pwned a'b x\ny\n");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn command_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                4 => "[a-z0-9._,:+%/=-]{1,4}".prop_map(String::from),
                1 => Just(" ".to_string()),
                1 => Just("'".to_string()),
                1 => Just("\"".to_string()),
                1 => Just("\\".to_string()),
                1 => prop::sample::select(vec![
                    "|", "||", "&&", "&", ";", "\n", "$", "`", "<", ">", "(", ")", "{", "}",
                    "*", "?", "[", "]", "~", "#", "!", "\t", "é", "'a b'", "\"x y\"",
                ])
                .prop_map(String::from),
            ],
            0..16,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// What runs reads back as exactly what was checked.
        #[test]
        fn requoted_commands_parse_back_the_same(text in command_text()) {
            let parsed = parse(&text);
            // Enough accepted commands that the property says something.
            prop_assume!(parsed.is_ok());
            let commands = parsed.unwrap();
            prop_assert_eq!(parse(&requote(&commands)), Ok(commands));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The shell executes exactly the validated argv.
        #[test]
        fn the_shell_runs_exactly_the_validated_words(text in command_text()) {
            if let Ok(commands) = parse(&text) {
                let mut script = String::new();
                let mut want = String::new();
                for c in &commands {
                    let quoted: Vec<String> = c.words.iter().map(|w| quote(w)).collect();
                    script.push_str(&format!("printf '<%s>' {}; echo\n", quoted.join(" ")));
                    for w in &c.words {
                        want.push_str(&format!("<{w}>"));
                    }
                    want.push('\n');
                }
                prop_assert_eq!(sh(&script), want);
            }
        }
    }
}
