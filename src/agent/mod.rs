//! The agent turn: the only place a model is called. Prompt assembly →
//! provider ↔ tools → transcript.

pub mod hygiene;
pub mod tools;
