//! The server chooses (issue 24), over real HTTP against the release binary:
//! pick-and-claim under 32 concurrent schedulers, a mass start with and without
//! anti-affinity, an affinity group, weighed candidates, and the refusals of bodies
//! that mix the two forms of `POST /claims`.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use support::{json, Client, Server};
use uuid::Uuid;

/// A server with `roots` roots of `vcpus` VCPU each; their uuids, in creation order.
fn cloud(roots: usize, vcpus: u64) -> (tempfile::TempDir, Server, Vec<Uuid>) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    let uuids = (0..roots)
        .map(|i| {
            let uuid = Uuid::new_v4();
            let (status, body) = client.call(
                "POST",
                "/resource_providers",
                Some(&format!(r#"{{"name": "host-{i}", "uuid": "{uuid}"}}"#)),
            );
            assert_eq!(status, 200, "{body}");
            let (status, body) = client.call(
                "PUT",
                &format!("/resource_providers/{uuid}/inventories"),
                Some(&format!(
                    r#"{{"resource_provider_generation": 0, "inventories": {{"VCPU": {{"total": {vcpus}}}}}}}"#
                )),
            );
            assert_eq!(status, 200, "{body}");
            uuid
        })
        .collect();
    (dir, server, uuids)
}

fn post_claims(client: &Client, body: Value) -> (u16, Value) {
    let (status, text) = client.call("POST", "/claims", Some(&body.to_string()));
    (status, json(&text))
}

/// The provider a claim body's allocations name (one provider).
fn provider_of(claim: &Value) -> String {
    let allocations = claim["allocations"].as_object().unwrap();
    assert_eq!(allocations.len(), 1, "{claim}");
    allocations.keys().next().unwrap().clone()
}

fn pick_one(consumer: Uuid) -> Value {
    json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
           "request": "resources=VCPU:1"})
}

#[test]
fn thirty_two_schedulers_fill_five_hosts_exactly_without_a_conflict() {
    let (_dir, server, hosts) = cloud(5, 20);
    let accepted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let client = server.client();
            let accepted = accepted.clone();
            std::thread::spawn(move || loop {
                let (status, body) = post_claims(&client, pick_one(Uuid::new_v4()));
                match status {
                    201 => {
                        assert_eq!(body["state"], "pending", "{body}");
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                    409 => {
                        assert_eq!(
                            body["errors"][0]["code"], "allot.claim.does_not_fit",
                            "only a full cloud refuses: {body}"
                        );
                        return;
                    }
                    other => panic!("{other}: {body}"),
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 100);
    // Every host is full, none over.
    for host in hosts {
        let (status, body) =
            server.call("GET", &format!("/resource_providers/{host}/pending"), None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(json(&body)["pending"]["VCPU"], 20, "{host}: {body}");
    }
}

#[test]
fn a_mass_start_keeps_anti_affinity_whole_or_in_part() {
    let (_dir, server, hosts) = cloud(150, 4);
    let client = server.client();
    let consumers: Vec<Uuid> = (0..200).map(|_| Uuid::new_v4()).collect();
    let body = |partial: bool| {
        json!({"project_id": "p", "user_id": "u", "request": "resources=VCPU:1",
               "consumers": consumers.iter().map(|c| json!({"consumer_uuid": c})).collect::<Vec<_>>(),
               "affinity": "different_roots", "partial": partial})
    };
    let (status, refused) = post_claims(&client, body(false));
    assert_eq!(status, 409, "{refused}");
    let detail = refused["errors"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("Only 150 of 200 instances fit"), "{detail}");
    let (_, listed) = server.call("GET", "/claims", None);
    assert_eq!(json(&listed)["claims"], json!([]), "nothing was claimed");

    let (status, placed) = post_claims(&client, body(true));
    assert_eq!(status, 201, "{placed}");
    let claims = placed["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 150);
    let roots: BTreeSet<String> = claims.iter().map(provider_of).collect();
    assert_eq!(roots.len(), 150, "one per root");
    let all: BTreeSet<String> = hosts.iter().map(Uuid::to_string).collect();
    assert_eq!(roots, all);
    let unplaced: Vec<Uuid> = placed["unplaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(unplaced, consumers[150..], "the later instances wait");
    for (claim, consumer) in claims.iter().zip(&consumers) {
        assert_eq!(claim["consumer_uuid"], consumer.to_string());
    }
}

#[test]
fn an_affinity_group_stays_on_one_root_or_is_refused() {
    let (_dir, server, hosts) = cloud(3, 4);
    let client = server.client();
    // The first host keeps 3 of its 4 VCPU for something else.
    let mut busy = pick_one(Uuid::new_v4());
    busy["request"] = json!(format!("resources=VCPU:3&in_tree={}", hosts[0]));
    assert_eq!(post_claims(&client, busy).0, 201);
    let group = |n: usize| {
        json!({"project_id": "p", "user_id": "u", "request": "resources=VCPU:1",
               "consumers": (0..n).map(|_| json!({"consumer_uuid": Uuid::new_v4()})).collect::<Vec<_>>(),
               "affinity": "same_root", "tag": "group-a"})
    };
    let (status, placed) = post_claims(&client, group(4));
    assert_eq!(status, 201, "{placed}");
    let roots: BTreeSet<String> = placed["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(provider_of)
        .collect();
    assert_eq!(roots, BTreeSet::from([hosts[1].to_string()]));
    assert_eq!(placed["claims"][0]["tag"], "group-a");
    // 5 fit on no host any more.
    let (status, refused) = post_claims(&client, group(5));
    assert_eq!(status, 409, "{refused}");
}

#[test]
fn weighed_candidates_and_picks_follow_the_load() {
    let (_dir, server, hosts) = cloud(3, 8);
    let client = server.client();
    let mut busy = pick_one(Uuid::new_v4());
    busy["request"] = json!(format!("resources=VCPU:6&in_tree={}", hosts[1]));
    assert_eq!(post_claims(&client, busy).0, 201);
    let order = |query: &str| -> Vec<String> {
        let (status, body) = client.call("GET", &format!("/allocation_candidates?{query}"), None);
        assert_eq!(status, 200, "{body}");
        json(&body)["allocation_requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["allocations"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap()
                    .clone()
            })
            .collect()
    };
    let h: Vec<String> = hosts.iter().map(Uuid::to_string).collect();
    assert_eq!(order("resources=VCPU:1"), h);
    assert_eq!(
        order("resources=VCPU:1&sort=pack"),
        [h[1].clone(), h[0].clone(), h[2].clone()]
    );
    assert_eq!(
        order("resources=VCPU:1&sort=spread&limit=1"),
        [h[0].clone()]
    );
    let (status, body) = client.call(
        "GET",
        "/allocation_candidates?resources=VCPU:1&sort=heavy",
        None,
    );
    assert_eq!(status, 400, "{body}");
    // A pick with sort=pack lands on the busy host.
    let mut packed = pick_one(Uuid::new_v4());
    packed["sort"] = json!("pack");
    let (status, claim) = post_claims(&client, packed);
    assert_eq!(status, 201, "{claim}");
    assert_eq!(provider_of(&claim), h[1]);
}

#[test]
fn bodies_that_mix_the_two_forms_are_refused() {
    let (_dir, server, hosts) = cloud(1, 8);
    let client = server.client();
    let consumer = Uuid::new_v4();
    let allocations = json!({hosts[0].to_string(): {"resources": {"VCPU": 1}}});
    for (body, says) in [
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u"}),
            "needs 'allocations' (where) or 'request'",
        ),
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                   "allocations": allocations, "request": "resources=VCPU:1"}),
            "not both",
        ),
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                   "allocations": allocations, "sort": "pack"}),
            "'sort' goes with 'request'",
        ),
        (
            json!({"project_id": "p", "user_id": "u", "request": "resources=VCPU:1"}),
            "not both and not neither",
        ),
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                   "request": "resources=VCPU:1", "affinity": "same_root"}),
            "go with 'consumers'",
        ),
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                   "request": "resources=VCPU:x"}),
            "Invalid request:",
        ),
        (
            json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                   "request": "resources=CUSTOM_NOPE:1"}),
            "No such resource class CUSTOM_NOPE",
        ),
        (
            json!({"project_id": "p", "user_id": "u", "request": "resources=VCPU:1",
                   "consumers": [{"consumer_uuid": consumer}, {"consumer_uuid": consumer}]}),
            "named twice",
        ),
    ] {
        let (status, reply) = post_claims(&client, body.clone());
        assert_eq!(status, 400, "{body}: {reply}");
        let detail = reply["errors"][0]["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{body}: {detail}");
    }
    let (_, listed) = server.call("GET", "/claims", None);
    assert_eq!(json(&listed)["claims"], json!([]), "nothing was claimed");
}

#[test]
fn headroom_counts_what_picks_then_take() {
    let (_dir, server, hosts) = cloud(5, 20);
    let client = server.client();
    // Two racks (an aggregate and a trait each), hosts 0-2 and 3-4.
    for (i, host) in hosts.iter().enumerate() {
        let rack = if i < 3 { 1 } else { 2 };
        let agg = format!("00000000-0000-4000-8000-00000000000{rack}");
        let (_, body) = client.call("GET", &format!("/resource_providers/{host}"), None);
        let generation = json(&body)["generation"].as_u64().unwrap();
        let (status, body) = client.call(
            "PUT",
            &format!("/resource_providers/{host}/aggregates"),
            Some(
                &json!({"aggregates": [agg], "resource_provider_generation": generation})
                    .to_string(),
            ),
        );
        assert_eq!(status, 200, "{body}");
        let (status, body) = client.call("PUT", &format!("/traits/CUSTOM_RACK_{rack}"), None);
        assert!(status == 201 || status == 204, "{body}");
        let (status, body) = client.call(
            "PUT",
            &format!("/resource_providers/{host}/traits"),
            Some(
                &json!({"traits": [format!("CUSTOM_RACK_{rack}")],
                         "resource_provider_generation": generation + 1})
                .to_string(),
            ),
        );
        assert_eq!(status, 200, "{body}");
    }
    let headroom = |query: &str| -> Value {
        let (status, body) = client.call("GET", &format!("/headroom?{query}"), None);
        assert_eq!(status, 200, "{body}");
        json(&body)
    };
    // 3 VCPU an instance: 6 a host.
    assert_eq!(headroom("resources=VCPU:3"), json!({"headroom": 30}));
    let by_root = headroom("resources=VCPU:3&group_by=root");
    for host in &hosts {
        assert_eq!(by_root["groups"][host.to_string()], 6, "{by_root}");
    }
    assert_eq!(
        headroom("resources=VCPU:3&group_by=aggregate")["groups"],
        json!({"00000000-0000-4000-8000-000000000001": 18,
               "00000000-0000-4000-8000-000000000002": 12})
    );
    assert_eq!(
        headroom("resources=VCPU:3&group_by=trait:CUSTOM_RACK_&required=CUSTOM_RACK_2")["groups"],
        json!({"CUSTOM_RACK_2": 12})
    );
    // Exactly that many picks of the shape succeed, and the next is refused.
    for n in 0..30 {
        let mut pick = pick_one(Uuid::new_v4());
        pick["request"] = json!("resources=VCPU:3");
        let (status, body) = post_claims(&client, pick);
        assert_eq!(status, 201, "pick {n}: {body}");
    }
    let mut pick = pick_one(Uuid::new_v4());
    pick["request"] = json!("resources=VCPU:3");
    assert_eq!(post_claims(&client, pick).0, 409);
    assert_eq!(headroom("resources=VCPU:3")["headroom"], 0);
    // Two VCPU are left on each host: 1-VCPU instances still fit 10 times.
    assert_eq!(headroom("resources=VCPU:1")["headroom"], 10);
    // Bad breakdowns and shapes are 400s.
    for bad in [
        "resources=VCPU:1&group_by=rack",
        "resources=CUSTOM_NOPE:1",
        "required=CUSTOM_X",
    ] {
        let (status, body) = client.call("GET", &format!("/headroom?{bad}"), None);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // The command line shows the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
        .args([
            "headroom",
            "resources=VCPU:1",
            "--group-by",
            "trait:CUSTOM_RACK_",
            "-f",
            "json",
        ])
        .env("ALLOT_URL", format!("http://{}", server.addr))
        .output()
        .unwrap();
    let shown = json(&support::stdout_of(out));
    assert_eq!(
        shown,
        json!({"headroom": 10, "groups": {"CUSTOM_RACK_1": 6, "CUSTOM_RACK_2": 4}})
    );
}

#[test]
fn a_mass_start_weighed_otherwise_than_by_spread_is_bounded() {
    let (_dir, server, _) = cloud(2, 8);
    let client = server.client();
    let consumers: Vec<Value> = (0..101)
        .map(|_| json!({"consumer_uuid": Uuid::new_v4()}))
        .collect();
    for body in [
        json!({"project_id": "p", "user_id": "u", "request": "resources=VCPU:1&sort=pack",
               "consumers": consumers, "partial": true}),
        json!({"project_id": "p", "user_id": "u",
               "request": "resources=VCPU:1&sort=spread&prefer=HW_CPU_X86_AVX2",
               "consumers": consumers, "partial": true}),
    ] {
        let (status, reply) = post_claims(&client, body);
        assert_eq!(status, 400, "{reply}");
        let detail = reply["errors"][0]["detail"].as_str().unwrap();
        assert!(detail.contains("at most 100 instances"), "{detail}");
    }
    // By spread, and unweighed, the same 101 are placed as far as they fit, spread
    // evenly over the two hosts in the first case.
    for (sort, per_host) in [(json!("spread"), Some(8)), (Value::Null, None)] {
        let mut body = json!({"project_id": "p", "user_id": "u",
            "request": "resources=VCPU:1", "consumers": consumers, "partial": true});
        if !sort.is_null() {
            body["sort"] = sort;
        }
        let (status, placed) = post_claims(&client, body);
        assert_eq!(status, 201, "{placed}");
        let claims = placed["claims"].as_array().unwrap();
        assert_eq!(claims.len(), 16);
        if let Some(per_host) = per_host {
            let mut hosts: std::collections::BTreeMap<String, usize> = Default::default();
            for claim in claims {
                *hosts.entry(provider_of(claim)).or_default() += 1;
            }
            assert_eq!(
                hosts.values().copied().collect::<Vec<_>>(),
                vec![per_host; 2]
            );
        }
        for claim in claims {
            let uuid = claim["uuid"].as_str().unwrap();
            let (status, _) = client.call("DELETE", &format!("/claims/{uuid}"), None);
            assert!((200..300).contains(&status), "{status}");
        }
    }
}

#[test]
fn explain_names_what_emptied_the_answer() {
    let (_dir, server, hosts) = cloud(3, 4);
    let client = server.client();
    let explain = |query: &str| -> Value {
        let (status, body) = client.call(
            "GET",
            &format!("/allocation_candidates/explain?{query}"),
            None,
        );
        assert_eq!(status, 200, "{body}");
        json(&body)
    };
    let e = explain("resources=VCPU:2");
    assert_eq!(e["allocation_candidates"], 3);
    assert_eq!(e["emptied_by"], Value::Null);
    // Fill the first host, then ask for more than any host has left.
    let mut busy = pick_one(Uuid::new_v4());
    busy["request"] = json!(format!("resources=VCPU:3&in_tree={}", hosts[0]));
    assert_eq!(post_claims(&client, busy).0, 201);
    let e = explain("resources=VCPU:5");
    assert_eq!(e["allocation_candidates"], 0);
    assert_eq!(e["emptied_by"], "group '': capacity");
    let stages = &e["groups"][0]["stages"];
    assert_eq!(
        stages[0],
        json!({"stage": "resource_class", "providers": 3})
    );
    assert_eq!(stages[1], json!({"stage": "capacity", "providers": 0}));
    let nearest = &e["groups"][0]["nearest"];
    assert_eq!(nearest[0]["short_by"], 1, "{e}");
    assert_eq!(nearest[0]["resource_provider"], hosts[1].to_string());
    assert_eq!(nearest.as_array().unwrap().len(), 3);
    // The query's own errors are the search's.
    let (status, _) = client.call(
        "GET",
        "/allocation_candidates/explain?resources=NOPE:1",
        None,
    );
    assert_eq!(status, 400);
    // The command line prints the stage.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(["explain", "resources=VCPU:5"])
        .env("ALLOT_URL", format!("http://{}", server.addr))
        .output()
        .unwrap();
    let text = support::stdout_of(out);
    assert!(text.contains("emptied by: group '': capacity"), "{text}");
    assert!(text.contains("NEAREST MISS"), "{text}");
}
