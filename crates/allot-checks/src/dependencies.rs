//! Only the stores hold a database driver: SQL lives in `allot-store` (allot's own
//! engines) and `allot-placement-db` (Placement's database, read and written), and
//! every other crate reaches a database through them.
//!
//! The check reads the resolved graph (`cargo metadata`) and walks each other
//! workspace crate's normal dependencies (not its dev- or build-dependencies: a test
//! may open a database to look at what the server wrote), stopping at a store crate.
//! A driver reached on that walk is a breach, reported with the path that reaches it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, PackageId};

/// The crates allowed to depend on a database driver.
pub const STORES: &[&str] = &["allot-store", "allot-placement-db"];

/// The database drivers, as packages (and the C libraries under them).
pub const DRIVERS: &[&str] = &[
    "rusqlite",
    "libsqlite3-sys",
    "postgres",
    "tokio-postgres",
    "postgres-protocol",
    "mysql_async",
    "mysql_common",
    "mysql",
    "sqlx",
    "sqlx-core",
    "diesel",
    "sea-orm",
];

/// The workspace's resolved graph for the platform `cargo` builds for here (the
/// host's), read offline from `Cargo.lock`.
pub fn metadata(root: &Path) -> Result<Metadata, String> {
    let host = host_triple()?;
    MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .other_options(vec![
            "--locked".to_owned(),
            "--offline".to_owned(),
            "--filter-platform".to_owned(),
            host,
        ])
        .exec()
        .map_err(|e| format!("cargo metadata: {e}"))
}

fn host_triple() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| "rustc -vV names no host".to_owned())
}

/// The part of the resolved graph the rule reads: crates by name, each with the
/// names of its normal dependencies.
#[derive(Debug, Default)]
pub struct Graph {
    /// The workspace's own crates.
    pub members: Vec<String>,
    /// Each crate's normal dependencies.
    pub normal: BTreeMap<String, Vec<String>>,
}

impl Graph {
    /// The graph of `cargo metadata`'s resolve (one version of a crate stands for
    /// all: the rule is about which crates, not which versions).
    pub fn of(metadata: &Metadata) -> Result<Graph, String> {
        let resolve = metadata
            .resolve
            .as_ref()
            .ok_or("cargo metadata gave no resolved graph")?;
        let name_of: BTreeMap<&PackageId, &str> = metadata
            .packages
            .iter()
            .map(|p| (&p.id, p.name.as_str()))
            .collect();
        let name = |id: &PackageId| name_of.get(id).copied().unwrap_or("?").to_owned();
        let mut normal: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in &resolve.nodes {
            let deps = node
                .deps
                .iter()
                .filter(|d| d.dep_kinds.iter().any(|k| k.kind == DependencyKind::Normal))
                .map(|d| name(&d.pkg));
            normal.entry(name(&node.id)).or_default().extend(deps);
        }
        Ok(Graph {
            members: metadata.workspace_members.iter().map(name).collect(),
            normal,
        })
    }
}

/// Every workspace crate other than the stores that reaches a driver through its
/// normal dependencies, with the path from it to the driver (`a -> b -> driver`).
pub fn breaches(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for member in &graph.members {
        if STORES.contains(&member.as_str()) {
            continue;
        }
        if let Some(path) = path_to_driver(member, graph) {
            found.push(format!(
                "{member} depends on a database driver outside the stores ({}): {}",
                STORES.join(", "),
                path.join(" -> ")
            ));
        }
    }
    found
}

/// A breadth-first walk from `start` that does not enter the stores; the first
/// driver found, with the names on the way to it.
fn path_to_driver(start: &str, graph: &Graph) -> Option<Vec<String>> {
    let mut seen = BTreeSet::from([start.to_owned()]);
    let mut queue = VecDeque::from([vec![start.to_owned()]]);
    while let Some(path) = queue.pop_front() {
        let last = path.last().map(String::as_str).unwrap_or(start);
        for dep in graph.normal.get(last).into_iter().flatten() {
            if STORES.contains(&dep.as_str()) || !seen.insert(dep.clone()) {
                continue;
            }
            let mut next = path.clone();
            next.push(dep.clone());
            if DRIVERS.contains(&dep.as_str()) {
                return Some(next);
            }
            queue.push_back(next);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph {
            members: ["allot", "allot-server", "allot-store", "allot-placement-db"]
                .map(String::from)
                .to_vec(),
            normal: BTreeMap::new(),
        };
        for (from, to) in edges {
            g.normal
                .entry(from.to_string())
                .or_default()
                .push(to.to_string());
        }
        g
    }

    #[test]
    fn drivers_under_the_stores_are_allowed() {
        let g = graph(&[
            ("allot", "allot-server"),
            ("allot", "allot-placement-db"),
            ("allot-server", "allot-store"),
            ("allot-store", "rusqlite"),
            ("allot-placement-db", "mysql_async"),
        ]);
        assert_eq!(breaches(&g), Vec::<String>::new());
    }

    #[test]
    fn a_driver_beside_the_stores_is_a_breach_with_its_path() {
        let g = graph(&[
            ("allot", "allot-server"),
            ("allot-server", "allot-store"),
            ("allot", "helper"),
            ("helper", "tokio-postgres"),
        ]);
        assert_eq!(
            breaches(&g),
            vec!["allot depends on a database driver outside the stores \
                  (allot-store, allot-placement-db): allot -> helper -> tokio-postgres"
                .to_owned()]
        );
    }
}
