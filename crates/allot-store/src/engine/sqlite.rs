//! The embedded engine: one SQLite file in WAL mode.
//!
//! Durability: `journal_mode=WAL` with `synchronous=FULL`, so a committed transaction is
//! in the WAL and fsynced before `persist` returns; a crash (even `kill -9` or power
//! loss) keeps every acknowledged write. One connection writes: the host serialises
//! writes, and reads are served from the in-memory view, never from here. A second
//! connection, on a thread of its own, copies the WAL back into the database file
//! (`super::checkpointer`), so that no commit waits for a checkpoint. An advisory lock
//! on `PATH-lock` keeps any other process from opening the database while this one
//! has it.
//!
//! Schema versions are kept in `PRAGMA user_version`; [`MIGRATIONS`] lists what brings
//! a database from one version to the next, applied in one transaction each at open.
//!
//! The tables, the statements each change writes and the load are `super::sql`'s
//! and `super::load`'s; this file says how SQLite spells them ([`Sqlite`]) and which
//! tables each schema version created.

use std::path::Path;

use rusqlite::types::ToSqlOutput;
use rusqlite::{params, Connection, Transaction};

use super::checkpointer::{CheckpointStats, Checkpointer, Policy};
use super::cluster_key::{self, ClusterKey};
use super::load::{self, Cells, Key, Rows, Source};
use super::saved;
use super::sql::{self, Conflict, Ddl, Dialect, Table, Value};
use super::{lost_race, read_log, LOG_KEEP, LOG_PRUNE_EVERY};
use allot_core::State;

use crate::{Commit, Cursor, PlanUnderLock, StoreError};

/// The change log (issue 12): each transaction's changes, numbered (`crate::log`).
/// Its head is the largest `seq`; pruning keeps the newest rows, so it survives.
static CHANGE_LOG: Table = Table {
    name: "change_log",
    columns: sql::LOG_COLUMNS,
    key: &["seq"],
    clustered: false,
};

/// Schema migrations, in order: the tables (and indexes) each version created. The
/// database's `user_version` is how many have run.
static MIGRATIONS: &[&[Ddl]] = {
    use sql::*;
    &[
        &[
            Ddl::Table(&RESOURCE_CLASSES),
            Ddl::Table(&TRAITS),
            Ddl::Table(&PROVIDERS),
            Ddl::Table(&INVENTORIES),
            Ddl::Table(&PROVIDER_TRAITS),
            Ddl::Table(&PROVIDER_AGGREGATES),
        ],
        &[
            Ddl::Table(&CONSUMERS_BY_UUID),
            Ddl::Table(&ALLOCATIONS_BY_UUID),
            Ddl::Index(&ALLOCATIONS_BY_PROVIDER),
        ],
        // 2: resource class metadata (issue 10).
        &[Ddl::Table(&CLASS_METADATA)],
        // 3: pending claims (issue 10).
        &[Ddl::Table(&CLAIMS), Ddl::Table(&CLAIM_ALLOCATIONS)],
        // 4: the change log (issue 12).
        &[Ddl::Table(&CHANGE_LOG)],
        // 5 (schema version 6): no statement reads allocations by provider (queries
        // run on the view), and the index cost every claim a leaf written at a random
        // place (issue 25).
        &[Ddl::Raw(sql::DROP_ALLOCATIONS_BY_PROVIDER)],
        // 6 (schema version 7): consumers numbered, their allocations under their
        // numbers, so that a claim's new rows go at the ends of their tables (issue
        // 25).
        &[
            Ddl::Raw(sql::STASH_CONSUMERS),
            Ddl::Table(&CONSUMERS),
            Ddl::Table(&ALLOCATIONS),
            Ddl::Raw(sql::RESTORE_CONSUMERS),
        ],
        // 7 (schema version 8): server groups (issue 44).
        &[
            Ddl::Table(&SERVER_GROUPS),
            Ddl::Table(&SERVER_GROUP_MEMBERS),
        ],
        // 8 (schema version 9): drains (issue 44).
        &[
            Ddl::Table(&DRAINS),
            Ddl::Table(&DRAIN_ROOTS),
            Ddl::Table(&DRAIN_CLAIMS),
        ],
        // 9 (schema version 10): the cluster key (issue 46, `super::cluster_key`)
        // and the web UI sessions logged out (`Change::RevokeSession`).
        &[
            Ddl::Raw(
                "CREATE TABLE allot_cluster_key (id INTEGER PRIMARY KEY, secret BLOB NOT NULL);",
            ),
            Ddl::Table(&REVOKED_SESSIONS),
        ],
        // 10 (schema version 11): named shapes (issue 47).
        &[Ddl::Table(&SHAPES)],
    ]
};

/// SQLite's spelling of the statements: uuids are text, and upserts are
/// `INSERT OR REPLACE` (or `OR IGNORE`).
pub(crate) struct Sqlite;

impl Dialect for Sqlite {
    const SLOT: usize = 0;
    const CLUSTERED: &'static str = " WITHOUT ROWID";
    const TYPES: [&'static str; 5] = ["INTEGER", "REAL", "TEXT", "TEXT", "BLOB"];
    const PARAMETER: char = '?';
    /// An `INTEGER PRIMARY KEY` is the rowid, which SQLite numbers.
    const NUMBERED: &'static str = "";

    fn insert(table: &Table, conflict: Conflict, columns: &str, values: &str) -> String {
        let verb = match conflict {
            Conflict::Fail => "INSERT",
            Conflict::Ignore => "INSERT OR IGNORE",
            Conflict::Replace => "INSERT OR REPLACE",
        };
        format!("{verb} INTO {} ({columns}) VALUES ({values})", table.name)
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Value::Int(n) => ToSqlOutput::from(n),
            Value::Float(x) => ToSqlOutput::from(x),
            Value::Text(text) => ToSqlOutput::from(text),
            // The one spelling allot writes: hyphenated, lower case.
            Value::Uuid(uuid) => ToSqlOutput::from(uuid.to_string()),
            Value::Null(_) => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

/// The SQLite engine.
#[derive(Debug)]
pub struct SqliteEngine {
    conn: Connection,
    checkpointer: Checkpointer,
    /// Held for as long as the engine lives: the file is this process's.
    lock: std::fs::File,
    /// The database file's path.
    path: String,
    /// Whether the last load read the saved view rather than the tables.
    read_saved: bool,
    /// How often the host saves the view while it runs (`Store::save_view_every`).
    pub(crate) save_every: Option<std::time::Duration>,
    /// The change log's record of the commit being written, kept between commits
    /// (`crate::log::encode_into`).
    record: Vec<u8>,
}

/// A view to save beside the database while the server runs (`Host`'s writer hands
/// it to a thread of its own): where, and what it is saved from. The next start
/// after a crash reads it and the log's commits after it instead of the tables
/// (`super::saved`).
#[derive(Debug)]
pub struct RunningSave {
    saved: std::path::PathBuf,
    origin: saved::Origin,
}

impl RunningSave {
    /// Writes `view`, which must hold every commit up to the one this was made for
    /// and none after. Returns the saved file's path and size.
    pub fn write(&self, view: &State) -> Result<(&Path, u64), StoreError> {
        Ok((&self.saved, saved::save(&self.saved, view, self.origin)?))
    }
}

/// Takes the advisory lock (`flock`) on `PATH-lock` that says which process has the
/// database at `path`, without waiting; the kernel frees it when the process ends,
/// however it ends. Held by another: an error that says the database is locked.
fn hold(path: &str) -> Result<std::fs::File, StoreError> {
    let lock_path = format!("{path}-lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked(lock_path)),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// What a view saved now from the database at `path`, at `head`, would be saved
/// from; `None` while a write-ahead log with commits lies beside the file (the file
/// alone is not the database then).
fn origin(path: &str, head: Cursor) -> Result<Option<saved::Origin>, StoreError> {
    match std::fs::metadata(format!("{path}-wal")) {
        Ok(wal) if wal.len() > 0 => return Ok(None),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Some(saved::Origin {
        database: saved::Identity::of(Path::new(path))?,
        cursor: head.0,
        schema: schema_version() as u64,
        running: None,
    }))
}

/// How long a read-only reader waits when SQLite answers busy: only for moments
/// such as a WAL being started over, never for the server's write transactions
/// (in WAL mode a reader and the writer do not wait for each other).
const READER_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the database at `path` into a view, with the log's head, beside a server
/// that may be writing it (`Store::read_only_snapshot`, for `allot export`).
///
/// Why it may go around the lock that [`hold`] takes: that lock keeps a second
/// *writer* off the file, whose commits would go behind the host's back. This
/// connection is opened read-only (SQLite refuses it any write, so it can neither
/// migrate, nor checkpoint, nor remove the WAL at its close), and in WAL mode a
/// reader takes no lock that a writer waits on: everything is read in one read
/// transaction, which sees the database as of its first read, whatever commits
/// after. The server's checkpoints are all `PASSIVE` (`super::checkpointer`), so
/// none waits for this reader either; they copy only what is older than its
/// snapshot, so the WAL grows while the read lasts and is copied back after. The
/// tables are read, never the view saved beside the file (which may be older than
/// the file while a server runs), and the online backup API is not needed: it
/// would copy every page to a second file first, for the same snapshot.
pub fn read_snapshot(path: &str) -> Result<(State, Cursor), StoreError> {
    if !Path::new(path).is_file() {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no database at {path}"),
        )));
    }
    let mut conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(READER_BUSY_TIMEOUT)?;
    // Deferred: the snapshot is taken at the first read below, and every read
    // after sees the same one.
    conn.execute_batch("BEGIN DEFERRED")?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    crate::schema_is_current(version, schema_version())?;
    let head = log_head(&conn)?;
    let state = load::load(Reader(&mut conn))?;
    conn.execute_batch("COMMIT")?;
    Ok((state, head))
}

/// The page size of the databases this engine creates, in bytes: 1 KiB rather than
/// SQLite's 4 KiB. A claim writes a leaf at a random place in each of three trees
/// (consumers, allocations, the provider's row), so a commit's WAL is mostly
/// scattered leaves; smaller pages make each of them a quarter of the bytes to
/// checksum, append, sync and copy back. Measured under a 64-client claim storm at a
/// million roots, the rate rose by 8%, the p99.9 fell from 37–96 ms to 28–39 ms and
/// the bytes written to disk per claim by half; at 10,000 roots the rate stayed
/// (docs/design/pages-of-1-kib.md). Rows stay
/// within a 1 KiB page's local payload (an index page keeps up to 231 bytes of a
/// row before it overflows; a consumer's is about 130); a custom class's long
/// description overflows, which only its own rare writes pay for.
pub(crate) const PAGE_SIZE: i64 = 1024;

/// What [`vacuum`] did: the database's page size and its file's length, before and
/// after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vacuumed {
    /// Bytes per page before.
    pub page_before: i64,
    /// Bytes per page after: [`PAGE_SIZE`].
    pub page_after: i64,
    /// The file's length before (after its WAL was copied into it).
    pub bytes_before: u64,
    /// The file's length after.
    pub bytes_after: u64,
}

/// Rewrites the allot database at `path` compactly and in pages of [`PAGE_SIZE`]
/// (SQLite's `VACUUM`), for a database an older allot made with 4 KiB pages. Offline:
/// it holds the file's lock as a server does, so it is refused while one runs. The
/// rewrite needs free space for a second copy of the file and is all or nothing (a
/// crash leaves the database as it was). A file that is missing, or is not an allot
/// database, is an error and is left alone.
pub fn vacuum(path: &str) -> Result<Vacuumed, StoreError> {
    rewrite(path, PAGE_SIZE)
}

/// [`vacuum`] to pages of `page` bytes (the tests make older databases with it).
fn rewrite(path: &str, page: i64) -> Result<Vacuumed, StoreError> {
    // Not created if missing: `open_with_flags` without `CREATE`.
    let lock = hold_existing(path)?;
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == 0 {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{path} is not an allot database (it has no allot schema)"),
        )));
    }
    let page_before = page_size(&conn)?;
    // Leaving WAL mode copies the WAL into the file; the page size can change only
    // outside it.
    conn.execute_batch("PRAGMA journal_mode = DELETE;")?;
    let bytes_before = std::fs::metadata(path)?.len();
    conn.execute_batch(&format!(
        "PRAGMA page_size = {page}; VACUUM; PRAGMA journal_mode = WAL;"
    ))?;
    let page_after = page_size(&conn)?;
    drop(conn);
    drop(lock);
    Ok(Vacuumed {
        page_before,
        page_after,
        bytes_before,
        bytes_after: std::fs::metadata(path)?.len(),
    })
}

/// The database's page size in bytes, as SQLite reports it.
fn page_size(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("PRAGMA page_size", [], |r| r.get(0))?)
}

/// [`hold`] for a database that must exist already: a missing file is an error
/// rather than a lock file made beside nothing.
fn hold_existing(path: &str) -> Result<std::fs::File, StoreError> {
    if !Path::new(path).is_file() {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no database at {path}"),
        )));
    }
    hold(path)
}

impl SqliteEngine {
    /// Opens or creates the database at `path` (creating its directory) and migrates it.
    pub fn open(path: &str) -> Result<Self, StoreError> {
        Self::open_with(path, Policy::DEFAULT)
    }

    /// [`SqliteEngine::open`], checkpointing by `policy`.
    fn open_with(path: &str, policy: Policy) -> Result<Self, StoreError> {
        if let Some(dir) = Path::new(path)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)?;
        }
        // Another process writing the file would be a second writer behind the
        // host's back: refuse to share it rather than wait. The lock is on a file of
        // its own, so that the checkpointer's connection may open the database.
        let lock = hold(path)?;
        let mut conn = Connection::open(path)?;
        // Before anything writes the file: a database this creates gets pages of
        // `PAGE_SIZE`; one that exists keeps the size it was made with (SQLite
        // ignores the pragma then).
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        migrate(&mut conn)?;
        let page = page_size(&conn)?;
        if page != PAGE_SIZE {
            // An older allot's database: it works as it is; say how to get the
            // shorter tail of the smaller pages.
            tracing::info!(
                page,
                "the database has pages of {page} bytes; `allot db vacuum` (with the \
                 server stopped) rewrites it in allot's {PAGE_SIZE}-byte pages, which \
                 write less per claim"
            );
        }
        // Room for every statement a write runs, so none is parsed twice.
        conn.set_prepared_statement_cache_capacity(64);
        // The page cache stays at SQLite's default (2 MiB). A larger one reads less,
        // but at the end of each write transaction SQLite cuts its cache back to the
        // file's last page, and the largest page it records as seen is the lock
        // byte's (1 GiB in, past the file's end: a B-tree split swaps two pages'
        // numbers through it), so each commit walks the whole cache. 8 to 32 MiB
        // made claims 6-24% slower at a million roots
        // (docs/design/ratio-on-two-cores.md).
        // Checkpoints run beside the commit path, not inside a commit.
        let checkpointer = Checkpointer::start(path, &conn, page, policy)?;
        Ok(SqliteEngine {
            conn,
            checkpointer,
            lock,
            path: path.to_owned(),
            read_saved: false,
            save_every: Some(crate::SAVE_VIEW_EVERY),
            record: Vec::new(),
        })
    }

    /// The connection's `journal_mode` and `synchronous` as SQLite reports them
    /// (`wal` and 2 for FULL): what the durability promise above rests on, read back
    /// so that tests can hold the engine to it.
    pub fn durability(&self) -> Result<(String, i64), StoreError> {
        let journal_mode = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        let synchronous = self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))?;
        Ok((journal_mode, synchronous))
    }

    /// Reads the whole database into a view: the view saved at the last clean stop
    /// if nothing has written the file since (`super::saved`), else the tables
    /// (`super::load`).
    pub fn load(&mut self) -> Result<(State, Cursor), StoreError> {
        // The file is this process's alone (`hold`), and its writes go through this
        // connection: nothing commits between this read of the head and the tables'.
        let head = self.head()?;
        let saved = self.load_saved(head);
        self.read_saved = saved.is_some();
        match saved {
            Some(view) => Ok((view, head)),
            None => Ok((load::load(Reader(&mut self.conn))?, head)),
        }
    }

    /// Whether the last load read the view saved at the last stop.
    pub fn read_saved(&self) -> bool {
        self.read_saved
    }

    /// The view saved beside the file, if it was saved from the file as it is now,
    /// at `head`, or while the server ran at a commit the log still holds (then
    /// brought to `head` by the log's commits after it). One that cannot be used is
    /// said in the log and removed.
    fn load_saved(&self, head: Cursor) -> Option<State> {
        let saved = saved::path_of(&self.path);
        saved::remove_leftovers(&saved);
        let read = saved::load(&saved, |from| self.accepts(from, head)).and_then(|read| {
            let Some((mut view, from)) = read else {
                return Ok(None);
            };
            // A view saved at a clean stop holds the head already.
            let after = match from.running {
                Some(_) => commits_after(&self.conn, Cursor(from.cursor), head)?,
                None => Vec::new(),
            };
            for commit in &after {
                view.apply(&commit.changes);
            }
            if from.running.is_some() {
                tracing::info!(
                    saved = %saved.display(),
                    commit = from.cursor,
                    after = after.len(),
                    "read the view saved while the server ran, and the commits after it"
                );
            } else {
                tracing::info!(saved = %saved.display(), "read the view saved at the last stop");
            }
            Ok(Some(view))
        });
        match read {
            Ok(view) => view,
            Err(e) => {
                tracing::info!(saved = %saved.display(), "reading the tables: {e}");
                if let Err(e) = std::fs::remove_file(&saved) {
                    tracing::warn!(saved = %saved.display(), "could not remove the saved view: {e}");
                }
                None
            }
        }
    }

    /// Whether a view saved `from` there may be read now that the log's head is
    /// `head` (the rules are `super::saved`'s module doc's).
    fn accepts(&self, from: &saved::Origin, head: Cursor) -> Result<(), StoreError> {
        let Some(crc) = from.running else {
            // Saved at a clean stop: nothing may have written the file since. With a
            // write-ahead log holding commits, the file alone is not the database.
            return match origin(&self.path, head)? {
                Some(now) if now == *from => Ok(()),
                _ => Err(saved::changed()),
            };
        };
        let file = saved::Identity::of(Path::new(&self.path))?;
        if !file.same_file(&from.database)
            || from.schema != schema_version() as u64
            || from.cursor > head.0
        {
            return Err(saved::changed());
        }
        match record_crc(&self.conn, Cursor(from.cursor))? {
            Some(now) if now == crc => Ok(()),
            Some(_) => Err(saved::changed()),
            None => Err(StoreError::Corrupt(format!(
                "saved view: the change log no longer holds commit {} it was saved at",
                from.cursor
            ))),
        }
    }

    /// What to save, beside the database, of the view of every commit up to `at`
    /// while the server runs; `None` unless `at` is the log's last commit. The
    /// record's checksum is read here, once a save, rather than computed at every
    /// commit.
    pub(crate) fn running_save(&self, at: Cursor) -> Result<Option<RunningSave>, StoreError> {
        if log_head(&self.conn)? != at {
            return Ok(None);
        }
        let Some(crc) = record_crc(&self.conn, at)? else {
            return Ok(None);
        };
        Ok(Some(RunningSave {
            saved: saved::path_of(&self.path),
            origin: saved::Origin {
                database: saved::Identity::of(Path::new(&self.path))?,
                cursor: at.0,
                schema: schema_version() as u64,
                running: Some(crc),
            },
        }))
    }

    /// Closes the database, then saves `view` (the view of every commit up to `at`)
    /// beside it for the next start (`super::saved`), before giving up the file's
    /// lock. Returns the saved file's path and size; `None` if the view was not
    /// saved because the file is not at `at` or still has a write-ahead log.
    pub fn close_saving(
        self,
        view: &State,
        at: Cursor,
    ) -> Result<Option<(std::path::PathBuf, u64)>, StoreError> {
        let SqliteEngine {
            conn,
            checkpointer,
            lock,
            path,
            ..
        } = self;
        let head = log_head(&conn)?;
        drop(checkpointer);
        // The last connection: SQLite copies the WAL into the file and removes it.
        conn.close().map_err(|(_, e)| e)?;
        let saved = saved::path_of(&path);
        let origin = match origin(&path, head)? {
            Some(origin) if head == at => origin,
            _ => return Ok(None),
        };
        let bytes = saved::save(&saved, view, origin)?;
        drop(lock);
        Ok(Some((saved, bytes)))
    }

    /// What its checkpoints measure.
    pub fn checkpoint_stats(&self) -> &CheckpointStats {
        self.checkpointer.stats()
    }

    /// The change log's head.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        log_head(&self.conn)
    }

    /// The cluster key, made by the first call (`super::cluster_key`).
    pub fn cluster_key(&mut self) -> Result<ClusterKey, StoreError> {
        let fresh = cluster_key::fresh_hex()?;
        self.conn.execute(
            &format!("INSERT OR IGNORE INTO allot_cluster_key (id, secret) VALUES (1, X'{fresh}')"),
            [],
        )?;
        let cell: Vec<u8> = self.conn.query_row(cluster_key::READ, [], |r| r.get(0))?;
        cluster_key::from_cell(&cell)
    }

    /// Proves that the file can still be written: one real write transaction that
    /// sets `user_version` to the value it has, so page 1 goes through the WAL and
    /// the fsync like any commit. A full disk, a file system remounted read-only or
    /// an immutable file fail it; nothing the tables hold changes. Runs on the
    /// writer's own connection, between its batches.
    pub fn probe(&mut self) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        Ok(())
    }

    /// Every commit after `after`, oldest first.
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        let head = log_head(&self.conn)?;
        commits_after(&self.conn, after, head)
    }

    /// One write transaction (see `Store::write`; `at: None` for `Store::persist`).
    /// SQLite's write lock (`BEGIN IMMEDIATE`) is the log's lock.
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let head = log_head(&tx)?;
        // A view at the head has nothing to catch up: no read of the log on the
        // single-process path (every write of an exclusive file).
        let unseen = match at {
            Some(at) if at != head => commits_after(&tx, at, head)?,
            _ => Vec::new(),
        };
        let changes = plan(unseen);
        if changes.is_empty() {
            return Ok(head);
        }
        let mut ops = Vec::new();
        for change in &changes {
            sql::ops(change, &mut ops);
        }
        for op in &ops {
            let written = tx
                .prepare_cached(op.statement.sql::<Sqlite>())?
                .execute(rusqlite::params_from_iter(&op.params))?;
            if let (Some(change), false) = (op.one_row_of, written == 1) {
                return Err(StoreError::Stale(lost_race(change)));
            }
        }
        let next = Cursor(head.0 + 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        exec(
            &tx,
            "INSERT INTO change_log (seq, at, changes) VALUES (?1, ?2, ?3)",
            params![next.0, now, {
                crate::log::encode_into(&changes, &mut self.record);
                &self.record[..]
            }],
        )?;
        if self.record.capacity() > RECORD_KEPT {
            // A bulk write's record (an import) is not held for the claims after it.
            self.record = Vec::new();
        }
        if next.0 % LOG_PRUNE_EVERY == 0 {
            exec(
                &tx,
                "DELETE FROM change_log WHERE seq <= ?1",
                [next.0 - LOG_KEEP],
            )?;
        }
        tx.commit()?;
        self.checkpointer.committed(&self.conn);
        Ok(next)
    }
}

/// The most bytes of change-log record buffer a writer keeps between commits: a
/// claim storm's batches are tens of KiB; a bulk write's may be much larger.
const RECORD_KEPT: usize = 1 << 20;

/// Runs one statement, prepared once per connection: a claim writes a few rows, and
/// parsing their SQL each time cost more than writing them.
fn exec(tx: &Transaction<'_>, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    tx.prepare_cached(sql)?.execute(params)
}

/// The CRC-32 of commit `seq`'s record in the change log, `None` if the log does not
/// hold it: what ties a view saved while the server ran to the log's history.
fn record_crc(conn: &Connection, seq: Cursor) -> Result<Option<u32>, StoreError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached("SELECT changes FROM change_log WHERE seq = ?1")?
        .query_row([seq.0], |r| Ok(crc32fast::hash(r.get_ref(0)?.as_bytes()?)))
        .optional()?)
}

fn log_head(conn: &Connection) -> Result<Cursor, StoreError> {
    let seq: Option<i64> = conn
        .prepare_cached("SELECT max(seq) FROM change_log")?
        .query_row([], |r| r.get(0))?;
    Ok(Cursor(seq.unwrap_or(0)))
}

fn commits_after(
    conn: &Connection,
    after: Cursor,
    head: Cursor,
) -> Result<Vec<Commit>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT seq, changes FROM change_log WHERE seq > ?1 ORDER BY seq")?;
    let mut rows = stmt.query([after.0])?;
    let mut read = Vec::new();
    while let Some(r) = rows.next()? {
        read.push(Ok((r.int(0)?, r.text(1)?.to_vec())));
    }
    read_log(after.0, head.0, read, || {
        StoreError::Corrupt(format!(
            "asked for commits after {} but the log ends before it",
            after.0
        ))
    })
}

/// The connection as the load's [`Source`] (a `&mut`, so that the load's reader
/// thread may have it).
struct Reader<'c>(&'c mut Connection);

impl Source for Reader<'_> {
    type Rows<'s> = rusqlite::Rows<'s>;

    fn rows<T>(
        &self,
        sql: &str,
        each: impl FnOnce(&mut rusqlite::Rows<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut stmt = self.0.prepare(sql)?;
        let mut rows = stmt.query([])?;
        each(&mut rows)
    }
}

impl<'stmt> Rows for rusqlite::Rows<'stmt> {
    type Row<'r>
        = &'r rusqlite::Row<'stmt>
    where
        Self: 'r;

    fn next(&mut self) -> Result<Option<Self::Row<'_>>, StoreError> {
        Ok(rusqlite::Rows::next(self)?)
    }
}

/// Columns read in place (`get_ref`) where they are text.
impl Cells for &rusqlite::Row<'_> {
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        Ok(self.get(i)?)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        Ok(self.get(i)?)
    }

    fn opt_text(&self, i: usize) -> Result<Option<&[u8]>, StoreError> {
        self.get_ref(i)?
            .as_bytes_or_null()
            .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
    }

    fn key(&self, i: usize) -> Result<Key<'_>, StoreError> {
        Ok(Key::Text(self.text(i)?))
    }
}

/// The schema version this build migrates a database to.
pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Runs the migrations up to the first `upto` (tests make older databases with it).
fn migrate_to(conn: &mut Connection, upto: usize) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let supported = MIGRATIONS.len() as i64;
    if version > supported {
        return Err(StoreError::TooNew {
            found: version,
            supported,
        });
    }
    for (i, steps) in MIGRATIONS
        .iter()
        .enumerate()
        .take(upto)
        .skip(version as usize)
    {
        let tx = conn.transaction()?;
        tx.execute_batch(&sql::script::<Sqlite>(steps))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_core::{Change, TraitName, TraitRecord, Uuid};
    use std::time::Duration;

    /// A trait's creation: the smallest write there is.
    fn put_trait(i: usize) -> Change {
        Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(format!("CUSTOM_T{i}")),
            created_at: 0,
        })
    }

    /// A database this engine creates has pages of `PAGE_SIZE`; one made with
    /// another size keeps it, and is read and written as before.
    #[test]
    fn new_databases_get_small_pages_and_old_ones_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        {
            let mut engine = SqliteEngine::open(path).unwrap();
            assert_eq!(page_size(&engine.conn).unwrap(), PAGE_SIZE);
            engine.write(None, &mut |_| vec![put_trait(0)]).unwrap();
        }
        rewrite(path, 4096).unwrap();
        let mut engine = SqliteEngine::open(path).unwrap();
        assert_eq!(page_size(&engine.conn).unwrap(), 4096);
        engine.write(None, &mut |_| vec![put_trait(1)]).unwrap();
        drop(engine);
        let (state, head) = SqliteEngine::open(path).unwrap().load().unwrap();
        assert_eq!(head, Cursor(2));
        assert_eq!(state.custom_traits().count(), 2);
    }

    /// `vacuum` rewrites a database of 4 KiB pages in pages of `PAGE_SIZE`, with
    /// every record and the change log's head kept; it is refused while an engine
    /// holds the file, and for a file that is missing or is not an allot database.
    #[test]
    fn vacuum_rewrites_an_old_database_in_small_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        {
            let mut engine = SqliteEngine::open(path).unwrap();
            for i in 0..500 {
                engine.write(None, &mut |_| vec![put_trait(i)]).unwrap();
            }
        }
        rewrite(path, 4096).unwrap();
        let engine = SqliteEngine::open(path).unwrap();
        assert!(matches!(vacuum(path), Err(StoreError::Locked(_))));
        drop(engine);
        let done = vacuum(path).unwrap();
        assert_eq!((done.page_before, done.page_after), (4096, PAGE_SIZE));
        assert!(done.bytes_after > 0 && done.bytes_before > 0, "{done:?}");
        let mut engine = SqliteEngine::open(path).unwrap();
        assert_eq!(page_size(&engine.conn).unwrap(), PAGE_SIZE);
        let (state, head) = engine.load().unwrap();
        assert_eq!(head, Cursor(500));
        assert_eq!(state.custom_traits().count(), 500);
        drop(engine);

        let missing = dir.path().join("missing.db");
        let missing = missing.to_str().unwrap();
        let err = vacuum(missing).unwrap_err();
        assert!(err.to_string().contains("no database at"), "{err}");
        assert!(!Path::new(missing).exists());
        assert!(!Path::new(&format!("{missing}-lock")).exists());
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); PRAGMA page_size = 4096; VACUUM;")
            .unwrap();
        let err = vacuum(other.to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("not an allot database"), "{err}");
    }

    /// Under writes that never pause, the WAL still starts over: its file stays
    /// within the policy's hard bound (and some frames of a last commit), where
    /// without checkpoints it would hold every commit's pages. Every write is there
    /// after a reopen. The bounds are bytes of WAL, converted to frames of the
    /// database's own page size where SQLite counts frames, so they hold for a
    /// database of this engine's pages and for one of SQLite's default 4 KiB.
    #[test]
    fn the_wal_starts_over_under_writes_that_never_pause() {
        for page in [PAGE_SIZE, 4096] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("allot.db");
            let path = path.to_str().unwrap();
            drop(SqliteEngine::open(path).unwrap());
            if page != PAGE_SIZE {
                rewrite(path, page).unwrap();
            }
            // A frame is a page and its 24-byte header; the file has a 32-byte header.
            let frame = page + 24;
            let policy = Policy {
                restart_at: 64 * frame,
                hard_bound: 256 * frame,
                pace: Duration::from_millis(1),
                small: 16,
            };
            let wal = format!("{path}-wal");
            let bound = (32 + policy.hard_bound + 64 * frame) as u64;
            let writes = 3_000;
            {
                let mut engine = SqliteEngine::open_with(path, policy).unwrap();
                assert_eq!(page_size(&engine.conn).unwrap(), page);
                for i in 0..writes {
                    engine.write(None, &mut |_| vec![put_trait(i)]).unwrap();
                    let size = std::fs::metadata(&wal).unwrap().len();
                    assert!(
                        size <= bound,
                        "{page}: after {i} writes the WAL has {size} bytes"
                    );
                }
            }
            let (state, head) = SqliteEngine::open(path).unwrap().load().unwrap();
            assert_eq!(head, Cursor(writes as i64));
            assert_eq!(state.custom_traits().count(), writes);
        }
    }

    /// A database of the release before issue 46 (schema version 9) opens at this
    /// build's schema, and the cluster key is made once: a second open reads it.
    #[test]
    fn a_schema_9_database_migrates_and_makes_a_cluster_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        migrate_to(&mut Connection::open(path).unwrap(), 9).unwrap();
        let key = SqliteEngine::open(path).unwrap().cluster_key().unwrap();
        assert_eq!(
            SqliteEngine::open(path).unwrap().cluster_key().unwrap(),
            key
        );
    }

    /// A database of schema version 5 opens at this build's schema: without the
    /// index of allocations by provider (version 6), and with its consumers numbered
    /// in the order they were made and each allocation under its consumer's number
    /// (version 7); an allocation of no consumer is not carried over.
    #[test]
    fn a_schema_5_database_migrates_with_its_consumers_numbered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        let index_count = |conn: &Connection| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'allocations_by_provider'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        let (a, b, nobody) = (
            Uuid::from_u128(0xb),
            Uuid::from_u128(0xa),
            Uuid::from_u128(0xc),
        );
        {
            let mut conn = Connection::open(path).unwrap();
            migrate_to(&mut conn, 5).unwrap();
            assert_eq!(index_count(&conn), 1);
            // `a` was made first, though its uuid sorts after `b`'s.
            for (uuid, made) in [(b, 20), (a, 10)] {
                conn.execute(
                    "INSERT INTO consumers VALUES (?1, 'p', 'u', NULL, 3, ?2, ?2)",
                    params![uuid.to_string(), made],
                )
                .unwrap();
            }
            for (uuid, provider, used) in [(a, 1, 2), (a, 2, 5), (b, 1, 7), (nobody, 1, 9)] {
                conn.execute(
                    "INSERT INTO allocations VALUES (?1, ?2, 'VCPU', ?3)",
                    params![uuid.to_string(), provider, used],
                )
                .unwrap();
            }
        }
        let engine = SqliteEngine::open(path).unwrap();
        assert_eq!(index_count(&engine.conn), 0);
        let version: i64 = engine
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, schema_version() as i64);
        let rows = |sql: &str| -> Vec<(i64, String, i64)> {
            let mut statement = engine.conn.prepare(sql).unwrap();
            let rows = statement
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            rows.map(Result::unwrap).collect()
        };
        assert_eq!(
            rows("SELECT id, uuid, created_at FROM consumers ORDER BY id"),
            [(1, a.to_string(), 10), (2, b.to_string(), 20)]
        );
        assert_eq!(
            rows(
                "SELECT a.provider_id, c.uuid, a.used FROM allocations a \
                 JOIN consumers c ON c.id = a.consumer_id ORDER BY c.id, a.provider_id"
            ),
            [
                (1, a.to_string(), 2),
                (2, a.to_string(), 5),
                (1, b.to_string(), 7)
            ]
        );
        let all: i64 = engine
            .conn
            .query_row("SELECT count(*) FROM allocations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(all, 3);
    }

    /// A second open of a file that is open is refused at once, with an error that
    /// says it is locked; once the first is dropped, the file opens again.
    /// A read-only snapshot reads beside the engine that holds the file (whose lock
    /// keeps out writers), sees every commit made before it and none after, and
    /// writes nothing: a file that is not there is not created, and one at an older
    /// schema is refused, not migrated.
    #[test]
    fn a_read_only_snapshot_reads_beside_the_writer_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        let mut engine = SqliteEngine::open(path).unwrap();
        for i in 0..3 {
            engine.write(None, &mut |_| vec![put_trait(i)]).unwrap();
        }
        let (state, head) = read_snapshot(path).unwrap();
        assert_eq!(head, Cursor(3));
        assert_eq!(state.custom_traits().count(), 3);
        engine.write(None, &mut |_| vec![put_trait(3)]).unwrap();
        let (state, head) = read_snapshot(path).unwrap();
        assert_eq!((head, state.custom_traits().count()), (Cursor(4), 4));
        drop(engine);
        // With no writer (its WAL copied back and gone), and after: the file is as
        // the writer left it.
        assert_eq!(read_snapshot(path).unwrap().1, Cursor(4));
        let (state, head) = SqliteEngine::open(path).unwrap().load().unwrap();
        assert_eq!((head, state.custom_traits().count()), (Cursor(4), 4));

        let missing = dir.path().join("missing.db");
        assert!(read_snapshot(missing.to_str().unwrap()).is_err());
        assert!(!missing.exists());
        let old = dir.path().join("old.db");
        migrate_to(&mut Connection::open(&old).unwrap(), 5).unwrap();
        assert!(matches!(
            read_snapshot(old.to_str().unwrap()),
            Err(StoreError::NotMigrated { found: 5, .. })
        ));
        let version: i64 = Connection::open(&old)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 5);
    }

    #[test]
    fn a_file_is_one_engine_s_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let path = path.to_str().unwrap();
        let first = SqliteEngine::open(path).unwrap();
        let second = SqliteEngine::open(path).unwrap_err();
        assert!(matches!(second, StoreError::Locked(_)), "{second:?}");
        assert!(
            second.to_string().contains("database is locked"),
            "{second}"
        );
        drop(first);
        SqliteEngine::open(path).unwrap();
    }

    /// A consumer's uuid spelled another way (upper case, as a hand-edited row might
    /// have it) is the same consumer as the usual spelling: the load, which skips the
    /// search for consumers it knows to be new, holds it once, as applying would.
    #[test]
    fn another_spelling_of_a_uuid_is_the_same_consumer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let mut engine = SqliteEngine::open(path.to_str().unwrap()).unwrap();
        let uuid = Uuid::from_u128(0xabcdef);
        let upper = uuid.hyphenated().to_string().to_uppercase();
        // The upper-case spelling is numbered first, so read first.
        for (spelling, generation) in [(upper, 1), (uuid.to_string(), 2)] {
            engine
                .conn
                .execute(
                    "INSERT INTO consumers (uuid, project_id, user_id, generation, created_at, \
                     updated_at) VALUES (?1, 'p', 'u', ?2, 0, 0)",
                    params![spelling, generation],
                )
                .unwrap();
        }
        let (state, _) = engine.load().unwrap();
        assert_eq!(state.consumers().count(), 1);
        assert_eq!(state.consumer(&uuid).unwrap().row.generation, 2);
        assert!(state.check_usage_index());
    }
}
