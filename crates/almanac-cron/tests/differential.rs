//! Differential test against the reference implementation, the JavaScript
//! `croner` library (version 10), run by Node.js from
//! `tests/differential/` (its `package.json` pins it; `npm install` is run
//! there first when `node_modules` is missing).
//!
//! Random five- and six-field expressions (ranges, steps, lists, names,
//! `L`, `W`, `#`, `?`, `+`, and invalid ones) are evaluated in zones with
//! and without daylight saving, from times around their transitions; the
//! next five fire times, or the refusal, must agree.
//!
//! Without `node` or `npm`, or when the install fails, the test says why
//! and passes as skipped. `CRON_DIFF_SEED` and `CRON_DIFF_CASES` change
//! the seed and the number of expressions.
//!
//! Two differences are deliberate and adapted for before comparing:
//! a day field written exactly `?` is sent to the reference as `*` (the
//! reference reads it as "every day", which ORed with the other day field
//! makes every day match), and an answer the reference gives that is not
//! after the time asked (from the second pass of a repeated hour) is
//! passed over by `next.mjs`. Both are counted in the output.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jiff::Timestamp;
use jiff::tz::TimeZone;

const ZONES: [&str; 5] = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
];

/// Daylight-saving transitions of 2026 and 2027 in the zones above.
const TRANSITIONS: [&str; 12] = [
    "2026-03-08T07:00:00Z", // New York, spring forward
    "2026-11-01T06:00:00Z", // New York, fall back
    "2026-03-29T01:00:00Z", // Berlin, spring forward
    "2026-10-25T01:00:00Z", // Berlin, fall back
    "2026-04-04T15:00:00Z", // Lord Howe, back half an hour
    "2026-10-03T15:30:00Z", // Lord Howe, forward half an hour
    "2027-03-14T07:00:00Z",
    "2027-11-07T06:00:00Z",
    "2027-03-28T01:00:00Z",
    "2027-10-31T01:00:00Z",
    "2027-04-03T15:00:00Z",
    "2027-10-02T15:30:00Z",
];

const FIRES: usize = 5;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `low..=high`.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy)]
struct Spec {
    min: u64,
    max: u64,
    /// Values the field has (the largest valid step).
    size: u64,
}

const SECOND: Spec = Spec {
    min: 0,
    max: 59,
    size: 60,
};
const MINUTE: Spec = SECOND;
const HOUR: Spec = Spec {
    min: 0,
    max: 23,
    size: 24,
};
const DAY: Spec = Spec {
    min: 1,
    max: 31,
    size: 31,
};
const MONTH: Spec = Spec {
    min: 1,
    max: 12,
    size: 12,
};
const WEEKDAY: Spec = Spec {
    min: 0,
    max: 7,
    size: 7,
};

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn cased(rng: &mut Rng, name: &str) -> String {
    match rng.range(0, 2) {
        0 => name.to_string(),
        1 => name.to_ascii_uppercase(),
        _ => {
            let mut s = name.to_string();
            s[..1].make_ascii_uppercase();
            s
        }
    }
}

/// A value, now and then out of range.
fn value(rng: &mut Rng, spec: Spec) -> u64 {
    if rng.chance(3) {
        spec.max + rng.range(1, 3)
    } else {
        rng.range(spec.min, spec.max)
    }
}

/// One item of a list.
fn atom(rng: &mut Rng, spec: Spec) -> String {
    match rng.range(0, 9) {
        0 => "*".to_string(),
        1..=3 => value(rng, spec).to_string(),
        4 | 5 => {
            let a = rng.range(spec.min, spec.max);
            let b = rng.range(spec.min, spec.max);
            // Now and then backwards.
            let (a, b) = if rng.chance(90) {
                (a.min(b), a.max(b))
            } else {
                (a, b)
            };
            format!("{a}-{b}")
        }
        6 | 7 => {
            let step = if rng.chance(95) {
                rng.range(1, spec.size.min(15))
            } else {
                *rng.pick(&[0, spec.size + 1])
            };
            format!("*/{step}")
        }
        8 => {
            let a = rng.range(spec.min, spec.max);
            let b = rng.range(a, spec.max);
            format!("{a}-{b}/{}", rng.range(1, spec.size.min(12)))
        }
        _ if rng.chance(30) => {
            // Steps from a single number: refused.
            format!("{}/{}", rng.range(spec.min, spec.max), rng.range(1, 10))
        }
        _ => rng.range(spec.min, spec.max).to_string(),
    }
}

fn field(rng: &mut Rng, spec: Spec) -> String {
    match rng.range(0, 19) {
        0..=6 => "*".to_string(),
        7 => "?".to_string(),
        8..=11 => {
            let n = rng.range(2, 3);
            (0..n)
                .map(|_| atom(rng, spec))
                .collect::<Vec<_>>()
                .join(",")
        }
        _ => atom(rng, spec),
    }
}

fn small_field(rng: &mut Rng, spec: Spec) -> String {
    // Mostly `*` or a single value, so that fires come often enough to
    // cross the transitions.
    match rng.range(0, 9) {
        0..=3 => "*".to_string(),
        4..=6 => format!("*/{}", rng.range(1, 20)),
        _ => field(rng, spec),
    }
}

fn month_field(rng: &mut Rng) -> String {
    match rng.range(0, 9) {
        0 => name(rng, &MONTHS),
        1 => {
            let a = rng.range(0, 11) as usize;
            let b = rng.range(a as u64, 11) as usize;
            format!("{}-{}", cased(rng, MONTHS[a]), cased(rng, MONTHS[b]))
        }
        2 => format!("{},{}", name(rng, &MONTHS), rng.range(1, 12)),
        // A weekday name in the month field: refused.
        3 if rng.chance(30) => name(rng, &DAYS),
        _ => {
            if rng.chance(60) {
                "*".to_string()
            } else {
                field(rng, MONTH)
            }
        }
    }
}

/// One of `names`, in some case.
fn name(rng: &mut Rng, names: &[&str]) -> String {
    let picked = *rng.pick(names);
    cased(rng, picked)
}

fn day_of_month_field(rng: &mut Rng) -> String {
    match rng.range(0, 14) {
        0 => "L".to_string(),
        1 => cased(rng, "lw"),
        2 => format!("{}W", value(rng, DAY)),
        3 => format!("L,{}", rng.range(1, 31)),
        4 => format!("{}L", rng.range(1, 31)),
        5 => format!("{},{}W", rng.range(1, 31), rng.range(1, 31)),
        // Refused: W in a range, LW in a list.
        6 if rng.chance(30) => format!("1-{}W", rng.range(2, 31)),
        6 => "LW,15".to_string(),
        7 | 8 => "?".to_string(),
        _ => {
            if rng.chance(50) {
                "*".to_string()
            } else {
                field(rng, DAY)
            }
        }
    }
}

fn day_of_week_field(rng: &mut Rng) -> String {
    let body = match rng.range(0, 14) {
        0 => name(rng, &DAYS),
        1 => {
            let a = rng.range(0, 6) as usize;
            let b = rng.range(a as u64, 6) as usize;
            format!("{}-{}", cased(rng, DAYS[a]), cased(rng, DAYS[b]))
        }
        2 => cased(rng, "sat-sun"),
        3 => {
            let k = if rng.chance(92) {
                rng.range(1, 5)
            } else {
                *rng.pick(&[0, 6])
            };
            format!("{}#{k}", rng.range(0, 7))
        }
        4 => format!("{}L", rng.range(0, 7)),
        5 => format!("{}#L", name(rng, &DAYS)),
        6 => format!(
            "{},{}#{}",
            rng.range(0, 7),
            rng.range(0, 6),
            rng.range(1, 5)
        ),
        7 => "1-5/2".to_string(),
        8 | 9 => "?".to_string(),
        _ => {
            if rng.chance(50) {
                "*".to_string()
            } else {
                field(rng, WEEKDAY)
            }
        }
    };
    if rng.chance(12) {
        format!("+{body}")
    } else {
        body
    }
}

fn expression(rng: &mut Rng) -> String {
    let with_seconds = rng.chance(35);
    let mut fields = Vec::new();
    if with_seconds {
        fields.push(if rng.chance(60) {
            rng.range(0, 59).to_string()
        } else {
            small_field(rng, SECOND)
        });
    }
    fields.push(if rng.chance(50) {
        small_field(rng, MINUTE)
    } else {
        field(rng, MINUTE)
    });
    // Hours around the transitions (1-3 a.m.) often, so that the skipped
    // and repeated hours are hit.
    fields.push(match rng.range(0, 9) {
        0..=2 => rng.range(1, 3).to_string(),
        3 => format!("{}-{}", rng.range(0, 2), rng.range(2, 4)),
        4 => "1,2,3".to_string(),
        _ => small_field(rng, HOUR),
    });
    fields.push(day_of_month_field(rng));
    fields.push(month_field(rng));
    fields.push(day_of_week_field(rng));
    fields.join(" ")
}

fn start(rng: &mut Rng) -> i64 {
    let base = if rng.chance(75) {
        let transition: Timestamp = rng.pick(&TRANSITIONS).parse().unwrap();
        // Often within the hour after the change: inside the second pass
        // of a repeated hour, or just past a skipped one.
        let hours = if rng.chance(30) {
            0
        } else {
            rng.range(0, 72) as i64 - 36
        };
        transition.as_millisecond() + hours * 3_600_000
    } else {
        // Anywhere in 2026–2027.
        1_767_225_600_000 + rng.range(0, 2 * 365 * 24) as i64 * 3_600_000
    };
    // Off the hour by some minutes, seconds and milliseconds.
    base + rng.range(0, 59) as i64 * 60_000
        + if rng.chance(30) {
            rng.range(0, 59_999) as i64
        } else {
            0
        }
}

/// What the reference is given: day fields written exactly `?` become `*`.
fn for_reference(expr: &str) -> String {
    let mut words: Vec<&str> = expr.split_whitespace().collect();
    let (dom, dow) = match words.len() {
        5 => (2, 4),
        6 => (3, 5),
        _ => return expr.to_string(),
    };
    for index in [dom, dow] {
        if words[index] == "?" {
            words[index] = "*";
        } else if words[index] == "+?" {
            words[index] = "+*";
        }
    }
    words.join(" ")
}

fn iso(ms: i64) -> String {
    Timestamp::from_millisecond(ms).unwrap().to_string()
}

/// Runs `next.mjs` on the cases, installing croner first when needed.
/// `Err` says why the comparison cannot run.
fn reference(dir: &Path, cases: &serde_json::Value) -> Result<serde_json::Value, String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Err("`node` is not available".to_string()),
    }
    if !dir.join("node_modules/croner/package.json").exists() {
        eprintln!("installing croner into {} …", dir.display());
        let install = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .output()
            .map_err(|e| format!("`npm` could not be run: {e}"))?;
        if !install.status.success() {
            return Err(format!(
                "`npm install` failed: {}",
                String::from_utf8_lossy(&install.stderr).trim()
            ));
        }
    }
    let mut child = Command::new("node")
        .arg("next.mjs")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`node next.mjs` could not be started: {e}"))?;
    let input = serde_json::to_vec(cases).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    // The reference must run once installed: its failure is a failure.
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        panic!("next.mjs failed: …{tail}");
    }
    Ok(serde_json::from_slice(&out.stdout).expect("next.mjs prints JSON"))
}

#[test]
fn agrees_with_croner_10() {
    let seed = std::env::var("CRON_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0A1A_2026);
    let expressions: usize = std::env::var("CRON_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let mut rng = Rng(seed);
    let mut cases = Vec::new();
    let mut adapted = 0;
    for _ in 0..expressions {
        let expr = expression(&mut rng);
        let for_ref = for_reference(&expr);
        adapted += usize::from(for_ref != expr);
        // Each expression from a few starts in a few zones.
        for _ in 0..3 {
            let tz = *rng.pick(&ZONES);
            cases.push((expr.clone(), for_ref.clone(), tz, start(&mut rng)));
        }
    }
    let json = serde_json::Value::Array(
        cases
            .iter()
            .map(|(_, for_ref, tz, from)| {
                serde_json::json!({"expr": for_ref, "tz": tz, "from": from, "count": FIRES})
            })
            .collect(),
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential");
    let reference = match reference(&dir, &json) {
        Ok(reference) => reference,
        Err(why) => {
            println!("SKIPPED: the differential test against croner@10 did not run: {why}");
            return;
        }
    };
    let results = reference["results"].as_array().unwrap();
    assert_eq!(results.len(), cases.len());

    let mut mismatches = Vec::new();
    let (mut refused, mut compared) = (0, 0);
    let mut reference_failed = Vec::new();
    for ((expr, for_ref, tz, from), theirs) in cases.iter().zip(results) {
        let zone = TimeZone::get(tz).unwrap();
        let ours = almanac_cron::next_fires(expr, &zone, *from, FIRES);
        let describe = || {
            format!(
                "`{expr}` (reference: `{for_ref}`) in {tz} from {}",
                iso(*from)
            )
        };
        if let Some(failure) = theirs.get("failed") {
            // Nothing to compare with; ours must still be an answer.
            assert!(ours.is_ok(), "{}: {ours:?}", describe());
            reference_failed.push(format!("{}: {failure}", describe()));
            continue;
        }
        match (&ours, theirs.get("error")) {
            (Err(_), Some(_)) => refused += 1,
            (Err(err), None) => mismatches.push(format!(
                "{}: we refuse ({err}), croner accepts: {}",
                describe(),
                theirs["next"]
            )),
            (Ok(fires), Some(err)) => mismatches.push(format!(
                "{}: croner refuses ({err}), we accept: {:?}",
                describe(),
                fires.iter().map(|&f| iso(f)).collect::<Vec<_>>()
            )),
            (Ok(fires), None) => {
                compared += 1;
                let want: Vec<i64> = theirs["next"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect();
                if *fires != want {
                    mismatches.push(format!(
                        "{}:\n    ours:   {:?}\n    croner: {:?}",
                        describe(),
                        fires.iter().map(|&f| iso(f)).collect::<Vec<_>>(),
                        want.iter().map(|&f| iso(f)).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    println!(
        "croner@10 differential (seed {seed:#x}): {} cases from {expressions} expressions: {compared} compared ({FIRES} fires each), {refused} refused by both; {adapted} expressions with a `?` day field adapted; {} reference answers from a repeated hour's second pass passed over; {} cases where the reference failed while searching",
        cases.len(),
        reference["pastAnswers"],
        reference_failed.len()
    );
    for failure in &reference_failed {
        println!("  reference failed: {failure}");
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ from croner@10:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
