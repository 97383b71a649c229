//! The write operations: each checks a request against the [`State`] and returns what
//! it decided (the value the caller answers with) and the [`Change`]s to persist.
//!
//! Every operation is a method on [`State`] taking `&self`: planning never mutates the
//! view. One file per family of objects.
//!
//! [`State`]: crate::State
//! [`Change`]: crate::Change

pub mod classes;
pub mod traits;

use crate::change::Change;

/// What a write operation returns: its answer and the changes to persist.
pub type Plan<T> = crate::Result<(T, Vec<Change>)>;
