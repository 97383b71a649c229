//! Benchmarks of the allocation candidate search on the reference shapes of
//! `shared/BENCHMARKS.md` (`flat`, `wide`, `nested`), built directly in a `State`
//! through `Change`s (no store, no HTTP): the search alone.
//!
//! Run: `cargo bench -p allot-core --bench candidates` (a filter such as `wide/` picks
//! some). `ALLOT_BENCH_FLAT_ROOTS` changes the size of `flat` (default 10,000).
//! `flat…/headroom-small` is `GET /headroom`'s count of the `small` shape.

// criterion's macros define undocumented items.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

use allot_core::candidates::{CandidateQuery, RequestGroup, SearchOptions};
use allot_core::{ResourceClass, State, TraitName};

mod shapes;
use shapes::{flat, nested, uuid, wide};

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

/// `GET /headroom`'s count of `small` (the query's limit aside).
fn bench_headroom(c: &mut Criterion, shape: &str, state: &State, q: &CandidateQuery) {
    let options = SearchOptions::default();
    let count = state.headroom(q, &options).unwrap();
    eprintln!("{shape}/headroom-small: {} instances", count.total);
    c.bench_function(&format!("{shape}/headroom-small"), |bench| {
        bench.iter(|| black_box(state.headroom(q, &options).unwrap()))
    });
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
    bench_headroom(c, &format!("flat{roots}"), &state, &flat_queries()[0].1);
    let state = nested(2000);
    bench(c, "nested", &state, &nested_queries());
}

criterion_group! {
    name = candidates;
    config = Criterion::default().sample_size(20);
    targets = benches
}
criterion_main!(candidates);
