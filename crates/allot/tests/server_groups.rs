//! Server groups kept by the writer (issue 44), over real HTTP against the release
//! binary: 32 schedulers starting members of 20 anti-affinity groups (and of 20
//! affinity groups) at once, a rack-scoped group, a soft group on a full cloud, and
//! the API's refusals.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use support::{call, json, Client, Server};
use uuid::Uuid;

/// A server with `roots` roots of `vcpus` VCPU each, root `i` in rack
/// `CUSTOM_RACK_{i % racks}` when `racks` is given; their uuids in creation order.
fn cloud(roots: usize, vcpus: u64, racks: Option<usize>) -> (tempfile::TempDir, Server, Vec<Uuid>) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    for r in 0..racks.unwrap_or(0) {
        let (status, body) = client.call("PUT", &format!("/traits/CUSTOM_RACK_{r}"), None);
        assert_eq!(status, 201, "{body}");
    }
    let uuids = (0..roots)
        .map(|i| {
            let uuid = Uuid::new_v4();
            let body = json!({"name": format!("host-{i}"), "uuid": uuid});
            call(&client, "POST", "/resource_providers", Some(body), 200);
            let body = json!({"resource_provider_generation": 0,
                              "inventories": {"VCPU": {"total": vcpus}}});
            call(
                &client,
                "PUT",
                &format!("/resource_providers/{uuid}/inventories"),
                Some(body),
                200,
            );
            if let Some(racks) = racks {
                let body = json!({"resource_provider_generation": 1,
                                  "traits": [format!("CUSTOM_RACK_{}", i % racks)]});
                call(
                    &client,
                    "PUT",
                    &format!("/resource_providers/{uuid}/traits"),
                    Some(body),
                    200,
                );
            }
            uuid
        })
        .collect();
    (dir, server, uuids)
}

fn new_group(client: &Client, policy: &str, extra: Value) -> Uuid {
    let mut body = json!({"name": "g", "project_id": "p", "policy": policy});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let group = call(client, "POST", "/server_groups", Some(body), 201);
    group["uuid"].as_str().unwrap().parse().unwrap()
}

/// A pick of one VCPU for `consumer`, joining `group`.
fn pick(consumer: Uuid, group: Uuid) -> Value {
    json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
           "request": "resources=VCPU:1", "sort": "spread", "server_group": group})
}

/// Where each member of a group is (its roots), and the group's number.
fn placement(client: &Client, group: Uuid) -> (BTreeMap<String, Vec<String>>, u64) {
    let body = call(client, "GET", &format!("/server_groups/{group}"), None, 200);
    let places = body["placement"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(m, p)| {
            let roots = p["roots"].as_array().unwrap();
            (
                m.clone(),
                roots
                    .iter()
                    .map(|r| r.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect();
    (places, body["violations"].as_u64().unwrap())
}

/// 32 schedulers start 100 members of 20 groups of `policy` (5 each, the groups'
/// instances interleaved), the first member of every fourth group already running
/// on a root of its own choosing. Every answer is a claim, or a refusal for the
/// rule or for capacity; never a generation conflict. Returns the groups.
fn start_members(client: &Client, server: &Server, hosts: &[Uuid], policy: &str) -> Vec<Uuid> {
    let groups: Vec<Uuid> = (0..20)
        .map(|_| new_group(client, policy, json!({})))
        .collect();
    let mut queue: Vec<(Uuid, Uuid)> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if g % 4 == 0 {
            // Running already: a claim on a chosen root, confirmed.
            let consumer = Uuid::new_v4();
            let body = json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
                              "allocations": {hosts[g].to_string(): {"resources": {"VCPU": 1}}},
                              "server_group": group});
            let claim = call(client, "POST", "/claims", Some(body), 201);
            let path = format!("/claims/{}/confirm", claim["uuid"].as_str().unwrap());
            call(client, "POST", &path, None, 200);
        }
    }
    for round in 0..5 {
        for (g, group) in groups.iter().enumerate() {
            if !(g % 4 == 0 && round == 4) {
                queue.push((Uuid::new_v4(), *group));
            }
        }
    }
    let queue = Arc::new(Mutex::new(queue));
    let answers = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let (client, queue, answers) = (server.client(), queue.clone(), answers.clone());
            std::thread::spawn(move || loop {
                let Some((consumer, group)) = queue.lock().unwrap().pop() else {
                    return;
                };
                let (status, text) =
                    client.call("POST", "/claims", Some(&pick(consumer, group).to_string()));
                let body = json(&text);
                let code = match status {
                    201 => "placed".to_owned(),
                    409 => body["errors"][0]["code"].as_str().unwrap().to_owned(),
                    other => panic!("{other}: {text}"),
                };
                assert!(
                    [
                        "placed",
                        "allot.server_group.violated",
                        "allot.claim.does_not_fit"
                    ]
                    .contains(&code.as_str()),
                    "{code}: {text}"
                );
                *answers.lock().unwrap().entry(code).or_default() += 1;
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let answers = answers.lock().unwrap();
    assert_eq!(answers.values().sum::<usize>(), 95, "{answers:?}");
    groups
}

#[test]
fn thirty_two_schedulers_keep_twenty_anti_affinity_groups_apart() {
    let (_dir, server, hosts) = cloud(60, 8, None);
    let client = server.client();
    let groups = start_members(&client, &server, &hosts, "anti-affinity");
    for group in groups {
        let (places, violations) = placement(&client, group);
        assert_eq!(violations, 0, "{group}: {places:?}");
        assert_eq!(places.len(), 5, "every member placed: {places:?}");
        let roots: BTreeSet<&String> = places.values().flatten().collect();
        assert_eq!(roots.len(), 5, "on five roots: {places:?}");
    }
}

#[test]
fn thirty_two_schedulers_keep_twenty_affinity_groups_together_or_refuse() {
    let (_dir, server, hosts) = cloud(60, 8, None);
    let client = server.client();
    let groups = start_members(&client, &server, &hosts, "affinity");
    for group in groups {
        let (places, violations) = placement(&client, group);
        assert_eq!(violations, 0, "{group}: {places:?}");
        let roots: BTreeSet<&String> = places.values().flatten().collect();
        assert!(roots.len() <= 1, "on one root: {places:?}");
    }
}

#[test]
fn a_rack_scoped_group_never_puts_two_members_in_one_rack() {
    let (_dir, server, hosts) = cloud(12, 8, Some(3));
    let client = server.client();
    let group = new_group(
        &client,
        "anti-affinity",
        json!({"scope": "trait:CUSTOM_RACK_"}),
    );
    for _ in 0..3 {
        call(
            &client,
            "POST",
            "/claims",
            Some(pick(Uuid::new_v4(), group)),
            201,
        );
    }
    let (places, violations) = placement(&client, group);
    assert_eq!(violations, 0);
    let body = call(
        &client,
        "GET",
        &format!("/server_groups/{group}"),
        None,
        200,
    );
    let racks: BTreeSet<String> = body["placement"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p["domains"][0].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(racks.len(), 3, "three racks: {places:?}");
    // A fourth finds no rack: refused, and a claim on a named root is refused for
    // the rule, naming it.
    let (status, text) = client.call(
        "POST",
        "/claims",
        Some(&pick(Uuid::new_v4(), group).to_string()),
    );
    assert_eq!(status, 409, "{text}");
    let body = json!({"consumer_uuid": Uuid::new_v4(), "project_id": "p", "user_id": "u",
                      "allocations": {hosts[0].to_string(): {"resources": {"VCPU": 1}}},
                      "server_group": group});
    let refused = call(&client, "POST", "/claims", Some(body), 409);
    assert_eq!(refused["errors"][0]["code"], "allot.server_group.violated");
    let detail = refused["errors"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&group.to_string()) && detail.contains("CUSTOM_RACK_0"),
        "{detail}"
    );
    // Nothing changed: still three members, three claims.
    let (places, _) = placement(&client, group);
    assert_eq!(places.len(), 3);
    let claims = call(&client, "GET", "/claims", None, 200);
    assert_eq!(claims["claims"].as_array().unwrap().len(), 3);
}

#[test]
fn a_soft_group_on_a_full_cloud_places_and_says_what_it_broke() {
    let (_dir, server, _hosts) = cloud(2, 8, None);
    let client = server.client();
    let group = new_group(&client, "soft-anti-affinity", json!({}));
    for _ in 0..2 {
        let claim = call(
            &client,
            "POST",
            "/claims",
            Some(pick(Uuid::new_v4(), group)),
            201,
        );
        assert!(claim.get("soft_rules_broken").is_none(), "{claim}");
    }
    let third = Uuid::new_v4();
    let claim = call(&client, "POST", "/claims", Some(pick(third, group)), 201);
    assert_eq!(
        claim["soft_rules_broken"],
        json!([{"consumer_uuid": third, "server_group": group}])
    );
    let (_, violations) = placement(&client, group);
    assert_eq!(violations, 1);
}

#[test]
fn the_api_refuses_what_it_cannot_keep_and_changes_nothing() {
    let (_dir, server, hosts) = cloud(2, 8, None);
    let client = server.client();
    for bad in [
        json!({"name": "g", "project_id": "p", "policy": "anti_affinity"}),
        json!({"name": "g", "project_id": "p", "policy": "affinity",
               "rules": {"max_server_per_host": 2}}),
        json!({"name": "g", "project_id": "p", "policy": "affinity", "scope": "rack"}),
        json!({"name": "g", "project_id": "p", "policy": "affinity", "color": "red"}),
        json!({"name": "", "project_id": "p", "policy": "affinity"}),
        json!({"name": "g", "project_id": "p", "policy": "anti-affinity",
               "rules": {"max_server_per_host": 0}}),
        json!({"name": "g", "project_id": "p", "policy": "affinity", "uuid": "nope"}),
    ] {
        let refused = call(&client, "POST", "/server_groups", Some(bad.clone()), 400);
        assert!(
            refused["errors"][0]["detail"].is_string(),
            "{bad}: {refused}"
        );
    }
    assert_eq!(
        call(&client, "GET", "/server_groups", None, 200),
        json!({"server_groups": []})
    );
    let anti = new_group(
        &client,
        "anti-affinity",
        json!({"rules": {"max_server_per_host": 1}}),
    );
    let soft = new_group(&client, "soft-affinity", json!({"project_id": "q"}));
    let listed = call(&client, "GET", "/server_groups?project_id=q", None, 200);
    assert_eq!(listed["server_groups"][0]["uuid"], soft.to_string());
    assert_eq!(listed["server_groups"].as_array().unwrap().len(), 1);
    let listed = call(
        &client,
        "GET",
        "/server_groups?policy=anti-affinity",
        None,
        200,
    );
    assert_eq!(
        listed["server_groups"][0]["rules"]["max_server_per_host"],
        1
    );
    call(&client, "GET", "/server_groups?policy=nope", None, 400);
    call(
        &client,
        "GET",
        &format!("/server_groups/{}", Uuid::new_v4()),
        None,
        404,
    );
    // Two consumers on one root; the second may not join.
    let on_first = |consumer: Uuid| {
        json!({"consumer_uuid": consumer, "project_id": "p", "user_id": "u",
               "allocations": {hosts[0].to_string(): {"resources": {"VCPU": 1}}}})
    };
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    call(&client, "POST", "/claims", Some(on_first(a)), 201);
    call(&client, "POST", "/claims", Some(on_first(b)), 201);
    let members = format!("/server_groups/{anti}/members");
    let group = call(&client, "POST", &members, Some(json!({"add": [a]})), 200);
    assert_eq!(group["members"], json!([a]));
    let refused = call(&client, "POST", &members, Some(json!({"add": [b]})), 409);
    assert_eq!(refused["errors"][0]["code"], "allot.server_group.violated");
    call(
        &client,
        "POST",
        &members,
        Some(json!({"add": ["nope"]})),
        400,
    );
    call(&client, "POST", &members, Some(json!({})), 400);
    let (places, violations) = placement(&client, anti);
    assert_eq!((places.len(), violations), (1, 0), "{places:?}");
    // A group as Nova holds it, broken: `PUT` takes it whole, and says so.
    let imported = Uuid::new_v4();
    let body = json!({"name": "nova", "project_id": "p", "policy": "anti-affinity",
                      "members": [a, b]});
    let put = call(
        &client,
        "PUT",
        &format!("/server_groups/{imported}"),
        Some(body.clone()),
        200,
    );
    assert_eq!(
        (put["violations"].as_u64(), put["uuid"].as_str()),
        (Some(1), Some(&*imported.to_string()))
    );
    let again = call(
        &client,
        "PUT",
        &format!("/server_groups/{imported}"),
        Some(body),
        200,
    );
    assert_eq!(
        again["updated_at"], put["updated_at"],
        "as it was: nothing written"
    );
    call(
        &client,
        "PUT",
        &format!("/server_groups/{imported}"),
        Some(json!({"name": "n"})),
        400,
    );
    call(&client, "PUT", "/server_groups/nope", Some(json!({})), 400);
    call(
        &client,
        "DELETE",
        &format!("/server_groups/{imported}?force=true"),
        None,
        204,
    );
    // A claim naming a group that does not exist is refused.
    let mut body = on_first(Uuid::new_v4());
    body["server_group"] = json!(Uuid::new_v4());
    call(&client, "POST", "/claims", Some(body), 400);
    // Delete: refused while it has members, unless forced.
    let refused = call(
        &client,
        "DELETE",
        &format!("/server_groups/{anti}"),
        None,
        409,
    );
    assert!(refused["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("force=true"));
    call(
        &client,
        "DELETE",
        &format!("/server_groups/{anti}?force=maybe"),
        None,
        400,
    );
    call(
        &client,
        "DELETE",
        &format!("/server_groups/{anti}?force=true"),
        None,
        204,
    );
    call(
        &client,
        "DELETE",
        &format!("/server_groups/{soft}"),
        None,
        204,
    );
    assert_eq!(
        call(&client, "GET", "/server_groups", None, 200),
        json!({"server_groups": []})
    );
}

#[test]
fn a_mass_start_of_mixed_shapes_keeps_each_instance_s_group() {
    let (_dir, server, _hosts) = cloud(4, 8, None);
    let client = server.client();
    let apart = new_group(&client, "anti-affinity", json!({}));
    let together = new_group(&client, "affinity", json!({}));
    let (a, b, c, d) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let body = json!({"project_id": "p", "user_id": "u", "partial": false,
    "consumers": [
        {"consumer_uuid": a, "request": "resources=VCPU:4", "server_group": apart},
        {"consumer_uuid": b, "request": "resources=VCPU:2", "server_group": together},
        {"consumer_uuid": c, "request": "resources=VCPU:1", "server_group": apart},
        {"consumer_uuid": d, "request": "resources=VCPU:2", "server_group": together},
    ]});
    let placed = call(&client, "POST", "/claims", Some(body.clone()), 201);
    let claims = placed["claims"].as_array().unwrap();
    let amounts: Vec<u64> = claims
        .iter()
        .map(|c| {
            let on = c["allocations"]
                .as_object()
                .unwrap()
                .values()
                .next()
                .unwrap();
            on["resources"]["VCPU"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(amounts, [4, 2, 1, 2], "each instance its own shape");
    for group in [apart, together] {
        let (places, violations) = placement(&client, group);
        assert_eq!((places.len(), violations), (2, 0), "{places:?}");
    }
    // A body whose instances name no shape of their own needs `request`.
    let mut no_shape = body;
    no_shape["consumers"][0]
        .as_object_mut()
        .unwrap()
        .remove("request");
    call(&client, "POST", "/claims", Some(no_shape), 400);
}

#[test]
fn placement_s_allocation_writes_answer_only_to_enforced_groups() {
    let (_dir, server, hosts) = cloud(2, 8, None);
    let client = server.client();
    let put = |consumer: Uuid, host: Uuid, status: u16| {
        let body = json!({"allocations": {host.to_string(): {"resources": {"VCPU": 1}}},
                          "project_id": "p", "user_id": "u", "consumer_generation": null,
                          "consumer_type": "INSTANCE"});
        call(
            &client,
            "PUT",
            &format!("/allocations/{consumer}"),
            Some(body),
            status,
        )
    };
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    put(a, hosts[0], 204);
    let enforced = Uuid::new_v4();
    let body = json!({"name": "e", "project_id": "p", "policy": "anti-affinity",
                      "enforce_on_allocations": true, "members": [a, b]});
    call(
        &client,
        "PUT",
        &format!("/server_groups/{enforced}"),
        Some(body),
        200,
    );
    let refused = put(b, hosts[0], 409);
    assert_eq!(refused["errors"][0]["code"], "allot.server_group.violated");
    let held = call(&client, "GET", &format!("/allocations/{b}"), None, 200);
    assert_eq!(
        held["allocations"],
        json!({}),
        "the refused write changed nothing"
    );
    put(b, hosts[1], 204);
    // Not enforced (Nova's own groups): Placement's writes are Nova's to judge.
    let lenient = Uuid::new_v4();
    let body = json!({"name": "l", "project_id": "p", "policy": "anti-affinity",
                      "members": [a, c]});
    call(
        &client,
        "PUT",
        &format!("/server_groups/{lenient}"),
        Some(body),
        200,
    );
    put(c, hosts[0], 204);
    let (_, violations) = placement(&client, lenient);
    assert_eq!(violations, 1, "held broken, as Nova made it");
}
