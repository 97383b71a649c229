//! `allot bench claims`: concurrent writers on a seeded `flat` shape.
//!
//! - `storm`: `--concurrency` clients each claim `VCPU:1, MEMORY_MB:512` for a fresh
//!   consumer on a random root, back to back: the write path alone.
//! - `schedule`: each client runs a scheduler's loop, asks for candidates (`small`,
//!   `limit=10`), picks one at random and claims it for a fresh consumer: reads and
//!   writes race as they do under real schedulers, so some claims are refused.
//!
//! - `pick`: each client asks the server to choose and claim in one step
//!   (pick-and-claim, `POST /claims` with `small`), weighed by `--sort` (`spread` by
//!   default; `none` for the search's own order): the server's choice, back to back.
//!
//! `--server-groups N` (with `pick`) makes N anti-affinity server groups for the
//! run before the clock starts, and each pick names one of them in turn (the k-th
//! pick the group k mod N): the writer then keeps the rule as it chooses, and its
//! time per pick (`/metrics`) can be set beside that of picks naming none. The
//! groups grow for as long as the run lasts (a pick a group every N picks).
//!
//! `--pickers N` adds N clients that send such picks beside the main mode, paced at
//! `--pick-rate` a second in all (a storm beside the schedulers that let the server
//! choose); their picks are counted and timed apart, for a project of their own.
//!
//! `--readers N` adds N clients that repeat one of the shape's candidate queries
//! (`--reader-query`, `nolimit` by default) for the whole run: a mixed load, to see
//! how much a large reader costs the writers. Their queries are counted and timed
//! apart from the claims.
//!
//! The run is bounded: no client starts a request after `--seconds`, and a request
//! still unanswered 30 s later is given up (and counted as an error), so the command
//! ends by itself. Only the given `--url` (and each `--also-url`: several nodes of one
//! deployment, the clients spread over them in turn) is spoken to. Consumers are fresh v4 uuids
//! (a rerun never collides with an earlier one); the roots and candidates picked come
//! from a small xorshift seeded with `--seed` and the client's index, so the choices
//! are repeatable without a new dependency.
//!
//! Only a 2xx answer is an accepted claim, in every mode: a scheduler's loop is
//! finished when its claim is accepted, not when anything came back. A 409 is a
//! refusal (capacity, or a generation that moved); any other status, or no answer,
//! is an error, counted by kind. Latency percentiles cover the claims the server
//! decided (accepted or refused with 409); throughput is accepted claims over the
//! measured wall time, from the start until the last claiming client is done (a
//! reader's last query, which may end later, does not stretch it).
//!
//! Afterwards the run reads back what the server holds for it and fails unless that
//! is exactly what it accepted (`held`: the run claims for a project of its own).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use allot_client::{Client, Method, ProjectUsages, StatusCode};
use anyhow::{bail, Context};
use serde_json::{json, Value};
use uuid::Uuid;

use super::groups::{create_server_groups, InTurn};
use super::held::{self, Ledger};
use super::query::{ms, percentile, read_rss_sum, rss_json};
use super::shapes::{named, Shape, FLAVOUR, PROJECT, USER};
use super::Endpoint;

/// How long one request may stay unanswered before the client gives up on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// `allot bench claims`.
#[derive(clap::Args, Debug)]
pub struct ClaimsArgs {
    /// What the clients do.
    #[arg(long, value_enum)]
    mode: Mode,
    /// The seeded shape (only `flat` has the capacity these claims need).
    #[arg(long, value_enum, default_value = "flat")]
    shape: Shape,
    /// How many roots were seeded (`allot bench seed --roots`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    roots: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// How long the clients keep starting requests.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    seconds: u64,
    /// Seeds the choice of roots and candidates (client K uses seed + K).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Extra clients that repeat `--reader-query` while the claims run.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    readers: u32,
    /// The shape's query the readers repeat (flat: small, nolimit, member_of, gold).
    #[arg(long, default_value = "nolimit")]
    reader_query: String,
    /// The server's weighing of `pick` and of the pickers (`pack`, `spread`,
    /// `random`; `none` for the search's own order).
    #[arg(long, default_value = "spread")]
    sort: String,
    /// Extra clients that send picks beside the main mode, paced (`--pick-rate`).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pickers: u32,
    /// The pickers' picks a second, in all.
    #[arg(long, default_value_t = 1000.0)]
    pick_rate: f64,
    /// `pick`: make N anti-affinity server groups for the run and have each pick
    /// name one, in turn (0: none).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    server_groups: u32,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Another node of the same deployment (repeatable): client K speaks to the
    /// (K mod N)-th of `--url` and these, and so does reader K.
    #[arg(long)]
    also_url: Vec<String>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The server's process id: report its VmRSS and VmHWM after the run
    /// (repeatable: the figures of all the processes given are summed).
    #[arg(long)]
    pid: Vec<u32>,
}

/// What each client does in a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// PUT a small claim on a random root.
    Storm,
    /// GET candidates, pick one, PUT it.
    Schedule,
    /// POST a pick-and-claim of `small`: the server chooses.
    Pick,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Storm => "storm",
            Mode::Schedule => "schedule",
            Mode::Pick => "pick",
        }
    }

    /// What the mode's accepted claims are held as.
    fn holding(self) -> held::Holding {
        match self {
            Mode::Pick => held::Holding::Claims,
            Mode::Storm | Mode::Schedule => held::Holding::Allocations,
        }
    }
}

/// The candidate query of `schedule`: `small` cut to ten answers, as a scheduler asks.
const SCHEDULE_QUERY: &str =
    "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&required=HW_CPU_X86_AVX2,!COMPUTE_STATUS_DISABLED&limit=10";

/// xorshift64*: tiny, deterministic, good enough to spread picks.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Zero is xorshift's fixed point; splitmix's constant moves any seed off it.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (n > 0) for picking.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Answers that were no decision, by what they were (a status such as `500`, `GET
/// 500` for a failed candidate query, `transport` or `timeout` when none came):
/// counted in each client's tally and added up at the end.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub(super) struct Errors(BTreeMap<String, u64>);

impl Errors {
    pub fn count(&mut self, what: impl Into<String>) {
        *self.0.entry(what.into()).or_default() += 1;
    }

    pub fn merge(&mut self, other: Errors) {
        for (what, n) in other.0 {
            *self.0.entry(what).or_default() += n;
        }
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(what, n)| (what.as_str(), *n))
    }
}

/// Whether a 409's body is Placement's generation conflict (a provider or consumer
/// changed underneath), rather than a refusal for capacity.
pub(super) fn is_generation_conflict(body: &[u8]) -> bool {
    let envelope: Value = serde_json::from_slice(body).unwrap_or_default();
    envelope["errors"][0]["code"] == "placement.concurrent_update"
}

/// What one client saw.
#[derive(Debug, Default)]
struct Tally {
    /// Claims the server accepted (2xx) or never answered, and what they add up to.
    ledger: Ledger,
    /// Claims attempted (PUTs sent).
    attempts: u64,
    /// 409s on the claim: not enough capacity.
    refused_capacity: u64,
    /// 409s on the claim: a generation moved underneath.
    refused_generation: u64,
    /// 409s on a pick: `allot.server_group.violated` (a pick keeps its group's
    /// rule as it chooses, so none is expected).
    refused_server_group: u64,
    /// Candidate queries that came back with nothing to pick (schedule).
    no_candidates: u64,
    /// Anything else.
    errors: Errors,
    /// One per claim the server decided (2xx or 409): the claim alone (storm), or
    /// the loop that led to it (schedule).
    latencies: Vec<Duration>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.ledger.merge(other.ledger);
        self.attempts += other.attempts;
        self.refused_capacity += other.refused_capacity;
        self.refused_generation += other.refused_generation;
        self.refused_server_group += other.refused_server_group;
        self.no_candidates += other.no_candidates;
        self.errors.merge(other.errors);
        self.latencies.extend(other.latencies);
    }

    fn error(&mut self, what: impl Into<String>) {
        self.errors.count(what);
    }
}

/// What the readers saw, all of them together.
#[derive(Debug, Default)]
struct ReaderTally {
    /// One per query answered 200: from sending it until its whole body was in.
    latencies: Vec<Duration>,
    /// Anything else.
    errors: Errors,
}

impl ReaderTally {
    fn merge(&mut self, other: ReaderTally) {
        self.latencies.extend(other.latencies);
        self.errors.merge(other.errors);
    }

    /// The readers' table, under the claims'.
    fn print(&self, args: &ClaimsArgs) {
        println!(
            "{:>10} {:>10} {:>10} {:>10} {:>8}",
            "readers", "queries", "p50 ms", "p99 ms", "errors"
        );
        println!(
            "{:>10} {:>10} {:>10.3} {:>10.3} {:>8}",
            format!("{}x{}", args.readers, args.reader_query),
            self.latencies.len(),
            ms(percentile(&self.latencies, 0.50)),
            ms(percentile(&self.latencies, 0.99)),
            self.errors.total()
        );
        for (what, n) in self.errors.iter() {
            println!("  reader errors {what}: {n}");
        }
    }

    /// The readers' figures as the `--json` file holds them.
    fn json(&self, args: &ClaimsArgs) -> Value {
        json!({
            "clients": args.readers,
            "query": args.reader_query,
            "queries": self.latencies.len(),
            "p50_ms": ms(percentile(&self.latencies, 0.50)),
            "p99_ms": ms(percentile(&self.latencies, 0.99)),
            "errors": self.errors,
        })
    }
}

/// One reader until the deadline: the same candidate query, back to back. The body
/// is read in full but not parsed: parsing megabytes of JSON would take CPU from the
/// server on a small machine and measure the client instead.
async fn reader_loop(client: Client, path: String, deadline: Instant) -> ReaderTally {
    let mut tally = ReaderTally::default();
    while Instant::now() < deadline {
        let started = Instant::now();
        match send(&client, Method::GET, &path, None).await {
            Ok(response) if response.status == StatusCode::OK => {
                tally.latencies.push(started.elapsed())
            }
            Ok(response) => tally.errors.count(response.status.as_u16().to_string()),
            Err(why) => tally.errors.count(why),
        }
    }
    tally
}

/// One request with the run's timeout; `Err` names why there is no answer.
pub(super) async fn send(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<allot_client::Response, &'static str> {
    match tokio::time::timeout(REQUEST_TIMEOUT, client.request(method, path, body)).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(_)) => Err("transport"),
        Err(_) => Err("timeout"),
    }
}

/// The minor version of a `1.N` microversion (`latest` counts as new).
pub(super) fn minor(microversion: &str) -> u32 {
    microversion
        .strip_prefix("1.")
        .and_then(|m| m.parse().ok())
        .unwrap_or(u32::MAX)
}

/// The PUT body claiming `allocations` for a fresh consumer of `project`, in the
/// form the microversion wants: a null generation from 1.28, a consumer type from
/// 1.38.
pub(super) fn claim_body(allocations: &Value, minor: u32, project: &str) -> Value {
    let mut body = json!({
        "allocations": allocations,
        "project_id": project,
        "user_id": USER,
    });
    if minor >= 28 {
        body["consumer_generation"] = Value::Null;
    }
    if minor >= 38 {
        body["consumer_type"] = json!("INSTANCE");
    }
    body
}

/// What a run's claims share.
#[derive(Debug, Clone)]
pub(super) struct ClaimAs {
    /// The minor version of the microversion spoken.
    pub minor: u32,
    /// The run's own project.
    pub project: Arc<str>,
}

/// Sends one claim of `allocations` for a fresh consumer and records its outcome;
/// `true` when the server decided it (2xx or 409).
async fn claim(
    client: &Client,
    allocations: &Value,
    claim_as: &ClaimAs,
    tally: &mut Tally,
) -> bool {
    let path = format!("/allocations/{}", Uuid::new_v4());
    let body = claim_body(allocations, claim_as.minor, &claim_as.project);
    tally.attempts += 1;
    match send(client, Method::PUT, &path, Some(&body)).await {
        Ok(response) if response.status.is_success() => {
            tally.ledger.accept(allocations);
            true
        }
        Ok(response) if response.status == StatusCode::CONFLICT => {
            if is_generation_conflict(&response.body) {
                tally.refused_generation += 1;
            } else {
                tally.refused_capacity += 1;
            }
            true
        }
        Ok(response) => {
            tally.error(response.status.as_u16().to_string());
            false
        }
        Err(why) => {
            tally.ledger.unanswered(allocations);
            tally.error(why);
            false
        }
    }
}

/// How a run's picks are made: weighed by `sort`, each naming the next of `groups`
/// (none when there are none).
#[derive(Debug, Clone)]
struct PickAs {
    sort: Arc<str>,
    groups: InTurn,
}

impl PickAs {
    fn new(sort: &str, groups: InTurn) -> PickAs {
        let sort = sort.into();
        PickAs { sort, groups }
    }
}

/// The body of a pick-and-claim of `small` for a fresh consumer, weighed and named
/// as `pick_as` says.
fn pick_body(claim_as: &ClaimAs, pick_as: &PickAs) -> Value {
    let mut body = json!({
        "request": FLAVOUR,
        "consumer_uuid": Uuid::new_v4(),
        "project_id": &*claim_as.project,
        "user_id": USER,
    });
    if &*pick_as.sort != "none" {
        body["sort"] = json!(&*pick_as.sort);
    }
    if let Some(group) = pick_as.groups.next() {
        body["server_group"] = json!(group);
    }
    body
}

/// Sends one pick-and-claim and records its outcome; `true` when the server decided
/// it (201 or 409).
async fn pick(client: &Client, claim_as: &ClaimAs, pick_as: &PickAs, tally: &mut Tally) -> bool {
    let body = pick_body(claim_as, pick_as);
    tally.attempts += 1;
    match send(client, Method::POST, "/claims", Some(&body)).await {
        Ok(response) if response.status == StatusCode::CREATED => {
            let claim: Value = serde_json::from_slice(&response.body).unwrap_or_default();
            tally.ledger.accept(&claim["allocations"]);
            true
        }
        Ok(response) if response.status == StatusCode::CONFLICT => {
            let envelope: Value = serde_json::from_slice(&response.body).unwrap_or_default();
            if envelope["errors"][0]["code"] == "allot.server_group.violated" {
                tally.refused_server_group += 1;
            } else {
                tally.refused_capacity += 1;
            }
            true
        }
        Ok(response) => {
            tally.error(format!("POST {}", response.status.as_u16()));
            false
        }
        Err(why) => {
            // Where it went is unknown: the read-back cannot bound it, and fails.
            tally.error(why);
            false
        }
    }
}

/// One picker until the deadline: a pick every `every`, on a schedule of its own
/// (a late pick is sent at once, not skipped, and the next keeps the schedule; none
/// is sent after the deadline, however late the schedule).
async fn picker_loop(
    client: Client,
    claim_as: ClaimAs,
    pick_as: PickAs,
    every: Duration,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let mut next = Instant::now();
    while next < deadline && Instant::now() < deadline {
        tokio::time::sleep_until(next.into()).await;
        let started = Instant::now();
        if pick(&client, &claim_as, &pick_as, &mut tally).await {
            tally.latencies.push(started.elapsed());
        }
        next += every;
    }
    tally
}

/// One client until the deadline.
async fn client_loop(
    client: Client,
    mode: Mode,
    roots: u64,
    mut rng: Rng,
    claim_as: ClaimAs,
    pick_as: PickAs,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let candidates_path = format!("/allocation_candidates?{SCHEDULE_QUERY}");
    while Instant::now() < deadline {
        let started = Instant::now();
        match mode {
            Mode::Storm => {
                let root = named(&format!("cn{}", rng.below(roots)));
                let allocations =
                    json!({root.to_string(): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}});
                if claim(&client, &allocations, &claim_as, &mut tally).await {
                    tally.latencies.push(started.elapsed());
                }
            }
            Mode::Pick => {
                if pick(&client, &claim_as, &pick_as, &mut tally).await {
                    tally.latencies.push(started.elapsed());
                }
            }
            Mode::Schedule => {
                let response = match send(&client, Method::GET, &candidates_path, None).await {
                    Ok(response) if response.status == StatusCode::OK => response,
                    Ok(response) => {
                        tally.error(format!("GET {}", response.status.as_u16()));
                        continue;
                    }
                    Err(why) => {
                        tally.error(why);
                        continue;
                    }
                };
                let answer: Value = serde_json::from_slice(&response.body).unwrap_or_default();
                let requests = answer["allocation_requests"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if requests.is_empty() {
                    tally.no_candidates += 1;
                    continue;
                }
                let pick = rng.below(requests.len() as u64) as usize;
                let allocations = &requests[pick]["allocations"];
                if claim(&client, allocations, &claim_as, &mut tally).await {
                    tally.latencies.push(started.elapsed());
                }
            }
        }
    }
    tally
}

pub async fn claims(args: ClaimsArgs) -> anyhow::Result<()> {
    let reader_path = reader_path(&args)?;
    let endpoint = &args.endpoint;
    let mut clients = Vec::new();
    for url in std::iter::once(&endpoint.url).chain(&args.also_url) {
        clients.push(endpoint.client(url, &endpoint.token)?);
    }
    let minor = minor(&endpoint.microversion);
    if minor < 9 {
        bail!(
            "--microversion {}: the run reads its usage back through GET /usages, \
             which needs 1.9 or later",
            endpoint.microversion
        );
    }
    // A project of the run's own: what it holds afterwards is this run's claims alone.
    let claim_as = ClaimAs {
        minor,
        project: format!("{PROJECT}-{}", Uuid::new_v4().simple()).into(),
    };
    // One request to each node first, so that a wrong URL or token fails loudly
    // instead of as a table full of errors.
    for client in &clients {
        check_seeded(client).await?;
    }
    if !(args.pick_rate.is_finite() && args.pick_rate > 0.0) {
        bail!("--pick-rate {}: a positive rate", args.pick_rate);
    }
    // The pickers' claims go to a project of their own, read back apart.
    let pickers_as = ClaimAs {
        minor,
        project: format!("{}-pickers", claim_as.project).into(),
    };
    let (tally, reader_tally, picker_tally, wall) =
        run_clients(&args, &clients, &reader_path, &claim_as, &pickers_as).await?;
    let rss = read_rss_sum(&args.pid)?;
    // Every client has its answers: a single node shows its writes at once, other
    // nodes follow the shared log and get a moment to catch up.
    let patience = if args.also_url.is_empty() {
        Duration::ZERO
    } else {
        Duration::from_secs(5)
    };
    let held = held::verify(
        &clients[0],
        &claim_as.project,
        &tally.ledger,
        patience,
        args.mode.holding(),
    )
    .await;
    let pickers_held = pickers_held(&args, &clients[0], &pickers_as, &picker_tally, patience).await;

    let report = Report::new(&tally, wall);
    let bases = clients
        .iter()
        .map(Client::base)
        .collect::<Vec<_>>()
        .join(" ");
    report.print(&args, &bases, &tally);
    if args.readers > 0 {
        reader_tally.print(&args);
    }
    let pickers = Pickers {
        report: Report::new(&picker_tally, wall),
        tally: &picker_tally,
        held: &pickers_held,
    };
    pickers.print(&args);
    if let Some((current, peak)) = rss {
        println!(
            "server pid {:?}: VmRSS {current} kB, VmHWM {peak} kB",
            args.pid
        );
    }
    print_held(&held, &claim_as.project);
    if let Some(file) = &args.json {
        let mut value = report.json(&args, &bases, &tally);
        value["project_id"] = json!(&*claim_as.project);
        value["ledger"] = tally.ledger.json();
        value["held"] = match &held {
            Ok(usages) => {
                json!({"usages": usages.classes, "consumer_count": usages.consumer_count})
            }
            Err(why) => json!({"error": format!("{why:#}")}),
        };
        value["rss_kb"] = rss_json(rss);
        value["readers"] = if args.readers > 0 {
            reader_tally.json(&args)
        } else {
            Value::Null
        };
        value["pickers"] = pickers.json(&args);
        std::fs::write(file, serde_json::to_string_pretty(&value)? + "\n")
            .with_context(|| format!("writing {}", file.display()))?;
    }
    // Last, so that the figures are out before the run fails on them.
    held.map(drop).and(pickers_held)
}

/// The groups `--server-groups` asks for, made for the run's project before the
/// clock starts (none without it).
async fn server_groups(
    args: &ClaimsArgs,
    client: &Client,
    claim_as: &ClaimAs,
) -> anyhow::Result<Vec<Uuid>> {
    if args.server_groups == 0 {
        return Ok(Vec::new());
    }
    if args.mode != Mode::Pick {
        bail!("--server-groups goes with --mode pick");
    }
    let project = &claim_as.project;
    create_server_groups(client, args.server_groups, project, "bench-pick").await
}

/// Reads back what the pickers were granted (pending claims of their own project);
/// nothing to read without pickers.
async fn pickers_held(
    args: &ClaimsArgs,
    client: &Client,
    pickers_as: &ClaimAs,
    tally: &Tally,
    patience: Duration,
) -> anyhow::Result<()> {
    if args.pickers == 0 {
        return Ok(());
    }
    let project = &pickers_as.project;
    held::verify(
        client,
        project,
        &tally.ledger,
        patience,
        held::Holding::Claims,
    )
    .await
    .map(drop)
}

/// The read-back's line.
fn print_held(held: &anyhow::Result<ProjectUsages>, project: &str) {
    match held {
        Ok(_) => println!("  held: the server holds exactly what it accepted (project {project})"),
        Err(why) => println!("  NOT HELD: {why:#}"),
    }
}

/// What the pickers (`--pickers`) saw, beside the main mode.
struct Pickers<'a> {
    report: Report,
    tally: &'a Tally,
    held: &'a anyhow::Result<()>,
}

impl Pickers<'_> {
    /// Their line, under the claims' table (none without pickers).
    fn print(&self, args: &ClaimsArgs) {
        if args.pickers == 0 {
            return;
        }
        println!(
            "pickers: {} at {}/s in all (sort {}): {:.1} picks/s, p50 {:.3} ms, p99 {:.3} ms, \
             409 {}, errors {}",
            args.pickers,
            args.pick_rate,
            args.sort,
            self.report.per_second,
            ms(self.report.p50),
            ms(self.report.p99),
            self.tally.refused_capacity,
            self.tally.errors.total()
        );
        if let Err(why) = self.held {
            println!("  pickers NOT HELD: {why:#}");
        }
    }

    /// Their figures as the `--json` file holds them (null without pickers).
    fn json(&self, args: &ClaimsArgs) -> Value {
        if args.pickers == 0 {
            return Value::Null;
        }
        json!({
            "clients": args.pickers,
            "rate": args.pick_rate,
            "sort": args.sort,
            "per_second": self.report.per_second,
            "accepted": self.tally.ledger.accepted,
            "refused": self.tally.refused_capacity,
            "errors": self.tally.errors,
            "p50_ms": ms(self.report.p50),
            "p99_ms": ms(self.report.p99),
            "held": self.held.is_ok(),
        })
    }
}

/// The readers' candidate query, `--reader-query` of the shape, checked even without
/// readers: a misspelt name must not pass unnoticed.
fn reader_path(args: &ClaimsArgs) -> anyhow::Result<String> {
    if args.shape != Shape::Flat {
        bail!(
            "--shape {}: claims run on a seeded flat shape only",
            args.shape.name()
        );
    }
    let queries = args.shape.queries();
    let Some((_, reader_query)) = queries.iter().find(|(name, _)| *name == args.reader_query)
    else {
        let names: Vec<&str> = queries.iter().map(|(name, _)| *name).collect();
        bail!(
            "--reader-query {}: not a query of {} (one of {})",
            args.reader_query,
            args.shape.name(),
            names.join(", ")
        );
    };
    Ok(format!("/allocation_candidates?{reader_query}"))
}

/// Fails unless `client`'s server has the flat shape's first root: a wrong URL or
/// token then fails loudly, before the run, instead of as a table full of errors.
pub(super) async fn check_seeded(client: &Client) -> anyhow::Result<()> {
    let probe = client
        .request(
            Method::GET,
            &format!("/resource_providers/{}", named("cn0")),
            None,
        )
        .await?;
    if probe.status != StatusCode::OK {
        bail!(
            "GET {}/resource_providers/{{cn0}}: {} (is the flat shape seeded there?)",
            client.base(),
            probe.status
        );
    }
    Ok(())
}

/// The claiming clients and the readers, client K and reader K on node K mod N,
/// until the deadline; what they saw, and the wall time until the last claiming
/// client was done.
async fn run_clients(
    args: &ClaimsArgs,
    clients: &[Client],
    reader_path: &str,
    claim_as: &ClaimAs,
    pickers_as: &ClaimAs,
) -> anyhow::Result<(Tally, ReaderTally, Tally, Duration)> {
    let node = |k: u32| clients[k as usize % clients.len()].clone();
    // The groups are made before the clock starts.
    let groups = server_groups(args, &clients[0], claim_as).await?;
    let pick_as = PickAs::new(&args.sort, InTurn::new(groups));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let readers: Vec<_> = (0..args.readers)
        .map(|k| tokio::spawn(reader_loop(node(k), reader_path.to_owned(), deadline)))
        .collect();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|k| {
            let rng = Rng::new(args.seed.wrapping_add(u64::from(k)));
            tokio::spawn(client_loop(
                node(k),
                args.mode,
                args.roots,
                rng,
                claim_as.clone(),
                pick_as.clone(),
                deadline,
            ))
        })
        .collect();
    let every = Duration::from_secs_f64(f64::from(args.pickers.max(1)) / args.pick_rate);
    // The pickers name no group: they are the load beside the main mode.
    let pickers_pick_as = PickAs::new(&args.sort, InTurn::default());
    let pickers: Vec<_> = (0..args.pickers)
        .map(|k| {
            tokio::spawn(picker_loop(
                node(k),
                pickers_as.clone(),
                pickers_pick_as.clone(),
                every,
                deadline,
            ))
        })
        .collect();
    let mut tally = Tally::default();
    for worker in workers {
        tally.merge(worker.await.context("a client panicked")?);
    }
    let wall = started.elapsed();
    let mut reader_tally = ReaderTally::default();
    for reader in readers {
        reader_tally.merge(reader.await.context("a reader panicked")?);
    }
    let mut picker_tally = Tally::default();
    for picker in pickers {
        picker_tally.merge(picker.await.context("a picker panicked")?);
    }
    Ok((tally, reader_tally, picker_tally, wall))
}

/// The figures derived from a run.
struct Report {
    wall_s: f64,
    per_second: f64,
    p50: Duration,
    p99: Duration,
    /// The tail a storm at a million providers is judged by (issue 25).
    p999: Duration,
    conflict_rate: f64,
}

impl Report {
    fn new(tally: &Tally, wall: Duration) -> Report {
        let wall_s = wall.as_secs_f64();
        // A claim (storm) or a loop (schedule) is done when its claim is accepted:
        // a refused one is retried by a scheduler, and an error is no work done.
        let done = tally.ledger.accepted;
        let refused = tally.refused_capacity + tally.refused_generation;
        Report {
            wall_s,
            per_second: if wall_s > 0.0 {
                done as f64 / wall_s
            } else {
                0.0
            },
            p50: percentile(&tally.latencies, 0.50),
            p99: percentile(&tally.latencies, 0.99),
            p999: percentile(&tally.latencies, 0.999),
            conflict_rate: if tally.attempts == 0 {
                0.0
            } else {
                refused as f64 / tally.attempts as f64
            },
        }
    }

    fn print(&self, args: &ClaimsArgs, base: &str, tally: &Tally) {
        let unit = match args.mode {
            Mode::Storm => "claims/s",
            Mode::Schedule => "loops/s",
            Mode::Pick => "picks/s",
        };
        println!(
            "claims {} on flat ({} roots), {} clients for {} s against {base}",
            args.mode.name(),
            args.roots,
            args.concurrency,
            args.seconds
        );
        println!(
            "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8}",
            unit,
            "accepted",
            "attempts",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "409 cap",
            "409 gen",
            "conflict",
            "errors"
        );
        println!(
            "{:>10.1} {:>10} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>10} {:>9} {:>9.4} {:>8}",
            self.per_second,
            tally.ledger.accepted,
            tally.attempts,
            ms(self.p50),
            ms(self.p99),
            ms(self.p999),
            tally.refused_capacity,
            tally.refused_generation,
            self.conflict_rate,
            tally.errors.total()
        );
        for (what, n) in tally.errors.iter() {
            println!("  errors {what}: {n}");
        }
        if args.server_groups > 0 {
            println!(
                "  each pick named one of {} anti-affinity groups; refused for a group: {}",
                args.server_groups, tally.refused_server_group
            );
        }
        if tally.no_candidates > 0 {
            println!(
                "  candidate queries with no candidates: {}",
                tally.no_candidates
            );
        }
    }

    fn json(&self, args: &ClaimsArgs, base: &str, tally: &Tally) -> Value {
        json!({
            "mode": args.mode.name(),
            "sort": matches!(args.mode, Mode::Pick).then_some(&args.sort),
            "shape": args.shape.name(),
            "roots": args.roots,
            "concurrency": args.concurrency,
            "seconds": args.seconds,
            "seed": args.seed,
            "url": base,
            "wall_s": self.wall_s,
            "per_second": self.per_second,
            "accepted": tally.ledger.accepted,
            "attempts": tally.attempts,
            "refused_capacity": tally.refused_capacity,
            "refused_generation": tally.refused_generation,
            "refused_server_group": tally.refused_server_group,
            "server_groups": args.server_groups,
            "conflict_rate": self.conflict_rate,
            "no_candidates": tally.no_candidates,
            "errors": tally.errors,
            "p50_ms": ms(self.p50),
            "p99_ms": ms(self.p99),
            "p999_ms": ms(self.p999),
            "samples": tally.latencies.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_repeatable_and_covers_the_range() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..2000).map(|_| rng.below(20)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        // Seed 0 is no fixed point.
        let zero = draw(0);
        let mut seen = [0u32; 20];
        for x in &zero {
            seen[*x as usize] += 1;
        }
        // 100 expected per value; every value shows up, none dominates.
        assert!(seen.iter().all(|&n| (50..150).contains(&n)), "{seen:?}");
    }

    #[test]
    fn claim_body_follows_the_microversion() {
        let allocations = json!({"x": {"resources": {"VCPU": 1}}});
        let latest = claim_body(&allocations, minor("1.39"), "p-run");
        assert_eq!(latest["consumer_generation"], Value::Null);
        assert!(latest
            .as_object()
            .unwrap()
            .contains_key("consumer_generation"));
        assert_eq!(latest["consumer_type"], "INSTANCE");
        assert_eq!(latest["project_id"], "p-run");
        let old = claim_body(&allocations, minor("1.28"), "p-run");
        assert!(old.as_object().unwrap().contains_key("consumer_generation"));
        assert!(!old.as_object().unwrap().contains_key("consumer_type"));
        assert_eq!(minor("latest"), u32::MAX);
        assert_eq!(minor("1.12"), 12);
    }

    /// Whether `text` holds a request's head and the body its content-length names.
    fn request_complete(text: &str) -> bool {
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        let length = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        });
        body.len() >= length.unwrap_or(0)
    }

    /// A server that answers each of `statuses` in turn, one connection each, with
    /// the error envelope `code` (an empty body when `code` is empty).
    async fn answering(statuses: Vec<(&'static str, &'static str)>) -> Client {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let config =
            allot_client::Config::new(format!("http://{}", listener.local_addr().unwrap()));
        tokio::spawn(async move {
            for (status, code) in statuses {
                let (mut socket, _) = listener.accept().await.unwrap();
                // The whole request is read before answering: closing on unread
                // bytes would reset the connection under the answer.
                let mut seen = String::new();
                let mut buf = [0u8; 4096];
                while !request_complete(&seen) {
                    let n = socket.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
                let body = if code.is_empty() {
                    String::new()
                } else {
                    json!({"errors": [{"status": 409, "code": code, "detail": "x"}]}).to_string()
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        Client::new(&config).unwrap()
    }

    #[test]
    fn only_a_2xx_answer_is_an_accepted_claim() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = answering(vec![
                ("204 No Content", ""),
                ("500 Internal Server Error", ""),
                ("409 Conflict", "placement.concurrent_update"),
                ("409 Conflict", "placement.undefined_code"),
                ("503 Service Unavailable", ""),
                ("400 Bad Request", ""),
            ])
            .await;
            let claim_as = ClaimAs {
                minor: 39,
                project: "p-run".into(),
            };
            let allocations = json!({"rp": {"resources": {"VCPU": 2}}});
            let mut tally = Tally::default();
            let mut decided = Vec::new();
            for _ in 0..6 {
                decided.push(claim(&client, &allocations, &claim_as, &mut tally).await);
            }
            // Accepted and the two refusals were decided; the errors were not.
            assert_eq!(decided, [true, false, true, true, false, false]);
            assert_eq!(tally.attempts, 6);
            assert_eq!(tally.ledger.accepted, 1);
            assert_eq!(tally.ledger.accepted_amounts["VCPU"], 2);
            assert_eq!(tally.refused_generation, 1);
            assert_eq!(tally.refused_capacity, 1);
            let errors: Vec<(&str, u64)> = tally.errors.iter().collect();
            assert_eq!(errors, [("400", 1), ("500", 1), ("503", 1)]);
            // Nothing answered 5xx is taken as held or as possibly held.
            assert_eq!(tally.ledger.unanswered, 0);
            // The listener is gone: no answer at all leaves the claim's fate open.
            assert!(!claim(&client, &allocations, &claim_as, &mut tally).await);
            assert_eq!(tally.ledger.unanswered, 1);
            assert_eq!(tally.ledger.unanswered_amounts["VCPU"], 2);
            assert!(tally.errors.iter().any(|e| e == ("transport", 1)));
        });
    }
}
