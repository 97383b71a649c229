//! Several allot nodes on one PostgreSQL database (issue 12), through the real binary
//! over real HTTP: the same guarantees as one node.
//!
//! Three `allot serve` processes share a fresh database. 5 providers with 20 VCPU
//! each (100 in all); 32 client threads, spread over the three nodes, race to make
//! 384 one-unit claims (`PUT /allocations/{new consumer}` at 1.39), claim n on
//! provider n % 5. Exactly 100 are accepted and the rest refused with Placement's 409;
//! a watcher polling every node's usages while the claims run never sees a provider
//! above 20; afterwards every node shows every consumer alike, within the freshness
//! bound. The second test kills one node with `kill -9` in the middle of the load:
//! every claim answered 204 is held, nothing else than a whole claim is, the
//! survivors go on serving, and the totals still end at exactly 100. Two more: nodes
//! racing to create the same provider name or custom class end as Placement's 409 (or
//! its idempotent 204), and a node cut off from the database refuses reads (503
//! `allot.view.stale`) and writes (503 `allot.store.unavailable`) until it is back.
//! And the nodes' writes go through one of them, the cluster's writer (issue 25): a
//! node that forwarded a write shows it at once, and when the writer is killed in
//! the middle of the load, nothing answered 204 is lost and another node takes its
//! place; when it is stopped (SIGTERM, a rolling restart), every claim made through
//! the other nodes is answered too, after a handover that a writer nobody forwarded
//! to skips.
//!
//! The database server comes from `ALLOT_TEST_POSTGRES_URL` (see
//! `support::Database`). Without it each test is skipped and named in `scripts/test`'s
//! summary, except under CI (`CI=true`), where it fails: CI must run them
//! (`support::skip`).

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use support::{json, metric, psql, Client, Database, Server};
use uuid::Uuid;

const NODES: usize = 3;
const PROVIDERS: usize = 5;
const VCPU_PER_PROVIDER: u64 = 20;
const THREADS: usize = 32;
const CLAIMS: usize = 384;
/// How soon every node must see a commit made on another (docs/api.md, "Several
/// nodes").
const FRESHNESS: Duration = Duration::from_secs(1);

fn provider_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0x0a11_1200_0000_4000_8000_0000_0000_0000 + i as u128)
}

fn consumer_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0xc0a5_1200_0000_4000_8000_0000_0000_0000 + i as u128)
}

/// VCPU used on provider `i` as one node sees it.
fn vcpu_used(client: &Client, i: usize) -> std::io::Result<u64> {
    let path = format!("/resource_providers/{}/usages", provider_uuid(i));
    let (status, body) = client.try_request("GET", &path, None, "1.39")?;
    assert_eq!(status, 200, "{body}");
    Ok(json(&body)["usages"]["VCPU"].as_u64().unwrap_or(0))
}

/// One claim: one VCPU on provider `provider` for a new consumer. Err when the node
/// died before answering.
fn claim(client: &Client, consumer: Uuid, provider: usize) -> std::io::Result<u16> {
    let body = format!(
        r#"{{"allocations": {{"{}": {{"resources": {{"VCPU": 1}}}}}},
            "project_id": "project", "user_id": "user",
            "consumer_generation": null, "consumer_type": "INSTANCE"}}"#,
        provider_uuid(provider)
    );
    let (status, response) = client.try_request(
        "PUT",
        &format!("/allocations/{consumer}"),
        Some(&body),
        "1.39",
    )?;
    assert!(
        status == 204
            || (status == 409 && response.contains("would exceed the capacity"))
            // The cluster's writer died with the claim in flight to it: its outcome
            // is unknown (`storm` counts it as unanswered).
            || (status == 503 && response.contains("allot.store.unavailable")),
        "claim {consumer} on provider {provider}: {status} {response}"
    );
    Ok(status)
}

/// What consumer `c` holds as a node shows it: VCPU on its provider (0: nothing).
fn held(client: &Client, c: usize) -> u64 {
    let (status, body) = client.request(
        "GET",
        &format!("/allocations/{}", consumer_uuid(c)),
        None,
        "1.39",
    );
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    let allocations = v["allocations"].as_object().expect("allocations object");
    match allocations.get(&provider_uuid(c % PROVIDERS).to_string()) {
        Some(a) => {
            assert_eq!(allocations.len(), 1, "{body}");
            a["resources"]["VCPU"].as_u64().expect("VCPU")
        }
        None => {
            assert!(allocations.is_empty(), "{body}");
            0
        }
    }
}

/// Waits until `check` holds on every node, at most `bound`; returns how long it took.
fn converge(bound: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if check() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "the nodes did not agree within {bound:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn create_providers(client: &Client) {
    for i in 0..PROVIDERS {
        let body = format!(r#"{{"name": "cn{i}", "uuid": "{}"}}"#, provider_uuid(i));
        let (status, body) = client.call("POST", "/resource_providers", Some(&body));
        assert_eq!(status, 200, "{body}");
        let inventory = format!(
            r#"{{"resource_provider_generation": 0,
                "inventories": {{"VCPU": {{"total": {VCPU_PER_PROVIDER}}}}}}}"#
        );
        let path = format!("/resource_providers/{}/inventories", provider_uuid(i));
        let (status, body) = client.call("PUT", &path, Some(&inventory));
        assert_eq!(status, 200, "{body}");
    }
}

/// What a storm saw: each claim's outcome (None: the node died before answering),
/// how many of those unanswered claims were sent before the kill and had reached
/// the node (it died with them in flight, see [`support::reached`]), and the
/// watcher's number of polls.
struct Storm {
    outcomes: BTreeMap<usize, Option<u16>>,
    in_flight: usize,
    polls: usize,
}

/// How `storm` ends node 1.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// `kill -9`.
    Kill,
    /// SIGTERM: it drains and exits, as in a rolling restart.
    Stop,
}

/// The storm: claim n is made by thread n % THREADS through node (n % THREADS) %
/// NODES. `end_after`: once that many claims have been answered, node 1 is ended.
fn storm(nodes: &mut [Option<Server>], end_after: Option<(usize, End)>) -> Storm {
    let clients: Vec<Client> = nodes.iter().map(|n| n.as_ref().unwrap().client()).collect();
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    // The watcher polls every provider on every node: never above capacity. A node
    // that was killed is skipped from then on.
    let watcher = {
        let (clients, done, killed) = (clients.clone(), done.clone(), killed.clone());
        std::thread::spawn(move || {
            let mut polls = 0;
            while !done.load(Ordering::Relaxed) {
                for (n, client) in clients.iter().enumerate() {
                    for i in 0..PROVIDERS {
                        match vcpu_used(client, i) {
                            Ok(used) => assert!(
                                used <= VCPU_PER_PROVIDER,
                                "node {n} shows provider {i} at {used} VCPU used"
                            ),
                            Err(e) => assert!(
                                n == 1 && killed.load(Ordering::Relaxed),
                                "node {n} failed: {e}"
                            ),
                        }
                    }
                }
                polls += 1;
            }
            polls
        })
    };
    let outcomes: Arc<Mutex<BTreeMap<usize, Option<u16>>>> = Arc::default();
    let answered = Arc::new(AtomicUsize::new(0));
    // When each claim that reached a node and got no answer was sent.
    let cut: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let client = clients[t % NODES].clone();
            let (outcomes, answered, start) = (outcomes.clone(), answered.clone(), start.clone());
            let cut = cut.clone();
            std::thread::spawn(move || {
                start.wait();
                for n in (t..CLAIMS).step_by(THREADS) {
                    let sent = Instant::now();
                    let status = claim(&client, consumer_uuid(n), n % PROVIDERS)
                        .inspect_err(|e| {
                            if support::reached(e) {
                                cut.lock().unwrap().push(sent);
                            }
                        })
                        .ok()
                        .filter(|s| *s != 503);
                    outcomes.lock().unwrap().insert(n, status);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    start.wait();
    let mut killed_at = None;
    let mut stopping = None;
    if let Some((after, end)) = end_after {
        while answered.load(Ordering::Relaxed) < after {
            std::thread::sleep(Duration::from_millis(1));
        }
        killed.store(true, Ordering::Relaxed);
        killed_at = Some(Instant::now());
        let node = nodes[1].take().unwrap();
        match end {
            End::Kill => node.kill9(),
            End::Stop => {
                node.signal("TERM");
                stopping = Some(node);
            }
        }
    }
    for t in threads {
        t.join().expect("a client thread failed");
    }
    if let Some(mut node) = stopping {
        let exit = node.wait_exit(Duration::from_secs(30));
        assert!(
            exit.is_some_and(|e| e.success()),
            "a stopped node exits 0 once drained: {exit:?}"
        );
    }
    done.store(true, Ordering::Relaxed);
    let polls = watcher.join().expect("the watcher saw an over-commit");
    let outcomes = Arc::try_unwrap(outcomes).unwrap().into_inner().unwrap();
    assert_eq!(outcomes.len(), CLAIMS);
    // Cut, and sent before the kill: in flight at the kill. (One sent after it can
    // still connect while the dying process closes its sockets.)
    let in_flight = cut
        .lock()
        .unwrap()
        .iter()
        .filter(|sent| killed_at.is_some_and(|k| **sent < k))
        .count();
    Storm {
        outcomes,
        in_flight,
        polls,
    }
}

/// Every live node shows every consumer alike (what `expected` says it holds) and
/// every provider at exactly its capacity, within the freshness bound.
fn all_nodes_agree(nodes: &[Option<Server>], expected: &BTreeMap<usize, u64>) {
    for node in nodes.iter().flatten() {
        let client = node.client();
        converge(FRESHNESS, || {
            (0..PROVIDERS).all(|i| vcpu_used(&client, i).unwrap() == VCPU_PER_PROVIDER)
        });
        for (c, vcpu) in expected {
            assert_eq!(
                held(&client, *c),
                *vcpu,
                "consumer {c} on node {}",
                node.addr
            );
        }
    }
}

/// The lag between a write on one node and a read that sees it on the next: 30
/// traits created in turn on each node, each looked for on the next node until it is
/// there. Every lag must be within the bound; the figures are printed.
fn freshness(nodes: &[Option<Server>]) {
    let clients: Vec<Client> = nodes.iter().flatten().map(Server::client).collect();
    let mut lags = Vec::new();
    for k in 0..30 {
        let (writer, reader) = (&clients[k % NODES], &clients[(k + 1) % NODES]);
        let path = format!("/traits/CUSTOM_FRESH_{k}");
        let (status, body) = writer.call("PUT", &path, None);
        assert_eq!(status, 201, "{body}");
        lags.push(converge(FRESHNESS, || {
            reader.call("GET", &path, None).0 == 204
        }));
    }
    lags.sort();
    eprintln!(
        "freshness: a write on one node seen on the next after {:?} (median), {:?} (max)",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
}

/// What one node made, the others see within the bound (before the storm, whose
/// watcher expects every provider on every node).
fn every_node_sees_the_providers(nodes: &[Option<Server>]) {
    for node in nodes.iter().flatten() {
        let client = node.client();
        let took = converge(FRESHNESS, || {
            (0..PROVIDERS).all(|i| {
                let path = format!("/resource_providers/{}", provider_uuid(i));
                client.call("GET", &path, None).0 == 200
            })
        });
        eprintln!("node {} saw the providers after {took:?}", node.addr);
    }
}

/// `NODES` nodes on `db`'s database.
fn start_nodes(db: &Database) -> Vec<Option<Server>> {
    // The role each node hears from its lease is logged at INFO
    // (`every_other_node_knows_the_writer` reads it); the rest stays at WARN.
    let args = [
        "--bind",
        "127.0.0.1:0",
        "--log",
        "warn,allot_server::forward=info",
    ];
    (0..NODES)
        .map(|_| Some(Server::start_args(&db.url, &args, &[])))
        .collect()
}

/// What each claim of a storm holds as `survivor` shows it, checked against its
/// answer: a claim answered 204 is held, one refused is not; one never answered may
/// or may not have been committed, but is whole (1 VCPU) or absent. Returns the
/// holdings and how many claims were never answered.
fn held_as_answered(
    outcomes: &BTreeMap<usize, Option<u16>>,
    survivor: &Client,
) -> (BTreeMap<usize, u64>, usize) {
    let mut expected = BTreeMap::new();
    let mut unanswered = 0;
    for (n, status) in outcomes {
        let holds = held(survivor, *n);
        match status {
            Some(204) => assert_eq!(holds, 1, "accepted claim {n} was lost"),
            Some(_) => assert_eq!(holds, 0, "refused claim {n} is held"),
            None => unanswered += 1,
        }
        expected.insert(*n, holds);
    }
    (expected, unanswered)
}

#[test]
fn three_nodes_never_over_commit() {
    let Some(db) = Database::create() else { return };
    let mut nodes = start_nodes(&db);
    create_providers(&nodes[0].as_ref().unwrap().client());
    every_node_sees_the_providers(&nodes);
    freshness(&nodes);

    let Storm {
        outcomes, polls, ..
    } = storm(&mut nodes, None);
    assert!(polls > 0);
    let accepted: Vec<usize> = outcomes
        .iter()
        .filter(|(_, s)| **s == Some(204))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(accepted.len() as u64, PROVIDERS as u64 * VCPU_PER_PROVIDER);
    assert!(outcomes.values().all(|s| matches!(s, Some(204 | 409))));
    let expected = outcomes
        .iter()
        .map(|(n, s)| (*n, u64::from(*s == Some(204))))
        .collect();
    all_nodes_agree(&nodes, &expected);
}

#[test]
fn a_node_killed_mid_load_loses_nothing() {
    // The kill must land while claims are in flight to the node, which depends on
    // timing: a forwarded claim is answered in about a millisecond, and on a busy
    // machine the kill can come just after every claim sent before it was answered.
    // Then the scenario is run again on a fresh database (its other checks hold on
    // every attempt), at most three times.
    for attempt in 1..=3 {
        let Some(db) = Database::create() else { return };
        let mut nodes = start_nodes(&db);
        create_providers(&nodes[0].as_ref().unwrap().client());
        every_node_sees_the_providers(&nodes);
        let Storm {
            outcomes,
            in_flight,
            ..
        } = storm(&mut nodes, Some((CLAIMS / 4, End::Kill)));
        // Claims answered 204 are held; those the dead node never answered may or
        // may not have been committed, but each is whole (1 VCPU) or absent; the
        // survivors took the rest, so the totals are exactly the capacity.
        let survivor = nodes[0].as_ref().unwrap().client();
        let (expected, unanswered) = held_as_answered(&outcomes, &survivor);
        assert_eq!(
            expected.values().sum::<u64>(),
            PROVIDERS as u64 * VCPU_PER_PROVIDER
        );
        all_nodes_agree(&nodes, &expected);
        // The kill landed mid-load: some claims had reached node 1 and were never
        // answered (the rest of its unanswered ones found it gone).
        if in_flight == 0 {
            eprintln!(
                "attempt {attempt}: no claim in flight at the kill ({unanswered} unanswered); again"
            );
            continue;
        }
        eprintln!("node 1 killed with {in_flight} claims in flight; {unanswered} unanswered");
        // The survivors still take writes.
        let (status, body) = survivor.call(
            "DELETE",
            &format!(
                "/allocations/{}",
                consumer_uuid(*expected.iter().find(|(_, v)| **v == 1).unwrap().0)
            ),
            None,
        );
        assert_eq!(status, 204, "{body}");
        return;
    }
    panic!("in three attempts the kill never landed with a claim in flight");
}

/// Which live node holds the writer's lease, once exactly one does (at most `bound`).
fn the_writer(nodes: &[Option<Server>], bound: Duration) -> usize {
    let mut writer = None;
    converge(bound, || {
        let holders: Vec<usize> = (0..nodes.len())
            .filter(|&n| {
                nodes[n]
                    .as_ref()
                    .is_some_and(|node| metric(node, "allot_cluster_writer") == 1.0)
            })
            .collect();
        writer = holders.first().copied();
        holders.len() == 1
    });
    writer.unwrap()
}

const FORWARDED: &str = "allot_forwarded_writes_total{outcome=\"forwarded\"}";

/// Until every live node but `writer` has heard who writes for the cluster. A node's
/// lease thread looks the holder up once a second, so right after the lease is taken
/// another node may not know yet, and writes for itself (correctly, under the log's
/// lock) instead of forwarding: what a test that counts forwarded writes must wait out.
fn every_other_node_knows_the_writer(nodes: &[Option<Server>], writer: usize) {
    converge(Duration::from_secs(10), || {
        nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| *n != writer)
            .filter_map(|(_, node)| node.as_ref())
            .all(|node| {
                node.log()
                    .iter()
                    .rev()
                    .find(|line| line.contains("the cluster's writer"))
                    .is_some_and(|line| line.contains("At("))
            })
    });
}

/// `NODES` nodes on `db`'s database, the one that holds the writer's lease second
/// (where `storm` ends a node) and known as the writer by the others, with the
/// providers made and seen by every node.
fn nodes_with_the_writer_second(db: &Database) -> Vec<Option<Server>> {
    let mut nodes = start_nodes(db);
    let writer = the_writer(&nodes, Duration::from_secs(10));
    nodes.swap(writer, 1);
    every_other_node_knows_the_writer(&nodes, 1);
    create_providers(&nodes[0].as_ref().unwrap().client());
    every_node_sees_the_providers(&nodes);
    nodes
}

/// After a storm that ended the writer: every claim answered 204 is held and no
/// refused one is (`held_as_answered`, as the first survivor shows them), the totals
/// are exactly the capacity, and every survivor agrees. Returns the holdings.
fn nothing_answered_lost(
    outcomes: &BTreeMap<usize, Option<u16>>,
    nodes: &[Option<Server>],
) -> BTreeMap<usize, u64> {
    let survivor = nodes[0].as_ref().unwrap().client();
    let (expected, _) = held_as_answered(outcomes, &survivor);
    assert_eq!(
        expected.values().sum::<u64>(),
        PROVIDERS as u64 * VCPU_PER_PROVIDER
    );
    all_nodes_agree(nodes, &expected);
    expected
}

#[test]
fn writes_go_through_the_writer_which_a_kill_replaces_losing_nothing() {
    let Some(db) = Database::create() else { return };
    // One writer, whose place `storm` kills.
    let mut nodes = nodes_with_the_writer_second(&db);

    // A claim sent to another node is forwarded, and that node shows it at once.
    let follower = nodes[2].as_ref().unwrap();
    let before = metric(follower, FORWARDED);
    let consumer = Uuid::from_u128(0xc0a5_1200_ffff_4000_8000_0000_0000_0001);
    assert_eq!(claim(&follower.client(), consumer, 0).unwrap(), 204);
    let (status, body) = follower.call("GET", &format!("/allocations/{consumer}"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["allocations"][provider_uuid(0).to_string()]["resources"]["VCPU"],
        1,
        "the node that forwarded the claim shows it: {body}"
    );
    assert_eq!(metric(follower, FORWARDED), before + 1.0);
    assert_eq!(
        metric(nodes[1].as_ref().unwrap(), FORWARDED),
        0.0,
        "the writer forwards nothing"
    );
    let (status, body) = follower.call("DELETE", &format!("/allocations/{consumer}"), None);
    assert_eq!(status, 204, "{body}");

    // The writer killed with claims in flight to it, from every node.
    let Storm { outcomes, .. } = storm(&mut nodes, Some((CLAIMS / 4, End::Kill)));
    let expected = nothing_answered_lost(&outcomes, &nodes);

    // A survivor takes the lease (the database ends the dead writer's session at
    // once: its socket closed with the process), and the other one, once its lease
    // thread has looked (every second), forwards to it; meanwhile it writes itself.
    let took = Instant::now();
    let writer = the_writer(&nodes, Duration::from_secs(10));
    eprintln!(
        "node {writer} took the lease {:?} after the storm",
        took.elapsed()
    );
    let other = nodes[if writer == 0 { 2 } else { 0 }].as_ref().unwrap();
    let before = metric(other, FORWARDED);
    let mut held_ones = expected.iter().filter(|(_, v)| **v == 1).map(|(n, _)| *n);
    converge(Duration::from_secs(5), || {
        let n = held_ones.next().expect("a claim left to release");
        let (status, body) = other.call(
            "DELETE",
            &format!("/allocations/{}", consumer_uuid(n)),
            None,
        );
        assert_eq!(status, 204, "{body}");
        assert_eq!(
            held(&other.client(), n),
            0,
            "the node that released {n} shows it"
        );
        // Some 100 claims to release: one every 50 ms or so lasts the bound.
        std::thread::sleep(Duration::from_millis(45));
        metric(other, FORWARDED) > before
    });
}

/// A rolling restart's step: the cluster's writer stopped with SIGTERM in the middle
/// of the load. It lets the lease go when told to stop, answers what it took and
/// exits 0; every claim made through the other nodes is answered (none lost with the
/// writer, which would be a 503), every claim answered 204 is held, and one of the
/// others writes for the cluster within the lease's bound.
#[test]
fn a_writer_stopped_mid_storm_hands_over_and_the_others_answer_every_claim() {
    let Some(db) = Database::create() else { return };
    // One writer, which `storm` stops.
    let mut nodes = nodes_with_the_writer_second(&db);

    let Storm { outcomes, .. } = storm(&mut nodes, Some((CLAIMS / 4, End::Stop)));
    for (n, status) in &outcomes {
        // Thread t made its claims through node t % NODES.
        if (n % THREADS) % NODES != 1 {
            assert!(
                status.is_some(),
                "claim {n}, made through a node that kept running, got no answer"
            );
        }
    }
    nothing_answered_lost(&outcomes, &nodes);
    // The lease goes at the stopping node's next lease tick (1 s), or with its
    // process, and a survivor takes it at its own next tick (1 s).
    let writer = the_writer(&nodes, Duration::from_secs(3));
    eprintln!("node {writer} writes for the cluster after the stop");
}

/// A stopping writer waits out the handover only if another node has forwarded it a
/// write (then one may hold a connection to it that the stop would cut): a writer
/// alone on its database drains at once. Its log (at `info`) says which it did.
#[test]
fn a_stopping_writer_hands_over_only_if_it_was_forwarded_to() {
    let Some(db) = Database::create() else { return };
    for forwarded in [false, true] {
        let mut nodes = vec![Some(Server::start_args(
            &db.url,
            &["--bind", "127.0.0.1:0", "--log", "info"],
            &[],
        ))];
        the_writer(&nodes, Duration::from_secs(10));
        let mut node = nodes[0].take().unwrap();
        if forwarded {
            // A write as another node forwards it (`forward::FORWARDED`).
            let reply = support::send_raw(
                &node.addr,
                "PUT",
                "/traits/CUSTOM_HANDED_OVER",
                &[
                    ("x-auth-token", b"admin"),
                    ("openstack-api-version", b"placement latest"),
                    ("x-allot-forwarded", b"1"),
                ],
                "",
            );
            assert!(matches!(reply.status, 201 | 204), "{}", reply.body);
            assert!(
                reply.header("x-allot-cursor").is_some(),
                "answered as forwarded"
            );
        }
        let stopped = Instant::now();
        node.signal("TERM");
        let exit = node.wait_exit(Duration::from_secs(30));
        assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
        let handed_over = node
            .log()
            .iter()
            .any(|l| l.contains("handing the cluster's writer role over"));
        assert_eq!(handed_over, forwarded, "{:#?}", node.log());
        if forwarded {
            // It served on for the handover (2.5 s) before it drained.
            assert!(stopped.elapsed() >= Duration::from_millis(2500));
        }
        eprintln!(
            "forwarded to: {forwarded}, stopped in {:?}",
            stopped.elapsed()
        );
    }
}

/// Two nodes creating a provider of the same name, or the same custom class, at the
/// same moment: one wins, the other gets Placement's 409, never a 500.
#[test]
fn racing_creates_on_two_nodes_end_as_placements_409() {
    let Some(db) = Database::create() else { return };
    let nodes: Vec<Server> = (0..2).map(|_| Server::start_url(&db.url)).collect();
    for round in 0..20 {
        let start = Arc::new(Barrier::new(2));
        let racers: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let (client, start) = (node.client(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let body = format!(r#"{{"name": "dup{round}", "uuid": "{}"}}"#, Uuid::new_v4());
                    let provider = client.call("POST", "/resource_providers", Some(&body));
                    let class = client.call(
                        "PUT",
                        &format!("/resource_classes/CUSTOM_RACE_{round}"),
                        None,
                    );
                    (n, provider, class)
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let mut providers: Vec<u16> = results.iter().map(|(_, p, _)| p.0).collect();
        providers.sort();
        assert_eq!(providers, [200, 409], "round {round}: {results:?}");
        for (_, (status, body), _) in &results {
            if *status == 409 {
                assert!(body.contains("placement.duplicate_name"), "{body}");
            }
        }
        // PUT of a custom class is idempotent in Placement: 201 for the first, 204 for
        // the second.
        let mut classes: Vec<u16> = results.iter().map(|(_, _, c)| c.0).collect();
        classes.sort();
        assert_eq!(classes, [201, 204], "round {round}: {results:?}");
    }
}

/// A node that cannot reach the database refuses reads after its bound rather than
/// answer from a view that may be stale, answers writes with 503, and serves again
/// once the database is back.
#[test]
fn a_node_cut_off_from_the_database_refuses_then_recovers() {
    let Some(db) = Database::create() else { return };
    let node = Server::start_url(&db.url);
    let client = node.client();
    create_providers(&client);
    let path = format!("/resource_providers/{}", provider_uuid(0));
    assert_eq!(client.call("GET", &path, None).0, 200);

    // No connection to this database from now on, and the node's are cut.
    psql(
        &db.admin,
        &format!("ALTER DATABASE {} ALLOW_CONNECTIONS false", db.name),
    );
    psql(
        &db.admin,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'",
            db.name
        ),
    );
    let mut last = (0, String::new());
    converge(Duration::from_secs(15), || {
        last = client.call("GET", &path, None);
        last.0 == 503
    });
    assert!(last.1.contains("allot.view.stale"), "{}", last.1);
    let (status, body) = client.call("PUT", "/traits/CUSTOM_WHILE_CUT_OFF", None);
    assert_eq!(status, 503, "a write while cut off: {body}");
    assert!(body.contains("allot.store.unavailable"), "{body}");

    psql(
        &db.admin,
        &format!("ALTER DATABASE {} ALLOW_CONNECTIONS true", db.name),
    );
    converge(Duration::from_secs(15), || {
        client.call("GET", &path, None).0 == 200
    });
    let (status, body) = client.call("PUT", "/traits/CUSTOM_AFTER", None);
    assert_eq!(status, 201, "{body}");
}

/// A read on the node that forwarded a write waits until that node's view holds the
/// write, however late its view follows the log: here its connections to the
/// database are held (a stalled network) while the writer commits, so the write is
/// answered long before the view can have it, and the read still shows it.
#[test]
fn a_read_after_a_forwarded_write_waits_for_the_view_to_hold_it() {
    let Some(db) = Database::create() else { return };
    let writer = Server::start_url(&db.url);
    let (relay, relayed) = support::Relay::to_database(&db.url);
    let follower = Server::start_url(&relayed);
    let nodes = [Some(writer), Some(follower)];
    assert_eq!(the_writer(&nodes, Duration::from_secs(10)), 0);
    create_providers(&nodes[0].as_ref().unwrap().client());
    every_node_sees_the_providers(&nodes);
    let follower = nodes[1].as_ref().unwrap();
    // The follower forwards once its lease thread has seen who writes (every second).
    let mut n = 0;
    converge(Duration::from_secs(10), || {
        n += 1;
        let consumer = Uuid::from_u128(0xc0a5_1200_eeee_4000_8000_0000_0000_0000 + n);
        assert_eq!(claim(&follower.client(), consumer, 1).unwrap(), 204);
        metric(follower, FORWARDED) > 0.0
    });

    relay.paused.store(true, Ordering::Release);
    let stalled = Duration::from_millis(500);
    let asked = Instant::now();
    let resume = {
        let paused = relay.paused.clone();
        std::thread::spawn(move || {
            std::thread::sleep(stalled);
            paused.store(false, Ordering::Release);
        })
    };
    let consumer = Uuid::from_u128(0xc0a5_1200_ffff_4000_8000_0000_0000_0002);
    assert_eq!(claim(&follower.client(), consumer, 0).unwrap(), 204);
    let (status, body) = follower.call("GET", &format!("/allocations/{consumer}"), None);
    let waited = asked.elapsed();
    resume.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["allocations"][provider_uuid(0).to_string()]["resources"]["VCPU"],
        1,
        "the node that forwarded the claim shows it after {waited:?}: {body}"
    );
    // The write and the read took as long as the stall at least: the view really
    // could not follow the log meanwhile (else the test would show nothing).
    assert!(
        waited >= stalled / 2,
        "the write and the read came back in {waited:?}, before the view could follow the log"
    );
}
