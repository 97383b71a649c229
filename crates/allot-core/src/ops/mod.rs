//! The write operations: each checks a request against the [`State`] and returns what
//! it decided (the value the caller answers with) and the [`Change`]s to persist.
//!
//! Every operation is a method on [`State`] taking `&self`: planning never mutates the
//! view. One file per family of objects.
//!
//! [`State`]: crate::State
//! [`Change`]: crate::Change

pub mod aggregates;
pub mod allocations;
pub mod claims;
pub mod classes;
pub mod inventories;
mod placing;
pub mod provider_traits;
pub mod providers;
pub mod reshaper;
pub mod traits;

use crate::change::Change;

/// What a write operation returns: its answer and the changes to persist.
pub type Plan<T> = crate::Result<(T, Vec<Change>)>;

use crate::error::Error;
use crate::model::{Provider, Timestamp};
use crate::state::State;
use uuid::Uuid;

/// The generation `provider` has once [`bump`]ed: what a write that bumps it answers
/// with. The one place a provider's generation is counted up.
pub fn bumped_generation(provider: &Provider) -> u64 {
    provider.row.generation + 1
}

/// The change that records "this provider changed": its generation goes up by one and
/// its `updated_at` moves to `now`. Every write to a provider's inventories, traits,
/// aggregates or allocations includes it, which is what makes generations a guard
/// against lost updates.
pub fn bump(provider: &Provider, now: Timestamp) -> Change {
    let mut row = provider.row.clone();
    row.generation = bumped_generation(provider);
    row.updated_at = now;
    Change::PutProvider {
        row,
        previous_generation: Some(provider.row.generation),
    }
}

/// Refuses a write made against a generation the provider no longer has, with the
/// endpoint's own wording (Placement's differ from endpoint to endpoint, and clients
/// match on them).
pub fn check_generation(provider: &Provider, expected: u64, message: &str) -> crate::Result<()> {
    if provider.row.generation == expected {
        Ok(())
    } else {
        Err(Error::conflict(
            crate::ConflictCode::ConcurrentUpdate,
            message,
        ))
    }
}

impl State {
    /// A provider by uuid, or Placement's 404 message.
    pub fn provider_required(&self, uuid: &Uuid) -> crate::Result<&Provider> {
        self.provider_by_uuid(uuid)
            .ok_or_else(|| Error::not_found(format!("No resource provider with uuid {uuid} found")))
    }
}
