//! `GET /headroom` (allot's extension, issue 24, every microversion): how many more
//! instances of one shape fit now, in total and per root, aggregate or trait group.
//!
//! The count is the core's (`State::headroom`: exactly the number of successive
//! pick-and-claims of the shape that would succeed); here the query is read, the count
//! runs on a blocking thread on one version of the view, and each anchor's instances
//! are added to the groups of its root. `shape=NAME` (issue 47) stands for a named
//! shape's request, the other parameters added to it.

use std::collections::BTreeMap;

use allot_core::server_groups::Scope;
use allot_core::State;
use axum::extract::{RawQuery, State as AppStateOf};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::headroom::{parse, take_param, HeadroomQuery};
use crate::request::shapes::with_more;
use crate::{http, wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/headroom", get(show))
}

/// `GET /headroom`.
pub async fn show(
    ctx: Ctx,
    AppStateOf(app): AppStateOf<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::Headroom)?;
    let now = app.host.now();
    let (shape, rest) = take_param(raw.as_deref().unwrap_or(""), "shape")?;
    let options = app.config.settings.search_options();
    let host = app.host.clone();
    let body = super::off_workers("headroom", move || {
        let view = host.read();
        // A named shape's request, the question's own parameters added to it.
        let raw = match &shape {
            Some(name) => with_more(&named(&view, name)?.request, &rest),
            None => rest,
        };
        answer(&view, &parse(Some(&raw), now)?, &options)
    })
    .await?;
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}

/// The named shape `name` (a 404 naming it when there is none).
pub fn named<'v>(view: &'v State, name: &str) -> Result<&'v allot_core::shapes::Shape, ApiError> {
    view.shape(name)
        .ok_or_else(|| ApiError::not_found(format!("No shape named {name:?}.")))
}

/// The answer to a headroom question on one version of the view: what `GET
/// /headroom` sends and the web UI's headroom page shows (`crate::ui`).
pub fn answer(
    view: &State,
    question: &HeadroomQuery,
    options: &allot_core::candidates::SearchOptions,
) -> Result<wire::Headroom, ApiError> {
    let counted = view.headroom(&question.query, options)?;
    if counted.truncated {
        tracing::warn!(
            headroom = counted.total,
            "headroom cut short by the search step budget: a lower bound"
        );
    }
    let groups = question
        .group_by
        .as_ref()
        .map(|by| groups(view, by, &counted.by_anchor));
    Ok(wire::Headroom {
        headroom: counted.total,
        groups,
    })
}

/// Each anchor's instances added to its root's groups: the root itself, each of its
/// aggregates, or each of its traits with the prefix (a root in no group of the kind
/// counts in none), as server groups' scopes key roots.
fn groups(
    view: &State,
    by: &Scope,
    by_anchor: &[(allot_core::ProviderId, u64)],
) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for &(anchor, n) in by_anchor {
        let Some(root) = view.provider(anchor) else {
            continue;
        };
        for domain in by.domains_of(root) {
            *out.entry(domain.to_string()).or_default() += n;
        }
    }
    out
}
