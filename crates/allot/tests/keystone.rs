//! `allot serve --auth keystone` against a real OpenStack Keystone (issue 13), over
//! real HTTP: tokens come from Keystone by password, allot validates them with its
//! own service user, and each check is what a caller of Placement would see.
//!
//! The Keystone is the one `scripts/keystone start` makes (the users, projects and
//! roles are listed there); `ALLOT_TEST_KEYSTONE_URL` (its `/v3` URL) and
//! `ALLOT_TEST_KEYSTONE_PASSWORD` (every user's password) point here, as
//! `eval "$(scripts/keystone env)"` sets them; `scripts/test` does all that. Without
//! them each test is skipped and named in `scripts/test`'s summary, except under CI
//! (`CI=true`), where it fails: CI must run them (`support::skip`).
//!
//! The rules are Placement's secure defaults (allot's default policy): writes need
//! `admin` (or `service`), a project's usages may be read by that project's readers,
//! and only project-scoped tokens are accepted. Keystone's implied roles
//! (admin ⊃ member ⊃ reader) arrive expanded in the token.
//!
//! Timing: the Keystone of `scripts/keystone` issues tokens that live 20 s, so that
//! the expiry check waits that long and no more; every other check asks Keystone for
//! a fresh token right before it, so that a slow machine cannot make a token expire
//! under a check. The checks that depend on time measure it against the token's
//! `expires_at` instead of assuming how fast anything runs.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use allot_server::auth::{now_unix, parse_utc};
use serde_json::json;
use support::{send_raw, skip, Reply, Server};

/// The Keystone to test against, or None when there is none (the test is skipped by
/// [`skip`]'s rule: a failure under CI).
fn keystone() -> Option<Keystone> {
    let (Ok(url), Ok(password)) = (
        std::env::var("ALLOT_TEST_KEYSTONE_URL"),
        std::env::var("ALLOT_TEST_KEYSTONE_PASSWORD"),
    ) else {
        skip(
            "ALLOT_TEST_KEYSTONE_URL and ALLOT_TEST_KEYSTONE_PASSWORD are not set, so it \
             did not run against a real Keystone (scripts/keystone start; \
             eval \"$(scripts/keystone env)\")",
        );
        return None;
    };
    let base = url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/v3").unwrap_or(base).to_owned();
    let addr = base
        .strip_prefix("http://")
        .expect("ALLOT_TEST_KEYSTONE_URL is http://HOST:PORT/v3")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // The same Keystone over TLS, and the CA that signed its certificate.
    let https = match (
        std::env::var("ALLOT_TEST_KEYSTONE_HTTPS_URL"),
        std::env::var("ALLOT_TEST_KEYSTONE_CA"),
    ) {
        (Ok(url), Ok(ca)) => Some((url, ca)),
        _ => None,
    };
    Some(Keystone {
        base,
        addr,
        password,
        https,
    })
}

/// One HTTP/1.1 request on its own connection.
fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    send_raw(addr, method, path, &headers, body)
}

/// The real Keystone.
struct Keystone {
    /// `http://HOST:PORT` (no `/v3`).
    base: String,
    /// `HOST:PORT`.
    addr: String,
    /// Every user's password.
    password: String,
    /// Its `https://HOST:PORT/v3` URL and the CA file that verifies it.
    https: Option<(String, String)>,
}

/// A token Keystone issued.
#[derive(Clone)]
struct Token {
    id: String,
    /// Its expiry, Unix seconds.
    expires_at: i64,
    /// The project it is scoped to (None: system scope).
    project_id: Option<String>,
}

impl Keystone {
    /// A token for `user` (domain Default) scoped to `project`, or to the system when
    /// `project` is None, by password.
    fn token(&self, user: &str, project: Option<&str>) -> Token {
        let scope = match project {
            Some(p) => json!({"project": {"name": p, "domain": {"id": "default"}}}),
            None => json!({"system": {"all": true}}),
        };
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "domain": {"id": "default"}, "password": self.password}}},
            "scope": scope}});
        let r = send(
            &self.addr,
            "POST",
            "/v3/auth/tokens",
            &[],
            &body.to_string(),
        );
        assert_eq!(r.status, 201, "{user} logs in: {}", r.body);
        let v = r.json();
        Token {
            id: r.headers["x-subject-token"].clone(),
            expires_at: parse_utc(v["token"]["expires_at"].as_str().unwrap())
                .expect("Keystone's expires_at"),
            project_id: v["token"]["project"]["id"].as_str().map(str::to_owned),
        }
    }

    /// Revokes a token in Keystone (its owner may: `DELETE /v3/auth/tokens`).
    fn revoke(&self, token: &Token) {
        let r = send(
            &self.addr,
            "DELETE",
            "/v3/auth/tokens",
            &[("x-auth-token", &token.id), ("x-subject-token", &token.id)],
            "",
        );
        assert_eq!(r.status, 204, "revoke: {}", r.body);
    }
}

/// `allot serve --auth keystone` with allot's service user of `scripts/keystone`
/// (`placement` in project `service`, the defaults) and a validation cache of
/// `cache_ttl` seconds.
fn allot(dir: &Path, ks: &Keystone, cache_ttl: u64) -> Server {
    let db = format!("sqlite:{}", dir.join("allot.db").display());
    Server::start_args(
        &db,
        &[
            "--bind",
            "127.0.0.1:0",
            "--auth",
            "keystone",
            "--keystone-url",
            &format!("{}/v3", ks.base),
            "--token-cache-ttl",
            &cache_ttl.to_string(),
        ],
        &[("ALLOT_KEYSTONE_PASSWORD", &ks.password)],
    )
}

/// A request to allot with a token (and more headers) at the latest microversion.
fn call(server: &Server, method: &str, path: &str, token: &str, more: &[(&str, &str)]) -> Reply {
    let mut headers = vec![
        ("x-auth-token", token),
        ("openstack-api-version", "placement latest"),
    ];
    headers.extend_from_slice(more);
    let body = if method == "POST" {
        format!("{{\"name\": \"rp-{}\"}}", unique_name())
    } else {
        String::new()
    };
    send(&server.addr, method, path, &headers, &body)
}

/// A name no other provider of the test has.
fn unique_name() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn get(server: &Server, path: &str, token: &Token) -> u16 {
    call(server, "GET", path, &token.id, &[]).status
}

fn create(server: &Server, token: &Token) -> u16 {
    call(server, "POST", "/resource_providers", &token.id, &[]).status
}

/// A 401 in Placement's envelope with the challenge naming this Keystone.
fn assert_401(r: &Reply, ks: &Keystone, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.body);
    assert_eq!(r.json()["errors"][0]["status"], 401, "{what}: {}", r.body);
    let challenge = r.headers.get("www-authenticate").map(String::as_str);
    assert_eq!(
        challenge,
        Some(format!("Keystone uri=\"{}\"", ks.base).as_str()),
        "{what}"
    );
}

#[test]
fn real_keystone_roles_projects_and_scopes() {
    let Some(ks) = keystone() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = allot(dir.path(), &ks, 300);

    // Discovery stays open; everything else needs a token Keystone knows.
    assert_eq!(send(&server.addr, "GET", "/", &[], "").status, 200);
    let r = send(&server.addr, "GET", "/resource_providers", &[], "");
    assert_401(&r, &ks, "no token");
    let r = call(
        &server,
        "GET",
        "/resource_providers",
        "gAAAAABnot-a-token",
        &[],
    );
    assert_401(&r, &ks, "a token Keystone never issued");

    // Admin of p1: reads and writes.
    let alice = ks.token("alice", Some("p1"));
    let p1 = alice.project_id.clone().unwrap();
    assert_eq!(create(&server, &alice), 200, "admin writes");
    assert_eq!(get(&server, "/resource_providers", &alice), 200);

    // Member of p1: may read p1's usages (member implies reader), writes nothing.
    let bob = ks.token("bob", Some("p1"));
    let r = call(&server, "POST", "/resource_providers", &bob.id, &[]);
    assert_eq!(r.status, 403, "member writes: {}", r.body);
    assert_eq!(r.json()["errors"][0]["status"], 403, "{}", r.body);
    assert_eq!(get(&server, "/resource_providers", &bob), 403);
    assert_eq!(get(&server, &format!("/usages?project_id={p1}"), &bob), 200);
    // What a caller says about itself is not believed: the token says who it is.
    let r = call(
        &server,
        "POST",
        "/resource_providers",
        &bob.id,
        &[("x-roles", "admin"), ("x-service-roles", "service")],
    );
    assert_eq!(r.status, 403, "x-roles ignored: {}", r.body);

    // Reader of p1: p1's usages only.
    let carol = ks.token("carol", Some("p1"));
    assert_eq!(
        get(&server, &format!("/usages?project_id={p1}"), &carol),
        200
    );
    assert_eq!(create(&server, &carol), 403, "reader writes");
    let dave = ks.token("dave", Some("p2"));
    let p2 = dave.project_id.clone().unwrap();
    assert_eq!(
        get(&server, &format!("/usages?project_id={p2}"), &carol),
        403,
        "another project's usages"
    );
    let r = call(
        &server,
        "GET",
        &format!("/usages?project_id={p2}"),
        &carol.id,
        &[("x-project-id", &p2)],
    );
    assert_eq!(r.status, 403, "x-project-id ignored: {}", r.body);
    // And the other way round.
    assert_eq!(
        get(&server, &format!("/usages?project_id={p2}"), &dave),
        200
    );
    assert_eq!(
        get(&server, &format!("/usages?project_id={p1}"), &dave),
        403
    );

    // allot's own service user has the `service` role: Placement lets services write.
    let placement = ks.token("placement", Some("service"));
    assert_eq!(create(&server, &placement), 200, "service writes");

    // The same admin user, system-scoped: Placement's rules take project scope only.
    let system = ks.token("admin", None);
    assert_eq!(system.project_id, None);
    assert_eq!(
        get(&server, "/resource_providers", &system),
        403,
        "system scope"
    );
    let admin = ks.token("admin", Some("admin"));
    assert_eq!(get(&server, "/resource_providers", &admin), 200);

    // Exactly the two writes that were allowed happened.
    let r = call(&server, "GET", "/resource_providers", &admin.id, &[]);
    let listed = r.json()["resource_providers"].as_array().unwrap().len();
    assert_eq!(listed, 2, "{}", r.body);
}

#[test]
fn real_keystone_expiry_revocation_and_service_tokens() {
    let Some(ks) = keystone() else { return };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // The default cache time; a short one, so that the wait for a revocation to show
    // is short too; and the cache off, as an operator who wants revocations to count
    // at once runs it.
    let cached = allot(dirs[0].path(), &ks, 300);
    let short = allot(dirs[1].path(), &ks, 1);
    let uncached = allot(dirs[2].path(), &ks, 0);
    let path = "/resource_providers";

    // A token to see expire: valid now (checked while it surely is), and cached.
    let soon = ks.token("alice", Some("p1"));
    if now_unix() + 2 < soon.expires_at {
        assert_eq!(get(&cached, path, &soon), 200);
        assert_eq!(get(&uncached, path, &soon), 200);
    } else {
        eprintln!("the machine is slow: the token to expire was not checked while valid");
    }

    // Revoked before allot ever saw it: refused at once, cache or not.
    let gone = ks.token("alice", Some("p1"));
    ks.revoke(&gone);
    for server in [&cached, &short, &uncached] {
        let r = call(server, "GET", path, &gone.id, &[]);
        assert_401(&r, &ks, "revoked before use");
    }

    // Revoked after use, no cache: refused at once.
    let used = ks.token("alice", Some("p1"));
    assert_eq!(get(&uncached, path, &used), 200);
    ks.revoke(&used);
    let r = call(&uncached, "GET", path, &used.id, &[]);
    assert_401(&r, &ks, "revoked after use, no cache");

    // Revoked after use, cached: it may work until its cache entry's time is up
    // (documented, as with keystonemiddleware), and not after: refused within the
    // cache time, before the token would have expired anyway.
    let used = ks.token("alice", Some("p1"));
    assert_eq!(get(&short, path, &used), 200);
    ks.revoke(&used);
    let revoked_at = Instant::now();
    let refused_after = loop {
        let r = call(&short, "GET", path, &used.id, &[]);
        if r.status == 401 {
            assert_401(&r, &ks, "revoked after use, cached");
            break revoked_at.elapsed();
        }
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            revoked_at.elapsed() < Duration::from_secs(15),
            "a revoked token still works 15 s after revocation with a 1 s cache"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    if now_unix() < used.expires_at {
        eprintln!("revoked token refused {refused_after:?} after revocation");
    } else {
        eprintln!("the machine is slow: the revoked token expired before it was refused");
    }

    // The expired token: once past its expiry, refused, also where its validation
    // was cached for longer than the token lived (never past the token's expiry).
    let wait = soon.expires_at + 2 - now_unix();
    assert!(wait < 120, "Keystone's tokens live too long for this test");
    if wait > 0 {
        std::thread::sleep(Duration::from_secs(wait as u64));
    }
    let r = call(&cached, "GET", path, &soon.id, &[]);
    assert_401(&r, &ks, "expired, was cached");
    let r = call(&uncached, "GET", path, &soon.id, &[]);
    assert_401(&r, &ks, "expired");

    // X-Service-Token, as keystonemiddleware honours it: a service's valid token
    // with the `service` role lets an expired user token through (a long operation
    // started for the user), but not a revoked one; a service token without the
    // role stretches nothing; an invalid service token is a 401 even with a good
    // user token.
    let with = |server: &Server, user: &Token, svc: &str| {
        call(server, "GET", path, &user.id, &[("x-service-token", svc)])
    };
    for server in [&cached, &uncached] {
        // Fresh tokens for each round: they live 20 s.
        let service = ks.token("placement", Some("service"));
        let r = with(server, &soon, &service.id);
        assert_eq!(
            r.status, 200,
            "expired user token, service token: {}",
            r.body
        );
        let carol = ks.token("carol", Some("p1"));
        assert_401(
            &with(server, &soon, &carol.id),
            &ks,
            "expired user token, a non-service token",
        );
        assert_401(
            &with(server, &gone, &service.id),
            &ks,
            "revoked user token, service token",
        );
        let alice = ks.token("alice", Some("p1"));
        assert_401(
            &with(server, &alice, "gAAAAABforged"),
            &ks,
            "good user token, forged service token",
        );
        assert_eq!(with(server, &alice, &service.id).status, 200);
    }
}

/// Keystone over TLS (issue 27): with its CA, tokens are validated as over plain HTTP;
/// with another CA the start is refused with the reason; `--keystone-insecure` takes
/// any certificate, with a warning.
#[test]
fn real_keystone_over_tls() {
    let Some(ks) = keystone() else { return };
    let Some((url, ca)) = ks.https.clone() else {
        skip(
            "ALLOT_TEST_KEYSTONE_HTTPS_URL and ALLOT_TEST_KEYSTONE_CA are not set, so \
             Keystone over TLS was not tried (scripts/keystone env sets them)",
        );
        return;
    };
    assert!(url.starts_with("https://"), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let password = [("ALLOT_KEYSTONE_PASSWORD", ks.password.as_str())];
    let over_tls = |more: &[&str]| -> Vec<String> {
        let mut args = vec!["--auth", "keystone", "--keystone-url", url.as_str()];
        args.extend_from_slice(more);
        args.into_iter().map(str::to_owned).collect()
    };
    let start = |args: &[String]| {
        let db = format!(
            "sqlite:{}",
            dir.path().join(format!("{}.db", unique_name())).display()
        );
        let mut all = vec!["--bind", "127.0.0.1:0"];
        all.extend(args.iter().map(String::as_str));
        Server::start_args(&db, &all, &password)
    };

    let server = start(&over_tls(&["--keystone-cafile", &ca]));
    let alice = ks.token("alice", Some("p1"));
    assert_eq!(get(&server, "/resource_providers", &alice), 200);
    assert_eq!(create(&server, &alice), 200);
    assert_eq!(
        call(&server, "GET", "/resource_providers", "bogus", &[]).status,
        401
    );
    let carol = ks.token("carol", Some("p1"));
    assert_eq!(create(&server, &carol), 403, "a reader may not write");

    // Another CA: the start stops and says why.
    let other = allot_tls::testing::TestCa::new(dir.path(), "other");
    let other = other.cert().to_str().unwrap().to_owned();
    let args = over_tls(&["--keystone-cafile", &other]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = support::refused(&args, &password);
    assert!(
        e.contains("TLS to Keystone") && e.contains("UnknownIssuer"),
        "{e}"
    );

    // --keystone-insecure: any certificate, and a warning at start.
    let server = start(&over_tls(&[
        "--keystone-cafile",
        &other,
        "--keystone-insecure",
    ]));
    assert_eq!(
        get(
            &server,
            "/resource_providers",
            &ks.token("alice", Some("p1"))
        ),
        200
    );
    assert!(
        server
            .startup_log()
            .iter()
            .any(|l| l.contains("certificate is not checked")),
        "{:?}",
        server.startup_log()
    );
}

/// A form post to allot's web UI (issue 26), with the cookie if any, and the
/// headers a browser sends with a form of the UI's own page.
fn ui_post(server: &Server, path: &str, cookie: &str, form: &str) -> Reply {
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         content-type: application/x-www-form-urlencoded\r\ncookie: {cookie}\r\n\
         origin: http://{addr}\r\nsec-fetch-site: same-origin\r\n\
         content-length: {}\r\n\r\n{form}",
        form.len(),
        addr = server.addr,
    );
    support::exchange(&server.addr, request.as_bytes())
}

/// A page of the web UI with a session cookie.
fn ui_get(server: &Server, path: &str, cookie: &str) -> Reply {
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncookie: {cookie}\r\n\r\n",
        server.addr
    );
    support::exchange(&server.addr, request.as_bytes())
}

/// The web UI's login in keystone mode: a user's name, password and project become a
/// Keystone token (issued by Keystone, validated by allot like any other), and the
/// pages follow the API's policy for that token; a wrong password opens no session,
/// and a pasted token works as well.
#[test]
fn real_keystone_web_ui_login() {
    let Some(ks) = keystone() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = allot(dir.path(), &ks, 300);
    let form = |user: &str, password: &str, project: &str| {
        format!(
            "username={user}&password={}&user_domain=Default&project={project}\
             &project_domain=Default",
            form_urlencoded::byte_serialize(password.as_bytes()).collect::<String>()
        )
    };
    let r = ui_get(&server, "/ui/login", "");
    assert!(r.body.contains("name=\"password\""), "{}", r.body);
    let r = ui_post(&server, "/ui/login", "", &form("alice", "wrong", "p1"));
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.header("set-cookie").is_none());

    let session = |user: &str| {
        let r = ui_post(&server, "/ui/login", "", &form(user, &ks.password, "p1"));
        assert_eq!(r.status, 303, "{user}: {}", r.body);
        let set = r.header("set-cookie").unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        set.split(';').next().unwrap().to_owned()
    };
    // alice is an admin of p1: the overview; carol, a reader: refused it as the API
    // refuses her the providers, and shown the headroom the API shows her.
    let alice = session("alice");
    assert_eq!(ui_get(&server, "/ui", &alice).status, 200);
    let carol = session("carol");
    let r = ui_get(&server, "/ui", &carol);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        get(
            &server,
            "/resource_providers",
            &ks.token("carol", Some("p1"))
        ),
        403
    );
    assert_eq!(
        ui_get(&server, "/ui/headroom?resources=VCPU:1", &carol).status,
        200
    );
    // A Keystone token pasted in instead.
    let token = ks.token("alice", Some("p1"));
    let r = ui_post(&server, "/ui/login", "", &format!("token={}", token.id));
    assert_eq!(r.status, 303, "{}", r.body);
}
