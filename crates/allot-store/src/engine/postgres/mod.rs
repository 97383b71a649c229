//! The shared engine: a PostgreSQL (15 or newer) database that several allot nodes
//! use at once.
//!
//! # Driver and connections
//!
//! tokio-postgres, driven from the host's writer thread (a plain std thread that
//! blocks on every write anyway) by a current-thread runtime that the connection
//! owns: the engine's calls are synchronous, and no lock of ours is ever held across
//! an `.await`, because no code of ours awaits anything but the driver. It is the
//! async driver rather than the synchronous `postgres` crate (the same driver with a
//! blocking face) for one thing the blocking face cannot do: **pipelining**. A batch
//! of claims is hundreds of small statements; sent one at a time, each costs a round
//! trip while every node's writer waits on the log's lock, and that, not the
//! server's work, bounded a three-node storm (about 2,000 claims/s, the machine half
//! idle). Pipelined, a write's statements go out together and their answers come
//! back together (`pipeline`). sqlx would add a macro and pool layer we have no use
//! for. Reads never come here (they are served from the in-memory view), so a node
//! needs exactly two connections, not a pool:
//!
//! - the writer's ([`PgEngine`]): loads, catches up and writes, one thing at a time,
//!   as the host's one writer thread asks. Every writer of every node takes the same
//!   row lock (`allot_log_head`) first, so a second write connection per node would
//!   only queue on that lock. The load runs here too, in a repeatable-read snapshot of
//!   its own: it happens at start and when the host rebuilds its view, both times on
//!   the writer thread with no write in flight, so a connection of its own would sit
//!   idle the rest of the time;
//! - the listener's ([`PgListener`], through `Store::listener`): a session that sits
//!   in `LISTEN allot_log` so that a node learns at once that another one committed
//!   (the host's writer wakes on it, and also polls on a short timer in case an
//!   announcement is lost). It blocks in one call and pipelines nothing, so it keeps
//!   the synchronous crate's blocking wait for notifications.
//!
//! Three nodes hold six connections, far below PostgreSQL's default limit of 100.
//!
//! Connection loss: a call that finds its connection closed reconnects, retrying
//! with a doubling pause for a few seconds before it gives up with an error
//! (`target`). A write in flight when the connection drops fails with
//! [`StoreError::Postgres`] (the host answers 503); PostgreSQL rolls its transaction
//! back, so nothing of it remains.
//!
//! # Where each part lives
//!
//! The tables, the statements each change writes and the load are the SQLite
//! engine's too (`super::sql`, `super::load`); this engine keeps what is its own:
//!
//! - `target`: where a node connects and how (the URL, libpq's TLS arguments read by
//!   [`crate::pg_tls`], the connect timeout), the reconnect's retries, and [`redact`];
//! - `connection`: the writer's connection (a client and the runtime that drives it)
//!   and its transactions;
//! - `dialect`: PostgreSQL's spelling of the neutral statements ([`Postgres`]);
//! - `schema`: the migrations, and the schema version;
//! - `log`: the change log (its head, the commits after a cursor) and the write
//!   transaction that appends to it;
//! - `pipeline`: a write's statements, sent in one go;
//! - `reader`: the load, one snapshot read through portals;
//! - `listener`: [`PgListener`], the wait for other nodes' commits;
//! - `lease`: [`PgLease`], the cluster's writer role.

use postgres::types::FromSql;
use postgres::Row;

use crate::StoreError;

mod connection;
mod dialect;
mod lease;
mod listener;
mod log;
mod pipeline;
mod reader;
mod schema;
mod target;
#[cfg(test)]
mod testing;

use connection::Conn;
pub(crate) use dialect::Postgres;
pub use lease::PgLease;
pub use listener::PgListener;
use schema::migrate;
pub use schema::schema_version;
pub use target::redact;
use target::{target, Target};

/// The PostgreSQL engine: the writer's connection.
pub struct PgEngine {
    target: Target,
    /// `None` after the connection was found broken and a reconnect failed.
    conn: Option<Conn>,
}

impl std::fmt::Debug for PgEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEngine")
            .field("hosts", &self.target.config.get_hosts())
            .field("dbname", &self.target.config.get_dbname())
            .field("sslmode", &self.target.tls.mode)
            .finish_non_exhaustive()
    }
}

impl PgEngine {
    /// Connects to the database `url` names and migrates it.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let target = target(url)?;
        let mut conn = Conn::open(&target)?;
        migrate(&mut conn)?;
        Ok(PgEngine {
            target,
            conn: Some(conn),
        })
    }

    /// The connection, made again if it broke.
    /// The cluster key, made by the first node that asks
    /// (`crate::engine::cluster_key`): nodes that ask together insert one row
    /// between them, and all read it.
    pub fn cluster_key(&mut self) -> Result<crate::engine::cluster_key::ClusterKey, StoreError> {
        use crate::engine::cluster_key::{fresh_hex, from_cell, READ};
        let fresh = fresh_hex()?;
        let conn = self.conn()?;
        conn.runtime.block_on(conn.client.batch_execute(&format!(
            "INSERT INTO allot_cluster_key (id, secret) VALUES (1, decode('{fresh}', 'hex')) \
             ON CONFLICT (id) DO NOTHING"
        )))?;
        let row = conn.runtime.block_on(conn.client.query_one(READ, &[]))?;
        from_cell(get::<&[u8]>(&row, 0)?)
    }

    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            self.conn = Some(crate::engine::reconnect("PostgreSQL", || {
                Conn::open(&self.target)
            })?);
        }
        match &mut self.conn {
            Some(conn) => Ok(conn),
            None => unreachable!("just connected"),
        }
    }
}

/// Column `i` of a row, a type mismatch being an error instead of a panic.
fn get<'r, T: FromSql<'r>>(row: &'r Row, i: usize) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

#[cfg(test)]
mod tests {
    //! The writer's connection on a real server (`ALLOT_TEST_POSTGRES_URL`; without
    //! one a case is skipped by the store suite's rule, `tests/skip`).

    use super::testing::{client, trait_change, Database};
    use super::*;
    use crate::Cursor;

    #[test]
    fn a_dropped_writer_connection_reconnects() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        a.write(Some(Cursor(0)), &mut |_| trait_change("CUSTOM_A"))
            .unwrap();
        let pid: i32 = {
            let conn = a.conn().unwrap();
            conn.runtime
                .block_on(conn.client.query_one("SELECT pg_backend_pid()", &[]))
                .unwrap()
                .get(0)
        };
        client(&db)
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
        // The first call after may fail (it finds out); the next one reconnects.
        let head = a.head().or_else(|_| a.head()).unwrap();
        assert_eq!(head, Cursor(1));
        assert_eq!(
            a.write(Some(Cursor(1)), &mut |_| trait_change("CUSTOM_B"))
                .unwrap(),
            Cursor(2)
        );
    }
}
