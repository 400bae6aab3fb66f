//! The one integration test binary: runs the real `almanac` executable in a
//! temporary home directory with a clean environment.

mod common;
mod foundation;
mod memory;
mod session_memory;
mod skills;
