//! The change log and the write that appends to it.
//!
//! `allot_log(seq, at, changes)` holds every commit's changes (encoded), and
//! `allot_log_head(seq)` the newest `seq` (0: nothing committed yet). A write
//! locks the head row (`SELECT ... FOR UPDATE`), which serialises the writers of
//! every node; reads the commits after the caller's cursor so that the caller can
//! catch up before it plans; writes the planned changes with their preconditions
//! checked (a provider's or consumer's generation, the absence of a row to create:
//! a failed one is [`StoreError::Stale`]); appends one log row; moves the head;
//! `NOTIFY allot_log`; and commits. The log keeps the last [`LOG_KEEP`] commits; a
//! cursor older than that gets [`StoreError::Behind`] (the node must load again).
//! So does a cursor ahead of the head (the SQLite engine calls that corrupt): on a
//! server database it means the database was restored or replaced under running
//! nodes, and loading again is the way back. A unique violation in a write (a name
//! or uuid another writer took) is `Stale` too, like the preconditions.

use std::time::{SystemTime, UNIX_EPOCH};

use postgres::error::SqlState;
use postgres::Row;

use super::pipeline::Pipeline;
use super::{get, PgEngine};
use crate::engine::{read_log, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

impl PgEngine {
    /// The newest commit's place in the log.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        let conn = self.conn()?;
        let statement = conn.statement("SELECT seq FROM allot_log_head")?;
        let row = conn
            .runtime
            .block_on(conn.client.query_one(&statement, &[]))?;
        Ok(Cursor(get(&row, 0)?))
    }

    /// Every commit after `after`, in order.
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        let after = after.0;
        let conn = self.conn()?;
        // One statement, so one snapshot: the head and the rows agree.
        let statement = conn.statement(
            "SELECT h.seq, l.seq, l.changes FROM allot_log_head h
             LEFT JOIN allot_log l ON l.seq > $1 ORDER BY l.seq",
        )?;
        let rows = conn
            .runtime
            .block_on(conn.client.query(&statement, &[&after]))?;
        let head = match rows.first() {
            Some(row) => get::<i64>(row, 0)?,
            None => return Err(StoreError::Corrupt("allot_log_head has no row".into())),
        };
        commits_after(after, head, &rows, 1)
    }

    /// One write transaction: locks the log head, hands the commits after `at` to
    /// `plan`, writes what it returns with its preconditions checked, logs it as one
    /// commit and notifies the other nodes. Returns the new head (the head as found
    /// if `plan` returned nothing, in which case nothing is written).
    ///
    /// Four round trips, however many changes: `BEGIN`; the lock with the log's
    /// tail; every statement of the changes with the log row (pipelined); `COMMIT`.
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        const LOCK: &str = "SELECT seq FROM allot_log_head FOR UPDATE";
        const TAIL: &str = "SELECT seq, changes FROM allot_log WHERE seq > $1 ORDER BY seq";
        let mut tx = self.conn()?.begin()?;
        tx.prepare([LOCK, TAIL].into_iter())?;
        let (lock, tail) = (&tx.statements[LOCK], &tx.statements[TAIL]);
        // The lock and the commits after `at` in one round trip. Read committed: the
        // second statement's snapshot is taken once the first holds the lock, when
        // every writer before us has committed, so it sees every commit up to the
        // head. (Without a cursor, as for `persist`, there is nothing to read.)
        let (head, rows) = match at {
            // `try_join` polls the first future first: the lock is asked for first.
            Some(Cursor(at)) => tx.runtime.block_on(futures_util::future::try_join(
                tx.tx().query(lock, &[]),
                tx.tx().query(tail, &[&at]),
            ))?,
            None => (tx.runtime.block_on(tx.tx().query(lock, &[]))?, Vec::new()),
        };
        let head: i64 = match head.first() {
            Some(row) => get(row, 0)?,
            None => return Err(StoreError::Corrupt("allot_log_head has no row".into())),
        };
        let commits = match at {
            Some(Cursor(at)) if head != at => commits_after(at, head, &rows, 0)?,
            _ => Vec::new(),
        };
        let changes = plan(commits);
        if changes.is_empty() {
            tx.commit()?;
            return Ok(Cursor(head));
        }
        let seq = head + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut pipeline = Pipeline::default();
        pipeline.changes(&changes);
        // The log row, the head and the announcement in one statement; the
        // announcement is delivered when (and only if) the transaction commits.
        pipeline.push(
            "WITH logged AS (INSERT INTO allot_log (seq, at, changes) VALUES ($1, $2, $3)),
                  moved AS (UPDATE allot_log_head SET seq = $1)
             SELECT pg_notify('allot_log', $1::bigint::text)",
            vec![
                Box::new(seq),
                Box::new(now),
                Box::new(crate::log::encode(&changes)),
            ],
        );
        if seq % LOG_PRUNE_EVERY == 0 {
            pipeline.push(
                "DELETE FROM allot_log WHERE seq <= $1",
                vec![Box::new(seq - LOG_KEEP)],
            );
        }
        tx.run(&pipeline).map_err(stale_if_unique)?;
        tx.commit()?;
        Ok(Cursor(seq))
    }
}

/// The commits in `rows` (seq in column `first`, bytes in the next), checked to be
/// exactly `after + 1 ..= head`: a gap at the start means the log was pruned past
/// `after`, and a cursor ahead of the head means the database is not the one the
/// cursor came from; either way the caller must load again.
fn commits_after(
    after: i64,
    head: i64,
    rows: &[Row],
    first: usize,
) -> Result<Vec<Commit>, StoreError> {
    // A row without a commit is the head's alone (the log's join found nothing).
    let read = rows
        .iter()
        .filter_map(|row| match get::<Option<i64>>(row, first) {
            Ok(None) => None,
            Ok(Some(seq)) => Some(get::<&[u8]>(row, first + 1).map(|record| (seq, record))),
            Err(e) => Some(Err(e)),
        });
    read_log(after, head, read, || StoreError::Behind(after))
}

/// A unique violation in a write is a lost race (another node created the same
/// name or uuid first): [`StoreError::Stale`], not a failure.
fn stale_if_unique(e: StoreError) -> StoreError {
    match e {
        StoreError::Postgres(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            StoreError::Stale(e.to_string())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    //! The log's mechanics on a real server (`ALLOT_TEST_POSTGRES_URL`; without one
    //! a case is skipped by the store suite's rule, `tests/skip`); what the changes do
    //! is the store suite's part.

    use allot_core::TraitName;

    use super::super::testing::{client, names, trait_change, Database};
    use super::*;

    #[test]
    fn commits_are_read_in_order_and_handed_to_the_next_plan() {
        let Some(db) = Database::new() else { return };
        let (mut a, mut b) = (
            PgEngine::open(&db.url).unwrap(),
            PgEngine::open(&db.url).unwrap(),
        );
        let (_, start) = b.load().unwrap();
        assert_eq!(start, Cursor(0));
        for (i, name) in ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"].iter().enumerate() {
            let head = a.write(Some(Cursor(i as i64)), &mut |_| trait_change(name));
            assert_eq!(head.unwrap(), Cursor(i as i64 + 1));
        }
        // A plan with nothing to do writes nothing and leaves the head.
        assert_eq!(
            a.write(Some(Cursor(3)), &mut |_| Vec::new()).unwrap(),
            Cursor(3)
        );
        assert_eq!(b.head().unwrap(), Cursor(3));
        let seen = b.changes_since(Cursor(1)).unwrap();
        assert_eq!(
            seen.iter().map(|c| c.cursor).collect::<Vec<_>>(),
            [Cursor(2), Cursor(3)]
        );
        assert_eq!(names(&seen), ["CUSTOM_B", "CUSTOM_C"]);
        // B writes from where it loaded: its plan first gets A's three commits.
        let mut handed = Vec::new();
        let head = b
            .write(Some(start), &mut |commits| {
                handed = commits;
                trait_change("CUSTOM_D")
            })
            .unwrap();
        assert_eq!(head, Cursor(4));
        assert_eq!(names(&handed), ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]);
        let (state, head) = a.load().unwrap();
        assert_eq!(head, Cursor(4));
        assert!(state.trait_exists(&TraitName::new_unchecked("CUSTOM_D")));
        // A cursor from another database (ahead of the head) is no cursor here.
        assert!(matches!(
            a.changes_since(Cursor(9)),
            Err(StoreError::Behind(9))
        ));
        assert!(matches!(
            a.write(Some(Cursor(9)), &mut |_| Vec::new()),
            Err(StoreError::Behind(9))
        ));
    }

    #[test]
    fn a_pruned_cursor_is_behind() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        for (i, name) in ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"].iter().enumerate() {
            a.write(Some(Cursor(i as i64)), &mut |_| trait_change(name))
                .unwrap();
        }
        // As pruning leaves it: the oldest commits gone.
        client(&db)
            .batch_execute("DELETE FROM allot_log WHERE seq <= 2")
            .unwrap();
        assert!(matches!(
            a.changes_since(Cursor(0)),
            Err(StoreError::Behind(0))
        ));
        assert!(matches!(
            a.changes_since(Cursor(1)),
            Err(StoreError::Behind(1))
        ));
        assert_eq!(a.changes_since(Cursor(2)).unwrap().len(), 1);
        assert!(a.changes_since(Cursor(3)).unwrap().is_empty());
        let mut called = false;
        let e = a.write(Some(Cursor(1)), &mut |_| {
            called = true;
            Vec::new()
        });
        assert!(matches!(e, Err(StoreError::Behind(1))));
        assert!(!called, "a plan is never made on a gap");
    }
}
