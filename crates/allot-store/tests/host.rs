//! The host's group commit, through its public interface on a real SQLite file: writes
//! queued together are planned one after another and committed together, a store
//! failure fails exactly its batch, and a reader's version never changes under it.

use std::sync::{mpsc, Arc};

use allot_core::{Change, ConflictCode, Error, ProviderId, ProviderRow, State, Uuid};
use allot_store::{Host, Pending, Store, WriteError};

fn open(dir: &std::path::Path) -> Host {
    let url = format!("sqlite:{}", dir.join("host.db").display());
    Host::new(Store::open(&url).unwrap(), Arc::new(|| 1000)).unwrap()
}

fn wait<T>(pending: Pending<T>) -> Result<T, WriteError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(pending.wait())
}

fn row(id: u64, name: &str, generation: u64) -> ProviderRow {
    ProviderRow {
        id: ProviderId(id),
        uuid: Uuid::from_u128(id.into()),
        name: name.into(),
        generation,
        parent: None,
        root: ProviderId(id),
        created_at: 1000,
        updated_at: 1000,
    }
}

fn create(id: u64, name: &str) -> Change {
    Change::PutProvider {
        row: row(id, name, 0),
        previous_generation: None,
    }
}

/// Keeps the writer inside a write of its own until the returned sender is dropped,
/// so that every write submitted meanwhile waits in the queue and they all form the
/// next batch.
fn hold_writer(host: &Host) -> (mpsc::Sender<()>, Pending<()>) {
    let (release, held) = mpsc::channel::<()>();
    let (inside, entered) = mpsc::channel();
    let pending = host.submit(move |_, _| {
        inside.send(()).unwrap();
        // Returns when the sender is dropped.
        let _ = held.recv();
        Ok(((), Vec::new()))
    });
    entered.recv().unwrap();
    (release, pending)
}

/// Moves provider 1's generation up by one, refusing past `limit`: a stand-in for a
/// claim on a provider with room for `limit` of them. Answers the generation it saw.
fn bump_within(state: &State, limit: u64) -> allot_core::ops::Plan<u64> {
    let seen = state.provider(ProviderId(1)).unwrap().row.generation;
    if seen >= limit {
        return Err(Error::conflict(ConflictCode::Other, "full"));
    }
    let change = Change::PutProvider {
        row: row(1, "p1", seen + 1),
        previous_generation: Some(seen),
    };
    Ok((seen, vec![change]))
}

#[test]
fn writes_queued_together_see_each_other_and_commit_together() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path());
    host.write(|_, _| Ok(((), vec![create(1, "p1")]))).unwrap();

    let (release, held) = hold_writer(&host);
    let writes: Vec<_> = (0..10)
        .map(|_| host.submit(|state, _| bump_within(state, 6)))
        .collect();
    drop(release);
    wait(held).unwrap();
    let mut seen = Vec::new();
    let mut refused = 0;
    for write in writes {
        match wait(write) {
            Ok(generation) => seen.push(generation),
            Err(WriteError::Refused(Error::Conflict { .. })) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    // Each write saw the one before it: the generations seen are 0..6, each once, in
    // the order the writes were queued, and the rest were refused.
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
    assert_eq!(refused, 4);
    assert_eq!(
        host.read().provider(ProviderId(1)).unwrap().row.generation,
        6
    );

    // What the view shows is what the disk holds.
    drop(host);
    let reopened = open(dir.path());
    assert_eq!(
        reopened
            .read()
            .provider(ProviderId(1))
            .unwrap()
            .row
            .generation,
        6
    );
}

#[test]
fn a_store_failure_fails_exactly_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path());
    host.write(|_, _| Ok(((), vec![create(1, "p1")]))).unwrap();
    let before = host.read();

    let (release, held) = hold_writer(&host);
    // A good write, and one the rules would have refused (a second provider named
    // `p1`), planned here without them so that the store's unique index refuses it.
    let good = host.submit(|_, _| Ok(((), vec![create(2, "p2")])));
    let bad = host.submit(|_, _| Ok(((), vec![create(3, "p1")])));
    drop(release);
    wait(held).unwrap();
    assert!(matches!(wait(good), Err(WriteError::Store(_))));
    assert!(matches!(wait(bad), Err(WriteError::Store(_))));
    // Nothing of the batch is visible, and the next batch commits as usual.
    let after = host.read();
    assert!(after.provider(ProviderId(2)).is_none());
    assert_eq!(after.providers().count(), 1);
    host.write(|_, _| Ok(((), vec![create(4, "p4")]))).unwrap();

    drop(host);
    let reopened = open(dir.path()).read();
    let names: Vec<_> = reopened.providers().map(|p| p.row.name.clone()).collect();
    assert_eq!(names, ["p1", "p4"]);
    // The version taken before the failure is as it was.
    assert_eq!(before.providers().count(), 1);
}

#[test]
fn a_readers_version_never_changes() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path());
    host.write(|_, _| Ok(((), vec![create(1, "p1")]))).unwrap();
    let old = host.read();
    for _ in 0..50 {
        host.write(|state, _| bump_within(state, u64::MAX)).unwrap();
    }
    host.write(|_, _| Ok(((), vec![Change::DeleteProvider(ProviderId(1))])))
        .unwrap();
    // The reader's version still has the provider, at the generation it had.
    assert_eq!(old.provider(ProviderId(1)).unwrap().row.generation, 0);
    assert!(old.provider_by_name("p1").is_some());
    assert!(host.read().provider(ProviderId(1)).is_none());
}
