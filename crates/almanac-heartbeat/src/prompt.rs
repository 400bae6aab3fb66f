//! The text of a heartbeat turn.
//!
//! A body is either the configured prompt (or [`DEFAULT_PROMPT`]) or, when
//! `HEARTBEAT.md` has due tasks, a list of those tasks with the rest of the
//! file as context. A prompt that mentions `HEARTBEAT.md` gets a line naming
//! the workspace file it means, and every body ends with the current time,
//! so the model never has to guess either.

use std::path::Path;

use jiff::ZonedDateTime;

use crate::file::{self, Task};

/// The prompt of a heartbeat turn when none is configured.
pub const DEFAULT_PROMPT: &str = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";

/// The configured prompt, or [`DEFAULT_PROMPT`] when there is none or it
/// is blank.
pub fn resolve_prompt(configured: Option<&str>) -> &str {
    match configured.map(str::trim) {
        Some(prompt) if !prompt.is_empty() => prompt,
        _ => DEFAULT_PROMPT,
    }
}

/// The prompt for due tasks, followed by the rest of `HEARTBEAT.md` as
/// context unless that is effectively empty.
pub fn tasks_prompt(due: &[&Task], other_content: &str) -> String {
    let mut text = String::from(
        "Run the following periodic tasks (only those due based on their intervals):\n\n",
    );
    for task in due {
        text.push_str(&format!("- {}: {}\n", task.name, task.prompt));
    }
    text.push_str("\nAfter completing all due tasks, reply HEARTBEAT_OK.");
    if !file::is_effectively_empty(other_content) {
        text.push_str("\n\nAdditional context from HEARTBEAT.md:\n");
        text.push_str(other_content.trim_end());
    }
    text
}

/// The line telling the model which file `HEARTBEAT.md` is, when `prompt`
/// mentions it (in any letter case).
pub fn file_hint(prompt: &str, heartbeat_file: &Path) -> Option<String> {
    prompt.to_lowercase().contains("heartbeat.md").then(|| {
        format!(
            "HEARTBEAT.md here means the workspace file {} (use that exact path).",
            heartbeat_file.display()
        )
    })
}

/// How the current time is written in a heartbeat body, e.g.
/// `Tuesday 2026-12-01 09:30 (Europe/Paris, UTC+01:00)`: the weekday and
/// local wall-clock time, then the zone's name (when it has one) and its
/// offset at that moment.
pub fn time_text(now: &ZonedDateTime) -> String {
    let offset = now.offset();
    let seconds = offset.seconds();
    let sign = if seconds < 0 { '-' } else { '+' };
    let hours = seconds.unsigned_abs() / 3600;
    let minutes = seconds.unsigned_abs() % 3600 / 60;
    let offset = format!("UTC{sign}{hours:02}:{minutes:02}");
    let zone = match now.time_zone().iana_name() {
        Some("UTC" | "Etc/UTC") | None => offset,
        Some(name) => format!("{name}, {offset}"),
    };
    format!(
        "{} {} ({zone})",
        weekday_name(now.weekday()),
        now.strftime("%Y-%m-%d %H:%M"),
    )
}

fn weekday_name(weekday: jiff::civil::Weekday) -> &'static str {
    use jiff::civil::Weekday::*;
    match weekday {
        Monday => "Monday",
        Tuesday => "Tuesday",
        Wednesday => "Wednesday",
        Thursday => "Thursday",
        Friday => "Friday",
        Saturday => "Saturday",
        Sunday => "Sunday",
    }
}

/// The line appended to every heartbeat body.
pub fn current_time_line(time_text: &str) -> String {
    format!("Current time: {time_text}")
}

/// A body from a configured (or the default) prompt: the prompt, the file
/// hint when it applies, and the current time.
pub fn prompt_body(prompt: &str, heartbeat_file: &Path, time_text: &str) -> String {
    let mut body = prompt.trim_end().to_string();
    if let Some(hint) = file_hint(prompt, heartbeat_file) {
        body.push('\n');
        body.push_str(&hint);
    }
    with_current_time(body, time_text)
}

/// A body for due tasks: [`tasks_prompt`] and the current time.
pub fn tasks_body(due: &[&Task], other_content: &str, time_text: &str) -> String {
    with_current_time(tasks_prompt(due, other_content), time_text)
}

/// Appends the current-time line to any body (also the ones the caller
/// builds for reminders and command results).
pub fn with_current_time(mut body: String, time_text: &str) -> String {
    let trimmed = body.trim_end().len();
    body.truncate(trimmed);
    if !body.is_empty() {
        body.push_str("\n\n");
    }
    body.push_str(&current_time_line(time_text));
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;
    use jiff::tz::TimeZone;

    fn task(name: &str, prompt: &str) -> Task {
        Task {
            name: name.into(),
            interval: "30m".into(),
            prompt: prompt.into(),
            line: 1,
        }
    }

    const TIME: &str = "Tuesday 2026-12-01 09:30 (Europe/Paris, UTC+01:00)";

    #[test]
    fn default_body_names_the_file_and_the_time() {
        let body = prompt_body(
            resolve_prompt(None),
            Path::new("/home/ana/agent/HEARTBEAT.md"),
            TIME,
        );
        assert_eq!(
            body,
            "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.\n\
             HEARTBEAT.md here means the workspace file /home/ana/agent/HEARTBEAT.md (use that exact path).\n\
             \n\
             Current time: Tuesday 2026-12-01 09:30 (Europe/Paris, UTC+01:00)"
        );
    }

    #[test]
    fn configured_prompts() {
        let file = Path::new("/w/HEARTBEAT.md");
        assert_eq!(resolve_prompt(Some("  ")), DEFAULT_PROMPT);
        assert_eq!(resolve_prompt(Some(" Check mail. ")), "Check mail.");
        assert_eq!(
            prompt_body("Check mail.", file, TIME),
            format!("Check mail.\n\nCurrent time: {TIME}")
        );
        assert_eq!(
            prompt_body("Go through heartbeat.MD.", file, TIME),
            format!(
                "Go through heartbeat.MD.\nHEARTBEAT.md here means the workspace file /w/HEARTBEAT.md (use that exact path).\n\nCurrent time: {TIME}"
            )
        );
        assert_eq!(file_hint("heartbeat md", file), None);
    }

    #[test]
    fn tasks_with_and_without_context() {
        let inbox = task(
            "inbox-triage",
            "Check the inbox and summarize anything urgent",
        );
        let calendar = task("calendar", "Look at tomorrow's calendar");
        let expected_tasks = "Run the following periodic tasks (only those due based on their intervals):\n\
             \n\
             - inbox-triage: Check the inbox and summarize anything urgent\n\
             - calendar: Look at tomorrow's calendar\n\
             \n\
             After completing all due tasks, reply HEARTBEAT_OK.";
        assert_eq!(tasks_prompt(&[&inbox, &calendar], ""), expected_tasks);
        assert_eq!(
            tasks_prompt(&[&inbox, &calendar], "# Heartbeat\n<!-- notes -->\n- [ ]\n"),
            expected_tasks
        );
        assert_eq!(
            tasks_body(
                &[&inbox, &calendar],
                "# Heartbeat\n\nKeep replies short.\n",
                TIME
            ),
            format!(
                "{expected_tasks}\n\nAdditional context from HEARTBEAT.md:\n# Heartbeat\n\nKeep replies short.\n\nCurrent time: {TIME}"
            )
        );
    }

    #[test]
    fn time_text_forms() {
        let paris = date(2026, 12, 1)
            .at(9, 30, 59, 0)
            .to_zoned_datetime(TimeZone::get("Europe/Paris").unwrap())
            .unwrap();
        assert_eq!(time_text(&paris), TIME);
        let summer = date(2026, 7, 4)
            .at(18, 5, 0, 0)
            .to_zoned_datetime(TimeZone::get("America/New_York").unwrap())
            .unwrap();
        assert_eq!(
            time_text(&summer),
            "Saturday 2026-07-04 18:05 (America/New_York, UTC-04:00)"
        );
        let utc = date(2026, 1, 1)
            .at(0, 0, 0, 0)
            .to_zoned_datetime(TimeZone::UTC)
            .unwrap();
        assert_eq!(time_text(&utc), "Thursday 2026-01-01 00:00 (UTC+00:00)");
        let kolkata = date(2026, 1, 1)
            .at(0, 0, 0, 0)
            .to_zoned_datetime(TimeZone::fixed(
                jiff::tz::Offset::from_seconds(5 * 3600 + 30 * 60).unwrap(),
            ))
            .unwrap();
        assert_eq!(time_text(&kolkata), "Thursday 2026-01-01 00:00 (UTC+05:30)");
        assert_eq!(with_current_time(String::new(), "x"), "Current time: x");
    }
}
