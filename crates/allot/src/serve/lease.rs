//! The writer's lease: on a database several nodes share, one of them writes for
//! all, and the lease says which. A thread of its own ticks it and tells the server
//! who writes for the cluster, so that the other nodes forward their writes there.

/// How often a node tries to take the writer's lease (or looks up who holds it):
/// after a writer dies, another takes over within about this long once the database
/// has seen its session end (see docs/operations.md, "Several nodes").
const LEASE_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Joins the cluster's lease when the database has one, now that this node can be
/// reached at `addr` (the address it advertises, if any, is made from it).
pub(super) fn take_part(
    settings: &crate::config::Settings,
    addr: std::net::SocketAddr,
    state: &allot_server::AppState,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let advertise = settings.advertise_url(addr);
    let Some(lease) =
        allot_store::Store::lease(&settings.database, advertise.clone(), state.host.fence())
            .context("the writer's lease")?
    else {
        return Ok(());
    };
    match (&advertise, lease.fenced()) {
        (Some(url), _) => tracing::info!(%url, "other nodes may forward their writes here"),
        (None, false) => tracing::info!(
            "no --advertise-url: this node forwards its writes to the cluster's \
             writer but never becomes it"
        ),
        (None, true) => tracing::info!(
            "no --advertise-url: this node may become the cluster's writer, but the \
             others cannot forward to it then (their writes are answered 503)"
        ),
    }
    spawn_lease(lease, state.config.forwarding.clone(), stopping)
        .context("starting the lease's thread")
}

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
                    // Out of touch: on PostgreSQL each node writes for itself until it
                    // is back; on MariaDB this one writes nothing (its fence is down).
                    tracing::warn!("the writer's lease: {e}");
                    forwarding.set_role(allot_store::WriterRole::Unknown);
                }
            }
            std::thread::sleep(LEASE_TICK);
        })?;
    Ok(())
}
