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
//! back together ([`Pipeline`]). sqlx would add a macro and pool layer we have no use
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
//! with a doubling pause for a few seconds before it gives up with an error. A write
//! in flight when the connection drops fails with [`StoreError::Postgres`] (the host
//! answers 503); PostgreSQL rolls its transaction back, so nothing of it remains.
//!
//! # Schema
//!
//! The tables mirror the SQLite engine's, row for row, with what PostgreSQL does
//! naturally where SQLite needed a workaround: uuids (providers, consumers,
//! aggregates, claims) are the native `uuid` type, so one uuid has one spelling and
//! the load never needs to look for duplicates; integers are `bigint`, allocation
//! ratios `double precision`; upserts are `INSERT ... ON CONFLICT` instead of
//! `INSERT OR REPLACE`. The schema version is the one row of `schema_version`;
//! [`MIGRATIONS`] lists the scripts, each run in a transaction of its own under an
//! advisory lock, so nodes starting together migrate once.
//!
//! # The change log
//!
//! `allot_log(seq, at, changes)` holds every commit's changes (encoded), and
//! `allot_log_head(seq)` the newest `seq` (0: nothing committed yet). A write
//! locks the head row (`SELECT ... FOR UPDATE`), which serialises the writers of
//! every node; reads the commits after the caller's cursor so that the caller can
//! catch up before it plans; writes the planned changes with their preconditions
//! checked (a provider's or consumer's generation, the absence of a row to create:
//! a failed one is [`StoreError::Stale`]); appends one log row; moves the head;
//! `NOTIFY allot_log`; and commits. The log keeps the last [`LOG_KEEP`] commits; a
//! cursor older than that gets [`StoreError::Behind`] (the node must load again).
//! So does a cursor ahead of the head (the SQLite engine calls that corrupt): on a
//! server database it means the database was restored or replaced under running
//! nodes, and loading again is the way back. A unique violation in a write (a name
//! or uuid another writer took) is `Stale` too, like the preconditions.
//!
//! Where this differs from the SQLite engine's schema: the log is `allot_log` with
//! its head in a row of its own (`allot_log_head`), since the head row is the lock
//! every node's writer takes (SQLite's single writer lock does that job there, and
//! its head is `max(seq)`).

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::str::FromStr;
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use allot_core::{
    Allocation, Change, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, TraitName, TraitRecord, Uuid,
};
use futures_util::future::MaybeDone;
use futures_util::TryStreamExt;
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, ToSql};
use postgres::{IsolationLevel, NoTls, Row, Statement};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, Transaction};

use super::{lost_race, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

/// The parameters of one statement of a write ([`Param`]s), boxed. (A macro must
/// come before its uses.)
macro_rules! params {
    ($($p:expr),* $(,)?) => { vec![$(Box::new($p) as Param<'_>),*] };
}

/// Schema migrations, in order; `schema_version.version` is how many have run.
pub const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE resource_classes (
    name       text PRIMARY KEY,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE TABLE class_metadata (
    name         text PRIMARY KEY,
    units        text,
    display_name text,
    description  text
);
CREATE TABLE traits (
    name       text PRIMARY KEY,
    created_at bigint NOT NULL
);
CREATE TABLE providers (
    id         bigint PRIMARY KEY,
    uuid       uuid NOT NULL UNIQUE,
    name       text NOT NULL UNIQUE,
    generation bigint NOT NULL,
    parent_id  bigint,
    root_id    bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE TABLE inventories (
    provider_id      bigint NOT NULL,
    resource_class   text NOT NULL,
    total            bigint NOT NULL,
    reserved         bigint NOT NULL,
    min_unit         bigint NOT NULL,
    max_unit         bigint NOT NULL,
    step_size        bigint NOT NULL,
    allocation_ratio double precision NOT NULL,
    PRIMARY KEY (provider_id, resource_class)
);
CREATE TABLE provider_traits (
    provider_id bigint NOT NULL,
    trait       text NOT NULL,
    PRIMARY KEY (provider_id, trait)
);
CREATE TABLE provider_aggregates (
    provider_id bigint NOT NULL,
    aggregate   uuid NOT NULL,
    PRIMARY KEY (provider_id, aggregate)
);
CREATE TABLE consumers (
    uuid          uuid PRIMARY KEY,
    project_id    text NOT NULL,
    user_id       text NOT NULL,
    consumer_type text,
    generation    bigint NOT NULL,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL
);
CREATE TABLE allocations (
    consumer_uuid  uuid NOT NULL,
    provider_id    bigint NOT NULL,
    resource_class text NOT NULL,
    used           bigint NOT NULL,
    PRIMARY KEY (consumer_uuid, provider_id, resource_class)
);
CREATE INDEX allocations_by_provider ON allocations (provider_id);
CREATE INDEX allocations_by_class ON allocations (resource_class);
CREATE INDEX inventories_by_class ON inventories (resource_class);
CREATE TABLE claims (
    uuid          uuid PRIMARY KEY,
    consumer_uuid uuid NOT NULL,
    project_id    text NOT NULL,
    user_id       text NOT NULL,
    consumer_type text,
    tag           text,
    state         text NOT NULL,
    created_at    bigint NOT NULL,
    expires_at    bigint,
    ended_at      bigint
);
CREATE TABLE claim_allocations (
    claim_uuid     uuid NOT NULL,
    provider_uuid  uuid NOT NULL,
    resource_class text NOT NULL,
    amount         bigint NOT NULL,
    PRIMARY KEY (claim_uuid, provider_uuid, resource_class)
);
CREATE TABLE allot_log (
    seq     bigint PRIMARY KEY,
    at      bigint NOT NULL,
    changes bytea NOT NULL
);
CREATE TABLE allot_log_head (
    seq bigint NOT NULL
);
INSERT INTO allot_log_head (seq) VALUES (0);
"#];

/// The advisory lock key that migrations take ("allot" in ASCII), so that nodes
/// starting together do not migrate twice.
const MIGRATION_LOCK: i64 = 0x616c6c6f74;

/// How long a reconnect keeps trying (with a doubling pause from 50 ms) before the
/// call that needed the connection fails.
const RECONNECT_FOR: Duration = Duration::from_secs(3);

/// The PostgreSQL engine: the writer's connection.
pub struct PgEngine {
    config: Config,
    /// `None` after the connection was found broken and a reconnect failed.
    conn: Option<Conn>,
}

impl std::fmt::Debug for PgEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEngine")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .finish_non_exhaustive()
    }
}

/// Parses a `postgres://` or `postgresql://` URL into a connection config, with a
/// connect timeout unless the URL sets one (an unreachable host must be an error,
/// not a hang).
pub fn config(url: &str) -> Result<Config, StoreError> {
    let mut config = Config::from_str(url).map_err(|e| StoreError::BadUrl {
        url: redact(url),
        reason: e.to_string(),
    })?;
    if config.get_hosts().is_empty() {
        return Err(StoreError::BadUrl {
            url: redact(url),
            reason: "no host: postgres://USER@HOST:PORT/DATABASE".into(),
        });
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("allot");
    // No JIT: allot's statements are small and keyed, but the planner's guesses for
    // the one-row log head made it compile the log's read (120 ms a time, measured
    // under a three-node storm, where the reads themselves take well under 1 ms).
    let options = match config.get_options() {
        Some(given) => format!("{given} -c jit=off"),
        None => "-c jit=off".to_owned(),
    };
    config.options(&options);
    Ok(config)
}

/// The URL without its password (in the user part or as a `password=` parameter),
/// for logs and messages.
pub fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match (base.find("://"), base.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &base[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &base[..scheme + 3],
                    &userinfo[..colon],
                    &base[at..]
                ),
                None => base.to_string(),
            }
        }
        _ => base.to_string(),
    };
    if let Some(query) = query {
        let parameters: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("password", _)) => "password=***".to_string(),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{out}?{}", parameters.join("&"));
    }
    out
}

/// Retries `connect` with a doubling pause for up to [`RECONNECT_FOR`].
fn reconnect<T>(mut connect: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let start = std::time::Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        match connect() {
            Ok(client) => return Ok(client),
            Err(e) if start.elapsed() + pause > RECONNECT_FOR => return Err(e),
            Err(e) => {
                tracing::warn!("PostgreSQL connection lost, retrying in {pause:?}: {e}");
                std::thread::sleep(pause);
                pause *= 2;
            }
        }
    }
}

/// The writer's connection: a tokio-postgres client and the current-thread runtime
/// that drives it. The connection's task runs only while a call blocks on the
/// runtime, which is exactly when there is something to send or receive.
struct Conn {
    runtime: Runtime,
    client: Client,
    /// Statements prepared on this connection (a new connection prepares again).
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    fn open(config: &Config) -> Result<Conn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (client, connection) = runtime.block_on(config.connect(NoTls))?;
        runtime.spawn(async move {
            // Its end shows at the next call (`is_closed`), which reconnects.
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        Ok(Conn {
            runtime,
            client,
            statements: HashMap::new(),
        })
    }

    /// `sql`, prepared once per connection.
    fn statement(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.runtime.block_on(self.client.prepare(sql))?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    /// A transaction at the server's default isolation (read committed).
    fn begin(&mut self) -> Result<Tx<'_>, StoreError> {
        let Conn {
            runtime,
            client,
            statements,
        } = self;
        let tx = runtime.block_on(client.transaction())?;
        Ok(Tx {
            runtime,
            statements,
            tx: Some(tx),
        })
    }

    /// A read-only transaction that sees one snapshot throughout.
    fn begin_snapshot(&mut self) -> Result<Tx<'_>, StoreError> {
        let Conn {
            runtime,
            client,
            statements,
        } = self;
        let tx = runtime.block_on(
            client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start(),
        )?;
        Ok(Tx {
            runtime,
            statements,
            tx: Some(tx),
        })
    }
}

/// A transaction with blocking calls. Dropped without [`Tx::commit`], it rolls back
/// there and then ([`Drop`]).
struct Tx<'c> {
    runtime: &'c Runtime,
    statements: &'c mut HashMap<&'static str, Statement>,
    /// `None` once committed or rolled back.
    tx: Option<Transaction<'c>>,
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
    fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, StoreError> {
        Ok(self.runtime.block_on(self.tx().query_one(sql, params))?)
    }

    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        Ok(self.runtime.block_on(self.tx().execute(sql, params))?)
    }

    fn batch_execute(&self, sql: &str) -> Result<(), StoreError> {
        Ok(self.runtime.block_on(self.tx().batch_execute(sql))?)
    }

    /// Runs every row of `sql` through `each`, streaming (a million rows are never
    /// held at once).
    fn each_row(
        &self,
        sql: &str,
        mut each: impl FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.runtime.block_on(async {
            let rows = self.tx().query_raw(sql, std::iter::empty::<i64>()).await?;
            let mut rows = std::pin::pin!(rows);
            while let Some(row) = rows.try_next().await? {
                each(&row)?;
            }
            Ok(())
        })
    }

    /// Prepares, together, the statements among `sqls` that this connection has not
    /// prepared yet.
    fn prepare(&mut self, sqls: impl Iterator<Item = &'static str>) -> Result<(), StoreError> {
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

    /// Sends the pipeline's statements in one go, then checks what each did: the
    /// first that failed is the error (the ones after it fail too, in an aborted
    /// transaction), and one that had to change a row and changed none means its
    /// change lost a race ([`StoreError::Stale`]).
    fn run(&mut self, pipeline: &Pipeline<'_>) -> Result<(), StoreError> {
        self.prepare(pipeline.ops.iter().map(|op| op.sql))?;
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = pipeline
            .ops
            .iter()
            .map(|op| {
                op.params
                    .iter()
                    .map(|p| &**p as &(dyn ToSql + Sync))
                    .collect()
            })
            .collect();
        let statements = &*self.statements;
        let counts = self.runtime.block_on(in_order(
            pipeline
                .ops
                .iter()
                .zip(&params)
                .map(|(op, params)| self.tx().execute(&statements[op.sql], params)),
        ));
        for (op, count) in pipeline.ops.iter().zip(counts) {
            let count = count?;
            if let (Some(change), false) = (op.one_row_of, count == 1) {
                return Err(StoreError::Stale(lost_race(change)));
            }
        }
        Ok(())
    }

    fn commit(mut self) -> Result<(), StoreError> {
        let tx = self
            .tx
            .take()
            .expect("a transaction is open until committed");
        Ok(self.runtime.block_on(tx.commit())?)
    }

    /// The driver's transaction (open until [`Tx::commit`] or drop).
    fn tx(&self) -> &Transaction<'_> {
        self.tx
            .as_ref()
            .expect("a transaction is open until committed")
    }
}

impl PgEngine {
    /// Connects to the database `url` names and migrates it.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let config = config(url)?;
        let mut conn = Conn::open(&config)?;
        migrate(&mut conn)?;
        Ok(PgEngine {
            config,
            conn: Some(conn),
        })
    }

    /// The connection, made again if it broke.
    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            self.conn = Some(reconnect(|| Conn::open(&self.config))?);
        }
        match &mut self.conn {
            Some(conn) => Ok(conn),
            None => unreachable!("just connected"),
        }
    }

    /// Reads the whole database and the log head into a view, in one snapshot (a
    /// repeatable-read, read-only transaction), so that the view is exactly the
    /// state after commit `head` and catching up from there misses nothing.
    pub fn load(&mut self) -> Result<(State, Cursor), StoreError> {
        let tx = self.conn()?.begin_snapshot()?;
        let head: i64 = get(&tx.query_one("SELECT seq FROM allot_log_head", &[])?, 0)?;
        let state = read(&tx)?;
        tx.commit()?;
        Ok((state, Cursor(head)))
    }

    /// The newest commit's place in the log.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        let conn = self.conn()?;
        let statement = conn.statement("SELECT seq FROM allot_log_head")?;
        let row = conn
            .runtime
            .block_on(conn.client.query_one(&statement, &[]))?;
        Ok(Cursor(get(&row, 0)?))
    }

    /// Every commit after `after`, in order.
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        let after = after.0;
        let conn = self.conn()?;
        // One statement, so one snapshot: the head and the rows agree.
        let statement = conn.statement(
            "SELECT h.seq, l.seq, l.changes FROM allot_log_head h
             LEFT JOIN allot_log l ON l.seq > $1 ORDER BY l.seq",
        )?;
        let rows = conn
            .runtime
            .block_on(conn.client.query(&statement, &[&after]))?;
        let head = match rows.first() {
            Some(row) => get::<i64>(row, 0)?,
            None => return Err(StoreError::Corrupt("allot_log_head has no row".into())),
        };
        commits_after(after, head, &rows, 1)
    }

    /// One write transaction: locks the log head, hands the commits after `at` to
    /// `plan`, writes what it returns with its preconditions checked, logs it as one
    /// commit and notifies the other nodes. Returns the new head (the head as found
    /// if `plan` returned nothing, in which case nothing is written).
    ///
    /// Four round trips, however many changes: `BEGIN`; the lock with the log's
    /// tail; every statement of the changes with the log row (pipelined); `COMMIT`.
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        const LOCK: &str = "SELECT seq FROM allot_log_head FOR UPDATE";
        const TAIL: &str = "SELECT seq, changes FROM allot_log WHERE seq > $1 ORDER BY seq";
        let mut tx = self.conn()?.begin()?;
        tx.prepare([LOCK, TAIL].into_iter())?;
        let (lock, tail) = (&tx.statements[LOCK], &tx.statements[TAIL]);
        // The lock and the commits after `at` in one round trip. Read committed: the
        // second statement's snapshot is taken once the first holds the lock, when
        // every writer before us has committed, so it sees every commit up to the
        // head. (Without a cursor, as for `persist`, there is nothing to read.)
        let (head, rows) = match at {
            // `try_join` polls the first future first: the lock is asked for first.
            Some(Cursor(at)) => tx.runtime.block_on(futures_util::future::try_join(
                tx.tx().query(lock, &[]),
                tx.tx().query(tail, &[&at]),
            ))?,
            None => (tx.runtime.block_on(tx.tx().query(lock, &[]))?, Vec::new()),
        };
        let head: i64 = match head.first() {
            Some(row) => get(row, 0)?,
            None => return Err(StoreError::Corrupt("allot_log_head has no row".into())),
        };
        let commits = match at {
            Some(Cursor(at)) if head != at => commits_after(at, head, &rows, 0)?,
            _ => Vec::new(),
        };
        let changes = plan(commits);
        if changes.is_empty() {
            tx.commit()?;
            return Ok(Cursor(head));
        }
        let seq = head + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut pipeline = Pipeline::default();
        for change in &changes {
            pipeline.change(change);
        }
        // The log row, the head and the announcement in one statement; the
        // announcement is delivered when (and only if) the transaction commits.
        pipeline.push(
            "WITH logged AS (INSERT INTO allot_log (seq, at, changes) VALUES ($1, $2, $3)),
                  moved AS (UPDATE allot_log_head SET seq = $1)
             SELECT pg_notify('allot_log', $1::bigint::text)",
            params![seq, now, crate::log::encode(&changes)],
        );
        if seq % LOG_PRUNE_EVERY == 0 {
            pipeline.push(
                "DELETE FROM allot_log WHERE seq <= $1",
                params![seq - LOG_KEEP],
            );
        }
        tx.run(&pipeline).map_err(stale_if_unique)?;
        tx.commit()?;
        Ok(Cursor(seq))
    }
}

/// The commits in `rows` (seq in column `first`, bytes in the next), checked to be
/// exactly `after + 1 ..= head`: a gap at the start means the log was pruned past
/// `after`, and a cursor ahead of the head means the database is not the one the
/// cursor came from; either way the caller must load again.
fn commits_after(
    after: i64,
    head: i64,
    rows: &[Row],
    first: usize,
) -> Result<Vec<Commit>, StoreError> {
    if after > head {
        return Err(StoreError::Behind(after));
    }
    let mut commits = Vec::with_capacity(rows.len());
    let mut expected = after + 1;
    for row in rows {
        let Some(seq) = get::<Option<i64>>(row, first)? else {
            continue;
        };
        if seq != expected {
            return Err(if commits.is_empty() {
                StoreError::Behind(after)
            } else {
                StoreError::Corrupt(format!("allot_log has no commit {expected}"))
            });
        }
        expected += 1;
        commits.push(Commit {
            cursor: Cursor(seq),
            changes: crate::log::decode(get(row, first + 1)?)?,
        });
    }
    if expected <= head {
        return Err(if commits.is_empty() {
            StoreError::Behind(after)
        } else {
            StoreError::Corrupt(format!("allot_log ends before its head {head}"))
        });
    }
    Ok(commits)
}

/// A unique violation in a write is a lost race (another node created the same
/// name or uuid first): [`StoreError::Stale`], not a failure.
fn stale_if_unique(e: StoreError) -> StoreError {
    match e {
        StoreError::Postgres(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            StoreError::Stale(e.to_string())
        }
        other => other,
    }
}

/// Column `i` of a row, a type mismatch being an error instead of a panic.
fn get<'r, T: FromSql<'r>>(row: &'r Row, i: usize) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// A stored count (an amount, a generation) back as the unsigned number it was.
fn unsigned(row: &Row, i: usize) -> Result<u64, StoreError> {
    let n: i64 = get(row, i)?;
    u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("column {i}: negative {n}")))
}

/// Rows grouped by their provider id (column 0), in id order: `each` gets a
/// provider's rows at a time.
fn by_provider<T>(
    tx: &Tx<'_>,
    sql: &str,
    mut item: impl FnMut(&Row) -> Result<T, StoreError>,
    mut each: impl FnMut(ProviderId, Vec<T>),
) -> Result<(), StoreError> {
    let mut current: Option<(i64, Vec<T>)> = None;
    tx.each_row(sql, |row| {
        let id: i64 = get(row, 0)?;
        match &mut current {
            Some((held, list)) if *held == id => list.push(item(row)?),
            _ => {
                if let Some((held, list)) = current.take() {
                    each(ProviderId(held as u64), list);
                }
                current = Some((id, vec![item(row)?]));
            }
        }
        Ok(())
    })?;
    if let Some((held, list)) = current {
        each(ProviderId(held as u64), list);
    }
    Ok(())
}

/// The load: every table, in the order the view is built in (classes before what
/// names them, providers before what they hold).
fn read(tx: &Tx<'_>) -> Result<State, StoreError> {
    let mut state = State::new();
    let count = |tx: &Tx<'_>, table: &str| -> Result<usize, StoreError> {
        let n: i64 = get(
            &tx.query_one(&format!("SELECT count(*) FROM {table}"), &[])?,
            0,
        )?;
        Ok(n as usize)
    };
    let (providers, consumers) = (count(tx, "providers")?, count(tx, "consumers")?);
    state.reserve(providers, consumers);

    tx.each_row(
        "SELECT name, created_at, updated_at FROM resource_classes",
        |r| {
            state.load_change(Change::PutClass {
                record: ClassRecord {
                    // Trusted: only names the core checked are ever written.
                    name: ResourceClass::new_unchecked(get::<&str>(r, 0)?),
                    created_at: get(r, 1)?,
                    updated_at: get(r, 2)?,
                },
                old_name: None,
            });
            Ok(())
        },
    )?;
    tx.each_row(
        "SELECT name, units, display_name, description FROM class_metadata",
        |r| {
            state.load_change(Change::SetClassMetadata(
                ResourceClass::new_unchecked(get::<&str>(r, 0)?),
                Some(ClassMetadata {
                    units: get(r, 1)?,
                    display_name: get(r, 2)?,
                    description: get(r, 3)?,
                }),
            ));
            Ok(())
        },
    )?;
    tx.each_row("SELECT name, created_at FROM traits", |r| {
        state.load_change(Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(get::<&str>(r, 0)?),
            created_at: get(r, 1)?,
        }));
        Ok(())
    })?;
    tx.each_row(
        "SELECT id, uuid, name, generation, parent_id, root_id, created_at, updated_at
         FROM providers ORDER BY id",
        |r| {
            state.load_provider(ProviderRow {
                id: ProviderId(unsigned(r, 0)?),
                uuid: get(r, 1)?,
                name: get(r, 2)?,
                generation: unsigned(r, 3)?,
                parent: get::<Option<i64>>(r, 4)?.map(|p| ProviderId(p as u64)),
                root: ProviderId(unsigned(r, 5)?),
                created_at: get(r, 6)?,
                updated_at: get(r, 7)?,
            });
            Ok(())
        },
    )?;
    state.relink_children();
    // Class and trait names are shared within each list's provider here; the view
    // interns what it keeps.
    by_provider(
        tx,
        "SELECT provider_id, resource_class, total, reserved, min_unit, max_unit, step_size,
                allocation_ratio
         FROM inventories ORDER BY provider_id",
        |r| {
            Ok((
                ResourceClass::new_unchecked(get::<&str>(r, 1)?),
                Inventory {
                    total: unsigned(r, 2)?,
                    reserved: unsigned(r, 3)?,
                    min_unit: unsigned(r, 4)?,
                    max_unit: unsigned(r, 5)?,
                    step_size: NonZeroU64::new(unsigned(r, 6)?)
                        .ok_or_else(|| StoreError::Corrupt("column 6: step_size of 0".into()))?,
                    allocation_ratio: get(r, 7)?,
                },
            ))
        },
        |id, list| state.load_change(Change::SetInventories(id, list)),
    )?;
    by_provider(
        tx,
        "SELECT provider_id, trait FROM provider_traits ORDER BY provider_id",
        |r| Ok(TraitName::new_unchecked(get::<&str>(r, 1)?)),
        |id, list| state.load_change(Change::SetTraits(id, list)),
    )?;
    by_provider(
        tx,
        "SELECT provider_id, aggregate FROM provider_aggregates ORDER BY provider_id",
        |r| get::<Uuid>(r, 1),
        |id, list| state.load_change(Change::SetAggregates(id, list)),
    )?;

    // Consumers with their allocations, one joined stream in uuid order.
    let mut current: Option<(ConsumerRow, Vec<Allocation>)> = None;
    let (mut project, mut user, mut kind): (Option<Text>, Option<Text>, Option<Text>) =
        (None, None, None);
    // Consecutive consumers mostly share their project, user and type: one copy.
    fn shared(held: &mut Option<Text>, text: &str) -> Text {
        match held {
            Some(t) if t.as_str() == text => t.clone(),
            _ => {
                let t = Text::from(text);
                *held = Some(t.clone());
                t
            }
        }
    }
    tx.each_row(
        "SELECT c.uuid, c.project_id, c.user_id, c.consumer_type, c.generation, c.created_at,
                c.updated_at, a.provider_id, a.resource_class, a.used
         FROM consumers c LEFT JOIN allocations a ON a.consumer_uuid = c.uuid
         ORDER BY c.uuid",
        |r| {
            let uuid: Uuid = get(r, 0)?;
            if current.as_ref().is_none_or(|(row, _)| row.uuid != uuid) {
                if let Some((row, allocations)) = current.take() {
                    // Native uuids are distinct keys: none is in the view yet.
                    state.load_consumer(row, allocations, true);
                }
                let row = ConsumerRow {
                    uuid,
                    project_id: shared(&mut project, get(r, 1)?),
                    user_id: shared(&mut user, get(r, 2)?),
                    consumer_type: get::<Option<&str>>(r, 3)?.map(|t| shared(&mut kind, t)),
                    generation: unsigned(r, 4)?,
                    created_at: get(r, 5)?,
                    updated_at: get(r, 6)?,
                };
                current = Some((row, Vec::new()));
            }
            if let (Some(provider), Some((_, list))) = (get::<Option<i64>>(r, 7)?, &mut current) {
                list.push(Allocation {
                    provider: ProviderId(provider as u64),
                    class: ResourceClass::new_unchecked(get::<&str>(r, 8)?),
                    used: unsigned(r, 9)?,
                });
            }
            Ok(())
        },
    )?;
    if let Some((row, allocations)) = current {
        state.load_consumer(row, allocations, true);
    }

    // Pending claims (few: they live for minutes), after the providers they are
    // indexed on.
    let mut amounts: HashMap<Uuid, Vec<ClaimAmount>> = HashMap::new();
    tx.each_row(
        "SELECT claim_uuid, provider_uuid, resource_class, amount FROM claim_allocations",
        |r| {
            amounts.entry(get(r, 0)?).or_default().push(ClaimAmount {
                provider: get(r, 1)?,
                class: ResourceClass::new_unchecked(get::<&str>(r, 2)?),
                amount: unsigned(r, 3)?,
            });
            Ok(())
        },
    )?;
    tx.each_row(
        "SELECT uuid, consumer_uuid, project_id, user_id, consumer_type, tag, state,
                created_at, expires_at, ended_at
         FROM claims",
        |r| {
            let uuid: Uuid = get(r, 0)?;
            let state_text: &str = get(r, 6)?;
            let claim_state = ClaimState::parse(state_text)
                .ok_or_else(|| StoreError::Corrupt(format!("claim state {state_text:?}")))?;
            let mut allocations = amounts.remove(&uuid).unwrap_or_default();
            allocations.sort();
            let claim = Claim {
                uuid,
                consumer: get(r, 1)?,
                project_id: Text::from(get::<&str>(r, 2)?),
                user_id: Text::from(get::<&str>(r, 3)?),
                consumer_type: get::<Option<&str>>(r, 4)?.map(Text::from),
                tag: get::<Option<&str>>(r, 5)?.map(Text::from),
                allocations: allocations.into_boxed_slice(),
                state: claim_state,
                created_at: get(r, 7)?,
                expires_at: get(r, 8)?,
                ended_at: get(r, 9)?,
            };
            state.load_change(Change::PutClaim(Box::new(claim)));
            Ok(())
        },
    )?;
    Ok(state)
}

/// A statement parameter: borrowed from the changes being written, or owned.
type Param<'a> = Box<dyn ToSql + Sync + 'a>;

/// One statement of a write.
struct Op<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
    /// Set when the statement must change exactly one row: the change whose
    /// precondition failed if it changes none.
    one_row_of: Option<&'a Change>,
}

/// A write's statements, in order, to be sent in one go ([`Tx::run`]).
#[derive(Default)]
struct Pipeline<'a> {
    ops: Vec<Op<'a>>,
}

impl<'a> Pipeline<'a> {
    fn push(&mut self, sql: &'static str, params: Vec<Param<'a>>) {
        self.ops.push(Op {
            sql,
            params,
            one_row_of: None,
        });
    }

    /// As [`Pipeline::push`], for a statement that must change exactly one row.
    fn push_one(&mut self, sql: &'static str, params: Vec<Param<'a>>, change: &'a Change) {
        self.ops.push(Op {
            sql,
            params,
            one_row_of: Some(change),
        });
    }

    /// The statements of one change: the same rows, renames, cascades and claims as
    /// the SQLite engine's `write_change`, plus the preconditions a shared database
    /// needs.
    fn change(&mut self, change: &'a Change) {
        match change {
            Change::PutClass { record, old_name } => {
                let name = record.name.as_str();
                if let Some(old) = old_name {
                    let old = old.as_str();
                    self.push("DELETE FROM resource_classes WHERE name = $1", params![old]);
                    // Rows refer to classes by name: a rename carries them along.
                    for sql in [
                        "UPDATE inventories SET resource_class = $2 WHERE resource_class = $1",
                        "UPDATE allocations SET resource_class = $2 WHERE resource_class = $1",
                        "UPDATE claim_allocations SET resource_class = $2 WHERE resource_class = $1",
                        "UPDATE class_metadata SET name = $2 WHERE name = $1",
                    ] {
                        self.push(sql, params![old, name]);
                    }
                }
                self.push(
                    "INSERT INTO resource_classes (name, created_at, updated_at) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO UPDATE SET
                         created_at = excluded.created_at, updated_at = excluded.updated_at",
                    params![name, &record.created_at, &record.updated_at],
                );
            }
            Change::DeleteClass(name) => {
                let name = name.as_str();
                self.push(
                    "DELETE FROM resource_classes WHERE name = $1",
                    params![name],
                );
                self.push("DELETE FROM class_metadata WHERE name = $1", params![name]);
            }
            Change::SetClassMetadata(name, metadata) => {
                let name = name.as_str();
                match metadata {
                    Some(m) => self.push(
                        "INSERT INTO class_metadata (name, units, display_name, description)
                         VALUES ($1, $2, $3, $4)
                         ON CONFLICT (name) DO UPDATE SET units = excluded.units,
                             display_name = excluded.display_name,
                             description = excluded.description",
                        params![name, &m.units, &m.display_name, &m.description],
                    ),
                    None => self.push("DELETE FROM class_metadata WHERE name = $1", params![name]),
                }
            }
            Change::PutTrait(record) => self.push(
                "INSERT INTO traits (name, created_at) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET created_at = excluded.created_at",
                params![record.name.as_str(), &record.created_at],
            ),
            Change::DeleteTrait(name) => {
                self.push("DELETE FROM traits WHERE name = $1", params![name.as_str()])
            }
            Change::PutProvider {
                row,
                previous_generation,
            } => {
                let id = row.id.0 as i64;
                let generation = row.generation as i64;
                let parent = row.parent.map(|p| p.0 as i64);
                let root = row.root.0 as i64;
                match previous_generation {
                    // A create: any row already there with its id, uuid or name was
                    // made by someone the plan did not know of.
                    None => self.push_one(
                        "INSERT INTO providers
                             (id, uuid, name, generation, parent_id, root_id, created_at, updated_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                         ON CONFLICT DO NOTHING",
                        params![
                            id,
                            &row.uuid,
                            &row.name,
                            generation,
                            parent,
                            root,
                            &row.created_at,
                            &row.updated_at,
                        ],
                        change,
                    ),
                    Some(previous) => self.push_one(
                        "UPDATE providers SET uuid = $2, name = $3, generation = $4,
                             parent_id = $5, root_id = $6, updated_at = $7
                         WHERE id = $1 AND generation = $8",
                        params![
                            id,
                            &row.uuid,
                            &row.name,
                            generation,
                            parent,
                            root,
                            &row.updated_at,
                            *previous as i64,
                        ],
                        change,
                    ),
                }
            }
            Change::DeleteProvider(id) => {
                let id = id.0 as i64;
                for sql in [
                    "DELETE FROM inventories WHERE provider_id = $1",
                    "DELETE FROM provider_traits WHERE provider_id = $1",
                    "DELETE FROM provider_aggregates WHERE provider_id = $1",
                    "DELETE FROM providers WHERE id = $1",
                ] {
                    self.push(sql, params![id]);
                }
            }
            Change::SetInventories(id, inventories) => {
                let id = id.0 as i64;
                self.push(
                    "DELETE FROM inventories WHERE provider_id = $1",
                    params![id],
                );
                for (class, inv) in inventories {
                    self.push(
                        "INSERT INTO inventories (provider_id, resource_class, total, reserved,
                             min_unit, max_unit, step_size, allocation_ratio)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                        params![
                            id,
                            class.as_str(),
                            inv.total as i64,
                            inv.reserved as i64,
                            inv.min_unit as i64,
                            inv.max_unit as i64,
                            inv.step_size.get() as i64,
                            &inv.allocation_ratio,
                        ],
                    );
                }
            }
            Change::SetTraits(id, traits) => {
                let id = id.0 as i64;
                self.push(
                    "DELETE FROM provider_traits WHERE provider_id = $1",
                    params![id],
                );
                for name in traits {
                    self.push(
                        "INSERT INTO provider_traits (provider_id, trait) VALUES ($1, $2)",
                        params![id, name.as_str()],
                    );
                }
            }
            Change::SetAggregates(id, aggregates) => {
                let id = id.0 as i64;
                self.push(
                    "DELETE FROM provider_aggregates WHERE provider_id = $1",
                    params![id],
                );
                for aggregate in aggregates {
                    self.push(
                        "INSERT INTO provider_aggregates (provider_id, aggregate) VALUES ($1, $2)",
                        params![id, aggregate],
                    );
                }
            }
            Change::PutConsumer {
                row,
                previous_generation,
            } => {
                let generation = row.generation as i64;
                let (project, user) = (row.project_id.as_str(), row.user_id.as_str());
                let kind = row.consumer_type.as_deref();
                match previous_generation {
                    None => self.push_one(
                        "INSERT INTO consumers (uuid, project_id, user_id, consumer_type,
                             generation, created_at, updated_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT DO NOTHING",
                        params![
                            &row.uuid,
                            project,
                            user,
                            kind,
                            generation,
                            &row.created_at,
                            &row.updated_at,
                        ],
                        change,
                    ),
                    Some(previous) => self.push_one(
                        "UPDATE consumers SET project_id = $2, user_id = $3, consumer_type = $4,
                             generation = $5, updated_at = $6
                         WHERE uuid = $1 AND generation = $7",
                        params![
                            &row.uuid,
                            project,
                            user,
                            kind,
                            generation,
                            &row.updated_at,
                            *previous as i64,
                        ],
                        change,
                    ),
                }
            }
            Change::PutClaim(claim) => {
                self.push(
                    "INSERT INTO claims (uuid, consumer_uuid, project_id, user_id, consumer_type,
                         tag, state, created_at, expires_at, ended_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (uuid) DO UPDATE SET consumer_uuid = excluded.consumer_uuid,
                         project_id = excluded.project_id, user_id = excluded.user_id,
                         consumer_type = excluded.consumer_type, tag = excluded.tag,
                         state = excluded.state, created_at = excluded.created_at,
                         expires_at = excluded.expires_at, ended_at = excluded.ended_at",
                    params![
                        &claim.uuid,
                        &claim.consumer,
                        claim.project_id.as_str(),
                        claim.user_id.as_str(),
                        claim.consumer_type.as_deref(),
                        claim.tag.as_deref(),
                        claim.state.as_str(),
                        &claim.created_at,
                        &claim.expires_at,
                        &claim.ended_at,
                    ],
                );
                // A claim's amounts never change after it is made: written once.
                for a in claim.allocations.iter() {
                    self.push(
                        "INSERT INTO claim_allocations
                             (claim_uuid, provider_uuid, resource_class, amount)
                         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        params![&claim.uuid, &a.provider, a.class.as_str(), a.amount as i64],
                    );
                }
            }
            Change::DeleteClaim(uuid) => {
                for sql in [
                    "DELETE FROM claim_allocations WHERE claim_uuid = $1",
                    "DELETE FROM claims WHERE uuid = $1",
                ] {
                    self.push(sql, params![uuid]);
                }
            }
            Change::DeleteConsumer(uuid) => {
                for sql in [
                    "DELETE FROM allocations WHERE consumer_uuid = $1",
                    "DELETE FROM consumers WHERE uuid = $1",
                ] {
                    self.push(sql, params![uuid]);
                }
            }
            Change::SetAllocations(uuid, allocations) => {
                self.push(
                    "DELETE FROM allocations WHERE consumer_uuid = $1",
                    params![uuid],
                );
                if !allocations.is_empty() {
                    // One statement for all of them: arrays, unnested.
                    let providers: Vec<i64> =
                        allocations.iter().map(|a| a.provider.0 as i64).collect();
                    let classes: Vec<&str> = allocations.iter().map(|a| a.class.as_str()).collect();
                    let used: Vec<i64> = allocations.iter().map(|a| a.used as i64).collect();
                    self.push(
                        "INSERT INTO allocations (consumer_uuid, provider_id, resource_class, used)
                         SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[])",
                        params![uuid, providers, classes, used],
                    );
                }
            }
        }
    }
}

/// Drives `futures` to completion, each polled first in the order given, and
/// returns their outputs in that order. The driver sends a request on its future's
/// first poll, and the server runs a connection's requests in the order they
/// arrive: so every statement goes out, in order, before the first answer is
/// awaited. (`join_all` would do the same today, but does not promise the order of
/// first polls for long lists; this does, by construction.)
async fn in_order<F: Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<MaybeDone<F>>>> =
        futures.map(|f| Box::pin(MaybeDone::Future(f))).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for f in &mut pending {
            done &= f.as_mut().poll(cx).is_ready();
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    pending
        .iter_mut()
        .map(|f| f.as_mut().take_output().expect("every future is done"))
        .collect()
}

/// Brings the schema up to date, one transaction per script, under an advisory lock
/// (a second node starting at the same moment waits, then finds nothing to do).
fn migrate(conn: &mut Conn) -> Result<(), StoreError> {
    let supported = MIGRATIONS.len() as i64;
    loop {
        let tx = conn.begin()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        // Quiet: the server's notice that the table exists already would be logged
        // at every start.
        tx.batch_execute(
            "SET LOCAL client_min_messages = warning;
             CREATE TABLE IF NOT EXISTS schema_version (version bigint NOT NULL);
             INSERT INTO schema_version (version)
                 SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version);",
        )?;
        let version: i64 = get(
            &tx.query_one("SELECT max(version) FROM schema_version", &[])?,
            0,
        )?;
        if version > supported {
            return Err(StoreError::TooNew {
                found: version,
                supported,
            });
        }
        if version == supported {
            tx.commit()?;
            return Ok(());
        }
        tx.batch_execute(MIGRATIONS[version as usize])?;
        tx.execute("UPDATE schema_version SET version = $1", &[&(version + 1)])?;
        tx.commit()?;
    }
}

/// The listener's connection: waits for other nodes' commits (`NOTIFY allot_log`).
pub struct PgListener {
    config: postgres::Config,
    client: Option<postgres::Client>,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgListener").finish_non_exhaustive()
    }
}

impl PgListener {
    /// Connects and starts listening.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let config = postgres::Config::from(config(url)?);
        let mut client = config.connect(NoTls)?;
        client.batch_execute("LISTEN allot_log")?;
        Ok(PgListener {
            config,
            client: Some(client),
        })
    }

    /// Blocks until a commit is announced (true) or `timeout` passes (false).
    /// After a lost connection, the reconnect answers true: announcements may have
    /// been missed meanwhile, so the caller must look at the log.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, StoreError> {
        if self.client.as_ref().is_none_or(postgres::Client::is_closed) {
            self.client = None;
            let mut client = reconnect(|| Ok(self.config.connect(NoTls)?))?;
            client.batch_execute("LISTEN allot_log")?;
            self.client = Some(client);
            return Ok(true);
        }
        let Some(client) = &mut self.client else {
            unreachable!("connected above")
        };
        let woke = {
            let mut notifications = client.notifications();
            let first = notifications.timeout_iter(timeout).next();
            match first {
                Ok(Some(_)) => {
                    // One wake-up covers every commit announced so far.
                    while let Ok(Some(_)) = notifications.iter().next() {}
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            }
        };
        woke.map_err(|e| {
            self.client = None;
            e.into()
        })
    }
}

#[cfg(test)]
mod tests {
    //! The log's mechanics on a real server (`ALLOT_TEST_POSTGRES_URL`; without one
    //! a case is skipped by the store suite's rule, `tests/skip`); what the changes do
    //! is the store suite's part.

    use super::*;

    // A fresh database on the test server, dropped after (`None`, and the skip
    // recorded, without one).
    use crate::test_pg::PgDatabase as Database;

    /// A connection of the test's own to the database.
    fn client(db: &Database) -> postgres::Client {
        postgres::Client::connect(&db.url, NoTls).unwrap()
    }

    fn trait_change(name: &str) -> Vec<Change> {
        vec![Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(name),
            created_at: 1,
        })]
    }

    /// The trait names the commits made, in order.
    fn names(commits: &[Commit]) -> Vec<String> {
        commits
            .iter()
            .flat_map(|c| &c.changes)
            .filter_map(|c| match c {
                Change::PutTrait(t) => Some(t.name.as_str().to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn commits_are_read_in_order_and_handed_to_the_next_plan() {
        let Some(db) = Database::new() else { return };
        let (mut a, mut b) = (
            PgEngine::open(&db.url).unwrap(),
            PgEngine::open(&db.url).unwrap(),
        );
        let (_, start) = b.load().unwrap();
        assert_eq!(start, Cursor(0));
        for (i, name) in ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"].iter().enumerate() {
            let head = a.write(Some(Cursor(i as i64)), &mut |_| trait_change(name));
            assert_eq!(head.unwrap(), Cursor(i as i64 + 1));
        }
        // A plan with nothing to do writes nothing and leaves the head.
        assert_eq!(
            a.write(Some(Cursor(3)), &mut |_| Vec::new()).unwrap(),
            Cursor(3)
        );
        assert_eq!(b.head().unwrap(), Cursor(3));
        let seen = b.changes_since(Cursor(1)).unwrap();
        assert_eq!(
            seen.iter().map(|c| c.cursor).collect::<Vec<_>>(),
            [Cursor(2), Cursor(3)]
        );
        assert_eq!(names(&seen), ["CUSTOM_B", "CUSTOM_C"]);
        // B writes from where it loaded: its plan first gets A's three commits.
        let mut handed = Vec::new();
        let head = b
            .write(Some(start), &mut |commits| {
                handed = commits;
                trait_change("CUSTOM_D")
            })
            .unwrap();
        assert_eq!(head, Cursor(4));
        assert_eq!(names(&handed), ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]);
        let (state, head) = a.load().unwrap();
        assert_eq!(head, Cursor(4));
        assert!(state.trait_exists(&TraitName::new_unchecked("CUSTOM_D")));
        // A cursor from another database (ahead of the head) is no cursor here.
        assert!(matches!(
            a.changes_since(Cursor(9)),
            Err(StoreError::Behind(9))
        ));
        assert!(matches!(
            a.write(Some(Cursor(9)), &mut |_| Vec::new()),
            Err(StoreError::Behind(9))
        ));
    }

    #[test]
    fn a_pruned_cursor_is_behind() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        for (i, name) in ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"].iter().enumerate() {
            a.write(Some(Cursor(i as i64)), &mut |_| trait_change(name))
                .unwrap();
        }
        // As pruning leaves it: the oldest commits gone.
        client(&db)
            .batch_execute("DELETE FROM allot_log WHERE seq <= 2")
            .unwrap();
        assert!(matches!(
            a.changes_since(Cursor(0)),
            Err(StoreError::Behind(0))
        ));
        assert!(matches!(
            a.changes_since(Cursor(1)),
            Err(StoreError::Behind(1))
        ));
        assert_eq!(a.changes_since(Cursor(2)).unwrap().len(), 1);
        assert!(a.changes_since(Cursor(3)).unwrap().is_empty());
        let mut called = false;
        let e = a.write(Some(Cursor(1)), &mut |_| {
            called = true;
            Vec::new()
        });
        assert!(matches!(e, Err(StoreError::Behind(1))));
        assert!(!called, "a plan is never made on a gap");
    }

    #[test]
    fn the_listener_wakes_on_a_commit_and_reconnects() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        let mut listener = PgListener::open(&db.url).unwrap();
        assert!(!listener.wait(Duration::from_millis(50)).unwrap());
        a.write(Some(Cursor(0)), &mut |_| trait_change("CUSTOM_A"))
            .unwrap();
        a.write(Some(Cursor(1)), &mut |_| trait_change("CUSTOM_B"))
            .unwrap();
        let start = std::time::Instant::now();
        assert!(listener.wait(Duration::from_secs(5)).unwrap());
        assert!(start.elapsed() < Duration::from_secs(1));
        // The two announcements wake it at most twice (the second may not have
        // arrived when the first woke it), then it is quiet.
        let extra = (0..3)
            .take_while(|_| listener.wait(Duration::from_millis(100)).unwrap())
            .count();
        assert!(extra <= 1, "{extra} extra wake-ups");
        // A plan that writes nothing announces nothing.
        a.write(Some(Cursor(2)), &mut |_| Vec::new()).unwrap();
        assert!(!listener.wait(Duration::from_millis(50)).unwrap());
        // The server ends the listener's session: the wait fails or wakes, and
        // the one after reconnects (waking, as announcements may have been lost).
        client(&db)
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE query LIKE 'LISTEN%' AND datname = current_database()",
            )
            .unwrap();
        let mut woke = false;
        for _ in 0..3 {
            if let Ok(true) = listener.wait(Duration::from_millis(200)) {
                woke = true;
                break;
            }
        }
        assert!(woke);
        a.write(Some(Cursor(2)), &mut |_| trait_change("CUSTOM_C"))
            .unwrap();
        assert!(listener.wait(Duration::from_secs(5)).unwrap());
    }

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

    /// A provider's row at `generation`, planned against `previous`.
    fn provider_at(generation: u64, previous: Option<u64>) -> Change {
        Change::PutProvider {
            row: ProviderRow {
                id: ProviderId(1),
                uuid: Uuid::from_u128(1),
                name: "cn1".into(),
                generation,
                parent: None,
                root: ProviderId(1),
                created_at: 1,
                updated_at: 1,
            },
            previous_generation: previous,
        }
    }

    #[test]
    fn a_pipelined_write_runs_its_statements_in_order_and_all_or_nothing() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        // A create, then 99 updates each planned against the one before it: every
        // precondition holds only if the server runs them in the order planned.
        // (Far more than the 30 futures below which `join_all` keeps its order.)
        let mut changes = vec![provider_at(0, None)];
        changes.extend((1..100).map(|g| provider_at(g, Some(g - 1))));
        assert_eq!(
            a.write(Some(Cursor(0)), &mut |_| changes.clone()).unwrap(),
            Cursor(1)
        );
        let generation: i64 = client(&db)
            .query_one("SELECT generation FROM providers", &[])
            .unwrap()
            .get(0);
        assert_eq!(generation, 99);
        // One failed precondition in the middle: nothing of the write remains,
        // neither the changes before it nor the log row, and the connection serves on.
        let mut changes: Vec<Change> = (100..110).map(|g| provider_at(g, Some(g - 1))).collect();
        changes.insert(5, provider_at(7, Some(6)));
        let e = a.write(Some(Cursor(1)), &mut |_| changes.clone());
        assert!(
            matches!(&e, Err(StoreError::Stale(m)) if m.contains("not at generation 6")),
            "{e:?}"
        );
        let (state, head) = a.load().unwrap();
        assert_eq!(head, Cursor(1));
        assert_eq!(state.provider(ProviderId(1)).unwrap().row.generation, 99);
        assert_eq!(a.head().unwrap(), Cursor(1));
    }

    #[test]
    fn redacted_urls_hide_the_password() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/allot"),
            "postgres://me:***@db:5432/allot"
        );
        assert_eq!(redact("postgres://me@db/allot"), "postgres://me@db/allot");
        assert_eq!(
            redact("postgresql://db/allot?user=me&password=secret&sslmode=disable"),
            "postgresql://db/allot?user=me&password=***&sslmode=disable"
        );
        assert_eq!(redact("sqlite:/var/lib/a@b.db"), "sqlite:/var/lib/a@b.db");
    }
}
