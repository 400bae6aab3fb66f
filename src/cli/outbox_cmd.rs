//! `almanac outbox list | tail`: the results of unattended turns
//! (heartbeat, cron, webhook-triggered turns) delivered to the outbox.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use super::JsonFlag;
use super::output::{print_json, warn};
use super::values;
use crate::app::App;
use crate::app::outbox::{self, OutboxList};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(super) enum OutboxCommand {
    /// List the newest entries, newest last
    List {
        /// Show at most N entries
        #[arg(long, value_name = "N", default_value_t = 20, value_parser = values::outbox_limit)]
        limit: usize,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the last 10 entries, and with --follow new ones as they come (Ctrl-C stops)
    Tail {
        /// Keep printing new entries as they are written
        #[arg(long, short)]
        follow: bool,
        /// Print each entry as one line of JSON
        #[arg(long)]
        json: bool,
    },
}

/// Entries `outbox tail` prints before following.
const TAIL_LAST: usize = 10;

pub(super) fn run(cmd: OutboxCommand, app: &App) -> anyhow::Result<ExitCode> {
    match cmd {
        OutboxCommand::List { limit, json } => list(app, limit, json.json),
        OutboxCommand::Tail { follow, json } => tail(app, follow, json),
    }
}

fn list(app: &App, limit: usize, json: bool) -> anyhow::Result<ExitCode> {
    let found = outbox::list(app, limit)?;
    warn_unreadable(&found);
    if json {
        print_json(&found)?;
    } else if found.entries.is_empty() {
        println!("The outbox is empty.");
    } else {
        print_entries(app, &found, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn tail(app: &App, follow: bool, json: bool) -> anyhow::Result<ExitCode> {
    let (last, mut follower) = outbox::tail(app, TAIL_LAST)?;
    warn_unreadable(&last);
    print_entries(app, &last, json)?;
    if !follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let more = follower.next_batch()?;
        warn_unreadable(&more);
        print_entries(app, &more, json)?;
    }
}

fn warn_unreadable(found: &OutboxList) {
    if found.unreadable > 0 {
        warn(format!(
            "skipped {} unreadable line(s) of the outbox",
            found.unreadable
        ));
    }
}

/// One line per entry: time (in the user's zone), source, session key,
/// the text's first line; or the entry as one line of JSON.
fn print_entries(app: &App, found: &OutboxList, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for entry in &found.entries {
        if json {
            serde_json::to_writer(&mut out, entry)?;
            writeln!(out)?;
        } else {
            writeln!(
                out,
                "{}  {:<9}  {}  {}",
                app.local_time(entry.ts),
                entry.source.as_str(),
                entry.session_key,
                entry.text.lines().next().unwrap_or("")
            )?;
        }
    }
    out.flush()?;
    Ok(())
}
