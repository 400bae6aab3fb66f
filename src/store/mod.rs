//! SQLite storage: the canonical state store and the derived indexes.
//!
//! Invariants:
//! * This module alone holds SQL DDL. Schemas are embedded, append-only
//!   migrations (`migrations/<db>/NNNN_name.sql`); an applied migration is
//!   never edited (its checksum is recorded and verified). After one that
//!   cuts a table down, a file left mostly free is vacuumed (best effort).
//! * One connection policy for every database: WAL journal, 5 s busy
//!   timeout, foreign keys on, files 0600 in 0700 directories.
//! * [`StoreKind::State`] is canonical (never deleted automatically);
//!   [`StoreKind::Index`] is derived from Markdown and safe to delete: when
//!   it is damaged ([`StoreError::is_damage`]: not a database, corrupt, its
//!   schema missing or not this almanac's) it is removed and rebuilt,
//!   holding the index's lock file (`<index>.lock`) and only after looking
//!   again under it. A busy or locked database, a permission or I/O error
//!   is reported, never a reason to delete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::durable;
use crate::paths::fnv1a64;

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub sql: &'static str,
}

const STATE_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("migrations/state/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "tasks",
        sql: include_str!("migrations/state/0002_tasks.sql"),
    },
    Migration {
        version: 3,
        name: "cron_index",
        sql: include_str!("migrations/state/0003_cron_index.sql"),
    },
    Migration {
        version: 4,
        name: "cron_slots",
        sql: include_str!("migrations/state/0004_cron_slots.sql"),
    },
    Migration {
        version: 5,
        name: "cron_slot_retry",
        sql: include_str!("migrations/state/0005_cron_slot_retry.sql"),
    },
    Migration {
        version: 6,
        name: "cron_slot_history",
        sql: include_str!("migrations/state/0006_cron_slot_history.sql"),
    },
];

const INDEX_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "memory",
        sql: include_str!("migrations/index/0001_memory.sql"),
    },
    Migration {
        version: 2,
        name: "recall",
        sql: include_str!("migrations/index/0002_recall.sql"),
    },
    Migration {
        version: 3,
        name: "vocab",
        sql: include_str!("migrations/index/0003_vocab.sql"),
    },
    Migration {
        version: 4,
        name: "resume",
        sql: include_str!("migrations/index/0004_resume.sql"),
    },
    Migration {
        version: 5,
        name: "term_docs",
        sql: include_str!("migrations/index/0005_term_docs.sql"),
    },
    Migration {
        version: 6,
        name: "vectors",
        sql: include_str!("migrations/index/0006_vectors.sql"),
    },
    Migration {
        version: 7,
        name: "vector_log",
        sql: include_str!("migrations/index/0007_vector_log.sql"),
    },
];

/// Which database a [`Store`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// Canonical data.
    State,
    /// Derived, rebuildable index.
    Index,
}

impl StoreKind {
    pub(crate) fn migrations(self) -> &'static [Migration] {
        match self {
            StoreKind::State => STATE_MIGRATIONS,
            StoreKind::Index => INDEX_MIGRATIONS,
        }
    }

    /// Migrations that may leave most of the file free (a table cut
    /// down): after them the file is vacuumed when it is mostly free
    /// pages, so that it shrinks on disk too.
    fn reclaiming(self) -> &'static [u32] {
        match self {
            StoreKind::State => &[6],
            StoreKind::Index => &[],
        }
    }

    fn label(self) -> &'static str {
        match self {
            StoreKind::State => "state store",
            StoreKind::Index => "index",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the {kind} at {}", path.display())]
    Open {
        kind: &'static str,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create the directory of {}", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot lock {} to rebuild it", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the {kind} at {} has schema version {found}, newer than this almanac knows ({known}); upgrade almanac", path.display())]
    TooNew {
        kind: &'static str,
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error(
        "migration {version} ({name}) of the {kind} was changed after it was applied; migrations are append-only"
    )]
    Tampered {
        kind: &'static str,
        version: u32,
        name: String,
    },
    #[error("migration {version} ({name}) of the {kind} failed")]
    Migrate {
        kind: &'static str,
        version: u32,
        name: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// An open database with its schema up to date.
pub(crate) struct Store {
    pub conn: Connection,
    pub path: PathBuf,
    pub kind: StoreKind,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) and migrates the database at `path`.
    /// A derived index that is damaged is deleted and recreated under its
    /// lock; any other error is returned.
    pub(crate) fn open(path: &Path, kind: StoreKind) -> Result<Store, StoreError> {
        Self::open_with(path, kind, BUSY_TIMEOUT)
    }

    /// [`Store::open`] waiting at most `busy` for another connection's lock.
    pub(crate) fn open_with(
        path: &Path,
        kind: StoreKind,
        busy: Duration,
    ) -> Result<Store, StoreError> {
        match Self::open_once(path, kind, busy) {
            Ok(store) => Ok(store),
            Err(err) if kind == StoreKind::Index && err.is_damage() => {
                // The lock file is held while a derived database is
                // deleted and rebuilt.
                let lock = durable::lock_path_for(path);
                durable::with_file_lock(&lock, || {
                    // Another process may have rebuilt it while this one
                    // waited for the lock.
                    match Self::open_once(path, kind, busy) {
                        Err(err) if err.is_damage() => {
                            tracing::warn!(path = %path.display(), error = %err, "rebuilding the derived index");
                            remove_database_files(path);
                            Self::open_once(path, kind, busy)
                        }
                        other => other,
                    }
                })
                .map_err(|source| StoreError::Lock {
                    path: path.to_path_buf(),
                    source,
                })?
            }
            Err(err) => Err(err),
        }
    }

    fn open_once(path: &Path, kind: StoreKind, busy: Duration) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent() {
            durable::create_private_dir_all(parent).map_err(|source| StoreError::Dir {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let created = !path.exists();
        let open_err = |source| StoreError::Open {
            kind: kind.label(),
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        if created {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(
                path,
                std::fs::Permissions::from_mode(durable::PRIVATE_FILE_MODE),
            );
        }
        configure(&conn, kind, busy).map_err(open_err)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            kind,
        };
        store.migrate()?;
        Ok(store)
    }

    /// A private database in memory with its schema, gone when dropped:
    /// for a command that must create nothing on disk.
    pub(crate) fn open_in_memory(kind: StoreKind) -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let open_err = |source| StoreError::Open {
            kind: kind.label(),
            path: path.clone(),
            source,
        };
        let conn = Connection::open_in_memory().map_err(open_err)?;
        configure(&conn, kind, BUSY_TIMEOUT).map_err(open_err)?;
        let mut store = Store { conn, path, kind };
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing database read-only without migrating; `None` when
    /// it does not exist. For inspection (`status`) that must not create or
    /// change anything.
    pub(crate) fn open_existing_read_only(path: &Path) -> Result<Option<Connection>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        // A read-only connection to a WAL database leaves its `-wal` and
        // `-shm` files behind; a read-write one that writes nothing
        // (`query_only`) removes them when it closes, so inspecting leaves
        // the directory as it was. Read-only is the fallback (no write
        // permission).
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|conn| {
            conn.pragma_update(None, "query_only", true)?;
            Ok(conn)
        })
        .or_else(|_| {
            Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        })
        .map_err(|source| StoreError::Open {
            kind: "database",
            path: path.to_path_buf(),
            source,
        })?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Ok(Some(conn))
    }

    /// The schema version (`PRAGMA user_version`).
    pub(crate) fn schema_version(conn: &Connection) -> Result<u32, StoreError> {
        Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let migrations = self.kind.migrations();
        let known = migrations.last().map_or(0, |m| m.version);
        let current = Self::schema_version(&self.conn)?;
        if current == known {
            // A derived index is cheap to rebuild and must match this
            // almanac's schema exactly; a mismatch (an edited or foreign
            // schema) makes `open` rebuild it.
            if self.kind == StoreKind::Index {
                self.verify_checksums(migrations)?;
            }
            return Ok(());
        }
        if current > known {
            return Err(StoreError::TooNew {
                kind: self.kind.label(),
                path: self.path.clone(),
                found: current,
                known,
            });
        }
        let kind = self.kind.label();
        // Take the write lock first, then look again: another process may
        // have migrated while this one waited.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current == known {
            return Ok(());
        }
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    INTEGER PRIMARY KEY,
                 name       TEXT NOT NULL,
                 checksum   TEXT NOT NULL,
                 applied_at INTEGER NOT NULL
             ) STRICT;",
        )?;
        for m in migrations.iter().filter(|m| m.version <= current) {
            let recorded: Option<String> = tx
                .query_row(
                    "SELECT checksum FROM schema_migrations WHERE version = ?1",
                    [m.version],
                    |r| r.get(0),
                )
                .optional()?;
            if recorded.is_some_and(|c| c != checksum(m.sql)) {
                return Err(StoreError::Tampered {
                    kind,
                    version: m.version,
                    name: m.name.to_string(),
                });
            }
        }
        for m in migrations.iter().filter(|m| m.version > current) {
            tx.execute_batch(m.sql)
                .map_err(|source| StoreError::Migrate {
                    kind,
                    version: m.version,
                    name: m.name,
                    source,
                })?;
            tx.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at)
                 VALUES (?1, ?2, ?3, unixepoch())",
                rusqlite::params![m.version, m.name, checksum(m.sql)],
            )?;
        }
        tx.pragma_update(None, "user_version", known)?;
        tx.commit()?;
        if self.kind.reclaiming().iter().any(|v| *v > current) {
            self.reclaim_free_pages();
        }
        Ok(())
    }

    /// Gives the free pages back to the file system when they are most of
    /// the file (`VACUUM`, which cannot run inside the migration's
    /// transaction). Best effort: another connection reading, or too
    /// little disk for the copy, leaves the file as it is (SQLite reuses
    /// the free pages).
    fn reclaim_free_pages(&self) {
        let pages = |pragma: &str| -> i64 {
            self.conn
                .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
                .unwrap_or(0)
        };
        let (free, total) = (pages("freelist_count"), pages("page_count"));
        if free < RECLAIM_MIN_FREE_PAGES || free * 2 < total {
            return;
        }
        if let Err(err) = self.conn.execute_batch("VACUUM") {
            tracing::warn!(path = %self.path.display(), %err, "the free space left by a migration was not given back");
        }
    }
}

/// Below this many free pages (4 MiB of 4 KiB pages) a file is not worth
/// vacuuming.
const RECLAIM_MIN_FREE_PAGES: i64 = 1024;

impl Store {
    fn verify_checksums(&self, migrations: &[Migration]) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT version, checksum FROM schema_migrations")?;
        let recorded: Vec<(u32, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for m in migrations {
            if !recorded
                .iter()
                .any(|(v, c)| *v == m.version && *c == checksum(m.sql))
            {
                return Err(StoreError::Tampered {
                    kind: self.kind.label(),
                    version: m.version,
                    name: m.name.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// How long a connection waits for another one's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn configure(conn: &Connection, kind: StoreKind, busy: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(busy)?;
    // Plans never depend on bound values. Without this a kept statement
    // with `LIMIT ?` (or `LIKE ?`) is compiled again every time it is
    // bound: a memory search binds its neighbour and context lookups a few
    // dozen times.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    // `rarray(?)` binds a list of values as one parameter.
    rusqlite::vtab::array::load_module(conn)?;
    // Switching the journal mode needs an exclusive lock; only a new
    // database needs it, so ask first.
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    // The canonical store syncs every commit; a derived index can be
    // rebuilt, so it trades the last commit on power loss for speed.
    let synchronous = match kind {
        StoreKind::State => "FULL",
        StoreKind::Index => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    // After a large write (an index build) the WAL file is cut back once
    // checkpointed, instead of keeping its largest size.
    conn.pragma_update(None, "journal_size_limit", 4 * 1024 * 1024)?;
    Ok(())
}

impl StoreError {
    /// Whether the error says the database file itself is damaged or not
    /// almanac's: not a database, corrupt, its schema missing, different or
    /// newer. A busy or locked database, a permission, I/O or disk-full
    /// error, or a missing directory is not damage: the file may be fine
    /// and in use.
    pub fn is_damage(&self) -> bool {
        match self {
            StoreError::TooNew { .. } | StoreError::Tampered { .. } => true,
            StoreError::Open { source, .. }
            | StoreError::Migrate { source, .. }
            | StoreError::Sql(source) => sqlite_damage(source),
            StoreError::Dir { .. } | StoreError::Lock { .. } => false,
        }
    }
}

/// The SQLite errors that describe the file rather than its use.
fn sqlite_damage(err: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode;
    match err {
        rusqlite::Error::SqliteFailure(e, _) => matches!(
            e.code,
            ErrorCode::DatabaseCorrupt
                | ErrorCode::NotADatabase
                // SQLITE_ERROR on almanac's own statements: a table or
                // column missing or already there (a schema not its own).
                | ErrorCode::Unknown
                | ErrorCode::TypeMismatch
        ),
        // Rows of an unexpected shape in almanac's own tables.
        rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnIndex(..)
        | rusqlite::Error::InvalidColumnName(..) => true,
        _ => false,
    }
}

/// Deletes a database and its WAL/SHM side files.
pub(crate) fn remove_database_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

/// The recorded checksum of a migration's SQL.
pub(crate) fn checksum(sql: &str) -> String {
    format!("{:016x}", fnv1a64(sql.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_statement_with_a_bound_limit_is_not_compiled_again_for_each_binding() {
        // The memory search binds `LIMIT ?` in kept statements many times
        // a search; each binding used to recompile the statement.
        let store = Store::open_in_memory(StoreKind::Index).unwrap();
        for (limit, heading) in [(1, "a"), (2, "b"), (3, "c")] {
            let mut stmt = store
                .conn
                .prepare_cached(
                    "SELECT id FROM items WHERE file_id = ?1 AND heading = ?2
                     ORDER BY start_line LIMIT ?3",
                )
                .unwrap();
            let ids: Vec<i64> = stmt
                .query_map(rusqlite::params![1, heading, limit], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(ids.is_empty());
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "compiled again after binding LIMIT {limit}"
            );
        }
    }

    #[test]
    fn migrations_are_contiguous_and_pinned() {
        // Append-only: changing an applied migration breaks every existing
        // store, so the checksums of released migrations are pinned here.
        // Add a line for a new migration; never edit one.
        let pinned: &[(StoreKind, u32, &str)] = &[
            (StoreKind::State, 1, "c2995823ad9504f4"),
            (StoreKind::State, 2, "03d66cc7aa873958"),
            (StoreKind::State, 3, "2f7a6c3a5e318d73"),
            (StoreKind::State, 4, "60d7a29b3c9763e6"),
            (StoreKind::State, 5, "0d263fc80018e97e"),
            (StoreKind::State, 6, "a8ed5415dd1dc0fa"),
        ];
        for kind in [StoreKind::State, StoreKind::Index] {
            for (i, m) in kind.migrations().iter().enumerate() {
                assert_eq!(m.version as usize, i + 1, "{kind:?} versions must be 1..N");
            }
        }
        for (kind, version, sum) in pinned {
            let m = kind.migrations()[*version as usize - 1];
            assert_eq!(
                checksum(m.sql),
                *sum,
                "{kind:?} migration {version} was edited"
            );
        }
    }

    #[test]
    fn open_creates_a_private_wal_database_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("almanac.sqlite");
        let store = Store::open(&path, StoreKind::State).unwrap();
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let latest = StoreKind::State.migrations().len() as u32;
        assert_eq!(Store::schema_version(&store.conn).unwrap(), latest);
        store
            .conn
            .execute("INSERT INTO meta (key, value) VALUES ('k', 'v')", [])
            .unwrap();
        drop(store);
        use std::os::unix::fs::PermissionsExt;
        let file_mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(file_mode, 0o600);
        let again = Store::open(&path, StoreKind::State).unwrap();
        let v: String = again
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'k'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, "v");
        let applied: i64 = again
            .conn
            .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(applied, i64::from(latest));
    }

    /// A state store written by an almanac that knew only migration 1 is
    /// brought up to date in place, keeping what it holds.
    #[test]
    fn an_older_state_store_is_migrated_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("almanac.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            let first = STATE_MIGRATIONS[0];
            conn.execute_batch(first.sql).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                     checksum TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;
                 INSERT INTO meta (key, value) VALUES ('kept', 'yes');
                 PRAGMA user_version = 1;",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO schema_migrations VALUES (1, 'init', ?1, 0)",
                [checksum(first.sql)],
            )
            .unwrap();
        }
        let store = Store::open(&path, StoreKind::State).unwrap();
        assert_eq!(
            Store::schema_version(&store.conn).unwrap(),
            STATE_MIGRATIONS.len() as u32
        );
        let kept: String = store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'kept'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kept, "yes");
        let tasks: i64 = store
            .conn
            .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tasks, 0);
    }

    #[test]
    fn canonical_store_from_a_newer_version_is_refused_not_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("almanac.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE precious (x); PRAGMA user_version = 99;")
                .unwrap();
        }
        let err = Store::open(&path, StoreKind::State).unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
        let conn = Connection::open(&path).unwrap();
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'precious'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "canonical data must survive");
    }

    #[test]
    fn corrupt_derived_index_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index").join("ws.sqlite");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            b"this is not a sqlite database at all, just junk bytes....",
        )
        .unwrap();
        let store = Store::open(&path, StoreKind::Index).unwrap();
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn derived_index_with_a_different_schema_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ws.sqlite");
        {
            let store = Store::open(&path, StoreKind::Index).unwrap();
            // As if an older build had applied a different migration 1.
            store
                .conn
                .execute(
                    "UPDATE schema_migrations SET checksum = 'other' WHERE version = 1",
                    [],
                )
                .unwrap();
            store
                .conn
                .execute("INSERT INTO meta (key, value) VALUES ('stale', 'x')", [])
                .unwrap();
        }
        let store = Store::open(&path, StoreKind::Index).unwrap();
        let stale: i64 = store
            .conn
            .query_row("SELECT count(*) FROM meta WHERE key = 'stale'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(stale, 0, "the index was recreated");
    }

    #[test]
    fn only_damage_is_a_reason_to_rebuild() {
        use rusqlite::ffi;
        let sqlite =
            |code| StoreError::Sql(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None));
        for damaged in [ffi::SQLITE_CORRUPT, ffi::SQLITE_NOTADB, ffi::SQLITE_ERROR] {
            assert!(sqlite(damaged).is_damage(), "{damaged}");
        }
        for in_use in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_PERM,
            ffi::SQLITE_CANTOPEN,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_FULL,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_NOMEM,
            ffi::SQLITE_INTERRUPT,
        ] {
            assert!(!sqlite(in_use).is_damage(), "{in_use}");
            let open = StoreError::Open {
                kind: "index",
                path: PathBuf::from("x"),
                source: rusqlite::Error::SqliteFailure(ffi::Error::new(in_use), None),
            };
            assert!(!open.is_damage(), "{in_use}");
        }
        // A path that is a directory cannot be opened: an error, and the
        // directory is left alone.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let err = Store::open(&path, StoreKind::Index).unwrap_err();
        assert!(!err.is_damage(), "{err:?}");
        assert!(path.join("inside").is_dir());
    }

    /// An index another connection is writing (its write lock held while
    /// this one needs it to migrate) is reported busy; it is not deleted.
    #[test]
    fn a_busy_index_is_an_error_and_is_not_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ws.sqlite");
        {
            let store = Store::open(&path, StoreKind::Index).unwrap();
            store
                .conn
                .execute("INSERT INTO meta (key, value) VALUES ('kept', 'yes')", [])
                .unwrap();
            // As an index of the previous schema version would read.
            store.conn.pragma_update(None, "user_version", 5).unwrap();
        }
        let inode = || {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&path).unwrap().ino()
        };
        let before = inode();
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("BEGIN IMMEDIATE").unwrap();
        let err = Store::open_with(&path, StoreKind::Index, Duration::from_millis(50)).unwrap_err();
        assert!(!err.is_damage(), "{err:?}");
        assert!(format!("{err:?}").contains("DatabaseBusy"), "{err:?}");
        writer.execute_batch("ROLLBACK").unwrap();
        assert_eq!(inode(), before, "the file was not replaced");
        let kept: String = writer
            .query_row("SELECT value FROM meta WHERE key = 'kept'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kept, "yes");
        // An exclusive lock held by another connection: the same.
        writer
            .execute_batch(&format!(
                "PRAGMA user_version = {}; PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE meta SET value = 'still' WHERE key = 'kept'; COMMIT;",
                INDEX_MIGRATIONS.len()
            ))
            .unwrap();
        let err = Store::open_with(&path, StoreKind::Index, Duration::from_millis(50)).unwrap_err();
        assert!(!err.is_damage(), "{err:?}");
        assert_eq!(inode(), before);
        drop(writer);
        let store = Store::open(&path, StoreKind::Index).unwrap();
        let kept: String = store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'kept'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kept, "still", "the index survived both");
    }

    /// A damaged index is rebuilt only by the holder of its lock.
    #[test]
    fn a_damaged_index_is_rebuilt_under_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ws.sqlite");
        let junk = b"this is not a sqlite database at all, just junk bytes....";
        std::fs::write(&path, junk).unwrap();
        let lock = std::fs::File::create(durable::lock_path_for(&path)).unwrap();
        lock.lock().unwrap();
        let opener = {
            let path = path.clone();
            std::thread::spawn(move || Store::open(&path, StoreKind::Index).map(|_| ()))
        };
        // However long the lock is held, the file is not touched.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!opener.is_finished());
        assert_eq!(std::fs::read(&path).unwrap(), junk);
        lock.unlock().unwrap();
        opener.join().unwrap().unwrap();
        assert_ne!(
            std::fs::read(&path).unwrap(),
            junk,
            "rebuilt once the lock was free"
        );
    }

    #[test]
    fn read_only_inspection_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.sqlite");
        assert!(Store::open_existing_read_only(&path).unwrap().is_none());
        assert!(!path.exists());
    }
}
