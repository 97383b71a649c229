//! `/metrics` (issue 23) through the real binary over real HTTP: who may scrape it on
//! the API's port (the `allot:metrics` rule) and on `--metrics-bind`'s listener (no
//! token, nothing else served there), the exposition's content type, and that its
//! series say what the API says: openstack-exporter's Placement series equal each
//! provider's inventories and usages, allot's own counts follow the writes and
//! claims, and refused claims are counted by code. The exposition is read here with
//! a small reader of the text format's sample lines; tests/metrics/check.py reads it
//! with `prometheus_client`'s own parser (scripts/test).

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use support::{json, Server};

/// A raw HTTP exchange on its own connection: status, lower-cased headers, body.
fn get(addr: &str, path: &str, headers: &str) -> (u16, HashMap<String, String>, String) {
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n{headers}connection: close\r\n\r\n");
    let reply = support::exchange(addr, request.as_bytes());
    (reply.status, reply.headers, reply.body)
}

/// The samples of an exposition: `name{labels}` (labels as written) to value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

const CN1: &str = "0a000001-0000-4000-8000-000000000000";
const CN2: &str = "0a000002-0000-4000-8000-000000000000";

#[test]
fn metrics_are_guarded_typed_and_say_what_the_api_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let server = Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0", "--metrics-bind", &metrics_addr],
        &[],
    );
    let client = server.client();
    for (uuid, name, vcpus) in [(CN1, "cn1", 16), (CN2, "cn2 \"quoted\"", 8)] {
        let (status, body) = client.call(
            "POST",
            "/resource_providers",
            Some(&format!(
                r#"{{"name": "{}", "uuid": "{uuid}"}}"#,
                name.replace('"', "\\\"")
            )),
        );
        assert_eq!(status, 200, "{body}");
        let (status, body) = client.call(
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            Some(&format!(
                r#"{{"resource_provider_generation": 0, "inventories": {{
                    "VCPU": {{"total": {vcpus}, "allocation_ratio": 4.0, "reserved": 1}},
                    "MEMORY_MB": {{"total": 4096}}}}}}"#
            )),
        );
        assert_eq!(status, 200, "{body}");
    }
    // One allocation, one refused for want of room, one pending claim.
    let alloc = |consumer: &str, vcpus: u64| {
        client.call(
            "PUT",
            &format!("/allocations/{consumer}"),
            Some(&format!(
                r#"{{"allocations": {{"{CN1}": {{"resources": {{"VCPU": {vcpus}, "MEMORY_MB": 512}}}}}},
                    "project_id": "p", "user_id": "u", "consumer_generation": null,
                    "consumer_type": "INSTANCE"}}"#
            )),
        )
    };
    assert_eq!(alloc("c0000001-0000-4000-8000-000000000000", 3).0, 204);
    assert_eq!(alloc("c0000002-0000-4000-8000-000000000000", 1000).0, 409);
    let (status, body) = client.call(
        "POST",
        "/claims",
        Some(&format!(
            r#"{{"consumer_uuid": "c0000003-0000-4000-8000-000000000000",
                "project_id": "p", "user_id": "u", "expires_in": 600,
                "allocations": {{"{CN2}": {{"resources": {{"VCPU": 2}}}}}}}}"#
        )),
    );
    assert_eq!(status, 201, "{body}");
    // A server group holding the allocation's consumer and another one on the same
    // root: as Nova might hold it, broken (issue 44).
    let (status, body) = client.call(
        "PUT",
        "/server_groups/5e7e0000-0000-4000-8000-000000000001",
        Some(
            r#"{"name": "g", "project_id": "p", "policy": "anti-affinity",
                "members": ["c0000001-0000-4000-8000-000000000000"]}"#,
        ),
    );
    assert_eq!(status, 200, "{body}");

    // Who may scrape on the API's port.
    let addr = &server.addr;
    assert_eq!(get(addr, "/metrics", "").0, 401, "no token");
    let member = "x-auth-token: someone:p\r\nx-roles: member,reader\r\n";
    assert_eq!(get(addr, "/metrics", member).0, 403, "a member");
    let scraper = "x-auth-token: scraper:p\r\nx-roles: metrics\r\n";
    let (status, headers, text) = get(addr, "/metrics", scraper);
    assert_eq!(status, 200, "the metrics role: {text}");
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let (status, _, admin_text) = get(addr, "/metrics", "x-auth-token: admin\r\n");
    assert_eq!(status, 200, "the admin");
    // The metrics role reads nothing else.
    assert_eq!(get(addr, "/resource_providers", scraper).0, 403);

    // The separate listener: no token, and /metrics only.
    let (status, headers, open_text) = get(&metrics_addr, "/metrics", "");
    assert_eq!(status, 200, "{open_text}");
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(get(&metrics_addr, "/resource_providers", "").0, 404);

    for text in [&text, &admin_text, &open_text] {
        let s = samples(text);
        assert_eq!(s["openstack_placement_up"], 1.0);
        // Two providers, under the default bound: the series per provider are there.
        assert_eq!(s["allot_metrics_provider_series"], 1.0, "{text}");
        // total, reserved, capacity and usage by class, summed from what the API says.
        let mut sums: HashMap<&str, [f64; 4]> = HashMap::new();
        // openstack-exporter's series equal what the API says of each provider.
        for (uuid, name) in [(CN1, "cn1"), (CN2, "cn2 \\\"quoted\\\"")] {
            let (_, inventories) = client.call(
                "GET",
                &format!("/resource_providers/{uuid}/inventories"),
                None,
            );
            let (_, usages) =
                client.call("GET", &format!("/resource_providers/{uuid}/usages"), None);
            let (inventories, usages) = (json(&inventories), json(&usages));
            for class in ["VCPU", "MEMORY_MB"] {
                let labels = format!("{{hostname=\"{name}\",resourcetype=\"{class}\"}}");
                let inv = &inventories["inventories"][class];
                let series = |metric: &str| {
                    let key = format!("openstack_placement_resource_{metric}{labels}");
                    *s.get(&key)
                        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
                };
                assert_eq!(series("total"), inv["total"].as_f64().unwrap());
                assert_eq!(series("reserved"), inv["reserved"].as_f64().unwrap());
                assert_eq!(
                    series("allocation_ratio"),
                    inv["allocation_ratio"].as_f64().unwrap()
                );
                assert_eq!(series("usage"), usages["usages"][class].as_f64().unwrap());
                let (total, reserved, ratio) = (
                    inv["total"].as_f64().unwrap(),
                    inv["reserved"].as_f64().unwrap(),
                    inv["allocation_ratio"].as_f64().unwrap(),
                );
                let sum = sums.entry(class).or_default();
                sum[0] += total;
                sum[1] += reserved;
                sum[2] += ((total - reserved) * ratio).trunc();
                sum[3] += usages["usages"][class].as_f64().unwrap();
            }
        }
        assert_eq!(
            sums["VCPU"],
            [24.0, 2.0, 88.0, 3.0],
            "the API's own figures"
        );
        for (class, sum) in &sums {
            for (metric, value) in ["total", "reserved", "capacity", "usage"].iter().zip(sum) {
                let key = format!("allot_resource_{metric}{{resourcetype=\"{class}\"}}");
                assert_eq!(s.get(&key), Some(value), "{key} in:\n{text}");
            }
        }
        assert_eq!(s["allot_providers"], 2.0);
        assert_eq!(s["allot_consumers"], 1.0);
        assert_eq!(s["allot_claims_pending"], 1.0);
        assert_eq!(s["allot_server_groups{policy=\"anti-affinity\"}"], 1.0);
        assert_eq!(
            s["allot_server_group_violations{policy=\"anti-affinity\"}"],
            0.0
        );
        assert_eq!(s["allot_drains_open"], 0.0);
        assert_eq!(s["allot_pending{resourcetype=\"VCPU\"}"], 2.0);
        assert_eq!(s["allot_view_staleness_seconds"], 0.0);
        // A fresh database: the view came from its tables.
        assert!(
            s["allot_view_load_seconds{source=\"tables\"}"] >= 0.0,
            "{text}"
        );
        assert!(!s.contains_key("allot_view_load_seconds{source=\"saved\"}"));
        // Accepted and refused claims, by kind, status and code.
        let claims = |labels: &str| s.get(&format!("allot_claims_total{{{labels}}}")).copied();
        assert_eq!(
            claims(r#"kind="allocations",outcome="accepted",status="204",code="""#),
            Some(1.0)
        );
        assert_eq!(
            claims(
                r#"kind="allocations",outcome="refused",status="409",code="placement.undefined_code""#
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            claims(r#"kind="pending",outcome="accepted",status="201",code="""#),
            Some(1.0)
        );
        // Requests by route template, never the raw path.
        assert!(
            s.keys().any(|k| k.starts_with(
                "allot_http_requests_total{method=\"PUT\",route=\"/resource_providers/{uuid}/inventories\",status=\"200\"}"
            )),
            "{text}"
        );
        assert!(s["allot_commit_batch_size_count"] >= 5.0, "{text}");
        assert!(s["allot_commit_duration_seconds_count"] >= 5.0);
        // Where the writer's time went: every part counted, and the store's part is
        // the commits' own sum.
        for phase in ["plan", "store", "answer", "free"] {
            let key = format!("allot_writer_busy_seconds_total{{phase=\"{phase}\"}}");
            assert!(s.get(&key).is_some_and(|v| *v > 0.0), "{key}: {text}");
        }
        // And by kind of write: each write above counted as its kind, refused ones
        // too, with the time it held the writer.
        for (kind, writes) in [
            ("provider", 2.0),
            ("inventory", 2.0),
            ("allocation", 2.0),
            ("claim", 1.0),
            ("pick", 0.0),
        ] {
            let count = format!("allot_writer_writes_total{{kind=\"{kind}\"}}");
            assert_eq!(s.get(&count), Some(&writes), "{count}: {text}");
            let seconds = format!("allot_writer_write_seconds_total{{kind=\"{kind}\"}}");
            let spent = s.get(&seconds).copied();
            assert!(
                spent.is_some_and(|v| (v > 0.0) == (writes > 0.0)),
                "{seconds}: {text}"
            );
        }
        let store = s["allot_writer_busy_seconds_total{phase=\"store\"}"];
        let commits = s["allot_commit_duration_seconds_sum"];
        assert!((store - commits).abs() <= 1e-6 * commits.max(1.0), "{text}");
        assert_eq!(s["allot_store_errors_total"], 0.0);
        // SQLite's checkpoints: the WAL holds the commits above; the checkpointer's
        // passes (100 ms apart) and the writer's own (none this small) are there.
        assert!(s["allot_sqlite_wal_bytes"] > 4096.0, "{text}");
        assert!(
            s.contains_key("allot_sqlite_checkpoint_passes_total"),
            "{text}"
        );
        assert_eq!(s["allot_sqlite_writer_checkpoint_seconds_count"], 0.0);
        // The view is saved while running every 300 s by default: none yet.
        assert_eq!(
            s["allot_view_saves_total{outcome=\"saved\"}"], 0.0,
            "{text}"
        );
        assert_eq!(
            s["allot_view_saves_total{outcome=\"failed\"}"], 0.0,
            "{text}"
        );
        assert_eq!(s["allot_view_save_duration_seconds_count"], 0.0, "{text}");
        assert!(s["process_resident_memory_bytes"] > 1e6);
        assert!(s["process_open_fds"] >= 3.0);
        // CPU time counts in clock ticks (10 ms): a young server may show none yet.
        assert!(s["process_cpu_seconds_total"] >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = s["process_start_time_seconds"];
        assert!(
            started <= now + 1.0 && started > now - 600.0,
            "started {started}, now {now}"
        );
    }

    // Claims that end are no longer counted as pending.
    let (status, _) = client.call(
        "DELETE",
        "/claims?consumer_uuid=c0000003-0000-4000-8000-000000000000",
        None,
    );
    assert_eq!(status, 204);
    let start = Instant::now();
    loop {
        let s = samples(&get(&metrics_addr, "/metrics", "").2);
        if s["allot_claims_pending"] == 0.0 {
            assert!(!s.contains_key("allot_pending{resourcetype=\"VCPU\"}"));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "still pending");
        std::thread::sleep(Duration::from_millis(100));
    }

    // After a clean stop, the next start reads the view the stop saved. Bounded
    // to one provider, the series per provider are left out and the sums stay.
    server.terminate();
    let server = Server::start_args(
        &db,
        &[
            "--bind",
            "127.0.0.1:0",
            "--metrics-bind",
            &metrics_addr,
            "--metrics-providers",
            "1",
        ],
        &[],
    );
    let text = get(&metrics_addr, "/metrics", "").2;
    let s = samples(&text);
    assert_eq!(s["allot_metrics_provider_series"], 0.0, "{text}");
    assert!(
        !text.contains("openstack_placement_resource_total{"),
        "{text}"
    );
    assert_eq!(s["allot_resource_total{resourcetype=\"VCPU\"}"], 24.0);
    assert_eq!(s["allot_resource_usage{resourcetype=\"MEMORY_MB\"}"], 512.0);
    let seconds = s["allot_view_load_seconds{source=\"saved\"}"];
    assert!((0.0..5.0).contains(&seconds), "{seconds}");
    assert!(!s.contains_key("allot_view_load_seconds{source=\"tables\"}"));
    assert_eq!(s["allot_providers"], 2.0);
    server.terminate();
}

/// `allot status` on two nodes, one of them not answering: each node's screen, its
/// JSON, the health check's verdict with the drain file, and exit status 1.
#[test]
fn status_shows_each_node_at_a_glance() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let drain = dir.path().join("drain");
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
    let client = server.client();
    let (status, body) = client.call(
        "POST",
        "/resource_providers",
        Some(&format!(r#"{{"name": "cn1", "uuid": "{CN1}"}}"#)),
    );
    assert_eq!(status, 200, "{body}");
    // Who may ask: as for /metrics.
    assert_eq!(get(&server.addr, "/status", "").0, 401);
    let member = "x-auth-token: someone:p\r\nx-roles: member\r\n";
    assert_eq!(get(&server.addr, "/status", member).0, 403);

    let status = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
            .arg("status")
            .args(args)
            .env_remove("ALLOT_URL")
            .env_remove("ALLOT_TOKEN")
            .output()
            .unwrap()
    };
    let url = format!("http://{}", server.addr);
    let out = status(&["--url", &url]);
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    for line in [
        format!("allot {} at {url}, up ", env!("CARGO_PKG_VERSION")),
        "  health          OK\n".to_owned(),
        "  store           sqlite, schema ".to_owned(),
        ", this node alone\n".to_owned(),
        "  view lag        0.000 s\n".to_owned(),
        "  providers       1\n".to_owned(),
        "  consumers       0\n".to_owned(),
        "  pending claims  0\n".to_owned(),
        "  claims          0 accepted, 0 refused\n".to_owned(),
    ] {
        assert!(screen.contains(&line), "{line:?} in:\n{screen}");
    }

    // The drain file fails the health check; a node that is not there is named.
    std::fs::write(&drain, "").unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = status(&["--url", &format!("{url},{gone}"), "-f", "json"]);
    assert!(
        !out.status.success(),
        "a node not answering fails the command"
    );
    let nodes = json(&String::from_utf8_lossy(&out.stdout));
    let first = &nodes[0]["status"];
    assert_eq!(nodes[0]["url"], url.as_str());
    assert_eq!(first["health"]["healthy"], false);
    assert_eq!(first["health"]["reasons"][0], "DISABLED BY FILE");
    assert_eq!(first["store"]["engine"], "sqlite");
    assert_eq!(first["store"]["shared"], false);
    assert_eq!(first["counts"]["providers"], 1);
    // The requests so far: at least the POST and the refused GETs above.
    assert!(first["requests"]["total"].as_u64().unwrap() >= 3, "{first}");
    assert!(
        first["requests"]["p99_ms"].as_f64().unwrap() > 0.0,
        "{first}"
    );
    assert_eq!(nodes[1]["url"], gone.as_str());
    assert!(nodes[1]["error"].is_string(), "{nodes}");
    let table = status(&["--url", &format!("{url},{gone}")]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("  health          FAILING: DISABLED BY FILE\n"),
        "{table}"
    );
    assert!(
        table.contains(&format!("{gone}\n  not answering: ")),
        "{table}"
    );
}
