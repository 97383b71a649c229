//! `GET /consumers`, `POST /audit` and `POST /audit/delete` (allot's extension, issue
//! 47): which consumers hold what across the cloud, and which of them no live
//! workload accounts for (`allot_core::holders`).
//!
//! The audit is a read posted for its long input: each request carries the live
//! workloads of one range of uuids, so a million of them travel in a few requests
//! within the body limit, none depending on another, and the comparison runs here on
//! one version of the view. The removal is one write through the host, planned
//! against the view it commits on, so a consumer changed since the report is named
//! and left.

use allot_core::holders::{Holder, HolderFilter, LeftBecause};
use allot_store::WriteKind;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::auth::format_utc;
use crate::context::Ctx;
use crate::error::ApiResult;
use crate::http;
use crate::policy::{authorize, Action};
use crate::request::consumers::{unknown, AuditRequest, ConsumersQuery, RemovalRequest};
use crate::request::JsonBody;
use crate::AppState;
use allot_client::consumers as wire;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/consumers", get(list))
        .route("/audit", post(audit))
        .route("/audit/delete", post(remove))
}

/// `GET /consumers`: the consumers that hold allocations or live pending claims, in
/// uuid order, filtered, paged by `limit` and `marker`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ConsumersList)?;
    let query = ConsumersQuery::read(raw.as_deref())?;
    let now = app.host.now();
    let view = app.host.read();
    let provider = |uuid: Option<allot_core::Uuid>, what: &str| {
        uuid.map(|u| {
            view.provider_by_uuid(&u)
                .map(|p| p.id())
                .ok_or_else(|| unknown(what, &u))
        })
        .transpose()
    };
    let in_tree = provider(query.in_tree, "in_tree")?
        .and_then(|id| view.provider(id))
        .map(|p| p.row.root);
    let filter = HolderFilter {
        project_id: query.project_id,
        user_id: query.user_id,
        consumer_type: query.consumer_type,
        provider: provider(query.provider, "resource_provider")?,
        tree: in_tree,
        server_group: query.server_group,
        holding: query.holding,
    };
    let limit = query.limit.unwrap_or(usize::MAX);
    let holders = view.list_holders(&filter, now, query.marker.as_ref(), limit);
    let body = wire::HolderList {
        consumers: holders.iter().map(entry).collect(),
    };
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}

/// `POST /audit`: the consumers of the body's range that hold resources and are not
/// among its live workloads. Changes nothing.
pub async fn audit(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::Audit)?;
    let AuditRequest { range, existing } = AuditRequest::read(&body)?;
    let now = app.host.now();
    let host = app.host.clone();
    // A pass over every consumer: off the async workers.
    let body = super::off_workers("audit", move || {
        let (leaked, in_range) = host.read().leaked_holders(&range, &existing, now);
        Ok(wire::AuditReport {
            consumers_in_range: in_range,
            leaked: leaked.iter().map(entry).collect(),
        })
    })
    .await?;
    Ok(http::json(StatusCode::OK, &body))
}

/// `POST /audit/delete`: removes the allocations of each consumer named that is
/// still as the audit reported it, in one write, and names the others with why.
pub async fn remove(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::AuditDelete)?;
    let RemovalRequest { asked, rules } = RemovalRequest::read(&body)?;
    let removal = app
        .write(WriteKind::Allocation, move |view, now| {
            view.plan_remove_leaked(&asked, &rules, now)
        })
        .await?;
    let body = wire::Removed {
        left: removal
            .left
            .iter()
            .map(|(uuid, why)| wire::Left {
                consumer_uuid: *uuid,
                reason: reason(*why).to_owned(),
            })
            .collect(),
        removed: removal.removed,
    };
    Ok(http::json(StatusCode::OK, &body))
}

/// A holder as the wire shows it.
fn entry(h: &Holder) -> wire::Holder {
    let by_name = crate::wire::claims::by_name;
    wire::Holder {
        allocations: by_name(&h.allocations),
        consumer_generation: h.generation,
        consumer_type: h.consumer_type.as_ref().map(|t| t.to_string()),
        consumer_uuid: h.uuid,
        created_at: h.created_at.map(format_utc),
        pending: by_name(&h.pending),
        project_id: h.project_id.to_string(),
        resource_providers: h.providers.clone(),
        updated_at: h.updated_at.map(format_utc),
        user_id: h.user_id.to_string(),
    }
}

/// Why a consumer was left, as the answer says it.
fn reason(why: LeftBecause) -> &'static str {
    match why {
        LeftBecause::Gone => "gone",
        LeftBecause::Changed => "changed",
        LeftBecause::NewerThanList => "newer_than_list",
        LeftBecause::LiveClaims => "live_claims",
        LeftBecause::Type => "consumer_type",
    }
}
