//! A database of its own for each MariaDB case of the store tests, on the server
//! `ALLOT_TEST_MARIADB_URL` names (`scripts/mariadb start` prints one, e.g.
//! `mysql://root@127.0.0.1:40123/`); without one, the case goes by
//! [`skip::skip`]'s rule.

use allot_core::Uuid;
use mysql_async::prelude::Queryable;

// The one rule for a missing server, as the PostgreSQL cases take it (every test
// file with MariaDB cases has PostgreSQL ones too).
use crate::pg::skip;

/// A database of its own on the MariaDB server of `ALLOT_TEST_MARIADB_URL`,
/// dropped when this goes. `None` (the case is skipped, or fails under CI) without
/// that variable.
pub struct MyDatabase {
    server: String,
    name: String,
    /// The new database's URL.
    pub url: String,
}

/// Runs `sql` on the server `url` names (no database).
fn admin(url: &str, sql: &str) -> Result<(), mysql_async::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = mysql_async::Conn::from_url(url).await?;
        conn.query_drop(sql).await?;
        conn.disconnect().await
    })
}

impl MyDatabase {
    /// Makes the database (`None`, and the skip recorded, without
    /// `ALLOT_TEST_MARIADB_URL`).
    pub fn new() -> Option<MyDatabase> {
        let Ok(given) = std::env::var("ALLOT_TEST_MARIADB_URL") else {
            skip::skip(
                "ALLOT_TEST_MARIADB_URL is not set, so its MariaDB case did not run \
                 (scripts/mariadb start prints a server's URL)",
            );
            return None;
        };
        // The server alone: scheme, credentials, host and port.
        let (scheme, rest) = given.split_once("://").expect("a URL");
        let host = rest.split(['/', '?']).next().unwrap_or(rest);
        let server = format!("mysql://{host}/");
        let name = format!("allot_test_{}", Uuid::new_v4().simple());
        admin(&server, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("ALLOT_TEST_MARIADB_URL={given}: {e}"));
        let url = format!("{scheme}://{host}/{name}");
        Some(MyDatabase { server, name, url })
    }
}

impl Drop for MyDatabase {
    fn drop(&mut self) {
        let _ = admin(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {}", self.name),
        );
    }
}
