//! Running allot the way deployment tools expect (issue 23), through the real binary
//! over real HTTP: `/healthcheck` with oslo.middleware's contract (every form, the
//! drain file, an unwritable SQLite file, a stopped PostgreSQL server, a node whose
//! view falls behind), `GET /` as HTTP/1.0 without `Host`, the request log in text and
//! JSON, and the graceful stop: SIGTERM in the middle of a claims storm loses no
//! answered claim and resets no request that reached the server; systemd hears
//! READY=1 and STOPPING=1; the grace period ends a stop that waits too long, and a
//! second signal ends it at once.
//!
//! The PostgreSQL tests need `ALLOT_TEST_POSTGRES_URL` (see `support::Database`); the
//! stopped-server one starts a throwaway cluster of its own with `scripts/pg-cluster`,
//! since it stops it. The unwritable-file one needs `chattr` (root, on a file system
//! with the immutable flag). Without them, the `support::skip` rule.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{json, skip, Database, Relay, Server};
use uuid::Uuid;

/// A raw HTTP exchange on its own connection: status, lower-cased headers, body.
fn raw(addr: &str, request: &str) -> (u16, HashMap<String, String>, String) {
    let reply = support::exchange(addr, request.as_bytes());
    (reply.status, reply.headers, reply.body)
}

fn header<'a>(headers: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    headers.get(name).map(String::as_str)
}

/// `/healthcheck` with `method` and, if any, an `Accept` header; no token.
fn health(
    addr: &str,
    method: &str,
    accept: Option<&str>,
) -> (u16, HashMap<String, String>, String) {
    let accept = accept.map_or(String::new(), |a| format!("accept: {a}\r\n"));
    raw(
        addr,
        &format!(
            "{method} /healthcheck HTTP/1.1\r\nhost: {addr}\r\n{accept}connection: close\r\n\r\n"
        ),
    )
}

/// Polls `check` every 100 ms until it holds, at most `bound`.
fn converge(bound: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < bound, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// oslo's JSON body for `reasons`.
fn oslo_json(reasons: &[&str]) -> String {
    let items: Vec<String> = reasons.iter().map(|r| format!("        \"{r}\"")).collect();
    format!(
        "{{\n    \"detailed\": false,\n    \"reasons\": [\n{}\n    ]\n}}",
        items.join(",\n")
    )
}

const TEXT: &str = "text/plain; charset=UTF-8";

#[test]
fn health_check_follows_oslo_and_the_drain_file() {
    let dir = tempfile::tempdir().unwrap();
    let drain = dir.path().join("drain");
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let server = Server::start_args(
        &db,
        &[
            "--bind",
            "127.0.0.1:0",
            "--healthcheck-disable-file",
            drain.to_str().unwrap(),
        ],
        &[],
    );
    let addr = &server.addr;

    let (status, headers, body) = health(addr, "GET", None);
    assert_eq!((status, body.as_str()), (200, "OK"));
    assert_eq!(header(&headers, "content-type"), Some(TEXT));
    // No token, and none of the API's headers: the check sits outside the API.
    assert_eq!(header(&headers, "openstack-api-version"), None);
    let (status, _, body) = health(addr, "HEAD", None);
    assert_eq!((status, body.as_str()), (204, ""));
    let (status, headers, body) = health(addr, "GET", Some("application/json"));
    assert_eq!((status, body), (200, oslo_json(&["OK"])));
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    let (status, headers, body) = health(addr, "GET", Some("text/html"));
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/html; charset=UTF-8")
    );
    assert!(body.contains("<TD>OK</TD>"), "{body}");
    assert_eq!(body.len(), 239, "oslo's page is 239 bytes: {body}");
    // oslo answers whatever the method, and falls back to text for any other type.
    assert_eq!(health(addr, "POST", Some("application/xml")).2, "OK");
    // The API itself still wants a token.
    let (status, _, _) = raw(
        addr,
        &format!("GET /resource_providers HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"),
    );
    assert_eq!(status, 401);

    std::fs::write(&drain, "").unwrap();
    let (status, headers, body) = health(addr, "GET", None);
    assert_eq!((status, body.as_str()), (503, "DISABLED BY FILE"));
    assert_eq!(header(&headers, "content-type"), Some(TEXT));
    let (status, _, body) = health(addr, "HEAD", None);
    assert_eq!((status, body.as_str()), (503, ""));
    let (status, _, body) = health(addr, "GET", Some("application/json"));
    assert_eq!((status, body), (503, oslo_json(&["DISABLED BY FILE"])));
    // A drained node still serves the API: the file only tells the load balancer.
    assert_eq!(server.call("GET", "/resource_providers", None).0, 200);

    std::fs::remove_file(&drain).unwrap();
    let (status, _, body) = health(addr, "GET", None);
    assert_eq!((status, body.as_str()), (200, "OK"));
}

/// OpenStack-Ansible's HAProxy probes `GET /` as HTTP/1.0 without a `Host` header.
#[test]
fn root_answers_http_1_0_without_host() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let (status, _, body) = raw(&server.addr, "GET / HTTP/1.0\r\n\r\n");
    assert_eq!(status, 200, "{body}");
    assert!(json(&body)["versions"][0]["id"] == "v1.0", "{body}");
}

/// Whether `chattr` can set the immutable flag here (root, on ext4 or the like).
fn chattr(flag: &str, paths: &[&Path]) -> bool {
    Command::new("chattr")
        .arg(flag)
        .args(paths)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// An SQLite file that can no longer be written fails the check (the probe's write
/// fails), and passes again once it can.
#[test]
fn health_check_fails_while_the_sqlite_file_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let server = Server::start(&db);
    let addr = server.addr.clone();
    assert_eq!(health(&addr, "GET", None).0, 200);
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let files = [db.as_path(), wal.as_path()];
    if !chattr("+i", &files) {
        skip("chattr +i failed (needs root and a file system with the immutable flag)");
        return;
    }
    // Whatever happens, the files must become removable again.
    struct Mutable<'a>(&'a [&'a Path]);
    impl Drop for Mutable<'_> {
        fn drop(&mut self) {
            chattr("-i", self.0);
        }
    }
    let guard = Mutable(&files);
    let mut last = (0, String::new());
    converge(Duration::from_secs(10), "503 while immutable", || {
        let (status, _, body) = health(&addr, "GET", None);
        last = (status, body);
        last.0 == 503
    });
    assert_eq!(last.1, "STORE UNAVAILABLE");
    drop(guard);
    converge(Duration::from_secs(10), "200 once writable", || {
        health(&addr, "GET", None).0 == 200
    });
    let (status, body) = server.call("PUT", "/traits/CUSTOM_AFTER", None);
    assert_eq!(status, 201, "{body}");
}

/// The log's lines of target `allot::request`.
fn request_lines(server: &Server) -> Vec<String> {
    server
        .log()
        .into_iter()
        .filter(|l| l.contains("allot::request"))
        .collect()
}

/// A POST whose body arrives `pause` after its headers: a request that takes at
/// least that long, as the server measures it.
fn slow_post(addr: &str, path: &str, body: &str, pause: Duration) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nx-auth-token: admin\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    std::thread::sleep(pause);
    s.write_all(body.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const GLOBAL_ID: &str = "req-3f2b1c1e-8a0e-4b4e-9c1e-0d2f3a4b5c6d";

/// One GET of a provider by uuid, with a global request id, for the log tests.
fn get_provider(addr: &str) -> u16 {
    raw(
        addr,
        &format!(
            "GET /resource_providers/{} HTTP/1.1\r\nhost: {addr}\r\nx-auth-token: admin\r\n\
             x-openstack-request-id: {GLOBAL_ID}\r\nconnection: close\r\n\r\n",
            Uuid::new_v4()
        ),
    )
    .0
}

#[test]
fn request_log_in_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let server = Server::start_args(
        &db,
        &[
            "--bind",
            "127.0.0.1:0",
            "--log",
            "info",
            "--slow-request-ms",
            "100",
        ],
        &[],
    );
    assert_eq!(get_provider(&server.addr), 404);
    let body = format!(r#"{{"name": "slow", "uuid": "{}"}}"#, Uuid::new_v4());
    let status = slow_post(
        &server.addr,
        "/resource_providers",
        &body,
        Duration::from_millis(300),
    );
    // Microversion 1.0: 201 and no body.
    assert_eq!(status, 201);
    let mut lines = Vec::new();
    converge(Duration::from_secs(5), "two request lines", || {
        lines = request_lines(&server);
        lines.len() >= 2
    });
    let get = &lines[0];
    for field in [
        "INFO",
        "method=\"GET\"",
        "route=\"/resource_providers/{uuid}\"",
        "status=404",
        "duration_ms=",
        "bytes=",
        "request_id=\"req-",
        &format!("global_request_id=\"{GLOBAL_ID}\""),
        "project=\"admin\"",
        "slow=false",
    ] {
        assert!(get.contains(field), "{field} in {get}");
    }
    let post = &lines[1];
    for field in [
        "WARN",
        "method=\"POST\"",
        "route=\"/resource_providers\"",
        "status=201",
        "slow=true",
    ] {
        assert!(post.contains(field), "{field} in {post}");
    }
    // stderr is a pipe here: no colour codes.
    assert!(
        server.log().iter().all(|l| !l.contains('\u{1b}')),
        "escape sequences in {:?}",
        server.log()
    );
}

#[test]
fn request_log_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let server = Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0", "--log", "info"],
        &[
            ("ALLOT_LOG_FORMAT", "json"),
            ("ALLOT_SLOW_REQUEST_MS", "100"),
        ],
    );
    assert_eq!(get_provider(&server.addr), 404);
    assert_eq!(health(&server.addr, "HEAD", None).0, 204);
    let body = format!(r#"{{"name": "slow", "uuid": "{}"}}"#, Uuid::new_v4());
    slow_post(
        &server.addr,
        "/resource_providers",
        &body,
        Duration::from_millis(300),
    );
    let mut lines = Vec::new();
    converge(Duration::from_secs(5), "three request lines", || {
        lines = request_lines(&server);
        lines.len() >= 3
    });
    // Every line of the log is one JSON object.
    for line in server.log() {
        json(&line);
    }
    let get = json(&lines[0]);
    assert_eq!(get["level"], "INFO");
    assert_eq!(get["target"], "allot::request");
    assert_eq!(get["method"], "GET");
    assert_eq!(get["route"], "/resource_providers/{uuid}");
    assert_eq!(get["status"], 404);
    assert!(get["duration_ms"].as_f64().is_some(), "{get}");
    assert!(get["bytes"].as_u64().unwrap() > 0, "{get}");
    assert!(get["request_id"].as_str().unwrap().starts_with("req-"));
    assert_eq!(get["global_request_id"], GLOBAL_ID);
    assert_eq!(get["project"], "admin");
    assert_eq!(get["slow"], false);
    let head = json(&lines[1]);
    assert_eq!(head["route"], "/healthcheck");
    assert_eq!(head["status"], 204);
    let post = json(&lines[2]);
    assert_eq!(post["level"], "WARN");
    assert_eq!(post["slow"], true);
    assert!(post["duration_ms"].as_f64().unwrap() >= 300.0, "{post}");
}

/// A datagram socket standing for systemd's `NOTIFY_SOCKET`.
struct Systemd {
    socket: std::os::unix::net::UnixDatagram,
    path: PathBuf,
}

impl Systemd {
    fn new(dir: &Path) -> Systemd {
        let path = dir.join("notify");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Systemd { socket, path }
    }

    fn next(&self) -> String {
        let mut buf = [0u8; 512];
        let n = self.socket.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).trim().to_owned()
    }
}

const PROVIDER: &str = "0a112300-0000-4000-8000-000000000000";

fn claim_body() -> String {
    format!(
        r#"{{"allocations": {{"{PROVIDER}": {{"resources": {{"VCPU": 1}}}}}},
            "project_id": "project", "user_id": "user",
            "consumer_generation": null, "consumer_type": "INSTANCE"}}"#
    )
}

/// SIGTERM in the middle of a storm of claims: the server stops accepting, answers
/// every request that reached it, exits 0, and every claim it answered 204 is held
/// after a restart. systemd hears READY=1 and STOPPING=1.
#[test]
fn sigterm_during_a_claims_storm_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let systemd = Systemd::new(dir.path());
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let notify = systemd.path.to_str().unwrap().to_owned();
    let mut server = Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0"],
        &[("NOTIFY_SOCKET", &notify)],
    );
    assert_eq!(systemd.next(), "READY=1");
    let client = server.client();
    let (status, body) = client.call(
        "POST",
        "/resource_providers",
        Some(&format!(r#"{{"name": "p", "uuid": "{PROVIDER}"}}"#)),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = client.call(
        "PUT",
        &format!("/resource_providers/{PROVIDER}/inventories"),
        Some(r#"{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1000000}}}"#),
    );
    assert_eq!(status, 200, "{body}");

    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let client = client.clone();
            let outcomes = outcomes.clone();
            std::thread::spawn(move || loop {
                let consumer = Uuid::new_v4();
                let outcome = client.try_request(
                    "PUT",
                    &format!("/allocations/{consumer}"),
                    Some(&claim_body()),
                    "1.39",
                );
                let refused = outcome.as_ref().is_err_and(|e| !support::reached(e));
                outcomes.lock().unwrap().push((consumer, outcome));
                if refused {
                    return;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    server.signal("TERM");
    let exit = server.wait_exit(Duration::from_secs(30));
    assert!(
        exit.is_some_and(|e| e.success()),
        "a graceful stop exits 0: {exit:?}"
    );
    assert_eq!(systemd.next(), "STOPPING=1");
    for t in threads {
        t.join().unwrap();
    }
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    let mut accepted = Vec::new();
    for (consumer, outcome) in &outcomes {
        match outcome {
            Ok((204, _)) => accepted.push(*consumer),
            Ok((status, body)) => panic!("claim {consumer}: {status} {body}"),
            // Refused, or a write that failed: the request never left the client.
            // A reset after the request was written is the loss this test is for
            // (once, a handshake the stop's filter cut in half: see graceful.rs).
            Err(e) => assert!(
                !support::reached(e) || e.kind() == std::io::ErrorKind::BrokenPipe,
                "a request that was sent got no answer: {e}"
            ),
        }
    }
    assert!(accepted.len() > 50, "only {} claims", accepted.len());

    let server = Server::start_args(&db, &["--bind", "127.0.0.1:0"], &[]);
    let client = server.client();
    for consumer in &accepted {
        let (status, body) = client.call("GET", &format!("/allocations/{consumer}"), None);
        assert_eq!(status, 200);
        assert_eq!(
            json(&body)["allocations"][PROVIDER]["resources"]["VCPU"],
            1,
            "claim {consumer} answered 204 is not held after the restart"
        );
    }
    let (_, body) = client.call(
        "GET",
        &format!("/resource_providers/{PROVIDER}/usages"),
        None,
    );
    assert_eq!(
        json(&body)["usages"]["VCPU"].as_u64(),
        Some(accepted.len() as u64),
        "nothing but the answered claims is held"
    );
}

/// Opens a request whose body never comes: one that stays under way.
fn hold_a_request(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /resource_providers HTTP/1.1\r\nhost: {addr}\r\nx-auth-token: admin\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
    )
    .unwrap();
    // The server must have it before the signal.
    std::thread::sleep(Duration::from_millis(200));
    s
}

/// A stop that waits for a request that never ends gives up after the grace period,
/// and exits 0 all the same.
#[test]
fn the_grace_period_bounds_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start_args(
        &format!("sqlite:{}", dir.path().join("a.db").display()),
        &["--bind", "127.0.0.1:0", "--shutdown-grace", "1"],
        &[],
    );
    let _held = hold_a_request(&server.addr);
    let start = Instant::now();
    server.signal("TERM");
    assert!(
        server.wait_exit(Duration::from_millis(500)).is_none(),
        "the stop waits for the request under way"
    );
    let exit = server.wait_exit(Duration::from_secs(10));
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
    assert!(start.elapsed() >= Duration::from_secs(1));
}

/// A second signal ends a stop that is waiting, at once.
#[test]
fn a_second_signal_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dir.path().join("a.db"));
    let _held = hold_a_request(&server.addr);
    server.signal("TERM");
    assert!(
        server.wait_exit(Duration::from_millis(500)).is_none(),
        "the stop waits for the request under way (grace 30 s)"
    );
    server.signal("INT");
    let exit = server
        .wait_exit(Duration::from_secs(5))
        .expect("exited at once");
    assert_eq!(exit.code(), Some(130), "128 + SIGINT: {exit:?}");
}

/// A throwaway PostgreSQL cluster of this test's own (`scripts/pg-cluster`), which
/// the test may stop and start again on the same port.
struct Cluster {
    state: tempfile::TempDir,
    url: String,
}

impl Cluster {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster")
    }

    fn start() -> Cluster {
        let state = tempfile::tempdir().unwrap();
        let out = Command::new(Self::script())
            .arg("start")
            .env("ALLOT_PG_STATE", state.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg-cluster start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Cluster { state, url }
    }

    /// `pg_ctl ARGS` on the cluster's data directory, as its owner.
    fn pg_ctl(&self, args: &[&str]) {
        let data = std::fs::read_to_string(self.state.path().join("data")).unwrap();
        let data = data.trim();
        let pg_ctl = "/usr/lib/postgresql/15/bin/pg_ctl";
        let as_root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
        let mut cmd = if as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", pg_ctl]);
            c
        } else {
            Command::new(pg_ctl)
        };
        let out = cmd
            .args(["-D", &format!("{data}/db"), "-w"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    /// Starts it again with the options `scripts/pg-cluster` gave it (pg_ctl keeps
    /// them in `postmaster.opts`, which `restart` reuses; `start` does not).
    fn start_again(&self) {
        let data = std::fs::read_to_string(self.state.path().join("data")).unwrap();
        let data = data.trim();
        let port = self
            .url
            .rsplit(':')
            .next()
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        let options = format!(
            "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={data} -c fsync=off"
        );
        self.pg_ctl(&["-l", &format!("{data}/server.log"), "-o", &options, "start"]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(Self::script())
            .arg("stop")
            .env("ALLOT_PG_STATE", self.state.path())
            .output();
    }
}

/// The PostgreSQL server stopped: 503 (the store cannot be reached, and the view
/// falls behind); started again: 200.
#[test]
fn health_check_fails_while_postgres_is_stopped() {
    if std::env::var("ALLOT_TEST_POSTGRES_URL").is_err() {
        skip("ALLOT_TEST_POSTGRES_URL is not set: no PostgreSQL to test against");
        return;
    }
    let cluster = Cluster::start();
    let server = Server::start_url(&cluster.url);
    let addr = server.addr.clone();
    assert_eq!(health(&addr, "GET", None).2, "OK");

    cluster.stop();
    let mut last = (0, String::new());
    converge(Duration::from_secs(15), "503 while stopped", || {
        let (status, _, body) = health(&addr, "GET", None);
        last = (status, body);
        last.0 == 503
    });
    assert!(
        last.1.contains("STORE UNAVAILABLE") || last.1.contains("VIEW STALE"),
        "{}",
        last.1
    );
    let (status, _, body) = health(&addr, "GET", Some("application/json"));
    assert_eq!(status, 503);
    assert_eq!(json(&body)["detailed"], false);

    cluster.start_again();
    converge(Duration::from_secs(30), "200 once started again", || {
        health(&addr, "GET", None).0 == 200
    });
}

/// Of two nodes on one database, the one whose connection stalls falls behind and
/// fails the check (`VIEW STALE`) past the bound, while the other passes; both pass
/// once it flows again.
#[test]
fn health_check_fails_on_a_node_whose_view_is_stale() {
    let Some(db) = Database::create() else { return };
    // The node's URL goes through the relay: the same database, a stallable network.
    let (relay, relayed) = Relay::to_database(&db.url);
    let a = Server::start_url(&db.url);
    let b = Server::start_url(&relayed);
    assert_eq!(health(&a.addr, "GET", None).0, 200);
    assert_eq!(health(&b.addr, "GET", None).0, 200);

    relay.paused.store(true, Ordering::Release);
    let mut last = (0, String::new());
    converge(Duration::from_secs(15), "503 on the stalled node", || {
        let (status, _, body) = health(&b.addr, "GET", None);
        last = (status, body);
        last.0 == 503
    });
    assert!(last.1.contains("VIEW STALE"), "{}", last.1);
    assert_eq!(health(&a.addr, "GET", None).0, 200);

    relay.paused.store(false, Ordering::Release);
    converge(Duration::from_secs(15), "200 once it flows", || {
        health(&b.addr, "GET", None).0 == 200
    });
}
