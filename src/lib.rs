//! almanac: the memory, time and skills core of a personal AI agent.
//!
//! See `ARCHITECTURE.md` for the map of modules and their invariants.
//!
//! The library is the executable's: its public surface is the command
//! line ([`cli::main`], and [`cli::Cli`], whose command tree a test walks)
//! plus what the integration tests reach directly ([`testing`]), so the
//! compiler sees which code nothing calls.

#![warn(unreachable_pub)]

pub(crate) mod agent;
pub(crate) mod app;
pub(crate) mod child;
pub mod cli;
pub(crate) mod config;
pub(crate) mod durable;
pub(crate) mod engine;
pub(crate) mod gateway;
pub(crate) mod heartbeat;
pub(crate) mod host;
pub(crate) mod memory;
pub(crate) mod par;
pub(crate) mod paths;
pub(crate) mod provider;
pub(crate) mod session;
pub(crate) mod skills;
pub(crate) mod store;
pub(crate) mod tasks;

/// What the integration tests (`tests/cli`) use besides the executable:
/// the task ledger, to record tasks as a running gateway does before the
/// commands read them.
#[doc(hidden)]
pub mod testing {
    pub use crate::tasks::Ledger;
    pub use crate::tasks::record::{Lease, NewTask, Terminal};
    pub use crate::tasks::vocab::{DeliveryStatus, Runtime, TerminalStatus};
}

#[cfg(test)]
mod architecture_tests;
