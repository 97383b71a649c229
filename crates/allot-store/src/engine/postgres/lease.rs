//! The writer's lease ([`PgLease`]): which node of a cluster that shares the
//! database is its writer, decided by a session-level advisory lock, with the
//! holder's URL in `allot_writer` for the others to forward their writes to.

use super::target::{target, Target};
use crate::StoreError;

/// The advisory lock whose holder is the cluster's writer ("allotwri" in ASCII).
const WRITER_LOCK: i64 = 0x616c_6c6f_7477_7269;

/// The writer's lease: a session of its own that, for a node that can be reached
/// (`advertise`), tries to take the cluster's writer lock, and otherwise looks up
/// who holds it. The lock is a session-level advisory lock, so it is the session's
/// for exactly as long as the session lives: a writer that dies, or loses the
/// database, loses the role with the connection, and the next node to try takes it.
/// The holder's URL sits in `allot_writer` with the holder's backend pid, and is
/// read only joined with the lock itself (`pg_locks`), so a row left by a writer
/// that is gone is never taken for a live one.
pub struct PgLease {
    target: Target,
    client: Option<postgres::Client>,
    advertise: Option<String>,
    holding: bool,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("advertise", &self.advertise)
            .field("holding", &self.holding)
            .finish_non_exhaustive()
    }
}

impl PgLease {
    /// A lease for the database `url` names; connects at the first [`PgLease::tick`].
    pub fn open(url: &str, advertise: Option<String>) -> Result<Self, StoreError> {
        Ok(PgLease {
            target: target(url)?,
            client: None,
            advertise,
            holding: false,
        })
    }

    /// Takes the writer's role if it is free and this node can be reached, and says
    /// who holds it. One connection attempt: a caller ticks again later.
    pub fn tick(&mut self) -> Result<crate::WriterRole, StoreError> {
        if self
            .client
            .as_ref()
            .is_some_and(postgres::Client::is_closed)
        {
            self.client = None;
        }
        let client = match &mut self.client {
            Some(client) => client,
            none => {
                // A new session holds nothing, whatever the last one did.
                self.holding = false;
                none.insert(self.target.connect_blocking()?)
            }
        };
        let outcome = Self::look(client, self.advertise.as_deref(), &mut self.holding);
        if outcome.is_err() {
            self.holding = false;
            self.client = None;
        }
        outcome
    }

    fn look(
        client: &mut postgres::Client,
        advertise: Option<&str>,
        holding: &mut bool,
    ) -> Result<crate::WriterRole, StoreError> {
        if let (Some(url), false) = (advertise, *holding) {
            let taken: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&WRITER_LOCK])?
                .get(0);
            if taken {
                client.execute(
                    "INSERT INTO allot_writer (id, pid, url) VALUES (1, pg_backend_pid(), $1)
                     ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, url = excluded.url",
                    &[&url],
                )?;
                *holding = true;
            }
        }
        if *holding {
            // The lock is the session's: a session that still answers holds it.
            client.batch_execute("SELECT 1")?;
            return Ok(crate::WriterRole::This);
        }
        // A bigint advisory key shows in pg_locks as its high and low halves.
        let row = client.query_opt(
            "SELECT w.url FROM allot_writer w JOIN pg_locks l ON l.pid = w.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
               AND l.classid::bigint = $1 AND l.objid::bigint = $2
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&(WRITER_LOCK >> 32), &(WRITER_LOCK & 0xffff_ffff)],
        )?;
        Ok(match row {
            Some(row) => crate::WriterRole::At(row.get(0)),
            None => crate::WriterRole::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    //! The lease on a real server (`ALLOT_TEST_POSTGRES_URL`; without one a case is
    //! skipped by the store suite's rule, `tests/skip`).

    use std::time::Duration;

    use super::super::testing::{client, Database};
    use super::super::PgEngine;
    use super::*;

    #[test]
    fn one_lease_holder_at_a_time_and_the_next_when_its_session_ends() {
        use crate::WriterRole::{At, This, Unknown};
        let Some(db) = Database::new() else { return };
        PgEngine::open(&db.url).unwrap(); // migrates
        let mut quiet = PgLease::open(&db.url, None).unwrap();
        assert_eq!(quiet.tick().unwrap(), Unknown, "nobody holds it yet");
        let mut a = PgLease::open(&db.url, Some("http://a:8778".into())).unwrap();
        let mut b = PgLease::open(&db.url, Some("http://b:8778".into())).unwrap();
        assert_eq!(a.tick().unwrap(), This);
        assert_eq!(a.tick().unwrap(), This, "a holder keeps it");
        assert_eq!(b.tick().unwrap(), At("http://a:8778".into()));
        assert_eq!(quiet.tick().unwrap(), At("http://a:8778".into()));
        // A node without a URL never takes it, even free. The server ends a's
        // session (and frees its lock) a moment after its client closes, so the
        // free lease is waited for rather than expected at once.
        drop(a);
        let freed = (0..200).any(|_| match quiet.tick().unwrap() {
            Unknown => true,
            role => {
                assert_eq!(role, At("http://a:8778".into()), "a node without a URL");
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(freed, "a's lease outlives its session");
        assert_eq!(b.tick().unwrap(), This);
        assert_eq!(quiet.tick().unwrap(), At("http://b:8778".into()));
        // The server ends the holder's session: its next tick fails (a holder checks
        // its session each time), the row it left names nobody, and the tick after
        // (a new session) takes the lease again.
        client(&db)
            .batch_execute("SELECT pg_terminate_backend(pid) FROM allot_writer")
            .unwrap();
        let noticed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            b.tick().is_err()
        });
        assert!(noticed, "the holder goes on as if it held the lease");
        assert_eq!(quiet.tick().unwrap(), Unknown);
        assert_eq!(b.tick().unwrap(), This);
        assert_eq!(quiet.tick().unwrap(), At("http://b:8778".into()));
    }
}
