//! The host: the one place that changes the world, and the versions readers see.
//!
//! **Readers** take the current version of the view, an `Arc<State>`, and keep it as
//! long as they like: nothing ever changes a published version, so a long search sees
//! one consistent world and holds up nobody.
//!
//! **Writers** hand their plan (a pure function of the view, from `allot-core`) to the
//! writer thread, which owns the store and commits in groups:
//!
//! 1. It takes the first write waiting and every other one already queued behind it
//!    (up to [`MAX_BATCH`]). Nothing waits for a batch to fill: a lone write is a batch
//!    of one, and batches grow by themselves while the previous commit is on disk.
//! 2. It clones the current version (cheap, see `allot_core::persistent`) and plans
//!    each write against the clone in arrival order, applying each one's changes
//!    before planning the next: every write sees the ones before it, so the capacity
//!    and generation checks are as exact as if they ran one at a time. A write the
//!    rules refuse is answered at once and changes nothing.
//! 3. It persists the batch's changes in one store transaction (one fsync).
//! 4. Only then it publishes the clone as the new current version, and answers the
//!    batch's writes. If the store fails, every write of the batch fails, the clone is
//!    dropped, and the view stays as the disk has it.
//!
//! So a reader never sees what the disk does not hold, and a write waits only for the
//! writes before it, never for a reader.
//!
//! **Several nodes** on one database: step 3 is [`Store::write`], which holds the
//! change log's lock from before planning to the commit and first hands the writer
//! every commit its view has not seen (other nodes'), applied to the clone before
//! the batch is planned. So plans are always made against the latest commits, and
//! capacity is never over-committed across nodes. Between writes, the writer follows
//! the log on its own (every [`FOLLOW_EVERY`]) so that readers see other nodes'
//! commits soon; [`Host::staleness`] says how long ago the view was last known to be
//! current, and the server refuses to answer from a view older than its bound.
//! A view the log no longer reaches back to is loaded again from the tables.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use allot_core::ops::Plan;
use allot_core::{Change, State, Timestamp};
use tokio::sync::oneshot;

use crate::stats::{KindBusy, ViewSaveStats, WriteKind, WriterStats};
use crate::{Commit, Cursor, Listener, Store, StoreError, StoreKind};

/// How often an idle writer reads the change log of a shared store for other nodes'
/// commits when nothing wakes it. Bounds how stale a view gets while this node writes
/// nothing; a reading of the log costs one indexed query. With a [`Listener`]
/// attached (`Host::follow_with`), other nodes' commits wake the writer at once and
/// this is only the net under a lost notification.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(50);

/// How long the listener's thread waits for a notification before it checks that
/// the writer still runs.
const LISTEN_TICK: Duration = Duration::from_secs(1);

/// The source of the current time, injected so that tests control it.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The most writes one batch takes: bounds how long the first of them waits for the
/// others' planning, and the size of one transaction.
pub const MAX_BATCH: usize = 512;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The domain rules refused it; nothing changed.
    #[error(transparent)]
    Refused(#[from] allot_core::Error),
    /// The store failed; nothing of the write's batch changed. Shared: one failure
    /// fails every write of the batch.
    #[error(transparent)]
    Store(Arc<StoreError>),
    /// The writer stopped (a bug: it panicked, or the host is shutting down);
    /// nothing of this write changed.
    #[error("the writer is not running")]
    Stopped,
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Store(Arc::new(e))
    }
}

/// A cheap, cloneable handle on the store and the in-memory view.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

/// What the handles share. The writer thread holds only `shared`, so that when the
/// last handle goes, dropping this queues `Stop` behind every write and waits for
/// the writer to answer them and close the store.
struct Inner {
    shared: Arc<Shared>,
    /// The writer's queue (`None` only while dropping).
    queue: Option<Sender<Message>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Behind every write already queued: the writer answers those, then stops.
        if let Some(queue) = self.queue.take() {
            let _ = queue.send(Message::Stop);
        }
        if let Some(writer) = self.writer.take() {
            // A plan that owned the last handle would be dropped on the writer's own
            // thread, which cannot wait for itself.
            if writer.thread().id() != std::thread::current().id() {
                let _ = writer.join();
            }
        }
    }
}

struct Shared {
    /// The current version. The lock is held only to clone or swap the `Arc`.
    current: RwLock<Arc<State>>,
    clock: Clock,
    /// The store's engine and schema version, and whether other processes write to
    /// it (so the view can fall behind).
    kind: StoreKind,
    /// When the view was last known to hold every commit: microseconds since `epoch`.
    fresh_at: AtomicU64,
    epoch: Instant,
    /// Set when the writer has stopped (the listener's thread then stops too).
    stopped: AtomicBool,
    /// What the writer measures of its commits.
    stats: WriterStats,
    /// How the view was loaded at the start.
    loaded: Loaded,
    /// The last commit the current version holds, announced after each publish
    /// ([`Host::caught_up`]).
    published: tokio::sync::watch::Sender<Cursor>,
    /// The store's fence, for the node's lease (MariaDB: [`Store::fence`]).
    fence: Option<crate::Fence>,
}

/// How a host's view was loaded at its start, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loaded {
    /// Seconds from the store's open to the view in hand.
    pub seconds: f64,
    /// Whether it was the view saved at the last clean stop (SQLite), not the tables.
    pub from_saved_view: bool,
}

/// What the writer's queue carries.
enum Message {
    Write(Job),
    /// Another node committed (the listener heard it): read the log.
    Follow,
    /// The last handle went: answer what is queued, then stop.
    Stop,
    /// The health check asks whether the store can be written ([`Store::probe`]).
    Probe(oneshot::Sender<Result<(), WriteError>>),
}

/// A write waiting for the writer: its plan, type-erased (the answer goes into the
/// plan's own slot), and where to send the outcome.
struct Job {
    kind: WriteKind,
    plan: Planner,
    done: Done,
}

/// A write's plan, its answer set aside: the changes to persist, or the refusal.
type Planner = Box<dyn FnOnce(&State, Timestamp) -> Result<Vec<Change>, allot_core::Error> + Send>;

/// Sends a write's outcome to its caller.
type Done = Box<dyn FnOnce(Result<(), WriteError>) + Send>;

/// A write handed to the writer, not yet answered.
pub struct Pending<T> {
    answer: oneshot::Receiver<Result<T, WriteError>>,
}

impl<T> Pending<T> {
    /// Waits for the answer.
    pub async fn wait(self) -> Result<T, WriteError> {
        self.answer.await.unwrap_or(Err(WriteError::Stopped))
    }
}

impl Host {
    /// Loads the view from `store`, takes ownership of it, and starts the writer.
    pub fn new(mut store: Store, clock: Clock) -> Result<Host, StoreError> {
        let started = Instant::now();
        let (state, cursor) = store.snapshot()?;
        let loaded = Loaded {
            seconds: started.elapsed().as_secs_f64(),
            from_saved_view: store.read_saved_view(),
        };
        let shared = Arc::new(Shared {
            current: RwLock::new(Arc::new(state)),
            clock,
            kind: store.kind(),
            fresh_at: AtomicU64::new(0),
            epoch: Instant::now(),
            stopped: AtomicBool::new(false),
            stats: WriterStats {
                checkpoints: store.checkpoint_stats(),
                view_saves: store.view_save_every().map(|_| ViewSaveStats::default()),
                ..WriterStats::default()
            },
            loaded,
            published: tokio::sync::watch::Sender::new(cursor),
            fence: store.fence(),
        });
        let (queue, jobs) = mpsc::channel();
        let saves = ViewSaves {
            every: store.view_save_every(),
            last: Instant::now(),
            saved: cursor,
            running: None,
        };
        let writer = Writer {
            shared: shared.clone(),
            store,
            cursor,
            saves,
        };
        let writer = std::thread::Builder::new()
            .name("allot-writer".into())
            .spawn(move || writer.run(jobs))?;
        Ok(Host {
            inner: Arc::new(Inner {
                shared,
                queue: Some(queue),
                writer: Some(writer),
            }),
        })
    }

    /// The store's fence, for this node's [`crate::Lease`] ([`Store::lease`]);
    /// `None` where writes need none.
    pub fn fence(&self) -> Option<crate::Fence> {
        self.inner.shared.fence.clone()
    }

    /// Wakes the writer whenever another node commits (`LISTEN`), so that this node's
    /// readers see other nodes' commits within milliseconds rather than at the next
    /// poll. The listener runs on a thread of its own until the writer stops.
    pub fn follow_with(&self, mut listener: Listener) -> std::io::Result<()> {
        let queue = self.queue().clone();
        let shared = self.inner.shared.clone();
        std::thread::Builder::new()
            .name("allot-listener".into())
            .spawn(move || {
                while !shared.stopped.load(Ordering::Acquire) {
                    match listener.wait(LISTEN_TICK) {
                        // A commit, or a reconnect after which commits may have been
                        // missed: the writer reads the log.
                        Ok(true) => {
                            if queue.send(Message::Follow).is_err() {
                                return;
                            }
                        }
                        Ok(false) => {}
                        // Down: the writer's own polling goes on meanwhile.
                        Err(e) => {
                            tracing::warn!("listening for other nodes' commits: {e}");
                            std::thread::sleep(LISTEN_TICK);
                        }
                    }
                }
            })?;
        Ok(())
    }

    /// The current time by the host's clock.
    pub fn now(&self) -> Timestamp {
        (self.inner.shared.clock)()
    }

    /// The current version of the view: everything committed so far, fixed for as
    /// long as the caller keeps it.
    pub fn read(&self) -> Arc<State> {
        self.inner.shared.current()
    }

    /// The last commit of the store that the current version holds.
    pub fn cursor(&self) -> Cursor {
        *self.inner.shared.published.borrow()
    }

    /// Waits until the view holds commit `cursor` (made by this node or, on a shared
    /// store, by another one that this node follows), at most `bound`; whether it
    /// does. For a node that forwarded a write: its answer waits until a read here
    /// would see the write.
    pub async fn caught_up(&self, cursor: Cursor, bound: Duration) -> bool {
        let mut published = self.inner.shared.published.subscribe();
        let waited = tokio::time::timeout(bound, published.wait_for(|c| *c >= cursor)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// How long ago the view was last known to hold every commit in the store: always
    /// zero for a store only this process writes (the embedded SQLite file), else the
    /// time since the writer last read the change log's head and caught up.
    pub fn staleness(&self) -> Duration {
        let shared = &self.inner.shared;
        if !shared.kind.shared {
            return Duration::ZERO;
        }
        let fresh_at = Duration::from_micros(shared.fresh_at.load(Ordering::Acquire));
        shared.epoch.elapsed().saturating_sub(fresh_at)
    }

    /// Hands a write to the writer: `plan` runs against the view as the writes before
    /// it left it; its changes are persisted, applied, and then its answer is sent.
    pub fn submit<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Pending<T> {
        self.submit_as(WriteKind::Other, plan)
    }

    /// [`Host::submit`], the writer's time for it counted as `kind`'s.
    pub fn submit_as<T: Send + 'static>(
        &self,
        kind: WriteKind,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Pending<T> {
        let (tx, answer) = oneshot::channel();
        // The caller may have gone (a dropped request): nothing to tell.
        self.enqueue(kind, plan, move |outcome| drop(tx.send(outcome)));
        Pending { answer }
    }

    /// Whether the store can still be written (or, PostgreSQL, reached): the writer
    /// runs [`Store::probe`] between batches, on its own connection, and this waits
    /// for the outcome. Queued behind the writes already waiting, so its latency is
    /// also the writer's; the caller bounds the wait.
    pub async fn probe(&self) -> Result<(), WriteError> {
        let (tx, answer) = oneshot::channel();
        self.queue()
            .send(Message::Probe(tx))
            .map_err(|_| WriteError::Stopped)?;
        answer.await.unwrap_or(Err(WriteError::Stopped))
    }

    /// The writer's queue.
    fn queue(&self) -> &Sender<Message> {
        self.inner
            .queue
            .as_ref()
            .expect("only `Inner::drop` takes it")
    }

    /// The store's engine and schema version, and whether other nodes write to it.
    pub fn store_kind(&self) -> StoreKind {
        self.inner.shared.kind
    }

    /// How the view was loaded at the start.
    pub fn loaded(&self) -> Loaded {
        self.inner.shared.loaded
    }

    /// The writer's measures of its commits (see [`WriterStats`]).
    pub fn stats(&self) -> &WriterStats {
        &self.inner.shared.stats
    }

    /// Runs one write and waits for it, blocking the thread. For tests and tools;
    /// the server awaits [`Host::submit`] instead.
    pub fn write<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Result<T, WriteError> {
        let (tx, answer) = mpsc::sync_channel(1);
        self.enqueue(WriteKind::Other, plan, move |outcome| {
            drop(tx.send(outcome))
        });
        answer.recv().unwrap_or(Err(WriteError::Stopped))
    }

    /// Queues a write whose outcome goes to `deliver`.
    fn enqueue<T: Send + 'static>(
        &self,
        kind: WriteKind,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
        deliver: impl FnOnce(Result<T, WriteError>) + Send + 'static,
    ) {
        // The answer waits in a slot between planning and the commit's outcome.
        let slot = Arc::new(std::sync::Mutex::new(None));
        let filled = slot.clone();
        let job = Job {
            kind,
            plan: Box::new(move |state, now| {
                let (value, changes) = plan(state, now)?;
                *filled.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
                Ok(changes)
            }),
            done: Box::new(move |outcome| {
                deliver(outcome.and_then(|()| {
                    slot.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .ok_or(WriteError::Stopped)
                }))
            }),
        };
        if let Err(mpsc::SendError(Message::Write(job))) = self.queue().send(Message::Write(job)) {
            (job.done)(Err(WriteError::Stopped));
        }
    }
}

impl Shared {
    /// Notes that the view holds every commit up to now.
    fn fresh(&self) {
        let micros = self.epoch.elapsed().as_micros() as u64;
        self.fresh_at.fetch_max(micros, Ordering::AcqRel);
    }

    fn current(&self) -> Arc<State> {
        // A poisoned lock means a panic while swapping an `Arc`, which leaves it whole.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes `next`, which holds every commit up to `cursor`, the current version;
    /// returns the one it replaces.
    fn publish(&self, next: State, cursor: Cursor) -> Arc<State> {
        let next = Arc::new(next);
        let old = std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|e| e.into_inner()),
            next,
        );
        // After the swap: whoever wakes on the cursor finds the version holding it.
        self.published.send_replace(cursor);
        old
    }
}

/// The writer thread's own state: the store, and where the view is in its log.
struct Writer {
    shared: Arc<Shared>,
    store: Store,
    /// The last commit the current version holds.
    cursor: Cursor,
    saves: ViewSaves,
}

/// The view saved beside an SQLite file while the host runs (`engine::saved`): at
/// most once every `every`, when something was committed since the last save, on a
/// thread of its own that reads a published version (which no write changes), so
/// that no write waits for it.
struct ViewSaves {
    /// `None`: saved only at a clean stop.
    every: Option<Duration>,
    /// When the last save began (or the writer started).
    last: Instant,
    /// The commit the last save's view holds (or the loaded view's).
    saved: Cursor,
    running: Option<std::thread::JoinHandle<()>>,
}

/// How long an idle writer waits again when a save is due but the last one still
/// runs.
const SAVE_RETRY: Duration = Duration::from_millis(100);

impl Writer {
    /// Takes batches off the queue until told to stop; between writes, follows the
    /// log of a shared store.
    fn run(mut self, jobs: Receiver<Message>) {
        self.shared.fresh();
        self.serve(jobs);
        self.shared.stopped.store(true, Ordering::Release);
        // Every write is answered: the last version is the view of every commit.
        let Writer {
            shared,
            store,
            cursor,
            mut saves,
        } = self;
        // The save at the stop writes the same file.
        if let Some(running) = saves.running.take() {
            let _ = running.join();
        }
        store.close(&shared.current(), cursor);
    }

    fn serve(&mut self, jobs: Receiver<Message>) {
        loop {
            // Idle, a shared store's writer follows the log; an SQLite one saves the
            // view when a save is due.
            let idle_for = if self.shared.kind.shared {
                Some(FOLLOW_EVERY)
            } else {
                self.save_due_in()
            };
            let message = match idle_for {
                Some(wait) => match jobs.recv_timeout(wait) {
                    Ok(message) => message,
                    Err(RecvTimeoutError::Timeout) if self.shared.kind.shared => {
                        self.follow();
                        continue;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        self.save_view();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                None => match jobs.recv() {
                    Ok(message) => message,
                    Err(_) => return,
                },
            };
            let first = match message {
                Message::Write(job) => job,
                Message::Follow => match self.next_write(&jobs) {
                    // A write waits: it reads the log anyway, under the lock.
                    Some(Message::Write(job)) => job,
                    Some(Message::Probe(reply)) => {
                        self.probe(reply);
                        self.follow();
                        continue;
                    }
                    Some(_) => return,
                    None => {
                        self.follow();
                        continue;
                    }
                },
                Message::Probe(reply) => {
                    self.probe(reply);
                    continue;
                }
                Message::Stop => return,
            };
            let mut batch = vec![first];
            let mut probes = Vec::new();
            let mut stop = false;
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(Message::Write(job)) => batch.push(job),
                    // The batch's write reads the log anyway.
                    Ok(Message::Follow) => {}
                    // After the batch, so that a probe never delays a write.
                    Ok(Message::Probe(reply)) => probes.push(reply),
                    Ok(Message::Stop) => {
                        stop = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            self.commit(batch);
            self.save_view();
            for reply in probes {
                self.probe(reply);
            }
            if stop {
                return;
            }
        }
    }

    /// After a wake-up from the listener: the first write already queued, skipping
    /// the other wake-ups (under a storm every commit of every node wakes every
    /// node, and a write catches up anyway), or `Some(Stop)`, or None when nothing
    /// but wake-ups was queued.
    fn next_write(&self, jobs: &Receiver<Message>) -> Option<Message> {
        loop {
            match jobs.try_recv() {
                Ok(Message::Follow) => continue,
                Ok(message) => return Some(message),
                Err(_) => return None,
            }
        }
    }

    /// How long until a save of the view is due, if one will be (something was
    /// committed since the last).
    fn save_due_in(&self) -> Option<Duration> {
        let every = self.saves.every?;
        (self.cursor != self.saves.saved).then(|| {
            every
                .saturating_sub(self.saves.last.elapsed())
                .max(SAVE_RETRY)
        })
    }

    /// Starts a save of the current version beside the database, if one is due and
    /// the last one has finished ([`ViewSaves`]).
    fn save_view(&mut self) {
        let Some(every) = self.saves.every else {
            return;
        };
        if self.cursor == self.saves.saved || self.saves.last.elapsed() < every {
            return;
        }
        if let Some(running) = self.saves.running.take() {
            if !running.is_finished() {
                self.saves.running = Some(running);
                return;
            }
            let _ = running.join();
        }
        // One try per period, whatever comes of it: an idle writer does not ask again
        // until the next commit is due a save.
        let cursor = self.cursor;
        self.saves.last = Instant::now();
        self.saves.saved = cursor;
        let save = match self.store.running_save(cursor) {
            Ok(Some(save)) => save,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("could not save the view while running: {e}");
                return;
            }
        };
        // The version this writer published last: the view of `cursor`.
        let view = self.shared.current();
        let stats = self.shared.stats.view_saves.clone().unwrap_or_default();
        let spawned = std::thread::Builder::new()
            .name("allot-save".into())
            .spawn(move || {
                let started = Instant::now();
                let written = save.write(&view);
                let seconds = started.elapsed().as_secs_f64();
                stats.seconds.observe(seconds);
                match written {
                    Ok((path, bytes)) => {
                        stats.saved.inc();
                        tracing::debug!(
                            saved = %path.display(),
                            commit = cursor.0,
                            bytes,
                            seconds,
                            "saved the view for a start after a crash"
                        )
                    }
                    Err(e) => {
                        stats.failed.inc();
                        tracing::warn!(
                            "could not save the view while running (a start after a crash \
                             will read an older one, or the tables): {e}"
                        )
                    }
                }
            });
        match spawned {
            Ok(handle) => self.saves.running = Some(handle),
            Err(e) => tracing::warn!("could not start the thread that saves the view: {e}"),
        }
    }

    /// Answers a health check's probe.
    fn probe(&mut self, reply: oneshot::Sender<Result<(), WriteError>>) {
        let outcome = self.store.probe().map_err(WriteError::from);
        if let Err(e) = &outcome {
            tracing::warn!("the store failed the health check's probe: {e}");
        }
        // The health check may have given up waiting: nothing to tell.
        drop(reply.send(outcome));
    }

    /// Applies other nodes' commits, if there are any, and publishes the result.
    fn follow(&mut self) {
        match self.store.changes_since(self.cursor) {
            Ok(commits) => {
                if let Some(last) = commits.last() {
                    let mut next = State::clone(&self.shared.current());
                    for commit in &commits {
                        next.apply(&commit.changes);
                    }
                    self.cursor = last.cursor;
                    drop(self.shared.publish(next, self.cursor));
                }
                self.shared.fresh();
            }
            Err(StoreError::Behind(_)) => self.reload(),
            // The database is out of reach: the view stays as it is and grows stale,
            // which the server sees through `Host::staleness`.
            Err(e) => {
                self.shared.stats.store_errors.inc();
                tracing::warn!("following the change log: {e}");
            }
        }
    }

    /// Loads the whole view again: the log no longer reaches back to it, or the store
    /// changed under a write.
    fn reload(&mut self) {
        match self.store.snapshot() {
            Ok((state, cursor)) => {
                tracing::warn!("loaded the view again from the store");
                self.cursor = cursor;
                drop(self.shared.publish(state, cursor));
                self.shared.fresh();
            }
            Err(e) => tracing::error!("loading the view again: {e}"),
        }
    }

    /// Plans, persists, publishes and answers one batch.
    fn commit(&mut self, batch: Vec<Job>) {
        let mut batch = Some(batch);
        // At most twice: when the log no longer reaches back to the view, the view is
        // loaded again and the batch tried once more.
        for attempt in 0..2 {
            let base = self.shared.current();
            let mut next: Option<State> = None;
            let mut planned: Vec<Done> = Vec::new();
            let mut sound = true;
            let clock = &self.shared.clock;
            let stats = &self.shared.stats;
            if let Some(batch) = &batch {
                stats.batch_size.observe(batch.len() as f64);
            }
            let started = Instant::now();
            let mut planning = Duration::ZERO;
            let outcome = self.store.write(self.cursor, &mut |unseen: Vec<Commit>| {
                let planned_at = Instant::now();
                let mut state = State::clone(&base);
                for commit in &unseen {
                    state.apply(&commit.changes);
                }
                let jobs = batch.take().unwrap_or_default();
                let (changes, ok) = plan_batch(&mut state, jobs, &mut planned, clock, stats);
                sound = ok;
                planning = planned_at.elapsed();
                if !ok {
                    // Nothing is written; the view stays as it was.
                    return Vec::new();
                }
                next = Some(state);
                changes
            });
            let in_store = started.elapsed().saturating_sub(planning).as_secs_f64();
            stats.commit_seconds.observe(in_store);
            stats.busy.plan.inc_by(planning.as_secs_f64());
            stats.busy.store.inc_by(in_store);
            match outcome {
                Ok(head) => {
                    let answering = Instant::now();
                    let replaced = match next {
                        // Something new (this batch's or other nodes' commits).
                        Some(next) if head != self.cursor => {
                            self.cursor = head;
                            Some(self.shared.publish(next, head))
                        }
                        _ => None,
                    };
                    self.shared.fresh();
                    for done in planned {
                        done(if sound {
                            Ok(())
                        } else {
                            Err(WriteError::Stopped)
                        });
                    }
                    let freeing = Instant::now();
                    stats
                        .busy
                        .answer
                        .inc_by((freeing - answering).as_secs_f64());
                    // The old version is freed (if no reader holds it) after the
                    // answers, not before them or under the lock. Here, not on a
                    // thread of its own: measured, that thread's count-downs met
                    // the next batch's count-ups on the same lines from another
                    // core, and claims were slower (docs/design/ratio-on-two-cores.md).
                    drop(replaced);
                    drop(base);
                    stats.busy.free.inc_by(freeing.elapsed().as_secs_f64());
                    return;
                }
                Err(StoreError::Behind(_)) if attempt == 0 && batch.is_some() => self.reload(),
                Err(e) => {
                    stats.store_errors.inc();
                    let stale = matches!(e, StoreError::Stale(_));
                    let e = Arc::new(e);
                    for job in batch.take().unwrap_or_default() {
                        (job.done)(Err(WriteError::Store(e.clone())));
                    }
                    for done in planned {
                        done(Err(WriteError::Store(e.clone())));
                    }
                    if stale {
                        self.reload();
                    }
                    return;
                }
            }
        }
    }
}

/// Plans each job of a batch against `state` in arrival order, applying each one's
/// changes before planning the next, so that every write sees the ones before it.
/// A refused write is answered at once; the others wait in `planned` for the commit.
/// Returns the batch's changes, and false if applying a plan panicked (a bug: the
/// state may be half changed, so the whole batch must fail and nothing be written).
fn plan_batch(
    state: &mut State,
    jobs: Vec<Job>,
    planned: &mut Vec<Done>,
    clock: &Clock,
    stats: &WriterStats,
) -> (Vec<Change>, bool) {
    let mut changes: Vec<Change> = Vec::new();
    for job in jobs {
        let now = clock();
        let share = stats.busy.of(job.kind);
        share.writes.inc();
        let started = Instant::now();
        let counted = Counted { share, started };
        // A panic in the rules is a bug; it fails that write, not the writer.
        match catch_unwind(AssertUnwindSafe(|| (job.plan)(state, now))) {
            Ok(Ok(mine)) => {
                let applied = catch_unwind(AssertUnwindSafe(|| state.apply(&mine)));
                drop(counted);
                if applied.is_err() {
                    tracing::error!("applying a write panicked; its batch fails");
                    planned.push(job.done);
                    return (Vec::new(), false);
                }
                changes.extend(mine);
                planned.push(job.done);
            }
            Ok(Err(refused)) => (job.done)(Err(WriteError::Refused(refused))),
            Err(_) => {
                tracing::error!("planning a write panicked; it fails");
                (job.done)(Err(WriteError::Stopped));
            }
        }
    }
    (changes, true)
}

/// Adds the time since `started` to a kind's share when dropped: on every way out of
/// a write's planning.
struct Counted<'a> {
    share: &'a KindBusy,
    started: Instant,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.share
            .seconds
            .inc_by(self.started.elapsed().as_secs_f64());
    }
}
