//! Dry runs (issue 47), over real HTTP against the release binary: a provider in use
//! by three consumers and a pending claim has its VCPU ratio lowered and its memory
//! reserved raised, first as a dry run, then for real on a copy of the same world (a
//! second server and database): the dry run names exactly the classes, amounts and
//! consumers the real write leaves over capacity, answers the status the real write
//! gets (or refuses as it refuses), and changes nothing, generations included. On
//! SQLite, and on PostgreSQL when a server is given (`support::Database`).

mod support;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use support::{call, json, start_writing_on_mariadb, Client, Database, MariaDatabase, Server};
use uuid::Uuid;

const RP: Uuid = Uuid::from_u128(0x0d17_0000_0000_4000_8000_0000_0000_0001);
const OTHER: Uuid = Uuid::from_u128(0x0d17_0000_0000_4000_8000_0000_0000_0002);
const CLAIMER: Uuid = Uuid::from_u128(0xc1a1_0000_0000_4000_8000_0000_0000_0004);

/// The consumers holding allocations: (uuid, VCPU, MEMORY_MB) on [`RP`].
const HOLDERS: [(u128, u64, u64); 3] = [
    (0xc000_0000_0000_4000_8000_0000_0000_0003, 12, 0),
    (0xc000_0000_0000_4000_8000_0000_0000_0001, 4, 512),
    (0xc000_0000_0000_4000_8000_0000_0000_0002, 8, 1024),
];

/// The world: [`RP`] with 8 VCPU at ratio 4 (capacity 32) and 4096 MEMORY_MB, used by
/// the [`HOLDERS`] and a claim of 2 VCPU by [`CLAIMER`] (26 VCPU, 1536 MEMORY_MB in
/// all); [`OTHER`], with 4 VCPU, holds 3 of the first holder's.
fn world(client: &Client) {
    for (uuid, name) in [(RP, "cn1"), (OTHER, "cn2")] {
        let body = json!({"name": name, "uuid": uuid});
        call(client, "POST", "/resource_providers", Some(body), 200);
    }
    let inventories = json!({"resource_provider_generation": 0, "inventories": {
        "VCPU": {"total": 8, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 4096},
    }});
    call(client, "PUT", &inventories_of(RP), Some(inventories), 200);
    let other = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}});
    call(client, "PUT", &inventories_of(OTHER), Some(other), 200);
    for (n, (consumer, vcpu, memory)) in HOLDERS.iter().enumerate() {
        let mut resources = json!({"VCPU": vcpu});
        if *memory > 0 {
            resources["MEMORY_MB"] = json!(memory);
        }
        let mut allocations = json!({RP.to_string(): {"resources": resources}});
        if n == 0 {
            allocations[OTHER.to_string()] = json!({"resources": {"VCPU": 3}});
        }
        let body = json!({"allocations": allocations, "project_id": "p", "user_id": "u",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        let path = format!("/allocations/{}", Uuid::from_u128(*consumer));
        call(client, "PUT", &path, Some(body), 204);
    }
    let claim = json!({"consumer_uuid": CLAIMER, "project_id": "p", "user_id": "u",
                       "allocations": {RP.to_string(): {"resources": {"VCPU": 2}}},
                       "expires_in": 3600});
    call(client, "POST", "/claims", Some(claim), 201);
}

fn inventories_of(uuid: Uuid) -> String {
    format!("/resource_providers/{uuid}/inventories")
}

/// Everything a write could change on the providers: each one's row (its
/// generation), inventories and usages.
fn snapshot(client: &Client) -> Vec<Value> {
    let mut all = Vec::new();
    for uuid in [RP, OTHER] {
        let base = format!("/resource_providers/{uuid}");
        all.push(call(client, "GET", &base, None, 200));
        all.push(call(
            client,
            "GET",
            &format!("{base}/inventories"),
            None,
            200,
        ));
        all.push(call(client, "GET", &format!("{base}/usages"), None, 200));
    }
    all
}

/// `POST /dry_run` of `method path body`: its answer (always 200).
fn dry_run(client: &Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let mut request = json!({"method": method, "path": path});
    if let Some(body) = body {
        request["body"] = body;
    }
    call(client, "POST", "/dry_run", Some(request), 200)
}

/// The new inventories: VCPU at ratio 2 (capacity 16), MEMORY_MB with 3000 reserved
/// (capacity 1096).
fn lowered(generation: u64) -> Value {
    json!({"resource_provider_generation": generation, "inventories": {
        "VCPU": {"total": 8, "allocation_ratio": 2.0},
        "MEMORY_MB": {"total": 4096, "reserved": 3000},
    }})
}

/// What a provider holds over capacity, computed from what the API shows of it after
/// a real write: its inventories, the allocations on it and the pending claim.
fn over_capacity_shown(client: &Client, uuid: Uuid) -> Vec<Value> {
    let base = format!("/resource_providers/{uuid}");
    let inventories = call(client, "GET", &format!("{base}/inventories"), None, 200);
    let allocations = call(client, "GET", &format!("{base}/allocations"), None, 200);
    let claim = call(
        client,
        "GET",
        &format!("/claims?consumer_uuid={CLAIMER}"),
        None,
        200,
    );
    let mut holders: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (consumer, held) in allocations["allocations"].as_object().unwrap() {
        for (class, amount) in held["resources"].as_object().unwrap() {
            let by = holders.entry(class.clone()).or_default();
            *by.entry(consumer.clone()).or_default() += amount.as_u64().unwrap();
        }
    }
    for c in claim["claims"].as_array().unwrap() {
        if c["state"] != "pending" {
            continue;
        }
        if let Some(resources) = c["allocations"][uuid.to_string()]["resources"].as_object() {
            for (class, amount) in resources {
                let by = holders.entry(class.clone()).or_default();
                *by.entry(CLAIMER.to_string()).or_default() += amount.as_u64().unwrap();
            }
        }
    }
    let mut over = Vec::new();
    // Standard classes in Placement's order: VCPU before MEMORY_MB.
    for class in ["VCPU", "MEMORY_MB"] {
        let inv = &inventories["inventories"][class];
        let total = inv["total"].as_f64().unwrap();
        let reserved = inv["reserved"].as_f64().unwrap();
        let capacity = ((total - reserved) * inv["allocation_ratio"].as_f64().unwrap()).floor();
        let by = holders.remove(class).unwrap_or_default();
        let used: u64 = by.values().sum();
        if used as f64 > capacity {
            over.push(json!({
                "capacity": capacity as i64,
                "consumers": by.iter().map(|(c, u)| json!({"consumer_uuid": c, "used": u})).collect::<Vec<_>>(),
                "over": used - capacity as u64,
                "resource_class": class,
                "resource_provider": {"name": "cn1", "uuid": uuid},
                "used": used,
            }));
        }
    }
    over
}

/// The scenario on `world` (where only dry runs go) and `copy` (the same world,
/// where the real writes go).
fn dry_runs_name_what_the_real_write_leaves(world_at: &Client, copy: &Client) {
    world(world_at);
    world(copy);
    let before = snapshot(world_at);
    let generation = before[0]["generation"].as_u64().unwrap();

    // One class at a time: VCPU at ratio 2 leaves 26 used of 16.
    let one = format!("{}/VCPU", inventories_of(RP));
    let vcpu =
        json!({"resource_provider_generation": generation, "total": 8, "allocation_ratio": 2.0});
    let answer = dry_run(world_at, "PUT", &one, Some(vcpu));
    assert_eq!(answer["status"], 200, "{answer}");
    assert!(answer.get("errors").is_none(), "{answer}");
    let over = answer["over_capacity"].as_array().unwrap();
    assert_eq!(over.len(), 1, "{answer}");
    assert_eq!(over[0]["resource_class"], "VCPU");
    assert_eq!(
        (over[0]["capacity"].as_i64(), over[0]["used"].as_u64()),
        (Some(16), Some(26))
    );
    assert_eq!(over[0]["over"], 10);
    let mut wanted: Vec<(String, u64)> = HOLDERS
        .iter()
        .map(|(c, vcpu, _)| (Uuid::from_u128(*c).to_string(), *vcpu))
        .chain([(CLAIMER.to_string(), 2)])
        .collect();
    wanted.sort();
    let named: Vec<(String, u64)> = over[0]["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["consumer_uuid"].as_str().unwrap().to_owned(),
                h["used"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(named, wanted);
    assert_eq!(snapshot(world_at), before, "a dry run changed something");

    // Both classes at once, as the dry run says and as the real write on the copy leaves.
    let answer = dry_run(
        world_at,
        "PUT",
        &inventories_of(RP),
        Some(lowered(generation)),
    );
    assert_eq!(answer["status"], 200, "{answer}");
    let classes: Vec<&str> = answer["over_capacity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["resource_class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["VCPU", "MEMORY_MB"], "{answer}");
    assert_eq!(answer["over_capacity"][1]["over"], 1536 - 1096);
    assert_eq!(
        dry_run(copy, "PUT", &inventories_of(RP), Some(lowered(generation))),
        answer
    );
    call(
        copy,
        "PUT",
        &inventories_of(RP),
        Some(lowered(generation)),
        200,
    );
    assert_eq!(
        json!(over_capacity_shown(copy, RP)),
        answer["over_capacity"]
    );
    assert_eq!(snapshot(world_at), before, "a dry run changed something");

    // Refused as the real write is refused: the generation is now stale on the copy.
    let stale = dry_run(copy, "PUT", &inventories_of(RP), Some(lowered(generation)));
    let (status, text) = copy.call(
        "PUT",
        &inventories_of(RP),
        Some(&lowered(generation).to_string()),
    );
    same_refusal(&stale, status, &text, "placement.concurrent_update");
    // A provider in use cannot go.
    let path = format!("/resource_providers/{RP}");
    let delete = dry_run(world_at, "DELETE", &path, None);
    let (status, text) = copy.call("DELETE", &path, None);
    same_refusal(&delete, status, &text, "placement.resource_provider.inuse");
    // A body the write's own schema refuses.
    let bad = json!({"resource_provider_generation": generation, "total": "many"});
    let refused = dry_run(world_at, "PUT", &one, Some(bad.clone()));
    let (status, text) = world_at.call("PUT", &one, Some(&bad.to_string()));
    same_refusal(&refused, status, &text, "placement.undefined_code");
    assert_eq!(snapshot(world_at), before, "a dry run changed something");
}

/// A dry run's answer says the write is refused as `status` and `text` (the real
/// write's answer) are, with error code `code`.
fn same_refusal(answer: &Value, status: u16, text: &str, code: &str) {
    let real = json(text);
    assert_eq!(answer["status"], status, "{answer} against {text}");
    assert!(status >= 400, "{text}");
    assert_eq!(answer["over_capacity"], json!([]));
    let (dry, real) = (&answer["errors"][0], &real["errors"][0]);
    assert_eq!(dry["code"], code, "{answer}");
    for field in ["status", "title", "detail", "code"] {
        assert_eq!(dry[field], real[field], "{field}: {answer} against {text}");
    }
}

#[test]
fn a_dry_run_names_what_a_lowered_ratio_leaves_over_capacity_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let world = Server::start(&dir.path().join("world.db"));
    let copy = Server::start(&dir.path().join("copy.db"));
    dry_runs_name_what_the_real_write_leaves(&world.client(), &copy.client());
}

#[test]
fn a_dry_run_names_what_a_lowered_ratio_leaves_over_capacity_on_postgres() {
    let (Some(world_db), Some(copy_db)) = (Database::create(), Database::create()) else {
        return;
    };
    let world = Server::start_url(&world_db.url);
    let copy = Server::start_url(&copy_db.url);
    dry_runs_name_what_the_real_write_leaves(&world.client(), &copy.client());
}

#[test]
fn a_dry_run_names_what_a_lowered_ratio_leaves_over_capacity_on_mariadb() {
    let (Some(world_db), Some(copy_db)) = (MariaDatabase::create(), MariaDatabase::create()) else {
        return;
    };
    let world = start_writing_on_mariadb(&world_db.url);
    let copy = start_writing_on_mariadb(&copy_db.url);
    dry_runs_name_what_the_real_write_leaves(&world.client(), &copy.client());
}

#[test]
fn dry_runs_of_a_reshape_and_of_old_microversions_answer_as_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    world(&client);
    let before = snapshot(&client);
    let generation = before[0]["generation"].as_u64().unwrap();
    let reshape = json!({"inventories": {RP.to_string(): lowered(generation)}, "allocations": {}});
    // The reshaper is a service's: an admin is refused it, by the dry run as by the
    // write, under the default policy.
    let answer = dry_run(&client, "POST", "/reshaper", Some(reshape.clone()));
    let (status, text) = client.call("POST", "/reshaper", Some(&reshape.to_string()));
    same_refusal(&answer, status, &text, "placement.undefined_code");
    assert_eq!(answer["status"], 403, "{answer}");
    // Under the open policy, it would pass, leaving both classes over capacity.
    let db = format!("sqlite:{}", dir.path().join("open.db").display());
    let open = Server::start_args(&db, &["--bind", "127.0.0.1:0", "--policy", "open"], &[]);
    let open_client = open.client();
    world(&open_client);
    let answer = dry_run(&open_client, "POST", "/reshaper", Some(reshape));
    assert_eq!(answer["status"], 204, "{answer}");
    assert_eq!(
        answer["over_capacity"].as_array().unwrap().len(),
        2,
        "{answer}"
    );
    // At 1.4, DELETE of all inventories is not allowed; at 1.29, there is no reshaper.
    let request = json!({"method": "DELETE", "path": inventories_of(OTHER)});
    let (status, text) = client.request("POST", "/dry_run", Some(&request.to_string()), "1.4");
    assert_eq!(status, 200, "{text}");
    assert_eq!(json(&text)["status"], 405, "{text}");
    let request = json!({"method": "POST", "path": "/reshaper", "body": {}});
    let (_, text) = client.request("POST", "/dry_run", Some(&request.to_string()), "1.29");
    assert_eq!(json(&text)["status"], 404, "{text}");
    // An inventory nothing uses goes without leaving anything over capacity.
    let path = format!("/resource_providers/{RP}/inventories/DISK_GB");
    let body = json!({"resource_class": "DISK_GB", "total": 10});
    let answer = dry_run(&client, "POST", &inventories_of(RP), Some(body));
    assert_eq!(
        (answer["status"].as_u64(), &answer["over_capacity"]),
        (Some(201), &json!([]))
    );
    assert_eq!(dry_run(&client, "DELETE", &path, None)["status"], 404);
    assert_eq!(snapshot(&client), before, "a dry run changed something");
}

#[test]
fn a_dry_run_refuses_what_names_no_write_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    let inv = inventories_of(RP);
    for bad in [
        json!({"method": "GET", "path": inv}).to_string(),
        json!({"method": "PATCH", "path": inv}).to_string(),
        json!({"method": "put", "path": inv}).to_string(),
        json!({"method": "POST", "path": format!("{inv}/VCPU")}).to_string(),
        json!({"method": "PUT", "path": format!("/resource_providers/{RP}/traits")}).to_string(),
        json!({"method": "DELETE", "path": "/allocations/x"}).to_string(),
        json!({"method": "PUT", "path": format!("{inv}?x=1")}).to_string(),
        json!({"method": "PUT", "path": "resource_providers"}).to_string(),
        json!({"method": "PUT"}).to_string(),
        json!({"method": "PUT", "path": inv, "extra": 1}).to_string(),
        json!([]).to_string(),
        "{".to_owned(),
        String::new(),
    ] {
        let (status, text) = client.call("POST", "/dry_run", Some(&bad));
        // No body at all comes without a content type: 415, as for any write.
        let wanted = if bad.is_empty() { 415 } else { 400 };
        assert_eq!(status, wanted, "{bad}: {text}");
        assert!(
            json(&text)["errors"][0]["detail"].is_string(),
            "{bad}: {text}"
        );
    }
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
fn the_command_line_prints_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("a.db"));
    let client = server.client();
    world(&client);
    let before = snapshot(&client);
    let generation = before[0]["generation"].as_u64().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, lowered(generation).to_string()).unwrap();
    let inv = inventories_of(RP);
    let body = file.to_str().unwrap();
    let text = allot(&server, &["dry-run", "PUT", &inv, "--body", body]);
    assert!(
        text.starts_with(&format!("PUT {inv} would answer 200\n")),
        "{text}"
    );
    for (consumer, _, _) in HOLDERS {
        assert!(
            text.contains(&Uuid::from_u128(consumer).to_string()),
            "{text}"
        );
    }
    assert!(
        text.contains("VCPU") && text.contains("MEMORY_MB"),
        "{text}"
    );
    let answer = json(&allot(
        &server,
        &["dry-run", "put", &inv, "--body", body, "-f", "json"],
    ));
    assert_eq!(
        answer,
        dry_run(&client, "PUT", &inv, Some(lowered(generation)))
    );
    let refused = allot(
        &server,
        &["dry-run", "DELETE", &format!("/resource_providers/{RP}")],
    );
    assert!(
        refused.contains("would answer 409")
            && refused.contains("placement.resource_provider.inuse"),
        "{refused}"
    );
    assert_eq!(snapshot(&client), before, "a dry run changed something");
}
