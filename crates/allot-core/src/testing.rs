//! Fixtures shared by the unit tests of this crate.

use uuid::Uuid;

use crate::change::Change;
use crate::model::{ProviderId, ProviderRow, Timestamp};

/// The change that creates provider `id` (named `p{id}`, at generation 0, created and
/// updated at `at`), under `parent` or as a root.
pub(crate) fn new_provider(id: u64, uuid: Uuid, parent: Option<u64>, at: Timestamp) -> Change {
    let row = ProviderRow {
        id: ProviderId(id),
        uuid,
        name: format!("p{id}"),
        generation: 0,
        parent: parent.map(ProviderId),
        root: ProviderId(parent.unwrap_or(id)),
        created_at: at,
        updated_at: at,
    };
    Change::PutProvider {
        row,
        previous_generation: None,
    }
}

/// A resource class for a test, which must be well formed.
pub(crate) fn rc(name: &str) -> crate::names::ResourceClass {
    crate::names::ResourceClass::parse(name).expect("well-formed class")
}

/// A trait name for a test, which must be well formed.
pub(crate) fn tn(name: &str) -> crate::names::TraitName {
    crate::names::TraitName::parse(name).expect("well-formed trait")
}

/// A step size for a test, which must not be 0.
pub(crate) fn step(n: u64) -> std::num::NonZeroU64 {
    std::num::NonZeroU64::new(n).expect("a step size is never 0")
}

/// Claim `n` of a pick: its own uuid and consumer, project `p`, user `u`, no amounts
/// (the pick chooses them), no expiry.
pub(crate) fn pick_claim(n: u128) -> crate::ops::claims::NewClaim {
    crate::ops::claims::NewClaim {
        uuid: Uuid::from_u128(0xc1a1_0000 + n),
        consumer: Uuid::from_u128(0xc0_0000 + n),
        project_id: "p".into(),
        user_id: "u".into(),
        consumer_type: None,
        tag: None,
        allocations: Vec::new(),
        expires_at: None,
        server_group: None,
    }
}
