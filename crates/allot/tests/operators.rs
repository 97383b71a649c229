//! The questions operators ask (issue 47), over real HTTP against the release binary,
//! on every engine the run has: who holds what (`GET /consumers`), the audit of
//! leaked allocations and its removal (`allot audit`), pending totals by root, the
//! provider list with usages and pages, the query forms, and a search cut short.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use support::{call, engines, exchange, json, metric, Client, Server};
use uuid::Uuid;

/// A root named `name` with `inventories` (`{CLASS: total}`), under `parent` if any.
fn provider(client: &Client, name: &str, parent: Option<Uuid>, inventories: Value) -> Uuid {
    let uuid = Uuid::new_v4();
    let mut body = json!({"name": name, "uuid": uuid});
    if let Some(parent) = parent {
        body["parent_provider_uuid"] = json!(parent);
    }
    call(client, "POST", "/resource_providers", Some(body), 200);
    let inventories: serde_json::Map<String, Value> = inventories
        .as_object()
        .unwrap()
        .iter()
        .map(|(class, total)| (class.clone(), json!({"total": total})))
        .collect();
    let body = json!({"resource_provider_generation": 0, "inventories": inventories});
    let path = format!("/resource_providers/{uuid}/inventories");
    call(client, "PUT", &path, Some(body), 200);
    uuid
}

/// Consumers, each holding `vcpu` VCPU on the root `place(i)` names, in one
/// `POST /allocations` per 500, typed INSTANCE, in project `p{i % 5}`.
fn allocate(client: &Client, consumers: &[Uuid], vcpu: u64, place: impl Fn(usize) -> Uuid) {
    for (n, chunk) in consumers.chunks(500).enumerate() {
        let body: serde_json::Map<String, Value> = chunk
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let i = n * 500 + k;
                let held = json!({"allocations": {place(i).to_string(): {"resources": {"VCPU": vcpu}}},
                    "project_id": format!("p{}", i % 5), "user_id": "u",
                    "consumer_generation": null, "consumer_type": "INSTANCE"});
                (c.to_string(), held)
            })
            .collect();
        call(
            client,
            "POST",
            "/allocations",
            Some(Value::Object(body)),
            204,
        );
    }
}

/// `allot ARGS` against `server`, with standard input `stdin`: its exit status,
/// standard output and standard error.
fn allot(server: &Server, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .args(["--url", &format!("http://{}", server.addr)])
        .output()
        .expect("run allot");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Now as RFC 3339, a second on (so that everything made before it is older).
fn after_now() -> String {
    std::thread::sleep(Duration::from_millis(1100));
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    allot_server::auth::format_utc(secs as i64)
}

#[test]
fn the_audit_finds_exactly_the_leaked_and_removes_only_them_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    for engine in engines(dir.path()) {
        let server = engine.serve();
        audit_on(&server, dir.path(), engine.name);
    }
}

/// 10,000 consumers on 20 roots, 100 of them leaked (not in the list of live ones).
fn audit_on(server: &Server, dir: &std::path::Path, engine: &str) {
    let client = server.client();
    let roots: Vec<Uuid> = (0..20)
        .map(|i| {
            provider(
                &client,
                &format!("{engine}-cn{i}"),
                None,
                json!({"VCPU": 100_000}),
            )
        })
        .collect();
    let consumers: Vec<Uuid> = (0..10_000).map(|_| Uuid::new_v4()).collect();
    allocate(&client, &consumers, 1, |i| roots[i % 20]);
    let leaked: BTreeSet<Uuid> = consumers.iter().step_by(100).copied().collect();
    let live: Vec<String> = consumers
        .iter()
        .filter(|c| !leaked.contains(c))
        .map(Uuid::to_string)
        .collect();
    let list = dir.join(format!("{engine}-live.txt"));
    std::fs::write(&list, live.join("\n")).unwrap();
    let listed_at = after_now();
    // The report: exactly the 100, and nothing removed.
    let (ok, out, err) = allot(server, &["audit", list.to_str().unwrap(), "-f", "json"]);
    assert!(ok, "{engine}: {err}");
    let report = json(&out);
    let reported: BTreeSet<Uuid> = report["leaked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["consumer_uuid"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(reported, leaked, "{engine}");
    assert_eq!(report["consumers_holding"], 10_000, "{engine}");
    assert!(report["removal"].is_null());
    // A list that misses half the live workloads: refused whole by the share guard.
    let half = dir.join(format!("{engine}-half.txt"));
    std::fs::write(&half, live[..live.len() / 2].join("\n")).unwrap();
    let args = [
        "audit",
        half.to_str().unwrap(),
        "--delete",
        "--listed-at",
        &listed_at,
    ];
    let (ok, _, err) = allot(server, &args);
    assert!(
        !ok && err.contains("more than the share allowed"),
        "{engine}: {err}"
    );
    let all = call(&client, "GET", "/consumers?holding=allocations", None, 200);
    assert_eq!(
        all["consumers"].as_array().unwrap().len(),
        10_000,
        "{engine}"
    );
    // Through the API: the report, one consumer changed, then the removal.
    let body = json!({"consumers": live});
    let report = call(&client, "POST", "/audit", Some(body), 200);
    assert_eq!(report["leaked"].as_array().unwrap().len(), 100);
    let changed = *leaked.iter().next().unwrap();
    let body = json!({"allocations": {roots[0].to_string(): {"resources": {"VCPU": 2}}},
        "project_id": "p0", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"});
    call(
        &client,
        "PUT",
        &format!("/allocations/{changed}"),
        Some(body),
        204,
    );
    let asked: Vec<Value> = report["leaked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| json!({"consumer_uuid": h["consumer_uuid"], "consumer_generation": h["consumer_generation"]}))
        .collect();
    let body = json!({"consumers": asked, "listed_at": listed_at});
    let removed = call(&client, "POST", "/audit/delete", Some(body), 200);
    let gone: BTreeSet<Uuid> = removed["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().parse().unwrap())
        .collect();
    let expected: BTreeSet<Uuid> = leaked.iter().filter(|c| **c != changed).copied().collect();
    assert_eq!(gone, expected, "{engine}");
    assert_eq!(
        removed["left"],
        json!([{"consumer_uuid": changed, "reason": "changed"}]),
        "{engine}"
    );
    let after = call(&client, "GET", "/consumers?limit=20000", None, 200);
    let held: BTreeSet<Uuid> = after["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["consumer_uuid"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(held.len(), 10_000 - 99, "{engine}");
    assert!(
        held.is_disjoint(&gone) && held.contains(&changed),
        "{engine}"
    );
    // The CLI's own removal, with a list taken after the change: the last one goes.
    let listed_at = after_now();
    let args = [
        "audit",
        list.to_str().unwrap(),
        "--delete",
        "--listed-at",
        &listed_at,
    ];
    let (ok, out, err) = allot(server, &args);
    assert!(
        ok && out.contains("removed 1 consumers"),
        "{engine}: {out}{err}"
    );
    let used: u64 = roots
        .iter()
        .map(|r| {
            let usages = call(
                &client,
                "GET",
                &format!("/resource_providers/{r}/usages"),
                None,
                200,
            );
            usages["usages"]["VCPU"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(
        used, 9_900,
        "{engine}: usages are the live workloads' alone"
    );
}

#[test]
fn consumers_are_listed_filtered_and_paged_and_pending_summed_by_root_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    for engine in engines(dir.path()) {
        let server = engine.serve();
        let client = server.client();
        let root = provider(&client, "cn1", None, json!({"MEMORY_MB": 4096}));
        let numa = provider(&client, "cn1-numa0", Some(root), json!({"VCPU": 16}));
        let other = provider(&client, "cn2", None, json!({"VCPU": 16}));
        let held: Vec<Uuid> = (0..6).map(|_| Uuid::new_v4()).collect();
        allocate(&client, &held, 1, |i| if i < 3 { numa } else { other });
        let claimed = Uuid::new_v4();
        let claim = json!({"consumer_uuid": claimed, "project_id": "r", "user_id": "v",
            "allocations": {numa.to_string(): {"resources": {"VCPU": 2}}}});
        call(&client, "POST", "/claims", Some(claim), 201);
        let claim = json!({"consumer_uuid": held[4], "project_id": "p4", "user_id": "u",
            "allocations": {other.to_string(): {"resources": {"VCPU": 3}}}});
        call(&client, "POST", "/claims", Some(claim), 201);
        let listed = |query: &str| -> Vec<Uuid> {
            let body = call(&client, "GET", &format!("/consumers{query}"), None, 200);
            body["consumers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["consumer_uuid"].as_str().unwrap().parse().unwrap())
                .collect()
        };
        let mut everyone: Vec<Uuid> = held.iter().copied().chain([claimed]).collect();
        everyone.sort();
        assert_eq!(listed(""), everyone, "{}", engine.name);
        let first = listed("?limit=4");
        assert_eq!(first, everyone[..4]);
        assert_eq!(
            listed(&format!("?limit=4&marker={}", first[3])),
            everyone[4..]
        );
        let mut in_tree: Vec<Uuid> = held[..3].iter().copied().chain([claimed]).collect();
        in_tree.sort();
        assert_eq!(listed(&format!("?in_tree={root}")), in_tree);
        assert_eq!(listed("?holding=pending").len(), 2);
        assert_eq!(listed("?holding=both"), [held[4]]);
        assert_eq!(listed("?project_id=r"), [claimed]);
        assert_eq!(
            listed(&format!("?resource_provider={other}&user_id=u")).len(),
            3
        );
        let entry = call(&client, "GET", "/consumers?holding=both", None, 200);
        assert_eq!(
            entry["consumers"][0],
            json!({"allocations": {"VCPU": 1}, "consumer_generation": 1,
                   "consumer_type": "INSTANCE", "consumer_uuid": held[4],
                   "created_at": entry["consumers"][0]["created_at"], "pending": {"VCPU": 3},
                   "project_id": "p4", "resource_providers": [other], "user_id": "u",
                   "updated_at": entry["consumers"][0]["updated_at"]})
        );
        for bad in ["?holding=all", "?limit=0", "?marker=x", "?color=red"] {
            call(&client, "GET", &format!("/consumers{bad}"), None, 400);
        }
        let unknown = format!("?resource_provider={}", Uuid::new_v4());
        call(&client, "GET", &format!("/consumers{unknown}"), None, 400);
        // Pending by root: the claim on the NUMA node counts under its host.
        let by_root = call(&client, "GET", "/pending?group_by=root", None, 200);
        assert_eq!(
            by_root,
            json!({"roots": {root.to_string(): {"VCPU": 2}, other.to_string(): {"VCPU": 3}}})
        );
        let of_r = call(
            &client,
            "GET",
            "/pending?group_by=root&project_id=r",
            None,
            200,
        );
        assert_eq!(of_r, json!({"roots": {root.to_string(): {"VCPU": 2}}}));
        call(&client, "GET", "/pending?group_by=host", None, 400);
        call(&client, "GET", "/pending", None, 400);
        // The provider list with usages and pending, paged.
        let page = call(
            &client,
            "GET",
            "/resource_providers?with_usages=true&limit=2",
            None,
            200,
        );
        let page = page["resource_providers"].as_array().unwrap().clone();
        assert_eq!(page.len(), 2);
        assert_eq!(page[0]["uuid"], json!(root));
        assert_eq!(page[0]["usages"], json!({"MEMORY_MB": 0}));
        assert_eq!(page[0]["pending"], json!({}));
        assert_eq!(page[1]["usages"], json!({"VCPU": 3}));
        assert_eq!(page[1]["pending"], json!({"VCPU": 2}));
        let rest = format!("/resource_providers?with_usages=true&marker={numa}");
        let rest = call(&client, "GET", &rest, None, 200);
        assert_eq!(rest["resource_providers"][0]["uuid"], json!(other));
        assert_eq!(rest["resource_providers"][0]["usages"], json!({"VCPU": 3}));
        let plain = call(&client, "GET", "/resource_providers", None, 200);
        assert!(plain["resource_providers"][0].get("usages").is_none());
        let gone = format!("/resource_providers?marker={}", Uuid::new_v4());
        call(&client, "GET", &gone, None, 400);
    }
}

/// An answer with its request id (which every request has of its own) blanked.
fn same(answer: (u16, String)) -> (u16, String) {
    let (status, body) = answer;
    let body = match body.find("\"request_id\":\"req-") {
        Some(at) => {
            let from = at + "\"request_id\":\"req-".len();
            format!("{}{}", &body[..from], &body[from + 36..])
        }
        None => body,
    };
    (status, body)
}

/// The query forms answer byte for byte what the GET forms answer (errors with
/// their request ids blanked).
#[test]
fn the_query_forms_answer_as_the_get_forms_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    for engine in engines(dir.path()) {
        let server = engine.serve();
        let client = server.client();
        let agg = Uuid::new_v4();
        for i in 0..4 {
            let root = provider(
                &client,
                &format!("cn{i}"),
                None,
                json!({"VCPU": 8, "MEMORY_MB": 2048}),
            );
            provider(
                &client,
                &format!("cn{i}-gpu"),
                Some(root),
                json!({"VGPU": 2}),
            );
            let body = json!({"resource_provider_generation": 1, "aggregates": [agg]});
            call(
                &client,
                "PUT",
                &format!("/resource_providers/{root}/aggregates"),
                Some(body),
                200,
            );
        }
        let in_agg = format!("resources=VCPU:1&member_of=in:{agg}&member_of={agg}&sort=spread");
        let of_agg = format!("member_of={agg}&resources=VGPU:1");
        let candidates = [
            ("resources=VCPU:1", json!({"resources": "VCPU:1"})),
            (
                "resources1=VGPU:1&resources=VCPU:2,MEMORY_MB:512&group_policy=none&limit=3",
                json!({"resources1": "VGPU:1", "resources": "VCPU:2,MEMORY_MB:512", "group_policy": "none", "limit": 3}),
            ),
            (
                in_agg.as_str(),
                json!({"resources": "VCPU:1", "member_of": [format!("in:{agg}"), agg.to_string()], "sort": "spread"}),
            ),
            ("resources=VCPU:100", json!({"resources": "VCPU:100"})),
            ("resources=NOPE:1", json!({"resources": "NOPE:1"})),
        ];
        for (query, body) in &candidates {
            let get = same(client.call("GET", &format!("/allocation_candidates?{query}"), None));
            let post = same(client.call(
                "POST",
                "/allocation_candidates/query",
                Some(&body.to_string()),
            ));
            assert_eq!(get, post, "{}: {query}", engine.name);
        }
        let providers = [
            ("", json!({})),
            (
                of_agg.as_str(),
                json!({"member_of": agg, "resources": "VGPU:1"}),
            ),
            (
                "name=cn1&with_usages=true",
                json!({"name": "cn1", "with_usages": true}),
            ),
            ("required=CUSTOM_NOPE", json!({"required": "CUSTOM_NOPE"})),
            ("limit=2", json!({"limit": 2})),
        ];
        for (query, body) in &providers {
            let get = same(client.call("GET", &format!("/resource_providers?{query}"), None));
            let post =
                same(client.call("POST", "/resource_providers/query", Some(&body.to_string())));
            assert_eq!(get, post, "{}: {query}", engine.name);
        }
        for bad in ["[]", r#"{"resources": {"VCPU": 1}}"#, "{"] {
            let (status, text) = client.call("POST", "/allocation_candidates/query", Some(bad));
            assert_eq!(status, 400, "{bad}: {text}");
        }
        // `POST /resource_providers` is still Placement's create.
        call(
            &client,
            "POST",
            "/resource_providers",
            Some(json!({"name": "new"})),
            200,
        );
    }
}

#[test]
fn a_search_cut_short_says_how_far_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("a.db").display());
    let server = Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0", "--max-allocation-candidates", "3"],
        &[],
    );
    let client = server.client();
    for i in 0..10 {
        provider(&client, &format!("cn{i}"), None, json!({"VCPU": 4}));
    }
    let ask = |query: &str| {
        let request = format!(
            "GET /allocation_candidates?{query} HTTP/1.1\r\nhost: x\r\nx-auth-token: admin\r\n\
             openstack-api-version: placement 1.39\r\nconnection: close\r\n\r\n"
        );
        exchange(&server.addr, request.as_bytes())
    };
    let cut = ask("resources=VCPU:1");
    assert_eq!(cut.status, 200);
    assert_eq!(
        cut.json()["allocation_requests"].as_array().unwrap().len(),
        3
    );
    assert_eq!(cut.header("x-allot-roots-explored"), Some("3/10"));
    let whole = ask("resources=VCPU:1&limit=2");
    assert_eq!(whole.header("x-allot-roots-explored"), None);
    assert_eq!(metric(&server, "allot_candidates_cut_short_total"), 1.0);
}
