//! `HEARTBEAT.md`: when it counts as empty, its `tasks:` block, and which
//! tasks are due.
//!
//! The file is read line by line, never as YAML, so a hand-edited checklist
//! cannot make it unreadable. A `tasks:` block looks like this:
//!
//! ```text
//! tasks:
//! - name: inbox-triage
//!   interval: 30m
//!   prompt: "Check the inbox and summarize anything urgent"
//! ```
//!
//! * The block starts at a line that is exactly `tasks:` (surrounding
//!   whitespace ignored).
//! * A task starts at a line beginning `- name:` (indented or not).
//! * Indented `interval:` and `prompt:` lines set the fields of the task
//!   above them. One pair of quotes around a value is removed.
//! * Blank lines and other indented lines stay inside the block (other
//!   indented lines are ignored, with a diagnostic); the first non-blank,
//!   non-indented line that does not start a task ends the block.
//! * A task needs a name, an interval and a prompt; one missing any of
//!   them is dropped with a diagnostic. One whose interval does not parse
//!   (default unit minutes) is kept but never due. Prompts are one line.
//!
//! The rest of the file (everything outside `tasks:` blocks) is context for
//! the due tasks. The block is cut out exactly as far as it was read, so a
//! task is never also repeated as context.

use std::time::Duration;

use crate::duration::{self, DurationError, Unit};

/// Whether the file gives a heartbeat nothing to do: every line is blank,
/// an ATX heading (`#`… then whitespace or the end of the line; `#tag` is
/// text), an empty list stub (`-`, `*` or `+`, optionally with an empty or
/// ticked checkbox `[ ]`, `[]`, `[x]`, `[X]`), or a code-fence marker (three
/// backticks and an optional language word). HTML comments
/// (`<!-- … -->`, on one line or several) are ignored too, so a commented
/// template does not start runs; an unclosed `<!--` is text.
///
/// A missing file is not empty; that is the caller's to decide, as this
/// function only sees text.
pub fn is_effectively_empty(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(text) = without_html_comments(text) else {
        return false;
    };
    text.lines().all(|line| is_empty_line(line.trim()))
}

/// The text with each `<!-- … -->` replaced by a space; `None` when a
/// comment is not closed.
fn without_html_comments(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !text.contains("<!--") {
        return Some(std::borrow::Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<!--") {
        out.push_str(&rest[..open]);
        let body = &rest[open + 4..];
        let close = body.find("-->")?;
        out.push(' ');
        rest = &body[close + 3..];
    }
    out.push_str(rest);
    Some(std::borrow::Cow::Owned(out))
}

fn is_empty_line(trimmed: &str) -> bool {
    if trimmed.is_empty() {
        return true;
    }
    let after_hashes = trimmed.trim_start_matches('#');
    if after_hashes.len() < trimmed.len() {
        return after_hashes.is_empty() || after_hashes.starts_with(char::is_whitespace);
    }
    if let Some(rest) = trimmed.strip_prefix(['-', '*', '+']) {
        return matches!(rest.trim_start(), "" | "[ ]" | "[]" | "[x]" | "[X]");
    }
    if let Some(language) = trimmed.strip_prefix("```") {
        return language
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    }
    false
}

/// One periodic task from a `tasks:` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub name: String,
    /// As written; see [`Task::interval_duration`].
    pub interval: String,
    pub prompt: String,
    /// 1-based line of its `- name:`.
    pub line: usize,
}

impl Task {
    /// The interval, a bare number meaning minutes.
    pub fn interval_duration(&self) -> Result<Duration, DurationError> {
        duration::parse(&self.interval, Unit::Minutes)
    }

    /// Due when it never ran or its interval has passed since `last_run_ms`
    /// (both Unix milliseconds); never due when its interval does not parse.
    pub fn is_due(&self, last_run_ms: Option<i64>, now_ms: i64) -> bool {
        let Ok(interval) = self.interval_duration() else {
            return false;
        };
        match last_run_ms {
            None => true,
            Some(last) => i128::from(now_ms) - i128::from(last) >= interval.as_millis() as i128,
        }
    }
}

/// What [`parse`] read from a `HEARTBEAT.md`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    pub tasks: Vec<Task>,
    /// The file without its `tasks:` blocks, leading and trailing blank
    /// lines removed; line endings are `\n`.
    pub other_content: String,
    /// One sentence per problem, naming the line.
    pub diagnostics: Vec<String>,
}

/// Reads the `tasks:` blocks of a `HEARTBEAT.md`. Never fails.
pub fn parse(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut reader = Reader::default();
    for (index, line) in text.split('\n').enumerate() {
        reader.line(index + 1, line);
    }
    reader.finish()
}

/// The tasks of `tasks` that are due at `now_ms`, in file order.
/// `last_run_ms` gives a task's last start by name (Unix milliseconds).
pub fn due_tasks(
    tasks: &[Task],
    last_run_ms: impl Fn(&str) -> Option<i64>,
    now_ms: i64,
) -> Vec<&Task> {
    tasks
        .iter()
        .filter(|task| task.is_due(last_run_ms(&task.name), now_ms))
        .collect()
}

/// A task being read: its fields as written so far.
struct Draft {
    line: usize,
    name: String,
    interval: String,
    prompt: String,
}

#[derive(Default)]
struct Reader<'t> {
    in_block: bool,
    draft: Option<Draft>,
    /// Blank lines inside a block: they belong to it only if the block
    /// goes on after them.
    blanks: Vec<&'t str>,
    kept: Vec<&'t str>,
    parsed: Parsed,
}

impl<'t> Reader<'t> {
    fn line(&mut self, number: usize, line: &'t str) {
        let trimmed = line.trim();
        if !self.in_block {
            if trimmed == "tasks:" {
                self.in_block = true;
            } else {
                self.kept.push(line);
            }
            return;
        }
        if trimmed.is_empty() {
            self.blanks.push(line);
            return;
        }
        if let Some(name) = task_name(trimmed) {
            self.blanks.clear();
            self.finish_task(None);
            self.draft = Some(Draft {
                line: number,
                name: unquote(name).to_string(),
                interval: String::new(),
                prompt: String::new(),
            });
            return;
        }
        if line.starts_with(char::is_whitespace) {
            self.blanks.clear();
            self.field(number, trimmed);
            return;
        }
        // The block ends here.
        let hint = (field_value(trimmed, "interval:").is_some()
            || field_value(trimmed, "prompt:").is_some())
        .then_some(" (task fields must be indented under `- name:`)");
        self.finish_task(hint);
        self.in_block = false;
        self.kept.append(&mut self.blanks);
        self.line(number, line);
    }

    fn field(&mut self, number: usize, trimmed: &str) {
        let Some(draft) = self.draft.as_mut() else {
            self.parsed.diagnostics.push(format!(
                "line {number}: ignored: text in the tasks block before the first `- name:`"
            ));
            return;
        };
        if let Some(value) = field_value(trimmed, "interval:") {
            draft.interval = unquote(value).to_string();
        } else if let Some(value) = field_value(trimmed, "prompt:") {
            let value = unquote(value);
            if matches!(value, "|" | "|-" | "|+" | ">" | ">-" | ">+") {
                self.parsed.diagnostics.push(format!(
                    "line {number}: task `{}`: multi-line prompts are not supported; write the prompt on one line",
                    draft.name
                ));
                draft.prompt = String::new();
            } else {
                draft.prompt = value.to_string();
            }
        } else {
            self.parsed.diagnostics.push(format!(
                "line {number}: ignored in task `{}`: a task has only `name:`, `interval:` and `prompt:`, each on one line",
                draft.name
            ));
        }
    }

    fn finish_task(&mut self, hint: Option<&str>) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        let line = draft.line;
        let missing: Vec<&str> = [
            ("name", draft.name.is_empty()),
            ("interval", draft.interval.is_empty()),
            ("prompt", draft.prompt.is_empty()),
        ]
        .into_iter()
        .filter_map(|(what, absent)| absent.then_some(what))
        .collect();
        let label = if draft.name.is_empty() {
            "a task".to_string()
        } else {
            format!("task `{}`", draft.name)
        };
        if !missing.is_empty() {
            self.parsed.diagnostics.push(format!(
                "line {line}: {label} is ignored: it has no {}{}",
                missing.join(" and no "),
                hint.unwrap_or("")
            ));
            return;
        }
        let task = Task {
            name: draft.name,
            interval: draft.interval,
            prompt: draft.prompt,
            line,
        };
        if let Err(error) = task.interval_duration() {
            self.parsed.diagnostics.push(format!(
                "line {line}: {label} never runs: its interval is invalid: {error}"
            ));
        }
        if let Some(first) = self.parsed.tasks.iter().find(|t| t.name == task.name) {
            self.parsed.diagnostics.push(format!(
                "line {line}: {label} is also on line {}; the two share one last-run time",
                first.line
            ));
        }
        self.parsed.tasks.push(task);
    }

    fn finish(mut self) -> Parsed {
        self.finish_task(None);
        self.kept.append(&mut self.blanks);
        let first = self.kept.iter().position(|l| !l.trim().is_empty());
        let last = self.kept.iter().rposition(|l| !l.trim().is_empty());
        if let (Some(first), Some(last)) = (first, last) {
            self.parsed.other_content = self.kept[first..=last].join("\n");
        }
        self.parsed
    }
}

/// The rest of a `- name:` line (also `-name:` and `-  name:`).
fn task_name(trimmed: &str) -> Option<&str> {
    trimmed
        .strip_prefix('-')?
        .trim_start()
        .strip_prefix("name:")
        .map(str::trim)
}

fn field_value<'a>(trimmed: &'a str, key: &str) -> Option<&'a str> {
    trimmed.strip_prefix(key).map(str::trim)
}

/// Removes one leading and one trailing quote (`'` or `"`), then trims.
fn unquote(value: &str) -> &str {
    let value = value.strip_prefix(['"', '\'']).unwrap_or(value);
    let value = value.strip_suffix(['"', '\'']).unwrap_or(value);
    value.trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effectively_empty_lines() {
        let empty = [
            "",
            "\n\n   \n\t\n",
            "# Heartbeat",
            "#",
            "###",
            "## Things to check\n\n-\n- [ ]\n* []\n+ [x]\n- [X]\n-[ ]",
            "```\n```",
            "```markdown\n```",
            "```my-lang_2\n```",
            "\u{feff}# Title",
            "# Title\r\n\r\n- [ ]\r\n",
            "<!-- Add tasks here -->",
            "# Heartbeat\n<!--\nWrite what the agent should check.\n- inbox\n-->\n- [ ]",
            "<!-- a --> <!-- b -->\n<!---->",
            "#\tTabbed heading",
        ];
        for text in empty {
            assert!(is_effectively_empty(text), "{text:?} should be empty");
        }
        let content = [
            "Check the inbox",
            "#tag",
            "#!shebang",
            "- check the inbox",
            "- [ ] check the inbox",
            "- [  ]",
            "- [y]",
            "1.",
            "---",
            "~~~",
            "``` rust",
            "```rust!",
            "````",
            "<!-- open comment never closed",
            "<!-- c --> text",
            "text <!-- c -->",
            "tasks:",
            "# Title\n\nok",
        ];
        for text in content {
            assert!(!is_effectively_empty(text), "{text:?} has content");
        }
    }

    const EXAMPLE: &str = "\
# Heartbeat

Keep replies short.

tasks:
- name: inbox-triage
  interval: 30m
  prompt: \"Check the inbox and summarize anything urgent\"
- name: 'calendar'
  interval: 2h
  prompt: Look at tomorrow's calendar

## Notes
Be quiet at night.
";

    #[test]
    fn reads_tasks_and_the_rest() {
        let parsed = parse(EXAMPLE);
        assert_eq!(
            parsed.tasks,
            vec![
                Task {
                    name: "inbox-triage".into(),
                    interval: "30m".into(),
                    prompt: "Check the inbox and summarize anything urgent".into(),
                    line: 6,
                },
                Task {
                    name: "calendar".into(),
                    interval: "2h".into(),
                    prompt: "Look at tomorrow's calendar".into(),
                    line: 9,
                },
            ]
        );
        assert_eq!(
            parsed.other_content,
            "# Heartbeat\n\nKeep replies short.\n\n\n## Notes\nBe quiet at night."
        );
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    }

    #[test]
    fn blank_lines_between_tasks_stay_in_the_block() {
        let text = "tasks:\n\n- name: a\n  interval: 5\n  prompt: A\n\n  - name: b\n    interval: 1h\n    prompt: B\n\nAfter";
        let parsed = parse(text);
        let names: Vec<&str> = parsed.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(parsed.other_content, "After");
    }

    #[test]
    fn crlf_files_and_no_block() {
        let parsed = parse("tasks:\r\n- name: a\r\n  interval: 1m\r\n  prompt: p\r\nEnd\r\n");
        assert_eq!(parsed.tasks.len(), 1);
        assert_eq!(parsed.tasks[0].prompt, "p");
        assert_eq!(parsed.other_content, "End");

        let parsed = parse("\n\n  Just a checklist\n- inbox\n\n");
        assert!(parsed.tasks.is_empty());
        assert_eq!(parsed.other_content, "  Just a checklist\n- inbox");
    }

    #[test]
    fn incomplete_tasks_are_dropped_with_a_reason() {
        let text = "\
tasks:
- name: no-prompt
  interval: 10m
- name:
  interval: 10m
  prompt: p
- name: \"\"
  interval: 1h
  prompt: p
- name: no-fields
- name: block
  interval: 1h
  prompt: |
    several lines
- name: flat
interval: 10m
prompt: p
";
        let parsed = parse(text);
        assert!(parsed.tasks.is_empty(), "{:?}", parsed.tasks);
        assert_eq!(
            parsed.diagnostics,
            [
                "line 2: task `no-prompt` is ignored: it has no prompt",
                "line 4: a task is ignored: it has no name",
                "line 7: a task is ignored: it has no name",
                "line 10: task `no-fields` is ignored: it has no interval and no prompt",
                "line 13: task `block`: multi-line prompts are not supported; write the prompt on one line",
                "line 14: ignored in task `block`: a task has only `name:`, `interval:` and `prompt:`, each on one line",
                "line 11: task `block` is ignored: it has no prompt",
                "line 15: task `flat` is ignored: it has no interval and no prompt (task fields must be indented under `- name:`)",
            ]
        );
        assert_eq!(parsed.other_content, "interval: 10m\nprompt: p");
    }

    #[test]
    fn unparseable_intervals_are_kept_but_never_due() {
        let parsed = parse("tasks:\n- name: odd\n  interval: soon\n  prompt: p\n");
        assert_eq!(parsed.tasks.len(), 1);
        assert_eq!(
            parsed.diagnostics,
            [
                "line 2: task `odd` never runs: its interval is invalid: `soon` is not a duration (write e.g. 30m, 1.5h or 1h30m; units ms, s, m, h, d)"
            ]
        );
        assert!(!parsed.tasks[0].is_due(None, 0));
        assert!(!parsed.tasks[0].is_due(Some(0), i64::MAX));
    }

    #[test]
    fn quotes_one_pair_at_most() {
        assert_eq!(unquote("\"a\""), "a");
        assert_eq!(unquote("'a\""), "a");
        assert_eq!(unquote("\"\"a\"\""), "\"a\"");
        assert_eq!(unquote("\""), "");
        assert_eq!(unquote("it's"), "it's");
    }

    #[test]
    fn duplicate_names_are_reported() {
        let parsed = parse(
            "tasks:\n- name: a\n  interval: 1m\n  prompt: p\n- name: a\n  interval: 2m\n  prompt: q\n",
        );
        assert_eq!(parsed.tasks.len(), 2);
        assert_eq!(
            parsed.diagnostics,
            ["line 5: task `a` is also on line 2; the two share one last-run time"]
        );
    }

    #[test]
    fn a_second_block_and_text_before_the_first_task() {
        let parsed = parse(
            "tasks:\n  stray\n- name: a\n  interval: 1m\n  prompt: p\nMiddle\ntasks:\n- name: b\n  interval: 1m\n  prompt: q\n",
        );
        let names: Vec<&str> = parsed.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(parsed.other_content, "Middle");
        assert_eq!(
            parsed.diagnostics,
            ["line 2: ignored: text in the tasks block before the first `- name:`"]
        );
    }

    #[test]
    fn due_rules() {
        let parsed = parse(
            "tasks:\n- name: fresh\n  interval: 30m\n  prompt: p\n- name: minutes\n  interval: 30\n  prompt: p\n- name: hourly\n  interval: 1h\n  prompt: p\n- name: broken\n  interval: x\n  prompt: p\n",
        );
        let minute = 60_000;
        let now = 1_000 * minute;
        let last_runs = |name: &str| match name {
            "fresh" => None,
            "minutes" => Some(now - 30 * minute),
            "hourly" => Some(now - 60 * minute + 1),
            _ => None,
        };
        let due: Vec<&str> = due_tasks(&parsed.tasks, last_runs, now)
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(due, ["fresh", "minutes"]);
        // A last run in the future (the clock went back) is not due yet.
        assert!(!parsed.tasks[1].is_due(Some(now + minute), now));
        assert!(parsed.tasks[1].is_due(Some(i64::MIN), i64::MAX));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn line() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("tasks:".to_string()),
                Just(String::new()),
                Just("<!--".to_string()),
                Just("-->".to_string()),
                "- name: [a-z\"']{0,6}",
                "  interval: [0-9a-z.\"]{0,4}",
                "  prompt: [a-z \"]{0,10}",
                "[ \t]{0,2}[#*+\\-`]{0,3}[ a-zA-Z\\[\\]]{0,6}",
                "\\PC{0,12}",
            ]
        }

        proptest! {
            #[test]
            fn never_panics_and_tasks_are_complete(lines in prop::collection::vec(line(), 0..25)) {
                let text = lines.join("\n");
                let _ = is_effectively_empty(&text);
                let parsed = parse(&text);
                for task in &parsed.tasks {
                    prop_assert!(!task.name.is_empty() && !task.interval.is_empty() && !task.prompt.is_empty());
                    prop_assert!(lines[task.line - 1].contains("name:"));
                }
                // Nothing the parser read as a task line shows up as context.
                for other in parsed.other_content.lines() {
                    prop_assert!(other.trim() != "tasks:");
                }
            }

            #[test]
            fn written_tasks_read_back(
                tasks in prop::collection::vec(("[a-z][a-z0-9-]{0,10}", 1u32..500, "[A-Za-z][A-Za-z ,.]{0,30}"), 1..5),
                context in "[A-Za-z][A-Za-z ]{0,20}",
            ) {
                let mut text = format!("{context}\n\ntasks:\n");
                for (name, minutes, prompt) in &tasks {
                    text.push_str(&format!("- name: {name}\n  interval: {minutes}m\n  prompt: \"{prompt}\"\n"));
                }
                let parsed = parse(&text);
                prop_assert_eq!(parsed.tasks.len(), tasks.len());
                for (task, (name, minutes, prompt)) in parsed.tasks.iter().zip(&tasks) {
                    prop_assert_eq!(&task.name, name);
                    prop_assert_eq!(task.interval_duration(), Ok(Duration::from_secs(u64::from(*minutes) * 60)));
                    prop_assert_eq!(&task.prompt, prompt.trim());
                }
                prop_assert_eq!(parsed.other_content, context);
            }
        }
    }
}
