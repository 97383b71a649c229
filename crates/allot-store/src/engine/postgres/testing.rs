//! What the engine's tests share: a fresh database on the test server
//! (`ALLOT_TEST_POSTGRES_URL`; `None`, and the skip recorded by the store suite's
//! rule, `tests/skip`, without one), a connection of the test's own to it, and the
//! changes and commits the tests write and read.

use allot_core::{Change, TraitName, TraitRecord};

pub(super) use crate::test_pg::PgDatabase as Database;
use crate::Commit;

/// A connection of the test's own to the database.
pub(super) fn client(db: &Database) -> postgres::Client {
    postgres::Client::connect(&db.url, postgres::NoTls).unwrap()
}

/// One trait's creation, as a plan returns it.
pub(super) fn trait_change(name: &str) -> Vec<Change> {
    vec![Change::PutTrait(TraitRecord {
        name: TraitName::new_unchecked(name),
        created_at: 1,
    })]
}

/// The trait names the commits made, in order.
pub(super) fn names(commits: &[Commit]) -> Vec<String> {
    commits
        .iter()
        .flat_map(|c| &c.changes)
        .filter_map(|c| match c {
            Change::PutTrait(t) => Some(t.name.as_str().to_string()),
            _ => None,
        })
        .collect()
}
