//! The store contract for several writers (issue 12), run against every engine: the
//! change log numbers commits without gaps and hands them back in order, a write
//! sees the commits its caller has not, and a change whose precondition does not
//! hold is refused as `Stale` with nothing written.
//!
//! `contract(url)` takes a fresh database each time; SQLite runs here, and the
//! PostgreSQL engine runs the same cases.

use allot_core::{
    Allocation, Change, ConsumerRow, Inventory, ProviderId, ProviderRow, ResourceClass, Uuid,
};
use allot_store::{Commit, Cursor, Store, StoreError};

mod mariadb;
mod pg;
use mariadb::MyDatabase;
use pg::PgDatabase;

fn provider(id: u64, name: &str, generation: u64) -> ProviderRow {
    ProviderRow {
        id: ProviderId(id),
        uuid: Uuid::from_u128(id as u128),
        name: name.into(),
        generation,
        parent: None,
        root: ProviderId(id),
        created_at: 1,
        updated_at: 1,
    }
}

fn create(id: u64, name: &str) -> Change {
    Change::PutProvider {
        row: provider(id, name, 0),
        previous_generation: None,
    }
}

fn bump(id: u64, name: &str, from: u64) -> Change {
    Change::PutProvider {
        row: provider(id, name, from + 1),
        previous_generation: Some(from),
    }
}

fn consumer(generation: u64, previous: Option<u64>) -> Change {
    Change::PutConsumer {
        row: ConsumerRow {
            uuid: Uuid::from_u128(77),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation,
            created_at: 1,
            updated_at: 1,
        },
        previous_generation: previous,
    }
}

/// The contract's cases, each on a database of its own made by `fresh`.
pub fn contract(fresh: &mut dyn FnMut() -> String) {
    // Commits are numbered from 1 without gaps, and read back in order.
    let mut store = Store::open(&fresh()).unwrap();
    assert_eq!(store.head().unwrap(), Cursor(0));
    let first = store.persist(&[create(1, "a")]).unwrap();
    let inventory = Change::SetInventories(
        ProviderId(1),
        vec![(
            ResourceClass::new_unchecked("VCPU"),
            Inventory::with_total(8),
        )],
    );
    let second = store
        .persist(&[bump(1, "a", 0), inventory.clone()])
        .unwrap();
    assert_eq!((first, second), (Cursor(1), Cursor(2)));
    assert_eq!(store.head().unwrap(), Cursor(2));
    let commits = store.changes_since(Cursor(0)).unwrap();
    assert_eq!(
        commits,
        vec![
            Commit {
                cursor: Cursor(1),
                changes: vec![create(1, "a")]
            },
            Commit {
                cursor: Cursor(2),
                changes: vec![bump(1, "a", 0), inventory]
            },
        ]
    );
    assert_eq!(store.changes_since(Cursor(1)).unwrap(), commits[1..]);
    assert!(store.changes_since(Cursor(2)).unwrap().is_empty());
    // The snapshot's cursor is the head it was read at.
    let (state, at) = store.snapshot().unwrap();
    assert_eq!(at, Cursor(2));
    assert_eq!(
        state
            .provider_by_uuid(&Uuid::from_u128(1))
            .unwrap()
            .row
            .generation,
        1
    );

    // A write is handed the commits after its cursor, oldest first, and its changes
    // become the next commit.
    let mut seen = Vec::new();
    let head = store
        .write(Cursor(0), &mut |unseen| {
            seen = unseen.iter().map(|c| c.cursor).collect();
            vec![bump(1, "a", 1)]
        })
        .unwrap();
    assert_eq!(seen, [Cursor(1), Cursor(2)]);
    assert_eq!(head, Cursor(3));
    // A plan that returns nothing writes nothing and leaves the head.
    let head = store.write(Cursor(3), &mut |_| Vec::new()).unwrap();
    assert_eq!(head, Cursor(3));
    assert_eq!(store.head().unwrap(), Cursor(3));

    // Preconditions: a generation that is not the stored one, a provider or a
    // consumer created twice, allocations of a consumer that has no row. Each is
    // `Stale`, and nothing of its transaction stays.
    let orphan = Change::SetAllocations(
        Uuid::from_u128(78),
        vec![Allocation {
            provider: ProviderId(1),
            class: ResourceClass::new_unchecked("VCPU"),
            used: 1,
        }],
    );
    let stale = [
        vec![create(2, "b"), bump(1, "a", 1)],
        vec![create(2, "b"), create(1, "other name, same id and uuid")],
        vec![create(2, "b"), create(3, "a")],
        vec![consumer(1, None), consumer(1, None)],
        vec![consumer(1, None), consumer(3, Some(2))],
        vec![consumer(1, None), orphan],
    ];
    for changes in stale {
        match store.persist(&changes) {
            Err(StoreError::Stale(_)) => {}
            other => panic!("{changes:?}: {other:?}"),
        }
        assert_eq!(store.head().unwrap(), Cursor(3), "{changes:?}");
    }
    let (state, _) = store.snapshot().unwrap();
    assert!(state.provider_by_uuid(&Uuid::from_u128(2)).is_none());
    assert!(state.consumer(&Uuid::from_u128(77)).is_none());
    // The same changes with the right preconditions go in.
    store
        .persist(&[consumer(1, None), consumer(2, Some(1)), bump(1, "a", 2)])
        .unwrap();
    drop(store);

    // A reopened store carries on from the same head.
    let url = fresh();
    let mut store = Store::open(&url).unwrap();
    store.persist(&[create(1, "a")]).unwrap();
    drop(store);
    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.head().unwrap(), Cursor(1));
    assert_eq!(store.persist(&[bump(1, "a", 0)]).unwrap(), Cursor(2));
}

#[test]
fn sqlite_contract() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    contract(&mut || {
        n += 1;
        format!(
            "sqlite:{}",
            dir.path().join(format!("db{n}.sqlite")).display()
        )
    });
}

#[test]
fn postgres_contract() {
    if PgDatabase::new().is_none() {
        return;
    }
    let mut databases = Vec::new();
    contract(&mut || {
        let db = PgDatabase::new().unwrap();
        let url = db.url.clone();
        databases.push(db);
        url
    });
}

/// Names that differ in case, in trailing spaces or only in accents are different
/// names on every engine (MariaDB's default collation would call them one), a
/// name of the longest length allot allows is stored whole, and quotes and
/// backslashes are stored as they are.
fn names_compare_byte_for_byte(url: &str) {
    let mut store = Store::open(url).unwrap();
    let long = "n".repeat(255);
    let names = [
        "cn1",
        "CN1",
        "cn1 ",
        "cné",
        "cne",
        &long,
        // What a store that wrote values into its statements would get wrong.
        "o'brien",
        "back\\slash\\'",
        "'); DROP TABLE providers; --",
    ];
    let changes: Vec<Change> = names
        .iter()
        .enumerate()
        .map(|(i, name)| create(i as u64 + 1, name))
        .collect();
    store.persist(&changes).unwrap();
    let state = store.load().unwrap();
    let mut stored: Vec<String> = state.providers().map(|p| p.row.name.to_string()).collect();
    stored.sort();
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    assert_eq!(stored, expected);
    // The same name again is taken, byte for byte.
    assert!(matches!(
        store.persist(&[create(99, "cn1 ")]),
        Err(StoreError::Stale(_))
    ));
}

#[test]
fn sqlite_names_compare_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    names_compare_byte_for_byte(&format!("sqlite:{}", dir.path().join("a.db").display()));
}

#[test]
fn postgres_names_compare_byte_for_byte() {
    if let Some(db) = PgDatabase::new() {
        names_compare_byte_for_byte(&db.url);
    }
}

#[test]
fn mariadb_names_compare_byte_for_byte() {
    if let Some(db) = MyDatabase::new() {
        names_compare_byte_for_byte(&db.url);
    }
}

#[test]
fn mariadb_contract() {
    if MyDatabase::new().is_none() {
        return;
    }
    let mut databases = Vec::new();
    contract(&mut || {
        let db = MyDatabase::new().unwrap();
        let url = db.url.clone();
        databases.push(db);
        url
    });
}

/// Two stores on one shared database, as two nodes have: each learns the other's
/// commits through `changes_since`, and a write hands them to its plan first; two
/// creates of one provider (by uuid or by name) or one consumer end with the second
/// `Stale`, or seen by its plan when it comes after.
pub fn shared_contract(url: &str) {
    let (mut a, mut b) = (Store::open(url).unwrap(), Store::open(url).unwrap());
    let (_, b_at) = b.snapshot().unwrap();
    assert_eq!(a.persist(&[create(1, "a")]).unwrap(), Cursor(1));
    assert_eq!(a.persist(&[bump(1, "a", 0)]).unwrap(), Cursor(2));
    assert_eq!(b.head().unwrap(), Cursor(2));
    let seen: Vec<Cursor> = b
        .changes_since(b_at)
        .unwrap()
        .iter()
        .map(|c| c.cursor)
        .collect();
    assert_eq!(seen, [Cursor(1), Cursor(2)]);
    // B plans from where it loaded: its plan sees A's commits first, and plans
    // against them (the provider exists now, at generation 1).
    let mut handed = Vec::new();
    let head = b
        .write(b_at, &mut |unseen| {
            handed = unseen.clone();
            let exists = unseen
                .iter()
                .flat_map(|c| &c.changes)
                .any(|c| matches!(c, Change::PutProvider { row, .. } if row.id == ProviderId(1)));
            if exists {
                vec![bump(1, "a", 1)]
            } else {
                vec![create(1, "a")]
            }
        })
        .unwrap();
    assert_eq!(head, Cursor(3));
    assert_eq!(
        handed.iter().map(|c| c.cursor).collect::<Vec<_>>(),
        [Cursor(1), Cursor(2)]
    );
    assert_eq!(handed[0].changes, vec![create(1, "a")]);
    // A learns B's commit.
    assert_eq!(
        a.changes_since(Cursor(2)).unwrap(),
        vec![Commit {
            cursor: Cursor(3),
            changes: vec![bump(1, "a", 1)]
        }]
    );

    // Creates that a plan made without the other's commit (persist hands it
    // nothing): the second is Stale, and nothing of it is written.
    let mut same_uuid = provider(2, "b", 0);
    same_uuid.uuid = Uuid::from_u128(1);
    for changes in [
        vec![Change::PutProvider {
            row: same_uuid,
            previous_generation: None,
        }],
        vec![create(3, "a")],
    ] {
        match b.persist(&changes) {
            Err(StoreError::Stale(_)) => {}
            other => panic!("{changes:?}: {other:?}"),
        }
    }
    assert_eq!(a.persist(&[consumer(0, None)]).unwrap(), Cursor(4));
    assert!(matches!(
        b.persist(&[consumer(0, None)]),
        Err(StoreError::Stale(_))
    ));
    assert_eq!(b.head().unwrap(), Cursor(4));
    let (state, at) = b.snapshot().unwrap();
    assert_eq!(at, Cursor(4));
    assert_eq!(state.providers().count(), 1);
    assert_eq!(state.consumers().count(), 1);
}

#[test]
fn postgres_shared_contract() {
    if let Some(db) = PgDatabase::new() {
        shared_contract(&db.url);
    }
}

#[test]
fn mariadb_shared_contract() {
    if let Some(db) = MyDatabase::new() {
        shared_contract(&db.url);
    }
}

#[test]
fn postgres_racing_creates_serialise() {
    if let Some(db) = PgDatabase::new() {
        racing_creates_serialise(&db.url);
    }
}

#[test]
fn mariadb_racing_creates_serialise() {
    if let Some(db) = MyDatabase::new() {
        racing_creates_serialise(&db.url);
    }
}

/// Two nodes racing to create the same provider, each on its own thread from the
/// same starting view: exactly one creates it; the other's plan sees that commit
/// (the log's lock orders them) and creates nothing.
fn racing_creates_serialise(url: &str) {
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let url = url.to_owned();
            std::thread::spawn(move || {
                let mut store = Store::open(&url).unwrap();
                let mut made = false;
                for _ in 0..20 {
                    store
                        .write(Cursor(0), &mut |unseen| {
                            let exists = unseen.iter().flat_map(|c| &c.changes).any(
                                |c| matches!(c, Change::PutProvider { row, .. } if row.name == "cn1"),
                            );
                            made |= !exists;
                            if exists {
                                Vec::new()
                            } else {
                                vec![create(1, "cn1")]
                            }
                        })
                        .unwrap();
                }
                made
            })
        })
        .collect();
    let made: Vec<bool> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    assert_eq!(made.iter().filter(|m| **m).count(), 1, "{made:?}");
    let mut store = Store::open(url).unwrap();
    assert_eq!(store.head().unwrap(), Cursor(1));
}

/// A listener on a shared database wakes within a second of another store's
/// commit; an embedded database has none.
#[test]
fn listeners_wake_on_commits() {
    assert!(Store::listener("sqlite:/nonexistent/x.db")
        .unwrap()
        .is_none());
    let Some(db) = PgDatabase::new() else { return };
    let mut store = Store::open(&db.url).unwrap();
    let mut listener = Store::listener(&db.url).unwrap().unwrap();
    assert!(!listener.wait(std::time::Duration::from_millis(50)).unwrap());
    let waiter = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let woke = listener.wait(std::time::Duration::from_secs(5)).unwrap();
        (woke, start.elapsed())
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    store.persist(&[create(1, "a")]).unwrap();
    let (woke, after) = waiter.join().unwrap();
    assert!(woke);
    assert!(after < std::time::Duration::from_secs(1), "{after:?}");
}

/// The writer's lease on MariaDB (a row, since Galera replicates no lock): one
/// holder at a time; a store whose lease is not held commits nothing; a holder
/// that stops renewing is replaced after the expiry, and its store's commits are
/// refused from then on (the fence), even though it still thinks it writes.
#[test]
fn mariadb_lease_fences_every_commit() {
    use allot_store::WriterRole::{At, This, Unknown};
    let Some(db) = MyDatabase::new() else { return };
    let (mut a, mut b) = (Store::open(&db.url).unwrap(), Store::open(&db.url).unwrap());
    // Without a lease (a tool), a store writes unfenced.
    assert_eq!(a.persist(&[create(1, "a")]).unwrap(), Cursor(1));
    let mut lease_a = Store::lease(&db.url, Some("http://a:8778".into()), a.fence())
        .unwrap()
        .unwrap();
    let mut lease_b = Store::lease(&db.url, None, b.fence()).unwrap().unwrap();
    assert!(lease_a.fenced());
    // Armed and not held: nothing commits.
    assert!(matches!(
        a.persist(&[bump(1, "a", 0)]),
        Err(StoreError::NotWriter(_))
    ));
    assert_eq!(lease_a.tick().unwrap(), This, "free: taken at once");
    assert_eq!(lease_b.tick().unwrap(), At("http://a:8778".into()));
    assert_eq!(a.persist(&[bump(1, "a", 0)]).unwrap(), Cursor(2));
    assert!(matches!(
        b.persist(&[bump(1, "a", 1)]),
        Err(StoreError::NotWriter(_))
    ));
    // A keeps renewing: B does not take it, however long it looks.
    for _ in 0..7 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        assert_eq!(lease_a.tick().unwrap(), This);
        assert_eq!(lease_b.tick().unwrap(), At("http://a:8778".into()));
    }
    // A stalls (no tick): after the expiry B takes the lease, and A's next commit
    // is refused although A has not noticed.
    let started = std::time::Instant::now();
    let taken = loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let role = lease_b.tick().unwrap();
        if role == This || started.elapsed() > std::time::Duration::from_secs(10) {
            break role;
        }
    };
    assert_eq!(taken, This, "not taken over in 10 s");
    assert!(started.elapsed() >= std::time::Duration::from_secs(4));
    assert!(matches!(
        a.persist(&[bump(1, "a", 1)]),
        Err(StoreError::NotWriter(_))
    ));
    assert_eq!(b.persist(&[bump(1, "a", 1)]).unwrap(), Cursor(3));
    // A's next tick learns it lost the lease; B has no URL, so nobody to forward to.
    assert_eq!(lease_a.tick().unwrap(), Unknown);
    // B stops: the lease is given back, and A takes it at its next tick.
    drop(lease_b);
    assert_eq!(lease_a.tick().unwrap(), This);
    assert_eq!(a.persist(&[bump(1, "a", 2)]).unwrap(), Cursor(4));
    assert!(matches!(
        b.persist(&[bump(1, "a", 3)]),
        Err(StoreError::NotWriter(_))
    ));
}

/// A write of any size (an import) goes in one transaction where the engine takes
/// it, and on MariaDB in parts of `LARGE_WRITE_PART` changes, each one commit of
/// the log: whatever the parts, the whole is written.
fn large_writes(url: &str, commits: i64) {
    let mut store = Store::open(url).unwrap();
    let changes: Vec<Change> = (0..allot_store::LARGE_WRITE_PART * 2 + 1)
        .map(|i| {
            Change::PutTrait(allot_core::TraitRecord {
                name: allot_core::TraitName::new_unchecked(format!("CUSTOM_T{i}")),
                created_at: 1,
            })
        })
        .collect();
    assert_eq!(store.persist_large(&changes).unwrap(), Cursor(commits));
    let state = store.load().unwrap();
    assert!(
        state.trait_exists(&allot_core::TraitName::new_unchecked(format!(
            "CUSTOM_T{}",
            allot_store::LARGE_WRITE_PART * 2
        )))
    );
    assert_eq!(
        store.changes_since(Cursor(0)).unwrap().len(),
        commits as usize
    );
}

#[test]
fn sqlite_large_writes_are_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    large_writes(&format!("sqlite:{}", dir.path().join("a.db").display()), 1);
}

#[test]
fn mariadb_large_writes_go_in_parts() {
    if let Some(db) = MyDatabase::new() {
        large_writes(&db.url, 3);
    }
}

/// The cluster key (issue 46): nodes that open the database together all get the
/// same key, a later open gets it again, and it is in neither the change log nor
/// a dump nor `Debug`.
/// `racers` nodes open it at once (one for SQLite, whose file is one process's).
fn cluster_key_is_made_once(url: &str, racers: usize) {
    let racers: Vec<_> = (0..racers)
        .map(|_| {
            let url = url.to_owned();
            std::thread::spawn(move || Store::open(&url).unwrap().cluster_key().unwrap())
        })
        .collect();
    let keys: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    let key = &keys[0];
    assert_ne!(key.0, [0u8; 32]);
    assert_eq!(format!("{key:?}"), "ClusterKey(..)");
    let mut store = Store::open(url).unwrap();
    assert_eq!(&store.cluster_key().unwrap(), key);
    store.persist(&[create(1, "a")]).unwrap();
    let commits = store.changes_since(Cursor(0)).unwrap();
    assert!(!format!("{commits:?}").contains(&format!("{:?}", key.0)));
    let mut out = Vec::new();
    allot_store::dump::write(
        &allot_store::dump::export_store(&mut store, 1).unwrap(),
        &mut out,
    )
    .unwrap();
    let hex: String = key.0.iter().map(|b| format!("{b:02x}")).collect();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains(&hex) && !text.contains("cluster"), "{text}");
}

#[test]
fn sqlite_cluster_key_is_made_once() {
    let dir = tempfile::tempdir().unwrap();
    cluster_key_is_made_once(&format!("sqlite:{}", dir.path().join("k.db").display()), 1);
}

#[test]
fn postgres_cluster_key_is_made_once() {
    if let Some(db) = PgDatabase::new() {
        cluster_key_is_made_once(&db.url, 4);
    }
}

#[test]
fn mariadb_cluster_key_is_made_once() {
    if let Some(db) = MyDatabase::new() {
        cluster_key_is_made_once(&db.url, 4);
    }
}

/// The web UI's logouts (issue 46, `Change::RevokeSession`) are written to and
/// loaded from every engine's tables, and those whose session would have ended by
/// a later logout's time are deleted with it.
fn revocations_are_stored(url: &str) {
    let revoke = |hash: &str, until, now| Change::RevokeSession {
        hash: hash.into(),
        until,
        now,
    };
    let mut store = Store::open(url).unwrap();
    store
        .persist(&[revoke("a", 100, 10), revoke("b", 200, 10)])
        .unwrap();
    // The same session logged out twice (two nodes at once) is one revocation.
    store.persist(&[revoke("b", 200, 20)]).unwrap();
    let view = store.load().unwrap();
    assert_eq!(
        view.session_revocations().collect::<Vec<_>>(),
        [("a", 100), ("b", 200)]
    );
    store.persist(&[revoke("c", 300, 150)]).unwrap();
    let view = store.load().unwrap();
    assert_eq!(
        view.session_revocations().collect::<Vec<_>>(),
        [("b", 200), ("c", 300)]
    );
}

#[test]
fn sqlite_revocations_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("r.db").display());
    revocations_are_stored(&url);
}

#[test]
fn postgres_revocations_are_stored() {
    if let Some(db) = PgDatabase::new() {
        revocations_are_stored(&db.url);
    }
}

#[test]
fn mariadb_revocations_are_stored() {
    if let Some(db) = MyDatabase::new() {
        revocations_are_stored(&db.url);
    }
}
