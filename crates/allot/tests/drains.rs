//! Draining a host (issue 44), over real HTTP against the release binary: a root
//! holding 40 consumers of mixed shapes in 8 server groups, on a nested world with
//! a sharing disk pool. Every consumer is placed elsewhere (or named with why),
//! every rule kept, the sources untouched until the confirm, the drained root
//! refused to new claims while the drain is open; the confirm moves everyone in one
//! write, an abandon puts everything back. On SQLite with one node, and on
//! PostgreSQL with three nodes (each step through another node), when a server is
//! given (`support::Database`).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use support::{call, json, Client, Database, Server};
use uuid::Uuid;

const ROOTS: usize = 10;

/// The world: a disk pool shared through aggregate A, and ten roots in A, each
/// with 256 VCPU and a NIC child with 32 VFs. Returns the roots, the NICs, the pool.
fn world(client: &Client) -> (Vec<Uuid>, Vec<Uuid>, Uuid) {
    let agg = Uuid::new_v4();
    let provider = |name: String, parent: Option<Uuid>, class: &str, total: u64| {
        let uuid = Uuid::new_v4();
        let mut body = json!({"name": name, "uuid": uuid});
        if let Some(parent) = parent {
            body["parent_provider_uuid"] = json!(parent);
        }
        call(client, "POST", "/resource_providers", Some(body), 200);
        let body = json!({"resource_provider_generation": 0,
                          "inventories": {class: {"total": total}}});
        call(
            client,
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            Some(body),
            200,
        );
        uuid
    };
    let aggregate = |uuid: Uuid, generation: u64| {
        let body = json!({"resource_provider_generation": generation, "aggregates": [agg]});
        call(
            client,
            "PUT",
            &format!("/resource_providers/{uuid}/aggregates"),
            Some(body),
            200,
        );
    };
    let pool = provider("pool".into(), None, "DISK_GB", 100_000);
    let body = json!({"resource_provider_generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]});
    call(
        client,
        "PUT",
        &format!("/resource_providers/{pool}/traits"),
        Some(body),
        200,
    );
    aggregate(pool, 2);
    let (mut roots, mut nics) = (Vec::new(), Vec::new());
    for r in 0..ROOTS {
        let root = provider(format!("cn{r}"), None, "VCPU", 256);
        nics.push(provider(
            format!("cn{r}-nic"),
            Some(root),
            "SRIOV_NET_VF",
            32,
        ));
        aggregate(root, 1);
        roots.push(root);
    }
    (roots, nics, pool)
}

/// Consumer `c` holding, on root `r` of the world, one of three shapes by `c % 3`:
/// 2 VCPU and 20 GB of the pool; 4 VCPU, a VF and 40 GB; or 8 VCPU alone.
fn allocate(client: &Client, world: &(Vec<Uuid>, Vec<Uuid>, Uuid), c: Uuid, n: usize, r: usize) {
    let (roots, nics, pool) = world;
    let mut allocations = serde_json::Map::new();
    let mut on = |provider: Uuid, class: &str, amount: u64| {
        allocations.insert(provider.to_string(), json!({"resources": {class: amount}}));
    };
    match n % 3 {
        0 => {
            on(roots[r], "VCPU", 2);
            on(*pool, "DISK_GB", 20);
        }
        1 => {
            on(roots[r], "VCPU", 4);
            on(nics[r], "SRIOV_NET_VF", 1);
            on(*pool, "DISK_GB", 40);
        }
        _ => on(roots[r], "VCPU", 8),
    }
    let body = json!({"allocations": allocations, "project_id": "p", "user_id": "u",
                      "consumer_generation": null, "consumer_type": "INSTANCE"});
    call(client, "PUT", &format!("/allocations/{c}"), Some(body), 204);
}

/// The roots (by place in `roots`) and pool amounts a consumer's allocations use.
fn held(client: &Client, world: &(Vec<Uuid>, Vec<Uuid>, Uuid), c: Uuid) -> (BTreeSet<usize>, u64) {
    let (roots, nics, pool) = world;
    let body = call(client, "GET", &format!("/allocations/{c}"), None, 200);
    let mut at = BTreeSet::new();
    let mut disk = 0;
    for (provider, a) in body["allocations"].as_object().unwrap() {
        let provider: Uuid = provider.parse().unwrap();
        if provider == *pool {
            disk += a["resources"]["DISK_GB"].as_u64().unwrap();
        } else if let Some(r) = roots.iter().position(|x| *x == provider) {
            at.insert(r);
        } else {
            at.insert(nics.iter().position(|x| *x == provider).unwrap());
        }
    }
    (at, disk)
}

struct Setup {
    world: (Vec<Uuid>, Vec<Uuid>, Uuid),
    /// The 40 consumers on root 0.
    moving: Vec<Uuid>,
    groups: Vec<(Uuid, &'static str)>,
}

/// 40 consumers on root 0 in 8 groups (some with members elsewhere), 12 outside
/// any group; members elsewhere on roots 1 to 4.
fn setup(client: &Client) -> Setup {
    let world = world(client);
    let moving: Vec<Uuid> = (0..40).map(|_| Uuid::new_v4()).collect();
    for (n, c) in moving.iter().enumerate() {
        allocate(client, &world, *c, n, 0);
    }
    // (policy, max, members on root 0, members elsewhere)
    let plans: [(&str, Option<u32>, usize, usize); 8] = [
        ("affinity", None, 5, 0),
        ("affinity", None, 5, 0),
        ("soft-affinity", None, 3, 2),
        ("soft-affinity", None, 3, 2),
        ("anti-affinity", None, 1, 4),
        ("anti-affinity", None, 1, 4),
        ("anti-affinity", Some(5), 5, 0),
        ("soft-anti-affinity", None, 5, 0),
    ];
    let mut next = 0;
    let mut groups = Vec::new();
    for (policy, max, here, elsewhere) in plans {
        let mut members: Vec<Uuid> = moving[next..next + here].to_vec();
        next += here;
        for e in 0..elsewhere {
            let c = Uuid::new_v4();
            allocate(client, &world, c, e, 1 + e);
            members.push(c);
        }
        let mut body = json!({"name": policy, "project_id": "p", "policy": policy,
                              "members": members});
        if let Some(max) = max {
            body["rules"] = json!({"max_server_per_host": max});
        }
        let uuid = Uuid::new_v4();
        let group = call(
            client,
            "PUT",
            &format!("/server_groups/{uuid}"),
            Some(body),
            200,
        );
        if !policy.starts_with("soft") {
            assert_eq!(group["violations"], 0, "{group}");
        }
        groups.push((uuid, policy));
    }
    Setup {
        world,
        moving,
        groups,
    }
}

/// Waits until every node has seen the last write (docs/api.md, "Several nodes":
/// within a second); nothing to wait for on one node.
fn settle(clients: &[Client]) {
    if clients.len() > 1 {
        std::thread::sleep(std::time::Duration::from_millis(1500));
    }
}

/// The drain, then its confirm, then an abandoned second one, each step through
/// the next of `clients` (one node, or several on one database).
fn drain_a_root(clients: &[Client]) {
    let node = |i: usize| &clients[i % clients.len()];
    let s = setup(node(0));
    settle(clients);
    let root0 = s.world.0[0];
    let before: BTreeMap<Uuid, (BTreeSet<usize>, u64)> = s
        .moving
        .iter()
        .map(|c| (*c, held(node(1), &s.world, *c)))
        .collect();
    let drain = call(
        node(1),
        "POST",
        "/drains",
        Some(json!({"roots": [root0], "disable": true})),
        201,
    );
    let uuid = drain["uuid"].as_str().unwrap().to_owned();
    settle(clients);
    assert_eq!(drain["unplaced"], Value::Null, "{drain}");
    let claims = drain["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 40);
    let consumers: BTreeSet<&str> = claims
        .iter()
        .map(|c| c["consumer_uuid"].as_str().unwrap())
        .collect();
    assert_eq!(consumers.len(), 40);
    for claim in claims {
        // What the consumer adds on its target: never root 0, never the pool.
        for provider in claim["allocations"].as_object().unwrap().keys() {
            assert_ne!(provider, &root0.to_string());
            assert_ne!(provider, &s.world.2.to_string());
        }
    }
    // Open: every rule kept (members are where they are going), the sources
    // untouched, root 0 refused to new claims and marked disabled.
    let check_groups = |client: &Client| {
        for (group, policy) in &s.groups {
            let body = call(client, "GET", &format!("/server_groups/{group}"), None, 200);
            if !policy.starts_with("soft") {
                assert_eq!(body["violations"], 0, "{policy}: {body}");
            }
        }
    };
    check_groups(node(2));
    for c in &s.moving {
        assert_eq!(held(node(2), &s.world, *c), before[c], "sources untouched");
    }
    let body = json!({"consumer_uuid": Uuid::new_v4(), "project_id": "p", "user_id": "u",
                      "allocations": {root0.to_string(): {"resources": {"VCPU": 1}}}});
    let refused = call(node(2), "POST", "/claims", Some(body), 409);
    assert!(refused["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("drained"));
    let traits = call(
        node(2),
        "GET",
        &format!("/resource_providers/{root0}/traits"),
        None,
        200,
    );
    assert!(traits["traits"]
        .as_array()
        .unwrap()
        .contains(&json!("COMPUTE_STATUS_DISABLED")));
    assert_eq!(
        call(node(2), "GET", &format!("/drains/{uuid}"), None, 200)["state"],
        "open"
    );

    // Confirmed: everyone moved in one write, pool shares kept, root 0 open again.
    let confirmed = call(
        node(0),
        "POST",
        &format!("/drains/{uuid}/confirm"),
        None,
        200,
    );
    assert_eq!(confirmed["state"], "confirmed");
    settle(clients);
    assert_eq!(
        call(node(1), "GET", &format!("/drains/{uuid}"), None, 200)["state"],
        "confirmed"
    );
    for c in &s.moving {
        let (at, disk) = held(node(1), &s.world, *c);
        assert!(!at.contains(&0), "{c} left root 0: {at:?}");
        assert_eq!(at.len(), 1, "one target tree: {at:?}");
        assert_eq!(disk, before[c].1, "its pool share stays");
    }
    let usages = call(
        node(1),
        "GET",
        &format!("/resource_providers/{root0}/usages"),
        None,
        200,
    );
    assert_eq!(usages["usages"]["VCPU"], 0);
    check_groups(node(1));
    let disabled = |client: &Client| {
        let path = format!("/resource_providers/{root0}/traits");
        let traits = call(client, "GET", &path, None, 200);
        traits["traits"]
            .as_array()
            .unwrap()
            .contains(&json!("COMPUTE_STATUS_DISABLED"))
    };
    assert!(
        disabled(node(1)),
        "in maintenance until the drain is deleted"
    );
    let claim_on_root0 = json!({"consumer_uuid": Uuid::new_v4(), "project_id": "p",
        "user_id": "u", "allocations": {root0.to_string(): {"resources": {"VCPU": 1}}}});
    call(
        node(2),
        "POST",
        "/claims",
        Some(claim_on_root0.clone()),
        409,
    );
    call(node(2), "DELETE", &format!("/drains/{uuid}"), None, 204);
    settle(clients);
    assert!(!disabled(node(1)));
    call(node(1), "POST", "/claims", Some(claim_on_root0), 201);

    // A second drain of another root, abandoned: everything as it was.
    let root1 = s.world.0[1];
    settle(clients);
    let held_before: Vec<_> = s
        .moving
        .iter()
        .map(|c| held(node(2), &s.world, *c))
        .collect();
    let drain = call(
        node(2),
        "POST",
        "/drains",
        Some(json!({"roots": [root1], "partial": true})),
        201,
    );
    let second = drain["uuid"].as_str().unwrap().to_owned();
    call(node(0), "DELETE", &format!("/drains/{second}"), None, 204);
    settle(clients);
    call(node(1), "GET", &format!("/drains/{second}"), None, 404);
    let held_after: Vec<_> = s
        .moving
        .iter()
        .map(|c| held(node(1), &s.world, *c))
        .collect();
    assert_eq!(held_after, held_before);
    let pending = call(
        node(1),
        "GET",
        &format!("/resource_providers/{}/pending", s.world.0[2]),
        None,
        200,
    );
    assert!(
        pending["pending"].as_object().is_none_or(|p| p.is_empty()),
        "{pending}"
    );
    let body = json!({"consumer_uuid": Uuid::new_v4(), "project_id": "p", "user_id": "u",
                      "allocations": {root1.to_string(): {"resources": {"VCPU": 1}}}});
    call(node(1), "POST", "/claims", Some(body), 201);
}

#[test]
fn a_drain_moves_forty_consumers_keeping_every_rule_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    drain_a_root(&[server.client()]);
}

#[test]
fn a_drain_moves_forty_consumers_keeping_every_rule_across_three_nodes() {
    let Some(db) = Database::create() else {
        return;
    };
    let nodes: Vec<Server> = (0..3).map(|_| Server::start_url(&db.url)).collect();
    let clients: Vec<Client> = nodes.iter().map(Server::client).collect();
    drain_a_root(&clients);
}

#[test]
fn a_drain_refuses_what_it_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    let world = world(&client);
    let nic = world.1[0];
    for bad in [
        json!({}),
        json!({"roots": []}),
        json!({"roots": ["nope"]}),
        json!({"roots": [world.0[0]], "sort": "heavy"}),
        json!({"roots": [world.0[0]], "required": ["not a trait"]}),
        json!({"roots": [nic]}),
        json!({"roots": [Uuid::new_v4()]}),
        json!({"roots": [world.0[0]], "color": "red"}),
    ] {
        let refused = call(&client, "POST", "/drains", Some(bad.clone()), 400);
        assert!(refused["errors"][0]["detail"].is_string(), "{bad}");
    }
    // An empty root drains at once; draining it again is a conflict.
    let drain = call(
        &client,
        "POST",
        "/drains",
        Some(json!({"roots": [world.0[0]]})),
        201,
    );
    assert_eq!(drain["claims"], json!([]));
    call(
        &client,
        "POST",
        "/drains",
        Some(json!({"roots": [world.0[0]]})),
        409,
    );
    call(&client, "GET", "/drains/nope", None, 404);
    call(
        &client,
        "POST",
        &format!("/drains/{}/confirm", Uuid::new_v4()),
        None,
        404,
    );
    let listed = call(&client, "GET", "/drains", None, 200);
    assert_eq!(listed["drains"].as_array().unwrap().len(), 1);
}

/// `allot ARGS` against `server`; its standard output, which must come with success.
fn allot(server: &Server, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .env("ALLOT_URL", format!("http://{}", server.addr))
        .output()
        .expect("run allot");
    support::stdout_of(output)
}

#[test]
fn the_command_line_drains_confirms_and_abandons() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    let world = world(&client);
    let consumers: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for (n, c) in consumers.iter().enumerate() {
        allocate(&client, &world, *c, n, 0);
    }
    let root0 = world.0[0].to_string();
    let drain = json(&allot(
        &server,
        &["drain", &root0, "--disable", "-f", "json"],
    ));
    let uuid = drain["uuid"].as_str().unwrap().to_owned();
    assert_eq!(drain["claims"].as_array().unwrap().len(), 3, "{drain}");
    assert_eq!(drain["disabled"], json!([root0]));
    let table = allot(&server, &["drains", "show", &uuid]);
    assert!(
        table.contains("open") && table.contains(&consumers[0].to_string()),
        "{table}"
    );
    let listed = json(&allot(&server, &["drains", "-f", "json"]));
    assert_eq!(listed["drains"][0]["uuid"], uuid.as_str());
    let confirmed = json(&allot(&server, &["drains", "confirm", &uuid, "-f", "json"]));
    assert_eq!(confirmed["state"], "confirmed");
    assert_eq!(
        call(&client, "GET", &format!("/drains/{uuid}"), None, 200)["state"],
        "confirmed"
    );
    for c in &consumers {
        let (at, _) = held(&client, &world, *c);
        assert!(!at.contains(&0), "{c}: {at:?}");
    }
    // A second drain, of the roots the consumers went to, abandoned.
    let root1 = world.0[1].to_string();
    let second = json(&allot(
        &server,
        &["drain", &root1, "--partial", "-f", "json"],
    ));
    let second = second["uuid"].as_str().unwrap().to_owned();
    let said = allot(&server, &["drains", "abandon", &second]);
    assert_eq!(said, format!("abandoned drain {second}\n"));
    call(&client, "GET", &format!("/drains/{second}"), None, 404);
}
