//! The writer's connection ([`Conn`]: a mysql_async connection and the
//! current-thread runtime that drives it) and its transactions ([`Tx`]), each call
//! blocking until the server answers. As in the PostgreSQL engine, the engine's
//! calls are synchronous and only the driver's code awaits, on this runtime.
//!
//! Statements are the shared ones, numbered as in SQLite (`?1`); each is turned
//! into MariaDB's positional form once per process ([`positional`]) and prepared
//! once per connection by the driver's statement cache.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Row, Value as MyValue};
use tokio::runtime::Runtime;

use super::dialect::positional;
use super::target::Target;
use crate::engine::sql::Value;
use crate::StoreError;

/// The writer's connection: a mysql_async connection and the current-thread
/// runtime that drives it.
pub(super) struct Conn {
    pub(super) runtime: Runtime,
    conn: mysql_async::Conn,
    /// Set when a call failed in a way that leaves the connection unusable (the
    /// server went away, the protocol broke): the engine connects again.
    pub(super) broken: bool,
}

/// A server error's code (`None` for the driver's own errors).
pub(super) fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(e) => Some(e.code),
        _ => None,
    }
}

/// MariaDB's "Duplicate entry": a unique value (a name, a uuid) another write took.
pub(super) const DUPLICATE: u16 = 1062;

/// MariaDB's "Column cannot be null".
const BAD_NULL: u16 = 1048;

/// MariaDB's error for a `SIGNAL` with a state of the user's (`45000`).
const SIGNALLED: u16 = 1644;

/// MariaDB's "Deadlock found": on Galera, also a transaction aborted at commit
/// because a conflicting one on another node was certified first.
pub(super) const DEADLOCK: u16 = 1213;

impl Conn {
    pub(super) fn open(target: &Target) -> Result<Conn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn = target.connect(&runtime)?;
        Ok(Conn {
            runtime,
            conn,
            broken: false,
        })
    }

    /// A driver error as the store's, noting a connection that cannot serve on.
    fn failed(&mut self, e: mysql_async::Error) -> StoreError {
        if e.is_fatal() {
            self.broken = true;
        }
        match code(&e) {
            Some(DUPLICATE) => StoreError::Stale(e.to_string()),
            Some(DEADLOCK) => StoreError::Conflict(e.to_string()),
            _ => StoreError::MariaDb(e.to_string()),
        }
    }

    /// Runs statements that take no parameters (the text protocol).
    pub(super) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        let done = self.runtime.block_on(self.conn.query_drop(sql));
        done.map_err(|e| self.failed(e))
    }

    /// Runs several statements (`;`-separated, text protocol) in one round trip;
    /// returns the rows each one read (none for one that is not a query). The
    /// first that fails is the error, and none after it runs.
    pub(super) fn sets(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, StoreError> {
        let read = self.runtime.block_on(async {
            let mut result = self.conn.query_iter(sql).await?;
            let mut sets = Vec::new();
            loop {
                sets.push(result.collect::<Row>().await?);
                if result.is_empty() {
                    return Ok(sets);
                }
            }
        });
        read.map_err(|e| self.failed(e))
    }

    /// [`Conn::begin`] and `then` (statements of the transaction) in one round
    /// trip; the sets are `then`'s.
    pub(super) fn begin_with(&mut self, then: &str) -> Result<(Tx<'_>, Vec<Vec<Row>>), StoreError> {
        let sets = self.sets(&format!("START TRANSACTION; {then}"));
        // From here on the transaction is rolled back if anything fails.
        let tx = Tx {
            conn: self,
            open: true,
        };
        let mut sets = sets?;
        sets.remove(0);
        Ok((tx, sets))
    }

    /// Runs one statement with `values` for its numbered parameters; returns the
    /// rows it matched (found rows, not only changed ones: `super::target`).
    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        values: &[Value<'_>],
    ) -> Result<u64, StoreError> {
        let (sql, params) = bind(sql, values);
        let done = self.runtime.block_on(self.conn.exec_drop(sql, params));
        done.map_err(|e| self.failed(e))?;
        Ok(self.conn.affected_rows())
    }

    /// Runs one query with `values` for its numbered parameters; returns its rows.
    pub(super) fn rows(
        &mut self,
        sql: &'static str,
        values: &[Value<'_>],
    ) -> Result<Vec<Row>, StoreError> {
        let (sql, params) = bind(sql, values);
        let rows = self.runtime.block_on(self.conn.exec(sql, params));
        rows.map_err(|e| self.failed(e))
    }

    /// Runs a query that takes no parameters, with the text protocol (a load's
    /// queries: prepared once, used once).
    pub(super) fn query(&mut self, sql: &str) -> Result<Vec<Row>, StoreError> {
        let rows = self.runtime.block_on(self.conn.query(sql));
        rows.map_err(|e| self.failed(e))
    }

    /// A transaction with the session's isolation (read committed).
    pub(super) fn begin(&mut self) -> Result<Tx<'_>, StoreError> {
        self.batch("START TRANSACTION")?;
        Ok(Tx {
            conn: self,
            open: true,
        })
    }

    /// A read-only transaction that sees one snapshot throughout, taken at its
    /// start.
    pub(super) fn begin_snapshot(&mut self) -> Result<Tx<'_>, StoreError> {
        self.batch("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")?;
        self.batch("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")?;
        Ok(Tx {
            conn: self,
            open: true,
        })
    }

    /// Closes the connection politely (the server logs an aborted one otherwise).
    pub(super) fn close(self) {
        let Conn { runtime, conn, .. } = self;
        let _ = runtime.block_on(conn.disconnect());
    }
}

/// A transaction. Dropped without [`Tx::commit`], it rolls back there and then, so
/// that its locks (the log's head among them) are not held until the next call.
pub(super) struct Tx<'c> {
    pub(super) conn: &'c mut Conn,
    open: bool,
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // An error means the connection is gone, and the server rolls back.
            let _ = self.conn.batch("ROLLBACK");
        }
    }
}

impl Tx<'_> {
    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        self.open = false;
        self.conn.batch("COMMIT")
    }

    /// Runs `script`, a block of the transaction's statements and its `COMMIT`
    /// (`super::script`). Returns the statement the block stopped at, if one matched
    /// no row (the transaction is then rolled back); any other failure is the
    /// error (a duplicate key or a missing parent [`StoreError::Stale`]), and the
    /// transaction is rolled back too (a `COMMIT` refused on Galera leaves none).
    pub(super) fn commit_script(mut self, script: &str) -> Result<Option<usize>, StoreError> {
        let done = self
            .conn
            .runtime
            .block_on(self.conn.conn.query_drop(script));
        match done {
            Ok(()) => {
                self.open = false;
                Ok(None)
            }
            // A row under a parent that is gone (`Rendered::checked`): a write the
            // plan did not see, as a statement that matched no row.
            Err(mysql_async::Error::Server(e)) if e.code == BAD_NULL => {
                Err(StoreError::Stale(e.message))
            }
            Err(mysql_async::Error::Server(e)) if e.code == SIGNALLED => {
                match super::script::unmatched(&e.message) {
                    Some(i) => Ok(Some(i)),
                    None => Err(StoreError::MariaDb(e.to_string())),
                }
            }
            Err(e) => Err(self.conn.failed(e)),
        }
    }
}

/// A statement in MariaDB's positional form, and which value each `?` takes.
type Positional = (&'static str, &'static [usize]);

/// `sql` in MariaDB's positional form (made once per process), with `values` in
/// the order its `?`s take them.
fn bind(sql: &'static str, values: &[Value<'_>]) -> (&'static str, Params) {
    static FORMS: OnceLock<Mutex<HashMap<&'static str, Positional>>> = OnceLock::new();
    let (text, order) = *FORMS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(sql)
        .or_insert_with(|| {
            // Leaked once per statement: the statements are a fixed set.
            let (text, order) = positional(sql);
            (
                Box::leak(text.into_boxed_str()),
                Box::leak(order.into_boxed_slice()),
            )
        });
    let params = if order.is_empty() {
        Params::Empty
    } else {
        Params::Positional(order.iter().map(|&i| value(values[i])).collect())
    };
    (text, params)
}

/// A neutral value as the driver's.
fn value(value: Value<'_>) -> MyValue {
    match value {
        Value::Int(n) => MyValue::Int(n),
        Value::Float(x) => MyValue::Double(x),
        Value::Text(text) => MyValue::Bytes(text.as_bytes().to_vec()),
        // The one spelling allot writes: hyphenated, lower case.
        Value::Uuid(uuid) => MyValue::Bytes(uuid.hyphenated().to_string().into_bytes()),
        Value::Null(_) => MyValue::NULL,
    }
}
