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
