//! Pending claims, an allot extension (issue 10) available at every microversion:
//! `POST/GET/DELETE /claims`, `GET/DELETE /claims/{uuid}`,
//! `POST /claims/{uuid}/confirm`, and the totals of live claims,
//! `GET /resource_providers/{uuid}/pending` and `GET /pending`.
//!
//! The rules (what fits, what a confirm writes, what a release or a sweep changes)
//! are the core's (`allot_core::ops::claims`); here are the HTTP concerns, in the
//! order every handler of this server follows: content negotiation, policy, then the
//! input (schema, then typed values), then the rule, through the host like every
//! write (`AppState::write`), so that a claim is planned against the view it applies
//! to and is on disk before its 201. Every answer shows a claim as it is at the
//! moment of the answer (`Claim::state_at`): a pending claim past its expiry reads
//! `expired` before the sweeper has recorded it, because it stopped counting then.
//!
//! [`sweep_claims`] is the sweeper's pass; `allot serve` runs it on an interval
//! ([`spawn_sweeper`]), and tests call it directly.

use allot_core::candidates::{CandidateQuery, Sort};
use allot_core::ops::claims::{NewClaim, Swept};
use allot_core::ops::pick::{Pick, Shape};
use allot_core::{Error, Uuid};
use allot_store::WriteKind;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::claims::{
    claim_in_path, read_confirm, read_provider_pending_query, read_release_query, ClaimRequest,
    ClaimsQuery, InstanceRequest, PendingQuery, PickRequest,
};
use crate::request::path::{no_provider, ProviderPath};
use crate::request::JsonBody;
use crate::{http, request, wire, AppState};

/// The most instances one pick weighed otherwise than by `sort=spread` alone places
/// (`pack`, `random`, `prefer`): each instance computes a bound for every anchor, or
/// orders every candidate, in the writer (milliseconds each at 10,000 hosts; see
/// docs/performance.md). A `spread` pick follows an order kept from pick to pick and
/// places up to the schema's bound, as an unweighed one does.
pub const MAX_WEIGHED_INSTANCES: usize = 100;

/// The most changes one sweep pass makes (one batch of the host): a sweep after a
/// long stop comes in passes of this size rather than one huge commit.
pub const SWEEP_BATCH: usize = 1000;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/claims", get(list).post(create).delete(release_consumer))
        .route("/claims/{uuid}", get(show).delete(release))
        .route("/claims/{uuid}/confirm", post(confirm))
        .route("/resource_providers/{uuid}/pending", get(provider_pending))
        .route("/pending", get(pending))
}

// ----- handlers -----

/// `POST /claims`: a new pending claim, all or nothing across its providers.
pub async fn create(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ClaimsCreate)?;
    // The core draws nothing at random; a v4 uuid never met before is ours to draw.
    let ClaimRequest {
        claim: new,
        expiry,
        pick,
    } = ClaimRequest::read(&body, Uuid::new_v4())?;
    // The expiry counts from the instant the writer plans the claim, which is also
    // its `created_at`.
    let default = Some(app.config.settings.claim_expires_in);
    let expires_at = move |now| expiry.at(default, now);
    if let Some(pick) = pick {
        return create_picked(&app, new, expires_at, pick).await;
    }
    let (claim, now) = app
        .write(WriteKind::Claim, move |view, now| {
            let expires_at = expires_at(now)?;
            let (claim, changes) = view.plan_create_claim(NewClaim { expires_at, ..new }, now)?;
            Ok(((claim, now), changes))
        })
        .await?;
    Ok(created(&claim, now))
}

/// A 201 with one claim, and its `Location`.
fn created(claim: &allot_core::Claim, now: allot_core::Timestamp) -> axum::response::Response {
    let response = http::json(StatusCode::CREATED, &wire::claim_body(claim, now));
    http::location(response, &format!("/claims/{}", claim.uuid))
}

/// `POST /claims` with `request`: the server chooses where (issue 24). One consumer
/// gets its claim as a plain `POST /claims` does; `consumers` get `{"claims": [...],
/// "unplaced": [...]}`.
async fn create_picked(
    app: &AppState,
    pattern: NewClaim,
    expires_at: impl Fn(allot_core::Timestamp) -> Result<Option<allot_core::Timestamp>, Error>
        + Send
        + 'static,
    pick: PickRequest,
) -> ApiResult {
    let (query, shapes) = pick_queries(&pick)?;
    let single = pick.instances.is_none();
    let instances = pick.instances.unwrap_or_else(|| {
        vec![InstanceRequest {
            consumer: pattern.consumer,
            tag: pattern.tag.clone(),
            server_group: pattern.server_group,
        }]
    });
    let claims: Vec<NewClaim> = instances
        .into_iter()
        .enumerate()
        .map(|(i, instance)| NewClaim {
            // The first instance takes the uuid drawn for the request.
            uuid: if i == 0 { pattern.uuid } else { Uuid::new_v4() },
            consumer: instance.consumer,
            tag: instance.tag,
            server_group: instance.server_group,
            ..pattern.clone()
        })
        .collect();
    let options = app.config.settings.search_options();
    let (placed, now) = app
        .write(WriteKind::Pick, move |view, now| {
            let expires_at = expires_at(now)?;
            let claims = claims
                .into_iter()
                .map(|c| NewClaim { expires_at, ..c })
                .collect();
            let pick = Pick {
                query,
                options,
                claims,
                affinity: pick.affinity,
                partial: pick.partial,
                shapes,
                together: false,
            };
            let (placed, changes) = view.plan_pick(pick, now)?;
            Ok(((placed, now), changes))
        })
        .await?;
    let soft_broken = wire::soft_broken(&placed.soft_broken);
    if single {
        let mut body = wire::claim_body(&placed.claims[0], now);
        if !soft_broken.is_empty() {
            let list = serde_json::to_value(&soft_broken).expect("uuids always serialise");
            body.extra.insert("soft_rules_broken".into(), list);
        }
        let response = http::json(StatusCode::CREATED, &body);
        return Ok(http::location(response, &format!("/claims/{}", body.uuid)));
    }
    let body = wire::Placed {
        claims: placed
            .claims
            .iter()
            .map(|c| wire::claim_body(c, now))
            .collect(),
        unplaced: placed.unplaced,
        soft_rules_broken: soft_broken,
    };
    Ok(http::json(StatusCode::CREATED, &body))
}

/// A pick's queries, the body's and each instance's own, parsed as at 1.39; a pick
/// weighed otherwise than by spread alone is bounded (see [`MAX_WEIGHED_INSTANCES`]).
fn pick_queries(pick: &PickRequest) -> Result<(CandidateQuery, Vec<Shape>), ApiError> {
    let seed = Uuid::new_v4().as_u64_pair().0;
    let parse = |query: &str| {
        request::candidates::parse(crate::microversion::MAX, Some(query), 0, seed)
            .map_err(|e| ApiError::bad_request(format!("Invalid request: {}", e.message)))
    };
    let query = parse(&pick.query)?;
    let shapes = pick
        .shapes
        .iter()
        .map(|shape| {
            let query = shape.as_deref().map(parse).transpose()?;
            Ok::<_, ApiError>(Shape {
                query,
                reach: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A pick weighed otherwise than by spread alone weighs every anchor or candidate
    // again for each instance (the loads change as the instances land), all in the
    // writer: bounded, so that one request cannot hold every other write for long.
    let weighed_anew = |q: &CandidateQuery| {
        let kept_order = q.weigh.sort == Some(Sort::Spread) && q.weigh.prefer.is_empty();
        q.weigh.is_set() && !kept_order
    };
    if std::iter::once(&query)
        .chain(shapes.iter().filter_map(|s| s.query.as_ref()))
        .any(weighed_anew)
        && pick
            .instances
            .as_ref()
            .is_some_and(|i| i.len() > MAX_WEIGHED_INSTANCES)
    {
        return Err(ApiError::bad_request(format!(
            "A pick with sort=pack, sort=random or prefer places at most \
             {MAX_WEIGHED_INSTANCES} instances in one request; send several, use \
             sort=spread, or leave the order to the search."
        )));
    }
    Ok((query, shapes))
}

/// `GET /claims`: the claims the filters admit, oldest first, paged by `limit` and
/// `marker` (the last uuid of the page before).
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClaimsList)?;
    let ClaimsQuery {
        filter,
        marker,
        limit,
    } = ClaimsQuery::read(raw.as_deref())?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let Some(claims) =
            view.list_claims(&filter, now, marker.as_ref().map(|(uuid, _)| uuid), limit)
        else {
            return Err(ClaimsQuery::unknown_marker(marker));
        };
        let body = wire::ClaimList {
            claims: claims
                .into_iter()
                .map(|c| wire::claim_body(c, now))
                .collect(),
        };
        http::json(StatusCode::OK, &body)
    };
    Ok(ctx.cached(response, now))
}

/// `GET /claims/{uuid}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClaimsShow)?;
    let uuid = claim_in_path(&raw)?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let claim = view
            .claim(&uuid)
            .ok_or_else(|| ApiError::not_found(format!("No claim with uuid {uuid} found.")))?;
        http::json(StatusCode::OK, &wire::claim_body(claim, now))
    };
    Ok(ctx.cached(response, now))
}

/// `POST /claims/{uuid}/confirm`: the claim becomes allocations of its consumer,
/// added to what it holds, or replacing it with `{"replace": true}`. A body is
/// optional.
pub async fn confirm(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    body: JsonBody,
) -> ApiResult {
    ctx.require_json_accept()?;
    if !body.is_empty() {
        body.require_json()?;
    }
    authorize(&ctx, app.config.settings.policy, Action::ClaimsConfirm)?;
    let replace = read_confirm(&body)?;
    let uuid = claim_in_path(&raw)?;
    let (claim, now) = app
        .write(WriteKind::Claim, move |view, now| {
            let (claim, changes) = view.plan_confirm_claim(&uuid, replace, now)?;
            Ok(((claim, now), changes))
        })
        .await?;
    Ok(http::json(StatusCode::OK, &wire::claim_body(&claim, now)))
}

/// `DELETE /claims/{uuid}`: releases a live claim; one that already ended is left as
/// it is, and answered alike (releasing twice is harmless).
pub async fn release(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::ClaimsRelease)?;
    let uuid = claim_in_path(&raw)?;
    app.write(WriteKind::Claim, move |view, now| {
        view.plan_release_claim(&uuid, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE /claims?consumer_uuid=`: releases every live claim of a consumer (a
/// workload deleted before it started); none is not an error.
pub async fn release_consumer(
    ctx: Ctx,
    State(app): State<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::ClaimsRelease)?;
    let consumer = read_release_query(raw.as_deref())?;
    app.write(WriteKind::Claim, move |view, now| {
        view.plan_release_consumer_claims(&consumer, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_providers/{uuid}/pending`: what live claims promise on a
/// provider, by class; with `?detail=consumers` also per consumer; with `?tree=true`
/// on the providers below it too.
pub async fn provider_pending(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    path.raw()?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClaimsPending)?;
    let (detail, tree) = read_provider_pending_query(raw.as_deref())?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let provider = path.provider(&view, no_provider)?;
        let (total, by_consumer) = match tree {
            true => view.tree_pending(provider.id(), now),
            false => view.provider_pending(provider.id(), now),
        };
        let body = wire::Pending {
            consumers: detail.then(|| {
                by_consumer
                    .iter()
                    .map(|(consumer, sums)| (*consumer, wire::claims::by_name(sums)))
                    .collect()
            }),
            pending: wire::claims::by_name(&total),
        };
        http::json(StatusCode::OK, &body)
    };
    Ok(ctx.cached(response, now))
}

/// `GET /pending?consumer_uuid=&project_id=&resource_class=`: what the live claims of
/// a consumer, of a project, or of a consumer within a project promise, by class (or
/// of one class); with `group_by=root`, the same for every root, its tree summed.
pub async fn pending(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClaimsPending)?;
    let PendingQuery {
        consumer,
        project_id,
        resource_class,
        by_root,
    } = PendingQuery::read(raw.as_deref())?;
    let now = app.host.now();
    let view = app.host.read();
    let (consumer, project) = (consumer.as_ref(), project_id.as_deref());
    let of_class = |mut totals: allot_core::ops::claims::ByClass| {
        if let Some(class) = &resource_class {
            totals.retain(|k, _| k == class);
        }
        wire::claims::by_name(&totals)
    };
    let response = if by_root {
        let body = wire::PendingByRoot {
            roots: view
                .pending_by_root(consumer, project, now)
                .into_iter()
                .map(|(root, totals)| (root, of_class(totals)))
                .filter(|(_, totals)| !totals.is_empty())
                .collect(),
        };
        http::json(StatusCode::OK, &body)
    } else {
        let body = wire::Pending {
            consumers: None,
            pending: of_class(view.pending_totals(consumer, project, now)),
        };
        http::json(StatusCode::OK, &body)
    };
    Ok(ctx.cached(response, now))
}

// ----- the sweeper -----

/// One sweep: records as expired the pending claims past their expiry and forgets the
/// claims that ended more than `Settings::claim_retention` seconds ago, in passes of at
/// most [`SWEEP_BATCH`] changes through the host, repeated while a pass was full.
/// Changes no total: expired claims stopped counting at their expiry.
pub async fn sweep_claims(app: &AppState) -> Result<Swept, ApiError> {
    let retention = app.config.settings.claim_retention;
    let mut total = Swept::default();
    loop {
        let swept = app
            .write(WriteKind::Sweep, move |view, now| {
                view.plan_sweep_claims(now, retention, SWEEP_BATCH)
            })
            .await?;
        total.expired += swept.expired;
        total.purged += swept.purged;
        if swept.expired + swept.purged < SWEEP_BATCH {
            return Ok(total);
        }
    }
}

/// Runs [`sweep_claims`] every [`crate::Settings::claim_sweep_interval`] until the
/// runtime stops. A failed pass is logged and tried again at the next tick: nothing
/// depends on the sweep but the size of the store, since expiry itself is read from
/// the clock. A node whose store is fenced (MariaDB) sweeps only while it holds the
/// writer's lease ([`allot_store::Fence::open`]): another node's sweep would be
/// refused by the fence at every tick (a store failure logged each time), and the
/// writer sweeps for the cluster.
pub fn spawn_sweeper(app: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(app.config.settings.claim_sweep_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if app.host.fence().is_some_and(|f| !f.open()) {
                continue;
            }
            match sweep_claims(&app).await {
                Ok(swept) if swept.expired + swept.purged > 0 => {
                    tracing::info!(
                        expired = swept.expired,
                        purged = swept.purged,
                        "claims swept"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.message, "claim sweep failed"),
            }
        }
    })
}
