//! `allot bench groups-anti`: scenario `anti` of `shared/BENCHMARKS.md`, "groups".
//! Instances of the `small` flavour in anti-affinity server groups (by default 1,000
//! in 200 groups of 5) started at once on a seeded `flat` shape by `--schedulers`
//! concurrent schedulers, one instance per request, the groups' instances
//! interleaved (instance `i` belongs to group `i % groups`; `--order consecutive`
//! starts each group's members one after another instead, so that they are in
//! flight together, as when an orchestrator starts a group's servers in parallel),
//! in one of two ways:
//!
//! - `nova`: what Nova does against OpenStack Placement, where groups live in Nova's
//!   database. A record of each group's hosts is shared by all the schedulers (Nova
//!   reads it from its database for each request); a scheduler reads its instance's
//!   group from it at the start of the instance's loop, asks for candidates (`small`,
//!   `limit=1000`), drops those on a host the record names (Nova's
//!   `ServerGroupAntiAffinityFilter`), weighs the rest (spread: the most free VCPU
//!   first, as `mass-start` does), claims the best with `PUT /allocations/{consumer}`,
//!   starts again from the GET on a 409, and adds the host to the record once its
//!   claim is accepted. The read comes before the claim and the update after it, so
//!   two schedulers placing members of one group at once can put both on one host:
//!   Nova's own race, which only its late check on the compute host catches. Works
//!   against any Placement API, allot included (no group is made on the server).
//! - `pick`: allot's way. First one `POST /server_groups` per group (policy
//!   `anti-affinity`, for the run's project, 16 at once), then one pick-and-claim per instance
//!   naming its group (`POST /claims` with `request`, `sort`, `server_group`): the
//!   writer keeps the rule while it chooses, so nothing is retried.
//!
//! A host is the provider that holds an instance's VCPU: in `flat`, its root.
//!
//! It reports the wall time (from the first instance's request to the last answer;
//! the groups' creation is timed apart), requests, 409s by kind (generation,
//! capacity, server group), retries, instances placed and unplaced, and the rule's
//! violations found afterwards: for each group, the members beyond one on a host,
//! added up (`docs/api.md`'s number for anti-affinity). `nova` reads them back from
//! every accepted consumer's allocations, `pick` from `GET /server_groups/{uuid}`
//! (where each member is, and the server's own count, which must agree). Then, as
//! `mass-start` does, it reads back what the server holds for the run's own project
//! (exactly what was accepted) and checks every provider claimed on for over-commit.
//! A failed read-back or check fails the command after the figures are printed, and
//! so does any violation of allot's own way.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use allot_client::server_groups::NewServerGroup;
use allot_client::{Client, Method, ProjectUsages, StatusCode};
use anyhow::{bail, Context};
use futures_util::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};
use uuid::Uuid;

use super::claims::{check_seeded, claim_body, minor, send, ClaimAs, Errors};
use super::held::{self, Holding, Ledger};
use super::mass_start::print_checks;
use super::query::{ms, percentile, read_rss_sum, rss_json};
use super::shapes::{FLAVOUR, PROJECT, USER};
use super::Endpoint;

/// How often one instance may be retried (Nova's way) before it is given up: a
/// bound so that the run ends, far above what a healthy run needs.
const MAX_TRIES: u32 = 100;

/// How many reads the checks after the run send at once.
const READ_CONCURRENCY: usize = 8;

/// `allot bench groups-anti`.
#[derive(clap::Args, Debug)]
pub struct GroupsAntiArgs {
    /// How the instances are placed.
    #[arg(long, value_enum)]
    way: Way,
    /// How many roots the flat shape was seeded with (`allot bench seed --roots`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    roots: u64,
    /// How many instances start.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    instances: u32,
    /// How many anti-affinity groups they are in (instance i in group i mod N).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    groups: u32,
    /// Which instances a group has: `interleaved` (instance i in group i mod N,
    /// BENCHMARKS.md's) or `consecutive` (each group's members one after another).
    #[arg(long, value_enum, default_value = "interleaved")]
    order: Order,
    /// Concurrent schedulers.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    schedulers: u32,
    /// The `limit` of Nova's candidate query.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// `pick`: the server's weighing (`pack`, `spread`, `random`; `none` for the
    /// search's own order).
    #[arg(long, default_value = "spread")]
    sort: String,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The server's process id: report its VmRSS and VmHWM after the run
    /// (repeatable: the figures of all the processes given are summed).
    #[arg(long)]
    pid: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Way {
    /// A shared record of the groups' hosts, GET candidates, filter, weigh, PUT
    /// /allocations, retry on 409.
    Nova,
    /// allot's server groups and one pick-and-claim per instance naming its group.
    Pick,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Nova => "nova",
            Way::Pick => "pick",
        }
    }

    /// Where the accepted claims show on the server.
    fn holding(self) -> Holding {
        match self {
            Way::Nova => Holding::Allocations,
            Way::Pick => Holding::Claims,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Order {
    /// Instance i in group i mod N: a group's members far apart in the start.
    Interleaved,
    /// Each group's members one after another: in flight together.
    Consecutive,
}

impl Order {
    fn name(self) -> &'static str {
        match self {
            Order::Interleaved => "interleaved",
            Order::Consecutive => "consecutive",
        }
    }

    /// The group of `instance` of `instances` in `groups` groups (as even as can be).
    fn group_of(self, instance: u32, instances: u32, groups: u32) -> u32 {
        match self {
            Order::Interleaved => instance % groups,
            Order::Consecutive => {
                (u64::from(instance) * u64::from(groups) / u64::from(instances)) as u32
            }
        }
    }
}

/// What the schedulers saw, all of them together.
#[derive(Debug, Default)]
struct Tally {
    /// What the accepted claims add up to.
    ledger: Ledger,
    /// Every request sent while placing (the groups' creation and the read-backs
    /// afterwards not counted).
    requests: u64,
    /// 409s because a generation moved.
    conflicts_generation: u64,
    /// 409s for want of capacity (allot: nothing fits, the group's rule included).
    conflicts_capacity: u64,
    /// 409s `allot.server_group.violated`.
    conflicts_server_group: u64,
    /// Claims sent again after a refusal.
    retries: u64,
    /// Instances the run gave up on (nothing fits, too many tries, or an error).
    unplaced: u64,
    /// Nova's way: instances whose candidates were all on the group's hosts (or
    /// none at all), Nova's `NoValidHost`.
    no_valid_host: u64,
    /// Answers that were neither 2xx nor 409.
    errors: Errors,
    /// Providers some accepted claim holds something on.
    providers: BTreeSet<String>,
    /// Per placed instance: from its first request to its claim's acceptance.
    latencies: Vec<Duration>,
    /// Per placed instance: its group and consumer, for the read-back.
    members: Vec<(u32, Uuid)>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.ledger.merge(other.ledger);
        self.requests += other.requests;
        self.conflicts_generation += other.conflicts_generation;
        self.conflicts_capacity += other.conflicts_capacity;
        self.conflicts_server_group += other.conflicts_server_group;
        self.retries += other.retries;
        self.unplaced += other.unplaced;
        self.no_valid_host += other.no_valid_host;
        self.errors.merge(other.errors);
        self.providers.extend(other.providers);
        self.latencies.extend(other.latencies);
        self.members.extend(other.members);
    }

    /// One accepted claim of `allocations` (`{rp: {"resources": ...}}`) for
    /// `consumer` of `group`.
    fn accept(&mut self, allocations: &Value, group: u32, consumer: Uuid, started: Instant) {
        self.ledger.accept(allocations);
        let providers = allocations.as_object().into_iter().flatten();
        self.providers.extend(providers.map(|(rp, _)| rp.clone()));
        self.latencies.push(started.elapsed());
        self.members.push((group, consumer));
    }

    /// A 409, by its code.
    fn conflict(&mut self, body: &[u8]) {
        let envelope: Value = serde_json::from_slice(body).unwrap_or_default();
        match envelope["errors"][0]["code"].as_str() {
            Some("placement.concurrent_update") => self.conflicts_generation += 1,
            Some("allot.server_group.violated") => self.conflicts_server_group += 1,
            _ => self.conflicts_capacity += 1,
        }
    }
}

/// The host of `allocations` (`{rp: {"resources": ...}}`): the provider holding
/// VCPU, which is the root in `flat` (the shared disk is on a provider of its own).
fn host_of(allocations: &Value) -> Option<&str> {
    let mut providers = allocations.as_object().into_iter().flatten();
    providers
        .find(|(_, held)| held["resources"].get("VCPU").is_some())
        .map(|(rp, _)| rp.as_str())
}

/// Nova's choice for an anti-affinity member: among `answer`'s allocation requests
/// whose host is not in `taken` (the group's hosts as the scheduler read them), the
/// one whose host has the most VCPU free (capacity less used, from the provider
/// summaries), the first of equals. `None` when nothing is left (`NoValidHost`).
fn weigh_spread_apart<'a>(answer: &'a Value, taken: &[String]) -> Option<&'a Value> {
    let summaries = &answer["provider_summaries"];
    let mut best: Option<(&Value, i64)> = None;
    for request in answer["allocation_requests"].as_array()? {
        let allocations = &request["allocations"];
        let Some(host) = host_of(allocations) else {
            continue;
        };
        if taken.iter().any(|t| t == host) {
            continue;
        }
        let vcpu = &summaries[host]["resources"]["VCPU"];
        let free = vcpu["capacity"].as_i64().unwrap_or(0) - vcpu["used"].as_i64().unwrap_or(0);
        if best.is_none_or(|(_, top)| free > top) {
            best = Some((allocations, free));
        }
    }
    best.map(|(allocations, _)| allocations)
}

/// The groups' hosts as Nova keeps them: shared by every scheduler, read at the
/// start of an instance's loop and added to after its claim. A std mutex: it is
/// never held across an await.
type Record = Mutex<HashMap<u32, Vec<String>>>;

/// What Nova's schedulers share.
struct Nova {
    client: Client,
    /// The next instance to start.
    next: AtomicU32,
    instances: u32,
    groups: u32,
    order: Order,
    /// `GET /allocation_candidates?small&limit=...`.
    candidates: String,
    claim_as: ClaimAs,
    record: Record,
}

/// One of Nova's schedulers: instances from `nova.next` until there are none left.
async fn nova_scheduler(nova: Arc<Nova>) -> Tally {
    let mut tally = Tally::default();
    loop {
        let instance = nova.next.fetch_add(1, Ordering::Relaxed);
        if instance >= nova.instances {
            return tally;
        }
        let group = nova.order.group_of(instance, nova.instances, nova.groups);
        if !nova_instance(&nova, group, &mut tally).await {
            tally.unplaced += 1;
        }
    }
}

/// Places one instance of `group` Nova's way; whether it was placed.
async fn nova_instance(nova: &Nova, group: u32, tally: &mut Tally) -> bool {
    let started = Instant::now();
    let consumer = Uuid::new_v4();
    // Read once, as Nova reads the group's hosts into the request: a retry after a
    // 409 asks for candidates again but filters with what was read here.
    let taken = nova
        .record
        .lock()
        .expect("no scheduler panics holding the record")
        .get(&group)
        .cloned()
        .unwrap_or_default();
    for attempt in 0..MAX_TRIES {
        tally.requests += 1;
        let answer = match send(&nova.client, Method::GET, &nova.candidates, None).await {
            Ok(response) if response.status == StatusCode::OK => response,
            Ok(response) => {
                tally
                    .errors
                    .count(format!("GET {}", response.status.as_u16()));
                return false;
            }
            Err(why) => {
                tally.errors.count(why);
                return false;
            }
        };
        let answer: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        let Some(allocations) = weigh_spread_apart(&answer, &taken) else {
            tally.no_valid_host += 1;
            return false;
        };
        if attempt > 0 {
            tally.retries += 1;
        }
        tally.requests += 1;
        let body = claim_body(allocations, nova.claim_as.minor, &nova.claim_as.project);
        let path = format!("/allocations/{consumer}");
        match send(&nova.client, Method::PUT, &path, Some(&body)).await {
            Ok(response) if response.status.is_success() => {
                tally.accept(allocations, group, consumer, started);
                if let Some(host) = host_of(allocations) {
                    let mut record = nova.record.lock().expect("no scheduler panics");
                    record.entry(group).or_default().push(host.to_owned());
                }
                return true;
            }
            Ok(response) if response.status == StatusCode::CONFLICT => {
                tally.conflict(&response.body)
            }
            Ok(response) => {
                tally
                    .errors
                    .count(format!("PUT {}", response.status.as_u16()));
                return false;
            }
            Err(why) => {
                tally.ledger.unanswered(allocations);
                tally.errors.count(why);
                return false;
            }
        }
    }
    false
}

/// What allot's schedulers share.
struct Picks {
    client: Client,
    /// The next instance to start.
    next: AtomicU32,
    instances: u32,
    order: Order,
    /// The groups' uuids, by index.
    groups: Vec<Uuid>,
    /// The pick-and-claim body without its consumer and group.
    body: Value,
}

/// One of allot's schedulers: one pick-and-claim per instance, naming its group, no
/// retry.
async fn pick_scheduler(picks: Arc<Picks>) -> Tally {
    let mut tally = Tally::default();
    loop {
        let instance = picks.next.fetch_add(1, Ordering::Relaxed);
        if instance >= picks.instances {
            return tally;
        }
        let groups = picks.groups.len() as u32;
        let group = picks.order.group_of(instance, picks.instances, groups);
        let started = Instant::now();
        let consumer = Uuid::new_v4();
        let mut body = picks.body.clone();
        body["consumer_uuid"] = json!(consumer);
        body["server_group"] = json!(picks.groups[group as usize]);
        tally.requests += 1;
        match send(&picks.client, Method::POST, "/claims", Some(&body)).await {
            Ok(response) if response.status == StatusCode::CREATED => {
                let claim: Value = serde_json::from_slice(&response.body).unwrap_or_default();
                tally.accept(&claim["allocations"], group, consumer, started);
            }
            Ok(response) => {
                if response.status == StatusCode::CONFLICT {
                    tally.conflict(&response.body);
                } else {
                    tally
                        .errors
                        .count(format!("POST {}", response.status.as_u16()));
                }
                tally.unplaced += 1;
            }
            Err(why) => {
                // Where it went is unknown: the read-back cannot bound it, and fails.
                tally.errors.count(why);
                tally.unplaced += 1;
            }
        }
    }
}

/// `count` anti-affinity server groups of `project` named `{prefix}-{k}`, 16 made at
/// once; their uuids by `k`.
pub(super) async fn create_server_groups(
    client: &Client,
    count: u32,
    project: &str,
    prefix: &str,
) -> anyhow::Result<Vec<Uuid>> {
    stream::iter(0..count)
        .map(|k| async move {
            let group = NewServerGroup {
                uuid: None,
                name: format!("{prefix}-{k}"),
                project_id: project.to_owned(),
                user_id: Some(USER.to_owned()),
                policy: "anti-affinity".to_owned(),
                rules: None,
                scope: None,
                enforce_on_allocations: None,
                members: None,
            };
            let made = client.create_server_group(&group).await;
            made.map(|g| g.uuid)
                .with_context(|| format!("POST /server_groups (group {k})"))
        })
        .buffered(16)
        .try_collect()
        .await
}

/// Server groups named in turn, the k-th time the group k mod N (none when there are
/// none): what `allot bench claims --server-groups` has its picks name. Clones
/// share the turn, so that the groups are named evenly whichever client is faster.
#[derive(Debug, Clone, Default)]
pub(super) struct InTurn {
    groups: Arc<[Uuid]>,
    named: Arc<AtomicU64>,
}

impl InTurn {
    pub fn new(groups: Vec<Uuid>) -> InTurn {
        InTurn {
            groups: groups.into(),
            named: Arc::default(),
        }
    }

    /// The group to name next.
    pub fn next(&self) -> Option<Uuid> {
        let len = self.groups.len() as u64;
        (len > 0).then(|| {
            let k = self.named.fetch_add(1, Ordering::Relaxed);
            self.groups[(k % len) as usize]
        })
    }
}

/// Places every instance the way `--way` says, `--schedulers` at once; what they
/// saw and the wall time of the placing (the groups' creation before it not
/// counted).
async fn place(
    client: &Client,
    args: &GroupsAntiArgs,
    claim_as: &ClaimAs,
    groups: &[Uuid],
) -> anyhow::Result<(Tally, Duration)> {
    let started = Instant::now();
    let workers: Vec<_> = match args.way {
        Way::Nova => {
            let nova = Arc::new(Nova {
                client: client.clone(),
                next: AtomicU32::new(0),
                instances: args.instances,
                groups: args.groups,
                order: args.order,
                candidates: format!("/allocation_candidates?{FLAVOUR}&limit={}", args.limit),
                claim_as: claim_as.clone(),
                record: Record::default(),
            });
            (0..args.schedulers)
                .map(|_| tokio::spawn(nova_scheduler(nova.clone())))
                .collect()
        }
        Way::Pick => {
            let mut body = json!({
                "request": FLAVOUR,
                "project_id": &*claim_as.project,
                "user_id": USER,
                "consumer_type": "INSTANCE",
            });
            if args.sort != "none" {
                body["sort"] = json!(args.sort);
            }
            let picks = Arc::new(Picks {
                client: client.clone(),
                next: AtomicU32::new(0),
                instances: args.instances,
                order: args.order,
                groups: groups.to_vec(),
                body,
            });
            (0..args.schedulers)
                .map(|_| tokio::spawn(pick_scheduler(picks.clone())))
                .collect()
        }
    };
    let mut tally = Tally::default();
    for worker in workers {
        tally.merge(worker.await.context("a scheduler panicked")?);
    }
    Ok((tally, started.elapsed()))
}

/// The rule's state after the run, as read back from the server.
#[derive(Debug, Default, PartialEq, Eq)]
struct Violations {
    /// Per group, the members beyond one on a host, added up over the groups.
    count: u64,
    /// The groups with at least one.
    groups_broken: u64,
    /// Members found on some host.
    members_found: u64,
    /// `pick`: the sum of the server's own `violations` of the groups.
    server_count: Option<u64>,
}

impl Violations {
    /// Counts them from each group's members' hosts (a member on several hosts
    /// counts on each).
    fn count(hosts: &BTreeMap<u32, Vec<String>>) -> Violations {
        let mut violations = Violations::default();
        for members in hosts.values() {
            let mut on: BTreeMap<&str, u64> = BTreeMap::new();
            for host in members {
                *on.entry(host).or_default() += 1;
            }
            let beyond: u64 = on.values().map(|n| n - 1).sum();
            violations.count += beyond;
            violations.groups_broken += u64::from(beyond > 0);
            violations.members_found += members.len() as u64;
        }
        violations
    }

    fn json(&self) -> Value {
        json!({
            "count": self.count,
            "groups_broken": self.groups_broken,
            "members_found": self.members_found,
            "server_count": self.server_count,
        })
    }
}

/// Nova's way: each accepted consumer's allocations read back
/// (`GET /allocations/{consumer}`), its host counted in its group.
async fn violations_from_allocations(
    client: &Client,
    members: &[(u32, Uuid)],
) -> anyhow::Result<Violations> {
    let found: Vec<(u32, Option<String>)> = stream::iter(members)
        .map(|&(group, consumer)| async move {
            let path = format!("/allocations/{consumer}");
            let response = client.request(Method::GET, &path, None).await?;
            if response.status != StatusCode::OK {
                bail!("GET {path}: {}", response.status);
            }
            let body: Value = serde_json::from_slice(&response.body)?;
            anyhow::Ok((group, host_of(&body["allocations"]).map(str::to_owned)))
        })
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut hosts: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (group, host) in found {
        hosts.entry(group).or_default().extend(host);
    }
    Ok(Violations::count(&hosts))
}

/// allot's way: each group as the server shows it (`GET /server_groups/{uuid}`),
/// its members' roots counted, and the server's own count added up beside.
async fn violations_from_groups(client: &Client, groups: &[Uuid]) -> anyhow::Result<Violations> {
    let shown: Vec<(u32, Vec<String>, u64)> = stream::iter(groups.iter().enumerate())
        .map(|(k, uuid)| async move {
            let group = client
                .server_group(uuid)
                .await
                .with_context(|| format!("GET /server_groups/{uuid}"))?;
            let roots = group.placement.unwrap_or_default().into_values();
            let hosts = roots.flat_map(|place| place.roots).map(|r| r.to_string());
            anyhow::Ok((k as u32, hosts.collect(), group.violations.unwrap_or(0)))
        })
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    let server_count = shown.iter().map(|(_, _, n)| n).sum();
    let hosts = shown.into_iter().map(|(k, hosts, _)| (k, hosts)).collect();
    Ok(Violations {
        server_count: Some(server_count),
        ..Violations::count(&hosts)
    })
}

pub async fn groups_anti(args: GroupsAntiArgs) -> anyhow::Result<()> {
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
    if args.groups > args.instances {
        bail!(
            "--groups {} is more than --instances {}: a group without members",
            args.groups,
            args.instances
        );
    }
    check_seeded(&client).await?;
    let claim_as = ClaimAs {
        minor,
        project: format!("{PROJECT}-{}", Uuid::new_v4().simple()).into(),
    };
    let setup_started = Instant::now();
    let groups = match args.way {
        Way::Nova => Vec::new(),
        Way::Pick => {
            create_server_groups(&client, args.groups, &claim_as.project, "bench-anti").await?
        }
    };
    let setup = setup_started.elapsed();
    let (tally, wall) = place(&client, &args, &claim_as, &groups).await?;
    let rss = read_rss_sum(&args.pid)?;
    let project = &claim_as.project;
    let ledger = &tally.ledger;
    let held = held::verify(&client, project, ledger, Duration::ZERO, args.way.holding()).await;
    let over = super::mass_start::check_capacity(&client, &tally.providers).await;
    let violations = match args.way {
        Way::Nova => violations_from_allocations(&client, &tally.members).await,
        Way::Pick => violations_from_groups(&client, &groups).await,
    };
    let run = Run {
        client: &client,
        claim_as: &claim_as,
        tally: &tally,
        wall,
        setup,
        rss,
        held: &held,
        over: &over,
        violations: &violations,
    };
    run.print(&args);
    if let Some(file) = &args.json {
        std::fs::write(file, serde_json::to_string_pretty(&run.json(&args))? + "\n")
            .with_context(|| format!("writing {}", file.display()))?;
    }
    // Last, so that the figures are out before the run fails on them.
    run.verdict(&args)
}

/// A finished run and its checks, for the report.
struct Run<'a> {
    client: &'a Client,
    claim_as: &'a ClaimAs,
    tally: &'a Tally,
    /// From the first instance's request to the last answer.
    wall: Duration,
    /// The groups' creation before it (`pick`).
    setup: Duration,
    /// The server's (VmRSS, VmHWM), with `--pid`.
    rss: Option<(u64, u64)>,
    /// The read-back: the server holds exactly what it accepted.
    held: &'a anyhow::Result<ProjectUsages>,
    /// The over-commit check: one line per class over capacity.
    over: &'a anyhow::Result<Vec<String>>,
    /// The rule's violations, read back.
    violations: &'a anyhow::Result<Violations>,
}

impl Run<'_> {
    /// The report on stdout: a line saying what ran, the figures' table, then the
    /// checks.
    fn print(&self, args: &GroupsAntiArgs) {
        let tally = self.tally;
        println!(
            "groups anti {} of {} `small` in {} anti-affinity groups ({}) on flat ({} roots), \
             {} schedulers against {}",
            args.way.name(),
            args.instances,
            args.groups,
            args.order.name(),
            args.roots,
            args.schedulers,
            self.client.base()
        );
        println!(
            "{:>9} {:>8} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8}",
            "wall s",
            "setup s",
            "placed",
            "unplaced",
            "requests",
            "409 gen",
            "409 cap",
            "409 grp",
            "retries",
            "violations",
            "p50 ms",
            "p99 ms"
        );
        let violations = self
            .violations
            .as_ref()
            .map_or("?".into(), |v| v.count.to_string());
        println!(
            "{:>9.3} {:>8.3} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8.3} {:>8.1}",
            self.wall.as_secs_f64(),
            self.setup.as_secs_f64(),
            tally.ledger.accepted,
            tally.unplaced,
            tally.requests,
            tally.conflicts_generation,
            tally.conflicts_capacity,
            tally.conflicts_server_group,
            tally.retries,
            violations,
            ms(percentile(&tally.latencies, 0.50)),
            ms(percentile(&tally.latencies, 0.99)),
        );
        self.print_checks(args);
    }

    /// The lines under the table: errors, the rule, the read-back, over-commit.
    fn print_checks(&self, args: &GroupsAntiArgs) {
        let tally = self.tally;
        for (what, n) in tally.errors.iter() {
            println!("  errors {what}: {n}");
        }
        if tally.no_valid_host > 0 {
            println!(
                "  no valid host (every candidate on the group's hosts): {}",
                tally.no_valid_host
            );
        }
        match self.violations {
            Ok(v) => println!(
                "  violations: {} in {} of {} groups ({} members found placed{})",
                v.count,
                v.groups_broken,
                args.groups,
                v.members_found,
                v.server_count
                    .map_or(String::new(), |n| format!("; the server counts {n}"))
            ),
            Err(why) => println!("  violations not read back: {why:#}"),
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
    fn json(&self, args: &GroupsAntiArgs) -> Value {
        let tally = self.tally;
        let error = |why: &anyhow::Error| json!({"error": format!("{why:#}")});
        json!({
            "scenario": "anti",
            "way": args.way.name(),
            "roots": args.roots,
            "instances": args.instances,
            "groups": args.groups,
            "order": args.order.name(),
            "schedulers": args.schedulers,
            "sort": (args.way == Way::Pick).then_some(&args.sort),
            "limit": (args.way == Way::Nova).then_some(args.limit),
            "url": self.client.base(),
            "project_id": &*self.claim_as.project,
            "wall_s": self.wall.as_secs_f64(),
            "setup_s": self.setup.as_secs_f64(),
            "setup_requests": if args.way == Way::Pick { args.groups } else { 0 },
            "placed": tally.ledger.accepted,
            "unplaced": tally.unplaced,
            "no_valid_host": tally.no_valid_host,
            "requests": tally.requests,
            "conflicts_generation": tally.conflicts_generation,
            "conflicts_capacity": tally.conflicts_capacity,
            "conflicts_server_group": tally.conflicts_server_group,
            "retries": tally.retries,
            "errors": tally.errors,
            "p50_ms": ms(percentile(&tally.latencies, 0.50)),
            "p99_ms": ms(percentile(&tally.latencies, 0.99)),
            "providers_claimed_on": tally.providers.len(),
            "violations": self.violations.as_ref().map_or_else(error, Violations::json),
            "held": self.held.as_ref().map_or_else(error, |_| json!(true)),
            "over_capacity": self.over.as_ref().map_or_else(error, |over| json!(over)),
            "rss_kb": rss_json(self.rss),
        })
    }

    /// Fails the command when a check failed, or when allot's own way broke a rule
    /// (or counted it otherwise than the server); Nova's violations are a finding.
    fn verdict(&self, args: &GroupsAntiArgs) -> anyhow::Result<()> {
        if let Err(why) = self.held {
            bail!("the read-back failed: {why:#}");
        }
        match self.over {
            Ok(over) if !over.is_empty() => {
                bail!("{} classes over capacity after the run", over.len())
            }
            Err(why) => bail!("the over-commit check failed: {why:#}"),
            Ok(_) => {}
        }
        let violations = match self.violations {
            Ok(v) => v,
            Err(why) => bail!("the violations were not read back: {why:#}"),
        };
        if violations.members_found != self.tally.ledger.accepted {
            bail!(
                "{} instances were placed but {} members were found placed",
                self.tally.ledger.accepted,
                violations.members_found
            );
        }
        if args.way == Way::Pick && violations.server_count != Some(violations.count) {
            bail!(
                "the server counts {:?} violations, the read-back {}",
                violations.server_count,
                violations.count
            );
        }
        if args.way == Way::Pick && (violations.count > 0 || self.tally.retries > 0) {
            bail!(
                "allot's way broke {} rules with {} retries",
                violations.count,
                self.tally.retries
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_weighs_by_free_vcpu_apart_from_the_groups_hosts() {
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
        let best = |taken: &[&str]| {
            let taken: Vec<String> = taken.iter().map(|t| t.to_string()).collect();
            weigh_spread_apart(&answer, &taken)
                .and_then(host_of)
                .map(str::to_owned)
        };
        // The first of equals, then the next best once it is taken.
        assert_eq!(best(&[]).as_deref(), Some("b"));
        assert_eq!(best(&["b"]).as_deref(), Some("c"));
        assert_eq!(best(&["b", "c"]).as_deref(), Some("d"));
        assert_eq!(best(&["b", "c", "d"]).as_deref(), Some("a"));
        // A host is where the VCPU is, not the shared disk.
        assert_eq!(best(&["b", "c", "d", "ss"]).as_deref(), Some("a"));
        assert_eq!(best(&["a", "b", "c", "d"]), None);
        assert!(weigh_spread_apart(&json!({"allocation_requests": []}), &[]).is_none());
    }

    #[test]
    fn violations_count_the_members_beyond_one_on_a_host() {
        let hosts = |list: &[(u32, &[&str])]| {
            let map = list
                .iter()
                .map(|(g, hs)| (*g, hs.iter().map(|h| h.to_string()).collect()));
            map.collect::<BTreeMap<u32, Vec<String>>>()
        };
        let apart = Violations::count(&hosts(&[(0, &["a", "b"]), (1, &["a", "c"])]));
        assert_eq!(
            (apart.count, apart.groups_broken, apart.members_found),
            (0, 0, 4)
        );
        // Three on one host is two beyond one; one more pair elsewhere in the group.
        let broken = Violations::count(&hosts(&[(0, &["a", "a", "a", "b", "b"]), (1, &["c"])]));
        assert_eq!(
            (broken.count, broken.groups_broken, broken.members_found),
            (3, 1, 6)
        );
    }

    #[test]
    fn each_order_puts_as_many_instances_in_each_group() {
        for order in [Order::Interleaved, Order::Consecutive] {
            let mut sizes = [0u32; 4];
            for i in 0..22 {
                sizes[order.group_of(i, 22, 4) as usize] += 1;
            }
            assert!(
                sizes.iter().all(|&n| n == 5 || n == 6),
                "{order:?}: {sizes:?}"
            );
        }
        assert_eq!(Order::Interleaved.group_of(5, 20, 4), 1);
        // Consecutive: the first five in group 0, the next five in group 1.
        let first: Vec<u32> = (0..10)
            .map(|i| Order::Consecutive.group_of(i, 20, 4))
            .collect();
        assert_eq!(first, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn groups_are_named_in_turn_across_clones() {
        let [a, b] = [Uuid::from_u128(1), Uuid::from_u128(2)];
        let turn = InTurn::new(vec![a, b]);
        let other = turn.clone();
        let named = [turn.next(), other.next(), turn.next(), other.next()];
        assert_eq!(named, [Some(a), Some(b), Some(a), Some(b)]);
        assert_eq!(InTurn::default().next(), None);
    }

    #[test]
    fn a_conflict_is_counted_by_its_code() {
        let mut tally = Tally::default();
        for code in [
            "placement.concurrent_update",
            "allot.server_group.violated",
            "allot.claim.does_not_fit",
            "placement.undefined_code",
        ] {
            tally.conflict(json!({"errors": [{"code": code}]}).to_string().as_bytes());
        }
        tally.conflict(b"not json");
        assert_eq!(
            (
                tally.conflicts_generation,
                tally.conflicts_server_group,
                tally.conflicts_capacity
            ),
            (1, 1, 3)
        );
    }
}
