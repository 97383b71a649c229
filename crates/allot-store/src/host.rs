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

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, RwLock};

use allot_core::ops::Plan;
use allot_core::{Change, State, Timestamp};
use tokio::sync::oneshot;

use crate::{Store, StoreError};

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
/// last handle goes, dropping this closes the queue and waits for the writer to
/// finish what was queued and close the store.
struct Inner {
    shared: Arc<Shared>,
    /// The writer thread's queue (`None` only while dropping).
    queue: Option<Sender<Job>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        drop(self.queue.take());
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
}

/// A write waiting for the writer: its plan, type-erased (the answer goes into the
/// plan's own slot), and where to send the outcome.
struct Job {
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
        let state = store.load()?;
        let shared = Arc::new(Shared {
            current: RwLock::new(Arc::new(state)),
            clock,
        });
        let (queue, jobs) = mpsc::channel();
        let writer = shared.clone();
        let writer = std::thread::Builder::new()
            .name("allot-writer".into())
            .spawn(move || writer.run(store, jobs))?;
        Ok(Host {
            inner: Arc::new(Inner {
                shared,
                queue: Some(queue),
                writer: Some(writer),
            }),
        })
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

    /// Hands a write to the writer: `plan` runs against the view as the writes before
    /// it left it; its changes are persisted, applied, and then its answer is sent.
    pub fn submit<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Pending<T> {
        let (tx, answer) = oneshot::channel();
        // The caller may have gone (a dropped request): nothing to tell.
        self.enqueue(plan, move |outcome| drop(tx.send(outcome)));
        Pending { answer }
    }

    /// Runs one write and waits for it, blocking the thread. For tests and tools;
    /// the server awaits [`Host::submit`] instead.
    pub fn write<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Result<T, WriteError> {
        let (tx, answer) = mpsc::sync_channel(1);
        self.enqueue(plan, move |outcome| drop(tx.send(outcome)));
        answer.recv().unwrap_or(Err(WriteError::Stopped))
    }

    /// Queues a write whose outcome goes to `deliver`.
    fn enqueue<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T> + Send + 'static,
        deliver: impl FnOnce(Result<T, WriteError>) + Send + 'static,
    ) {
        // The answer waits in a slot between planning and the commit's outcome.
        let slot = Arc::new(std::sync::Mutex::new(None));
        let filled = slot.clone();
        let job = Job {
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
        let queue = self
            .inner
            .queue
            .as_ref()
            .expect("only `Inner::drop` takes it");
        if let Err(mpsc::SendError(job)) = queue.send(job) {
            (job.done)(Err(WriteError::Stopped));
        }
    }
}

impl Shared {
    fn current(&self) -> Arc<State> {
        // A poisoned lock means a panic while swapping an `Arc`, which leaves it whole.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The writer thread: takes batches off the queue until every handle is gone.
    fn run(&self, mut store: Store, jobs: Receiver<Job>) {
        while let Ok(first) = jobs.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            self.commit(&mut store, batch);
        }
    }

    /// Plans, persists, publishes and answers one batch.
    fn commit(&self, store: &mut Store, batch: Vec<Job>) {
        let mut next = State::clone(&self.current());
        let mut changes: Vec<Change> = Vec::new();
        let mut planned: Vec<Done> = Vec::with_capacity(batch.len());
        for job in batch {
            let now = (self.clock)();
            // A panic in the rules is a bug; it fails that write, not the writer.
            match catch_unwind(AssertUnwindSafe(|| (job.plan)(&next, now))) {
                Ok(Ok(mine)) => {
                    if catch_unwind(AssertUnwindSafe(|| next.apply(&mine))).is_err() {
                        // The clone may be half changed: the whole batch goes.
                        tracing::error!("applying a write panicked; its batch fails");
                        (job.done)(Err(WriteError::Stopped));
                        for done in planned {
                            done(Err(WriteError::Stopped));
                        }
                        return;
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
        if !changes.is_empty() {
            if let Err(e) = store.persist(&changes) {
                let e = Arc::new(e);
                for done in planned {
                    done(Err(WriteError::Store(e.clone())));
                }
                return;
            }
        }
        let replaced = (!changes.is_empty()).then(|| self.publish(next));
        for done in planned {
            done(Ok(()));
        }
        // The old version is freed (if no reader holds it) after the answers, not
        // before them or under the lock.
        drop(replaced);
    }

    /// Makes `next` the current version; returns the one it replaces.
    fn publish(&self, next: State) -> Arc<State> {
        let next = Arc::new(next);
        std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|e| e.into_inner()),
            next,
        )
    }
}
