//! Operator policy overrides over real HTTP against the real binary (issue 13): a
//! policy file's rules replace the built-in ones they name, a SIGHUP rereads it (a
//! file that no longer parses keeps the old rules), a rule that does not parse stops
//! the start, and `allot policy list` shows what is in force.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::Server;

/// A running `allot serve`, killed on drop.
fn allot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_allot"))
}

fn start(dir: &Path, policy: &Path) -> Server {
    let db = format!("sqlite:{}", dir.join("allot.db").display());
    let policy = policy.to_str().expect("a UTF-8 path");
    Server::start_args(
        &db,
        &["--bind", "127.0.0.1:0", "--policy-file", policy],
        &[],
    )
}

/// One request as a `noauth2` caller with `roles`; the status and body.
fn call(addr: &str, method: &str, path: &str, roles: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nopenstack-api-version: placement latest\r\n\
         accept: application/json\r\ncontent-type: application/json\r\nconnection: close\r\n\
         x-auth-token: someone:someproject\r\nx-roles: {roles}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {raw:?}"));
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

fn list(addr: &str, roles: &str) -> u16 {
    call(addr, "GET", "/resource_providers", roles, "").0
}

fn create(addr: &str, roles: &str, name: &str) -> (u16, String) {
    let body = format!("{{\"name\": \"{name}\"}}");
    call(addr, "POST", "/resource_providers", roles, &body)
}

#[test]
fn a_policy_file_overrides_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "# readers may list; nobody creates\n\
         \"placement:resource_providers:list\": \"role:reader\"\n\
         \"placement:resource_providers:create\": \"!\"\n",
    )
    .unwrap();
    let server = start(dir.path(), &policy);
    let a = server.addr.as_str();

    assert_eq!(list(a, "reader"), 200);
    assert_eq!(list(a, "member"), 403);
    // The file replaces the built-in rule: an admin without `reader` may not list.
    assert_eq!(list(a, "admin"), 403);
    let (status, body) = create(a, "admin", "rp1");
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("placement:resource_providers:create"),
        "{body}"
    );
    // A rule the file does not name keeps its built-in default (admin or service):
    // a reader is refused before the lookup, an admin gets the lookup's 404.
    let show = "/resource_providers/5a1c1b5e-0000-4000-8000-000000000001";
    assert_eq!(call(a, "GET", show, "reader", "").0, 403);
    assert_eq!(call(a, "GET", show, "admin", "").0, 404);

    // Rewritten and reread on SIGHUP: admins create, nobody lists.
    std::fs::write(
        &policy,
        "\"placement:resource_providers:list\": \"!\"\n\
         \"placement:resource_providers:create\": \"role:admin and not role:reader\"\n",
    )
    .unwrap();
    server.hup();
    let mut reloaded = false;
    for _ in 0..100 {
        if list(a, "reader") == 403 {
            reloaded = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(reloaded, "the SIGHUP did not reload the policy file");
    assert_eq!(create(a, "admin", "rp1").0, 200);
    assert_eq!(create(a, "admin,reader", "rp2").0, 403);

    // A file that no longer parses keeps the old rules.
    std::fs::write(&policy, "\"placement:resource_providers:list\": \"(@\"\n").unwrap();
    server.hup();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(list(a, "reader"), 403);
    assert_eq!(create(a, "admin", "rp3").0, 200);
    drop(server);

    // At start, the same file stops `allot serve`, naming the rule and the column.
    let out = allot()
        .args(["serve", "--bind", "127.0.0.1:0", "--database"])
        .arg(format!("sqlite:{}", dir.path().join("b.db").display()))
        .arg("--policy-file")
        .arg(&policy)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rule \"placement:resource_providers:list\": at column 3"),
        "{err}"
    );

    // `allot policy list` shows the file's rules and the built-in rest.
    std::fs::write(&policy, "\"placement:resource_providers:create\": \"!\"\n").unwrap();
    let out = allot()
        .args(["policy", "list", "--policy", "legacy", "--policy-file"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\"placement:resource_providers:create\": \"!\"  # policy file\n"),
        "{text}"
    );
    assert!(
        text.contains("\"service_api\": \"(role:service) or (role:admin)\""),
        "{text}"
    );
}
