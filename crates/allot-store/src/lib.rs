//! Durable storage for allot, and the host that keeps the in-memory view in step with it.
//!
//! - [`Store`] is the one interface every engine sits behind, chosen by a database URL
//!   (`sqlite:PATH`, or `postgres://...` for several nodes on one database). It loads the whole [`State`] at start-up and writes the
//!   [`Change`]s of a batch in one transaction. Every transaction also appends its
//!   changes to a **change log** in the database and moves its head, a [`Cursor`]: a
//!   node that shares the database with others learns their commits, in order, from
//!   [`Store::changes_since`], and [`Store::write`] hands it the ones it has not seen
//!   before it plans, with the log's head locked, so that no plan is ever made against
//!   an out-of-date view (docs/design/several-nodes.md).
//! - [`Host`] owns a store and the in-memory [`State`]: it serialises writes (plan
//!   against the view, persist, then apply) and hands out read access to the view.

pub mod dump;
mod engine;
mod host;
pub mod log;
pub mod my_tls;
pub mod pg_tls;
mod stats;
/// The store suite's databases on the test PostgreSQL server, for the engine's own
/// unit tests too: one rule for a missing server.
#[cfg(test)]
#[path = "../tests/pg/mod.rs"]
mod test_pg;

pub use engine::checkpointer::CheckpointStats;
pub use engine::cluster_key::ClusterKey;
pub use engine::mariadb::split_password;
pub use engine::sqlite::{vacuum as vacuum_sqlite, RunningSave, Vacuumed};
pub use host::{Clock, Host, Loaded, Pending, WriteError};
pub use stats::{KindBusy, ViewSaveStats, WriteKind, WriterBusy, WriterStats};

/// How often, by default, the host saves the view beside an SQLite file while it
/// runs, when anything was written since the last save ([`Store::save_view_every`]).
/// At a million providers a save is 1.4–1.9 s of two threads and about 220 MB written;
/// a start after a crash then reads the view and at most this long's commits after
/// it from the change log, which keeps the last 10,000 (an older view is not read:
/// the tables are).
pub const SAVE_VIEW_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

use allot_core::{Change, State};

/// Why a store could not do what was asked. These are operational failures (disk,
/// corruption, a bad URL), never a refusal by the domain rules.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database URL names no engine we have, or is malformed.
    #[error("unsupported database URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database was written by a newer allot.
    #[error("database schema version {found} is newer than this allot supports ({supported})")]
    TooNew {
        /// The version on disk.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The database was made by an older allot and not migrated since: a read-only
    /// snapshot ([`Store::read_only_snapshot`]) does not migrate it.
    #[error(
        "database schema version {found} is older than this allot's ({current}): a read-only \
         read does not migrate it (`allot db migrate`, or a server of this build, does)"
    )]
    NotMigrated {
        /// The version on disk.
        found: i64,
        /// The version this build reads.
        current: i64,
    },
    /// The SQLite engine failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL engine failed (or could not connect: the message says why).
    #[error("postgres: {}", postgres_message(.0))]
    Postgres(postgres::Error),
    /// The MariaDB engine failed (or could not connect: the message says why).
    /// A Galera cluster's certification failure (a deadlock error at commit) or a
    /// node not ready (`wsrep`) is one too: nothing was written.
    #[error("mariadb: {0}")]
    MariaDb(String),
    /// A conflicting transaction won: on Galera, one committed on another node was
    /// certified first (or, on one server, a deadlock was broken). Nothing of this
    /// one was written; a later try plans against the commits that won.
    #[error("a conflicting commit won, nothing was written: {0}")]
    Conflict(String),
    /// This node does not hold the cluster's writer lease (MariaDB): it writes
    /// nothing for itself, and forwards its writes to the holder (`Fence`).
    #[error("this node does not hold the cluster's writer lease: {0}")]
    NotWriter(String),
    /// TLS to PostgreSQL failed: a certificate that does not verify, a server without
    /// TLS under a mode that requires it, a file of the settings that cannot be read
    /// ([`pg_tls`] says which, in libpq's terms).
    #[error("postgres: {0}")]
    PostgresTls(String),
    /// TLS to MariaDB failed: a certificate that does not verify, a server without
    /// TLS where the URL asks for it, a file of the settings that cannot be read
    /// ([`my_tls`] says which, naming the URL's `ssl_*` argument).
    #[error("mariadb: {0}")]
    MariaDbTls(String),
    /// Another process has the SQLite database open (an allot server, or a tool such
    /// as `allot export`): the advisory lock on the named file is held.
    #[error("database is locked: another process holds {0}")]
    Locked(String),
    /// An I/O error outside the engine (creating the database's directory, ...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Stored data that cannot be read back (a corrupt row).
    #[error("corrupt data in store: {0}")]
    Corrupt(String),
    /// A change's precondition did not hold inside the transaction: a provider's or
    /// consumer's generation was not the one the plan saw, or a row to create was
    /// already there. Nothing was written. Under the log's lock a plan always sees
    /// the latest commits, so this means the database was changed outside allot's
    /// log (or a bug); the host reloads its view.
    #[error("the store changed under this write: {0}")]
    Stale(String),
    /// The commits after the cursor asked for were pruned from the change log: the
    /// caller must load the whole view again.
    #[error("the change log no longer reaches back to commit {0}")]
    Behind(i64),
}

/// Not `#[from]`: the message carries the driver's cause already, and a source would
/// have error reports print it twice.
impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError::Postgres(e)
    }
}

/// A PostgreSQL error with its cause (the driver's own text for a server error is
/// only "db error"; the server's message is the cause).
fn postgres_message(e: &postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) if !e.to_string().contains(&cause.to_string()) => format!("{e}: {cause}"),
        _ => e.to_string(),
    }
}

/// A position in the store's change log: the number of the last commit a view
/// includes (0 before the first). Commits are numbered from 1 without gaps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor(pub i64);

/// One committed transaction, as the change log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// Its number: the head just after it.
    pub cursor: Cursor,
    /// What it changed, in order.
    pub changes: Vec<Change>,
}

/// What a write plans once it holds the log's lock: given the commits its view has
/// not seen (oldest first), the changes to write (none: write nothing).
pub type PlanUnderLock<'a> = &'a mut dyn FnMut(Vec<Commit>) -> Vec<Change>;

/// The error for a URL that names no engine of ours.
fn unknown_engine(url: &str) -> StoreError {
    StoreError::BadUrl {
        url: redacted(url),
        reason: "expected sqlite:PATH, postgres://USER@HOST:PORT/DATABASE or \
                 mysql://USER@HOST:PORT/DATABASE"
            .into(),
    }
}

/// Whether a database at schema version `found` can be read as it is by a build
/// whose schema version is `current`: a read-only read cannot migrate it.
pub(crate) fn schema_is_current(found: i64, current: usize) -> Result<(), StoreError> {
    let current = current as i64;
    match found.cmp(&current) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(StoreError::TooNew {
            found,
            supported: current,
        }),
        std::cmp::Ordering::Less => Err(StoreError::NotMigrated { found, current }),
    }
}

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The file a `sqlite:PATH` (or `sqlite://PATH`) URL names (empty if it names
/// none); `None` for a URL of another engine.
pub fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
}

/// [`sqlite_path`], refusing a `sqlite:` URL that names no file.
pub fn sqlite_file(url: &str) -> Result<Option<&str>, StoreError> {
    match sqlite_path(url) {
        Some("") => Err(StoreError::BadUrl {
            url: url.into(),
            reason: "sqlite: needs a file path, e.g. sqlite:/var/lib/allot/allot.db".into(),
        }),
        path => Ok(path),
    }
}

/// A database URL fit for logs and messages: its password, if any, replaced by `***`.
pub fn redacted(url: &str) -> String {
    engine::postgres::redact(url)
}

/// The URL of database `name` on the MariaDB server `url` names, with `url`'s user,
/// password, host, port (or socket) and arguments; `None` when `url` is not a
/// MariaDB/MySQL one (`mysql://`, `mariadb://`, SQLAlchemy's `mysql+pymysql://`).
/// `allot serve --placement-conf` serves its database there, beside Placement's.
/// Refused: a `name` that is not a plain identifier ([`check_database_name`]), or
/// the database `url` names itself.
pub fn database_beside(url: &str, name: &str) -> Result<Option<String>, StoreError> {
    if !engine::mariadb::is_mariadb(url) {
        return Ok(None);
    }
    engine::mariadb::beside(url, name).map(Some)
}

pub use engine::mariadb::check_database_name;

/// A second connection that waits for other nodes' commits, so that a node can
/// follow the log as soon as something is committed instead of on a timer: meant
/// for a thread of its own, which wakes the host's writer. PostgreSQL only (it is
/// `LISTEN allot_log`, answered by the `NOTIFY` of every write); see
/// [`Store::listener`].
#[derive(Debug)]
pub struct Listener(engine::postgres::PgListener);

impl Listener {
    /// Blocks until another writer commits (true) or `timeout` passes (false). A
    /// wake-up may be spurious (after a lost connection, made again here, it is
    /// always true, as commits may have been missed meanwhile): the caller reads the
    /// log to see what there is. An error means the connection is down (the next
    /// call tries to make it again).
    pub fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        self.0.wait(timeout)
    }
}

/// Which node of a cluster on one PostgreSQL database writes for the others (see
/// [`Lease`]): other nodes forward their writes to it, so that the cluster's writes
/// are batched by one writer instead of queueing for the log's lock one node at a
/// time. Only a matter of speed: every node's writes still take the log's lock and
/// plan against its latest commits, whoever sends them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterRole {
    /// This node holds the lease: it writes for itself and for whoever forwards.
    This,
    /// Another node holds it, and answers at this URL.
    At(String),
    /// No node holds it (or the database cannot be asked): each writes for itself.
    Unknown,
}

/// The writer's lease on a database that several nodes share: a session that takes
/// the cluster's writer lock (a PostgreSQL advisory lock, held as long as the
/// session lives) when it is free and the node can be reached, else says who holds
/// it. Meant for a thread of its own that ticks every second or so; see
/// [`Store::lease`].
#[derive(Debug)]
pub struct Lease(LeaseOf);

#[derive(Debug)]
enum LeaseOf {
    /// Boxed, as the engines are.
    Postgres(Box<engine::postgres::PgLease>),
    MariaDb(Box<engine::mariadb::MyLease>),
}

impl Lease {
    /// Takes the role if it is free (on PostgreSQL, only for a node with a URL to
    /// give; on MariaDB also when the holder's beat stopped), and says who holds it.
    /// An error means the database could not be asked (the next tick connects
    /// again); a session lost this way loses the role.
    pub fn tick(&mut self) -> Result<WriterRole, StoreError> {
        match &mut self.0 {
            LeaseOf::Postgres(lease) => lease.tick(),
            LeaseOf::MariaDb(lease) => lease.tick(),
        }
    }

    /// Whether a node without the lease must not write for itself (MariaDB and
    /// Galera, where only the holder's commits are accepted): it forwards to the
    /// holder, or answers 503.
    pub fn fenced(&self) -> bool {
        matches!(self.0, LeaseOf::MariaDb(_))
    }
}

/// The epoch of the writer lease a node holds, shared by its [`Lease`] and its
/// [`Store`] on MariaDB (`engine::mariadb::lease` has the whole story): once a
/// lease arms it, the store commits only while the log's head carries the epoch
/// held here. A store whose fence no lease armed (a tool such as `allot import`,
/// a test) writes without one. Clones share the value.
#[derive(Debug, Clone)]
pub struct Fence(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Fence {
    /// No lease arms it: writes are not fenced.
    const UNARMED: i64 = -1;

    fn new() -> Fence {
        Fence(std::sync::Arc::new(Fence::UNARMED.into()))
    }

    /// A lease watches it from now on: writes need the epoch it holds.
    fn arm(&self) {
        use std::sync::atomic::Ordering;
        let _ = self
            .0
            .compare_exchange(Fence::UNARMED, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The epoch held (0: none).
    fn held(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::Acquire).max(0)
    }

    /// What a write must find in the log's head: `None` for an unarmed fence (no
    /// check), else the epoch held (0: none, so no write may commit).
    fn required(&self) -> Option<i64> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            Fence::UNARMED => None,
            epoch => Some(epoch),
        }
    }

    /// Whether a write may commit as far as this node knows: no lease armed the
    /// fence, or its lease is held (the log's head has the last word).
    pub fn open(&self) -> bool {
        self.required() != Some(0)
    }

    fn hold(&self, epoch: i64) {
        self.0.store(epoch, std::sync::atomic::Ordering::Release);
    }

    /// The lease is lost or given back: no write commits until it is held again.
    fn release(&self) {
        use std::sync::atomic::Ordering;
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v != Fence::UNARMED).then_some(0)
            });
    }
}

/// How many changes one transaction of [`Store::persist_large`] holds on MariaDB:
/// about 1 MB of log record (a change is about 200 bytes encoded, measured on the
/// flat 10,000 bench cloud).
pub const LARGE_WRITE_PART: usize = 5_000;

/// A durable store: one of the engines, chosen at start-up.
#[derive(Debug)]
pub struct Store(Engine);

/// What kind of store a host runs on (`allot status`, `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreKind {
    /// `sqlite` or `postgresql`.
    pub engine: &'static str,
    /// The schema version.
    pub schema: usize,
    /// Whether other processes may write to it at the same time.
    pub shared: bool,
}

#[derive(Debug)]
enum Engine {
    /// Boxed, as the other is: the two connections and the checkpointer's handles.
    Sqlite(Box<engine::sqlite::SqliteEngine>),
    /// Boxed: the client's state is larger than SQLite's connection handle.
    Postgres(Box<engine::postgres::PgEngine>),
    /// Boxed, as the others are.
    MariaDb(Box<engine::mariadb::MyEngine>),
}

impl Store {
    /// Opens (creating and migrating if needed) the store a database URL names:
    /// `sqlite:PATH` (or `sqlite://PATH`), `postgres://...` or `postgresql://...`,
    /// `mysql://...`, `mariadb://...` or SQLAlchemy's `mysql+pymysql://...`.
    pub fn open(url: &str) -> Result<Store, StoreError> {
        if let Some(path) = sqlite_file(url)? {
            return Ok(Store(Engine::Sqlite(Box::new(
                engine::sqlite::SqliteEngine::open(path)?,
            ))));
        }
        if is_postgres(url) {
            return Ok(Store(Engine::Postgres(Box::new(
                engine::postgres::PgEngine::open(url)?,
            ))));
        }
        if engine::mariadb::is_mariadb(url) {
            return Ok(Store(Engine::MariaDb(Box::new(
                engine::mariadb::MyEngine::open(url)?,
            ))));
        }
        Err(unknown_engine(url))
    }

    /// Reads everything the database `url` names into a fresh view, with the log's
    /// head, in one consistent snapshot, beside any server running on it: what
    /// `allot export` reads, so that a backup or the way back to Placement needs no
    /// outage. Nothing is written, migrated or locked, and no lease is taken: on
    /// SQLite a read-only connection that leaves the server's lock (`PATH-lock`)
    /// alone and reads in one WAL read transaction; on PostgreSQL and MariaDB one
    /// repeatable-read, read-only transaction. A database at another schema version
    /// than this build's is refused ([`StoreError::NotMigrated`], [`StoreError::TooNew`]),
    /// and a SQLite file that is not there is an error, never created.
    pub fn read_only_snapshot(url: &str) -> Result<(State, Cursor), StoreError> {
        if let Some(path) = sqlite_file(url)? {
            return engine::sqlite::read_snapshot(path);
        }
        if is_postgres(url) {
            return engine::postgres::PgEngine::read_snapshot(url);
        }
        if engine::mariadb::is_mariadb(url) {
            return engine::mariadb::MyEngine::read_snapshot(url);
        }
        Err(unknown_engine(url))
    }

    /// Reads everything into a fresh in-memory view.
    pub fn load(&mut self) -> Result<State, StoreError> {
        Ok(self.snapshot()?.0)
    }

    /// Reads everything into a fresh in-memory view, with the log's head at the moment
    /// of the read (one consistent snapshot).
    pub fn snapshot(&mut self) -> Result<(State, Cursor), StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.load(),
            Engine::Postgres(e) => e.load(),
            Engine::MariaDb(e) => e.load(),
        }
    }

    /// Closes the store. On SQLite, saves `view` (the view of every commit up to
    /// `at`) beside the file first, for the next start to read instead of the tables
    /// (`engine::saved`); a view that cannot be saved is said in the log, and the
    /// next start reads the tables.
    pub fn close(self, view: &State, at: Cursor) {
        let engine = match self.0 {
            Engine::Sqlite(engine) => engine,
            Engine::MariaDb(engine) => return engine.close(),
            Engine::Postgres(_) => return,
        };
        let started = std::time::Instant::now();
        match engine.close_saving(view, at) {
            Ok(Some((path, bytes))) => tracing::info!(
                saved = %path.display(),
                bytes,
                seconds = started.elapsed().as_secs_f64(),
                "saved the view for the next start"
            ),
            Ok(None) => {
                tracing::info!(
                    "the view was not saved: the closed database is not the view's (a \
                     write-ahead log was left beside it, or its last commit is not the view's)"
                )
            }
            Err(e) => tracing::warn!(
                "could not save the view for the next start (it will read the tables): {e}"
            ),
        }
    }

    /// How often the host saves the view beside an SQLite file while it runs, so
    /// that a start after a crash reads it and the log's commits after it instead of
    /// the tables (`engine::saved`); `None`: only at a clean stop. No effect on
    /// PostgreSQL, whose nodes save no view. Default [`SAVE_VIEW_EVERY`].
    pub fn save_view_every(&mut self, every: Option<std::time::Duration>) {
        if let Engine::Sqlite(e) = &mut self.0 {
            e.save_every = every;
        }
    }

    /// What [`Store::save_view_every`] set, `None` where no view is saved while the
    /// host runs.
    pub(crate) fn view_save_every(&self) -> Option<std::time::Duration> {
        match &self.0 {
            Engine::Sqlite(e) => e.save_every,
            Engine::Postgres(_) | Engine::MariaDb(_) => None,
        }
    }

    /// What to save of the view of every commit up to `at` while the store is in
    /// use (what the host's writer does, `engine::saved`); `None` where nothing is
    /// saved then: PostgreSQL, or `at` is not the log's last commit.
    pub fn running_save(&self, at: Cursor) -> Result<Option<RunningSave>, StoreError> {
        match &self.0 {
            Engine::Sqlite(e) => e.running_save(at),
            Engine::Postgres(_) | Engine::MariaDb(_) => Ok(None),
        }
    }

    /// Whether the last load read the view saved beside an SQLite file at its last
    /// clean stop rather than the tables (`engine::saved`).
    pub fn read_saved_view(&self) -> bool {
        matches!(&self.0, Engine::Sqlite(e) if e.read_saved())
    }

    /// What the SQLite engine's checkpoints measure (handles that stay live); `None`
    /// for PostgreSQL, which checkpoints on its own.
    pub fn checkpoint_stats(&self) -> Option<CheckpointStats> {
        match &self.0 {
            Engine::Sqlite(e) => Some(e.checkpoint_stats().clone()),
            Engine::Postgres(_) | Engine::MariaDb(_) => None,
        }
    }

    /// The key every node of this database's cluster shares, made (and kept in
    /// the database) by the first call on any node; never in the change log, the
    /// view or a dump (`engine::cluster_key`).
    pub fn cluster_key(&mut self) -> Result<ClusterKey, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.cluster_key(),
            Engine::Postgres(e) => e.cluster_key(),
            Engine::MariaDb(e) => e.cluster_key(),
        }
    }

    /// The change log's head: the last commit.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.head(),
            Engine::Postgres(e) => e.head(),
            Engine::MariaDb(e) => e.head(),
        }
    }

    /// A cheap check that the store can still be written (SQLite: one real write
    /// transaction that changes nothing) or reached (PostgreSQL: one round trip),
    /// for the health check.
    pub fn probe(&mut self) -> Result<(), StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.probe(),
            Engine::Postgres(e) => e.head().map(drop),
            Engine::MariaDb(e) => e.head().map(drop),
        }
    }

    /// Every commit after `after`, oldest first ([`StoreError::Behind`] when the log
    /// was pruned past it).
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.changes_since(after),
            Engine::Postgres(e) => e.changes_since(after),
            Engine::MariaDb(e) => e.changes_since(after),
        }
    }

    /// One write transaction. It takes the log's lock (every node's writes queue
    /// there), reads the commits after `at`, and calls `plan` with them; the changes
    /// `plan` returns are written with their preconditions checked
    /// ([`StoreError::Stale`] when one fails, and nothing is written), appended to the
    /// log, and committed. `plan` is called at most once, and not at all if the
    /// transaction cannot start or the log no longer reaches back to `at`
    /// ([`StoreError::Behind`]). Returns the head after the transaction (unchanged if
    /// `plan` returned nothing). When this returns Ok the changes are on disk.
    pub fn write(&mut self, at: Cursor, plan: PlanUnderLock<'_>) -> Result<Cursor, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.write(Some(at), plan),
            Engine::Postgres(e) => e.write(Some(at), plan),
            Engine::MariaDb(e) => e.write(Some(at), plan),
        }
    }

    /// Makes `changes` durable, all or nothing, whatever was committed before them
    /// (their preconditions are still checked): for tools and tests that have no view.
    pub fn persist(&mut self, changes: &[Change]) -> Result<Cursor, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.write(None, &mut |_| changes.to_vec()),
            Engine::Postgres(e) => e.write(None, &mut |_| changes.to_vec()),
            Engine::MariaDb(e) => e.write(None, &mut |_| changes.to_vec()),
        }
    }

    /// A [`Listener`] on the database `url` names, for a store that other processes
    /// write to ([`Store::is_shared`]); `None` for an engine that has no one else to
    /// hear from (SQLite).
    pub fn listener(url: &str) -> Result<Option<Listener>, StoreError> {
        if is_postgres(url) {
            return Ok(Some(Listener(engine::postgres::PgListener::open(url)?)));
        }
        Ok(None)
    }

    /// [`Store::persist`] for a write of any size (an import): on MariaDB, in
    /// transactions of at most [`LARGE_WRITE_PART`] changes each, so that no
    /// transaction exceeds what the server takes in one (a log row within
    /// `max_allowed_packet`, 16 MiB by default; a Galera write-set within
    /// `wsrep_max_ws_size`): a cloud of 10,000 hosts and 20,000 instances is one
    /// 15 MB log row, a million hosts would be 1.5 GB. A part that fails leaves the
    /// parts before it written (the caller's import then finds the store not
    /// empty, and says so). One transaction on the other engines.
    pub fn persist_large(&mut self, changes: &[Change]) -> Result<Cursor, StoreError> {
        let Engine::MariaDb(_) = &self.0 else {
            return self.persist(changes);
        };
        let mut head = self.head()?;
        for part in changes.chunks(LARGE_WRITE_PART) {
            head = self.persist(part)?;
        }
        Ok(head)
    }

    /// A [`Lease`] on the database `url` names, for a store that several nodes share;
    /// `advertise` is where this node answers, if others can reach it. On
    /// PostgreSQL a node without it never takes the writer's role, and forwards to
    /// whoever has it. On MariaDB it may take the role (else one node alone would
    /// never write), and `fence` (its store's, [`Store::fence`]) is armed: from now
    /// on that store commits only while this lease is held. `None` for SQLite, which
    /// one process writes.
    pub fn lease(
        url: &str,
        advertise: Option<String>,
        fence: Option<Fence>,
    ) -> Result<Option<Lease>, StoreError> {
        if is_postgres(url) {
            return Ok(Some(Lease(LeaseOf::Postgres(Box::new(
                engine::postgres::PgLease::open(url, advertise)?,
            )))));
        }
        if engine::mariadb::is_mariadb(url) {
            let fence = fence.ok_or_else(|| StoreError::BadUrl {
                url: redacted(url),
                reason: "a MariaDB lease needs its store's fence".into(),
            })?;
            return Ok(Some(Lease(LeaseOf::MariaDb(Box::new(
                engine::mariadb::MyLease::open(url, advertise, fence)?,
            )))));
        }
        Ok(None)
    }

    /// The fence of a MariaDB store, for its node's [`Lease`]; `None` for the other
    /// engines, whose writes need none.
    pub fn fence(&self) -> Option<Fence> {
        match &self.0 {
            Engine::MariaDb(e) => Some(e.fence.clone()),
            _ => None,
        }
    }

    /// SQLite's durability settings on this store's own connection, `journal_mode`
    /// and `synchronous` as SQLite reports them (`wal` and 2, FULL, when the engine
    /// keeps its promise); `None` for PostgreSQL. For the tests that check it.
    pub fn sqlite_durability(&self) -> Option<Result<(String, i64), StoreError>> {
        match &self.0 {
            Engine::Sqlite(e) => Some(e.durability()),
            Engine::Postgres(_) | Engine::MariaDb(_) => None,
        }
    }

    /// What kind of store this is: the engine, the schema version an open store has
    /// (opening migrates it to this build's), and whether other processes may write
    /// to it at the same time (a server database, so that a node must follow the log
    /// to stay fresh; the embedded SQLite file is held by one process).
    pub fn kind(&self) -> StoreKind {
        match &self.0 {
            Engine::Sqlite(_) => StoreKind {
                engine: "sqlite",
                schema: engine::sqlite::schema_version(),
                shared: false,
            },
            Engine::Postgres(_) => StoreKind {
                engine: "postgresql",
                schema: engine::postgres::schema_version(),
                shared: true,
            },
            Engine::MariaDb(_) => StoreKind {
                engine: "mariadb",
                schema: engine::mariadb::schema_version(),
                shared: true,
            },
        }
    }
}
