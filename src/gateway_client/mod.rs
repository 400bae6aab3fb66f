//! The gateway's client side: how a command finds a running gateway (its
//! discovery file `gateway.json` and its lock), speaks to it (a plain
//! HTTP/1.1 client with its token), what it answers (the wire types), and
//! the user service that starts it (`gateway install`).
//!
//! Invariants:
//! * Nothing here runs the daemon: the CLI and the app use this module
//!   without importing `gateway`, which imports it for the same file
//!   formats and the same status shape.
//! * The token goes only to the address in the 0600 `gateway.json` (a
//!   wildcard bind is reached over loopback).

pub(crate) mod client;
pub(crate) mod discovery;
pub(crate) mod exchange;
pub(crate) mod forward;
pub(crate) mod install;
pub(crate) mod wire;

use std::time::Duration;

pub(crate) use discovery::GatewayInfo;
pub(crate) use wire::{ComponentStatus, GatewayStatus, MemorySearchStatus, ProcessMemory};

/// How long a gateway takes at most to stop after SIGTERM: running turns
/// get most of it, then the rest of shutdown; `gateway stop` waits this
/// long plus a margin.
pub(crate) const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);
