//! almanac: the memory, time and skills core of a personal AI agent.
//!
//! See `ARCHITECTURE.md` for the map of modules and their invariants.

pub mod agent;
pub mod app;
pub mod child;
pub mod cli;
pub mod config;
pub mod durable;
pub mod gateway;
pub mod heartbeat;
pub mod host;
pub mod memory;
pub mod par;
pub mod paths;
pub mod provider;
pub mod session;
pub mod skills;
pub mod store;

#[cfg(test)]
mod architecture_tests;
