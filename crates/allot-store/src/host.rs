//! The host: the one place that changes the world.
//!
//! A write takes the writer lock, plans against the current view (pure, in
//! `allot-core`), persists the plan's changes in one store transaction, and only after
//! the commit applies them to the view. So a reader never sees what the disk does not
//! hold, and, because writes are serialised, a plan is never made against a view that
//! another write is changing: the capacity and generation checks of the plan hold at
//! commit time.
//!
//! Both locks are `std::sync` locks: they are never held across an `.await` (the host
//! is synchronous; the server calls writes from `spawn_blocking`), and they are cheaper
//! than async locks for the short sections they guard.

use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use allot_core::ops::Plan;
use allot_core::{State, Timestamp};

use crate::{Store, StoreError};

/// The source of the current time, injected so that tests control it.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The domain rules refused it; nothing changed.
    #[error(transparent)]
    Refused(#[from] allot_core::Error),
    /// The store failed; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A cheap, cloneable handle on the store and the in-memory view.
#[derive(Clone)]
pub struct Host {
    shared: Arc<Shared>,
}

struct Shared {
    view: RwLock<State>,
    writer: Mutex<Store>,
    clock: Clock,
}

impl Host {
    /// Loads the view from `store` and takes ownership of it.
    pub fn new(mut store: Store, clock: Clock) -> Result<Host, StoreError> {
        let state = store.load()?;
        Ok(Host {
            shared: Arc::new(Shared {
                view: RwLock::new(state),
                writer: Mutex::new(store),
                clock,
            }),
        })
    }

    /// The current time by the host's clock.
    pub fn now(&self) -> Timestamp {
        (self.shared.clock)()
    }

    /// Read access to the view. Hold it briefly: a write waits for readers to finish
    /// before it applies its changes.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        // A poisoned lock means a panic while applying changes; the view may be half
        // updated, but the store is not, and serving on is better than refusing every
        // request: the next restart reloads from the store.
        self.shared.view.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one write: plan against the view, persist, apply. Blocking.
    pub fn write<T>(
        &self,
        plan: impl FnOnce(&State, Timestamp) -> Plan<T>,
    ) -> Result<T, WriteError> {
        let mut store = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        // Only this thread (holding the writer lock) changes the view, so a read guard
        // held while planning sees exactly the state the changes will apply to.
        let (answer, changes) = plan(&self.read(), now)?;
        if !changes.is_empty() {
            store.persist(&changes)?;
            self.shared
                .view
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .apply(&changes);
        }
        Ok(answer)
    }
}
