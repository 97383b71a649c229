//! Writing a dump into an empty Placement database (`allot export --to-placement`),
//! the way back after a switch: the database must be made by Placement 16's
//! `placement-manage db sync` and hold no data, and everything is written in one
//! transaction.
//!
//! Placement's own habits are kept where it matters to Placement afterwards:
//! standard resource classes take their os-resource-classes index as id and custom
//! ones start at 10000 (which is where Placement numbers them from); rows Placement
//! numbers by autoincrement (providers, traits, aggregates, projects, users,
//! consumer types) get their ids from the database and are read back, so that
//! PostgreSQL's sequences stay ahead of the ids in use. Values go into the SQL as
//! literals (MySQL with NO_BACKSLASH_ESCAPES, PostgreSQL with standard strings, so
//! that one quoting rule holds for both), many rows to a statement.

use std::collections::{BTreeSet, HashMap};

use allot_core::standard;
use allot_store::dump::Dump;
use anyhow::{anyhow, bail, Context};

use super::{Conn, Dialect, PlacementUrl, HEAD_REVISION};

/// Rows to one INSERT statement.
const BATCH: usize = 1000;

/// Where custom resource class ids start in Placement.
const FIRST_CUSTOM_CLASS_ID: i64 = 10000;

/// Writes a whole dump (without claims and class metadata, which the caller has
/// dealt with) into an empty Placement database.
pub async fn write_placement(db: &PlacementUrl, dump: &Dump) -> anyhow::Result<()> {
    let mut conn = Conn::connect(db).await?;
    let result = write(&mut conn, dump).await;
    if result.is_err() {
        let _ = conn.execute("ROLLBACK").await;
    }
    conn.close().await;
    result
}

async fn write(conn: &mut Conn, dump: &Dump) -> anyhow::Result<()> {
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
    let (revision, _) = conn.revision().await?;
    if revision != HEAD_REVISION {
        bail!(
            "the Placement database is at schema revision {revision}; an export writes \
             Placement 16.0.0's ({HEAD_REVISION}): run Placement 16's `placement-manage db sync`"
        );
    }
    ensure_empty(conn).await?;

    // Resource classes: the standard ones Placement has not synced yet, then ours.
    let present: BTreeSet<String> = conn
        .rows("SELECT name FROM resource_classes")
        .await?
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    let mut class_ids: HashMap<&str, i64> = HashMap::new();
    let mut rows = Vec::new();
    // Placement's own sync stamps standard rows with the time it ran (its
    // listings compare the times, and a NULL beside a time is a 500 there).
    let now = conn.datetime_of(dump.exported_at);
    for (i, name) in standard::RESOURCE_CLASSES.iter().enumerate() {
        class_ids.insert(name, i as i64);
        if !present.contains(*name) {
            rows.push(vec![
                (i as i64).to_string(),
                text(name)?,
                now.clone(),
                "NULL".into(),
            ]);
        }
    }
    for (i, c) in dump.resource_classes.iter().enumerate() {
        let id = FIRST_CUSTOM_CLASS_ID + i as i64;
        class_ids.insert(&c.name, id);
        rows.push(vec![
            id.to_string(),
            text(&c.name)?,
            conn.datetime_of(c.created_at),
            conn.datetime_of(c.updated_at),
        ]);
    }
    insert(
        conn,
        "resource_classes",
        "id, name, created_at, updated_at",
        &rows,
    )
    .await?;
    let class_id = |name: &str| {
        class_ids
            .get(name)
            .copied()
            .ok_or_else(|| anyhow!("resource class {name} is neither standard nor custom"))
    };

    // Traits: ours, and the standard ones providers have (Placement syncs the rest
    // on its next start).
    let present = ids(conn, "SELECT name, id FROM traits").await?;
    let mut wanted: BTreeSet<&str> = dump.traits.iter().map(|t| t.name.as_str()).collect();
    wanted.extend(
        dump.providers
            .iter()
            .flat_map(|p| p.traits.iter().map(String::as_str)),
    );
    let created: HashMap<&str, i64> = dump
        .traits
        .iter()
        .map(|t| (t.name.as_str(), t.created_at))
        .collect();
    let rows = wanted
        .iter()
        .filter(|n| !present.contains_key(**n))
        .map(|n| {
            let at = created.get(n).map_or(now.clone(), |t| conn.datetime_of(*t));
            Ok(vec![text(n)?, at])
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(conn, "traits", "name, created_at", &rows).await?;
    let trait_ids = ids(conn, "SELECT name, id FROM traits").await?;

    // Providers, numbered by the database in the dump's (creation) order, which is
    // the order Placement lists them in; parents and roots once all have ids.
    let rows = dump
        .providers
        .iter()
        .map(|p| {
            Ok(vec![
                text(&p.uuid.to_string())?,
                text(&p.name)?,
                p.generation.to_string(),
                conn.datetime_of(p.created_at),
                conn.datetime_of(p.updated_at),
            ])
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(
        conn,
        "resource_providers",
        "uuid, name, generation, created_at, updated_at",
        &rows,
    )
    .await?;
    let provider_ids = ids(conn, "SELECT uuid, id FROM resource_providers").await?;
    let pid = |u: &uuid::Uuid| {
        provider_ids
            .get(&u.to_string())
            .copied()
            .ok_or_else(|| anyhow!("provider {u} is not in the export"))
    };
    let parent_of: HashMap<uuid::Uuid, uuid::Uuid> = dump
        .providers
        .iter()
        .filter_map(|p| p.parent.map(|parent| (p.uuid, parent)))
        .collect();
    conn.execute("UPDATE resource_providers SET root_provider_id = id WHERE 1 = 1")
        .await?;
    let mut updates = String::new();
    for (child, parent) in &parent_of {
        let mut root = *parent;
        while let Some(up) = parent_of.get(&root) {
            root = *up;
        }
        updates.push_str(&format!(
            "UPDATE resource_providers SET parent_provider_id = {}, root_provider_id = {} \
             WHERE id = {};",
            pid(parent)?,
            pid(&root)?,
            pid(child)?
        ));
        if updates.len() > 64 * 1024 {
            conn.execute_many(&std::mem::take(&mut updates)).await?;
        }
    }
    if !updates.is_empty() {
        conn.execute_many(&updates).await?;
    }

    let mut inventories = Vec::new();
    let mut provider_traits = Vec::new();
    let mut aggregates: BTreeSet<uuid::Uuid> = BTreeSet::new();
    for p in &dump.providers {
        let id = pid(&p.uuid)?;
        for inv in &p.inventories {
            let ratio: f64 = inv.allocation_ratio.parse().map_err(|_| {
                anyhow!(
                    "provider {}: allocation_ratio {:?}",
                    p.uuid,
                    inv.allocation_ratio
                )
            })?;
            inventories.push(vec![
                id.to_string(),
                class_id(&inv.resource_class)?.to_string(),
                inv.total.to_string(),
                inv.reserved.to_string(),
                inv.min_unit.to_string(),
                inv.max_unit.to_string(),
                inv.step_size.to_string(),
                format!("{ratio:?}"),
                conn.datetime_of(p.updated_at),
            ]);
        }
        for t in &p.traits {
            let trait_id = trait_ids
                .get(t)
                .ok_or_else(|| anyhow!("trait {t} was not written"))?;
            provider_traits.push(vec![trait_id.to_string(), id.to_string()]);
        }
        aggregates.extend(p.aggregates.iter().copied());
    }
    insert(
        conn,
        "inventories",
        "resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, \
         step_size, allocation_ratio, created_at",
        &inventories,
    )
    .await?;
    insert(
        conn,
        "resource_provider_traits",
        "trait_id, resource_provider_id",
        &provider_traits,
    )
    .await?;
    let rows = aggregates
        .iter()
        .map(|a| Ok(vec![text(&a.to_string())?]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    insert(conn, "placement_aggregates", "uuid", &rows).await?;
    let aggregate_ids = ids(conn, "SELECT uuid, id FROM placement_aggregates").await?;
    let mut rows = Vec::new();
    for p in &dump.providers {
        for a in &p.aggregates {
            rows.push(vec![
                pid(&p.uuid)?.to_string(),
                id_in(&aggregate_ids, &a.to_string(), "aggregate")?.to_string(),
            ]);
        }
    }
    insert(
        conn,
        "resource_provider_aggregates",
        "resource_provider_id, aggregate_id",
        &rows,
    )
    .await?;

    // Consumers: their owners and types first, numbered by the database.
    let owners = |pick: fn(&allot_store::dump::DumpConsumer) -> Option<&str>| {
        dump.consumers
            .iter()
            .filter_map(pick)
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .map(|s| Ok(vec![text(s)?]))
            .collect::<anyhow::Result<Vec<_>>>()
    };
    insert(
        conn,
        "projects",
        "external_id",
        &owners(|c| Some(&c.project_id))?,
    )
    .await?;
    insert(conn, "users", "external_id", &owners(|c| Some(&c.user_id))?).await?;
    insert(
        conn,
        "consumer_types",
        "name",
        &owners(|c| c.consumer_type.as_deref())?,
    )
    .await?;
    let projects = ids(conn, "SELECT external_id, id FROM projects").await?;
    let users = ids(conn, "SELECT external_id, id FROM users").await?;
    let types = ids(conn, "SELECT name, id FROM consumer_types").await?;
    let mut consumers = Vec::new();
    let mut allocations = Vec::new();
    for c in &dump.consumers {
        consumers.push(vec![
            text(&c.uuid.to_string())?,
            id_in(&projects, &c.project_id, "project")?.to_string(),
            id_in(&users, &c.user_id, "user")?.to_string(),
            c.generation.to_string(),
            c.consumer_type
                .as_ref()
                .map_or(Ok("NULL".to_owned()), |t| {
                    id_in(&types, t, "consumer type").map(|id| id.to_string())
                })?,
            conn.datetime_of(c.created_at),
            conn.datetime_of(c.updated_at),
        ]);
        for a in &c.allocations {
            allocations.push(vec![
                pid(&a.provider)?.to_string(),
                text(&c.uuid.to_string())?,
                class_id(&a.resource_class)?.to_string(),
                a.used.to_string(),
                conn.datetime_of(c.updated_at),
            ]);
        }
    }
    insert(
        conn,
        "consumers",
        "uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at",
        &consumers,
    )
    .await?;
    insert(
        conn,
        "allocations",
        "resource_provider_id, consumer_id, resource_class_id, used, created_at",
        &allocations,
    )
    .await?;
    conn.execute("COMMIT").await.context("committing")?;
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

/// Reads `SELECT key, id` into a map.
async fn ids(conn: &mut Conn, sql: &str) -> anyhow::Result<HashMap<String, i64>> {
    conn.rows(sql)
        .await?
        .into_iter()
        .map(|row| match row.as_slice() {
            [Some(key), Some(id)] => Ok((key.clone(), id.parse()?)),
            _ => Err(anyhow!("{sql}: an unexpected row")),
        })
        .collect()
}

/// The id the database gave `key` (a row this export has just written): a key it
/// cannot find back means the database changed it on the way in, which the strict
/// `sql_mode` should have refused; an error, never a panic.
fn id_in(ids: &HashMap<String, i64>, key: &str, what: &str) -> anyhow::Result<i64> {
    ids.get(key)
        .copied()
        .ok_or_else(|| anyhow!("the {what} {key:?} was written but is not found back"))
}

/// Inserts rows of literals, [`BATCH`] to a statement.
async fn insert(
    conn: &mut Conn,
    table: &str,
    columns: &str,
    rows: &[Vec<String>],
) -> anyhow::Result<()> {
    let mut start = 0;
    while start < rows.len() {
        let end = (start + BATCH).min(rows.len());
        let values: Vec<String> = rows[start..end]
            .iter()
            .map(|r| format!("({})", r.join(", ")))
            .collect();
        conn.execute(&format!(
            "INSERT INTO {table} ({columns}) VALUES {}",
            values.join(", ")
        ))
        .await
        .with_context(|| format!("writing Placement's {table}"))?;
        start = end;
    }
    Ok(())
}

/// A string literal under the one quoting rule both sessions are set to.
fn text(s: &str) -> anyhow::Result<String> {
    if s.contains('\0') {
        bail!("{s:?} holds a NUL character, which neither database stores");
    }
    Ok(format!("'{}'", s.replace('\'', "''")))
}

impl Conn {
    /// Seconds since the epoch as a DATETIME literal (UTC).
    fn datetime_of(&self, seconds: i64) -> String {
        match self.dialect() {
            Dialect::MySql => format!("FROM_UNIXTIME({seconds})"),
            Dialect::Postgres => format!("(to_timestamp({seconds}) AT TIME ZONE 'UTC')"),
        }
    }

    /// Several statements separated by `;` (MySQL's text protocol takes them one by
    /// one unless the client allows more).
    async fn execute_many(&mut self, sql: &str) -> anyhow::Result<()> {
        for statement in sql.split(';').filter(|s| !s.trim().is_empty()) {
            self.execute(statement).await?;
        }
        Ok(())
    }
}
