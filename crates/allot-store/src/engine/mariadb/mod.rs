//! The MariaDB engine (issue 45): the database where OpenStack deployments keep
//! their state, MariaDB 10.6 or newer, on its own or clustered with Galera.
//!
//! # Driver and connections
//!
//! mysql_async, the maintained async driver, driven from the host's writer
//! thread by a current-thread runtime that the connection owns, as the
//! PostgreSQL engine drives tokio-postgres (`super::postgres` says why): the
//! engine's calls are synchronous, and nothing of ours awaits but the driver. A
//! node needs one connection, the writer's ([`MyEngine`]): it loads, catches up
//! and writes, one thing at a time. MariaDB has no `LISTEN`, so a node learns of
//! other nodes' commits when the host reads the log on its timer.
//!
//! Connection loss: a call that finds its connection broken connects again,
//! retrying with a doubling pause for a few seconds before it gives up with an
//! error. A write in flight when the connection drops fails with
//! [`StoreError::MariaDb`] (the host answers 503), and the server rolls its
//! transaction back.
//!
//! # Where each part lives
//!
//! The tables, the statements each change writes and the load are the other
//! engines' too (`super::sql`, `super::load`); this engine keeps what is its own:
//!
//! - `target`: the URL (`mysql://`, `mariadb://`, SQLAlchemy's `mysql+pymysql://`)
//!   and its TLS arguments (read by `crate::my_tls`),
//!   the session every connection starts with, and the URL of another database
//!   on the same server (allot's beside Placement's);
//! - `connection`: the writer's connection and its transactions, and the
//!   statements' numbered parameters turned into MariaDB's positional ones;
//! - `dialect`: MariaDB's spelling of the neutral statements ([`MariaDb`]);
//! - `schema`: the migrations, and the schema version;
//! - `log`: the change log and the write transaction that appends to it;
//! - `script`: a write's statements as one text, their values as literals;
//! - `lease`: [`MyLease`], the cluster's writer role, and the fence every commit
//!   checks;
//! - `reader`: the load, one snapshot, each query read whole.

use mysql_async::{Row, Value as MyValue};

use crate::{Fence, StoreError};

mod connection;
mod dialect;
mod lease;
mod log;
mod reader;
mod schema;
mod script;
mod target;

use connection::Conn;
pub(crate) use dialect::MariaDb;
pub use lease::MyLease;
pub use schema::schema_version;
pub(crate) use target::{beside, is_mariadb};
pub use target::{check_database_name, split_password};
use target::{target, Target};

/// The MariaDB engine: the writer's connection.
pub struct MyEngine {
    target: Target,
    /// `None` after the connection was found broken and a reconnect failed.
    conn: Option<Conn>,
    /// The epoch a commit must find in the log's head, once this node's lease
    /// armed it (`lease`).
    pub(crate) fence: Fence,
}

impl std::fmt::Debug for MyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MyEngine")
            .field("url", &self.target.shown)
            .finish_non_exhaustive()
    }
}

impl MyEngine {
    /// Connects to the database `url` names and migrates it.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let target = target(url)?;
        let mut conn = Conn::open(&target)?;
        schema::migrate(&mut conn)?;
        Ok(MyEngine {
            target,
            conn: Some(conn),
            fence: Fence::new(),
        })
    }

    /// The cluster key, made by the first node that asks
    /// (`crate::engine::cluster_key`). On Galera, nodes that insert together
    /// through different Galera nodes may lose at certification (a deadlock
    /// error): the loser wrote nothing and reads the winner's row after trying
    /// again.
    pub fn cluster_key(&mut self) -> Result<crate::engine::cluster_key::ClusterKey, StoreError> {
        use crate::engine::cluster_key::{fresh_hex, from_cell, READ};
        let mut tries = 0;
        loop {
            let fresh = fresh_hex()?;
            let inserted = self.conn()?.batch(&format!(
                "INSERT IGNORE INTO allot_cluster_key (id, secret) VALUES (1, X'{fresh}')"
            ));
            match inserted {
                Err(StoreError::Conflict(_)) if tries < 10 => tries += 1,
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
        let rows = self.conn()?.query(READ)?;
        match rows.first().and_then(|row| row.as_ref(0)) {
            Some(MyValue::Bytes(cell)) => from_cell(cell),
            other => Err(StoreError::Corrupt(format!("allot_cluster_key: {other:?}"))),
        }
    }

    /// The connection, made again if it broke.
    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.broken) {
            if let Some(old) = self.conn.take() {
                drop(old);
            }
            self.conn = Some(crate::engine::reconnect("MariaDB", || {
                Conn::open(&self.target)
            })?);
        }
        match &mut self.conn {
            Some(conn) => Ok(conn),
            None => unreachable!("just connected"),
        }
    }

    /// Closes the connection politely.
    pub fn close(mut self) {
        if let Some(conn) = self.conn.take() {
            conn.close();
        }
    }
}

/// An integer cell (column `i` of `row`): the binary protocol's integer, or the
/// text protocol's digits.
fn int(row: Option<&Row>, i: usize) -> Result<i64, StoreError> {
    let corrupt = |what: String| StoreError::Corrupt(format!("column {i}: {what}"));
    match row.and_then(|row| row.as_ref(i)) {
        Some(MyValue::Int(n)) => Ok(*n),
        Some(MyValue::UInt(n)) => i64::try_from(*n).map_err(|e| corrupt(e.to_string())),
        Some(MyValue::Bytes(text)) => std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| {
                corrupt(format!(
                    "{:?} is not an integer",
                    String::from_utf8_lossy(text)
                ))
            }),
        other => Err(corrupt(format!("{other:?}"))),
    }
}
