//! `config set` and `config unset`: the file's text edited in place under
//! its lock, checked by re-parsing that only the intended value changed,
//! and replaced atomically.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::keys::{insert_at, is_known_key, remove_at, split_key};
use super::load::{coerce_value, given_value, parse_json5, typed};
use super::{ConfigError, edit, value_problems};
use crate::durable;

/// What `config set` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetOutcome {
    pub key: String,
    pub value: Value,
    pub path: PathBuf,
    pub created_file: bool,
    /// Problems elsewhere in the file that remain after the edit.
    pub remaining_problem: Option<String>,
}

/// Sets `key` to the value written as `text` in the config file at `path`.
pub(crate) fn set(path: &Path, key: &str, text: &str) -> Result<SetOutcome, ConfigError> {
    let parts = split_key(key)?;
    if !is_known_key(key) {
        return Err(ConfigError::UnknownKey(key.to_string()));
    }
    edit_file(path, |current_text, current_value| {
        let source_name = path.display().to_string();
        let value = coerce_value(&parts, text, &source_name).map_err(given_value)?;
        let mut trial = Value::Object(Default::default());
        insert_at(&mut trial, &parts, value.clone());
        let (trial, _) = typed(&trial, &source_name)?;
        if let Some((_, message)) = value_problems(&trial).into_iter().find(|(k, _)| *k == key) {
            return Err(ConfigError::BadValue {
                source_name,
                key: key.to_string(),
                message,
            });
        }
        let new_text = edit::set(current_text, &parts, &value)?;
        let mut expected = current_value.clone();
        insert_at(&mut expected, &parts, value.clone());
        Ok(Some((new_text, expected, value)))
    })
    .map(|(created_file, value, remaining_problem)| SetOutcome {
        key: key.to_string(),
        value: value.unwrap_or(Value::Null),
        path: path.to_path_buf(),
        created_file,
        remaining_problem,
    })
}

/// Removes `key` from the config file; `false` when it was not set.
pub(crate) fn unset(path: &Path, key: &str) -> Result<bool, ConfigError> {
    let parts = split_key(key)?;
    edit_file(path, |current_text, current_value| {
        let Some(new_text) = edit::unset(current_text, &parts)? else {
            return Ok(None);
        };
        let mut expected = current_value.clone();
        remove_at(&mut expected, &parts);
        Ok(Some((new_text, expected, Value::Null)))
    })
    .map(|(_, value, _)| value.is_some())
}

type EditResult = Result<Option<(String, Value, Value)>, ConfigError>;

/// Read-modify-write of the config file under its lock. The edit returns
/// the new text, the value the new text must parse to, and the set value.
fn edit_file(
    path: &Path,
    apply: impl FnOnce(&str, &Value) -> EditResult,
) -> Result<(bool, Option<Value>, Option<String>), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        durable::create_private_dir_all(parent).map_err(write_err)?;
    }
    durable::with_file_lock(&durable::lock_path_for(path), || {
        let (text, exists) = match std::fs::read(path) {
            Ok(bytes) => (
                String::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
                    path: path.to_path_buf(),
                })?,
                true,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let current = if text.trim().is_empty() || only_comments(&text) {
            Value::Object(Default::default())
        } else {
            parse_json5(&text, path)?
        };
        let Some((new_text, expected, value)) = apply(&text, &current)? else {
            return Ok((false, None, None));
        };
        let reparsed = parse_json5(&new_text, path)?;
        if reparsed != expected {
            return Err(ConfigError::EditVerification);
        }
        let remaining_problem = match typed(&reparsed, &path.display().to_string()) {
            Ok((config, _)) => value_problems(&config)
                .into_iter()
                .next()
                .map(|(key, problem)| format!("`{key}`: {problem}")),
            Err(e) => Some(e.to_string()),
        };
        durable::atomic_replace(path, new_text.as_bytes(), durable::PRIVATE_FILE_MODE)
            .map_err(write_err)?;
        Ok((!exists, Some(value), remaining_problem))
    })
    .map_err(write_err)?
}

fn only_comments(text: &str) -> bool {
    json5::from_str::<Value>(text).is_err()
        && text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim().starts_with("//"))
}
