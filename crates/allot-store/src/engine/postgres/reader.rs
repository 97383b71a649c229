//! The load: the whole database and the log's head read in one snapshot (a
//! repeatable-read, read-only transaction), through the load that both engines
//! share (`crate::engine::load`). Each query is read through a portal, a chunk of
//! rows at a time, so that the providers' four queries (and the consumers' two) are
//! open side by side and none is held whole. Uuids are the native type, so one uuid
//! has one spelling and the load never needs to look for duplicates.

use allot_core::State;
use postgres::Row;
use tokio::runtime::Runtime;
use tokio_postgres::{Portal, Transaction};

use super::connection::Tx;
use super::{get, PgEngine};
use crate::engine::load::{self, Cells, Key, Rows, Source};
use crate::{Cursor, StoreError};

impl PgEngine {
    /// Reads the whole database and the log head into a view, in one snapshot (a
    /// repeatable-read, read-only transaction), so that the view is exactly the
    /// state after commit `head` and catching up from there misses nothing.
    pub fn load(&mut self) -> Result<(State, Cursor), StoreError> {
        let tx = self.conn()?.begin_snapshot()?;
        let head: i64 = get(&tx.query_one("SELECT seq FROM allot_log_head", &[])?, 0)?;
        let state = load::load(Reader(&tx))?;
        tx.commit()?;
        Ok((state, Cursor(head)))
    }

    /// [`PgEngine::load`] on a connection of its own that neither migrates nor
    /// writes (`Store::read_only_snapshot`, for `allot export` beside running
    /// nodes): the snapshot is read-only, so it takes no lock a writer waits on, and
    /// the schema is read in it and must be this build's.
    pub fn read_snapshot(url: &str) -> Result<(State, Cursor), StoreError> {
        let target = super::target(url)?;
        let mut engine = PgEngine {
            conn: Some(super::Conn::open(&target)?),
            target,
        };
        let tx = engine.conn()?.begin_snapshot()?;
        let made: bool = get(
            &tx.query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])?,
            0,
        )?;
        let version: i64 = if made {
            get(
                &tx.query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])?,
                0,
            )?
        } else {
            0
        };
        crate::schema_is_current(version, super::schema_version())?;
        let head: i64 = get(&tx.query_one("SELECT seq FROM allot_log_head", &[])?, 0)?;
        let state = load::load(Reader(&tx))?;
        tx.commit()?;
        Ok((state, Cursor(head)))
    }
}

/// A snapshot transaction as the load's [`Source`]: each query is a portal, read a
/// chunk of rows at a time, so that several can be open at once and none is held
/// whole.
struct Reader<'t, 'c>(&'t Tx<'c>);

/// Rows fetched from a portal per round trip.
const CHUNK: i32 = 4096;

impl Source for Reader<'_, '_> {
    type Rows<'s> = PortalRows<'s>;

    fn rows<T>(
        &self,
        sql: &str,
        each: impl FnOnce(&mut PortalRows<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Tx { runtime, .. } = *self.0;
        let tx = self.0.tx();
        let statement = runtime.block_on(tx.prepare(sql))?;
        let portal = runtime.block_on(tx.bind(&statement, &[]))?;
        each(&mut PortalRows {
            runtime,
            tx,
            portal,
            chunk: Vec::new().into_iter(),
            row: None,
            done: false,
        })
    }
}

/// A query's rows, as a portal yields them.
struct PortalRows<'s> {
    runtime: &'s Runtime,
    tx: &'s Transaction<'s>,
    portal: Portal,
    chunk: std::vec::IntoIter<Row>,
    /// The current row.
    row: Option<Row>,
    /// Whether the portal has no more rows.
    done: bool,
}

impl Rows for PortalRows<'_> {
    type Row<'r>
        = &'r Row
    where
        Self: 'r;

    fn next(&mut self) -> Result<Option<&Row>, StoreError> {
        loop {
            if let Some(row) = self.chunk.next() {
                self.row = Some(row);
                return Ok(self.row.as_ref());
            }
            if self.done {
                return Ok(None);
            }
            let chunk = self
                .runtime
                .block_on(self.tx.query_portal(&self.portal, CHUNK))?;
            self.done = chunk.len() < CHUNK as usize;
            self.chunk = chunk.into_iter();
        }
    }
}

impl Cells for &Row {
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        get(self, i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        get(self, i)
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        get(self, i)
    }

    fn opt_text(&self, i: usize) -> Result<Option<&[u8]>, StoreError> {
        Ok(get::<Option<&str>>(self, i)?.map(str::as_bytes))
    }

    /// Native uuids: one spelling each, sorted as uuids.
    fn key(&self, i: usize) -> Result<Key<'_>, StoreError> {
        Ok(Key::Uuid(get(self, i)?))
    }
}
