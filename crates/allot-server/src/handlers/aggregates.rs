//! `/resource_providers/{uuid}/aggregates` (1.1): which aggregates a provider is a
//! member of. Until 1.19 the PUT body is a bare list and the generation is neither
//! checked nor changed; from 1.19 the body carries the provider's generation, and
//! both answers report it.

use allot_store::WriteKind;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::policy::{authorize, Action};
use crate::request::path::{no_provider, ProviderBody, ProviderPath};
use crate::request::providers::AggregatesUpdate;
use crate::{http, wire, AppState};

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
    authorize(&ctx, app.config.settings.policy, Action::AggregatesList)?;
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
pub async fn update(ctx: Ctx, State(app): State<AppState>, sent: ProviderBody) -> ApiResult {
    let ProviderBody { path, body } = sent;
    // Placement checks the content type before the microversion.
    body.require_json()?;
    ctx.require(1)?;
    authorize(&ctx, app.config.settings.policy, Action::AggregatesUpdate)?;
    let uuid = path.uuid(no_provider)?;
    // The provider is looked up before the body is read.
    app.host.read().provider_required(&uuid)?;
    let AggregatesUpdate {
        given,
        aggregates,
        generation,
    } = AggregatesUpdate::read(&body, ctx.version.0)?;
    let new_generation = app
        .write(WriteKind::Aggregate, move |view, now| {
            view.set_aggregates(&uuid, &aggregates, generation, now)
        })
        .await?;
    // Placement answers with the list as it was sent.
    Ok(answer(&ctx, &app, given, new_generation))
}
