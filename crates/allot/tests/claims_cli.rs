//! `allot claims` and `allot pending` against the real binary serving on a real
//! socket: claims made from the command line (providers named or by uuid) are listed
//! with the API's filters, shown, summed per provider, consumer and project, confirmed
//! into allocations and released (twice harmlessly, or all of a consumer's); a claim
//! that does not fit, an unknown claim and an unknown provider name fail with the
//! reason on stderr.

mod support;

use std::process::{Command, Output};

use serde_json::{json, Value};
use support::{stdout_of, Server};

/// `allot ARGS` against `server` (the endpoint given by `ALLOT_URL`, as an operator's
/// shell would, and the token by flag).
fn allot(server: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_allot"))
        .args(args)
        .args(["--token", "admin"])
        .env("ALLOT_URL", format!("http://{}", server.addr))
        .output()
        .expect("run allot")
}

fn json_of(output: Output) -> Value {
    let text = stdout_of(output);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The stderr of a command that must fail.
fn failure_of(output: Output) -> String {
    assert!(
        !output.status.success(),
        "should have failed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn claims_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    let rp = "7d5a9c4e-0000-4000-8000-000000000001";
    let (status, _) = server.call(
        "POST",
        "/resource_providers",
        Some(&json!({"uuid": rp, "name": "cn1"}).to_string()),
    );
    assert_eq!(status, 200);
    let inventories = json!({"resource_provider_generation": 0, "inventories": {
        "VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}});
    let (status, body) = server.call(
        "PUT",
        &format!("/resource_providers/{rp}/inventories"),
        Some(&inventories.to_string()),
    );
    assert_eq!(status, 200, "{body}");

    let c1 = "c0000000-0000-4000-8000-000000000001";
    let c2 = "c0000000-0000-4000-8000-000000000002";
    // The provider by name for one class and by uuid for the other: one provider.
    let first = json_of(allot(
        &server,
        &[
            "claims",
            "create",
            "--consumer",
            c1,
            "--project",
            "proj",
            "--user",
            "user",
            "--type",
            "INSTANCE",
            "--tag",
            "mass start",
            "--expires-in",
            "never",
            "--resource",
            "cn1:VCPU=4",
            "--resource",
            &format!("{rp}:MEMORY_MB=1024"),
            "-f",
            "json",
        ],
    ));
    assert_eq!(first["state"], "pending");
    assert_eq!(first["consumer_uuid"], c1);
    assert_eq!(first["consumer_type"], "INSTANCE");
    assert_eq!(first["tag"], "mass start");
    assert_eq!(first["expires_at"], Value::Null);
    assert_eq!(
        first["allocations"],
        json!({rp: {"resources": {"MEMORY_MB": 1024, "VCPU": 4}}})
    );
    let first_uuid = first["uuid"].as_str().unwrap().to_owned();

    // The table form of create is the claim shown.
    let second = stdout_of(allot(
        &server,
        &[
            "claims",
            "create",
            "--consumer",
            c2,
            "--project",
            "proj",
            "--user",
            "user",
            "--expires-in",
            "3600",
            "--resource",
            "cn1:VCPU=2",
        ],
    ));
    assert!(second.contains("\nstate:         pending\n"), "{second}");
    assert!(second.contains(&format!("\n{rp}  VCPU   2\n")), "{second}");
    let second_uuid = second
        .lines()
        .find_map(|l| l.strip_prefix("uuid:"))
        .unwrap()
        .trim()
        .to_owned();

    // 6 of 8 VCPU are promised: 4 more do not fit, and the server says why.
    let refused = failure_of(allot(
        &server,
        &[
            "claims",
            "create",
            "--project",
            "proj",
            "--user",
            "user",
            "--resource",
            "cn1:VCPU=4",
        ],
    ));
    assert!(refused.contains("409"), "{refused}");
    assert!(refused.contains("allot.claim.does_not_fit"), "{refused}");
    assert!(refused.contains("VCPU"), "{refused}");

    // The list: both claims, oldest first (then by uuid: these two were made within
    // the same second, most likely), in a table and as the API's JSON.
    let table = stdout_of(allot(&server, &["claims", "list"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("UUID"), "{table}");
    let row = |uuid: &str| *lines.iter().find(|l| l.starts_with(uuid)).unwrap();
    assert!(
        row(&first_uuid).ends_with("mass start  never                 MEMORY_MB=1024, VCPU=4"),
        "{table}"
    );
    assert!(row(&second_uuid).ends_with("  VCPU=2"), "{table}");
    let uuids = |value: Value| -> Vec<String> {
        value["claims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["uuid"].as_str().unwrap().to_owned())
            .collect()
    };
    let by = |args: &[&str]| {
        let mut all = vec!["claims", "list", "-f", "json"];
        all.extend_from_slice(args);
        uuids(json_of(allot(&server, &all)))
    };
    let all = by(&[]);
    let mut sorted = [first_uuid.clone(), second_uuid.clone()];
    sorted.sort();
    let table_order: Vec<&str> = lines[1..].iter().map(|l| &l[..36]).collect();
    assert_eq!(
        all, table_order,
        "the table and the JSON agree on the order"
    );
    let mut all_sorted = all.clone();
    all_sorted.sort();
    assert_eq!(all_sorted, sorted);
    assert_eq!(by(&["--consumer", c2]), [second_uuid.as_str()]);
    assert_eq!(by(&["--provider", "cn1"]).len(), 2);
    assert_eq!(by(&["--type", "INSTANCE"]), [first_uuid.as_str()]);
    assert_eq!(by(&["--tag", "mass start"]), [first_uuid.as_str()]);
    assert_eq!(by(&["--limit", "1"]), all[..1]);
    assert!(by(&["--state", "released"]).is_empty());
    assert_eq!(by(&["--class", "MEMORY_MB"]), [first_uuid.as_str()]);
    assert_eq!(by(&["--class", "VCPU"]).len(), 2);

    // Pending totals: per provider (by name), per consumer, per project.
    let pending = stdout_of(allot(&server, &["pending", "cn1"]));
    assert_eq!(
        pending,
        "CLASS      PENDING\nMEMORY_MB  1024\nVCPU       6\n"
    );
    let detail = json_of(allot(
        &server,
        &["pending", rp, "--consumers", "-f", "json"],
    ));
    assert_eq!(
        detail,
        json!({"consumers": {c1: {"MEMORY_MB": 1024, "VCPU": 4}, c2: {"VCPU": 2}},
               "pending": {"MEMORY_MB": 1024, "VCPU": 6}})
    );
    let project = json_of(allot(
        &server,
        &["pending", "--project", "proj", "-f", "json"],
    ));
    assert_eq!(project, json!({"pending": {"MEMORY_MB": 1024, "VCPU": 6}}));
    // The host alone is the whole tree here.
    assert_eq!(
        json_of(allot(&server, &["pending", "cn1", "--tree", "-f", "json"])),
        json!({"pending": {"MEMORY_MB": 1024, "VCPU": 6}})
    );
    let memory = json_of(allot(
        &server,
        &[
            "pending",
            "--project",
            "proj",
            "--class",
            "MEMORY_MB",
            "-f",
            "json",
        ],
    ));
    assert_eq!(memory, json!({"pending": {"MEMORY_MB": 1024}}));

    // Confirm: the claim becomes the consumer's allocation and stops being pending.
    let confirmed = json_of(allot(
        &server,
        &["claims", "confirm", &first_uuid, "-f", "json"],
    ));
    assert_eq!(confirmed["state"], "confirmed");
    assert_ne!(confirmed["ended_at"], Value::Null);
    let (status, body) = server.call("GET", &format!("/allocations/{c1}"), None);
    assert_eq!(status, 200);
    let allocations: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        allocations["allocations"][rp]["resources"],
        json!({"MEMORY_MB": 1024, "VCPU": 4})
    );

    // Release, twice (harmless), then all of the consumer's: nothing is pending.
    let released = stdout_of(allot(&server, &["claims", "release", &second_uuid]));
    assert_eq!(released, format!("released claim {second_uuid}\n"));
    stdout_of(allot(&server, &["claims", "release", &second_uuid]));
    stdout_of(allot(&server, &["claims", "release", "--consumer", c2]));
    let shown = stdout_of(allot(&server, &["claims", "show", &second_uuid]));
    assert!(shown.contains("\nstate:         released\n"), "{shown}");
    assert_eq!(
        json_of(allot(&server, &["pending", "cn1", "-f", "json"])),
        json!({"pending": {}})
    );
    assert_eq!(
        by(&["--state", "released"]),
        [second_uuid.as_str()],
        "the released claim is listed as such"
    );

    // Failures: an unknown claim, an unknown provider name, confirming a released
    // claim; each a failing exit with the reason.
    let unknown = "0fffffff-0000-4000-8000-000000000000";
    let missing = failure_of(allot(&server, &["claims", "show", unknown]));
    assert!(missing.contains("404"), "{missing}");
    let no_name = failure_of(allot(&server, &["pending", "cn-nowhere"]));
    assert!(
        no_name.contains("no resource provider is named \"cn-nowhere\""),
        "{no_name}"
    );
    let not_pending = failure_of(allot(&server, &["claims", "confirm", &second_uuid]));
    assert!(
        not_pending.contains("allot.claim.not_pending"),
        "{not_pending}"
    );
    server.terminate();
}

/// `allot claims pick`: the server chooses; one consumer gets one claim, a mass start
/// with anti-affinity places one instance per host and names the others.
#[test]
fn picks_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    let mut hosts = Vec::new();
    for name in ["cn1", "cn2"] {
        let (status, body) = server.call(
            "POST",
            "/resource_providers",
            Some(&json!({"name": name}).to_string()),
        );
        assert_eq!(status, 200, "{body}");
        let uuid = serde_json::from_str::<Value>(&body).unwrap()["uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        let inventories = json!({"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": 8}}});
        let (status, body) = server.call(
            "PUT",
            &format!("/resource_providers/{uuid}/inventories"),
            Some(&inventories.to_string()),
        );
        assert_eq!(status, 200, "{body}");
        hosts.push(uuid);
    }
    let common = [
        "claims",
        "pick",
        "--request",
        "resources=VCPU:2",
        "--project",
        "p",
        "--user",
        "u",
    ];
    let one = json_of(allot(
        &server,
        &[&common[..], &["--sort", "spread", "-f", "json"]].concat(),
    ));
    assert_eq!(one["claims"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["unplaced"], json!([]));
    let placed = json_of(allot(
        &server,
        &[
            &common[..],
            &[
                "--count",
                "3",
                "--affinity",
                "different_roots",
                "--partial",
                "-f",
                "json",
            ],
        ]
        .concat(),
    ));
    let claims = placed["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2, "{placed}");
    let on: std::collections::BTreeSet<&str> = claims
        .iter()
        .map(|c| {
            c["allocations"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .as_str()
        })
        .collect();
    assert_eq!(on.len(), 2, "one per host: {placed}");
    assert_eq!(placed["unplaced"].as_array().unwrap().len(), 1);
    // All or nothing, the default: refused, and the message says why.
    let e = failure_of(allot(
        &server,
        &[
            &common[..],
            &["--count", "3", "--affinity", "different_roots"],
        ]
        .concat(),
    ));
    assert!(e.contains("Only 2 of 3 instances fit"), "{e}");
    // The table lists the claims and names the unplaced.
    let text = stdout_of(allot(
        &server,
        &[
            &common[..],
            &["--count", "3", "--affinity", "different_roots", "--partial"],
        ]
        .concat(),
    ));
    assert!(
        text.contains("CONSUMER") && text.contains("unplaced: "),
        "{text}"
    );
}
