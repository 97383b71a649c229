//! The reshaper (`POST /reshaper`, 1.30): replace the inventories of several providers
//! and the allocations of several consumers in one write, all or nothing. It is how a
//! client moves inventory, and the allocations on it, from one provider to another
//! (typically from a root provider to a new child).
//!
//! Neither half can go first on its own: inventory that allocations use cannot be
//! removed, and allocations cannot be made against inventory that does not exist yet.
//! So, as Placement does, the write goes in three steps, each planned against the
//! state the previous ones leave:
//!
//! 1. *interim inventories*: every provider gets the union of its current inventories
//!    and the new ones (the new ones win where a class is in both); a provider whose
//!    new inventory is empty is left alone in this step. Capacity may drop below what
//!    is used here: only the final allocations must fit;
//! 2. *allocations*: the consumers' allocations are replaced by the one allocation
//!    rule ([`State::plan_allocations`], with the reshaper's wording), against the
//!    interim inventories;
//! 3. *final inventories*: every provider's inventories become exactly the new ones;
//!    removing a class that allocations still use is refused.
//!
//! Each step bumps the generation of the providers it touches, so a provider named in
//! the request ends up to 3 generations further on (Placement's clients expect those
//! exact numbers). Unlike the inventory endpoints, the reshaper does not check an
//! inventory's capacity (`reserved` may exceed `total`), as Placement does not.
//!
//! Before those steps, in Placement's order: every provider named for inventories
//! exists and has the generation the request expects; then the allocation rule's own
//! first checks, against the state before the reshape: every consumer has the
//! generation the request expects, every provider named for allocations exists.
//! The rule's remaining checks (classes, inventories, capacity) run in step 2.

use std::collections::BTreeMap;

use super::allocations::{ConsumerWrite, Endpoint};
use super::{bump, GivenGeneration, Plan};
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Inventory, ProviderId, Timestamp};
use crate::names::{ProviderRef, RequestedName, ResourceClass};
use crate::state::State;

/// The new inventories of one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInventories {
    /// The provider, as the request names it.
    pub provider: ProviderRef,
    /// The generation the request expects the provider to have.
    pub generation: GivenGeneration,
    /// All its inventories after the reshape, by class as the request names it
    /// (which need not exist, nor be a name at all: the rule refuses both alike). No
    /// inventory: the request gave something else under that name, refused as the
    /// unknown class it names, in its turn.
    pub inventories: Vec<(RequestedName<ResourceClass>, Option<Inventory>)>,
}

/// A reshape refused because a provider named for inventories does not exist.
/// Placement gives this one its own error code, which no [`Error`] carries, so it is
/// the plan's answer (with no changes) rather than an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingProvider(pub String);

fn malformed(class: &str) -> Error {
    Error::invalid(format!(
        "malformed reshaper data: No such resource class {class}."
    ))
}

/// Where a class comes in Placement's listings: standard classes in their order, then
/// custom ones.
fn class_rank(state: &State, class: &str) -> (usize, String) {
    let at = state
        .class_names()
        .position(|n| n == class)
        .unwrap_or(usize::MAX);
    (at, class.to_owned())
}

/// Plans `changes` against `state` and applies them to it, so that the next step plans
/// against the state this one leaves.
fn take(state: &mut State, all: &mut Vec<Change>, changes: Vec<Change>) {
    state.apply(&changes);
    all.extend(changes);
}

impl State {
    /// Replaces the inventories of `providers` and the allocations of `consumers`
    /// atomically (see the module doc for the steps and the order of the checks).
    ///
    /// The steps are planned on a copy of the whole state, each applied to it before
    /// the next is planned. That costs a copy of the view per reshape, under the
    /// writer lock; reshapes are rare (once per provider tree when a driver changes
    /// how it models its resources), and the copy lets the allocation rule be the very
    /// one every other allocation write uses.
    pub fn reshape(
        &self,
        providers: &[ProviderInventories],
        consumers: &[ConsumerWrite],
        now: Timestamp,
    ) -> Plan<Result<(), MissingProvider>> {
        let targets = match self.reshape_targets(providers)? {
            Ok(targets) => targets,
            Err(missing) => return Ok((Err(missing), Vec::new())),
        };
        self.check_allocation_targets(consumers, Endpoint::Reshaper)?;

        let mut next = self.clone();
        let mut changes = Vec::new();
        interim_inventories(&mut next, &mut changes, &targets, now)?;
        // 2. Allocations, by the rest of the one allocation rule (its unknown class
        // is worded as ours). It bumps, as Placement does, every provider the write
        // allocates on and every provider a consumer emptied by the write releases.
        let (_, written) = next.plan_checked_allocations(consumers, Endpoint::Reshaper, now)?;
        take(&mut next, &mut changes, written);
        final_inventories(&mut next, &mut changes, &targets, now)?;
        Ok((Ok(()), changes))
    }

    /// The providers named for inventories, each with its request, once each exists
    /// and has the generation the request expects (checked in request order).
    fn reshape_targets<'r>(
        &self,
        providers: &'r [ProviderInventories],
    ) -> crate::Result<Result<Vec<Target<'r>>, MissingProvider>> {
        let mut targets: Vec<Target<'r>> = Vec::new();
        for request in providers {
            let Some(p) = self.provider_by_ref(&request.provider) else {
                let uuid = &request.provider;
                return Ok(Err(MissingProvider(format!(
                    "Resource provider {uuid} in inventories not found: \
                     No resource provider with uuid {uuid} found"
                ))));
            };
            if !request.generation.matches(p.row.generation) {
                return Err(Error::conflict(
                    ConflictCode::ConcurrentUpdate,
                    format!(
                        "resource provider generation conflict for provider {}: \
                         actual: {}, given: {}",
                        request.provider, p.row.generation, request.generation
                    ),
                ));
            }
            targets.push((p.id(), request));
        }
        Ok(Ok(targets))
    }
}

/// A provider named for inventories, with its request.
type Target<'r> = (ProviderId, &'r ProviderInventories);

/// Step 1, interim inventories: each provider given new ones gets the union of its
/// current inventories and the new ones (the new ones win), planned and applied to
/// `next` provider by provider. Every class named must exist, with an inventory.
fn interim_inventories(
    next: &mut State,
    changes: &mut Vec<Change>,
    targets: &[Target<'_>],
    now: Timestamp,
) -> crate::Result<()> {
    for (id, request) in targets {
        if request.inventories.is_empty() {
            continue;
        }
        // The steps change no class, so `next` knows the classes the state before
        // the reshape knows.
        if let Some((class, _)) = request
            .inventories
            .iter()
            .find(|(c, inv)| inv.is_none() || !c.name().is_some_and(|c| next.class_exists(c)))
        {
            return Err(malformed(class.as_str()));
        }
        let p = next
            .provider(*id)
            .expect("a reshape target exists (`reshape_targets`)");
        let mut union: BTreeMap<ResourceClass, Inventory> = p
            .inventories
            .iter()
            .map(|(c, inv)| (c.clone(), *inv))
            .collect();
        // Every class is a name that exists, with an inventory (checked just above).
        let named = request
            .inventories
            .iter()
            .filter_map(|(c, inv)| Some((c.name()?.clone(), (*inv)?)));
        union.extend(named);
        let step = vec![
            Change::SetInventories(*id, union.into_iter().collect()),
            bump(p, now),
        ];
        take(next, changes, step);
    }
    Ok(())
}

/// Step 3, final inventories: every provider's inventories become exactly the new
/// ones, planned and applied to `next` provider by provider; removing a class that
/// allocations still use is refused.
fn final_inventories(
    next: &mut State,
    changes: &mut Vec<Change>,
    targets: &[Target<'_>],
    now: Timestamp,
) -> crate::Result<()> {
    for (id, request) in targets {
        let p = next
            .provider(*id)
            .expect("a reshape target exists (`reshape_targets`)");
        let mut in_use: Vec<&str> = p
            .inventories
            .keys()
            .filter(|c| {
                !request
                    .inventories
                    .iter()
                    .any(|(n, _)| n.name() == Some(*c))
            })
            .filter(|c| next.used(*id, c, now) > 0)
            .map(|c| c.as_str())
            .collect();
        if !in_use.is_empty() {
            in_use.sort_by_key(|c| class_rank(next, c));
            return Err(Error::conflict(
                ConflictCode::InventoryInUse,
                format!(
                    "update conflict: Inventory for '{}' on resource provider '{}' in use.",
                    in_use.join(", "),
                    p.uuid()
                ),
            ));
        }
        let last: BTreeMap<ResourceClass, Inventory> = request
            .inventories
            .iter()
            // Every class is a name that exists, with an inventory (step 1).
            .filter_map(|(c, inv)| Some((c.name()?.clone(), (*inv)?)))
            .collect();
        let step = vec![
            Change::SetInventories(*id, last.into_iter().collect()),
            bump(p, now),
        ];
        take(next, changes, step);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::ProviderRef;
    use crate::ops::allocations::{ConsumerGeneration, Requested};
    use crate::ops::inventories::ReservedRule;
    use crate::testing::rc;
    use uuid::Uuid;

    const RP: Uuid = Uuid::from_u128(0xa);
    const CHILD: Uuid = Uuid::from_u128(0xb);

    fn inv(total: u64) -> Inventory {
        Inventory::with_total(total)
    }

    fn c(n: u128) -> Uuid {
        Uuid::from_u128(0xc00 + n)
    }

    fn run<T>(s: &mut State, plan: impl FnOnce(&State) -> Plan<T>) -> T {
        let (answer, changes) = plan(s).expect("plan");
        s.apply(&changes);
        assert!(s.check_usage_index());
        answer
    }

    /// RP (DISK_GB 2048, VCPU 10) with three consumers on it, and an empty child: the
    /// world of Placement's reshaper tests.
    fn world() -> State {
        let mut s = State::new();
        let (_, ch) = s.create_provider(RP, "rp", None, 1).unwrap();
        s.apply(&ch);
        let (_, ch) = s
            .create_provider(CHILD, "child", Some(RP.into()), 1)
            .unwrap();
        s.apply(&ch);
        let invs = vec![
            (
                "DISK_GB".to_string(),
                Inventory {
                    step_size: crate::testing::step(10),
                    min_unit: 10,
                    max_unit: 1000,
                    ..inv(2048)
                },
            ),
            ("VCPU".to_string(), inv(10)),
        ]
        .into_iter()
        .map(|(c, i)| (ResourceClass::requested(&c), Some(i)))
        .collect::<Vec<_>>();
        run(&mut s, |s| {
            s.set_inventories(&RP, 0, &invs, ReservedRule::UpToTotal, 1)
        });
        let claims = [
            write(0, ConsumerGeneration::New, &[(RP, "DISK_GB", 1000)]),
            write(1, ConsumerGeneration::New, &[(RP, "VCPU", 6)]),
            write(
                2,
                ConsumerGeneration::New,
                &[(RP, "DISK_GB", 20), (RP, "VCPU", 1)],
            ),
        ];
        for claim in claims {
            run(&mut s, |s| s.plan_allocations(&[claim], Endpoint::Put, 1));
        }
        s
    }

    fn write(
        n: u128,
        generation: ConsumerGeneration,
        amounts: &[(Uuid, &str, u64)],
    ) -> ConsumerWrite {
        ConsumerWrite {
            consumer: c(n),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation,
            allocations: amounts
                .iter()
                .map(|(p, class, used)| Requested {
                    provider: (*p).into(),
                    class: ResourceClass::requested(class),
                    used: *used,
                })
                .collect(),
        }
    }

    /// The consumer's generation now, as the request must give it.
    fn current(s: &State, n: u128) -> ConsumerGeneration {
        s.consumer(&c(n)).map_or(ConsumerGeneration::New, |c| {
            ConsumerGeneration::Is(c.row.generation.into())
        })
    }

    fn target(p: Uuid, generation: u64, invs: &[(&str, Inventory)]) -> ProviderInventories {
        ProviderInventories {
            provider: p.into(),
            generation: generation.into(),
            inventories: invs
                .iter()
                .map(|(c, i)| (ResourceClass::requested(c), Some(*i)))
                .collect(),
        }
    }

    fn generation(s: &State, p: Uuid) -> u64 {
        s.provider_by_uuid(&p).unwrap().row.generation
    }

    fn usage(s: &State, p: Uuid, class: &str) -> u64 {
        s.usage(s.provider_by_uuid(&p).unwrap().id(), &rc(class))
    }

    fn disk() -> Inventory {
        Inventory {
            step_size: crate::testing::step(10),
            min_unit: 10,
            max_unit: 1200,
            ..inv(2048)
        }
    }

    fn child_vcpu() -> Inventory {
        Inventory {
            max_unit: 8,
            ..inv(10)
        }
    }

    /// The move of the VCPU inventory and its allocations to the child.
    fn move_to_child(s: &State) -> (Vec<ProviderInventories>, Vec<ConsumerWrite>) {
        let g = generation(s, RP);
        (
            vec![
                target(RP, g, &[("DISK_GB", disk())]),
                target(CHILD, generation(s, CHILD), &[("VCPU", child_vcpu())]),
            ],
            vec![
                write(0, current(s, 0), &[(RP, "DISK_GB", 1000)]),
                write(1, current(s, 1), &[(CHILD, "VCPU", 8)]),
                write(2, current(s, 2), &[(RP, "DISK_GB", 20), (CHILD, "VCPU", 1)]),
            ],
        )
    }

    #[test]
    fn moves_inventory_and_allocations_to_a_child() {
        let mut s = world();
        let (rp0, child0) = (generation(&s, RP), generation(&s, CHILD));
        let (targets, writes) = move_to_child(&s);
        let answer = run(&mut s, |s| s.reshape(&targets, &writes, 9));
        assert_eq!(answer, Ok(()));
        let rp = s.provider_by_uuid(&RP).unwrap();
        assert_eq!(rp.inventories.len(), 1);
        assert_eq!(rp.inventories["DISK_GB"].max_unit, 1200);
        assert_eq!(
            s.provider_by_uuid(&CHILD).unwrap().inventories["VCPU"],
            child_vcpu()
        );
        assert_eq!(usage(&s, RP, "DISK_GB"), 1020);
        assert_eq!(usage(&s, RP, "VCPU"), 0);
        assert_eq!(usage(&s, CHILD, "VCPU"), 9);
        // Interim inventories, allocations, final inventories: three bumps each.
        assert_eq!(generation(&s, RP), rp0 + 3);
        assert_eq!(generation(&s, CHILD), child0 + 3);
        assert_eq!(s.provider_by_uuid(&RP).unwrap().row.updated_at, 9);
    }

    #[test]
    fn moves_back_and_releases_emptied_consumers() {
        let mut s = world();
        let (targets, writes) = move_to_child(&s);
        run(&mut s, |s| s.reshape(&targets, &writes, 9)).unwrap();
        let (rp0, child0) = (generation(&s, RP), generation(&s, CHILD));
        let targets = vec![
            target(RP, rp0, &[("DISK_GB", disk()), ("VCPU", child_vcpu())]),
            target(CHILD, child0, &[]),
        ];
        let writes = vec![
            write(0, current(&s, 0), &[(RP, "DISK_GB", 1000)]),
            write(3, ConsumerGeneration::New, &[(RP, "VCPU", 8)]),
            write(
                4,
                ConsumerGeneration::New,
                &[(RP, "DISK_GB", 20), (RP, "VCPU", 1)],
            ),
            write(1, current(&s, 1), &[]),
            write(2, current(&s, 2), &[(RP, "DISK_GB", 20)]),
        ];
        run(&mut s, |s| s.reshape(&targets, &writes, 10)).unwrap();
        assert_eq!(usage(&s, RP, "VCPU"), 9);
        assert_eq!(usage(&s, RP, "DISK_GB"), 1040);
        assert!(s.provider_by_uuid(&CHILD).unwrap().inventories.is_empty());
        assert!(s.consumer(&c(1)).is_none());
        assert_eq!(generation(&s, RP), rp0 + 3);
        // The child: no interim step (its new inventory is empty), a bump for the
        // allocations released from it, and the final step.
        assert_eq!(generation(&s, CHILD), child0 + 2);
    }

    #[test]
    fn refusals_change_nothing_and_come_in_placements_order() {
        let s = world();
        let g = generation(&s, RP);
        let (targets, writes) = move_to_child(&s);
        let refused = |targets: &[ProviderInventories], writes: &[ConsumerWrite]| {
            s.reshape(targets, writes, 9).expect_err("refused")
        };
        let message = |e: Error| e.to_string();

        // (what is wrong, the error's start)
        let mut cases: Vec<(Vec<ProviderInventories>, Vec<ConsumerWrite>, String)> = vec![];
        // A stale provider generation, before anything about consumers.
        let mut t = targets.clone();
        t[0].generation = (g - 1).into();
        let mut w = writes.clone();
        w[0].generation = ConsumerGeneration::Is(99);
        cases.push((
            t,
            w,
            format!(
                "resource provider generation conflict for provider {RP}: actual: {g}, given: {}",
                g - 1
            ),
        ));
        // A consumer generation, before unknown classes.
        let mut t = targets.clone();
        t[0].inventories[0].0 = ResourceClass::requested("DISK_OF_STEEL");
        let mut w = writes.clone();
        w[0].generation = ConsumerGeneration::Is(99);
        cases.push((t, w, "consumer generation conflict - expected".into()));
        let mut w = writes.clone();
        w[1].generation = ConsumerGeneration::New;
        cases.push((
            targets.clone(),
            w,
            format!(
                "consumer generation conflict - expected {} but got None",
                s.consumer(&c(1)).unwrap().row.generation
            ),
        ));
        let mut w = writes.clone();
        w.push(write(7, ConsumerGeneration::Is(3), &[(RP, "DISK_GB", 10)]));
        cases.push((
            targets.clone(),
            w,
            "consumer generation conflict - expected null but got 3".into(),
        ));
        // An unknown provider in the allocations.
        let mut w = writes.clone();
        w[1].allocations[0].provider = Uuid::from_u128(0xdead).into();
        cases.push((
            targets.clone(),
            w,
            "Allocation for resource provider '00000000-0000-0000-0000-00000000dead' that does not exist.".into(),
        ));
        // A provider in another spelling names none, and is repeated as given.
        let mut w = writes.clone();
        let upper = CHILD.to_string().to_uppercase();
        w[1].allocations[0].provider = ProviderRef::parse(&upper);
        cases.push((
            targets.clone(),
            w,
            format!("Allocation for resource provider '{upper}' that does not exist."),
        ));
        // A negative consumer generation, repeated as given.
        let mut w = writes.clone();
        w[1].generation = ConsumerGeneration::Is(-1);
        cases.push((
            targets.clone(),
            w,
            format!(
                "consumer generation conflict - expected {} but got -1",
                s.consumer(&c(1)).unwrap().row.generation
            ),
        ));
        // Unknown classes, in inventories and in allocations.
        let mut t = targets.clone();
        t[0].inventories[0].0 = ResourceClass::requested("DISK_OF_STEEL");
        cases.push((
            t,
            writes.clone(),
            "malformed reshaper data: No such resource class DISK_OF_STEEL.".into(),
        ));
        let mut w = writes.clone();
        w[0].allocations[0].class = ResourceClass::requested("COWS");
        cases.push((
            targets.clone(),
            w,
            "malformed reshaper data: No such resource class COWS.".into(),
        ));
        // Allocations that do not fit the new inventories.
        let mut t = targets.clone();
        t[0].inventories[0].1.as_mut().unwrap().max_unit = 600;
        cases.push((
            t,
            writes.clone(),
            "Unable to allocate inventory: Unable to create allocation for 'DISK_GB'".into(),
        ));
        let mut t = targets.clone();
        t[1].inventories[0].1.as_mut().unwrap().total = 5;
        cases.push((
            t,
            writes.clone(),
            "Unable to allocate inventory: Unable to create allocation for 'VCPU'".into(),
        ));
        // Allocations left on removed inventory.
        let w = vec![writes[0].clone()];
        cases.push((
            targets.clone(),
            w,
            format!("update conflict: Inventory for 'VCPU' on resource provider '{RP}' in use."),
        ));

        for (t, w, wanted) in cases {
            let got = message(refused(&t, &w));
            assert!(got.starts_with(&wanted), "{got}\n  wanted {wanted}");
        }

        // No allocations at all, with inventory in use: refused at the last step.
        let t = vec![target(RP, g, &[("VCPU", inv(1))])];
        assert!(matches!(
            refused(&t, &[]),
            Error::Conflict { code: ConflictCode::InventoryInUse, message }
                if message.contains("'DISK_GB'")
        ));

        // A missing provider is the plan's answer, with nothing to persist.
        let mut t = targets.clone();
        t[1].provider = ProviderRef::parse("39bafc00-3fff-444d-b87a-2ead3f866e05");
        let (answer, changes) = s.reshape(&t, &writes, 9).unwrap();
        assert!(changes.is_empty());
        assert_eq!(
            answer,
            Err(MissingProvider(
                "Resource provider 39bafc00-3fff-444d-b87a-2ead3f866e05 in inventories not \
                 found: No resource provider with uuid 39bafc00-3fff-444d-b87a-2ead3f866e05 found"
                    .into()
            ))
        );
        // Only the canonical spelling names a provider.
        let mut t = targets.clone();
        t[0].provider = ProviderRef::parse(&RP.to_string().to_uppercase());
        assert!(matches!(s.reshape(&t, &writes, 9), Ok((Err(_), _))));
    }

    #[test]
    fn capacity_may_dip_in_between_and_reserved_is_not_checked() {
        let mut s = world();
        let g = generation(&s, RP);
        // VCPU shrinks to exactly what is used while DISK_GB's inventory keeps
        // reserved above total, which only the reshaper accepts.
        let odd = Inventory {
            reserved: 4096,
            ..disk()
        };
        let t = vec![target(RP, g, &[("DISK_GB", odd), ("VCPU", inv(7))])];
        run(&mut s, |s| s.reshape(&t, &[], 3)).unwrap();
        assert_eq!(
            s.provider_by_uuid(&RP).unwrap().inventories["DISK_GB"].reserved,
            4096
        );
        // Nothing was allocated: interim and final steps only.
        assert_eq!(generation(&s, RP), g + 2);
    }
}
