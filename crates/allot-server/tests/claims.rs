//! Pending claims over real HTTP: the server on a loopback socket, over a real SQLite
//! file in a temporary directory, with a clock the test moves by hand (an `AtomicI64`
//! read by the host's `Clock`), so that expiry is tested at its exact instant and no
//! test sleeps.
//!
//! Requests are written on plain sockets (one connection each, `connection: close`),
//! so that a malformed body goes out exactly as written.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use allot_server::{AppState, Config, PolicyMode, Settings};
use allot_store::{Host, Store};
use serde_json::{json, Value};

/// The time the tests' clocks start at.
const T0: i64 = 1_800_000_000;
/// The retention of ended claims in these tests' servers.
const RETENTION: i64 = 3600;

/// A running server and what the test needs to reach behind it.
struct Server {
    addr: SocketAddr,
    app: AppState,
    clock: Arc<AtomicI64>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Starts a server over the database in `dir` (made on first use), its clock
    /// reading `clock`.
    async fn start(dir: &Path, clock: Arc<AtomicI64>) -> Server {
        let url = format!("sqlite:{}", dir.join("allot.db").display());
        let reading = clock.clone();
        let host = Host::new(
            Store::open(&url).unwrap(),
            Arc::new(move || reading.load(Ordering::SeqCst)),
        )
        .unwrap();
        let app = AppState {
            host,
            config: Arc::new(Config {
                settings: Settings {
                    policy: PolicyMode::Secure,
                    claim_retention: RETENTION,
                    ..Settings::default()
                },
                ..Config::default()
            }),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(allot_server::serve(listener, app.clone(), None, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            app,
            clock,
            stop,
            task,
        }
    }

    /// Stops the server and lets the database go (the host's last handle).
    async fn shut(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
        drop(self.app);
    }

    fn set_clock(&self, t: i64) {
        self.clock.store(t, Ordering::SeqCst);
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let body = body.map(|b| b.to_string());
        raw_call(self.addr, method, path, body.as_deref(), "application/json").await
    }
}

/// An answer: status, head and body (parsed when it is JSON).
#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The Placement error code of a refusal.
    fn code(&self) -> &str {
        self.body["errors"][0]["code"].as_str().unwrap_or("")
    }
}

/// One request on its own connection, as an admin, at microversion 1.39.
async fn raw_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    content_type: &str,
) -> Reply {
    use std::io::{Read, Write};
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         x-auth-token: admin\r\naccept: application/json\r\n\
         openstack-api-version: placement 1.39\r\n"
    );
    if let Some(body) = body {
        request.push_str(&format!(
            "content-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        request.push_str("content-length: 0\r\n\r\n");
    }
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Reply {
            status,
            head: head.to_owned(),
            body: serde_json::from_str(body).unwrap_or(Value::Null),
        }
    })
    .await
    .unwrap()
}

/// A provider with `vcpu` VCPU and 1024 MEMORY_MB.
async fn provider(s: &Server, name: &str, vcpu: u64) -> String {
    let r = s
        .call("POST", "/resource_providers", Some(json!({"name": name})))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    let r = s
        .call(
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            Some(json!({
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": vcpu}, "MEMORY_MB": {"total": 1024}},
            })),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    uuid
}

fn claim_body(consumer: &str, rp: &str, vcpu: u64, expires_in: Option<Value>) -> Value {
    let mut body = json!({
        "consumer_uuid": consumer,
        "project_id": "proj",
        "user_id": "user",
        "allocations": {rp: {"resources": {"VCPU": vcpu}}},
    });
    if let Some(e) = expires_in {
        body["expires_in"] = e;
    }
    body
}

/// Makes a claim (201 expected) and answers it.
async fn claim(
    s: &Server,
    consumer: &str,
    rp: &str,
    vcpu: u64,
    expires_in: Option<Value>,
) -> Value {
    let r = s
        .call(
            "POST",
            "/claims",
            Some(claim_body(consumer, rp, vcpu, expires_in)),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    r.body
}

fn consumer() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `PUT /allocations/{consumer}` of `vcpu` VCPU on `rp` for a new consumer, at 1.39.
async fn allocate(s: &Server, consumer: &str, rp: &str, vcpu: u64) -> Reply {
    s.call(
        "PUT",
        &format!("/allocations/{consumer}"),
        Some(json!({
            "allocations": {rp: {"resources": {"VCPU": vcpu}}},
            "project_id": "proj", "user_id": "user",
            "consumer_generation": null, "consumer_type": "INSTANCE",
        })),
    )
    .await
}

async fn pending_on(s: &Server, rp: &str) -> Value {
    let r = s
        .call("GET", &format!("/resource_providers/{rp}/pending"), None)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.body["pending"].clone()
}

async fn candidates(s: &Server, resources: &str) -> usize {
    let r = s
        .call(
            "GET",
            &format!("/allocation_candidates?resources={resources}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.body["allocation_requests"].as_array().unwrap().len()
}

/// Everything a Placement client could read about these providers and consumers,
/// plus the claims: to show that an operation changed nothing else.
async fn snapshot(s: &Server, rps: &[&str], consumers: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for rp in rps {
        for what in ["", "/usages", "/allocations", "/inventories", "/pending"] {
            let path = format!("/resource_providers/{rp}{what}");
            let r = s.call("GET", &path, None).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
            out.insert(path, r.body);
        }
    }
    for c in consumers {
        let path = format!("/allocations/{c}");
        out.insert(path.clone(), s.call("GET", &path, None).await.body);
    }
    for path in ["/claims", "/usages?project_id=proj"] {
        let r = s.call("GET", path, None).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        out.insert(path.into(), r.body);
    }
    Value::Object(out)
}

fn clock() -> Arc<AtomicI64> {
    Arc::new(AtomicI64::new(T0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mass_start_fills_providers_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Server::start(dir.path(), clock()).await);
    let mut rps = Vec::new();
    for i in 0..3 {
        rps.push(provider(&s, &format!("host-{i}"), 20).await);
    }
    let rps = Arc::new(rps);

    // 64 clients, each claiming 1 VCPU at a time, moving to the next provider when
    // one refuses, until all three have refused it.
    let mut clients = Vec::new();
    for client in 0..64usize {
        let (s, rps) = (s.clone(), rps.clone());
        clients.push(tokio::spawn(async move {
            let (mut accepted, mut refused) = (0, 0);
            let mut full = [false; 3];
            let mut i = client;
            while full.iter().any(|f| !f) {
                let p = i % 3;
                i += 1;
                if full[p] {
                    continue;
                }
                let body = claim_body(&consumer(), &rps[p], 1, None);
                let r = s.call("POST", "/claims", Some(body)).await;
                match r.status {
                    201 => accepted += 1,
                    409 => {
                        assert_eq!(r.code(), "allot.claim.does_not_fit", "{r:?}");
                        let detail = r.body["errors"][0]["detail"].as_str().unwrap();
                        assert!(
                            detail.contains("VCPU") && detail.contains(&rps[p]),
                            "{detail}"
                        );
                        full[p] = true;
                        refused += 1;
                    }
                    _ => panic!("neither a claim nor a clean refusal: {r:?}"),
                }
            }
            (accepted, refused)
        }));
    }
    let mut accepted = 0;
    for c in clients {
        let (a, r) = c.await.unwrap();
        assert_eq!(r, 3, "every client is refused once per provider");
        accepted += a;
    }
    assert_eq!(accepted, 60, "exactly the capacity was claimed");
    for rp in rps.iter() {
        assert_eq!(pending_on(&s, rp).await, json!({"VCPU": 20}));
    }
    assert_eq!(candidates(&s, "VCPU:1").await, 0, "nothing left to offer");
    assert_eq!(candidates(&s, "MEMORY_MB:512").await, 3, "memory is free");
    let listed = s.call("GET", "/claims?state=pending", None).await;
    assert_eq!(listed.body["claims"].as_array().unwrap().len(), 60);
    // An allocation write sees the claims too.
    let r = allocate(&s, &consumer(), &rps[0], 1).await;
    assert_eq!(r.status, 409, "{r:?}");
    Arc::into_inner(s).unwrap().shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_exact_and_the_sweeper_changes_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "host", 4).await;
    let other = provider(&s, "other", 8).await;
    // Around it: an allocation and a claim that never expires, on the other provider.
    let holder = consumer();
    let r = allocate(&s, &holder, &other, 2).await;
    assert_eq!(r.status, 204, "{r:?}");
    let forever = claim(&s, &consumer(), &other, 3, Some(Value::Null)).await;
    assert_eq!(forever["expires_at"], Value::Null);

    let c = claim(&s, &consumer(), &rp, 4, Some(json!(100))).await;
    assert_eq!(c["state"], "pending");
    assert_eq!(c["created_at"], "2027-01-15T08:00:00Z");
    assert_eq!(c["expires_at"], "2027-01-15T08:01:40Z");
    assert_eq!(c["ended_at"], Value::Null);
    let path = format!("/claims/{}", c["uuid"].as_str().unwrap());

    s.set_clock(T0 + 99);
    assert_eq!(pending_on(&s, &rp).await, json!({"VCPU": 4}));
    assert_eq!(candidates(&s, "VCPU:4").await, 0, "the other has 3 left");
    assert_eq!(s.call("GET", &path, None).await.body["state"], "pending");

    s.set_clock(T0 + 100);
    assert_eq!(pending_on(&s, &rp).await, json!({}), "back at the instant");
    assert_eq!(candidates(&s, "VCPU:4").await, 1);
    let shown = s.call("GET", &path, None).await.body;
    assert_eq!(shown["state"], "expired");
    assert_eq!(shown["ended_at"], "2027-01-15T08:01:40Z");
    let expired = s.call("GET", "/claims?state=expired", None).await;
    assert_eq!(expired.body["claims"].as_array().unwrap().len(), 1);

    // The sweeper, past the retention: the claim goes, nothing else moves.
    s.set_clock(T0 + 100 + RETENTION);
    let claims_before = s.call("GET", "/claims?state=pending", None).await.body;
    let before = snapshot(&s, &[&rp, &other], &[&holder]).await;
    let swept = allot_server::sweep_claims(&s.app).await.unwrap();
    assert_eq!((swept.expired, swept.purged), (0, 1));
    assert_eq!(s.call("GET", &path, None).await.status, 404);
    let after = snapshot(&s, &[&rp, &other], &[&holder]).await;
    let mut expected = before.clone();
    expected["/claims"] = claims_before;
    assert_eq!(after, expected);
    // A second sweep finds nothing.
    let swept = allot_server::sweep_claims(&s.app).await.unwrap();
    assert_eq!((swept.expired, swept.purged), (0, 0));
    s.shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_records_expiry_before_it_purges() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "host", 4).await;
    let c = claim(&s, &consumer(), &rp, 1, Some(json!(10))).await;
    let path = format!("/claims/{}", c["uuid"].as_str().unwrap());
    s.set_clock(T0 + 20);
    let before = s.call("GET", &path, None).await.body;
    let swept = allot_server::sweep_claims(&s.app).await.unwrap();
    assert_eq!((swept.expired, swept.purged), (1, 0));
    assert_eq!(s.call("GET", &path, None).await.body, before);
    s.set_clock(T0 + 10 + RETENTION - 1);
    assert_eq!(allot_server::sweep_claims(&s.app).await.unwrap().purged, 0);
    s.set_clock(T0 + 10 + RETENTION);
    assert_eq!(allot_server::sweep_claims(&s.app).await.unwrap().purged, 1);
    assert_eq!(s.call("GET", &path, None).await.status, 404);
    s.shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_again_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "host", 8).await;
    let owner = consumer();
    let released = claim(&s, &owner, &rp, 1, None).await;
    let expiring = claim(&s, &consumer(), &rp, 2, Some(json!(50))).await;
    let confirmed = claim(&s, &owner, &rp, 3, None).await;
    let kept = claim(&s, &consumer(), &rp, 1, None).await;
    let path = |c: &Value| format!("/claims/{}", c["uuid"].as_str().unwrap());

    s.set_clock(T0 + 1);
    assert_eq!(s.call("DELETE", &path(&released), None).await.status, 204);
    let r = s
        .call("POST", &format!("{}/confirm", path(&confirmed)), None)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["state"], "confirmed");
    s.set_clock(T0 + 60);
    assert_eq!(pending_on(&s, &rp).await, json!({"VCPU": 1}));

    let before = snapshot(&s, &[&rp], &[&owner]).await;
    for c in [&released, &expiring, &confirmed] {
        for _ in 0..2 {
            let r = s.call("DELETE", &path(c), None).await;
            assert_eq!(r.status, 204, "{r:?}");
        }
    }
    // A consumer's release takes only its live claims (it has none left).
    let r = s
        .call("DELETE", &format!("/claims?consumer_uuid={owner}"), None)
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(snapshot(&s, &[&rp], &[&owner]).await, before);
    let states: Vec<Value> = [&released, &expiring, &confirmed, &kept]
        .iter()
        .map(|c| {
            before["/claims"]["claims"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["uuid"] == c["uuid"])
                .unwrap()["state"]
                .clone()
        })
        .collect();
    assert_eq!(
        states,
        [
            json!("released"),
            json!("expired"),
            json!("confirmed"),
            json!("pending")
        ]
    );

    // Unknown and malformed claims: 404.
    let r = s
        .call("DELETE", &format!("/claims/{}", consumer()), None)
        .await;
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(
        s.call("DELETE", "/claims/not-a-uuid", None).await.status,
        404
    );
    // The consumer's release releases the live one.
    let r = s
        .call(
            "DELETE",
            &format!(
                "/claims?consumer_uuid={}",
                kept["consumer_uuid"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(pending_on(&s, &rp).await, json!({}));
    s.shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirming_adds_or_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let a = provider(&s, "source", 4).await;
    let b = provider(&s, "target", 4).await;
    let vm = consumer();
    let r = allocate(&s, &vm, &a, 2).await;
    assert_eq!(r.status, 204, "{r:?}");
    let generation = |v: &Value| v["consumer_generation"].as_u64().unwrap();
    let held = s
        .call("GET", &format!("/allocations/{vm}"), None)
        .await
        .body;
    let g0 = generation(&held);

    // Add: the claim on B joins what the consumer holds on A.
    let c = claim(&s, &vm, &b, 3, None).await;
    assert_eq!(candidates(&s, "VCPU:2").await, 1, "A has 2 left, B 1");
    let confirm = format!("/claims/{}/confirm", c["uuid"].as_str().unwrap());
    let r = s.call("POST", &confirm, Some(json!({}))).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["state"], "confirmed");
    assert_eq!(r.body["ended_at"], "2027-01-15T08:00:00Z");
    let held = s
        .call("GET", &format!("/allocations/{vm}"), None)
        .await
        .body;
    assert_eq!(held["allocations"][&a]["resources"], json!({"VCPU": 2}));
    assert_eq!(held["allocations"][&b]["resources"], json!({"VCPU": 3}));
    let g1 = generation(&held);
    assert!(g1 > g0, "the consumer generation advances");
    assert_eq!(pending_on(&s, &b).await, json!({}));
    let usages = s
        .call("GET", &format!("/resource_providers/{b}/usages"), None)
        .await;
    assert_eq!(usages.body["usages"]["VCPU"], 3);
    assert_eq!(candidates(&s, "VCPU:2").await, 1, "still only A");
    assert_eq!(candidates(&s, "VCPU:3").await, 0);

    // Confirming twice is a no-op.
    let before = snapshot(&s, &[&a, &b], &[&vm]).await;
    let r = s.call("POST", &confirm, None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["state"], "confirmed");
    assert_eq!(snapshot(&s, &[&a, &b], &[&vm]).await, before);

    // Replace: a move back to A, releasing B in the same step.
    let c = claim(&s, &vm, &a, 1, None).await;
    let confirm = format!("/claims/{}/confirm", c["uuid"].as_str().unwrap());
    let r = s
        .call("POST", &confirm, Some(json!({"replace": true})))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let held = s
        .call("GET", &format!("/allocations/{vm}"), None)
        .await
        .body;
    assert_eq!(
        held["allocations"],
        json!({&a: {"generation": held["allocations"][&a]["generation"], "resources": {"VCPU": 1}}})
    );
    assert!(generation(&held) > g1);
    assert_eq!(pending_on(&s, &a).await, json!({}));
    assert_eq!(candidates(&s, "VCPU:4").await, 1, "B is empty again");

    // After a release: 409 not pending, nothing changes.
    let c = claim(&s, &vm, &b, 1, None).await;
    let path = format!("/claims/{}", c["uuid"].as_str().unwrap());
    assert_eq!(s.call("DELETE", &path, None).await.status, 204);
    let before = snapshot(&s, &[&a, &b], &[&vm]).await;
    let r = s.call("POST", &format!("{path}/confirm"), None).await;
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.code(), "allot.claim.not_pending");
    assert_eq!(snapshot(&s, &[&a, &b], &[&vm]).await, before);
    // And after expiry.
    let c = claim(&s, &vm, &b, 1, Some(json!(5))).await;
    s.set_clock(T0 + 5);
    let r = s
        .call(
            "POST",
            &format!("/claims/{}/confirm", c["uuid"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "allot.claim.not_pending"));
    s.shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_their_expiry_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let time = clock();
    let s = Server::start(dir.path(), time.clone()).await;
    let rp = provider(&s, "host", 4).await;
    let c = claim(&s, &consumer(), &rp, 3, Some(json!(1000))).await;
    let forever = claim(&s, &consumer(), &rp, 1, Some(Value::Null)).await;
    let listed = s.call("GET", "/claims", None).await.body;
    s.shut().await;

    let s = Server::start(dir.path(), time).await;
    assert_eq!(s.call("GET", "/claims", None).await.body, listed);
    assert_eq!(pending_on(&s, &rp).await, json!({"VCPU": 4}));
    assert_eq!(candidates(&s, "VCPU:1").await, 0);
    s.set_clock(T0 + 1000);
    assert_eq!(pending_on(&s, &rp).await, json!({"VCPU": 1}));
    let shown = s
        .call(
            "GET",
            &format!("/claims/{}", c["uuid"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(shown.body["state"], "expired");
    let shown = s
        .call(
            "GET",
            &format!("/claims/{}", forever["uuid"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(shown.body["state"], "pending");
    s.shut().await;
}

/// A host's pending total with `tree=true` counts what is promised on the
/// providers below it (a NUMA node), and without it the host's own alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trees_pending_total_counts_the_providers_below() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let host = provider(&s, "host", 8).await;
    let r = s
        .call(
            "POST",
            "/resource_providers",
            Some(json!({"name": "host-numa0", "parent_provider_uuid": &host})),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let numa = r.body["uuid"].as_str().unwrap().to_owned();
    let r = s
        .call(
            "PUT",
            &format!("/resource_providers/{numa}/inventories"),
            Some(json!({"resource_provider_generation": 0,
                        "inventories": {"VCPU": {"total": 4}}})),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let (on_host, on_numa) = (consumer(), consumer());
    claim(&s, &on_host, &host, 2, None).await;
    claim(&s, &on_numa, &numa, 3, None).await;
    let pending = |query: &'static str| {
        let path = format!("/resource_providers/{host}/pending{query}");
        let s = &s;
        async move { s.call("GET", &path, None).await }
    };
    assert_eq!(pending("").await.body, json!({"pending": {"VCPU": 2}}));
    assert_eq!(
        pending("?tree=false").await.body,
        json!({"pending": {"VCPU": 2}})
    );
    assert_eq!(
        pending("?tree=true").await.body,
        json!({"pending": {"VCPU": 5}})
    );
    assert_eq!(
        pending("?tree=true&detail=consumers").await.body,
        json!({"pending": {"VCPU": 5},
               "consumers": {&on_host: {"VCPU": 2}, &on_numa: {"VCPU": 3}}})
    );
    let r = pending("?tree=yes").await;
    assert_eq!(r.status, 400, "{r:?}");
    s.shut().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answers_have_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "host", 8).await;
    let vm = consumer();
    let mut body = claim_body(&vm, &rp, 2, None);
    body["allocations"][&rp]["resources"]["MEMORY_MB"] = json!(256);
    body["tag"] = json!("boot-42");
    body["consumer_type"] = json!("INSTANCE");
    let r = s.call("POST", "/claims", Some(body)).await;
    assert_eq!(r.status, 201, "{r:?}");
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    let location = r.header("location").unwrap();
    assert!(location.ends_with(&format!("/claims/{uuid}")), "{location}");
    // The server's default expiry (600 s).
    assert_eq!(
        r.body,
        json!({
            "uuid": uuid,
            "consumer_uuid": vm,
            "consumer_type": "INSTANCE",
            "project_id": "proj",
            "user_id": "user",
            "allocations": {&rp: {"resources": {"MEMORY_MB": 256, "VCPU": 2}}},
            "tag": "boot-42",
            "state": "pending",
            "created_at": "2027-01-15T08:00:00Z",
            "expires_at": "2027-01-15T08:10:00Z",
            "ended_at": null,
        })
    );
    assert_eq!(
        s.call("GET", &format!("/claims/{uuid}"), None).await.body,
        r.body
    );
    // At every microversion, 1.0 included.
    let old = raw_call_as(
        s.addr,
        "x-auth-token: admin\r\nopenstack-api-version: placement 1.0",
        "GET",
        &format!("/claims/{uuid}"),
    )
    .await;
    assert_eq!(old.status, 200, "{old:?}");

    // Filters and paging. A second later, so that it lists after the first
    // (claims made in the same second are ordered by their random uuids).
    s.set_clock(T0 + 1);
    let other = claim(&s, &consumer(), &rp, 1, None).await;
    for (query, n) in [
        (format!("consumer_uuid={vm}"), 1),
        (format!("resource_provider_uuid={rp}"), 2),
        ("tag=boot-42".to_owned(), 1),
        ("consumer_type=INSTANCE".to_owned(), 1),
        ("project_id=proj&state=pending".to_owned(), 2),
        ("project_id=nobody".to_owned(), 0),
        ("state=released".to_owned(), 0),
        ("resource_class=MEMORY_MB".to_owned(), 1),
        ("resource_class=VCPU&project_id=proj".to_owned(), 2),
        ("resource_class=CUSTOM_NOTHING".to_owned(), 0),
        ("limit=1".to_owned(), 1),
        (format!("marker={uuid}"), 1),
    ] {
        let r = s.call("GET", &format!("/claims?{query}"), None).await;
        assert_eq!(r.status, 200, "{query}: {r:?}");
        assert_eq!(r.body["claims"].as_array().unwrap().len(), n, "{query}");
    }
    let r = s.call("GET", &format!("/claims?marker={uuid}"), None).await;
    assert_eq!(r.body["claims"][0]["uuid"], other["uuid"]);

    // Totals.
    let r = s
        .call(
            "GET",
            &format!("/resource_providers/{rp}/pending?detail=consumers"),
            None,
        )
        .await;
    assert_eq!(
        r.body,
        json!({
            "pending": {"MEMORY_MB": 256, "VCPU": 3},
            "consumers": {
                &vm: {"MEMORY_MB": 256, "VCPU": 2},
                other["consumer_uuid"].as_str().unwrap(): {"VCPU": 1},
            },
        })
    );
    let r = s
        .call("GET", &format!("/pending?consumer_uuid={vm}"), None)
        .await;
    assert_eq!(r.body, json!({"pending": {"MEMORY_MB": 256, "VCPU": 2}}));
    let r = s.call("GET", "/pending?project_id=proj", None).await;
    assert_eq!(r.body, json!({"pending": {"MEMORY_MB": 256, "VCPU": 3}}));
    let r = s
        .call("GET", "/pending?project_id=proj&resource_class=VCPU", None)
        .await;
    assert_eq!(r.body, json!({"pending": {"VCPU": 3}}));
    // A class misspelt is a query string problem, on both routes.
    for path in [
        "/pending?project_id=proj&resource_class=vcpu",
        "/claims?resource_class=VCPU%20",
    ] {
        let r = s.call("GET", path, None).await;
        assert_eq!(r.status, 400, "{path}: {r:?}");
        assert_eq!(r.body["errors"][0]["status"], 400, "{path}: {r:?}");
    }
    let r = s
        .call(
            "GET",
            &format!("/pending?project_id=other&consumer_uuid={vm}"),
            None,
        )
        .await;
    assert_eq!(r.body, json!({"pending": {}}));
    // Usages are allocations only; a summary's `used` counts the claims.
    let r = s
        .call("GET", &format!("/resource_providers/{rp}/usages"), None)
        .await;
    assert_eq!(r.body["usages"]["VCPU"], 0);
    let r = s
        .call("GET", "/allocation_candidates?resources=VCPU:1", None)
        .await;
    assert_eq!(
        r.body["provider_summaries"][&rp]["resources"]["VCPU"]["used"],
        3
    );
    // Claims bump no provider generation.
    let r = s
        .call("GET", &format!("/resource_providers/{rp}"), None)
        .await;
    assert_eq!(r.body["generation"], 1);
    // A provider with live claims cannot go, nor can an inventory they use.
    let r = s
        .call("DELETE", &format!("/resource_providers/{rp}"), None)
        .await;
    assert_eq!(r.status, 409, "{r:?}");
    let r = s
        .call(
            "DELETE",
            &format!("/resource_providers/{rp}/inventories/MEMORY_MB"),
            None,
        )
        .await;
    assert_eq!(r.status, 409, "{r:?}");

    // Policy: a reader of the project may not claim.
    let reader = "x-auth-token: reader-user:proj\r\nx-roles: reader";
    let r = raw_call_as(s.addr, reader, "GET", "/claims").await;
    assert_eq!(r.status, 403, "{r:?}");
    s.shut().await;
}

/// A bodiless request with other headers (`headers`: lines without the last CRLF),
/// such as another token (noauth2: `USER[:PROJECT]`) or microversion.
async fn raw_call_as(addr: SocketAddr, headers: &str, method: &str, path: &str) -> Reply {
    use std::io::{Read, Write};
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         {headers}\r\ncontent-length: 0\r\n\r\n"
    );
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        let status = out
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Reply {
            status,
            head: out,
            body: Value::Null,
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_cleanly_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "host", 8).await;
    let vm = consumer();
    let live = claim(&s, &vm, &rp, 1, None).await;
    let live_path = format!("/claims/{}", live["uuid"].as_str().unwrap());
    let before = snapshot(&s, &[&rp], &[&vm]).await;
    let good = claim_body(&vm, &rp, 1, None);
    let with = |key: &str, value: Value| {
        let mut b = good.clone();
        b[key] = value;
        b.to_string()
    };
    let amount = |v: Value| {
        let mut b = good.clone();
        b["allocations"][&rp]["resources"]["VCPU"] = v;
        b.to_string()
    };
    let unknown_rp = consumer();
    let mut bodies: Vec<(String, u16)> = vec![
        ("{".into(), 400),
        ("[]".into(), 400),
        ("null".into(), 400),
        ("{\"consumer_uuid\": 1}".into(), 400),
        (with("surprise", json!(1)), 400),
        (with("consumer_uuid", json!("not-a-uuid")), 400),
        (with("consumer_uuid", json!("")), 400),
        (with("project_id", json!("")), 400),
        (with("project_id", json!("x".repeat(256))), 400),
        (with("consumer_type", json!("lower")), 400),
        (with("tag", json!("x".repeat(256))), 400),
        (with("tag", json!(7)), 400),
        (with("expires_in", json!(0)), 400),
        (with("expires_in", json!(-5)), 400),
        (with("expires_in", json!(1.5)), 400),
        (with("expires_in", json!("60")), 400),
        (with("expires_in", json!(10i64 * 365 * 86_400 + 1)), 400),
        (with("expires_in", json!(i64::MAX)), 400),
        (with("expires_in", json!(u64::MAX)), 400),
        (with("expires_in", json!(1e300)), 400),
        (with("allocations", json!({})), 400),
        (with("allocations", json!([])), 400),
        (
            with(
                "allocations",
                json!({"not-a-uuid": {"resources": {"VCPU": 1}}}),
            ),
            400,
        ),
        (with("allocations", json!({&rp: {"resources": {}}})), 400),
        (
            with(
                "allocations",
                json!({&rp: {"resources": {"VCPU": 1}, "generation": 1}}),
            ),
            400,
        ),
        (
            with("allocations", json!({&rp: {"resources": {"vcpu": 1}}})),
            400,
        ),
        (
            with(
                "allocations",
                json!({&rp: {"resources": {"CUSTOM_NOPE": 1}}}),
            ),
            400,
        ),
        (
            with(
                "allocations",
                json!({&unknown_rp: {"resources": {"VCPU": 1}}}),
            ),
            400,
        ),
        (
            with(
                "allocations",
                json!({"------------------------------------": {"resources": {"VCPU": 1}}}),
            ),
            400,
        ),
        (amount(json!(0)), 400),
        (amount(json!(-1)), 400),
        (amount(json!("1")), 400),
        (amount(json!(1.5)), 400),
        (amount(json!(u64::MAX)), 409),
        (amount(json!(1e30)), 400),
        (
            with("allocations", json!({&rp: {"resources": {"DISK_GB": 1}}})),
            409,
        ),
    ];
    for key in ["consumer_uuid", "project_id", "user_id", "allocations"] {
        let mut b = good.clone();
        b.as_object_mut().unwrap().remove(key);
        bodies.push((b.to_string(), 400));
    }
    for (body, status) in &bodies {
        let r = raw_call(s.addr, "POST", "/claims", Some(body), "application/json").await;
        assert_eq!(r.status, *status, "{body}: {r:?}");
        assert!(r.body["errors"][0]["detail"].is_string(), "{body}: {r:?}");
    }
    let r = raw_call(
        s.addr,
        "POST",
        "/claims",
        Some(&good.to_string()),
        "text/plain",
    )
    .await;
    assert_eq!(r.status, 415, "{r:?}");

    // Confirm bodies.
    for body in [
        "{",
        "{\"replace\": 1}",
        "{\"replace\": true, \"x\": 1}",
        "[]",
    ] {
        let r = raw_call(
            s.addr,
            "POST",
            &format!("{live_path}/confirm"),
            Some(body),
            "application/json",
        )
        .await;
        assert_eq!(r.status, 400, "{body}: {r:?}");
    }

    // Hostile paths and query strings.
    let hostile: &[(&str, &str, u16)] = &[
        ("GET", "/claims/not-a-uuid", 404),
        ("GET", "/claims/%00", 404),
        ("GET", "/claims/..%2f..%2fetc", 404),
        ("POST", "/claims/not-a-uuid/confirm", 404),
        ("GET", "/claims?bogus=1", 400),
        ("GET", "/claims?consumer_uuid=nope", 400),
        ("GET", "/claims?resource_provider_uuid=", 400),
        ("GET", "/claims?state=lost", 400),
        ("GET", "/claims?limit=0", 400),
        ("GET", "/claims?limit=-1", 400),
        ("GET", "/claims?limit=x", 400),
        ("GET", "/claims?limit=99999999999999999999999999", 200),
        (
            "GET",
            "/claims?marker=6f1c6b8e-1d3e-4a3c-9a50-2b9b2c1b2a11",
            400,
        ),
        ("GET", "/claims?marker=x", 400),
        ("GET", "/claims?tag=%FF", 400),
        ("GET", "/claims?consumer_type=lower", 400),
        ("DELETE", "/claims", 400),
        ("DELETE", "/claims?consumer_uuid=x", 400),
        ("DELETE", "/claims?consumer_uuid=", 400),
        ("GET", "/pending", 400),
        ("GET", "/pending?consumer_uuid=x", 400),
        ("GET", "/pending?other=1", 400),
        ("GET", "/resource_providers/nope/pending", 404),
        (
            "GET",
            "/resource_providers/6f1c6b8e-1d3e-4a3c-9a50-2b9b2c1b2a11/pending",
            404,
        ),
        ("PUT", "/claims", 405),
    ];
    for (method, path, status) in hostile {
        let r = s.call(method, path, None).await;
        assert_eq!(r.status, *status, "{method} {path}: {r:?}");
        if *status != 200 {
            assert!(r.body["errors"][0]["detail"].is_string(), "{path}: {r:?}");
        }
    }
    let r = s
        .call(
            "GET",
            &format!("/resource_providers/{rp}/pending?detail=all"),
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(snapshot(&s, &[&rp], &[&vm]).await, before);
    s.shut().await;
}

/// A claim's consumer is a Placement consumer (its amounts become the consumer's
/// allocations when it is confirmed), so `consumer_uuid` is a uuid, as
/// `PUT /allocations/{consumer_uuid}` needs (issue 46: docs/api.md said any string):
/// any other text is a 400 naming the rule; a uuid in another standard spelling is
/// taken and answered hyphenated, the consumer the confirmed allocations belong to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_consumer_is_a_uuid() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), clock()).await;
    let rp = provider(&s, "cu-1", 8).await;
    for text in [
        "instance-1",
        "x",
        &"a".repeat(255),
        "6a0f5b0e-54c5-4a39-9a5b-3a1f3c2e8d1",
    ] {
        let r = s
            .call("POST", "/claims", Some(claim_body(text, &rp, 1, None)))
            .await;
        assert_eq!(r.status, 400, "{text}: {r:?}");
        let detail = r.body["errors"][0]["detail"].as_str().unwrap_or("");
        assert!(detail.contains("is not a 'uuid'"), "{text}: {detail}");
    }
    let consumer = uuid::Uuid::new_v4();
    let spelt = consumer.simple().to_string().to_uppercase();
    let c = claim(&s, &spelt, &rp, 1, None).await;
    assert_eq!(c["consumer_uuid"], consumer.to_string(), "{c}");
    let confirm = format!("/claims/{}/confirm", c["uuid"].as_str().unwrap());
    assert_eq!(s.call("POST", &confirm, None).await.status, 200);
    let r = s
        .call("GET", &format!("/allocations/{consumer}"), None)
        .await;
    assert_eq!(r.body["allocations"][&rp]["resources"]["VCPU"], 1, "{r:?}");
    s.shut().await;
}
