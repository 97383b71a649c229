//! The reference shapes of `shared/BENCHMARKS.md` (`flat`, `wide`, `nested`), built
//! directly in a `State` through the public write rules and `Change`s (no store, no
//! HTTP). Shared by the benchmarks of this crate.

// Each benchmark uses some of the shapes.
#![allow(dead_code)]

use allot_core::model::{Allocation, ConsumerRow, TraitRecord};
use allot_core::ProviderRef;
use allot_core::{Change, Inventory, ProviderId, ResourceClass, State, TraitName, Uuid};

const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);

pub fn uuid(name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

/// Builds a state with the public write rules, applying each plan at once.
struct Builder {
    state: State,
}

impl Builder {
    fn new(custom_traits: &[&str]) -> Self {
        let mut state = State::new();
        for t in custom_traits {
            state.apply(&[Change::PutTrait(TraitRecord {
                name: TraitName::new_unchecked(*t),
                created_at: 0,
            })]);
        }
        Builder { state }
    }

    fn provider(&mut self, name: &str, parent: Option<&str>) -> ProviderId {
        let parent = parent.map(|p| ProviderRef::from(uuid(p)));
        let (info, changes) = self
            .state
            .create_provider(uuid(name), name, parent, 0)
            .expect("a new provider");
        self.state.apply(&changes);
        self.state.provider_by_uuid(&info.uuid).unwrap().id()
    }

    fn inventories(&mut self, id: ProviderId, list: &[(&str, Inventory)]) {
        let list = list
            .iter()
            .map(|(c, i)| (ResourceClass::new_unchecked(*c), *i))
            .collect();
        self.state.apply(&[Change::SetInventories(id, list)]);
    }

    fn traits(&mut self, id: ProviderId, traits: &[&str]) {
        let traits = traits
            .iter()
            .map(|t| TraitName::new_unchecked(*t))
            .collect();
        self.state.apply(&[Change::SetTraits(id, traits)]);
    }

    fn aggregates(&mut self, id: ProviderId, aggs: &[Uuid]) {
        self.state
            .apply(&[Change::SetAggregates(id, aggs.to_vec())]);
    }

    fn allocate(&mut self, name: &str, id: ProviderId, resources: &[(&str, u64)]) {
        let consumer = uuid(name);
        let row = ConsumerRow {
            uuid: consumer,
            project_id: "p-bench".into(),
            user_id: "u-bench".into(),
            consumer_type: None,
            generation: 0,
            created_at: 0,
            updated_at: 0,
        };
        let allocations = resources
            .iter()
            .map(|(c, used)| Allocation {
                provider: id,
                class: ResourceClass::new_unchecked(*c),
                used: *used,
            })
            .collect();
        self.state.apply(&[
            Change::PutConsumer {
                row,
                previous_generation: None,
            },
            Change::SetAllocations(consumer, allocations),
        ]);
    }
}

fn inv(total: u64, reserved: u64, max_unit: u64, ratio: f64) -> Inventory {
    Inventory {
        total,
        reserved,
        min_unit: 1,
        max_unit,
        step_size: std::num::NonZeroU64::MIN,
        allocation_ratio: ratio,
    }
}

/// The name of root `i` of every shape (its uuid is [`uuid`] of the name).
pub fn root_name(i: usize) -> String {
    format!("cn{i}")
}

/// `flat`: N compute roots, ten sharing disk providers, some load.
pub fn flat(n: usize) -> State {
    flat_in_phases(n, &mut |_, _| {})
}

/// The phases [`flat_in_phases`] builds in, in order: what each adds to the state.
pub const FLAT_PHASES: [&str; 5] = [
    "providers",
    "inventories",
    "traits",
    "aggregates",
    "consumers and allocations",
];

/// Builds `flat` one kind of record at a time (every provider, then every inventory,
/// ...), calling `after(phase, state)` when each phase of [`FLAT_PHASES`] is done, so
/// that what each kind of record costs can be measured. The state is the one
/// [`flat`] returns.
pub fn flat_in_phases(n: usize, after: &mut dyn FnMut(&str, &State)) -> State {
    let mut b = Builder::new(&["CUSTOM_GOLD"]);
    let rack = |r: usize| uuid(&format!("rack{r}"));
    let mut ids: Vec<ProviderId> = (0..n).map(|i| b.provider(&root_name(i), None)).collect();
    ids.extend((0..10).map(|s| b.provider(&format!("ss{s}"), None)));
    after(FLAT_PHASES[0], &b.state);
    for (i, &id) in ids.iter().enumerate().take(n) {
        let mut invs = vec![
            ("VCPU", inv(64, 0, 64, 4.0)),
            ("MEMORY_MB", inv(262_144, 4096, 262_144, 1.0)),
        ];
        if i % 2 == 0 {
            invs.push(("DISK_GB", inv(2000, 50, 2000, 1.0)));
        }
        b.inventories(id, &invs);
    }
    for &id in &ids[n..] {
        b.inventories(id, &[("DISK_GB", inv(500_000, 0, 10_000, 1.0))]);
    }
    after(FLAT_PHASES[1], &b.state);
    for (i, &id) in ids.iter().enumerate().take(n) {
        let mut traits = vec!["COMPUTE_VOLUME_MULTI_ATTACH"];
        if i % 5 != 0 {
            traits.push("HW_CPU_X86_AVX2");
        }
        if i % 3 == 0 {
            traits.push("HW_CPU_X86_AVX512F");
        }
        if i % 50 == 7 {
            traits.push("COMPUTE_STATUS_DISABLED");
        }
        if i % 10 == 1 {
            traits.push("CUSTOM_GOLD");
        }
        b.traits(id, &traits);
    }
    for &id in &ids[n..] {
        b.traits(id, &["MISC_SHARES_VIA_AGGREGATE"]);
    }
    after(FLAT_PHASES[2], &b.state);
    for (i, &id) in ids.iter().enumerate().take(n) {
        b.aggregates(id, &[rack(i % 50)]);
    }
    for (s, &id) in ids[n..].iter().enumerate() {
        let aggs: Vec<Uuid> = (5 * s..5 * s + 5).map(rack).collect();
        b.aggregates(id, &aggs);
    }
    after(FLAT_PHASES[3], &b.state);
    for (i, &id) in ids.iter().enumerate().take(n) {
        for k in 0..i % 5 {
            let mut used = vec![("VCPU", 4), ("MEMORY_MB", 8192)];
            if i % 2 == 0 {
                used.push(("DISK_GB", 40));
            }
            b.allocate(&format!("inst-{i}-{k}"), id, &used);
        }
    }
    after(FLAT_PHASES[4], &b.state);
    b.state
}

/// `wide`: N roots with sixteen one-VGPU children each.
pub fn wide(n: usize) -> State {
    let mut b = Builder::new(&[]);
    for i in 0..n {
        let root = root_name(i);
        let id = b.provider(&root, None);
        b.inventories(
            id,
            &[
                ("VCPU", Inventory::with_total(64)),
                ("MEMORY_MB", Inventory::with_total(262_144)),
            ],
        );
        for g in 0..16 {
            let child = b.provider(&format!("{root}-gpu{g}"), Some(&root));
            b.inventories(child, &[("VGPU", Inventory::with_total(1))]);
        }
    }
    b.state
}

/// `nested`: N roots with two NUMA children, each with one NIC.
pub fn nested(n: usize) -> State {
    let mut b = Builder::new(&["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"]);
    for i in 0..n {
        let root = root_name(i);
        let id = b.provider(&root, None);
        b.inventories(id, &[("DISK_GB", Inventory::with_total(2000))]);
        if i % 5 != 0 {
            b.traits(id, &["HW_CPU_X86_AVX2"]);
        }
        for k in 0..2 {
            let numa = format!("{root}-numa{k}");
            let nid = b.provider(&numa, Some(&root));
            b.inventories(
                nid,
                &[
                    ("VCPU", inv(32, 0, 32, 4.0)),
                    ("MEMORY_MB", Inventory::with_total(131_072)),
                ],
            );
            b.traits(nid, &["HW_NUMA_ROOT"]);
            let pf = b.provider(&format!("{numa}-pf"), Some(&numa));
            b.inventories(
                pf,
                &[
                    ("SRIOV_NET_VF", Inventory::with_total(64)),
                    (
                        "NET_BW_EGR_KILOBIT_PER_SEC",
                        Inventory::with_total(10_000_000),
                    ),
                ],
            );
            let physnet = if k == 0 {
                "CUSTOM_PHYSNET_A"
            } else {
                "CUSTOM_PHYSNET_B"
            };
            b.traits(pf, &["HW_NIC_SRIOV", physnet]);
        }
    }
    b.state
}
