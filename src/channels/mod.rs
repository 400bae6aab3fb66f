//! Chat channels: what a chat service's protocol, files and access rules
//! are, kept apart from the gateway that polls and answers them. Each
//! channel owns its client, how its inbound messages are read, who may
//! talk, and its state files; nothing here runs a turn or holds a
//! connection open.

pub(crate) mod telegram;
