//! `allot bench query`: times a shape's allocation candidate queries.
//!
//! For each query: one warm-up request per server, then `--runs` timed requests. A
//! request's time runs from sending it until its whole body has arrived; the body is
//! then parsed as JSON and its `allocation_requests` counted (outside the clock, so
//! the client's parsing is not charged to the server). With `--compare` the two
//! servers alternate request by request, so a noisy neighbour slows both alike.
//! Reports candidates, p50 and p99 (nearest rank) as a table on stdout and, with
//! `--json`, as a file; with `--pid`, the server's current and peak RSS afterwards.

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
    /// A second endpoint to time side by side (same shape seeded there).
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
    /// The server's process id: report its VmRSS and VmHWM after the runs.
    #[arg(long)]
    pid: Option<u32>,
}

/// One server's results for one query.
#[derive(Debug)]
struct Stats {
    candidates: usize,
    samples: Vec<Duration>,
}

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        percentile(&self.samples, p)
    }

    fn json(&self) -> Value {
        json!({
            "candidates": self.candidates,
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

/// One timed request: (time until the body was in, number of candidates).
async fn time_one(client: &Client, path: &str) -> anyhow::Result<(Duration, usize)> {
    let started = Instant::now();
    let response = client.request(Method::GET, path, None).await?;
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
    Ok((elapsed, candidates))
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
    let queries: Vec<(String, String)> = match args.shape {
        Some(shape) if args.path.is_empty() => shape
            .queries()
            .into_iter()
            .map(|(name, q)| (name.to_owned(), format!("/allocation_candidates?{q}")))
            .collect(),
        _ => args.path.iter().map(|p| (p.clone(), p.clone())).collect(),
    };

    let mut results = Vec::new();
    for (name, path) in &queries {
        // Warm-up: fills caches and the connection pool; not counted.
        time_one(&a, path).await?;
        if let Some(b) = &b {
            time_one(b, path).await?;
        }
        let mut sa = Stats {
            candidates: 0,
            samples: Vec::new(),
        };
        let mut sb = b.as_ref().map(|_| Stats {
            candidates: 0,
            samples: Vec::new(),
        });
        for _ in 0..args.runs {
            let (t, n) = time_one(&a, path).await?;
            sa.samples.push(t);
            sa.candidates = n;
            if let (Some(b), Some(sb)) = (&b, &mut sb) {
                let (t, n) = time_one(b, path).await?;
                sb.samples.push(t);
                sb.candidates = n;
            }
        }
        results.push((name.clone(), path.clone(), sa, sb));
    }
    let rss = match args.pid {
        Some(pid) => Some(read_rss(pid)?),
        None => None,
    };

    // The human table.
    let shape = args.shape.map_or("-", Shape::name);
    println!(
        "shape {shape}, {} runs per query after a warm-up; A = {}{}",
        args.runs,
        a.base(),
        b.as_ref()
            .map(|b| format!(", B = {}", b.base()))
            .unwrap_or_default()
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
    for (name, _, sa, sb) in &results {
        let mut line = format!(
            "{:<12} {:>10} {:>10.3} {:>10.3}",
            name,
            sa.candidates,
            ms(sa.percentile(0.5)),
            ms(sa.percentile(0.99))
        );
        if let Some(sb) = sb {
            line.push_str(&format!(
                " | {:>10} {:>10.3} {:>10.3} {:>9.2}",
                sb.candidates,
                ms(sb.percentile(0.5)),
                ms(sb.percentile(0.99)),
                ratio(sa, sb)
            ));
        }
        println!("{line}");
    }
    if let Some((current, peak)) = rss {
        println!(
            "server pid {}: VmRSS {current} kB, VmHWM {peak} kB",
            args.pid.unwrap_or(0)
        );
    }

    if let Some(file) = &args.json {
        let queries: Vec<Value> = results
            .iter()
            .map(|(name, path, sa, sb)| {
                json!({
                    "name": name,
                    "path": path,
                    "a": sa.json(),
                    "b": sb.as_ref().map(Stats::json),
                    "ratio_p50": sb.as_ref().map(|sb| ratio(sa, sb)),
                })
            })
            .collect();
        let report = json!({
            "shape": args.shape.map(Shape::name),
            "runs": args.runs,
            "a": a.base(),
            "b": b.as_ref().map(Client::base),
            "queries": queries,
            "rss_kb": rss.map(|(current, peak)| json!({"vm_rss": current, "vm_hwm": peak})),
        });
        std::fs::write(file, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

/// B's p50 over A's: how many times longer the peer takes.
fn ratio(a: &Stats, b: &Stats) -> f64 {
    let a = a.percentile(0.5).as_secs_f64();
    if a == 0.0 {
        return f64::NAN;
    }
    b.percentile(0.5).as_secs_f64() / a
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
    fn rss_fields_from_proc_status() {
        let status = "Name:\tallot\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nVmRSSx:\t1 kB\n";
        assert_eq!(parse_rss(status), Some((10240, 20480)));
        assert_eq!(parse_rss("Name:\tx\n"), None);
        // Our own process has both.
        let (current, peak) = read_rss(std::process::id()).unwrap();
        assert!(current > 0 && peak >= current);
    }
}
