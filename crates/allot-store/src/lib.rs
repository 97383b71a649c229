//! Durable storage for allot, and the host that keeps the in-memory view in step with it.
//!
//! - [`Store`] is the one interface every engine sits behind: it loads the whole
//!   [`State`] at start-up and persists the [`Change`]s of a write in one transaction.
//!   Engines are chosen by a database URL (`sqlite:PATH` today; `postgres://` is meant
//!   to fit behind the same two calls).
//! - [`Host`] owns a store and the in-memory [`State`]: it serialises writes (plan
//!   against the view, persist, then apply) and hands out read access to the view.

mod engine;
mod host;

pub use host::{Clock, Host, Pending, WriteError};

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
    /// The SQLite engine failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL engine failed (or could not connect: the message says why).
    #[error("postgres: {}", postgres_message(.0))]
    Postgres(postgres::Error),
    /// A change's precondition failed: another writer got there first.
    #[error("stale: {0}")]
    Stale(String),
    /// The change log was pruned past the cursor asked for: load again.
    #[error("the change log no longer reaches back to this cursor: load again")]
    Behind,
    /// An I/O error outside the engine (creating the database's directory, ...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Stored data that cannot be read back (a corrupt row).
    #[error("corrupt data in store: {0}")]
    Corrupt(String),
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

/// A durable store: one of the engines, chosen at start-up.
#[derive(Debug)]
pub struct Store(Engine);

#[derive(Debug)]
enum Engine {
    Sqlite(engine::sqlite::SqliteEngine),
    /// Boxed: the client's state is larger than SQLite's connection handle.
    Postgres(Box<engine::postgres::PgEngine>),
}

impl Store {
    /// Opens (creating and migrating if needed) the store a database URL names:
    /// `sqlite:PATH` (or `sqlite://PATH`), `postgres://...` or `postgresql://...`.
    pub fn open(url: &str) -> Result<Store, StoreError> {
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(StoreError::BadUrl {
                    url: url.into(),
                    reason: "sqlite: needs a file path, e.g. sqlite:/var/lib/allot/allot.db".into(),
                });
            }
            return Ok(Store(Engine::Sqlite(engine::sqlite::SqliteEngine::open(
                path,
            )?)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Store(Engine::Postgres(Box::new(
                engine::postgres::PgEngine::open(url)?,
            ))));
        }
        Err(StoreError::BadUrl {
            url: url.into(),
            reason: "expected sqlite:PATH or postgres://USER@HOST:PORT/DATABASE".into(),
        })
    }

    /// Reads everything into a fresh in-memory view.
    pub fn load(&mut self) -> Result<State, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.load(),
            Engine::Postgres(e) => Ok(e.load()?.0),
        }
    }

    /// Makes `changes` durable, all or nothing. When this returns Ok the changes are on
    /// disk.
    pub fn persist(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.persist(changes),
            Engine::Postgres(e) => e.persist(changes, &|_| Vec::new()).map(|_| ()),
        }
    }
}
