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
//! TLS: the URL's libpq arguments (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`)
//! are read by [`crate::pg_tls`], the one home of that reading; both connections use
//! the rustls connector it makes (its files read once, at open), and a handshake that
//! fails is [`StoreError::PostgresTls`] with the cause in libpq's terms.
//!
//! Connection loss: a call that finds its connection closed reconnects, retrying
//! with a doubling pause for a few seconds before it gives up with an error. A write
//! in flight when the connection drops fails with [`StoreError::Postgres`] (the host
//! answers 503); PostgreSQL rolls its transaction back, so nothing of it remains.
//!
//! # Schema
//!
//! The tables, the statements each change writes and the load are the SQLite
//! engine's too (`super::sql`, `super::load`); [`Postgres`] spells them with what
//! PostgreSQL does naturally where SQLite needed a workaround: uuids (providers,
//! consumers, aggregates, claims) are the native `uuid` type, so one uuid has one
//! spelling and the load never needs to look for duplicates; integers are `bigint`,
//! allocation ratios `double precision`; upserts are `INSERT ... ON CONFLICT`
//! instead of `INSERT OR REPLACE`; the rows a change inserts into one table go as
//! one statement over arrays. The load reads each query through a portal, a chunk
//! at a time, so that the providers' four queries (and the consumers' two) are open
//! side by side. The schema version is the one row of `schema_version`;
//! [`MIGRATIONS`] lists what each version creates, each run in a transaction of its
//! own under an advisory lock, so nodes starting together migrate once.
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

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use allot_core::{Change, State, Uuid};
use futures_util::future::MaybeDone;
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, ToSql};
use postgres::{IsolationLevel, Row, Statement};
use std::collections::HashMap;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, Portal, Transaction, TransactionBuilder};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::load::{self, Cells, Key, Rows, Source};
use super::sql::{self, col, Column, Conflict, Ddl, Dialect, Op, Table, Type, Value};
use super::{lost_race, read_log, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::pg_tls::{self, PgTls};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

/// The change log: every commit's changes, numbered.
static ALLOT_LOG: Table = Table {
    name: "allot_log",
    columns: sql::LOG_COLUMNS,
    key: &["seq"],
    clustered: false,
};

/// The log's head: one row, the newest `seq` (0 before the first commit), which is
/// also the lock that every node's writer takes.
static ALLOT_LOG_HEAD: Table = Table {
    name: "allot_log_head",
    columns: &[col("seq", Type::Int)],
    key: &[],
    clustered: false,
};

/// Schema migrations, in order: the tables (and indexes) each version created.
/// `schema_version.version` is how many have run.
static MIGRATIONS: &[&[Ddl]] = {
    use sql::*;
    &[
        &[
            Ddl::Table(&RESOURCE_CLASSES),
            Ddl::Table(&CLASS_METADATA),
            Ddl::Table(&TRAITS),
            Ddl::Table(&PROVIDERS),
            Ddl::Table(&INVENTORIES),
            Ddl::Table(&PROVIDER_TRAITS),
            Ddl::Table(&PROVIDER_AGGREGATES),
            Ddl::Table(&CONSUMERS_BY_UUID),
            Ddl::Table(&ALLOCATIONS_BY_UUID),
            Ddl::Index(&ALLOCATIONS_BY_PROVIDER),
            Ddl::Index(&ALLOCATIONS_BY_CLASS),
            Ddl::Index(&INVENTORIES_BY_CLASS),
            Ddl::Table(&CLAIMS),
            Ddl::Table(&CLAIM_ALLOCATIONS),
            Ddl::Table(&ALLOT_LOG),
            Ddl::Table(&ALLOT_LOG_HEAD),
            Ddl::Raw("INSERT INTO allot_log_head (seq) VALUES (0);"),
        ],
        // 1 (schema version 2): what SQLite's 5 (its version 6) does.
        &[Ddl::Raw(sql::DROP_ALLOCATIONS_BY_PROVIDER)],
        // 2 (schema version 3): where the cluster's writer answers ([`PgLease`]).
        &[Ddl::Raw(
            "CREATE TABLE allot_writer (id integer PRIMARY KEY, pid integer NOT NULL, url text NOT NULL);",
        )],
        // 3 (schema version 4): what SQLite's 6 (its version 7) does; the index by
        // class went with the table it was on.
        &[
            Ddl::Raw(sql::STASH_CONSUMERS),
            Ddl::Table(&CONSUMERS),
            Ddl::Table(&ALLOCATIONS),
            Ddl::Index(&ALLOCATIONS_BY_CLASS),
            Ddl::Raw(sql::RESTORE_CONSUMERS),
        ],
    ]
};

/// PostgreSQL's spelling of the statements: native uuids, `bigint`s, upserts as
/// `INSERT ... ON CONFLICT`, and an insert of many rows as one statement over
/// arrays (`unnest`), so that a write's pipeline stays short.
pub(crate) struct Postgres;

impl Dialect for Postgres {
    const SLOT: usize = 1;
    const CLUSTERED: &'static str = "";
    const TYPES: [&'static str; 5] = ["bigint", "double precision", "text", "uuid", "bytea"];
    const PARAMETER: char = '$';
    const NUMBERED: &'static str = " GENERATED BY DEFAULT AS IDENTITY";

    /// Cast, since PostgreSQL would otherwise take a parameter in a `SELECT`'s list
    /// for text.
    fn typed_placeholder(n: usize, ty: Type) -> String {
        format!("${n}::{}", Self::type_name(ty))
    }

    fn insert(table: &Table, conflict: Conflict, columns: &str, values: &str) -> String {
        let insert = format!("INSERT INTO {} ({columns}) VALUES ({values})", table.name);
        match conflict {
            Conflict::Fail => insert,
            Conflict::Ignore => format!("{insert} ON CONFLICT DO NOTHING"),
            Conflict::Replace => {
                let set: Vec<String> = table
                    .columns
                    .iter()
                    .filter(|c| !table.key.contains(&c.name))
                    .map(|c| format!("{0} = excluded.{0}", c.name))
                    .collect();
                format!(
                    "{insert} ON CONFLICT ({}) DO UPDATE SET {}",
                    table.key.join(", "),
                    set.join(", ")
                )
            }
        }
    }

    fn insert_rows(table: &Table, given: &[&Column], columns: &str) -> Option<String> {
        let arrays: Vec<String> = given
            .iter()
            .enumerate()
            .map(|(i, c)| format!("${}::{}[]", i + 1, Self::type_name(c.ty)))
            .collect();
        Some(format!(
            "INSERT INTO {} ({columns}) SELECT * FROM unnest({})",
            table.name,
            arrays.join(", ")
        ))
    }
}
/// The advisory lock key that migrations take ("allot" in ASCII), so that nodes
/// starting together do not migrate twice.
const MIGRATION_LOCK: i64 = 0x616c6c6f74;

/// How long a reconnect keeps trying (with a doubling pause from 50 ms) before the
/// call that needed the connection fails.
const RECONNECT_FOR: Duration = Duration::from_secs(3);

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

/// Where a node connects and how: the driver's settings, the TLS settings they were
/// read with, and the TLS connector made from them (its files read once, at open, so
/// a reconnect does not fail on a file being rotated).
#[derive(Clone)]
pub(crate) struct Target {
    config: Config,
    tls: PgTls,
    connector: MakeRustlsConnect,
}

impl Target {
    /// A connection of the writer's kind (tokio-postgres), its task on `runtime`.
    fn connect(&self, runtime: &Runtime) -> Result<Client, StoreError> {
        let (client, connection) = runtime
            .block_on(self.config.connect(self.connector.clone()))
            .map_err(|e| self.error(e))?;
        runtime.spawn(async move {
            // Its end shows at the next call (`is_closed`), which reconnects.
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        Ok(client)
    }

    /// A connection of the listener's kind (the blocking `postgres` crate).
    fn connect_blocking(&self) -> Result<postgres::Client, StoreError> {
        postgres::Config::from(self.config.clone())
            .connect(self.connector.clone())
            .map_err(|e| self.error(e))
    }

    /// A failed connect, explained in libpq's terms when TLS is why.
    fn error(&self, e: postgres::Error) -> StoreError {
        match self.tls.explain(&e) {
            Some(why) => StoreError::PostgresTls(why),
            None => e.into(),
        }
    }
}

/// Parses a `postgres://` or `postgresql://` URL into a connection target: libpq's
/// TLS arguments by [`pg_tls::split_url`] (with libpq's variables), the rest by the
/// driver, with a connect timeout unless the URL sets one (an unreachable host must
/// be an error, not a hang).
pub(crate) fn target(url: &str) -> Result<Target, StoreError> {
    let bad = |reason: String| StoreError::BadUrl {
        url: redact(url),
        reason,
    };
    let (rest, tls) = pg_tls::split_url(url, &pg_tls::process_env).map_err(bad)?;
    let mut config = Config::from_str(&rest).map_err(|e| bad(e.to_string()))?;
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
    tls.apply(&mut config);
    let connector = tls.connector().map_err(StoreError::PostgresTls)?;
    Ok(Target {
        config,
        tls,
        connector,
    })
}

/// The URL without its password (in the user part or as a `password=` parameter),
/// for logs and messages.
pub fn redact(url: &str) -> String {
    // The credentials as SQLAlchemy reads them (placement.conf's URLs): after `://`, a
    // user without `:` or `/`, then `:` and a password up to the first `@`, which may
    // hold `/`, `?` and `#` as they are.
    let (head, rest) = match url.split_once("://") {
        Some((scheme, after)) => match after.split_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) if !user.contains('/') => (format!("{scheme}://{user}:***@"), host),
                _ => (format!("{scheme}://"), after),
            },
            None => (format!("{scheme}://"), after),
        },
        None => (String::new(), url),
    };
    let Some((base, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let parameters: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => p.to_string(),
        })
        .collect();
    format!("{head}{base}?{}", parameters.join("&"))
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
    fn open(target: &Target) -> Result<Conn, StoreError> {
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
        self.start(|tx| tx)
    }

    /// A read-only transaction that sees one snapshot throughout.
    fn begin_snapshot(&mut self) -> Result<Tx<'_>, StoreError> {
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
        let target = target(url)?;
        let mut conn = Conn::open(&target)?;
        migrate(&mut conn)?;
        Ok(PgEngine {
            target,
            conn: Some(conn),
        })
    }

    /// The connection, made again if it broke.
    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            self.conn = Some(reconnect(|| Conn::open(&self.target))?);
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
        let state = load::load(Reader(&tx))?;
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
        pipeline.changes(&changes);
        // The log row, the head and the announcement in one statement; the
        // announcement is delivered when (and only if) the transaction commits.
        pipeline.push(
            "WITH logged AS (INSERT INTO allot_log (seq, at, changes) VALUES ($1, $2, $3)),
                  moved AS (UPDATE allot_log_head SET seq = $1)
             SELECT pg_notify('allot_log', $1::bigint::text)",
            vec![
                Box::new(seq),
                Box::new(now),
                Box::new(crate::log::encode(&changes)),
            ],
        );
        if seq % LOG_PRUNE_EVERY == 0 {
            pipeline.push(
                "DELETE FROM allot_log WHERE seq <= $1",
                vec![Box::new(seq - LOG_KEEP)],
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
    // A row without a commit is the head's alone (the log's join found nothing).
    let read = rows
        .iter()
        .filter_map(|row| match get::<Option<i64>>(row, first) {
            Ok(None) => None,
            Ok(Some(seq)) => Some(get::<&[u8]>(row, first + 1).map(|record| (seq, record))),
            Err(e) => Some(Err(e)),
        });
    read_log(after, head, read, || StoreError::Behind(after))
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

/// A statement parameter: borrowed from the changes being written, or owned.
type Param<'a> = Box<dyn ToSql + Sync + 'a>;

/// A neutral value as the driver's parameter (a NULL typed as its column is).
fn param(value: Value<'_>) -> Param<'_> {
    match value {
        Value::Int(n) => Box::new(n),
        Value::Float(x) => Box::new(x),
        Value::Text(text) => Box::new(text),
        Value::Uuid(uuid) => Box::new(uuid),
        Value::Null(Type::Int) => Box::new(None::<i64>),
        Value::Null(Type::Float) => Box::new(None::<f64>),
        Value::Null(Type::Text) => Box::new(None::<&str>),
        Value::Null(Type::Uuid) => Box::new(None::<Uuid>),
        Value::Null(Type::Bytes) => Box::new(None::<&[u8]>),
    }
}

/// The values of column `i` of `rows` as one array parameter, if every one is a
/// value of the first one's kind (not NULL).
fn array<'a>(rows: &[Op<'a>], i: usize) -> Option<Param<'a>> {
    macro_rules! gather {
        ($kind:ident) => {{
            let values: Option<Vec<_>> = rows
                .iter()
                .map(|op| match op.params[i] {
                    Value::$kind(value) => Some(value),
                    _ => None,
                })
                .collect();
            Some(Box::new(values?) as Param<'a>)
        }};
    }
    match rows[0].params[i] {
        Value::Int(_) => gather!(Int),
        Value::Float(_) => gather!(Float),
        Value::Text(_) => gather!(Text),
        Value::Uuid(_) => gather!(Uuid),
        Value::Null(_) => None,
    }
}

/// One statement of a write.
struct Step<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
    /// Set when the statement must change exactly one row: the change whose
    /// precondition failed if it changes none.
    one_row_of: Option<&'a Change>,
}

/// A write's statements, in order, to be sent in one go ([`Tx::run`]).
#[derive(Default)]
struct Pipeline<'a> {
    ops: Vec<Step<'a>>,
}

impl<'a> Pipeline<'a> {
    fn push(&mut self, sql: &'static str, params: Vec<Param<'a>>) {
        self.ops.push(Step {
            sql,
            params,
            one_row_of: None,
        });
    }

    /// The statements of `changes` (`sql::ops`), where a run of rows inserted into
    /// one table goes as one statement over arrays.
    fn changes(&mut self, changes: &'a [Change]) {
        let mut ops = Vec::new();
        for change in changes {
            sql::ops(change, &mut ops);
        }
        let mut ops = ops.into_iter().peekable();
        while let Some(op) = ops.next() {
            let rendered = op.statement.rendered::<Postgres>();
            if let Some(rows_sql) = &rendered.rows {
                let mut run = vec![op];
                while let Some(next) =
                    ops.next_if(|next| std::ptr::eq(next.statement, run[0].statement))
                {
                    run.push(next);
                }
                let arrays: Option<Vec<Param<'a>>> =
                    (0..run[0].params.len()).map(|i| array(&run, i)).collect();
                match arrays {
                    Some(arrays) => self.push(rows_sql, arrays),
                    None => run.into_iter().for_each(|op| self.op(op)),
                }
            } else {
                self.op(op);
            }
        }
    }

    fn op(&mut self, op: Op<'a>) {
        self.ops.push(Step {
            sql: op.statement.sql::<Postgres>(),
            params: op.params.into_iter().map(param).collect(),
            one_row_of: op.one_row_of,
        });
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

/// The schema version this build migrates a database to.
pub fn schema_version() -> usize {
    MIGRATIONS.len()
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
        tx.batch_execute(&sql::script::<Postgres>(MIGRATIONS[version as usize]))?;
        tx.execute("UPDATE schema_version SET version = $1", &[&(version + 1)])?;
        tx.commit()?;
    }
}

/// The listener's connection: waits for other nodes' commits (`NOTIFY allot_log`).
pub struct PgListener {
    target: Target,
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
        let target = target(url)?;
        let mut client = target.connect_blocking()?;
        client.batch_execute("LISTEN allot_log")?;
        Ok(PgListener {
            target,
            client: Some(client),
        })
    }

    /// Blocks until a commit is announced (true) or `timeout` passes (false).
    /// After a lost connection, the reconnect answers true: announcements may have
    /// been missed meanwhile, so the caller must look at the log.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, StoreError> {
        if self.client.as_ref().is_none_or(postgres::Client::is_closed) {
            self.client = None;
            let mut client = reconnect(|| self.target.connect_blocking())?;
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

/// The advisory lock whose holder is the cluster's writer ("allotwri" in ASCII).
const WRITER_LOCK: i64 = 0x616c_6c6f_7477_7269;

/// The writer's lease: a session of its own that, for a node that can be reached
/// (`advertise`), tries to take the cluster's writer lock, and otherwise looks up
/// who holds it. The lock is a session-level advisory lock, so it is the session's
/// for exactly as long as the session lives: a writer that dies, or loses the
/// database, loses the role with the connection, and the next node to try takes it.
/// The holder's URL sits in `allot_writer` with the holder's backend pid, and is
/// read only joined with the lock itself (`pg_locks`), so a row left by a writer
/// that is gone is never taken for a live one.
pub struct PgLease {
    target: Target,
    client: Option<postgres::Client>,
    advertise: Option<String>,
    holding: bool,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("advertise", &self.advertise)
            .field("holding", &self.holding)
            .finish_non_exhaustive()
    }
}

impl PgLease {
    /// A lease for the database `url` names; connects at the first [`PgLease::tick`].
    pub fn open(url: &str, advertise: Option<String>) -> Result<Self, StoreError> {
        Ok(PgLease {
            target: target(url)?,
            client: None,
            advertise,
            holding: false,
        })
    }

    /// Takes the writer's role if it is free and this node can be reached, and says
    /// who holds it. One connection attempt: a caller ticks again later.
    pub fn tick(&mut self) -> Result<crate::WriterRole, StoreError> {
        if self
            .client
            .as_ref()
            .is_some_and(postgres::Client::is_closed)
        {
            self.client = None;
        }
        let client = match &mut self.client {
            Some(client) => client,
            none => {
                // A new session holds nothing, whatever the last one did.
                self.holding = false;
                none.insert(self.target.connect_blocking()?)
            }
        };
        let outcome = Self::look(client, self.advertise.as_deref(), &mut self.holding);
        if outcome.is_err() {
            self.holding = false;
            self.client = None;
        }
        outcome
    }

    fn look(
        client: &mut postgres::Client,
        advertise: Option<&str>,
        holding: &mut bool,
    ) -> Result<crate::WriterRole, StoreError> {
        if let (Some(url), false) = (advertise, *holding) {
            let taken: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&WRITER_LOCK])?
                .get(0);
            if taken {
                client.execute(
                    "INSERT INTO allot_writer (id, pid, url) VALUES (1, pg_backend_pid(), $1)
                     ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, url = excluded.url",
                    &[&url],
                )?;
                *holding = true;
            }
        }
        if *holding {
            // The lock is the session's: a session that still answers holds it.
            client.batch_execute("SELECT 1")?;
            return Ok(crate::WriterRole::This);
        }
        // A bigint advisory key shows in pg_locks as its high and low halves.
        let row = client.query_opt(
            "SELECT w.url FROM allot_writer w JOIN pg_locks l ON l.pid = w.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
               AND l.classid::bigint = $1 AND l.objid::bigint = $2
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&(WRITER_LOCK >> 32), &(WRITER_LOCK & 0xffff_ffff)],
        )?;
        Ok(match row {
            Some(row) => crate::WriterRole::At(row.get(0)),
            None => crate::WriterRole::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    //! The log's mechanics on a real server (`ALLOT_TEST_POSTGRES_URL`; without one
    //! a case is skipped by the store suite's rule, `tests/skip`); what the changes do
    //! is the store suite's part.

    use super::*;
    use allot_core::{ProviderId, ProviderRow, TraitName, TraitRecord};

    // A fresh database on the test server, dropped after (`None`, and the skip
    // recorded, without one).
    use crate::test_pg::PgDatabase as Database;

    /// A connection of the test's own to the database.
    fn client(db: &Database) -> postgres::Client {
        postgres::Client::connect(&db.url, postgres::NoTls).unwrap()
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
    fn one_lease_holder_at_a_time_and_the_next_when_its_session_ends() {
        use crate::WriterRole::{At, This, Unknown};
        let Some(db) = Database::new() else { return };
        PgEngine::open(&db.url).unwrap(); // migrates
        let mut quiet = PgLease::open(&db.url, None).unwrap();
        assert_eq!(quiet.tick().unwrap(), Unknown, "nobody holds it yet");
        let mut a = PgLease::open(&db.url, Some("http://a:8778".into())).unwrap();
        let mut b = PgLease::open(&db.url, Some("http://b:8778".into())).unwrap();
        assert_eq!(a.tick().unwrap(), This);
        assert_eq!(a.tick().unwrap(), This, "a holder keeps it");
        assert_eq!(b.tick().unwrap(), At("http://a:8778".into()));
        assert_eq!(quiet.tick().unwrap(), At("http://a:8778".into()));
        // A node without a URL never takes it, even free. The server ends a's
        // session (and frees its lock) a moment after its client closes, so the
        // free lease is waited for rather than expected at once.
        drop(a);
        let freed = (0..200).any(|_| match quiet.tick().unwrap() {
            Unknown => true,
            role => {
                assert_eq!(role, At("http://a:8778".into()), "a node without a URL");
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(freed, "a's lease outlives its session");
        assert_eq!(b.tick().unwrap(), This);
        assert_eq!(quiet.tick().unwrap(), At("http://b:8778".into()));
        // The server ends the holder's session: its next tick fails (a holder checks
        // its session each time), the row it left names nobody, and the tick after
        // (a new session) takes the lease again.
        client(&db)
            .batch_execute("SELECT pg_terminate_backend(pid) FROM allot_writer")
            .unwrap();
        let noticed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            b.tick().is_err()
        });
        assert!(noticed, "the holder goes on as if it held the lease");
        assert_eq!(quiet.tick().unwrap(), Unknown);
        assert_eq!(b.tick().unwrap(), This);
        assert_eq!(quiet.tick().unwrap(), At("http://b:8778".into()));
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
        // A password holding what SQLAlchemy lets it hold unescaped.
        assert_eq!(
            redact("mysql+pymysql://placement:pa#s/s?w:d@db/placement?charset=utf8"),
            "mysql+pymysql://placement:***@db/placement?charset=utf8"
        );
        // libpq's TLS arguments stay as they are (a path is no secret).
        assert_eq!(
            redact(
                "postgres://me:pw@db/allot?sslmode=verify-full&sslrootcert=/etc/ca.pem&password=x"
            ),
            "postgres://me:***@db/allot?sslmode=verify-full&sslrootcert=/etc/ca.pem&password=***"
        );
        // An `@` past the path is no credentials.
        assert_eq!(
            redact("postgresql://db/allot?options=a@b"),
            "postgresql://db/allot?options=a@b"
        );
    }
}
