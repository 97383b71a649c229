//! `/resource_providers/{uuid}/traits` (1.6): a provider's traits, replaced as a whole
//! under a generation check, or all removed.

use allot_core::{State as View, Timestamp, TraitName};
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
use crate::request::providers::TraitsUpdate;
use crate::{http, wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/resource_providers/{uuid}/traits",
        get(show).put(update).delete(clear),
    )
}

/// When a set of traits last changed, as Placement reports it: the newest trait's
/// time. Standard traits have no time of their own, and neither has an empty set:
/// those say "now".
fn last_modified(view: &View, traits: &[TraitName], now: Timestamp) -> Timestamp {
    let mut newest = None;
    for t in traits {
        match view.custom_trait(t) {
            Some(record) => newest = newest.max(Some(record.created_at)),
            None => return now,
        }
    }
    newest.unwrap_or(now)
}

fn answer(ctx: &Ctx, app: &AppState, traits: Vec<TraitName>, generation: u64) -> Response {
    let body = wire::ProviderTraits {
        resource_provider_generation: generation,
        traits: traits.iter().map(TraitName::as_str).collect(),
    };
    let response = http::json(StatusCode::OK, &body);
    if !ctx.wants_cache_headers() {
        return response;
    }
    let when = last_modified(&app.host.read(), &traits, app.host.now());
    http::cache_headers(response, when)
}

/// `GET /resource_providers/{uuid}/traits`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    ctx.require(6)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ProviderTraitsList)?;
    // This endpoint words its 404 twice over, as Placement does.
    let twice = |uuid: &str| format!("{}: {}", no_provider(uuid), no_provider(uuid));
    let (traits, generation) = {
        let view = app.host.read();
        let rp = path.provider(&view, twice)?;
        (
            rp.traits.iter().cloned().collect::<Vec<_>>(),
            rp.row.generation,
        )
    };
    Ok(answer(&ctx, &app, traits, generation))
}

/// `PUT /resource_providers/{uuid}/traits`.
pub async fn update(ctx: Ctx, State(app): State<AppState>, sent: ProviderBody) -> ApiResult {
    let ProviderBody { path, body } = sent;
    ctx.require(6)?;
    body.require_json()?;
    authorize(
        &ctx,
        app.config.settings.policy,
        Action::ProviderTraitsUpdate,
    )?;
    let TraitsUpdate { traits, generation } = TraitsUpdate::read(&body)?;
    let uuid = path.uuid(no_provider)?;
    let result = app
        .write(WriteKind::Trait, move |view, now| {
            view.set_provider_traits(&uuid, &traits, generation, now)
        })
        .await?;
    Ok(answer(&ctx, &app, result.traits, result.generation))
}

/// `DELETE /resource_providers/{uuid}/traits`.
pub async fn clear(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    ctx.require(6)?;
    authorize(
        &ctx,
        app.config.settings.policy,
        Action::ProviderTraitsDelete,
    )?;
    let uuid = path.uuid(no_provider)?;
    app.write(WriteKind::Trait, move |view, now| {
        view.clear_provider_traits(&uuid, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}
