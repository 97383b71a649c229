//! What a test does when a server it needs (PostgreSQL, Keystone) is not there: one
//! rule for every test crate of the workspace (the others take this file by path).
//!
//! Under CI the test fails: CI must run everything, and a test that passes by
//! returning early would hide whatever it was there to catch. Elsewhere the test is
//! skipped, and says so where a person will read it: on its standard error, and, when
//! `ALLOT_TEST_SKIPS` names a directory (`scripts/test` makes one), in a file there
//! that `scripts/test` lists in its summary, so a skip is never silent.

use std::path::Path;

/// The variable that names the directory where skipped tests are recorded.
pub const SKIPS_DIR: &str = "ALLOT_TEST_SKIPS";

/// Whether this is a CI run: `CI` set to anything but nothing, `0` or `false` (CI
/// services and `.ci/run` set `CI=true`). `scripts/test` reads it the same way.
pub fn in_ci() -> bool {
    !matches!(
        std::env::var("CI").as_deref().map(str::trim),
        Err(_) | Ok("" | "0" | "false")
    )
}

/// Skips (the rest of) the calling test for `reason`, which says what is missing
/// and how to provide it: a panic under CI; elsewhere a note on standard error and,
/// under `scripts/test`, a record for its summary. The caller returns right after.
pub fn skip(reason: &str) {
    let test = test_name();
    assert!(!in_ci(), "{test}: CI must not skip this test: {reason}");
    eprintln!("skipped {test}: {reason}");
    let Some(dir) = std::env::var_os(SKIPS_DIR) else {
        return;
    };
    // One file per test, named after it: a test that skips many times (a property's
    // cases) is listed once, and tests running side by side never share a file.
    let file: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = Path::new(&dir).join(file);
    std::fs::write(&path, format!("{test}: {reason}\n"))
        .unwrap_or_else(|e| panic!("{SKIPS_DIR}: cannot record the skip in {path:?}: {e}"));
}

/// `TARGET::TEST` of the running test: the test binary's name without cargo's hash,
/// and the test's own, which libtest gives the thread that runs it.
fn test_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .and_then(|s| s.to_str())
        .unwrap_or("?");
    let target = stem.rsplit_once('-').map_or(stem, |(name, _hash)| name);
    let thread = std::thread::current();
    format!("{target}::{}", thread.name().unwrap_or("?"))
}
