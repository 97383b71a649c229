//! How much memory the in-memory view takes per record, on the reference shapes of
//! `shared/BENCHMARKS.md`: a counting allocator wraps the system's, and the bytes still
//! allocated after each phase of building `flat` (providers, then inventories, traits,
//! aggregates, consumers with their allocations) are what that kind of record costs.
//! `nested` is measured whole. Counts are of bytes asked for; the allocator's own
//! overhead (about 16 bytes per live allocation with glibc) comes on top, so the live
//! allocations are reported too.
//!
//! Run: `cargo bench -p allot-core --bench view_memory`. `ALLOT_BENCH_FLAT_ROOTS`
//! (default 100,000) and `ALLOT_BENCH_NESTED_ROOTS` (default 20,000) change the sizes.

#![allow(missing_docs)]

use std::alloc::System;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

mod shapes;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes and allocations live now, since `region` began.
fn live(region: &Region<System>) -> (i64, i64) {
    let s = region.change();
    // A reallocation is already counted in `bytes_allocated`/`bytes_deallocated` (by
    // its growth or shrinkage); `bytes_reallocated` repeats it.
    let bytes = s.bytes_allocated as i64 - s.bytes_deallocated as i64;
    (bytes, s.allocations as i64 - s.deallocations as i64)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let roots = env("ALLOT_BENCH_FLAT_ROOTS", 100_000);
    let nested_roots = env("ALLOT_BENCH_NESTED_ROOTS", 20_000);

    println!("flat, {roots} roots (+10 sharing providers)");
    println!(
        "{:<28}{:>14}{:>14}{:>16}",
        "phase", "bytes/root", "allocs/root", "total MiB"
    );
    let region = Region::new(GLOBAL);
    let mut last = (0, 0);
    let state = shapes::flat_in_phases(roots, &mut |phase, _| {
        let now = live(&region);
        println!(
            "{:<28}{:>14.1}{:>14.2}{:>16.1}",
            phase,
            (now.0 - last.0) as f64 / roots as f64,
            (now.1 - last.1) as f64 / roots as f64,
            (now.0 - last.0) as f64 / (1 << 20) as f64,
        );
        last = now;
    });
    let (bytes, allocs) = live(&region);
    println!(
        "{:<28}{:>14.1}{:>14.2}{:>16.1}",
        "all",
        bytes as f64 / roots as f64,
        allocs as f64 / roots as f64,
        bytes as f64 / (1 << 20) as f64,
    );
    println!(
        "  ({} consumers; with ~16 B of allocator overhead per allocation: {:.1} MiB)",
        state.consumers().count(),
        (bytes + 16 * allocs) as f64 / (1 << 20) as f64
    );
    drop(state);

    let region = Region::new(GLOBAL);
    let state = shapes::nested(nested_roots);
    let (bytes, allocs) = live(&region);
    let providers = state.providers().count();
    println!(
        "nested, {nested_roots} roots ({providers} providers): {:.1} bytes/provider, {:.2} allocs/provider, {:.1} MiB",
        bytes as f64 / providers as f64,
        allocs as f64 / providers as f64,
        bytes as f64 / (1 << 20) as f64,
    );
}
