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
//! An import goes in three steps, and writes nothing unless all three agree:
//! 1. [`parse`]: the header (`format`, `version`) first, so that a file of another
//!    kind is named as such, then the whole document, refusing fields it does not know;
//! 2. [`plan_import`]: every integrity problem found is named (up to [`MAX_PROBLEMS`]),
//!    and the data becomes the [`Change`]s a store persists;
//! 3. [`import`]: into an empty store only, in one `persist` (one transaction: all or
//!    nothing), then read back to confirm the counts.
//!
//! The store is touched in two small functions ([`load_state`], [`persist_all`]), so
//! that a change of the store's contract is a one-line fix here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::num::NonZeroU64;

use allot_core::metadata::{self, ClassMetadata};
use allot_core::names::{is_custom_name, is_well_formed_name};
use allot_core::{
    standard, Allocation, Change, Claim, ClaimAmount, ClaimState, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, Timestamp, TraitName,
    TraitRecord,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Store, StoreError};

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
        )
    }
}

// ----- the store, in two small functions -----

/// Reads the whole store (for SQLite, with the file held exclusively: see
/// `docs/dump.md`).
fn load_state(store: &mut Store) -> Result<State, StoreError> {
    store.load()
}

/// Writes every change in one transaction.
fn persist_all(store: &mut Store, changes: &[Change]) -> Result<(), StoreError> {
    store.persist(changes).map(drop)
}

// ----- export -----

/// Reads everything a store holds into a dump taken at `exported_at`.
pub fn export_store(store: &mut Store, exported_at: Timestamp) -> Result<Dump, StoreError> {
    Ok(export(&load_state(store)?, exported_at))
}

/// The dump of a view, taken at `exported_at` (the only field that differs between
/// two dumps of the same data).
pub fn export(state: &State, exported_at: Timestamp) -> Dump {
    let text = |t: &Text| t.as_str().to_owned();
    let mut resource_classes: Vec<DumpClass> = state
        .custom_classes()
        .map(|c| DumpClass {
            name: c.name.as_str().to_owned(),
            created_at: c.created_at,
            updated_at: c.updated_at,
            metadata: state
                .class_metadata(&c.name)
                .filter(|m| !m.is_empty())
                .map(|m| DumpMetadata {
                    units: m.units,
                    display_name: m.display_name,
                    description: m.description,
                }),
        })
        .collect();
    resource_classes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut traits: Vec<DumpTrait> = state
        .custom_traits()
        .map(|t| DumpTrait {
            name: t.name.as_str().to_owned(),
            created_at: t.created_at,
        })
        .collect();
    traits.sort_by(|a, b| a.name.cmp(&b.name));

    // Creation (id) order: the order every listing shows, which an import keeps by
    // handing out ids in the dump's order.
    let providers = state
        .providers()
        .map(|p| {
            let mut inventories: Vec<DumpInventory> = p
                .inventories
                .iter()
                .map(|(class, inv)| DumpInventory {
                    resource_class: class.as_str().to_owned(),
                    total: inv.total,
                    reserved: inv.reserved,
                    min_unit: inv.min_unit,
                    max_unit: inv.max_unit,
                    step_size: inv.step_size.get(),
                    allocation_ratio: format!("{:?}", inv.allocation_ratio),
                })
                .collect();
            inventories.sort_by(|a, b| a.resource_class.cmp(&b.resource_class));
            let mut traits: Vec<String> = p.traits.iter().map(|t| t.as_str().to_owned()).collect();
            traits.sort();
            let mut aggregates: Vec<Uuid> = p.aggregates.iter().copied().collect();
            aggregates.sort();
            DumpProvider {
                uuid: p.uuid(),
                name: p.row.name.clone(),
                parent: p.row.parent.map(|id| state.uuid_of(id)),
                generation: p.row.generation,
                created_at: p.row.created_at,
                updated_at: p.row.updated_at,
                inventories,
                traits,
                aggregates,
            }
        })
        .collect();

    let mut consumers: Vec<DumpConsumer> = state
        .consumers()
        .map(|c| {
            let mut allocations: Vec<DumpAllocation> = c
                .allocations
                .iter()
                .map(|a| DumpAllocation {
                    provider: state.uuid_of(a.provider),
                    resource_class: a.class.as_str().to_owned(),
                    used: a.used,
                })
                .collect();
            allocations.sort_by(|a, b| {
                (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class))
            });
            DumpConsumer {
                uuid: c.row.uuid,
                project_id: text(&c.row.project_id),
                user_id: text(&c.row.user_id),
                consumer_type: c.row.consumer_type.as_ref().map(text),
                generation: c.row.generation,
                created_at: c.row.created_at,
                updated_at: c.row.updated_at,
                allocations,
            }
        })
        .collect();
    consumers.sort_by_key(|c| c.uuid);

    let mut claims: Vec<DumpClaim> = state
        .claims()
        .map(|c| {
            let mut allocations: Vec<DumpClaimAmount> = c
                .allocations
                .iter()
                .map(|a| DumpClaimAmount {
                    provider: a.provider,
                    resource_class: a.class.as_str().to_owned(),
                    amount: a.amount,
                })
                .collect();
            allocations.sort_by(|a, b| {
                (a.provider, &a.resource_class).cmp(&(b.provider, &b.resource_class))
            });
            DumpClaim {
                uuid: c.uuid,
                consumer: c.consumer,
                project_id: text(&c.project_id),
                user_id: text(&c.user_id),
                consumer_type: c.consumer_type.as_ref().map(text),
                tag: c.tag.as_ref().map(text),
                state: c.state.as_str().to_owned(),
                created_at: c.created_at,
                expires_at: c.expires_at,
                ended_at: c.ended_at,
                allocations,
            }
        })
        .collect();
    claims.sort_by_key(|c| c.uuid);

    Dump {
        format: FORMAT.to_owned(),
        version: VERSION,
        exported_at,
        resource_classes,
        traits,
        providers,
        consumers,
        claims,
    }
}

/// Writes a dump as pretty JSON (one field a line: diffable, and the same bytes for
/// the same dump), ending with a newline.
pub fn write(dump: &Dump, out: &mut impl Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, dump)?;
    out.write_all(b"\n")
}

// ----- import -----

/// The two fields read before anything else, so that a file of another kind or
/// version is named as such rather than as a list of unknown fields.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// Reads a dump: the header first, then the whole document, refusing any field this
/// version of the format does not have.
pub fn parse(bytes: &[u8]) -> Result<Dump, ImportError> {
    let header: Header = serde_json::from_slice(bytes).map_err(|e| {
        ImportError::Unreadable(format!("not an allot dump (not a JSON object: {e})"))
    })?;
    match header.format {
        Some(serde_json::Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(ImportError::Unreadable(format!(
                "unknown dump format {other} (expected \"{FORMAT}\")"
            )))
        }
        None => {
            return Err(ImportError::Unreadable(format!(
                "not an allot dump (no \"format\": \"{FORMAT}\" field)"
            )))
        }
    }
    match header.version {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => {
            return Err(ImportError::Unreadable(format!(
                "unsupported dump version {v} (this allot reads version {VERSION})"
            )))
        }
        None => {
            return Err(ImportError::Unreadable(
                "not an allot dump (no \"version\" field)".into(),
            ))
        }
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ImportError::Unreadable(format!("malformed dump: {e}")))
}

/// Collects problems up to [`MAX_PROBLEMS`], counting the ones past it.
#[derive(Default)]
struct Problems {
    list: Vec<String>,
    more: usize,
}

impl Problems {
    fn add(&mut self, problem: String) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.more += 1;
        }
    }

    fn into_result<T>(mut self, ok: T) -> Result<T, ImportError> {
        if self.list.is_empty() {
            return Ok(ok);
        }
        if self.more > 0 {
            self.list.push(format!("and {} more", self.more));
        }
        Err(ImportError::Invalid(self.list))
    }
}

/// A dump checked and turned into changes, ready to persist.
#[derive(Debug)]
pub struct Plan {
    /// Everything to write, parents before children.
    pub changes: Vec<Change>,
    /// What the dump holds.
    pub counts: Counts,
    /// Accepted oddities (see [`plan_import`]).
    pub warnings: Vec<String>,
}

/// The inventory a dump's record describes, or why it describes none: an allocation
/// ratio that is not a finite number, or a step size of 0.
fn inventory(inv: &DumpInventory) -> Result<Inventory, String> {
    let class = &inv.resource_class;
    let ratio = &inv.allocation_ratio;
    let allocation_ratio = (ratio.parse::<f64>().ok())
        .filter(|r| r.is_finite())
        .ok_or_else(|| format!("allocation_ratio {ratio:?} of {class} is not a finite number"))?;
    // An inventory cannot be built with a step size of 0.
    let step_size =
        NonZeroU64::new(inv.step_size).ok_or_else(|| format!("step_size of {class} is 0"))?;
    Ok(Inventory {
        total: inv.total,
        reserved: inv.reserved,
        min_unit: inv.min_unit,
        max_unit: inv.max_unit,
        step_size,
        allocation_ratio,
    })
}

/// Checks a dump's integrity and turns it into the changes that recreate it.
///
/// Refused (every problem named): duplicate uuids or names; a parent missing, or a
/// cycle of parents; a custom class or trait whose name is not `CUSTOM_*`; an
/// inventory, allocation or pending claim on a class that is neither standard nor in
/// the dump; a provider trait neither standard nor in the dump; an allocation on a
/// provider that is not in the dump or has no inventory of the class; a pending claim
/// on a provider that is not in the dump; an allocation ratio that is not a finite
/// number; a step size of 0; a claim state that is not one.
///
/// Accepted with a warning: allocations that break their inventory's min/max/step,
/// and providers whose allocations (with live pending claims) exceed capacity.
/// Placement and allot both let an inventory change under existing allocations (a
/// lower total or allocation ratio, a new max_unit), so a real deployment can hold
/// these, and refusing them would leave it unable to move. Ended claims are not
/// checked against providers and classes: they may name ones deleted since.
pub fn plan_import(dump: &Dump) -> Result<Plan, ImportError> {
    let mut problems = Problems::default();
    let mut warnings = Vec::new();
    let mut changes = Vec::new();

    // Classes and traits.
    let mut classes: HashSet<&str> = HashSet::new();
    for c in &dump.resource_classes {
        if !is_custom_name(&c.name) {
            problems.add(format!(
                "resource class {:?} is not a custom class name (CUSTOM_*)",
                c.name
            ));
        }
        if !classes.insert(&c.name) {
            problems.add(format!("resource class {} appears twice", c.name));
            continue;
        }
        let name = ResourceClass::new_unchecked(&c.name); // Checked just above.
        changes.push(Change::PutClass {
            record: ClassRecord {
                name: name.clone(),
                created_at: c.created_at,
                updated_at: c.updated_at,
            },
            old_name: None,
        });
        if let Some(m) = &c.metadata {
            let metadata = ClassMetadata {
                units: m.units.clone(),
                display_name: m.display_name.clone(),
                description: m.description.clone(),
            };
            for (field, value, max) in [
                ("units", &metadata.units, metadata::MAX_UNITS),
                (
                    "display_name",
                    &metadata.display_name,
                    metadata::MAX_DISPLAY_NAME,
                ),
                (
                    "description",
                    &metadata.description,
                    metadata::MAX_DESCRIPTION,
                ),
            ] {
                if value.as_ref().is_some_and(|v| v.chars().count() > max) {
                    problems.add(format!(
                        "resource class {}: metadata {field} is longer than {max} characters",
                        c.name
                    ));
                }
            }
            if !metadata.is_empty() {
                changes.push(Change::SetClassMetadata(name, Some(metadata)));
            }
        }
    }
    let class_known =
        |name: &str| standard::RESOURCE_CLASSES.contains(&name) || classes.contains(name);

    let mut traits: HashSet<&str> = HashSet::new();
    for t in &dump.traits {
        if !is_custom_name(&t.name) {
            problems.add(format!(
                "trait {:?} is not a custom trait name (CUSTOM_*)",
                t.name
            ));
        }
        if !traits.insert(&t.name) {
            problems.add(format!("trait {} appears twice", t.name));
            continue;
        }
        changes.push(Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked(&t.name), // Checked just above.
            created_at: t.created_at,
        }));
    }
    let trait_known =
        |name: &str| standard::TRAITS.binary_search(&name).is_ok() || traits.contains(name);

    // Providers: ids in the dump's order (which keeps listings in the same order),
    // written parents first.
    let mut index: HashMap<Uuid, usize> = HashMap::new();
    let mut names: HashSet<&str> = HashSet::new();
    for (i, p) in dump.providers.iter().enumerate() {
        if index.insert(p.uuid, i).is_some() {
            problems.add(format!("provider {} appears twice", p.uuid));
        }
        if !names.insert(&p.name) {
            problems.add(format!("provider name {:?} is used twice", p.name));
        }
        if p.name.is_empty() {
            problems.add(format!("provider {} has an empty name", p.uuid));
        }
    }
    let id_of = |i: usize| ProviderId(i as u64 + 1);
    // The root of each provider, and its depth; None where a parent is missing or
    // the parents go round in a cycle.
    let mut roots: Vec<Option<(usize, usize)>> = vec![None; dump.providers.len()];
    for (i, p) in dump.providers.iter().enumerate() {
        let (mut at, mut depth) = (i, 0usize);
        let found = loop {
            match dump.providers[at].parent {
                None => break Some((at, depth)),
                Some(parent) => match index.get(&parent) {
                    None => {
                        problems.add(format!(
                            "provider {} has a parent {parent} that is not in the dump",
                            p.uuid
                        ));
                        break None;
                    }
                    Some(&next) => {
                        depth += 1;
                        at = next;
                        if depth > dump.providers.len() {
                            problems.add(format!("provider {} is in a cycle of parents", p.uuid));
                            break None;
                        }
                    }
                },
            }
        };
        roots[i] = found;
    }

    let mut inventories: HashMap<(Uuid, &str), Inventory> = HashMap::new();
    let mut provider_changes: Vec<(usize, usize, Vec<Change>)> = Vec::new();
    for (i, p) in dump.providers.iter().enumerate() {
        let mut list = Vec::new();
        for inv in &p.inventories {
            if !class_known(&inv.resource_class) {
                problems.add(format!(
                    "provider {}: inventory of {:?}, a class neither standard nor in the dump",
                    p.uuid, inv.resource_class
                ));
                continue;
            }
            let inventory = match inventory(inv) {
                Ok(inventory) => inventory,
                Err(problem) => {
                    problems.add(format!("provider {}: {problem}", p.uuid));
                    continue;
                }
            };
            if inventories
                .insert((p.uuid, &inv.resource_class), inventory)
                .is_some()
            {
                problems.add(format!(
                    "provider {}: two inventories of {}",
                    p.uuid, inv.resource_class
                ));
                continue;
            }
            // Checked just above (known, so well formed).
            list.push((ResourceClass::new_unchecked(&inv.resource_class), inventory));
        }
        let mut trait_list = Vec::new();
        for t in &p.traits {
            if !trait_known(t) {
                problems.add(format!(
                    "provider {}: trait {t:?} is neither standard nor in the dump",
                    p.uuid
                ));
            } else if trait_list.iter().any(|n: &TraitName| n.as_str() == t) {
                problems.add(format!("provider {}: trait {t} appears twice", p.uuid));
            } else {
                trait_list.push(TraitName::new_unchecked(t)); // Known, so well formed.
            }
        }
        if p.aggregates.iter().collect::<BTreeSet<_>>().len() != p.aggregates.len() {
            problems.add(format!("provider {}: an aggregate appears twice", p.uuid));
        }
        let Some((root, depth)) = roots[i] else {
            continue;
        };
        let id = id_of(i);
        let mut group = vec![Change::PutProvider {
            row: ProviderRow {
                id,
                uuid: p.uuid,
                name: p.name.clone(),
                generation: p.generation,
                parent: p.parent.and_then(|u| index.get(&u)).map(|&j| id_of(j)),
                root: id_of(root),
                created_at: p.created_at,
                updated_at: p.updated_at,
            },
            previous_generation: None,
        }];
        if !list.is_empty() {
            group.push(Change::SetInventories(id, list));
        }
        if !trait_list.is_empty() {
            group.push(Change::SetTraits(id, trait_list));
        }
        if !p.aggregates.is_empty() {
            group.push(Change::SetAggregates(id, p.aggregates.clone()));
        }
        provider_changes.push((depth, i, group));
    }
    provider_changes.sort_by_key(|(depth, i, _)| (*depth, *i));
    changes.extend(provider_changes.into_iter().flat_map(|(_, _, group)| group));

    // What is used on each inventory, for the capacity warnings.
    let mut used: BTreeMap<(Uuid, &str), u64> = BTreeMap::new();

    let mut consumers: HashSet<Uuid> = HashSet::new();
    for c in &dump.consumers {
        if !consumers.insert(c.uuid) {
            problems.add(format!("consumer {} appears twice", c.uuid));
            continue;
        }
        let mut allocations = Vec::new();
        let mut seen: HashSet<(Uuid, &str)> = HashSet::new();
        for a in &c.allocations {
            let at = format!(
                "consumer {}: allocation of {} on provider {}",
                c.uuid, a.resource_class, a.provider
            );
            let Some(&i) = index.get(&a.provider) else {
                problems.add(format!("{at}: no such provider in the dump"));
                continue;
            };
            if !class_known(&a.resource_class) {
                problems.add(format!("{at}: a class neither standard nor in the dump"));
                continue;
            }
            if !seen.insert((a.provider, &a.resource_class)) {
                problems.add(format!("{at}: appears twice"));
                continue;
            }
            let Some(inv) = inventories.get(&(a.provider, a.resource_class.as_str())) else {
                problems.add(format!("{at}: the provider has no inventory of the class"));
                continue;
            };
            if inv.admits(a.used).is_err() {
                warnings.push(format!(
                    "{at}: {} is outside the inventory's min_unit {}, max_unit {}, step_size {} \
                     (kept: the inventory changed after the allocation was made)",
                    a.used, inv.min_unit, inv.max_unit, inv.step_size
                ));
            }
            let total = used.entry((a.provider, &a.resource_class)).or_default();
            *total = total.saturating_add(a.used);
            allocations.push(Allocation {
                provider: id_of(i),
                class: ResourceClass::new_unchecked(&a.resource_class), // Known.
                used: a.used,
            });
        }
        changes.push(Change::PutConsumer {
            row: ConsumerRow {
                uuid: c.uuid,
                project_id: Text::from(c.project_id.as_str()),
                user_id: Text::from(c.user_id.as_str()),
                consumer_type: c.consumer_type.as_deref().map(Text::from),
                generation: c.generation,
                created_at: c.created_at,
                updated_at: c.updated_at,
            },
            previous_generation: None,
        });
        if !allocations.is_empty() {
            allocations.sort();
            changes.push(Change::SetAllocations(c.uuid, allocations));
        }
    }

    let mut claims: HashSet<Uuid> = HashSet::new();
    for c in &dump.claims {
        if !claims.insert(c.uuid) {
            problems.add(format!("claim {} appears twice", c.uuid));
            continue;
        }
        let Some(state) = ClaimState::parse(&c.state) else {
            problems.add(format!(
                "claim {}: state {:?} is not pending, confirmed, released or expired",
                c.uuid, c.state
            ));
            continue;
        };
        let mut amounts = Vec::new();
        let mut ok = true;
        for a in &c.allocations {
            let at = format!(
                "claim {}: {} on provider {}",
                c.uuid, a.resource_class, a.provider
            );
            if !is_well_formed_name(&a.resource_class) {
                problems.add(format!("{at}: not a resource class name"));
                ok = false;
                continue;
            }
            if state == ClaimState::Pending {
                if !index.contains_key(&a.provider) {
                    problems.add(format!(
                        "{at}: a pending claim on a provider not in the dump"
                    ));
                    ok = false;
                    continue;
                }
                if !class_known(&a.resource_class) {
                    problems.add(format!("{at}: a class neither standard nor in the dump"));
                    ok = false;
                    continue;
                }
                if !inventories.contains_key(&(a.provider, a.resource_class.as_str())) {
                    warnings.push(format!("{at}: the provider has no inventory of the class"));
                }
            }
            amounts.push(ClaimAmount {
                provider: a.provider,
                class: ResourceClass::new_unchecked(&a.resource_class), // Well formed.
                amount: a.amount,
            });
        }
        if !ok {
            continue;
        }
        amounts.sort();
        let claim = Claim {
            uuid: c.uuid,
            consumer: c.consumer,
            project_id: Text::from(c.project_id.as_str()),
            user_id: Text::from(c.user_id.as_str()),
            consumer_type: c.consumer_type.as_deref().map(Text::from),
            tag: c.tag.as_deref().map(Text::from),
            allocations: amounts.into_boxed_slice(),
            state,
            created_at: c.created_at,
            expires_at: c.expires_at,
            ended_at: c.ended_at,
        };
        // A claim live when the dump was taken counted against capacity then.
        if claim.live(dump.exported_at) {
            for a in &c.allocations {
                let total = used.entry((a.provider, &a.resource_class)).or_default();
                *total = total.saturating_add(a.amount);
            }
        }
        changes.push(Change::PutClaim(Box::new(claim)));
    }

    for ((provider, class), total) in used {
        if let Some(inv) = inventories.get(&(provider, class)) {
            if !inv.fits(0, total) {
                warnings.push(format!(
                    "provider {provider}: {total} of {class} in use, above its capacity {} \
                     (kept: the inventory changed after the allocations were made; \
                     nothing more fits until usage falls below it)",
                    inv.capacity()
                ));
            }
        }
    }

    // Every record skipped above was named as a problem, so a plan that stands
    // writes all of the dump.
    problems.into_result(Plan {
        changes,
        counts: dump.counts(),
        warnings,
    })
}

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
