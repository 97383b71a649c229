//! What the writer measures of its work, for `/metrics`: the handles the host's writer
//! thread counts into and the server's registry reads (`crate::host`).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::CheckpointStats;

/// What the writer measures of its work, for `/metrics`: each a handle that the
/// server's registry shares.
#[derive(Debug, Clone)]
pub struct WriterStats {
    /// How many writes each commit carried.
    pub batch_size: Histogram,
    /// How long each commit took in the store, in seconds (the database's part of a
    /// write's latency: the statements, the log row, the commit and its fsync; not
    /// the planning, which `busy.plan` counts).
    pub commit_seconds: Histogram,
    /// Where the writer thread's time goes, commit by commit.
    pub busy: WriterBusy,
    /// Store operations that failed: commits, and reads of other nodes' commits.
    pub store_errors: Counter,
    /// The SQLite engine's checkpoints (`None` on PostgreSQL).
    pub checkpoints: Option<CheckpointStats>,
    /// The views saved while the host runs (`None` where none are: PostgreSQL, or
    /// `Store::save_view_every(None)`).
    pub view_saves: Option<ViewSaveStats>,
}

/// What the saves of the view while the host runs come to (`engine::saved`).
#[derive(Debug, Clone)]
pub struct ViewSaveStats {
    /// Saves written whole.
    pub saved: Counter,
    /// Saves that failed (the next start reads an older view, or the tables).
    pub failed: Counter,
    /// How long each save took on its thread, in seconds.
    pub seconds: Histogram,
}

impl Default for ViewSaveStats {
    fn default() -> Self {
        ViewSaveStats {
            saved: Counter::default(),
            failed: Counter::default(),
            // 10 ms to about 160 s: a million providers take one to two seconds.
            seconds: Histogram::new(exponential_buckets(0.01, 2.0, 15)),
        }
    }
}

/// Seconds the writer thread spent in each part of its commits, added up: their sum
/// over a minute says how busy the one thread every write goes through is, and the
/// parts say what to look at when it is busy. Measured under claim storms, the
/// parts that grow with the cloud's size are `plan` and `free` (the view's copies and
/// their frees) and `store` (the database's pages); see
/// docs/design/claim-cost-at-a-million-roots.md.
#[derive(Debug, Clone, Default)]
pub struct WriterBusy {
    /// Cloning the view, catching up on other nodes' commits and planning the batch
    /// against it (the rules, and the view's copies of what each write changes).
    pub plan: Counter<f64, AtomicU64>,
    /// The store's part: the statements, the change log's row, the commit and its
    /// fsync (the sum of `commit_seconds`).
    pub store: Counter<f64, AtomicU64>,
    /// Publishing the new version to readers and answering the batch's writes.
    pub answer: Counter<f64, AtomicU64>,
    /// Freeing what the new version replaced, once no reader holds the old one.
    pub free: Counter<f64, AtomicU64>,
    /// Planning and applying each write, by kind: the part of `plan` that one write
    /// holds every other write for, so that a kind that holds them long is seen.
    pub by_kind: [KindBusy; WriteKind::ALL.len()],
}

/// One kind of write's share of the writer (see [`WriterBusy::by_kind`]).
#[derive(Debug, Clone, Default)]
pub struct KindBusy {
    /// Seconds spent planning writes of the kind and applying their changes.
    pub seconds: Counter<f64, AtomicU64>,
    /// How many were planned (refused ones included).
    pub writes: Counter,
}

/// What a write does, for the writer's measures: the server names it when it hands
/// the write over ([`crate::Host::submit_as`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// A provider created, updated or deleted.
    Provider,
    /// Inventories set or deleted.
    Inventory,
    /// Traits (of a provider, or the trait list).
    Trait,
    /// A provider's aggregates.
    Aggregate,
    /// Resource classes and their metadata.
    Class,
    /// Allocations written or deleted.
    Allocation,
    /// Pending claims made, confirmed or released.
    Claim,
    /// A pick-and-claim: the search, the choice and the claims.
    Pick,
    /// The sweep of ended claims.
    Sweep,
    /// A reshape.
    Reshape,
    /// A server group made, deleted, or given or relieved of members.
    ServerGroup,
    /// A drain made, confirmed or abandoned.
    Drain,
    /// Anything else (tools and tests).
    Other,
}

impl WriteKind {
    /// Every kind, in the order of [`WriterBusy::by_kind`].
    pub const ALL: [WriteKind; 13] = [
        WriteKind::Provider,
        WriteKind::Inventory,
        WriteKind::Trait,
        WriteKind::Aggregate,
        WriteKind::Class,
        WriteKind::Allocation,
        WriteKind::Claim,
        WriteKind::Pick,
        WriteKind::Sweep,
        WriteKind::Reshape,
        WriteKind::ServerGroup,
        WriteKind::Drain,
        WriteKind::Other,
    ];

    /// The label `/metrics` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Provider => "provider",
            WriteKind::Inventory => "inventory",
            WriteKind::Trait => "trait",
            WriteKind::Aggregate => "aggregate",
            WriteKind::Class => "class",
            WriteKind::Allocation => "allocation",
            WriteKind::Claim => "claim",
            WriteKind::Pick => "pick",
            WriteKind::Sweep => "sweep",
            WriteKind::Reshape => "reshape",
            WriteKind::ServerGroup => "server_group",
            WriteKind::Drain => "drain",
            WriteKind::Other => "other",
        }
    }

    /// Its place in [`WriteKind::ALL`].
    fn index(self) -> usize {
        WriteKind::ALL
            .iter()
            .position(|k| *k == self)
            .expect("every kind is in ALL")
    }
}

impl WriterBusy {
    /// The share of `kind`.
    pub fn of(&self, kind: WriteKind) -> &KindBusy {
        &self.by_kind[kind.index()]
    }
}

impl Default for WriterStats {
    fn default() -> Self {
        WriterStats {
            // 1, 2, 4, ... 512: the batch is capped at MAX_BATCH.
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            commit_seconds: seconds_histogram(),
            busy: WriterBusy::default(),
            store_errors: Counter::default(),
            checkpoints: None,
            view_saves: None,
        }
    }
}

/// A histogram of durations in the store, in seconds: 100 µs to about 3 s, each
/// bucket twice the one before.
pub(crate) fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 15))
}
