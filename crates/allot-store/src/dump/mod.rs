//! A portable, versioned dump of a whole deployment (`allot export` / `allot import`),
//! to move it from one store to another (the embedded SQLite store to PostgreSQL and
//! back). The format is described in `docs/dump.md`.
//!
//! The dump has serde types of its own rather than derives on the core's records: a
//! change to the in-memory view must not silently change a format that files written
//! by an older allot are read in. Everything is keyed by uuid (provider ids are
//! internal: an import hands them out afresh) and sorted, so that two exports of the
//! same data are byte-identical apart from `exported_at`.
//!
//! This file holds the format's types and the import's entry point; the rest is one
//! file per step:
//! - `export.rs`: a view becomes a dump ([`export()`], [`export_store`]), written as
//!   pretty JSON ([`write()`]);
//! - `parse.rs`: a file becomes a dump ([`parse()`]);
//! - `plan.rs`: the import's rulebook ([`plan_import`]), one function per family of
//!   checks, in the order `docs/dump.md` lists them ("What an import checks").
//!
//! An import goes in three steps, and writes nothing unless all three agree:
//! 1. [`parse()`]: the header (`format`, `version`) first, so that a file of another
//!    kind is named as such, then the whole document, refusing fields it does not know;
//! 2. [`plan_import`]: every integrity problem found is named (up to [`MAX_PROBLEMS`]),
//!    and the data becomes the [`Change`]s a store persists;
//! 3. [`import`]: into an empty store only, in one transaction (all or nothing;
//!    on MariaDB in parts, within the server's limits: [`Store::persist_large`]),
//!    then read back to confirm the counts.
//!
//! The store is touched in two small functions (`load_state`, `persist_all`), so
//! that a change of the store's contract is a one-line fix here.

mod export;
mod parse;
mod plan;

use allot_core::{Change, State, Timestamp};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Store, StoreError};

pub use export::{export, export_store, write};
pub use parse::parse;
pub use plan::{plan_import, Plan};

/// What the `format` field of every dump says.
pub const FORMAT: &str = "allot-dump";
/// The version of the format this build writes and reads.
pub const VERSION: u64 = 1;
/// How many integrity problems an import names before it stops listing them.
pub const MAX_PROBLEMS: usize = 50;

/// A whole deployment, as the dump file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dump {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] for a dump this build writes.
    pub version: u64,
    /// When the dump was taken, in seconds since the Unix epoch (UTC).
    pub exported_at: Timestamp,
    /// Custom resource classes, by name.
    pub resource_classes: Vec<DumpClass>,
    /// Custom traits, by name.
    pub traits: Vec<DumpTrait>,
    /// Providers in creation order (the order listings show them in).
    pub providers: Vec<DumpProvider>,
    /// Consumers with their allocations, by uuid.
    pub consumers: Vec<DumpConsumer>,
    /// Pending claims in any state, by uuid.
    pub claims: Vec<DumpClaim>,
    /// Server groups with their members, by uuid (an allot extension; absent from
    /// dumps written before them).
    #[serde(default)]
    pub server_groups: Vec<DumpServerGroup>,
    /// Drains, by uuid (an allot extension; absent from dumps written before them).
    #[serde(default)]
    pub drains: Vec<DumpDrain>,
    /// Named shapes, by name (an allot extension; absent from dumps written before
    /// them).
    #[serde(default)]
    pub shapes: Vec<DumpShape>,
}

impl Dump {
    /// How many records of each kind the dump holds (for a dump that passed
    /// [`plan_import`], what an import writes).
    pub fn counts(&self) -> Counts {
        Counts {
            classes: self.resource_classes.len(),
            traits: self.traits.len(),
            providers: self.providers.len(),
            inventories: self.providers.iter().map(|p| p.inventories.len()).sum(),
            consumers: self.consumers.len(),
            allocations: self.consumers.iter().map(|c| c.allocations.len()).sum(),
            claims: self.claims.len(),
            server_groups: self.server_groups.len(),
            drains: self.drains.len(),
            shapes: self.shapes.len(),
        }
    }
}

/// A custom resource class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpClass {
    /// `CUSTOM_*`.
    pub name: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last rename (the creation time if never renamed).
    pub updated_at: Timestamp,
    /// The class's metadata (an allot extension), if any was set.
    pub metadata: Option<DumpMetadata>,
}

/// A custom class's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpMetadata {
    /// What one unit is.
    pub units: Option<String>,
    /// A name for people.
    pub display_name: Option<String>,
    /// One line on what the class counts.
    pub description: Option<String>,
}

/// A custom trait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpTrait {
    /// `CUSTOM_*`.
    pub name: String,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A provider with what it holds. Its root is not stored: it follows from the parents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpProvider {
    /// The provider's uuid.
    pub uuid: Uuid,
    /// Its unique name.
    pub name: String,
    /// Its parent's uuid, if nested.
    pub parent: Option<Uuid>,
    /// Its generation.
    pub generation: u64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Inventories, by class name.
    pub inventories: Vec<DumpInventory>,
    /// Traits, sorted.
    pub traits: Vec<String>,
    /// Aggregates, sorted.
    pub aggregates: Vec<Uuid>,
}

/// One inventory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpInventory {
    /// The class.
    pub resource_class: String,
    /// How much exists.
    pub total: u64,
    /// How much is set aside.
    pub reserved: u64,
    /// Smallest allocation.
    pub min_unit: u64,
    /// Largest allocation.
    pub max_unit: u64,
    /// Allocations are multiples of this.
    pub step_size: u64,
    /// The overcommit factor as text: the shortest decimal that reads back as the
    /// same double. Text, because JSON readers differ in how they round long
    /// decimals, and a capacity must not move by a unit between stores.
    pub allocation_ratio: String,
}

/// A consumer with its allocations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpConsumer {
    /// The consumer's uuid.
    pub uuid: Uuid,
    /// Its project.
    pub project_id: String,
    /// Its user.
    pub user_id: String,
    /// Its type (1.38), if said.
    pub consumer_type: Option<String>,
    /// Its generation.
    pub generation: u64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change of its allocations.
    pub updated_at: Timestamp,
    /// What it holds, by provider uuid then class.
    pub allocations: Vec<DumpAllocation>,
}

/// One allocation of a consumer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpAllocation {
    /// The provider's uuid.
    pub provider: Uuid,
    /// The class.
    pub resource_class: String,
    /// How much.
    pub used: u64,
}

/// A pending claim (an allot extension), in any state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpClaim {
    /// The claim's uuid.
    pub uuid: Uuid,
    /// The consumer it promises to (which need not exist: a claim is made for a
    /// consumer that has not started).
    pub consumer: Uuid,
    /// The consumer's project.
    pub project_id: String,
    /// The consumer's user.
    pub user_id: String,
    /// The consumer's type, if given.
    pub consumer_type: Option<String>,
    /// The caller's free text.
    pub tag: Option<String>,
    /// `pending`, `confirmed`, `released` or `expired`.
    pub state: String,
    /// When made.
    pub created_at: Timestamp,
    /// When it stops counting (null: never).
    pub expires_at: Option<Timestamp>,
    /// When it ended (null while pending).
    pub ended_at: Option<Timestamp>,
    /// What it promises, by provider uuid then class.
    pub allocations: Vec<DumpClaimAmount>,
}

/// A server group (an allot extension, issue 44).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpServerGroup {
    /// The group's uuid.
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// Its project.
    pub project_id: String,
    /// Its user.
    pub user_id: String,
    /// Nova's policy name.
    pub policy: String,
    /// Nova's `max_server_per_host` (anti-affinity).
    pub max_server_per_host: u32,
    /// `root`, `aggregate` or `trait:PREFIX`.
    pub scope: String,
    /// Whether Placement's allocation writes answer to it.
    pub enforce_on_allocations: bool,
    /// Its members (consumer uuids), sorted.
    pub members: Vec<Uuid>,
    /// When made.
    pub created_at: Timestamp,
    /// When last changed.
    pub updated_at: Timestamp,
}

/// A drain (an allot extension, issue 44).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpDrain {
    /// The drain's uuid.
    pub uuid: Uuid,
    /// `open` or `confirmed`.
    pub state: String,
    /// The roots drained.
    pub roots: Vec<Uuid>,
    /// The roots it gave `COMPUTE_STATUS_DISABLED`.
    pub disabled: Vec<Uuid>,
    /// Each consumer moved and its claim, in placing order.
    pub claims: Vec<DumpDrainClaim>,
    /// When made.
    pub created_at: Timestamp,
    /// When confirmed (null while open).
    pub ended_at: Option<Timestamp>,
}

/// A named shape (an allot extension, issue 47).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpShape {
    /// Its name.
    pub name: String,
    /// The query string of `GET /allocation_candidates` it stands for.
    pub request: String,
    /// When first written.
    pub created_at: Timestamp,
    /// When last written.
    pub updated_at: Timestamp,
}

/// One consumer of a drain and its claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpDrainClaim {
    /// The consumer.
    pub consumer: Uuid,
    /// The claim holding its target.
    pub claim: Uuid,
}

/// One amount of a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpClaimAmount {
    /// The provider's uuid (which may be gone, for a claim that ended).
    pub provider: Uuid,
    /// The class.
    pub resource_class: String,
    /// How much.
    pub amount: u64,
}

/// Why an import did not happen. Nothing was written in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Not a dump this build can read (not JSON, another format or version, a field
    /// it does not know).
    #[error("{0}")]
    Unreadable(String),
    /// The dump is readable but inconsistent; every problem found (up to
    /// [`MAX_PROBLEMS`]) is named.
    #[error("the dump has {} integrity problem(s): {}", .0.len(), .0.join("; "))]
    Invalid(Vec<String>),
    /// The target store already holds data.
    #[error("the target store is not empty (it holds {0}); import only into an empty store")]
    NotEmpty(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// What was read back after the write is not what was written (a store bug).
    #[error("read back after the import: {0}")]
    ReadBack(String),
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// How many of each were written and read back.
    pub counts: Counts,
    /// What was accepted although a fresh write would be refused (see
    /// [`plan_import`]).
    pub warnings: Vec<String>,
}

/// How many records of each kind a view (or a dump) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Custom resource classes.
    pub classes: usize,
    /// Custom traits.
    pub traits: usize,
    /// Providers.
    pub providers: usize,
    /// Inventories, all providers together.
    pub inventories: usize,
    /// Consumers.
    pub consumers: usize,
    /// Allocations, all consumers together.
    pub allocations: usize,
    /// Claims, in any state.
    pub claims: usize,
    /// Server groups.
    pub server_groups: usize,
    /// Drains.
    pub drains: usize,
    /// Named shapes.
    pub shapes: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} providers, {} inventories, {} consumers, {} allocations, {} claims, \
             {} custom classes, {} custom traits",
            self.providers,
            self.inventories,
            self.consumers,
            self.allocations,
            self.claims,
            self.classes,
            self.traits
        )?;
        if self.server_groups > 0 {
            write!(f, ", {} server groups", self.server_groups)?;
        }
        if self.drains > 0 {
            write!(f, ", {} drains", self.drains)?;
        }
        if self.shapes > 0 {
            write!(f, ", {} shapes", self.shapes)?;
        }
        Ok(())
    }
}

// ----- the store, in two small functions -----

/// Reads the whole store (for SQLite, with the file held exclusively: see
/// `docs/dump.md`).
fn load_state(store: &mut Store) -> Result<State, StoreError> {
    store.load()
}

/// Writes every change, in one transaction where the engine allows it.
fn persist_all(store: &mut Store, changes: &[Change]) -> Result<(), StoreError> {
    store.persist_large(changes).map(drop)
}

// ----- import -----

/// How many records of each kind a view holds.
pub fn counts(state: &State) -> Counts {
    Counts {
        classes: state.custom_classes().count(),
        traits: state.custom_traits().count(),
        providers: state.providers().count(),
        inventories: state.providers().map(|p| p.inventories.len()).sum(),
        consumers: state.consumers().count(),
        allocations: state.consumers().map(|c| c.allocations.len()).sum(),
        claims: state.claims().count(),
        server_groups: state.server_groups().count(),
        drains: state.drains().count(),
        shapes: state.shapes().len(),
    }
}

/// Imports a dump into an empty store: checks it, writes it in one transaction and
/// reads it back. Nothing is written unless every check passes.
pub fn import(store: &mut Store, dump: &Dump) -> Result<ImportReport, ImportError> {
    let before = counts(&load_state(store)?);
    if before != Counts::default() {
        return Err(ImportError::NotEmpty(before.to_string()));
    }
    let plan = plan_import(dump)?;
    persist_all(store, &plan.changes)?;
    let after = counts(&load_state(store)?);
    if after != plan.counts {
        return Err(ImportError::ReadBack(format!(
            "wrote {}, read back {after}",
            plan.counts
        )));
    }
    Ok(ImportReport {
        counts: after,
        warnings: plan.warnings,
    })
}
