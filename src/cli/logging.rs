//! Tracing logs on stderr, off unless asked for: `-v`/`-vv`/`-vvv`, else
//! `ALMANAC_LOG` (a filter such as `debug` or `almanac=trace`), else the
//! config's `logging.level`.

use std::str::FromStr;
use std::sync::OnceLock;

use tracing_subscriber::filter::Targets;

use crate::config::LogLevel;

static INITIALISED: OnceLock<()> = OnceLock::new();

/// Starts logging if a flag or `ALMANAC_LOG` asks for it.
pub(super) fn init_from_flags(verbose: u8, env_filter: Option<&str>) -> anyhow::Result<()> {
    let directive = match verbose {
        0 => match env_filter.map(str::trim).filter(|f| !f.is_empty()) {
            Some(filter) => filter.to_string(),
            None => return Ok(()),
        },
        1 => "info".to_string(),
        2 => "debug".to_string(),
        _ => "trace".to_string(),
    };
    let targets = Targets::from_str(&directive).map_err(|e| {
        super::UsageError::wrap(format!("invalid ALMANAC_LOG filter `{directive}`: {e}"))
    })?;
    install(targets);
    Ok(())
}

/// Starts logging at the config's level if nothing else started it.
pub(super) fn init_from_config(level: Option<LogLevel>) {
    let directive = match level {
        None | Some(LogLevel::Off) => return,
        Some(LogLevel::Error) => "error",
        Some(LogLevel::Warn) => "warn",
        Some(LogLevel::Info) => "info",
        Some(LogLevel::Debug) => "debug",
        Some(LogLevel::Trace) => "trace",
    };
    if let Ok(targets) = Targets::from_str(directive) {
        install(targets);
    }
}

fn install(targets: Targets) {
    if INITIALISED.set(()).is_err() {
        return;
    }
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(true);
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(targets)
        .try_init();
}
