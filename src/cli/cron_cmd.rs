//! `almanac cron …`: cron schedules. Each subcommand is one variant of
//! [`CronCommand`] and one small function here; what it computes lives in
//! `src/app`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::JsonFlag;
use super::output::print_json;
use super::values;
use crate::app::GlobalOptions;
use crate::app::cron_next::{self, NextFires, NextRequest};
use crate::host::Host;

#[derive(Debug, Subcommand)]
pub(super) enum CronCommand {
    /// Show the next fire times of a cron expression
    Next(NextArgs),
}

#[derive(Debug, Args)]
pub(super) struct NextArgs {
    /// The cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with a
    /// leading second; quote it, or give its fields as separate arguments
    #[arg(value_name = "EXPR", required = true, num_args = 1..)]
    expr: Vec<String>,
    /// Read the expression in this IANA time zone, e.g. Europe/Paris [default: the host's zone]
    #[arg(long, value_name = "TZ")]
    tz: Option<String>,
    /// List fire times after TIME (ISO 8601; UTC when it has no offset) [default: now]
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// How many fire times to list (1 to 1000)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = values::cron_count)]
    count: usize,
    #[command(flatten)]
    json: JsonFlag,
}

pub(super) fn run(
    cmd: CronCommand,
    _options: &GlobalOptions,
    host: Host,
) -> anyhow::Result<ExitCode> {
    match cmd {
        CronCommand::Next(args) => next(args, &host),
    }
}

fn next(args: NextArgs, host: &Host) -> anyhow::Result<ExitCode> {
    let expr = args.expr.join(" ");
    let fires = cron_next::next_fires(
        host,
        &NextRequest {
            expr: &expr,
            tz: args.tz.as_deref(),
            from: args.from.as_deref(),
            count: args.count,
        },
    )?;
    if args.json.json {
        print_json(&fires)?;
    } else {
        print_fires(&fires)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `Time zone: Europe/Paris`, then one line per fire time in that zone
/// with the UTC time beside it; a note when none is left.
fn print_fires(fires: &NextFires) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let zone_name = fires.zone.iana_name().unwrap_or("the host's time zone");
    writeln!(out, "Time zone: {zone_name}")?;
    for (instant, utc) in fires.instants.iter().zip(&fires.next) {
        let local = instant.to_zoned_datetime(fires.zone.clone());
        writeln!(out, "{} ({utc})", local.strftime("%Y-%m-%d %H:%M:%S %Q"))?;
    }
    if fires.next.is_empty() {
        writeln!(out, "No fire time before the year 3000.")?;
    }
    out.flush()?;
    Ok(())
}
