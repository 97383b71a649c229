//! `allot bench drain`: hosts taken out of service with every instance moved off
//! them (`shared/BENCHMARKS.md`, "groups", `drain`), on a seeded `flat` shape, in one
//! of two ways, so that they can be set side by side:
//!
//! - `nova`: what Nova's host live migration does against OpenStack Placement, for
//!   each instance with `--schedulers` at once: read the instance's allocations (and
//!   its consumer generation), ask for candidates of what it holds, drop the drained
//!   hosts and, for an instance in an anti-affinity group, the hosts a record shared
//!   by the schedulers says its group's other members are on (read at the start of
//!   each try, updated after the move, as Nova reads its database), weigh (the most
//!   free VCPU), then `POST /allocations` moving the source allocations to a
//!   migration consumer and the instance to the target; on a 409 start again.
//! - `drain`: allot's way, one `POST /drains` per host (the groups made first with
//!   `PUT /server_groups`), then `POST /drains/{uuid}/confirm`.
//!
//! Before either, the same setup (not timed): `--per-host` instances on each of
//! `--hosts` hosts, alternately `small` and `big`, and every other one in an
//! anti-affinity group of three whose two other members run on other hosts. It
//! reports wall time, requests, 409s, retries, instances left unplaced and the rule's
//! violations read back afterwards (two members of one group on one host).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use allot_client::{Client, Method, StatusCode};
use anyhow::{bail, Context};
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use uuid::Uuid;

use super::claims::{check_seeded, send};
use super::shapes::{named, USER};
use super::Endpoint;

/// How often one instance may be tried before it is given up.
const MAX_TRIES: u32 = 100;

/// `allot bench drain`.
#[derive(clap::Args, Debug)]
pub struct DrainArgs {
    /// How the hosts are drained.
    #[arg(long, value_enum)]
    way: Way,
    /// How many roots the flat shape was seeded with.
    #[arg(long, value_parser = clap::value_parser!(u64).range(4..))]
    roots: u64,
    /// Hosts drained.
    #[arg(long, default_value_t = 10)]
    hosts: usize,
    /// Instances on each drained host.
    #[arg(long, default_value_t = 20)]
    per_host: usize,
    /// Concurrent migrations (Nova's way; allot's drains go one at a time).
    #[arg(long, default_value_t = 16)]
    schedulers: usize,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Way {
    /// Per instance: allocations, candidates, filter, weigh, move, retry on 409.
    Nova,
    /// One allot drain per host, then its confirm.
    Drain,
}

/// One instance to move, as the setup made it.
#[derive(Debug, Clone)]
struct Instance {
    uuid: Uuid,
    /// `resources=...` of what it holds.
    shape: &'static str,
    /// Its anti-affinity group, if any.
    group: Option<usize>,
}

/// The setup: the drained hosts, the instances on them, and each group's members.
struct World {
    hosts: Vec<Uuid>,
    instances: Vec<Instance>,
    groups: Vec<Vec<Uuid>>,
    project: String,
}

const SMALL: &str = "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40";
const BIG: &str = "resources=VCPU:8,MEMORY_MB:16384";

/// What a shape's query asks for, as allocations on one root.
fn holding(shape: &str, root: Uuid) -> Value {
    let resources: serde_json::Map<String, Value> = shape
        .trim_start_matches("resources=")
        .split(',')
        .filter_map(|kv| kv.split_once(':'))
        .map(|(k, v)| (k.to_owned(), json!(v.parse::<u64>().unwrap_or(0))))
        .collect();
    json!({root.to_string(): {"resources": resources}})
}

async fn put_allocations(
    client: &Client,
    consumer: Uuid,
    allocations: Value,
    project: &str,
) -> anyhow::Result<()> {
    let body = json!({"allocations": allocations, "project_id": project, "user_id": USER,
                      "consumer_generation": null, "consumer_type": "INSTANCE"});
    let response = send(
        client,
        Method::PUT,
        &format!("/allocations/{consumer}"),
        Some(&body),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    if !response.status.is_success() {
        bail!("setup PUT /allocations/{consumer}: {}", response.status);
    }
    Ok(())
}

/// The setup (not timed). Drained hosts are `cn{i}` with AVX2 and local disk,
/// the groups' other members on hosts past the drained ones.
async fn setup(client: &Client, args: &DrainArgs) -> anyhow::Result<World> {
    check_seeded(client).await?;
    let project = format!("p-drain-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let roots = args.roots as usize;
    let drained: Vec<usize> = (1..roots)
        .filter(|i| i % 2 == 0 && i % 5 != 0 && i % 50 != 7)
        .take(args.hosts)
        .collect();
    if drained.len() < args.hosts {
        bail!(
            "{roots} roots hold fewer than {} hosts to drain",
            args.hosts
        );
    }
    let hosts: Vec<Uuid> = drained.iter().map(|i| named(&format!("cn{i}"))).collect();
    // The groups' other members: on the hosts that are not drained.
    let others: Vec<usize> = (0..roots).filter(|i| !drained.contains(i)).collect();
    let elsewhere = |n: usize| named(&format!("cn{}", others[n % others.len()]));
    let (mut instances, mut groups) = (Vec::new(), Vec::new());
    for (h, host) in hosts.iter().enumerate() {
        for k in 0..args.per_host {
            let shape = if k % 2 == 0 { SMALL } else { BIG };
            let uuid = Uuid::new_v4();
            put_allocations(client, uuid, holding(shape, *host), &project).await?;
            let group = (k % 4 < 2).then(|| {
                groups.push(vec![uuid]);
                groups.len() - 1
            });
            if let Some(g) = group {
                for m in 0..2 {
                    let member = Uuid::new_v4();
                    let on = elsewhere(groups.len() * 2 + m + h);
                    put_allocations(
                        client,
                        member,
                        holding("resources=VCPU:1,MEMORY_MB:512", on),
                        &project,
                    )
                    .await?;
                    groups[g].push(member);
                }
            }
            instances.push(Instance { uuid, shape, group });
        }
    }
    Ok(World {
        hosts,
        instances,
        groups,
        project,
    })
}

/// What the movers saw, all together.
#[derive(Debug, Default, serde::Serialize)]
struct Tally {
    requests: u64,
    conflicts: u64,
    retries: u64,
    unplaced: u64,
    errors: Vec<String>,
}

/// The root a consumer's VCPU stands on (the flat shape's roots hold it), or None.
async fn vcpu_root(client: &Client, consumer: Uuid) -> anyhow::Result<(Option<String>, Value)> {
    let response = send(
        client,
        Method::GET,
        &format!("/allocations/{consumer}"),
        None,
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let body: Value = serde_json::from_slice(&response.body).unwrap_or_default();
    let root = body["allocations"]
        .as_object()
        .into_iter()
        .flatten()
        .find(|(_, a)| a["resources"].get("VCPU").is_some())
        .map(|(rp, _)| rp.clone());
    Ok((root, body))
}

/// Nova's choice: the candidate whose VCPU provider has the most VCPU free, among
/// those not on a host in `avoid`.
fn choose<'a>(answer: &'a Value, avoid: &BTreeSet<String>) -> Option<&'a Value> {
    let summaries = &answer["provider_summaries"];
    answer["allocation_requests"]
        .as_array()?
        .iter()
        .map(|r| &r["allocations"])
        .filter_map(|a| {
            let (rp, _) = a
                .as_object()?
                .iter()
                .find(|(_, h)| h["resources"].get("VCPU").is_some())?;
            let vcpu = &summaries[rp]["resources"]["VCPU"];
            let free = vcpu["capacity"].as_i64().unwrap_or(0) - vcpu["used"].as_i64().unwrap_or(0);
            (!avoid.contains(rp)).then_some((a, free))
        })
        .fold(None, |best: Option<(&Value, i64)>, (a, free)| match best {
            Some((_, top)) if top >= free => best,
            _ => Some((a, free)),
        })
        .map(|(a, _)| a)
}

/// One instance moved Nova's way; `record` is the schedulers' shared view of where
/// each group's members are.
async fn nova_move(
    client: &Client,
    world: &World,
    instance: &Instance,
    record: &Mutex<HashMap<usize, BTreeSet<String>>>,
    tally: &mut Tally,
) {
    let drained: BTreeSet<String> = world.hosts.iter().map(Uuid::to_string).collect();
    for attempt in 0..MAX_TRIES {
        if attempt > 0 {
            tally.retries += 1;
        }
        let mut avoid = drained.clone();
        if let Some(g) = instance.group {
            avoid.extend(record.lock().unwrap().get(&g).cloned().unwrap_or_default());
        }
        tally.requests += 2;
        let Ok((Some(source_root), current)) = vcpu_root(client, instance.uuid).await else {
            tally.errors.push("GET /allocations".into());
            return;
        };
        let path = format!("/allocation_candidates?{}&limit=1000", instance.shape);
        let answer = match send(client, Method::GET, &path, None).await {
            Ok(r) if r.status == StatusCode::OK => {
                serde_json::from_slice(&r.body).unwrap_or_default()
            }
            _ => {
                tally.errors.push("GET /allocation_candidates".into());
                return;
            }
        };
        let Some(target) = choose(&answer, &avoid) else {
            tally.unplaced += 1;
            return;
        };
        let migration = Uuid::new_v4();
        let body = json!({
            migration.to_string(): {"allocations": current["allocations"].as_object().map(|a| {
                a.iter().map(|(rp, h)| (rp.clone(), json!({"resources": h["resources"]}))).collect::<serde_json::Map<_, _>>()
            }), "project_id": world.project, "user_id": USER, "consumer_generation": null,
                "consumer_type": "MIGRATION"},
            instance.uuid.to_string(): {"allocations": target, "project_id": world.project,
                "user_id": USER, "consumer_generation": current["consumer_generation"],
                "consumer_type": "INSTANCE"},
        });
        tally.requests += 1;
        match send(client, Method::POST, "/allocations", Some(&body)).await {
            Ok(r) if r.status.is_success() => {
                if let Some(g) = instance.group {
                    let root = target
                        .as_object()
                        .and_then(|a| a.iter().find(|(_, h)| h["resources"].get("VCPU").is_some()))
                        .map(|(rp, _)| rp.clone());
                    let mut record = record.lock().unwrap();
                    let hosts = record.entry(g).or_default();
                    hosts.remove(&source_root);
                    hosts.extend(root);
                }
                return;
            }
            Ok(r) if r.status == StatusCode::CONFLICT => tally.conflicts += 1,
            Ok(r) => {
                tally
                    .errors
                    .push(format!("POST /allocations {}", r.status.as_u16()));
                return;
            }
            Err(why) => {
                tally.errors.push(why.into());
                return;
            }
        }
    }
    tally.unplaced += 1;
}

/// Every instance moved Nova's way, `--schedulers` at once.
async fn nova(client: &Client, world: &World, schedulers: usize) -> anyhow::Result<Tally> {
    // The record starts as Nova's database holds it: each group's members' hosts.
    let mut start: HashMap<usize, BTreeSet<String>> = HashMap::new();
    for (g, members) in world.groups.iter().enumerate() {
        for m in members {
            if let (Some(root), _) = vcpu_root(client, *m).await? {
                start.entry(g).or_default().insert(root);
            }
        }
    }
    let record = Mutex::new(start);
    let tallies: Vec<Tally> = stream::iter(&world.instances)
        .map(|instance| {
            let record = &record;
            async move {
                let mut tally = Tally::default();
                nova_move(client, world, instance, record, &mut tally).await;
                tally
            }
        })
        .buffer_unordered(schedulers)
        .collect()
        .await;
    Ok(sum(tallies))
}

fn sum(tallies: Vec<Tally>) -> Tally {
    tallies.into_iter().fold(Tally::default(), |mut all, t| {
        all.requests += t.requests;
        all.conflicts += t.conflicts;
        all.retries += t.retries;
        all.unplaced += t.unplaced;
        all.errors.extend(t.errors);
        all
    })
}

/// The groups made on allot (not timed: Nova's exist before the migration too).
async fn make_groups(client: &Client, world: &World) -> anyhow::Result<()> {
    for members in &world.groups {
        let body = json!({"name": "bench-drain", "project_id": world.project,
                          "policy": "anti-affinity", "members": members});
        let path = format!("/server_groups/{}", Uuid::new_v4());
        let response = send(client, Method::PUT, &path, Some(&body))
            .await
            .map_err(anyhow::Error::msg)?;
        if !response.status.is_success() {
            bail!("PUT {path}: {}", response.status);
        }
    }
    Ok(())
}

/// Every host drained allot's way: one drain and its confirm per host, host after
/// host as an operator takes them out (a host holding another open drain's targets
/// is refused until that drain ends, so drains of the same cloud run one at a time).
async fn drain(client: &Client, world: &World) -> Tally {
    let tallies: Vec<Tally> = stream::iter(&world.hosts)
        .map(|host| async move {
            let mut tally = Tally::default();
            tally.requests += 1;
            let body = json!({"roots": [host]});
            let made = match send(client, Method::POST, "/drains", Some(&body)).await {
                Ok(r) if r.status == StatusCode::CREATED => {
                    serde_json::from_slice::<Value>(&r.body).unwrap_or_default()
                }
                Ok(r) if r.status == StatusCode::CONFLICT => {
                    tally.conflicts += 1;
                    tally.unplaced += world.instances.len() as u64 / world.hosts.len() as u64;
                    return tally;
                }
                Ok(r) => {
                    tally
                        .errors
                        .push(format!("POST /drains {}", r.status.as_u16()));
                    return tally;
                }
                Err(why) => {
                    tally.errors.push(why.into());
                    return tally;
                }
            };
            tally.requests += 1;
            let path = format!("/drains/{}/confirm", made["uuid"].as_str().unwrap_or(""));
            match send(client, Method::POST, &path, None).await {
                Ok(r) if r.status.is_success() => {}
                Ok(r) => tally.errors.push(format!("confirm {}", r.status.as_u16())),
                Err(why) => tally.errors.push(why.into()),
            }
            tally
        })
        .buffered(1)
        .collect()
        .await;
    sum(tallies)
}

/// Groups with two members on one host, and instances still on a drained host.
async fn read_back(client: &Client, world: &World) -> anyhow::Result<(u64, u64)> {
    let mut violations = 0;
    for members in &world.groups {
        let mut roots = BTreeSet::new();
        for m in members {
            if let (Some(root), _) = vcpu_root(client, *m).await? {
                if !roots.insert(root) {
                    violations += 1;
                }
            }
        }
    }
    let drained: BTreeSet<String> = world.hosts.iter().map(Uuid::to_string).collect();
    let mut left = 0;
    for i in &world.instances {
        if vcpu_root(client, i.uuid)
            .await?
            .0
            .is_some_and(|r| drained.contains(&r))
        {
            left += 1;
        }
    }
    Ok((violations, left))
}

/// Runs `allot bench drain`.
pub async fn run(args: DrainArgs) -> anyhow::Result<()> {
    let client = args
        .endpoint
        .client(&args.endpoint.url, &args.endpoint.token)?;
    let world = setup(&client, &args).await.context("setup")?;
    if args.way == Way::Drain {
        make_groups(&client, &world).await.context("groups")?;
    }
    let started = Instant::now();
    let tally = match args.way {
        Way::Nova => nova(&client, &world, args.schedulers).await?,
        Way::Drain => drain(&client, &world).await,
    };
    let wall = started.elapsed().as_secs_f64();
    let (violations, left) = read_back(&client, &world).await?;
    let way = match args.way {
        Way::Nova => "nova",
        Way::Drain => "drain",
    };
    let report = json!({
        "way": way, "hosts": args.hosts, "instances": world.instances.len(),
        "groups": world.groups.len(), "wall_s": wall, "requests": tally.requests,
        "conflicts": tally.conflicts, "retries": tally.retries,
        "unplaced": tally.unplaced, "left_on_drained_hosts": left,
        "violations": violations, "errors": tally.errors.len(),
    });
    println!(
        "drain {way}: {} hosts, {} instances ({} in groups): wall {wall:.3} s, {} requests, \
         {} 409s, {} retries, {} unplaced, {left} left on drained hosts, {violations} violations, \
         {} errors",
        args.hosts,
        world.instances.len(),
        world.groups.len(),
        tally.requests,
        tally.conflicts,
        tally.retries,
        tally.unplaced,
        tally.errors.len()
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    if !tally.errors.is_empty() {
        bail!("errors: {:?}", &tally.errors[..tally.errors.len().min(5)]);
    }
    Ok(())
}
