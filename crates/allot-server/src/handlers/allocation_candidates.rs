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
use axum::http::{HeaderValue, StatusCode};
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::http;
use crate::policy::{authorize, Action};
use crate::request::{self, JsonBody};
use crate::{wire, AppState};

/// On an answer cut short by `--max-allocation-candidates` or the search's step
/// budget: `EXPLORED/ROOTS`, the roots the search visited of those it could have.
pub const ROOTS_EXPLORED: &str = "x-allot-roots-explored";

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/allocation_candidates", get(list))
        .route("/allocation_candidates/explain", get(explain))
        .route("/allocation_candidates/query", post(query))
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
    let (body, explored) = super::off_workers("allocation candidates", move || {
        let view = host.read();
        let found = view.allocation_candidates(&query, &options)?;
        if let Some(explored) = found.explored {
            tracing::warn!(
                returned = found.requests.len(),
                roots_explored = explored.roots_explored,
                roots = explored.roots,
                "allocation candidates cut short by max_allocation_candidates or the search \
                 step budget"
            );
        }
        Ok((
            wire::candidates::body(&view, form, &query, &found),
            found.explored,
        ))
    })
    .await?;
    let mut response = http::json_bytes(StatusCode::OK, body);
    if let Some(explored) = explored {
        // A header, not a field: the body stays Placement's, byte for byte.
        app.config.metrics.search_cut_short();
        let value = format!("{}/{}", explored.roots_explored, explored.roots);
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(ROOTS_EXPLORED, value);
        }
    }
    Ok(ctx.cached(response, app.host.now()))
}

/// `POST /allocation_candidates/query` (allot's extension): the parameters of `GET
/// /allocation_candidates` in a JSON body (`request::query_form`), answered as the
/// `GET` answers them.
pub async fn query(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require(10)?;
    body.require_json()?;
    let raw = request::query_form::query_string(&body)?;
    list(ctx, State(app), RawQuery(Some(raw))).await
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
