//! Durability under load, through the real binary over real HTTP: a `kill -9` in the
//! middle of a claim storm loses no answered claim, keeps no refused one, and leaves
//! no provider over its capacity.
//!
//! 8 providers with VCPU 40 each: the even ones at allocation ratio 1.0, so they run
//! out early, the odd ones at 16.0, so they still accept while refusals pile up on
//! the even ones (and the storm writes enough for SQLite to checkpoint its WAL on the
//! way, so the kill can land in the middle of that too). 32 client threads claim VCPU 1 or 2 plus MEMORY_MB for
//! fresh consumers (`PUT /allocations/{uuid}` at 1.39, `consumer_generation: null`) on
//! random providers and record each consumer's outcome: accepted (204), refused
//! (409), cut (the connection was made, and the kill closed it before an answer), or
//! unreached (the connection was refused: the server was gone already). Once the
//! storm has both accepted and refused enough, the server gets SIGKILL while the
//! clients are still mid-request, and the test checks that some were: at least one
//! claim sent before the kill was cut, so it was in flight at the kill. After a
//! restart on the same SQLite file: every accepted consumer holds exactly what it
//! asked for, no refused or unreached one holds anything, each cut one holds all it
//! asked for or nothing, no one else holds anything, every provider's usage is the
//! sum of what its consumers hold, and no usage is over `(total - reserved) *
//! allocation_ratio`.
//!
//! While the server runs, its file is in WAL mode (the header says so): the store
//! suite checks the rest of the engine's promise, `synchronous=FULL` on its own
//! connection (`allot-store/tests/roundtrip.rs`), which no kill -9 could tell from
//! `NORMAL`.
//!
//! The kill is triggered by counts, not by a clock, so a slow machine only makes the
//! storm last longer; no assertion depends on timing.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{json, metric, reached, Client, Server};
use uuid::Uuid;

const PROVIDERS: usize = 8;
const THREADS: usize = 32;
/// The storm is killed once this many claims were accepted ...
const KILL_AFTER_ACCEPTED: u64 = 1000;
/// ... and this many refused (both must have happened for the test to mean much).
const KILL_AFTER_REFUSED: u64 = 20;
/// A storm that reaches neither within this long is killed anyway (and the test then
/// fails on the counts, with them in the message, instead of hanging).
const STORM_LIMIT: Duration = Duration::from_secs(60);

fn provider_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0xd0ab_1e00_0000_4000_8000_0000_0000_0000 + i as u128)
}

/// Consumer `n` of thread `t`: distinct across threads, and recognisable as ours.
fn consumer_uuid(t: usize, n: u64) -> Uuid {
    Uuid::from_u128(0xc0de_0000_0000_4000_8000_0000_0000_0000 + ((t as u128) << 32) + n as u128)
}

/// The inventory of provider `i`: (class, total, reserved, allocation_ratio).
fn inventory(i: usize) -> [(&'static str, u64, u64, f64); 2] {
    let ratio = if i.is_multiple_of(2) { 1.0 } else { 16.0 };
    [
        ("VCPU", 40, 0, ratio),
        // Reserved and a ratio on memory too, so the capacity formula is exercised
        // whole; memory never binds before VCPU does.
        ("MEMORY_MB", 200_000, 1024, 1.5),
    ]
}

/// The test's providers, each with its inventory.
fn make_providers(client: &Client) {
    for i in 0..PROVIDERS {
        let body = format!(
            r#"{{"name": "durable{i}", "uuid": "{}"}}"#,
            provider_uuid(i)
        );
        let (status, body) = client.call("POST", "/resource_providers", Some(&body));
        assert_eq!(status, 200, "{body}");
        let records: Vec<String> = inventory(i)
            .iter()
            .map(|(class, total, reserved, ratio)| {
                format!(
                    r#""{class}": {{"total": {total}, "reserved": {reserved},
                        "allocation_ratio": {ratio:.1}}}"#
                )
            })
            .collect();
        let body = format!(
            r#"{{"resource_provider_generation": 0, "inventories": {{{}}}}}"#,
            records.join(", ")
        );
        let (status, body) = client.call(
            "PUT",
            &format!("/resource_providers/{}/inventories", provider_uuid(i)),
            Some(&body),
        );
        assert_eq!(status, 200, "{body}");
    }
}

fn get(client: &Client, path: &str) -> Value {
    let (status, body) = client.request("GET", path, None, "1.39");
    assert_eq!(status, 200, "GET {path}: {body}");
    json(&body)
}

/// What a client learnt of its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Accepted,
    Refused,
    /// Its connection was made, and closed with no answer: the kill came first.
    Cut,
    /// Its connection was refused: the server was dead already.
    Unreached,
}

/// One claim as sent: who, where, how much.
#[derive(Debug, Clone)]
struct Claim {
    consumer: Uuid,
    provider: usize,
    /// Amounts by class, as the PUT asked.
    resources: BTreeMap<String, u64>,
    outcome: Outcome,
    /// When the client began sending it.
    sent: Instant,
}

/// xorshift64: a tiny deterministic spread of providers and sizes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Sends one claim; panics on any answer other than 204 or a capacity 409.
fn claim(client: &Client, consumer: Uuid, provider: usize, vcpu: u64, memory: u64) -> Outcome {
    let body = format!(
        r#"{{"allocations": {{"{}": {{"resources": {{"VCPU": {vcpu}, "MEMORY_MB": {memory}}}}}}},
            "project_id": "p-durable", "user_id": "u-durable",
            "consumer_generation": null, "consumer_type": "INSTANCE"}}"#,
        provider_uuid(provider)
    );
    match client.try_request(
        "PUT",
        &format!("/allocations/{consumer}"),
        Some(&body),
        "1.39",
    ) {
        Ok((204, _)) => Outcome::Accepted,
        Ok((409, response)) => {
            assert!(
                response.contains("would exceed the capacity"),
                "claim {consumer}: refused for another reason than capacity: {response}"
            );
            Outcome::Refused
        }
        Ok((status, response)) => panic!("claim {consumer}: {status} {response}"),
        Err(e) if reached(&e) => Outcome::Cut,
        Err(_) => Outcome::Unreached,
    }
}

/// One storm client: claims until told to stop or until the server stops answering.
fn storm_client(
    t: usize,
    client: Client,
    start: Arc<Barrier>,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
) -> Vec<Claim> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut claims = Vec::new();
    start.wait();
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let consumer = consumer_uuid(t, n);
        let provider = rng.below(PROVIDERS as u64) as usize;
        let vcpu = 1 + rng.below(2);
        let memory = 256 * (1 + rng.below(4));
        let sent = Instant::now();
        let outcome = claim(&client, consumer, provider, vcpu, memory);
        match outcome {
            Outcome::Accepted => accepted.fetch_add(1, Ordering::Relaxed),
            Outcome::Refused => refused.fetch_add(1, Ordering::Relaxed),
            Outcome::Cut | Outcome::Unreached => 0,
        };
        claims.push(Claim {
            consumer,
            provider,
            resources: [("VCPU".to_owned(), vcpu), ("MEMORY_MB".to_owned(), memory)].into(),
            outcome,
            sent,
        });
        if matches!(outcome, Outcome::Cut | Outcome::Unreached) {
            // The server is gone: anything sent from now on would find nobody.
            break;
        }
    }
    claims
}

/// Amounts by class, from a JSON object of numbers.
fn amounts(value: &Value) -> BTreeMap<String, u64> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .iter()
        .map(|(class, n)| (class.clone(), n.as_u64().expect("an amount")))
        .collect()
}

#[test]
fn kill_9_in_the_middle_of_a_claim_storm_loses_nothing_answered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("allot.db");
    let server = Server::start(&db);
    let client = server.client();
    make_providers(&client);

    // The server's file is in WAL mode, as the engine promises.
    let header = std::fs::read(&db).unwrap();
    assert_eq!(
        header.get(18..20),
        Some(&[2, 2][..]),
        "the file header's format versions: 2 is WAL, 1 a rollback journal"
    );
    assert!(
        dir.path().join("allot.db-wal").exists(),
        "no WAL file beside the database"
    );

    // The storm; the main thread watches the counts and pulls the plug.
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (client, start, stop) = (client.clone(), start.clone(), stop.clone());
            let (accepted, refused) = (accepted.clone(), refused.clone());
            std::thread::spawn(move || storm_client(t, client, start, stop, accepted, refused))
        })
        .collect();
    start.wait();
    let began = Instant::now();
    while (accepted.load(Ordering::Relaxed) < KILL_AFTER_ACCEPTED
        || refused.load(Ordering::Relaxed) < KILL_AFTER_REFUSED)
        && began.elapsed() < STORM_LIMIT
        && !threads.iter().any(|t| t.is_finished())
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    // SIGKILL while the 32 clients are mid-request; only then are they told to stop,
    // so requests are in flight at the moment of the kill.
    let killed_at = Instant::now();
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    let claims: Vec<Claim> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a storm client failed"))
        .collect();

    let count = |o: Outcome| claims.iter().filter(|c| c.outcome == o).count();
    let (n_accepted, n_refused, n_cut, n_unreached) = (
        count(Outcome::Accepted),
        count(Outcome::Refused),
        count(Outcome::Cut),
        count(Outcome::Unreached),
    );
    // Cut, and sent before the kill: in flight at the kill. (A claim sent after it
    // can still connect while the dying process closes its sockets.)
    let n_in_flight = claims
        .iter()
        .filter(|c| c.outcome == Outcome::Cut && c.sent < killed_at)
        .count();
    let summary = format!(
        "{n_accepted} accepted, {n_refused} refused, {n_cut} cut ({n_in_flight} in flight \
         at the kill), {n_unreached} unreached in {:?}",
        began.elapsed()
    );
    assert!(n_accepted as u64 >= KILL_AFTER_ACCEPTED, "{summary}");
    assert!(n_refused as u64 >= KILL_AFTER_REFUSED, "{summary}");
    // Without a claim in flight, the kill fell between requests and the test would
    // say nothing about a write cut short.
    assert!(n_in_flight > 0, "{summary}");

    // Second life on the same file.
    let server = Server::start(&db);
    let client = server.client();

    // Who holds what on each provider now, and each provider's usage and capacity.
    let mut held: BTreeMap<Uuid, (usize, BTreeMap<String, u64>)> = BTreeMap::new();
    for i in 0..PROVIDERS {
        let uuid = provider_uuid(i);
        let allocations = get(&client, &format!("/resource_providers/{uuid}/allocations"));
        let mut sum: BTreeMap<String, u64> = BTreeMap::new();
        for (consumer, record) in allocations["allocations"].as_object().unwrap() {
            let resources = amounts(&record["resources"]);
            for (class, n) in &resources {
                *sum.entry(class.clone()).or_default() += n;
            }
            let consumer: Uuid = consumer.parse().unwrap();
            let earlier = held.insert(consumer, (i, resources));
            assert!(earlier.is_none(), "{consumer} holds on two providers");
        }
        let usages =
            amounts(&get(&client, &format!("/resource_providers/{uuid}/usages"))["usages"]);
        let used = |class: &str| usages.get(class).copied().unwrap_or(0);
        for (class, n) in &sum {
            assert_eq!(
                used(class),
                *n,
                "provider {i} {class}: usage against allocations"
            );
        }
        for (class, total, reserved, ratio) in inventory(i) {
            let capacity = (total - reserved) as f64 * ratio;
            assert!(
                used(class) as f64 <= capacity,
                "provider {i} {class}: {} used of {capacity}",
                used(class)
            );
            assert_eq!(
                used(class),
                sum.get(class).copied().unwrap_or(0),
                "provider {i} {class}: usage with no allocations behind it"
            );
        }
    }

    let mut kept = 0;
    for claim in &claims {
        let holding = held.remove(&claim.consumer);
        let whole = Some((claim.provider, claim.resources.clone()));
        match claim.outcome {
            Outcome::Accepted => assert_eq!(holding, whole, "accepted {claim:?}; {summary}"),
            Outcome::Refused | Outcome::Unreached => {
                assert_eq!(holding, None, "{claim:?}; {summary}")
            }
            Outcome::Cut => {
                assert!(
                    holding.is_none() || holding == whole,
                    "cut {claim:?} holds {holding:?}; {summary}"
                );
                kept += usize::from(holding.is_some());
                // The consumer record agrees: all of it, or no consumer at all.
                let record = get(&client, &format!("/allocations/{}", claim.consumer));
                let allocations = record["allocations"].as_object().unwrap();
                assert_eq!(
                    allocations.len(),
                    usize::from(holding.is_some()),
                    "{record}"
                );
                if holding.is_some() {
                    assert_eq!(record["project_id"], "p-durable", "{record}");
                    assert_eq!(record["user_id"], "u-durable", "{record}");
                }
            }
        }
    }
    assert!(
        held.is_empty(),
        "allocations no client asked for: {held:?}; {summary}"
    );
    eprintln!("{summary}; {kept} of those cut were kept");
    server.terminate();
}

/// What the server answers about the test's providers and `consumers`: each
/// provider's allocations and usages, each consumer's allocations.
fn answers(client: &Client, consumers: &[Uuid]) -> Vec<Value> {
    let mut all = vec![get(client, "/resource_providers")];
    for i in 0..PROVIDERS {
        let uuid = provider_uuid(i);
        all.push(get(
            client,
            &format!("/resource_providers/{uuid}/allocations"),
        ));
        all.push(get(client, &format!("/resource_providers/{uuid}/usages")));
    }
    for consumer in consumers {
        all.push(get(client, &format!("/allocations/{consumer}")));
    }
    all
}

/// The number a start's log line gives `field` (`field=N`), if the line is there.
fn logged(lines: &[String], message: &str, field: &str) -> Option<u64> {
    let line = lines.iter().find(|l| l.contains(message))?;
    let at = line.find(&format!("{field}="))? + field.len() + 1;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A start after a kill reads the view the server saved while it ran and the
/// commits written after it, and serves what a start from the tables serves.
#[test]
fn a_start_after_a_kill_reads_the_view_saved_while_running_and_the_commits_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("allot.db");
    let database = format!("sqlite:{}", db.display());
    let saved = dir.path().join("allot.db-view");
    let every = ["--bind", "127.0.0.1:0", "--save-view-every", "2"];
    let server = Server::start_args(&database, &every, &[]);
    let client = server.client();
    make_providers(&client);
    let consumers: Vec<Uuid> = (0..12).map(|n| consumer_uuid(99, n)).collect();
    for (n, consumer) in consumers[..6].iter().enumerate() {
        assert_eq!(
            claim(&client, *consumer, n % PROVIDERS, 2, 512),
            Outcome::Accepted
        );
    }
    // The save comes when it is due (2 s after the start) and something was written.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !saved.exists() {
        assert!(
            Instant::now() < deadline,
            "no view was saved while the server ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    use std::os::unix::fs::MetadataExt;
    let first_save = std::fs::metadata(&saved).unwrap().ino();
    // The metrics count it once it is written whole.
    let counted = |outcome: &str| {
        metric(
            &server,
            &format!("allot_view_saves_total{{outcome=\"{outcome}\"}}"),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while counted("saved") < 1.0 {
        assert!(Instant::now() < deadline, "the save was not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Written beside the count of saves, so present once that is.
    assert_eq!(counted("failed"), 0.0);
    // Written after the save: more claims, a claim moved, a consumer gone.
    for (n, consumer) in consumers[6..].iter().enumerate() {
        assert_eq!(
            claim(&client, *consumer, n % PROVIDERS, 1, 256),
            Outcome::Accepted
        );
    }
    let (status, body) = client.request(
        "DELETE",
        &format!("/allocations/{}", consumers[0]),
        None,
        "1.39",
    );
    assert_eq!(status, 204, "{body}");
    let before = answers(&client, &consumers);
    assert_eq!(
        std::fs::metadata(&saved).unwrap().ino(),
        first_save,
        "a second save came before the kill: the test would not read the log's commits"
    );
    server.kill9();

    let info = ["--bind", "127.0.0.1:0", "--log", "info"];
    let server = Server::start_args(&database, &info, &[]);
    let message = "read the view saved while the server ran";
    // At least the seven writes after the save (more if the save came before the
    // first six were written, on a slow machine).
    let after = logged(server.startup_log(), message, "after");
    assert!(after >= Some(7), "{after:?}: {:?}", server.startup_log());
    assert_eq!(answers(&server.client(), &consumers), before);
    server.kill9();

    // From the tables, the same.
    std::fs::remove_file(&saved).unwrap();
    let server = Server::start_args(&database, &info, &[]);
    assert!(
        !server
            .startup_log()
            .iter()
            .any(|l| l.contains("read the view")),
        "{:?}",
        server.startup_log()
    );
    assert_eq!(answers(&server.client(), &consumers), before);
    server.terminate();
}
