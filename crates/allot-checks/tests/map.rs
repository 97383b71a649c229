//! ARCHITECTURE.md is a map: at most 500 lines, undated, and every file, folder and
//! `Type::name` it names exists (`allot_checks::map`).

use allot_checks::{map, repo_root};

#[test]
fn the_map_is_short_and_names_what_exists() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let paths = map::files(&root).expect("the tree can be listed");
    let names = map::Names::of_tree(&root, &paths).expect("the workspace's sources parse");
    let breaches = map::breaches(&text, &paths, &names);
    assert!(
        breaches.is_empty(),
        "ARCHITECTURE.md: {} breaches:\n{}",
        breaches.len(),
        breaches.join("\n")
    );
}
