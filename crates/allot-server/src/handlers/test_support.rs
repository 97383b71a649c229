//! What the tests of several handlers share: a world of providers and consumers
//! written through the core's rules, to hold the hand-written bodies to their oracles.

use allot_core::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use allot_core::{Change, Inventory, ProviderRef, ResourceClass, State as View, Timestamp, Uuid};

/// Projects and users of the test world, some needing escapes.
pub const PROJECTS: [&str; 3] = ["p1", "p\"2\\", "p\u{1}ü"];
pub const USERS: [&str; 2] = ["u1", "u\t2"];
const CLASSES: [&str; 5] = ["VCPU", "MEMORY_MB", "DISK_GB", "VGPU", "SRIOV_NET_VF"];

/// A view of `providers` providers (uuids in an order unlike their creation
/// order, one of them with no inventory) and `consumers` consumers, each written
/// through the allocation rule with random amounts of random classes on one to
/// three providers, random owners and types (or none); some are written twice and
/// some deleted again. Returns the view and every consumer uuid ever written.
pub fn world(seed: u64, providers: u128, consumers: u128) -> (View, Vec<Uuid>) {
    let mut x = seed | 1;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut view = View::new();
    let mut ids = Vec::new();
    for n in 0..providers {
        let uuid = Uuid::from_u128(((n * 7) % providers + 1) << 64 | n);
        let (_, c) = view
            .create_provider(uuid, &format!("rp{n}"), None, 0)
            .unwrap();
        view.apply(&c);
        let id = view.provider_by_uuid(&uuid).unwrap().id();
        // The last provider has no inventory: nothing is ever allocated there.
        if n + 1 < providers {
            let inventories = CLASSES
                .iter()
                .map(|c| {
                    (
                        ResourceClass::new_unchecked(c),
                        Inventory::with_total(1 << 40),
                    )
                })
                .collect();
            view.apply(&[Change::SetInventories(id, inventories)]);
        }
        ids.push(uuid);
    }
    let stocked = &ids[..ids.len() - 1];
    let mut written = Vec::new();
    for n in 0..consumers {
        let consumer = Uuid::from_u128(((n * 13) % consumers + 1) << 96 | n);
        written.push(consumer);
        for _ in 0..1 + usize::from(next(4) == 0) {
            let mut allocations = Vec::new();
            for _ in 0..1 + next(3) {
                let provider = stocked[next(stocked.len())];
                for _ in 0..1 + next(3) {
                    allocations.push(Requested {
                        provider: ProviderRef::from(provider),
                        class: ResourceClass::requested(CLASSES[next(CLASSES.len())]),
                        used: 1 + next(1000) as u64,
                    });
                }
            }
            let types = [None, Some("INSTANCE"), Some("MIGRATION")];
            let write = ConsumerWrite {
                consumer,
                project_id: PROJECTS[next(PROJECTS.len())].to_owned(),
                user_id: USERS[next(USERS.len())].to_owned(),
                consumer_type: types[next(types.len())].map(str::to_owned),
                generation: ConsumerGeneration::Unchecked,
                allocations,
            };
            let now = 1000 + next(1000) as Timestamp;
            let (_, changes) = view.plan_allocations(&[write], Endpoint::Put, now).unwrap();
            view.apply(&changes);
        }
        if next(10) == 0 {
            let (_, changes) = view.delete_allocations(&consumer).unwrap();
            view.apply(&changes);
        }
    }
    (view, written)
}

/// Written bytes are the oracle's, as text and as a tree.
pub fn same(bytes: Vec<u8>, oracle: &impl serde::Serialize, what: &str) {
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(text, serde_json::to_string(oracle).unwrap(), "{what}");
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed, serde_json::to_value(oracle).unwrap(), "{what}");
}
