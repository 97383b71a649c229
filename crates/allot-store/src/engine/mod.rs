//! The storage engines. Each one implements the same operations (`load`, `head`,
//! `changes_since`, `write`) that [`crate::Store`] dispatches to, and checks the same
//! preconditions in its writes.

use allot_core::Change;

pub mod postgres;
pub mod sqlite;

/// How many of the newest commits the change log keeps, in every engine: a node
/// further behind than this loads its whole view again.
pub(crate) const LOG_KEEP: i64 = 10_000;

/// The log is pruned (by the writer of the commit) when a commit's number is a
/// multiple of this: one statement per thousand writes, and the table stays small.
pub(crate) const LOG_PRUNE_EVERY: i64 = 1_000;

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
        other => format!("a write changed no row: {other:?}"),
    }
}
