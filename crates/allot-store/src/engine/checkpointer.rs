//! The SQLite engine's checkpoints, beside the commit path (issue 25).
//!
//! In WAL mode a commit appends pages to the `-wal` file; a checkpoint copies them
//! back into the database file, and the WAL starts over from its beginning once every
//! frame in it has been copied. SQLite's own policy (`wal_autocheckpoint`) runs the
//! checkpoint inside the commit that crosses a mark, so every write queued behind
//! that commit waits for it: measured at 100,000 roots under a claim storm, that
//! checkpoint was what made a claim's cost and its tail grow with the cloud
//! (docs/design/checkpointer.md).
//!
//! Here the writer's connection has `wal_autocheckpoint = 0`, and a thread with a
//! connection of its own runs `PRAGMA wal_checkpoint(PASSIVE)` after commits, which
//! copies what is committed while the writer goes on appending. Two things remain
//! for the writer, both bounded:
//! - **Starting the WAL over.** SQLite restarts the WAL at a write transaction that
//!   begins when every frame has been copied. Under a storm no such moment comes by
//!   itself (a commit lands while the checkpointer copies). So while the WAL is
//!   short the checkpointer lets `pace` pass before each pass (a page that several
//!   commits wrote is copied once); past `restart_at` bytes it runs its passes
//!   back to back, each copying what was committed during the one before, until one
//!   finds little to copy (`small`); then the writer, right after its next commit
//!   and only while the checkpointer is idle, copies those few frames itself, and
//!   its next transaction starts the WAL over. Measured at a million roots under a
//!   64-client storm, that copy took the writer 5 to 10 ms.
//! - **A hard bound.** Past `hard_bound` bytes (a checkpointer that cannot keep
//!   up, say on a slow disk) the writer copies whatever is left itself, holding
//!   the checkpointer off and waiting for its pass if one is running, so that the WAL cannot grow without
//!   end. The writer reads the WAL's length from its file's size, which stays
//!   truthful because SQLite cuts the file back to `restart_at` bytes
//!   (`journal_size_limit`) whenever the WAL starts over.
//!
//! Durability is SQLite's: a checkpoint syncs the database file before it lets the
//! WAL be overwritten, whoever runs it. Nothing here can fail a write that has
//! committed: a checkpoint that fails is logged and tried again after the next
//! commit, and the frames it did not copy stay in the WAL, durable.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use rusqlite::Connection;

use crate::StoreError;

/// What the checkpoints measure, for `/metrics`: handles that the server's registry
/// shares (`crate::WriterStats::checkpoints`).
#[derive(Debug, Clone)]
pub struct CheckpointStats {
    /// The WAL file's size after the last commit, in bytes.
    pub wal_bytes: Gauge,
    /// The checkpointer thread's passes, beside the commit path.
    pub passes: Counter,
    /// How long each checkpoint the writer ran itself took (to start the WAL over,
    /// or at the hard bound): the commit path's share, in seconds.
    pub writer_seconds: Histogram,
}

impl Default for CheckpointStats {
    fn default() -> Self {
        CheckpointStats {
            wal_bytes: Gauge::default(),
            passes: Counter::default(),
            writer_seconds: crate::stats::seconds_histogram(),
        }
    }
}

/// When the checkpointer and the writer copy. The WAL's bounds are in bytes, so that
/// they hold whatever the database's page size (1 KiB in the databases this engine
/// creates, 4 KiB in older ones: `sqlite::PAGE_SIZE`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// The WAL's length, in bytes, past which it is brought to start over.
    pub restart_at: i64,
    /// The WAL's length, in bytes, past which the writer copies everything left
    /// itself.
    pub hard_bound: i64,
    /// How long the checkpointer lets commits gather before a pass while the WAL is
    /// short: a page written by several of them is copied once.
    pub pace: Duration,
    /// A pass that copied at most this many frames (pages) leaves little for the
    /// writer.
    pub small: i64,
}

impl Policy {
    /// The engine's: restart past 256 MiB of WAL, never more than 512 MiB, passes
    /// 100 ms apart. Measured with 4 KiB pages under a 64-client claim storm
    /// (docs/design/checkpointer.md), a WAL four times
    /// shorter cost 3% of the rate at 10,000 roots, 12% at 100,000 and 11% at a
    /// million, with a longer tail: each round of the WAL copies its hot pages once
    /// more, and at a million roots, where a batch's pages are all far apart, the
    /// kernel writes back a whole large folio (tens of KiB) for each page copied.
    /// With 1 KiB pages, a WAL of 65,536 frames (64 MiB) instead of 256 MiB cost 13%
    /// of the rate at a million roots and wrote twice the bytes to disk (item 9 there).
    /// Passes a second apart cost 8% more at a million roots.
    pub(crate) const DEFAULT: Policy = Policy {
        restart_at: 256 << 20,
        hard_bound: 512 << 20,
        pace: Duration::from_millis(100),
        small: 512,
    };
}

/// A WAL frame's header, which precedes each page in the file.
const FRAME_HEADER: i64 = 24;

/// What the checkpointer tells the writer.
#[derive(Debug, Default)]
struct Shared {
    stats: CheckpointStats,
    /// Whether the checkpointer is copying right now.
    copying: AtomicBool,
    /// Whether the WAL is past the policy's `restart_at` and the checkpointer's
    /// last pass found little to copy, so that the writer's share of it is small.
    ripe: AtomicBool,
    /// Set by the writer at the hard bound: the checkpointer starts no pass, so
    /// that the writer's own may run (SQLite lets one checkpoint run at a time, and
    /// answers another at once that it is busy).
    hold: AtomicBool,
}

/// The checkpointer thread and the writer's side of it.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    policy: Policy,
    /// The WAL's file.
    wal: PathBuf,
    shared: Arc<Shared>,
    /// One pending wake-up at most: commits that come while the checkpointer copies
    /// are all covered by its next pass.
    wake: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Sets the writer's connection `writer` to the database at `path`, of pages of
    /// `page` bytes, for this policy, and starts the thread on a connection of its
    /// own.
    pub(crate) fn start(
        path: &str,
        writer: &Connection,
        page: i64,
        policy: Policy,
    ) -> Result<Self, StoreError> {
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        writer.pragma_update(None, "journal_size_limit", policy.restart_at)?;
        // SQLite counts the WAL in frames: a page and its header.
        let frame = page + FRAME_HEADER;
        let conn = Connection::open(path)?;
        // This connection never writes; it must not checkpoint on its own policy
        // either.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let shared = Arc::new(Shared::default());
        let (wake, woken) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("allot-checkpoint".into())
            .spawn({
                let shared = shared.clone();
                move || run(conn, policy, frame, &shared, woken)
            })?;
        Ok(Checkpointer {
            policy,
            wal: format!("{path}-wal").into(),
            shared,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// The checkpoints' measures.
    pub(crate) fn stats(&self) -> &CheckpointStats {
        &self.shared.stats
    }

    /// Called by the writer after each commit, on its own connection: wakes the
    /// checkpointer, and copies frames itself only as the module docs say.
    pub(crate) fn committed(&self, writer: &Connection) {
        if let Some(wake) = &self.wake {
            if let Err(TrySendError::Disconnected(())) = wake.try_send(()) {
                // The hard bound still holds the WAL's length.
                tracing::warn!("the SQLite checkpointer thread has stopped");
            }
        }
        // At least the WAL's length: the file is never cut below it.
        let length = match std::fs::metadata(&self.wal) {
            Ok(m) => {
                self.shared.stats.wal_bytes.set(m.len() as i64);
                m.len() as i64
            }
            Err(e) => {
                tracing::warn!("reading the size of {}: {e}", self.wal.display());
                return;
            }
        };
        if length >= self.policy.hard_bound {
            // Set before `copying` is read, as the thread sets `copying` before it
            // reads this: one of the two sees the other's.
            self.shared.hold.store(true, Ordering::SeqCst);
            while self.shared.copying.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.copy(writer);
            self.shared.hold.store(false, Ordering::Release);
        } else if self.shared.ripe.load(Ordering::Acquire)
            && !self.shared.copying.load(Ordering::Acquire)
        {
            self.copy(writer);
        }
    }

    /// The writer's own checkpoint. Every frame copied, between two of the writer's
    /// transactions: its next one starts the WAL over. Busy (the checkpointer began
    /// a pass meanwhile): the next commit tries again.
    fn copy(&self, writer: &Connection) {
        let started = Instant::now();
        let outcome = checkpoint(writer);
        let took = started.elapsed().as_secs_f64();
        self.shared.stats.writer_seconds.observe(took);
        match outcome {
            Ok(Some(_)) => self.shared.ripe.store(false, Ordering::Release),
            Ok(None) => {}
            Err(e) => tracing::warn!("SQLite checkpoint failed: {e}"),
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel ends the thread's wait at once.
        self.wake = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The checkpointer thread: a pass after each wake-up, until the engine is dropped.
fn run(conn: Connection, policy: Policy, frame: i64, shared: &Shared, woken: Receiver<()>) {
    // The WAL's length and how many of its frames were copied, at the last pass.
    let (mut log, mut copied) = (0, 0);
    let restart_at = policy.restart_at / frame;
    loop {
        // Closed: the engine is gone.
        if woken.recv().is_err() {
            return;
        }
        if log < restart_at {
            // Commits that come meanwhile are this pass's too; the engine's end
            // ends the wait.
            let until = Instant::now() + policy.pace;
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if let Err(RecvTimeoutError::Disconnected) = woken.recv_timeout(left) {
                    return;
                }
            }
        }
        shared.copying.store(true, Ordering::SeqCst);
        if shared.hold.load(Ordering::SeqCst) {
            // The writer copies (and wakes this thread again with its next commit).
            shared.copying.store(false, Ordering::SeqCst);
            continue;
        }
        let outcome = checkpoint(&conn);
        shared.copying.store(false, Ordering::Release);
        shared.stats.passes.inc();
        match outcome {
            Ok(Some((now_log, now_copied))) => {
                // Fewer frames copied than before: the WAL started over since.
                let fresh = if now_copied >= copied {
                    now_copied - copied
                } else {
                    now_copied
                };
                (log, copied) = (now_log, now_copied);
                let ripe = log >= restart_at && fresh <= policy.small;
                shared.ripe.store(ripe, Ordering::Release);
            }
            Ok(None) => {}
            // A failed pass leaves the frames in the WAL, where they are durable; the
            // next pass and the writer's hard bound try again.
            Err(e) => tracing::warn!("SQLite checkpoint failed: {e}"),
        }
    }
}

/// One passive checkpoint: copies every committed frame it can without waiting for
/// anyone. Returns the WAL's length and how many of its frames are copied (both in
/// frames); `None` when another checkpoint was running.
fn checkpoint(conn: &Connection) -> Result<Option<(i64, i64)>, StoreError> {
    let (busy, log, copied): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    Ok((busy == 0).then_some((log, copied)))
}
