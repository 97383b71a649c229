//! `allot bench query`: times a shape's allocation candidate queries.
//!
//! For each query: one warm-up request per server, then `--runs` timed requests. A
//! request's time runs from sending it until its whole body has arrived; the body is
//! then parsed as JSON and its `allocation_requests` counted (outside the clock, so
//! the client's parsing is not charged to the server). With `--compare` the two
//! servers alternate request by request, so a noisy neighbour slows both alike.
//! Reports candidates, p50 and p99 (nearest rank) as a table on stdout and, with
//! `--json`, as a file; with `--pid` (and `--compare-pid`), the server's current and
//! peak RSS afterwards, summed over the processes given (a pre-forking server such as
//! gunicorn answers from several).
//!
//! A ratio compares like with like only when both servers did the same work, so
//! every answer's candidate count is kept (the warm-up's too), and a query whose two
//! servers returned different counts, or one whose count changed between runs, gets
//! no ratio: its row says `unequal`, a line under the table says what each server
//! returned, and the command exits non-zero once the table (and the JSON, with
//! `ratio_p50` null) is out. A user who asked for a comparison learns it was not one
//! from the exit status as well as from the table; the timings stay readable.
//!
//! With `--timeout`, a request unanswered within that bound marks the query as timed
//! out on that server: it is reported as such (no percentiles) and not asked again of
//! that server, while the other server's runs go on. A peer that needs minutes for
//! one answer (OpenStack Placement on `wide` without its workaround) then costs one
//! bound per query instead of hanging the run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use allot_client::{Client, Method};
use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::shapes::Shape;
use super::Endpoint;

/// `allot bench query`.
#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// The workload whose queries to time (seeded with `allot bench seed`).
    #[arg(long, value_enum, required_unless_present = "path")]
    shape: Option<Shape>,
    /// Time `GET PATH` instead of the shape's queries (repeatable); `--path /`
    /// measures the client and the HTTP stack alone.
    #[arg(long)]
    path: Vec<String>,
    #[command(flatten)]
    endpoint: Endpoint,
    /// A second endpoint to time side by side (same shape seeded there). A query
    /// whose two servers return different candidate counts gets no ratio, and the
    /// command then exits non-zero.
    #[arg(long)]
    compare: Option<String>,
    /// The second endpoint's token (default: --token).
    #[arg(long)]
    compare_token: Option<String>,
    /// Timed runs per query and server, after one warm-up.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The server's process id: report its VmRSS and VmHWM after the runs
    /// (repeatable: the figures of all the processes given are summed).
    #[arg(long)]
    pid: Vec<u32>,
    /// The second server's process ids, as --pid.
    #[arg(long, requires = "compare")]
    compare_pid: Vec<u32>,
    /// Give up on a request unanswered after this many seconds: the query is
    /// reported as timed out on that server and not asked of it again (default: wait).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
}

/// One server's results for one query.
#[derive(Debug)]
struct Stats {
    /// Every candidate count the server answered with, in the order first seen: one
    /// entry when its answer is steady.
    counts: Vec<usize>,
    samples: Vec<Duration>,
    /// A request went unanswered within `--timeout`: no figures for this query.
    timed_out: bool,
}

impl Stats {
    fn new() -> Stats {
        Stats {
            counts: Vec::new(),
            samples: Vec::new(),
            timed_out: false,
        }
    }

    /// The candidate count, when every answer had the same.
    fn candidates(&self) -> Option<usize> {
        match self.counts[..] {
            [n] => Some(n),
            _ => None,
        }
    }

    /// The counts as the table shows them: `1000`, or `1000/999` when they changed.
    fn counts_text(&self) -> String {
        let counts: Vec<String> = self.counts.iter().map(usize::to_string).collect();
        counts.join("/")
    }

    /// Times one more request unless this server already timed out on the query.
    async fn run(
        &mut self,
        client: &Client,
        path: &str,
        timeout: Option<Duration>,
        counted: bool,
    ) -> anyhow::Result<()> {
        if self.timed_out {
            return Ok(());
        }
        match time_one(client, path, timeout).await? {
            Some((t, n)) => {
                if !self.counts.contains(&n) {
                    self.counts.push(n);
                }
                if counted {
                    self.samples.push(t);
                }
            }
            None => self.timed_out = true,
        }
        Ok(())
    }

    fn percentile(&self, p: f64) -> Duration {
        percentile(&self.samples, p)
    }

    fn json(&self) -> Value {
        if self.timed_out {
            return json!({
                "candidates": null,
                "candidate_counts": self.counts,
                "p50_ms": null,
                "p99_ms": null,
                "runs": self.samples.len(),
                "timed_out": true,
            });
        }
        json!({
            "candidates": self.candidates(),
            "candidate_counts": self.counts,
            "p50_ms": ms(self.percentile(0.50)),
            "p99_ms": ms(self.percentile(0.99)),
            "runs": self.samples.len(),
        })
    }
}

/// Nearest-rank percentile of unsorted samples (zero when there are none).
pub(super) fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub(super) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// One timed request: (time until the body was in, number of candidates), or `None`
/// when no answer came within `timeout`.
async fn time_one(
    client: &Client,
    path: &str,
    timeout: Option<Duration>,
) -> anyhow::Result<Option<(Duration, usize)>> {
    let started = Instant::now();
    let request = client.request(Method::GET, path, None);
    let response = match timeout {
        Some(bound) => match tokio::time::timeout(bound, request).await {
            Ok(response) => response?,
            Err(_) => return Ok(None),
        },
        None => request.await?,
    };
    let elapsed = started.elapsed();
    if !response.status.is_success() {
        bail!(
            "GET {}{path}: {}: {}",
            client.base(),
            response.status,
            String::from_utf8_lossy(&response.body)
        );
    }
    let value: Value = serde_json::from_slice(&response.body)
        .with_context(|| format!("GET {}{path}: the body is no JSON", client.base()))?;
    let candidates = value["allocation_requests"].as_array().map_or(0, Vec::len);
    Ok(Some((elapsed, candidates)))
}

pub async fn query(args: QueryArgs) -> anyhow::Result<()> {
    let endpoint = &args.endpoint;
    let a = endpoint.client(&endpoint.url, &endpoint.token)?;
    let b = match &args.compare {
        Some(url) => Some(endpoint.client(
            url,
            args.compare_token.as_deref().unwrap_or(&endpoint.token),
        )?),
        None => None,
    };
    let results = time_queries(&args, &a, b.as_ref()).await?;
    let rss = read_rss_sum(&args.pid)?;
    let b_rss = read_rss_sum(&args.compare_pid)?;
    let unequal = print_table(&args, &a, b.as_ref(), &results, [rss, b_rss]);
    if let Some(file) = &args.json {
        write_json(file, &args, &a, b.as_ref(), &results, [rss, b_rss])?;
    }
    if !unequal.is_empty() {
        bail!(
            "the two servers returned different candidate counts for {}: \
             their timings compare unequal work, so no ratio is given",
            unequal.join(", ")
        );
    }
    Ok(())
}

/// One query's results on both servers.
struct Timed {
    /// The shape's name for the query, or the path given.
    name: String,
    path: String,
    a: Stats,
    /// Server B's, with `--compare`.
    b: Option<Stats>,
    /// B against A, with `--compare`.
    comparison: Option<Comparison>,
}

/// The paths to time, by name: the shape's queries, or the `--path`s given.
fn paths(args: &QueryArgs) -> Vec<(String, String)> {
    match args.shape {
        Some(shape) if args.path.is_empty() => shape
            .queries()
            .into_iter()
            .map(|(name, q)| (name.to_owned(), format!("/allocation_candidates?{q}")))
            .collect(),
        _ => args.path.iter().map(|p| (p.clone(), p.clone())).collect(),
    }
}

/// Each query's warm-up and timed runs, the two servers alternating request by
/// request so that a noisy neighbour slows both alike.
async fn time_queries(
    args: &QueryArgs,
    a: &Client,
    b: Option<&Client>,
) -> anyhow::Result<Vec<Timed>> {
    let timeout = args.timeout.map(Duration::from_secs);
    let mut results = Vec::new();
    for (name, path) in paths(args) {
        let mut sa = Stats::new();
        let mut sb = b.map(|_| Stats::new());
        // Warm-up: fills caches and the connection pool; not counted.
        for counted in std::iter::once(false).chain(std::iter::repeat_n(true, args.runs as usize)) {
            sa.run(a, &path, timeout, counted).await?;
            if let (Some(b), Some(sb)) = (b, &mut sb) {
                sb.run(b, &path, timeout, counted).await?;
            }
        }
        let comparison = sb.as_ref().map(|sb| Comparison::of(&sa, sb));
        results.push(Timed {
            name,
            path,
            a: sa,
            b: sb,
            comparison,
        });
    }
    Ok(results)
}

/// The human table on stdout, with a line under it for each query that got no ratio
/// and the servers' RSS; returns the names of those queries.
fn print_table<'a>(
    args: &QueryArgs,
    a: &Client,
    b: Option<&Client>,
    results: &'a [Timed],
    [rss, b_rss]: [Option<(u64, u64)>; 2],
) -> Vec<&'a str> {
    let shape = args.shape.map_or("-", Shape::name);
    println!(
        "shape {shape}, {} runs per query after a warm-up; A = {}{}",
        args.runs,
        a.base(),
        b.map(|b| format!(", B = {}", b.base())).unwrap_or_default()
    );
    let mut header = format!(
        "{:<12} {:>10} {:>10} {:>10}",
        "query", "cands", "p50 ms", "p99 ms"
    );
    if b.is_some() {
        header.push_str(&format!(
            " | {:>10} {:>10} {:>10} {:>9}",
            "B cands", "B p50 ms", "B p99 ms", "B/A p50"
        ));
    }
    println!("{header}");
    let timed_out = format!("timeout>{}s", args.timeout.unwrap_or(0));
    let cells = |s: &Stats| {
        if s.timed_out {
            format!("{:>10} {:>10} {:>10}", "-", timed_out, "-")
        } else {
            format!(
                "{:>10} {:>10.3} {:>10.3}",
                s.counts_text(),
                ms(s.percentile(0.5)),
                ms(s.percentile(0.99))
            )
        }
    };
    for timed in results {
        let mut line = format!("{:<12} {}", timed.name, cells(&timed.a));
        if let (Some(sb), Some(comparison)) = (&timed.b, &timed.comparison) {
            line.push_str(&format!(" | {} {}", cells(sb), comparison.cell()));
        }
        println!("{line}");
    }
    let mut unequal = Vec::new();
    for timed in results {
        if let Some(why) = timed.comparison.as_ref().and_then(Comparison::unequal) {
            println!(
                "{}: no ratio: {why}; the two servers did different work",
                timed.name
            );
            unequal.push(timed.name.as_str());
        }
    }
    for (label, pids, rss) in [
        ("server", &args.pid, rss),
        ("B server", &args.compare_pid, b_rss),
    ] {
        if let Some((current, peak)) = rss {
            println!("{label} pid {pids:?}: VmRSS {current} kB, VmHWM {peak} kB");
        }
    }
    unequal
}

/// The results as the `--json` file holds them.
fn write_json(
    file: &std::path::Path,
    args: &QueryArgs,
    a: &Client,
    b: Option<&Client>,
    results: &[Timed],
    [rss, b_rss]: [Option<(u64, u64)>; 2],
) -> anyhow::Result<()> {
    let queries: Vec<Value> = results
        .iter()
        .map(|timed| {
            json!({
                "name": timed.name,
                "path": timed.path,
                "a": timed.a.json(),
                "b": timed.b.as_ref().map(Stats::json),
                "ratio_p50": timed.comparison.as_ref().and_then(Comparison::ratio),
                "unequal": timed.comparison.as_ref().and_then(Comparison::unequal),
            })
        })
        .collect();
    let report = json!({
        "shape": args.shape.map(Shape::name),
        "runs": args.runs,
        "timeout_s": args.timeout,
        "a": a.base(),
        "b": b.map(Client::base),
        "queries": queries,
        "rss_kb": rss_json(rss),
        "b_rss_kb": rss_json(b_rss),
    });
    std::fs::write(file, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", file.display()))
}

/// What may be said of server B against server A on one query.
#[derive(Debug, PartialEq)]
enum Comparison {
    /// B's p50 over A's: how many times longer the peer takes.
    Ratio(f64),
    /// A side timed out (or A's p50 was too short to measure): no figure, which is
    /// the run's normal outcome for a peer that cannot answer in time.
    NoFigure,
    /// The two did different work, in words: a ratio would mislead.
    Unequal(String),
}

impl Comparison {
    fn of(a: &Stats, b: &Stats) -> Comparison {
        if a.timed_out || b.timed_out {
            return Comparison::NoFigure;
        }
        match (a.candidates(), b.candidates()) {
            (Some(x), Some(y)) if x == y => {}
            _ => {
                return Comparison::Unequal(format!(
                    "A returned {} candidates, B {}",
                    a.counts_text(),
                    b.counts_text()
                ))
            }
        }
        let a = a.percentile(0.5).as_secs_f64();
        if a == 0.0 {
            return Comparison::NoFigure;
        }
        Comparison::Ratio(b.percentile(0.5).as_secs_f64() / a)
    }

    fn cell(&self) -> String {
        match self {
            Comparison::Ratio(r) => format!("{r:>9.2}"),
            Comparison::NoFigure => format!("{:>9}", "-"),
            Comparison::Unequal(_) => format!("{:>9}", "unequal"),
        }
    }

    fn ratio(&self) -> Option<f64> {
        match self {
            Comparison::Ratio(r) => Some(*r),
            _ => None,
        }
    }

    fn unequal(&self) -> Option<&str> {
        match self {
            Comparison::Unequal(why) => Some(why),
            _ => None,
        }
    }
}

/// (VmRSS, VmHWM) in kB summed over `pids`; `None` when none are given. The sum of
/// the peaks bounds the peak of the sum from above (the processes need not have
/// peaked at the same time).
pub(super) fn read_rss_sum(pids: &[u32]) -> anyhow::Result<Option<(u64, u64)>> {
    if pids.is_empty() {
        return Ok(None);
    }
    let mut sum = (0, 0);
    for &pid in pids {
        let (current, peak) = read_rss(pid)?;
        sum = (sum.0 + current, sum.1 + peak);
    }
    Ok(Some(sum))
}

pub(super) fn rss_json(rss: Option<(u64, u64)>) -> Value {
    json!(rss.map(|(current, peak)| json!({"vm_rss": current, "vm_hwm": peak})))
}

/// (VmRSS, VmHWM) in kB from `/proc/PID/status`.
pub(super) fn read_rss(pid: u32) -> anyhow::Result<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_rss(&text).with_context(|| format!("no VmRSS/VmHWM in {path}"))
}

fn parse_rss(status: &str) -> Option<(u64, u64)> {
    let field = |key: &str| {
        status.lines().find_map(|line| {
            let rest = line.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
    };
    Some((field("VmRSS")?, field("VmHWM")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.5), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(99));
        let few = [
            Duration::from_millis(3),
            Duration::from_millis(1),
            Duration::from_millis(2),
        ];
        assert_eq!(percentile(&few, 0.5), Duration::from_millis(2));
        assert_eq!(percentile(&few, 0.99), Duration::from_millis(3));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn a_request_past_the_timeout_marks_the_query_and_is_not_repeated() {
        // A listener that never accepts: the kernel completes the handshake, the
        // request sits in its buffer and no answer ever comes.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = allot_client::Config {
            url: format!("http://{}", silent.local_addr().unwrap()),
            token_header: "x-auth-token".into(),
            token: "admin".into(),
            microversion: "1.39".into(),
            tls: allot_tls::ClientTls::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = Client::new(&config).unwrap();
            let bound = Some(Duration::from_millis(200));
            let mut stats = Stats::new();
            stats.run(&client, "/", bound, true).await.unwrap();
            assert!(stats.timed_out);
            assert!(stats.samples.is_empty());
            // A timed-out query is not asked again: the next run returns at once.
            let started = Instant::now();
            stats.run(&client, "/", bound, true).await.unwrap();
            assert!(started.elapsed() < Duration::from_millis(100));
            let report = stats.json();
            assert_eq!(report["timed_out"], true);
            assert!(report["p50_ms"].is_null());
            // Nor is it compared with anything.
            let answered = Stats {
                counts: vec![1],
                samples: vec![Duration::from_millis(1)],
                timed_out: false,
            };
            assert_eq!(Comparison::of(&answered, &stats), Comparison::NoFigure);
        });
    }

    fn answered(counts: &[usize], p50_ms: u64) -> Stats {
        Stats {
            counts: counts.to_vec(),
            samples: vec![Duration::from_millis(p50_ms)],
            timed_out: false,
        }
    }

    #[test]
    fn a_ratio_needs_the_same_candidate_count_on_both_sides() {
        let a = answered(&[1000], 2);
        assert_eq!(
            Comparison::of(&a, &answered(&[1000], 6)),
            Comparison::Ratio(3.0)
        );
        let fewer = Comparison::of(&a, &answered(&[999], 6));
        assert_eq!(
            fewer,
            Comparison::Unequal("A returned 1000 candidates, B 999".into())
        );
        assert_eq!(fewer.ratio(), None);
        assert_eq!(fewer.cell().trim(), "unequal");
        // A count that moved between runs is no steady amount of work either.
        let moved = answered(&[1000, 998], 6);
        assert_eq!(moved.candidates(), None);
        assert_eq!(
            Comparison::of(&a, &moved).unequal(),
            Some("A returned 1000 candidates, B 1000/998")
        );
        assert_eq!(
            Comparison::of(&moved, &a).unequal(),
            Some("A returned 1000/998 candidates, B 1000")
        );
    }

    #[test]
    fn rss_of_several_processes_is_summed() {
        let own = std::process::id();
        let (_, peak) = read_rss(own).unwrap();
        let (sum_current, sum_peak) = read_rss_sum(&[own, own]).unwrap().unwrap();
        // The current figure moves between reads; the peak only grows.
        assert!(sum_current > 0 && sum_peak >= 2 * peak);
        assert_eq!(read_rss_sum(&[]).unwrap(), None);
    }

    #[test]
    fn rss_fields_from_proc_status() {
        let status = "Name:\tallot\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nVmRSSx:\t1 kB\n";
        assert_eq!(parse_rss(status), Some((10240, 20480)));
        assert_eq!(parse_rss("Name:\tx\n"), None);
        // Our own process has both.
        let (current, peak) = read_rss(std::process::id()).unwrap();
        assert!(current > 0 && peak >= current);
    }
}
