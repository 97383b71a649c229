//! The records of the domain: providers, their inventories, custom classes and traits.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::names::{ResourceClass, TraitName};

/// Seconds since the Unix epoch, UTC. The domain never reads a clock: callers pass the
/// time of a write in, which keeps tests deterministic.
pub type Timestamp = i64;

/// A provider's internal id: stable for the provider's life, never reused, never shown
/// to clients (they see the uuid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderId(pub u64);

/// One resource class's inventory on one provider.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inventory {
    /// How much exists.
    pub total: u64,
    /// How much is set aside and never allocated.
    pub reserved: u64,
    /// The smallest amount one allocation may take.
    pub min_unit: u64,
    /// The largest amount one allocation may take.
    pub max_unit: u64,
    /// Allocations must be multiples of this.
    pub step_size: u64,
    /// Overcommit factor: capacity is `(total - reserved) * allocation_ratio`.
    pub allocation_ratio: f64,
}

impl Inventory {
    /// Placement's defaults for the optional fields, for a given total.
    pub fn with_total(total: u64) -> Self {
        Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: i32::MAX as u64,
            step_size: 1,
            allocation_ratio: 1.0,
        }
    }

    /// How much may be allocated in all: `(total - reserved) * allocation_ratio`,
    /// rounded down, as Placement computes it.
    pub fn capacity(&self) -> u64 {
        let usable = self.total.saturating_sub(self.reserved) as f64;
        (usable * self.allocation_ratio) as u64
    }
}

/// The persisted row of a provider, without its inventories, traits and aggregates
/// (which change on their own and are persisted by their own [`crate::Change`]s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRow {
    /// Internal id.
    pub id: ProviderId,
    /// The id clients use.
    pub uuid: Uuid,
    /// Unique human-readable name.
    pub name: String,
    /// Bumped by every change to the provider; clients pass it back to prove they saw
    /// the latest state.
    pub generation: u64,
    /// The parent provider, if nested.
    pub parent: Option<ProviderId>,
    /// The root of the provider's tree (itself when it has no parent).
    pub root: ProviderId,
    /// When the provider was created.
    pub created_at: Timestamp,
    /// When the provider last changed.
    pub updated_at: Timestamp,
}

/// A provider as the in-memory view holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    /// The persisted row.
    pub row: ProviderRow,
    /// Inventories by resource class.
    pub inventories: BTreeMap<ResourceClass, Inventory>,
    /// Traits.
    pub traits: BTreeSet<TraitName>,
    /// Aggregates the provider is a member of.
    pub aggregates: BTreeSet<Uuid>,
    /// Direct children (derived from the children's `parent`, never persisted).
    pub children: BTreeSet<ProviderId>,
}

impl Provider {
    /// A provider with no inventories, traits, aggregates or children.
    pub fn new(row: ProviderRow) -> Self {
        Provider {
            row,
            inventories: BTreeMap::new(),
            traits: BTreeSet::new(),
            aggregates: BTreeSet::new(),
            children: BTreeSet::new(),
        }
    }

    /// The provider's internal id.
    pub fn id(&self) -> ProviderId {
        self.row.id
    }

    /// The provider's uuid.
    pub fn uuid(&self) -> Uuid {
        self.row.uuid
    }
}

/// A custom resource class (standard classes are compiled in and never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRecord {
    /// The class's name (always `CUSTOM_*`).
    pub name: ResourceClass,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last renamed (created_at if never).
    pub updated_at: Timestamp,
}

/// A custom trait (standard traits are compiled in and never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraitRecord {
    /// The trait's name (always `CUSTOM_*`).
    pub name: TraitName,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A consumer: whatever holds allocations (an instance, a migration, a volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRow {
    /// The id clients use.
    pub uuid: Uuid,
    /// The owning project's external id.
    pub project_id: String,
    /// The owning user's external id.
    pub user_id: String,
    /// What kind of consumer this is (1.38), if said.
    pub consumer_type: Option<String>,
    /// Bumped by every change to the consumer's allocations (1.28).
    pub generation: u64,
    /// When the consumer was created.
    pub created_at: Timestamp,
    /// When its allocations last changed.
    pub updated_at: Timestamp,
}

/// One amount of one resource class that a consumer holds on one provider.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Allocation {
    /// Where.
    pub provider: ProviderId,
    /// Of what.
    pub class: ResourceClass,
    /// How much.
    pub used: u64,
}

/// A consumer as the in-memory view holds it: its row and its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// The persisted row.
    pub row: ConsumerRow,
    /// Everything the consumer holds, sorted.
    pub allocations: Vec<Allocation>,
}
