//! The repository's own rules, which its tests check against the tree on every run of
//! the test command (`cargo test --workspace`):
//!
//! - [`sizes`]: no production source file over [`sizes::MAX_FILE_LINES`] lines before
//!   its tests, and no production function over [`sizes::MAX_FN_LINES`] lines, except a
//!   flat `match` marked as a table in code;
//! - [`map`]: ARCHITECTURE.md is a map a newcomer reads in ten minutes: at most
//!   [`map::MAX_LINES`] lines, nothing dated or hashed, and every file, folder and
//!   `Type::name` it names exists;
//! - [`dependencies`]: only the store crates have a database driver among their normal
//!   dependencies, so that SQL lives in the stores alone.
//!
//! Each rule is a function from the tree to a list of violations, so that a test can
//! show both that the tree keeps the rule and that the rule catches a breach (the unit
//! tests feed it a breach). [`sources`] finds the production files the first two read.

pub mod dependencies;
pub mod map;
pub mod sizes;
pub mod sources;

use std::path::{Path, PathBuf};

/// The repository's root: two folders above this crate.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/allot-checks sits two folders below the root")
        .to_path_buf()
}

/// A path as the repository names it (relative to its root, with `/`).
pub fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}
