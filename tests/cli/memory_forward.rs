//! `memory search` sent whole to a running gateway over its command
//! socket (`<state>/gateway.sock`): the command prints what the gateway
//! answers, byte for byte what it prints when it asks over HTTP; what the
//! gateway declines, or a socket nobody listens on, leaves the command
//! to run as before.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Run, Sandbox, mode};
use crate::gateway::{Gateway, eventually};
use crate::memory_hybrid::{installed_model, notes};

const NOW: &str = "2026-11-29T09:00:00+00:00";
const QUERY: &str = "groceries I picked up";

fn search(sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["--now", NOW, "memory", "search", "--max-results", "5"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", QUERY]);
    sb.run_env(&args, env).ok()
}

fn memory_status(gw: &Gateway) -> Value {
    let (code, status) = gw.request("GET", "/v1/status", None);
    assert_eq!(code, 200, "{status}");
    status["memorySearch"].clone()
}

/// `ALMANAC_LOG` set: the command writes its own log, so it never sends
/// its command line, and asks over HTTP as before.
const OVER_HTTP: &[(&str, &str)] = &[("ALMANAC_LOG", "off")];

#[test]
fn a_search_sent_whole_prints_what_the_command_prints_and_what_is_declined_runs_as_before() {
    let sb = Sandbox::new();
    // The model, and a key the settings do not know: its warning is the
    // command's to print, whoever answers.
    sb.write(
        ".almanac/config.json5",
        &format!(
            "{{agents: {{defaults: {{memorySearch: {{local: {{modelPath: {:?}}}}}}}}}, nosuchKey: 1}}",
            installed_model().display().to_string()
        ),
    );
    notes(&sb);
    let gw = Gateway::start(&sb, &[]);
    eventually(Duration::from_secs(120), || {
        let m = memory_status(&gw);
        (m["withoutVector"] == 0 && m["embedded"].as_u64() > Some(0)).then_some(())
    });
    let socket = sb.path(".almanac/gateway.sock");
    assert_eq!(mode(&socket) & 0o777, 0o600, "the user's alone");

    let shapes: [&[&str]; 3] = [
        &["--json"],
        &[],
        &["--json", "--since", "2026-11-01", "--min-score", "0.01"],
    ];
    for (n, shape) in shapes.iter().enumerate() {
        let sent = search(&sb, shape, &[]);
        assert_eq!(memory_status(&gw)["forwarded"], n + 1, "{shape:?} was sent");
        let asked = search(&sb, shape, OVER_HTTP);
        assert_eq!(
            memory_status(&gw)["forwarded"],
            n + 1,
            "{shape:?} over HTTP"
        );
        assert_eq!(sent.stdout, asked.stdout, "{shape:?}");
        assert_eq!(sent.stderr, asked.stderr, "{shape:?}");
        assert!(
            sent.stderr.contains("unknown config key `nosuchKey`"),
            "{}",
            sent.stderr
        );
    }
    let hybrid = search(&sb, &["--json"], &[]).json();
    assert_eq!(hybrid["mode"], "hybrid", "{hybrid}");
    assert!(
        hybrid["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("milk, eggs"),
        "{hybrid}"
    );
    let status = memory_status(&gw);
    assert_eq!(status["forwarded"], 4, "{status}");
    assert_eq!(status["searches"], 7, "{status}");

    // Another time zone than the gateway's: declined, and asked over
    // HTTP (its searches count, the forwarded ones do not).
    let tokyo = search(&sb, &["--json"], &[("TZ", "Asia/Tokyo")]).json();
    assert_eq!(tokyo["mode"], "hybrid");
    let status = memory_status(&gw);
    assert_eq!(
        (status["forwarded"].clone(), status["searches"].clone()),
        (4.into(), 8.into())
    );
    // Another command is declined too, and runs here.
    let got = sb
        .run(&["memory", "get", "memory/2026-11-20.md", "--lines", "1"])
        .ok();
    assert_eq!(got.stdout.trim(), "# 2026-11-20");
    // A search of another state directory is not sent.
    let elsewhere = sb.path("elsewhere");
    let other = sb
        .run(&[
            "--state-dir",
            elsewhere.to_str().unwrap(),
            "memory",
            "search",
            "--json",
            "--",
            QUERY,
        ])
        .ok()
        .json();
    assert_eq!(other["mode"], "fts-only", "no model set up there: {other}");
    assert_eq!(memory_status(&gw)["forwarded"], 4);

    // Stopped, the gateway takes its socket with it.
    let through = search(&sb, &["--json"], &[]).stdout;
    gw.signal(libc::SIGTERM);
    let mut gw = gw;
    gw.child.wait().unwrap();
    assert!(!socket.exists(), "the socket is removed at the stop");
    // Killed with -9, it leaves the file; nobody answers on it and the
    // command searches on its own, with the same result.
    let gw = Gateway::start(&sb, &[]);
    assert!(socket.exists());
    gw.signal(libc::SIGKILL);
    let mut gw = gw;
    gw.child.wait().unwrap();
    assert!(socket.exists());
    assert_eq!(search(&sb, &["--json"], &[]).stdout, through);
    // The next gateway replaces the file and answers on it again.
    let gw = Gateway::start(&sb, &[]);
    assert_eq!(search(&sb, &["--json"], &[]).stdout, through);
    assert_eq!(memory_status(&gw)["forwarded"], 1);
}
