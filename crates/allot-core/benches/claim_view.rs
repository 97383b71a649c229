//! The view's share of a claim storm, without the store or HTTP: per claim, what the
//! writer's `plan` and `free` phases cost (`allot_writer_busy_seconds_total`, see
//! docs/operations.md), on the `flat` shape of `shared/BENCHMARKS.md` at several
//! sizes (issue 25). Each batch clones the published version, plans and applies
//! `BATCH` one-unit claims of new consumers on roots picked at random (as
//! `allot bench claims --mode storm` makes them), publishes the result and drops the
//! version it replaced: the pieces the batch copied are freed then. A run is
//! `BATCHES` batches from the built state (about the claims of a 10-second storm), and
//! each size is run three times.
//!
//! Through HTTP and SQLite, these phases vary by 15% from run to run on a shared
//! machine; here nothing else runs beside them, so a change to the persistent
//! collections (`persistent.rs`) can be measured in isolation.
//!
//! Run: `cargo bench -p allot-core --bench claim_view`. `ALLOT_BENCH_CLAIM_ROOTS`
//! (default `10000,100000`) lists the sizes; a million roots needs about 2 GiB.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use allot_core::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use allot_core::{ResourceClass, State, Uuid};

mod shapes;

// What the server allocates with (crates/allot), built with the same defaults
// (`.cargo/config.toml`: huge pages): copies and frees are much of what is measured
// here. `_RJEM_MALLOC_CONF=thp:default,metadata_thp:disabled` measures without
// the huge pages.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Claims per batch: about what the writer gathers under a 64-client storm.
const BATCH: usize = 32;
/// Batches per run.
const BATCHES: usize = 2_000;

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let sizes: Vec<usize> = std::env::var("ALLOT_BENCH_CLAIM_ROOTS")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("ALLOT_BENCH_CLAIM_ROOTS: a list of numbers")
        })
        .collect();
    let vcpu = ResourceClass::requested("VCPU");
    println!("flat roots  run  plan µs/claim  free µs/claim  sum");
    for roots in sizes {
        let built = Arc::new(shapes::flat(roots));
        let uuids: Vec<Uuid> = (0..roots)
            .map(|i| shapes::uuid(&shapes::root_name(i)))
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15 ^ roots as u64;
        for run in 1..=3 {
            let mut base = built.clone();
            let (mut plan, mut free) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..BATCHES {
                let started = Instant::now();
                let mut state = State::clone(&base);
                for _ in 0..BATCH {
                    let root = uuids[next(&mut seed) as usize % roots];
                    let write = ConsumerWrite {
                        consumer: Uuid::from_u64_pair(next(&mut seed), next(&mut seed)),
                        project_id: "p-bench".into(),
                        user_id: "u-bench".into(),
                        consumer_type: None,
                        generation: ConsumerGeneration::New,
                        allocations: vec![Requested {
                            provider: root.into(),
                            class: vcpu.clone(),
                            used: 1,
                        }],
                    };
                    // A root that is full refuses, as in the storm; a refusal plans
                    // nothing.
                    if let Ok((_, changes)) = state.plan_allocations(&[write], Endpoint::Put, 1) {
                        state.apply(&changes);
                    }
                }
                let planned = Instant::now();
                plan += planned - started;
                drop(std::mem::replace(&mut base, Arc::new(state)));
                free += planned.elapsed();
            }
            let claims = (BATCHES * BATCH) as f64;
            let (p, f) = (
                plan.as_secs_f64() * 1e6 / claims,
                free.as_secs_f64() * 1e6 / claims,
            );
            println!(
                "{roots:>10}  {run:>3}  {p:>13.2}  {f:>13.2}  {:>5.2}",
                p + f
            );
        }
    }
}
