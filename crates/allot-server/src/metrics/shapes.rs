//! `/metrics`' counts of the named shapes (issue 47): for each shape, how many more
//! fit (`allot_headroom{shape}`), and for each class the free units on the roots
//! where no shape fits at all any more (`allot_stranded{resourcetype}`), with the
//! counts' age.
//!
//! Counting every shape is a headroom search each, milliseconds to seconds by the
//! cloud's size: too slow for a scrape, which must cost what it did before shapes
//! (about 20 ms at flat 10,000). So a scrape reads the last counts, and when they
//! are older than `--shape-counts-interval` starts the next on a thread of its own
//! and does not wait for it. Counts are made only while someone scrapes: a
//! cloud nobody watches pays nothing, and the age a scrape reports is at most the
//! interval plus the time between two scrapes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use allot_core::shapes::{ShapeCounts, ShapeName};
use allot_core::State;
use prometheus_client::encoding::DescriptorEncoder;

use super::{gauge, gauges, saturated};
use crate::AppState;

/// The default of [`crate::Settings::shape_counts_interval`].
pub const DEFAULT_SHAPE_COUNTS_INTERVAL: Duration = Duration::from_secs(5);

/// The last counts, and whether the next is under way. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct ShapeCounter {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    last: Option<Counted>,
    running: bool,
}

/// One count: when it began, how long it took, what it found.
#[derive(Debug, Clone)]
pub(super) struct Counted {
    pub began: Instant,
    pub took: Duration,
    pub counts: Arc<ShapeCounts>,
}

/// What a scrape writes of the shapes: the last counts and their age, if any.
#[derive(Debug)]
pub(super) struct Read {
    /// How many named shapes there are.
    pub shapes: usize,
    pub last: Option<Counted>,
}

impl ShapeCounter {
    /// The last counts, and their age; when they are older than the interval (or
    /// there are none) and the view has shapes, the next count starts in the
    /// background.
    pub(super) fn read(&self, app: &AppState) -> Read {
        let shapes = app.host.read().shapes().len();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let last = inner.last.clone();
        let due = last
            .as_ref()
            .is_none_or(|c| c.began.elapsed() >= app.config.settings.shape_counts_interval);
        if due && !inner.running && shapes > 0 {
            inner.running = true;
            let (counter, app) = (self.clone(), app.clone());
            let started = std::thread::Builder::new()
                .name("shape-counts".into())
                .spawn(move || counter.count(&app));
            if let Err(e) = started {
                inner.running = false;
                tracing::warn!(error = %e, "could not start counting the named shapes");
            }
        }
        Read { shapes, last }
    }

    /// Counts every shape on the view as it is now, and keeps the counts. A count
    /// that panics (a bug) is logged and leaves the last counts; the next scrape
    /// may start another, rather than none ever again.
    fn count(&self, app: &AppState) {
        let began = Instant::now();
        let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            count(
                &app.host.read(),
                app.host.now(),
                &app.config.settings.search_options(),
            )
        }));
        let Ok(counts) = counted else {
            tracing::error!("counting the named shapes panicked; the last counts stay");
            self.inner.lock().unwrap_or_else(|p| p.into_inner()).running = false;
            return;
        };
        if counts.truncated {
            tracing::warn!("a named shape's count was cut short by the search step budget");
        }
        for (name, why) in &counts.refused {
            tracing::warn!(shape = %name, error = %why, "a named shape cannot be counted");
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.last = Some(Counted {
            began,
            took: began.elapsed(),
            counts: Arc::new(counts),
        });
        inner.running = false;
    }
}

/// Every shape of `view` counted at `now`: each request read as `GET
/// /allocation_candidates` reads it (a request that no longer reads, say one that
/// names a class deleted since, is refused with why).
pub fn count(
    view: &State,
    now: allot_core::Timestamp,
    options: &allot_core::candidates::SearchOptions,
) -> ShapeCounts {
    let mut queries: Vec<(ShapeName, _)> = Vec::new();
    let mut unread = Vec::new();
    for shape in view.shapes() {
        let parsed = crate::request::candidates::parse(
            crate::microversion::MAX,
            Some(&shape.request),
            now,
            0,
        );
        match parsed {
            Ok(query) => queries.push((shape.name.clone(), query)),
            Err(e) => unread.push((shape.name.clone(), allot_core::Error::invalid(e.message))),
        }
    }
    let mut counts = view.count_shapes(&queries, options);
    counts.refused.extend(unread);
    counts
}

/// The shapes' series.
pub(super) fn series(e: &mut DescriptorEncoder, read: &Read) -> Result<(), std::fmt::Error> {
    gauge(
        e,
        "allot_shapes",
        "Named shapes (GET /shapes)",
        read.shapes as i64,
    )?;
    let Some(Counted {
        began,
        took,
        counts,
    }) = &read.last
    else {
        return Ok(());
    };
    gauge(
        e,
        "allot_shape_counts_age_seconds",
        "How old allot_headroom and allot_stranded are: they are counted in the \
         background, at most every --shape-counts-interval, while /metrics is scraped",
        began.elapsed().as_secs_f64(),
    )?;
    gauge(
        e,
        "allot_shape_counts_seconds",
        "How long the last count of every named shape took (on a thread of its own)",
        took.as_secs_f64(),
    )?;
    gauges(
        e,
        "allot_headroom",
        "How many more instances of a named shape fit (GET /headroom?shape=NAME)",
        counts
            .headroom
            .iter()
            .map(|(name, n)| ([("shape", name.as_str())], saturated(*n))),
    )?;
    gauges(
        e,
        "allot_stranded",
        "Free units of a resource class on the roots where no named shape fits any \
         more (sharing pools and drained roots left out)",
        counts
            .stranded
            .iter()
            .map(|(class, n)| ([("resourcetype", class.as_str())], saturated(*n))),
    )
}
