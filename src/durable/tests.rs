use super::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Re-runs this test binary as a worker process executing one test by name;
/// the worker branch of that test reads its job from the environment.
fn spawn_worker(test_name: &str, envs: &[(&str, String)]) -> std::process::Child {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([
        test_name,
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn worker")
}

fn payload(worker: usize, seq: usize) -> String {
    // Lengths vary from a few bytes to ~3 KB so some appends cross page
    // boundaries; the content is derived from (worker, seq) so the reader can
    // check every byte.
    let len = (worker * 7919 + seq * 104_729) % 3000;
    let ch = (b'a' + ((worker + seq) % 26) as u8) as char;
    std::iter::repeat_n(ch, len).collect()
}

const APPEND_WORKERS: usize = 16;
const APPENDS_PER_WORKER: usize = 500;

#[test]
fn locked_append_from_16_processes_keeps_every_line_intact() {
    if let Ok(target) = std::env::var("ALMANAC_TEST_APPEND_TARGET") {
        let worker: usize = std::env::var("ALMANAC_TEST_WORKER_ID")
            .unwrap()
            .parse()
            .unwrap();
        for seq in 0..APPENDS_PER_WORKER {
            let line = format!("w{worker:02} s{seq:04} {}\n", payload(worker, seq));
            locked_append(Path::new(&target), line.as_bytes(), 0o600, false).unwrap();
        }
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("nested").join("log.md");
    let children: Vec<_> = (0..APPEND_WORKERS)
        .map(|id| {
            spawn_worker(
                "durable::tests::locked_append_from_16_processes_keeps_every_line_intact",
                &[
                    ("ALMANAC_TEST_APPEND_TARGET", target.display().to_string()),
                    ("ALMANAC_TEST_WORKER_ID", id.to_string()),
                ],
            )
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }

    let text = fs::read_to_string(&target).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), APPEND_WORKERS * APPENDS_PER_WORKER);
    let mut next_seq = [0usize; APPEND_WORKERS];
    for line in lines {
        let mut parts = line.splitn(3, ' ');
        let worker: usize = parts.next().unwrap()[1..].parse().expect(line);
        let seq: usize = parts.next().unwrap()[1..].parse().expect(line);
        let body = parts.next().unwrap_or("");
        assert_eq!(
            seq, next_seq[worker],
            "lines of worker {worker} out of order"
        );
        assert_eq!(body, payload(worker, seq), "line body corrupted");
        next_seq[worker] += 1;
    }
    assert!(next_seq.iter().all(|&n| n == APPENDS_PER_WORKER));
    let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = fs::metadata(target.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
}

/// A self-checking document: a header with the body length and a checksum.
fn replace_content(round: u64) -> Vec<u8> {
    let len = 50_000 + (round as usize * 7_777) % 900_000;
    let body: Vec<u8> = (0..len)
        .map(|i| b'a' + ((i as u64 + round) % 26) as u8)
        .collect();
    let sum: u64 = body.iter().map(|&b| b as u64).sum();
    let mut out = format!("len={len} sum={sum}\n").into_bytes();
    out.extend_from_slice(&body);
    out
}

fn verify_content(bytes: &[u8]) -> Result<(), String> {
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|e| e.to_string())?;
    let mut len = None;
    let mut sum = None;
    for part in header.split(' ') {
        if let Some(v) = part.strip_prefix("len=") {
            len = v.parse::<usize>().ok();
        }
        if let Some(v) = part.strip_prefix("sum=") {
            sum = v.parse::<u64>().ok();
        }
    }
    let body = &bytes[newline + 1..];
    if Some(body.len()) != len {
        return Err(format!("length {} != header {len:?}", body.len()));
    }
    let actual: u64 = body.iter().map(|&b| b as u64).sum();
    if Some(actual) != sum {
        return Err("checksum mismatch".into());
    }
    Ok(())
}

#[test]
fn atomic_replace_survives_kill_at_random_points() {
    if let Ok(target) = std::env::var("ALMANAC_TEST_REPLACE_TARGET") {
        let mut out = io::stdout().lock();
        for round in 0u64.. {
            atomic_replace(Path::new(&target), &replace_content(round), 0o600).unwrap();
            writeln!(out, "round={round}").unwrap();
            out.flush().unwrap();
        }
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("state.json");
    // A small deterministic generator picks how many completed writes to
    // wait for before the kill, so the kill lands in a different phase of
    // the next write each round without relying on sleeps.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..25 {
        let mut child = spawn_worker(
            "durable::tests::atomic_replace_survives_kill_at_random_points",
            &[("ALMANAC_TEST_REPLACE_TARGET", target.display().to_string())],
        );
        let wait_for = 1 + (next() % 4) as usize;
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < wait_for {
            let line = lines.next().expect("worker output").unwrap();
            // The test harness prints its own lines too; count only ours.
            if line.starts_with("round=") {
                seen += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let bytes = fs::read(&target).expect("target must exist after a completed write");
        if let Err(why) = verify_content(&bytes) {
            panic!("round {round}: target is partial or corrupt: {why}");
        }
    }
}

#[test]
fn atomic_replace_keeps_existing_mode_and_creates_private_files() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("sub").join("fresh.json");
    atomic_replace(&fresh, b"{}", 0o600).unwrap();
    assert_eq!(
        fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        fs::metadata(fresh.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );

    let shared = dir.path().join("shared.md");
    fs::write(&shared, "old").unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o644)).unwrap();
    atomic_replace(&shared, b"new", 0o600).unwrap();
    assert_eq!(fs::read_to_string(&shared).unwrap(), "new");
    assert_eq!(
        fs::metadata(&shared).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| is_temp_file_name(&e.file_name().to_string_lossy()))
        .collect();
    assert!(leftovers.is_empty(), "temp files left behind");
}

#[test]
fn locked_append_starts_a_fresh_line_after_a_torn_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("daily.md");
    fs::write(&path, "- complete\n- torn without newline").unwrap();
    locked_append(&path, b"- next\n", 0o600, true).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "- complete\n- torn without newline\n- next\n"
    );
}

#[test]
fn quarantine_moves_the_file_aside_with_a_unique_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("heartbeat.json");
    let now: jiff::Timestamp = "2026-11-29T17:06:52Z".parse().unwrap();
    fs::write(&path, "{broken").unwrap();
    let first = quarantine(&path, now).unwrap();
    assert_eq!(
        first.file_name().unwrap(),
        "heartbeat.json.corrupt-20261129T170652Z"
    );
    assert!(!path.exists());
    fs::write(&path, "{again").unwrap();
    let second = quarantine(&path, now).unwrap();
    assert_eq!(
        second.file_name().unwrap(),
        "heartbeat.json.corrupt-20261129T170652Z-2"
    );
    assert_eq!(fs::read_to_string(&first).unwrap(), "{broken");
    assert_eq!(fs::read_to_string(&second).unwrap(), "{again");
}

#[test]
fn read_state_file_quarantines_what_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let now = jiff::Timestamp::UNIX_EPOCH;
    let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b);
    assert!(matches!(
        read_state_file(&path, now, parse).unwrap(),
        StateFile::Missing
    ));
    fs::write(&path, b"{\"ok\":1}").unwrap();
    assert!(matches!(
        read_state_file(&path, now, parse).unwrap(),
        StateFile::Loaded(_)
    ));
    fs::write(&path, b"\xff\xfe not json").unwrap();
    match read_state_file(&path, now, parse).unwrap() {
        StateFile::Quarantined { moved_to, reason } => {
            assert!(moved_to.exists());
            assert!(!path.exists());
            assert!(!reason.is_empty());
        }
        other => panic!("expected quarantine, got {other:?}"),
    }
}

#[test]
fn with_file_lock_serialises_read_modify_write_across_threads() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter.txt");
    let lock = dir.path().join("counter.txt.lock");
    atomic_replace(&counter, b"0", 0o600).unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..50 {
                    with_file_lock(&lock, || {
                        let n: u64 = fs::read_to_string(&counter).unwrap().parse().unwrap();
                        atomic_replace(&counter, (n + 1).to_string().as_bytes(), 0o600).unwrap();
                    })
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(fs::read_to_string(&counter).unwrap(), "400");
}

#[test]
fn atomic_create_never_replaces_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory").join("2026-11-29.md");
    assert!(atomic_create(&path, b"# first\n", 0o600).unwrap());
    assert!(!atomic_create(&path, b"# second\n", 0o600).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "# first\n");
    let leftovers = fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1, "temporary files must be removed");
}

#[test]
fn move_file_creates_the_destination_directory() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("a.md");
    fs::write(&from, "note").unwrap();
    let to = dir.path().join("trash").join("x").join("a.md");
    move_file(&from, &to).unwrap();
    assert!(!from.exists());
    assert_eq!(fs::read_to_string(&to).unwrap(), "note");
}

#[test]
fn atomic_replace_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let real_dir = dir.path().join("real");
    let link_dir = dir.path().join("links");
    fs::create_dir_all(&real_dir).unwrap();
    fs::create_dir_all(&link_dir).unwrap();
    let target = real_dir.join("MEMORY.md");
    fs::write(&target, "old").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    // An absolute link, and a relative link to that link (a chain).
    let link = link_dir.join("MEMORY.md");
    symlink(&target, &link).unwrap();
    let chained = link_dir.join("chained.md");
    symlink("MEMORY.md", &chained).unwrap();

    atomic_replace(&link, b"new", 0o600).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_link(&link).unwrap(), target);
    assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    assert_eq!(
        fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o640,
        "the target keeps its mode"
    );

    atomic_replace(&chained, b"newer", 0o600).unwrap();
    assert!(
        fs::symlink_metadata(&chained)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "newer");
    // The temporary file lived beside the target, and is gone.
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&real_dir), vec!["MEMORY.md"]);
    assert_eq!(names(&link_dir), vec!["MEMORY.md", "chained.md"]);
}

#[test]
fn atomic_replace_through_a_dangling_symlink_creates_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere").join("config.json5");
    let link = dir.path().join("config.json5");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    atomic_replace(&link, b"{}", 0o600).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "{}");
    assert_eq!(
        fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn atomic_replace_refuses_a_symlink_loop() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let err = atomic_replace(&a, b"x", 0o600).unwrap_err();
    assert!(err.to_string().contains("symbolic links"), "{err}");
    assert!(fs::symlink_metadata(&a).unwrap().file_type().is_symlink());
}

#[test]
fn remove_if_exists_removes_a_link_not_its_target() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("unit.service");
    fs::write(&target, "x").unwrap();
    let link = dir.path().join("wants.service");
    symlink(&target, &link).unwrap();
    assert!(remove_if_exists(&link).unwrap());
    assert!(fs::symlink_metadata(&link).is_err());
    assert_eq!(fs::read_to_string(&target).unwrap(), "x");
    assert!(remove_if_exists(&target).unwrap());
    assert!(!target.exists());
    assert!(
        !remove_if_exists(&target).unwrap(),
        "nothing left to remove"
    );
}

#[test]
fn a_staged_file_is_in_place_only_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.json");
    std::fs::write(&path, b"old").unwrap();
    let staged = stage(&path, 0o644, |out| out.write_all(b"new")).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    staged.commit().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    // Dropped uncommitted, or refused by its writer: nothing is left.
    drop(stage(&path, 0o644, |out| out.write_all(b"dropped")).unwrap());
    let failed = stage(&path, 0o644, |_| Err(io::Error::other("refused")));
    assert!(failed.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a.json"]);
}

#[test]
fn a_scratch_file_has_no_name_and_an_empty_directory_can_go() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let mut scratch = scratch_file(&work).unwrap();
    scratch.write_all(b"spilled").unwrap();
    scratch.seek(SeekFrom::Start(0)).unwrap();
    let mut back = String::new();
    scratch.read_to_string(&mut back).unwrap();
    assert_eq!(back, "spilled");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
    std::fs::write(work.join("kept"), b"").unwrap();
    assert!(!remove_dir_if_empty(&work).unwrap());
    std::fs::remove_file(work.join("kept")).unwrap();
    assert!(remove_dir_if_empty(&work).unwrap());
    assert!(!work.exists());
    assert!(!remove_dir_if_empty(&work).unwrap());
}

#[test]
fn keep_as_keeps_the_old_bytes_under_the_second_name_when_the_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.json");
    let keep = dir.path().join("jobs.json.bak");
    atomic_replace(&path, b"first", PRIVATE_FILE_MODE).unwrap();
    atomic_replace(&keep, b"older", PRIVATE_FILE_MODE).unwrap();
    keep_as(&path, &keep).unwrap();
    atomic_replace(&path, b"second", PRIVATE_FILE_MODE).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"second");
    assert_eq!(fs::read(&keep).unwrap(), b"first");
    // Through a symlink, the file it points to is the one kept.
    let real = dir.path().join("real.json");
    atomic_replace(&real, b"real", PRIVATE_FILE_MODE).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    keep_as(&link, &keep).unwrap();
    atomic_replace(&link, b"through the link", PRIVATE_FILE_MODE).unwrap();
    assert_eq!(fs::read(&keep).unwrap(), b"real");
    assert!(
        !fs::symlink_metadata(&keep)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Nothing left behind under a temporary name.
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| is_temp_file_name(n))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_copy_replaces_its_target_whole_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("jobs.json");
    let to = dir.path().join("jobs.json.last-good");
    atomic_replace(&from, b"new jobs", PRIVATE_FILE_MODE).unwrap();
    atomic_replace(&to, b"old jobs", PRIVATE_FILE_MODE).unwrap();
    replace_with_copy(&from, &to).unwrap();
    assert_eq!(fs::read(&to).unwrap(), b"new jobs");
    assert_eq!(
        fs::metadata(&to).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A source that is gone leaves the target and no temporary file.
    let err = replace_with_copy(&dir.path().join("missing"), &to);
    assert!(err.is_err());
    assert_eq!(fs::read(&to).unwrap(), b"new jobs");
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// The lock file of a whole file is `<file>.lock` beside it, the same
/// bytes every store has always used (a lock under another name would
/// not exclude a process still using the old one).
#[test]
fn a_file_s_lock_is_its_name_with_lock_appended() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let state = Path::new("/home/u/.almanac");
    for (file, lock) in [
        ("cron/jobs.json", "cron/jobs.json.lock"),
        ("heartbeat.json", "heartbeat.json.lock"),
        (
            "agents/main/heartbeat/runs.jsonl",
            "agents/main/heartbeat/runs.jsonl.lock",
        ),
        (
            "agents/main/sessions/sessions.json",
            "agents/main/sessions/sessions.json.lock",
        ),
        ("memory.sqlite", "memory.sqlite.lock"),
        ("config.json5", "config.json5.lock"),
    ] {
        assert_eq!(lock_path_for(&state.join(file)), state.join(lock), "{file}");
    }
    // The config's lock was named from its file name: the same path.
    let config = state.join("config.json5");
    let mut name = config.file_name().unwrap().to_os_string();
    name.push(".lock");
    assert_eq!(lock_path_for(&config), config.with_file_name(name));
    // A name that is not UTF-8 keeps its bytes.
    let odd = Path::new(OsStr::from_bytes(b"/tmp/caf\xe9.json"));
    assert_eq!(
        lock_path_for(odd).as_os_str().as_bytes(),
        b"/tmp/caf\xe9.json.lock"
    );
}

#[test]
fn a_started_file_gets_its_first_bytes_once_and_an_empty_one_gets_them_too() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions").join("s.jsonl");
    assert!(start_unsynced(&path, b"header\n", 0o600).unwrap());
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!start_unsynced(&path, b"other\n", 0o600).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "header\n");
    // A start cut between the file's creation and its write.
    let cut = dir.path().join("cut.jsonl");
    fs::write(&cut, "").unwrap();
    assert!(start_unsynced(&cut, b"header\n", 0o600).unwrap());
    assert_eq!(fs::read_to_string(&cut).unwrap(), "header\n");
    // Writers starting one file at once write its first bytes once.
    let raced = dir.path().join("raced.jsonl");
    let wrote: usize = std::thread::scope(|s| {
        let all: Vec<_> = (0..8)
            .map(|_| s.spawn(|| start_unsynced(&raced, b"header\n", 0o600).unwrap()))
            .collect();
        all.into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum()
    });
    assert_eq!(wrote, 1);
    assert_eq!(fs::read_to_string(&raced).unwrap(), "header\n");
    assert_eq!(syncs_on_this_thread(), 0, "nothing is synced");
}
