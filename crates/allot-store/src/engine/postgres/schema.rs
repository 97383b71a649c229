//! The engine's schema: what each version creates ([`MIGRATIONS`]), and the
//! migration that brings a database up to date at open ([`migrate`]).
//!
//! The tables are the neutral ones of `crate::engine::sql`, spelled by
//! [`Postgres`]. The schema version is the one row of `schema_version`; each
//! migration runs in a transaction of its own under an advisory lock, so nodes
//! starting together migrate once.
//!
//! Where this differs from the SQLite engine's schema: the log is `allot_log` with
//! its head in a row of its own (`allot_log_head`), since the head row is the lock
//! every node's writer takes (SQLite's single writer lock does that job there, and
//! its head is `max(seq)`).

use super::connection::Conn;
use super::{get, Postgres};
use crate::engine::sql::{self, col, Ddl, Table, Type};
use crate::StoreError;

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
        // 4 (schema version 5): server groups (issue 44).
        &[Ddl::Table(&SERVER_GROUPS), Ddl::Table(&SERVER_GROUP_MEMBERS)],
        // 5 (schema version 6): drains (issue 44).
        &[
            Ddl::Table(&DRAINS),
            Ddl::Table(&DRAIN_ROOTS),
            Ddl::Table(&DRAIN_CLAIMS),
        ],
        // 6 (schema version 7): the cluster key (issue 46, `crate::engine::cluster_key`)
        // and the web UI sessions logged out (`Change::RevokeSession`).
        &[
            Ddl::Raw(
            "CREATE TABLE allot_cluster_key (id integer PRIMARY KEY, secret bytea NOT NULL);",
            ),
            Ddl::Table(&REVOKED_SESSIONS),
        ],
        // 7 (schema version 8): named shapes (issue 47).
        &[Ddl::Table(&SHAPES)],
    ]
};

/// The advisory lock key that migrations take ("allot" in ASCII), so that nodes
/// starting together do not migrate twice.
const MIGRATION_LOCK: i64 = 0x616c6c6f74;

/// The schema version this build migrates a database to.
pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

/// Brings the schema up to date, one transaction per script, under an advisory lock
/// (a second node starting at the same moment waits, then finds nothing to do).
pub(super) fn migrate(conn: &mut Conn) -> Result<(), StoreError> {
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
