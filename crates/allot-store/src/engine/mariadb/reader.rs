//! The load: the whole database and the log's head read in one snapshot (a
//! repeatable-read, read-only transaction started `WITH CONSISTENT SNAPSHOT`),
//! through the load that every engine shares (`crate::engine::load`).
//!
//! The shared load keeps several queries open at once (a provider's table beside
//! the tables of what it holds), and MariaDB's protocol allows one open result
//! set per connection; a second connection would read another snapshot. So each
//! query's rows are read whole, into memory, before the load steps through them:
//! the price is that the largest table (allocations, or inventories) is held whole
//! at the peak of start-up, beside the view being built.

use std::cell::RefCell;

use allot_core::State;
use mysql_async::{Row, Value as MyValue};

use super::connection::Conn;
use super::{int, MyEngine};
use crate::engine::load::{self, Cells, Key, Rows, Source};
use crate::{Cursor, StoreError};

impl MyEngine {
    /// Reads the whole database and the log head into a view, in one snapshot, so
    /// that the view is exactly the state after commit `head`.
    pub fn load(&mut self) -> Result<(State, Cursor), StoreError> {
        let tx = self.conn()?.begin_snapshot()?;
        let loaded = head_and_view(&mut *tx.conn)?;
        tx.commit()?;
        Ok(loaded)
    }

    /// [`MyEngine::load`] on a connection of its own that neither migrates nor
    /// writes (`Store::read_only_snapshot`, for `allot export` beside running
    /// nodes): the snapshot is read-only and takes no lock a writer waits on (nor
    /// the migration's named lock, nor the lease), and the schema is read in it and
    /// must be this build's.
    pub fn read_snapshot(url: &str) -> Result<(State, Cursor), StoreError> {
        let target = super::target(url)?;
        let mut engine = MyEngine {
            conn: Some(Conn::open(&target)?),
            target,
            fence: crate::Fence::new(),
        };
        let read = engine.read_in_snapshot();
        engine.close();
        read
    }

    /// The schema's version, checked, then the load, in one snapshot.
    fn read_in_snapshot(&mut self) -> Result<(State, Cursor), StoreError> {
        let tx = self.conn()?.begin_snapshot()?;
        let made = int(
            tx.conn
                .query(
                    "SELECT count(*) FROM information_schema.tables \
                     WHERE table_schema = DATABASE() AND table_name = 'schema_version'",
                )?
                .first(),
            0,
        )?;
        let version = if made > 0 {
            int(
                tx.conn
                    .query("SELECT version FROM schema_version WHERE id = 1")?
                    .first(),
                0,
            )?
        } else {
            0
        };
        crate::schema_is_current(version, super::schema_version())?;
        let loaded = head_and_view(&mut *tx.conn)?;
        tx.commit()?;
        Ok(loaded)
    }
}

/// The log's head and the view, read on a connection inside a snapshot transaction
/// (the load at start-up and the read-only snapshot alike).
fn head_and_view(conn: &mut Conn) -> Result<(State, Cursor), StoreError> {
    let head = int(
        conn.query("SELECT seq FROM allot_log_head WHERE id = 1")?
            .first(),
        0,
    )?;
    let state = load::load(Reader(RefCell::new(conn)))?;
    Ok((state, Cursor(head)))
}

/// A snapshot transaction's connection as the load's [`Source`].
struct Reader<'c>(RefCell<&'c mut Conn>);

impl Source for Reader<'_> {
    type Rows<'s> = Buffered;

    fn rows<T>(
        &self,
        sql: &str,
        each: impl FnOnce(&mut Buffered) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let rows = self.0.borrow_mut().query(sql)?;
        each(&mut Buffered {
            rows: rows.into_iter(),
            row: None,
        })
    }
}

/// A query's rows, read whole.
struct Buffered {
    rows: std::vec::IntoIter<Row>,
    /// The current row.
    row: Option<Row>,
}

impl Rows for Buffered {
    type Row<'r>
        = &'r Row
    where
        Self: 'r;

    fn next(&mut self) -> Result<Option<&Row>, StoreError> {
        self.row = self.rows.next();
        Ok(self.row.as_ref())
    }
}

/// Column `i` of a row, as the driver read it.
fn cell(row: &Row, i: usize) -> Result<&MyValue, StoreError> {
    row.as_ref(i)
        .ok_or_else(|| StoreError::Corrupt(format!("no column {i}")))
}

impl Cells for &Row {
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        int(Some(self), i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match cell(self, i)? {
            MyValue::NULL => Ok(None),
            _ => int(Some(self), i).map(Some),
        }
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        match cell(self, i)? {
            MyValue::Double(x) => Ok(*x),
            MyValue::Float(x) => Ok(f64::from(*x)),
            // The text protocol's spelling.
            MyValue::Bytes(text) => std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| StoreError::Corrupt(format!("column {i}: not a number"))),
            other => Err(StoreError::Corrupt(format!("column {i}: {other:?}"))),
        }
    }

    fn opt_text(&self, i: usize) -> Result<Option<&[u8]>, StoreError> {
        match cell(self, i)? {
            MyValue::NULL => Ok(None),
            MyValue::Bytes(text) => Ok(Some(text)),
            other => Err(StoreError::Corrupt(format!("column {i}: {other:?}"))),
        }
    }

    /// Uuids are their text, sorted byte by byte (`super::dialect`).
    fn key(&self, i: usize) -> Result<Key<'_>, StoreError> {
        Ok(Key::Text(self.text(i)?))
    }
}
