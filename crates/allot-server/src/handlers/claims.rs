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

use std::time::Duration;

use allot_core::names::canonical_uuid;
use allot_core::ops::allocations::Requested;
use allot_core::ops::claims::{ClaimFilter, NewClaim, Swept};
use allot_core::{ClaimState, Error, ProviderRef, ResourceClass, Uuid};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::allocations::Entries;
use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http::{self, Query};
use crate::params::{invalid_query, no_provider, require_utf8_query, uuid_like, ProviderPath};
use crate::policy::{authorize, Action};
use crate::{schema, schemas, wire, AppState};

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

// ----- reading requests -----

/// Tells a key given as `null` (Some(None)) from one left out (None, by
/// `#[serde(default)]`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// The body of `POST /claims`, read from the tree the schema has checked.
#[derive(Debug, Deserialize)]
struct CreateBody {
    consumer_uuid: String,
    #[serde(default)]
    consumer_type: Option<String>,
    project_id: String,
    user_id: String,
    /// By provider uuid, in request order (the rule reports the first problem).
    allocations: Entries<ClaimProvider>,
    /// Left out: the server's default; null: never.
    #[serde(default, deserialize_with = "present")]
    expires_in: Option<Option<i64>>,
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ClaimProvider {
    resources: Entries<u64>,
}

/// The body of `POST /claims/{uuid}/confirm`; none at all means `{}`.
#[derive(Debug, Default, Deserialize)]
struct ConfirmBody {
    #[serde(default)]
    replace: bool,
}

/// A claim named in a path: a uuid that is not spelled canonically names no claim,
/// as a provider's does not (404).
fn claim_in_path(raw: &str) -> Result<Uuid, ApiError> {
    canonical_uuid(raw)
        .ok_or_else(|| ApiError::not_found(format!("No claim with uuid {raw} found.")))
}

/// A query string checked against `schema` (each parameter's last value, as
/// Placement reads them), with Placement's prefix on every message.
fn query(raw: Option<&str>, schema: &Value) -> Result<Map<String, Value>, ApiError> {
    if let Some(raw) = raw {
        require_utf8_query(raw)?;
    }
    let mut values = Map::new();
    for (key, value) in Query::parse(raw).0 {
        values.insert(key, Value::String(value));
    }
    let values = Value::Object(values);
    schema::validate(&values, schema).map_err(invalid_query)?;
    match values {
        Value::Object(map) => Ok(map),
        _ => Ok(Map::new()),
    }
}

fn text<'a>(q: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    q.get(key).and_then(Value::as_str)
}

/// A uuid parameter the schema has checked (`format: uuid`).
fn uuid_param(q: &Map<String, Value>, key: &str) -> Result<Option<Uuid>, ApiError> {
    text(q, key)
        .map(|raw| uuid_like(raw).ok_or_else(|| invalid_query(format!("'{raw}' is not a 'uuid'"))))
        .transpose()
}

// ----- handlers -----

/// `POST /claims`: a new pending claim, all or nothing across its providers.
pub async fn create(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require_json_accept()?;
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ClaimsCreate)?;
    let input: CreateBody = http::json_body(&headers, &body, &schemas::claim_create())?;
    let consumer = uuid_like(&input.consumer_uuid).ok_or_else(|| {
        ApiError::bad_request(format!("Malformed consumer_uuid: {}", input.consumer_uuid))
    })?;
    let mut allocations = Vec::new();
    for (provider, amounts) in input.allocations.0 {
        let provider = ProviderRef::parse(&provider);
        for (class, used) in amounts.resources.0 {
            allocations.push(Requested {
                provider: provider.clone(),
                class: ResourceClass::requested(&class),
                used,
            });
        }
    }
    let expires_in = match input.expires_in {
        None => app.config.claim_expires_in,
        Some(given) => given,
    };
    let new = NewClaim {
        // The core draws nothing at random; a v4 uuid never met before is ours to draw.
        uuid: Uuid::new_v4(),
        consumer,
        project_id: input.project_id,
        user_id: input.user_id,
        consumer_type: input.consumer_type,
        tag: input.tag,
        allocations,
        expires_at: None,
    };
    let (claim, now) = app
        .write(move |view, now| {
            // The expiry counts from the instant the writer plans the claim, which
            // is also its `created_at`.
            let expires_at = match expires_in {
                None => None,
                Some(seconds) => Some(now.checked_add(seconds).ok_or_else(|| {
                    Error::invalid("expires_in puts the expiry beyond any representable time.")
                })?),
            };
            let (claim, changes) = view.plan_create_claim(NewClaim { expires_at, ..new }, now)?;
            Ok(((claim, now), changes))
        })
        .await?;
    let response = http::json(StatusCode::CREATED, &wire::claim_body(&claim, now));
    Ok(http::location(response, &format!("/claims/{}", claim.uuid)))
}

/// `GET /claims`: the claims the filters admit, oldest first, paged by `limit` and
/// `marker` (the last uuid of the page before).
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClaimsList)?;
    let q = query(raw.as_deref(), &schemas::claims_query())?;
    let filter = ClaimFilter {
        consumer: uuid_param(&q, "consumer_uuid")?,
        provider: uuid_param(&q, "resource_provider_uuid")?,
        project_id: text(&q, "project_id").map(str::to_owned),
        consumer_type: text(&q, "consumer_type").map(str::to_owned),
        tag: text(&q, "tag").map(str::to_owned),
        // The schema's enum admits only the states' names.
        state: text(&q, "state").and_then(ClaimState::parse),
    };
    let marker = uuid_param(&q, "marker")?;
    // The schema's pattern admits only positive integers; one past usize is no limit.
    let limit = text(&q, "limit").map(|l| l.parse::<usize>().unwrap_or(usize::MAX));
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let Some(claims) = view.list_claims(&filter, now, marker.as_ref(), limit) else {
            return Err(invalid_query(format!(
                "marker '{}' is not a claim",
                text(&q, "marker").unwrap_or_default()
            )));
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
    authorize(&ctx, app.config.policy, Action::ClaimsShow)?;
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
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require_json_accept()?;
    if !body.is_empty() {
        http::require_json_content(&headers, &body)?;
    }
    authorize(&ctx, app.config.policy, Action::ClaimsConfirm)?;
    let input: ConfirmBody = if body.is_empty() {
        ConfirmBody::default()
    } else {
        http::json_body(&headers, &body, &schemas::claim_confirm())?
    };
    let uuid = claim_in_path(&raw)?;
    let (claim, now) = app
        .write(move |view, now| {
            let (claim, changes) = view.plan_confirm_claim(&uuid, input.replace, now)?;
            Ok(((claim, now), changes))
        })
        .await?;
    Ok(http::json(StatusCode::OK, &wire::claim_body(&claim, now)))
}

/// `DELETE /claims/{uuid}`: releases a live claim; one that already ended is left as
/// it is, and answered alike (releasing twice is harmless).
pub async fn release(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.policy, Action::ClaimsRelease)?;
    let uuid = claim_in_path(&raw)?;
    app.write(move |view, now| view.plan_release_claim(&uuid, now))
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
    authorize(&ctx, app.config.policy, Action::ClaimsRelease)?;
    let q = query(raw.as_deref(), &schemas::claims_release_query())?;
    let Some(consumer) = uuid_param(&q, "consumer_uuid")? else {
        return Err(invalid_query("'consumer_uuid' is a required property"));
    };
    app.write(move |view, now| view.plan_release_consumer_claims(&consumer, now))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_providers/{uuid}/pending`: what live claims promise on a
/// provider, by class; with `?detail=consumers` also per consumer.
pub async fn provider_pending(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    path.raw()?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClaimsPending)?;
    let q = query(raw.as_deref(), &schemas::provider_pending_query())?;
    let detail = text(&q, "detail") == Some("consumers");
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let provider = path.provider(&view, no_provider)?;
        let (total, by_consumer) = view.provider_pending(provider.id(), now);
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

/// `GET /pending?consumer_uuid=&project_id=`: what the live claims of a consumer, of
/// a project, or of a consumer within a project promise, by class.
pub async fn pending(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClaimsPending)?;
    let q = query(raw.as_deref(), &schemas::pending_query())?;
    let consumer = uuid_param(&q, "consumer_uuid")?;
    let project = text(&q, "project_id");
    if consumer.is_none() && project.is_none() {
        return Err(invalid_query(
            "one of 'consumer_uuid' and 'project_id' is required",
        ));
    }
    let now = app.host.now();
    let totals = app
        .host
        .read()
        .pending_totals(consumer.as_ref(), project, now);
    let body = wire::Pending {
        consumers: None,
        pending: wire::claims::by_name(&totals),
    };
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}

// ----- the sweeper -----

/// One sweep: records as expired the pending claims past their expiry and forgets the
/// claims that ended more than `Config::claim_retention` seconds ago, in passes of at
/// most [`SWEEP_BATCH`] changes through the host, repeated while a pass was full.
/// Changes no total: expired claims stopped counting at their expiry.
pub async fn sweep_claims(app: &AppState) -> Result<Swept, ApiError> {
    let retention = app.config.claim_retention;
    let mut total = Swept::default();
    loop {
        let swept = app
            .write(move |view, now| view.plan_sweep_claims(now, retention, SWEEP_BATCH))
            .await?;
        total.expired += swept.expired;
        total.purged += swept.purged;
        if swept.expired + swept.purged < SWEEP_BATCH {
            return Ok(total);
        }
    }
}

/// Runs [`sweep_claims`] every `every` until the runtime stops. A failed pass is
/// logged and tried again at the next tick: nothing depends on the sweep but the
/// size of the store, since expiry itself is read from the clock.
pub fn spawn_sweeper(app: AppState, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use allot_client::{ClaimExpiry, ClaimResources};
    use std::collections::BTreeMap;

    /// The request stays the server's own type (it keeps the request's order and
    /// spellings, which decide the answer), so what the client sends is checked
    /// here instead: every body `allot-client` writes passes the schema and reads
    /// as the client meant it, `expires_in` left out, `null` or seconds included.
    #[test]
    fn the_clients_new_claim_is_a_valid_body() {
        let provider = Uuid::from_u128(7);
        for (expiry, expected) in [
            (ClaimExpiry::ServerDefault, None),
            (ClaimExpiry::Never, Some(None)),
            (ClaimExpiry::After(90), Some(Some(90))),
        ] {
            let new = allot_client::NewClaim {
                consumer_uuid: Uuid::from_u128(100),
                consumer_type: Some("INSTANCE".into()),
                project_id: "p".into(),
                user_id: "u".into(),
                allocations: BTreeMap::from([(
                    provider,
                    ClaimResources {
                        resources: BTreeMap::from([("VCPU".into(), 2)]),
                    },
                )]),
                expires_in: expiry,
                tag: Some("t".into()),
            };
            let body = serde_json::to_value(&new).unwrap();
            schema::validate(&body, &schemas::claim_create()).unwrap();
            let read: CreateBody = serde_json::from_value(body).unwrap();
            assert_eq!(read.expires_in, expected, "{expiry:?}");
            assert_eq!(uuid_like(&read.consumer_uuid), Some(new.consumer_uuid));
            assert_eq!(read.consumer_type.as_deref(), Some("INSTANCE"));
            assert_eq!(read.tag.as_deref(), Some("t"));
            let (key, amounts) = &read.allocations.0[0];
            assert_eq!(ProviderRef::parse(key).uuid(), Some(provider));
            assert_eq!(amounts.resources.0, [("VCPU".to_owned(), 2)]);
        }
    }
}
