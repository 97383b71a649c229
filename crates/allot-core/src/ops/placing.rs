//! What allocation writes and claims share when they place amounts on providers:
//! naming a class, merging the amounts a request repeats, and the checks of one amount
//! against the provider's inventory (it has the class, [`Inventory::admits`] the
//! amount, and what is used afterwards fits in the capacity).
//!
//! Both planners ([`State::plan_allocations`], [`State::plan_create_claim`]) run
//! these same checks in the same order; they differ only in when they run them
//! (Placement's order for allocations) and in how they word a refusal, which each
//! keeps beside its plan.
//!
//! [`Inventory::admits`]: crate::model::Inventory::admits

use crate::model::{Provider, Timestamp, Units};
use crate::names::{RequestedName, ResourceClass};
use crate::state::State;

/// Why one amount cannot be placed on a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unfit {
    /// The provider has no inventory of the class.
    NoInventory,
    /// The amount breaks the inventory's limits on one allocation.
    Misfit(Units),
    /// What would be used afterwards exceeds the capacity.
    OverCapacity {
        /// The inventory's [`capacity`](crate::model::Inventory::capacity).
        capacity: i128,
        /// What is used now (allocations and live claims).
        used: u64,
    },
}

impl State {
    /// The class a request names, if it exists (text that is no class name names
    /// none).
    pub(super) fn known_class<'a>(
        &self,
        class: &'a RequestedName<ResourceClass>,
    ) -> Option<&'a ResourceClass> {
        class.name().filter(|c| self.class_exists(c))
    }
}

/// Amounts that a request may repeat, merged: equal keys (by `same`) are summed,
/// saturating, at the first one's position; zero amounts are dropped.
pub(super) fn merged<K>(
    amounts: impl IntoIterator<Item = (K, u64)>,
    same: impl Fn(&K, &K) -> bool,
) -> Vec<(K, u64)> {
    let mut out: Vec<(K, u64)> = Vec::new();
    for (key, amount) in amounts.into_iter().filter(|(_, a)| *a > 0) {
        match out.iter_mut().find(|(k, _)| same(k, &key)) {
            Some(m) => m.1 = m.1.saturating_add(amount),
            None => out.push((key, amount)),
        }
    }
    out
}

/// The checks of one allocation of `amount` of `class` on `provider`, in order:
/// inventory, limits, capacity. `after` says what will be used of the class once the
/// write is done, given what is used now at `now`. Over capacity is allowed only when
/// nothing gets worse: there was usage of the class here before, and no less than
/// there will be (a write may leave an over-committed inventory as it was; a claim,
/// which always adds, never can).
pub(super) fn place(
    provider: &Provider,
    class: &ResourceClass,
    amount: u64,
    now: Timestamp,
    after: impl FnOnce(u64) -> i128,
) -> Result<(), Unfit> {
    let inv = provider
        .inventories
        .get(class.as_str())
        .ok_or(Unfit::NoInventory)?;
    inv.admits(amount).map_err(|_| Unfit::Misfit(inv.units()))?;
    let used = provider.used(class.as_str(), now);
    let after = after(used);
    let capacity = inv.capacity();
    if after > capacity && (used == 0 || after > i128::from(used)) {
        return Err(Unfit::OverCapacity { capacity, used });
    }
    Ok(())
}
