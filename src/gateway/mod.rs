//! The gateway daemon.

pub(crate) mod install;
