//! Placement's own database, read into a dump and written from one (issue 22):
//! `allot import --from-placement URL` takes a whole deployment from a live
//! OpenStack Placement database, and `allot export --to-placement URL` writes one
//! into an empty one made by `placement-manage db sync`. Both go through the dump of
//! `allot_store::dump`: [`read`] builds a [`Dump`](allot_store::dump::Dump) from
//! Placement's tables, which the binary hands to the same checked import as a dump
//! file (one home for the checks); [`write`] turns the dump of an allot database
//! into Placement's rows.
//!
//! This crate sits beside `allot-store`, below the binary: with the store, it is the
//! only place that holds SQL and database drivers (MySQL/MariaDB through
//! `mysql_async`, PostgreSQL through `tokio-postgres`), so that the binary holds
//! neither. It is split by table: `read/` and `write/` each have a short
//! orchestrator and one module per table or table family, and what both directions
//! share is here: the URL as `placement.conf` writes it (`placement_url.rs`), the
//! two drivers behind one small text-only connection (`conn.rs`), and the schema
//! revisions this build understands (`revision.rs`). Beside them, `census.rs`
//! counts a Placement database's providers, for `allot serve --placement-conf`.
//!
//! TLS: a PostgreSQL URL's libpq arguments (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`) and variables (`PGSSLMODE`, ...) are read by `allot_store::pg_tls`, the
//! one reading of them that the store's engine uses too, so a Placement database and
//! an allot database are reached alike. A MySQL/MariaDB URL's PyMySQL arguments
//! (`ssl_ca`, `ssl_cert`, `ssl_key`, `ssl_verify_cert`, `ssl_verify_identity`, ...)
//! are read by `allot_store::my_tls`, as the store's MariaDB engine reads them; what
//! cannot be honoured is refused by name: never a silent plain-text connection.

mod census;
mod conn;
mod placement_url;
mod read;
mod revision;
/// The one rule of every test crate for a server that is not there (skipped here,
/// a failure under CI).
#[cfg(test)]
#[path = "../../allot-store/tests/skip/mod.rs"]
mod test_skip;
mod write;

use allot_store::dump::Dump;
use anyhow::Context;

pub use placement_url::{PlacementUrl, CONNECT_TIMEOUT};
pub use read::{Placeholders, Read};
pub use revision::{HEAD_REVISION, READABLE_REVISIONS};

/// Reads a whole Placement database, in one read-only snapshot, into a dump; the
/// incomplete consumers it finds are given `placeholders`. Runs on a runtime of its
/// own, so it must not be called from within an async context.
pub fn read(db: &PlacementUrl, placeholders: &Placeholders) -> anyhow::Result<Read> {
    runtime()?.block_on(read::read_placement(db, placeholders))
}

/// Writes a whole dump (without claims and class metadata, which the caller has
/// dealt with) into an empty Placement database, in one transaction. Runs on a
/// runtime of its own, so it must not be called from within an async context.
pub fn write(db: &PlacementUrl, dump: &Dump) -> anyhow::Result<()> {
    runtime()?.block_on(write::write_placement(db, dump))
}

/// How many resource providers Placement's database holds (0 when it has no
/// Placement schema yet), without reading anything else. Runs on a runtime of its
/// own, so it must not be called from within an async context.
pub fn providers(db: &PlacementUrl) -> anyhow::Result<u64> {
    runtime()?.block_on(census::providers(db))
}

/// A single-threaded runtime for one command's database work.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}
