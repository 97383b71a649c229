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
pub mod drains;
pub mod inventories;
pub mod pick;
mod placing;
pub mod provider_traits;
pub mod providers;
pub mod reshaper;
pub mod server_groups;
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

/// A provider generation as a request gives it: any JSON integer, so a negative one
/// or one past `u64` too (the schemas accept any integer). Such a one matches no
/// provider, and a conflict message can still repeat it as given. The one encoding
/// of "the generation the client believes the provider has".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GivenGeneration(pub i128);

impl GivenGeneration {
    /// Whether a provider at generation `actual` has the generation given.
    pub fn matches(self, actual: u64) -> bool {
        self.0 == i128::from(actual)
    }
}

impl From<u64> for GivenGeneration {
    fn from(generation: u64) -> Self {
        GivenGeneration(generation.into())
    }
}

impl std::fmt::Display for GivenGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Refuses a write made against a generation the provider no longer has, with the
/// endpoint's own wording (Placement's differ from endpoint to endpoint, and clients
/// match on them).
pub fn check_generation(
    provider: &Provider,
    expected: GivenGeneration,
    message: &str,
) -> crate::Result<()> {
    if expected.matches(provider.row.generation) {
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
