//! The derived search index of one memory root (SQLite + FTS5).
//!
//! Invariants:
//! * The index holds nothing that is not in the files: any change is
//!   re-derived from them, and a deleted index is rebuilt on first use.
//! * Freshness without a full scan on every call: a *quick* sync stats the
//!   directories (an added, removed or renamed-over file changes its
//!   directory; files in a changed directory are compared by inode from the
//!   listing alone) and the files people edit in place: the long-term file,
//!   the daily files of the last few days and the most recently changed
//!   topic files. A *full* sync (stat of every file) runs on
//!   `memory index`, on an empty index, and when the last one is older
//!   than [`FULL_SCAN_INTERVAL_NS`], which catches in-place edits of older
//!   files (an agent turn is told it is due and runs it while the model
//!   answers: [`SyncMode::QuickOnly`]).
//! * A file that only grew at its end keeps its indexed items; only the new
//!   ones are added, and only the new bytes (with [`TAIL_WINDOW`] bytes
//!   before them, compared by hash) are read, so appending to a long daily
//!   file costs the same however long it is. Its hash is then extended
//!   without reading the old part again: the next full scan reads such a
//!   file whole and re-indexes it if it differs (see `read_appended` in
//!   [`indexing`] for the in-place edit this catches only then).
//! * Every lookup reads every segment of the inverted indexes and each
//!   write adds one: small writes merge segments, full scans fold them
//!   (see [`indexing::merge_small_segments`]), so lookups cost what they
//!   cost after a build however many notes were appended.
//! * `term_docs` holds exact counts of the very common terms searches
//!   asked about (every item added or removed updates them), so no search
//!   reads such a term's whole list to count it.
//! * A search reads in one transaction: one snapshot for all it reads,
//!   and one lock of the write-ahead log instead of one per statement. It
//!   writes nothing inside it (a term count to keep waits for its end).
//! * Writers take SQLite's write lock (`BEGIN IMMEDIATE`) before comparing,
//!   so concurrent processes never index the same change twice.
//! * Item ids grow with indexing order, and a full build indexes files
//!   oldest first, so among equal scores a higher id is a newer note.
//!
//! Here: the index's types, opening it and what it answers besides
//! ranked search. [`sync`] brings it up to date, [`indexing`] writes one
//! file's rows, [`search`] ranks, [`recall`] summarises, [`vectors`] holds
//! the sentence vectors.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use jiff::tz::TimeZone;
use rusqlite::{OptionalExtension, TransactionBehavior};

use super::files::{self, FileKind};
use crate::store::{Store, StoreError, StoreKind};
pub(crate) use indexing::is_plain_term;
use indexing::{FileStat, clear_all};

/// A full scan at least this often (ns), to catch in-place edits of files
/// outside the quick-sync set.
pub(crate) const FULL_SCAN_INTERVAL_NS: i64 = 10 * 60 * 1_000_000_000;
/// Daily files of this many recent days are stat'ed by every quick sync.
const HOT_DAYS: i64 = 3;
/// The most recently changed topic files stat'ed by every quick sync.
const HOT_TOPICS: i64 = 64;
/// A sync that adds more items than this checkpoints the WAL at once.
const BIG_WRITE_ITEMS: usize = 5_000;
/// Files larger than this are not indexed (reported instead).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// How many bytes before the old end of a grown file are read back and
/// compared (by hash) before only its new bytes are indexed.
const TAIL_WINDOW: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncMode {
    /// Directories and the files edited in place most often; a full scan
    /// when one is due.
    Quick,
    /// As `Quick`, but a due full scan is left to the caller (the report
    /// says so), who runs it where its time is not waited for. An index
    /// never scanned in full is scanned now.
    QuickOnly,
    /// Every file.
    Full,
    /// Drop everything and index every file.
    Rebuild,
    /// Another process (the gateway's watcher) keeps the index in step
    /// with the files: nothing to do, unless the index was never built
    /// (then as `Quick`).
    Watched,
}

/// What a sync did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncReport {
    pub mode: &'static str,
    pub files_indexed: usize,
    pub files_removed: usize,
    pub items_indexed: usize,
    pub warnings: Vec<String>,
    /// A full scan is due and was left to the caller (`QuickOnly`).
    #[serde(skip)]
    pub full_scan_due: bool,
    /// Bytes of memory files read to index them.
    #[serde(skip)]
    pub bytes_read: u64,
}

/// One search result.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hit {
    #[serde(skip)]
    pub id: i64,
    pub path: String,
    pub kind: FileKind,
    pub start_line: usize,
    pub end_line: usize,
    pub stamp: Option<String>,
    /// The note's date, `YYYY-MM-DD` (`date` in JSON, as everywhere).
    #[serde(rename = "date")]
    pub day: Option<String>,
    #[serde(skip)]
    pub ts: Option<i64>,
    pub heading: String,
    pub body: String,
    #[serde(skip)]
    pub norm_hash: i64,
    #[serde(skip)]
    pub file_id: i64,
    /// Relevance in (0, 1): the ranking score `s` mapped to `s / (1 + s)`;
    /// 0 for lists that are not ranked.
    pub score: f64,
    /// The lexical part of `score` (ranked searches).
    #[serde(skip)]
    pub text_score: Option<f64>,
    /// The cosine similarity of the note's vector to the query's, when
    /// the search was hybrid and the note has a vector.
    #[serde(skip)]
    pub vector_score: Option<f64>,
    /// Neighbouring items under the same heading, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<Neighbor>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Neighbor>,
    /// Lines of the hit withheld by [`Hit::guard`] (a withheld neighbour
    /// shows its own marker).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<usize>,
}

impl Hit {
    /// Applies the read-time rule ([`super::sanitize::guard_note`]) to
    /// the text the hit shows: its body, its heading path and its
    /// neighbours. Done where a hit leaves memory for a reader, never
    /// before ranking.
    pub(crate) fn guard(&mut self) {
        use super::sanitize;
        let own = sanitize::guard_note(&self.body, &self.path, self.start_line);
        self.body = own.text;
        self.withheld = own.withheld;
        self.heading = sanitize::guard_heading(&self.heading, &self.path, self.start_line);
        for n in self.before.iter_mut().chain(self.after.iter_mut()) {
            n.body = sanitize::guard_note(&n.body, &self.path, n.start_line).text;
        }
    }
}

/// An item next to a hit, for context.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Neighbor {
    pub start_line: usize,
    pub end_line: usize,
    pub body: String,
}

/// Counts for `status`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IndexStats {
    pub files: usize,
    pub items: usize,
    pub last_full_scan_ns: Option<i64>,
}

pub(crate) struct Index {
    store: Store,
    layout: files::Layout,
    tz: TimeZone,
    /// The database file's device and inode when it was opened (none in
    /// memory): a file deleted or replaced since is another index.
    file: Option<(u64, u64)>,
    /// Common terms a search counted in full inside its read transaction,
    /// whose counts it keeps in `term_docs` once that has ended.
    uncounted: std::cell::RefCell<Vec<String>>,
}

/// The page cache of a connection kept for searches, in KiB.
const SEARCH_CACHE_KIB: i64 = 8 * 1024;

/// The device and inode of the file at `path`.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

const HIT_COLUMNS: &str = "i.id, f.path, f.kind, i.start_line, i.end_line, i.stamp, i.day, i.ts, i.heading, i.body, i.norm_hash, i.file_id";

impl Index {
    /// Opens the index at `path` for the memory `root`. An index built for
    /// another root or time zone is cleared (it is derived).
    pub(crate) fn open(
        path: &Path,
        layout: files::Layout,
        tz: TimeZone,
    ) -> Result<Index, StoreError> {
        Self::over(Store::open(path, StoreKind::Index)?, layout, tz)
    }

    /// Gives back what a build needed and a long-lived holder does not:
    /// the large page cache and the file mapping (the gateway's watcher
    /// keeps its index open for days and refreshes a few files at a time).
    pub(crate) fn settle(&self) -> Result<(), StoreError> {
        self.store.conn.pragma_update(None, "cache_size", -1024)?;
        self.store.conn.pragma_update(None, "mmap_size", 0)?;
        self.store.conn.execute_batch("PRAGMA shrink_memory;")?;
        Ok(())
    }

    /// Sizes a connection kept between searches (the gateway's): no file
    /// mapping, whose touched pages would stay resident as long as it is
    /// kept, and a page cache that holds what searches read over and over.
    pub(crate) fn keep_for_searches(&self) -> Result<(), StoreError> {
        self.store
            .conn
            .pragma_update(None, "cache_size", -SEARCH_CACHE_KIB)?;
        self.store.conn.pragma_update(None, "mmap_size", 0)?;
        Ok(())
    }

    /// An empty index in memory, gone when dropped (for a command that
    /// must create nothing on disk).
    pub(crate) fn open_in_memory(layout: files::Layout, tz: TimeZone) -> Result<Index, StoreError> {
        Self::over(Store::open_in_memory(StoreKind::Index)?, layout, tz)
    }

    fn over(store: Store, layout: files::Layout, tz: TimeZone) -> Result<Index, StoreError> {
        // Builds touch many pages; a larger cache keeps them off the disk
        // until commit. Memory is used only as needed.
        store.conn.pragma_update(None, "cache_size", -65_536)?;
        // Map the file instead of copying pages into the cache: short-lived
        // processes read the same pages from the OS cache without copies.
        store.conn.pragma_update(None, "mmap_size", 1_i64 << 30)?;
        let file = file_identity(&store.path);
        let mut index = Index {
            store,
            layout,
            tz,
            file,
            uncounted: Default::default(),
        };
        let identity = index.identity();
        let stored: Option<String> = index
            .store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'identity'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if stored.as_deref() != Some(identity.as_str()) {
            let tx = index
                .store
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            clear_all(&tx)?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('identity', ?1)",
                [&identity],
            )?;
            tx.commit()?;
        }
        Ok(index)
    }

    /// Whether this open index is the one [`Index::open`] of `path` for
    /// `layout` and `tz` would give now: the same file, neither deleted
    /// nor replaced since, still built for this layout and time zone. A
    /// connection kept between searches is used again only then.
    pub(crate) fn is_current(&self, path: &Path, layout: &files::Layout, tz: &TimeZone) -> bool {
        if self.store.path != path
            || self.file.is_none()
            || self.file != file_identity(path)
            || self.layout != *layout
            || self.tz != *tz
        {
            return false;
        }
        // Another process may have opened it for other settings since
        // (and cleared it).
        let stored: Option<String> = self
            .store
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = 'identity'")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)).optional())
            .ok()
            .flatten();
        stored.is_some_and(|stored| stored == self.identity())
    }

    fn identity(&self) -> String {
        let root = &self.layout.root;
        let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        let mut identity = format!(
            "root={} tz={} terms=2 extra={:?} {:?}",
            real.display(),
            self.tz.iana_name().unwrap_or("fixed"),
            self.layout.extra_dirs,
            self.layout.extra_files
        );
        // Allowing a new symlink target can bring in files a quick sync
        // would not look for again: the index starts over.
        if !self.layout.allowed_targets.is_empty() {
            identity.push_str(&format!(" allowed={:?}", self.layout.allowed_targets));
        }
        identity
    }

    /// The indexed files below the folder `dir` (relative to the root),
    /// for a folder that went away or moved out with them.
    pub(crate) fn indexed_under(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT path FROM files WHERE substr(path, 1, length(?1)) = ?1")?;
        let rels = stmt
            .query_map([&prefix], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(rels)
    }

    /// Plain lexical ranked search over all items (session memory's
    /// `search` and `context`; see [`search`] for the full ranking of
    /// `memory search`). `kinds` restricts the files searched.
    pub(crate) fn search(
        &self,
        query: &str,
        limit: usize,
        kinds: Option<&[FileKind]>,
    ) -> Result<Vec<Hit>, StoreError> {
        let q = search::Query {
            text: query,
            limit,
            kinds,
            lend: false,
            ..search::Query::default()
        };
        Ok(self.search_with(&q)?.hits)
    }

    /// `id -> (norm_hash, file id, day)` for the given items.
    fn identities(&self, ids: &[i64]) -> Result<HashMap<i64, Identity>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut stmt = self.store.conn.prepare_cached(
            "SELECT id, norm_hash, file_id, day FROM items WHERE id IN rarray(?1)",
        )?;
        let list = id_array(ids.iter().copied());
        let rows = stmt.query_map([list], |r| {
            Ok((
                r.get(0)?,
                Identity {
                    norm_hash: r.get(1)?,
                    file_id: r.get(2)?,
                    day: r.get(3)?,
                },
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Ids of the files matching a fixed condition on `kind`.
    fn file_ids_where(&self, condition: &str) -> Result<HashSet<i64>, StoreError> {
        let mut stmt = self
            .store
            .conn
            .prepare_cached(&format!("SELECT id FROM files WHERE {condition}"))?;
        let ids = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// Ids of the items whose column contains `term`.
    fn postings(&self, table: &str, term: &str) -> Result<Vec<i64>, StoreError> {
        let sql = format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1");
        let mut stmt = self.store.conn.prepare_cached(&sql)?;
        let phrase = format!("\"{}\"", term.replace('"', "\"\""));
        let ids = stmt
            .query_map([phrase], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn corpus(&self) -> Result<Corpus, StoreError> {
        Ok(self
            .store
            .conn
            .query_row("SELECT items, terms FROM totals WHERE id = 1", [], |r| {
                Ok(Corpus {
                    items: r.get::<_, i64>(0)? as usize,
                    terms: r.get::<_, i64>(1)? as usize,
                })
            })?)
    }

    /// Items by id in one query, with their stored terms.
    fn scoring_rows(
        &self,
        ids: impl Iterator<Item = i64>,
    ) -> Result<HashMap<i64, (Hit, String)>, StoreError> {
        let list = id_array(ids);
        if list.is_empty() {
            return Ok(HashMap::new());
        }
        let mut stmt = self.store.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, 0.0, i.terms FROM items i JOIN files f ON f.id = i.file_id
             WHERE i.id IN rarray(?1)"
        ))?;
        let capacity = list.len();
        let rows = stmt.query_map([list], |r| Ok((hit_from_row(r)?, r.get::<_, String>(13)?)))?;
        let mut out = HashMap::with_capacity(capacity);
        for row in rows {
            let (hit, item_terms) = row?;
            out.insert(hit.id, (hit, item_terms));
        }
        Ok(out)
    }

    /// The most recent dated items, newest first, then undated ones (an
    /// empty query lists these).
    pub(crate) fn recent(
        &self,
        limit: usize,
        kinds: Option<&[FileKind]>,
    ) -> Result<Vec<Hit>, StoreError> {
        let kind_filter = match kinds {
            None => String::new(),
            Some(kinds) => format!(
                "AND f.kind IN ({})",
                kinds
                    .iter()
                    .map(|k| format!("'{}'", k.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let fetch = (limit.min(search::MAX_RESULTS) * 4 + 16) as i64;
        let mut hits = Vec::new();
        for order in [
            "i.day IS NOT NULL {kind_filter} ORDER BY i.day DESC, i.ts DESC, i.id DESC",
            "i.day IS NULL {kind_filter} ORDER BY i.id DESC",
        ] {
            let sql = format!(
                "SELECT {HIT_COLUMNS}, 0.0 FROM items i JOIN files f ON f.id = i.file_id WHERE {} LIMIT ?1",
                order.replace("{kind_filter}", &kind_filter)
            );
            let mut stmt = self.store.conn.prepare_cached(&sql)?;
            hits.extend(
                stmt.query_map([fetch], hit_from_row)?
                    .collect::<Result<Vec<_>, _>>()?,
            );
            if hits.len() >= fetch as usize {
                break;
            }
        }
        Ok(dedupe(hits, limit))
    }

    /// Every item of one file, in file order.
    pub(crate) fn items_of(&self, rel: &str) -> Result<Vec<Hit>, StoreError> {
        let mut stmt = self.store.conn.prepare_cached(&format!(
            "SELECT {HIT_COLUMNS}, 0.0 FROM items i JOIN files f ON f.id = i.file_id
             WHERE f.path = ?1 ORDER BY i.start_line"
        ))?;
        let rows = stmt.query_map([rel], hit_from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The count of daily files, read from an existing index without
    /// changing it, if the index listed `memory/` and `daily/` at their
    /// current modification times; `None` otherwise.
    pub(crate) fn daily_count_if_current(index_path: &Path, root: &Path) -> Option<usize> {
        let conn = Store::open_existing_read_only(index_path).ok()??;
        if !daily_dirs_listed_now(&conn, root).ok()? {
            return None;
        }
        conn.query_row("SELECT count(*) FROM files WHERE kind = 'daily'", [], |r| {
            r.get::<_, i64>(0)
        })
        .ok()
        .map(|n| n as usize)
    }

    /// Whether a daily file directly in `memory/` or `daily/` is dated
    /// before `day` (`YYYY-MM-DD`), if the index can tell: it listed both
    /// folders at their current modification times. `None` otherwise (a
    /// fresh index knows only the files it was asked to refresh).
    pub(crate) fn has_daily_before(&self, day: &str) -> Result<Option<bool>, StoreError> {
        let conn = &self.store.conn;
        if !daily_dirs_listed_now(conn, &self.layout.root)? {
            return Ok(None);
        }
        let found = conn
            .query_row(
                "SELECT 1 FROM files WHERE kind = 'daily' AND day < ?1
                 AND ((path GLOB 'memory/*' AND path NOT GLOB 'memory/*/*')
                      OR (path GLOB 'daily/*' AND path NOT GLOB 'daily/*/*'))
                 LIMIT 1",
                [day],
                |_| Ok(()),
            )
            .optional()?;
        Ok(Some(found.is_some()))
    }

    /// Files of one kind (for cheap counts).
    pub(crate) fn count_files(&self, kind: FileKind) -> Result<usize, StoreError> {
        let n: i64 = self.store.conn.query_row(
            "SELECT count(*) FROM files WHERE kind = ?1",
            [kind.as_str()],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    pub(crate) fn stats(&self) -> Result<IndexStats, StoreError> {
        let conn = &self.store.conn;
        let files: i64 = conn.query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
        let items: i64 = conn.query_row("SELECT count(*) FROM items", [], |r| r.get(0))?;
        let last_full_scan_ns = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'last_full_scan_ns'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .and_then(|v| v.parse().ok());
        Ok(IndexStats {
            files: files as usize,
            items: items as usize,
            last_full_scan_ns,
        })
    }

    /// Files whose content may differ from the index: changed, added or
    /// removed since they were indexed (a stat of every file; nothing is
    /// read or written).
    pub(crate) fn dirty_files(&self) -> Result<Vec<String>, StoreError> {
        let walk = self.layout.walk();
        let mut stmt = self
            .store
            .conn
            .prepare_cached("SELECT path, size, mtime_ns, ino FROM files")?;
        let mut known: HashMap<String, FileStat> = stmt
            .query_map([], |r| Ok((r.get(0)?, FileStat::from_row(r, 1)?)))?
            .collect::<Result<_, _>>()?;
        let mut dirty = Vec::new();
        for found in walk.files {
            if known.remove(&found.rel) != Some(FileStat::of(&found.meta)) {
                dirty.push(found.rel);
            }
        }
        dirty.extend(known.into_keys());
        dirty.sort();
        Ok(dirty)
    }
}

/// A list of ids bound as one parameter (`IN rarray(?)`).
fn id_array(ids: impl Iterator<Item = i64>) -> std::rc::Rc<Vec<rusqlite::types::Value>> {
    std::rc::Rc::new(ids.map(rusqlite::types::Value::Integer).collect())
}

/// Weight of a match in the enclosing headings relative to the body.
const HEADING_WEIGHT: f64 = 0.25;
/// BM25 parameters. Items are a line or a list item, short and of similar
/// length, so length normalisation is kept weak: a long note that says
/// more is not pushed below a terse one.
const K1: f64 = 1.2;
const B: f64 = 0.3;

/// How many first-pass candidates are scored exactly. The first pass
/// already orders by the matched terms' IDF, which decides most of BM25;
/// the window only has to cover ties broken by frequency and length (and
/// among equal candidates it keeps the newest).
fn candidate_window(limit: usize) -> usize {
    limit.saturating_mul(4).saturating_add(32)
}

/// What the first pass needs to know of a candidate.
#[derive(Debug, Clone)]
struct Identity {
    norm_hash: i64,
    file_id: i64,
    day: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Corpus {
    items: usize,
    terms: usize,
}

impl Corpus {
    fn average_terms(&self) -> f64 {
        if self.items == 0 {
            1.0
        } else {
            (self.terms as f64 / self.items as f64).max(1.0)
        }
    }
}

/// BM25 inverse document frequency (the always-positive form).
fn bm25_idf(items: usize, df: usize) -> f64 {
    let (n, df) = (items as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25 of one item: body terms with term frequency and length
/// normalisation, plus heading matches at [`HEADING_WEIGHT`].
/// `body_terms`: the item's stored terms split at spaces (empty pieces are
/// not counted).
fn bm25(
    query: &[String],
    idf: &[f64],
    body_terms: &[&str],
    heading_terms: &str,
    average: f64,
) -> f64 {
    let length = body_terms.iter().filter(|t| !t.is_empty()).count();
    let norm = 1.0 - B + B * length as f64 / average;
    let mut score = 0.0;
    for (term, weight) in query.iter().zip(idf) {
        let tf = body_terms.iter().filter(|t| **t == term).count() as f64;
        if tf > 0.0 {
            score += weight * tf * (K1 + 1.0) / (tf + K1 * norm);
        }
        let th = heading_terms.split(' ').filter(|t| *t == term).count() as f64;
        if th > 0.0 {
            score += HEADING_WEIGHT * weight * th * (K1 + 1.0) / (th + K1);
        }
    }
    score
}

fn hit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Hit> {
    Ok(Hit {
        id: r.get(0)?,
        path: r.get(1)?,
        kind: FileKind::parse(&r.get::<_, String>(2)?),
        start_line: r.get::<_, i64>(3)? as usize,
        end_line: r.get::<_, i64>(4)? as usize,
        stamp: r.get(5)?,
        day: r.get(6)?,
        ts: r.get(7)?,
        heading: r.get(8)?,
        body: r.get(9)?,
        norm_hash: r.get(10)?,
        file_id: r.get(11)?,
        score: r.get(12)?,
        text_score: None,
        vector_score: None,
        before: Vec::new(),
        after: Vec::new(),
        withheld: Vec::new(),
    })
}

/// One hit per distinct text (a note kept in both MEMORY.md and a daily
/// file is one memory): the group keeps the rank of its best copy and is
/// shown as its long-term copy when it has one.
fn dedupe(hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
    // Each group's place in `kept`, not the hit itself: a search dedupes
    // every candidate, and moving whole hits through a growing map cost
    // copies and fresh pages on every search.
    let mut kept: Vec<Hit> = Vec::with_capacity(hits.len().min(limit));
    let mut place: HashMap<i64, usize> = HashMap::with_capacity(hits.len().min(limit));
    for hit in hits {
        match place.get(&hit.norm_hash) {
            Some(&at) => {
                let group = &mut kept[at];
                if group.kind != FileKind::LongTerm && hit.kind == FileKind::LongTerm {
                    let score = group.score;
                    *group = Hit { score, ..hit };
                }
            }
            // A group first seen past the limit is never shown.
            None if kept.len() < limit => {
                place.insert(hit.norm_hash, kept.len());
                kept.push(hit);
            }
            None => {}
        }
    }
    kept
}

mod indexing;
pub(crate) mod recall;
pub(crate) mod search;
mod sync;
pub(crate) mod vectors;

/// Whether the index listed `memory/` and `daily/` (under `root`) at
/// their current modification times, so its daily files are all there are.
fn daily_dirs_listed_now(conn: &rusqlite::Connection, root: &Path) -> rusqlite::Result<bool> {
    for dir in ["memory", "daily"] {
        let current = std::fs::metadata(root.join(dir))
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| files::mtime_ns(&m));
        let listed: Option<i64> = conn
            .query_row("SELECT mtime_ns FROM dirs WHERE path = ?1", [dir], |r| {
                r.get(0)
            })
            .optional()?;
        if current != listed {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
pub(crate) mod tests;
