//! allot in Placement's place (issue 22), as the real binary: `allot db sync` (what
//! deployment tools run as `placement-manage db sync`) twice on a fresh database, and
//! `allot serve --placement-conf` reading a kolla-style placement.conf that puts it in
//! keystone mode against the test Keystone (`scripts/keystone`, as in keystone.rs;
//! skipped by the one skip rule without it), with the keys it does not use in its log.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use support::{send_raw, skip, stdout_of};

/// `allot ARGS` run to completion.
fn allot(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .env_remove("ALLOT_DATABASE")
        .env_remove("ALLOT_PLACEMENT_CONF")
        .env_remove("ALLOT_DATABASE_NAME")
        .output()
        .expect("run allot")
}

#[test]
fn db_sync_is_migrate_and_may_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("allot.db").display());
    for round in ["creates", "finds it up to date"] {
        let out = stdout_of(allot(&["db", "sync", "--database", &db]));
        assert_eq!(out, "the database schema is up to date\n", "{round}");
    }
    // The database it made is one `allot serve` opens.
    let server = support::Server::start_url(&db);
    assert_eq!(server.call("GET", "/resource_providers", None).0, 200);
    // Pointed at Placement's own PostgreSQL database by placement.conf, it says how to
    // import it, and makes nothing.
    let conf = dir.path().join("placement.conf");
    let sync = |connection: &str| {
        let text = format!("[placement_database]\nconnection = {connection}\n");
        std::fs::write(&conf, text).unwrap();
        let out = allot(&["db", "sync", "--placement-conf", conf.to_str().unwrap()]);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = sync("postgresql+psycopg2://placement:secret@db/placement");
    assert!(
        stderr.contains("allot import --from-placement") && !stderr.contains("secret"),
        "{stderr}"
    );
    // At a MariaDB one, it migrates allot's database beside it, on the same server
    // (here one that is not there).
    let stderr = sync("mysql+pymysql://placement:secret@127.0.0.1:1/placement");
    assert!(
        stderr.contains("mysql+pymysql://placement:***@127.0.0.1:1/allot")
            && !stderr.contains("secret"),
        "{stderr}"
    );
}

/// `allot db vacuum` rewrites a database of SQLite's 4 KiB pages in allot's 1 KiB
/// ones, keeping what it holds; it is refused while a server has the file, and for
/// a PostgreSQL URL.
#[test]
fn db_vacuum_rewrites_an_old_database_in_small_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("allot.db");
    let db = format!("sqlite:{}", path.display());
    {
        let server = support::Server::start_url(&db);
        let body = json!({"name": "cn1"}).to_string();
        let (status, answer) = server.call("POST", "/resource_providers", Some(&body));
        assert_eq!(status, 200, "{answer}");
        let out = allot(&["db", "vacuum", "--database", &db]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("database is locked"),
            "{stderr}"
        );
    }
    // As an older allot made it.
    let page_size = || -> i64 {
        rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(page_size(), 1024);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM; \
             PRAGMA journal_mode = WAL;",
        )
        .unwrap();
    assert_eq!(page_size(), 4096);
    // A server on it says how to rewrite it.
    let server = support::Server::start_args(&db, &["--bind", "127.0.0.1:0", "--log", "info"], &[]);
    let hint = "rewrites it in allot's 1024-byte pages";
    assert!(
        server.startup_log().iter().any(|l| l.contains(hint)),
        "{:#?}",
        server.startup_log()
    );
    drop(server);
    let out = stdout_of(allot(&["db", "vacuum", "--database", &db]));
    assert!(out.contains("pages of 4096 bytes, now 1024"), "{out}");
    assert_eq!(page_size(), 1024);
    let server = support::Server::start_args(&db, &["--bind", "127.0.0.1:0", "--log", "info"], &[]);
    assert!(!server.startup_log().iter().any(|l| l.contains(hint)));
    let (status, body) = server.call("GET", "/resource_providers?name=cn1", None);
    assert_eq!(status, 200);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["resource_providers"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    drop(server);
    let out = allot(&[
        "db",
        "vacuum",
        "--database",
        "postgresql://u:secret@db/allot",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("SQLite") && !stderr.contains("secret"),
        "{stderr}"
    );
    // No path at all: said so, as `allot serve` says it.
    let out = allot(&["db", "vacuum", "--database", "sqlite:"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("sqlite: needs a file path"),
        "{stderr}"
    );
}

#[test]
fn serve_placement_conf_runs_keystone_mode_and_lists_unused_keys() {
    let (Ok(url), Ok(password)) = (
        std::env::var("ALLOT_TEST_KEYSTONE_URL"),
        std::env::var("ALLOT_TEST_KEYSTONE_PASSWORD"),
    ) else {
        skip(
            "ALLOT_TEST_KEYSTONE_URL and ALLOT_TEST_KEYSTONE_PASSWORD are not set, so \
             --placement-conf's keystone mode did not run against a real Keystone \
             (scripts/keystone start; eval \"$(scripts/keystone env)\")",
        );
        return;
    };
    let base = url.trim_end_matches('/').trim_end_matches("/v3").to_owned();
    let keystone_addr = base.strip_prefix("http://").unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    // A policy file beside it, named relatively as kolla does: readers may not list
    // providers here, which the built-in rules would allow.
    std::fs::write(
        dir.path().join("policy.yaml"),
        "\"placement:resource_providers:list\": \"role:admin\"\n",
    )
    .unwrap();
    let conf = dir.path().join("placement.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ndebug = False\nlog_dir = /var/log/kolla/placement\n\
             transport_url = rabbit://openstack:RABBIT@192.0.2.10:5672//\n\
             [api]\nauth_strategy = keystone\n\
             [placement_database]\nconnection = mysql+pymysql://placement:DB@192.0.2.20/placement\n\
             [keystone_authtoken]\nservice_type = placement\nwww_authenticate_uri = {base}\n\
             auth_url = {base}\nauth_type = password\nproject_domain_id = default\n\
             user_domain_id = default\nproject_name = service\nusername = placement\n\
             password = {password}\nregion_name = RegionOne\n\
             memcached_servers = 192.0.2.40:11211\n\
             [oslo_policy]\npolicy_file = policy.yaml\n\
             [placement]\nrandomize_allocation_candidates = true\n"
        ),
    )
    .unwrap();
    let db = format!("sqlite:{}", dir.path().join("allot.db").display());
    // Its own database named, a bind from allot's flags, and nothing else: the
    // authentication mode, Keystone and the policy come from placement.conf.
    let mut child = Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(["serve", "--bind", "127.0.0.1:0", "--database", &db])
        .args(["--placement-conf", conf.to_str().unwrap()])
        .env("ALLOT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .expect("allot exited before listening")
            .unwrap();
        if let Some(addr) = line.strip_prefix("allot: listening on http://") {
            break addr.to_owned();
        }
        log.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    let _stop = KillOnDrop(child);
    let warning = log
        .iter()
        .find(|l| l.contains("allot does not use these keys"))
        .unwrap_or_else(|| panic!("no warning of unused keys in {log:?}"));
    for key in [
        "[DEFAULT] log_dir",
        "[DEFAULT] transport_url",
        "[placement_database] connection",
        "[keystone_authtoken] service_type",
        "[keystone_authtoken] region_name",
        "[keystone_authtoken] memcached_servers",
    ] {
        assert!(warning.contains(key), "{key}: {warning}");
    }
    assert!(!warning.contains("auth_strategy"), "{warning}");
    assert_eq!(
        log.iter().filter(|l| l.contains("these keys")).count(),
        1,
        "listed once: {log:?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.contains(&password) || l.contains("RABBIT")),
        "no secret is logged: {log:?}"
    );

    let token = |user: &str| {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "domain": {"id": "default"}, "password": password}}},
            "scope": {"project": {"name": "p1", "domain": {"id": "default"}}}}});
        let r = send_raw(
            &keystone_addr,
            "POST",
            "/v3/auth/tokens",
            &[],
            &body.to_string(),
        );
        assert_eq!(r.status, 201, "{user} logs in: {}", r.body);
        r.headers["x-subject-token"].clone()
    };
    let get = |token: Option<&str>| {
        let mut headers: Vec<(&str, &[u8])> = vec![("openstack-api-version", b"placement 1.39")];
        if let Some(t) = token {
            headers.push(("x-auth-token", t.as_bytes()));
        }
        send_raw(&addr, "GET", "/resource_providers", &headers, "")
    };
    // Keystone mode: no token is a 401 pointing at that Keystone; a real token works.
    let r = get(None);
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.header("www-authenticate"),
        Some(format!("Keystone uri=\"{base}\"").as_str())
    );
    assert_eq!(get(Some(&token("alice"))).status, 200, "an admin of p1");
    // noauth2's tokens mean nothing here.
    assert_eq!(get(Some("admin")).status, 401);
    // The policy file beside placement.conf is in force: a reader may not list.
    assert_eq!(
        get(Some(&token("carol"))).status,
        403,
        "the policy file's rule"
    );
}

/// Kills the server when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same world, made through the API: a compute node with a NUMA child, a custom
/// class and trait, an aggregate, and a consumer on both providers.
fn world(server: &support::Server) {
    const CN: &str = "11111111-1111-4111-8111-111111111111";
    const NUMA: &str = "22222222-2222-4222-8222-222222222222";
    const AGG: &str = "33333333-3333-4333-8333-333333333333";
    const VM: &str = "44444444-4444-4444-8444-444444444444";
    let ok = |method: &str, path: &str, body: serde_json::Value| {
        let (status, text) = server.call(method, path, Some(&body.to_string()));
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {text}"
        );
    };
    let put = |path: &str| {
        let (status, text) = server.call("PUT", path, None);
        assert!((200..300).contains(&status), "PUT {path}: {status} {text}");
    };
    put("/resource_classes/CUSTOM_GPU");
    put("/traits/CUSTOM_FAST");
    ok(
        "POST",
        "/resource_providers",
        json!({"uuid": CN, "name": "cn"}),
    );
    ok(
        "POST",
        "/resource_providers",
        json!({"uuid": NUMA, "name": "cn-numa0", "parent_provider_uuid": CN}),
    );
    ok(
        "PUT",
        &format!("/resource_providers/{CN}/inventories"),
        json!({"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": 16, "allocation_ratio": 4.0},
            "DISK_GB": {"total": 500, "reserved": 10}}}),
    );
    ok(
        "PUT",
        &format!("/resource_providers/{NUMA}/inventories"),
        json!({"resource_provider_generation": 0, "inventories": {
            "MEMORY_MB": {"total": 65536, "step_size": 256},
            "CUSTOM_GPU": {"total": 2}}}),
    );
    ok(
        "PUT",
        &format!("/resource_providers/{CN}/traits"),
        json!({"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]}),
    );
    ok(
        "PUT",
        &format!("/resource_providers/{CN}/aggregates"),
        json!({"resource_provider_generation": 2, "aggregates": [AGG]}),
    );
    ok(
        "PUT",
        &format!("/allocations/{VM}"),
        json!({"allocations": {
            CN: {"resources": {"VCPU": 2, "DISK_GB": 20}},
            NUMA: {"resources": {"MEMORY_MB": 2048, "CUSTOM_GPU": 1}}},
            "project_id": "p1", "user_id": "u1", "consumer_generation": null,
            "consumer_type": "INSTANCE"}),
    );
}

#[test]
fn verify_two_allots_identical_then_one_inventory_changed() {
    let dir = tempfile::tempdir().unwrap();
    let a = support::Server::start(&dir.path().join("a.db"));
    let b = support::Server::start(&dir.path().join("b.db"));
    world(&a);
    world(&b);
    let verify = || {
        let out = Command::new(env!("CARGO_BIN_EXE_allot"))
            .args(["verify", "--placement", &format!("http://{}", a.addr)])
            .args(["--allot", &format!("http://{}", b.addr)])
            .env_remove("ALLOT_TOKEN")
            .env_remove("ALLOT_PLACEMENT_TOKEN")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stdout, stderr)
    };
    let (ok, stdout, stderr) = verify();
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.starts_with("identical: all "), "{stdout}");
    // 3 lists, 2 providers x 6, 1 consumer, 1 project, 2 + 4 candidate queries (each
    // provider's classes, then each class), each at the 4 default microversions.
    assert!(stdout.contains("all 92 GETs"), "{stdout}");

    let cn = "/resource_providers/11111111-1111-4111-8111-111111111111/inventories";
    let (status, _) = b.call(
        "PUT",
        &format!("{cn}/DISK_GB"),
        Some(r#"{"resource_provider_generation": 4, "total": 600, "reserved": 10}"#),
    );
    assert_eq!(status, 200);
    let (ok, stdout, stderr) = verify();
    assert!(!ok, "a difference fails: {stdout}");
    assert!(
        stdout.contains(&format!("DIFFERENT: GET {cn} at 1.39")),
        "{stdout}"
    );
    assert!(
        stdout.contains("/inventories/DISK_GB/total: 500 (placement) vs 600 (allot)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("/resource_provider_generation: 4 (placement) vs 5 (allot)"),
        "{stdout}"
    );
    assert!(stderr.contains("undocumented differences"), "{stderr}");
}
