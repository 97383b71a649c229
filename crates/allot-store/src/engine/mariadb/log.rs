//! The change log and the write that appends to it, as on PostgreSQL
//! (`super::super::postgres` has the whole story): a write locks the head row
//! (`SELECT ... FOR UPDATE`), reads the commits after the caller's cursor (read
//! committed, so after the lock it sees every commit before it), writes the planned
//! changes with their preconditions checked, appends one log row, moves the head and
//! commits. A unique violation is a lost race, [`StoreError::Stale`].
//!
//! What differs: MariaDB has no `NOTIFY`, so other nodes learn of a commit when
//! they next read the log (the host polls); and the protocol has no pipelining, so
//! a write's statements go as one block, with its `COMMIT` (`super::script`).

use std::time::{SystemTime, UNIX_EPOCH};

use std::fmt::Write;

use mysql_async::{Row, Value as MyValue};

use super::{int, script, MyEngine};
use crate::engine::{lost_race, read_log, sql, LOG_KEEP, LOG_PRUNE_EVERY};
use crate::{Commit, Cursor, PlanUnderLock, StoreError};

const HEAD: &str = "SELECT seq FROM allot_log_head WHERE id = 1";
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
    ///
    /// Two round trips, however many changes (`super::script`): the transaction's
    /// start with the lock and the log's tail; then one block of every statement
    /// of the changes, each count checked where it runs, with the log row, the
    /// head and `COMMIT`.
    pub fn write(
        &mut self,
        at: Option<Cursor>,
        plan: PlanUnderLock<'_>,
    ) -> Result<Cursor, StoreError> {
        let required = self.fence.required();
        // Without a cursor (`persist`) there is no tail to read.
        let tail = at.map_or(-1, |Cursor(at)| at);
        let (tx, sets) = self.conn()?.begin_with(&format!(
            "SELECT seq, epoch FROM allot_log_head WHERE id = 1 FOR UPDATE; \
             SELECT seq, changes FROM allot_log WHERE seq > {tail} AND {tail} >= 0 ORDER BY seq"
        ))?;
        let [locked, rows] = <[_; 2]>::try_from(sets).map_err(|_| {
            StoreError::MariaDb("the lock and the log's tail: two answers expected".into())
        })?;
        let head = head_of(&locked)?;
        let commits = match at {
            Some(Cursor(at)) if head != at => commits_after(at, head, &rows)?,
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
        let ops = merged(ops);
        let seq = head + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut text = String::from("BEGIN NOT ATOMIC\n");
        for (i, op) in ops.iter().enumerate() {
            let rendered = op.statement.rendered::<super::MariaDb>();
            // A counted statement that fails by itself unless it writes its row, or
            // the statement followed by a check of its count.
            let (sql, check) = match (op.one_row_of, &rendered.checked) {
                (Some(_), Some(checked)) => (checked, false),
                (counted, _) => (&rendered.sql, counted.is_some()),
            };
            script::inline(sql, &op.params, &mut text);
            text.push_str(";\n");
            if check {
                script::check_one_row(i, &mut text);
            }
        }
        let _ = write!(
            text,
            "INSERT INTO allot_log (seq, at, changes) VALUES ({seq}, {now}, "
        );
        script::hex(&crate::log::encode(&changes), &mut text);
        let _ = write!(
            text,
            ");\nUPDATE allot_log_head SET seq = {seq} WHERE id = 1;\n"
        );
        if seq % LOG_PRUNE_EVERY == 0 {
            let _ = writeln!(
                text,
                "DELETE FROM allot_log WHERE seq <= {};",
                seq - LOG_KEEP
            );
        }
        text.push_str("END;\nCOMMIT");
        if let Some(i) = tx.commit_script(&text)? {
            let change = ops[i].one_row_of.expect("only checked ops signal");
            return Err(StoreError::Stale(lost_race(change)));
        }
        Ok(Cursor(seq))
    }
}

/// `ops` with each provider's bump and move made one update (`sql::bump_and_move`):
/// InnoDB leaves an index alone when its column keeps its value.
fn merged(ops: Vec<sql::Op<'_>>) -> Vec<sql::Op<'_>> {
    let mut out: Vec<sql::Op<'_>> = Vec::with_capacity(ops.len());
    for op in ops {
        match out.last().and_then(|last| sql::bump_and_move(last, &op)) {
            Some(both) => *out.last_mut().expect("merged with the last") = both,
            None => out.push(op),
        }
    }
    out
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
