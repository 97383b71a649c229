//! Allocations: the claims consumers hold on providers, written atomically for one or
//! many consumers at once and never beyond capacity.
//!
//! [`State::write_allocations`] is the one rule every allocation write goes through
//! (`PUT /allocations/{c}`, `POST /allocations`, `DELETE /allocations/{c}`, the
//! reshaper). It replaces the allocations of every consumer it names, all or nothing:
//!
//! - every provider named must exist and have inventory of the class, and each amount
//!   must respect that inventory's `min_unit`, `max_unit` and `step_size`;
//! - for every provider and class that the write allocates, what is used afterwards (by
//!   everyone) must fit in `(total - reserved) * allocation_ratio`, unless it is no more
//!   than was used before the write (a write may leave an already over-committed
//!   inventory no worse, as Placement allows, so that operators can shrink inventory
//!   and consumers can still move off it);
//! - every provider that receives an allocation has its generation bumped, and every
//!   consumer written has its generation bumped; a consumer left with no allocations is
//!   deleted.
//!
//! Because the host serialises writes, the usage the check sees is the usage the
//! changes apply to: two claims can never together exceed capacity.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::{bump, Plan};
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Allocation, ConsumerRow, ProviderId, Timestamp};
use crate::names::ResourceClass;
use crate::state::State;

/// What a write expects of a consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGeneration {
    /// No check (microversions before 1.28).
    Unchecked,
    /// The consumer must not exist yet (`consumer_generation: null`).
    New,
    /// The consumer must exist at this generation.
    Is(u64),
}

/// One amount a consumer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    /// The provider, by uuid.
    pub provider: Uuid,
    /// The class.
    pub class: ResourceClass,
    /// How much (0 means "nothing", and is dropped).
    pub used: u64,
}

/// Everything one consumer should hold after the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerWrite {
    /// The consumer.
    pub consumer: Uuid,
    /// The owning project.
    pub project_id: String,
    /// The owning user.
    pub user_id: String,
    /// The consumer type (1.38); None keeps the existing one, or none for a new one.
    pub consumer_type: Option<String>,
    /// The generation check.
    pub generation: ConsumerGeneration,
    /// The complete new allocations; empty removes them all (and the consumer).
    pub allocations: Vec<Requested>,
}

fn generation_conflict(expected: Option<u64>, got: Option<u64>) -> Error {
    let show = |g: Option<u64>| g.map_or("None".to_owned(), |g| g.to_string());
    Error::conflict(
        ConflictCode::ConcurrentUpdate,
        format!(
            "consumer generation conflict - expected {} but got {}",
            show(expected).replace("None", "null"),
            show(got).replace("None", "null")
        ),
    )
}

impl State {
    /// Replaces the allocations of every consumer in `writes`, atomically (see the
    /// module doc for the rules).
    pub fn write_allocations(&self, writes: &[ConsumerWrite], now: Timestamp) -> Plan<()> {
        let mut changes = Vec::new();
        // Per (provider, class): usage before the write, and the amounts the written
        // consumers will hold afterwards.
        let mut new_amounts: BTreeMap<(ProviderId, ResourceClass), u64> = BTreeMap::new();
        let mut released: HashMap<(ProviderId, ResourceClass), u64> = HashMap::new();
        let mut touched_providers: BTreeMap<ProviderId, ()> = BTreeMap::new();
        let mut planned: Vec<(ConsumerRow, Option<u64>, Vec<Allocation>)> = Vec::new();

        for write in writes {
            let existing = self.consumer(&write.consumer);
            match (write.generation, existing) {
                (ConsumerGeneration::Unchecked, _) => {}
                (ConsumerGeneration::New, None) => {}
                (ConsumerGeneration::New, Some(c)) => {
                    return Err(generation_conflict(Some(c.row.generation), None))
                }
                (ConsumerGeneration::Is(g), None) => {
                    return Err(generation_conflict(None, Some(g)))
                }
                (ConsumerGeneration::Is(g), Some(c)) if c.row.generation != g => {
                    return Err(generation_conflict(Some(c.row.generation), Some(g)))
                }
                (ConsumerGeneration::Is(_), Some(_)) => {}
            }
            if let Some(c) = existing {
                for a in &c.allocations {
                    *released.entry((a.provider, a.class.clone())).or_insert(0) += a.used;
                }
            }

            let mut allocations: BTreeMap<(ProviderId, ResourceClass), u64> = BTreeMap::new();
            for r in write.allocations.iter().filter(|r| r.used > 0) {
                let provider = self.provider_by_uuid(&r.provider).ok_or_else(|| {
                    Error::invalid(format!(
                        "Allocation for resource provider '{}' that does not exist.",
                        r.provider
                    ))
                })?;
                if !self.class_exists(r.class.as_str()) {
                    return Err(Error::invalid(format!(
                        "Unable to allocate inventory for consumer {}: No such resource class {}.",
                        write.consumer, r.class
                    )));
                }
                let Some(inv) = provider.inventories.get(r.class.as_str()) else {
                    return Err(Error::conflict(
                        ConflictCode::Other,
                        format!(
                            "Unable to allocate inventory: Inventory for '{}' on resource provider \
                             '{}' invalid.",
                            r.class, r.provider
                        ),
                    ));
                };
                if r.used < inv.min_unit
                    || r.used > inv.max_unit
                    || r.used % inv.step_size.max(1) != 0
                {
                    return Err(Error::conflict(
                        ConflictCode::Other,
                        format!(
                            "Unable to allocate inventory: Unable to create allocation for '{}' on \
                             resource provider '{}'. The requested amount would violate inventory \
                             constraints.",
                            r.class, r.provider
                        ),
                    ));
                }
                *allocations
                    .entry((provider.id(), r.class.clone()))
                    .or_insert(0) += r.used;
            }
            for ((provider, class), used) in &allocations {
                *new_amounts.entry((*provider, class.clone())).or_insert(0) += used;
                touched_providers.insert(*provider, ());
            }

            let row = match existing {
                Some(c) => ConsumerRow {
                    project_id: write.project_id.clone(),
                    user_id: write.user_id.clone(),
                    consumer_type: write
                        .consumer_type
                        .clone()
                        .or_else(|| c.row.consumer_type.clone()),
                    generation: c.row.generation + 1,
                    updated_at: now,
                    ..c.row.clone()
                },
                None => ConsumerRow {
                    uuid: write.consumer,
                    project_id: write.project_id.clone(),
                    user_id: write.user_id.clone(),
                    consumer_type: write.consumer_type.clone(),
                    generation: 0,
                    created_at: now,
                    updated_at: now,
                },
            };
            let list = allocations
                .into_iter()
                .map(|((provider, class), used)| Allocation {
                    provider,
                    class,
                    used,
                })
                .collect();
            planned.push((row, existing.map(|c| c.row.generation), list));
        }

        // Capacity, per provider and class that the write allocates.
        for ((provider_id, class), amount) in &new_amounts {
            let provider = self.provider(*provider_id).expect("checked above");
            let inv = &provider.inventories[class.as_str()];
            let before = self.usage(*provider_id, class.as_str());
            let others = before
                - released
                    .get(&(*provider_id, class.clone()))
                    .copied()
                    .unwrap_or(0);
            let after = others + amount;
            let capacity = (inv.total as f64 - inv.reserved as f64) * inv.allocation_ratio;
            if after as f64 > capacity && after > before {
                return Err(Error::conflict(
                    ConflictCode::Other,
                    format!(
                        "Unable to allocate inventory: Unable to create allocation for '{}' on \
                         resource provider '{}'. The requested amount would exceed the capacity.",
                        class,
                        provider.uuid()
                    ),
                ));
            }
        }

        for (row, previous_generation, list) in planned {
            let uuid = row.uuid;
            if list.is_empty() {
                if previous_generation.is_some() {
                    changes.push(Change::DeleteConsumer(uuid));
                }
                continue;
            }
            changes.push(Change::PutConsumer {
                row,
                previous_generation,
            });
            changes.push(Change::SetAllocations(uuid, list));
        }
        for provider in touched_providers.keys() {
            changes.push(bump(self.provider(*provider).expect("checked above"), now));
        }
        Ok(((), changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Inventory, ProviderRow};

    fn world(capacity: u64) -> State {
        let mut s = State::new();
        let row = ProviderRow {
            id: ProviderId(1),
            uuid: Uuid::from_u128(1),
            name: "p".into(),
            generation: 0,
            parent: None,
            root: ProviderId(1),
            created_at: 0,
            updated_at: 0,
        };
        s.apply(&[
            Change::PutProvider {
                row,
                previous_generation: None,
            },
            Change::SetInventories(
                ProviderId(1),
                vec![(
                    ResourceClass::new_unchecked("VCPU"),
                    Inventory::with_total(capacity),
                )],
            ),
        ]);
        s
    }

    fn claim(consumer: u128, used: u64) -> ConsumerWrite {
        ConsumerWrite {
            consumer: Uuid::from_u128(consumer),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: ConsumerGeneration::Unchecked,
            allocations: vec![Requested {
                provider: Uuid::from_u128(1),
                class: ResourceClass::new_unchecked("VCPU"),
                used,
            }],
        }
    }

    fn run(s: &mut State, writes: &[ConsumerWrite]) -> crate::Result<()> {
        let (_, changes) = s.write_allocations(writes, 5)?;
        s.apply(&changes);
        assert!(s.check_usage_index());
        Ok(())
    }

    #[test]
    fn claims_stop_at_capacity() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 3)]).unwrap();
        assert!(run(&mut s, &[claim(11, 2)]).is_err());
        run(&mut s, &[claim(11, 1)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), "VCPU"), 4);
        assert_eq!(s.provider(ProviderId(1)).unwrap().row.generation, 2);
    }

    #[test]
    fn replacing_own_claim_counts_only_once() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 4)]).unwrap();
        run(&mut s, &[claim(10, 3)]).unwrap();
        run(&mut s, &[claim(10, 4)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), "VCPU"), 4);
        assert_eq!(s.consumer(&Uuid::from_u128(10)).unwrap().row.generation, 2);
    }

    #[test]
    fn release_deletes_consumer_and_twice_is_harmless() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 2)]).unwrap();
        run(&mut s, &[claim(10, 0)]).unwrap();
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
        run(&mut s, &[claim(10, 0)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), "VCPU"), 0);
    }

    #[test]
    fn over_committed_inventory_may_get_no_worse() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 4)]).unwrap();
        // The operator shrinks the inventory below what is used.
        s.apply(&[Change::SetInventories(
            ProviderId(1),
            vec![(
                ResourceClass::new_unchecked("VCPU"),
                Inventory::with_total(2),
            )],
        )]);
        run(&mut s, &[claim(10, 3)]).unwrap();
        assert!(run(&mut s, &[claim(10, 4)]).is_err());
        assert!(run(&mut s, &[claim(11, 1)]).is_err());
    }

    #[test]
    fn many_consumers_are_all_or_nothing() {
        let mut s = world(4);
        assert!(run(&mut s, &[claim(10, 2), claim(11, 3)]).is_err());
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
        // A swap (the move operation): one consumer releases, another takes it.
        run(&mut s, &[claim(10, 4)]).unwrap();
        run(&mut s, &[claim(10, 0), claim(11, 4)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), "VCPU"), 4);
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
    }

    #[test]
    fn consumer_generations_are_checked() {
        let mut s = world(4);
        let mut w = claim(10, 1);
        w.generation = ConsumerGeneration::Is(0);
        assert!(matches!(
            run(&mut s, &[w.clone()]),
            Err(Error::Conflict {
                code: ConflictCode::ConcurrentUpdate,
                ..
            })
        ));
        w.generation = ConsumerGeneration::New;
        run(&mut s, &[w.clone()]).unwrap();
        assert!(run(&mut s, &[w.clone()]).is_err());
        w.generation = ConsumerGeneration::Is(0);
        run(&mut s, &[w]).unwrap();
    }

    #[test]
    fn constraints_are_checked() {
        let mut s = world(8);
        s.apply(&[Change::SetInventories(
            ProviderId(1),
            vec![(
                ResourceClass::new_unchecked("VCPU"),
                Inventory {
                    min_unit: 2,
                    max_unit: 6,
                    step_size: 2,
                    ..Inventory::with_total(8)
                },
            )],
        )]);
        for bad in [1, 3, 8] {
            assert!(run(&mut s, &[claim(10, bad)]).is_err(), "{bad}");
        }
        run(&mut s, &[claim(10, 6)]).unwrap();
        let mut unknown = claim(11, 1);
        unknown.allocations[0].provider = Uuid::from_u128(99);
        assert!(matches!(run(&mut s, &[unknown]), Err(Error::Invalid(_))));
    }
}
