//! The domain of allot: resource providers, resource classes, traits, inventories and
//! aggregates, the rules that govern them, and the queries over them.
//!
//! This crate is pure: it does no I/O, knows nothing of HTTP, JSON or SQL, and reads no
//! clock (callers pass the time in). Everything that changes the world goes through two
//! steps that live here:
//!
//! 1. *plan*: a write operation (`State::create_provider`, `State::set_inventories`, ...)
//!    checks the request against the current [`State`] and returns the [`Change`]s it
//!    implies, without touching the state;
//! 2. *apply*: once a store has made those changes durable, [`State::apply`] folds them
//!    into the in-memory view.
//!
//! Splitting the two lets every store engine persist exactly what the rules decided, and
//! keeps the in-memory view from ever showing what the disk does not hold.

pub mod candidates;
pub mod change;
pub mod compact;
pub mod drains;
pub mod error;
pub mod holders;
pub mod metadata;
pub mod model;
pub mod names;
pub mod ops;
pub mod over_capacity;
pub mod pending;
pub mod persistent;
pub mod query;
pub mod server_groups;
pub mod shapes;
pub mod standard;
pub mod state;
#[cfg(test)]
mod testing;
pub mod usage;

pub use change::Change;
pub use error::{ConflictCode, Error, Result};
pub use metadata::ClassMetadata;
pub use model::{
    Allocation, Claim, ClaimAmount, ClaimState, ClassRecord, Consumer, ConsumerRow, Inventory,
    Misfit, PendingAmount, PendingIndex, Provider, ProviderId, ProviderRow, Timestamp, TraitRecord,
    Units,
};
pub use names::{ProviderRef, RequestedName, ResourceClass, Text, TraitName};
pub use state::{ConsumerTable, State};
pub use uuid::Uuid;
