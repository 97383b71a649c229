//! Several allot nodes on a three-node MariaDB Galera cluster (issue 45), through the
//! real binary over real HTTP: the guarantees of nodes on one PostgreSQL database
//! (`multinode.rs`) hold where the cluster's writer is chosen by a lease row and
//! every commit is fenced by the lease's epoch (`allot_store`'s
//! `engine::mariadb::lease`), through the failures a Galera deployment sees.
//!
//! Each test makes a database of its own on the cluster and three `allot serve`
//! processes, node i on Galera node i, each advertising its own address for the
//! others' forwarded writes. Then `cluster::storm`: 32 client threads make 384
//! one-unit claims on 5 providers of 20 VCPU, spread over the three nodes, while a
//! watcher polls every node's usages and fails if one shows a provider above 20.
//!
//! 1. Nothing fails: exactly 100 claims are accepted and the rest refused with
//!    Placement's 409, and every node shows the same consumers afterwards; the other
//!    nodes' writes went through the writer.
//! 2. The allot node that holds the writer's lease is killed (`kill -9`) mid-storm.
//! 3. The Galera node (`mariadbd`) of the writer's allot node is killed (`kill -9`)
//!    mid-storm; the allot node runs on without its database, its `/healthcheck`
//!    answering 503 until the Galera node is back, then 200.
//! 4. The writer's Galera node is cut off from the other two while it runs
//!    (`gmcast.isolate`): no claim sent through the writer's node is accepted from
//!    then on.
//! 5. Three nodes started at once on a fresh database, each through its own Galera
//!    node, all start (their migrations race).
//!
//! In 2 to 4 the clients send a claim that got no answer, or a 503 (no writer for the
//! moment), again through the next node until it is answered 204 or 409, as a client
//! that must place a workload does. Then nothing answered 2xx is lost, nothing
//! refused is held, no provider was ever above capacity, the totals are exactly 100
//! once every claim is answered, and another node took a write within 10 s of the
//! failure (from the failure to the first write through a surviving node that is
//! answered 2xx: `cluster::Storm::wrote_again_after`), holds the lease (its row names
//! the new holder under a new epoch) and has fenced the log's head with that epoch.
//! In 3 and 4 the Galera node is then put back, and the allot node that lost it
//! follows the log again: it agrees with the others and forwards its writes to the
//! new writer, and every Galera node holds the same log head and allocations, so no
//! commit of the old writer's after the takeover exists anywhere.
//!
//! The cluster comes from `ALLOT_TEST_GALERA_URLS` (`support::Galera`; `scripts/test`
//! starts one with `scripts/galera-cluster`). Without it each test is skipped, except
//! under CI, where it fails (`support::skip`). The tests share the cluster and two
//! take a node of it away, so they run one at a time (`ONE_AT_A_TIME`), each waiting
//! first for all three nodes to be synced. Test 3 restarts the Galera node it killed
//! with `scripts/galera-cluster start-node`, so the cluster must be the one that
//! script runs (`ALLOT_GALERA_STATE`, as for the script). A killed node is restarted
//! rather than the cluster made anew for each test (about 30 s on two cores): it
//! rejoins in seconds by incremental state transfer, as a crashed node of a real
//! cluster does, and the test checks that too.

mod cluster;
mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cluster::{
    all_nodes_agree, converge, create_providers, every_node_sees_the_providers,
    every_other_node_knows_the_writer, freshness, nothing_answered_lost, storm, the_writer, ui,
    ui_csrf, ui_login, ui_refused, usage, Answer, Attempt, End, Ending, Retry, Storm, CAPACITY,
    CLAIMS, FORWARDED, FRESHNESS, PROVIDERS, VCPU_PER_PROVIDER,
};
use support::{mariadb, metric, skip, stdout_of, Galera, Server};

/// The bound: from the failure of the writer (its process, or its Galera
/// node) to a write taken by another node.
const TAKEOVER: Duration = Duration::from_secs(10);

/// One test at a time on the shared cluster.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A test's database, its three nodes, and which of them holds the writer's lease.
/// The nodes go first, then the database, then the test's turn.
struct Setup {
    nodes: Vec<Option<Server>>,
    writer: usize,
    galera: Galera,
    _turn: MutexGuard<'static, ()>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            show_logs(&self.nodes);
        }
    }
}

/// What each node logged (its lease's takeovers, the role it heard, its store's
/// failures): a test that failed shows it, for the diagnosis.
fn show_logs(nodes: &[Option<Server>]) {
    for (n, node) in nodes.iter().enumerate() {
        let Some(node) = node else { continue };
        let log = node.log();
        eprintln!("node {n} ({}), the last of its log:", node.addr);
        for line in &log[log.len().saturating_sub(40)..] {
            eprintln!("  {line}");
        }
    }
}

/// An address on loopback that no one listens on, for a node that must be told its
/// own URL before it listens.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// A node on `database`, listening where it advertises. Its role, as its lease
/// thread hears it, is logged at INFO (`every_other_node_knows_the_writer` reads
/// it), and so are its lease's takeovers (for a failure's diagnosis).
fn start_node(database: &str) -> Server {
    let addr = free_addr();
    let url = format!("http://{addr}");
    let log = "warn,allot_server::forward=info,allot_store=info";
    let node = Server::start_args(
        database,
        &["--bind", &addr, "--advertise-url", &url, "--log", log],
        &[],
    );
    assert_eq!(node.addr, addr);
    node
}

/// The test's turn on the cluster (a test that failed leaves the turn to the next).
fn turn() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The test's turn, a fresh database, node i on Galera node i, the writer known to
/// the others (on MariaDB a node that knows no writer answers writes 503), the
/// providers made and seen by every node. None when there is no cluster (skipped).
fn setup() -> Option<Setup> {
    let turn = turn();
    let galera = Galera::create()?;
    // One at a time: each migrates (or finds migrated) the schema before the next.
    let nodes: Vec<Option<Server>> = galera.urls.iter().map(|u| Some(start_node(u))).collect();
    let writer = the_writer(&nodes, TAKEOVER);
    every_other_node_knows_the_writer(&nodes, writer);
    create_providers(&nodes[0].as_ref().unwrap().client());
    every_node_sees_the_providers(&nodes);
    Some(Setup {
        nodes,
        writer,
        galera,
        _turn: turn,
    })
}

/// The lease's row as Galera node `node` has it: the holder's advertised URL and the
/// epoch.
fn lease_row(galera: &Galera, node: usize) -> (String, i64) {
    let out = galera
        .query(
            node,
            "SET SESSION wsrep_sync_wait = 1; SELECT url, epoch FROM allot_writer WHERE id = 1",
        )
        .unwrap();
    let (url, epoch) = out.trim().split_once('\t').expect("url and epoch");
    (url.to_owned(), epoch.parse().expect("an epoch"))
}

/// One value that Galera node `node` reads, after every commit the cluster had
/// certified when it was asked (`wsrep_sync_wait`).
fn read(galera: &Galera, node: usize, sql: &str) -> String {
    let sql = format!("SET SESSION wsrep_sync_wait = 1; {sql}");
    galera.query(node, &sql).unwrap().trim().to_owned()
}

/// After a storm that took the writer (`setup.writer`) away: another node took a
/// write within [`TAKEOVER`] of it, holds the lease under a new epoch, and the log's
/// head carries that epoch. Returns the new writer.
fn replaced_within_the_bound(setup: &Setup, storm: &Storm, before: &(String, i64)) -> usize {
    let took = storm
        .wrote_again_after
        .expect("a storm that ended a node probes");
    eprintln!("a write through another node was taken {took:?} after the failure");
    assert!(took <= TAKEOVER, "the cluster took no write for {took:?}");
    let writer = the_writer(&setup.nodes, TAKEOVER);
    assert_ne!(writer, setup.writer, "the writer was not replaced");
    let (url, epoch) = lease_row(&setup.galera, writer);
    let head = read(&setup.galera, writer, "SELECT epoch FROM allot_log_head");
    eprintln!(
        "node {} (epoch {}) replaced by node {writer} (epoch {epoch})",
        setup.writer, before.1
    );
    assert!(epoch > before.1, "the lease's epoch is still {epoch}");
    let addr = &setup.nodes[writer].as_ref().unwrap().addr;
    assert_eq!(
        url,
        format!("http://{addr}"),
        "the lease's row names the new writer"
    );
    assert_ne!(url, before.0);
    assert_eq!(
        head,
        epoch.to_string(),
        "the log's head carries the new epoch"
    );
    writer
}

/// What the storm's claims were answered, for the report.
fn answers(storm: &Storm) -> String {
    let before = storm.ended_at.map_or(0, |end| {
        let accepted = |a: &&Attempt| a.answer == Some(Answer::Accepted);
        storm
            .attempts
            .iter()
            .filter(|a| a.answered < end)
            .filter(accepted)
            .count()
    });
    format!(
        "in {:?}: {} accepted ({before} before the failure), {} refused (409), {} found \
         made by an unanswered try, {} attempts, {} in flight at the failure, {} rounds \
         of the watcher",
        storm.took,
        storm.answered(Answer::Accepted),
        storm.answered(Answer::Full),
        storm.answered(Answer::HeldBefore),
        storm.attempts.len(),
        storm.in_flight,
        storm.polls
    )
}

/// After a storm that took node `lost`'s database away while it runs: the others
/// agree that nothing answered was lost (`nothing_answered_lost`, without the node
/// that cannot follow the log for now). Returns the holdings.
fn nothing_lost_without(setup: &mut Setup, storm: &Storm, lost: usize) -> BTreeMap<usize, u64> {
    let away = setup.nodes[lost].take();
    let expected = nothing_answered_lost(&storm.outcomes, &setup.nodes, lost);
    setup.nodes[lost] = away;
    expected
}

/// A write through `node` is refused with 503 (the store is unavailable), never
/// taken.
fn writes_refused(node: &Server) {
    let (status, body) = node.call("PUT", "/traits/CUSTOM_WHILE_AWAY", None);
    assert_eq!(
        status, 503,
        "a write through a node without its database: {body}"
    );
    assert!(body.contains("allot.store.unavailable"), "{body}");
}

/// `/healthcheck` on `node` answers `status` within 15 s: 503 while the node cannot
/// reach its database (a load balancer takes it out), 200 once it can again.
fn health_becomes(node: &Server, status: u16) {
    let mut last = (0, String::new());
    let bound = Duration::from_secs(15);
    let start = Instant::now();
    while start.elapsed() < bound {
        last = node.call("GET", "/healthcheck", None);
        if last.0 == status {
            eprintln!("/healthcheck answered {status} after {:?}", start.elapsed());
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "/healthcheck still answers {} after {bound:?}: {}",
        last.0, last.1
    );
}

/// Once its Galera node is back, node `back` follows the log again: it shows every
/// consumer as the others do (`expected`), takes writes again (forwarded to the
/// writer, once its lease thread has read who that is), and every Galera node holds
/// the same log head and the same allocations.
fn back_in_the_cluster(setup: &Setup, back: usize, expected: &BTreeMap<usize, u64>) {
    let node = setup.nodes[back].as_ref().unwrap();
    let client = node.client();
    let caught_up = converge(Duration::from_secs(30), || {
        (0..PROVIDERS).all(|i| matches!(usage(&client, i), Ok((200, VCPU_PER_PROVIDER))))
    });
    all_nodes_agree(&setup.nodes, expected);
    let took = converge(Duration::from_secs(15), || {
        let (status, body) = node.call("PUT", "/traits/CUSTOM_BACK", None);
        // 204: a try answered 503 had made it.
        assert!(matches!(status, 201 | 204 | 503), "{status} {body}");
        status != 503
    });
    for other in setup.nodes.iter().flatten() {
        converge(FRESHNESS, || {
            other.call("GET", "/traits/CUSTOM_BACK", None).0 == 204
        });
    }
    eprintln!("node {back} caught up {caught_up:?} after its database, took writes {took:?} later");
    let heads: Vec<String> = (0..3)
        .map(|g| read(&setup.galera, g, "SELECT seq, epoch FROM allot_log_head"))
        .collect();
    assert!(heads.iter().all(|h| *h == heads[0]), "log heads: {heads:?}");
    for g in 0..3 {
        let used = read(&setup.galera, g, "SELECT SUM(used) FROM allocations");
        assert_eq!(used, CAPACITY.to_string(), "allocations on Galera node {g}");
    }
}

/// Galera node `node`, which the test took away, put back (`back`) and synced; then
/// its allot node is back in the cluster ([`back_in_the_cluster`]).
fn rejoin(setup: &Setup, back: &mut PutBack, node: usize, expected: &BTreeMap<usize, u64>) {
    let start = Instant::now();
    back.put_back();
    setup.galera.wait_synced(Duration::from_secs(60));
    eprintln!("Galera node {} back in {:?}", node + 1, start.elapsed());
    back_in_the_cluster(setup, node, expected);
}

/// A Galera node a test took away, put back when this goes, however the test ends:
/// the cluster is the next test's too.
struct PutBack {
    /// The script's node number (1, 2 or 3) to restart, or the server to reconnect.
    how: Back,
    done: bool,
}

enum Back {
    Restart(String),
    Reconnect(String),
}

const ISOLATE: &str = "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'";
const RECONNECT: &str = "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'";

impl PutBack {
    fn put_back(&mut self) {
        self.done = true;
        match &self.how {
            Back::Restart(n) => {
                galera_cluster(&["start-node", n]);
            }
            Back::Reconnect(server) => {
                mariadb(server, RECONNECT).unwrap();
            }
        }
    }
}

impl Drop for PutBack {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.put_back()));
        }
    }
}

/// The process id of Galera node `node`'s `mariadbd`, from the pid file it names
/// (the test runs on the cluster's machine).
fn mariadbd_pid(galera: &Galera, node: usize) -> String {
    let file = mariadb(&galera.servers[node], "SELECT @@pid_file").unwrap();
    let pid = std::fs::read_to_string(file.trim()).unwrap();
    pid.trim().to_owned()
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/galera-cluster");

/// `scripts/galera-cluster ARGS` on the cluster it runs (`ALLOT_GALERA_STATE`, from
/// this process's environment): its standard output (it must succeed).
fn galera_cluster(args: &[&str]) -> String {
    stdout_of(
        Command::new(SCRIPT)
            .args(args)
            .output()
            .expect("run scripts/galera-cluster"),
    )
}

/// Whether `scripts/galera-cluster` runs the cluster the test was given (it must, for
/// the test to kill and restart a node); if not, the test is skipped by `skip`'s rule.
fn run_by_the_script(galera: &Galera) -> bool {
    let listed = Command::new(SCRIPT).arg("urls").output().ok();
    let listed = listed.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if listed.is_some_and(|l| l.split_whitespace().eq(galera.servers.iter())) {
        return true;
    }
    skip(
        "the cluster of ALLOT_TEST_GALERA_URLS is not the one scripts/galera-cluster runs \
         (ALLOT_GALERA_STATE), so a node of it cannot be killed and restarted",
    );
    false
}

/// The writer ended `how` once an eighth of the claims are answered: the failure
/// lands while claims are being accepted (some in flight to the writer), and leaves
/// capacity for claims that only the new writer can accept (about 35 of 100, once the
/// claims answered while the end is carried out are counted).
fn the_writer_ended(setup: &Setup, how: End) -> Option<Ending> {
    Some(Ending {
        after: CLAIMS / 8,
        node: setup.writer,
        how,
    })
}

/// 1: nothing fails, exactly the capacity is accepted, through the writer.
#[test]
fn three_nodes_on_galera_never_over_commit() {
    let Some(mut setup) = setup() else { return };
    freshness(&setup.nodes);
    let storm = storm(&mut setup.nodes, None, Retry::Never);
    eprintln!("{}", answers(&storm));
    assert!(storm.polls > 0);
    assert_eq!(storm.answered(Answer::Accepted) as u64, CAPACITY);
    // Every other claim refused with Placement's 409: none unanswered, no 503.
    assert_eq!(storm.answered(Answer::Full), CLAIMS - CAPACITY as usize);
    let expected = storm
        .outcomes
        .iter()
        .map(|(n, a)| (*n, u64::from(*a == Answer::Accepted)))
        .collect();
    all_nodes_agree(&setup.nodes, &expected);
    // The other nodes' writes went through the writer, which forwarded none.
    for (n, node) in setup.nodes.iter().enumerate() {
        let forwarded = metric(node.as_ref().unwrap(), FORWARDED);
        assert_eq!(
            forwarded > 0.0,
            n != setup.writer,
            "node {n} forwarded {forwarded}"
        );
    }
}

/// 2: the writer's process killed: its lease's beat stops, and another node takes
/// the lease once the beat has stood still for the lease's expiry.
#[test]
fn the_writer_killed_mid_storm_loses_nothing_and_is_replaced_within_10_s() {
    let Some(mut setup) = setup() else { return };
    let before = lease_row(&setup.galera, setup.writer);
    let ending = the_writer_ended(&setup, End::Kill);
    let storm = storm(&mut setup.nodes, ending, Retry::UntilAnswered);
    eprintln!("{}", answers(&storm));
    replaced_within_the_bound(&setup, &storm, &before);
    nothing_answered_lost(&storm.outcomes, &setup.nodes, setup.writer);
}

/// 3: the writer's Galera node killed: the writer can neither beat nor commit, the
/// other two Galera nodes go on once they have evicted it (Galera's suspect timeout,
/// about 5 s, during which no commit is certified anywhere), and another allot node
/// takes the lease; the writer's node answers 503 until its Galera node is back.
#[test]
fn the_writers_galera_node_killed_mid_storm_loses_nothing_and_is_replaced_within_10_s() {
    let Some(mut setup) = setup() else { return };
    if !run_by_the_script(&setup.galera) {
        return;
    }
    let lost = setup.writer;
    let before = lease_row(&setup.galera, lost);
    let mut back = PutBack {
        how: Back::Restart((lost + 1).to_string()),
        done: false,
    };
    // `kill -9` of the process itself rather than `scripts/galera-cluster kill`, whose
    // start-up would let the storm fill every provider before the kill lands.
    let pid = mariadbd_pid(&setup.galera, lost);
    let kill = Box::new(move || {
        let killed = Command::new("kill").args(["-9", &pid]).status().unwrap();
        assert!(killed.success(), "kill -9 {pid}");
    });
    let ending = the_writer_ended(&setup, End::Database(kill));
    let storm = storm(&mut setup.nodes, ending, Retry::UntilAnswered);
    eprintln!("{}", answers(&storm));
    replaced_within_the_bound(&setup, &storm, &before);
    let expected = nothing_lost_without(&mut setup, &storm, lost);
    writes_refused(setup.nodes[lost].as_ref().unwrap());
    health_becomes(setup.nodes[lost].as_ref().unwrap(), 503);

    rejoin(&setup, &mut back, lost, &expected);
    health_becomes(setup.nodes[lost].as_ref().unwrap(), 200);
}

/// 4: the writer's Galera node cut off from the other two while both run on: it
/// falls out of the primary component and certifies nothing, the other two take
/// the lease, and once the node is back it holds nothing the others do not.
#[test]
fn a_writer_cut_off_from_the_cluster_takes_no_write_after_another_took_over() {
    let Some(mut setup) = setup() else { return };
    let cut = setup.writer;
    let before = lease_row(&setup.galera, cut);
    let server = setup.galera.servers[cut].clone();
    let mut back = PutBack {
        how: Back::Reconnect(server.clone()),
        done: false,
    };
    let isolate = Box::new(move || {
        mariadb(&server, ISOLATE).unwrap();
    });
    let ending = the_writer_ended(&setup, End::Database(isolate));
    let storm = storm(&mut setup.nodes, ending, Retry::UntilAnswered);
    eprintln!("{}", answers(&storm));
    replaced_within_the_bound(&setup, &storm, &before);
    // Sent through the cut-off node after the isolation, no claim was accepted (its
    // commits cannot be certified, and once another node holds the lease, the fence
    // refuses them), and a write through it is still refused now.
    let end = storm.ended_at.unwrap();
    let through: Vec<_> = storm
        .attempts
        .iter()
        .filter(|a| a.node == cut && a.sent >= end)
        .collect();
    assert!(
        !through.is_empty(),
        "no claim was sent through the cut-off node"
    );
    for a in &through {
        assert_ne!(
            a.answer,
            Some(Answer::Accepted),
            "claim {} accepted by the cut-off writer",
            a.claim
        );
    }
    eprintln!(
        "{} claims through the cut-off node, none accepted",
        through.len()
    );
    writes_refused(setup.nodes[cut].as_ref().unwrap());
    let expected = nothing_lost_without(&mut setup, &storm, cut);

    rejoin(&setup, &mut back, cut, &expected);
}

/// 5: nodes started together on a fresh database, each through its own Galera node,
/// all start, and one of them writes for the cluster. Their migrations run at once (the
/// named lock that has nodes on one server migrate in turn is one Galera node's), so
/// a statement of one may be beaten at certification by another node's, or aborted
/// by its DDL: it wrote nothing, and must be run again, not end the start. Several
/// rounds, a fresh database each, as the race is not lost every time.
#[test]
fn three_nodes_starting_together_on_galera_all_start() {
    let _turn = turn();
    for round in 0..6 {
        let Some(galera) = Galera::create() else {
            return;
        };
        let starting: Vec<_> = galera
            .urls
            .iter()
            .map(|url| {
                let url = url.clone();
                std::thread::spawn(move || start_node(&url))
            })
            .collect();
        let nodes: Vec<Option<Server>> = starting
            .into_iter()
            .map(|s| {
                Some(
                    s.join()
                        .unwrap_or_else(|_| panic!("round {round}: a node did not start")),
                )
            })
            .collect();
        let agreed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let writer = the_writer(&nodes, TAKEOVER);
            every_other_node_knows_the_writer(&nodes, writer);
        }));
        if let Err(failed) = agreed {
            eprintln!("round {round}: the nodes did not agree on a writer");
            show_logs(&nodes);
            std::panic::resume_unwind(failed);
        }
    }
}

/// 6 (issue 46): the web UI through a node that does not write. On Galera such a node
/// writes nothing itself, and a logout is a write (the session's revocation): it
/// reaches the writer, and ends the session on every node; so does a login that
/// replaces the browser's session (the old one is revoked).
#[test]
fn a_ui_logout_through_a_node_that_does_not_write_ends_the_session_everywhere() {
    let Some(setup) = setup() else { return };
    let node = setup.nodes[(setup.writer + 1) % 3].as_ref().unwrap();
    let first = ui_login(node, "");
    let second = ui_login(node, &first);
    let nodes = &setup.nodes;
    converge(Duration::from_secs(3), || {
        nodes.iter().flatten().all(|n| ui_refused(n, &first))
    });
    for n in nodes.iter().flatten() {
        let r = ui(n, "GET", "/ui/providers", &second, "");
        assert_eq!(r.status, 200, "{}: {}", n.addr, r.body);
    }
    let form = format!("csrf={}", ui_csrf(node, &second));
    let r = ui(node, "POST", "/ui/logout", &second, &form);
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/ui/login"));
    converge(Duration::from_secs(3), || {
        nodes.iter().flatten().all(|n| ui_refused(n, &second))
    });
}
