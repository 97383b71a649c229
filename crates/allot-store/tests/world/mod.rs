//! A deployment with something of every kind, as changes, and everything a view of
//! it holds keyed by uuid: for the tests that take a view through something (a
//! dump, a saved view) and check that it comes back the same.

#![allow(dead_code)]

use allot_core::{
    Allocation, Change, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
    Inventory, ProviderId, ProviderRow, ResourceClass, State, Text, TraitName, TraitRecord, Uuid,
};

use allot_core::drains::{Drain, DrainClaim, DrainState};
use allot_core::server_groups::{Policy, Scope, ServerGroup};

pub const AGG: Uuid = Uuid::from_u128(0xa66);

pub fn uuid(id: u64) -> Uuid {
    Uuid::from_u128(0x1000 + id as u128)
}

pub fn put(id: u64, parent: Option<u64>, root: u64, name: &str, generation: u64) -> Change {
    Change::PutProvider {
        row: ProviderRow {
            id: ProviderId(id),
            uuid: uuid(id),
            name: name.into(),
            generation,
            parent: parent.map(ProviderId),
            root: ProviderId(root),
            created_at: 100 + id as i64,
            updated_at: 200 + id as i64,
        },
        previous_generation: None,
    }
}

/// `put` as an update of a provider at generation `previous` (a create twice is
/// refused as stale).
pub fn update(put: Change, previous: u64) -> Change {
    match put {
        Change::PutProvider { row, .. } => Change::PutProvider {
            row,
            previous_generation: Some(previous),
        },
        other => other,
    }
}

pub fn inv(total: u64, ratio: f64) -> Inventory {
    Inventory {
        allocation_ratio: ratio,
        ..Inventory::with_total(total)
    }
}

pub fn rc(name: &str) -> ResourceClass {
    ResourceClass::new_unchecked(name)
}

pub fn alloc(provider: u64, class: &str, used: u64) -> Allocation {
    Allocation {
        provider: ProviderId(provider),
        class: rc(class),
        used,
    }
}

pub fn consumer(n: u128, project: &str, consumer_type: Option<&str>, generation: u64) -> Change {
    Change::PutConsumer {
        row: ConsumerRow {
            uuid: Uuid::from_u128(n),
            project_id: project.into(),
            user_id: "user-1".into(),
            consumer_type: consumer_type.map(Text::from),
            generation,
            created_at: 300,
            updated_at: 301,
        },
        previous_generation: None,
    }
}

pub fn claim(n: u128, state: ClaimState, provider: Uuid, expires_at: Option<i64>) -> Change {
    Change::PutClaim(Box::new(Claim {
        uuid: Uuid::from_u128(0xc1a1_0000 + n),
        consumer: Uuid::from_u128(0xf00 + n),
        project_id: "project-c".into(),
        user_id: "user-c".into(),
        consumer_type: n.is_multiple_of(2).then(|| Text::from("INSTANCE")),
        tag: n.is_multiple_of(3).then(|| Text::from("boot ☃")),
        allocations: vec![ClaimAmount {
            provider,
            class: rc("VCPU"),
            amount: 1,
        }]
        .into_boxed_slice(),
        state,
        created_at: 400,
        expires_at,
        ended_at: (state != ClaimState::Pending).then_some(450),
    }))
}

/// A deployment with something of every kind: two nested trees (one re-parented under
/// a provider created after it), a gap in the ids, a sharing provider in an aggregate,
/// custom classes with and without metadata, custom traits, consumers with and without
/// types, allocations (one over capacity after an allocation ratio was lowered), and
/// claims in every state (an ended one on a provider deleted since).
pub fn world() -> Vec<Change> {
    let mut c = vec![
        Change::PutClass {
            record: ClassRecord {
                name: rc("CUSTOM_GPU"),
                created_at: 10,
                updated_at: 11,
            },
            old_name: None,
        },
        Change::SetClassMetadata(
            rc("CUSTOM_GPU"),
            Some(ClassMetadata {
                units: Some("count".into()),
                display_name: Some("GPU slices ☃".into()),
                description: None,
            }),
        ),
        Change::PutClass {
            record: ClassRecord {
                name: rc("CUSTOM_BARE"),
                created_at: 12,
                updated_at: 12,
            },
            old_name: None,
        },
        Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked("CUSTOM_FAST"),
            created_at: 13,
        }),
        Change::PutTrait(TraitRecord {
            name: TraitName::new_unchecked("CUSTOM_UNUSED"),
            created_at: 14,
        }),
        put(1, None, 1, "cn1", 3),
        put(2, None, 2, "cn2", 1),
        put(3, Some(1), 1, "numa1_0", 2),
        put(4, Some(1), 1, "numa1_1", 1),
        put(5, None, 5, "doomed", 0),
        put(6, Some(3), 1, "pf1_0", 1),
        put(7, None, 7, "rack", 0),
        put(8, Some(2), 2, "numa2_0", 1),
        put(9, None, 9, "ss", 2),
        // cn2 moves under the rack, created after it (1.37): its subtree follows.
        update(put(2, Some(7), 7, "cn2", 2), 1),
        update(put(8, Some(2), 7, "numa2_0", 1), 1),
        Change::DeleteProvider(ProviderId(5)),
        Change::SetInventories(
            ProviderId(1),
            vec![
                (rc("VCPU"), inv(24, 16.0)),
                (
                    rc("MEMORY_MB"),
                    Inventory {
                        min_unit: 256,
                        step_size: std::num::NonZeroU64::new(256).unwrap(),
                        max_unit: 65536,
                        ..inv(131072, 1.5)
                    },
                ),
            ],
        ),
        Change::SetInventories(ProviderId(3), vec![(rc("VCPU"), inv(4, 1.0))]),
        Change::SetInventories(
            ProviderId(4),
            vec![(rc("CUSTOM_GPU"), inv(30, 0.1)), (rc("VCPU"), inv(4, 1.0))],
        ),
        Change::SetInventories(ProviderId(6), vec![(rc("SRIOV_NET_VF"), inv(8, 1.0))]),
        Change::SetInventories(
            ProviderId(8),
            vec![(rc("VCPU"), inv(8, 0.30000000000000004))],
        ),
        Change::SetInventories(
            ProviderId(9),
            vec![(
                rc("DISK_GB"),
                Inventory {
                    reserved: 100,
                    ..inv(2000, 1.0)
                },
            )],
        ),
        Change::SetTraits(
            ProviderId(1),
            vec![
                TraitName::new_unchecked("HW_CPU_X86_SSE"),
                TraitName::new_unchecked("CUSTOM_FAST"),
            ],
        ),
        Change::SetTraits(
            ProviderId(9),
            vec![TraitName::new_unchecked("MISC_SHARES_VIA_AGGREGATE")],
        ),
        Change::SetAggregates(ProviderId(1), vec![AGG, Uuid::from_u128(0xb66)]),
        Change::SetAggregates(ProviderId(9), vec![AGG]),
        consumer(1, "project-a", Some("INSTANCE"), 1),
        Change::SetAllocations(
            Uuid::from_u128(1),
            vec![
                alloc(1, "VCPU", 2),
                alloc(1, "MEMORY_MB", 512),
                alloc(9, "DISK_GB", 10),
            ],
        ),
        consumer(2, "project-a", None, 3),
        Change::SetAllocations(
            Uuid::from_u128(2),
            vec![
                alloc(3, "VCPU", 3),
                alloc(6, "SRIOV_NET_VF", 2),
                alloc(4, "CUSTOM_GPU", 1),
            ],
        ),
        // numa1_0 holds 3 + 3 VCPU of 4: its total was lowered under the allocations.
        consumer(3, "project-b", Some("MIGRATION"), 1),
        Change::SetAllocations(Uuid::from_u128(3), vec![alloc(3, "VCPU", 3)]),
        consumer(4, "project-b", None, 0),
        consumer(5, "project-b", None, 1),
        Change::SetAllocations(Uuid::from_u128(5), vec![alloc(8, "VCPU", 1)]),
    ];
    c.push(claim(1, ClaimState::Pending, uuid(4), Some(1_000_000)));
    c.push(claim(2, ClaimState::Pending, uuid(8), None));
    c.push(claim(3, ClaimState::Confirmed, uuid(1), Some(500)));
    c.push(claim(4, ClaimState::Released, uuid(9), Some(500)));
    c.push(claim(5, ClaimState::Expired, uuid(5), Some(440)));
    // Server groups: one whose members hold allocations and a pending claim, one
    // scoped by rack traits with a member that holds nothing.
    c.push(group(
        1,
        Policy::AntiAffinity,
        2,
        Scope::Root,
        vec![1, 2, 0xf01],
    ));
    c.push(group(
        2,
        Policy::SoftAffinity,
        1,
        Scope::parse("trait:CUSTOM_RACK_").unwrap(),
        vec![4],
    ));
    // A drain, confirmed (an open one would keep its root from the tests' claims).
    c.push(Change::PutDrain(Box::new(Drain {
        uuid: Uuid::from_u128(0xd1a1),
        roots: vec![uuid(7)],
        disabled: vec![uuid(7)],
        claims: vec![DrainClaim {
            consumer: Uuid::from_u128(0xf01),
            claim: Uuid::from_u128(0xc1a1_0001),
        }],
        state: DrainState::Confirmed,
        created_at: 700,
        ended_at: Some(701),
    })));
    // Two named shapes, one of them with a name a URL must escape.
    for (name, request) in [
        ("m1.small", "resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20"),
        (
            "GPU large (ü)",
            "resources=VCPU:8&resources1=CUSTOM_GPU:1&group_policy=none",
        ),
    ] {
        c.push(Change::PutShape(Box::new(allot_core::shapes::Shape {
            name: allot_core::shapes::ShapeName::parse(name).unwrap(),
            request: request.into(),
            created_at: 800,
            updated_at: 801,
        })));
    }
    c
}

pub fn group(n: u128, policy: Policy, max: u32, scope: Scope, members: Vec<u128>) -> Change {
    let mut members: Vec<Uuid> = members.into_iter().map(Uuid::from_u128).collect();
    members.sort_unstable();
    Change::PutServerGroup(Box::new(ServerGroup {
        uuid: Uuid::from_u128(0x6000 + n),
        name: format!("group ☃ {n}"),
        project_id: "project-a".into(),
        user_id: "user-1".into(),
        policy,
        max_per_domain: max,
        scope,
        enforce_on_allocations: n == 1,
        members,
        created_at: 500 + n as i64,
        updated_at: 600 + n as i64,
    }))
}

/// A provider as an import must give it back, keyed by uuid (ids differ).
#[derive(Debug, PartialEq)]
pub struct ProviderView {
    pub uuid: Uuid,
    pub name: String,
    pub generation: u64,
    pub parent: Option<Uuid>,
    pub root: Uuid,
    pub created_at: i64,
    pub updated_at: i64,
    pub inventories: Vec<(String, Inventory)>,
    pub traits: Vec<String>,
    pub aggregates: Vec<Uuid>,
    pub children: Vec<Uuid>,
    pub usage: Vec<(String, u64)>,
    pub consumers: Vec<Uuid>,
    pub pending: Vec<(Uuid, String, u64)>,
    pub sharing: bool,
}

/// One allocation, keyed by the provider's uuid.
pub type Held = (Uuid, String, u64);

/// Everything a state holds, keyed by uuid, in listing order where there is one.
#[derive(Debug, PartialEq)]
pub struct Everything {
    pub providers: Vec<ProviderView>,
    pub classes: Vec<(ClassRecord, Option<ClassMetadata>)>,
    pub traits: Vec<TraitRecord>,
    pub consumers: Vec<(ConsumerRow, Vec<Held>)>,
    pub claims: Vec<Claim>,
    pub server_groups: Vec<ServerGroup>,
    pub drains: Vec<Drain>,
    pub shapes: Vec<allot_core::shapes::Shape>,
    /// Each member's groups, by the view's index.
    pub memberships: Vec<(Uuid, Vec<Uuid>)>,
}

pub fn everything(s: &State) -> Everything {
    let providers = s
        .providers()
        .map(|p| ProviderView {
            uuid: p.uuid(),
            name: p.row.name.clone(),
            generation: p.row.generation,
            parent: p.row.parent.map(|id| s.uuid_of(id)),
            root: s.uuid_of(p.row.root),
            created_at: p.row.created_at,
            updated_at: p.row.updated_at,
            inventories: p
                .inventories
                .iter()
                .map(|(c, i)| (c.to_string(), *i))
                .collect(),
            traits: p.traits.iter().map(|t| t.to_string()).collect(),
            aggregates: p.aggregates.iter().copied().collect(),
            children: p.children.iter().map(|&c| s.uuid_of(c)).collect(),
            usage: p
                .usage
                .by_class
                .iter()
                .map(|(c, u)| (c.to_string(), *u))
                .collect(),
            consumers: p.usage.consumers.iter().copied().collect(),
            pending: p
                .pending
                .iter()
                .map(|a| (a.claim, a.class.to_string(), a.amount))
                .collect(),
            sharing: s.sharing_providers().any(|q| q.uuid() == p.uuid()),
        })
        .collect();
    let mut consumers: Vec<_> = s
        .consumers()
        .map(|c| {
            let allocations = c
                .allocations
                .iter()
                .map(|a| (s.uuid_of(a.provider), a.class.to_string(), a.used))
                .collect();
            (c.row.clone(), allocations)
        })
        .collect();
    consumers.sort_by_key(|(row, _)| row.uuid);
    let mut claims: Vec<_> = s.claims().cloned().collect();
    claims.sort_by_key(|c| c.uuid);
    let mut groups: Vec<ServerGroup> = s.server_groups().cloned().collect();
    groups.sort_by_key(|g| g.uuid);
    assert!(
        s.check_usage_index(),
        "the view's indexes agree with its records"
    );
    Everything {
        providers,
        classes: s
            .custom_classes()
            .map(|c| (c.clone(), s.class_metadata(&c.name)))
            .collect(),
        traits: s.custom_traits().cloned().collect(),
        consumers,
        memberships: {
            let mut members: Vec<Uuid> = groups.iter().flat_map(|g| g.members.clone()).collect();
            members.sort_unstable();
            members.dedup();
            members
                .into_iter()
                .map(|m| (m, s.groups_of(&m).to_vec()))
                .collect()
        },
        claims,
        server_groups: groups,
        drains: s.drains().cloned().collect(),
        shapes: s.shapes().cloned().collect(),
    }
}
