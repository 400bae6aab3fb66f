//! The `/stop` and `/subagents …` commands a user types (in `agent` or
//! a chat channel): parsed here (pure); the gateway runs them, and
//! without one `agent` answers the read-only ones from the ledger.

use super::App;
use super::subagents as view;

/// What a user typed, as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Stop,
    List,
    Kill(String),
    Info(String),
    Log {
        target: String,
        limit: usize,
        tools: bool,
    },
    Send {
        target: String,
        message: String,
    },
    Steer {
        target: String,
        message: String,
    },
    Spawn {
        agent_id: String,
        task: String,
        model: Option<String>,
        thinking: Option<String>,
    },
    Help,
}

pub(crate) const USAGE: &str = "/subagents list | kill <id|#|all> | log <id|#> [limit] [tools] | info <id|#> | send <id|#> <message> | steer <id|#> <message> | spawn <agentId> <task> [--model M] [--thinking T]; /stop stops this session's turn and every subagent below it";

/// The first word of `text` and the rest, trimmed.
fn word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.split_once(char::is_whitespace) {
        Some((first, rest)) => (first, rest.trim()),
        None => (text, ""),
    }
}

/// The command `text` is, if it is one of these (`/stop`,
/// `/subagents …`; a `@bot` suffix on the command is allowed); an error
/// says how it is used.
pub(crate) fn parse(text: &str) -> Option<Result<Command, String>> {
    let (first, rest) = word(text);
    let name = first.strip_prefix('/')?;
    let name = name.split_once('@').map_or(name, |(n, _)| n);
    match name.to_ascii_lowercase().as_str() {
        "stop" => Some(Ok(Command::Stop)),
        "subagents" => Some(parse_subagents(rest)),
        _ => None,
    }
}

fn parse_subagents(rest: &str) -> Result<Command, String> {
    let (action, rest) = word(rest);
    let usage = || format!("usage: {USAGE}");
    let needs_target = |rest: &str| {
        let (target, after) = word(rest);
        if target.is_empty() {
            Err(usage())
        } else {
            Ok((target.to_string(), after.to_string()))
        }
    };
    match action.to_ascii_lowercase().as_str() {
        "" | "list" => Ok(Command::List),
        "help" => Ok(Command::Help),
        "kill" => Ok(Command::Kill(needs_target(rest)?.0)),
        "info" => Ok(Command::Info(needs_target(rest)?.0)),
        "log" => {
            let (target, after) = needs_target(rest)?;
            let mut limit = view::LOG_LIMIT;
            let mut tools = false;
            for w in after.split_whitespace() {
                match w.parse::<usize>() {
                    Ok(n) => limit = n.max(1),
                    Err(_) if w.eq_ignore_ascii_case("tools") => tools = true,
                    Err(_) => return Err(usage()),
                }
            }
            Ok(Command::Log {
                target,
                limit,
                tools,
            })
        }
        "send" | "steer" => {
            let (target, message) = needs_target(rest)?;
            if message.is_empty() {
                return Err(usage());
            }
            Ok(if action.eq_ignore_ascii_case("send") {
                Command::Send { target, message }
            } else {
                Command::Steer { target, message }
            })
        }
        "spawn" => parse_spawn(rest).ok_or_else(usage),
        _ => Err(usage()),
    }
}

fn parse_spawn(rest: &str) -> Option<Command> {
    let (agent_id, rest) = word(rest);
    if agent_id.is_empty() {
        return None;
    }
    let (mut model, mut thinking, mut task) = (None, None, Vec::new());
    let mut words = rest.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "--model" => model = Some(words.next()?.to_string()),
            "--thinking" => thinking = Some(words.next()?.to_string()),
            other => task.push(other),
        }
    }
    let task = task.join(" ");
    (!task.is_empty()).then(|| Command::Spawn {
        agent_id: agent_id.to_string(),
        task,
        model,
        thinking,
    })
}

/// A command typed into `agent` with no gateway running: the read-only
/// ones answered from the ledger; the rest need the gateway.
pub(crate) fn answer_without_gateway(
    app: &App,
    session: &str,
    command: Command,
) -> anyhow::Result<String> {
    let now = app.now_ms();
    let ledger = app.ledger_for_reading()?;
    let runs = view::runs(&ledger, Some(session), now)?;
    Ok(match command {
        Command::Help => format!("usage: {USAGE}"),
        Command::List => view::list_text(&view::views(&runs.listed, now), app),
        Command::Stop => "Nothing runs: no gateway is running.".to_string(),
        Command::Info(target) => {
            let task = view::resolve_one(&runs, &target)?;
            view::info_text(&view::info(app, &runs, task, now), app)
        }
        Command::Log {
            target,
            limit,
            tools,
        } => view::log_text(
            &view::log(app, view::resolve_one(&runs, &target)?, limit, tools)?,
            0,
        ),
        Command::Kill(_) | Command::Steer { .. } | Command::Send { .. } | Command::Spawn { .. } => {
            anyhow::bail!(
                "this needs the running gateway (subagent runs live in it): start it with `almanac gateway run`"
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_targets_messages_and_flags() {
        let p = |t: &str| parse(t).unwrap();
        assert_eq!(p("/stop"), Ok(Command::Stop));
        assert_eq!(p("/stop@almanac_bot"), Ok(Command::Stop));
        assert_eq!(p("/subagents"), Ok(Command::List));
        assert_eq!(p("/subagents kill #2"), Ok(Command::Kill("#2".into())));
        assert_eq!(
            p("/subagents log abc 5 tools"),
            Ok(Command::Log {
                target: "abc".into(),
                limit: 5,
                tools: true
            })
        );
        assert_eq!(
            p("/subagents steer 1 look at  the tests first"),
            Ok(Command::Steer {
                target: "1".into(),
                message: "look at  the tests first".into()
            })
        );
        assert_eq!(
            p("/subagents spawn coder fix the build --model openai/x --thinking low"),
            Ok(Command::Spawn {
                agent_id: "coder".into(),
                task: "fix the build".into(),
                model: Some("openai/x".into()),
                thinking: Some("low".into()),
            })
        );
        for bad in [
            "/subagents kill",
            "/subagents steer 1",
            "/subagents spawn coder",
            "/subagents dance",
            "/subagents log 1 many",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert_eq!(parse("/status"), None);
        assert_eq!(parse("please /stop"), None);
    }
}
