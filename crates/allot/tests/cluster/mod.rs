//! The claim storm of the multi-node tests and the checks made after it: what
//! `multinode.rs` (nodes on one PostgreSQL database) and `galera.rs` (nodes on a
//! three-node Galera cluster) share.
//!
//! Three `allot serve` processes share a fresh database. 5 providers with 20 VCPU
//! each (100 in all); 32 client threads, spread over the three nodes, race to make
//! 384 one-unit claims (`PUT /allocations/{new consumer}` at 1.39), claim n on
//! provider n % 5, while a watcher polls every node's usages and fails the test if
//! one shows a provider above its capacity. A storm may end one node midway
//! ([`Ending`]: its process killed or stopped, or its database taken from it), and
//! may send a claim that got no answer again, through the next node, until one comes
//! ([`Retry`]), as a client that must place its workload does; then a probe measures
//! how soon the others take writes again. [`Storm`] is what it saw: each claim's
//! last answer and every attempt, for the checks below.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::support::{self, json, Client, Server};

pub const NODES: usize = 3;
pub const PROVIDERS: usize = 5;
pub const VCPU_PER_PROVIDER: u64 = 20;
/// Every provider's capacity together: what a storm's accepted claims add up to.
pub const CAPACITY: u64 = PROVIDERS as u64 * VCPU_PER_PROVIDER;
pub const THREADS: usize = 32;
pub const CLAIMS: usize = 384;
/// How soon every node must see a commit made on another (docs/api.md, "Several
/// nodes").
pub const FRESHNESS: Duration = Duration::from_secs(1);
/// How long a claim sent again and again may go without an answer before the test
/// fails: far past the bound a takeover has (10 s), so that only a cluster that
/// stopped taking writes for good reaches it.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// The pause before a claim is sent again: the 32 threads' retries must not starve
/// the nodes (and their lease threads) of the two cores while a writer is replaced.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

pub const FORWARDED: &str = "allot_forwarded_writes_total{outcome=\"forwarded\"}";

pub fn provider_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0x0a11_1200_0000_4000_8000_0000_0000_0000 + i as u128)
}

pub fn consumer_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0xc0a5_1200_0000_4000_8000_0000_0000_0000 + i as u128)
}

/// The status of a usages read of provider `i` on one node, and the VCPU it shows
/// used (0 unless the status is 200).
pub fn usage(client: &Client, i: usize) -> std::io::Result<(u16, u64)> {
    let path = format!("/resource_providers/{}/usages", provider_uuid(i));
    let (status, body) = client.try_request("GET", &path, None, "1.39")?;
    if status != 200 {
        return Ok((status, 0));
    }
    Ok((status, json(&body)["usages"]["VCPU"].as_u64().unwrap_or(0)))
}

/// VCPU used on provider `i` as one node sees it (which must answer).
pub fn vcpu_used(client: &Client, i: usize) -> std::io::Result<u64> {
    let (status, used) = usage(client, i)?;
    assert_eq!(status, 200, "usages of provider {i} on {}", client.addr);
    Ok(used)
}

/// What a claim was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 204: it is held.
    Accepted,
    /// Placement's 409 for a provider without room: nothing is held.
    Full,
    /// Placement's 409 for a consumer that exists, to a claim sent again: an earlier
    /// attempt that got no answer was committed, and it is held.
    HeldBefore,
    /// No answer (the node died with it, or could not be reached), or 503 (the
    /// cluster's writer was lost with it, or none was known): it may or may not
    /// have been committed, but it is whole (1 VCPU) or absent.
    Unknown,
}

/// One claim: one VCPU on provider `provider` for consumer `consumer`, the claim
/// sent `again` if an earlier attempt got no answer. Err when the connection failed.
fn put_claim(
    client: &Client,
    consumer: Uuid,
    provider: usize,
    again: bool,
) -> std::io::Result<Answer> {
    let body = format!(
        r#"{{"allocations": {{"{}": {{"resources": {{"VCPU": 1}}}}}},
            "project_id": "project", "user_id": "user",
            "consumer_generation": null, "consumer_type": "INSTANCE"}}"#,
        provider_uuid(provider)
    );
    let path = format!("/allocations/{consumer}");
    let (status, response) = client.try_request("PUT", &path, Some(&body), "1.39")?;
    Ok(match status {
        204 => Answer::Accepted,
        409 if response.contains("would exceed the capacity") => Answer::Full,
        // Only a claim sent before can have made its consumer.
        409 if again && response.contains("consumer generation conflict") => Answer::HeldBefore,
        // The cluster's writer died with the claim in flight to it, or none holds the
        // lease for the moment: its outcome is unknown.
        503 if response.contains("allot.store.unavailable") => Answer::Unknown,
        _ => panic!("claim {consumer} on provider {provider}: {status} {response}"),
    })
}

/// One claim, sent once: its status (204, 409 or 503, each for the reason
/// [`Answer`] says; anything else fails the test). Err when the node died before
/// answering.
pub fn claim(client: &Client, consumer: Uuid, provider: usize) -> std::io::Result<u16> {
    Ok(match put_claim(client, consumer, provider, false)? {
        Answer::Accepted => 204,
        Answer::Full | Answer::HeldBefore => 409,
        Answer::Unknown => 503,
    })
}

/// What consumer `c` holds as a node shows it: VCPU on its provider (0: nothing).
pub fn held(client: &Client, c: usize) -> u64 {
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

/// Waits until `check` holds, at most `bound`; returns how long it took.
pub fn converge(bound: Duration, mut check: impl FnMut() -> bool) -> Duration {
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

pub fn create_providers(client: &Client) {
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

/// How a storm ends a node.
pub enum End {
    /// `kill -9`.
    Kill,
    /// SIGTERM: it drains and exits, as in a rolling restart.
    Stop,
    /// The node runs on, but its database is taken from it by this (its Galera node
    /// killed, or cut off from the others).
    Database(Box<dyn FnOnce() + Send>),
}

/// Once `after` claims have been answered, node `node` is ended `how`.
pub struct Ending {
    pub after: usize,
    pub node: usize,
    pub how: End,
}

/// Whether a storm sends again a claim that got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Each claim is sent once, through its thread's node.
    Never,
    /// A claim that got no answer or a 503 is sent again after [`RETRY_PAUSE`],
    /// through the next node each time, until it is answered 204 or 409 (at most
    /// [`RETRY_FOR`]); the thread's later claims go where it was answered.
    UntilAnswered,
}

/// One claim sent once.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub claim: usize,
    /// Through which node.
    pub node: usize,
    pub sent: Instant,
    pub answered: Instant,
    /// None: no answer, the connection failed.
    pub answer: Option<Answer>,
    /// For no answer: whether the request had reached the node
    /// ([`support::reached`]).
    pub reached: bool,
}

/// What a storm saw.
pub struct Storm {
    /// Each claim's last answer (an attempt without an answer is
    /// [`Answer::Unknown`]).
    pub outcomes: BTreeMap<usize, Answer>,
    /// Every attempt of every claim, each claim's in the order it made them.
    pub attempts: Vec<Attempt>,
    /// How many attempts got no answer after they had reached a node, sent before
    /// the node was ended: the node died with them in flight (one sent after it can
    /// still connect while the dying process closes its sockets).
    pub in_flight: usize,
    /// The watcher's rounds of polls.
    pub polls: usize,
    /// When the node had been ended (killed, signalled, or its database taken).
    pub ended_at: Option<Instant>,
    /// From the first claim sent to the last one answered.
    pub took: Duration,
    /// Under [`Retry::UntilAnswered`], with a node ended: how long after the end a
    /// write through another node was taken again (`probe`).
    pub wrote_again_after: Option<Duration>,
}

impl Storm {
    fn of(attempts: Vec<Attempt>, ended_at: Option<Instant>, polls: usize) -> Storm {
        let first = attempts.iter().map(|a| a.sent).min().unwrap();
        let took = attempts.iter().map(|a| a.answered).max().unwrap() - first;
        let mut outcomes = BTreeMap::new();
        for a in &attempts {
            outcomes.insert(a.claim, a.answer.unwrap_or(Answer::Unknown));
        }
        assert_eq!(outcomes.len(), CLAIMS);
        let in_flight = attempts
            .iter()
            .filter(|a| a.answer.is_none() && a.reached)
            .filter(|a| ended_at.is_some_and(|end| a.sent < end))
            .count();
        Storm {
            outcomes,
            attempts,
            in_flight,
            polls,
            ended_at,
            took,
            wrote_again_after: None,
        }
    }

    /// The claims answered `answer`.
    pub fn answered(&self, answer: Answer) -> usize {
        self.outcomes.values().filter(|a| **a == answer).count()
    }
}

/// The watcher: polls every provider on every node until `done`, and fails if one
/// shows a provider above its capacity. The node `victim`, once `ended`, may fail to
/// answer (killed, stopping) or answer 503 (without its database, past its
/// staleness bound). Returns its rounds of polls.
fn watch(
    clients: Vec<Client>,
    victim: Option<usize>,
    done: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut polls = 0;
        while !done.load(Ordering::Relaxed) {
            for (n, client) in clients.iter().enumerate() {
                // Read when a poll fails, not before: the end may come between.
                let excused = || victim == Some(n) && ended.load(Ordering::Relaxed);
                for i in 0..PROVIDERS {
                    match usage(client, i) {
                        Ok((200, used)) => assert!(
                            used <= VCPU_PER_PROVIDER,
                            "node {n} shows provider {i} at {used} VCPU used"
                        ),
                        Ok((503, _)) if excused() => {}
                        Ok((status, _)) => panic!("node {n} answered {status}"),
                        Err(e) => assert!(excused(), "node {n} failed: {e}"),
                    }
                }
            }
            polls += 1;
        }
        polls
    })
}

/// Thread `t`'s claims: n = t, t + THREADS, ..., sent through node t % NODES; under
/// [`Retry::UntilAnswered`] a claim that got no answer is sent again through the next
/// node, where the thread's later claims go too (a client that fails over along its
/// list of endpoints). Each attempt is recorded in `attempts`, and `answered` counts
/// the claims done with.
fn claims_of(
    t: usize,
    clients: &[Client],
    retry: Retry,
    attempts: &Mutex<Vec<Attempt>>,
    answered: &AtomicUsize,
) {
    let mut node = t % NODES;
    for n in (t..CLAIMS).step_by(THREADS) {
        let first = Instant::now();
        for k in 0.. {
            let sent = Instant::now();
            let outcome = put_claim(&clients[node], consumer_uuid(n), n % PROVIDERS, k > 0);
            let attempt = Attempt {
                claim: n,
                node,
                sent,
                answered: Instant::now(),
                answer: outcome.as_ref().ok().copied(),
                reached: outcome.as_ref().is_err_and(support::reached),
            };
            attempts.lock().unwrap().push(attempt);
            let unknown = !matches!(outcome, Ok(a) if a != Answer::Unknown);
            if !unknown || retry == Retry::Never {
                break;
            }
            assert!(
                first.elapsed() < RETRY_FOR,
                "claim {n} got no answer in {RETRY_FOR:?} of retries"
            );
            node = (node + 1) % NODES;
            std::thread::sleep(RETRY_PAUSE);
        }
        answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// Once `after` claims are answered, ends the node as `ending` says; returns when it
/// was done, and the node if it was stopped (for its exit to be waited for).
fn end(
    nodes: &mut [Option<Server>],
    ending: Ending,
    answered: &AtomicUsize,
    ended: &AtomicBool,
) -> (Instant, Option<Server>) {
    while answered.load(Ordering::Relaxed) < ending.after {
        std::thread::sleep(Duration::from_millis(1));
    }
    ended.store(true, Ordering::Relaxed);
    let stopping = match ending.how {
        End::Kill => {
            nodes[ending.node].take().unwrap().kill9();
            None
        }
        End::Stop => {
            let node = nodes[ending.node].take().unwrap();
            node.signal("TERM");
            Some(node)
        }
        End::Database(cut) => {
            cut();
            None
        }
    };
    // Once it is done: a claim answered while a command that kills or cuts off a
    // database process was starting up may still have been taken.
    (Instant::now(), stopping)
}

/// From `end` on, writes through each node but `ended`, every 100 ms, a new trait
/// each time, until one is taken; returns how long after `end` the first was
/// answered (at most [`RETRY_FOR`]). Traits, not claims: a claim could be refused
/// for a full provider however soon the cluster takes writes again. Each write on a
/// thread of its own, not waiting for the one before: a write through a node still
/// forwarding to the lost writer may take seconds to fail.
fn probe(clients: Vec<Client>, ended: usize, end: Instant) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let first: Arc<Mutex<Option<Instant>>> = Arc::default();
        let wrong: Arc<Mutex<Vec<String>>> = Arc::default();
        for k in 0.. {
            if let Some(at) = *first.lock().unwrap() {
                return at - end;
            }
            let wrong_ones = wrong.lock().unwrap().clone();
            assert!(
                wrong_ones.is_empty(),
                "writes after the end: {wrong_ones:?}"
            );
            assert!(
                end.elapsed() < RETRY_FOR,
                "no write was taken in {RETRY_FOR:?} after the end"
            );
            for n in (0..clients.len()).filter(|n| *n != ended) {
                let (client, first, wrong) = (clients[n].clone(), first.clone(), wrong.clone());
                std::thread::spawn(move || {
                    let path = format!("/traits/CUSTOM_PROBE_{n}_{k}");
                    match client.try_request("PUT", &path, None, "latest") {
                        // 204: a try answered 503 had made it.
                        Ok((201 | 204, _)) => {
                            let now = Instant::now();
                            let mut first = first.lock().unwrap();
                            *first = Some(first.map_or(now, |t| t.min(now)));
                        }
                        Ok((503, _)) | Err(_) => {}
                        Ok((status, body)) => wrong
                            .lock()
                            .unwrap()
                            .push(format!("{path}: {status} {body}")),
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        unreachable!("the probe ends by returning or failing")
    })
}

/// The storm: claim n is made by thread n % THREADS, through node (n % THREADS) %
/// NODES unless the thread failed over to another ([`Retry`]). `ending`: a node ended midway; `retry`: whether claims are sent
/// again until answered.
pub fn storm(nodes: &mut [Option<Server>], ending: Option<Ending>, retry: Retry) -> Storm {
    let clients: Vec<Client> = nodes.iter().map(|n| n.as_ref().unwrap().client()).collect();
    let done = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    let victim = ending.as_ref().map(|e| e.node);
    let watcher = watch(clients.clone(), victim, done.clone(), ended.clone());
    let attempts: Arc<Mutex<Vec<Attempt>>> = Arc::default();
    let answered = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let clients = clients.clone();
            let (attempts, answered, start) = (attempts.clone(), answered.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                claims_of(t, &clients, retry, &attempts, &answered);
            })
        })
        .collect();
    start.wait();
    let (ended_at, stopping, prober) = match ending {
        Some(ending) => {
            let victim = ending.node;
            let (at, stopping) = end(nodes, ending, &answered, &ended);
            let prober = (retry == Retry::UntilAnswered).then(|| probe(clients, victim, at));
            (Some(at), stopping, prober)
        }
        None => (None, None, None),
    };
    for t in threads {
        t.join().expect("a client thread failed");
    }
    let wrote_again_after = prober.map(|p| p.join().expect("the probe failed"));
    if let Some(mut node) = stopping {
        let exit = node.wait_exit(Duration::from_secs(30));
        assert!(
            exit.is_some_and(|e| e.success()),
            "a stopped node exits 0 once drained: {exit:?}"
        );
    }
    done.store(true, Ordering::Relaxed);
    let polls = watcher.join().expect("the watcher saw an over-commit");
    let attempts = std::mem::take(&mut *attempts.lock().unwrap());
    Storm {
        wrote_again_after,
        ..Storm::of(attempts, ended_at, polls)
    }
}

/// Every live node shows every consumer alike (what `expected` says it holds) and
/// every provider at exactly its capacity, within the freshness bound.
pub fn all_nodes_agree(nodes: &[Option<Server>], expected: &BTreeMap<usize, u64>) {
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
pub fn freshness(nodes: &[Option<Server>]) {
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
pub fn every_node_sees_the_providers(nodes: &[Option<Server>]) {
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

/// What each claim of a storm holds as `survivor` shows it, checked against its
/// answer: a claim accepted (or found held by a claim sent again) is held, one
/// refused is not; one never answered may or may not have been committed, but is
/// whole (1 VCPU) or absent. Returns the holdings and how many claims were never
/// answered.
pub fn held_as_answered(
    outcomes: &BTreeMap<usize, Answer>,
    survivor: &Client,
) -> (BTreeMap<usize, u64>, usize) {
    let mut expected = BTreeMap::new();
    let mut unanswered = 0;
    for (n, answer) in outcomes {
        let holds = held(survivor, *n);
        match answer {
            Answer::Accepted => assert_eq!(holds, 1, "accepted claim {n} was lost"),
            Answer::HeldBefore => assert_eq!(holds, 1, "claim {n}, found made, was lost"),
            Answer::Full => assert_eq!(holds, 0, "refused claim {n} is held"),
            Answer::Unknown => unanswered += 1,
        }
        expected.insert(*n, holds);
    }
    (expected, unanswered)
}

/// After a storm that ended a node: every claim answered 204 is held and no refused
/// one is (`held_as_answered`, as the first node that was not ended shows them), the
/// totals are exactly the capacity, and every live node agrees. Returns the
/// holdings.
pub fn nothing_answered_lost(
    outcomes: &BTreeMap<usize, Answer>,
    nodes: &[Option<Server>],
    ended: usize,
) -> BTreeMap<usize, u64> {
    let survivor = (0..nodes.len()).find(|n| *n != ended).unwrap();
    let survivor = nodes[survivor].as_ref().unwrap().client();
    let (expected, _) = held_as_answered(outcomes, &survivor);
    assert_eq!(expected.values().sum::<u64>(), CAPACITY);
    all_nodes_agree(nodes, &expected);
    expected
}

/// Which live node holds the writer's lease, once exactly one does (at most `bound`).
/// A node whose `/metrics` is refused (its view is stale: it is cut off from its
/// database) holds none.
pub fn the_writer(nodes: &[Option<Server>], bound: Duration) -> usize {
    let mut writer = None;
    converge(bound, || {
        let holders: Vec<usize> = (0..nodes.len())
            .filter(|&n| {
                nodes[n].as_ref().is_some_and(|node| {
                    support::try_metric(node, "allot_cluster_writer") == Some(1.0)
                })
            })
            .collect();
        writer = holders.first().copied();
        holders.len() == 1
    });
    writer.unwrap()
}

/// Until every live node but `writer` has heard who writes for the cluster (from its
/// log, at `allot_server::forward=info`). A node's lease thread looks the holder up
/// once a second, so right after the lease is taken another node may not know yet:
/// on PostgreSQL it writes for itself (correctly, under the log's lock) instead of
/// forwarding, on MariaDB it answers 503; what a test that counts forwarded writes,
/// or every answer, must wait out.
pub fn every_other_node_knows_the_writer(nodes: &[Option<Server>], writer: usize) {
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
                    // The role's own line (`forward::Forwarding::set_role`), not
                    // an error that names the lease.
                    .find(|line| line.contains("the cluster's writer role="))
                    .is_some_and(|line| line.contains("At("))
            })
    });
}

/// A web UI request to `node` with `cookie` (and a form body if any), sent as a
/// page of the node's own origin would.
pub fn ui(node: &Server, method: &str, path: &str, cookie: &str, form: &str) -> support::Reply {
    let addr = &node.addr;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         origin: http://{addr}\r\nsec-fetch-site: same-origin\r\ncookie: {cookie}\r\n\
         content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{form}",
        form.len()
    );
    support::exchange(addr, request.as_bytes())
}

/// A UI login through `node` (with the browser's `cookie`, if any): the new
/// session's cookie, `name=value`.
pub fn ui_login(node: &Server, cookie: &str) -> String {
    let r = ui(node, "POST", "/ui/login", cookie, "token=admin");
    assert_eq!(r.status, 303, "{}", r.body);
    let set = r.header("set-cookie").expect("a session cookie");
    set.split(';').next().unwrap().to_owned()
}

/// The CSRF token of the logout form a page of `node` shows the session.
pub fn ui_csrf(node: &Server, cookie: &str) -> String {
    let page = ui(node, "GET", "/ui", cookie, "").body;
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the logout form's CSRF token")
        .to_owned()
}

/// Whether `node` sends the session of `cookie` back to the login page.
pub fn ui_refused(node: &Server, cookie: &str) -> bool {
    let r = ui(node, "GET", "/ui/providers", cookie, "");
    r.status == 303
        && r.header("location")
            .is_some_and(|l| l.contains("/ui/login"))
}
