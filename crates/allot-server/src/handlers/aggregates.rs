//! `/resource_providers/{uuid}/aggregates` (1.1): which aggregates a provider is a
//! member of. Until 1.19 the PUT body is a bare list and the generation is neither
//! checked nor changed; from 1.19 the body carries the provider's generation, and
//! both answers report it.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::Value;
use uuid::Uuid;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::params::{no_provider, ProviderPath};
use crate::policy::{authorize, Action};
use crate::{http, schema, schemas, wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/resource_providers/{uuid}/aggregates",
        get(show).put(update),
    )
}

fn answer(ctx: &Ctx, app: &AppState, aggregates: Vec<String>, generation: u64) -> Response {
    let body = wire::ProviderAggregates {
        aggregates: &aggregates,
        resource_provider_generation: ctx.version.at_least(19).then_some(generation),
    };
    let response = http::json(StatusCode::OK, &body);
    // Memberships have no time of their own: like Placement, say "now".
    ctx.cached(response, app.host.now())
}

/// `GET /resource_providers/{uuid}/aggregates`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    // Placement negotiates the response type before it looks at the microversion.
    ctx.require_json_accept()?;
    ctx.require(1)?;
    authorize(&ctx, app.config.policy, Action::AggregatesList)?;
    let uuid = path.uuid(no_provider)?;
    let (aggregates, generation) = {
        let view = app.host.read();
        let rp = view.provider_required(&uuid)?;
        let list: Vec<String> = rp.aggregates.iter().map(|a| a.to_string()).collect();
        (list, rp.row.generation)
    };
    Ok(answer(&ctx, &app, aggregates, generation))
}

/// `PUT /resource_providers/{uuid}/aggregates`.
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    // Placement checks the content type before the microversion.
    http::require_json_content(&headers, &body)?;
    ctx.require(1)?;
    authorize(&ctx, app.config.policy, Action::AggregatesUpdate)?;
    let uuid = path.uuid(no_provider)?;
    // The provider is looked up before the body is read.
    app.host.read().provider_required(&uuid)?;
    let value = http::json_value(&headers, &body)?;
    let with_generation = ctx.version.at_least(19);
    let shape = if with_generation {
        schemas::provider_aggregates_v1_19()
    } else {
        schemas::provider_aggregates_v1_1()
    };
    schema::validate(&value, &shape)
        .map_err(|e| ApiError::bad_request(format!("JSON does not validate: {e}")))?;
    let (list, generation) = if with_generation {
        // A negative generation cannot match any provider's: let it conflict.
        let generation = value["resource_provider_generation"]
            .as_u64()
            .unwrap_or(u64::MAX);
        (&value["aggregates"], Some(generation))
    } else {
        (&value, None)
    };
    let given: Vec<String> = list
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let aggregates = given
        .iter()
        .map(|a| Uuid::parse_str(a))
        .collect::<Result<Vec<Uuid>, _>>()
        .map_err(|_| ApiError::bad_request("JSON does not validate: not a 'uuid'"))?;
    let new_generation = app
        .write(move |view, now| view.set_aggregates(&uuid, &aggregates, generation, now))
        .await?;
    // Placement answers with the list as it was sent.
    Ok(answer(&ctx, &app, given, new_generation))
}
