//! `GET /status` (allot's own, issue 23): one node at a glance, for `allot status`:
//! the build, the store (engine, schema, whether other nodes write to it), the health
//! check's verdict, the view's lag, what the view holds, and since the start the
//! requests (count, rate, p99) and the claims accepted and refused. The body is
//! `allot_client::Status`, which the command reads back. Guarded like `/metrics`
//! (`allot:metrics`): it says no more than the metrics do.

use allot_client::status::{Claims, Counts, Health, Requests, StoreStatus};
use allot_client::Status;
use allot_core::{State as View, Timestamp};
use axum::extract::State;
use axum::http::StatusCode;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::policy::{authorize, Action};
use crate::{health, http, AppState};

/// What the view holds at `now`: the counts `/status` and `/metrics` both report.
pub fn counts(view: &View, now: Timestamp) -> Counts {
    Counts {
        providers: view.providers().count() as u64,
        consumers: view.consumers().count() as u64,
        claims_pending: view.claims().filter(|c| c.live(now)).count() as u64,
    }
}

/// `GET /status`.
pub async fn show(ctx: Ctx, State(app): State<AppState>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::MetricsShow)?;
    let reasons = health::reasons(&app).await;
    let totals = app.config.metrics.totals();
    let kind = app.host.store_kind();
    let counts = counts(&app.host.read(), app.host.now());
    let status = Status {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        store: StoreStatus {
            engine: kind.engine.to_owned(),
            schema: kind.schema as u64,
            shared: kind.shared,
        },
        health: Health {
            healthy: reasons.is_empty(),
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
        },
        view_lag_seconds: app.host.staleness().as_secs_f64(),
        uptime_seconds: totals.uptime_seconds,
        counts,
        requests: Requests {
            total: totals.requests,
            per_second: totals.requests as f64 / totals.uptime_seconds.max(1e-9),
            p99_ms: totals.p99_seconds.map(|s| s * 1000.0),
        },
        claims: Claims {
            accepted: totals.claims_accepted,
            refused: totals.claims_refused,
        },
    };
    Ok(http::json(StatusCode::OK, &status))
}
