//! The view saved beside an SQLite file at a clean stop (`engine/saved.rs`): read
//! back at the next start the same as the tables give it, and never once anything
//! may have written the database since, nor when the saved file is damaged.

use std::path::{Path, PathBuf};

use allot_core::{Change, ProviderId, State};
use allot_store::{Host, Store};

mod world;

use world::*;

fn url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

fn saved_path(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-view", db.display()))
}

/// A database holding the varied world, read from its tables.
fn world_db(dir: &tempfile::TempDir) -> (PathBuf, State) {
    let db = dir.path().join("allot.db");
    let mut store = Store::open(&url(&db)).unwrap();
    store.persist(&world()).unwrap();
    drop(store);
    let mut store = Store::open(&url(&db)).unwrap();
    let tables = store.load().unwrap();
    assert!(!store.read_saved_view());
    (db, tables)
}

/// Opens the database, loads it, and stops cleanly (saving the view).
fn start_and_stop(db: &Path) -> (State, bool) {
    let mut store = Store::open(&url(db)).unwrap();
    let (view, head) = store.snapshot().unwrap();
    let read_saved = store.read_saved_view();
    store.close(&view, head);
    (view, read_saved)
}

/// The view a start reads now, and whether it was the saved one.
fn start(db: &Path) -> (State, bool) {
    let mut store = Store::open(&url(db)).unwrap();
    let view = store.load().unwrap();
    (view, store.read_saved_view())
}

/// Every way a view could differ from `tables`: its records and everything derived
/// from them, and the lookups by uuid and name.
fn assert_same(view: &State, tables: &State) {
    assert_eq!(everything(view), everything(tables));
    assert!(view.providers().eq(tables.providers()));
    assert!(view.check_usage_index());
    for p in tables.providers() {
        assert_eq!(
            view.provider_by_uuid(&p.uuid()).map(|q| q.id()),
            Some(p.id())
        );
        assert_eq!(
            view.provider_by_name(&p.row.name).map(|q| q.id()),
            Some(p.id())
        );
    }
    assert_eq!(view.next_provider_id(), tables.next_provider_id());
}

#[test]
fn a_view_saved_at_a_stop_is_read_back_as_the_tables_give_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tables) = world_db(&dir);
    // The world really is varied: the checks would pass on an empty one.
    assert_eq!(tables.providers().count(), 8);
    assert_eq!(tables.consumers().count(), 5);
    assert_eq!(tables.claims().count(), 5);
    assert_eq!(tables.sharing_providers().count(), 1);

    let (_, read_saved) = start_and_stop(&db);
    assert!(!read_saved);
    assert!(saved_path(&db).exists());
    // No file of the save's own is left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["allot.db", "allot.db-lock", "allot.db-view"]);
    // It holds what the database holds: its owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(saved_path(&db))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let (view, read_saved) = start(&db);
    assert!(read_saved);
    assert_same(&view, &tables);
}

#[test]
fn a_write_after_the_save_makes_the_next_start_read_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = world_db(&dir);
    start_and_stop(&db);
    let mut store = Store::open(&url(&db)).unwrap();
    let mut view = store.load().unwrap();
    assert!(store.read_saved_view());
    let change = Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0004));
    store.persist(std::slice::from_ref(&change)).unwrap();
    view.apply(&[change]);
    // Stopped without saving, as a kill would stop it.
    drop(store);

    let (after, read_saved) = start(&db);
    assert!(
        !read_saved,
        "a saved view older than the last commit was read"
    );
    assert_eq!(after.claims().count(), 4);
    assert_same(&after, &view);
    assert!(!saved_path(&db).exists(), "the stale saved view is removed");
}

#[test]
fn a_change_behind_allot_s_back_makes_the_next_start_read_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = world_db(&dir);
    start_and_stop(&db);
    // Another program edits the file (no allot write, so the log's head stays).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE providers SET name = 'renamed' WHERE id = 1", [])
        .unwrap();
    drop(conn);

    let (after, read_saved) = start(&db);
    assert!(!read_saved);
    assert_eq!(after.provider(ProviderId(1)).unwrap().row.name, "renamed");
    assert!(after.provider_by_name("renamed").is_some());
}

#[test]
fn a_saved_view_cut_short_or_damaged_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tables) = world_db(&dir);
    let saved = saved_path(&db);
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 5] = [
        ("cut short", |b| b.truncate(b.len() / 2)),
        ("a byte flipped", |b| {
            let i = b.len() / 2;
            b[i] ^= 0x40;
        }),
        ("the head's last byte gone", |b| {
            b.pop();
        }),
        ("not a saved view", |b| b[0] = b'x'),
        ("the first block's length 4 GiB", |b| b[32..36].fill(0xff)),
    ];
    for (what, damage) in damages {
        start_and_stop(&db);
        let mut bytes = std::fs::read(&saved).unwrap();
        damage(&mut bytes);
        std::fs::write(&saved, &bytes).unwrap();
        let (view, read_saved) = start(&db);
        assert!(!read_saved, "{what}: read");
        assert_same(&view, &tables);
        assert!(!saved.exists(), "{what}: kept");
    }
}

#[test]
fn a_save_cut_short_leaves_nothing_that_is_read_or_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tables) = world_db(&dir);
    start_and_stop(&db);
    let saved = saved_path(&db);
    // A stop killed while it wrote: the half-written file beside the older one.
    let tmp = PathBuf::from(format!("{}.tmp", saved.display()));
    let consumers = PathBuf::from(format!("{}.tmp.consumers", saved.display()));
    let bytes = std::fs::read(&saved).unwrap();
    std::fs::write(&tmp, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(&consumers, &bytes[..bytes.len() / 4]).unwrap();
    let (view, read_saved) = start(&db);
    assert!(read_saved);
    assert_same(&view, &tables);
    assert!(!tmp.exists() && !consumers.exists());
}

#[test]
fn the_host_saves_the_view_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tables) = world_db(&dir);
    let clock: allot_store::Clock = std::sync::Arc::new(|| 1_000);
    let host = Host::new(Store::open(&url(&db)).unwrap(), clock).unwrap();
    let last = Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0004));
    let mut expected = tables.clone();
    expected.apply(std::slice::from_ref(&last));
    host.write(move |_, _| Ok(((), vec![last]))).unwrap();
    drop(host);

    let (view, read_saved) = start(&db);
    assert!(read_saved);
    assert_same(&view, &expected);
}

/// What a kill leaves when the view was saved while the store was in use, at the
/// commit of `first`, and `later` was written after it: returns the view of every
/// commit.
fn saved_while_running_then_killed(db: &Path, first: Change, later: &[Change]) -> State {
    let mut store = Store::open(&url(db)).unwrap();
    let mut view = store.load().unwrap();
    let at = store.persist(std::slice::from_ref(&first)).unwrap();
    view.apply(&[first]);
    let save = store
        .running_save(at)
        .unwrap()
        .expect("a save of the last commit");
    save.write(&view).unwrap();
    for change in later {
        store.persist(std::slice::from_ref(change)).unwrap();
        view.apply(std::slice::from_ref(change));
    }
    // Stopped without the save at a clean stop, as a kill would stop it.
    drop(store);
    view
}

/// The world's changes a test writes after the save: a claim and a consumer gone, a
/// provider renamed.
fn later_changes() -> Vec<Change> {
    vec![
        Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0004)),
        Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0003)),
        update(put(2, Some(7), 7, "renamed", 3), 2),
    ]
}

#[test]
fn a_view_saved_while_running_and_the_log_after_it_give_what_the_tables_give() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = world_db(&dir);
    let first = Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0005));
    let view = saved_while_running_then_killed(&db, first, &later_changes());
    assert_eq!(view.claims().count(), 2);

    // Nothing to save for a commit that is not the log's last.
    let store = Store::open(&url(&db)).unwrap();
    assert!(store
        .running_save(allot_store::Cursor(1))
        .unwrap()
        .is_none());
    drop(store);

    let mut store = Store::open(&url(&db)).unwrap();
    let (read, head) = store.snapshot().unwrap();
    assert!(
        store.read_saved_view(),
        "the view saved while running was not read"
    );
    assert_same(&read, &view);
    assert_eq!(read.provider(ProviderId(2)).unwrap().row.name, "renamed");
    drop(store);

    // The tables agree.
    std::fs::remove_file(saved_path(&db)).unwrap();
    let mut store = Store::open(&url(&db)).unwrap();
    let (tables, tables_head) = store.snapshot().unwrap();
    assert!(!store.read_saved_view());
    assert_eq!(tables_head, head);
    assert_same(&read, &tables);
}

#[test]
fn a_view_saved_while_running_is_not_read_once_its_commit_is_gone_or_another() {
    type Edit = fn(&Path, i64);
    let edits: [(&str, Edit); 3] = [
        // Pruned from the log (as after 10,000 more commits).
        ("its commit pruned", |db, seq| {
            let conn = rusqlite::Connection::open(db).unwrap();
            conn.execute("DELETE FROM change_log WHERE seq <= ?1", [seq])
                .unwrap();
        }),
        // The log's record of that commit is not the one saved from (another history).
        ("its commit another", |db, seq| {
            let conn = rusqlite::Connection::open(db).unwrap();
            conn.execute(
                "UPDATE change_log SET changes = ?1 WHERE seq = ?2",
                rusqlite::params![allot_store::log::encode(&[]), seq],
            )
            .unwrap();
        }),
        // The same bytes in another file put in its place (a restore, a copy).
        ("the file replaced", |db, _| {
            let copy = db.with_extension("copy");
            std::fs::copy(db, &copy).unwrap();
            std::fs::rename(&copy, db).unwrap();
        }),
    ];
    for (what, edit) in edits {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = world_db(&dir);
        let first = Change::DeleteClaim(allot_core::Uuid::from_u128(0xc1a1_0005));
        let view = saved_while_running_then_killed(&db, first, &later_changes());
        let saved_at = {
            let mut store = Store::open(&url(&db)).unwrap();
            store.head().unwrap().0 - later_changes().len() as i64
        };
        edit(&db, saved_at);
        let (after, read_saved) = start(&db);
        assert!(!read_saved, "{what}: the view saved while running was read");
        assert!(!saved_path(&db).exists(), "{what}: kept");
        if what != "its commit another" {
            assert_same(&after, &view);
        }
    }
}

/// The web UI's logouts (issue 46, `Change::RevokeSession`) are read back from the
/// tables and from the saved view alike, and those whose session would have ended
/// by the time of a later logout are forgotten.
#[test]
fn revoked_sessions_are_read_back_from_the_tables_and_the_saved_view() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("allot.db");
    let revoke = |hash: &str, until, now| Change::RevokeSession {
        hash: hash.into(),
        until,
        now,
    };
    let mut store = Store::open(&url(&db)).unwrap();
    store
        .persist(&[revoke("a", 100, 10), revoke("b", 200, 10)])
        .unwrap();
    store.persist(&[revoke("c", 300, 150)]).unwrap();
    drop(store);
    let expected = [("b", 200), ("c", 300)];
    let (tables, read_saved) = start_and_stop(&db);
    assert!(!read_saved);
    assert_eq!(tables.session_revocations().collect::<Vec<_>>(), expected);
    let (view, read_saved) = start(&db);
    assert!(read_saved);
    assert_eq!(view.session_revocations().collect::<Vec<_>>(), expected);
}
