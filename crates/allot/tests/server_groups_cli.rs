//! `allot server-groups` against the real binary serving on a real socket: groups
//! made, listed with the API's filters, shown with where each member is, members
//! added and removed (a member that would break the rule refused with the server's
//! code), deleted (refused with members unless forced); and Nova's groups imported
//! from what `openstack server group list --all-projects --long -f json` prints, both
//! before compute microversion 2.64 (`Policies`) and from it (`Policy`), a group
//! Nova holds broken imported and said so, a group allot cannot hold skipped with a
//! failing exit after the others, and an import run twice changing nothing.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use support::{stdout_of, Server};

/// `allot server-groups ARGS` against `server` (the endpoint from `ALLOT_URL`, as an
/// operator's shell gives it, and the token by flag), `stdin` on its standard input.
fn allot_with(server: &Server, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_allot"))
        .arg("server-groups")
        .args(args)
        .args(["--token", "admin"])
        .env("ALLOT_URL", format!("http://{}", server.addr))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run allot");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("wait for allot")
}

fn allot(server: &Server, args: &[&str]) -> Output {
    allot_with(server, args, "")
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

const CN1: &str = "7d5a9c4e-0000-4000-8000-000000000001";
const CN2: &str = "7d5a9c4e-0000-4000-8000-000000000002";
const C1: &str = "c0000000-0000-4000-8000-000000000001";
const C2: &str = "c0000000-0000-4000-8000-000000000002";
const C3: &str = "c0000000-0000-4000-8000-000000000003";

/// A server with two roots of 8 VCPU, `cn1` and `cn2`, and consumers holding one
/// VCPU each where `placed` says.
fn cloud(placed: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    for (uuid, name) in [(CN1, "cn1"), (CN2, "cn2")] {
        let body = json!({"uuid": uuid, "name": name});
        let (status, text) = server.call("POST", "/resource_providers", Some(&body.to_string()));
        assert_eq!(status, 200, "{text}");
        let body = json!({"resource_provider_generation": 0,
                          "inventories": {"VCPU": {"total": 8}}});
        let path = format!("/resource_providers/{uuid}/inventories");
        let (status, text) = server.call("PUT", &path, Some(&body.to_string()));
        assert_eq!(status, 200, "{text}");
    }
    for (consumer, root) in placed {
        let body = json!({"allocations": {*root: {"resources": {"VCPU": 1}}},
                          "project_id": "demo", "user_id": "alice",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        let path = format!("/allocations/{consumer}");
        let (status, text) = server.call("PUT", &path, Some(&body.to_string()));
        assert_eq!(status, 204, "{text}");
    }
    (dir, server)
}

#[test]
fn server_groups_from_the_command_line() {
    let (_dir, server) = cloud(&[(C1, CN1), (C2, CN2), (C3, CN1)]);
    let web = "5c1e0000-0000-4000-8000-000000000001";
    let created = json_of(allot(
        &server,
        &[
            "create",
            "web",
            "--project",
            "demo",
            "--user",
            "alice",
            "--policy",
            "anti-affinity",
            "--uuid",
            web,
            "-f",
            "json",
        ],
    ));
    assert_eq!(created["uuid"], web);
    assert_eq!(created["name"], "web");
    assert_eq!(created["policy"], "anti-affinity");
    assert_eq!(created["rules"], json!({"max_server_per_host": 1}));
    assert_eq!(created["scope"], "root");
    assert_eq!(created["enforce_on_allocations"], false);
    assert_eq!(created["user_id"], "alice");
    assert_eq!(created["members"], json!([]));

    // The table form of create is the group shown; its uuid drawn by the server.
    let table = stdout_of(allot(
        &server,
        &[
            "create",
            "db",
            "--project",
            "other",
            "--policy",
            "soft-anti-affinity",
            "--max-per-host",
            "2",
            "--scope",
            "trait:CUSTOM_RACK_",
            "--enforce-on-allocations",
        ],
    ));
    assert!(
        table.contains("\npolicy:                 soft-anti-affinity\n"),
        "{table}"
    );
    assert!(table.contains("\nmax per host:           2\n"), "{table}");
    assert!(
        table.contains("\nscope:                  trait:CUSTOM_RACK_\n"),
        "{table}"
    );
    assert!(
        table.contains("\nenforce on allocations: true\n"),
        "{table}"
    );
    let db = table
        .lines()
        .find_map(|l| l.strip_prefix("uuid:"))
        .unwrap()
        .trim()
        .to_owned();

    // The server's refusal, with its status and reason, on stderr.
    let refused = failure_of(allot(
        &server,
        &[
            "create",
            "x",
            "--project",
            "demo",
            "--policy",
            "affinity",
            "--max-per-host",
            "2",
        ],
    ));
    assert!(refused.contains("400"), "{refused}");
    assert!(refused.contains("max_server_per_host"), "{refused}");

    // Lists: both, by uuid; the filters are the API's.
    let list = stdout_of(allot(&server, &["list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    assert!(lines[0].starts_with("UUID"), "{list}");
    let row = |uuid: &str| *lines.iter().find(|l| l.starts_with(uuid)).unwrap();
    assert!(
        row(web)
            .ends_with("  web   demo     anti-affinity       1             root                0"),
        "{list}"
    );
    assert!(
        row(&db)
            .ends_with("  db    other    soft-anti-affinity  2             trait:CUSTOM_RACK_  0"),
        "{list}"
    );
    let uuids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list", "-f", "json"];
        all.extend_from_slice(args);
        json_of(allot(&server, &all))["server_groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["uuid"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut both = vec![web.to_owned(), db.clone()];
    both.sort();
    assert_eq!(uuids(&[]), both);
    assert_eq!(uuids(&["--project", "other"]), [db.as_str()]);
    assert_eq!(uuids(&["--policy", "anti-affinity"]), [web]);
    assert_eq!(uuids(&["--limit", "1"]), both[..1]);
    assert!(uuids(&["--policy", "affinity"]).is_empty());

    // Members: two on distinct roots keep the rule; a third on cn1 would break it,
    // and the server says so.
    let group = json_of(allot(
        &server,
        &["members", web, "--add", C1, "--add", C2, "-f", "json"],
    ));
    assert_eq!(group["members"], json!([C1, C2]));
    assert_eq!(group["violations"], 0);
    assert_eq!(group["placement"][C1]["roots"], json!([CN1]));
    assert_eq!(group["placement"][C2]["roots"], json!([CN2]));
    let refused = failure_of(allot(&server, &["members", web, "--add", C3]));
    assert!(refused.contains("409"), "{refused}");
    assert!(refused.contains("allot.server_group.violated"), "{refused}");
    let shown = stdout_of(allot(&server, &["show", web]));
    assert!(shown.contains("\nmembers:                2\n"), "{shown}");
    assert!(shown.contains("\nviolations:             0\n"), "{shown}");
    assert!(
        shown.contains(&format!("\n{C1}  {CN1}  {CN1}\n")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("\n{C2}  {CN2}  {CN2}\n")),
        "{shown}"
    );
    // Removed, then neither added nor removed: the group as it is.
    stdout_of(allot(&server, &["members", web, "--remove", C2]));
    let group = json_of(allot(&server, &["members", web, "-f", "json"]));
    assert_eq!(group["members"], json!([C1]));

    // Delete: refused with a member, forced; then it is gone.
    let refused = failure_of(allot(&server, &["delete", web]));
    assert!(refused.contains("409"), "{refused}");
    assert_eq!(
        stdout_of(allot(&server, &["delete", web, "--force"])),
        format!("deleted server group {web}\n")
    );
    assert_eq!(
        stdout_of(allot(&server, &["delete", &db, "-f", "json"])),
        ""
    );
    let gone = failure_of(allot(&server, &["show", web]));
    assert!(gone.contains("404"), "{gone}");
    assert!(uuids(&[]).is_empty());
}

/// Groups as `openstack server group list --all-projects --long -f json` prints them
/// before compute microversion 2.64: `Policies`, a list from the client of late 2020
/// on, text joined by ", " before; one group with two policies.
fn nova_before_2_64(anti: &str, aff: &str, two: &str) -> String {
    format!(
        r#"[
  {{
    "ID": "{anti}",
    "Name": "web",
    "Policies": [
      "anti-affinity"
    ],
    "Members": [
      "{C1}",
      "{C2}"
    ],
    "Project Id": "6f70656e737461636b20342065766572",
    "User Id": "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b"
  }},
  {{
    "ID": "{two}",
    "Name": "legacy",
    "Policies": "affinity, anti-affinity",
    "Members": "",
    "Project Id": "6f70656e737461636b20342065766572",
    "User Id": "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b"
  }},
  {{
    "ID": "{aff}",
    "Name": "db",
    "Policies": "affinity",
    "Members": "{C3}",
    "Project Id": "6f70656e737461636b20342065766572",
    "User Id": "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b"
  }}
]
"#
    )
}

/// The same cloud listed from 2.64: `Policy`; and `Rules`, which `list` does not
/// print but `show` does, as an object or as the table's text.
fn nova_from_2_64(anti: &str, soft: &str) -> String {
    format!(
        r#"[
  {{
    "ID": "{anti}",
    "Name": "web",
    "Policy": "anti-affinity",
    "Rules": {{"max_server_per_host": 2}},
    "Members": [
      "{C1}",
      "{C2}"
    ],
    "Project Id": "6f70656e737461636b20342065766572",
    "User Id": "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b"
  }},
  {{
    "ID": "{soft}",
    "Name": "cache",
    "Policy": "soft-anti-affinity",
    "Rules": "max_server_per_host='3'",
    "Members": [],
    "Project Id": "6f70656e737461636b20342065766572",
    "User Id": "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b"
  }}
]
"#
    )
}

#[test]
fn nova_groups_are_imported_as_nova_holds_them() {
    // C1 and C2 on one host: Nova holds that anti-affinity group broken (a forced
    // move, an evacuation).
    let (dir, server) = cloud(&[(C1, CN1), (C2, CN1), (C3, CN2)]);
    let anti = "0d1b4e8e-3c2f-4f5b-9a1e-2b7c6d5e4f30";
    let aff = "5c1e7a90-8d2b-4e6f-a1b3-c4d5e6f7a8b9";
    let two = "a7f3c2d1-0e9b-48a7-b6c5-d4e3f2a1b0c9";
    let soft = "b8e4d3c2-1f0a-49b8-a7d6-e5f4a3b2c1d0";
    let old = dir.path().join("nova-2.63.json");
    std::fs::write(&old, nova_before_2_64(anti, aff, two)).unwrap();
    let old = old.to_str().unwrap();

    // The group with two policies is skipped, and the command fails, after the
    // others are imported.
    let first = allot(&server, &["import", old]);
    let stdout = String::from_utf8_lossy(&first.stdout).into_owned();
    let stderr = failure_of(first);
    assert_eq!(
        stdout,
        format!(
            "imported {anti} \"web\": anti-affinity, 2 members; held broken by Nova: 1\n\
             imported {aff} \"db\": affinity, 1 member\n"
        )
    );
    assert!(
        stderr.contains(&format!(
            "skipped {two} \"legacy\": 2 policies (affinity, anti-affinity)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 of 3 server groups not imported"),
        "{stderr}"
    );
    let web = json_of(allot(&server, &["show", anti, "-f", "json"]));
    assert_eq!(web["name"], "web");
    assert_eq!(web["policy"], "anti-affinity");
    assert_eq!(web["project_id"], "6f70656e737461636b20342065766572");
    assert_eq!(web["user_id"], "9b2f4e0c7d1a4c3e8f5b6a7d8e9f0a1b");
    assert_eq!(web["members"], json!([C1, C2]));
    assert_eq!(web["enforce_on_allocations"], false);
    assert_eq!(web["violations"], 1);
    let db = json_of(allot(&server, &["show", aff, "-f", "json"]));
    assert_eq!(
        (&db["policy"], &db["members"]),
        (&json!("affinity"), &json!([C3]))
    );
    let missing = failure_of(allot(&server, &["show", two]));
    assert!(missing.contains("404"), "{missing}");

    // Run again, a second later: the same lines, and nothing written.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let again = allot(&server, &["import", old]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), stdout);
    failure_of(again);
    let web_again = json_of(allot(&server, &["show", anti, "-f", "json"]));
    assert_eq!(web_again["updated_at"], web["updated_at"]);

    // From 2.64, on standard input: the web group replaced with its rule of 2 per
    // host (no longer broken), a soft group with its rule as text.
    let new = nova_from_2_64(anti, soft);
    let imported = stdout_of(allot_with(&server, &["import", "-"], &new));
    assert_eq!(
        imported,
        format!(
            "imported {anti} \"web\": anti-affinity, 2 members\n\
             imported {soft} \"cache\": soft-anti-affinity, 0 members\n"
        )
    );
    let web = json_of(allot(&server, &["show", anti, "-f", "json"]));
    assert_eq!(web["rules"], json!({"max_server_per_host": 2}));
    assert_eq!(web["violations"], 0);
    let cache = json_of(allot(&server, &["show", soft, "-f", "json"]));
    assert_eq!(cache["rules"], json!({"max_server_per_host": 3}));
    assert_eq!(cache["scope"], "root");

    // Twice, with -f json: the groups as the answers give them, nothing skipped,
    // nothing changed.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let answer = json_of(allot_with(&server, &["import", "-", "-f", "json"], &new));
    assert_eq!(answer["skipped"], json!([]));
    let groups = answer["server_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["uuid"], anti);
    assert_eq!(groups[0]["updated_at"], web["updated_at"]);
    assert_eq!(groups[1]["updated_at"], cache["updated_at"]);
    let all = json_of(allot(&server, &["list", "-f", "json"]));
    assert_eq!(all["server_groups"].as_array().unwrap().len(), 3);

    // Not Nova's JSON at all: refused before anything is put.
    let refused = failure_of(allot_with(&server, &["import", "-"], "ID  Name  Policy\n"));
    assert!(refused.contains("not JSON"), "{refused}");
}
