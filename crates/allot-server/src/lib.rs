//! The OpenStack Placement HTTP API (microversions 1.0 to 1.39) over an
//! [`allot_store::Host`].
//!
//! This is the only crate that knows HTTP and JSON. Requests flow:
//! `context::around` (request id, microversion, identity through [`auth`], CORS; renders errors on the
//! way out) → a handler in [`handlers`] (checks policy, has its body and query read
//! into typed values by [`request`], calls the host) → a JSON response, one of the
//! types of [`wire`].
//!
//! [`router`] builds the whole application for tests (no sockets needed); [`serve`]
//! runs it on a listener until a shutdown future resolves.

pub mod auth;
pub mod context;
pub mod cors;
pub mod error;
pub mod forward;
pub mod graceful;
pub mod handlers;
pub mod health;
pub mod http;
pub mod metrics;
pub mod microversion;
pub mod params;
pub mod policy;
pub mod policy_file;
pub mod request;
pub mod request_log;
pub mod schema;
pub mod schemas;
pub mod status;
pub mod ui;
pub mod wire;

use std::future::Future;
use std::sync::Arc;

use allot_core::ops::Plan;
use allot_core::{State as View, Timestamp};
use allot_store::Host;
use axum::extract::DefaultBodyLimit;
use axum::Router;

pub use cors::Cors;
pub use error::{ApiError, ApiResult};
pub use handlers::claims::{spawn_sweeper, sweep_claims};
pub use policy::PolicyMode;

/// The largest request body we read. Placement's largest bodies (`POST /allocations`
/// for many consumers, the reshaper) stay far below this.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long a claim lasts when its request does not say (`expires_in` left out), in
/// seconds: long enough for a workload to start, short enough that a crashed
/// scheduler's promises come back soon.
pub const DEFAULT_CLAIM_EXPIRES_IN: i64 = 600;

/// How long an ended claim is kept before the sweeper forgets it, in seconds, so that
/// a late second release or confirm is answered as the first was.
pub const DEFAULT_CLAIM_RETENTION: i64 = 86_400;

/// Server settings that shape the API's behaviour.
#[derive(Debug, Clone)]
pub struct Config {
    /// CORS, if enabled.
    pub cors: Option<Cors>,
    /// Who the caller is (`noauth2`, static tokens or Keystone), chosen at start-up.
    pub auth: Arc<dyn auth::Authenticator>,
    /// Which authorization rules apply.
    pub policy: PolicyMode,
    /// The operator's policy file, whose rules replace the built-in ones they name.
    pub policy_file: Option<Arc<policy_file::PolicyFile>>,
    /// `GET /allocation_candidates` answers a random sample instead of its
    /// deterministic order (Placement's `randomize_allocation_candidates`).
    pub randomize_allocation_candidates: bool,
    /// The most candidates one `GET /allocation_candidates` generates (its `limit`
    /// applies within this); None for
    /// [`allot_core::candidates::DEFAULT_MAX_CANDIDATES`].
    pub max_allocation_candidates: Option<usize>,
    /// The expiry of a claim whose request leaves `expires_in` out, in seconds from
    /// its creation (None: such claims never expire).
    pub claim_expires_in: Option<i64>,
    /// How long ended claims are kept before [`sweep_claims`] forgets them, in seconds.
    pub claim_retention: i64,
    /// The oldest view reads are answered from. A node on a database other nodes
    /// write to follows their commits within milliseconds; one that cannot reach the
    /// database for longer than this answers reads with 503 rather than serve what
    /// may be out of date (`Host::staleness`).
    pub max_staleness: std::time::Duration,
    /// The drain file: while it exists, `/healthcheck` answers 503 (oslo's
    /// `disable_by_file_path`).
    pub healthcheck_disable_file: Option<std::path::PathBuf>,
    /// Requests slower than this are logged at WARN with `slow=true` (None: never).
    pub slow_request: Option<std::time::Duration>,
    /// The health check's last probe of the store: state rather than a setting, one
    /// per application like the settings.
    pub health: health::ProbeCache,
    /// The most providers for which `/metrics` writes openstack-exporter's series
    /// per provider and class; in a larger cloud they are left out and the sums by
    /// class remain (0: never written). See [`metrics::DEFAULT_PROVIDER_SERIES`].
    pub metrics_providers: usize,
    /// The series counted as requests go by (`/metrics`): state too, one per
    /// application.
    pub metrics: metrics::Metrics,
    /// The web UI's sessions (`/ui`): state too, one per application.
    pub ui: ui::Sessions,
    /// Who writes for a cluster of nodes on one database, and the client that
    /// forwards writes to it ([`forward`]): state too, one per application.
    pub forwarding: forward::Forwarding,
}

/// The default [`Config::max_staleness`]: twice the documented freshness bound of
/// one second, so that a loaded machine's scheduling hiccup does not refuse reads.
pub const DEFAULT_MAX_STALENESS: std::time::Duration = std::time::Duration::from_secs(2);

impl Default for Config {
    fn default() -> Self {
        Config {
            cors: None,
            auth: Arc::new(auth::NoAuth2),
            policy: PolicyMode::default(),
            policy_file: None,
            randomize_allocation_candidates: false,
            max_allocation_candidates: None,
            claim_expires_in: Some(DEFAULT_CLAIM_EXPIRES_IN),
            claim_retention: DEFAULT_CLAIM_RETENTION,
            max_staleness: DEFAULT_MAX_STALENESS,
            healthcheck_disable_file: None,
            slow_request: None,
            health: health::ProbeCache::default(),
            metrics_providers: metrics::DEFAULT_PROVIDER_SERIES,
            metrics: metrics::Metrics::default(),
            ui: ui::Sessions::default(),
            forwarding: forward::Forwarding::default(),
        }
    }
}

impl Config {
    /// How a search runs here: bounded by `max_allocation_candidates`, in the
    /// search's order (`GET /allocation_candidates` adds its random seed when the
    /// server samples).
    pub fn search_options(&self) -> allot_core::candidates::SearchOptions {
        allot_core::candidates::SearchOptions {
            max_candidates: self
                .max_allocation_candidates
                .unwrap_or(allot_core::candidates::DEFAULT_MAX_CANDIDATES),
            ..Default::default()
        }
    }
}

/// What handlers share: the host and the settings.
#[derive(Clone)]
pub struct AppState {
    /// The store and in-memory view.
    pub host: Host,
    /// Settings.
    pub config: Arc<Config>,
}

impl AppState {
    /// Runs a write (the host's writer plans, persists and applies it, in a batch with
    /// the writes that arrive beside it) and maps its errors. Awaits the answer
    /// without holding a thread, so that any number of writes can wait on one commit.
    pub async fn write<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&View, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Result<T, ApiError> {
        Ok(self.host.submit(plan).wait().await?)
    }
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let routes = handlers::routes()
        .route_layer(axum::middleware::from_fn(request_log::note_route))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state.clone());
    // The routes sit inside an outer router so that the middleware sees their responses
    // complete: axum adds the `Allow` header of a 405 outside any layer of the router
    // that answered it.
    Router::new()
        .fallback_service(routes)
        // Inside the context: a write is authenticated here before it is forwarded,
        // and the writer's answer comes back as the writer made it
        // (`forward::Answered`).
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::forward,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            context::around,
        ))
        .merge(health::routes(state.clone()))
        // The web UI: beside the API, outside its context middleware (see `ui`).
        .merge(ui::routes(state.clone()))
        .layer(axum::middleware::from_fn_with_state(
            state,
            request_log::log,
        ))
}

/// Serves the application on `listener` (HTTPS with `tls`) until `shutdown`
/// resolves, then finishes the requests under way (see [`graceful`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: graceful::Tls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    graceful::serve(listener, router(state), tls, shutdown).await
}
