//! The change log and the write that appends to it, as on PostgreSQL
//! (`super::super::postgres` has the whole story): a write locks the head row
//! (`SELECT ... FOR UPDATE`), reads the commits after the caller's cursor (read
//! committed, so after the lock it sees every commit before it), writes the planned
//! changes with their preconditions checked, appends one log row, moves the head and
//! commits. A unique violation is a lost race, [`StoreError::Stale`].
//!
//! What differs: MariaDB has no `NOTIFY`, so other nodes learn of a commit when
//! they next read the log (the host polls); and the protocol has no pipelining, so
//! a write's statements go one round trip each.

use std::time::{SystemTime, UNIX_EPOCH};

use mysql_async::{Row, Value as MyValue};

use super::{int, MyEngine};
use crate::engine::{lost_race, read_log, sql, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

const HEAD: &str = "SELECT seq FROM allot_log_head WHERE id = 1";
const LOCK: &str = "SELECT seq, epoch FROM allot_log_head WHERE id = 1 FOR UPDATE";
const TAIL: &str = "SELECT seq, changes FROM allot_log WHERE seq > ?1 ORDER BY seq";

impl MyEngine {
    /// The newest commit's place in the log.
    pub fn head(&mut self) -> Result<Cursor, StoreError> {
        let rows = self.conn()?.rows(HEAD, &[])?;
        Ok(Cursor(head_of(&rows)?))
    }

    /// Every commit after `after`, in order: one round trip when there is none
    /// (what a node's timer finds most of the time). Read committed, the rows may
    /// reach past the head read just before: commits are numbered under the
    /// head's lock, so they still follow on without a gap.
    pub fn changes_since(&mut self, after: Cursor) -> Result<Vec<Commit>, StoreError> {
        let conn = self.conn()?;
        let head = head_of(&conn.rows(HEAD, &[])?)?;
        if head == after.0 {
            return Ok(Vec::new());
        }
        let rows = if head > after.0 {
            conn.rows(TAIL, &[sql::Value::Int(after.0)])?
        } else {
            Vec::new()
        };
        commits_after(after.0, head, &rows)
    }

    /// One write transaction: locks the log head, hands the commits after `at` to
    /// `plan`, writes what it returns with its preconditions checked, and logs it
    /// as one commit. Returns the new head (the head as found if `plan` returned
    /// nothing, in which case nothing is written).
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        let required = self.fence.required();
        let tx = self.conn()?.begin()?;
        let locked = tx.conn.rows(LOCK, &[])?;
        let head = head_of(&locked)?;
        let commits = match at {
            Some(Cursor(at)) if head != at => {
                commits_after(at, head, &tx.conn.rows(TAIL, &[sql::Value::Int(at)])?)?
            }
            _ => Vec::new(),
        };
        let changes = plan(commits);
        if changes.is_empty() {
            tx.commit()?;
            return Ok(Cursor(head));
        }
        // The fence: only the lease's holder commits, and only while the head
        // carries its epoch (`super::lease`). Checked once there is something to
        // write: a plan that writes nothing (a sweep that found nothing) is no
        // write.
        if let Some(mine) = required {
            let epoch = int(locked.first(), 1)?;
            if mine == 0 || epoch != mine {
                return Err(StoreError::NotWriter(format!(
                    "the log's head is at the lease's epoch {epoch}, this node holds {}",
                    if mine == 0 {
                        "none".to_owned()
                    } else {
                        mine.to_string()
                    }
                )));
            }
        }
        let mut ops = Vec::new();
        for change in &changes {
            sql::ops(change, &mut ops);
        }
        for op in &ops {
            let sql = op.statement.sql::<super::MariaDb>();
            let count = tx.conn.execute(sql, &op.params)?;
            if let (Some(change), false) = (op.one_row_of, count == 1) {
                return Err(StoreError::Stale(lost_race(change)));
            }
        }
        let seq = head + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        tx.conn.execute_with(
            "INSERT INTO allot_log (seq, at, changes) VALUES (?, ?, ?)",
            vec![
                MyValue::Int(seq),
                MyValue::Int(now),
                MyValue::Bytes(crate::log::encode(&changes)),
            ],
        )?;
        tx.conn.execute_with(
            "UPDATE allot_log_head SET seq = ? WHERE id = 1",
            vec![MyValue::Int(seq)],
        )?;
        if seq % LOG_PRUNE_EVERY == 0 {
            tx.conn.execute_with(
                "DELETE FROM allot_log WHERE seq <= ?",
                vec![MyValue::Int(seq - LOG_KEEP)],
            )?;
        }
        tx.commit()?;
        Ok(Cursor(seq))
    }
}

/// The head in the one row of `allot_log_head`.
fn head_of(rows: &[Row]) -> Result<i64, StoreError> {
    match rows.first() {
        Some(row) => int(Some(row), 0),
        None => Err(StoreError::Corrupt("allot_log_head has no row".into())),
    }
}

/// The commits in `rows` (seq, bytes), checked to be exactly `after + 1 ..= head`
/// (a cursor ahead of the head: the database is not the one the cursor came from,
/// and the caller loads again, as on PostgreSQL).
fn commits_after(after: i64, head: i64, rows: &[Row]) -> Result<Vec<Commit>, StoreError> {
    let read = rows.iter().map(|row| {
        let seq = int(Some(row), 0)?;
        match row.as_ref(1) {
            Some(MyValue::Bytes(record)) => Ok((seq, record.as_slice())),
            other => Err(StoreError::Corrupt(format!("allot_log {seq}: {other:?}"))),
        }
    });
    read_log(after, head, read, || StoreError::Behind(after))
}
