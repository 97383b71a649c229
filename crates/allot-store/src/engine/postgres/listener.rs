//! The listener's connection ([`PgListener`]): a session that sits in `LISTEN
//! allot_log` so that a node learns at once that another one committed (the host's
//! writer wakes on it, and also polls on a short timer in case an announcement is
//! lost). It blocks in one call and pipelines nothing, so it uses the synchronous
//! `postgres` crate's blocking wait for notifications.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::target::{target, Target};
use crate::StoreError;

/// The listener's connection: waits for other nodes' commits (`NOTIFY allot_log`).
pub struct PgListener {
    target: Target,
    client: Option<postgres::Client>,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgListener").finish_non_exhaustive()
    }
}

impl PgListener {
    /// Connects and starts listening.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let target = target(url)?;
        let mut client = target.connect_blocking()?;
        client.batch_execute("LISTEN allot_log")?;
        Ok(PgListener {
            target,
            client: Some(client),
        })
    }

    /// Blocks until a commit is announced (true) or `timeout` passes (false).
    /// After a lost connection, the reconnect answers true: announcements may have
    /// been missed meanwhile, so the caller must look at the log.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, StoreError> {
        if self.client.as_ref().is_none_or(postgres::Client::is_closed) {
            self.client = None;
            let mut client =
                crate::engine::reconnect("PostgreSQL", || self.target.connect_blocking())?;
            client.batch_execute("LISTEN allot_log")?;
            self.client = Some(client);
            return Ok(true);
        }
        let Some(client) = &mut self.client else {
            unreachable!("connected above")
        };
        let woke = {
            let mut notifications = client.notifications();
            let first = notifications.timeout_iter(timeout).next();
            match first {
                Ok(Some(_)) => {
                    // One wake-up covers every commit announced so far.
                    while let Ok(Some(_)) = notifications.iter().next() {}
                    Ok(true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            }
        };
        woke.map_err(|e| {
            self.client = None;
            e.into()
        })
    }
}

#[cfg(test)]
mod tests {
    //! The listener on a real server (`ALLOT_TEST_POSTGRES_URL`; without one a case
    //! is skipped by the store suite's rule, `tests/skip`).

    use super::super::testing::{client, trait_change, Database};
    use super::super::PgEngine;
    use super::*;
    use crate::Cursor;

    #[test]
    fn the_listener_wakes_on_a_commit_and_reconnects() {
        let Some(db) = Database::new() else { return };
        let mut a = PgEngine::open(&db.url).unwrap();
        let mut listener = PgListener::open(&db.url).unwrap();
        assert!(!listener.wait(Duration::from_millis(50)).unwrap());
        a.write(Some(Cursor(0)), &mut |_| trait_change("CUSTOM_A"))
            .unwrap();
        a.write(Some(Cursor(1)), &mut |_| trait_change("CUSTOM_B"))
            .unwrap();
        let start = std::time::Instant::now();
        assert!(listener.wait(Duration::from_secs(5)).unwrap());
        assert!(start.elapsed() < Duration::from_secs(1));
        // The two announcements wake it at most twice (the second may not have
        // arrived when the first woke it), then it is quiet.
        let extra = (0..3)
            .take_while(|_| listener.wait(Duration::from_millis(100)).unwrap())
            .count();
        assert!(extra <= 1, "{extra} extra wake-ups");
        // A plan that writes nothing announces nothing.
        a.write(Some(Cursor(2)), &mut |_| Vec::new()).unwrap();
        assert!(!listener.wait(Duration::from_millis(50)).unwrap());
        // The server ends the listener's session: the wait fails or wakes, and
        // the one after reconnects (waking, as announcements may have been lost).
        client(&db)
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE query LIKE 'LISTEN%' AND datname = current_database()",
            )
            .unwrap();
        let mut woke = false;
        for _ in 0..3 {
            if let Ok(true) = listener.wait(Duration::from_millis(200)) {
                woke = true;
                break;
            }
        }
        assert!(woke);
        a.write(Some(Cursor(2)), &mut |_| trait_change("CUSTOM_C"))
            .unwrap();
        assert!(listener.wait(Duration::from_secs(5)).unwrap());
    }
}
