//! How a gateway stops on a signal: gracefully (its shutdown run, its
//! discovery file removed, exit 0) from the moment it says it is ready.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

use crate::common::Sandbox;
use crate::gateway::eventually;

#[test]
fn a_sigterm_sent_as_soon_as_the_gateway_is_ready_stops_it_gracefully() {
    let sb = Sandbox::new();
    // Several starts: before, a signal sent at once landed before the
    // gateway listened for it in most of them, not in all.
    for start in 0..5 {
        let mut child = sb
            .cmd()
            .env("ALMANAC_HEARTBEAT_EVERY", "0m")
            .args(["gateway", "run", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        out.read_line(&mut ready).unwrap();
        assert!(ready.starts_with("gateway listening on"), "{ready}");
        // SAFETY: signals the gateway child this test started.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        let status = eventually(Duration::from_secs(15), || child.try_wait().unwrap());
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        assert!(status.success(), "start {start}: {status:?}");
        assert!(rest.contains("gateway stopped"), "start {start}: {rest}");
        assert!(
            !sb.path(".almanac/gateway.json").exists(),
            "start {start}: its discovery file is left"
        );
    }
}
