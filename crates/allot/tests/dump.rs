//! `allot export` / `allot import` through the real binary over real HTTP: a world
//! built through the Placement API on one allot is exported, imported into a fresh
//! database, and a second allot on it answers a broad set of GETs, at several
//! microversions, byte for byte as the first did. The first allot runs on SQLite; the
//! second on PostgreSQL when `ALLOT_TEST_POSTGRES_URL` is set (the move the issue is
//! about: from the embedded store to a database server), else on another SQLite file.
//!
//! The worlds are the conformance fixtures' `SharedStorageFixture` (two compute trees
//! and two sharing disk providers in one aggregate) and the gist of
//! `NUMANetworkFixture` (NUMA nodes with traits, FPGA and VGPU children, NICs with
//! PFs offering a custom class), rebuilt here with the same requests as
//! `conformance/runner/fixtures.py` makes: that runner is Python driven by gabbi, and
//! starting it from a Rust test would cost more than these few lines. On top of them
//! come what the fixtures lack: consumer types, a provider re-parented under one
//! created after it, a deleted provider (a gap in the ids), class metadata, an
//! allocation left above capacity by a lowered total, and claims in every state.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{engines, stdout_of, Client, Database, Engine, Server};
use uuid::Uuid;

/// A uuid of its own for each name, like the fixtures' `uuidsentinel`.
fn sentinel(name: &str) -> Uuid {
    Uuid::new_v5(&Uuid::NAMESPACE_OID, name.as_bytes())
}

fn ok(client: &Client, method: &str, path: &str, body: Value, version: &str) -> Value {
    let (status, text) = client.request(method, path, Some(&body.to_string()), version);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {text}"
    );
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn generation(client: &Client, rp: Uuid) -> Value {
    let (_, body) = client.request("GET", &format!("/resource_providers/{rp}"), None, "1.14");
    serde_json::from_str::<Value>(&body).unwrap()["generation"].clone()
}

fn provider(client: &Client, name: &str, parent: Option<Uuid>, aggregates: &[Uuid]) -> Uuid {
    let uuid = sentinel(name);
    let mut body = json!({"name": name, "uuid": uuid});
    if let Some(parent) = parent {
        body["parent_provider_uuid"] = json!(parent);
    }
    ok(client, "POST", "/resource_providers", body, "1.14");
    if !aggregates.is_empty() {
        // 1.1: a bare list, no generation bump (as the fixtures do).
        ok(
            client,
            "PUT",
            &format!("/resource_providers/{uuid}/aggregates"),
            json!(aggregates),
            "1.1",
        );
    }
    uuid
}

fn inventory(client: &Client, rp: Uuid, class: &str, total: u64, extra: Value) {
    if class.starts_with("CUSTOM_") {
        client.request("PUT", &format!("/resource_classes/{class}"), None, "1.7");
    }
    let mut body = json!({
        "resource_provider_generation": generation(client, rp),
        "resource_class": class, "total": total, "max_unit": total,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let path = format!("/resource_providers/{rp}/inventories");
    ok(client, "POST", &path, body, "1.14");
}

fn traits(client: &Client, rp: Uuid, names: &[&str]) {
    for name in names.iter().filter(|n| n.starts_with("CUSTOM_")) {
        client.request("PUT", &format!("/traits/{name}"), None, "1.6");
    }
    let body = json!({"resource_provider_generation": generation(client, rp), "traits": names});
    ok(
        client,
        "PUT",
        &format!("/resource_providers/{rp}/traits"),
        body,
        "1.6",
    );
}

fn allocate(client: &Client, consumer: Uuid, allocations: Value, project: &str, ty: Option<&str>) {
    let mut body = json!({
        "allocations": allocations, "project_id": project, "user_id": "user-1",
        "consumer_generation": null,
    });
    let version = match ty {
        Some(ty) => {
            body["consumer_type"] = json!(ty);
            "1.38"
        }
        None => "1.28",
    };
    let (status, text) = client.request(
        "PUT",
        &format!("/allocations/{consumer}"),
        Some(&body.to_string()),
        version,
    );
    assert_eq!(status, 204, "{text}");
}

/// What the world holds that the GETs below walk.
struct World {
    providers: Vec<Uuid>,
    consumers: Vec<Uuid>,
    claims: Vec<Uuid>,
    aggregate: Uuid,
}

fn build(client: &Client) -> World {
    // SharedStorageFixture.
    let agg = sentinel("agg");
    let cn1 = provider(client, "cn1", None, &[agg]);
    let cn2 = provider(client, "cn2", None, &[agg]);
    let ss = provider(client, "ss", None, &[agg]);
    let ss2 = provider(client, "ss2", None, &[agg]);
    let mut numa = Vec::new();
    for (suffix, parent) in [("1_1", cn1), ("1_2", cn1), ("2_1", cn2), ("2_2", cn2)] {
        numa.push(provider(
            client,
            &format!("numa{suffix}"),
            Some(parent),
            &[],
        ));
    }
    let mut pf = Vec::new();
    for (suffix, parent) in ["1_1", "1_2", "2_1", "2_2"].iter().zip(&numa) {
        pf.push(provider(client, &format!("pf{suffix}"), Some(*parent), &[]));
    }
    for cn in [cn1, cn2] {
        inventory(
            client,
            cn,
            "VCPU",
            24,
            json!({"allocation_ratio": 16.0, "max_unit": 24}),
        );
        inventory(
            client,
            cn,
            "MEMORY_MB",
            128 * 1024,
            json!({"allocation_ratio": 1.5}),
        );
    }
    traits(client, cn1, &["HW_CPU_X86_SSE", "HW_CPU_X86_SSE2"]);
    inventory(client, cn2, "DISK_GB", 2000, json!({"reserved": 100}));
    for s in [ss, ss2] {
        inventory(client, s, "DISK_GB", 2000, json!({"reserved": 100}));
        traits(client, s, &["MISC_SHARES_VIA_AGGREGATE"]);
    }
    for p in &pf {
        inventory(client, *p, "SRIOV_NET_VF", 8, json!({}));
    }

    // The gist of NUMANetworkFixture (names prefixed: one world, unique names).
    let ncn1 = provider(client, "n_cn1", None, &[]);
    traits(client, ncn1, &["COMPUTE_VOLUME_MULTI_ATTACH"]);
    let n0 = provider(client, "n_numa0", Some(ncn1), &[]);
    traits(client, n0, &["HW_NUMA_ROOT"]);
    inventory(client, n0, "VCPU", 4, json!({}));
    inventory(
        client,
        n0,
        "MEMORY_MB",
        2048,
        json!({"min_unit": 512, "step_size": 256}),
    );
    let n1 = provider(client, "n_numa1", Some(ncn1), &[]);
    traits(client, n1, &["HW_NUMA_ROOT", "CUSTOM_FOO"]);
    inventory(client, n1, "VCPU", 4, json!({}));
    let fpga = provider(client, "n_fpga0", Some(n0), &[]);
    inventory(client, fpga, "FPGA", 1, json!({}));
    let pgpu = provider(client, "n_pgpu0", Some(n0), &[]);
    inventory(client, pgpu, "VGPU", 8, json!({}));
    let ncn2 = provider(client, "n_cn2", None, &[]);
    inventory(client, ncn2, "VCPU", 8, json!({}));
    traits(client, ncn2, &["CUSTOM_FOO"]);
    let nic = provider(client, "n_nic1", Some(ncn2), &[]);
    traits(client, nic, &["CUSTOM_HW_NIC_ROOT"]);
    let npf = provider(client, "n_pf1_1", Some(nic), &[]);
    traits(client, npf, &["CUSTOM_PHYSNET1"]);
    inventory(client, npf, "CUSTOM_VF", 4, json!({}));
    ok(
        client,
        "PUT",
        "/resource_classes/CUSTOM_VF/metadata",
        json!({"units": "count", "display_name": "Virtual functions ☃"}),
        "latest",
    );

    // What the fixtures lack: a provider deleted (a gap in the ids), one re-parented
    // under a provider created after it (1.37), its subtree following.
    let doomed = provider(client, "doomed", None, &[]);
    let (status, _) = client.call("DELETE", &format!("/resource_providers/{doomed}"), None);
    assert_eq!(status, 204);
    let rack = provider(client, "rack", None, &[]);
    let body = json!({"name": "n_cn2", "parent_provider_uuid": rack});
    ok(
        client,
        "PUT",
        &format!("/resource_providers/{ncn2}"),
        body,
        "1.37",
    );

    // Consumers, with and without a type, on one provider and across a sharing one.
    let consumers: Vec<Uuid> = (1..=5).map(|i| Uuid::from_u128(0xc0_0000 + i)).collect();
    allocate(
        client,
        consumers[0],
        json!({cn1.to_string(): {"resources": {"VCPU": 2, "MEMORY_MB": 1024}},
               ss.to_string(): {"resources": {"DISK_GB": 100}}}),
        "project-a",
        Some("INSTANCE"),
    );
    allocate(
        client,
        consumers[1],
        json!({cn2.to_string(): {"resources": {"VCPU": 4, "DISK_GB": 20}},
               pf[2].to_string(): {"resources": {"SRIOV_NET_VF": 2}}}),
        "project-a",
        None,
    );
    allocate(
        client,
        consumers[2],
        json!({n0.to_string(): {"resources": {"VCPU": 3, "MEMORY_MB": 1024}}}),
        "project-b",
        Some("MIGRATION"),
    );
    allocate(
        client,
        consumers[3],
        json!({npf.to_string(): {"resources": {"CUSTOM_VF": 3}},
               ncn2.to_string(): {"resources": {"VCPU": 1}}}),
        "project-b",
        None,
    );
    // n_numa0's VCPU total lowered under its 3 allocated: kept, above capacity.
    let body = json!({"resource_provider_generation": generation(client, n0), "total": 2});
    ok(
        client,
        "PUT",
        &format!("/resource_providers/{n0}/inventories/VCPU"),
        body,
        "1.14",
    );

    // Claims: pending (expiring and not), confirmed, released.
    let mut claims = Vec::new();
    for (i, expires_in) in ["3600", "null", "3600", "3600"].iter().enumerate() {
        let consumer = if i == 2 {
            consumers[4]
        } else {
            Uuid::from_u128(0xc1_0000 + i as u128)
        };
        let body = format!(
            r#"{{"consumer_uuid": "{consumer}", "project_id": "project-c", "user_id": "u",
                "consumer_type": "INSTANCE", "tag": "boot {i}", "expires_in": {expires_in},
                "allocations": {{"{n1}": {{"resources": {{"VCPU": 1}}}}}}}}"#
        );
        let (status, text) = client.call("POST", "/claims", Some(&body));
        assert_eq!(status, 201, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        claims.push(Uuid::parse_str(v["uuid"].as_str().unwrap()).unwrap());
    }
    let (status, text) = client.call("POST", &format!("/claims/{}/confirm", claims[2]), None);
    assert!((200..300).contains(&status), "{status} {text}");
    let (status, text) = client.call("DELETE", &format!("/claims/{}", claims[3]), None);
    assert!((200..300).contains(&status), "{status} {text}");

    let (_, body) = client.call("GET", "/resource_providers", None);
    let v: Value = serde_json::from_str(&body).unwrap();
    let providers = v["resource_providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Uuid::parse_str(p["uuid"].as_str().unwrap()).unwrap())
        .collect();
    World {
        providers,
        consumers,
        claims,
        aggregate: agg,
    }
}

/// Every GET compared, at every microversion it is asked at.
fn paths(world: &World) -> Vec<String> {
    let agg = world.aggregate;
    let mut paths: Vec<String> = vec![
        "/resource_providers".into(),
        format!("/resource_providers?member_of={agg}"),
        format!("/resource_providers?in_tree={}", sentinel("cn1")),
        "/resource_providers?resources=VCPU:1".into(),
        "/resource_providers?required=HW_NUMA_ROOT".into(),
        "/usages?project_id=project-a".into(),
        "/usages?project_id=project-b&user_id=user-1".into(),
        "/resource_classes".into(),
        "/resource_classes?with_metadata=true".into(),
        "/resource_classes/CUSTOM_VF".into(),
        "/resource_classes/CUSTOM_VF/metadata".into(),
        "/traits".into(),
        "/traits?name=startswith:CUSTOM".into(),
        "/traits?associated=true".into(),
        "/allocation_candidates?resources=VCPU:1,DISK_GB:10".into(),
        "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512".into(),
        format!("/allocation_candidates?resources=DISK_GB:100&member_of={agg}"),
        "/allocation_candidates?resources=VCPU:1&required=HW_NUMA_ROOT".into(),
        "/allocation_candidates?resources1=VCPU:1&resources2=SRIOV_NET_VF:1\
         &group_policy=isolate"
            .into(),
        "/allocation_candidates?resources=CUSTOM_VF:1,VCPU:1".into(),
        "/allocation_candidates?resources=VCPU:1&limit=3".into(),
        "/claims".into(),
        "/claims?state=pending".into(),
        "/pending?project_id=project-c".into(),
    ];
    for p in &world.providers {
        for sub in [
            "",
            "/inventories",
            "/inventories/VCPU",
            "/traits",
            "/aggregates",
            "/usages",
            "/allocations",
            "/pending",
        ] {
            paths.push(format!("/resource_providers/{p}{sub}"));
        }
    }
    for c in &world.consumers {
        paths.push(format!("/allocations/{c}"));
    }
    for c in &world.claims {
        paths.push(format!("/claims/{c}"));
    }
    paths
}

const VERSIONS: [&str; 5] = ["1.10", "1.17", "1.29", "1.36", "latest"];

fn answers(server: &Server, paths: &[String]) -> Vec<(String, u16, String)> {
    let client = server.client();
    let mut out = Vec::new();
    for version in VERSIONS {
        for path in paths {
            let (status, body) = client.request("GET", path, None, version);
            out.push((
                format!("{version} GET {path}"),
                status,
                without_request_id(body),
            ));
        }
    }
    out
}

/// An error body's request id is new on every request: everything else must match.
fn without_request_id(body: String) -> String {
    const KEY: &str = "\"request_id\":\"";
    match body.find(KEY) {
        Some(start) => {
            let from = start + KEY.len();
            let end = body[from..].find('"').map_or(body.len(), |e| from + e);
            format!("{}{}", &body[..from], &body[end..])
        }
        None => body,
    }
}

fn allot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .output()
        .expect("run allot")
}

fn url(db: &Path) -> String {
    format!("sqlite:{}", db.display())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn an_exported_deployment_answers_the_same_after_import() {
    let dir = tempfile::tempdir().unwrap();
    let db_a = dir.path().join("a.db");
    // Where the world moves to: a fresh PostgreSQL database if there is a server.
    let postgres = Database::create();
    let target = match &postgres {
        Some(db) => db.url.clone(),
        None => url(&dir.path().join("b.db")),
    };
    let dump_file = dir.path().join("world.json");
    let dump_path = dump_file.to_str().unwrap();

    let server = Server::start(&db_a);
    let world = build(&server.client());
    assert_eq!(world.providers.len(), 21);
    let paths = paths(&world);
    let before = answers(&server, &paths);

    // An export beside the running server: it reads a snapshot and leaves the
    // server alone. An import into the database the server holds is refused.
    let live = allot(&["export", "--database", &url(&db_a), "-o", dump_path]);
    assert!(live.status.success(), "{}", stderr(&live));
    let taken_live = std::fs::read_to_string(&dump_file).unwrap();
    let busy = allot(&["import", "--database", &url(&db_a), "-i", dump_path]);
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        stderr(&busy).contains("is an allot server running on it?"),
        "{}",
        stderr(&busy)
    );
    assert_eq!(
        answers(&server, &paths),
        before,
        "the server answers as before"
    );
    server.terminate();

    let out = allot(&["export", "--database", &url(&db_a), "-o", dump_path]);
    stdout_of(out);
    assert_eq!(
        strip_time(&taken_live),
        strip_time(&std::fs::read_to_string(&dump_file).unwrap()),
        "the export taken while the server ran is the one taken after it stopped"
    );
    let imported = allot(&["import", "--database", &target, "-i", dump_path]);
    let log = stderr(&imported);
    assert!(imported.status.success(), "{log}");
    assert!(log.contains("21 providers"), "{log}");
    // n_numa0's lowered total: accepted, with a warning naming it.
    assert!(
        log.contains(&format!(
            "warning: provider {}: 3 of VCPU in use, above its capacity 2",
            sentinel("n_numa0")
        )),
        "{log}"
    );

    let server = Server::start_url(&target);
    let after = answers(&server, &paths);
    server.terminate();
    assert_eq!(before.len(), after.len());
    let mut compared = 0;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "{} differs after the import", b.0);
        compared += usize::from(b.1 == 200);
    }
    // Most of them answered something (not a wall of 404s at old microversions).
    assert!(compared > before.len() / 2, "only {compared} answered 200");

    // The second database exports the same dump, to the byte, but for its time.
    let again = stdout_of(allot(&["export", "--database", &target]));
    let first = std::fs::read_to_string(&dump_file).unwrap();
    assert_eq!(strip_time(&again), strip_time(&first));

    // A second import into the now non-empty database is refused.
    let refused = allot(&["import", "--database", &target, "-i", dump_path]);
    assert_eq!(refused.status.code(), Some(1));
    let log = stderr(&refused);
    assert!(
        log.contains("not empty") && log.lines().count() == 1,
        "{log}"
    );
}

/// A dump without its `exported_at` line: what two exports of the same data share.
fn strip_time(dump: &str) -> String {
    dump.lines()
        .filter(|l| !l.trim_start().starts_with("\"exported_at\""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bad_input_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let file = dir.path().join("bad.json");
    // Each step below rewrites the file and imports it again.
    let import = || {
        allot(&[
            "import",
            "--database",
            &url(&db),
            "-i",
            file.to_str().unwrap(),
        ])
    };

    // Not JSON.
    std::fs::write(&file, "PGDMP").unwrap();
    let out = import();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("allot import: "),
        "{}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));

    // Integrity problems: each named on a line of its own.
    let dump = json!({
        "format": "allot-dump", "version": 1, "exported_at": 0,
        "resource_classes": [], "traits": [], "consumers": [], "claims": [],
        "providers": [
            {"uuid": sentinel("a"), "name": "a", "parent": sentinel("nowhere"),
             "generation": 0, "created_at": 0, "updated_at": 0,
             "inventories": [], "traits": ["CUSTOM_NOPE"], "aggregates": []},
        ],
    });
    std::fs::write(&file, dump.to_string()).unwrap();
    let out = import();
    assert_eq!(out.status.code(), Some(1));
    let log = stderr(&out);
    assert!(log.contains("2 integrity problem(s)"), "{log}");
    assert!(
        log.contains("  - provider ") && log.contains("CUSTOM_NOPE"),
        "{log}"
    );
    // Nothing was written: the same file goes in once fixed.
    let mut fixed = dump.clone();
    fixed["providers"][0]["parent"] = Value::Null;
    fixed["providers"][0]["traits"] = json!(["HW_CPU_X86_AVX2"]);
    std::fs::write(&file, fixed.to_string()).unwrap();
    let out = import();
    assert!(out.status.success(), "{}", stderr(&out));

    // Exporting a database that is not there does not create one.
    let missing = dir.path().join("missing.db");
    let out = allot(&["export", "--database", &url(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no database at"), "{}", stderr(&out));
    assert!(!missing.exists());
}

/// How many providers the storm below claims on, and how many threads claim.
const STORM_PROVIDERS: usize = 12;
const STORM_THREADS: usize = 8;

/// One write of the storm: a consumer's allocation (`PUT /allocations`) or a
/// pending claim (`POST /claims`) of 1 VCPU on one provider, when it was sent and
/// when it was answered (2xx: every write of the storm is).
struct Write {
    consumer: Uuid,
    provider: Uuid,
    claim: bool,
    sent: Instant,
    answered: Instant,
}

/// How many consumers the ballast provider holds before the storm.
const BALLAST: u128 = 50_000;

/// A dump of one provider (not one of the storm's) with `consumers` consumers of 1
/// VCPU each on it.
fn ballast(consumers: u128) -> Value {
    let rp = sentinel("ballast");
    let consumers: Vec<Value> = (1..=consumers)
        .map(|i| {
            json!({"uuid": Uuid::from_u128(i), "project_id": "ballast", "user_id": "u",
                "consumer_type": null, "generation": 1, "created_at": 0, "updated_at": 0,
                "allocations": [{"provider": rp, "resource_class": "VCPU", "used": 1}]})
        })
        .collect();
    json!({
        "format": "allot-dump", "version": 1, "exported_at": 0,
        "resource_classes": [], "traits": [], "claims": [], "consumers": consumers,
        "providers": [{"uuid": rp, "name": "ballast", "parent": null, "generation": 1,
            "created_at": 0, "updated_at": 0, "traits": [], "aggregates": [],
            "inventories": [{"resource_class": "VCPU", "total": 1_000_000_000u64,
                "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1,
                "allocation_ratio": "1.0"}]}],
    })
}

/// Who holds what: each consumer's provider.
type Holdings = HashMap<Uuid, Uuid>;

fn storm_provider(i: usize) -> Uuid {
    sentinel(&format!("storm-{i}"))
}

/// A storm client: until `stop`, allocations on each provider in turn, and every
/// fourth write a pending claim, all answered 2xx (the inventory is far from full).
fn storm(t: usize, client: Client, stop: Arc<AtomicBool>) -> Vec<Write> {
    let mut writes = Vec::new();
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let consumer = Uuid::new_v4();
        let provider = storm_provider((t * 5 + n) % STORM_PROVIDERS);
        let claim = n % 4 == 3;
        let sent = Instant::now();
        let (path, body) = if claim {
            let body = json!({"consumer_uuid": consumer, "project_id": "storm", "user_id": "u",
                "expires_in": 3600,
                "allocations": {provider.to_string(): {"resources": {"VCPU": 1}}}});
            ("/claims".to_owned(), body)
        } else {
            let body = json!({"allocations": {provider.to_string(): {"resources": {"VCPU": 1}}},
                "project_id": "storm", "user_id": "u", "consumer_generation": null,
                "consumer_type": "INSTANCE"});
            (format!("/allocations/{consumer}"), body)
        };
        let method = if claim { "POST" } else { "PUT" };
        let (status, text) = client.request(method, &path, Some(&body.to_string()), "1.39");
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {text}"
        );
        writes.push(Write {
            consumer,
            provider,
            claim,
            sent,
            answered: Instant::now(),
        });
    }
    writes
}

/// Amounts by provider: `GET /resource_providers/{uuid}/{what}`'s object at `key`.
fn listing(client: &Client, provider: Uuid, what: &str, key: &str) -> Value {
    let (status, body) = client.call(
        "GET",
        &format!("/resource_providers/{provider}/{what}"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()[key].clone()
}

/// The consumers holding allocations, and those with a live claim, on the storm's
/// providers of the server `client` asks; each provider's usage checked to be the
/// sum of its allocations, and its generation one more than its allocations (each
/// allocation bumped it once, after the inventory's write: a provider read apart
/// from its allocations would show otherwise).
fn storm_holdings(client: &Client) -> (Holdings, Holdings) {
    let (mut allocated, mut claimed) = (HashMap::new(), HashMap::new());
    for i in 0..STORM_PROVIDERS {
        let rp = storm_provider(i);
        let allocations = listing(client, rp, "allocations", "allocations");
        let allocations = allocations.as_object().unwrap();
        let sum: u64 = allocations
            .values()
            .map(|a| a["resources"]["VCPU"].as_u64().unwrap())
            .sum();
        let usage = listing(client, rp, "usages", "usages")["VCPU"].as_u64();
        assert_eq!(
            usage,
            Some(sum),
            "provider {rp}: usage against its allocations"
        );
        let generation = generation(client, rp).as_u64().unwrap();
        assert_eq!(
            generation,
            1 + allocations.len() as u64,
            "provider {rp}: generation against its allocations"
        );
        allocated.extend(
            allocations
                .keys()
                .map(|c| (Uuid::parse_str(c).unwrap(), rp)),
        );
        let pending = listing(client, rp, "pending?detail=consumers", "consumers");
        // No live claim: no `consumers` object at all, or an empty one.
        claimed.extend(
            pending
                .as_object()
                .into_iter()
                .flat_map(|consumers| consumers.keys())
                .map(|c| (Uuid::parse_str(c).unwrap(), rp)),
        );
    }
    (allocated, claimed)
}

/// An export taken while a storm of allocations and claims runs against the same
/// server (on `source`): the export succeeds beside the running server, its dump goes
/// into an empty database (`target`), and a server there holds one consistent
/// moment of the storm: every usage the sum of its allocations, every generation in
/// step with them, every write answered before the export began and none sent after
/// it ended. The running server loses nothing: every answered write is held. Returns
/// the export's time and the writes answered.
fn export_during_a_storm(source: &Engine, target: &str, dump: &Path) -> (Duration, usize) {
    // Ballast, so that the export's read lasts while the storm commits (a read
    // statement by statement rather than in one snapshot could then find the
    // storm's providers, read first, behind the consumers' table, read after). On
    // a 2-core machine that did not happen often enough to fail this test with the
    // snapshot's transaction taken out: the export's two threads leave the server
    // little room to commit while they read.
    std::fs::write(dump, ballast(BALLAST).to_string()).unwrap();
    let loaded = allot(&[
        "import",
        "--database",
        &source.url,
        "-i",
        dump.to_str().unwrap(),
    ]);
    assert!(loaded.status.success(), "{}", stderr(&loaded));
    // On MariaDB, once it holds the writer's lease: the storm's first writes would
    // be answered 503 before.
    let server = source.serve();
    let client = server.client();
    for i in 0..STORM_PROVIDERS {
        let rp = storm_provider(i);
        ok(
            &client,
            "POST",
            "/resource_providers",
            json!({"name": format!("storm-{i}"), "uuid": rp}),
            "1.14",
        );
        ok(
            &client,
            "PUT",
            &format!("/resource_providers/{rp}/inventories"),
            json!({"resource_provider_generation": 0,
                   "inventories": {"VCPU": {"total": 1_000_000, "max_unit": 1}}}),
            "1.14",
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..STORM_THREADS)
        .map(|t| {
            let (client, stop) = (client.clone(), stop.clone());
            std::thread::spawn(move || storm(t, client, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let began = Instant::now();
    let exported = allot(&[
        "export",
        "--database",
        &source.url,
        "-o",
        dump.to_str().unwrap(),
    ]);
    let ended = Instant::now();
    assert!(exported.status.success(), "{}", stderr(&exported));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let writes: Vec<Write> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();

    // The running server holds every answered write, and nothing else.
    let (allocated, claimed) = storm_holdings(&client);
    let answered = |claim: bool| -> Holdings {
        writes
            .iter()
            .filter(|w| w.claim == claim)
            .map(|w| (w.consumer, w.provider))
            .collect()
    };
    assert_eq!(allocated, answered(false), "the allocations answered 204");
    assert_eq!(claimed, answered(true), "the claims answered 201");
    server.terminate();

    let imported = allot(&["import", "--database", target, "-i", dump.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let server = Server::start_url(target);
    let (allocated, claimed) = storm_holdings(&server.client());
    server.terminate();
    for w in &writes {
        let held = if w.claim { &claimed } else { &allocated };
        let what = if w.claim { "claim" } else { "allocation" };
        match held.get(&w.consumer) {
            Some(provider) => {
                assert_eq!(*provider, w.provider, "the {what} is on its provider");
                assert!(w.sent < ended, "{what} sent after the export is in it");
            }
            None => assert!(
                w.answered > began,
                "{what} answered before the export is not in it"
            ),
        }
    }
    let held = allocated.len() + claimed.len();
    assert!(
        held > 0 && held < writes.len(),
        "the export took a moment inside the storm: {held} of {}",
        writes.len()
    );
    (ended - began, writes.len())
}

#[test]
fn an_export_during_a_claims_storm_is_one_moment_of_it_and_the_storm_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("storm.json");
    // On every engine (PostgreSQL and MariaDB when there is a server): the storm's
    // database there, the copy on SQLite.
    for engine in engines(dir.path()) {
        let copy = url(&dir.path().join(format!("copy-{}.db", engine.name)));
        let (took, writes) = export_during_a_storm(&engine, &copy, &dump);
        eprintln!(
            "{}: the export took {took:?} during a storm of {writes} writes",
            engine.name
        );
    }
}
