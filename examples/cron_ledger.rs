//! The cron slot ledger at scale: JOBS hourly jobs (ids as almanac gives
//! them) run SLOTS slots each, every slot claimed, ended and the history
//! trimmed as the gateway's runner does it, in a fresh state store; then
//! the store's size on disk and its rows.
//!
//!   cargo run --release --example cron_ledger -- [JOBS] [SLOTS] [DIR]
//!   (100000 jobs, 168 slots: a week; the store in DIR, else in a
//!   temporary directory removed at the end)

use std::time::Instant;

use almanac::testing::CronSlots;

const HOUR_MS: i64 = 3_600_000;
/// 2026-12-01T00:00:00Z.
const START_MS: i64 = 1_796_083_200_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let jobs_n: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let slots_n: i64 = args.next().map_or(Ok(168), |a| a.parse())?;
    let given = args.next();
    let dir = match &given {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("almanac-cron-ledger-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("almanac.sqlite");
    if path.exists() {
        return Err(format!("{} exists: give a new directory", path.display()).into());
    }
    let jobs: Vec<String> = (0..jobs_n).map(|i| uuid_like(i as u64, 1)).collect();
    let mut ledger = CronSlots::open(&path)?;
    let began = Instant::now();
    let mut largest = 0u64;
    let mut slowest_trim_ms = 0u128;
    for k in 1..=slots_n {
        let slot = START_MS + k * HOUR_MS;
        let due: Vec<(String, i64)> = jobs.iter().map(|job| (job.clone(), slot)).collect();
        let claimed = ledger.claim_due(&due, 1, slot + 3)?;
        assert_eq!(claimed, jobs_n, "every slot of hour {k} claimed once");
        let ended: Vec<(String, i64, String)> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| (job.clone(), slot, uuid_like(i as u64, k as u64 + 1)))
            .collect();
        ledger.finish_ok(&ended, slot + 40)?;
        let trimming = Instant::now();
        ledger.trim()?;
        slowest_trim_ms = slowest_trim_ms.max(trimming.elapsed().as_millis());
        largest = largest.max(size_on_disk(&path));
        if k % 24 == 0 {
            println!(
                "  day {:>2}: {:>5.1} MB on disk, {:.0} s",
                k / 24,
                size_on_disk(&path) as f64 / 1e6,
                began.elapsed().as_secs_f64()
            );
        }
    }
    drop(ledger);
    let conn = rusqlite::Connection::open(&path)?;
    let rows: i64 = conn.query_row("SELECT COUNT(*) FROM cron_slots", [], |r| r.get(0))?;
    let per_job_max: i64 = conn.query_row(
        "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM cron_slots GROUP BY job_id)",
        [],
        |r| r.get(0),
    )?;
    drop(conn);
    let size = size_on_disk(&path);
    println!(
        "cron slot ledger: {jobs_n} hourly jobs x {slots_n} slots ({} slots claimed and ended) in {:.0} s",
        jobs_n as i64 * slots_n,
        began.elapsed().as_secs_f64()
    );
    println!(
        "state store {:.1} MB at the end, {:.1} MB at most on the way; {rows} ledger rows, at most {per_job_max} per job; slowest hourly trim {slowest_trim_ms} ms",
        size as f64 / 1e6,
        largest as f64 / 1e6
    );
    if given.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// The database and its write-ahead log.
fn size_on_disk(path: &std::path::Path) -> u64 {
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    [path.to_path_buf(), std::path::PathBuf::from(wal)]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// A UUID-shaped id (36 characters), distinct for each `(n, salt)`
/// below 2^40 and 2^8, scattered as random ids are.
fn uuid_like(n: u64, salt: u64) -> String {
    let a = (n ^ salt << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (a >> 52) & 0xfff,
        (n ^ salt << 40) & 0xffff_ffff_ffff
    )
}
