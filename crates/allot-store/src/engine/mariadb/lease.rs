//! The writer's lease on MariaDB and Galera ([`MyLease`]): which node of a cluster
//! that shares the database writes, decided by a row, not by a session.
//!
//! Galera replicates neither MariaDB's named locks (`GET_LOCK` is one node's) nor
//! row locks (docs/design/mariadb-galera.md), so the lease PostgreSQL takes (an
//! advisory lock that ends with the holder's session) does not carry over. Instead:
//!
//! - `allot_writer` holds one row: the holder (a random id per process), the URL
//!   where it answers (empty if it gave none), the lease's **epoch**, and a
//!   **beat** that the holder moves on every tick. A beat of -1 means free.
//! - A node takes the lease when it is free, or when the beat has not moved for
//!   [`EXPIRY`] by its own clock: one transaction that moves the epoch on, in that
//!   row and in the log's head row, each conditional on what the node saw. Of two
//!   nodes taking it at once, one is certified and the other finds no row to change
//!   or is aborted at commit.
//! - Every commit a writer makes reads the head row under its lock and writes it,
//!   and is refused unless the head's epoch is the one this node's lease holds (the
//!   [`crate::Fence`] the two share). A takeover writes the head row too, so a
//!   writer that lost its lease without knowing it (its Galera node cut off, its
//!   process stalled) either commits before the takeover is certified, or is
//!   aborted: never after. A node cut off from the cluster's majority commits
//!   nothing at all (Galera refuses writes outside the primary component).
//! - A node that does not hold the lease never writes for itself: it forwards to
//!   the holder's URL, or, if the holder gave none, its writes are answered 503.
//!   Unlike on PostgreSQL, a node without `--advertise-url` may take the lease (else
//!   one node on MariaDB would never write); the others then cannot forward to it.
//!
//! A node stopping gives the lease back (beat -1), so that another takes it at its
//! next tick rather than after [`EXPIRY`].

use std::time::{Duration, Instant};

use super::connection::Conn;
use super::int;
use super::target::{target, Target};
use crate::engine::sql::Value;
use crate::{Fence, StoreError, WriterRole};

/// How long the holder's beat may stand still before another node takes the lease:
/// five of the lease's one-second ticks, so that a writer that died is replaced
/// within about six seconds (the bound is ten).
pub(crate) const EXPIRY: Duration = Duration::from_secs(5);

/// The lease of one node (see the module's doc).
pub struct MyLease {
    target: Target,
    conn: Option<Conn>,
    /// This process's id in the lease's row.
    id: String,
    advertise: Option<String>,
    /// The epoch this node's writes must find in the log's head; shared with its
    /// store.
    fence: Fence,
    /// The lease's row as last seen, and when it last changed.
    seen: Option<(String, i64, i64, Instant)>,
}

impl std::fmt::Debug for MyLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MyLease")
            .field("id", &self.id)
            .field("advertise", &self.advertise)
            .field("epoch", &self.fence.held())
            .finish_non_exhaustive()
    }
}

const READ: &str = "SELECT holder, url, epoch, beat FROM allot_writer WHERE id = 1";
const RENEW: &str =
    "UPDATE allot_writer SET beat = beat + 1 WHERE id = 1 AND holder = ?1 AND epoch = ?2";
const TAKE: &str = "UPDATE allot_writer SET holder = ?1, url = ?2, epoch = ?3, beat = 0 \
                    WHERE id = 1 AND epoch = ?4 AND beat = ?5";
const FENCE_HEAD: &str = "UPDATE allot_log_head SET epoch = ?1 WHERE id = 1";
const GIVE_BACK: &str =
    "UPDATE allot_writer SET beat = -1 WHERE id = 1 AND holder = ?1 AND epoch = ?2";

impl MyLease {
    /// A lease on the database `url` names, arming `fence` (the store's): from now
    /// on that store writes only while this lease is held. Connects at the first
    /// [`MyLease::tick`].
    pub fn open(url: &str, advertise: Option<String>, fence: Fence) -> Result<Self, StoreError> {
        fence.arm();
        Ok(MyLease {
            target: target(url)?,
            conn: None,
            id: allot_core::Uuid::new_v4().simple().to_string(),
            advertise,
            fence,
            seen: None,
        })
    }

    /// Renews the lease if this node holds it, takes it if it is free or expired,
    /// and says who holds it. An error means the database could not be asked: this
    /// node stops writing until a tick renews or takes the lease again.
    pub fn tick(&mut self) -> Result<WriterRole, StoreError> {
        let outcome = self.look();
        if outcome.is_err() {
            self.fence.release();
            if self.conn.as_ref().is_some_and(|c| c.broken) {
                self.conn = None;
            }
        }
        outcome
    }

    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.is_none() {
            self.conn = Some(Conn::open(&self.target)?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    fn look(&mut self) -> Result<WriterRole, StoreError> {
        let held = self.fence.held();
        let id = self.id.clone();
        if held > 0 {
            let renewed = self
                .conn()?
                .execute(RENEW, &[Value::Text(&id), Value::Int(held)])?;
            if renewed == 1 {
                return Ok(WriterRole::This);
            }
            // Taken by another node while this one was not looking.
            self.fence.release();
        }
        let rows = self.conn()?.rows(READ, &[])?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("allot_writer has no row".into()))?;
        let text = |i: usize| match row.as_ref(i) {
            Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let (holder, url) = (text(0), text(1));
        let (epoch, beat) = (int(Some(row), 2)?, int(Some(row), 3)?);
        let now = Instant::now();
        let since = match &self.seen {
            Some((h, e, b, at)) if *h == holder && *e == epoch && *b == beat => *at,
            _ => now,
        };
        self.seen = Some((holder.clone(), epoch, beat, since));
        if beat < 0 || now.duration_since(since) >= EXPIRY {
            if self.take(epoch, beat)? {
                return Ok(WriterRole::This);
            }
            return Ok(WriterRole::Unknown);
        }
        Ok(if url.is_empty() {
            WriterRole::Unknown
        } else {
            WriterRole::At(url)
        })
    }

    /// Takes the lease from what was seen (`epoch`, `beat`): true if this node
    /// holds it now.
    fn take(&mut self, epoch: i64, beat: i64) -> Result<bool, StoreError> {
        let (id, url) = (self.id.clone(), self.advertise.clone().unwrap_or_default());
        let next = epoch + 1;
        let conn = self.conn()?;
        let tx = conn.begin()?;
        let taken = tx.conn.execute(
            TAKE,
            &[
                Value::Text(&id),
                Value::Text(&url),
                Value::Int(next),
                Value::Int(epoch),
                Value::Int(beat),
            ],
        )?;
        if taken != 1 {
            return Ok(false);
        }
        tx.conn.execute(FENCE_HEAD, &[Value::Int(next)])?;
        match tx.commit() {
            Ok(()) => {
                tracing::info!(epoch = next, "took the cluster's writer lease");
                self.fence.hold(next);
                Ok(true)
            }
            // Another node's takeover was certified first: not taken.
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Drop for MyLease {
    /// Gives the lease back, so that another node takes it at its next tick.
    fn drop(&mut self) {
        let held = self.fence.held();
        self.fence.release();
        if held > 0 {
            let id = self.id.clone();
            if let Ok(conn) = self.conn() {
                let _ = conn.execute(GIVE_BACK, &[Value::Text(&id), Value::Int(held)]);
            }
        }
        if let Some(conn) = self.conn.take() {
            conn.close();
        }
    }
}
