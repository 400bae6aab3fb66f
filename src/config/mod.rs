//! Settings: one typed [`Config`] with defaults, read from `config.json5`
//! and layered defaults → file → environment → flags.
//!
//! The file uses OpenClaw's key paths for the settings almanac shares with
//! it (`agents.defaults.workspace`, `skills.entries.<key>`, …), so sections of
//! an `openclaw.json` can be copied over.
//!
//! Invariants:
//! * Unknown keys never fail a load; each is reported once per command as a
//!   warning naming its key path.
//! * A value of the wrong type fails the load with one error naming the key
//!   path and the expected type.
//! * A value of the right type that cannot be used ([`value_problems`]: an
//!   unknown `userTimezone`) is refused by `config set` and `--set`
//!   ([`ConfigError::BadValue`]) and reported as a warning naming the key
//!   and the fallback when read from the file.
//! * `config set` / `config unset` edit the file text in place (see
//!   [`edit`]), keeping comments and formatting, verify by re-parsing that
//!   exactly the intended value changed, and write atomically under a lock.
//!
//! Parts: `schema` (the types and their defaults), `load` (reading,
//! layering and diagnostics), `keys` (the environment's keys and key
//! paths), `set` (`config set` / `config unset`), [`edit`] (the text
//! edits). Callers use the re-exports here.

pub(crate) mod edit;
mod keys;
mod load;
mod schema;
pub(crate) mod set;

pub(crate) use keys::{ENV_KEYS, USER_TIMEZONE, is_known_key, split_key};
pub(crate) use load::{
    ConfigError, LoadedConfig, load, load_without_file, read_file, value_problems,
};
pub(crate) use schema::*;
pub(crate) use set::{SetOutcome, set, unset};

#[cfg(test)]
mod tests;
