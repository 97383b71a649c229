//! The signals `allot serve` answers: SIGTERM and SIGINT stop it gracefully (a
//! second one at once), and systemd hears where it stands.

/// Tells systemd (`Type=notify`) where allot stands; nothing when not started by it
/// (no `NOTIFY_SOCKET`).
pub(super) fn notify_systemd(state: sd_notify::NotifyState<'_>) {
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
pub(super) async fn on_signals(
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
