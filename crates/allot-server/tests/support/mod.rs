//! What the HTTP test files share: the service over a real SQLite file in a temporary
//! directory, with a fixed clock so that timestamps in answers are stable.
//!
//! Each test file is its own crate and uses a different part of this module, so parts
//! unused by one file are not dead code.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use allot_server::{router, AppState, Config, PolicyMode, Settings};
use allot_store::{Host, Store};

/// The time every test server's clock reads.
pub const NOW: i64 = 1_700_000_000;

/// The host over the database in `dir` (made on first use, reopened after).
pub fn host_at(dir: &Path) -> Host {
    let url = format!("sqlite:{}", dir.join("allot.db").display());
    Host::new(Store::open(&url).unwrap(), Arc::new(|| NOW)).unwrap()
}

/// The application's state over `host`, with the default settings but the legacy
/// policy, the one Placement's own functional tests (and so the cases these files
/// mirror) run under.
pub fn state_of(host: Host) -> AppState {
    AppState {
        host,
        config: Arc::new(Config {
            settings: Settings {
                policy: PolicyMode::Legacy,
                ..Settings::default()
            },
            ..Config::default()
        }),
    }
}

/// A fresh, empty service's state; the directory lives as long as the returned guard.
pub fn state() -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (state_of(host_at(dir.path())), dir)
}

/// A fresh, empty service, routed as in production but without a socket.
pub fn app() -> (axum::Router, tempfile::TempDir) {
    let (state, dir) = state();
    (router(state), dir)
}
