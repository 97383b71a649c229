//! `allot classes` against the real binary serving on a real socket: the table and
//! `-f json` list the standard classes' metadata and a custom class's once `allot
//! classes set` gave it some; a refusal is a failing exit with the server's reason.

mod support;

use std::process::{Command, Output};

use support::{stdout_of, Server};

fn classes(server: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_allot"))
        .arg("classes")
        .args(args)
        .args([
            "--url",
            &format!("http://{}", server.addr),
            "--token",
            "admin",
        ])
        .output()
        .expect("run allot classes")
}

#[test]
fn lists_and_sets_class_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("allot.db"));
    let (status, _) = server.call("PUT", "/resource_classes/CUSTOM_WIDGET", None);
    assert_eq!(status, 201);

    // The table: a header, the standard classes with their units, the custom class
    // with nothing set yet.
    let table = stdout_of(classes(&server, &[]));
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("NAME"), "{table}");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("MEMORY_MB")[1], "MiB");
    assert_eq!(row("CUSTOM_WIDGET")[1..], ["-", "-", "-"]);

    let set = stdout_of(classes(
        &server,
        &[
            "set",
            "CUSTOM_WIDGET",
            "--units",
            "count",
            "--display-name",
            "Widgets",
        ],
    ));
    assert!(set.contains("CUSTOM_WIDGET  count  Widgets"), "{set}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(classes(&server, &["-f", "json"]))).unwrap();
    let list = json.as_array().unwrap();
    assert_eq!(list[0]["name"], "VCPU");
    assert_eq!(list[0]["units"], "count");
    let widget = list.iter().find(|c| c["name"] == "CUSTOM_WIDGET").unwrap();
    assert_eq!(
        widget,
        &serde_json::json!({"name": "CUSTOM_WIDGET", "units": "count",
                            "display_name": "Widgets", "description": null})
    );

    // A standard class's metadata is fixed: the command fails with the reason.
    let refused = classes(&server, &["set", "VCPU", "--units", "cores"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("standard resource class VCPU"), "{stderr}");
    server.terminate();
}
