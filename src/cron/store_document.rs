//! The job store as a document: its parsing (JSON, else JSON5), each
//! element of the `jobs` list kept as written beside the job read from it,
//! a changed job patched into its own text and key order, and the
//! serialising that copies the jobs nothing changed verbatim.

use std::collections::BTreeSet;
use std::path::Path;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::super::job::CronJob;
use super::super::legacy;

/// The store's format version.
const VERSION: u64 = 1;

/// JSON, else JSON5 (as the reference reader falls back to it).
pub(super) fn parse_document(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        // An empty file holds no jobs; it is not damaged.
        return Ok(json!({"version": VERSION, "jobs": []}));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => Ok(value),
        Err(json_err) => {
            let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
            json5::from_str::<Value>(text).map_err(|_| format!("not JSON: {json_err}"))
        }
    }
}

/// A job from its text in the store, as the full read gives it (older
/// spellings in today's shape).
pub(crate) fn job_from_text(text: &str) -> Result<CronJob, String> {
    let raw: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match &raw {
        Value::Object(map) if needs_normalizing(map) => {
            CronJob::deserialize(&Value::Object(legacy::normalize(map))).map_err(|e| e.to_string())
        }
        Value::Object(_) => CronJob::deserialize(&raw).map_err(|e| e.to_string()),
        other => Err(format!("a job is an object, not {}", kind_of(other))),
    }
}

/// One element of the `jobs` list.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// As read (or as last written).
    pub(super) raw: Value,
    /// Its text as read, written back as it was while nothing changes it.
    text: Option<Box<RawValue>>,
    /// The job in today's shape; `None` when it cannot be read.
    pub(super) job: Option<CronJob>,
    /// The job as read, once a change touched it.
    original: Option<CronJob>,
    /// Why `job` is `None`.
    problem: Option<String>,
    /// Touched by a change: written from `job`, in `raw`'s key order.
    dirty: bool,
}

impl Entry {
    fn read(raw: Value, text: Option<Box<RawValue>>) -> Entry {
        let parsed = match &raw {
            Value::Object(map) if needs_normalizing(map) => {
                CronJob::deserialize(&Value::Object(legacy::normalize(map)))
                    .map_err(|e| e.to_string())
            }
            Value::Object(_) => CronJob::deserialize(&raw).map_err(|e| e.to_string()),
            other => Err(format!("a job is an object, not {}", kind_of(other))),
        };
        match parsed {
            Ok(job) => Entry {
                raw,
                text,
                job: Some(job),
                original: None,
                problem: None,
                dirty: false,
            },
            Err(problem) => Entry {
                raw,
                text,
                job: None,
                original: None,
                problem: Some(problem),
                dirty: false,
            },
        }
    }

    /// The entry as it goes to the file: as read while untouched; a
    /// changed job as its raw object with only what changed replaced
    /// (a job in an older spelling is written in today's).
    fn output(&self) -> std::borrow::Cow<'_, Value> {
        let (Some(job), true) = (&self.job, self.dirty) else {
            return std::borrow::Cow::Borrowed(&self.raw);
        };
        let new = job.to_map();
        let out = match (&self.raw, &self.original) {
            (Value::Object(raw), Some(original)) if !needs_normalizing(raw) => {
                patch(raw, &original.to_map(), &new)
            }
            (Value::Object(raw), _) => merge_ordered(raw, &new),
            _ => new,
        };
        std::borrow::Cow::Owned(Value::Object(out))
    }
}

/// `raw` with what changed from `before` to `after` (a job's fields, as
/// serialised) applied: unchanged fields stay as written, absent ones
/// absent; changed ones are replaced in place (objects field by field),
/// cleared ones removed, new ones added at the end.
pub(super) fn patch(
    raw: &Map<String, Value>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) -> Map<String, Value> {
    let mut out = Map::with_capacity(after.len());
    for (key, written) in raw {
        match (before.get(key), after.get(key)) {
            (Some(b), Some(a)) if b == a => {
                out.insert(key.clone(), written.clone());
            }
            (b, Some(a)) => {
                let value = match (written, b, a) {
                    (Value::Object(w), Some(Value::Object(b)), Value::Object(a)) => {
                        Value::Object(patch(w, b, a))
                    }
                    _ => a.clone(),
                };
                out.insert(key.clone(), value);
            }
            (Some(_), None) => {}
            (None, None) => {
                out.insert(key.clone(), written.clone());
            }
        }
    }
    for (key, value) in after {
        if !raw.contains_key(key) && before.get(key) != Some(value) {
            out.insert(key.clone(), value.clone());
        }
    }
    out
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Whether a job uses any spelling [`legacy::normalize`] rewrites (most
/// do not, and are read without a copy).
pub(super) fn needs_normalizing(job: &Map<String, Value>) -> bool {
    if !job.contains_key("id")
        || !job.contains_key("sessionTarget")
        || job.contains_key("jobId")
        || legacy::TOP_LEVEL_PAYLOAD_FIELDS
            .iter()
            .chain(legacy::LEGACY_DELIVERY_KEYS)
            .any(|k| job.contains_key(*k))
        || job.get("enabled").is_some_and(Value::is_string)
    {
        return true;
    }
    let schedule_old = match job.get("schedule") {
        Some(Value::Object(s)) => {
            !s.contains_key("kind")
                || s.contains_key("atMs")
                || s.contains_key("cron")
                || s.get("at").is_some_and(Value::is_number)
        }
        _ => false,
    };
    let payload_old = match job.get("payload") {
        Some(Value::Object(p)) => {
            !p.contains_key("kind")
                || ["deliver", "channel", "to", "bestEffortDeliver", "provider"]
                    .iter()
                    .any(|k| p.contains_key(*k))
        }
        _ => true,
    };
    let delivery_old = job
        .get("delivery")
        .and_then(|d| d.get("mode"))
        .is_some_and(|m| m == "deliver");
    schedule_old || payload_old || delivery_old
}

/// `new`'s keys and values in `old`'s key order (nested objects too);
/// keys only `new` has come after.
pub(crate) fn merge_ordered(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> Map<String, Value> {
    let mut out = Map::with_capacity(new.len());
    for (key, old_value) in old {
        if let Some(new_value) = new.get(key) {
            let value = match (old_value, new_value) {
                (Value::Object(a), Value::Object(b)) => Value::Object(merge_ordered(a, b)),
                _ => new_value.clone(),
            };
            out.insert(key.clone(), value);
        }
    }
    for (key, value) in new {
        if !out.contains_key(key) {
            out.insert(key.clone(), value.clone());
        }
    }
    out
}

/// A job without its runtime fields, for telling a runtime-only change.
pub(super) fn without_runtime(job: &Value) -> Value {
    let mut job = job.clone();
    if let Value::Object(map) = &mut job {
        map.shift_remove("state");
        map.shift_remove("updatedAtMs");
    }
    job
}

/// The whole store: its jobs and whatever else the top level holds.
#[derive(Debug, Clone)]
pub(crate) struct JobFile {
    /// The top-level object; its `jobs` member is `entries`.
    top: Map<String, Value>,
    pub(super) entries: Vec<Entry>,
    /// The bytes this was read from (empty for a new store).
    pub(super) source: Vec<u8>,
    trailing_newline: bool,
    /// Why the top level was read as no jobs.
    coerced: Option<String>,
    /// Jobs added or removed, or the top level coerced: more than runtime
    /// fields changed.
    reshaped: bool,
    /// Ids added or changed, and removed, since the last write.
    changed: BTreeSet<String>,
    removed: BTreeSet<String>,
}

impl JobFile {
    /// A store without jobs (no file yet).
    pub(crate) fn empty() -> JobFile {
        let mut top = Map::new();
        top.insert("version".into(), json!(VERSION));
        top.insert("jobs".into(), Value::Null);
        JobFile {
            top,
            entries: Vec::new(),
            source: Vec::new(),
            trailing_newline: true,
            coerced: None,
            reshaped: false,
            changed: BTreeSet::new(),
            removed: BTreeSet::new(),
        }
    }

    pub(super) fn from_document(
        doc: Value,
        source: Vec<u8>,
        warnings: &mut Vec<String>,
        path: &Path,
    ) -> JobFile {
        let trailing_newline = source.ends_with(b"\n");
        let mut file = JobFile {
            trailing_newline,
            source,
            ..JobFile::empty()
        };
        let list = match doc {
            Value::Object(mut top) => {
                let jobs = top.get_mut("jobs").map(Value::take);
                match jobs {
                    Some(Value::Array(list)) => {
                        file.top = top;
                        list
                    }
                    other => {
                        file.coerced = Some(format!(
                            "{} has no `jobs` list ({}); read as no jobs",
                            path.display(),
                            other.as_ref().map_or("missing", kind_of)
                        ));
                        if !top.contains_key("jobs") {
                            top.insert("jobs".into(), Value::Null);
                        }
                        file.top = top;
                        file.reshaped = true;
                        Vec::new()
                    }
                }
            }
            other => {
                file.coerced = Some(format!(
                    "{} is {}, not an object with a `jobs` list; read as no jobs",
                    path.display(),
                    kind_of(&other)
                ));
                file.reshaped = true;
                Vec::new()
            }
        };
        let texts = job_texts(&file.source, list.len());
        if texts.is_empty() && !list.is_empty() {
            // JSON5: written back as JSON, which changes more than runtime
            // fields, so the first write keeps the file as the backup.
            file.reshaped = true;
        }
        let mut texts = texts.into_iter();
        for raw in list {
            let text = texts.next().flatten();
            if raw.is_null() {
                file.reshaped = true;
                continue;
            }
            file.entries.push(Entry::read(raw, text));
        }
        warnings.extend(file.standing_warnings(path));
        file
    }

    /// What stays true of the file until it is changed: jobs that cannot
    /// be read, ids used twice, a top level that was not `{"jobs": […]}`.
    pub(crate) fn standing_warnings(&self, path: &Path) -> Vec<String> {
        let mut warnings: Vec<String> = self.coerced.iter().cloned().collect();
        let mut seen = BTreeSet::new();
        for (n, entry) in self.entries.iter().enumerate() {
            match &entry.job {
                None => {
                    let id = entry
                        .raw
                        .get("id")
                        .or_else(|| entry.raw.get("jobId"))
                        .and_then(Value::as_str)
                        .map(|id| format!(" ({id})"))
                        .unwrap_or_default();
                    warnings.push(format!(
                        "job {}{id} in {} cannot be read ({}); it is kept as it is and does not run",
                        n + 1,
                        path.display(),
                        entry.problem.as_deref().unwrap_or("unknown shape")
                    ));
                }
                Some(job) if !seen.insert(job.id.as_str()) => warnings.push(format!(
                    "more than one job in {} has the id {}; commands act on the first",
                    path.display(),
                    job.id
                )),
                Some(_) => {}
            }
        }
        warnings
    }

    /// Number of jobs (readable or not).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The jobs that can be read, in file order.
    pub(crate) fn jobs(&self) -> impl Iterator<Item = &CronJob> {
        self.entries.iter().filter_map(|e| e.job.as_ref())
    }

    /// The readable jobs with their place in the file.
    pub(crate) fn positioned(&self) -> impl Iterator<Item = (usize, &CronJob)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(n, e)| e.job.as_ref().map(|j| (n, j)))
    }

    #[cfg(test)]
    pub(crate) fn get(&self, id: &str) -> Option<&CronJob> {
        self.jobs().find(|j| j.id == id)
    }

    /// The job `id`, to change: it is written back from its fields.
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut CronJob> {
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.job.as_ref().is_some_and(|j| j.id == id))?;
        if !entry.dirty {
            entry.original = entry.job.clone();
            entry.dirty = true;
        }
        self.changed.insert(id.to_string());
        entry.job.as_mut()
    }

    /// Adds a job at the end.
    pub(crate) fn push(&mut self, job: CronJob) {
        self.changed.insert(job.id.clone());
        self.removed.remove(&job.id);
        self.reshaped = true;
        self.entries.push(Entry {
            raw: Value::Null,
            text: None,
            job: Some(job),
            original: None,
            problem: None,
            dirty: true,
        });
    }

    /// Removes the job `id` (the first with that id).
    pub(crate) fn remove(&mut self, id: &str) -> Option<CronJob> {
        let at = self
            .entries
            .iter()
            .position(|e| e.job.as_ref().is_some_and(|j| j.id == id))?;
        let entry = self.entries.remove(at);
        self.reshaped = true;
        self.changed.remove(id);
        self.removed.insert(id.to_string());
        entry.job
    }

    /// Ids starting with `prefix`.
    pub(crate) fn ids_starting_with(&self, prefix: &str) -> Vec<String> {
        self.jobs()
            .filter(|j| j.id.starts_with(prefix))
            .map(|j| j.id.clone())
            .collect()
    }

    /// Whether any id appears twice.
    pub(crate) fn has_duplicate_ids(&self) -> bool {
        let mut seen = BTreeSet::new();
        self.jobs().any(|j| !seen.insert(j.id.as_str()))
    }

    /// Ids added or changed since the last write.
    pub(crate) fn changed_ids(&self) -> &BTreeSet<String> {
        &self.changed
    }

    /// Ids removed since the last write.
    pub(crate) fn removed_ids(&self) -> &BTreeSet<String> {
        &self.removed
    }

    /// Whether a write would change more than runtime fields.
    pub(super) fn changes_more_than_runtime(&self) -> bool {
        self.reshaped
            || self.entries.iter().filter(|e| e.dirty).any(|e| {
                let old = without_runtime(&e.raw);
                let new = without_runtime(&e.output());
                old != new
            })
    }

    /// The file's bytes: 2-space indent, the final newline as before.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(&FileOut(self)).expect("a job store serialises");
        if self.trailing_newline {
            bytes.push(b'\n');
        }
        bytes
    }

    /// After a write: what was written is what is now read.
    pub(super) fn commit(&mut self, bytes: Vec<u8>) {
        for entry in &mut self.entries {
            if entry.dirty {
                entry.raw = entry.output().into_owned();
                entry.text = None;
                entry.original = None;
                entry.dirty = false;
            }
        }
        self.source = bytes;
        self.coerced = None;
        self.reshaped = false;
        self.changed.clear();
        self.removed.clear();
    }
}

/// The text of each element of the `jobs` list of `source`, when it is
/// JSON (not JSON5) and has `count` of them.
fn job_texts(source: &[u8], count: usize) -> Vec<Option<Box<RawValue>>> {
    #[derive(Deserialize)]
    struct Texts {
        jobs: Vec<Box<RawValue>>,
    }
    match serde_json::from_slice::<Texts>(source) {
        Ok(texts) if texts.jobs.len() == count => texts.jobs.into_iter().map(Some).collect(),
        _ => Vec::new(),
    }
}

/// Serialises a [`JobFile`] without copying the jobs nothing changed.
struct FileOut<'a>(&'a JobFile);

impl Serialize for FileOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.top.len()))?;
        for (key, value) in &self.0.top {
            if key == "jobs" {
                map.serialize_entry(key, &JobsOut(&self.0.entries))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

struct JobsOut<'a>(&'a [Entry]);

impl Serialize for JobsOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for entry in self.0 {
            match (&entry.text, entry.dirty) {
                (Some(text), false) => seq.serialize_element(text)?,
                _ => seq.serialize_element(entry.output().as_ref())?,
            }
        }
        seq.end()
    }
}
