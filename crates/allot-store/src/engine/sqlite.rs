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

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::Path;
use std::sync::mpsc::{self, SyncSender};

use allot_core::{
    Allocation, Change, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, TraitName, TraitRecord, Uuid,
};
use rusqlite::{params, Connection, Transaction};

use super::{lost_race, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

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
    // 2: resource class metadata (issue 10), one row per custom class that has some;
    // rows follow their class by name, as inventories and allocations do.
    r#"
CREATE TABLE class_metadata (
    name         TEXT PRIMARY KEY,
    units        TEXT,
    display_name TEXT,
    description  TEXT
) WITHOUT ROWID;
"#,
    // 3: pending claims (issue 10). A claim's amounts name providers by uuid, which
    // outlives the provider for a claim that ended; their classes follow renames by
    // name, as inventories and allocations do.
    r#"
CREATE TABLE claims (
    uuid          TEXT PRIMARY KEY,
    consumer_uuid TEXT NOT NULL,
    project_id    TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    consumer_type TEXT,
    tag           TEXT,
    state         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    ended_at      INTEGER
) WITHOUT ROWID;
CREATE TABLE claim_allocations (
    claim_uuid     TEXT NOT NULL,
    provider_uuid  TEXT NOT NULL,
    resource_class TEXT NOT NULL,
    amount         INTEGER NOT NULL,
    PRIMARY KEY (claim_uuid, provider_uuid, resource_class)
) WITHOUT ROWID;
"#,
    // 4: the change log (issue 12): each transaction's changes, numbered (`crate::log`).
    // Its head is the largest `seq`; pruning keeps the newest rows, so it survives.
    r#"
CREATE TABLE change_log (
    seq     INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    changes BLOB NOT NULL
);
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

    /// The connection's `journal_mode` and `synchronous` as SQLite reports them
    /// (`wal` and 2 for FULL): what the durability promise above rests on, read back
    /// so that tests can hold the engine to it.
    pub fn durability(&self) -> Result<(String, i64), StoreError> {
        let journal_mode = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        let synchronous = self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))?;
        Ok((journal_mode, synchronous))
    }

    /// Reads the whole database into a view.
    ///
    /// Two threads, so that the two halves of the work overlap on two cores: a reader
    /// (spawned here, with the connection) steps through the rows and decodes them
    /// into records, and this thread folds them into the view as they come, in
    /// batches over a short queue. The order of the folds is the order of the rows,
    /// as if one thread did both.
    ///
    /// Rows are folded as they are read, a provider's or a consumer's rows at a
    /// time, never gathered first: at a million providers the records would otherwise
    /// be held twice at the peak of start-up (the queue holds 65,536 records at
    /// most). Text is read in place (`get_ref`) where it is parsed; a class or trait
    /// name, or a consumer's project, user or type, crosses once and is shared after.
    /// The providers' and the consumers' tables are each read side by side with the
    /// tables of what they hold, so that the two threads keep pace row by row.
    pub fn load(&mut self) -> Result<(State, Cursor), StoreError> {
        // The file is this process's alone (`locking_mode=EXCLUSIVE`): nothing commits
        // between this read of the head and the tables'.
        let head = self.head()?;
        let conn = &mut self.conn;
        let (out, steps) = mpsc::sync_channel(IN_FLIGHT);
        std::thread::scope(|scope| {
            let reader = std::thread::Builder::new()
                .name("allot-load".into())
                .spawn_scoped(scope, move || read(conn, out))?;
            let (mut state, mut palette) = (State::new(), Palette::default());
            for batch in steps {
                // What the batch's records will change, read first so that the
                // cache misses overlap (see `State::warm_consumer`).
                let warmth: usize = batch.iter().map(|step| warm(&state, step)).sum();
                std::hint::black_box(warmth);
                for step in batch {
                    fold(&mut state, &mut palette, step);
                }
            }
            // The queue closed: the reader is done, or failed and says why.
            match reader.join() {
                Ok(read) => read?,
                Err(panic) => std::panic::resume_unwind(panic),
            }
            Ok((state, head))
        })
    }

    /// The change log's head.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        log_head(&self.conn)
    }

    /// Every commit after `after`, oldest first.
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        commits_after(&self.conn, after)
    }

    /// One write transaction (see `Store::write`; `at: None` for `Store::persist`).
    /// SQLite's write lock (`BEGIN IMMEDIATE`) is the log's lock.
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let head = log_head(&tx)?;
        // A view at the head has nothing to catch up: no read of the log on the
        // single-process path (every write of an exclusive file).
        let unseen = match at {
            Some(at) if at != head => commits_after(&tx, at)?,
            _ => Vec::new(),
        };
        let changes = plan(unseen);
        if changes.is_empty() {
            return Ok(head);
        }
        for change in &changes {
            write_change(&tx, change)?;
        }
        let next = Cursor(head.0 + 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        exec(
            &tx,
            "INSERT INTO change_log (seq, at, changes) VALUES (?1, ?2, ?3)",
            params![next.0, now, crate::log::encode(&changes)],
        )?;
        if next.0 % LOG_PRUNE_EVERY == 0 {
            exec(
                &tx,
                "DELETE FROM change_log WHERE seq <= ?1",
                [next.0 - LOG_KEEP],
            )?;
        }
        tx.commit()?;
        Ok(next)
    }
}

fn log_head(conn: &Connection) -> Result<Cursor, StoreError> {
    let seq: Option<i64> = conn
        .prepare_cached("SELECT max(seq) FROM change_log")?
        .query_row([], |r| r.get(0))?;
    Ok(Cursor(seq.unwrap_or(0)))
}

fn commits_after(conn: &Connection, after: Cursor) -> Result<Vec<Commit>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT seq, changes FROM change_log WHERE seq > ?1 ORDER BY seq")?;
    let mut rows = stmt.query([after.0])?;
    let mut commits = Vec::new();
    while let Some(r) = rows.next()? {
        let seq: i64 = r.get(0)?;
        // Numbers have no gaps: a first one past `after + 1` means the rows between
        // were pruned.
        if seq != after.0 + 1 + commits.len() as i64 {
            return Err(StoreError::Behind(after.0));
        }
        commits.push(Commit {
            cursor: Cursor(seq),
            changes: crate::log::decode(bytes(r, 1)?)?,
        });
    }
    if commits.is_empty() && log_head(conn)?.0 < after.0 {
        return Err(StoreError::Corrupt(format!(
            "asked for commits after {} but the log ends before it",
            after.0
        )));
    }
    Ok(commits)
}

/// Steps per message on the load's queue: enough that the queue costs nothing per
/// row, few enough that what is in flight stays small.
const BATCH: usize = 256;

/// Messages the load's reader may be ahead of the fold.
const IN_FLIGHT: usize = 256;

/// What the load's reader hands the thread that builds the view.
///
/// Names and texts cross as plain bytes, once each, and the steps after refer to them
/// by their place in the load's list: the view's shared copies are made and counted
/// on the building thread alone. (Sharing `Arc`s between the two threads made every
/// reference count a cache line that both cores write, and that cost more than the
/// copying it saved.)
enum Step {
    /// Make room for this many more providers and consumers (so that the tables do
    /// not rehash again and again while they fill).
    Reserve { providers: usize, consumers: usize },
    /// The next resource class name of the load's list.
    Class(Box<str>),
    /// The next trait name of the load's list.
    Trait(Box<str>),
    /// A provider's row.
    Provider(ProviderRow),
    /// Every provider's row is in: link children to parents.
    Relink,
    /// A provider's inventories, classes by their place in the list.
    Inventories(ProviderId, Vec<(u32, Inventory)>),
    /// A provider's traits, by their place in the list.
    Traits(ProviderId, Vec<u32>),
    /// Any other record, as a change.
    Change(Change),
    /// A consumer and its allocations.
    Consumer(RawConsumer),
}

/// A consumer as the reader hands it over.
struct RawConsumer {
    uuid: Uuid,
    /// The project, user and type, each only when it differs from the previous
    /// consumer's (most clouds have few, and a bench's have one each).
    project: Option<Box<str>>,
    user: Option<Box<str>>,
    kind: Option<Option<Box<str>>>,
    generation: u64,
    created_at: i64,
    updated_at: i64,
    /// Provider, class (its place in the list), amount.
    allocations: Vec<(ProviderId, u32, u64)>,
    /// Whether it is known not to be in the view yet (see `State::load_consumer`).
    known_new: bool,
}

/// The building thread's copies of what the reader sent once: the names by their
/// place, and the previous consumer's texts.
#[derive(Default)]
struct Palette {
    classes: Vec<ResourceClass>,
    traits: Vec<TraitName>,
    project: Option<Text>,
    user: Option<Text>,
    kind: Option<Text>,
}

/// Reads what folding `step` will change (see `State::warm_consumer`).
fn warm(state: &State, step: &Step) -> usize {
    match step {
        Step::Provider(row) => state.warm_provider(row),
        Step::Consumer(raw) => state.warm_consumer(&raw.uuid, raw.allocations.first().map(|a| a.0)),
        _ => 0,
    }
}

/// Folds one step of a load into the view.
fn fold(state: &mut State, palette: &mut Palette, step: Step) {
    match step {
        Step::Reserve {
            providers,
            consumers,
        } => state.reserve(providers, consumers),
        // Trusted: names read back from the store were checked when written.
        Step::Class(name) => palette.classes.push(ResourceClass::new_unchecked(name)),
        Step::Trait(name) => palette.traits.push(TraitName::new_unchecked(name)),
        Step::Provider(row) => state.load_provider(row),
        Step::Relink => state.relink_children(),
        Step::Inventories(id, list) => {
            let list = list
                .iter()
                .map(|(c, inventory)| (palette.classes[*c as usize].clone(), *inventory))
                .collect();
            state.load_change(Change::SetInventories(id, list));
        }
        Step::Traits(id, list) => {
            let list = list
                .iter()
                .map(|t| palette.traits[*t as usize].clone())
                .collect();
            state.load_change(Change::SetTraits(id, list));
        }
        Step::Change(change) => state.load_change(change),
        Step::Consumer(raw) => {
            let RawConsumer {
                uuid,
                project,
                user,
                kind,
                generation,
                created_at,
                updated_at,
                allocations,
                known_new,
            } = raw;
            if let Some(text) = project {
                palette.project = Some(text.into());
            }
            if let Some(text) = user {
                palette.user = Some(text.into());
            }
            if let Some(text) = kind {
                palette.kind = text.map(Into::into);
            }
            let row = ConsumerRow {
                uuid,
                project_id: palette.project.clone().unwrap_or_default(),
                user_id: palette.user.clone().unwrap_or_default(),
                consumer_type: palette.kind.clone(),
                generation,
                created_at,
                updated_at,
            };
            let allocations = allocations
                .iter()
                .map(|(provider, class, used)| Allocation {
                    provider: *provider,
                    class: palette.classes[*class as usize].clone(),
                    used: *used,
                })
                .collect();
            state.load_consumer(row, allocations, known_new);
        }
    }
}

/// The reader's end of the load's queue: gathers steps into batches.
struct Steps {
    out: SyncSender<Vec<Step>>,
    batch: Vec<Step>,
}

impl Steps {
    fn push(&mut self, step: Step) -> Result<(), StoreError> {
        self.batch.push(step);
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        // The receiving end goes only if the fold panicked; that panic is the news.
        self.out
            .send(full)
            .map_err(|_| StoreError::Io(std::io::Error::other("the view being loaded is gone")))
    }
}

/// The names (classes or traits) the load has met, in order: each is sent once,
/// then referred to by its place.
#[derive(Default)]
struct Names {
    list: Vec<Box<[u8]>>,
    places: HashMap<Box<[u8]>, u32>,
}

/// Below this many names, finding one by comparing it with each is quicker than
/// hashing it.
const FEW_NAMES: usize = 16;

impl Names {
    /// The place of `name` in the list, and the name as text if it is new there (to
    /// be sent before anything that refers to it).
    fn place(&mut self, name: &[u8]) -> Result<(u32, Option<Box<str>>), StoreError> {
        let found = if self.list.len() <= FEW_NAMES {
            self.list
                .iter()
                .position(|n| **n == *name)
                .map(|i| i as u32)
        } else {
            self.places.get(name).copied()
        };
        if let Some(i) = found {
            return Ok((i, None));
        }
        let text = std::str::from_utf8(name)
            .map_err(|e| StoreError::Corrupt(format!("name {name:?}: {e}")))?;
        let i = self.list.len() as u32;
        self.list.push(name.into());
        self.places.insert(name.into(), i);
        Ok((i, Some(text.into())))
    }
}

/// The place of the class `name`, announcing it first if it is new.
fn class_place(names: &mut Names, name: &[u8], out: &mut Steps) -> Result<u32, StoreError> {
    let (place, new) = names.place(name)?;
    if let Some(name) = new {
        out.push(Step::Class(name))?;
    }
    Ok(place)
}

/// The place of the trait `name`, announcing it first if it is new.
fn trait_place(names: &mut Names, name: &[u8], out: &mut Steps) -> Result<u32, StoreError> {
    let (place, new) = names.place(name)?;
    if let Some(name) = new {
        out.push(Step::Trait(name))?;
    }
    Ok(place)
}

/// The previous row's value of one text column: a row repeating it sends nothing.
#[derive(Default)]
struct Repeat(Option<Option<Vec<u8>>>);

impl Repeat {
    /// `None` if `value` repeats the previous row's, else the new value as text.
    fn changed(&mut self, value: Option<&[u8]>) -> Result<Option<Option<Box<str>>>, StoreError> {
        if let Some(previous) = &self.0 {
            if previous.as_deref() == value {
                return Ok(None);
            }
        }
        let text = value
            .map(|b| std::str::from_utf8(b).map(Box::from))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("text {value:?}: {e}")))?;
        self.0 = Some(value.map(<[u8]>::to_vec));
        Ok(Some(text))
    }

    /// As [`Repeat::changed`], for a column that may not be NULL.
    fn changed_text(&mut self, value: &[u8]) -> Result<Option<Box<str>>, StoreError> {
        Ok(self.changed(Some(value))?.flatten())
    }
}

/// The load's reader: every row, decoded, in the order the view is built in.
fn read(conn: &Connection, out: SyncSender<Vec<Step>>) -> Result<(), StoreError> {
    let mut out = Steps {
        out,
        batch: Vec::with_capacity(BATCH),
    };
    let (mut classes, mut traits) = (Names::default(), Names::default());
    let count = |table: &str| -> Result<usize, StoreError> {
        let n: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
        Ok(n as usize)
    };
    out.push(Step::Reserve {
        providers: count("providers")?,
        consumers: count("consumers")?,
    })?;

    let mut stmt = conn.prepare("SELECT name, created_at, updated_at FROM resource_classes")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let record = ClassRecord {
            // Trusted: only names the core checked are ever written.
            name: ResourceClass::new_unchecked(text(r, 0)?),
            created_at: r.get(1)?,
            updated_at: r.get(2)?,
        };
        out.push(Step::Change(Change::PutClass {
            record,
            old_name: None,
        }))?;
    }

    // After the classes, so that each row's class is in the view when it is folded.
    let mut stmt =
        conn.prepare("SELECT name, units, display_name, description FROM class_metadata")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let metadata = ClassMetadata {
            units: r.get(1)?,
            display_name: r.get(2)?,
            description: r.get(3)?,
        };
        out.push(Step::Change(Change::SetClassMetadata(
            // Trusted: only names of classes the core checked are ever written.
            ResourceClass::new_unchecked(text(r, 0)?),
            Some(metadata),
        )))?;
    }

    let mut stmt = conn.prepare("SELECT name, created_at FROM traits")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let record = TraitRecord {
            // Trusted: only names the core checked are ever written.
            name: TraitName::new_unchecked(text(r, 0)?),
            created_at: r.get(1)?,
        };
        out.push(Step::Change(Change::PutTrait(record)))?;
    }

    // Providers, and with each its inventories, traits and aggregates: the four
    // tables are read side by side in provider id order (their keys), so that each
    // provider's rows are folded right after it (while its record is in the cache),
    // and the reader and the fold keep pace with each other row by row instead of
    // table by table. Rows of no provider (the writes never leave any) are skipped,
    // as applying them would do.
    let mut providers = conn.prepare(
        "SELECT id, uuid, name, generation, parent_id, root_id, created_at, updated_at
         FROM providers ORDER BY id",
    )?;
    let mut inventories = conn.prepare(
        "SELECT provider_id, resource_class, total, reserved, min_unit, max_unit, step_size,
                allocation_ratio
         FROM inventories ORDER BY provider_id",
    )?;
    let mut provider_traits =
        conn.prepare("SELECT provider_id, trait FROM provider_traits ORDER BY provider_id")?;
    let mut aggregates = conn
        .prepare("SELECT provider_id, aggregate FROM provider_aggregates ORDER BY provider_id")?;
    let mut inventories = inventories.query([])?;
    let mut provider_traits = provider_traits.query([])?;
    let mut aggregates = aggregates.query([])?;
    let (mut inventory, mut provider_trait, mut aggregate) = (
        inventories.next()?,
        provider_traits.next()?,
        aggregates.next()?,
    );
    let mut held = Vec::new();
    let mut rows = providers.query([])?;
    while let Some(r) = rows.next()? {
        let key: i64 = r.get(0)?;
        let id = ProviderId(key as u64);
        out.push(Step::Provider(ProviderRow {
            id,
            uuid: parse_uuid(bytes(r, 1)?, "provider")?,
            name: r.get(2)?,
            generation: r.get::<_, i64>(3)? as u64,
            parent: r.get::<_, Option<i64>>(4)?.map(|p| ProviderId(p as u64)),
            root: ProviderId(r.get::<_, i64>(5)? as u64),
            created_at: r.get(6)?,
            updated_at: r.get(7)?,
        }))?;
        let mut list = Vec::new();
        while let Some(i) = inventory {
            let of = provider_key(i)?.cmp(&key);
            if of.is_gt() {
                break;
            }
            if of.is_eq() {
                list.push((
                    class_place(&mut classes, bytes(i, 1)?, &mut out)?,
                    Inventory {
                        total: i.get::<_, i64>(2)? as u64,
                        reserved: i.get::<_, i64>(3)? as u64,
                        min_unit: i.get::<_, i64>(4)? as u64,
                        max_unit: i.get::<_, i64>(5)? as u64,
                        step_size: NonZeroU64::new(i.get::<_, i64>(6)? as u64).ok_or_else(
                            || StoreError::Corrupt("column 6: step_size of 0".into()),
                        )?,
                        allocation_ratio: i.get(7)?,
                    },
                ));
            }
            inventory = inventories.next()?;
        }
        if !list.is_empty() {
            out.push(Step::Inventories(id, list))?;
        }
        let mut list = Vec::new();
        while let Some(t) = provider_trait {
            let of = provider_key(t)?.cmp(&key);
            if of.is_gt() {
                break;
            }
            if of.is_eq() {
                list.push(trait_place(&mut traits, bytes(t, 1)?, &mut out)?);
            }
            provider_trait = provider_traits.next()?;
        }
        if !list.is_empty() {
            out.push(Step::Traits(id, list))?;
        }
        while let Some(g) = aggregate {
            let of = provider_key(g)?.cmp(&key);
            if of.is_gt() {
                break;
            }
            if of.is_eq() {
                held.push(parse_uuid(bytes(g, 1)?, "aggregate")?);
            }
            aggregate = aggregates.next()?;
        }
        if !held.is_empty() {
            // Exactly as long as needed: the view keeps the list as it is.
            let list = held.to_vec();
            held.clear();
            out.push(Step::Change(Change::SetAggregates(id, list)))?;
        }
    }
    out.push(Step::Relink)?;

    // Consumers and their allocations, read side by side in uuid order (both tables
    // are keyed by it), so that each consumer comes with its allocations.
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
    let (mut project, mut user, mut kind) =
        (Repeat::default(), Repeat::default(), Repeat::default());
    let mut held = Vec::new();
    let mut canonical = true;
    let mut rows = consumers.query([])?;
    while let Some(r) = rows.next()? {
        let key = bytes(r, 0)?;
        let uuid = parse_uuid(key, "consumer")?;
        // The keys are distinct; spelled the one way allot writes a uuid, distinct
        // keys are distinct uuids, so none is in the view yet. Once another spelling
        // has been met (a hand-edited row), every consumer takes the search.
        canonical = canonical && key.len() == 36 && !key.iter().any(u8::is_ascii_uppercase);
        let consumer = RawConsumer {
            uuid,
            project: project.changed_text(bytes(r, 1)?)?,
            user: user.changed_text(bytes(r, 2)?)?,
            kind: kind.changed(optional_bytes(r, 3)?)?,
            generation: r.get::<_, i64>(4)? as u64,
            created_at: r.get(5)?,
            updated_at: r.get(6)?,
            allocations: Vec::new(),
            known_new: canonical,
        };
        // Allocation rows up to this consumer's; any before it name no consumer (the
        // writes never leave such rows) and are skipped, as applying them would do.
        while let Some(a) = pending {
            let of = bytes(a, 0)?.cmp(key);
            if of.is_gt() {
                break;
            }
            if of.is_eq() {
                let class = class_place(&mut classes, bytes(a, 2)?, &mut out)?;
                held.push((
                    ProviderId(a.get::<_, i64>(1)? as u64),
                    class,
                    a.get::<_, i64>(3)? as u64,
                ));
            }
            pending = allocations.next()?;
        }
        out.push(Step::Consumer(RawConsumer {
            // Exactly as long as needed.
            allocations: held.to_vec(),
            ..consumer
        }))?;
        held.clear();
    }

    // Pending claims, after the providers they are indexed on. Few (they live for
    // minutes), so their amounts are gathered first and each claim taken whole.
    let mut amounts: HashMap<Uuid, Vec<ClaimAmount>> = HashMap::new();
    let mut stmt = conn.prepare(
        "SELECT claim_uuid, provider_uuid, resource_class, amount FROM claim_allocations",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        amounts
            .entry(parse_uuid(bytes(r, 0)?, "claim")?)
            .or_default()
            .push(ClaimAmount {
                provider: parse_uuid(bytes(r, 1)?, "provider")?,
                // Trusted: only names the core checked are ever written.
                class: ResourceClass::new_unchecked(text(r, 2)?),
                amount: r.get::<_, i64>(3)? as u64,
            });
    }
    let mut stmt = conn.prepare(
        "SELECT uuid, consumer_uuid, project_id, user_id, consumer_type, tag, state,
                created_at, expires_at, ended_at
         FROM claims",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let uuid = parse_uuid(bytes(r, 0)?, "claim")?;
        let state = text(r, 6)?;
        let state = ClaimState::parse(state)
            .ok_or_else(|| StoreError::Corrupt(format!("claim state {state:?}")))?;
        let mut allocations = amounts.remove(&uuid).unwrap_or_default();
        allocations.sort();
        let claim = Claim {
            uuid,
            consumer: parse_uuid(bytes(r, 1)?, "consumer")?,
            project_id: Text::from(text(r, 2)?),
            user_id: Text::from(text(r, 3)?),
            consumer_type: r.get::<_, Option<String>>(4)?.map(Text::from),
            tag: r.get::<_, Option<String>>(5)?.map(Text::from),
            allocations: allocations.into_boxed_slice(),
            state,
            created_at: r.get(7)?,
            expires_at: r.get(8)?,
            ended_at: r.get(9)?,
        };
        out.push(Step::Change(Change::PutClaim(Box::new(claim))))?;
    }
    out.flush()
}

/// Column `i` of a row as text, read in place.
fn text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str, StoreError> {
    r.get_ref(i)?
        .as_str_or_null()
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))?
        .ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
}

/// Column `i` of a row as the bytes of its text, read in place and not checked to
/// be UTF-8 (what is kept of them is checked where it is kept).
fn bytes<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r [u8], StoreError> {
    optional_bytes(r, i)?.ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
}

/// As [`bytes`], for a column that may be NULL.
fn optional_bytes<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<Option<&'r [u8]>, StoreError> {
    r.get_ref(i)?
        .as_bytes_or_null()
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// The provider id in the first column of a row.
fn provider_key(r: &rusqlite::Row<'_>) -> Result<i64, StoreError> {
    Ok(r.get(0)?)
}

fn parse_uuid(text: &[u8], what: &str) -> Result<Uuid, StoreError> {
    Uuid::try_parse_ascii(text).map_err(|e| {
        let text = String::from_utf8_lossy(text);
        StoreError::Corrupt(format!("{what} {text:?}: {e}"))
    })
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
                for table in ["inventories", "allocations", "claim_allocations"] {
                    exec(
                        tx,
                        &format!(
                            "UPDATE {table} SET resource_class = ?2 WHERE resource_class = ?1"
                        ),
                        [old.as_str(), record.name.as_str()],
                    )?;
                }
                exec(
                    tx,
                    "UPDATE class_metadata SET name = ?2 WHERE name = ?1",
                    [old.as_str(), record.name.as_str()],
                )?;
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
            exec(
                tx,
                "DELETE FROM class_metadata WHERE name = ?1",
                [name.as_str()],
            )?;
        }
        Change::SetClassMetadata(name, metadata) => match metadata {
            Some(m) => {
                exec(
                    tx,
                    "INSERT OR REPLACE INTO class_metadata (name, units, display_name, description)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![name.as_str(), m.units, m.display_name, m.description],
                )?;
            }
            None => {
                exec(
                    tx,
                    "DELETE FROM class_metadata WHERE name = ?1",
                    [name.as_str()],
                )?;
            }
        },
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
        Change::PutProvider {
            row,
            previous_generation,
        } => match previous_generation {
            // A create: any row with its id, uuid or name means the plan was stale.
            None => {
                let inserted = exec(
                    tx,
                    "INSERT OR IGNORE INTO providers
                         (id, uuid, name, generation, parent_id, root_id, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
                if inserted == 0 {
                    return Err(StoreError::Stale(lost_race(change)));
                }
            }
            Some(previous) => {
                let updated = exec(
                    tx,
                    "UPDATE providers SET uuid = ?2, name = ?3, generation = ?4,
                         parent_id = ?5, root_id = ?6, updated_at = ?7
                     WHERE id = ?1 AND generation = ?8",
                    params![
                        row.id.0 as i64,
                        row.uuid.to_string(),
                        row.name,
                        row.generation as i64,
                        row.parent.map(|p| p.0 as i64),
                        row.root.0 as i64,
                        row.updated_at,
                        *previous as i64
                    ],
                )?;
                if updated == 0 {
                    return Err(StoreError::Stale(lost_race(change)));
                }
            }
        },
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
                    inv.step_size.get() as i64,
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
        Change::PutConsumer {
            row,
            previous_generation,
        } => {
            let uuid = row.uuid.to_string();
            let written = match previous_generation {
                None => exec(
                    tx,
                    "INSERT OR IGNORE INTO consumers
                         (uuid, project_id, user_id, consumer_type, generation, created_at,
                          updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        uuid,
                        row.project_id.as_str(),
                        row.user_id.as_str(),
                        row.consumer_type.as_deref(),
                        row.generation as i64,
                        row.created_at,
                        row.updated_at
                    ],
                )?,
                Some(previous) => exec(
                    tx,
                    "UPDATE consumers SET project_id = ?2, user_id = ?3, consumer_type = ?4,
                         generation = ?5, updated_at = ?6
                     WHERE uuid = ?1 AND generation = ?7",
                    params![
                        uuid,
                        row.project_id.as_str(),
                        row.user_id.as_str(),
                        row.consumer_type.as_deref(),
                        row.generation as i64,
                        row.updated_at,
                        *previous as i64
                    ],
                )?,
            };
            if written == 0 {
                return Err(StoreError::Stale(lost_race(change)));
            }
        }
        Change::PutClaim(claim) => {
            let uuid = claim.uuid.to_string();
            exec(
                tx,
                "INSERT OR REPLACE INTO claims (uuid, consumer_uuid, project_id, user_id,
                     consumer_type, tag, state, created_at, expires_at, ended_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    uuid,
                    claim.consumer.to_string(),
                    claim.project_id.as_str(),
                    claim.user_id.as_str(),
                    claim.consumer_type.as_deref(),
                    claim.tag.as_deref(),
                    claim.state.as_str(),
                    claim.created_at,
                    claim.expires_at,
                    claim.ended_at
                ],
            )?;
            // A claim's amounts never change after it is made: written once.
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO claim_allocations
                     (claim_uuid, provider_uuid, resource_class, amount)
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            for a in claim.allocations.iter() {
                stmt.execute(params![
                    uuid,
                    a.provider.to_string(),
                    a.class.as_str(),
                    a.amount as i64
                ])?;
            }
        }
        Change::DeleteClaim(uuid) => {
            let uuid = uuid.to_string();
            exec(
                tx,
                "DELETE FROM claim_allocations WHERE claim_uuid = ?1",
                [&uuid],
            )?;
            exec(tx, "DELETE FROM claims WHERE uuid = ?1", [&uuid])?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A consumer's uuid spelled another way (upper case, as a hand-edited row might
    /// have it) is the same consumer as the usual spelling: the load, which skips the
    /// search for consumers it knows to be new, holds it once, as applying would.
    #[test]
    fn another_spelling_of_a_uuid_is_the_same_consumer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allot.db");
        let mut engine = SqliteEngine::open(path.to_str().unwrap()).unwrap();
        let uuid = Uuid::from_u128(0xabcdef);
        let upper = uuid.hyphenated().to_string().to_uppercase();
        // The upper-case spelling sorts first.
        for (spelling, generation) in [(upper, 1), (uuid.to_string(), 2)] {
            engine
                .conn
                .execute(
                    "INSERT INTO consumers VALUES (?1, 'p', 'u', NULL, ?2, 0, 0)",
                    params![spelling, generation],
                )
                .unwrap();
        }
        let (state, _) = engine.load().unwrap();
        assert_eq!(state.consumers().count(), 1);
        assert_eq!(state.consumer(&uuid).unwrap().row.generation, 2);
        assert!(state.check_usage_index());
    }
}
