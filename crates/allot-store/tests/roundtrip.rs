//! The store suite: what a store persists, a fresh open of the same database loads back
//! exactly. Run against every engine: SQLite always, PostgreSQL when
//! `ALLOT_TEST_POSTGRES_URL` names a server (e.g. the one `scripts/pg-cluster start`
//! prints); each PostgreSQL test then gets a database of its own, made with a random
//! name and dropped after.
//!
//! A fixed suite covers every kind of change; a property (`random_histories_reload_exactly`)
//! persists the changes of random request sequences (the generator of the core's
//! property tests, shared by path) and checks that a reload gives back the same
//! providers, consumers, allocations and usage, restarting at random points on the way.
//! And SQLite's connection runs with the settings that make a commit durable.

#[path = "../../allot-core/tests/support/mod.rs"]
mod support;

mod pg;
use pg::PgDatabase;
mod mariadb;
use mariadb::MyDatabase;

use allot_core::server_groups::{Policy, Scope, ServerGroup};
use allot_core::{
    Allocation, Change, ConsumerRow, Inventory, ProviderId, ProviderRow, ResourceClass, State,
    TraitName, Uuid,
};
use allot_store::Store;
use proptest::prelude::*;

fn provider(id: u64, parent: Option<u64>, root: u64, name: &str) -> ProviderRow {
    ProviderRow {
        id: ProviderId(id),
        uuid: Uuid::from_u128(id as u128),
        name: name.into(),
        generation: 0,
        parent: parent.map(ProviderId),
        root: ProviderId(root),
        created_at: 100,
        updated_at: 100,
    }
}

fn snapshot(state: &State) -> Vec<allot_core::Provider> {
    state.providers().cloned().collect()
}

fn consumer(uuid: u128, generation: u64, consumer_type: Option<&str>) -> ConsumerRow {
    ConsumerRow {
        uuid: Uuid::from_u128(uuid),
        project_id: format!("project-{uuid}").into(),
        user_id: "user".into(),
        consumer_type: consumer_type.map(Into::into),
        generation,
        created_at: 200,
        updated_at: 200 + generation as i64,
    }
}

fn allocation(provider: u64, class: &str, used: u64) -> Allocation {
    Allocation {
        provider: ProviderId(provider),
        class: ResourceClass::new_unchecked(class),
        used,
    }
}

/// Everything a reload must give back, in a comparable form.
#[derive(Debug, PartialEq)]
struct Everything {
    providers: Vec<allot_core::Provider>,
    classes: Vec<allot_core::ClassRecord>,
    class_metadata: Vec<Option<allot_core::ClassMetadata>>,
    traits: Vec<allot_core::TraitRecord>,
    consumers: Vec<allot_core::Consumer>,
    usage: Vec<(ProviderId, allot_core::state::ProviderUsage)>,
    claims: Vec<allot_core::Claim>,
}

fn everything(state: &State) -> Everything {
    let mut consumers: Vec<_> = state.consumers().cloned().collect();
    consumers.sort_by_key(|c| c.row.uuid);
    let mut claims: Vec<_> = state.claims().cloned().collect();
    claims.sort_by_key(|c| c.uuid);
    Everything {
        claims,
        providers: snapshot(state),
        classes: state.custom_classes().cloned().collect(),
        class_metadata: state
            .custom_classes()
            .map(|c| state.class_metadata(&c.name))
            .collect(),
        traits: state.custom_traits().cloned().collect(),
        consumers,
        usage: state
            .providers()
            .filter_map(|p| {
                state
                    .provider_usage_index(p.id())
                    .map(|u| (p.id(), u.clone()))
            })
            .collect(),
    }
}

fn suite(url: &str) {
    let mut store = Store::open(url).unwrap();
    let mut state = store.load().unwrap();
    assert_eq!(state.providers().count(), 0);

    let (_, class) = state
        .create_class(ResourceClass::parse("CUSTOM_SLICE").unwrap(), 5)
        .unwrap();
    let (_, tr) = state
        .ensure_trait(TraitName::parse("CUSTOM_FAST").unwrap(), 6)
        .unwrap();
    let mut changes = class;
    changes.extend(tr);
    // Metadata on a class that will be renamed (it follows the class), and on one that
    // will be deleted (it goes with the class).
    let widgets = allot_core::ClassMetadata {
        units: Some("count".into()),
        display_name: Some("Slices ☃".into()),
        description: None,
    };
    changes.push(Change::SetClassMetadata(
        ResourceClass::new_unchecked("CUSTOM_SLICE"),
        Some(widgets.clone()),
    ));
    for change in [
        state
            .create_class(ResourceClass::new_unchecked("CUSTOM_GONE"), 5)
            .unwrap()
            .1,
        vec![Change::SetClassMetadata(
            ResourceClass::new_unchecked("CUSTOM_GONE"),
            Some(widgets.clone()),
        )],
    ] {
        changes.extend(change);
    }
    changes.push(Change::PutProvider {
        row: provider(1, None, 1, "root"),
        previous_generation: None,
    });
    changes.push(Change::PutProvider {
        row: provider(2, Some(1), 1, "child ☃"),
        previous_generation: None,
    });
    changes.push(Change::PutProvider {
        row: provider(4, Some(2), 1, "grandchild"),
        previous_generation: None,
    });
    changes.push(Change::SetInventories(
        ProviderId(2),
        vec![(
            ResourceClass::new_unchecked("VCPU"),
            Inventory {
                allocation_ratio: 16.0,
                ..Inventory::with_total(8)
            },
        )],
    ));
    changes.push(Change::SetTraits(
        ProviderId(2),
        vec![TraitName::new_unchecked("CUSTOM_FAST")],
    ));
    changes.push(Change::SetAggregates(
        ProviderId(1),
        vec![Uuid::from_u128(42)],
    ));
    // Two consumers holding VCPU on the child, one of them with a type.
    for (uuid, used, consumer_type) in [(10, 3, Some("INSTANCE")), (11, 5, None)] {
        changes.push(Change::PutConsumer {
            row: consumer(uuid, 0, consumer_type),
            previous_generation: None,
        });
        changes.push(Change::SetAllocations(
            Uuid::from_u128(uuid),
            vec![allocation(2, "VCPU", used)],
        ));
    }
    // A server group with one member; another joins below.
    changes.push(Change::PutServerGroup(Box::new(ServerGroup {
        uuid: Uuid::from_u128(0x6001),
        name: "group ☃".into(),
        project_id: "p".into(),
        user_id: "u".into(),
        policy: Policy::AntiAffinity,
        max_per_domain: 1,
        scope: Scope::Root,
        enforce_on_allocations: false,
        members: vec![Uuid::from_u128(10)],
        created_at: 100,
        updated_at: 100,
    })));
    store.persist(&changes).unwrap();
    state.apply(&changes);

    // A rename, a delete and a generation bump.
    let (_, renamed) = state
        .rename_class(
            &ResourceClass::parse("CUSTOM_SLICE").unwrap(),
            ResourceClass::parse("CUSTOM_PIECE").unwrap(),
            7,
        )
        .unwrap();
    let mut bumped = provider(1, None, 1, "root renamed");
    bumped.generation = 3;
    let more = [
        renamed,
        vec![Change::DeleteClass(ResourceClass::new_unchecked(
            "CUSTOM_GONE",
        ))],
        vec![
            Change::PutProvider {
                row: bumped,
                previous_generation: Some(0),
            },
            Change::PutProvider {
                row: provider(3, Some(1), 1, "gone"),
                previous_generation: None,
            },
            Change::DeleteProvider(ProviderId(3)),
            // A move to another parent, and a bump of the generation alone (what a
            // claim writes): each writes what changed and keeps what did not.
            Change::PutProvider {
                row: ProviderRow {
                    generation: 1,
                    ..provider(4, Some(1), 1, "grandchild")
                },
                previous_generation: Some(0),
            },
            Change::PutProvider {
                row: ProviderRow {
                    generation: 1,
                    updated_at: 150,
                    ..provider(2, Some(1), 1, "child ☃")
                },
                previous_generation: Some(0),
            },
            // A claim replaced (and its type changed), one released, one new, and one
            // that comes and goes in the same transaction.
            Change::PutConsumer {
                row: consumer(10, 1, Some("MIGRATION")),
                previous_generation: Some(0),
            },
            Change::SetAllocations(Uuid::from_u128(10), vec![allocation(2, "VCPU", 1)]),
            Change::DeleteConsumer(Uuid::from_u128(11)),
            Change::PutConsumer {
                row: consumer(12, 0, None),
                previous_generation: None,
            },
            Change::SetAllocations(
                Uuid::from_u128(12),
                vec![allocation(2, "VCPU", 2), allocation(1, "DISK_GB", 7)],
            ),
            Change::PutConsumer {
                row: consumer(13, 0, None),
                previous_generation: None,
            },
            Change::SetAllocations(Uuid::from_u128(13), vec![allocation(2, "VCPU", 9)]),
            Change::DeleteConsumer(Uuid::from_u128(13)),
            // A member joins: its row alone, and the group's time.
            Change::JoinServerGroup {
                group: Uuid::from_u128(0x6001),
                consumer: Uuid::from_u128(12),
                at: 170,
            },
        ],
    ]
    .concat();
    store.persist(&more).unwrap();
    state.apply(&more);
    drop(store);

    let reloaded = Store::open(url).unwrap().load().unwrap();
    assert_eq!(snapshot(&reloaded), snapshot(&state));
    assert_eq!(everything(&reloaded), everything(&state));
    assert!(reloaded.check_usage_index());
    assert_eq!(
        reloaded.usage(ProviderId(2), &ResourceClass::new_unchecked("VCPU")),
        3
    );
    assert_eq!(
        reloaded.usage(ProviderId(1), &ResourceClass::new_unchecked("DISK_GB")),
        7
    );
    assert_eq!(reloaded.consumers().count(), 2);
    let group = reloaded.server_group(&Uuid::from_u128(0x6001)).unwrap();
    assert_eq!(
        (&group.members[..], group.updated_at, group.created_at),
        (&[Uuid::from_u128(10), Uuid::from_u128(12)][..], 170, 100)
    );
    assert_eq!(Some(group), state.server_group(&Uuid::from_u128(0x6001)));
    let c10 = reloaded.consumer(&Uuid::from_u128(10)).unwrap();
    assert_eq!(c10.row, consumer(10, 1, Some("MIGRATION")));
    assert_eq!(&*c10.allocations, &[allocation(2, "VCPU", 1)]);
    assert!(reloaded.consumer(&Uuid::from_u128(11)).is_none());
    assert!(reloaded.consumer(&Uuid::from_u128(13)).is_none());
    let index = reloaded.provider_usage_index(ProviderId(2)).unwrap();
    assert_eq!(
        index.consumers.iter().copied().collect::<Vec<_>>(),
        vec![Uuid::from_u128(10), Uuid::from_u128(12)]
    );
    assert!(reloaded.class_exists(&ResourceClass::new_unchecked("CUSTOM_PIECE")));
    assert!(!reloaded.class_exists(&ResourceClass::new_unchecked("CUSTOM_SLICE")));
    assert!(reloaded.trait_exists(&TraitName::new_unchecked("CUSTOM_FAST")));
    assert_eq!(
        reloaded.provider(ProviderId(1)).unwrap().children.len(),
        2,
        "the root's children are 2 and, moved up, 4"
    );
    let moved = reloaded.provider(ProviderId(4)).unwrap();
    assert_eq!(
        (moved.row.parent, moved.row.generation),
        (Some(ProviderId(1)), 1)
    );
    let bumped = &reloaded.provider(ProviderId(2)).unwrap().row;
    assert_eq!((bumped.generation, bumped.updated_at), (1, 150));
    assert_eq!(&*bumped.name, "child ☃");
    // Ids are never reused, even after the highest one was deleted... as long as the
    // view saw it; after a reload the next id follows the highest surviving one.
    assert!(reloaded.next_provider_id().0 >= 3);
    // The renamed class kept its metadata; the deleted one left none behind: made
    // again, it starts bare, after another restart too.
    assert_eq!(
        reloaded.class_metadata(&ResourceClass::new_unchecked("CUSTOM_PIECE")),
        Some(widgets)
    );
    let gone = ResourceClass::new_unchecked("CUSTOM_GONE");
    assert_eq!(reloaded.class_metadata(&gone), None);
    let (_, again) = reloaded.create_class(gone.clone(), 9).unwrap();
    let mut store = Store::open(url).unwrap();
    store.persist(&again).unwrap();
    drop(store);
    let reloaded = Store::open(url).unwrap().load().unwrap();
    assert_eq!(
        reloaded.class_metadata(&gone),
        Some(allot_core::ClassMetadata::default())
    );
}

#[test]
fn sqlite_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite:{}", dir.path().join("allot.db").display()));
}

/// The SQLite engine's durability promise (`engine/sqlite.rs`), read back from its
/// own connection, the one every write goes through, after a write and again on a
/// reopened file: WAL mode with `synchronous=FULL` (2), so each commit is fsynced
/// before `persist` returns. `NORMAL` would leave the last commits to the next
/// checkpoint and lose them on a power cut, and no `kill -9` test would notice.
#[test]
fn sqlite_commits_are_synced_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("allot.db").display());
    for life in ["new", "reopened"] {
        let mut store = Store::open(&url).unwrap();
        let state = store.load().unwrap();
        let name = format!("CUSTOM_{}", life.to_uppercase());
        let (_, changes) = state
            .ensure_trait(TraitName::parse(&name).unwrap(), 1)
            .unwrap();
        store.persist(&changes).unwrap();
        let (journal_mode, synchronous) =
            store.sqlite_durability().expect("an SQLite store").unwrap();
        assert_eq!(journal_mode, "wal", "{life} file");
        assert_eq!(synchronous, 2, "{life} file: synchronous must be FULL (2)");
    }
}

#[test]
fn postgres_round_trip() {
    if let Some(db) = PgDatabase::new() {
        suite(&db.url);
    }
}

#[test]
fn mariadb_round_trip() {
    if let Some(db) = MyDatabase::new() {
        suite(&db.url);
    }
}

#[test]
fn bad_urls_are_explained() {
    let e = Store::open("oracle://x/y").unwrap_err().to_string();
    assert!(e.contains("expected sqlite:PATH, postgres://"), "{e}");
    let e = Store::open("mysql://x").unwrap_err().to_string();
    assert!(e.contains("names no database"), "{e}");
    let e = Store::open("mysql+pymysql://nobody:secret@127.0.0.1:1/db?charset=utf8")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mariadb: connecting to mysql+pymysql://nobody:***@127.0.0.1:1/db"),
        "{e}"
    );
    assert!(!e.contains("secret"), "{e}");
    // Malformed, unreachable: errors that say so, not panics.
    for url in ["postgres://a@/db", "postgresql://h:notaport/db"] {
        let e = Store::open(url).unwrap_err().to_string();
        assert!(e.contains("unsupported database URL"), "{e}");
    }
    let e = Store::open("postgres://nobody:secret@127.0.0.1:1/db?connect_timeout=2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("postgres: error connecting to server"), "{e}");
    assert!(!e.contains("secret"), "{e}");
}

/// A role the server does not know is refused with the server's own words.
#[test]
fn postgres_auth_failure_is_explained() {
    let Some(db) = PgDatabase::new() else { return };
    let url = db.url.replacen("://", "://no_such_role_here@", 1);
    let url = match url.split_once('@') {
        // Drop any user the admin URL had after ours.
        Some((ours, rest)) => format!("{ours}@{}", rest.rsplit('@').next().unwrap_or(rest)),
        None => url,
    };
    let e = Store::open(&url).unwrap_err().to_string();
    assert!(e.contains("no_such_role_here"), "{e}");
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32)
}

/// Persists every accepted plan of `ops` (one transaction each, as the host does),
/// reopening the database every `restart_every` steps and carrying on from what it
/// loads, as a restarted server would; at the end, a reload equals the view.
fn replay(ops: &[support::Op], restart_every: usize) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("allot.db").display());
    replay_at(&url, ops, restart_every);
}

/// [`replay`] on a database of its own on the test PostgreSQL server, if there is one.
fn replay_on_postgres(ops: &[support::Op], restart_every: usize) {
    if let Some(db) = PgDatabase::new() {
        replay_at(&db.url, ops, restart_every);
    }
}

/// [`replay`] on a database of its own on the test MariaDB server, if there is one.
fn replay_on_mariadb(ops: &[support::Op], restart_every: usize) {
    if let Some(db) = MyDatabase::new() {
        replay_at(&db.url, ops, restart_every);
    }
}

fn replay_at(url: &str, ops: &[support::Op], restart_every: usize) {
    let url = url.to_string();
    let mut store = Store::open(&url).unwrap();
    let mut state = store.load().unwrap();
    for (step, op) in ops.iter().enumerate() {
        if let Ok(changes) = support::plan(&state, op, step as i64 + 1) {
            if !changes.is_empty() {
                store.persist(&changes).unwrap();
                state.apply(&changes);
            }
        }
        if (step + 1) % restart_every == 0 {
            drop(store);
            store = Store::open(&url).unwrap();
            let reloaded = store.load().unwrap();
            assert_eq!(
                everything(&reloaded),
                everything(&state),
                "after step {step}"
            );
            assert!(reloaded.check_usage_index());
            state = reloaded;
        }
    }
    drop(store);
    let reloaded = Store::open(&url).unwrap().load().unwrap();
    assert_eq!(everything(&reloaded), everything(&state));
    assert!(reloaded.check_usage_index());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// 32 cases by default (each persists a few dozen transactions with fsync);
    /// `PROPTEST_CASES` raises it.
    #[test]
    fn random_histories_reload_exactly(ops in support::ops(40, true), restart_every in 5usize..40) {
        replay(&ops, restart_every);
    }

    /// The same with pending claims made, confirmed, released, expired and swept
    /// among the other operations: claims and their expiry reload exactly.
    #[test]
    fn claim_histories_reload_exactly(ops in support::claim_history(40), restart_every in 5usize..40) {
        replay(&ops, restart_every);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases().div_ceil(4),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The same histories on PostgreSQL (a quarter as many cases: each makes a
    /// database of its own).
    #[test]
    fn postgres_histories_reload_exactly(ops in support::ops(40, true), restart_every in 5usize..40) {
        replay_on_postgres(&ops, restart_every);
    }

    /// Claims on PostgreSQL.
    #[test]
    fn postgres_claim_histories_reload_exactly(ops in support::claim_history(40), restart_every in 5usize..40) {
        replay_on_postgres(&ops, restart_every);
    }

    /// The same histories on MariaDB.
    #[test]
    fn mariadb_histories_reload_exactly(ops in support::ops(40, true), restart_every in 5usize..40) {
        replay_on_mariadb(&ops, restart_every);
    }

    /// Claims on MariaDB.
    #[test]
    fn mariadb_claim_histories_reload_exactly(ops in support::claim_history(40), restart_every in 5usize..40) {
        replay_on_mariadb(&ops, restart_every);
    }
}

/// A change planned against a generation that is no longer the row's is refused as
/// `Stale`, and nothing of its transaction remains.
fn stale_generation_is_refused(url: &str) {
    let mut store = Store::open(url).unwrap();
    let create = vec![Change::PutProvider {
        row: provider(1, None, 1, "cn1"),
        previous_generation: None,
    }];
    store.persist(&create).unwrap();
    let mut bumped = provider(1, None, 1, "cn1");
    bumped.generation = 1;
    store
        .persist(&[Change::PutProvider {
            row: bumped.clone(),
            previous_generation: Some(0),
        }])
        .unwrap();
    // Planned against generation 0 again: lost the race.
    bumped.generation = 1;
    bumped.name = "lost".into();
    let lost = [
        Change::PutTrait(allot_core::TraitRecord {
            name: TraitName::new_unchecked("CUSTOM_LOST"),
            created_at: 1,
        }),
        Change::PutProvider {
            row: bumped,
            previous_generation: Some(0),
        },
    ];
    let e = store.persist(&lost).unwrap_err();
    assert!(matches!(e, allot_store::StoreError::Stale(_)), "{e}");
    // Creating it again is a lost race too.
    let e = store.persist(&create).unwrap_err();
    assert!(matches!(e, allot_store::StoreError::Stale(_)), "{e}");
    drop(store);
    let state = Store::open(url).unwrap().load().unwrap();
    assert!(!state.trait_exists(&TraitName::new_unchecked("CUSTOM_LOST")));
    let p = state.provider(ProviderId(1)).unwrap();
    assert_eq!((p.row.generation, p.row.name.as_str()), (1, "cn1"));
}

/// Two stores on one database creating the same provider (by uuid, or by name
/// under another uuid): the second is `Stale`.
fn second_create_is_stale(url: &str) {
    let (mut a, mut b) = (Store::open(url).unwrap(), Store::open(url).unwrap());
    a.persist(&[Change::PutProvider {
        row: provider(1, None, 1, "cn1"),
        previous_generation: None,
    }])
    .unwrap();
    // The same uuid under another id and name.
    let mut same_uuid = provider(2, None, 2, "cn2");
    same_uuid.uuid = Uuid::from_u128(1);
    // The same name under another uuid.
    let same_name = provider(3, None, 3, "cn1");
    for row in [same_uuid, same_name] {
        let e = b
            .persist(&[Change::PutProvider {
                row,
                previous_generation: None,
            }])
            .unwrap_err();
        assert!(matches!(e, allot_store::StoreError::Stale(_)), "{e}");
    }
    // A consumer made by both: the second is stale.
    let make = [Change::PutConsumer {
        row: consumer(10, 0, None),
        previous_generation: None,
    }];
    a.persist(&make).unwrap();
    let e = b.persist(&make).unwrap_err();
    assert!(matches!(e, allot_store::StoreError::Stale(_)), "{e}");
    let state = b.load().unwrap();
    assert_eq!(state.providers().count(), 1);
    assert_eq!(state.consumers().count(), 1);
}

#[test]
fn sqlite_stale_generation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    stale_generation_is_refused(&format!("sqlite:{}", dir.path().join("allot.db").display()));
}

#[test]
fn postgres_stale_generation_is_refused() {
    if let Some(db) = PgDatabase::new() {
        stale_generation_is_refused(&db.url);
    }
}

#[test]
fn postgres_second_create_is_stale() {
    if let Some(db) = PgDatabase::new() {
        second_create_is_stale(&db.url);
    }
}

#[test]
fn mariadb_stale_generation_is_refused() {
    if let Some(db) = MyDatabase::new() {
        stale_generation_is_refused(&db.url);
    }
}

#[test]
fn mariadb_second_create_is_stale() {
    if let Some(db) = MyDatabase::new() {
        second_create_is_stale(&db.url);
    }
}
