//! What the binary's tests share: the real `allot serve` on an ephemeral port, a
//! tiny HTTP/1.1 client on `std` (one connection per request; [`send_raw`] for
//! requests whose headers may be anything), and `allot bench` run as a command, and
//! the output of a command that must succeed; and [`skip`], the workspace's one rule
//! for a test whose outside server (PostgreSQL, a Galera cluster, Keystone) is
//! missing.
#![allow(dead_code)]

#[path = "../../../allot-store/tests/skip/mod.rs"]
mod skip;
pub use skip::skip;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `allot token ARGS --token-file FILE`: its standard output, trimmed (a new token,
/// or a listing); panics with the command's output when it fails.
pub fn token_cmd(file: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_allot"))
        .arg("token")
        .arg("--token-file")
        .arg(file)
        .args(args)
        .output()
        .expect("run allot token");
    stdout_of(out).trim().to_owned()
}

/// Runs `allot bench ARGS`, expects success, returns stdout.
pub fn bench(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_allot"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run allot bench");
    stdout_of(output)
}

/// A running `allot serve` on an ephemeral port.
pub struct Server {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its standard error after the "listening" line, as it comes.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its standard error before that line (the start's warnings).
    startup: Vec<String>,
}

impl Server {
    /// Starts the binary on a SQLite database (created if need be) and waits until it
    /// listens.
    pub fn start(db: &Path) -> Server {
        Server::start_url(&format!("sqlite:{}", db.display()))
    }

    /// Starts the binary on the database a URL names (`sqlite:PATH`,
    /// `postgres://...`) and waits until it listens.
    pub fn start_url(database: &str) -> Server {
        Server::start_args(database, &["--bind", "127.0.0.1:0"], &[])
    }

    /// Starts `allot serve --database DATABASE ARGS` with more environment `env` and
    /// waits until it listens (an address on every interface is reached through
    /// loopback).
    pub fn start_args(database: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_under(&[], database, args, env)
    }

    /// As [`Server::start_args`], run through `wrapper` (a command and its arguments
    /// that runs the rest, as `prlimit --nofile=N:N --` does); none: the binary alone.
    pub fn start_under(
        wrapper: &[&str],
        database: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let binary = env!("CARGO_BIN_EXE_allot");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        let mut child = command
            .args(["serve", "--database", database])
            .args(args)
            .envs(env.iter().copied())
            .env("ALLOT_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start allot");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let mut startup = Vec::new();
        let addr = loop {
            let Some(line) = lines.next() else {
                panic!("allot exited before listening: {startup:#?}")
            };
            let line = line.expect("read stderr");
            let addr = line
                .strip_prefix("allot: listening on http://")
                .or_else(|| line.strip_prefix("allot: listening on https://"));
            if let Some(addr) = addr {
                break addr.to_owned();
            }
            startup.push(line);
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        let addr = addr.replace("0.0.0.0", "127.0.0.1");
        Server {
            child,
            addr,
            log,
            startup,
        }
    }

    /// The server's process id (to read its memory from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A client for this server (cheap; clients can go to other threads).
    pub fn client(&self) -> Client {
        Client {
            addr: self.addr.clone(),
        }
    }

    /// One request as admin at the latest microversion; returns (status, body).
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        self.client().call(method, path, body)
    }

    /// What the server wrote to its standard error before it listened.
    pub fn startup_log(&self) -> &[String] {
        &self.startup
    }

    /// The lines the server has written to its standard error since it listened.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Sends a signal by name (`TERM`, `INT`, `STOP`, ...).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// Waits for the server to exit, at most `bound`; its exit status, or None if it
    /// still runs.
    pub fn wait_exit(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGHUP (the server rereads its token and policy files).
    pub fn hup(&self) {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Stops the server with SIGTERM and checks that it exits cleanly.
    pub fn terminate(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(
            exit.success(),
            "graceful shutdown should exit 0, got {exit:?}"
        );
    }

    /// Kills the server with SIGKILL: no chance to flush or clean up.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A test that fails half-way must not leave a server behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tiny HTTP/1.1 client: one connection per request, `connection: close`.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`.
    pub addr: String,
}

impl Client {
    /// One request as admin at the latest microversion; returns (status, body).
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        self.request(method, path, body, "latest")
    }

    /// One request as admin at microversion `version` (`1.39`, `latest`); returns
    /// (status, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        version: &str,
    ) -> (u16, String) {
        self.try_request(method, path, body, version)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// As [`Client::request`], but a connection that fails, or closes before a
    /// status line came back, is an `Err` instead of a panic: what a client sees of a
    /// server killed while it waits. [`reached`] tells the two apart.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        version: &str,
    ) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect(&self.addr).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::NotConnected, format!("connect: {e}"))
        })?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let body = body.unwrap_or("");
        let content_type = if body.is_empty() {
            ""
        } else {
            "content-type: application/json\r\n"
        };
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nx-auth-token: admin\r\n\
             openstack-api-version: placement {version}\r\naccept: application/json\r\n\
             {content_type}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let response = String::from_utf8(response)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        // A server killed before answering closes the connection with nothing sent.
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("no status line in {response:?}"),
                )
            })?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let chunked = head
            .lines()
            .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Ok((status, body))
    }
}

/// Whether a request that [`Client::try_request`] saw fail had reached the server:
/// the connection was made (the server, or the process dying of its kill, still
/// listened) and ended with no answer. Sent before the kill, such a request was in
/// flight at it; one whose connection was refused never got there.
pub fn reached(error: &std::io::Error) -> bool {
    error.kind() != std::io::ErrorKind::NotConnected
}

/// Decodes a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size =
            usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).expect("chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// The standard output of a command run to completion, which must have succeeded
/// (its output and error in the message if not).
pub fn stdout_of(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A fresh database on the test server, dropped when the test ends; None (and a
/// note) when there is no server to test against.
pub struct Database {
    /// The server's URL the test was given.
    pub admin: String,
    /// The database's name.
    pub name: String,
    /// The database's URL.
    pub url: String,
}

impl Database {
    /// A fresh database on the server of `ALLOT_TEST_POSTGRES_URL`, a URL whose user
    /// may `CREATE DATABASE` (`scripts/pg-cluster` starts a throwaway one); without
    /// it, None and the test's PostgreSQL part is skipped by [`skip`]'s rule (under
    /// CI, a failure).
    pub fn create() -> Option<Database> {
        let Ok(admin) = std::env::var("ALLOT_TEST_POSTGRES_URL") else {
            skip(
                "ALLOT_TEST_POSTGRES_URL is not set, so its PostgreSQL part did not run \
                 (scripts/pg-cluster start prints a server's URL)",
            );
            return None;
        };
        let name = format!("allot_test_{}", uuid::Uuid::new_v4().simple());
        psql(&admin, &format!("CREATE DATABASE {name}"));
        // The admin URL names a database (or none): swap in ours.
        let (base, query) = admin.split_once('?').unwrap_or((&admin, ""));
        let server = match base.rsplit_once('/') {
            Some((server, _)) if server.contains("://") && !server.ends_with('/') => server,
            _ => base,
        };
        let url = if query.is_empty() {
            format!("{server}/{name}")
        } else {
            format!("{server}/{name}?{query}")
        };
        Some(Database { admin, name, url })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([&self.admin, "-qXc"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .output();
    }
}

/// Runs one SQL statement with `psql`, which must succeed.
pub fn psql(url: &str, sql: &str) {
    let out = Command::new("psql")
        .args([url, "-qXc", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh database on the three-node Galera cluster `ALLOT_TEST_GALERA_URLS` names,
/// dropped when the test ends; None (and a note) when there is none to test against.
pub struct Galera {
    /// Each Galera node's server, as given (`mysql://root@127.0.0.1:PORT/`).
    pub servers: Vec<String>,
    /// The database's name.
    pub name: String,
    /// The database's URL on each node, in the same order.
    pub urls: Vec<String>,
}

impl Galera {
    /// The variable that names the cluster: its three nodes' URLs, space- or
    /// comma-separated, as `scripts/galera-cluster urls` prints them.
    pub const VAR: &str = "ALLOT_TEST_GALERA_URLS";

    /// A fresh database on the cluster of [`Galera::VAR`], whose user may `CREATE
    /// DATABASE` (root, as `scripts/galera-cluster start` makes it), once all three
    /// nodes say they are synced (a test before may have left one rejoining); without
    /// the variable, None and the test is skipped by [`skip`]'s rule (under CI, a
    /// failure).
    pub fn create() -> Option<Galera> {
        let Ok(given) = std::env::var(Galera::VAR) else {
            skip(
                "ALLOT_TEST_GALERA_URLS is not set, so its Galera part did not run \
                 (scripts/galera-cluster start prints the three nodes' URLs)",
            );
            return None;
        };
        let servers: Vec<String> = given
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        assert_eq!(servers.len(), 3, "{}={given}: three URLs", Galera::VAR);
        let name = format!("allot_test_{}", uuid::Uuid::new_v4().simple());
        let urls = servers
            .iter()
            .map(|server| {
                let (base, _) = server.split_once('?').unwrap_or((server, ""));
                format!("{}/{name}", base.trim_end_matches('/'))
            })
            .collect();
        let galera = Galera {
            servers,
            name,
            urls,
        };
        galera.wait_synced(Duration::from_secs(120));
        // Made on one node, the database is on every node (DDL is replicated), though
        // not at the same instant: a node started on another at once could miss it.
        mariadb(
            &galera.servers[0],
            &format!("CREATE DATABASE {}", galera.name),
        )
        .unwrap_or_else(|e| panic!("{}={given}: {e}", Galera::VAR));
        let made = format!(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{}'",
            galera.name
        );
        let start = std::time::Instant::now();
        while !galera
            .servers
            .iter()
            .all(|server| mariadb(server, &made).is_ok_and(|n| n.trim() == "1"))
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{} on every node",
                galera.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(galera)
    }

    /// Waits until each node is in a cluster of three and synced (at most `bound`).
    pub fn wait_synced(&self, bound: Duration) {
        let start = std::time::Instant::now();
        let whole = || {
            self.servers.iter().all(|server| {
                mariadb(
                    server,
                    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                     WHERE VARIABLE_NAME IN ('WSREP_CLUSTER_SIZE', 'WSREP_LOCAL_STATE_COMMENT') \
                     ORDER BY VARIABLE_NAME",
                )
                .is_ok_and(|out| out.split_whitespace().eq(["3", "Synced"]))
            })
        };
        while !whole() {
            assert!(
                start.elapsed() < bound,
                "the Galera cluster of {} is not whole and synced after {bound:?}",
                Galera::VAR
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `sql` in this database, on node `node` (0, 1 or 2): its rows, tab-separated.
    pub fn query(&self, node: usize, sql: &str) -> Result<String, String> {
        mariadb(&self.servers[node], &format!("USE {}; {sql}", self.name))
    }
}

impl Drop for Galera {
    fn drop(&mut self) {
        // On the first node that takes it (a test may have left one down).
        for server in &self.servers {
            if mariadb(server, &format!("DROP DATABASE IF EXISTS {}", self.name)).is_ok() {
                return;
            }
        }
    }
}

/// Runs `sql` (statements separated by `;`) with the `mariadb` client on the server
/// `url` names (`mysql://USER[:PASSWORD]@HOST:PORT/...`, over TCP): its output
/// without column names, tab-separated; Err with the client's error.
pub fn mariadb(url: &str, sql: &str) -> Result<String, String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (credentials, address) = rest.split_once('@').unwrap_or(("root", rest));
    let address = address.split(['/', '?']).next().unwrap_or(address);
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "3306"));
    let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
    let mut command = Command::new("mariadb");
    command.args([
        "--no-defaults",
        "--protocol=TCP",
        "--connect-timeout=5",
        "-N",
        "-B",
        "-h",
        host,
        "-P",
        port,
        "-u",
        user,
    ]);
    if !password.is_empty() {
        command.arg(format!("-p{password}"));
    }
    let out = command
        .args(["-e", sql])
        .output()
        .map_err(|e| format!("run mariadb: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "mariadb on {address}: {sql}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `allot serve ARGS` (on a fresh SQLite file, loopback) with more environment `env`,
/// which must refuse to start within 20 s: its standard error.
pub fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(["serve", "--database", &db, "--bind", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start allot");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("allot started with {args:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "allot started with {args:?}");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

/// A response body as JSON; a body that is not JSON fails the test, naming it.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
}

/// A request as admin that must answer `status`; its body as JSON (null when empty).
pub fn call(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
    status: u16,
) -> serde_json::Value {
    let (got, text) = client.call(method, path, body.map(|b| b.to_string()).as_deref());
    assert_eq!(got, status, "{method} {path}: {text}");
    if text.is_empty() {
        serde_json::Value::Null
    } else {
        json(&text)
    }
}

/// A response read whole: status, lower-cased headers, body.
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        json(&self.body)
    }

    /// The envelope's first error (status and detail), which every error must have.
    pub fn envelope(&self) -> (u64, String) {
        let v = self.json();
        let e = &v["errors"][0];
        (
            e["status"].as_u64().expect("status in the envelope"),
            e["detail"].as_str().unwrap_or("").to_owned(),
        )
    }
}

/// One HTTP/1.1 request on its own connection (`connection: close`), its header
/// values raw bytes so that a test may send anything; the whole response.
pub fn send_raw(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &str,
) -> Reply {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\naccept: application/json\r\n\
         connection: close\r\ncontent-length: {}\r\n",
        body.len()
    )
    .into_bytes();
    if !body.is_empty() {
        req.extend_from_slice(b"content-type: application/json\r\n");
    }
    for (k, v) in headers {
        req.extend_from_slice(k.as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body.as_bytes());
    exchange(addr, &req)
}

/// Sends `request` as it is on a connection of its own (it should ask for
/// `connection: close`); the whole response.
pub fn exchange(addr: &str, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// `name`'s value (with its labels, as `/metrics` writes them) on `node`'s
/// `/metrics`, 0 if absent.
pub fn metric(node: &Server, name: &str) -> f64 {
    let (status, text) = node.call("GET", "/metrics", None);
    assert_eq!(status, 200, "{text}");
    metric_in(&text, name)
}

/// As [`metric`], but None when `/metrics` is not answered 200: on a node whose view
/// is past its staleness bound (cut off from its database), every read but `/` is
/// refused with 503, `/metrics` too.
pub fn try_metric(node: &Server, name: &str) -> Option<f64> {
    let (status, text) = node
        .client()
        .try_request("GET", "/metrics", None, "latest")
        .ok()?;
    (status == 200).then(|| metric_in(&text, name))
}

fn metric_in(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A TCP relay between a node and the database that can hold every byte: a network
/// that stalls without closing anything, as a partition does.
pub struct Relay {
    pub addr: String,
    /// While true, every byte waits.
    pub paused: Arc<AtomicBool>,
}

impl Relay {
    /// A relay to the database `url` names, and the URL through it.
    pub fn to_database(url: &str) -> (Relay, String) {
        let (scheme_user, rest) = url.split_once('@').unwrap();
        let (host_port, path) = rest.split_once('/').unwrap();
        let relay = Relay::new(host_port.to_owned());
        let relayed = format!("{scheme_user}@{}/{path}", relay.addr);
        (relay, relayed)
    }

    pub fn new(upstream: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let paused = Arc::new(AtomicBool::new(false));
        let held = paused.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let held = held.clone();
                    std::thread::spawn(move || pump(from, to, &held));
                }
            }
        });
        Relay { addr, paused }
    }
}

/// Copies `from` to `to`, holding each chunk while `paused`.
fn pump(mut from: TcpStream, mut to: TcpStream, paused: &AtomicBool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while paused.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// A fresh database on the MariaDB server of `ALLOT_TEST_MARIADB_URL` (`scripts/mariadb
/// start` prints one), dropped when the test ends; None (and the skip recorded, a
/// failure under CI) without it.
pub struct MariaDatabase {
    server: String,
    name: String,
    /// The database's URL.
    pub url: String,
}

impl MariaDatabase {
    /// Makes the database.
    pub fn create() -> Option<MariaDatabase> {
        let Ok(given) = std::env::var("ALLOT_TEST_MARIADB_URL") else {
            skip(
                "ALLOT_TEST_MARIADB_URL is not set, so its MariaDB part did not run \
                 (scripts/mariadb start prints a server's URL)",
            );
            return None;
        };
        let (scheme, rest) = given.split_once("://").expect("a URL");
        let host = rest.split(['/', '?']).next().unwrap_or(rest);
        let server = format!("{scheme}://{host}/");
        let name = format!("allot_test_{}", uuid::Uuid::new_v4().simple());
        mariadb(&server, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("ALLOT_TEST_MARIADB_URL={given}: {e}"));
        let url = format!("{scheme}://{host}/{name}");
        Some(MariaDatabase { server, name, url })
    }
}

impl Drop for MariaDatabase {
    fn drop(&mut self) {
        let _ = mariadb(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {}", self.name),
        );
    }
}

/// A database on one engine, kept while the test runs.
pub struct Engine {
    /// `sqlite`, `postgres` or `mariadb`.
    pub name: &'static str,
    /// Its URL, for `allot serve --database`.
    pub url: String,
    _kept: Box<dyn std::any::Any>,
}

impl Engine {
    /// `allot serve` on this engine, once it may write: on MariaDB a node writes only
    /// while it holds the writer's lease, which it takes within a tick of its start.
    pub fn serve(&self) -> Server {
        match self.name {
            "mariadb" => start_writing_on_mariadb(&self.url),
            _ => Server::start_url(&self.url),
        }
    }
}

/// `allot serve` on a MariaDB database, once it holds the writer's lease (a node
/// without it writes nothing there; it takes the lease within a tick of its start).
pub fn start_writing_on_mariadb(url: &str) -> Server {
    let server = Server::start_url(url);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while try_metric(&server, "allot_cluster_writer") != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "no writer's lease in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// A fresh database on every engine: an SQLite file in `dir`, and PostgreSQL and
/// MariaDB when their servers are given (each missing one skipped by [`skip`]'s rule).
pub fn engines(dir: &Path) -> Vec<Engine> {
    let mut all = vec![Engine {
        name: "sqlite",
        url: format!("sqlite:{}", dir.join("engine.db").display()),
        _kept: Box::new(()),
    }];
    if let Some(db) = Database::create() {
        all.push(Engine {
            name: "postgres",
            url: db.url.clone(),
            _kept: Box::new(db),
        });
    }
    if let Some(db) = MariaDatabase::create() {
        all.push(Engine {
            name: "mariadb",
            url: db.url.clone(),
            _kept: Box::new(db),
        });
    }
    all
}
