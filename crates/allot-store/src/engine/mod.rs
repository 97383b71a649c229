//! The storage engines. Each one implements the same operations (`load`, `head`,
//! `changes_since`, `write`) that [`crate::Store`] dispatches to, and checks the same
//! preconditions in its writes.
//!
//! What they store and how is described once, for both: the tables and the
//! statements each change writes in [`sql`], the load in [`load`], the reading of
//! the change log in [`read_log`]. An engine keeps only its dialect (types,
//! placeholders, upserts), its connection and transactions, its migrations' list,
//! and its log table.

use allot_core::Change;

use crate::{Commit, Cursor, StoreError};

pub mod checkpointer;
pub mod cluster_key;
pub(crate) mod load;
pub mod mariadb;
pub mod postgres;
pub(crate) mod saved;
pub(crate) mod sql;
pub mod sqlite;

/// How many of the newest commits the change log keeps, in every engine: a node
/// further behind than this loads its whole view again.
pub(crate) const LOG_KEEP: i64 = 10_000;

/// The log is pruned (by the writer of the commit) when a commit's number is a
/// multiple of this: one statement per thousand writes, and the table stays small.
pub(crate) const LOG_PRUNE_EVERY: i64 = 1_000;

/// How long a reconnect keeps trying (with a doubling pause from 50 ms) before the
/// call that needed the connection fails.
const RECONNECT_FOR: std::time::Duration = std::time::Duration::from_secs(3);

/// A server engine's lost connection made again: retries `connect` with a doubling
/// pause for up to [`RECONNECT_FOR`], saying each time in the log (`engine` names the
/// server).
pub(crate) fn reconnect<T>(
    engine: &str,
    mut connect: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        match connect() {
            Ok(conn) => return Ok(conn),
            Err(e) if start.elapsed() + pause > RECONNECT_FOR => return Err(e),
            Err(e) => {
                tracing::warn!("{engine} connection lost, retrying in {pause:?}: {e}");
                std::thread::sleep(pause);
                pause *= 2;
            }
        }
    }
}

/// Why a change whose statement changed no row could not be written: its
/// precondition (the generation it was planned against, or the absence of the row
/// it creates) did not hold. The text of [`crate::StoreError::Stale`], alike for
/// every engine.
pub(crate) fn lost_race(change: &Change) -> String {
    match change {
        Change::PutProvider {
            row,
            previous_generation: None,
        } => format!("provider {} or its name exists already", row.uuid),
        Change::PutProvider {
            row,
            previous_generation: Some(previous),
        } => format!("provider {} is not at generation {previous}", row.uuid),
        Change::PutConsumer {
            row,
            previous_generation: None,
        } => format!("consumer {} exists already", row.uuid),
        Change::PutConsumer {
            row,
            previous_generation: Some(previous),
        } => format!("consumer {} is not at generation {previous}", row.uuid),
        Change::SetAllocations(uuid, _) => format!("consumer {uuid} is gone"),
        other => format!("a write changed no row: {other:?}"),
    }
}

/// The commits of the log after `after`, from its rows (number and record, in
/// order, from the first after `after`), checked to be exactly `after + 1 ..= head`.
/// A gap at the start means the log was pruned past `after`
/// ([`StoreError::Behind`]); a cursor ahead of the head is `ahead`'s error (each
/// engine says what that means for it).
pub(crate) fn read_log<B: AsRef<[u8]>>(
    after: i64,
    head: i64,
    rows: impl IntoIterator<Item = Result<(i64, B), StoreError>>,
    ahead: impl FnOnce() -> StoreError,
) -> Result<Vec<Commit>, StoreError> {
    if after > head {
        return Err(ahead());
    }
    let mut commits = Vec::new();
    let mut expected = after + 1;
    for row in rows {
        let (seq, record) = row?;
        if seq != expected {
            return Err(if commits.is_empty() {
                StoreError::Behind(after)
            } else {
                StoreError::Corrupt(format!("the change log has no commit {expected}"))
            });
        }
        expected += 1;
        commits.push(Commit {
            cursor: Cursor(seq),
            changes: crate::log::decode_commit(seq, record.as_ref())?,
        });
    }
    if expected <= head {
        return Err(if commits.is_empty() {
            StoreError::Behind(after)
        } else {
            StoreError::Corrupt(format!("the change log ends before its head {head}"))
        });
    }
    Ok(commits)
}
