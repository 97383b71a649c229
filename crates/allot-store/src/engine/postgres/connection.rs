//! The writer's connection ([`Conn`]: a tokio-postgres client and the
//! current-thread runtime that drives it, with the statements prepared on it) and
//! its transactions ([`Tx`]), each call blocking until the server answers. The
//! engine's calls are synchronous and no lock of ours is held across an `.await`:
//! the only code that awaits is the driver's, on this runtime.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{IsolationLevel, Row, Statement};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Transaction, TransactionBuilder};

use super::pipeline::in_order;
use super::target::Target;
use crate::StoreError;

/// The writer's connection: a tokio-postgres client and the current-thread runtime
/// that drives it. The connection's task runs only while a call blocks on the
/// runtime, which is exactly when there is something to send or receive.
pub(super) struct Conn {
    pub(super) runtime: Runtime,
    pub(super) client: Client,
    /// Statements prepared on this connection (a new connection prepares again).
    pub(super) statements: HashMap<&'static str, Statement>,
}

impl Conn {
    pub(super) fn open(target: &Target) -> Result<Conn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = target.connect(&runtime)?;
        Ok(Conn {
            runtime,
            client,
            statements: HashMap::new(),
        })
    }

    /// `sql`, prepared once per connection.
    pub(super) fn statement(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.runtime.block_on(self.client.prepare(sql))?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    /// A transaction at the server's default isolation (read committed).
    pub(super) fn begin(&mut self) -> Result<Tx<'_>, StoreError> {
        self.start(|tx| tx)
    }

    /// A read-only transaction that sees one snapshot throughout.
    pub(super) fn begin_snapshot(&mut self) -> Result<Tx<'_>, StoreError> {
        self.start(|tx| {
            tx.isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
        })
    }

    /// A transaction with the settings `how` gives it.
    fn start(
        &mut self,
        how: impl FnOnce(TransactionBuilder<'_>) -> TransactionBuilder<'_>,
    ) -> Result<Tx<'_>, StoreError> {
        let Conn {
            runtime,
            client,
            statements,
        } = self;
        let tx = runtime.block_on(how(client.build_transaction()).start())?;
        Ok(Tx {
            runtime,
            statements,
            tx: Some(tx),
        })
    }
}

/// A transaction with blocking calls. Dropped without [`Tx::commit`], it rolls back
/// there and then ([`Drop`]).
pub(super) struct Tx<'c> {
    pub(super) runtime: &'c Runtime,
    pub(super) statements: &'c mut HashMap<&'static str, Statement>,
    /// `None` once committed or rolled back.
    pub(super) tx: Option<Transaction<'c>>,
}

impl Drop for Tx<'_> {
    /// The driver's own drop only queues the `ROLLBACK` until this connection's next
    /// call, and until then the transaction would keep its locks, the log's head
    /// among them, and stall every node's writer: so it is sent and awaited here.
    /// (An error means the connection is gone, and the server rolls back anyway.)
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = self.runtime.block_on(tx.rollback());
        }
    }
}

impl Tx<'_> {
    pub(super) fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, StoreError> {
        Ok(self.runtime.block_on(self.tx().query_one(sql, params))?)
    }

    pub(super) fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        Ok(self.runtime.block_on(self.tx().execute(sql, params))?)
    }

    pub(super) fn batch_execute(&self, sql: &str) -> Result<(), StoreError> {
        Ok(self.runtime.block_on(self.tx().batch_execute(sql))?)
    }

    /// Prepares, together, the statements among `sqls` that this connection has not
    /// prepared yet.
    pub(super) fn prepare(
        &mut self,
        sqls: impl Iterator<Item = &'static str>,
    ) -> Result<(), StoreError> {
        let mut missing: Vec<&'static str> = sqls
            .filter(|sql| !self.statements.contains_key(sql))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let prepared = self
            .runtime
            .block_on(in_order(missing.iter().map(|sql| self.tx().prepare(sql))));
        for (sql, statement) in missing.into_iter().zip(prepared) {
            self.statements.insert(sql, statement?);
        }
        Ok(())
    }

    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        let tx = self
            .tx
            .take()
            .expect("a transaction is open until committed");
        Ok(self.runtime.block_on(tx.commit())?)
    }

    /// The driver's transaction (open until [`Tx::commit`] or drop).
    pub(super) fn tx(&self) -> &Transaction<'_> {
        self.tx
            .as_ref()
            .expect("a transaction is open until committed")
    }
}
