//! What every engine stores, described once: the tables, and the statements each
//! [`Change`](allot_core::Change) becomes.
//!
//! Nothing here is in any engine's SQL dialect. The tables are lists of columns of
//! a neutral [`Type`] (`tables`); the statements are shapes (an insert into a
//! table, an update or delete keyed by some of its columns: `statement`); a change
//! becomes a list of [`Op`]s, each a statement with its parameters as neutral
//! [`Value`]s (`ops`). An engine implements [`Dialect`] (`dialect`), which says
//! only how its SQL spells what differs (type names, placeholders, upserts, a table
//! without a rowid), and runs the `Op`s its own way (SQLite one at a time,
//! PostgreSQL pipelined). A statement's text is rendered once per dialect and kept
//! for the life of the process, so that the engines' prepared statement caches see
//! the same `&'static str` every time.
//!
//! The schema of a database that exists already must not change under it: the
//! engines' migrations list which of these tables (and indexes) each version
//! creates (their steps and the shared raw ones: `migration`), and a table's
//! description here must keep rendering what those versions created.

mod dialect;
mod migration;
mod ops;
mod statement;
mod tables;

pub(crate) use dialect::{Conflict, Dialect};
pub(crate) use migration::{
    script, Ddl, DROP_ALLOCATIONS_BY_PROVIDER, RESTORE_CONSUMERS, STASH_CONSUMERS,
};
pub(crate) use ops::{bump_and_move, ops};
pub(crate) use statement::{Op, Value};
pub(crate) use tables::*;
