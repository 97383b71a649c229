//! Writing a dump into an empty Placement database (`allot export --to-placement`),
//! the way back after a switch: the database must be made by Placement 16's
//! `placement-manage db sync` and hold no data, and everything is written in one
//! transaction. One module per table or table family turns the dump into its rows;
//! this one opens the transaction, checks the database, and calls them in order.
//!
//! Placement's own habits are kept where it matters to Placement afterwards:
//! standard resource classes take their os-resource-classes index as id and custom
//! ones start at 10000 (which is where Placement numbers them from); rows Placement
//! numbers by autoincrement (providers, traits, aggregates, projects, users,
//! consumer types) get their ids from the database and are read back, so that
//! PostgreSQL's sequences stay ahead of the ids in use. Values go into the SQL as
//! literals (MySQL with NO_BACKSLASH_ESCAPES, PostgreSQL with standard strings, so
//! that one quoting rule holds for both), many rows to a statement.

mod aggregates;
mod allocations;
mod classes;
mod consumers;
mod inventories;
mod providers;
mod sql;
mod traits;

use allot_store::dump::Dump;
use anyhow::{bail, Context};

use crate::conn::Conn;
use crate::placement_url::{Dialect, PlacementUrl};
use crate::revision::HEAD_REVISION;

/// Writes a whole dump (without claims and class metadata, which the caller has
/// dealt with) into an empty Placement database.
pub(crate) async fn write_placement(db: &PlacementUrl, dump: &Dump) -> anyhow::Result<()> {
    let mut conn = Conn::connect(db).await?;
    let result = write(&mut conn, dump).await;
    if result.is_err() {
        let _ = conn.execute("ROLLBACK").await;
    }
    conn.close().await;
    result
}

async fn write(conn: &mut Conn, dump: &Dump) -> anyhow::Result<()> {
    begin(conn).await?;
    ensure_head_revision(conn).await?;
    ensure_empty(conn).await?;
    // Placement's own sync stamps standard rows with the time it ran (its
    // listings compare the times, and a NULL beside a time is a 500 there).
    let now = conn.datetime_of(dump.exported_at);
    let class_ids = classes::write(conn, dump, &now).await?;
    let trait_ids = traits::write(conn, dump, &now).await?;
    let provider_ids = providers::write(conn, dump).await?;
    inventories::write(conn, dump, &provider_ids, &class_ids).await?;
    traits::write_provider_traits(conn, dump, &provider_ids, &trait_ids).await?;
    aggregates::write(conn, dump, &provider_ids).await?;
    consumers::write(conn, dump).await?;
    allocations::write(conn, dump, &provider_ids, &class_ids).await?;
    conn.execute("COMMIT").await.context("committing")?;
    Ok(())
}

/// Sets the session to the one quoting rule (and MySQL's to UTC and strict modes),
/// and opens the one transaction everything is written in.
async fn begin(conn: &mut Conn) -> anyhow::Result<()> {
    match conn.dialect() {
        Dialect::MySql => {
            conn.execute("SET SESSION time_zone = '+00:00'").await?;
            conn.execute(
                "SET SESSION sql_mode = CONCAT(@@sql_mode, \
                 ',STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES,NO_AUTO_VALUE_ON_ZERO')",
            )
            .await?;
            conn.execute("START TRANSACTION").await?;
        }
        Dialect::Postgres => {
            conn.execute("SET standard_conforming_strings = on").await?;
            conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE").await?;
        }
    }
    Ok(())
}

/// Refuses a schema other than Placement 16.0.0's, the one the rows are written for.
async fn ensure_head_revision(conn: &mut Conn) -> anyhow::Result<()> {
    let (revision, _) = conn.revision().await?;
    if revision != HEAD_REVISION {
        bail!(
            "the Placement database is at schema revision {revision}; an export writes \
             Placement 16.0.0's ({HEAD_REVISION}): run Placement 16's `placement-manage db sync`"
        );
    }
    Ok(())
}

/// Refuses a database that holds anything a client could see (the standard classes
/// and traits Placement syncs on start are no data).
async fn ensure_empty(conn: &mut Conn) -> anyhow::Result<()> {
    let sql = "SELECT \
        (SELECT COUNT(*) FROM resource_providers), \
        (SELECT COUNT(*) FROM consumers), \
        (SELECT COUNT(*) FROM allocations), \
        (SELECT COUNT(*) FROM projects), \
        (SELECT COUNT(*) FROM placement_aggregates), \
        (SELECT COUNT(*) FROM resource_classes WHERE name LIKE 'CUSTOM%'), \
        (SELECT COUNT(*) FROM traits WHERE name LIKE 'CUSTOM%')";
    let row = conn.rows(sql).await?.into_iter().next().unwrap_or_default();
    let names = [
        "providers",
        "consumers",
        "allocations",
        "projects",
        "aggregates",
        "custom classes",
        "custom traits",
    ];
    let held: Vec<String> = row
        .iter()
        .zip(names)
        .filter_map(|(n, name)| match n.as_deref() {
            Some("0") | None => None,
            Some(n) => Some(format!("{n} {name}")),
        })
        .collect();
    if !held.is_empty() {
        bail!(
            "the Placement database is not empty (it holds {}); export only into an empty \
             one made by `placement-manage db sync`",
            held.join(", ")
        );
    }
    Ok(())
}
