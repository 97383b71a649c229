//! `allot bench mass-start`: many instances of the `small` flavour started at once on
//! a seeded `flat` shape (`shared/BENCHMARKS.md`, "mass start"), in one of three
//! ways, so that the ways can be set side by side on the same machine:
//!
//! - `nova`: what Nova's scheduler does against OpenStack Placement. Each of
//!   `--schedulers` clients takes the next instance, asks for candidates (`small`,
//!   `limit=1000`), weighs them itself (spread: the most free VCPU first, as Nova's
//!   default RAM/CPU weighers do with one host per subset), claims the best with
//!   `PUT /allocations/{consumer}`, and on a 409 starts again from the GET. Works
//!   against any Placement API, allot included.
//! - `pick`: allot's pick-and-claim, one `POST /claims` with `request` per instance
//!   (the server searches, weighs with `--sort` and claims in one commit).
//! - `pick-all`: one `POST /claims` with `request` and `consumers` for every
//!   instance, with `--affinity` and all or nothing, weighed only if `--sort` says.
//!
//! It reports wall time (start to the last instance placed), requests sent,
//! conflicts and retries, instances left unplaced, and the time each instance took.
//! Afterwards it reads back what the server holds for the run's own project (it must
//! be exactly what was accepted, `held`) and checks every provider the run claimed on
//! for over-commit: allocations plus pending claims must stay within each class's
//! capacity, `(total - reserved) * allocation_ratio`. Either check failing fails the
//! command, after the figures are printed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allot_client::{Client, Method, ProjectUsages, StatusCode};
use anyhow::{bail, Context};
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use uuid::Uuid;

use super::claims::{
    check_seeded, claim_body, is_generation_conflict, minor, send, ClaimAs, Errors,
};
use super::held::{self, Holding, Ledger};
use super::query::{ms, percentile, read_rss_sum, rss_json};
use super::shapes::{FLAVOUR, PROJECT, USER};
use super::Endpoint;

/// How often one instance may be retried (Nova's way) before it is given up: a
/// bound so that the run ends, far above what a healthy run needs.
const MAX_TRIES: u32 = 100;

/// How many providers the over-commit check reads at once.
const CHECK_CONCURRENCY: usize = 8;

/// `allot bench mass-start`.
#[derive(clap::Args, Debug)]
pub struct MassStartArgs {
    /// How the instances are placed.
    #[arg(long, value_enum)]
    way: Way,
    /// How many roots the flat shape was seeded with (`allot bench seed --roots`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    roots: u64,
    /// How many instances start.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    instances: u32,
    /// Concurrent schedulers (`nova` and `pick`; `pick-all` sends one request).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    schedulers: u32,
    /// The `limit` of Nova's candidate query.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// `pick` and `pick-all`: the server's weighing (`pack`, `spread`, `random`;
    /// `none` for the search's own order). By default `spread` for `pick`, `none`
    /// for `pick-all`.
    #[arg(long)]
    sort: Option<String>,
    /// `pick-all`: `none` or `different_roots`.
    #[arg(long, default_value = "none")]
    affinity: String,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The server's process id: report its VmRSS and VmHWM after the run.
    #[arg(long)]
    pid: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Way {
    /// GET candidates, weigh on the client, PUT /allocations, retry on 409.
    Nova,
    /// allot's pick-and-claim, one request per instance.
    Pick,
    /// allot's pick-and-claim, one request for all the instances.
    PickAll,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Nova => "nova",
            Way::Pick => "pick",
            Way::PickAll => "pick-all",
        }
    }

    /// Where the accepted claims show on the server.
    fn holding(self) -> Holding {
        match self {
            Way::Nova => Holding::Allocations,
            Way::Pick | Way::PickAll => Holding::Claims,
        }
    }
}

/// What the schedulers saw, all of them together.
#[derive(Debug, Default)]
struct Tally {
    /// What the accepted claims add up to.
    ledger: Ledger,
    /// Every request sent while placing (the read-backs afterwards not counted).
    requests: u64,
    /// Claims refused with 409 because a generation moved (Nova's way retries).
    conflicts_generation: u64,
    /// Claims refused with 409 for want of capacity (Nova's way retries).
    conflicts_capacity: u64,
    /// Claims sent again after a refusal.
    retries: u64,
    /// Instances the run gave up on (nothing fits, too many tries, or an error).
    unplaced: u64,
    /// Answers that were neither 2xx nor 409.
    errors: Errors,
    /// Providers some accepted claim holds something on.
    providers: BTreeSet<String>,
    /// Per placed instance: from its first request to its claim's acceptance.
    latencies: Vec<Duration>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.ledger.merge(other.ledger);
        self.requests += other.requests;
        self.conflicts_generation += other.conflicts_generation;
        self.conflicts_capacity += other.conflicts_capacity;
        self.retries += other.retries;
        self.unplaced += other.unplaced;
        self.errors.merge(other.errors);
        self.providers.extend(other.providers);
        self.latencies.extend(other.latencies);
    }

    fn error(&mut self, what: impl Into<String>) {
        self.errors.count(what);
    }

    /// One accepted claim of `allocations` (`{rp: {"resources": ...}}`).
    fn accept(&mut self, allocations: &Value, started: Instant) {
        self.ledger.accept(allocations);
        self.providers.extend(
            allocations
                .as_object()
                .into_iter()
                .flatten()
                .map(|(rp, _)| rp.clone()),
        );
        self.latencies.push(started.elapsed());
    }

    /// A 409 on a claim, by its code.
    fn conflict(&mut self, body: &[u8]) {
        if is_generation_conflict(body) {
            self.conflicts_generation += 1;
        } else {
            self.conflicts_capacity += 1;
        }
    }
}

/// Nova's choice among `answer`'s allocation requests: the one whose VCPU provider
/// has the most VCPU free (capacity less used, from the provider summaries), the
/// first of equals. `None` when there is nothing to choose.
fn weigh_spread(answer: &Value) -> Option<&Value> {
    let summaries = &answer["provider_summaries"];
    let free = |request: &Value| -> i64 {
        let allocations = request["allocations"].as_object();
        let vcpu_host = allocations
            .into_iter()
            .flatten()
            .find(|(_, held)| held["resources"].get("VCPU").is_some());
        vcpu_host.map_or(i64::MIN, |(rp, _)| {
            let vcpu = &summaries[rp]["resources"]["VCPU"];
            vcpu["capacity"].as_i64().unwrap_or(0) - vcpu["used"].as_i64().unwrap_or(0)
        })
    };
    let requests = answer["allocation_requests"].as_array()?;
    let mut best: Option<(&Value, i64)> = None;
    for request in requests {
        let score = free(request);
        if best.is_none_or(|(_, top)| score > top) {
            best = Some((request, score));
        }
    }
    best.map(|(request, _)| &request["allocations"])
}

/// One of Nova's schedulers: instances from `next` until there are none left.
async fn nova_scheduler(
    client: Client,
    next: Arc<AtomicU32>,
    instances: u32,
    candidates: String,
    claim_as: ClaimAs,
) -> Tally {
    let mut tally = Tally::default();
    while next.fetch_add(1, Ordering::Relaxed) < instances {
        let started = Instant::now();
        let consumer = Uuid::new_v4();
        let mut placed = false;
        for attempt in 0..MAX_TRIES {
            tally.requests += 1;
            let answer = match send(&client, Method::GET, &candidates, None).await {
                Ok(response) if response.status == StatusCode::OK => response,
                Ok(response) => {
                    tally.error(format!("GET {}", response.status.as_u16()));
                    break;
                }
                Err(why) => {
                    tally.error(why);
                    break;
                }
            };
            let answer: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
            let Some(allocations) = weigh_spread(&answer) else {
                break;
            };
            if attempt > 0 {
                tally.retries += 1;
            }
            tally.requests += 1;
            let body = claim_body(allocations, claim_as.minor, &claim_as.project);
            let path = format!("/allocations/{consumer}");
            match send(&client, Method::PUT, &path, Some(&body)).await {
                Ok(response) if response.status.is_success() => {
                    tally.accept(allocations, started);
                    placed = true;
                    break;
                }
                Ok(response) if response.status == StatusCode::CONFLICT => {
                    tally.conflict(&response.body)
                }
                Ok(response) => {
                    tally.error(format!("PUT {}", response.status.as_u16()));
                    break;
                }
                Err(why) => {
                    tally.ledger.unanswered(allocations);
                    tally.error(why);
                    break;
                }
            }
        }
        if !placed {
            tally.unplaced += 1;
        }
    }
    tally
}

impl MassStartArgs {
    /// The server's weighing of the picks (`none`: the search's own order).
    fn sort(&self) -> &str {
        match (&self.sort, self.way) {
            (Some(sort), _) => sort,
            (None, Way::Pick) => "spread",
            (None, _) => "none",
        }
    }
}

/// The common part of a pick-and-claim body.
fn pick_body(args: &MassStartArgs, claim_as: &ClaimAs) -> Value {
    let mut body = json!({
        "request": FLAVOUR,
        "project_id": &*claim_as.project,
        "user_id": USER,
        "consumer_type": "INSTANCE",
    });
    let sort = args.sort();
    if args.way != Way::Nova && sort != "none" {
        body["sort"] = json!(sort);
    }
    body
}

/// One of allot's schedulers: one pick-and-claim per instance, no retry.
async fn pick_scheduler(
    client: Client,
    next: Arc<AtomicU32>,
    instances: u32,
    body: Value,
) -> Tally {
    let mut tally = Tally::default();
    while next.fetch_add(1, Ordering::Relaxed) < instances {
        let started = Instant::now();
        let mut body = body.clone();
        body["consumer_uuid"] = json!(Uuid::new_v4());
        tally.requests += 1;
        match send(&client, Method::POST, "/claims", Some(&body)).await {
            Ok(response) if response.status == StatusCode::CREATED => {
                let claim: Value = serde_json::from_slice(&response.body).unwrap_or_default();
                tally.accept(&claim["allocations"], started);
            }
            Ok(response) if response.status == StatusCode::CONFLICT => {
                tally.conflict(&response.body);
                tally.unplaced += 1;
            }
            Ok(response) => {
                tally.error(format!("POST {}", response.status.as_u16()));
                tally.unplaced += 1;
            }
            Err(why) => {
                // The claim's amounts are unknown until the server says where: the
                // read-back cannot bound them, so such a run fails on `held`.
                tally.error(why);
                tally.unplaced += 1;
            }
        }
    }
    tally
}

/// Every instance in one pick-and-claim.
async fn pick_all(client: &Client, args: &MassStartArgs, claim_as: &ClaimAs) -> Tally {
    let mut tally = Tally::default();
    let mut body = pick_body(args, claim_as);
    let consumers: Vec<Value> = (0..args.instances)
        .map(|_| json!({"consumer_uuid": Uuid::new_v4()}))
        .collect();
    body["consumers"] = json!(consumers);
    body["affinity"] = json!(args.affinity);
    let started = Instant::now();
    tally.requests += 1;
    match send(client, Method::POST, "/claims", Some(&body)).await {
        Ok(response) if response.status == StatusCode::CREATED => {
            let answer: Value = serde_json::from_slice(&response.body).unwrap_or_default();
            for claim in answer["claims"].as_array().into_iter().flatten() {
                tally.accept(&claim["allocations"], started);
            }
            tally.unplaced = answer["unplaced"].as_array().map_or(0, |u| u.len() as u64);
        }
        Ok(response) if response.status == StatusCode::CONFLICT => {
            tally.conflict(&response.body);
            tally.unplaced = u64::from(args.instances);
        }
        Ok(response) => {
            tally.error(format!("POST {}", response.status.as_u16()));
            tally.unplaced = u64::from(args.instances);
        }
        Err(why) => {
            tally.error(why);
            tally.unplaced = u64::from(args.instances);
        }
    }
    tally
}

/// One provider's figures for the over-commit check.
struct Held {
    /// Per class: `(total - reserved) * allocation_ratio`, rounded down.
    capacity: Vec<(String, u64)>,
    /// Per class: allocated plus pending.
    used: std::collections::BTreeMap<String, u64>,
}

/// Reads what `rp` has and holds. A Placement without pending claims answers 404 to
/// `/pending`, which counts as nothing pending.
async fn read_held(client: &Client, rp: &str) -> anyhow::Result<Held> {
    let get = |path: String| async move {
        let response = client.request(Method::GET, &path, None).await?;
        anyhow::Ok((
            response.status,
            serde_json::from_slice::<Value>(&response.body),
        ))
    };
    let (status, inventories) = get(format!("/resource_providers/{rp}/inventories")).await?;
    if status != StatusCode::OK {
        bail!("GET /resource_providers/{rp}/inventories: {status}");
    }
    let inventories = inventories?;
    let mut capacity = Vec::new();
    for (class, inventory) in inventories["inventories"].as_object().into_iter().flatten() {
        let total = inventory["total"].as_u64().unwrap_or(0);
        let reserved = inventory["reserved"].as_u64().unwrap_or(0);
        let ratio = inventory["allocation_ratio"].as_f64().unwrap_or(1.0);
        // Placement's own rounding: the product, truncated.
        capacity.push((
            class.clone(),
            (total.saturating_sub(reserved) as f64 * ratio) as u64,
        ));
    }
    let mut used = std::collections::BTreeMap::new();
    let (status, usages) = get(format!("/resource_providers/{rp}/usages")).await?;
    if status != StatusCode::OK {
        bail!("GET /resource_providers/{rp}/usages: {status}");
    }
    for (class, n) in usages?["usages"].as_object().into_iter().flatten() {
        *used.entry(class.clone()).or_default() += n.as_u64().unwrap_or(0);
    }
    let (status, pending) = get(format!("/resource_providers/{rp}/pending")).await?;
    if status == StatusCode::OK {
        for (class, n) in pending?["pending"].as_object().into_iter().flatten() {
            *used.entry(class.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
    } else if status != StatusCode::NOT_FOUND {
        bail!("GET /resource_providers/{rp}/pending: {status}");
    }
    Ok(Held { capacity, used })
}

/// Where a provider holds more than it has, one line each.
fn over_capacity(rp: &str, held: &Held) -> Vec<String> {
    let mut over = Vec::new();
    for (class, used) in &held.used {
        let capacity = held
            .capacity
            .iter()
            .find(|(c, _)| c == class)
            .map_or(0, |(_, n)| *n);
        if *used > capacity {
            over.push(format!(
                "{rp}: {class} holds {used} of a capacity of {capacity}"
            ));
        }
    }
    over
}

/// The over-commit check over every provider the run claimed on (the groups
/// scenario's too).
pub(super) async fn check_capacity(
    client: &Client,
    providers: &BTreeSet<String>,
) -> anyhow::Result<Vec<String>> {
    let results: Vec<anyhow::Result<Vec<String>>> = stream::iter(providers)
        .map(|rp| async move { Ok(over_capacity(rp, &read_held(client, rp).await?)) })
        .buffer_unordered(CHECK_CONCURRENCY)
        .collect()
        .await;
    let mut over = Vec::new();
    for result in results {
        over.extend(result?);
    }
    Ok(over)
}

pub async fn mass_start(args: MassStartArgs) -> anyhow::Result<()> {
    let endpoint = &args.endpoint;
    let client = endpoint.client(&endpoint.url, &endpoint.token)?;
    let minor = minor(&endpoint.microversion);
    if minor < 12 {
        bail!(
            "--microversion {}: Nova's weighing reads provider summaries' capacity and \
             usage, which need 1.12 or later",
            endpoint.microversion
        );
    }
    if !["none", "different_roots"].contains(&args.affinity.as_str()) {
        bail!("--affinity {}: none or different_roots", args.affinity);
    }
    check_seeded(&client).await?;
    let claim_as = ClaimAs {
        minor,
        project: format!("{PROJECT}-{}", Uuid::new_v4().simple()).into(),
    };
    let started = Instant::now();
    let tally = place(&client, &args, &claim_as).await?;
    let wall = started.elapsed();
    let rss = read_rss_sum(&args.pid)?;
    let held = held::verify(
        &client,
        &claim_as.project,
        &tally.ledger,
        Duration::ZERO,
        args.way.holding(),
    )
    .await;
    let over = check_capacity(&client, &tally.providers).await;
    let run = Run {
        client: &client,
        claim_as: &claim_as,
        tally: &tally,
        wall,
        rss,
        held: &held,
        over: &over,
    };
    run.print(&args);
    if let Some(file) = &args.json {
        std::fs::write(file, serde_json::to_string_pretty(&run.json(&args))? + "\n")
            .with_context(|| format!("writing {}", file.display()))?;
    }
    // Last, so that the figures are out before the run fails on them.
    held?;
    let over = over?;
    if !over.is_empty() {
        bail!("{} classes over capacity after the run", over.len());
    }
    Ok(())
}

/// Places every instance the way `--way` says: one request for all (`pick-all`), or
/// `--schedulers` concurrent schedulers taking the next instance until none is left.
async fn place(client: &Client, args: &MassStartArgs, claim_as: &ClaimAs) -> anyhow::Result<Tally> {
    if args.way == Way::PickAll {
        return Ok(pick_all(client, args, claim_as).await);
    }
    let next = Arc::new(AtomicU32::new(0));
    let candidates = format!("/allocation_candidates?{FLAVOUR}&limit={}", args.limit);
    let body = pick_body(args, claim_as);
    let workers: Vec<_> = (0..args.schedulers)
        .map(|_| {
            let (client, next) = (client.clone(), next.clone());
            match args.way {
                Way::Nova => tokio::spawn(nova_scheduler(
                    client,
                    next,
                    args.instances,
                    candidates.clone(),
                    claim_as.clone(),
                )),
                _ => tokio::spawn(pick_scheduler(client, next, args.instances, body.clone())),
            }
        })
        .collect();
    let mut tally = Tally::default();
    for worker in workers {
        tally.merge(worker.await.context("a scheduler panicked")?);
    }
    Ok(tally)
}

/// A finished run and its checks, for the report.
struct Run<'a> {
    client: &'a Client,
    claim_as: &'a ClaimAs,
    tally: &'a Tally,
    /// From the start to the last instance placed.
    wall: Duration,
    /// The server's (VmRSS, VmHWM), with `--pid`.
    rss: Option<(u64, u64)>,
    /// The read-back: the server holds exactly what it accepted.
    held: &'a anyhow::Result<ProjectUsages>,
    /// The over-commit check: one line per class over capacity.
    over: &'a anyhow::Result<Vec<String>>,
}

/// The checks after a start, on stdout: the read-back, the over-commit check over
/// the `providers` claimed on, and the server's memory with `--pid`.
pub(super) fn print_checks(
    held: &anyhow::Result<ProjectUsages>,
    over: &anyhow::Result<Vec<String>>,
    providers: usize,
    rss: Option<(u64, u64)>,
    pid: &[u32],
) {
    match held {
        Ok(_) => println!("  held: the server holds exactly what it accepted"),
        Err(why) => println!("  NOT HELD: {why:#}"),
    }
    match over {
        Ok(over) if over.is_empty() => println!(
            "  over-commit: none on the {} providers claimed on",
            providers
        ),
        Ok(over) => println!(
            "  OVER-COMMIT on {} classes:\n    {}",
            over.len(),
            over.join("\n    ")
        ),
        Err(why) => println!("  over-commit check failed: {why:#}"),
    }
    if let Some((current, peak)) = rss {
        println!("server pid {:?}: VmRSS {current} kB, VmHWM {peak} kB", pid);
    }
}

impl Run<'_> {
    /// The report on stdout: a line saying what ran, the figures' table, then the
    /// checks.
    fn print(&self, args: &MassStartArgs) {
        let tally = self.tally;
        println!(
            "mass start {} of {} `small` on flat ({} roots), {} against {}",
            args.way.name(),
            args.instances,
            args.roots,
            match args.way {
                Way::PickAll => format!("one request, affinity {}", args.affinity),
                _ => format!("{} schedulers", args.schedulers),
            },
            self.client.base()
        );
        println!(
            "{:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>7}",
            "wall s",
            "placed",
            "unplaced",
            "requests",
            "409 gen",
            "409 cap",
            "retries",
            "p50 ms",
            "p99 ms"
        );
        println!(
            "{:>9.3} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10.3} {:>7.1}",
            self.wall.as_secs_f64(),
            tally.ledger.accepted,
            tally.unplaced,
            tally.requests,
            tally.conflicts_generation,
            tally.conflicts_capacity,
            tally.retries,
            ms(percentile(&tally.latencies, 0.50)),
            ms(percentile(&tally.latencies, 0.99)),
        );
        for (what, n) in tally.errors.iter() {
            println!("  errors {what}: {n}");
        }
        print_checks(
            self.held,
            self.over,
            tally.providers.len(),
            self.rss,
            &args.pid,
        );
    }

    /// The report as the `--json` file holds it.
    fn json(&self, args: &MassStartArgs) -> Value {
        let tally = self.tally;
        json!({
            "way": args.way.name(),
            "roots": args.roots,
            "instances": args.instances,
            "schedulers": if args.way == Way::PickAll { 1 } else { args.schedulers },
            "affinity": if args.way == Way::PickAll { Some(&args.affinity) } else { None },
            "sort": (args.way != Way::Nova).then(|| args.sort()),
            "limit": if args.way == Way::Nova { Some(args.limit) } else { None },
            "url": self.client.base(),
            "project_id": &*self.claim_as.project,
            "wall_s": self.wall.as_secs_f64(),
            "placed": tally.ledger.accepted,
            "unplaced": tally.unplaced,
            "requests": tally.requests,
            "conflicts_generation": tally.conflicts_generation,
            "conflicts_capacity": tally.conflicts_capacity,
            "retries": tally.retries,
            "errors": tally.errors,
            "p50_ms": ms(percentile(&tally.latencies, 0.50)),
            "p99_ms": ms(percentile(&tally.latencies, 0.99)),
            "providers_claimed_on": tally.providers.len(),
            "held": self.held.as_ref().map_or_else(|why| json!({"error": format!("{why:#}")}), |_| json!(true)),
            "over_capacity": match self.over {
                Ok(over) => json!(over),
                Err(why) => json!({"error": format!("{why:#}")}),
            },
            "rss_kb": rss_json(self.rss),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_weighs_by_free_vcpu_and_keeps_the_first_of_equals() {
        let answer = json!({
            "allocation_requests": [
                {"allocations": {"a": {"resources": {"VCPU": 2}}, "ss": {"resources": {"DISK_GB": 40}}}},
                {"allocations": {"b": {"resources": {"VCPU": 2, "DISK_GB": 40}}}},
                {"allocations": {"c": {"resources": {"VCPU": 2}}}},
                {"allocations": {"d": {"resources": {"VCPU": 2}}}},
            ],
            "provider_summaries": {
                "a": {"resources": {"VCPU": {"capacity": 256, "used": 200}}},
                "b": {"resources": {"VCPU": {"capacity": 256, "used": 8}}},
                "c": {"resources": {"VCPU": {"capacity": 256, "used": 8}}},
                "d": {"resources": {"VCPU": {"capacity": 64, "used": 0}}},
                "ss": {"resources": {"DISK_GB": {"capacity": 500000, "used": 0}}},
            },
        });
        let best = weigh_spread(&answer).unwrap();
        assert!(best.get("b").is_some(), "{best}");
        assert!(weigh_spread(&json!({"allocation_requests": []})).is_none());
    }

    #[test]
    fn over_capacity_counts_allocations_and_pending_against_capacity() {
        let held = Held {
            capacity: vec![("VCPU".into(), 256), ("MEMORY_MB".into(), 258048)],
            used: [("VCPU".into(), 257), ("MEMORY_MB".into(), 258048)].into(),
        };
        assert_eq!(
            over_capacity("rp", &held),
            ["rp: VCPU holds 257 of a capacity of 256"]
        );
        // A class held without any inventory is over a capacity of zero.
        let orphan = Held {
            capacity: vec![],
            used: [("DISK_GB".into(), 1)].into(),
        };
        assert_eq!(over_capacity("rp", &orphan).len(), 1);
    }
}
