//! The `allot` binary: `allot serve` runs the Placement API on the embedded store;
//! `allot bench` times an endpoint; `allot classes` lists a running allot's resource
//! classes with their metadata; `allot claims` and `allot pending` show and manage its
//! pending claims; `allot export` and `allot import` move a deployment between
//! databases; `allot db migrate` (alias `sync`) brings a database's schema up to date;
//! `allot policy list` shows the authorization rules in force; `allot verify` compares
//! a Placement with the allot that is to replace it; `allot status` shows running
//! nodes at a glance.
//!
//! Settings come from flags, then environment variables (`ALLOT_*`), then an optional
//! TOML file (`--config`), then Placement's `placement.conf` (`--placement-conf`), then
//! defaults, in that order of precedence (see `config`).

mod allocator;
mod bench;
mod claims;
mod classes;
mod config;
mod dump;
mod policy;
mod status;
mod token;
mod verify;

use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use config::ServeArgs;

/// allot: a resource placement service that speaks the OpenStack Placement API.
#[derive(Parser, Debug)]
#[command(name = "allot", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the Placement API server (on 127.0.0.1:8778 with an embedded SQLite
    /// database by default).
    Serve(ServeArgs),
    /// Seed and time the reference workloads against a Placement endpoint (allot or
    /// OpenStack Placement).
    Bench(bench::BenchArgs),
    /// List a running allot's resource classes with their metadata (`-f json` for
    /// scripts), or set a custom class's metadata (`allot classes set`).
    Classes(classes::ClassesArgs),
    /// List, show, create, confirm or release a running allot's pending claims
    /// (`-f json` for scripts).
    Claims(claims::ClaimsArgs),
    /// What live pending claims hold on a provider (a uuid or a name), or for a
    /// consumer or project.
    Pending(claims::PendingArgs),
    /// Write a whole deployment from a database to a portable JSON dump (no server
    /// needed; stop the one using the database first).
    Export(dump::ExportArgs),
    /// Load a dump written by `allot export` into an empty database, checked first
    /// and written in one transaction.
    Import(dump::ImportArgs),
    /// Database maintenance: `allot db migrate` (or `allot db sync`, the name
    /// `placement-manage db sync` has) brings a database's schema up to date (as
    /// `allot serve` does on start) and exits; `allot db vacuum` rewrites an SQLite
    /// database compactly in allot's page size.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Add, list or revoke the static tokens of `allot serve --auth tokens` (the file
    /// stores only their hashes; a running server rereads it on SIGHUP).
    Token(token::TokenArgs),
    /// Ask a running OpenStack Placement and an allot serving its imported data the
    /// same GETs at several microversions, and show every difference (exit status 1
    /// on one docs/api.md does not document).
    Verify(verify::VerifyArgs),
    /// One screen on one or several running allot nodes: version, store and schema,
    /// health, the view's lag, counts, requests and claims since the start.
    Status(status::StatusArgs),
    /// How many more instances of a shape fit now, in all and per root, aggregate or
    /// trait group (GET /headroom).
    Headroom(claims::HeadroomArgs),
    /// Why a candidate query finds what it finds: per group, how many providers each
    /// stage leaves, the nearest misses, and the stage that emptied the answer.
    Explain(claims::ExplainArgs),
    /// Show the authorization rules: `allot policy list` prints every rule with the
    /// check in force (a policy file's, or the mode's built-in default).
    Policy(policy::PolicyArgs),
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Create or migrate the schema of a database (sqlite:PATH or postgres://...);
    /// run again, it changes nothing.
    #[command(visible_alias = "sync")]
    Migrate(config::DatabaseArgs),
    /// Rewrite an SQLite database compactly, in the 1 KiB pages allot now creates
    /// databases with (one made by an older allot has 4 KiB pages, and a slower
    /// tail under claim storms at a million providers). Stop the server first: it
    /// is refused while one runs. Needs free space for a second copy of the file.
    Vacuum(config::DatabaseArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => bench::run(args),
        Command::Classes(args) => classes::run(args),
        Command::Claims(args) => claims::run(args),
        Command::Pending(args) => claims::run_pending(args),
        Command::Export(args) => dump::run_export(args),
        Command::Import(args) => dump::run_import(args),
        // Opening a store migrates it: that is all there is to do.
        Command::Db {
            command: DbCommand::Migrate(args),
        } => {
            let database = args.resolve(&config::process_env)?;
            allot_store::Store::open(&database)
                .map(|_| println!("the database schema is up to date"))
                .with_context(|| format!("migrating database {}", allot_store::redacted(&database)))
        }
        Command::Db {
            command: DbCommand::Vacuum(args),
        } => {
            let database = args.resolve(&config::process_env)?;
            let Some(path) = allot_store::sqlite_file(&database)? else {
                anyhow::bail!(
                    "allot db vacuum rewrites SQLite databases (sqlite:PATH); {} is not one \
                     (PostgreSQL has its own VACUUM)",
                    allot_store::redacted(&database)
                );
            };
            let done =
                allot_store::vacuum_sqlite(path).with_context(|| format!("vacuuming {path}"))?;
            println!(
                "rewrote {path}: pages of {} bytes, now {}; {} bytes, now {}",
                done.page_before, done.page_after, done.bytes_before, done.bytes_after
            );
            Ok(())
        }
        Command::Token(args) => token::run(args),
        Command::Policy(args) => policy::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Status(args) => status::run(args),
        Command::Headroom(args) => claims::run_headroom(args),
        Command::Explain(args) => claims::run_explain(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    allocator::configure();
    let settings = args.resolve()?;
    init_log(&settings);
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(conf) = &settings.placement_conf {
        warn_unused_keys(conf);
    }

    // The authenticator is chosen before the database opens, so that a bad token
    // file stops the start at once.
    let mut token_table = None;
    let mut keystone = None;
    let auth: Arc<dyn allot_server::auth::Authenticator> = match &settings.auth {
        config::Auth::NoAuth2 => Arc::new(allot_server::auth::NoAuth2),
        config::Auth::Tokens(path) => {
            let tokens = Arc::new(
                allot_server::auth::tokens::StaticTokens::open(path)
                    .map_err(|e| anyhow::anyhow!("--auth tokens: {e}"))?,
            );
            token_table = Some(tokens.clone());
            tokens
        }
        config::Auth::Keystone(k) => {
            let k = Arc::new(
                allot_server::auth::keystone::Keystone::new((**k).clone())
                    .map_err(|e| anyhow::anyhow!("--auth keystone: {e}"))?,
            );
            keystone = Some(k.clone());
            k
        }
    };
    // The certificate too, before the database opens.
    let tls = match &settings.tls {
        Some(files) => Some(
            allot_tls::ServerTls::open(&files.cert, &files.key)
                .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key: {e}"))?,
        ),
        None => None,
    };
    // The policy file too: a rule that does not parse stops the start, naming the
    // rule and the column.
    let policy_file = match &settings.policy_file {
        Some(path) => {
            let file = allot_server::policy_file::PolicyFile::open(path)
                .map_err(|e| anyhow::anyhow!("--policy-file: {e}"))?;
            warn_unknown_rules(&file);
            Some(Arc::new(file))
        }
        None => None,
    };
    let mut store = allot_store::Store::open(&settings.database).with_context(|| {
        let url = allot_store::redacted(&settings.database);
        format!("opening database {url}")
    })?;
    store.save_view_every(settings.save_view_every);
    let clock: allot_store::Clock = Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    });
    let host = allot_store::Host::new(store, clock).context("loading the database")?;
    // On a database other nodes write to, their commits wake this node's writer.
    if let Some(listener) = allot_store::Store::listener(&settings.database)
        .context("listening for other nodes' commits")?
    {
        host.follow_with(listener)
            .context("starting the listener's thread")?;
    }
    let state = allot_server::AppState {
        host,
        config: Arc::new(allot_server::Config {
            cors: settings.cors.clone(),
            auth: auth.clone(),
            policy: settings.policy,
            policy_file: policy_file.clone(),
            randomize_allocation_candidates: settings.randomize_allocation_candidates,
            max_allocation_candidates: Some(settings.max_allocation_candidates),
            claim_expires_in: Some(settings.claim_expires_in),
            claim_retention: settings.claim_retention,
            max_staleness: allot_server::DEFAULT_MAX_STALENESS,
            healthcheck_disable_file: settings.healthcheck_disable_file.clone(),
            slow_request: settings.slow_request,
            metrics_providers: settings.metrics_providers,
            ..Default::default()
        }),
    };
    // Kept to the end, so that the writer is flushed after the runtime stopped.
    let host = state.host.clone();

    // The blocking pool is capped at twice the cores (tokio's default is 512): large
    // candidate answers are searched and written on it, and every thread that builds
    // one holds its transient memory at once. More threads than cores would not
    // answer faster (the search is CPU work), and the extra core's worth leaves room
    // for writes waiting on SQLite. What freed memory does afterwards is the
    // allocator's business (`allocator`): jemalloc hands it back within a second.
    // See ARCHITECTURE.md, "Memory".
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(2 * cores)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        // Before "listening" is printed: a SIGHUP sent once we listen must find the
        // handler in place (unhandled, it would end the process).
        if token_table.is_some() || policy_file.is_some() || tls.is_some() {
            spawn_reloader(token_table, policy_file, tls.clone());
        }
        // A Keystone certificate that does not verify stops the start here, rather
        // than answering every request 503 (Keystone merely down does not).
        if let Some(keystone) = &keystone {
            match keystone.check_tls().await {
                Ok(None) => {}
                Ok(Some(why)) => tracing::warn!("{why}"),
                Err(e) => anyhow::bail!("--auth keystone: {e}"),
            }
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = tokio::net::TcpListener::bind(settings.bind)
            .await
            .with_context(|| format!("binding {}", settings.bind))?;
        let metrics_listener = match settings.metrics_bind {
            Some(bind) => Some(
                tokio::net::TcpListener::bind(bind)
                    .await
                    .with_context(|| format!("binding {bind} (metrics_bind)"))?,
            ),
            None => None,
        };
        // The real addresses (the port may have been 0) go on stderr for scripts and
        // tests that start us on an ephemeral port; only once both sockets listen, so
        // that whoever waits for the line can scrape as well as call the API.
        let addr = listener.local_addr()?;
        // Told to stop, a node first lets the writer's role go (`stopping`, which the
        // lease's thread watches), then drains (`draining`, which the listeners and
        // the grace period watch); see `on_signals`.
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let (drain, draining) = tokio::sync::watch::channel(false);
        // On a database several nodes share, one of them writes for all; the lease
        // says which, now that this node can be reached at its address.
        let advertise = settings.advertise_url(addr);
        if let Some(lease) = allot_store::Store::lease(&settings.database, advertise.clone())
            .context("the writer's lease")?
        {
            match &advertise {
                Some(url) => tracing::info!(%url, "other nodes may forward their writes here"),
                None => tracing::info!(
                    "no --advertise-url: this node forwards its writes to the cluster's \
                     writer but never becomes it"
                ),
            }
            spawn_lease(lease, state.config.forwarding.clone(), stopping.clone())
                .context("starting the lease's thread")?;
        }
        eprintln!("allot: listening on {scheme}://{addr}");
        if let Some(metrics) = &metrics_listener {
            let addr = metrics.local_addr()?;
            eprintln!("allot: metrics on {scheme}://{addr}{}", allot_server::metrics::PATH);
        }
        let database = allot_store::redacted(&settings.database);
        tracing::info!(%addr, %database, auth = auth.mode(), "allot serving");
        // Expired claims stop counting at their expiry by the clock; the sweeper
        // records that and purges ended claims later, so that the store stays small.
        let _sweeper = allot_server::spawn_sweeper(state.clone(), settings.claim_sweep_interval);
        notify_systemd(sd_notify::NotifyState::Ready);
        tokio::spawn(on_signals(
            stop,
            drain,
            state.config.forwarding.clone(),
            settings.shutdown_grace,
        ));
        let signalled = |mut draining: tokio::sync::watch::Receiver<bool>| async move {
            // The sender lives as long as the process (`on_signals` never returns).
            let _ = draining.wait_for(|s| *s).await;
        };
        if let Some(listener) = metrics_listener {
            // No token there: whoever reaches the address may scrape (see --help).
            let app = allot_server::metrics::router(state.clone());
            let stopped = signalled(draining.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                if let Err(e) = allot_server::graceful::serve(listener, app, tls, stopped).await {
                    tracing::error!("serving the metrics: {e}");
                }
            });
        }
        let server = allot_server::serve(listener, state, tls, signalled(draining.clone()));
        let grace = settings.shutdown_grace;
        tokio::select! {
            served = server => served?,
            () = async { signalled(draining).await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "requests still under way at the end of the grace period; stopping anyway");
            }
        }
        anyhow::Ok(())
    })?;
    // Connections still open past the grace period are dropped with their tasks. A
    // search still on a blocking thread gets a moment; it only reads.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // The last handle: its drop queues the writer's stop behind every write already
    // accepted, waits for them to be committed, and closes the store.
    drop(host);
    tracing::info!("allot stopped");
    Ok(())
}

/// The log on stderr, as `--log-format` says, with terminal colours only when stderr
/// is a terminal (a journal or a file would get the escape sequences raw).
fn init_log(settings: &config::Settings) {
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        // The filter was checked in `resolve`, and ALLOT_LOG already had its turn there
        // (below --log, like every variable).
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match settings.log_format {
        config::LogFormat::Text => builder.init(),
        config::LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

/// How often a node tries to take the writer's lease (or looks up who holds it):
/// after a writer dies, another takes over within about this long once the database
/// has seen its session end (see docs/operations.md, "Several nodes").
const LEASE_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Ticks the writer's lease on a thread of its own, and tells the server who writes
/// for the cluster, until the process is told to stop: then the lease's session
/// ends (within a tick), so that another node takes the role while this one finishes
/// the requests under way, which it then writes itself.
fn spawn_lease(
    mut lease: allot_store::Lease,
    forwarding: allot_server::forward::Forwarding,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("allot-lease".into())
        .spawn(move || loop {
            if *stopping.borrow() {
                drop(lease);
                forwarding.set_role(allot_store::WriterRole::Unknown);
                return;
            }
            match lease.tick() {
                Ok(role) => forwarding.set_role(role),
                Err(e) => {
                    // Out of touch: each node writes for itself until it is back.
                    tracing::warn!("the writer's lease: {e}");
                    forwarding.set_role(allot_store::WriterRole::Unknown);
                }
            }
            std::thread::sleep(LEASE_TICK);
        })?;
    Ok(())
}

/// Tells systemd (`Type=notify`) where allot stands; nothing when not started by it
/// (no `NOTIFY_SOCKET`).
fn notify_systemd(state: sd_notify::NotifyState<'_>) {
    if let Err(e) = sd_notify::notify(&[state]) {
        tracing::warn!("telling systemd we are ready or stopping: {e}");
    }
}

/// How long a stopping node that writes for the cluster goes on serving after it
/// lets the role go: the lease's thread lets go at its next tick, and the other nodes
/// look the next writer up at theirs.
const HANDOVER: std::time::Duration = std::time::Duration::from_millis(2500);

/// The first SIGTERM or SIGINT stops the server gracefully: the writer's lease goes
/// (`stop`), then the listeners drain (`drain`). A node that writes for the cluster
/// and has been forwarded writes serves on for [`HANDOVER`] in between, so that the
/// other nodes forward to the next writer before this one closes its idle
/// connections: a forward that crossed the close of one would be lost (a 503 to its
/// client). One that no node has forwarded to (alone on its database, say) drains at
/// once. A second signal ends the process at once, with the status a shell gives a
/// process the signal killed.
async fn on_signals(
    stop: tokio::sync::watch::Sender<bool>,
    drain: tokio::sync::watch::Sender<bool>,
    forwarding: allot_server::forward::Forwarding,
    grace: std::time::Duration,
) {
    let first = shutdown_signal().await;
    notify_systemd(sd_notify::NotifyState::Stopping);
    let hand_over = forwarding.role() == allot_store::WriterRole::This && forwarding.forwarded_to();
    stop.send_replace(true);
    let second = async {
        if hand_over {
            tracing::info!(
                signal = first.0,
                handover = ?HANDOVER,
                "stopping: handing the cluster's writer role over, serving meanwhile"
            );
            tokio::select! {
                second = shutdown_signal() => return second,
                () = tokio::time::sleep(HANDOVER) => {}
            }
        }
        tracing::info!(
            signal = first.0,
            ?grace,
            "stopping: no new connections; the requests under way finish"
        );
        drain.send_replace(true);
        shutdown_signal().await
    };
    let second = second.await;
    tracing::warn!(signal = second.0, "second signal: stopping at once");
    std::process::exit(128 + second.1);
}

/// Lists, once, the keys of Placement's placement.conf that allot does not use, so
/// that none is dropped without a word (docs/migrate.md says what each would need).
fn warn_unused_keys(conf: &config::PlacementConf) {
    if !conf.unused.is_empty() {
        tracing::warn!(
            path = %conf.path.display(),
            keys = %conf.unused.join(", "),
            "placement.conf: allot does not use these keys"
        );
    }
}

/// Warns of the rules a policy file names that nothing uses (oslo.policy does the
/// same): most likely a misspelt rule name, which would otherwise change nothing.
fn warn_unknown_rules(file: &allot_server::policy_file::PolicyFile) {
    let rules = file.current();
    for name in
        allot_server::policy_file::unknown_names(&rules, &allot_server::policy::is_builtin_rule)
    {
        tracing::warn!(
            rule = name,
            path = %file.path().display(),
            "the policy file names a rule allot does not have; it has no effect"
        );
    }
}

/// Rereads the token file, the policy file and the certificate on every SIGHUP; a
/// file that does not parse keeps its old contents, and the log says why.
fn spawn_reloader(
    tokens: Option<Arc<allot_server::auth::tokens::StaticTokens>>,
    policy_file: Option<Arc<allot_server::policy_file::PolicyFile>>,
    tls: Option<Arc<allot_tls::ServerTls>>,
) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!(
                "cannot listen for SIGHUP: the token file, the policy file and the certificate will not be reloaded"
            );
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                if let Some(tokens) = &tokens {
                    match tokens.reload() {
                        Ok(n) => {
                            tracing::info!(tokens = n, path = %tokens.path().display(), "token file reloaded")
                        }
                        Err(e) => {
                            tracing::error!("token file not reloaded, the old tokens stay: {e}")
                        }
                    }
                }
                if let Some(tls) = &tls {
                    match tls.reload() {
                        Ok(()) => {
                            tracing::info!(path = %tls.cert_path().display(), "certificate reloaded")
                        }
                        Err(e) => {
                            tracing::error!("certificate not reloaded, the old one stays: {e}")
                        }
                    }
                }
                if let Some(file) = &policy_file {
                    match file.reload() {
                        Ok(n) => {
                            tracing::info!(rules = n, path = %file.path().display(), "policy file reloaded");
                            warn_unknown_rules(file);
                        }
                        Err(e) => {
                            tracing::error!("policy file not reloaded, the old rules stay: {e}")
                        }
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    drop((tokens, policy_file, tls));
}

/// Resolves on SIGINT or SIGTERM, with the signal's name and number.
async fn shutdown_signal() -> (&'static str, i32) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => ("SIGINT", 2),
        _ = term => ("SIGTERM", 15),
    }
}
