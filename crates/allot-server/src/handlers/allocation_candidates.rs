//! `GET /allocation_candidates` (1.10–1.39): where a request for resources fits.
//!
//! Parse, search, write: the query string becomes the core's question in
//! [`request::candidates`] (Placement's checks and messages at each microversion), the
//! in-memory search of `allot_core::candidates` runs on a blocking thread over the
//! version of the view it took, and [`wire::candidates`] writes the answer in the form
//! of the microversion straight from the search's output ([`wire::explain`] for the
//! explanation).

use allot_core::candidates::SearchOptions;
use allot_core::Uuid;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::http;
use crate::policy::{authorize, Action};
use crate::request;
use crate::{wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/allocation_candidates", get(list))
        .route("/allocation_candidates/explain", get(explain))
}

/// `GET /allocation_candidates`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(10)?;
    ctx.require_json_accept()?;
    authorize(
        &ctx,
        app.config.settings.policy,
        Action::AllocationCandidatesList,
    )?;
    // A seed for `sort=random`, drawn here: the parse and the core draw nothing.
    let seed = Uuid::new_v4().as_u64_pair().0;
    let query = request::candidates::parse(ctx.version, raw.as_deref(), app.host.now(), seed)?;
    let options = SearchOptions {
        random_seed: app
            .config
            .settings
            .randomize_allocation_candidates
            .then(|| Uuid::new_v4().as_u64_pair().0),
        ..app.config.settings.search_options()
    };
    let form = wire::candidates::Form::at(ctx.version);
    let host = app.host.clone();
    // The search can take milliseconds of CPU: keep it off the async workers. The read
    // guard lives only inside the blocking task, so the answer, which borrows from the
    // view, is serialized to bytes there too.
    let body = super::off_workers("allocation candidates", move || {
        let view = host.read();
        let found = view.allocation_candidates(&query, &options)?;
        if found.truncated {
            tracing::warn!(
                returned = found.requests.len(),
                "allocation candidates cut short by max_allocation_candidates or the search \
                 step budget"
            );
        }
        Ok(wire::candidates::body(&view, form, &query, &found))
    })
    .await?;
    Ok(ctx.cached(http::json_bytes(StatusCode::OK, body), app.host.now()))
}

/// `GET /allocation_candidates/explain` (allot's extension, issue 24, every
/// microversion): the same query, read as at 1.39, and for each group how many
/// providers survive each stage, the nearest misses, and the stage that emptied the
/// answer (`allot_core::candidates::explain`).
pub async fn explain(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::Explain)?;
    let now = app.host.now();
    let query = request::candidates::parse(crate::microversion::MAX, raw.as_deref(), now, 0)?;
    let options = app.config.settings.search_options();
    let host = app.host.clone();
    let body = super::off_workers("explain", move || {
        let view = host.read();
        let explained = view.explain(&query, &options)?;
        Ok(wire::explain::body(&view, explained))
    })
    .await?;
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}
