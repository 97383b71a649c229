//! The embedded engine: one SQLite file in WAL mode.
//!
//! Durability: `journal_mode=WAL` with `synchronous=FULL`, so a committed transaction is
//! in the WAL and fsynced before `persist` returns; a crash (even `kill -9` or power
//! loss) keeps every acknowledged write. One connection is enough: the host serialises
//! writes, and reads are served from the in-memory view, never from here.
//!
//! Schema versions are kept in `PRAGMA user_version`; [`MIGRATIONS`] lists the scripts
//! that bring a database from one version to the next, applied in one transaction each
//! at open.

use std::path::Path;

use allot_core::{
    Allocation, Change, ClassRecord, ConsumerRow, Inventory, ProviderId, ProviderRow,
    ResourceClass, State, TraitName, TraitRecord, Uuid,
};
use rusqlite::{params, Connection, Transaction};

use crate::StoreError;

/// Schema migrations, in order; the database's `user_version` is how many have run.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE resource_classes (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE traits (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE providers (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    generation INTEGER NOT NULL,
    parent_id  INTEGER,
    root_id    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE inventories (
    provider_id      INTEGER NOT NULL,
    resource_class   TEXT NOT NULL,
    total            INTEGER NOT NULL,
    reserved         INTEGER NOT NULL,
    min_unit         INTEGER NOT NULL,
    max_unit         INTEGER NOT NULL,
    step_size        INTEGER NOT NULL,
    allocation_ratio REAL NOT NULL,
    PRIMARY KEY (provider_id, resource_class)
) WITHOUT ROWID;
CREATE TABLE provider_traits (
    provider_id INTEGER NOT NULL,
    trait       TEXT NOT NULL,
    PRIMARY KEY (provider_id, trait)
) WITHOUT ROWID;
CREATE TABLE provider_aggregates (
    provider_id INTEGER NOT NULL,
    aggregate   TEXT NOT NULL,
    PRIMARY KEY (provider_id, aggregate)
) WITHOUT ROWID;
"#,
    r#"
CREATE TABLE consumers (
    uuid          TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    consumer_type TEXT,
    generation    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE allocations (
    consumer_uuid  TEXT NOT NULL,
    provider_id    INTEGER NOT NULL,
    resource_class TEXT NOT NULL,
    used           INTEGER NOT NULL,
    PRIMARY KEY (consumer_uuid, provider_id, resource_class)
) WITHOUT ROWID;
CREATE INDEX allocations_by_provider ON allocations (provider_id);
"#,
];

/// The SQLite engine.
#[derive(Debug)]
pub struct SqliteEngine {
    conn: Connection,
}

impl SqliteEngine {
    /// Opens or creates the database at `path` (creating its directory) and migrates it.
    pub fn open(path: &str) -> Result<Self, StoreError> {
        if let Some(dir) = Path::new(path)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)?;
        }
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        // Another process holding the file would be a second writer behind the host's
        // back; refuse to share it rather than wait.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        migrate(&mut conn)?;
        Ok(SqliteEngine { conn })
    }

    /// Reads the whole database into a view.
    pub fn load(&mut self) -> Result<State, StoreError> {
        let mut changes = Vec::new();
        let conn = &self.conn;

        let mut stmt = conn.prepare("SELECT name, created_at, updated_at FROM resource_classes")?;
        for row in stmt.query_map([], |r| {
            Ok(ClassRecord {
                // Trusted: only names the core checked are ever written.
                name: ResourceClass::new_unchecked(r.get::<_, String>(0)?),
                created_at: r.get(1)?,
                updated_at: r.get(2)?,
            })
        })? {
            changes.push(Change::PutClass {
                record: row?,
                old_name: None,
            });
        }

        let mut stmt = conn.prepare("SELECT name, created_at FROM traits")?;
        for row in stmt.query_map([], |r| {
            Ok(TraitRecord {
                // Trusted: only names the core checked are ever written.
                name: TraitName::new_unchecked(r.get::<_, String>(0)?),
                created_at: r.get(1)?,
            })
        })? {
            changes.push(Change::PutTrait(row?));
        }

        let mut stmt = conn.prepare(
            "SELECT id, uuid, name, generation, parent_id, root_id, created_at, updated_at
             FROM providers ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, i64>(7)?,
            ))
        })?;
        for row in rows {
            let (id, uuid, name, generation, parent, root, created_at, updated_at) = row?;
            let uuid = Uuid::parse_str(&uuid)
                .map_err(|e| StoreError::Corrupt(format!("provider {id} uuid {uuid:?}: {e}")))?;
            let row = ProviderRow {
                id: ProviderId(id as u64),
                uuid,
                name,
                generation: generation as u64,
                parent: parent.map(|p| ProviderId(p as u64)),
                root: ProviderId(root as u64),
                created_at,
                updated_at,
            };
            changes.push(Change::PutProvider {
                row,
                previous_generation: None,
            });
        }

        let mut state = State::new();
        state.apply(&changes);
        state.relink_children();
        changes.clear();

        // Inventories, traits and aggregates are grouped per provider: rows come ordered
        // by provider so that each provider gets one Set* change.
        let mut stmt = conn.prepare(
            "SELECT provider_id, resource_class, total, reserved, min_unit, max_unit, step_size,
                    allocation_ratio
             FROM inventories ORDER BY provider_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                Inventory {
                    total: r.get::<_, i64>(2)? as u64,
                    reserved: r.get::<_, i64>(3)? as u64,
                    min_unit: r.get::<_, i64>(4)? as u64,
                    max_unit: r.get::<_, i64>(5)? as u64,
                    step_size: r.get::<_, i64>(6)? as u64,
                    allocation_ratio: r.get(7)?,
                },
            ))
        })?;
        let mut grouped: Vec<(ProviderId, Vec<(ResourceClass, Inventory)>)> = Vec::new();
        for row in rows {
            let (pid, class, inv) = row?;
            let pid = ProviderId(pid as u64);
            // Trusted: classes read back from the store were checked when written.
            match grouped.last_mut() {
                Some((last, list)) if *last == pid => {
                    list.push((ResourceClass::new_unchecked(class), inv))
                }
                _ => grouped.push((pid, vec![(ResourceClass::new_unchecked(class), inv)])),
            }
        }
        changes.extend(
            grouped
                .into_iter()
                .map(|(p, l)| Change::SetInventories(p, l)),
        );

        let mut stmt =
            conn.prepare("SELECT provider_id, trait FROM provider_traits ORDER BY provider_id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut grouped: Vec<(ProviderId, Vec<TraitName>)> = Vec::new();
        for row in rows {
            let (pid, name) = row?;
            let pid = ProviderId(pid as u64);
            // Trusted: traits read back from the store were checked when written.
            match grouped.last_mut() {
                Some((last, list)) if *last == pid => list.push(TraitName::new_unchecked(name)),
                _ => grouped.push((pid, vec![TraitName::new_unchecked(name)])),
            }
        }
        changes.extend(grouped.into_iter().map(|(p, l)| Change::SetTraits(p, l)));

        let mut stmt = conn.prepare(
            "SELECT provider_id, aggregate FROM provider_aggregates ORDER BY provider_id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut grouped: Vec<(ProviderId, Vec<Uuid>)> = Vec::new();
        for row in rows {
            let (pid, agg) = row?;
            let agg = Uuid::parse_str(&agg)
                .map_err(|e| StoreError::Corrupt(format!("aggregate {agg:?}: {e}")))?;
            let pid = ProviderId(pid as u64);
            match grouped.last_mut() {
                Some((last, list)) if *last == pid => list.push(agg),
                _ => grouped.push((pid, vec![agg])),
            }
        }
        changes.extend(
            grouped
                .into_iter()
                .map(|(p, l)| Change::SetAggregates(p, l)),
        );
        load_consumers(conn, &mut changes)?;

        state.apply(&changes);
        Ok(state)
    }

    /// Writes `changes` in one transaction and commits (fsync included).
    pub fn persist(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        for change in changes {
            write_change(&tx, change)?;
        }
        tx.commit()?;
        Ok(())
    }
}

/// Reads consumers and their allocations as the changes that recreate them.
fn load_consumers(conn: &Connection, changes: &mut Vec<Change>) -> Result<(), StoreError> {
    let parse_uuid = |text: String, what: &str| {
        Uuid::parse_str(&text).map_err(|e| StoreError::Corrupt(format!("{what} {text:?}: {e}")))
    };
    let mut stmt = conn.prepare(
        "SELECT uuid, project_id, user_id, consumer_type, generation, created_at, updated_at
         FROM consumers",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, Option<String>>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
        ))
    })?;
    for row in rows {
        let (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at) = row?;
        let row = ConsumerRow {
            uuid: parse_uuid(uuid, "consumer")?,
            project_id,
            user_id,
            consumer_type,
            generation: generation as u64,
            created_at,
            updated_at,
        };
        changes.push(Change::PutConsumer {
            row,
            previous_generation: None,
        });
    }

    let mut stmt = conn.prepare(
        "SELECT consumer_uuid, provider_id, resource_class, used FROM allocations
         ORDER BY consumer_uuid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut grouped: Vec<(String, Vec<Allocation>)> = Vec::new();
    for row in rows {
        let (consumer, provider, class, used) = row?;
        let allocation = Allocation {
            provider: ProviderId(provider as u64),
            // Trusted: classes read back from the store were checked when written.
            class: ResourceClass::new_unchecked(class),
            used: used as u64,
        };
        match grouped.last_mut() {
            Some((last, list)) if *last == consumer => list.push(allocation),
            _ => grouped.push((consumer, vec![allocation])),
        }
    }
    for (consumer, list) in grouped {
        changes.push(Change::SetAllocations(
            parse_uuid(consumer, "allocation consumer")?,
            list,
        ));
    }
    Ok(())
}

fn write_change(tx: &Transaction<'_>, change: &Change) -> Result<(), StoreError> {
    match change {
        Change::PutClass { record, old_name } => {
            if let Some(old) = old_name {
                tx.execute(
                    "DELETE FROM resource_classes WHERE name = ?1",
                    [old.as_str()],
                )?;
                // Rows refer to classes by name: a rename carries them along.
                for table in ["inventories", "allocations"] {
                    tx.execute(
                        &format!(
                            "UPDATE {table} SET resource_class = ?2 WHERE resource_class = ?1"
                        ),
                        [old.as_str(), record.name.as_str()],
                    )?;
                }
            }
            tx.execute(
                "INSERT OR REPLACE INTO resource_classes (name, created_at, updated_at)
                 VALUES (?1, ?2, ?3)",
                params![record.name.as_str(), record.created_at, record.updated_at],
            )?;
        }
        Change::DeleteClass(name) => {
            tx.execute(
                "DELETE FROM resource_classes WHERE name = ?1",
                [name.as_str()],
            )?;
        }
        Change::PutTrait(record) => {
            tx.execute(
                "INSERT OR REPLACE INTO traits (name, created_at) VALUES (?1, ?2)",
                params![record.name.as_str(), record.created_at],
            )?;
        }
        Change::DeleteTrait(name) => {
            tx.execute("DELETE FROM traits WHERE name = ?1", [name.as_str()])?;
        }
        Change::PutProvider { row, .. } => {
            tx.execute(
                "INSERT INTO providers
                     (id, uuid, name, generation, parent_id, root_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET
                     uuid = excluded.uuid, name = excluded.name,
                     generation = excluded.generation, parent_id = excluded.parent_id,
                     root_id = excluded.root_id, updated_at = excluded.updated_at",
                params![
                    row.id.0 as i64,
                    row.uuid.to_string(),
                    row.name,
                    row.generation as i64,
                    row.parent.map(|p| p.0 as i64),
                    row.root.0 as i64,
                    row.created_at,
                    row.updated_at
                ],
            )?;
        }
        Change::DeleteProvider(id) => {
            let id = id.0 as i64;
            for table in ["inventories", "provider_traits", "provider_aggregates"] {
                tx.execute(&format!("DELETE FROM {table} WHERE provider_id = ?1"), [id])?;
            }
            tx.execute("DELETE FROM providers WHERE id = ?1", [id])?;
        }
        Change::SetInventories(id, inventories) => {
            let id = id.0 as i64;
            tx.execute("DELETE FROM inventories WHERE provider_id = ?1", [id])?;
            let mut stmt = tx.prepare_cached(
                "INSERT INTO inventories (provider_id, resource_class, total, reserved, min_unit,
                                          max_unit, step_size, allocation_ratio)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for (class, inv) in inventories {
                stmt.execute(params![
                    id,
                    class.as_str(),
                    inv.total as i64,
                    inv.reserved as i64,
                    inv.min_unit as i64,
                    inv.max_unit as i64,
                    inv.step_size as i64,
                    inv.allocation_ratio
                ])?;
            }
        }
        Change::SetTraits(id, traits) => {
            let id = id.0 as i64;
            tx.execute("DELETE FROM provider_traits WHERE provider_id = ?1", [id])?;
            let mut stmt = tx.prepare_cached(
                "INSERT INTO provider_traits (provider_id, trait) VALUES (?1, ?2)",
            )?;
            for name in traits {
                stmt.execute(params![id, name.as_str()])?;
            }
        }
        Change::SetAggregates(id, aggregates) => {
            let id = id.0 as i64;
            tx.execute(
                "DELETE FROM provider_aggregates WHERE provider_id = ?1",
                [id],
            )?;
            let mut stmt = tx.prepare_cached(
                "INSERT INTO provider_aggregates (provider_id, aggregate) VALUES (?1, ?2)",
            )?;
            for agg in aggregates {
                stmt.execute(params![id, agg.to_string()])?;
            }
        }
        Change::PutConsumer { row, .. } => {
            tx.execute(
                "INSERT INTO consumers
                     (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (uuid) DO UPDATE SET
                     project_id = excluded.project_id, user_id = excluded.user_id,
                     consumer_type = excluded.consumer_type, generation = excluded.generation,
                     updated_at = excluded.updated_at",
                params![
                    row.uuid.to_string(),
                    row.project_id,
                    row.user_id,
                    row.consumer_type,
                    row.generation as i64,
                    row.created_at,
                    row.updated_at
                ],
            )?;
        }
        Change::DeleteConsumer(uuid) => {
            let uuid = uuid.to_string();
            tx.execute("DELETE FROM allocations WHERE consumer_uuid = ?1", [&uuid])?;
            tx.execute("DELETE FROM consumers WHERE uuid = ?1", [&uuid])?;
        }
        Change::SetAllocations(uuid, allocations) => {
            let uuid = uuid.to_string();
            tx.execute("DELETE FROM allocations WHERE consumer_uuid = ?1", [&uuid])?;
            let mut stmt = tx.prepare_cached(
                "INSERT INTO allocations (consumer_uuid, provider_id, resource_class, used)
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            for a in allocations {
                stmt.execute(params![
                    uuid,
                    a.provider.0 as i64,
                    a.class.as_str(),
                    a.used as i64
                ])?;
            }
        }
    }
    Ok(())
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let supported = MIGRATIONS.len() as i64;
    if version > supported {
        return Err(StoreError::TooNew {
            found: version,
            supported,
        });
    }
    for (i, script) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(script)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}
