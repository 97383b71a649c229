//! A database of its own for each PostgreSQL case of the store tests (the engine's
//! own unit tests too, by path), on the server `ALLOT_TEST_POSTGRES_URL` names
//! (`scripts/pg-cluster start` prints one); without one, the case goes by
//! [`skip::skip`]'s rule.

use allot_core::Uuid;

#[path = "../skip/mod.rs"]
pub mod skip;

/// A database of its own on the PostgreSQL server of `ALLOT_TEST_POSTGRES_URL`,
/// dropped when this goes. `None` (the case is skipped, or fails under CI) without
/// that variable.
pub struct PgDatabase {
    admin: String,
    name: String,
    /// The new database's URL.
    pub url: String,
}

impl PgDatabase {
    /// Makes the database (`None`, and the skip recorded, without
    /// `ALLOT_TEST_POSTGRES_URL`).
    pub fn new() -> Option<PgDatabase> {
        let Ok(admin) = std::env::var("ALLOT_TEST_POSTGRES_URL") else {
            skip::skip(
                "ALLOT_TEST_POSTGRES_URL is not set, so its PostgreSQL case did not run \
                 (scripts/pg-cluster start prints a server's URL)",
            );
            return None;
        };
        let name = format!("allot_test_{}", Uuid::new_v4().simple());
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("ALLOT_TEST_POSTGRES_URL={admin}: {e}"));
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        // The same server and user, the new database.
        let (base, query) = match admin.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (admin.as_str(), String::new()),
        };
        let server = match base.rsplit_once('/') {
            Some((server, _)) if server.ends_with('/') => base,
            Some((server, _)) => server,
            None => base,
        };
        let url = format!("{}/{name}{query}", server.trim_end_matches('/'));
        Some(PgDatabase { admin, name, url })
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name));
        }
    }
}
