//! The cluster key (issue 46): 32 random bytes that every node of a cluster shares,
//! kept in a table of the cluster's database (one row), made by the first node
//! that asks for it.
//!
//! Why the database: the nodes share it by definition, so a deployment has no
//! new secret to render and hand out, and whoever can read the database holds
//! all the state anyway. The key is no change: it is not in the change log, in
//! the view, or in `allot export`'s dump, and its `Debug` prints nothing of it.
//!
//! Get-or-create is race-safe on every engine: each node offers a fresh key with
//! an insert that does nothing when the row exists (the table's key is the one
//! row's id), then reads the row, so nodes that start together all read the
//! winner's. Deleting the row and restarting every node makes a new key (the
//! rotation in docs/operations.md).

use crate::StoreError;

/// How many bytes a key has.
pub const KEY_BYTES: usize = 32;

/// The key every node of a cluster shares. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterKey(pub [u8; KEY_BYTES]);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

/// A fresh key from the OS's random source, in hex (what an engine offers).
pub(crate) fn fresh_hex() -> Result<String, StoreError> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Corrupt(format!("the OS random source: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The key a row's cell holds, checked to be one.
pub(crate) fn from_cell(cell: &[u8]) -> Result<ClusterKey, StoreError> {
    <[u8; KEY_BYTES]>::try_from(cell)
        .map(ClusterKey)
        .map_err(|_| {
            StoreError::Corrupt(format!(
                "the cluster key has {} bytes, not {KEY_BYTES}",
                cell.len()
            ))
        })
}

/// The statement that reads the key, on every engine.
pub(crate) const READ: &str = "SELECT secret FROM allot_cluster_key WHERE id = 1";
