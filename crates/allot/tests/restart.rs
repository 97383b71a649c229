//! Durability across restarts, through the real binary over real HTTP: what was
//! acknowledged before a graceful stop, and before a `kill -9`, is there afterwards.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `allot serve` on an ephemeral port.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(db: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_allot"))
            .args(["serve", "--bind", "127.0.0.1:0", "--database"])
            .arg(format!("sqlite:{}", db.display()))
            .env("ALLOT_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start allot");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("allot exited before listening")
                .expect("read stderr");
            if let Some(addr) = line.strip_prefix("allot: listening on http://") {
                break addr.to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr }
    }

    /// One request; returns (status, body).
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let body = body.unwrap_or("");
        let content_type = if body.is_empty() {
            ""
        } else {
            "content-type: application/json\r\n"
        };
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nx-auth-token: admin\r\n\
             openstack-api-version: placement latest\r\naccept: application/json\r\n\
             {content_type}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read response");
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    fn terminate(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(
            exit.success(),
            "graceful shutdown should exit 0, got {exit:?}"
        );
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

const PROVIDER: &str = "5a4bbf3c-4cb8-4b5e-9a0c-2f1f1a6a0001";

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

    // Second life: everything is back; write more, then die without warning right
    // after the acknowledgement.
    let server = Server::start(&db);
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

    // Third life: the writes acknowledged before the kill are there.
    let server = Server::start(&db);
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
