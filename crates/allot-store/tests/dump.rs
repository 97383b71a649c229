//! `allot export` / `allot import` at the store level: a varied deployment goes
//! through a dump into a second store and comes back the same (keyed by uuid: ids are
//! handed out afresh), and a dump that breaks integrity is refused with every problem
//! named and nothing written. Through `Store::open(url)`, so that any engine can run it.

use allot_core::{State, Uuid};
use allot_store::dump::{self, Counts, ImportError};
use allot_store::Store;

mod mariadb;
mod pg;
mod world;

use world::*;

fn url(dir: &tempfile::TempDir, name: &str) -> String {
    format!("sqlite:{}", dir.path().join(name).display())
}

fn source(dir: &tempfile::TempDir) -> (String, State) {
    let url = url(dir, "source.db");
    let mut store = Store::open(&url).unwrap();
    store.persist(&world()).unwrap();
    drop(store);
    let state = Store::open(&url).unwrap().load().unwrap();
    (url, state)
}

fn dump_bytes(url: &str, at: i64) -> Vec<u8> {
    let mut store = Store::open(url).unwrap();
    let mut out = Vec::new();
    dump::write(&dump::export_store(&mut store, at).unwrap(), &mut out).unwrap();
    out
}

#[test]
fn a_deployment_goes_through_a_dump_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (source_url, before) = source(&dir);
    // The world really is varied: the checks below would pass on an empty one.
    assert_eq!(before.providers().count(), 8);
    assert_eq!(before.claims().count(), 5);
    assert!(before.sharing_providers().count() == 1);

    let bytes = dump_bytes(&source_url, 1_000);
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("\"format\": \"allot-dump\""), "{text}");
    assert!(text.contains("\"allocation_ratio\": \"0.30000000000000004\""));

    let target_url = url(&dir, "target.db");
    let mut target = Store::open(&target_url).unwrap();
    let report = dump::import(&mut target, &dump::parse(&bytes).unwrap()).unwrap();
    assert_eq!(
        report.counts,
        Counts {
            classes: 2,
            traits: 2,
            providers: 8,
            inventories: 8,
            consumers: 5,
            allocations: 8,
            claims: 5,
            server_groups: 2,
            drains: 1,
            shapes: 2,
        }
    );
    // numa1_0's VCPU: 6 allocated on a capacity of 4, kept with a warning.
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains(&format!("provider {}: 6 of VCPU in use", uuid(3))),
        "{:?}",
        report.warnings
    );
    drop(target);

    let after = Store::open(&target_url).unwrap().load().unwrap();
    assert_eq!(everything(&after), everything(&before));
    assert!(after.check_usage_index());
    // Ids were handed out afresh: dense, in the dump's (creation) order.
    let ids: Vec<u64> = after.providers().map(|p| p.id().0).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());

    // A second export of either store is the same bytes.
    assert_eq!(dump_bytes(&target_url, 1_000), bytes);
    assert_eq!(dump_bytes(&source_url, 1_000), bytes);
}

/// The source world's dump as a JSON tree, to break in one place.
fn good_dump() -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = source(&dir);
    serde_json::from_slice(&dump_bytes(&url, 1_000)).unwrap()
}

/// Imports `dump` into a fresh store; the error, having checked that nothing was
/// written.
fn refused(dump: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let url = url(&dir, "target.db");
    let mut store = Store::open(&url).unwrap();
    let bytes = serde_json::to_vec(dump).unwrap();
    let err = dump::parse(&bytes)
        .and_then(|d| dump::import(&mut store, &d))
        .expect_err("the import should be refused");
    drop(store);
    let state = Store::open(&url).unwrap().load().unwrap();
    assert_eq!(
        dump::counts(&state),
        Counts::default(),
        "something was written"
    );
    err.to_string()
}

fn provider_index(d: &serde_json::Value, name: &str) -> usize {
    d["providers"]
        .as_array()
        .unwrap()
        .iter()
        .position(|p| p["name"] == name)
        .unwrap()
}

#[test]
fn a_broken_dump_is_refused_with_every_problem_named() {
    let good = good_dump();
    let numa = provider_index(&good, "numa1_0");
    let cn1 = provider_index(&good, "cn1");
    let stranger = Uuid::from_u128(0xdead).to_string();
    type Break = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Break, &str)> = vec![
        (
            Box::new(|d| d["format"] = "pg_dump".into()),
            "unknown dump format \"pg_dump\"",
        ),
        (
            Box::new(|d| d["version"] = 2.into()),
            "unsupported dump version 2 (this allot reads version 1)",
        ),
        (
            Box::new(|d| {
                d.as_object_mut().unwrap().remove("format");
            }),
            "no \"format\"",
        ),
        (
            Box::new(move |d| d["providers"][numa]["colour"] = "red".into()),
            "unknown field `colour`",
        ),
        (
            Box::new(move |d| d["providers"][numa]["uuid"] = d["providers"][cn1]["uuid"].clone()),
            "appears twice",
        ),
        (
            Box::new(move |d| d["providers"][numa]["name"] = "cn1".into()),
            "provider name \"cn1\" is used twice",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| d["providers"][numa]["parent"] = s.clone().into()
            }),
            "that is not in the dump",
        ),
        (
            Box::new(move |d| d["providers"][cn1]["parent"] = d["providers"][numa]["uuid"].clone()),
            "is in a cycle of parents",
        ),
        (
            Box::new(move |d| {
                d["providers"][numa]["inventories"][0]["resource_class"] = "CUSTOM_NOPE".into()
            }),
            "inventory of \"CUSTOM_NOPE\", a class neither standard nor in the dump",
        ),
        (
            Box::new(move |d| d["providers"][cn1]["traits"][0] = "CUSTOM_NOPE".into()),
            "trait \"CUSTOM_NOPE\" is neither standard nor in the dump",
        ),
        (
            Box::new(|d| {
                d["resource_classes"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|c| c["name"] != "CUSTOM_GPU");
            }),
            "a class neither standard nor in the dump",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| d["consumers"][0]["allocations"][0]["provider"] = s.clone().into()
            }),
            "no such provider in the dump",
        ),
        (
            Box::new(move |d| {
                d["consumers"][0]["allocations"][0]["resource_class"] = "PCPU".into()
            }),
            "the provider has no inventory of the class",
        ),
        (
            Box::new({
                let s = stranger.clone();
                move |d| {
                    let claim = d["claims"]
                        .as_array_mut()
                        .unwrap()
                        .iter_mut()
                        .find(|c| c["state"] == "pending")
                        .unwrap();
                    claim["allocations"][0]["provider"] = s.clone().into();
                }
            }),
            "a pending claim on a provider not in the dump",
        ),
        (
            Box::new(|d| d["claims"][0]["state"] = "lost".into()),
            "state \"lost\" is not pending",
        ),
        (
            Box::new(move |d| {
                d["providers"][numa]["inventories"][0]["allocation_ratio"] = "lots".into()
            }),
            "allocation_ratio \"lots\"",
        ),
        (
            Box::new(|d| d["traits"][0]["name"] = "FAST".into()),
            "trait \"FAST\" is not a custom trait name",
        ),
        (
            Box::new(|d| d["consumers"][1] = d["consumers"][0].clone()),
            "appears twice",
        ),
    ];
    for (i, (damage, expected)) in cases.iter().enumerate() {
        let mut d = good.clone();
        damage(&mut d);
        let err = refused(&d);
        assert!(
            err.contains(expected),
            "case {i}: {err:?} lacks {expected:?}"
        );
    }

    // Several problems at once are all named.
    let mut d = good.clone();
    d["providers"][numa]["name"] = "cn1".into();
    d["providers"][cn1]["traits"][0] = "CUSTOM_NOPE".into();
    d["claims"][0]["state"] = "lost".into();
    let err = refused(&d);
    assert!(err.contains("3 integrity problem(s)"), "{err}");

    // Past 50 problems the rest are counted, not listed.
    let mut d = good.clone();
    let orphans: Vec<serde_json::Value> = (0..60u128)
        .map(|i| {
            serde_json::json!({
                "uuid": Uuid::from_u128(0x0e00 + i), "name": format!("orphan{i}"),
                "parent": Uuid::from_u128(0xdead), "generation": 0, "created_at": 0,
                "updated_at": 0, "inventories": [], "traits": [], "aggregates": [],
            })
        })
        .collect();
    d["providers"].as_array_mut().unwrap().extend(orphans);
    let err = refused(&d);
    assert!(
        err.contains("51 integrity problem(s)") && err.ends_with("and 10 more"),
        "{err}"
    );

    // The untouched dump goes in (so the cases above failed for their damage alone).
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&url(&dir, "ok.db")).unwrap();
    let dump = dump::parse(&serde_json::to_vec(&good).unwrap()).unwrap();
    dump::import(&mut store, &dump).unwrap();
    // ... and only into an empty store: a second import is refused, naming what is
    // there.
    let err = dump::import(&mut store, &dump).unwrap_err();
    assert!(matches!(err, ImportError::NotEmpty(_)), "{err}");
    assert!(
        err.to_string().contains("8 providers") && err.to_string().contains("empty store"),
        "{err}"
    );
}

#[test]
fn not_json_is_named_as_such() {
    let err = dump::parse(b"PGDMP\x01").unwrap_err().to_string();
    assert!(err.starts_with("not an allot dump"), "{err}");
}

/// SQLite to PostgreSQL and back (`ALLOT_TEST_POSTGRES_URL`).
#[test]
fn a_deployment_moves_from_sqlite_to_postgres_and_back() {
    if let Some(db) = pg::PgDatabase::new() {
        moves_to_and_back(&db.url);
    }
}

/// SQLite to MariaDB and back (`ALLOT_TEST_MARIADB_URL`).
#[test]
fn a_deployment_moves_from_sqlite_to_mariadb_and_back() {
    if let Some(db) = mariadb::MyDatabase::new() {
        moves_to_and_back(&db.url);
    }
}

/// SQLite to a server database and back: the same view there, and the same dump
/// out of each store.
fn moves_to_and_back(server_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (source_url, before) = source(&dir);
    let bytes = dump_bytes(&source_url, 1_000);
    let mut target = Store::open(server_url).unwrap();
    dump::import(&mut target, &dump::parse(&bytes).unwrap()).unwrap();
    drop(target);
    let on_server = Store::open(server_url).unwrap().load().unwrap();
    assert_eq!(everything(&on_server), everything(&before));
    assert!(on_server.check_usage_index());
    assert_eq!(dump_bytes(server_url, 1_000), bytes);
    // Back into a fresh SQLite database.
    let back_url = url(&dir, "back.db");
    let mut back = Store::open(&back_url).unwrap();
    dump::import(&mut back, &dump::parse(&bytes).unwrap()).unwrap();
    drop(back);
    assert_eq!(dump_bytes(&back_url, 1_000), bytes);
}
