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
pub mod cluster;
pub mod context;
pub mod cors;
pub mod error;
pub mod forward;
pub mod graceful;
pub mod handlers;
pub mod head_errors;
pub mod health;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod microversion;
pub mod openapi;
pub mod params;
pub mod policy;
pub mod policy_file;
pub mod request;
pub mod request_log;
pub mod schema;
pub mod schemas;
pub mod settings;
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
pub use settings::{
    Settings, DEFAULT_CLAIM_EXPIRES_IN, DEFAULT_CLAIM_RETENTION, DEFAULT_CLAIM_SWEEP_INTERVAL,
    DEFAULT_MAX_STALENESS, DEFAULT_SLOW_REQUEST,
};

/// The largest request body we read. Placement's largest bodies (`POST /allocations`
/// for many consumers, the reshaper) stay far below this.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The server's settings, with its state: what one application shares across
/// requests besides the host.
#[derive(Debug, Clone)]
pub struct Config {
    /// What the operator set, read where each setting is used.
    pub settings: Settings,
    /// Who the caller is (`noauth2`, static tokens or Keystone), chosen at start-up:
    /// state, since a token file is reread on SIGHUP.
    pub auth: Arc<dyn auth::Authenticator>,
    /// The operator's policy file, whose rules replace the built-in ones they name:
    /// state too, reread on SIGHUP.
    pub policy_file: Option<Arc<policy_file::PolicyFile>>,
    /// The health check's last probe of the store: state, one per application.
    pub health: health::ProbeCache,
    /// The series counted as requests go by (`/metrics`): state too, one per
    /// application.
    pub metrics: metrics::Metrics,
    /// The web UI's sessions (`/ui`), sealed with [`Config::trust`]'s key.
    pub ui: ui::Sessions,
    /// Who writes for a cluster of nodes on one database, and the client that
    /// forwards writes to it ([`forward`]): state too, one per application.
    pub forwarding: forward::Forwarding,
    /// The API listener's connections, under `settings.connections` ([`limits`]):
    /// state too, one per application.
    pub connections: limits::Connections,
    /// The keys the cluster's nodes share ([`cluster`]): a random one until
    /// [`Config::with_cluster_key`] sets the database's.
    pub trust: Arc<cluster::Trust>,
}

impl Default for Config {
    fn default() -> Self {
        Config::new(Settings::default(), Arc::new(auth::NoAuth2), None)
    }
}

impl Config {
    /// An application's settings and authenticator, with the policy file if any, and
    /// fresh state.
    pub fn new(
        settings: Settings,
        auth: Arc<dyn auth::Authenticator>,
        policy_file: Option<Arc<policy_file::PolicyFile>>,
    ) -> Self {
        let trust = Arc::new(cluster::Trust::random());
        Config {
            connections: limits::Connections::new(settings.connections),
            settings,
            auth,
            policy_file,
            health: health::ProbeCache::default(),
            metrics: metrics::Metrics::default(),
            ui: ui::Sessions::new(trust.clone()),
            forwarding: forward::Forwarding::default(),
            trust,
        }
    }

    /// This configuration with the keys of the cluster whose database holds `key`
    /// (`allot_store::Store::cluster_key`).
    pub fn with_cluster_key(mut self, key: &allot_store::ClusterKey) -> Self {
        self.trust = Arc::new(cluster::Trust::new(key));
        self.ui = ui::Sessions::new(self.trust.clone());
        self
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
        kind: allot_store::WriteKind,
        plan: impl FnOnce(&View, Timestamp) -> Plan<T> + Send + 'static,
    ) -> Result<T, ApiError> {
        Ok(self.host.submit_as(kind, plan).wait().await?)
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
    let connections = state.config.connections.clone();
    graceful::serve(listener, router(state), tls, connections, shutdown).await
}
