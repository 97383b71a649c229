//! `allot bench` end to end: the real binary seeds `flat` into a real `allot serve`
//! through the API (twice: the second run must create nothing), the result is checked
//! through the API, and `allot bench query` reports candidate counts equal to what a
//! direct request returns (and a ratio against a peer doing the same work, but none
//! against a peer seeded differently). Then `allot bench claims` storms and schedules
//! on the seeded shape (the storm beside a reader repeating `nolimit`, whose queries
//! must be reported): what it reports accepted must be exactly what the server now
//! holds, and no provider may end up over its capacity. Last, `allot bench
//! mass-start` in each of its ways: what it reports placed is what the server holds,
//! in requests that match the way; and `allot bench groups-anti`, whose pick names
//! each instance's server group and must leave every group on distinct roots.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{bench, Server};
use uuid::Uuid;

const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c0c2e_6b1e_4a59_9a1a_5a0d1c6a2b10);

fn named(name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

fn get(server: &Server, path: &str) -> Value {
    let (status, body) = server.call("GET", path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn seed_is_resumable_and_query_counts_match_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("bench.db"));
    let url = format!("http://{}", server.addr);
    let seed = ["seed", "--shape", "flat", "--roots", "20", "--url", &url];

    let first = bench(&seed);
    assert!(
        first.contains("providers_created=30 providers_existing=0 consumers_created=40"),
        "{first}"
    );
    let second = bench(&seed);
    assert!(
        second.contains(
            "providers_created=0 providers_existing=30 consumers_created=0 consumers_existing=40"
        ),
        "{second}"
    );

    // 20 roots and 10 shared storage providers.
    let providers = get(&server, "/resource_providers");
    assert_eq!(
        providers["resource_providers"].as_array().unwrap().len(),
        30
    );
    // cn2: local disk, AVX2, not AVX512F, rack2, two consumers with disk.
    let cn2 = named("cn2");
    let inventories = get(&server, &format!("/resource_providers/{cn2}/inventories"));
    let vcpu = &inventories["inventories"]["VCPU"];
    assert_eq!(vcpu["total"], 64);
    assert_eq!(vcpu["allocation_ratio"], 4.0);
    assert_eq!(inventories["inventories"]["MEMORY_MB"]["reserved"], 4096);
    assert_eq!(inventories["inventories"]["DISK_GB"]["reserved"], 50);
    let mut traits: Vec<String> = serde_json::from_value(
        get(&server, &format!("/resource_providers/{cn2}/traits"))["traits"].clone(),
    )
    .unwrap();
    traits.sort();
    assert_eq!(traits, ["COMPUTE_VOLUME_MULTI_ATTACH", "HW_CPU_X86_AVX2"]);
    let aggregates = get(&server, &format!("/resource_providers/{cn2}/aggregates"));
    assert_eq!(
        aggregates["aggregates"],
        serde_json::json!([named("rack2")])
    );
    let usages = get(&server, &format!("/resource_providers/{cn2}/usages"));
    assert_eq!(usages["usages"]["VCPU"], 8);
    assert_eq!(usages["usages"]["DISK_GB"], 80);
    // cn7: odd (no disk), disabled; 7 % 5 = 2 consumers.
    let cn7 = named("cn7");
    let traits = get(&server, &format!("/resource_providers/{cn7}/traits"));
    assert!(traits["traits"]
        .as_array()
        .unwrap()
        .contains(&"COMPUTE_STATUS_DISABLED".into()));
    let inventories = get(&server, &format!("/resource_providers/{cn7}/inventories"));
    assert!(inventories["inventories"].get("DISK_GB").is_none());
    let consumer = get(&server, &format!("/allocations/{}", named("inst-7-1")));
    assert_eq!(consumer["project_id"], "p-bench");
    assert_eq!(
        consumer["allocations"][cn7.to_string()]["resources"],
        serde_json::json!({"VCPU": 4, "MEMORY_MB": 8192})
    );
    // ss1 shares disk with racks 5..9.
    let ss1 = named("ss1");
    let aggregates = get(&server, &format!("/resource_providers/{ss1}/aggregates"));
    assert_eq!(aggregates["aggregates"].as_array().unwrap().len(), 5);
    // The whole load: 20 roots with I % 5 consumers each (grouped by consumer type
    // at the latest microversion).
    let usages = get(&server, "/usages?project_id=p-bench");
    assert_eq!(
        usages["usages"]["INSTANCE"]["consumer_count"], 40,
        "{usages}"
    );
    assert_eq!(usages["usages"]["INSTANCE"]["VCPU"], 40 * 4, "{usages}");

    let report = dir.path().join("query.json");
    let report_arg = report.to_str().unwrap();
    // Compared with itself: the same work on both sides, so a ratio is given.
    let table = bench(&[
        "query",
        "--shape",
        "flat",
        "--url",
        &url,
        "--runs",
        "3",
        "--json",
        report_arg,
        "--compare",
        &url,
    ]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let queries = report["queries"].as_array().unwrap();
    let names: Vec<&str> = queries
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["small", "nolimit", "member_of", "gold"], "{table}");
    for query in queries {
        let reported = query["a"]["candidates"].as_u64().unwrap();
        assert!(reported > 0, "{query}");
        assert_eq!(query["a"]["runs"], 3);
        assert!(query["a"]["p50_ms"].as_f64().unwrap() > 0.0, "{query}");
        let direct = get(&server, query["path"].as_str().unwrap());
        let count = direct["allocation_requests"].as_array().unwrap().len() as u64;
        assert_eq!(reported, count, "{}", query["name"]);
        assert_eq!(query["b"]["candidates"], reported, "{query}");
        assert!(query["ratio_p50"].as_f64().unwrap() > 0.0, "{query}");
        assert_eq!(query["unequal"], Value::Null, "{query}");
        assert!(table.contains(query["name"].as_str().unwrap()), "{table}");
    }
    assert!(!table.contains("unequal"), "{table}");

    claims_match_the_server(&server, &url, dir.path());
}

/// A project's load as `GET /usages` reports it: (consumers, VCPU, MEMORY_MB).
fn load(server: &Server, project: &str) -> (u64, u64, u64) {
    let usages = get(server, &format!("/usages?project_id={project}"));
    let instance = &usages["usages"]["INSTANCE"];
    let field = |f: &str| instance[f].as_u64().unwrap_or(0);
    (field("consumer_count"), field("VCPU"), field("MEMORY_MB"))
}

/// Runs `allot bench claims --mode MODE` (and `extra` arguments) for a second with 4
/// clients; its JSON report.
fn claims(url: &str, dir: &std::path::Path, mode: &str, extra: &[&str]) -> Value {
    let report = dir.join(format!("claims-{mode}.json"));
    let mut args = vec![
        "claims",
        "--mode",
        mode,
        "--shape",
        "flat",
        "--roots",
        "20",
        "--concurrency",
        "4",
        "--seconds",
        "1",
        "--url",
        url,
        "--json",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let table = bench(&args);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["mode"], mode, "{table}");
    // Claims and loops find room (the shape is seeded for them); picks of `small` may
    // come after them and find the cloud full: then they are refused, each a 409.
    let decided = if mode == "pick" {
        report["accepted"].as_u64().unwrap() + report["refused_capacity"].as_u64().unwrap()
    } else {
        report["accepted"].as_u64().unwrap()
    };
    assert!(decided > 0, "{table}\n{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert!(report["p50_ms"].as_f64().unwrap() > 0.0, "{report}");
    // Nearest-rank percentiles of one sample set: the tail never below the middle.
    let at = |p: &str| report[p].as_f64().unwrap();
    assert!(
        at("p99_ms") >= at("p50_ms") && at("p999_ms") >= at("p99_ms"),
        "{report}"
    );
    assert!(table.contains("p99.9 ms"), "{table}");
    assert!(table.contains(mode), "{table}");
    // The bench read back what it was granted and found it held.
    assert!(table.contains("held: the server holds exactly"), "{table}");
    // Pending claims (picks) are read back by their totals, which count no consumers.
    let consumers = if mode == "pick" {
        Value::Null
    } else {
        report["accepted"].clone()
    };
    assert_eq!(report["held"]["consumer_count"], consumers, "{report}");
    report
}

/// The run's own project (where its claims went), from its report.
fn project(report: &Value) -> &str {
    let project = report["project_id"].as_str().unwrap();
    assert!(project.starts_with("p-bench-"), "{report}");
    project
}

fn claims_match_the_server(server: &Server, url: &str, dir: &std::path::Path) {
    // Schedule first: 20 roots fill up within seconds, and the scheduler's query
    // only lands on AVX2 roots, so the storm after it still finds room elsewhere.
    let seeded = load(server, "p-bench");
    let schedule = claims(url, dir, "schedule", &[]);
    assert_eq!(schedule["readers"], Value::Null, "{schedule}");
    let accepted = schedule["accepted"].as_u64().unwrap();
    // Each accepted loop claimed `small`'s VCPU:2, MEMORY_MB:4096 for a new consumer
    // of the run's project; the seeded load is untouched.
    assert_eq!(
        load(server, project(&schedule)),
        (accepted, 2 * accepted, 4096 * accepted),
        "{schedule}"
    );
    assert_eq!(load(server, "p-bench"), seeded);
    let rate = schedule["conflict_rate"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&rate), "{schedule}");
    // The storm runs beside a client repeating `nolimit` (a mixed load): the reader's
    // queries are reported apart, and the claims' figures keep their meaning.
    let storm = claims(
        url,
        dir,
        "storm",
        &[
            "--readers",
            "1",
            "--reader-query",
            "nolimit",
            "--pickers",
            "2",
            "--pick-rate",
            "20",
        ],
    );
    // Beside it, two pickers had the server choose, paced, for a project of their
    // own, read back apart.
    let pickers = &storm["pickers"];
    assert_eq!(pickers["clients"], 2, "{storm}");
    assert_eq!(pickers["sort"], "spread", "{storm}");
    // Each pick decided (placed, or refused when the cloud is full), and paced.
    let decided = pickers["accepted"].as_u64().unwrap() + pickers["refused"].as_u64().unwrap();
    assert!((1..=22).contains(&decided), "paced: {storm}");
    assert_eq!(pickers["held"], true, "{storm}");
    assert_eq!(pickers["errors"], serde_json::json!({}), "{storm}");
    let readers = &storm["readers"];
    assert_eq!(readers["clients"], 1, "{storm}");
    assert_eq!(readers["query"], "nolimit", "{storm}");
    assert!(readers["queries"].as_u64().unwrap() > 0, "{storm}");
    assert!(readers["p50_ms"].as_f64().unwrap() > 0.0, "{storm}");
    assert!(
        readers["p99_ms"].as_f64().unwrap() >= readers["p50_ms"].as_f64().unwrap(),
        "{storm}"
    );
    assert_eq!(readers["errors"], serde_json::json!({}), "{storm}");
    let accepted = storm["accepted"].as_u64().unwrap();
    assert_eq!(
        storm["attempts"].as_u64().unwrap(),
        accepted
            + storm["refused_capacity"].as_u64().unwrap()
            + storm["refused_generation"].as_u64().unwrap(),
        "{storm}"
    );
    // Every accepted claim is one new consumer with VCPU 1 and MEMORY_MB 512; a
    // refused one left nothing behind.
    assert_ne!(project(&storm), project(&schedule));
    assert_eq!(
        load(server, project(&storm)),
        (accepted, accepted, 512 * accepted),
        "{storm}"
    );

    // The server chooses and claims, weighed: every pick held as a pending claim of
    // the run's own project.
    let picks = claims(url, dir, "pick", &["--sort", "spread"]);
    assert_eq!(picks["sort"], "spread", "{picks}");
    assert_ne!(project(&picks), project(&storm));

    // No provider holds more than (total - reserved) * allocation_ratio of any class.
    let providers = get(server, "/resource_providers");
    for provider in providers["resource_providers"].as_array().unwrap() {
        let uuid = provider["uuid"].as_str().unwrap();
        let inventories = get(server, &format!("/resource_providers/{uuid}/inventories"));
        let usages = get(server, &format!("/resource_providers/{uuid}/usages"));
        for (class, used) in usages["usages"].as_object().unwrap() {
            let inventory = &inventories["inventories"][class];
            let total = inventory["total"].as_f64().unwrap();
            let reserved = inventory["reserved"].as_f64().unwrap();
            let ratio = inventory["allocation_ratio"].as_f64().unwrap();
            let used = used.as_f64().unwrap();
            assert!(
                used <= (total - reserved) * ratio,
                "{uuid} {class}: {used} used of {inventory}"
            );
        }
    }
}

#[test]
fn query_gives_no_ratio_for_unequal_work() {
    let dir = tempfile::tempdir().unwrap();
    // Twenty roots against ten: `member_of` (racks 0 to 4) finds cn0..cn4 on both,
    // every other query finds more on the larger.
    let servers: Vec<(Server, String)> = [("a", "20"), ("b", "10")]
        .into_iter()
        .map(|(name, roots)| {
            let server = Server::start(&dir.path().join(format!("{name}.db")));
            let url = format!("http://{}", server.addr);
            bench(&["seed", "--shape", "flat", "--roots", roots, "--url", &url]);
            (server, url)
        })
        .collect();
    let report = dir.path().join("query.json");
    let output = Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(["bench", "query", "--shape", "flat", "--runs", "2"])
        .args(["--url", &servers[0].1, "--compare", &servers[1].1])
        .args(["--json", report.to_str().unwrap()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{table}\n{stderr}");
    assert!(
        stderr.contains("different candidate counts for small, nolimit, gold"),
        "{stderr}"
    );
    // The timings are still out, with the refusal where the ratio would be.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for query in report["queries"].as_array().unwrap() {
        let name = query["name"].as_str().unwrap();
        let (a, b) = (&query["a"]["candidates"], &query["b"]["candidates"]);
        let row = table
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{table}"));
        if name == "member_of" {
            assert_eq!((a, b), (&5.into(), &5.into()), "{query}");
            assert!(query["ratio_p50"].as_f64().is_some(), "{query}");
            assert!(!row.contains("unequal"), "{row}");
        } else {
            assert!(a.as_u64().unwrap() > b.as_u64().unwrap(), "{query}");
            assert_eq!(query["ratio_p50"], Value::Null, "{query}");
            let why = format!("A returned {a} candidates, B {b}");
            assert_eq!(query["unequal"], why.as_str(), "{query}");
            assert!(row.ends_with("unequal"), "{row}");
            assert!(
                table.contains(&format!("{name}: no ratio: {why}")),
                "{table}"
            );
        }
    }
}

/// Runs `allot bench mass-start` with `args` on the 20 seeded roots; its JSON report.
fn mass_start(url: &str, dir: &std::path::Path, name: &str, args: &[&str]) -> Value {
    let report = dir.join(format!("mass-start-{name}.json"));
    let mut all = vec!["mass-start", "--roots", "20", "--url", url];
    all.extend_from_slice(&["--json", report.to_str().unwrap()]);
    all.extend_from_slice(args);
    let table = bench(&all);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(table.contains("mass start"), "{table}");
    // Whatever was placed, the read-back found it held and nothing over capacity.
    assert_eq!(report["held"], true, "{table}\n{report}");
    assert_eq!(report["over_capacity"], serde_json::json!([]), "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    // Only Nova's way retries, once per refusal; allot's never does.
    let refusals = report["conflicts_generation"].as_u64().unwrap()
        + report["conflicts_capacity"].as_u64().unwrap();
    let retries = report["retries"].as_u64().unwrap();
    if report["way"] == "nova" {
        assert_eq!(retries, refusals, "{report}");
    } else {
        assert_eq!(retries, 0, "{report}");
    }
    report
}

#[test]
fn mass_start_each_way_places_what_the_server_holds() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("mass.db"));
    let url = format!("http://{}", server.addr);
    bench(&["seed", "--shape", "flat", "--roots", "20", "--url", &url]);
    // `small` fits the roots with AVX2 that are not disabled: the ones a
    // different_roots start may use one each.
    let candidates = get(&server, "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:40&required=HW_CPU_X86_AVX2,!COMPUTE_STATUS_DISABLED");
    let mut roots: Vec<String> = Vec::new();
    for request in candidates["allocation_requests"].as_array().unwrap() {
        for (rp, held) in request["allocations"].as_object().unwrap() {
            if held["resources"].get("VCPU").is_some() && !roots.contains(rp) {
                roots.push(rp.clone());
            }
        }
    }
    let eligible = roots.len() as u64;
    assert!(eligible > 10, "{candidates}");

    // Nova's way: a GET and a PUT per instance at the least (more after a 409),
    // every instance an allocation of the run's project.
    let nova = mass_start(
        &url,
        dir.path(),
        "nova",
        &["--way", "nova", "--instances", "30", "--schedulers", "4"],
    );
    assert_eq!(nova["placed"], 30, "{nova}");
    assert_eq!(nova["unplaced"], 0, "{nova}");
    let requests = nova["requests"].as_u64().unwrap();
    assert_eq!(
        requests,
        60 + 2 * nova["retries"].as_u64().unwrap(),
        "{nova}"
    );
    let project = nova["project_id"].as_str().unwrap();
    assert_eq!(load(&server, project), (30, 60, 30 * 4096), "{nova}");

    // allot's way, one request per instance: pending claims of the run's project.
    let pick = mass_start(
        &url,
        dir.path(),
        "pick",
        &["--way", "pick", "--instances", "30", "--schedulers", "4"],
    );
    assert_eq!(
        (pick["placed"].as_u64(), pick["requests"].as_u64()),
        (Some(30), Some(30)),
        "{pick}"
    );
    assert_eq!(pick["retries"], 0, "{pick}");
    let pending = get(
        &server,
        &format!(
            "/pending?project_id={}",
            pick["project_id"].as_str().unwrap()
        ),
    );
    assert_eq!(pending["pending"]["VCPU"], 60, "{pending}");
    assert_eq!(pending["pending"]["DISK_GB"], 30 * 40, "{pending}");

    // One request for all; with different_roots at most one instance per root.
    let all = mass_start(
        &url,
        dir.path(),
        "all",
        &["--way", "pick-all", "--instances", "30"],
    );
    assert_eq!(
        (all["placed"].as_u64(), all["requests"].as_u64()),
        (Some(30), Some(1)),
        "{all}"
    );
    let spread = mass_start(
        &url,
        dir.path(),
        "spread",
        &[
            "--way",
            "pick-all",
            "--affinity",
            "different_roots",
            "--instances",
            &eligible.to_string(),
        ],
    );
    assert_eq!(spread["placed"].as_u64(), Some(eligible), "{spread}");
    let claims = get(
        &server,
        &format!(
            "/claims?project_id={}",
            spread["project_id"].as_str().unwrap()
        ),
    );
    let mut on: Vec<String> = claims["claims"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            c["allocations"]
                .as_object()
                .unwrap()
                .keys()
                .filter(|rp| roots.contains(rp))
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect();
    on.sort();
    on.dedup();
    assert_eq!(on.len() as u64, eligible, "{claims}");
    // One more than there are roots: refused whole, nothing claimed.
    let over = mass_start(
        &url,
        dir.path(),
        "over",
        &[
            "--way",
            "pick-all",
            "--affinity",
            "different_roots",
            "--instances",
            &(eligible + 1).to_string(),
        ],
    );
    assert_eq!(
        (over["placed"].as_u64(), over["unplaced"].as_u64()),
        (Some(0), Some(eligible + 1)),
        "{over}"
    );
    assert_eq!(over["conflicts_capacity"], 1, "{over}");
}

/// Runs `allot bench groups-anti` with `args` on the 20 seeded roots; its table and
/// JSON report.
fn groups_anti(url: &str, dir: &std::path::Path, way: &str, args: &[&str]) -> (String, Value) {
    let report = dir.join(format!("groups-anti-{way}.json"));
    let mut all = vec!["groups-anti", "--way", way, "--roots", "20", "--url", url];
    all.extend_from_slice(&["--json", report.to_str().unwrap()]);
    all.extend_from_slice(args);
    let table = bench(&all);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(table.contains("groups anti"), "{table}");
    // Whatever was placed, the read-back found it held, nothing over capacity, and
    // every placed instance where the rule is counted.
    assert_eq!(report["held"], true, "{table}\n{report}");
    assert_eq!(report["over_capacity"], serde_json::json!([]), "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert_eq!(
        report["violations"]["members_found"], report["placed"],
        "{report}"
    );
    (table, report)
}

#[test]
fn groups_anti_keeps_each_group_on_distinct_roots() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("groups.db"));
    let url = format!("http://{}", server.addr);
    bench(&["seed", "--shape", "flat", "--roots", "20", "--url", &url]);
    let small = ["--instances", "20", "--groups", "4", "--schedulers", "4"];

    // allot's way: 4 groups made on the server, then one pick per instance naming
    // its group (instance i in group i mod 4), none retried, none refused.
    let (table, pick) = groups_anti(&url, dir.path(), "pick", &small);
    assert!(table.contains("violations: 0 in 0 of 4 groups"), "{table}");
    assert_eq!(
        (pick["placed"].as_u64(), pick["requests"].as_u64()),
        (Some(20), Some(20)),
        "{pick}"
    );
    assert_eq!(pick["setup_requests"], 4, "{pick}");
    for figure in [
        "retries",
        "unplaced",
        "conflicts_generation",
        "conflicts_capacity",
    ] {
        assert_eq!(pick[figure], 0, "{figure}: {pick}");
    }
    assert_eq!(pick["conflicts_server_group"], 0, "{pick}");
    assert_eq!(pick["violations"]["count"], 0, "{pick}");
    assert_eq!(pick["violations"]["server_count"], 0, "{pick}");
    // The server holds the groups: 5 members each, on 5 distinct roots.
    let project = pick["project_id"].as_str().unwrap();
    let groups = get(&server, &format!("/server_groups?project_id={project}"));
    let groups = groups["server_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4, "{groups:?}");
    for group in groups {
        assert_eq!(group["policy"], "anti-affinity", "{group}");
        let shown = get(
            &server,
            &format!("/server_groups/{}", group["uuid"].as_str().unwrap()),
        );
        let mut roots: Vec<&str> = shown["placement"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|place| place["roots"].as_array().unwrap())
            .map(|root| root.as_str().unwrap())
            .collect();
        assert_eq!(roots.len(), 5, "{shown}");
        roots.sort();
        roots.dedup();
        assert_eq!(roots.len(), 5, "{shown}");
    }

    // Nova's way against allot: no group on the server, the hosts read back from
    // the allocations; a GET and a PUT per try.
    let (_, nova) = groups_anti(&url, dir.path(), "nova", &small);
    let placed = nova["placed"].as_u64().unwrap();
    assert_eq!(placed + nova["unplaced"].as_u64().unwrap(), 20, "{nova}");
    assert_eq!(nova["setup_requests"], 0, "{nova}");
    assert_eq!(nova["violations"]["server_count"], Value::Null, "{nova}");
    // Every 409 is tried again; a try whose candidates are all on the group's
    // hosts ends the instance after its GET.
    let retries = nova["retries"].as_u64().unwrap();
    let no_valid_host = nova["no_valid_host"].as_u64().unwrap();
    assert_eq!(
        nova["requests"].as_u64().unwrap(),
        2 * (placed + retries) + no_valid_host,
        "{nova}"
    );
}

/// `allot bench drain`, both ways on 20 seeded roots: two hosts of four instances
/// each, half of them in anti-affinity groups with members elsewhere; every
/// instance leaves the drained hosts, and no group ends with two members on a host.
#[test]
fn drain_moves_everyone_off_and_keeps_the_groups() {
    for way in ["drain", "nova"] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("a.db"));
        let url = format!("http://{}", server.addr);
        bench(&["seed", "--shape", "flat", "--roots", "20", "--url", &url]);
        let report = dir.path().join("drain.json");
        let out = bench(&[
            "drain",
            "--way",
            way,
            "--roots",
            "20",
            "--hosts",
            "2",
            "--per-host",
            "4",
            "--url",
            &url,
            "--json",
            report.to_str().unwrap(),
        ]);
        assert!(out.contains(&format!("drain {way}:")), "{out}");
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(report["instances"], 8, "{report}");
        assert_eq!(report["groups"], 4, "{report}");
        assert_eq!(report["left_on_drained_hosts"], 0, "{report}");
        assert_eq!(report["unplaced"], 0, "{report}");
        if way == "drain" {
            assert_eq!(report["violations"], 0, "{report}");
            assert_eq!(report["conflicts"], 0, "{report}");
            assert_eq!(
                (report["requests"].as_u64(), report["retries"].as_u64()),
                (Some(4), Some(0))
            );
        }
    }
}
