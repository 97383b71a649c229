//! Benchmarks of the allocation candidate search on the reference shapes of
//! `shared/BENCHMARKS.md` (`flat`, `wide`, `nested`), built directly in a `State`
//! through `Change`s (no store, no HTTP): the search alone.
//!
//! Run: `cargo bench -p allot-core --bench candidates` (a filter such as `wide/` picks
//! some). `ALLOT_BENCH_FLAT_ROOTS` changes the size of `flat` (default 10,000).

// criterion's macros define undocumented items.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

use allot_core::candidates::{CandidateQuery, RequestGroup, SearchOptions};
use allot_core::model::{Allocation, ConsumerRow, TraitRecord};
use allot_core::ProviderRef;
use allot_core::{Change, Inventory, ProviderId, ResourceClass, State, TraitName, Uuid};

const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);

fn uuid(name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

/// Builds a state with the public write rules, applying each plan at once.
struct Builder {
    state: State,
    consumers: u64,
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
        Builder {
            state,
            consumers: 0,
        }
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
        self.consumers += 1;
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
        step_size: 1,
        allocation_ratio: ratio,
    }
}

/// `flat`: N compute roots, ten sharing disk providers, some load.
fn flat(n: usize) -> State {
    let mut b = Builder::new(&["CUSTOM_GOLD"]);
    let rack = |r: usize| uuid(&format!("rack{r}"));
    for i in 0..n {
        let name = format!("cn{i}");
        let id = b.provider(&name, None);
        let mut invs = vec![
            ("VCPU", inv(64, 0, 64, 4.0)),
            ("MEMORY_MB", inv(262_144, 4096, 262_144, 1.0)),
        ];
        let disk = i % 2 == 0;
        if disk {
            invs.push(("DISK_GB", inv(2000, 50, 2000, 1.0)));
        }
        b.inventories(id, &invs);
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
        b.aggregates(id, &[rack(i % 50)]);
        for k in 0..i % 5 {
            let mut used = vec![("VCPU", 4), ("MEMORY_MB", 8192)];
            if disk {
                used.push(("DISK_GB", 40));
            }
            b.allocate(&format!("inst-{i}-{k}"), id, &used);
        }
    }
    for s in 0..10 {
        let id = b.provider(&format!("ss{s}"), None);
        b.inventories(id, &[("DISK_GB", inv(500_000, 0, 10_000, 1.0))]);
        b.traits(id, &["MISC_SHARES_VIA_AGGREGATE"]);
        let aggs: Vec<Uuid> = (5 * s..5 * s + 5).map(rack).collect();
        b.aggregates(id, &aggs);
    }
    b.state
}

/// `wide`: N roots with sixteen one-VGPU children each.
fn wide(n: usize) -> State {
    let mut b = Builder::new(&[]);
    for i in 0..n {
        let root = format!("cn{i}");
        let id = b.provider(&root, None);
        b.inventories(
            id,
            &[
                ("VCPU", Inventory::with_total(64)),
                ("MEMORY_MB", Inventory::with_total(262_144)),
            ],
        );
        for g in 0..16 {
            let child = b.provider(&format!("cn{i}-gpu{g}"), Some(&root));
            b.inventories(child, &[("VGPU", Inventory::with_total(1))]);
        }
    }
    b.state
}

/// `nested`: N roots with two NUMA children, each with one NIC.
fn nested(n: usize) -> State {
    let mut b = Builder::new(&["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"]);
    for i in 0..n {
        let root = format!("cn{i}");
        let id = b.provider(&root, None);
        b.inventories(id, &[("DISK_GB", Inventory::with_total(2000))]);
        if i % 5 != 0 {
            b.traits(id, &["HW_CPU_X86_AVX2"]);
        }
        for k in 0..2 {
            let numa = format!("cn{i}-numa{k}");
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

fn group(suffix: &str, resources: &[(&str, u64)]) -> RequestGroup {
    RequestGroup {
        suffix: suffix.into(),
        resources: resources
            .iter()
            .map(|(c, a)| (ResourceClass::requested(c), *a))
            .collect(),
        ..Default::default()
    }
}

fn query(groups: Vec<RequestGroup>, limit: Option<usize>) -> CandidateQuery {
    CandidateQuery {
        groups,
        limit,
        nested_aware: true,
        ..Default::default()
    }
}

fn flat_queries() -> Vec<(&'static str, CandidateQuery)> {
    let mut small = group("", &[("VCPU", 2), ("MEMORY_MB", 4096), ("DISK_GB", 40)]);
    small.required = vec![vec![TraitName::requested("HW_CPU_X86_AVX2")]];
    small.forbidden = vec![TraitName::requested("COMPUTE_STATUS_DISABLED")];
    let mut nolimit = group("", &[("VCPU", 2), ("MEMORY_MB", 4096), ("DISK_GB", 40)]);
    nolimit.required = vec![vec![TraitName::requested("HW_CPU_X86_AVX2")]];
    let mut member_of = group("", &[("VCPU", 8), ("MEMORY_MB", 16384)]);
    member_of.member_of = vec![(0..5).map(|r| uuid(&format!("rack{r}"))).collect()];
    let mut gold = group("", &[("VCPU", 2), ("MEMORY_MB", 2048)]);
    gold.required = vec![vec![TraitName::requested("CUSTOM_GOLD")]];
    vec![
        ("small", query(vec![small], Some(1000))),
        ("nolimit", query(vec![nolimit], None)),
        ("member_of", query(vec![member_of], Some(50))),
        ("gold", query(vec![gold], Some(10))),
    ]
}

fn vgpu(n: usize) -> CandidateQuery {
    let groups = (1..=n)
        .map(|i| group(&i.to_string(), &[("VGPU", 1)]))
        .collect();
    let mut q = query(groups, Some(100));
    q.isolate = true;
    q
}

fn nested_queries() -> Vec<(&'static str, CandidateQuery)> {
    let mut port = group(
        "2",
        &[("SRIOV_NET_VF", 1), ("NET_BW_EGR_KILOBIT_PER_SEC", 1000)],
    );
    port.required = vec![vec![TraitName::requested("CUSTOM_PHYSNET_A")]];
    let mut numa = query(
        vec![
            group("", &[("DISK_GB", 20)]),
            group("1", &[("VCPU", 4), ("MEMORY_MB", 8192)]),
            port,
        ],
        Some(1000),
    );
    numa.same_subtrees = vec![vec!["1".into(), "2".into()]];
    let mut isolate = query(
        vec![
            group("1", &[("VCPU", 4), ("MEMORY_MB", 8192)]),
            group("2", &[("VCPU", 4), ("MEMORY_MB", 8192)]),
        ],
        Some(1000),
    );
    isolate.isolate = true;
    vec![("numa", numa), ("isolate", isolate)]
}

fn bench(c: &mut Criterion, shape: &str, state: &State, queries: &[(&str, CandidateQuery)]) {
    let options = SearchOptions::default();
    let mut g = c.benchmark_group(shape);
    for (name, q) in queries {
        let found = state.allocation_candidates(q, &options).unwrap();
        eprintln!(
            "{shape}/{name}: {} candidates, {} summaries",
            found.requests.len(),
            found.summaries.len()
        );
        g.bench_with_input(BenchmarkId::from_parameter(name), q, |bench, q| {
            bench.iter(|| black_box(state.allocation_candidates(q, &options).unwrap()))
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let roots: usize = std::env::var("ALLOT_BENCH_FLAT_ROOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let state = wide(50);
    bench(c, "wide", &state, &[("vgpu4", vgpu(4)), ("vgpu8", vgpu(8))]);
    let state = flat(roots);
    bench(c, &format!("flat{roots}"), &state, &flat_queries());
    let state = nested(2000);
    bench(c, "nested", &state, &nested_queries());
}

criterion_group! {
    name = candidates;
    config = Criterion::default().sample_size(20);
    targets = benches
}
criterion_main!(candidates);
