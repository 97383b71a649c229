//! The server's memory does not grow with traffic (issue 8): after a burst of large
//! answers, the real binary's resident set stays near what it was after seeding.
//!
//! The workload is the `flat` shape of `BENCHMARKS.md`, seeded through the HTTP API by
//! `allot bench seed`, and its `nolimit` query: every AVX2 root, with its local disk
//! or a shared pool's, a body of about a megabyte at 2,000 roots. Several clients ask for it at once, so that the answers
//! are built on several blocking threads, as on a busy server: with glibc's malloc
//! each of those threads grew an arena of its own that was never handed back, and
//! the resident set climbed by the body's transient size per thread.
//!
//! The server runs on jemalloc with a background thread that purges freed pages after
//! about a second (`src/allocator.rs`): right after the burst the resident set holds
//! some of its transient memory, a moment later it is back at the working set.
//!
//! `rss_stays_bounded_after_many_large_answers` is the check that runs in CI;
//! `measure_memory` (ignored) prints the figures behind the bound and the allocator
//! choice (see docs/design/transient-memory.md), sized by `ALLOT_MEM_ROOTS`,
//! `ALLOT_MEM_ANSWERS`, `ALLOT_MEM_CLIENTS` and `ALLOT_MEM_PAUSE_MS`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::{bench, Client, Server};

/// The `nolimit` query of `BENCHMARKS.md`.
const NOLIMIT: &str = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40\
                       &required=HW_CPU_X86_AVX2";

/// Seeds `n` roots of the flat shape with the real seeder (`allot bench seed`).
fn seed_flat(server: &Server, n: usize) {
    let roots = n.to_string();
    let url = format!("http://{}", server.addr);
    bench(&["seed", "--shape", "flat", "--roots", &roots, "--url", &url]);
}

/// The server's resident set now and at its peak (`VmRSS`, `VmHWM`), in MiB.
fn rss(server: &Server) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read /proc/PID/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} in {status}"))
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The number of candidates a `nolimit` answer must hold on `n` roots: one per AVX2
/// root (`i % 5 != 0`) with its rack's shared disk, and one more for each of those
/// with local disk (even `i`).
fn expected_candidates(n: usize) -> usize {
    let avx2 = (0..n).filter(|i| i % 5 != 0);
    avx2.clone().count() + avx2.filter(|i| i % 2 == 0).count()
}

/// One `nolimit` answer, checked; returns its size in bytes.
fn large_answer(client: &Client, n: usize) -> usize {
    let (status, body) = client.call("GET", NOLIMIT, None);
    assert_eq!(status, 200, "{body}");
    // Cheaper than parsing a megabyte: each candidate names its one provider once
    // under `allocations`.
    let candidates = body.matches(r#""allocations":{"#).count();
    assert_eq!(
        candidates,
        expected_candidates(n),
        "candidates in the answer"
    );
    body.len()
}

/// `answers` large answers from `clients` concurrent clients.
fn burst(server: &Server, n: usize, answers: usize, clients: usize) -> usize {
    let next = AtomicUsize::new(0);
    let bytes = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..clients {
            let client = server.client();
            let (next, bytes) = (&next, &bytes);
            scope.spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < answers {
                    bytes.fetch_add(large_answer(&client, n), Ordering::Relaxed);
                }
            });
        }
    });
    bytes.load(Ordering::Relaxed) / answers
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The bounds of the CI check, in MiB: growth of the resident set from after seeding
/// to right after 1,000 large answers from 32 clients, and to a moment later. On 2
/// cores with glibc's malloc it grew by about 80 MiB with an uncapped blocking pool
/// and by about 10 MiB with the cap, and stayed there; with jemalloc's purging it is
/// about 8 to 12 MiB right after the burst and back at the seeded figure after the pause
/// (docs/design/transient-memory.md). The bounds leave room for a loaded machine.
const GROWTH_BOUND_MIB: f64 = 32.0;
const SETTLED_BOUND_MIB: f64 = 12.0;

/// How long the check waits for the allocator's purging (its decay is 1 s).
const SETTLE: Duration = Duration::from_millis(3000);

#[test]
fn rss_stays_bounded_after_many_large_answers() {
    let n = 2000;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    seed_flat(&server, n);
    // One answer first, so that what every answer needs once (the search's lazily
    // built indexes, the runtime's first blocking thread) counts as the working set.
    large_answer(&server.client(), n);
    let (seeded, _) = rss(&server);
    let size = burst(&server, n, 1000, 32);
    let (after, peak) = rss(&server);
    std::thread::sleep(SETTLE);
    let (settled, _) = rss(&server);
    eprintln!(
        "answer {size} B; RSS after seeding {seeded:.1} MiB, after 1000 answers \
         {after:.1} MiB, {SETTLE:?} later {settled:.1} MiB, peak {peak:.1} MiB"
    );
    assert!(
        after - seeded <= GROWTH_BOUND_MIB,
        "RSS grew from {seeded:.1} MiB to {after:.1} MiB over 1000 answers of {size} B \
         (bound {GROWTH_BOUND_MIB} MiB)"
    );
    assert!(
        settled - seeded <= SETTLED_BOUND_MIB,
        "RSS was {settled:.1} MiB {SETTLE:?} after a burst, {seeded:.1} MiB before it: \
         freed memory was not handed back (bound {SETTLED_BOUND_MIB} MiB)"
    );
}

/// The figures of docs/design/transient-memory.md: RSS after seeding, the peak, after a
/// burst and after a pause, and the large query's p50 over 20 sequential runs.
/// `cargo test --release -p allot --test memory -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_memory() {
    let n = env("ALLOT_MEM_ROOTS", 2000);
    let answers = env("ALLOT_MEM_ANSWERS", 1000);
    let clients = env("ALLOT_MEM_CLIENTS", 32);
    let pause = env("ALLOT_MEM_PAUSE_MS", 5000);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    let started = Instant::now();
    seed_flat(&server, n);
    let seeding = started.elapsed();
    let (seeded, seeded_peak) = rss(&server);
    let client = server.client();
    let mut times: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            large_answer(&client, n);
            t.elapsed()
        })
        .collect();
    times.sort();
    let (warm, _) = rss(&server);
    let started = Instant::now();
    let size = burst(&server, n, answers, clients);
    let burst_time = started.elapsed();
    let (after, peak) = rss(&server);
    std::thread::sleep(Duration::from_millis(pause as u64));
    let (paused, _) = rss(&server);
    println!(
        "roots {n}, answer {size} B, seeding {seeding:.1?}; RSS MiB: seeded {seeded:.1} \
         (peak {seeded_peak:.1}), after 20 {warm:.1}, after {answers}x{clients} burst \
         {after:.1} ({burst_time:.1?}), peak {peak:.1}, after {pause} ms pause {paused:.1}; \
         nolimit p50 {:.1?} p90 {:.1?}",
        times[10], times[18]
    );
}
