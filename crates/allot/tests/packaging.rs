//! What packaging/ installs works as installed: the default configuration file
//! (/etc/allot/allot.toml) is accepted by `allot serve` as it stands, and with it the
//! server authenticates with the token file the package's README tells an operator to
//! fill with `allot token add`. The unit itself is rated by `systemd-analyze security`
//! in scripts/test (a step of its own: it needs systemd's tools, not the binary).

mod support;

use std::path::PathBuf;

use support::{send_raw, Server};

/// packaging/allot.toml, from this crate's directory.
fn packaged_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/allot.toml")
}

#[test]
fn the_packaged_config_serves_with_its_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let token = support::token_cmd(
        &tokens,
        &["add", "--user", "ops", "--project", "p1", "--role", "admin"],
    );

    // Only where the package puts its state differs from a test's: the database and
    // the token file move to the test's directory, the port to a free one. Every other
    // setting is the file's.
    let config = packaged_config();
    let db = format!("sqlite:{}", dir.path().join("allot.db").display());
    let server = Server::start_args(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "--token-file",
            tokens.to_str().unwrap(),
            "--bind",
            "127.0.0.1:0",
        ],
        &[],
    );

    let version: &[u8] = b"placement 1.39";
    let with_token = send_raw(
        &server.addr,
        "GET",
        "/resource_providers",
        &[
            ("x-auth-token", token.as_bytes()),
            ("openstack-api-version", version),
        ],
        "",
    );
    assert_eq!(with_token.status, 200, "{}", with_token.body);
    // The file's auth mode is `tokens`: noauth2's admin token means nothing here.
    let noauth = send_raw(
        &server.addr,
        "GET",
        "/resource_providers",
        &[
            ("x-auth-token", b"admin"),
            ("openstack-api-version", version),
        ],
        "",
    );
    assert_eq!(noauth.status, 401, "{}", noauth.body);
}
