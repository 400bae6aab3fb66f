//! almanac's MCP server: the memory, skills and time tools of
//! `app::mcp_tools` and the resources of `app::mcp_resources`, served
//! with the official Rust SDK (`rmcp`) over stdio (`almanac mcp serve`)
//! and, in the gateway, over streamable HTTP at `/mcp`.
//!
//! Invariants:
//! * stdout carries protocol only: one JSON-RPC message per line; every
//!   notice goes to stderr.
//! * Bad input never stops the server: a line over [`stdio::MAX_LINE`],
//!   a line that is not JSON, a message that is not a JSON-RPC request,
//!   an unknown method, arguments that do not fit a tool, a call while
//!   the server shuts down: each gets a JSON-RPC error and the next line
//!   is read.
//! * What is offered follows `mcp.*` of the config at start: a tool not
//!   offered cannot be called.

mod server;
pub(crate) mod stdio;

pub(crate) use server::Server;

/// The MCP endpoint's path in the gateway.
pub(crate) const HTTP_PATH: &str = "/mcp";
