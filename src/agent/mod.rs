//! The agent turn: the only place a model is called. Prompt assembly →
//! provider ↔ tools → transcript.
//!
//! * [`prompt`]: the system prompt (identity, tools, skills catalog,
//!   memory guidance, workspace bootstrap files, recalled notes) and the
//!   user message with queued system events;
//! * [`tools`]: read, write, edit, exec, memory tools, cron and skill
//!   tools;
//! * [`policy`]: which tools are offered (`tools.profile`, `allow`,
//!   `deny`) and what `exec` may run (`tools.exec.*`, approval);
//! * [`shell`]: the allowlist's command check and re-quoting;
//! * [`turn`]: the loop, writing every message to the transcript as it
//!   happens;
//! * [`hygiene`]: per-provider repair of a stored conversation, in memory;
//! * [`models`]: the turn's model and its fallbacks, tried in order;
//! * [`compaction`]: memory flush and summary near the context window.
//!
//! Invariants: schedulers and webhooks never import this module; they
//! hand a message to the app, which runs a turn. Nothing here rewrites a
//! transcript or reads the environment.

pub(crate) mod compaction;
pub(crate) mod hygiene;
pub(crate) mod models;
pub(crate) mod policy;
pub(crate) mod prompt;
pub(crate) mod shell;
pub(crate) mod tools;
pub(crate) mod turn;
