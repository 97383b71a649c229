//! `allot serve`: the start, in the order it happens. The settings are resolved and
//! the log set up; then everything that can refuse a start (the authenticator, the
//! certificate, the policy file, the database, and whether a database beside
//! Placement's may be served: [`beside`]) is opened before any socket listens
//! ([`open`]); then the sockets, the writer's lease ([`lease`]), the sweeper and the
//! signal handlers ([`signals`], [`reload`]) start, and the API is served until a
//! signal drains it.

mod beside;
mod lease;
mod open;
mod reload;
mod signals;

use std::sync::Arc;

use anyhow::Context;

use crate::allocator;
use crate::config::{self, ServeArgs};
use open::Authentication;

/// Runs the Placement API server until it is told to stop, then flushes the writer.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    allocator::configure();
    let settings = args.resolve()?;
    open::init_log(&settings);
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(conf) = &settings.placement_conf {
        open::warn_unused_keys(conf);
    }
    raise_open_file_limit();
    // The authenticator, the certificate and the policy file are read before the
    // database opens, so that a bad file stops the start at once.
    let auth = Authentication::start(&settings.auth)?;
    let tls = open::server_tls(settings.tls.as_ref())?;
    let policy_file = open::policy_file(settings.policy_file.as_deref())?;
    let (host, cluster_key) = open::host(&settings)?;
    let state = allot_server::AppState {
        host,
        config: Arc::new(
            allot_server::Config::new(
                settings.server.clone(),
                auth.authenticator.clone(),
                policy_file.clone(),
            )
            .with_cluster_key(&cluster_key),
        ),
    };
    // Kept to the end, so that the writer is flushed after the runtime stopped.
    let host = state.host.clone();
    let runtime = runtime()?;
    runtime.block_on(listen_and_serve(settings, state, auth, policy_file, tls))?;
    // Connections still open past the grace period are dropped with their tasks. A
    // search still on a blocking thread gets a moment; it only reads.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // The last handle: its drop queues the writer's stop behind every write already
    // accepted, waits for them to be committed, and closes the store.
    drop(host);
    tracing::info!("allot stopped");
    Ok(())
}

/// Raises the open-file limit to the most the process may have (the soft limit to
/// the hard one, as Go's runtime and nginx's `worker_rlimit_nofile` do): the soft
/// limit's usual 1,024 would cap the connections far below what the machine allows.
/// The cap on connections is then set below the limit ([`allot_server::limits`]).
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "the open-file limit"),
        Err(e) => tracing::warn!("raising the open-file limit: {e}"),
    }
}

/// The runtime, its blocking pool capped at twice the cores (tokio's default is
/// 512): large candidate answers are searched and written on it, and every thread
/// that builds one holds its transient memory at once. More threads than cores would
/// not answer faster (the search is CPU work), and the extra core's worth leaves room
/// for writes waiting on SQLite. What freed memory does afterwards is the
/// allocator's business (`allocator`): jemalloc hands it back within a second. See
/// docs/design/transient-memory.md.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(2 * cores)
        .enable_all()
        .build()
}

/// Everything after the files and the database are open: the reloader, Keystone's
/// certificate, the sockets, the lease, the sweeper and the signals; then serves
/// until drained and the grace period is over.
async fn listen_and_serve(
    settings: config::Settings,
    state: allot_server::AppState,
    auth: Authentication,
    policy_file: Option<Arc<allot_server::policy_file::PolicyFile>>,
    tls: Option<Arc<allot_tls::ServerTls>>,
) -> anyhow::Result<()> {
    // Before "listening" is printed: a SIGHUP sent once we listen must find the
    // handler in place (unhandled, it would end the process).
    if auth.tokens.is_some() || policy_file.is_some() || tls.is_some() {
        reload::spawn_reloader(auth.tokens.clone(), policy_file, tls.clone());
    }
    auth.check_keystone_tls().await?;
    let listener = allot_server::limits::listen(settings.bind)
        .with_context(|| format!("binding {}", settings.bind))?;
    let metrics_listener = match settings.metrics_bind {
        Some(bind) => Some(
            allot_server::limits::listen(bind)
                .with_context(|| format!("binding {bind} (metrics_bind)"))?,
        ),
        None => None,
    };
    let addr = listener.local_addr()?;
    // Told to stop, a node first lets the writer's role go (`stopping`, which the
    // lease's thread watches), then drains (`draining`, which the listeners and
    // the grace period watch); see `on_signals`.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let (drain, draining) = tokio::sync::watch::channel(false);
    lease::take_part(&settings, addr, &state, stopping)?;
    announce(
        &settings,
        &state,
        addr,
        metrics_listener.as_ref(),
        tls.is_some(),
    )?;
    // Expired claims stop counting at their expiry by the clock; the sweeper
    // records that and purges ended claims later, so that the store stays small.
    let _sweeper = allot_server::spawn_sweeper(state.clone());
    signals::notify_systemd(sd_notify::NotifyState::Ready);
    tokio::spawn(signals::on_signals(
        stop,
        drain,
        state.config.forwarding.clone(),
        settings.shutdown_grace,
    ));
    if let Some(listener) = metrics_listener {
        serve_metrics(listener, state.clone(), tls.clone(), draining.clone());
    }
    let server = allot_server::serve(listener, state, tls, drained(draining.clone()));
    let grace = settings.shutdown_grace;
    tokio::select! {
        served = server => served?,
        () = async { drained(draining).await; tokio::time::sleep(grace).await } => {
            tracing::warn!(?grace, "requests still under way at the end of the grace period; stopping anyway");
        }
    }
    Ok(())
}

/// The real addresses (the port may have been 0) on stderr, for scripts and tests
/// that start us on an ephemeral port; only once both sockets listen, so that whoever
/// waits for the line can scrape as well as call the API.
fn announce(
    settings: &config::Settings,
    state: &allot_server::AppState,
    addr: std::net::SocketAddr,
    metrics_listener: Option<&tokio::net::TcpListener>,
    https: bool,
) -> std::io::Result<()> {
    let scheme = if https { "https" } else { "http" };
    eprintln!("allot: listening on {scheme}://{addr}");
    if let Some(metrics) = metrics_listener {
        let addr = metrics.local_addr()?;
        eprintln!(
            "allot: metrics on {scheme}://{addr}{}",
            allot_server::metrics::PATH
        );
    }
    let database = allot_store::redacted(&settings.database);
    let auth = state.config.auth.mode();
    tracing::info!(%addr, %database, auth, "allot serving");
    Ok(())
}

/// The most connections open at once on the listener of `--metrics-bind`.
const METRICS_CONNECTIONS: usize = 64;

/// Serves `/metrics` on its own listener until drained. No token there: whoever
/// reaches the address may scrape (see --help).
fn serve_metrics(
    listener: tokio::net::TcpListener,
    state: allot_server::AppState,
    tls: Option<Arc<allot_tls::ServerTls>>,
    draining: tokio::sync::watch::Receiver<bool>,
) {
    // Its own connections, under the API's time limits, and a few of them: a scraper
    // keeps one, and a flood here must not take the API's descriptors.
    let connections =
        allot_server::limits::Connections::new(allot_server::limits::ConnectionLimits {
            max_connections: METRICS_CONNECTIONS,
            ..state.config.settings.connections
        });
    let app = allot_server::metrics::router(state);
    tokio::spawn(async move {
        let stop = drained(draining);
        if let Err(e) = allot_server::graceful::serve(listener, app, tls, connections, stop).await {
            tracing::error!("serving the metrics: {e}");
        }
    });
}

/// Resolves once the node drains.
async fn drained(mut draining: tokio::sync::watch::Receiver<bool>) {
    // The sender lives as long as the process (`on_signals` never returns).
    let _ = draining.wait_for(|s| *s).await;
}
