//! Durability across restarts, through the real binary over real HTTP: what was
//! acknowledged before a graceful stop, and before a `kill -9`, is there afterwards;
//! the start after the graceful stop reads the view it saved, the start after the
//! kill the tables.

mod support;

use support::Server;

const PROVIDER: &str = "5a4bbf3c-4cb8-4b5e-9a0c-2f1f1a6a0001";

/// Starts the server with its INFO lines, which say where the view came from.
fn start_logging(db: &std::path::Path) -> Server {
    let url = format!("sqlite:{}", db.display());
    Server::start_args(&url, &["--bind", "127.0.0.1:0", "--log", "info"], &[])
}

fn said(server: &Server, what: &str) {
    let log = server.startup_log();
    assert!(
        log.iter().any(|l| l.contains(what)),
        "{what:?} not in {log:#?}"
    );
}

#[test]
fn data_survives_graceful_restart_and_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested").join("allot.db");

    // First life: write, then stop gracefully.
    let server = Server::start(&db);
    assert_eq!(
        server
            .call("PUT", "/resource_classes/CUSTOM_GPU_SLICE", None)
            .0,
        201
    );
    assert_eq!(server.call("PUT", "/traits/CUSTOM_FAST", None).0, 201);
    let body = format!(r#"{{"name": "cn1", "uuid": "{PROVIDER}"}}"#);
    assert_eq!(
        server.call("POST", "/resource_providers", Some(&body)).0,
        200
    );
    server.terminate();

    // Second life: everything is back (from the view the stop saved beside the
    // database); write more, then die without warning right after the
    // acknowledgement.
    let server = start_logging(&db);
    said(&server, "read the view saved at the last stop");
    assert_eq!(
        server
            .call("GET", "/resource_classes/CUSTOM_GPU_SLICE", None)
            .0,
        200
    );
    assert_eq!(server.call("GET", "/traits/CUSTOM_FAST", None).0, 204);
    let (status, body) = server.call("GET", &format!("/resource_providers/{PROVIDER}"), None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"cn1\""), "{body}");
    assert_eq!(
        server.call("PUT", "/traits/CUSTOM_AFTER_RESTART", None).0,
        201
    );
    let inventory = r#"{"resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 32, "allocation_ratio": 4.0}}}"#;
    let (status, body) = server.call(
        "PUT",
        &format!("/resource_providers/{PROVIDER}/inventories"),
        Some(inventory),
    );
    assert_eq!(status, 200, "{body}");
    server.kill9();

    // Third life: the writes acknowledged before the kill are there (from the
    // tables: the saved view is older than the last commit).
    let server = start_logging(&db);
    said(&server, "reading the tables");
    assert_eq!(
        server.call("GET", "/traits/CUSTOM_AFTER_RESTART", None).0,
        204
    );
    let (status, body) = server.call(
        "GET",
        &format!("/resource_providers/{PROVIDER}/inventories"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["inventories"]["VCPU"]["total"], 32);
    assert_eq!(v["inventories"]["VCPU"]["allocation_ratio"], 4.0);
    assert_eq!(v["resource_provider_generation"], 1);
    server.terminate();
}
