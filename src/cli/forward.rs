//! `memory search` answered whole by the running gateway: the command
//! sends its command line over the gateway's command socket before it
//! parses anything, and prints what comes back (see
//! `gateway_client::forward`). The gateway runs this module's [`answer`]:
//! the same parsing, settings and printing as the command's own, around
//! its warm search.
//!
//! Invariants:
//! * The output is the command's own, byte for byte: the gateway declines
//!   whatever it could not print as the command would (another command,
//!   a command that logs, another time zone, another state directory,
//!   settings that do not load, a search it refuses), and the command
//!   then runs as it would have.
//! * Sending costs a command that no gateway answers one failed connect.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use super::memory_cmd::{MemoryCommand, Printout};
use super::{Cli, Command, ForAgent};
use crate::app::App;
use crate::entry::WarmSearch;
use crate::gateway_client::forward::{self, ForwardAnswer, ForwardedCommand};
use crate::host::Host;
use crate::paths::PathFlags;

/// The command's output when the running gateway answered its command
/// line; `None` when it is to run here.
pub(super) fn answered_by_gateway() -> Option<ExitCode> {
    let args = crate::host::process_args()?;
    if !may_be_forwarded(&args) {
        return None;
    }
    let all = crate::host::process_vars();
    // Logging asked for is written by the command itself.
    if all.contains_key("ALMANAC_LOG") {
        return None;
    }
    let settings: Vec<&str> = crate::config::ENV_KEYS
        .iter()
        .map(|(var, _)| *var)
        .collect();
    let vars: BTreeMap<String, String> = all
        .iter()
        .filter_map(|(name, value)| {
            let sent = forward::forwarded_var(name, value, &settings)?;
            Some((name.clone(), sent.to_string()))
        })
        .collect();
    let cwd = crate::host::process_cwd()?;
    let host = Host::for_paths(vars.clone(), cwd.clone());
    let state = crate::paths::resolve_state(&PathFlags::default(), &host).ok()?;
    let command = ForwardedCommand {
        version: env!("CARGO_PKG_VERSION").to_string(),
        args,
        cwd,
        vars,
    };
    let (stdout, stderr, code) = forward::forward(
        &forward::socket_path(&state.state_dir),
        &command,
        crate::app::memory::GATEWAY_SEARCH_WAIT,
    )?;
    let printout = Printout { stdout, stderr };
    if printout.emit().is_err() {
        // As the command's own printing: a closed stdout ends it quietly
        // (SIGPIPE), another failure is an error.
        let _ = writeln!(std::io::stderr(), "error: cannot write the search results");
        return Some(ExitCode::FAILURE);
    }
    Some(ExitCode::from(code))
}

/// Whether `args` may be `memory search` with the state directory the
/// environment names (the gateway decides; this only spares other
/// commands the trip).
fn may_be_forwarded(args: &[String]) -> bool {
    let options = || args.iter().take_while(|a| *a != "--");
    let mut words = options().filter(|a| !a.starts_with('-'));
    let mut previous = words.next();
    let memory_search = words.any(|word| {
        let after_memory = previous.is_some_and(|p| p == "memory");
        previous = Some(word);
        after_memory && word == "search"
    });
    memory_search && !options().any(|a| names_a_state(a))
}

/// `--state-dir` or `--profile`, with its value or before it.
fn names_a_state(arg: &str) -> bool {
    ["--state-dir", "--profile"].iter().any(|flag| {
        arg.strip_prefix(flag)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
    })
}

/// A command line sent to the gateway, answered with `warm`'s search or
/// declined (see the module's invariants).
pub(crate) fn answer(warm: &dyn WarmSearch, command: ForwardedCommand) -> ForwardAnswer {
    match printed(warm, command) {
        Ok(out) => ForwardAnswer::Answered {
            stdout: out.stdout,
            stderr: out.stderr,
            code: 0,
        },
        Err(reason) => ForwardAnswer::Declined { reason },
    }
}

fn printed(warm: &dyn WarmSearch, command: ForwardedCommand) -> Result<Printout, String> {
    let ForwardedCommand {
        version,
        args,
        cwd,
        vars,
    } = command;
    if version != env!("CARGO_PKG_VERSION") {
        return Err(format!("a command of almanac {version}"));
    }
    let cli = Cli::try_parse_from(std::iter::once("almanac".to_string()).chain(args))
        .map_err(|_| "not a command line the gateway answers".to_string())?;
    let Command::Memory(ForAgent { agent, command }) = cli.command else {
        return Err("not `memory search`".into());
    };
    let (req, json) = MemoryCommand::into_search(command).map_err(|_| "not `memory search`")?;
    if cli.global.verbose > 0 {
        return Err("the command logs".into());
    }
    let gateway = warm.host();
    for zone_var in ["TZ", "TZDIR"] {
        if vars.get(zone_var).map(String::as_str) != gateway.raw_var(zone_var) {
            return Err(format!("another {zone_var} than the gateway's"));
        }
    }
    let mut host = gateway.for_command(vars, cwd).map_err(|e| e.to_string())?;
    if let Some(now) = &cli.global.now {
        host.set_now(crate::host::parse_now(now).map_err(|e| e.to_string())?);
    }
    let app = App::load(&cli.global.options(), host).map_err(|e| format!("{e:#}"))?;
    if !matches!(
        app.config.config.logging.level,
        None | Some(crate::config::LogLevel::Off)
    ) {
        return Err("the settings ask for logging".into());
    }
    let app = super::for_agent(app, agent).map_err(|e| format!("{e:#}"))?;
    if app.paths.state_dir != warm.state_dir() {
        return Err("another state directory".into());
    }
    if !warm.watches(&app.memory().root) {
        return Err("a memory root the gateway does not watch".into());
    }
    let mut out = Printout::of_search_with(&app, &req, json, |resolved| warm.search(resolved))
        .map_err(|e| format!("{e:#}"))?;
    // Loading the settings spoke first, as in the command.
    let loading: String = super::output::config_warnings(&app.config)
        .iter()
        .map(|w| format!("warning: {w}\n"))
        .collect();
    out.stderr.insert_str(0, &loading);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    /// A gateway whose search answers an empty memory, and counts.
    struct Fake {
        host: Host,
        state_dir: std::path::PathBuf,
        searches: std::sync::atomic::AtomicU32,
    }

    impl WarmSearch for Fake {
        fn search(
            &self,
            req: &crate::app::memory::ResolvedSearch,
        ) -> anyhow::Result<crate::app::memory::Searched> {
            self.searches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            anyhow::ensure!(req.query != "refused", "the gateway searches otherwise");
            Ok(crate::app::memory::Searched {
                outcome: Default::default(),
                sync: Default::default(),
                disabled: false,
                semantic: crate::app::memory::Semantic::lexical(None),
            })
        }
        fn host(&self) -> &Host {
            &self.host
        }
        fn state_dir(&self) -> std::path::PathBuf {
            self.state_dir.clone()
        }
        fn watches(&self, _root: &std::path::Path) -> bool {
            true
        }
    }

    #[test]
    fn the_gateway_answers_a_search_as_the_command_and_declines_what_it_could_not() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let vars = |extra: &[(&str, &str)]| -> BTreeMap<String, String> {
            [("HOME", home.to_str().unwrap()), ("TZ", "UTC")]
                .iter()
                .chain(extra)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let fake = Fake {
            host: Host::for_paths(vars(&[]), home.clone()),
            state_dir: home.join(".almanac"),
            searches: Default::default(),
        };
        let sent = |line: &str, extra: &[(&str, &str)]| {
            answer(
                &fake,
                ForwardedCommand {
                    version: env!("CARGO_PKG_VERSION").into(),
                    args: args(line),
                    cwd: home.clone(),
                    vars: vars(extra),
                },
            )
        };
        let searches = || fake.searches.load(std::sync::atomic::Ordering::Relaxed);
        let ForwardAnswer::Answered {
            stdout,
            stderr,
            code,
        } = sent("memory search --json printer", &[])
        else {
            panic!("answered")
        };
        assert_eq!((stderr.as_str(), code), ("", 0));
        let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(doc["mode"], "fts-only", "{doc}");
        assert!(stdout.ends_with("}\n"));
        let ForwardAnswer::Answered { stdout, .. } = sent("memory search printer", &[]) else {
            panic!("answered")
        };
        assert_eq!(stdout, "No matching memory.\n");
        assert_eq!(searches(), 2);
        let declined = [
            sent("memory search -v printer", &[]),
            sent("memory get memory/x.md", &[]),
            sent("memory search --help", &[]),
            sent("memory search printer", &[("TZ", "Asia/Tokyo")]),
            sent(
                "memory search printer",
                &[("ALMANAC_STATE_DIR", "/elsewhere")],
            ),
            sent("--set logging.level=debug memory search printer", &[]),
            sent("memory search refused", &[]),
        ];
        for (n, answer) in declined.iter().enumerate() {
            assert!(
                matches!(answer, ForwardAnswer::Declined { .. }),
                "{n}: {answer:?}"
            );
        }
        assert_eq!(
            searches(),
            3,
            "only the refused search reached the gateway's search"
        );
        let mut old = ForwardedCommand {
            version: "0.0.1".into(),
            args: args("memory search printer"),
            cwd: home.clone(),
            vars: vars(&[]),
        };
        assert!(matches!(
            answer(&fake, old.clone()),
            ForwardAnswer::Declined { .. }
        ));
        old.version = env!("CARGO_PKG_VERSION").into();
        assert!(matches!(answer(&fake, old), ForwardAnswer::Answered { .. }));
    }

    #[test]
    fn only_a_memory_search_of_the_environments_state_is_sent() {
        for yes in [
            "memory search printer",
            "--workspace ws memory search --json -- printer",
            "memory search --agent ops -n 3 printer",
            "--now 2026-01-01T00:00:00Z memory search a b c",
        ] {
            assert!(may_be_forwarded(&args(yes)), "{yes}");
        }
        for no in [
            "memory get memory/2026-01-01.md",
            "memory index",
            "search memory",
            "session-memory search printer",
            "--state-dir /s memory search printer",
            "--profile=work memory search printer",
            "agent --message -- memory search",
        ] {
            assert!(!may_be_forwarded(&args(no)), "{no}");
        }
    }
}
