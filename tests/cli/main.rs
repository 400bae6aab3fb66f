//! The one integration test binary: runs the real `almanac` executable in a
//! temporary home directory with a clean environment.

#![warn(clippy::too_many_lines)]

mod agent;
mod agents;
mod agents_routes;
mod bot_api;
mod common;
mod cron;
mod cron_jobs;
mod cron_store;
mod cron_turns;
mod docs;
mod exit_codes;
mod foundation;
mod gateway;
mod gateway_hook_runs;
mod gateway_hooks;
mod gateway_hooks_load;
mod gateway_install;
mod gateway_stop;
mod heartbeat_turns;
mod hooks;
mod injection;
mod json_names;
mod mcp;
mod memory;
mod memory_forward;
mod memory_gateway;
mod memory_hybrid;
mod outbox;
mod policy;
#[path = "../support/scripted_server.rs"]
mod scripted;
mod session_memory;
mod skills;
mod subagents;
mod subagents_control;
mod tasks;
mod telegram;
mod time_and_activity;
mod tour;
mod user_files;
