//! The storage engines. Each one implements the same two operations (`load`,
//! `persist`) that [`crate::Store`] dispatches to.

pub mod postgres;
pub mod sqlite;
