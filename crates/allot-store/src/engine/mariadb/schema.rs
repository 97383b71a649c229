//! The engine's schema: what each version creates ([`MIGRATIONS`]), and the
//! migration that brings a database up to date at open ([`migrate`]).
//!
//! The tables are the neutral ones of `crate::engine::sql`, spelled by
//! [`MariaDb`], as the other engines' latest versions have them (this engine
//! has no older schema to carry). MariaDB commits every DDL statement by itself,
//! so a migration is not one transaction: each step is written to run again
//! (`IF NOT EXISTS`, `INSERT IGNORE`), and the version moves after the steps. The
//! migration runs under a named lock, so that nodes starting together on one
//! server migrate once (on Galera the lock is one node's, and the steps' running
//! twice is harmless; a statement that lost to another node's is run again).
//!
//! The log is `allot_log`, with its head in a row of its own (`allot_log_head`, the
//! lock every node's writer takes), as on PostgreSQL.

use super::dialect::MariaDb;
use super::Conn;
use crate::engine::sql::{self, Ddl, Table};
use crate::StoreError;

/// The change log: every commit's changes, numbered.
static ALLOT_LOG: Table = Table {
    name: "allot_log",
    columns: sql::LOG_COLUMNS,
    key: &["seq"],
    clustered: false,
};

/// Schema migrations, in order. `schema_version.version` is how many have run.
static MIGRATIONS: &[&[Ddl]] = {
    use sql::*;
    &[&[
        Ddl::Table(&RESOURCE_CLASSES),
        Ddl::Table(&CLASS_METADATA),
        Ddl::Table(&TRAITS),
        Ddl::Table(&PROVIDERS),
        Ddl::Table(&INVENTORIES),
        Ddl::Table(&PROVIDER_TRAITS),
        Ddl::Table(&PROVIDER_AGGREGATES),
        Ddl::Table(&CONSUMERS),
        Ddl::Table(&ALLOCATIONS),
        Ddl::Index(&ALLOCATIONS_BY_CLASS),
        Ddl::Index(&INVENTORIES_BY_CLASS),
        Ddl::Table(&CLAIMS),
        Ddl::Table(&CLAIM_ALLOCATIONS),
        Ddl::Table(&SERVER_GROUPS),
        Ddl::Table(&SERVER_GROUP_MEMBERS),
        Ddl::Table(&DRAINS),
        Ddl::Table(&DRAIN_ROOTS),
        Ddl::Table(&DRAIN_CLAIMS),
        Ddl::Table(&ALLOT_LOG),
        // A key, as Galera wants of every table it replicates.
        Ddl::Raw(
            "CREATE TABLE IF NOT EXISTS allot_log_head (id INT PRIMARY KEY, seq BIGINT NOT NULL) \
             ENGINE=InnoDB;",
        ),
        Ddl::Raw("INSERT IGNORE INTO allot_log_head (id, seq) VALUES (1, 0);"),
    ], &[
        // 1 (schema version 2): the writer's lease, a row (`super::lease`), and its
        // epoch in the log's head, which every commit checks.
        Ddl::Raw(
            "ALTER TABLE allot_log_head ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0;",
        ),
        Ddl::Raw(
            "CREATE TABLE IF NOT EXISTS allot_writer (id INT PRIMARY KEY, \
             holder VARCHAR(64) NOT NULL, url TEXT NOT NULL, epoch BIGINT NOT NULL, \
             beat BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;",
        ),
        Ddl::Raw(
            "INSERT IGNORE INTO allot_writer (id, holder, url, epoch, beat) VALUES (1, '', '', 0, -1);",
        ),
    ], &[
        // 2 (schema version 3): the cluster key (issue 46, `crate::engine::cluster_key`)
        // and the web UI sessions logged out (`Change::RevokeSession`).
        Ddl::Raw(
            "CREATE TABLE IF NOT EXISTS allot_cluster_key (id INT PRIMARY KEY, \
             secret VARBINARY(64) NOT NULL) ENGINE=InnoDB;",
        ),
        Ddl::Table(&REVOKED_SESSIONS),
    ], &[
        // 3 (schema version 4): named shapes (issue 47).
        Ddl::Table(&SHAPES),
    ]]
};

/// The schema version this build migrates a database to.
pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

/// How long a node waits for another's migration.
const MIGRATION_WAIT_SECONDS: u32 = 120;

/// How many times a migration is begun again after a statement of it lost to
/// another node's (Galera), before the start fails.
const MIGRATION_TRIES: u32 = 10;

/// Brings the schema up to date, one step at a time, under a named lock.
pub(super) fn migrate(conn: &mut Conn) -> Result<(), StoreError> {
    let locked = conn.query(&format!(
        "SELECT GET_LOCK('allot_migrate', {MIGRATION_WAIT_SECONDS})"
    ))?;
    if super::int(locked.first(), 0)? != 1 {
        return Err(StoreError::MariaDb(
            "another node has been migrating the schema for two minutes".into(),
        ));
    }
    let outcome = migrate_again_if_beaten(conn);
    let released = conn.batch("DO RELEASE_LOCK('allot_migrate')");
    outcome.and(released)
}

/// [`migrate_locked`], begun again when a statement of it lost to another node's.
/// On Galera, nodes that start together through different Galera nodes migrate
/// together (the named lock is one node's): the first rows they write (`INSERT
/// IGNORE INTO schema_version`, the lease's and the log head's rows) are written by
/// each at once, and all but one are aborted at certification, or by the winner's
/// DDL, with a deadlock error ([`StoreError::Conflict`]) that Galera's own retry of
/// a statement does not always absorb. Such a statement wrote nothing, and every
/// step may run again, so the migration goes on from the version as it is now.
fn migrate_again_if_beaten(conn: &mut Conn) -> Result<(), StoreError> {
    let mut tries = 1;
    loop {
        match migrate_locked(conn) {
            Err(StoreError::Conflict(e)) if tries < MIGRATION_TRIES => {
                tracing::info!("another node's migration won a statement, migrating again: {e}");
                std::thread::sleep(std::time::Duration::from_millis(20 * u64::from(tries)));
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

fn migrate_locked(conn: &mut Conn) -> Result<(), StoreError> {
    let supported = MIGRATIONS.len() as i64;
    conn.batch(
        "CREATE TABLE IF NOT EXISTS schema_version (id INT PRIMARY KEY, version BIGINT NOT NULL) \
         ENGINE=InnoDB",
    )?;
    conn.batch("INSERT IGNORE INTO schema_version (id, version) VALUES (1, 0)")?;
    loop {
        let rows = conn.query("SELECT version FROM schema_version WHERE id = 1")?;
        let version = super::int(rows.first(), 0)?;
        if version > supported {
            return Err(StoreError::TooNew {
                found: version,
                supported,
            });
        }
        if version == supported {
            return Ok(());
        }
        for statement in sql::script::<MariaDb>(MIGRATIONS[version as usize])
            .split(";\n")
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            conn.batch(statement.trim_end_matches(';'))?;
        }
        conn.batch(&format!(
            "UPDATE schema_version SET version = {} WHERE id = 1",
            version + 1
        ))?;
    }
}
