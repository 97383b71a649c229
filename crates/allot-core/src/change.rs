//! The changes a write makes, as a store persists them.
//!
//! A write operation of [`crate::State`] returns a list of these; the store writes them
//! in one transaction and, once committed, the same list is applied to the in-memory
//! view. They are row-level on purpose: a store maps each one to a few SQL statements
//! and never needs to know the rule that produced it.
//!
//! Each list is also a record of the store's change log, which other builds read: a
//! change to these types or to the records inside them follows the rule in
//! `allot_store::log`'s module doc (docs/operations.md, "Upgrades").

use uuid::Uuid;

use crate::drains::Drain;
use crate::metadata::ClassMetadata;
use crate::model::{
    Allocation, Claim, ClassRecord, ConsumerRow, Inventory, ProviderId, ProviderRow, Timestamp,
    TraitRecord,
};
use crate::names::{ResourceClass, TraitName};
use crate::server_groups::ServerGroup;
use crate::shapes::{Shape, ShapeName};

/// One durable change.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Change {
    /// Create or replace a custom resource class. `old_name` is set when an existing
    /// class is renamed (the 1.2 PUT form).
    PutClass {
        /// The class as it is after the change.
        record: ClassRecord,
        /// The class's name before a rename.
        old_name: Option<ResourceClass>,
    },
    /// Delete a custom resource class (and its metadata).
    DeleteClass(ResourceClass),
    /// Set a custom resource class's metadata (an allot extension), or clear it
    /// (`None`). A rename (`PutClass` with `old_name`) carries metadata along and
    /// `DeleteClass` removes it, so neither needs one of these.
    SetClassMetadata(ResourceClass, Option<ClassMetadata>),
    /// Create a custom trait.
    PutTrait(TraitRecord),
    /// Delete a custom trait.
    DeleteTrait(TraitName),
    /// Create or update a provider's row. `previous_generation` is the generation the
    /// rule saw (None for a new provider): an engine shared by several processes uses it
    /// to refuse a write that lost a race.
    PutProvider {
        /// The row as it is after the change.
        row: ProviderRow,
        /// The generation the plan was made against.
        previous_generation: Option<u64>,
    },
    /// Delete a provider and everything attached to it.
    DeleteProvider(ProviderId),
    /// Replace all inventories of a provider.
    SetInventories(ProviderId, Vec<(ResourceClass, Inventory)>),
    /// Replace all traits of a provider.
    SetTraits(ProviderId, Vec<TraitName>),
    /// Replace all aggregates of a provider.
    SetAggregates(ProviderId, Vec<Uuid>),
    /// Create or update a consumer's row. `previous_generation` is the consumer
    /// generation the plan was made against (None for a new consumer).
    PutConsumer {
        /// The row as it is after the change.
        row: ConsumerRow,
        /// The generation the plan was made against.
        previous_generation: Option<u64>,
    },
    /// Delete a consumer and all its allocations.
    DeleteConsumer(Uuid),
    /// Replace all allocations of a consumer (which must exist, or be created by a
    /// `PutConsumer` earlier in the same list).
    SetAllocations(Uuid, Vec<Allocation>),
    /// Create or replace a pending claim's record (an allot extension): a new claim,
    /// or one confirmed, released or seen expired. Boxed: a claim is larger than the
    /// other changes.
    PutClaim(Box<Claim>),
    /// Forget an ended claim (the sweeper's purge).
    DeleteClaim(Uuid),
    /// Create or replace a server group's record, its members included (an allot
    /// extension, issue 44). Boxed like a claim.
    PutServerGroup(Box<ServerGroup>),
    /// Delete a server group (its members stay consumers).
    DeleteServerGroup(Uuid),
    /// Make a consumer a member of a server group, at `at` (the group's
    /// `updated_at`): what a claim or a pick naming the group writes, one member's
    /// row where `PutServerGroup` writes every member's. A member already in it, or
    /// a group gone, changes nothing.
    JoinServerGroup {
        /// The group.
        group: Uuid,
        /// The new member.
        consumer: Uuid,
        /// When it joined.
        at: Timestamp,
    },
    /// Create or replace a drain's record (an allot extension, issue 44).
    PutDrain(Box<Drain>),
    /// Forget an abandoned drain.
    DeleteDrain(Uuid),
    /// Create or replace a named shape (an allot extension, issue 47).
    PutShape(Box<Shape>),
    /// Delete a named shape.
    DeleteShape(ShapeName),
    /// End a web UI session on every node (a logout, issue 46): `hash` (the
    /// SHA-256 of the session's id, in hex: never the session itself, nor a
    /// token) is refused until `until`, when the session would have ended anyway.
    /// Every revocation whose `until` is at or before `now` is forgotten with it,
    /// so they never pile up.
    RevokeSession {
        /// The session id's hash.
        hash: String,
        /// When the session would have ended by itself.
        until: Timestamp,
        /// When it was revoked.
        now: Timestamp,
    },
}
