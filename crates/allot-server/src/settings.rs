//! The settings the server reads, as one plain typed value: [`Settings`], held whole
//! in [`crate::Config::settings`] and read where each is used
//! (`app.config.settings.policy`, `app.config.settings.claim_retention`...).
//!
//! The `allot` binary declares each setting once (its flag, environment variable,
//! file key, default and parser, in its `config::Layer`) and builds this struct
//! directly from the merged sources, one field a setting, so that a new server setting
//! is written in three places: its `Layer` field, its field here, and its field in
//! the binary's `config::validate::server_settings`.
//! The defaults here are the ones `allot serve` declares (its tests check that they
//! agree), so that a test's server behaves as a default start does.

use std::path::PathBuf;
use std::time::Duration;

use crate::{Cors, PolicyMode};

/// How long a claim lasts when its request does not say (`expires_in` left out), in
/// seconds: long enough for a workload to start, short enough that a crashed
/// scheduler's promises come back soon.
pub const DEFAULT_CLAIM_EXPIRES_IN: i64 = 600;

/// How long an ended claim is kept before the sweeper forgets it, in seconds, so that
/// a late second release or confirm is answered as the first was.
pub const DEFAULT_CLAIM_RETENTION: i64 = 86_400;

/// How often the claim sweeper runs by default. Expiry itself is exact whatever this
/// is: the sweeper only records it and purges ended claims.
pub const DEFAULT_CLAIM_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// The default [`Settings::max_staleness`]: twice the documented freshness bound of
/// one second, so that a loaded machine's scheduling hiccup does not refuse reads.
pub const DEFAULT_MAX_STALENESS: Duration = Duration::from_secs(2);

/// The default bound past which a request is logged as slow.
pub const DEFAULT_SLOW_REQUEST: Duration = Duration::from_secs(1);

/// What the operator set that shapes the API's behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// CORS, if enabled.
    pub cors: Option<Cors>,
    /// The origin people's browsers reach the service at (`https://host[:port]`,
    /// as `Origin` spells it): the UI takes forms only from it; `None`: from the
    /// address the connection came in on (`ui::session::same_origin`).
    pub public_url: Option<String>,
    /// Which authorization rules apply.
    pub policy: PolicyMode,
    /// `GET /allocation_candidates` answers a random sample instead of its
    /// deterministic order (Placement's `randomize_allocation_candidates`).
    pub randomize_allocation_candidates: bool,
    /// The most candidates one `GET /allocation_candidates` generates (its `limit`
    /// applies within this).
    pub max_allocation_candidates: usize,
    /// The expiry of a claim whose request leaves `expires_in` out, in seconds from
    /// its creation.
    pub claim_expires_in: i64,
    /// How long ended claims are kept before [`crate::sweep_claims`] forgets them, in
    /// seconds.
    pub claim_retention: i64,
    /// How often [`crate::spawn_sweeper`] sweeps.
    pub claim_sweep_interval: Duration,
    /// The oldest view reads are answered from. A node on a database other nodes
    /// write to follows their commits within milliseconds; one that cannot reach the
    /// database for longer than this answers reads with 503 rather than serve what
    /// may be out of date (`Host::staleness`). Not one of `allot serve`'s settings:
    /// the bound is the server's own.
    pub max_staleness: Duration,
    /// The drain file: while it exists, `/healthcheck` answers 503 (oslo's
    /// `disable_by_file_path`).
    pub healthcheck_disable_file: Option<PathBuf>,
    /// Requests slower than this are logged at WARN with `slow=true` (None: never).
    pub slow_request: Option<Duration>,
    /// The most providers for which `/metrics` writes openstack-exporter's series
    /// per provider and class; in a larger cloud they are left out and the sums by
    /// class remain (0: never written). See
    /// [`crate::metrics::DEFAULT_PROVIDER_SERIES`].
    pub metrics_providers: usize,
    /// How often, at most, the named shapes are counted again for `/metrics`
    /// ([`crate::metrics::DEFAULT_SHAPE_COUNTS_INTERVAL`]).
    pub shape_counts_interval: std::time::Duration,
    /// How long each part of an exchange may take, and how many connections may be
    /// open ([`crate::limits`]).
    pub connections: crate::limits::ConnectionLimits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cors: None,
            public_url: None,
            policy: PolicyMode::default(),
            randomize_allocation_candidates: false,
            max_allocation_candidates: allot_core::candidates::DEFAULT_MAX_CANDIDATES,
            claim_expires_in: DEFAULT_CLAIM_EXPIRES_IN,
            claim_retention: DEFAULT_CLAIM_RETENTION,
            claim_sweep_interval: DEFAULT_CLAIM_SWEEP_INTERVAL,
            max_staleness: DEFAULT_MAX_STALENESS,
            healthcheck_disable_file: None,
            slow_request: Some(DEFAULT_SLOW_REQUEST),
            metrics_providers: crate::metrics::DEFAULT_PROVIDER_SERIES,
            shape_counts_interval: crate::metrics::DEFAULT_SHAPE_COUNTS_INTERVAL,
            connections: crate::limits::ConnectionLimits::default(),
        }
    }
}

impl Settings {
    /// How a search runs here: bounded by `max_allocation_candidates`, in the
    /// search's order (`GET /allocation_candidates` adds its random seed when the
    /// server samples).
    pub fn search_options(&self) -> allot_core::candidates::SearchOptions {
        allot_core::candidates::SearchOptions {
            max_candidates: self.max_allocation_candidates,
            ..Default::default()
        }
    }
}
