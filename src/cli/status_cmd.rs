//! `almanac status`.

use std::process::ExitCode;

use super::JsonFlag;
use super::output::print_json;
use crate::app::GlobalOptions;
use crate::app::status::{self, StatusReport, StoreStatus};
use crate::app::zone_data::ZoneDatabase;
use crate::config::Origin;
use crate::host::Host;

pub(super) fn run(
    options: &GlobalOptions,
    host: &Host,
    flag: JsonFlag,
) -> anyhow::Result<ExitCode> {
    let report = status::collect(options, host)?;
    report
        .subsystems
        .config
        .warnings
        .iter()
        .for_each(super::output::warn);
    if flag.json {
        print_json(&report)?;
    } else {
        print_text(&report, host);
    }
    Ok(if report.healthy() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn origin_note(origin: Origin) -> &'static str {
    match origin {
        Origin::Flag => " (from flag)",
        Origin::Env => " (from environment)",
        Origin::Config => " (from config)",
        Origin::Default => "",
    }
}

fn print_text(r: &StatusReport, host: &Host) {
    let s = &r.subsystems;
    println!("almanac {} (profile {})", r.version, r.profile);
    let state_note = if s.state_dir.exists {
        ""
    } else {
        ", not created yet"
    };
    println!(
        "  State dir   {}{}{state_note}",
        host.tilde(&r.state_dir),
        origin_note(s.state_dir.origin)
    );
    let config_note = match (&s.config.error, s.config.exists) {
        (Some(err), _) => format!("INVALID: {err}"),
        (None, false) => "not found, defaults in use".to_string(),
        (None, true) if s.config.unknown_keys.is_empty() => "ok".to_string(),
        (None, true) => format!(
            "ok, {} unknown key(s) ignored: {}",
            s.config.unknown_keys.len(),
            s.config.unknown_keys.join(", ")
        ),
    };
    println!(
        "  Config      {}{} ({config_note})",
        host.tilde(&r.config_path),
        origin_note(s.config.origin)
    );
    let ws = &s.workspace;
    let ws_note = if !ws.exists {
        "not created yet".to_string()
    } else {
        if ws.files.is_empty() {
            "no workspace files yet".to_string()
        } else {
            ws.files.join(", ")
        }
    };
    println!(
        "  Workspace   {}{} ({ws_note})",
        host.tilde(&r.workspace),
        origin_note(ws.origin)
    );
    println!(
        "  Store       {} ({})",
        host.tilde(&r.store_path),
        store_note(&s.store)
    );
    println!(
        "  Index       {} ({})",
        host.tilde(&r.index_path),
        store_note(&s.index)
    );
    match &s.memory {
        Some(m) => println!(
            "  Memory      {} ({}, MEMORY.md {} lines, {} daily files)",
            host.tilde(&m.root),
            if m.enabled { "on" } else { "off" },
            m.long_term_lines,
            m.daily_files
        ),
        None => println!("  Memory      unavailable until the config file is fixed"),
    }
    let hb = &s.heartbeat;
    let hb_note = if hb.corrupt {
        "unreadable; the next heartbeat command moves it aside".to_string()
    } else if !hb.exists {
        "no activity recorded yet".to_string()
    } else {
        format!(
            "last {} at {}, {} events",
            hb.last_activity.as_deref().unwrap_or("?"),
            hb.when.as_deref().unwrap_or("?"),
            hb.events_total
        )
    };
    println!("  Heartbeat   {hb_note}");
    match &s.tasks {
        Some(t) => println!(
            "  Tasks       {} queued · {} running · {} issues",
            t.queued, t.running, t.issues
        ),
        None => println!("  Tasks       unavailable until the state store can be read"),
    }
    if let Some(line) = zone_data_note(&r.time_zone_database, host.now_ts()) {
        println!("  Time zone   {line}");
    }
}

/// Said only when the system's zone data gives the user's zone other
/// offsets than the bundled data almanac reads.
fn zone_data_note(db: &ZoneDatabase, now: jiff::Timestamp) -> Option<String> {
    let system = db.system.as_ref().filter(|s| s.differs)?;
    let zone = db.zone.as_deref()?;
    let theirs = system.version.as_deref().map_or_else(
        || "the system's zone data".to_string(),
        |v| format!("the system's tzdata {v}"),
    );
    let from = match system.differs_from {
        Some(at) if at > now => format!(" from {}", at.strftime("%Y-%m-%d %H:%M UTC")),
        _ => " now".to_string(),
    };
    Some(format!(
        "{zone}: almanac uses its bundled tzdata {}; {theirs} gives other UTC offsets{from}",
        db.version
    ))
}

fn store_note(s: &StoreStatus) -> String {
    if let Some(err) = &s.error {
        return format!("ERROR: {err}");
    }
    match s.schema_version {
        None => "not created yet".to_string(),
        Some(v) if v == s.latest_schema_version => {
            format!("schema {v}, {}", human_bytes(s.bytes))
        }
        Some(v) => format!(
            "schema {v}, will migrate to {}, {}",
            s.latest_schema_version,
            human_bytes(s.bytes)
        ),
    }
}

pub(super) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
