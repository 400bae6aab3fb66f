use super::*;

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn sh(script: &str, timeout: Duration, cap: usize) -> Spec {
    Spec {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        timeout,
        max_output_bytes: cap,
        stdin: Input::Null,
    }
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet),
/// waiting up to a few seconds for the kernel to finish the job.
fn gone(pid: i32) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        // SAFETY: signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false);
        if !alive || zombie {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn first_pid(capture: &Capture) -> i32 {
    String::from_utf8_lossy(&capture.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {:?}", capture.text()))
}

#[test]
fn output_exit_code_and_exactly_the_given_environment() {
    let mut out = Capture::default();
    let spec = sh(
        "echo out; echo err >&2; echo \"home=${HOME:-unset} path=$PATH\"; exit 3",
        Duration::from_secs(30),
        1 << 20,
    );
    let done = block_on(run(&spec, &mut out)).unwrap();
    assert_eq!(done.code, Some(3));
    assert_eq!(done.exit_code(), 3);
    assert!(!done.success() && !done.timed_out && !done.truncated);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "out\nhome=unset path=/usr/bin:/bin\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    assert_eq!(out.text(), "out\nhome=unset path=/usr/bin:/bin\nerr\n");

    let mut out = Capture::default();
    let done = block_on(run(
        &sh("kill -9 $$", Duration::from_secs(30), 100),
        &mut out,
    ))
    .unwrap();
    assert_eq!((done.code, done.signal), (None, Some(9)));
    assert_eq!(done.exit_code(), 137);
}

#[test]
fn endless_output_is_cut_at_the_cap_and_stopped_at_the_timeout() {
    let mut out = Capture::default();
    let done = block_on(run(&sh("yes", Duration::from_secs(1), 10_000), &mut out)).unwrap();
    assert!(done.timed_out && done.truncated, "{done:?}");
    assert_eq!(out.stdout.len(), 10_000, "memory holds the cap, no more");
    assert!(
        done.output_bytes > 10_000,
        "the rest was read and dropped: {}",
        done.output_bytes
    );
    assert_eq!(done.signal, Some(libc::SIGTERM));
}

#[test]
fn the_whole_group_goes_at_the_timeout() {
    let mut out = Capture::default();
    let started = std::time::Instant::now();
    let done = block_on(run(
        &sh(
            "sleep 1000 & echo $!; sleep 1000",
            Duration::from_secs(1),
            1000,
        ),
        &mut out,
    ))
    .unwrap();
    assert!(done.timed_out);
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild = first_pid(&out);
    assert!(gone(grandchild), "grandchild {grandchild} still runs");
}

#[test]
fn what_a_child_leaves_running_goes_with_it() {
    let mut out = Capture::default();
    let started = std::time::Instant::now();
    let done = block_on(run(
        &sh("sleep 1000 & echo $!", Duration::from_secs(60), 1000),
        &mut out,
    ))
    .unwrap();
    assert_eq!(done.code, Some(0));
    assert!(!done.timed_out);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the background sleep holding the pipe does not keep the call waiting"
    );
    assert!(gone(first_pid(&out)));
}

/// Shares what it receives with the test while the run is still going.
struct Shared(std::rc::Rc<std::cell::RefCell<Capture>>);

impl Sink for Shared {
    fn output(&mut self, stream: Stream, bytes: &[u8]) {
        self.0.borrow_mut().output(stream, bytes);
    }
}

#[test]
fn dropping_the_run_kills_the_group() {
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Capture::default()));
    let mut sink = Shared(seen.clone());
    let spec = sh(
        "sleep 1000 & echo $!; sleep 1000",
        Duration::from_secs(600),
        1000,
    );
    block_on(async {
        let running = run(&spec, &mut sink);
        tokio::pin!(running);
        // Run until the grandchild's pid is printed, then drop the run.
        loop {
            tokio::select! {
                done = &mut running => panic!("ended early: {done:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if seen.borrow().stdout.ends_with(b"\n") {
                        break;
                    }
                }
            }
        }
    });
    assert!(gone(first_pid(&seen.borrow())));
}

#[test]
fn missing_programs_are_an_error() {
    let mut spec = sh("true", Duration::from_secs(5), 10);
    spec.program = PathBuf::from("/nonexistent/program");
    assert!(block_on(run(&spec, &mut Capture::default())).is_err());
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace() {
    let mut out = Capture::default();
    let started = std::time::Instant::now();
    let done = block_on(run(
        &sh(
            "trap '' TERM; sleep 1000 & echo $!; sleep 1000",
            Duration::from_secs(1),
            1000,
        ),
        &mut out,
    ))
    .unwrap();
    assert!(done.timed_out);
    assert_eq!(done.signal, Some(libc::SIGKILL));
    assert!(started.elapsed() >= GRACE);
    assert!(started.elapsed() < GRACE + Duration::from_secs(8));
    assert!(gone(first_pid(&out)));
}
