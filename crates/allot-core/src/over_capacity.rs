//! What a write would leave over capacity: the question of a dry run (`POST /dry_run`,
//! an allot extension, issue 47), "what happens if I lower this ratio?".
//!
//! Placement lets an inventory write take capacity below what is used (only removing a
//! used inventory is refused): the allocations stay, and every later write that adds
//! to them there is refused. [`State::left_over_capacity`] applies a write's planned
//! changes to a copy of the view and names, on every provider the write touches, each
//! class whose use ([`Provider::used`]: allocations plus claims live at `now`) exceeds
//! its [`Inventory::capacity`], by how much, and who holds it. A class used with no
//! inventory at all (which no write that succeeds leaves) counts as capacity 0.
//!
//! Only touched providers are looked at: a provider already over capacity that the
//! write leaves alone is not the write's doing, and walking every provider would cost
//! a dry run the size of the cloud.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::change::Change;
use crate::model::{Inventory, Provider, ProviderId, Timestamp};
use crate::names::ResourceClass;
use crate::state::State;

/// One class on one provider that is used beyond its capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverCapacity {
    /// The provider.
    pub provider: Uuid,
    /// Its name.
    pub name: String,
    /// The class.
    pub class: ResourceClass,
    /// Its capacity ([`Inventory::capacity`]; 0 with no inventory), which may be
    /// negative (the reshaper does not check `reserved <= total`).
    pub capacity: i128,
    /// What allocations and live claims take of it.
    pub used: u64,
    /// By how much `used` exceeds `capacity`.
    pub over: u64,
    /// Who takes it, by consumer uuid: the sum of the consumer's allocations and live
    /// claims there.
    pub consumers: Vec<(Uuid, u64)>,
}

impl State {
    /// What `provider` holds over capacity at `now`, class by class in class order
    /// (standard classes first, as Placement lists them).
    pub fn over_capacity(&self, provider: &Provider, now: Timestamp) -> Vec<OverCapacity> {
        let mut classes: BTreeSet<&ResourceClass> = provider.inventories.keys().collect();
        classes.extend(provider.usage.by_class.keys());
        classes.extend(provider.pending.iter().map(|e| &e.class));
        let mut over: Vec<OverCapacity> = classes
            .into_iter()
            .filter_map(|class| {
                let used = provider.used(class.as_str(), now);
                let capacity = provider
                    .inventories
                    .get(class.as_str())
                    .map_or(0, Inventory::capacity);
                let excess = i128::from(used) - capacity;
                (excess > 0).then(|| OverCapacity {
                    provider: provider.uuid(),
                    name: provider.row.name.clone(),
                    class: class.clone(),
                    capacity,
                    used,
                    over: u64::try_from(excess).unwrap_or(u64::MAX),
                    consumers: self.holders(provider, class, now),
                })
            })
            .collect();
        let rank = |c: &ResourceClass| self.class_names().position(|n| n == c.as_str());
        over.sort_by_cached_key(|o| (rank(&o.class).unwrap_or(usize::MAX), o.class.clone()));
        over
    }

    /// Who takes `class` on `provider` at `now`: each consumer's allocations plus its
    /// live claims' amounts, by consumer uuid.
    fn holders(
        &self,
        provider: &Provider,
        class: &ResourceClass,
        now: Timestamp,
    ) -> Vec<(Uuid, u64)> {
        let mut by: BTreeMap<Uuid, u64> = BTreeMap::new();
        for (consumer, amounts) in self.provider_allocations(provider.id()) {
            for (c, amount) in amounts {
                if c == class {
                    let held = by.entry(consumer.row.uuid).or_default();
                    *held = held.saturating_add(amount);
                }
            }
        }
        for entry in provider.pending.iter() {
            if entry.class == *class && entry.live(now) {
                let held = by.entry(entry.consumer).or_default();
                *held = held.saturating_add(entry.amount);
            }
        }
        by.into_iter().collect()
    }

    /// What the state would hold over capacity at `now` once `changes` (a write's
    /// plan against `self`) are applied: on each provider they touch (its
    /// inventories set, or its row written, as every allocation write's bump does),
    /// in provider uuid order. `self` is left as it is: the changes go to a copy.
    pub fn left_over_capacity(&self, changes: &[Change], now: Timestamp) -> Vec<OverCapacity> {
        let touched: BTreeSet<ProviderId> = changes
            .iter()
            .filter_map(|change| match change {
                Change::SetInventories(id, _) => Some(*id),
                Change::PutProvider { row, .. } => Some(row.id),
                _ => None,
            })
            .collect();
        let mut after = self.clone();
        after.apply(changes);
        let mut providers: Vec<&Provider> = touched
            .iter()
            .filter_map(|id| after.provider(*id))
            .collect();
        providers.sort_by_key(|p| p.uuid());
        providers
            .into_iter()
            .flat_map(|p| after.over_capacity(p, now))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, ConsumerRow};
    use crate::ops::inventories::ReservedRule;
    use crate::testing::{new_provider, rc};

    const RP: Uuid = Uuid::from_u128(0x1234);
    const OTHER: Uuid = Uuid::from_u128(0x5678);

    fn consumer(n: u128, amounts: &[(u64, &str, u64)]) -> Vec<Change> {
        let uuid = Uuid::from_u128(0xc0_0000 + n);
        let row = ConsumerRow {
            uuid,
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: 1,
            created_at: 1,
            updated_at: 1,
        };
        let allocations = amounts
            .iter()
            .map(|&(p, class, used)| Allocation {
                provider: ProviderId(p),
                class: rc(class),
                used,
            })
            .collect();
        vec![
            Change::PutConsumer {
                row,
                previous_generation: None,
            },
            Change::SetAllocations(uuid, allocations),
        ]
    }

    fn inv(total: u64, ratio: f64) -> Inventory {
        Inventory {
            allocation_ratio: ratio,
            ..Inventory::with_total(total)
        }
    }

    /// Two providers with 8 VCPU at ratio 4 (32) and 1024 MEMORY_MB; three consumers
    /// on the first (4, 8 and 12 VCPU), one on the second.
    fn world() -> State {
        let mut s = State::new();
        s.apply(&[
            new_provider(1, RP, None, 1),
            new_provider(2, OTHER, None, 1),
        ]);
        for id in [1, 2] {
            s.apply(&[Change::SetInventories(
                ProviderId(id),
                vec![(rc("VCPU"), inv(8, 4.0)), (rc("MEMORY_MB"), inv(1024, 1.0))],
            )]);
        }
        s.apply(&consumer(1, &[(1, "VCPU", 4), (1, "MEMORY_MB", 512)]));
        s.apply(&consumer(2, &[(1, "VCPU", 8)]));
        s.apply(&consumer(3, &[(1, "VCPU", 12), (2, "VCPU", 30)]));
        s
    }

    fn c(n: u128) -> Uuid {
        Uuid::from_u128(0xc0_0000 + n)
    }

    #[test]
    fn nothing_is_over_within_capacity() {
        let s = world();
        let p = s.provider_by_uuid(&RP).unwrap();
        assert!(s.over_capacity(p, 1).is_empty());
    }

    #[test]
    fn a_lower_ratio_names_the_class_the_excess_and_the_holders() {
        let s = world();
        // Ratio 2: capacity 16 against 24 used.
        let lowered = vec![
            (rc("VCPU"), Some(inv(8, 2.0))),
            (rc("MEMORY_MB"), Some(inv(1024, 1.0))),
        ]
        .into_iter()
        .map(|(c, i)| (crate::names::RequestedName::Name(c), i))
        .collect::<Vec<_>>();
        let (_, changes) = s
            .set_inventories(&RP, 0u64, &lowered, ReservedRule::UpToTotal, 2)
            .expect("Placement lets capacity fall below use");
        let over = s.left_over_capacity(&changes, 2);
        assert_eq!(
            over,
            vec![OverCapacity {
                provider: RP,
                name: "p1".into(),
                class: rc("VCPU"),
                capacity: 16,
                used: 24,
                over: 8,
                consumers: vec![(c(1), 4), (c(2), 8), (c(3), 12)],
            }]
        );
        // The view itself is unchanged, generation included.
        let p = s.provider_by_uuid(&RP).unwrap();
        assert_eq!(p.row.generation, 0);
        assert_eq!(p.inventories.get("VCPU"), Some(&inv(8, 4.0)));
    }

    #[test]
    fn only_touched_providers_are_named_in_uuid_and_class_order() {
        let mut s = world();
        // The second provider is over capacity already, but the write leaves it alone.
        s.apply(&[Change::SetInventories(
            ProviderId(2),
            vec![(rc("VCPU"), inv(8, 1.0))],
        )]);
        let changes = vec![Change::SetInventories(
            ProviderId(1),
            vec![(rc("VCPU"), inv(20, 1.0)), (rc("MEMORY_MB"), inv(500, 1.0))],
        )];
        let over = s.left_over_capacity(&changes, 2);
        let named: Vec<_> = over
            .iter()
            .map(|o| (o.provider, o.class.as_str(), o.over))
            .collect();
        assert_eq!(named, [(RP, "VCPU", 4), (RP, "MEMORY_MB", 12)]);
        // Touched by a bump (an allocation write's), the second provider is named.
        let p2 = s.provider_by_uuid(&OTHER).unwrap();
        let bumped = vec![crate::ops::bump(p2, 3)];
        let over = s.left_over_capacity(&bumped, 3);
        assert_eq!(over.len(), 1);
        assert_eq!((over[0].provider, over[0].over), (OTHER, 22));
        assert_eq!(over[0].consumers, [(c(3), 30)]);
    }

    #[test]
    fn claims_count_while_live_and_use_without_inventory_has_no_capacity() {
        let mut s = world();
        let claim = crate::model::Claim {
            uuid: Uuid::from_u128(0xc1a1),
            consumer: c(9),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            tag: None,
            allocations: vec![crate::model::ClaimAmount {
                provider: RP,
                class: rc("DISK_GB"),
                amount: 5,
            }]
            .into(),
            state: crate::model::ClaimState::Pending,
            created_at: 1,
            expires_at: Some(10),
            ended_at: None,
        };
        s.apply(&[Change::PutClaim(Box::new(claim))]);
        let p = s.provider_by_uuid(&RP).unwrap();
        let over = s.over_capacity(p, 5);
        assert_eq!(over.len(), 1);
        assert_eq!(
            (over[0].class.as_str(), over[0].capacity, over[0].over),
            ("DISK_GB", 0, 5)
        );
        assert_eq!(over[0].consumers, [(c(9), 5)]);
        // Expired, the claim takes nothing.
        assert!(s.over_capacity(p, 10).is_empty());
    }
}
