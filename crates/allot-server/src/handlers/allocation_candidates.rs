//! `GET /allocation_candidates` (1.10–1.39): where a request for resources fits.
//!
//! Parse, search, write: the query string becomes the core's question in
//! [`request::candidates`] (Placement's checks and messages at each microversion), the
//! in-memory search of `allot_core::candidates` runs on a blocking thread under the
//! view's read lock, and [`wire::candidates`] writes the answer in the form of the
//! microversion straight from the search's output.

use allot_core::candidates::SearchOptions;
use allot_core::Uuid;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http;
use crate::policy::{authorize, Action};
use crate::request;
use crate::{wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/allocation_candidates", get(list))
}

/// `GET /allocation_candidates`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(10)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::AllocationCandidatesList)?;
    // A seed for `sort=random`, drawn here: the parse and the core draw nothing.
    let seed = Uuid::new_v4().as_u64_pair().0;
    let query = request::candidates::parse(ctx.version, raw.as_deref(), app.host.now(), seed)?;
    let options = SearchOptions {
        random_seed: app
            .config
            .randomize_allocation_candidates
            .then(|| Uuid::new_v4().as_u64_pair().0),
        ..app.config.search_options()
    };
    let form = wire::candidates::Form::at(ctx.version);
    let host = app.host.clone();
    // The search can take milliseconds of CPU: keep it off the async workers. The read
    // guard lives only inside the blocking task, so the answer, which borrows from the
    // view, is serialized to bytes there too.
    let body = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ApiError> {
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
    .await
    .map_err(|join| {
        tracing::error!(error = %join, "allocation candidates task failed");
        ApiError::internal()
    })??;
    Ok(ctx.cached(http::json_bytes(StatusCode::OK, body), app.host.now()))
}
