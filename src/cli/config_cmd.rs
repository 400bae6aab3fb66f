//! `almanac config path|get|set|unset|validate`.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::JsonFlag;
use super::output::print_json;
use crate::app::GlobalOptions;
use crate::config;
use crate::host::Host;
use crate::paths;

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum ConfigCommand {
    /// Print the path of the config file
    Path(JsonFlag),
    /// Print the effective value of KEY (e.g. agents.defaults.workspace)
    Get {
        /// Dot-separated key path, e.g. agents.defaults.userTimezone
        key: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Set KEY to VALUE (JSON5, or a plain string), keeping the rest of the file
    Set {
        /// Dot-separated key path, e.g. agents.defaults.userTimezone
        key: String,
        /// The value: JSON5 when it fits the key's type (5, true, ["a"]), else a string
        value: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Remove KEY from the config file
    Unset {
        /// Dot-separated key path, e.g. agents.defaults.userTimezone
        key: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Check the config file: syntax, types and unknown keys
    Validate(JsonFlag),
}

pub(super) fn run(
    cmd: ConfigCommand,
    options: &GlobalOptions,
    host: Host,
) -> anyhow::Result<ExitCode> {
    let state = paths::resolve_state(&options.paths, &host)?;
    let path = state.config_path.clone();
    match cmd {
        ConfigCommand::Path(flag) => show_path(&path, flag.json),
        ConfigCommand::Get { key, json } => get(options, host, &key, json.json),
        ConfigCommand::Set { key, value, json } => set(&path, &key, &value, json.json),
        ConfigCommand::Unset { key, json } => unset(&path, &key, json.json),
        ConfigCommand::Validate(flag) => validate(&path, flag.json),
    }
}

/// `config path`.
fn show_path(path: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_json(&json!({ "path": path, "exists": path.exists() }))?;
    } else {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `config get KEY`.
fn get(options: &GlobalOptions, host: Host, key: &str, json: bool) -> anyhow::Result<ExitCode> {
    config::split_key(key)?;
    let app = super::load_app(options, host)?;
    let Some((value, origin)) = app.config_value(key)? else {
        anyhow::bail!("config key `{key}` is not set (it has no default)");
    };
    if json {
        print_json(&json!({ "key": key, "value": value, "origin": origin }))?;
    } else {
        match &value {
            Value::String(s) => println!("{s}"),
            other => println!("{}", serde_json::to_string_pretty(other)?),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `config set KEY VALUE`.
fn set(path: &std::path::Path, key: &str, value: &str, json: bool) -> anyhow::Result<ExitCode> {
    let outcome = config::set(path, key, value)?;
    if let Some(problem) = &outcome.remaining_problem {
        super::output::warn(format!("the config file still has a problem: {problem}"));
    }
    if json {
        print_json(&outcome)?;
    } else {
        let created = if outcome.created_file {
            " (created)"
        } else {
            ""
        };
        println!(
            "Set {key} = {} in {}{created}",
            outcome.value,
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `config unset KEY`.
fn unset(path: &std::path::Path, key: &str, json: bool) -> anyhow::Result<ExitCode> {
    let removed = config::unset(path, key)?;
    if json {
        print_json(&json!({ "key": key, "removed": removed, "path": path }))?;
    } else if removed {
        println!("Removed {key} from {}", path.display());
    } else {
        println!("{key} was not set in {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `config validate`: syntax, types and unknown keys.
fn validate(path: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let (valid, exists, unknown, error) = match config::read_file(path) {
        Ok((config, file)) => match config::value_problems(&config).first() {
            None => (true, file.exists, file.unknown_keys, None),
            Some((key, problem)) => (
                false,
                file.exists,
                file.unknown_keys,
                Some(format!("{}: `{key}`: {problem}", path.display())),
            ),
        },
        Err(err) => (
            false,
            path.exists(),
            Vec::new(),
            Some(crate::app::status::error_chain(&anyhow::Error::new(err))),
        ),
    };
    if json {
        print_json(&json!({
            "path": path,
            "exists": exists,
            "valid": valid,
            "error": error,
            "unknownKeys": unknown,
        }))?;
    } else if let Some(error) = &error {
        println!("{}: invalid", path.display());
        println!("  {error}");
    } else {
        let what = if exists {
            "valid"
        } else {
            "not found (defaults in use)"
        };
        println!("{}: {what}", path.display());
        for key in &unknown {
            println!("  unknown key `{key}` (ignored)");
        }
    }
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
