//! Durable storage for allot, and the host that keeps the in-memory view in step with it.
//!
//! - [`Store`] is the one interface every engine sits behind: it loads the whole
//!   [`State`] at start-up and persists the [`Change`]s of a write in one transaction.
//!   Engines are chosen by a database URL (`sqlite:PATH` today; `postgres://` is meant
//!   to fit behind the same two calls).
//! - [`Host`] owns a store and the in-memory [`State`]: it serialises writes (plan
//!   against the view, persist, then apply) and hands out read access to the view.

pub mod dump;
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
    /// An I/O error outside the engine (creating the database's directory, ...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Stored data that cannot be read back (a corrupt row).
    #[error("corrupt data in store: {0}")]
    Corrupt(String),
}

/// A durable store: one of the engines, chosen at start-up.
#[derive(Debug)]
pub struct Store(Engine);

#[derive(Debug)]
enum Engine {
    Sqlite(engine::sqlite::SqliteEngine),
}

impl Store {
    /// Opens (creating and migrating if needed) the store a database URL names:
    /// `sqlite:PATH` (or `sqlite://PATH`).
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
        let reason = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            "the PostgreSQL engine is not built yet; use sqlite:PATH"
        } else {
            "expected sqlite:PATH"
        };
        Err(StoreError::BadUrl {
            url: url.into(),
            reason: reason.into(),
        })
    }

    /// Reads everything into a fresh in-memory view.
    pub fn load(&mut self) -> Result<State, StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.load(),
        }
    }

    /// Makes `changes` durable, all or nothing. When this returns Ok the changes are on
    /// disk.
    pub fn persist(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        match &mut self.0 {
            Engine::Sqlite(e) => e.persist(changes),
        }
    }
}
