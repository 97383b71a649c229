//! The reference workloads of `shared/BENCHMARKS.md` as pure data: for each shape and
//! number of roots, the exact providers (parents first), inventories, traits,
//! aggregates, the load (consumers and what they hold) and the candidate queries.
//!
//! Every named object gets uuid = UUIDv5([`NAMESPACE`], name), so two servers seeded
//! with the same shape hold the same uuids and answer the same query strings. A shape
//! is cut into *units* (one root with its subtree and its consumers, or one sharing
//! provider), produced one at a time by index so that a million roots never sit in
//! memory at once; units are independent of each other, so seeding can run them in
//! any order and in parallel.

use allot_client::Inventory;
use uuid::Uuid;

/// The namespace of every benchmark uuid.
pub const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);

/// The uuid of a named benchmark object (`cn7`, `rack3`, `inst-7-1`, ...).
pub fn named(name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

/// The flavour started by the mass start and by picks: `small` of the flat shape,
/// without its `limit`.
pub const FLAVOUR: &str =
    "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&required=HW_CPU_X86_AVX2,!COMPUTE_STATUS_DISABLED";

/// Number of racks (aggregates) in `flat`.
const RACKS: usize = 50;
/// Number of shared storage providers in `flat`.
const SHARED: usize = 10;
/// GPUs under each root of `wide`.
const GPUS: usize = 16;

/// A reference workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Compute roots with local resources, racks as aggregates, shared storage.
    Flat,
    /// Roots with two NUMA children, each with an SR-IOV physical function.
    Nested,
    /// Roots with 16 single-VGPU children: many identical devices.
    Wide,
}

/// One provider to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSpec {
    /// Its name (`cn7`, `cn7-numa0`, ...).
    pub name: String,
    /// UUIDv5 of the name.
    pub uuid: Uuid,
    /// The parent's uuid, for a child.
    pub parent: Option<Uuid>,
    /// Inventories by resource class.
    pub inventories: Vec<(&'static str, Inventory)>,
    /// Trait names (standard or custom).
    pub traits: Vec<&'static str>,
    /// Aggregate uuids.
    pub aggregates: Vec<Uuid>,
}

/// One consumer of the load, holding resources on one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSpec {
    /// Its name (`inst-I-K`).
    pub name: String,
    /// UUIDv5 of the name.
    pub uuid: Uuid,
    /// The provider it holds resources on.
    pub provider: Uuid,
    /// Amount by class.
    pub resources: Vec<(&'static str, u64)>,
}

/// A unit of seeding: providers in creation order (parents first), then consumers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Unit {
    /// Providers, parents before children.
    pub providers: Vec<ProviderSpec>,
    /// Consumers, to create after the providers.
    pub consumers: Vec<ConsumerSpec>,
}

/// The project and user every benchmark consumer belongs to.
pub const PROJECT: &str = "p-bench";
/// See [`PROJECT`].
pub const USER: &str = "u-bench";

fn provider(name: String, parent: Option<Uuid>) -> ProviderSpec {
    ProviderSpec {
        uuid: named(&name),
        name,
        parent,
        inventories: Vec::new(),
        traits: Vec::new(),
        aggregates: Vec::new(),
    }
}

fn inv(total: u64, reserved: u64, max_unit: Option<u64>, ratio: Option<f64>) -> Inventory {
    Inventory {
        total,
        reserved: (reserved != 0).then_some(reserved),
        max_unit,
        allocation_ratio: ratio,
    }
}

impl Shape {
    /// The shape's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Flat => "flat",
            Shape::Nested => "nested",
            Shape::Wide => "wide",
        }
    }

    /// Custom traits the shape uses, to create before any provider.
    pub fn custom_traits(self) -> &'static [&'static str] {
        match self {
            Shape::Flat => &["CUSTOM_GOLD"],
            Shape::Nested => &["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"],
            Shape::Wide => &[],
        }
    }

    /// How many units `roots` roots make (roots, plus `flat`'s shared storage).
    pub fn units(self, roots: usize) -> usize {
        match self {
            Shape::Flat => roots + SHARED,
            Shape::Nested | Shape::Wide => roots,
        }
    }

    /// Unit `index` (below [`Shape::units`]): root `index`, or for `flat` past the
    /// roots, shared storage provider `index - roots`.
    pub fn unit(self, roots: usize, index: usize) -> Unit {
        match self {
            Shape::Flat if index >= roots => flat_shared(index - roots),
            Shape::Flat => flat_root(index),
            Shape::Nested => nested_root(index),
            Shape::Wide => wide_root(index),
        }
    }

    /// The shape's queries: (name, query string of `GET /allocation_candidates`).
    pub fn queries(self) -> Vec<(&'static str, String)> {
        match self {
            Shape::Flat => {
                let racks: Vec<String> = (0..5).map(|r| rack(r).to_string()).collect();
                vec![
                    ("small", "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&required=HW_CPU_X86_AVX2,!COMPUTE_STATUS_DISABLED&limit=1000".into()),
                    ("nolimit", "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&required=HW_CPU_X86_AVX2".into()),
                    ("member_of", format!("resources=VCPU:8,MEMORY_MB:16384&member_of=in:{}&limit=50", racks.join(","))),
                    ("gold", "resources=VCPU:2,MEMORY_MB:2048&required=CUSTOM_GOLD&limit=10".into()),
                ]
            }
            Shape::Nested => vec![
                ("numa", "resources=DISK_GB:20&resources1=VCPU:4,MEMORY_MB:8192&resources2=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000&required2=CUSTOM_PHYSNET_A&same_subtree=1,2&group_policy=none&limit=1000".into()),
                ("isolate", "resources1=VCPU:4,MEMORY_MB:8192&resources2=VCPU:4,MEMORY_MB:8192&group_policy=isolate&limit=1000".into()),
            ],
            Shape::Wide => vec![("vgpu4", vgpu_query(4)), ("vgpu8", vgpu_query(8))],
        }
    }
}

/// The uuid of aggregate `rackR`.
pub fn rack(r: usize) -> Uuid {
    named(&format!("rack{r}"))
}

fn vgpu_query(groups: usize) -> String {
    let mut query: Vec<String> = (1..=groups)
        .map(|g| format!("resources{g}=VGPU:1"))
        .collect();
    query.push("group_policy=isolate".into());
    query.push("limit=100".into());
    query.join("&")
}

fn flat_root(i: usize) -> Unit {
    let mut root = provider(format!("cn{i}"), None);
    root.inventories = vec![
        ("VCPU", inv(64, 0, Some(64), Some(4.0))),
        ("MEMORY_MB", inv(262144, 4096, Some(262144), None)),
    ];
    let local_disk = i.is_multiple_of(2);
    if local_disk {
        root.inventories
            .push(("DISK_GB", inv(2000, 50, Some(2000), None)));
    }
    root.traits.push("COMPUTE_VOLUME_MULTI_ATTACH");
    for (applies, name) in [
        (!i.is_multiple_of(5), "HW_CPU_X86_AVX2"),
        (i.is_multiple_of(3), "HW_CPU_X86_AVX512F"),
        (i % 50 == 7, "COMPUTE_STATUS_DISABLED"),
        (i % 10 == 1, "CUSTOM_GOLD"),
    ] {
        if applies {
            root.traits.push(name);
        }
    }
    root.aggregates.push(rack(i % RACKS));
    let consumers = (0..i % 5)
        .map(|k| {
            let name = format!("inst-{i}-{k}");
            let mut resources = vec![("VCPU", 4), ("MEMORY_MB", 8192)];
            if local_disk {
                resources.push(("DISK_GB", 40));
            }
            ConsumerSpec {
                uuid: named(&name),
                name,
                provider: root.uuid,
                resources,
            }
        })
        .collect();
    Unit {
        providers: vec![root],
        consumers,
    }
}

fn flat_shared(s: usize) -> Unit {
    let mut ss = provider(format!("ss{s}"), None);
    ss.inventories = vec![("DISK_GB", inv(500000, 0, Some(10000), None))];
    ss.traits = vec!["MISC_SHARES_VIA_AGGREGATE"];
    ss.aggregates = (5 * s..5 * s + 5).map(rack).collect();
    Unit {
        providers: vec![ss],
        consumers: Vec::new(),
    }
}

fn nested_root(i: usize) -> Unit {
    let mut root = provider(format!("cn{i}"), None);
    root.inventories = vec![("DISK_GB", Inventory::total(2000))];
    if !i.is_multiple_of(5) {
        root.traits.push("HW_CPU_X86_AVX2");
    }
    let mut providers = vec![root];
    for k in 0..2 {
        let root_uuid = providers[0].uuid;
        let mut numa = provider(format!("cn{i}-numa{k}"), Some(root_uuid));
        numa.inventories = vec![
            ("VCPU", inv(32, 0, Some(32), Some(4.0))),
            ("MEMORY_MB", Inventory::total(131072)),
        ];
        numa.traits = vec!["HW_NUMA_ROOT"];
        let mut pf = provider(format!("cn{i}-numa{k}-pf"), Some(numa.uuid));
        pf.inventories = vec![
            ("SRIOV_NET_VF", Inventory::total(64)),
            ("NET_BW_EGR_KILOBIT_PER_SEC", Inventory::total(10_000_000)),
        ];
        pf.traits = vec![
            "HW_NIC_SRIOV",
            if k == 0 {
                "CUSTOM_PHYSNET_A"
            } else {
                "CUSTOM_PHYSNET_B"
            },
        ];
        providers.push(numa);
        providers.push(pf);
    }
    Unit {
        providers,
        consumers: Vec::new(),
    }
}

fn wide_root(i: usize) -> Unit {
    let mut root = provider(format!("cn{i}"), None);
    root.inventories = vec![
        ("VCPU", Inventory::total(64)),
        ("MEMORY_MB", Inventory::total(262144)),
    ];
    let root_uuid = root.uuid;
    let mut providers = vec![root];
    for g in 0..GPUS {
        let mut gpu = provider(format!("cn{i}-gpu{g}"), Some(root_uuid));
        gpu.inventories = vec![("VGPU", Inventory::total(1))];
        providers.push(gpu);
    }
    Unit {
        providers,
        consumers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(shape: Shape, roots: usize) -> Vec<Unit> {
        (0..shape.units(roots))
            .map(|i| shape.unit(roots, i))
            .collect()
    }

    #[test]
    fn uuids_are_v5_over_the_names() {
        // Computed independently: python3 -c 'import uuid; print(uuid.uuid5(
        // uuid.UUID("6f1c0c2e-6b1e-4a59-9a1a-5a0d1c6a2b10"), "cn0"))'
        assert_eq!(named("cn0").to_string(), CN0);
        assert_eq!(named("cn0").get_version_num(), 5);
        assert_eq!(rack(3).to_string(), "3d886c10-e573-5eea-99cb-5922916b8e14");
        let unit = Shape::Flat.unit(3, 0);
        assert_eq!(unit.providers[0].uuid, named("cn0"));
        assert_eq!(Shape::Flat.unit(3, 1).consumers[0].uuid, named("inst-1-0"));
        let nested = Shape::Nested.unit(4, 2);
        let names: Vec<&str> = nested.providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cn2",
                "cn2-numa0",
                "cn2-numa0-pf",
                "cn2-numa1",
                "cn2-numa1-pf"
            ]
        );
        assert_eq!(nested.providers[2].parent, Some(named("cn2-numa0")));
        assert_eq!(nested.providers[1].parent, Some(named("cn2")));
    }

    /// `uuid.uuid5(NAMESPACE, "cn0")` from Python's standard library.
    const CN0: &str = "beb16bfa-d5bf-597b-bc2e-c2a4b5da5634";

    #[test]
    fn flat_counts_follow_the_rules() {
        let units = all(Shape::Flat, 100);
        assert_eq!(units.len(), 110);
        let providers: Vec<&ProviderSpec> = units.iter().flat_map(|u| &u.providers).collect();
        assert_eq!(providers.len(), 110);
        let with = |t: &str| providers.iter().filter(|p| p.traits.contains(&t)).count();
        assert_eq!(with("COMPUTE_VOLUME_MULTI_ATTACH"), 100);
        assert_eq!(with("HW_CPU_X86_AVX2"), 80);
        assert_eq!(with("HW_CPU_X86_AVX512F"), 34);
        assert_eq!(with("COMPUTE_STATUS_DISABLED"), 2);
        assert_eq!(with("CUSTOM_GOLD"), 10);
        assert_eq!(with("MISC_SHARES_VIA_AGGREGATE"), 10);
        let disks = providers
            .iter()
            .filter(|p| p.inventories.iter().any(|(c, _)| *c == "DISK_GB"))
            .count();
        assert_eq!(disks, 50 + 10);
        // I % 5 consumers per root: 20 * (0+1+2+3+4).
        assert_eq!(units.iter().map(|u| u.consumers.len()).sum::<usize>(), 200);
        // cn57 is in rack7; ss1 is in racks 5..9.
        assert_eq!(units[57].providers[0].aggregates, [rack(7)]);
        assert_eq!(
            units[101].providers[0].aggregates,
            (5..10).map(rack).collect::<Vec<_>>()
        );
        // Consumers on roots with local disk hold disk too.
        assert_eq!(
            units[2].consumers[1].resources,
            [("VCPU", 4), ("MEMORY_MB", 8192), ("DISK_GB", 40)]
        );
        assert_eq!(
            units[3].consumers[2].resources,
            [("VCPU", 4), ("MEMORY_MB", 8192)]
        );
    }

    #[test]
    fn nested_and_wide_counts() {
        let nested: Vec<ProviderSpec> = all(Shape::Nested, 10)
            .into_iter()
            .flat_map(|u| u.providers)
            .collect();
        assert_eq!(nested.len(), 50);
        assert_eq!(
            nested
                .iter()
                .filter(|p| p.traits.contains(&"CUSTOM_PHYSNET_A"))
                .count(),
            10
        );
        assert_eq!(
            nested
                .iter()
                .filter(|p| p.traits.contains(&"HW_NUMA_ROOT"))
                .count(),
            20
        );
        let wide: Vec<ProviderSpec> = all(Shape::Wide, 3)
            .into_iter()
            .flat_map(|u| u.providers)
            .collect();
        assert_eq!(wide.len(), 3 * 17);
        assert_eq!(wide.iter().filter(|p| p.parent.is_some()).count(), 48);
        assert_eq!(wide[5].name, "cn0-gpu4");
    }

    #[test]
    fn queries_name_the_right_things() {
        let names = |s: Shape| s.queries().into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            names(Shape::Flat),
            ["small", "nolimit", "member_of", "gold"]
        );
        assert_eq!(names(Shape::Nested), ["numa", "isolate"]);
        assert_eq!(names(Shape::Wide), ["vgpu4", "vgpu8"]);
        let member_of = &Shape::Flat.queries()[2].1;
        assert!(
            member_of.contains(&format!("member_of=in:{},{}", rack(0), rack(1))),
            "{member_of}"
        );
        let vgpu8 = &Shape::Wide.queries()[1].1;
        assert!(
            vgpu8.starts_with("resources1=VGPU:1&resources2=VGPU:1&"),
            "{vgpu8}"
        );
        assert!(
            vgpu8.contains("resources8=VGPU:1&group_policy=isolate&limit=100"),
            "{vgpu8}"
        );
        assert!(!vgpu8.contains("resources9"));
    }
}
