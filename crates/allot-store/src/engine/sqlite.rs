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
        // A checkpoint runs inside the commit that crosses the mark, and every write
        // queued behind that commit waits for it: a quarter of SQLite's default
        // interval (1,000 pages) makes the waits a quarter as long. Under a 64-client
        // claim storm on 2 cores this took the p99 from about 20 ms to 17 at the same
        // throughput (docs/performance.md).
        conn.pragma_update(None, "wal_autocheckpoint", 250)?;
        // Another process holding the file would be a second writer behind the host's
        // back; refuse to share it rather than wait.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        migrate(&mut conn)?;
        // Room for every statement `write_change` runs, so none is parsed twice.
        conn.set_prepared_statement_cache_capacity(64);
        Ok(SqliteEngine { conn })
    }

    /// Reads the whole database into a view.
    ///
    /// Rows are folded into the view as they are read, a provider's or a consumer's
    /// rows at a time, never gathered first: at a million providers the records would
    /// otherwise be held twice at the peak of start-up. Text is read in place
    /// (`get_ref`) where it is parsed or interned, so a row costs no allocation of its
    /// own.
    pub fn load(&mut self) -> Result<State, StoreError> {
        let conn = &self.conn;
        let mut state = State::new();
        let count = |table: &str| -> Result<usize, StoreError> {
            let n: i64 =
                conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
            Ok(n as usize)
        };
        state.reserve(count("providers")?, count("consumers")?);

        let mut stmt = conn.prepare("SELECT name, created_at, updated_at FROM resource_classes")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let record = ClassRecord {
                // Trusted: only names the core checked are ever written.
                name: ResourceClass::new_unchecked(text(r, 0)?),
                created_at: r.get(1)?,
                updated_at: r.get(2)?,
            };
            state.apply(&[Change::PutClass {
                record,
                old_name: None,
            }]);
        }

        let mut stmt = conn.prepare("SELECT name, created_at FROM traits")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let record = TraitRecord {
                // Trusted: only names the core checked are ever written.
                name: TraitName::new_unchecked(text(r, 0)?),
                created_at: r.get(1)?,
            };
            state.apply(&[Change::PutTrait(record)]);
        }

        let mut stmt = conn.prepare(
            "SELECT id, uuid, name, generation, parent_id, root_id, created_at, updated_at
             FROM providers ORDER BY id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let row = ProviderRow {
                id: ProviderId(id as u64),
                uuid: parse_uuid(text(r, 1)?, "provider")?,
                name: r.get(2)?,
                generation: r.get::<_, i64>(3)? as u64,
                parent: r.get::<_, Option<i64>>(4)?.map(|p| ProviderId(p as u64)),
                root: ProviderId(r.get::<_, i64>(5)? as u64),
                created_at: r.get(6)?,
                updated_at: r.get(7)?,
            };
            state.apply(&[Change::PutProvider {
                row,
                previous_generation: None,
            }]);
        }
        state.relink_children();

        // Inventories, traits and aggregates come ordered by provider (their primary
        // keys), so each provider's rows make one Set* change.
        let mut stmt = conn.prepare(
            "SELECT provider_id, resource_class, total, reserved, min_unit, max_unit, step_size,
                    allocation_ratio
             FROM inventories ORDER BY provider_id",
        )?;
        fold_groups(
            stmt.query([])?,
            &mut state,
            |r| {
                let inventory = Inventory {
                    total: r.get::<_, i64>(2)? as u64,
                    reserved: r.get::<_, i64>(3)? as u64,
                    min_unit: r.get::<_, i64>(4)? as u64,
                    max_unit: r.get::<_, i64>(5)? as u64,
                    step_size: r.get::<_, i64>(6)? as u64,
                    allocation_ratio: r.get(7)?,
                };
                // Trusted: classes read back from the store were checked when written.
                let class = ResourceClass::new_unchecked(text(r, 1)?);
                Ok((provider_key(r)?, (class, inventory)))
            },
            |p, list| Change::SetInventories(ProviderId(p as u64), list),
        )?;

        let mut stmt =
            conn.prepare("SELECT provider_id, trait FROM provider_traits ORDER BY provider_id")?;
        fold_groups(
            stmt.query([])?,
            &mut state,
            // Trusted: traits read back from the store were checked when written.
            |r| Ok((provider_key(r)?, TraitName::new_unchecked(text(r, 1)?))),
            |p, list| Change::SetTraits(ProviderId(p as u64), list),
        )?;

        let mut stmt = conn.prepare(
            "SELECT provider_id, aggregate FROM provider_aggregates ORDER BY provider_id",
        )?;
        fold_groups(
            stmt.query([])?,
            &mut state,
            |r| Ok((provider_key(r)?, parse_uuid(text(r, 1)?, "aggregate")?)),
            |p, list| Change::SetAggregates(ProviderId(p as u64), list),
        )?;

        // Consumers and their allocations, read side by side in uuid order (both
        // tables are keyed by it), so that each consumer's allocations are applied
        // right after it, while its record is still in the cache.
        let mut consumers = conn.prepare(
            "SELECT uuid, project_id, user_id, consumer_type, generation, created_at, updated_at
             FROM consumers ORDER BY uuid",
        )?;
        let mut allocations = conn.prepare(
            "SELECT consumer_uuid, provider_id, resource_class, used FROM allocations
             ORDER BY consumer_uuid",
        )?;
        let mut allocations = allocations.query([])?;
        let mut pending = allocations.next()?;
        let mut rows = consumers.query([])?;
        while let Some(r) = rows.next()? {
            let key = text(r, 0)?;
            let row = ConsumerRow {
                uuid: parse_uuid(key, "consumer")?,
                project_id: text(r, 1)?.into(),
                user_id: text(r, 2)?.into(),
                consumer_type: optional_text(r, 3)?.map(Into::into),
                generation: r.get::<_, i64>(4)? as u64,
                created_at: r.get(5)?,
                updated_at: r.get(6)?,
            };
            let uuid = row.uuid;
            let mut held = Vec::new();
            // Allocation rows up to this consumer's; any before it name no consumer
            // (the writes never leave such rows) and are skipped, as applying them
            // would do.
            while let Some(a) = pending {
                let of = text(a, 0)?;
                if of > key {
                    break;
                }
                if of == key {
                    held.push(Allocation {
                        provider: ProviderId(a.get::<_, i64>(1)? as u64),
                        // Trusted: classes read back from the store were checked
                        // when written.
                        class: ResourceClass::new_unchecked(text(a, 2)?),
                        used: a.get::<_, i64>(3)? as u64,
                    });
                }
                pending = allocations.next()?;
            }
            state.apply(&[Change::PutConsumer {
                row,
                previous_generation: None,
            }]);
            if !held.is_empty() {
                state.apply(&[Change::SetAllocations(uuid, held)]);
            }
        }
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

/// Column `i` of a row as text, read in place.
fn text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str, StoreError> {
    optional_text(r, i)?.ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
}

/// Column `i` of a row as text or NULL, read in place.
fn optional_text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<Option<&'r str>, StoreError> {
    r.get_ref(i)?
        .as_str_or_null()
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// The provider id in the first column of a row.
fn provider_key(r: &rusqlite::Row<'_>) -> Result<i64, StoreError> {
    Ok(r.get(0)?)
}

fn parse_uuid(text: &str, what: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Corrupt(format!("{what} {text:?}: {e}")))
}

/// Reads rows that come ordered by a key, gathers each key's items (`item` reads one
/// row) and applies them to `state` as one change (`change`), a key at a time.
fn fold_groups<K: PartialEq, T>(
    mut rows: rusqlite::Rows<'_>,
    state: &mut State,
    mut item: impl FnMut(&rusqlite::Row<'_>) -> Result<(K, T), StoreError>,
    change: impl Fn(K, Vec<T>) -> Change,
) -> Result<(), StoreError> {
    let mut group: Option<(K, Vec<T>)> = None;
    while let Some(r) = rows.next()? {
        let (key, value) = item(r)?;
        match &mut group {
            Some((current, list)) if *current == key => list.push(value),
            _ => {
                if let Some((done, list)) = group.replace((key, vec![value])) {
                    state.apply(&[change(done, list)]);
                }
            }
        }
    }
    if let Some((done, list)) = group {
        state.apply(&[change(done, list)]);
    }
    Ok(())
}

/// Runs one statement of a write, prepared once per connection: a claim writes a few
/// rows, and parsing their SQL each time cost more than writing them.
fn exec(tx: &Transaction<'_>, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    tx.prepare_cached(sql)?.execute(params)
}

fn write_change(tx: &Transaction<'_>, change: &Change) -> Result<(), StoreError> {
    match change {
        Change::PutClass { record, old_name } => {
            if let Some(old) = old_name {
                exec(
                    tx,
                    "DELETE FROM resource_classes WHERE name = ?1",
                    [old.as_str()],
                )?;
                // Rows refer to classes by name: a rename carries them along.
                for table in ["inventories", "allocations"] {
                    exec(
                        tx,
                        &format!(
                            "UPDATE {table} SET resource_class = ?2 WHERE resource_class = ?1"
                        ),
                        [old.as_str(), record.name.as_str()],
                    )?;
                }
            }
            exec(
                tx,
                "INSERT OR REPLACE INTO resource_classes (name, created_at, updated_at)
                 VALUES (?1, ?2, ?3)",
                params![record.name.as_str(), record.created_at, record.updated_at],
            )?;
        }
        Change::DeleteClass(name) => {
            exec(
                tx,
                "DELETE FROM resource_classes WHERE name = ?1",
                [name.as_str()],
            )?;
        }
        Change::PutTrait(record) => {
            exec(
                tx,
                "INSERT OR REPLACE INTO traits (name, created_at) VALUES (?1, ?2)",
                params![record.name.as_str(), record.created_at],
            )?;
        }
        Change::DeleteTrait(name) => {
            exec(tx, "DELETE FROM traits WHERE name = ?1", [name.as_str()])?;
        }
        Change::PutProvider { row, .. } => {
            exec(
                tx,
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
                exec(
                    tx,
                    &format!("DELETE FROM {table} WHERE provider_id = ?1"),
                    [id],
                )?;
            }
            exec(tx, "DELETE FROM providers WHERE id = ?1", [id])?;
        }
        Change::SetInventories(id, inventories) => {
            let id = id.0 as i64;
            exec(tx, "DELETE FROM inventories WHERE provider_id = ?1", [id])?;
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
            exec(
                tx,
                "DELETE FROM provider_traits WHERE provider_id = ?1",
                [id],
            )?;
            let mut stmt = tx.prepare_cached(
                "INSERT INTO provider_traits (provider_id, trait) VALUES (?1, ?2)",
            )?;
            for name in traits {
                stmt.execute(params![id, name.as_str()])?;
            }
        }
        Change::SetAggregates(id, aggregates) => {
            let id = id.0 as i64;
            exec(
                tx,
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
            exec(
                tx,
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
            exec(
                tx,
                "DELETE FROM allocations WHERE consumer_uuid = ?1",
                [&uuid],
            )?;
            exec(tx, "DELETE FROM consumers WHERE uuid = ?1", [&uuid])?;
        }
        Change::SetAllocations(uuid, allocations) => {
            let uuid = uuid.to_string();
            exec(
                tx,
                "DELETE FROM allocations WHERE consumer_uuid = ?1",
                [&uuid],
            )?;
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
