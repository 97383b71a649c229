//! Random sequences of write operations on a [`State`], for the property tests.
//!
//! Shared by the core's properties (`tests/properties.rs`) and the store suite
//! (`allot-store/tests/roundtrip.rs`, which includes this file by path): an [`Op`] is
//! a request as a client would make it, named by small slots (provider 0..6, consumer
//! 0..8, class 0..4) so that random sequences collide often: the same consumer claims,
//! replaces and releases; the same provider gets its inventory shrunk under its
//! allocations; writes race for the last units.
#![allow(dead_code)]

use allot_core::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use allot_core::ops::claims::NewClaim;
use allot_core::ops::inventories::ReservedRule;
use allot_core::ops::Plan;
use allot_core::{
    Change, Inventory, ProviderRef, RequestedName, ResourceClass, State, Timestamp, Uuid,
};
use proptest::prelude::*;

/// The classes operations use: two standard ones and two custom ones, which must be
/// created first (and may be renamed into one another).
pub const CLASSES: [&str; 4] = ["VCPU", "MEMORY_MB", "CUSTOM_SLICE", "CUSTOM_PIECE"];
/// Provider slots that may be created; slot `PROVIDERS` is never created (an unknown
/// provider).
pub const PROVIDERS: u8 = 5;
/// Consumer slots.
pub const CONSUMERS: u8 = 8;

/// The uuid of provider slot `slot`.
pub fn provider_uuid(slot: u8) -> Uuid {
    Uuid::from_u128(0x5000_0000 + slot as u128)
}

/// The uuid of consumer slot `slot`.
pub fn consumer_uuid(slot: u8) -> Uuid {
    Uuid::from_u128(0xc000_0000 + slot as u128)
}

/// An inventory, as generated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvSpec {
    pub total: u64,
    pub reserved: u64,
    pub min_unit: u64,
    pub max_unit: u64,
    pub step_size: u64,
    pub allocation_ratio: f64,
}

impl InvSpec {
    pub fn inventory(&self) -> Inventory {
        Inventory {
            total: self.total,
            reserved: self.reserved,
            min_unit: self.min_unit,
            max_unit: self.max_unit,
            step_size: std::num::NonZeroU64::new(self.step_size).expect("steps start at 1"),
            allocation_ratio: self.allocation_ratio,
        }
    }
}

/// What a write says about the consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gen {
    /// No check (before 1.28).
    Unchecked,
    /// `consumer_generation: null`: the consumer must be new.
    New,
    /// What a well-behaved client sends: the consumer's current generation, or null
    /// (new) when it has none.
    Current,
    /// One more than the current generation: always refused.
    Stale,
}

/// One consumer's part of an allocation write.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteSpec {
    pub consumer: u8,
    pub generation: Gen,
    pub consumer_type: Option<&'static str>,
    /// (provider slot, class index, amount); amount 0 means "nothing".
    pub allocations: Vec<(u8, u8, u64)>,
}

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    CreateClass(u8),
    RenameClass {
        from: u8,
        to: u8,
    },
    DeleteClass(u8),
    CreateProvider {
        slot: u8,
        parent: Option<u8>,
    },
    DeleteProvider(u8),
    /// Replace all inventories (`stale`: with a wrong generation).
    SetInventories {
        slot: u8,
        inventories: Vec<(u8, InvSpec)>,
        stale: bool,
    },
    AddInventory {
        slot: u8,
        class: u8,
        inventory: InvSpec,
    },
    UpdateInventory {
        slot: u8,
        class: u8,
        inventory: InvSpec,
        stale: bool,
    },
    DeleteInventory {
        slot: u8,
        class: u8,
    },
    DeleteInventories(u8),
    /// Replace the allocations of one or more consumers at once (unless
    /// `keep_duplicates`, writes after the first of a consumer are dropped).
    Write {
        writes: Vec<WriteSpec>,
        keep_duplicates: bool,
    },
    /// Release everything a consumer holds (an empty write, as `DELETE
    /// /allocations/{c}` at microversions before 1.28 does).
    Release(u8),
    /// `DELETE /allocations/{c}`.
    Delete(u8),
    /// A consumer re-sends what it holds with every amount changed by `delta` (at
    /// least 0), with its current generation: the way to stay on, or shrink on, an
    /// over-committed inventory. The consumer is one holding on an over-committed
    /// inventory if there is any (the `consumer`-th of them, cyclically).
    Resize {
        consumer: u8,
        delta: i8,
    },
    /// What `from` holds moves to `to` in one two-consumer write (a migration).
    Move {
        from: u8,
        to: u8,
    },
    /// A pending claim `claim` (a slot: later operations name it again) for
    /// `consumer`, of `(provider slot, class index, amount)`s, expiring `expires_in`
    /// steps later (None: never).
    Claim {
        claim: u8,
        consumer: u8,
        amounts: Vec<(u8, u8, u64)>,
        expires_in: Option<u8>,
    },
    /// Confirm a claim, adding to what its consumer holds or replacing it.
    Confirm {
        claim: u8,
        replace: bool,
    },
    /// Release a claim.
    ReleaseClaim(u8),
    /// Release every live claim of a consumer.
    ReleaseClaims(u8),
    /// The sweeper's pass, with this retention (in steps).
    Sweep(u8),
    /// The operator shrinks an inventory to `below` + 1 units under what is used
    /// (ratio 1, nothing reserved), over-committing it: the `slot`-th (cyclically)
    /// inventory in use if any is, else `class` on provider `slot`.
    ShrinkUnder {
        slot: u8,
        class: u8,
        below: u8,
    },
}

/// Claim slots.
pub const CLAIMS: u8 = 12;

/// The uuid of claim slot `slot`.
pub fn claim_uuid(slot: u8) -> Uuid {
    Uuid::from_u128(0xc1a1_0000 + slot as u128)
}

/// One random pending-claim operation.
pub fn claim_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            0..CLAIMS,
            0..CONSUMERS,
            prop::collection::vec(
                (provider_slot(), class_index(), prop_oneof![8 => 1u64..6, 1 => 6u64..40]),
                1..3
            ),
            prop::option::weighted(0.7, 1u8..15),
        )
            .prop_map(|(claim, consumer, amounts, expires_in)| Op::Claim {
                claim,
                consumer,
                amounts,
                expires_in
            }),
        4 => (0..CLAIMS, any::<bool>()).prop_map(|(claim, replace)| Op::Confirm { claim, replace }),
        4 => (0..CLAIMS).prop_map(Op::ReleaseClaim),
        1 => (0..CONSUMERS).prop_map(Op::ReleaseClaims),
        2 => (0u8..6).prop_map(Op::Sweep),
    ]
}

/// A random history mixing pending claims with every other operation (after the
/// set-up of [`ops`]).
pub fn claim_history(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    (
        ops(2, true),
        prop::collection::vec(prop_oneof![2 => op(true), 4 => claim_op()], 1..max_len),
    )
        .prop_map(|(mut setup, more)| {
            setup.extend(more);
            setup
        })
}

/// A class name of the test alphabet as the typed value operations take.
fn parsed(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("well-formed class")
}

/// A class name of the test alphabet as a request names it.
fn requested(name: &str) -> RequestedName<ResourceClass> {
    RequestedName::Name(parsed(name))
}

pub fn class(i: u8) -> &'static str {
    CLASSES[i as usize % CLASSES.len()]
}

fn inv_spec() -> impl Strategy<Value = InvSpec> {
    (
        0u64..16,
        prop_oneof![12 => Just(0u64), 3 => 0u64..6, 1 => 10u64..20],
        prop_oneof![4 => Just(1u64), 1 => 1u64..4],
        prop_oneof![3 => Just(i32::MAX as u64), 1 => 1u64..8],
        prop_oneof![4 => Just(1u64), 1 => 1u64..4],
        prop_oneof![
            4 => Just(1.0f64),
            1 => Just(0.5),
            1 => Just(1.5),
            1 => Just(2.0),
            1 => Just(16.0),
        ],
    )
        .prop_map(
            |(total, reserved, min_unit, max_unit, step_size, allocation_ratio)| InvSpec {
                total,
                reserved,
                min_unit,
                max_unit,
                step_size,
                allocation_ratio,
            },
        )
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        3 => Just(Gen::Unchecked),
        1 => Just(Gen::New),
        6 => Just(Gen::Current),
        1 => Just(Gen::Stale),
    ]
}

fn provider_slot() -> impl Strategy<Value = u8> {
    // Mostly existing-or-creatable slots, sometimes the never-created one.
    prop_oneof![30 => 0..PROVIDERS, 1 => Just(PROVIDERS)]
}

fn class_index() -> impl Strategy<Value = u8> {
    prop_oneof![6 => Just(0u8), 3 => Just(1u8), 1 => 2u8..4]
}

fn write_spec() -> impl Strategy<Value = WriteSpec> {
    (
        0..CONSUMERS,
        gen(),
        prop_oneof![Just(None), Just(Some("INSTANCE")), Just(Some("MIGRATION"))],
        prop::collection::vec(
            (
                provider_slot(),
                class_index(),
                prop_oneof![1 => Just(0u64), 8 => 1u64..6, 1 => 6u64..40],
            ),
            0..3,
        ),
    )
        .prop_map(
            |(consumer, generation, consumer_type, allocations)| WriteSpec {
                consumer,
                generation,
                consumer_type,
                allocations,
            },
        )
}

/// One random operation. Without `renames`, classes are never renamed.
pub fn op(renames: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (2u8..4).prop_map(Op::CreateClass),
        1 => (2u8..4, 2u8..4).prop_map(move |(from, to)| if renames {
            Op::RenameClass { from, to }
        } else {
            Op::CreateClass(from)
        }),
        1 => (2u8..4).prop_map(Op::DeleteClass),
        4 => (0..PROVIDERS, prop::option::weighted(0.25, 0..PROVIDERS))
            .prop_map(|(slot, parent)| Op::CreateProvider { slot, parent }),
        1 => (0..PROVIDERS).prop_map(Op::DeleteProvider),
        4 => (
            0..PROVIDERS,
            prop::option::weighted(0.9, inv_spec()),
            prop::option::weighted(0.8, inv_spec()),
            prop::option::weighted(0.3, (2u8..4, inv_spec())),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(slot, vcpu, memory, custom, stale)| Op::SetInventories {
                slot,
                inventories: [vcpu.map(|i| (0, i)), memory.map(|i| (1, i)), custom]
                    .into_iter()
                    .flatten()
                    .collect(),
                stale
            }),
        2 => (0..PROVIDERS, class_index(), inv_spec())
            .prop_map(|(slot, class, inventory)| Op::AddInventory { slot, class, inventory }),
        4 => (0..PROVIDERS, class_index(), inv_spec(), prop::bool::weighted(0.1)).prop_map(
            |(slot, class, inventory, stale)| Op::UpdateInventory {
                slot,
                class,
                inventory,
                stale
            }
        ),
        1 => (0..PROVIDERS, class_index())
            .prop_map(|(slot, class)| Op::DeleteInventory { slot, class }),
        1 => (0..PROVIDERS).prop_map(Op::DeleteInventories),
        12 => (
            prop::collection::vec(write_spec(), 1..4),
            prop::bool::weighted(0.05)
        )
            .prop_map(|(writes, keep_duplicates)| Op::Write {
                writes,
                keep_duplicates
            }),
        2 => (0..CONSUMERS).prop_map(Op::Release),
        2 => (0..CONSUMERS).prop_map(Op::Delete),
        6 => (0..CONSUMERS, -2i8..2).prop_map(|(consumer, delta)| Op::Resize { consumer, delta }),
        2 => (0..CONSUMERS, 0..CONSUMERS).prop_map(|(from, to)| Op::Move { from, to }),
        3 => (0..PROVIDERS, class_index(), 0u8..3)
            .prop_map(|(slot, class, below)| Op::ShrinkUnder { slot, class, below }),
    ]
}

/// A random sequence of operations, after a random set-up that gives most providers
/// inventories (so that claims meet capacity early instead of being refused for want
/// of a provider).
pub fn ops(max_len: usize, renames: bool) -> impl Strategy<Value = Vec<Op>> {
    let setup = prop::collection::vec(
        (
            prop::option::weighted(0.2, 0..PROVIDERS),
            inv_spec(),
            inv_spec(),
            prop::option::weighted(0.5, inv_spec()),
        ),
        PROVIDERS as usize,
    )
    .prop_map(|providers| {
        let mut ops = vec![Op::CreateClass(2)];
        for (slot, (parent, vcpu, memory, slice)) in providers.into_iter().enumerate() {
            let mut inventories = vec![(0, vcpu), (1, memory)];
            inventories.extend(slice.map(|inv| (2, inv)));
            let slot = slot as u8;
            ops.push(Op::CreateProvider {
                slot,
                parent: parent.filter(|p| *p < slot),
            });
            ops.push(Op::SetInventories {
                slot,
                inventories,
                stale: false,
            });
        }
        ops
    });
    (setup, prop::collection::vec(op(renames), 1..max_len)).prop_map(|(mut setup, ops)| {
        setup.extend(ops);
        setup
    })
}

/// The consumer writes an [`Op::Write`] makes against `state` (the first write of each
/// consumer only, unless `keep_duplicates`).
pub fn consumer_writes(
    state: &State,
    specs: &[WriteSpec],
    keep_duplicates: bool,
) -> Vec<ConsumerWrite> {
    let mut seen = Vec::new();
    let mut writes = Vec::new();
    for spec in specs {
        if seen.contains(&spec.consumer) && !keep_duplicates {
            continue;
        }
        seen.push(spec.consumer);
        writes.push(consumer_write(state, spec));
    }
    writes
}

/// One consumer write, with the generation resolved against `state`.
pub fn consumer_write(state: &State, spec: &WriteSpec) -> ConsumerWrite {
    let uuid = consumer_uuid(spec.consumer);
    let current = state.consumer(&uuid).map(|c| c.row.generation);
    let generation = match spec.generation {
        Gen::Unchecked => ConsumerGeneration::Unchecked,
        Gen::New => ConsumerGeneration::New,
        Gen::Current => current.map_or(ConsumerGeneration::New, |g| {
            ConsumerGeneration::Is(g.into())
        }),
        Gen::Stale => ConsumerGeneration::Is(current.map_or(7, |g| g + 1).into()),
    };
    ConsumerWrite {
        consumer: uuid,
        project_id: format!("project-{}", spec.consumer % 3),
        user_id: format!("user-{}", spec.consumer % 2),
        consumer_type: spec.consumer_type.map(str::to_owned),
        generation,
        allocations: spec
            .allocations
            .iter()
            .map(|&(p, c, used)| Requested {
                provider: provider_uuid(p).into(),
                class: ResourceClass::requested(class(c)),
                used,
            })
            .collect(),
    }
}

/// What consumer `slot` holds, as requests with every amount changed by `delta`.
fn held(state: &State, slot: u8, delta: i8) -> Vec<Requested> {
    state
        .consumer(&consumer_uuid(slot))
        .map(|c| {
            c.allocations
                .iter()
                .map(|a| Requested {
                    provider: state.uuid_of(a.provider).into(),
                    class: RequestedName::Name(a.class.clone()),
                    used: a.used.saturating_add_signed(delta.into()),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `pick`-th (cyclically) consumer slot holding on an over-committed inventory.
fn over_committed_holder(state: &State, pick: u8) -> Option<u8> {
    let slots: Vec<u8> = (0..CONSUMERS)
        .filter(|slot| {
            state.consumer(&consumer_uuid(*slot)).is_some_and(|c| {
                c.allocations.iter().any(|a| {
                    let inv = state.provider(a.provider).unwrap().inventories[a.class.as_str()];
                    !inv.fits(state.usage(a.provider, &a.class), 0)
                })
            })
        })
        .collect();
    (!slots.is_empty()).then(|| slots[pick as usize % slots.len()])
}

fn current(state: &State, slot: u8) -> ConsumerGeneration {
    state
        .consumer(&consumer_uuid(slot))
        .map_or(ConsumerGeneration::New, |c| {
            ConsumerGeneration::Is(c.row.generation.into())
        })
}

/// The writes of [`Op::Resize`] and [`Op::Move`] (None for other operations).
pub fn derived_writes(state: &State, op: &Op) -> Option<Vec<ConsumerWrite>> {
    let write = |slot: u8, allocations: Vec<Requested>| ConsumerWrite {
        consumer: consumer_uuid(slot),
        project_id: format!("project-{}", slot % 3),
        user_id: format!("user-{}", slot % 2),
        consumer_type: None,
        generation: current(state, slot),
        allocations,
    };
    match *op {
        Op::Resize { consumer, delta } => {
            let consumer = over_committed_holder(state, consumer).unwrap_or(consumer);
            Some(vec![write(consumer, held(state, consumer, delta))])
        }
        Op::Move { from, to } => Some(vec![write(from, vec![]), write(to, held(state, from, 0))]),
        _ => None,
    }
}

/// The empty write that releases everything a consumer holds.
pub fn release(consumer: u8) -> ConsumerWrite {
    ConsumerWrite {
        consumer: consumer_uuid(consumer),
        project_id: "project".into(),
        user_id: "user".into(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations: vec![],
    }
}

fn changes<T>(plan: Plan<T>) -> allot_core::Result<Vec<Change>> {
    plan.map(|(_, changes)| changes)
}

/// Plans `op` against `state`: the changes to persist and apply, or the refusal.
pub fn plan(state: &State, op: &Op, now: Timestamp) -> allot_core::Result<Vec<Change>> {
    let rule = ReservedRule::UpToTotal;
    let generation = |slot: u8| {
        state
            .provider_by_uuid(&provider_uuid(slot))
            .map_or(0, |p| p.row.generation)
    };
    match op {
        Op::CreateClass(c) => changes(state.create_class(parsed(class(*c)), now)),
        Op::RenameClass { from, to } => {
            changes(state.rename_class(&parsed(class(*from)), parsed(class(*to)), now))
        }
        Op::DeleteClass(c) => changes(state.delete_class(&parsed(class(*c)))),
        Op::CreateProvider { slot, parent } => {
            let parent = parent.map(|p| ProviderRef::from(provider_uuid(p)));
            changes(state.create_provider(provider_uuid(*slot), &format!("rp-{slot}"), parent, now))
        }
        Op::DeleteProvider(slot) => changes(state.delete_provider(&provider_uuid(*slot), now)),
        Op::SetInventories {
            slot,
            inventories,
            stale,
        } => {
            let list: Vec<(RequestedName<ResourceClass>, Option<Inventory>)> = inventories
                .iter()
                .map(|(c, inv)| (requested(class(*c)), Some(inv.inventory())))
                .collect();
            changes(state.set_inventories(
                &provider_uuid(*slot),
                generation(*slot) + u64::from(*stale),
                &list,
                rule,
                now,
            ))
        }
        Op::AddInventory {
            slot,
            class: c,
            inventory,
        } => changes(state.add_inventory(
            &provider_uuid(*slot),
            &requested(class(*c)),
            inventory.inventory(),
            rule,
            now,
        )),
        Op::UpdateInventory {
            slot,
            class: c,
            inventory,
            stale,
        } => changes(state.update_inventory(
            &provider_uuid(*slot),
            generation(*slot) + u64::from(*stale),
            &requested(class(*c)),
            inventory.inventory(),
            rule,
            now,
        )),
        Op::DeleteInventory { slot, class: c } => {
            changes(state.delete_inventory(&provider_uuid(*slot), &requested(class(*c)), now))
        }
        Op::DeleteInventories(slot) => {
            changes(state.delete_inventories(&provider_uuid(*slot), now))
        }
        Op::Write {
            writes,
            keep_duplicates,
        } => {
            let writes = consumer_writes(state, writes, *keep_duplicates);
            changes(state.plan_allocations(&writes, Endpoint::Put, now))
        }
        Op::Release(c) => changes(state.plan_allocations(&[release(*c)], Endpoint::Put, now)),
        Op::Delete(c) => changes(state.delete_allocations(&consumer_uuid(*c))),
        Op::ShrinkUnder {
            slot,
            class: c,
            below,
        } => {
            let in_use: Vec<(Uuid, &str)> = state
                .providers()
                .flat_map(|p| {
                    p.inventories
                        .keys()
                        .filter(|c| state.usage(p.id(), c) > 0)
                        .map(|c| (p.uuid(), c.as_str()))
                })
                .collect();
            let (uuid, class) = if in_use.is_empty() {
                (provider_uuid(*slot), class(*c))
            } else {
                in_use[*slot as usize % in_use.len()]
            };
            let provider = state.provider_by_uuid(&uuid);
            let used = provider.map_or(0, |p| {
                state.usage(p.id(), &ResourceClass::new_unchecked(class))
            });
            let inventory = InvSpec {
                total: used.saturating_sub(1 + u64::from(*below)),
                reserved: 0,
                min_unit: 1,
                max_unit: i32::MAX as u64,
                step_size: 1,
                allocation_ratio: 1.0,
            };
            changes(state.update_inventory(
                &uuid,
                provider.map_or(0, |p| p.row.generation),
                &requested(class),
                inventory.inventory(),
                rule,
                now,
            ))
        }
        Op::Claim {
            claim,
            consumer,
            amounts,
            expires_in,
        } => changes(
            state.plan_create_claim(
                NewClaim {
                    uuid: claim_uuid(*claim),
                    consumer: consumer_uuid(*consumer),
                    project_id: format!("project-{}", consumer % 3),
                    user_id: format!("user-{}", consumer % 2),
                    consumer_type: (consumer % 2 == 0).then(|| "INSTANCE".to_owned()),
                    tag: Some(format!("tag-{}", claim % 3)),
                    allocations: amounts
                        .iter()
                        .map(|(slot, c, used)| Requested {
                            provider: provider_uuid(*slot).into(),
                            class: requested(class(*c)),
                            used: *used,
                        })
                        .collect(),
                    expires_at: expires_in.map(|n| now + i64::from(n)),
                    server_group: None,
                },
                now,
            ),
        ),
        Op::Confirm { claim, replace } => {
            changes(state.plan_confirm_claim(&claim_uuid(*claim), *replace, now))
        }
        Op::ReleaseClaim(claim) => changes(state.plan_release_claim(&claim_uuid(*claim), now)),
        Op::ReleaseClaims(consumer) => {
            changes(state.plan_release_consumer_claims(&consumer_uuid(*consumer), now))
        }
        Op::Sweep(retention) => changes(state.plan_sweep_claims(now, i64::from(*retention), 1000)),
        Op::Resize { .. } | Op::Move { .. } => {
            let writes = derived_writes(state, op).unwrap();
            changes(state.plan_allocations(&writes, Endpoint::Put, now))
        }
    }
}
