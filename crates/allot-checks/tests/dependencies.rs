//! Only the stores have a database driver among their normal dependencies
//! (`allot_checks::dependencies`): the binary, the server, the client and the core
//! reach a database through `allot-store` or `allot-placement-db`.

use allot_checks::{dependencies, repo_root};

#[test]
fn only_the_stores_depend_on_a_database_driver() {
    let metadata = dependencies::metadata(&repo_root()).expect("cargo metadata");
    let graph = dependencies::Graph::of(&metadata).expect("a resolved graph");
    assert!(
        graph.members.iter().any(|m| m == "allot"),
        "{:?}",
        graph.members
    );
    let breaches = dependencies::breaches(&graph);
    assert!(breaches.is_empty(), "{}", breaches.join("\n"));
}
