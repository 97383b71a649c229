//! Authentication over real HTTP against the real binary (issue 13): the loopback
//! rule of `noauth2`, static tokens made by `allot token` (with SIGHUP reloads),
//! Keystone mode against a stand-in of Keystone's v3 token API in this file, and
//! hostile headers, which get a 401 or 400 in the envelope and change nothing.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::{send_raw, token_cmd, Reply, Server};

/// Runs a command that must exit by itself (a server that should have refused to
/// start is killed after a while, and the test fails, rather than hang).
fn must_exit(mut cmd: Command) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("{cmd:?} did not exit: it should have refused to start");
}

fn allot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_allot"))
}

/// Starts `allot serve ARGS` on a fresh database in `dir`; waits until it listens.
fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    let db = format!("sqlite:{}", dir.join("allot.db").display());
    Server::start_args(&db, args, env)
}

/// One request with raw header bytes (so that they may be anything), at the latest
/// microversion.
fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &[u8])], body: &str) -> Reply {
    let mut all: Vec<(&str, &[u8])> = vec![("openstack-api-version", b"placement latest")];
    all.extend_from_slice(headers);
    send_raw(addr, method, path, &all, body)
}

fn get(addr: &str, path: &str, token: &str) -> Reply {
    send(addr, "GET", path, &[("x-auth-token", token.as_bytes())], "")
}

fn create_provider(addr: &str, token: &str, name: &str) -> Reply {
    let body = format!("{{\"name\": \"{name}\"}}");
    send(
        addr,
        "POST",
        "/resource_providers",
        &[("x-auth-token", token.as_bytes())],
        &body,
    )
}

/// How many providers there are (asked as whoever `token` is, who must be admin).
fn provider_count(addr: &str, token: &str) -> usize {
    let r = get(addr, "/resource_providers", token);
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["resource_providers"].as_array().unwrap().len()
}

/// A 401 in the envelope with the challenge.
fn assert_401(r: &Reply, challenge: &str) {
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.envelope().0, 401);
    let h = r
        .header("www-authenticate")
        .expect("a 401 carries a challenge");
    assert!(h.starts_with("Keystone uri=\""), "{h}");
    assert!(h.contains(challenge), "{h}");
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn noauth2_is_refused_off_loopback_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let mut cmd = allot();
    cmd.args(["serve", "--bind", "0.0.0.0:0", "--database", &db])
        .env("ALLOT_LOG", "warn");
    let out = must_exit(cmd);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needed in [
        "refusing to listen on 0.0.0.0:0",
        "noauth2",
        "--insecure-noauth",
        "--auth tokens",
    ] {
        assert!(stderr.contains(needed), "{needed}: {stderr}");
    }
    assert!(!dir.path().join("a.db").exists(), "nothing was created");

    let server = start(
        dir.path(),
        &["--bind", "0.0.0.0:0", "--insecure-noauth"],
        &[],
    );
    assert_eq!(
        get(&server.addr, "/resource_providers", "admin").status,
        200
    );
}

/// What is sent, the headers, and the status it must get.
type HostileCase<'a> = (&'a str, Vec<(&'a str, &'a [u8])>, u16);

#[test]
fn noauth2_on_loopback_and_hostile_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--bind", "127.0.0.1:0"], &[]);
    let a = &server.addr;
    // Discovery stays open; everything else needs a token.
    let r = send(a, "GET", "/", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_401(&send(a, "GET", "/resource_providers", &[], ""), "noauth2");
    assert_eq!(create_provider(a, "admin", "rp0").status, 200);

    let long = "a".repeat(9 * 1024);
    let hostile: Vec<HostileCase> = vec![
        ("non-UTF-8 token", vec![("x-auth-token", b"adm\xffin")], 401),
        ("Latin-1 token", vec![("x-auth-token", b"caf\xe9")], 401),
        (
            "oversized token",
            vec![("x-auth-token", long.as_bytes())],
            401,
        ),
        ("empty token", vec![("x-auth-token", b"")], 401),
        (
            "non-UTF-8 roles",
            vec![("x-auth-token", b"admin"), ("x-roles", b"\xc3\x28admin")],
            400,
        ),
        (
            "oversized roles",
            vec![("x-auth-token", b"admin"), ("x-roles", long.as_bytes())],
            400,
        ),
        (
            "non-UTF-8 project",
            vec![("x-auth-token", b"admin"), ("x-project-id", b"\xfe")],
            400,
        ),
        (
            "non-UTF-8 scope",
            vec![
                ("x-auth-token", b"admin"),
                ("openstack-system-scope", b"\x80all"),
            ],
            400,
        ),
    ];
    for (what, headers, status) in &hostile {
        for method in ["GET", "POST", "DELETE"] {
            let body = if method == "POST" {
                "{\"name\": \"evil\"}"
            } else {
                ""
            };
            let r = send(a, method, "/resource_providers", headers, body);
            assert_eq!(r.status, *status, "{what} {method}: {}", r.body);
            assert_eq!(r.envelope().0, u64::from(*status), "{what}: {}", r.body);
        }
    }
    // A header hyper itself cannot read is its 400, never a 500.
    let r = send(
        a,
        "GET",
        "/resource_providers",
        &[("x-auth-token", b"ad\x00min")],
        "",
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.envelope().0, 400, "{}", r.body);
    // Nothing changed.
    assert_eq!(provider_count(a, "admin"), 1);
}

/// What hyper answers by itself, before any handler, to a head it cannot read.
fn hyper_refusal(addr: &str, head: &[u8], status: u16) {
    let r = support::exchange(addr, head);
    let what = String::from_utf8_lossy(&head[..head.len().min(60)]).into_owned();
    assert_eq!(r.status, status, "{what:?}: {}", r.body);
    assert_eq!(r.envelope().0, u64::from(status), "{what:?}: {}", r.body);
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{what:?}"
    );
    assert_eq!(r.header("connection"), Some("close"), "{what:?}");
    let id = r.json()["errors"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("req-"), "{id}");
    assert_eq!(r.header("openstack-request-id"), Some(id.as_str()));
}

#[test]
fn heads_hyper_refuses_are_answered_in_the_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--bind", "127.0.0.1:0"], &[]);
    let a = &server.addr;
    for head in [
        &b"GET /resource_providers HTTP/1.1\r\nHost: x\r\nX-Foo: a\x01b\r\n\r\n"[..],
        b"GET /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ad\x00min\r\n\r\n",
        b"GET /resource_providers HTTP/1.1\r\nHost: x\r\nBad Name: a\r\n\r\n",
        b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    ] {
        hyper_refusal(a, head, 400);
    }
    // More headers than hyper reads (100), and a URI longer than it takes.
    let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..120 {
        many.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    hyper_refusal(a, &many, 431);
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    hyper_refusal(a, long.as_bytes(), 414);
    // A good request on a kept-alive connection, then a bad one: the first is
    // answered as ever, the second in the envelope.
    let mut s = TcpStream::connect(a).unwrap();
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nX-Foo: \x7f\r\n\r\n",
    )
    .unwrap();
    let mut raw = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    let second = text.find("HTTP/1.1 400").expect("the second answer");
    assert!(text[second..].contains("\"errors\""), "{text}");
}

fn hup(server: &Server) {
    server.hup();
}

/// Waits until `check` holds (a reload is asynchronous).
fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never: {what}");
}

#[test]
fn static_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etc/tokens.json");
    let admin = token_cmd(
        &file,
        &[
            "add",
            "--user",
            "ops",
            "--project",
            "p1",
            "--role",
            "admin,reader",
        ],
    );
    let admin = admin.trim().to_owned();
    assert!(admin.starts_with("allot-") && admin.len() == 70, "{admin}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&admin), "the file holds no token");
    let reader = token_cmd(
        &file,
        &["add", "--user", "r", "--project", "p1", "--role", "reader"],
    );
    let reader = reader.trim().to_owned();
    let system = token_cmd(
        &file,
        &[
            "add",
            "--user",
            "s",
            "--system-scope",
            "all",
            "--role",
            "admin",
        ],
    );
    let system = system.trim().to_owned();
    let brief = token_cmd(
        &file,
        &[
            "add",
            "--user",
            "b",
            "--project",
            "p1",
            "--role",
            "admin",
            "--expires",
            "2s",
        ],
    );
    let brief = brief.trim().to_owned();
    let list = token_cmd(&file, &["list", "-f", "json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&list).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(
        !list.contains("allot-") && !list.contains("sha256"),
        "{list}"
    );
    let reader_id = rows[1]["id"].as_str().unwrap().to_owned();

    let server = start(
        dir.path(),
        &["--bind", "0.0.0.0:0", "--auth", "tokens"],
        &[("ALLOT_TOKEN_FILE", file.to_str().unwrap())],
    );
    let a = &server.addr;
    let realm = "allot static tokens";
    assert_eq!(create_provider(a, &admin, "rp1").status, 200);
    // Who is who: the admin may, the reader may read its project's usages only, the
    // system-scoped token is refused by Placement's project-only rules.
    assert_eq!(create_provider(a, &reader, "rp2").status, 403);
    assert_eq!(get(a, "/usages?project_id=p1", &reader).status, 200);
    assert_eq!(get(a, "/usages?project_id=p2", &reader).status, 403);
    assert_eq!(get(a, "/resource_providers", &system).status, 403);
    // What the caller says about itself is not believed here.
    let r = send(
        a,
        "POST",
        "/resource_providers",
        &[("x-auth-token", reader.as_bytes()), ("x-roles", b"admin")],
        "{\"name\": \"rp3\"}",
    );
    assert_eq!(r.status, 403);
    // Nor read at all (issue 46): the identity headers noauth2 reads, and refuses
    // with a 400 when they cannot be read, are ignored here whatever they hold, as
    // keystonemiddleware strips them in front of Placement. Neither a 400 nor an
    // identity taken from them.
    let huge = "a".repeat(9 * 1024);
    let ignored: [(&str, &[u8]); 5] = [
        ("x-roles", b"\xc3\x28admin"),
        ("x-roles", huge.as_bytes()),
        ("x-project-id", b"\xfe"),
        ("x-project-id", b"p2"),
        ("openstack-system-scope", b"\x80all"),
    ];
    for (name, value) in ignored {
        let with = |method: &str, path: &str, body: &str| {
            let headers = [("x-auth-token", reader.as_bytes()), (name, value)];
            send(a, method, path, &headers, body)
        };
        let what = format!(
            "{name}: {:?}",
            String::from_utf8_lossy(&value[..value.len().min(9)])
        );
        let r = with("GET", "/usages?project_id=p1", "");
        assert_eq!(r.status, 200, "{what}: {}", r.body);
        assert_eq!(
            with("GET", "/usages?project_id=p2", "").status,
            403,
            "{what}"
        );
        let r = with("POST", "/resource_providers", "{\"name\": \"rp4\"}");
        assert_eq!(r.status, 403, "{what}: {}", r.body);
    }
    assert_401(&get(a, "/resource_providers", "admin"), realm);
    assert_401(&get(a, "/resource_providers", &format!("{admin}x")), realm);
    assert_401(&send(a, "GET", "/resource_providers", &[], ""), realm);
    let long = "allot-".repeat(2000);
    assert_401(&get(a, "/resource_providers", &long), realm);
    let r = send(
        a,
        "GET",
        "/resource_providers",
        &[("x-auth-token", b"allot-\xff\xfe")],
        "",
    );
    assert_401(&r, realm);
    // Expiry.
    eventually("the brief token expires", || {
        get(a, "/resource_providers", &brief).status == 401
    });

    // Revoked, then reloaded on SIGHUP.
    token_cmd(&file, &["revoke", &reader_id]);
    assert_eq!(
        get(a, "/usages?project_id=p1", &reader).status,
        200,
        "until the reload"
    );
    hup(&server);
    eventually("the revoked token is refused", || {
        get(a, "/usages?project_id=p1", &reader).status == 401
    });
    // A file that does not parse keeps the old table.
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, "{\"tokens\": [{\"id\": 1}]}").unwrap();
    hup(&server);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        get(a, "/resource_providers", &admin).status,
        200,
        "old table kept"
    );
    std::fs::write(&file, good).unwrap();
    let fresh = token_cmd(
        &file,
        &["add", "--user", "n", "--project", "p1", "--role", "admin"],
    );
    let fresh = fresh.trim().to_owned();
    hup(&server);
    eventually("the new token is loaded", || {
        get(a, "/resource_providers", &fresh).status == 200
    });
    assert_eq!(provider_count(a, &admin), 1, "nothing but rp1 was made");

    // A token file that does not parse stops the start.
    std::fs::write(dir.path().join("bad.json"), "{\"tokens\": \"all\"}").unwrap();
    let mut cmd = allot();
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--auth",
        "tokens",
        "--token-file",
    ])
    .arg(dir.path().join("bad.json"))
    .arg("--database")
    .arg(format!("sqlite:{}", dir.path().join("b.db").display()));
    let out = must_exit(cmd);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.json"));
}

// ---- Keystone -----------------------------------------------------------------

/// A token the stand-in issued.
#[derive(Clone)]
struct Issued {
    user: String,
    /// None: system-scoped.
    project: Option<String>,
    roles: Vec<String>,
    expires_at: i64,
    revoked: bool,
}

/// A stand-in for Keystone's v3 token API: password authentication for the service
/// user, validation with the service token, 404 for unknown, revoked and (without
/// `allow_expired`) expired tokens, and a switch that makes it answer 500.
struct Keystone {
    url: String,
    tokens: Arc<Mutex<HashMap<String, Issued>>>,
    validations: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
    counter: AtomicUsize,
}

fn iso(secs: i64) -> String {
    allot_server::auth::format_utc(secs).replace('Z', ".000000Z")
}

fn token_body(t: &Issued) -> serde_json::Value {
    let roles: Vec<_> = t
        .roles
        .iter()
        .map(|r| serde_json::json!({"id": format!("id-{r}"), "name": r}))
        .collect();
    let mut body = serde_json::json!({"token": {
        "methods": ["password"], "expires_at": iso(t.expires_at),
        "issued_at": iso(now()), "audit_ids": ["x"],
        "user": {"id": t.user, "name": t.user, "domain": {"id": "default", "name": "Default"}},
        "roles": roles}});
    match &t.project {
        Some(p) => {
            body["token"]["project"] = serde_json::json!({"id": p, "name": p, "domain": {"id": "default", "name": "Default"}})
        }
        None => body["token"]["system"] = serde_json::json!({"all": true}),
    }
    body
}

impl Keystone {
    fn start() -> Keystone {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let ks = Keystone {
            url,
            tokens: Arc::default(),
            validations: Arc::default(),
            failing: Arc::default(),
            counter: AtomicUsize::new(0),
        };
        let (tokens, validations, failing) = (
            ks.tokens.clone(),
            ks.validations.clone(),
            ks.failing.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (tokens, validations, failing) =
                    (tokens.clone(), validations.clone(), failing.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &tokens, &validations, &failing);
                });
            }
        });
        ks
    }

    fn issue(&self, user: &str, project: Option<&str>, roles: &[&str], ttl: i64) -> String {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let token = format!("gAAAAAB-{user}-{n}");
        self.tokens.lock().unwrap().insert(
            token.clone(),
            Issued {
                user: user.into(),
                project: project.map(str::to_owned),
                roles: roles.iter().map(|r| r.to_string()).collect(),
                expires_at: now() + ttl,
                revoked: false,
            },
        );
        token
    }

    fn revoke(&self, token: &str) {
        self.tokens.lock().unwrap().get_mut(token).unwrap().revoked = true;
    }
}

fn serve_one(
    stream: TcpStream,
    tokens: &Mutex<HashMap<String, Issued>>,
    validations: &AtomicUsize,
    failing: &AtomicBool,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let reply = |status: &str, extra: &str, body: &str| {
        let mut s = &stream;
        write!(
            s,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if failing.load(Ordering::SeqCst) {
        return reply(
            "500 Internal Server Error",
            "",
            "{\"error\": {\"code\": 500}}",
        );
    }
    if path != "/v3/auth/tokens" {
        return reply("404 Not Found", "", "{}");
    }
    let not_found = "{\"error\": {\"code\": 404, \"title\": \"Not Found\"}}";
    let unauthorized = "{\"error\": {\"code\": 401, \"title\": \"Unauthorized\"}}";
    match method.as_str() {
        "POST" => {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let user = &v["auth"]["identity"]["password"]["user"];
            if user["name"] != "placement" || user["password"] != "s3cret" {
                return reply("401 Unauthorized", "", unauthorized);
            }
            let n = now();
            let token = format!("svc-{n}-{}", validations.load(Ordering::SeqCst));
            let issued = Issued {
                user: "placement".into(),
                project: Some("service".into()),
                roles: vec!["service".into(), "admin".into()],
                expires_at: n + 3600,
                revoked: false,
            };
            let body = token_body(&issued).to_string();
            tokens.lock().unwrap().insert(token.clone(), issued);
            reply(
                "201 Created",
                &format!("x-subject-token: {token}\r\n"),
                &body,
            )
        }
        "GET" => {
            validations.fetch_add(1, Ordering::SeqCst);
            let tokens = tokens.lock().unwrap();
            let valid = |t: Option<&String>, allow_expired: bool| {
                t.and_then(|t| tokens.get(t))
                    .filter(|i| !i.revoked && (allow_expired || i.expires_at > now()))
                    .cloned()
            };
            if valid(headers.get("x-auth-token"), false).is_none() {
                return reply("401 Unauthorized", "", unauthorized);
            }
            let allow_expired = query.split('&').any(|p| p == "allow_expired=1");
            match valid(headers.get("x-subject-token"), allow_expired) {
                Some(t) => reply("200 OK", "", &token_body(&t).to_string()),
                None => reply("404 Not Found", "", not_found),
            }
        }
        _ => reply("405 Method Not Allowed", "", "{}"),
    }
}

fn keystone_allot(dir: &Path, url: &str, password: &str) -> Server {
    start(
        dir,
        &[
            "--bind",
            "127.0.0.1:0",
            "--auth",
            "keystone",
            "--keystone-url",
            &format!("{url}/v3"),
        ],
        &[("ALLOT_KEYSTONE_PASSWORD", password)],
    )
}

#[test]
fn keystone_tokens() {
    let ks = Keystone::start();
    let dir = tempfile::tempdir().unwrap();
    let server = keystone_allot(dir.path(), &ks.url, "s3cret");
    let a = &server.addr;
    let admin = ks.issue("alice", Some("p1"), &["admin", "member", "reader"], 3600);
    let member = ks.issue("bob", Some("p1"), &["member", "reader"], 3600);
    let reader = ks.issue("carol", Some("p1"), &["reader"], 3600);
    let system = ks.issue("sys", None, &["admin", "reader"], 3600);

    assert_eq!(create_provider(a, &admin, "rp1").status, 200);
    assert_eq!(create_provider(a, &member, "rp2").status, 403);
    assert_eq!(get(a, "/usages?project_id=p1", &reader).status, 200);
    assert_eq!(
        get(a, "/usages?project_id=p2", &reader).status,
        403,
        "wrong project"
    );
    assert_eq!(
        get(a, "/resource_providers", &system).status,
        403,
        "system scope"
    );
    // Headers a caller sets about itself are not believed.
    let r = send(
        a,
        "POST",
        "/resource_providers",
        &[("x-auth-token", member.as_bytes()), ("x-roles", b"admin")],
        "{\"name\": \"rp3\"}",
    );
    assert_eq!(r.status, 403);

    // Unknown, expired and revoked tokens: 401 with Keystone's address.
    assert_401(&get(a, "/resource_providers", "gAAAAAB-nobody"), &ks.url);
    let expired = ks.issue("alice", Some("p1"), &["admin"], -10);
    assert_401(&get(a, "/resource_providers", &expired), &ks.url);
    let revoked = ks.issue("alice", Some("p1"), &["admin"], 3600);
    ks.revoke(&revoked);
    assert_401(&get(a, "/resource_providers", &revoked), &ks.url);
    let long = "g".repeat(20_000);
    let before = ks.validations.load(Ordering::SeqCst);
    assert_401(&get(a, "/resource_providers", &long), &ks.url);
    let r = send(
        a,
        "GET",
        "/resource_providers",
        &[("x-auth-token", b"g\xff")],
        "",
    );
    assert_401(&r, &ks.url);
    assert_eq!(
        ks.validations.load(Ordering::SeqCst),
        before,
        "never sent to Keystone"
    );

    // Validations are cached: the admin's token is not asked about again.
    let before = ks.validations.load(Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(get(a, "/resource_providers", &admin).status, 200);
    }
    assert_eq!(ks.validations.load(Ordering::SeqCst), before);

    // X-Service-Token: a valid service token with the service role lets an expired
    // user token through (allow_expired), an invalid one is a 401, and one without
    // the service role does not stretch the user's token.
    let service = ks.issue("nova", Some("service"), &["service"], 3600);
    let not_service = ks.issue("eve", Some("service"), &["member"], 3600);
    let with = |user: &str, svc: &str| {
        send(
            a,
            "GET",
            "/resource_providers",
            &[
                ("x-auth-token", user.as_bytes()),
                ("x-service-token", svc.as_bytes()),
            ],
            "",
        )
    };
    assert_eq!(with(&expired, &service).status, 200);
    assert_401(&with(&admin, "gAAAAAB-forged"), &ks.url);
    assert_401(&with(&expired, &not_service), &ks.url);
    assert_401(&with(&revoked, &service), &ks.url);

    // Keystone failing: 503 with Retry-After for what is not cached, never a 500.
    ks.failing.store(true, Ordering::SeqCst);
    let new = ks.issue("dave", Some("p1"), &["admin"], 3600);
    let r = get(a, "/resource_providers", &new);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.envelope().0, 503);
    assert!(r.header("retry-after").is_some());
    let r = create_provider(a, &new, "rp9");
    assert_eq!(r.status, 503);
    ks.failing.store(false, Ordering::SeqCst);
    assert_eq!(get(a, "/resource_providers", &new).status, 200);
    assert_eq!(provider_count(a, &admin), 1, "only rp1 was made");
}

#[test]
fn keystone_unreachable_or_refusing_allot() {
    // Nothing listens on this port once the listener is gone.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let server = keystone_allot(dir.path(), &format!("http://127.0.0.1:{port}"), "s3cret");
    let r = get(&server.addr, "/resource_providers", "gAAAAAB-any");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.envelope().0, 503);
    assert!(r.header("retry-after").is_some());
    assert_eq!(
        send(&server.addr, "GET", "/", &[], "").status,
        200,
        "discovery stays open"
    );
    drop(server);

    // Keystone up, but refusing allot's own password: a 503 too, not a 401 blaming
    // the caller.
    let ks = Keystone::start();
    let dir = tempfile::tempdir().unwrap();
    let server = keystone_allot(dir.path(), &ks.url, "wrong");
    let token = ks.issue("alice", Some("p1"), &["admin"], 3600);
    let r = get(&server.addr, "/resource_providers", &token);
    assert_eq!(r.status, 503, "{}", r.body);
}
